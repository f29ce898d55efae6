"""WorkQueue: client-go util/workqueue semantics, exact under a fake clock.

The unit tests pin one behaviour each; ``WorkQueueMachine`` drives several worker tasks
through random interleavings of add / add_after / add_rate_limited / forget / get / done /
cancelled gets / clock advances / shutdown and compares the queue with a reference model
after every step.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import weakref
from collections.abc import Callable, Hashable

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from prometheus_client import REGISTRY

from memop.runtime.util.clock import FakeClock, RealClock
from memop.runtime.workqueue.ratelimiter import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
)
from memop.runtime.workqueue.workqueue import AllQueues, ShutDown, WorkQueue

_names = itertools.count()


def _unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def _queue(clock: FakeClock | None = None, **kwargs: object) -> WorkQueue[str]:
    return WorkQueue(_unique("wq-test"), clock=clock or FakeClock(), **kwargs)  # type: ignore[arg-type]


async def _settle() -> None:
    """Let every task that was woken run until it blocks again."""
    for _ in range(5):
        await asyncio.sleep(0)


def _ready(queue: WorkQueue[str]) -> list[str]:
    """Take everything ready, in order, and finish it."""
    taken = []
    while (item := queue.get_nowait()) is not None:
        taken.append(item)
        queue.done(item)
    return taken


# -- FIFO, dirty, processing -----------------------------------------------------------------


async def test_items_come_out_in_fifo_order_and_duplicates_coalesce() -> None:
    queue = _queue()
    for item in ["a", "b", "a", "c", "b"]:
        queue.add(item)
    assert len(queue) == 3
    assert [await queue.get() for _ in range(3)] == ["a", "b", "c"]
    assert len(queue) == 0
    assert queue.get_nowait() is None


async def test_low_priority_items_wait_behind_every_normal_item() -> None:
    q: WorkQueue[str] = WorkQueue(_unique("wq-prio"), metrics=False)
    q.add("status-1", low_priority=True)
    q.add("new-1")
    q.add("status-2", low_priority=True)
    q.add("new-2")
    q.add("status-1")  # a normal add moves it up, to the back of the normal FIFO
    q.add("new-1", low_priority=True)  # never moves an item down
    assert len(q) == 4
    assert [q.get_nowait() for _ in range(4)] == ["new-1", "new-2", "status-1", "status-2"]
    assert q.get_nowait() is None


async def test_an_item_keeps_its_priority_while_processing() -> None:
    q: WorkQueue[str] = WorkQueue(_unique("wq-prio"), metrics=False)
    q.add("a")
    assert q.get_nowait() == "a"
    q.add("a", low_priority=True)  # added at low priority while processing
    q.add("b")
    q.done("a")
    assert [q.get_nowait(), q.get_nowait()] == ["b", "a"]
    q.add("c", low_priority=True)
    assert q.get_nowait() == "c"
    q.add("c", low_priority=True)
    q.add("c")  # promoted while processing: requeued at normal priority
    q.add("d", low_priority=True)
    q.done("c")
    assert [q.get_nowait(), q.get_nowait()] == ["c", "d"]


async def test_a_promoted_items_stale_low_entry_never_lets_it_jump_the_low_fifo_later() -> None:
    q: WorkQueue[str] = WorkQueue(_unique("wq-prio"), metrics=False)
    q.add("a", low_priority=True)
    q.add("b", low_priority=True)
    q.add("a")  # promoted: its low entry stays behind, stale, ahead of b's
    assert _ready(q) == ["a", "b"]
    q.add("b", low_priority=True)
    q.add("a", low_priority=True)
    q.add("c", low_priority=True)
    q.add("c")  # promoted, so stale entries are left behind b's and a's live ones
    q.add("c", low_priority=True)  # never moves it down
    assert _ready(q) == ["c", "b", "a"]
    q.add("x", low_priority=True)
    q.add("y", low_priority=True)
    q.add("x")  # x's stale low entry is ahead of y's
    assert q.get_nowait() == "x"
    q.done("x")
    q.add("x", low_priority=True)  # queued low again: behind y, whatever stale entry it left
    assert _ready(q) == ["y", "x"]


class _Key:
    """An item equal to every other of its name, but an object of its own (as each event's
    Request is), that can tell whether the queue still holds it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


