"""memop.testing.wait_for: what it returns, how it fails, and how often it polls."""

from __future__ import annotations

import asyncio
import time

import pytest

from memop.testing.wait import BACKOFF, MAX_INTERVAL, WaitTimeout, wait_for


async def test_it_returns_the_first_truthy_value_of_a_sync_or_async_predicate() -> None:
    calls: list[int] = []

    def third() -> int | None:
        calls.append(1)
        return len(calls) if len(calls) == 3 else None

    assert await wait_for(third, timeout=5) == 3

    async def found() -> dict[str, int]:
        return {"n": 1}

    assert await wait_for(found, timeout=5) == {"n": 1}


async def test_an_exception_of_the_predicate_propagates_at_once() -> None:
    def broken() -> bool:
        raise KeyError("missing")

    start = time.monotonic()
    with pytest.raises(KeyError):
        await wait_for(broken, timeout=5)
    assert time.monotonic() - start < 1


async def test_the_timeout_names_the_predicate_its_last_value_and_the_message() -> None:
    def never() -> list[str]:
        return []

    with pytest.raises(WaitTimeout) as failure:
        await wait_for(never, timeout=0.1, message=lambda: "state: empty")
    text = str(failure.value)
    assert text.startswith("condition test_the_timeout_names_the_predicate_its_last_value_and_the_message.")
    assert "<locals>.never still false after 0.1s (last value: [])" in text
    assert text.endswith(": state: empty")


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every pause wait_for asks asyncio for (it still sleeps it), in order."""
    asked: list[float] = []
    sleep = asyncio.sleep

    async def recording(delay: float) -> None:
        asked.append(delay)
        await sleep(delay)

    monkeypatch.setattr(asyncio, "sleep", recording)
    return asked


async def never_until(seconds: float, **options: float) -> None:
    def never() -> bool:
        return False

    start = time.monotonic()
    with pytest.raises(WaitTimeout):
        await wait_for(never, timeout=seconds, **options)
    assert time.monotonic() - start >= seconds * 0.99


async def test_polls_grow_apart_from_interval_up_to_max_interval(pauses: list[float]) -> None:
    await never_until(0.5, interval=0.01)
    growing = [0.01, 0.015, 0.0225, 0.03375]
    assert pauses[: len(growing)] == pytest.approx(growing)
    assert growing[-1] * BACKOFF > MAX_INTERVAL  # the next one is the longest
    # Then the longest until the deadline, the last one cut short to poll once at it.
    assert pauses[len(growing) : -1] == pytest.approx([MAX_INTERVAL] * (len(pauses) - len(growing) - 1))
    assert 0 <= pauses[-1] <= MAX_INTERVAL
    # Fixed pacing at 10 ms would poll 50 times in 0.5 s.
    assert len(pauses) <= 4 + 0.5 / MAX_INTERVAL


async def test_max_interval_equal_to_interval_polls_at_a_fixed_pace(pauses: list[float]) -> None:
    await never_until(0.2, interval=0.04, max_interval=0.04)
    assert pauses[:-1] == pytest.approx([0.04] * (len(pauses) - 1))
    assert 0 <= pauses[-1] <= 0.04


async def test_an_interval_longer_than_max_interval_is_kept(pauses: list[float]) -> None:
    await never_until(0.25, interval=0.1)
    assert pauses[:-1] == pytest.approx([0.1] * (len(pauses) - 1))
    assert len(pauses) >= 2
