"""cancel_and_wait: every task ended and its outcome retrieved, whatever it raised."""

from __future__ import annotations

import asyncio
import gc

import pytest

from memop.runtime.util.tasks import cancel_and_wait


async def test_every_task_is_cancelled_and_ended_and_nothing_is_raised_or_left_unretrieved() -> None:
    started = asyncio.Event()
    cleaned: list[str] = []

    async def sleeper() -> None:
        started.set()
        await asyncio.Event().wait()

    async def fails_while_stopping() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append("failing")
            raise RuntimeError("broke while stopping")

    async def finishes_its_cleanup() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # clean-up that awaits still runs to its end
            cleaned.append("awaiting")
            raise

    tasks = [asyncio.create_task(c()) for c in (sleeper, fails_while_stopping, finishes_its_cleanup)]
    done_before = asyncio.get_running_loop().create_future()
    done_before.set_result("kept")
    await started.wait()
    unretrieved: list[object] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: unretrieved.append(context))

    await cancel_and_wait(iter([*tasks, done_before]))  # any iterable, done ones included

    assert all(task.done() for task in tasks)
    assert tasks[0].cancelled()
    assert tasks[2].cancelled()
    assert isinstance(tasks[1].exception(), RuntimeError)
    assert sorted(cleaned) == ["awaiting", "failing"]
    assert done_before.result() == "kept"
    del tasks
    gc.collect()
    assert unretrieved == []


async def test_cancelling_the_caller_cuts_the_clean_up_short_and_leaves_nothing_running() -> None:
    cleaning = asyncio.Event()
    finished: list[str] = []

    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaning.set()
            await asyncio.Event().wait()  # a clean-up that would never end by itself
            finished.append("clean-up")

    task = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    stopping = asyncio.create_task(cancel_and_wait([task]))
    await cleaning.wait()  # asked to stop, and in its clean-up
    stopping.cancel()  # as a shutdown that is itself cancelled
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert task.cancelled()  # ended before the caller's cancellation came through
    assert finished == []