async def test_one_object_stands_for_a_queued_item_however_often_it_was_added() -> None:
    # Thousands of items wait behind a burst, each added again by later events: the queue must
    # not keep a second, equal object for any of them.
    q: WorkQueue[_Key] = WorkQueue(_unique("wq-identity"), metrics=False)
    first = _Key("promoted")
    q.add(first, low_priority=True)
    q.add(_Key("other"), low_priority=True)
    promoting = _Key("promoted")
    q.add(promoting)  # moves it to the normal FIFO
    promoting_ref = weakref.ref(promoting)
    del promoting
    gc.collect()
    assert promoting_ref() is None
    assert q.get_nowait() is first
    q.done(first)
    other = q.get_nowait()
    assert other is not None
    q.done(other)

    busy = _Key("busy")
    q.add(busy)
    assert q.get_nowait() is busy
    for low in (True, False):
        again = _Key("busy")
        q.add(again, low_priority=low)  # while processing: queued at done
        again_ref = weakref.ref(again)
        del again
        q.done(busy)
        gc.collect()
        assert again_ref() is None
        assert q.get_nowait() is busy
    q.done(busy)


async def test_lanes_are_served_in_turn_so_a_new_lane_does_not_wait_behind_a_backlog() -> None:
    q: WorkQueue[str] = WorkQueue(_unique("wq-lanes"), metrics=False, lane_of=lambda item: item[0])
    for i in range(100):
        q.add(f"a{i}")  # one lane's backlog
    assert q.get_nowait() == "a0"
    q.add("b0")  # a lane that arrives later (a shard just taken over)
    q.add("b1")
    assert [q.get_nowait() for _ in range(4)] == ["a1", "b0", "a2", "b1"]
    assert len(q) == 97
    assert all(item.startswith("a") for item in _ready(q))


async def test_lanes_keep_dedup_processing_and_priorities() -> None:
    q: WorkQueue[str] = WorkQueue(_unique("wq-lanes"), metrics=False, lane_of=lambda item: item[0])
    q.add("a1")
    q.add("a1")  # coalesced
    q.add("b1", low_priority=True)  # low priority waits behind every lane
    q.add("c1")
    assert q.get_nowait() == "a1"
    q.add("a1")  # added while processing: queued again once, at done, in its lane
    q.add("a2")
    assert len(q) == 3
    q.done("a1")
    assert [q.get_nowait() for _ in range(4)] == ["c1", "a2", "a1", "b1"]
    assert q.get_nowait() is None


async def test_an_item_added_while_processing_is_requeued_once_at_done() -> None:
    queue = _queue()
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    queue.add("a")
    # Never handed to a second worker while the first holds it.
    assert len(queue) == 0
    assert queue.get_nowait() is None
    queue.done("a")
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    assert queue.get_nowait() is None


async def test_idle_means_nothing_ready_or_processing_and_wait_idle_returns_then() -> None:
    queue = _queue()
    assert queue.idle
    await asyncio.wait_for(queue.wait_idle(), 1)
    queue.add("a")
    queue.add_after("later", 3600.0)  # waiting for a delay is not work yet
    waiter = asyncio.create_task(queue.wait_idle())
    await _settle()
    item = await queue.get()
    queue.add("a")  # added again while processing: still work after done
    queue.done(item)
    await _settle()
    assert not queue.idle
    assert not waiter.done()
    queue.done(await queue.get())
    await _settle()
    assert queue.idle
    assert waiter.done()


async def test_all_queues_are_idle_together_and_a_queue_shutting_down_counts_as_idle() -> None:
    first, second = _queue(), _queue()
    both = AllQueues(lambda: [first, second])
    first.add("a")
    second.add("b")
    waiter = asyncio.create_task(both.wait_idle())
    first.done(await first.get())
    await _settle()
    assert not both.idle
    assert not waiter.done()
    await second.get()  # held by a worker when the manager stops
    second.shutdown()
    await _settle()
    assert both.idle
    assert waiter.done()


async def test_done_without_get_is_an_error() -> None:
    queue = _queue()
    queue.add("a")
    with pytest.raises(ValueError, match="without a matching get"):
        queue.done("a")
    assert await queue.get() == "a"
    queue.done("a")
    with pytest.raises(ValueError, match="without a matching get"):
        queue.done("a")


