"""The controller's work queue, with client-go ``util/workqueue`` semantics: a FIFO that
coalesces duplicates, never hands one item to two workers, can add items later, and backs off
retries through a :class:`~memop.runtime.workqueue.ratelimiter.RateLimiter`.

One class does what client-go layers as Type → delayingType → rateLimitingType, because on
one event loop there is no lock to share and no goroutine to run the delay loop.

The life of an item:

* ``add`` marks it dirty. If no worker holds it, it joins the ready FIFO (once, however often
  it is added); if a worker holds it, it waits until that worker calls ``done`` and is then
  queued once. So every add is followed by a processing that starts after it, and an item is
  never processed by two workers at once.
* ``get`` takes the head of the FIFO: the item stops being dirty and becomes processing.
* ``done`` ends processing and queues the item again if it was added meanwhile.
* ``add_after`` parks the item in a heap of waiting entries until its ready time, then
  ``add``\\ s it. An item has at most one waiting entry; adding it again with an earlier ready
  time moves that entry earlier, a later one is ignored. A waiting entry is independent of
  the item being dirty or processing (as in client-go): it still fires and adds.
  The heap is driven by a single ``clock.call_at`` timer for its head — no background task.
* ``add_rate_limited`` is ``add_after(item, rate_limiter.when(item))``; ``forget`` clears the
  item's backoff.
* Two priorities (after controller-runtime's priority queue): ``add(item, low_priority=True)``
  queues the item behind every normal item, FIFO among the low ones. A controller adds with
  low priority what only refreshes status (an owned object's status changed, a resync, a listed
  object whose status is for its generation), so under load the changes users made are
  reconciled first. Adding an item that waits at low
  priority with normal priority moves it to the normal FIFO; the reverse never happens. The
  priority an item waits at is kept while it is processing, for its requeue at ``done``.
* Lanes (``lane_of``, used when replicas shard the work): the normal FIFO is one FIFO per
  lane, taken round-robin, so a lane with few items is not starved behind another's backlog.
  A sharded controller's lane is the request's shard: the objects of a shard just taken over
  from a dead replica start at once, interleaved with this replica's own backlog, instead of
  after it. Without ``lane_of`` there is one FIFO, in add order.

Shutdown (client-go v0.30+ ``Get``/``ShutDown`` semantics): adds are silently ignored from
then on and waiting entries are dropped, but items already in the ready FIFO are still handed
out by ``get`` until it is empty; only then does ``get`` raise :class:`ShutDown`. ``done``
still works, and still re-queues an item that was added while it was processing before the
shutdown. ``shutdown_with_drain`` additionally waits until no item is processing; calling
``shutdown`` while it waits makes it return at once (as ``ShutDown`` after
``ShutDownWithDrain`` does in client-go).

Metrics (``metrics=True``), as client-go's default queue metrics: ``workqueue_adds_total``
counts items becoming dirty; ``workqueue_depth`` is the number of dirty items (client-go
increments it when an item becomes dirty and decrements it at ``get``, so it counts items
added while processing too, not just ``len(queue)``; we read it at scrape time); queue
duration is from the first add after the last ``get`` to the next ``get``; work duration
from ``get`` to ``done``; ``workqueue_retries_total`` counts every accepted ``add_after`` (hence every
``add_rate_limited``), including zero delays. The in-flight gauges are computed at scrape
time from the processing start times (see :mod:`memop.runtime.metrics`). With
``metrics=False`` no metric is touched and no time is read on the add/get/done path, so
``unfinished_work_seconds`` and ``longest_running_processor_seconds`` report 0.

Deliberate difference from client-go: ``done`` on an item that is not processing raises
``ValueError`` (client-go would push a dirty item into its FIFO a second time).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

from memop.runtime import metrics as m
from memop.runtime.util.clock import Clock, RealClock, TimerHandle
from memop.runtime.workqueue.ratelimiter import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class ShutDown(Exception):
    """``get`` on a queue that is shut down and has nothing ready: the worker should exit."""


class WorkQueue(Generic[T]):
    """A rate-limited, delaying, deduplicating work queue (see the module docstring).

    Items must be hashable and compare equal when they mean the same work (e.g. a
    ``namespace/name`` request). Not thread-safe: use it from one event loop.
    """

    __slots__ = (
        "__weakref__",
        "_clock",
        "_dirty",
        "_drain",
        "_drainers",
        "_getters",
        "_heap",
        "_idlers",
        "_limiter",
        "_low",
        "_low_dirty",
        "_low_queued",
        "_m_adds",
        "_m_queue_duration",
        "_m_retries",
        "_m_work_duration",
        "_metrics",
        "_now",
        "_processing",
        "_queue",
        "_seq",
        "_shutting_down",
        "_timer",
        "_timer_at",
        "_waiting",
        "adds",
        "controller",
        "name",
    )

    def __init__(
        self,
        name: str,
        *,
        controller: str = "",
        rate_limiter: RateLimiter[T] | None = None,
        clock: Clock | None = None,
        metrics: bool = True,
        lane_of: Callable[[T], Hashable] | None = None,
    ) -> None:
        """``name``/``controller`` label the metrics; ``rate_limiter`` defaults to
        :func:`~memop.runtime.workqueue.ratelimiter.default_controller_rate_limiter` on ``clock``;
        ``clock`` (default: the real clock) drives delays and durations; ``lane_of`` (called
        once each time an item joins the normal FIFO) splits that FIFO into lanes served
        round-robin."""
        self.name = name
        self.controller = controller
        self._clock: Clock = clock or RealClock()
        # RealClock.monotonic is time.monotonic; calling the builtin directly saves a Python
        # frame on every add, get and done.
        self._now: Callable[[], float] = (
            time.monotonic if type(self._clock) is RealClock else self._clock.monotonic
        )
        self._limiter: RateLimiter[T] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(self._clock)
        )

        # The ready FIFO. Invariant: every element is in _dirty and not in _processing, and
        # appears once (an item is appended only when it becomes dirty while not processing,
        # or at done() when it is dirty — and it cannot be in the FIFO then, since it was
        # processing).
        self._queue: deque[T] | _Lanes[T] = deque() if lane_of is None else _Lanes(lane_of)
        # The low-priority FIFO, read only when _queue is empty. An entry, a 1-tuple holding
        # the item, is live when _low_queued[item] is that very tuple (identity, not equality);
        # entries of items moved to _queue stay behind, stale.
        # Invariant: the live entries are exactly the items of _low_queued, each once, dirty,
        # not processing and not in _queue. _low_dirty: the dirty items waiting at low
        # priority, queued (in _low_queued) or processing (requeued low at done).
        self._low: deque[tuple[T]] = deque()
        self._low_queued: dict[T, tuple[T]] = {}
        self._low_dirty: set[T] = set()
        # Items that need processing: those in the FIFO plus those added while processing.
        # An item leaves _dirty exactly when get() hands it out. Each maps to when it became
        # dirty (0.0 without metrics), which is what queue duration is measured from.
        self._dirty: dict[T, float] = {}
        # Items held by a worker (between get and done), mapped to when get handed them out
        # (0.0 without metrics). Invariant: an item is never processing twice — get() only
        # takes FIFO items, which are never processing.
        self._processing: dict[T, float] = {}

        # Delayed adds. _waiting maps an item to its live entry (ready_at, seq); _heap holds
        # (ready_at, seq, item) for live entries plus stale ones left behind when an entry was
        # moved earlier (recognised by their seq no longer matching _waiting). Waiting items
        # are not dirty until their time comes and add() is called for them.
        self._waiting: dict[T, tuple[float, int]] = {}
        self._heap: list[tuple[float, int, T]] = []
        self._seq = itertools.count()
        # One timer, for the earliest heap entry; _timer_at is its deadline.
        self._timer: TimerHandle | None = None
        self._timer_at = 0.0

        # get() callers blocked on an empty FIFO, and shutdown_with_drain() callers blocked on
        # processing work. Done futures (cancelled or already woken) may linger; wake-ups
        # skip them.
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drainers: list[asyncio.Future[None]] = []
        # wait_idle() callers, woken when the queue becomes idle (or shuts down).
        self._idlers: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._drain = False
        # Items that became dirty since the queue was made: how a waiter tells a queue that
        # stayed idle from one that was busy and idle again meanwhile.
        self.adds = 0

        self._metrics = metrics
        if metrics:
            m.init_workqueue_series(name, controller)
            # client-go's depth goes up when an item becomes dirty and down when get() hands
            # it out, i.e. it is len(_dirty): read at scrape time.
            m.gauge_reads_size(m.WORKQUEUE_DEPTH.labels(name, controller), self, lambda queue: queue._dirty)
            # Children and bound methods are resolved once: .labels() costs more than the
            # operation it would label.
            self._m_adds = m.WORKQUEUE_ADDS.labels(name, controller).inc
            self._m_queue_duration = m.WORKQUEUE_QUEUE_DURATION.labels(name, controller).observe
            self._m_work_duration = m.WORKQUEUE_WORK_DURATION.labels(name, controller).observe
            self._m_retries = m.WORKQUEUE_RETRIES.labels(name, controller).inc
            m.track_in_flight(self)

    # -- adding -------------------------------------------------------------------------

    def add(self, item: T, *, low_priority: bool = False) -> None:
        """Mark ``item`` as needing processing, behind every normal item if ``low_priority``.
        Ignored once the queue is shutting down."""
        if self._shutting_down:
            return
        if item in self._dirty:
            if not low_priority and item in self._low_dirty:
                self._promote(item)
            return
        self.adds += 1
        if self._metrics:
            self._dirty[item] = self._now()
            self._m_adds()
        else:
            self._dirty[item] = 0.0
        if low_priority:
            self._low_dirty.add(item)
        if item in self._processing:
            # The worker holding it will see it dirty at done() and queue it then.
            return
        self._enqueue(item)

    def _enqueue(self, item: T) -> None:
        """Put a dirty item that is not processing in the FIFO of its priority."""
        if item in self._low_dirty:
            entry = (item,)  # a new tuple each time: its identity tells live from stale
            self._low_queued[item] = entry
            self._low.append(entry)
        else:
            self._queue.append(item)
        if self._getters:
            self._wake_getter()

    def _promote(self, item: T) -> None:
        """An item dirty at low priority was added with normal priority: it now waits there."""
        self._low_dirty.discard(item)
        entry = self._low_queued.pop(item, None)
        if entry is not None:
            # The object queued first, not the equal one just added: one object per item.
            self._queue.append(entry[0])  # its entry in _low is stale from now on
            if not self._low_queued:
                self._low.clear()  # only stale entries left

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed (``delay <= 0``: add it now).

        If ``item`` is already waiting, it keeps the earlier of its two ready times. Ignored
        once the queue is shutting down.
        """
        if self._shutting_down:
            return
        if self._metrics:
            self._m_retries()
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._now() + delay
        existing = self._waiting.get(item)
        if existing is not None and existing[0] <= ready_at:
            return
        # A moved entry leaves its old heap tuple behind; its seq no longer matches.
        seq = next(self._seq)
        self._waiting[item] = (ready_at, seq)
        heapq.heappush(self._heap, (ready_at, seq, item))
        if self._timer is None or ready_at < self._timer_at:
            self._arm_timer(ready_at)

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the delay the rate limiter gives it for this retry."""
        self.add_after(item, self._limiter.when(item))

    def forget(self, item: T) -> None:
        """Stop tracking ``item``'s retries: its next ``add_rate_limited`` starts the backoff
        afresh. It does not remove the item from the queue; ``done`` is still required."""
        self._limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many rate-limited retries ``item`` has had since it was last forgotten."""
        return self._limiter.num_requeues(item)

    # -- the delay heap ------------------------------------------------------------------

    def _arm_timer(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._clock.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        # The timer is due at _timer_at; an event loop may run it a clock-resolution early,
        # and treating that as "not yet" would spin re-arming it.
        now = max(self._now(), self._timer_at)
        heap, waiting = self._heap, self._waiting
        while heap and heap[0][0] <= now:
            _, seq, item = heapq.heappop(heap)
            entry = waiting.get(item)
            if entry is not None and entry[1] == seq:
                del waiting[item]
                self.add(item)
        self._drop_stale_head()
        if heap:
            self._arm_timer(heap[0][0])

    def _drop_stale_head(self) -> None:
        heap, waiting = self._heap, self._waiting
        while heap:
            _, seq, item = heap[0]
            entry = waiting.get(item)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)

    # -- taking --------------------------------------------------------------------------

    async def get(self) -> T:
        """Wait until an item is ready and hand it out; the caller must call ``done`` with it.

        After ``shutdown`` the remaining ready items are still handed out; raises
        :class:`ShutDown` once the queue is shut down and nothing is ready.
        """
        while not (self._queue or self._low_queued):
            if self._shutting_down:
                raise ShutDown
            await self._wait_for_item()
        return self._take()

    def get_nowait(self) -> T | None:
        """Hand out the next ready item without waiting, or return None if there is none.

        Raises :class:`ShutDown` when the queue is shut down and nothing is ready. The caller
        must call ``done`` with any item it receives.
        """
        if self._queue or self._low_queued:
            return self._take()
        if self._shutting_down:
            raise ShutDown
        return None

    def _take(self) -> T:
        if self._queue:
            item = self._queue.popleft()
        else:
            low, low_queued = self._low, self._low_queued
            while True:
                entry = low.popleft()
                item = entry[0]
                if low_queued.get(item) is entry:
                    break
            del low_queued[item]
            self._low_dirty.discard(item)
            if not low_queued:
                low.clear()  # only stale entries left
        added = self._dirty.pop(item)
        if self._metrics:
            now = self._now()
            self._processing[item] = now
            self._m_queue_duration(now - added)
        else:
            self._processing[item] = 0.0
        return item

    async def _wait_for_item(self) -> None:
        getter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._getters.append(getter)
        try:
            await getter
        except asyncio.CancelledError:
            if getter.cancelled():
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
            elif self._queue or self._low_queued:
                # We were woken for an item and then cancelled before running: pass the
                # wake-up on so the item does not sit in the FIFO while another getter sleeps.
                self._wake_getter()
            raise

    def _wake_getter(self) -> None:
        getters = self._getters
        while getters:
            getter = getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def done(self, item: T) -> None:
        """Finish processing ``item`` (handed out by ``get``); if it was added while it was
        processing, it is queued now, once.

        Raises ValueError if ``item`` is not being processed.
        """
        started = self._processing.pop(item, None)
        if started is None:
            raise ValueError(f"done({item!r}) without a matching get")
        if self._metrics:
            self._m_work_duration(self._now() - started)
        if item in self._dirty:
            # Added while processing: the add kept its own equal object as the key. Keep the
            # one handed out instead, which the FIFO will hold: one object per queued item,
            # where thousands wait behind a burst.
            self._dirty[item] = self._dirty.pop(item)
            if item in self._low_dirty:
                self._low_dirty.discard(item)
                self._low_dirty.add(item)
            self._enqueue(item)
        if self._drainers and not self._processing:
            self._wake_drainers()
        if self._idlers and not self._dirty and not self._processing:
            self._wake_idlers()

    @property
    def idle(self) -> bool:
        """Whether no item is ready or processing (items waiting for a delay do not count:
        a requeue-after may be hours away)."""
        return not self._dirty and not self._processing

    async def wait_idle(self) -> None:
        """Return once the queue is :attr:`idle` (at once if it is) or shutting down."""
        while not self.idle and not self._shutting_down:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idlers.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._idlers:
                    self._idlers.remove(waiter)

    def _wake_idlers(self) -> None:
        idlers, self._idlers = self._idlers, []
        _wake(idlers)

    def __len__(self) -> int:
        """How many items are ready to be handed out (not waiting, not processing)."""
        return len(self._queue) + len(self._low_queued)

    # -- shutdown ------------------------------------------------------------------------

    @property
    def shutting_down(self) -> bool:
        """Whether ``shutdown`` or ``shutdown_with_drain`` has been called."""
        return self._shutting_down

    def shutdown(self) -> None:
        """Stop accepting adds, drop waiting entries and wake every blocked ``get`` (which
        returns what is still ready, then raises :class:`ShutDown`). Releases a pending
        ``shutdown_with_drain`` without waiting for in-flight work. Idempotent."""
        self._drain = False
        self._shut_down()
        self._wake_drainers()

    async def shutdown_with_drain(self) -> None:
        """Shut down as :meth:`shutdown`, then wait until every handed-out item is ``done``.

        Workers must keep calling ``done`` (and may keep calling ``get`` to finish what is
        still ready), or this waits forever; a later ``shutdown`` makes it return at once.
        """
        self._drain = True
        self._shut_down()
        loop = asyncio.get_running_loop()
        while self._processing and self._drain:
            waiter: asyncio.Future[None] = loop.create_future()
            self._drainers.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._drainers:
                    self._drainers.remove(waiter)

    def _shut_down(self) -> None:
        self._shutting_down = True
        self._wake_idlers()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting.clear()
        self._heap.clear()
        getters, self._getters = self._getters, deque()
        _wake(getters)

    def _wake_drainers(self) -> None:
        drainers, self._drainers = self._drainers, []
        _wake(drainers)

    # -- in-flight gauges ----------------------------------------------------------------

    def unfinished_work_seconds(self) -> float:
        """Total seconds the items now processing have been processing (0 without metrics)."""
        if not self._metrics:
            return 0.0
        now = self._now()
        return sum(now - started for started in self._processing.values())

    def longest_running_processor_seconds(self) -> float:
        """Seconds the longest-held item now processing has been held (0 without metrics)."""
        if not self._metrics or not self._processing:
            return 0.0
        return self._now() - min(self._processing.values())


