"""Ending asyncio tasks this process started."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel every task of ``tasks`` and wait until each has ended, however it ends: stopping a
    reflector, a worker or a renew loop must not raise what it raised, and nothing may outlive
    the part that stops it. Each outcome is retrieved, so asyncio logs no "exception was never
    retrieved". If the caller is itself cancelled meanwhile, the tasks are cancelled again (a
    clean-up under way is cut short) and the caller's cancellation is raised once they ended."""
    waiting = list(tasks)
    for task in waiting:
        task.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)
