"""Exponential backoff with jitter that forgets old failures (client-go's backoff manager).

Used by reflectors between failed list/watch attempts: 0.8 s doubling to 30 s, each delay
stretched by up to ``jitter`` times itself, back to the start once ``reset_after`` seconds have
passed since the previous failure.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from memop.runtime.util.clock import Clock, RealClock


class Backoff:
    def __init__(
        self,
        *,
        initial: float = 0.8,
        maximum: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._clock = clock or RealClock()
        self._rand = rand
        # The un-jittered delay the next failure will get, and when the last failure happened.
        self._next = initial
        self._last_failure: float | None = None

    def next_delay(self) -> float:
        """Record a failure now and return how long to wait before the next attempt."""
        now = self._clock.monotonic()
        if self._last_failure is not None and now - self._last_failure >= self.reset_after:
            self._next = self.initial
        self._last_failure = now
        base = self._next
        self._next = min(self.maximum, self._next * self.factor)
        return base + base * self.jitter * self._rand()

    def reset(self) -> None:
        """Forget every failure so far."""
        self._next = self.initial
        self._last_failure = None

    async def wait(self) -> float:
        """Record a failure and sleep its delay on the clock; returns the delay."""
        delay = self.next_delay()
        await self._clock.sleep(delay)
        return delay