def _wake(waiters: Iterable[asyncio.Future[None]]) -> None:
    """Resolve every waiter not already done (cancelled or woken before)."""
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)


class AllQueues:
    """Idle when every queue ``queues()`` returns is idle (the queues of a manager's controllers,
    which may be added after this is made). The reconcile work an EventRecorder yields to."""

    def __init__(self, queues: Callable[[], Iterable[WorkQueue[Any]]]) -> None:
        self._queues = queues

    @property
    def idle(self) -> bool:
        # A queue shutting down has no more work to yield to (and wait_idle returns at once).
        return all(queue.idle or queue.shutting_down for queue in self._queues())

    @property
    def adds(self) -> int:
        """Items that became dirty in any of the queues, ever."""
        return sum(queue.adds for queue in self._queues())

    async def wait_idle(self) -> None:
        """Return once every queue is idle at the same moment."""
        while not self.idle:
            for queue in self._queues():
                await queue.wait_idle()


class _Lanes(Generic[T]):
    """The normal FIFO split into lanes: ``append`` queues an item in its lane, ``popleft``
    takes the head of the next lane in turn. Only the deque operations the queue uses."""

    __slots__ = ("_lane_of", "_lanes", "_size", "_turns")

    def __init__(self, lane_of: Callable[[T], Hashable]) -> None:
        self._lane_of = lane_of
        self._lanes: dict[Hashable, deque[T]] = {}
        # The lanes with items, in the order they are served; a lane served goes to the back.
        self._turns: deque[Hashable] = deque()
        self._size = 0

    def append(self, item: T) -> None:
        lane = self._lane_of(item)
        fifo = self._lanes.get(lane)
        if fifo is None:
            fifo = self._lanes[lane] = deque()
            self._turns.append(lane)
        fifo.append(item)
        self._size += 1

    def popleft(self) -> T:
        if not self._turns:
            raise IndexError("pop from an empty queue")
        lane = self._turns.popleft()
        fifo = self._lanes[lane]
        item = fifo.popleft()
        if fifo:
            self._turns.append(lane)
        else:
            del self._lanes[lane]
        self._size -= 1
        return item

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0