async def test_a_blocked_get_is_woken_by_add() -> None:
    queue = _queue()
    getter = asyncio.create_task(queue.get())
    await _settle()
    assert not getter.done()
    queue.add("a")
    await _settle()
    assert getter.result() == "a"


async def test_each_blocked_getter_gets_its_own_item_in_arrival_order() -> None:
    queue = _queue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await _settle()
    queue.add("a")
    queue.add("b")
    await _settle()
    assert [g.result() if g.done() else None for g in getters] == ["a", "b", None]
    queue.done("a")
    queue.add("a")
    await _settle()
    assert getters[2].result() == "a"


async def test_a_getter_cancelled_after_being_woken_passes_the_item_on() -> None:
    queue = _queue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await _settle()
    queue.add("a")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    await _settle()
    assert first.cancelled()
    assert second.result() == "a"


async def test_a_cancelled_getter_does_not_swallow_a_later_add() -> None:
    queue = _queue()
    first = asyncio.create_task(queue.get())
    await _settle()
    first.cancel()
    await _settle()
    second = asyncio.create_task(queue.get())
    await _settle()
    queue.add("a")
    await _settle()
    assert second.result() == "a"


# -- delaying ---------------------------------------------------------------------------


async def test_add_after_zero_or_negative_adds_now() -> None:
    clock = FakeClock()
    queue = _queue(clock)
    queue.add_after("a", 0)
    queue.add_after("b", -5)
    assert _ready(queue) == ["a", "b"]
    assert clock.pending_timers() == 0


async def test_add_after_becomes_ready_exactly_at_its_deadline() -> None:
    clock = FakeClock()
    queue = _queue(clock)
    queue.add_after("a", 2.0)
    assert len(queue) == 0
    clock.advance(1.999)
    assert len(queue) == 0
    clock.advance(0.001)
    assert clock.monotonic() == 1002.0
    assert _ready(queue) == ["a"]
    assert clock.pending_timers() == 0


async def test_add_after_wakes_a_blocked_getter_at_the_deadline() -> None:
    clock = FakeClock()
    queue = _queue(clock)
    getter = asyncio.create_task(queue.get())
    await _settle()
    queue.add_after("a", 5)
    clock.advance(4.5)
    await _settle()
    assert not getter.done()
    clock.advance(0.5)
    await _settle()
    assert getter.result() == "a"


async def test_a_waiting_item_only_moves_earlier() -> None:
    clock = FakeClock()
    queue = _queue(clock)
    queue.add_after("a", 10)
    queue.add_after("a", 20)  # later: ignored
    clock.advance(10)
    assert _ready(queue) == ["a"]
    queue.add_after("a", 10)
    queue.add_after("a", 20)  # later: ignored
    queue.add_after("a", 5)  # earlier: moves
    clock.advance(5)
    assert _ready(queue) == ["a"]
    # It fired once: neither the 10 s nor the 20 s entry is still waiting.
    clock.advance(100)
    assert _ready(queue) == []
    assert clock.pending_timers() == 0


async def test_waiting_items_fire_in_deadline_order_then_fifo_for_ties() -> None:
    clock = FakeClock()
    queue = _queue(clock)
    queue.add_after("late", 3)
    queue.add_after("tie-1", 1)
    queue.add_after("tie-2", 1)
    queue.add_after("early", 0.5)
    clock.advance(10)
    assert _ready(queue) == ["early", "tie-1", "tie-2", "late"]


async def test_a_waiting_entry_is_independent_of_the_item_being_queued() -> None:
    # client-go: add_after does not look at dirty/processing; when the entry fires it adds.
    clock = FakeClock()
    queue = _queue(clock)
    queue.add_after("a", 1)
    queue.add("a")
    assert await queue.get() == "a"
    clock.advance(1)  # fires while "a" is processing: marks it dirty
    assert len(queue) == 0
    queue.done("a")
    assert _ready(queue) == ["a"]
    # And an item that is already queued when its entry fires is not queued twice.
    queue.add_after("b", 1)
    queue.add("b")
    clock.advance(1)
    assert _ready(queue) == ["b"]


