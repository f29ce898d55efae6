"""A token bucket with reservation semantics (golang.org/x/time/rate ``Limiter.Reserve``).

Tokens refill at ``qps`` per second up to ``burst``. :meth:`TokenBucket.reserve` always takes a
token, going into debt if needed, and returns how long the caller must wait before acting on
it. Reservations therefore queue up fairly without a lock: the n-th caller past the burst waits
n/qps. Used by the workqueue's overall rate limiter and by the API client's QPS limit.
"""

from __future__ import annotations

from memop.runtime.util.clock import Clock, RealClock


class TokenBucket:
    def __init__(self, qps: float, burst: int, clock: Clock | None = None) -> None:
        if qps <= 0:
            raise ValueError("qps must be positive")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock or RealClock()
        # Invariant: _tokens is the balance at time _last; it is at most burst and may be
        # negative (reservations already handed out that have not matured yet).
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    def reserve(self) -> float:
        """Take one token; return the seconds to wait before using it (0 when one was ready)."""
        now = self._clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + max(0.0, now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def try_take(self) -> bool:
        """Take a token if one is available now; never goes into debt."""
        now = self._clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + max(0.0, now - self._last) * self.qps)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> None:
        """Wait until a token is available and take it."""
        delay = self.reserve()
        if delay > 0:
            await self._clock.sleep(delay)
