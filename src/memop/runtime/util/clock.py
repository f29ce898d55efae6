"""Time as a dependency: every piece of time-based logic (backoff, delays, leases) takes a Clock.

``RealClock`` is the event loop's monotonic clock plus the wall clock. ``FakeClock`` only moves
when a test calls :meth:`FakeClock.advance`, which fires due timers in deadline order, so tests
of backoff, delaying queues and leases are exact and never sleep.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from memop.runtime.util.tasks import cancel_and_wait

T = TypeVar("T")


def rfc3339(seconds: float) -> str:
    """``seconds`` since the epoch as the API's RFC 3339 time, to the second, in UTC."""
    global _last_formatted
    whole = math.floor(seconds)
    last = _last_formatted
    if last[0] == whole:
        return last[1]
    formatted = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(whole))
    _last_formatted = (whole, formatted)
    return formatted


# The last second rfc3339 formatted and its text: every reconcile of a burst stamps its status
# in the same second, and formatting it again took five times as long as this lookup.
_last_formatted: tuple[int, str] = (-1, "")


async def first_of(*waits: Awaitable[Any]) -> None:
    """Wait until the first of ``waits`` is done, then cancel the others and wait for them to
    end (a wait for a condition raced against a sleep on the injected clock, or a stop)."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(tasks)


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """What time-based code may ask of time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards; only differences mean anything."""
        ...

    def time(self) -> float:
        """Wall-clock seconds since the epoch, for timestamps written to the API."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` (on the event loop) once ``monotonic()`` reaches ``when``."""
        ...

    async def sleep(self, delay: float) -> None:
        """Return once ``delay`` seconds of this clock have passed."""
        ...


class RealClock:
    """The event loop's clock (``loop.time()`` is ``time.monotonic()``) and ``time.time()``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        return loop.call_at(loop.time() + (when - time.monotonic()), callback)

    async def sleep(self, delay: float) -> None:
        await asyncio.sleep(max(0.0, delay))


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that stands still until :meth:`advance` moves it.

    Timers due at the same instant fire in the order they were scheduled.
    """

    def __init__(self, start: float = 1000.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        # Heap of (when, sequence, timer); the sequence keeps equal deadlines in FIFO order.
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self._now + self._wall_offset

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _FakeTimer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    async def sleep(self, delay: float) -> None:
        if delay <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        handle = self.call_at(self._now + delay, wake)
        try:
            await future
        finally:
            handle.cancel()

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing every timer that falls due on the way."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            timer.callback()
        self._now = target

    def pending_timers(self) -> int:
        """How many timers are scheduled and not cancelled (for test assertions)."""
        return sum(1 for _, _, timer in self._timers if not timer.cancelled)


async def run_until(clock: Clock, work: Coroutine[Any, Any, T], deadline: float) -> T:
    """Await ``work`` in this task, cancelled (TimeoutError) when ``clock`` reaches
    ``deadline``: asyncio.timeout_at, but on an injected clock."""
    current = asyncio.current_task()
    assert current is not None, "run_until runs inside a task"
    task: asyncio.Task[Any] = current
    if clock.monotonic() >= deadline:
        work.close()
        raise TimeoutError
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    cancelling = task.cancelling()
    handle = clock.call_at(deadline, expire)
    try:
        result = await work
    except asyncio.CancelledError:
        # Ours only if nobody else cancelled the task meanwhile (asyncio.timeout's rule).
        if expired and task.uncancel() <= cancelling:
            raise TimeoutError from None
        raise
    except BaseException:
        if expired:
            task.uncancel()
        raise
    finally:
        handle.cancel()
    if expired:
        # The work finished despite the cancellation; withdraw the request.
        task.uncancel()
    return result