async def test_add_after_on_the_real_clock() -> None:
    queue: WorkQueue[str] = WorkQueue(_unique("wq-real"), clock=RealClock())
    queue.add_after("a", 0.02)
    queue.add_after("b", 0.01)
    assert len(queue) == 0
    async with asyncio.timeout(5):
        assert await queue.get() == "b"
        assert await queue.get() == "a"


# -- rate limiting ----------------------------------------------------------------------


async def test_add_rate_limited_backs_off_exponentially_and_forget_resets() -> None:
    clock = FakeClock()
    queue = _queue(clock)  # the default controller limiter, driven by the fake clock
    for n in range(6):
        queue.add_rate_limited("a")
        assert queue.num_requeues("a") == n + 1
        delay = 0.005 * 2**n
        clock.advance(delay * 0.999)
        assert len(queue) == 0, f"retry {n} ready before {delay} s"
        clock.advance(delay * 0.001)
        assert _ready(queue) == ["a"], f"retry {n} not ready at {delay} s"
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    queue.add_rate_limited("a")
    clock.advance(0.005)
    assert _ready(queue) == ["a"]


async def test_add_rate_limited_uses_the_given_limiter() -> None:
    clock = FakeClock()
    limiter: MaxOfRateLimiter[str] = MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(1.0, 4.0), BucketRateLimiter(qps=1, burst=1, clock=clock)
    )
    queue = _queue(clock, rate_limiter=limiter)
    queue.add_rate_limited("a")  # exponential 1 s; bucket has its token
    queue.add_rate_limited("b")  # exponential 1 s; bucket 1 s in debt
    queue.add_rate_limited("c")  # bucket 2 s in debt
    clock.advance(1)
    assert _ready(queue) == ["a", "b"]
    clock.advance(1)
    assert _ready(queue) == ["c"]


# -- shutdown ---------------------------------------------------------------------------


async def test_shutdown_hands_out_what_is_ready_then_raises() -> None:
    clock = FakeClock()
    queue = _queue(clock)
    queue.add("a")
    queue.add("b")
    queue.add_after("later", 1)
    queue.shutdown()
    assert queue.shutting_down
    queue.add("c")  # silently ignored, as client-go
    queue.add_after("d", 0)
    queue.add_rate_limited("e")
    assert len(queue) == 2
    assert await queue.get() == "a"
    assert queue.get_nowait() == "b"
    with pytest.raises(ShutDown):
        await queue.get()
    with pytest.raises(ShutDown):
        queue.get_nowait()
    # Waiting entries are dropped with their timer.
    assert clock.pending_timers() == 0
    clock.advance(10)
    assert len(queue) == 0
    queue.done("a")
    queue.done("b")
    queue.shutdown()  # idempotent


async def test_shutdown_wakes_every_blocked_getter() -> None:
    queue = _queue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await _settle()
    queue.shutdown()
    await _settle()
    for getter in getters:
        with pytest.raises(ShutDown):
            getter.result()


async def test_done_after_shutdown_still_requeues_an_item_added_while_processing() -> None:
    queue = _queue()
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    queue.shutdown()
    queue.done("a")
    assert await queue.get() == "a"
    queue.done("a")
    with pytest.raises(ShutDown):
        await queue.get()


async def test_shutdown_with_drain_waits_for_in_flight_items() -> None:
    queue = _queue()
    for item in "abc":
        queue.add(item)
    first, second = await queue.get(), await queue.get()
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await _settle()
    assert queue.shutting_down
    assert not drain.done()
    queue.done(first)
    await _settle()
    assert not drain.done()
    # A worker may still take what was ready; the drain waits for that too.
    third = await queue.get()
    queue.done(second)
    await _settle()
    assert not drain.done()
    queue.done(third)
    await _settle()
    assert drain.done()
    await drain


async def test_shutdown_with_drain_returns_at_once_when_nothing_is_processing() -> None:
    queue = _queue()
    queue.add("a")  # queued but not handed out: not waited for
    async with asyncio.timeout(5):
        await queue.shutdown_with_drain()
    assert queue.shutting_down


async def test_shutdown_releases_a_pending_drain() -> None:
    queue = _queue()
    queue.add("a")
    await queue.get()
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await _settle()
    assert not drain.done()
    queue.shutdown()
    await _settle()
    assert drain.done()
    await drain


