"""The event loop the operator process runs on: uvloop where it is installed, else asyncio's.

Nearly all of an operator's CPU on a real cluster is bytes moving: requests and watch streams
over TLS through aiohttp and the event loop. uvloop (libuv, and its TLS protocol compiled
rather than asyncio's pure-Python ``sslproto``) runs the same requests with about a quarter
fewer instructions (docs/performance). It is a dependency wherever it has wheels (Linux and
macOS); elsewhere (Windows, PyPy) memop runs on asyncio's own loop, unchanged.

``--event-loop`` chooses: ``auto`` (uvloop when importable), ``uvloop`` (refuse to start
without it) or ``asyncio``.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

AUTO = "auto"
UVLOOP = "uvloop"
ASYNCIO = "asyncio"
EVENT_LOOPS = (AUTO, UVLOOP, ASYNCIO)

T = TypeVar("T")


def uvloop_available() -> bool:
    """Whether uvloop can be imported here (without importing it)."""
    return importlib.util.find_spec(UVLOOP) is not None


def resolve(choice: str) -> str:
    """The loop ``choice`` (one of :data:`EVENT_LOOPS`) means here: ``uvloop`` or ``asyncio``.
    Raises ValueError for an unknown choice, or ``uvloop`` where it is not installed."""
    if choice not in EVENT_LOOPS:
        raise ValueError(f"expected {', '.join(EVENT_LOOPS)}, got {choice!r}")
    if choice == AUTO:
        return UVLOOP if uvloop_available() else ASYNCIO
    if choice == UVLOOP and not uvloop_available():
        raise ValueError("uvloop is not installed (pip install uvloop), or choose asyncio")
    return choice


def loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of a resolved loop ``kind``; None for asyncio's default."""
    if kind == UVLOOP:
        import uvloop  # noqa: PLC0415  (only where chosen and installed)

        factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
        return factory
    return None


def run(main: Coroutine[Any, Any, T], kind: str) -> T:
    """``asyncio.run(main)`` on the resolved loop ``kind``."""
    with asyncio.Runner(loop_factory=loop_factory(kind)) as runner:
        return runner.run(main)
