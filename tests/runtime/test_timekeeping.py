"""Clock, backoff and token bucket: exact under a fake clock."""

from __future__ import annotations

import asyncio
import time

import pytest

from memop.runtime.util.backoff import Backoff
from memop.runtime.util.clock import FakeClock, rfc3339
from memop.runtime.util.tokenbucket import TokenBucket


async def test_fake_clock_fires_timers_in_deadline_order_and_wakes_sleepers() -> None:
    clock = FakeClock()
    fired: list[str] = []
    clock.call_at(clock.monotonic() + 2, lambda: fired.append("b"))
    clock.call_at(clock.monotonic() + 1, lambda: fired.append("a"))
    cancelled = clock.call_at(clock.monotonic() + 1.5, lambda: fired.append("never"))
    cancelled.cancel()
    sleeper = asyncio.create_task(clock.sleep(3))
    await asyncio.sleep(0)
    clock.advance(2)
    assert fired == ["a", "b"]
    await asyncio.sleep(0)
    assert not sleeper.done()
    clock.advance(1)
    await asyncio.sleep(0)
    assert sleeper.done()
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)


def test_backoff_doubles_to_the_cap_and_resets_after_quiet_period() -> None:
    clock = FakeClock()
    backoff = Backoff(initial=0.8, maximum=30, jitter=1.0, reset_after=120, clock=clock, rand=lambda: 0.0)
    delays = [backoff.next_delay() for _ in range(8)]
    assert delays == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30])
    clock.advance(119)
    assert backoff.next_delay() == pytest.approx(30)
    clock.advance(120)
    assert backoff.next_delay() == pytest.approx(0.8)


def test_backoff_jitter_stretches_by_at_most_the_factor() -> None:
    backoff = Backoff(initial=1, jitter=1.0, clock=FakeClock(), rand=lambda: 0.999)
    assert 1.99 < backoff.next_delay() < 2.0


def test_token_bucket_allows_the_burst_then_spaces_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0, 0, 0]
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    clock.advance(10)  # refills to the burst, not beyond
    assert [bucket.reserve() for _ in range(4)] == pytest.approx([0, 0, 0, 0.1])


def test_token_bucket_try_take_never_goes_into_debt() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1, burst=2, clock=clock)
    assert [bucket.try_take() for _ in range(3)] == [True, True, False]
    clock.advance(0.5)
    assert not bucket.try_take()
    clock.advance(0.5)
    assert bucket.try_take()
    assert bucket.reserve() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "seconds",
    [0.0, 0.999, 1.0, 59.5, 1_795_920_619.2, 1_795_920_619.999, 1_795_920_620.0, 1_795_920_619.0, -0.5],
)
def test_rfc3339_is_the_utc_second_whatever_was_formatted_before(seconds: float) -> None:
    # rfc3339 remembers the last second it formatted: each call, after any other (these run
    # in sequence, back and forth across second boundaries), must still give its own second.
    for before in (seconds, seconds - 1, seconds + 0.5, seconds + 1, 0.0):
        rfc3339(before)
        assert rfc3339(seconds) == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