async def test_a_cancelled_drain_leaves_no_waiter_behind() -> None:
    queue = _queue()
    queue.add("a")
    await queue.get()
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await _settle()
    drain.cancel()
    await _settle()
    assert drain.cancelled()
    queue.done("a")


# -- metrics ----------------------------------------------------------------------------


def _sample(metric: str, name: str, controller: str) -> float | None:
    return REGISTRY.get_sample_value(metric, {"name": name, "controller": controller})


async def test_metrics_series_exist_at_zero_and_move() -> None:
    clock = FakeClock()
    name = _unique("wq-metrics")
    queue: WorkQueue[str] = WorkQueue(name, controller="ctl", clock=clock)
    for metric in ("workqueue_depth", "workqueue_adds_total", "workqueue_retries_total"):
        assert _sample(metric, name, "ctl") == 0.0, metric
    assert _sample("workqueue_queue_duration_seconds_count", name, "ctl") == 0.0

    queue.add("a")
    clock.advance(1.0)
    queue.add("a")  # coalesced: not an add
    queue.add("b")
    assert _sample("workqueue_adds_total", name, "ctl") == 2.0
    assert _sample("workqueue_depth", name, "ctl") == 2.0

    assert await queue.get() == "a"  # queued 1 s ago
    assert _sample("workqueue_depth", name, "ctl") == 1.0
    assert _sample("workqueue_queue_duration_seconds_sum", name, "ctl") == 1.0
    queue.add("a")  # added while processing: counted, and in depth like client-go
    assert _sample("workqueue_adds_total", name, "ctl") == 3.0
    assert _sample("workqueue_depth", name, "ctl") == 2.0

    clock.advance(2.0)
    assert _sample("workqueue_unfinished_work_seconds", name, "ctl") == 2.0
    assert _sample("workqueue_longest_running_processor_seconds", name, "ctl") == 2.0
    queue.done("a")
    assert _sample("workqueue_work_duration_seconds_count", name, "ctl") == 1.0
    assert _sample("workqueue_work_duration_seconds_sum", name, "ctl") == 2.0
    assert _sample("workqueue_unfinished_work_seconds", name, "ctl") == 0.0

    queue.add_rate_limited("c")
    queue.add_after("d", 0)
    queue.add_after("e", 5)
    assert _sample("workqueue_retries_total", name, "ctl") == 3.0
    assert _ready(queue) == ["b", "a", "d"]
    # Added at t=1 and taken at t=3: "b" and the re-added "a" waited 2 s each, "d" 0 s; with
    # the first "a" (1 s), 5 s over four gets.
    assert _sample("workqueue_queue_duration_seconds_count", name, "ctl") == 4.0
    assert _sample("workqueue_queue_duration_seconds_sum", name, "ctl") == 5.0
    assert _sample("workqueue_depth", name, "ctl") == 0.0


async def test_the_depth_series_does_not_keep_its_queue_alive() -> None:
    name = _unique("wq-metrics")
    queue: WorkQueue[str] = WorkQueue(name, controller="ctl", clock=FakeClock())
    queue.add("a")
    assert _sample("workqueue_depth", name, "ctl") == 1.0
    gone = weakref.ref(queue)
    del queue
    gc.collect()
    assert gone() is None
    assert _sample("workqueue_depth", name, "ctl") == 0.0


async def test_in_flight_gauges_sum_and_max_over_processing_items() -> None:
    clock = FakeClock()
    name = _unique("wq-inflight")
    queue: WorkQueue[str] = WorkQueue(name, clock=clock)
    queue.add("a")
    queue.add("b")
    await queue.get()
    clock.advance(3)
    await queue.get()
    clock.advance(1)
    assert queue.unfinished_work_seconds() == 5.0
    assert queue.longest_running_processor_seconds() == 4.0
    assert _sample("workqueue_unfinished_work_seconds", name, "") == 5.0
    assert _sample("workqueue_longest_running_processor_seconds", name, "") == 4.0


