"""Reachability: one probe for the whole process while the API server cannot be reached, every
waiter released as soon as it answers, whatever the outage's length (on a fake clock)."""

from __future__ import annotations

import asyncio

import pytest

from memop.runtime.client.errors import ConnectError, TransportError
from memop.runtime.client.reachability import Reachability
from memop.runtime.util.clock import FakeClock
from memop.testing.wait import wait_for


class Server:
    """The probe's view of an API server: down (no answer) or answering with ``status``."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.status: int | None = None  # None: no answer
        self.probed_at: list[float] = []

    async def probe(self) -> int:
        self.probed_at.append(self.clock.monotonic())
        if self.status is None:
            raise TransportError("connection refused")
        return self.status


async def run_until(clock: FakeClock, reach: Reachability, until: float, step: float = 0.05) -> None:
    """Advance the fake clock to ``until`` in small steps, letting the probe run between them."""
    while clock.monotonic() < until - 1e-9:
        clock.advance(min(step, until - clock.monotonic()))
        for _ in range(5):
            await asyncio.sleep(0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=0.0)


async def test_reachable_until_told_otherwise_and_waiting_then_costs_nothing(clock: FakeClock) -> None:
    server = Server(clock)
    reach = Reachability(server.probe, clock=clock)
    assert reach.reachable
    await asyncio.wait_for(reach.wait(), 1)
    assert server.probed_at == []


@pytest.mark.parametrize("outage", [3.0, 90.0])
async def test_waiters_are_released_within_half_a_second_of_the_answer_however_long_the_outage(
    clock: FakeClock, outage: float
) -> None:
    server = Server(clock)
    reach = Reachability(server.probe, clock=clock)
    reach.unreachable(ConnectError("refused"))
    reach.unreachable(ConnectError("refused again"))  # a second reporter starts no second probe
    waiters = [asyncio.create_task(reach.wait()) for _ in range(20)]
    await run_until(clock, reach, outage)
    assert not any(w.done() for w in waiters)
    assert not reach.reachable
    # At most a few requests a second in all, whatever the number of waiters.
    assert len(server.probed_at) <= 2 * outage + 3
    back = clock.monotonic()
    server.status = 200
    await run_until(clock, reach, back + 0.5)
    await wait_for(lambda: all(w.done() for w in waiters), timeout=1)
    assert reach.reachable
    assert server.probed_at[-1] - back <= 0.5
    assert reach.outages == 1
    probes = len(server.probed_at)
    await run_until(clock, reach, back + 5)
    assert len(server.probed_at) == probes  # no probing once it answers


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_an_answer_that_says_nothing_of_readiness_still_means_reachable(
    clock: FakeClock, status: int
) -> None:
    server = Server(clock)
    reach = Reachability(server.probe, clock=clock)
    reach.unreachable(ConnectError("refused"))
    server.status = status
    await run_until(clock, reach, 0.5)
    assert reach.reachable


async def test_a_server_answering_not_ready_is_waited_for_up_to_the_grace(clock: FakeClock) -> None:
    server = Server(clock)
    reach = Reachability(server.probe, clock=clock, not_ready_grace=5.0)
    reach.unreachable(ConnectError("refused"))
    await run_until(clock, reach, 1.0)
    server.status = 500  # listening, a readiness check still failing
    answering = clock.monotonic()
    await run_until(clock, reach, answering + 4.0)
    assert not reach.reachable
    server.status = 200
    await run_until(clock, reach, answering + 4.6)
    assert reach.reachable

    # One that never gets ready is let through after the grace: the reflectors' own backoff
    # and the Retry-After of its answers protect it from then on.
    reach.unreachable(ConnectError("refused"))
    server.status = 429
    start = clock.monotonic()
    await run_until(clock, reach, start + 4.5)
    assert not reach.reachable
    await run_until(clock, reach, start + 6.0)
    assert reach.reachable
    assert reach.outages == 2


async def test_close_stops_the_probe(clock: FakeClock) -> None:
    server = Server(clock)
    reach = Reachability(server.probe, clock=clock)
    reach.unreachable(ConnectError("refused"))
    await run_until(clock, reach, 1.0)
    await reach.close()
    probes = len(server.probed_at)
    await run_until(clock, reach, 3.0)
    assert len(server.probed_at) == probes
    assert clock.pending_timers() == 0
