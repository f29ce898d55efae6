"""Waiting on a condition with a deadline, for tests: never a bare sleep hoping state arrived."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The condition did not hold before the deadline (an AssertionError, so pytest shows it)."""


@overload
async def wait_for(
    predicate: Callable[[], Awaitable[T]],
    timeout: float = 10.0,
    *,
    interval: float = 0.01,
    message: str | Callable[[], str] | None = None,
) -> T: ...


@overload
async def wait_for(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    *,
    interval: float = 0.01,
    message: str | Callable[[], str] | None = None,
) -> T: ...


async def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    *,
    interval: float = 0.01,
    message: str | Callable[[], str] | None = None,
) -> Any:
    """Poll ``predicate`` (sync or async) until it returns something truthy, and return that.

    Exceptions raised by the predicate propagate at once. At the deadline, raise
    :class:`WaitTimeout` naming the predicate, the last value it returned and ``message``
    (a string, or a callable producing one, for state worth showing).
    """
    deadline = time.monotonic() + timeout
    last: Any = None
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
        await asyncio.sleep(interval)