async def test_metrics_disabled_touches_no_metric() -> None:
    clock = FakeClock()
    name = _unique("wq-quiet")
    queue: WorkQueue[str] = WorkQueue(name, clock=clock, metrics=False)
    queue.add("a")
    queue.add_rate_limited("b")
    await queue.get()
    clock.advance(1)
    queue.done("a")
    for metric in (
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_retries_total",
        "workqueue_queue_duration_seconds_count",
        "workqueue_unfinished_work_seconds",
    ):
        assert _sample(metric, name, "") is None, metric
    assert queue.unfinished_work_seconds() == 0.0
    assert queue.longest_running_processor_seconds() == 0.0


# -- interleavings against a reference model ---------------------------------------------

ITEMS = ("a", "b", "c", "d")
WORKERS = 3
DELAYS = (-1.0, 0.0, 0.001, 0.005, 0.01, 0.1, 0.3, 1.0, 2.5)
# A small limiter so that the cap and the bucket both bind within a short run.
BASE, CAP, QPS, BURST = 0.005, 0.5, 10.0, 3


class _LaneFifo:
    """The reference for lanes: one list per lane, the lanes served in turn."""

    def __init__(self, lane_of: Callable[[str], str]) -> None:
        self.lane_of = lane_of
        self.lanes: dict[str, list[str]] = {}
        self.turns: list[str] = []

    def append(self, item: str) -> None:
        lane = self.lane_of(item)
        if lane not in self.lanes:
            self.lanes[lane] = []
            self.turns.append(lane)
        self.lanes[lane].append(item)

    def pop(self, index: int) -> str:
        assert index == 0
        lane = self.turns.pop(0)
        item = self.lanes[lane].pop(0)
        if self.lanes[lane]:
            self.turns.append(lane)
        else:
            del self.lanes[lane]
        return item

    def __len__(self) -> int:
        return sum(len(items) for items in self.lanes.values())


class _Model:
    """The reference: client-go's queue, delaying queue and rate limiters, written plainly."""

    def __init__(self, now: float, lane_of: Callable[[str], str] | None = None) -> None:
        self.now = now
        self.fifo: list[str] | _LaneFifo = [] if lane_of is None else _LaneFifo(lane_of)
        self.low: list[str] = []  # the low-priority FIFO, read when fifo is empty
        self.dirty: set[str] = set()
        self.low_dirty: set[str] = set()  # dirty items waiting at low priority
        self.holding: dict[int, str] = {}  # worker -> item it holds
        self.blocked: list[int] = []  # workers waiting in get(), in arrival order
        self.stopped: set[int] = set()  # workers whose get() raised ShutDown
        self.waiting: dict[str, tuple[float, int]] = {}  # item -> (ready_at, seq)
        self.seq = itertools.count()
        self.shut = False
        self.failures: dict[str, int] = {}
        self.tokens = float(BURST)
        self.last = now

    def add(self, item: str, low: bool = False) -> None:
        if self.shut:
            return
        if item in self.dirty:
            if not low and item in self.low_dirty:
                self.low_dirty.discard(item)
                if item in self.low:
                    self.low.remove(item)
                    self.fifo.append(item)
            return
        self.dirty.add(item)
        if low:
            self.low_dirty.add(item)
        if item in self.holding.values():
            return
        self._enqueue(item)

    def _enqueue(self, item: str) -> None:
        # Handed out at the end of the step (dispatch), as the queue's woken getters take their
        # items only once they run: with lanes, adds made together change which comes first.
        (self.low if item in self.low_dirty else self.fifo).append(item)

    def dispatch(self) -> None:
        """Blocked workers take what is ready, in the order they blocked."""
        self._dispatch()

    def _dispatch(self) -> None:
        while self.blocked and (self.fifo or self.low):
            worker = self.blocked.pop(0)
            item = self.fifo.pop(0) if self.fifo else self.low.pop(0)
            self.dirty.discard(item)
            self.low_dirty.discard(item)
            self.holding[worker] = item

    def get(self, worker: int) -> None:
        if self.fifo or self.low:
            self.blocked.append(worker)
            self._dispatch()
        elif self.shut:
            self.stopped.add(worker)
        else:
            self.blocked.append(worker)

    def cancel_get(self, worker: int) -> None:
        self.blocked.remove(worker)

    def done(self, worker: int) -> None:
        item = self.holding.pop(worker)
        if item in self.dirty:
            self._enqueue(item)

    def add_after(self, item: str, delay: float) -> None:
        if self.shut:
            return
        if delay <= 0:
            self.add(item)
            return
        ready_at = self.now + delay
        if item in self.waiting and self.waiting[item][0] <= ready_at:
            return
        self.waiting[item] = (ready_at, next(self.seq))

    def when(self, item: str) -> float:
        n = self.failures.get(item, 0)
        self.failures[item] = n + 1
        exponential = min(BASE * 2.0**n, CAP)
        # golang.org/x/time/rate reservation: refill, take a token, wait out any debt.
        self.tokens = min(float(BURST), self.tokens + max(0.0, self.now - self.last) * QPS)
        self.last = self.now
        self.tokens -= 1.0
        bucket = 0.0 if self.tokens >= 0 else -self.tokens / QPS
        return max(exponential, bucket)

    def advance(self, target: float) -> list[str]:
        """Move to ``target``; return the items whose waiting entries fired, in order."""
        due = sorted((entry, item) for item, entry in self.waiting.items() if entry[0] <= target)
        fired = []
        for (ready_at, _), item in due:
            self.now = ready_at
            del self.waiting[item]
            fired.append(item)
            self.add(item)
        self.now = target
        return fired

    def shutdown(self) -> None:
        self.shut = True
        self.waiting.clear()
        for worker in self.blocked:
            self.stopped.add(worker)
        self.blocked.clear()


