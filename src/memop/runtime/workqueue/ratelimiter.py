"""Rate limiters that decide how long a failed item waits before it is retried (client-go
``util/workqueue/default_rate_limiters.go``).

A limiter answers three questions about an item: how long to wait before its next retry
(:meth:`RateLimiter.when`, which also records the retry), how many retries it has had
(:meth:`RateLimiter.num_requeues`), and :meth:`RateLimiter.forget` to stop tracking it once it
succeeds. The workqueue calls ``when`` from ``add_rate_limited`` and ``forget`` from ``forget``.

The controller default (:func:`default_controller_rate_limiter`) is the maximum of a per-item
exponential backoff (5 ms doubling to 1000 s) and an overall token bucket (10 qps, burst 100):
one item failing repeatedly backs off on its own, and many items failing at once are retried
no faster than 10 per second after the first 100.

Limiters are not thread-safe; like everything in memop they live on one event loop.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from memop.runtime.util.clock import Clock
from memop.runtime.util.tokenbucket import TokenBucket

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[T_contra]):
    """How long an item waits before its next retry."""

    def when(self, item: T_contra) -> float:
        """Record a retry of ``item`` and return the seconds it must wait before it."""
        ...

    def forget(self, item: T_contra) -> None:
        """Stop tracking ``item`` (it succeeded, or gave up): its next retry starts afresh."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """How many retries of ``item`` have been recorded since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """Per-item exponential backoff: ``base_delay * 2**n`` capped at ``max_delay``, where n is
    the number of earlier failures of the item (so the first retry waits ``base_delay``)."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay < 0 or max_delay < 0:
            raise ValueError("delays must not be negative")
        self.base_delay = base_delay
        self.max_delay = max_delay
        # Failures recorded per item since it was last forgotten; absent means 0.
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        exponent = self._failures.get(item, 0)
        self._failures[item] = exponent + 1
        try:
            # ldexp scales by a power of two exactly; past ~2**1024 it overflows a float,
            # which (like client-go's int64 check) simply means "the cap".
            backoff = math.ldexp(self.base_delay, exponent)
        except OverflowError:
            return self.max_delay
        return min(backoff, self.max_delay)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[T]):
    """One token bucket shared by all items: an overall retry rate, not a per-item one.

    ``when`` reserves a token (going into debt when the bucket is empty) and returns how long
    until that token matures, so the n-th retry past the burst waits n/qps. It keeps no
    per-item state: ``forget`` does nothing and ``num_requeues`` is always 0.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        self._bucket = TokenBucket(qps, burst, clock)

    def when(self, item: T) -> float:
        return self._bucket.reserve()

    def forget(self, item: T) -> None:
        return None

    def num_requeues(self, item: T) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The most restrictive of several limiters.

    Every limiter's ``when`` is called on each retry (so each records it, and the bucket takes
    a token even when the exponential backoff dominates), and the longest delay wins.
    ``forget`` forgets in all of them; ``num_requeues`` is the largest count.
    """

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: T) -> float:
        longest = 0.0
        for limiter in self.limiters:
            delay = limiter.when(item)
            longest = max(longest, delay)
        return longest

    def forget(self, item: T) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter[T]:
    """client-go's ``DefaultControllerRateLimiter``: max(per-item 5 ms·2^n capped at 1000 s,
    overall token bucket of 10 qps with burst 100). ``clock`` drives the bucket."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock),
    )
