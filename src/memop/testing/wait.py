"""Waiting on a condition with a deadline, for tests: never a bare sleep hoping state arrived.

A condition is polled often at first (it usually holds within milliseconds), then less and
less often up to ``max_interval``: a predicate is mostly a request to the API server, and
a hundred of them a second take the CPU of the very operator and server being waited for
(on two cores, the tests' in-process e2e runs spent a quarter of their CPU on them).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

# The longest pause between two polls by default (see the module docstring).
MAX_INTERVAL = 0.05
# How much longer each pause is than the one before, up to the longest.
BACKOFF = 1.5


class WaitTimeout(AssertionError):
    """The condition did not hold before the deadline (an AssertionError, so pytest shows it)."""


@overload
async def wait_for(
    predicate: Callable[[], Awaitable[T]],
    timeout: float = 10.0,
    *,
    interval: float = 0.01,
    max_interval: float = MAX_INTERVAL,
    message: str | Callable[[], str] | None = None,
) -> T: ...


@overload
async def wait_for(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    *,
    interval: float = 0.01,
    max_interval: float = MAX_INTERVAL,
    message: str | Callable[[], str] | None = None,
) -> T: ...


async def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    *,
    interval: float = 0.01,
    max_interval: float = MAX_INTERVAL,
    message: str | Callable[[], str] | None = None,
) -> Any:
    """Poll ``predicate`` (sync or async) until it returns something truthy, and return that.

    The first pause between polls is ``interval``; each next one is half as long again, up
    to ``max_interval`` (or ``interval`` when that is longer): a state that lasts less than
    that may be missed, so give ``max_interval=interval`` to poll at a fixed pace. The last
    poll is at the deadline.

    Exceptions raised by the predicate propagate at once. At the deadline, raise
    :class:`WaitTimeout` naming the predicate, the last value it returned and ``message``
    (a string, or a callable producing one, for state worth showing).
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    pause = interval
    longest = max(interval, max_interval)
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        last = result
        if time.monotonic() >= deadline:
            name = getattr(predicate, "__qualname__", repr(predicate))
            detail = message() if callable(message) else message
            text = f"condition {name} still false after {timeout:g}s (last value: {last!r})"
            raise WaitTimeout(f"{text}: {detail}" if detail else text)
        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * BACKOFF, longest)