class WorkQueueMachine(RuleBasedStateMachine):
    lane_of: Callable[[str], str] | None = None

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        limiter: MaxOfRateLimiter[str] = MaxOfRateLimiter(
            ItemExponentialFailureRateLimiter(BASE, CAP), BucketRateLimiter(QPS, BURST, self.clock)
        )
        self.queue: WorkQueue[str] = WorkQueue(
            _unique("wq-machine"), clock=self.clock, rate_limiter=limiter, lane_of=self.lane_of
        )
        self.model = _Model(self.clock.monotonic(), self.lane_of)
        self.gets: dict[int, asyncio.Task[str]] = {}  # worker -> its get() in progress
        self.held: dict[int, str] = {}  # worker -> item the real queue handed it
        self.stopped: set[int] = set()
        # Items with an add (explicit, or a waiting entry firing) not yet followed by a get
        # of that item: each must be handed out again before the run ends.
        self.owed: set[str] = set()

    def _settle(self) -> None:
        self.model.dispatch()
        self.loop.run_until_complete(_settle())
        for worker, task in list(self.gets.items()):
            if not task.done():
                continue
            del self.gets[worker]
            if task.cancelled():
                continue
            error = task.exception()
            if isinstance(error, ShutDown):
                self.stopped.add(worker)
                continue
            assert error is None, error
            item = task.result()
            assert item not in self.held.values(), f"{item} handed to two workers"
            self.held[worker] = item
            self.owed.discard(item)

    def _owe(self, item: str) -> None:
        if not self.model.shut:
            self.owed.add(item)

    def _idle(self) -> list[int]:
        return [
            w for w in range(WORKERS) if w not in self.gets and w not in self.held and w not in self.stopped
        ]

    @rule(item=st.sampled_from(ITEMS))
    def add(self, item: str) -> None:
        self._owe(item)
        self.queue.add(item)
        self.model.add(item)
        self._settle()

    @rule(item=st.sampled_from(ITEMS))
    def add_low_priority(self, item: str) -> None:
        self._owe(item)
        self.queue.add(item, low_priority=True)
        self.model.add(item, low=True)
        self._settle()

    @rule(item=st.sampled_from(ITEMS), delay=st.sampled_from(DELAYS))
    def add_after(self, item: str, delay: float) -> None:
        if delay <= 0:
            self._owe(item)
        self.queue.add_after(item, delay)
        self.model.add_after(item, delay)
        self._settle()

    @rule(item=st.sampled_from(ITEMS))
    def add_rate_limited(self, item: str) -> None:
        self.queue.add_rate_limited(item)
        self.model.add_after(item, self.model.when(item))
        self._settle()

    @rule(item=st.sampled_from(ITEMS))
    def forget(self, item: str) -> None:
        self.queue.forget(item)
        self.model.failures.pop(item, None)

    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        idle = self._idle()
        if not idle:
            return
        worker = data.draw(st.sampled_from(idle))
        self.gets[worker] = self.loop.create_task(self.queue.get())
        self.model.get(worker)
        self._settle()

    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        if not self.held:
            return
        worker = data.draw(st.sampled_from(sorted(self.held)))
        self.queue.done(self.held.pop(worker))
        self.model.done(worker)
        self._settle()

    @rule(data=st.data())
    def cancel_get(self, data: st.DataObject) -> None:
        if not self.gets:
            return
        worker = data.draw(st.sampled_from(sorted(self.gets)))
        self.gets[worker].cancel()
        self.model.cancel_get(worker)
        self._settle()

    @rule(seconds=st.sampled_from((0.0, 0.001, 0.004, 0.005, 0.01, 0.05, 0.1, 0.3, 1.0, 5.0)))
    def advance(self, seconds: float) -> None:
        self._advance(seconds)

    @precondition(lambda self: bool(self.model.waiting))
    @rule(data=st.data())
    def advance_to_a_deadline(self, data: st.DataObject) -> None:
        """Land exactly on a deadline, or just short of it."""
        ready_at = data.draw(st.sampled_from(sorted(e[0] for e in self.model.waiting.values())))
        short = data.draw(st.booleans())
        gap = ready_at - self.clock.monotonic()
        self._advance(gap / 2 if short else gap)

    def _advance(self, seconds: float) -> None:
        # Same float arithmetic as FakeClock.advance, so the model agrees on what is due.
        target = self.clock.monotonic() + seconds
        for item in self.model.advance(target):
            self._owe(item)
        self.clock.advance(seconds)
        self._settle()

    @precondition(lambda self: not self.model.shut)
    @rule()
    def shutdown(self) -> None:
        self.queue.shutdown()
        self.model.shutdown()
        self._settle()

    @invariant()
    def matches_the_model(self) -> None:
        model = self.model
        assert self.held == model.holding
        assert set(self.gets) == set(model.blocked)
        assert self.stopped == model.stopped
        assert len(self.queue) == len(model.fifo) + len(model.low)
        assert self.queue.shutting_down == model.shut
        for item in ITEMS:
            assert self.queue.num_requeues(item) == model.failures.get(item, 0)
        # One timer for the whole delay heap, and none once nothing waits.
        assert self.clock.pending_timers() == (1 if model.waiting else 0)

    def teardown(self) -> None:
        try:
            # Drain: fire every waiting entry, finish everything, let idle workers take the
            # rest, until nothing is held, ready or waiting. Then nothing may still be owed.
            for _ in range(100):
                if self.model.waiting:
                    self._advance(max(e[0] for e in self.model.waiting.values()) - self.clock.monotonic())
                for worker in sorted(self.held):
                    self.queue.done(self.held.pop(worker))
                    self.model.done(worker)
                self._settle()
                for worker in self._idle():
                    self.gets[worker] = self.loop.create_task(self.queue.get())
                    self.model.get(worker)
                self._settle()
                self.matches_the_model()
                if not self.held and not len(self.queue) and not self.model.waiting:
                    break
            assert not self.owed, f"adds never followed by a get: {sorted(self.owed)}"
            self.queue.shutdown()
            self.model.shutdown()
            self._settle()
            assert not self.gets
        finally:
            for task in self.gets.values():
                task.cancel()
            self.loop.run_until_complete(_settle())
            self.loop.close()


WorkQueueMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestWorkQueueInterleavings = WorkQueueMachine.TestCase


class LanedWorkQueueMachine(WorkQueueMachine):
    """The same interleavings with the normal FIFO split into two lanes."""

    lane_of = staticmethod(lambda item: "x" if item in ("a", "b") else "y")


LanedWorkQueueMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
TestLanedWorkQueueInterleavings = LanedWorkQueueMachine.TestCase


def test_items_are_hashable_values() -> None:
    # Equal values are the same work, whatever object carries them.
    queue: WorkQueue[Hashable] = WorkQueue(_unique("wq-hash"), clock=FakeClock(), metrics=False)
    queue.add(("ns", "name"))
    queue.add(("ns", "name"))
    assert len(queue) == 1
