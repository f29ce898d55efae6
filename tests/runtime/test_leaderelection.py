"""Lease leader election against the in-memory API server, over real HTTP through the real Client.

Each candidate has its own FakeClock (so skewed clocks are easy to stage) and no jitter, so the
schedule is exact: a candidate attempts at start, then every retry period. ``Candidate.tick``
advances one candidate's clock by one period and waits until the attempt that fell due has
completed (or its run ended); a candidate whose clock is not advanced is frozen in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from memop.runtime.client.client import Client
from memop.runtime.leaderelection.lease import (
    LeaderElectionConfig,
    LeaderElector,
    LeadershipLost,
    default_identity,
    micro_time,
)
from memop.runtime.util.clock import Clock, FakeClock, RealClock
from memop.testing.apiserver.errors import ApiError as StoreError
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

NS = "default"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
WALL = 1_700_000_000.0


def lease_of(server: ApiServer, name: str) -> dict[str, Any]:
    rtype = server.store.resource("coordination.k8s.io", "v1", "leases")
    return server.store.get(rtype, NS, name)


def spec_of(server: ApiServer, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = lease_of(server, name)["spec"]
    return spec


def write_lease(server: ApiServer, name: str, spec: dict[str, Any]) -> None:
    """Another writer (not an elector) creates or replaces the lease's spec."""
    rtype = server.store.resource("coordination.k8s.io", "v1", "leases")
    try:
        lease = server.store.get(rtype, NS, name)
    except StoreError:
        server.store.create(
            rtype,
            NS,
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name},
                "spec": spec,
            },
        )
        return
    lease["spec"] = spec
    server.store.update(rtype, NS, name, lease)


def master_status(name: str) -> float | None:
    return REGISTRY.get_sample_value("leader_election_master_status", {"name": name})


@pytest.fixture
async def connect(apiserver: ApiServer) -> AsyncIterator[Callable[..., Client]]:
    """Clients of the test server, one ApiClient (connection pool) each, closed afterwards."""
    api_clients: list[ApiClient] = []

    def make(user_agent: str, **options: Any) -> Client:
        api = ApiClient(apiserver.client_configuration())
        api_clients.append(api)
        # No client-side retries unless asked: each elector attempt is then exactly one try
        # per request.
        options.setdefault("max_retries", 0)
        return Client(api, user_agent=user_agent, **options)

    yield make
    for api in api_clients:
        await api.close()


@dataclass
class Candidate:
    """One elector with its clock, its run() task and what its callbacks saw."""

    elector: LeaderElector
    clock: FakeClock
    task: asyncio.Task[None] = field(init=False)
    calls: list[str] = field(default_factory=list)
    stopped_at: list[float] = field(default_factory=list)

    @property
    def identity(self) -> str:
        return self.elector.config.identity

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(), name=f"elector-{self.identity}")

    async def settle(self, attempts: int) -> None:
        """Wait until ``attempts`` attempts have completed, or run() has ended."""
        await wait_for(
            lambda: self.elector.attempts >= attempts or self.task.done(),
            timeout=5,
            message=lambda: f"{self.identity}: attempts={self.elector.attempts} {self.elector.last_error}",
        )

    async def tick(self, seconds: float) -> None:
        """Move this candidate's time forward and wait for the attempt that fell due."""
        due = self.elector.attempts + 1
        self.clock.advance(seconds)
        await self.settle(due)

    async def stop(self) -> BaseException | None:
        """Cancel run() and return how it ended (CancelledError, LeadershipLost, ...)."""
        self.task.cancel()
        try:
            await self.task
        except BaseException as error:
            return error
        return None


@pytest.fixture
async def candidates(
    connect: Callable[..., Client],
) -> AsyncIterator[Callable[..., Candidate]]:
    made: list[Candidate] = []

    def make(
        identity: str,
        lease_name: str,
        *,
        clock: FakeClock | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = True,
        client_retries: int = 0,
    ) -> Candidate:
        """``client_retries``: the Client's own retries (memop's default is 5), on this
        candidate's clock; 0 makes each elector attempt one try per request."""
        clock = clock or FakeClock(wall_start=WALL)
        config = LeaderElectionConfig(
            lease_name,
            NS,
            identity=identity,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
            release_on_cancel=release_on_cancel,
        )
        calls: list[str] = []
        stopped_at: list[float] = []

        def stopped() -> None:
            calls.append("stopped")
            stopped_at.append(clock.monotonic())

        elector = LeaderElector(
            connect(identity, max_retries=client_retries, clock=clock),
            config,
            clock=clock,
            rand=lambda: 0.0,
            on_started_leading=lambda: calls.append("started"),
            on_stopped_leading=stopped,
            on_new_leader=lambda holder: calls.append(f"new:{holder}"),
        )
        candidate = Candidate(elector, clock, calls=calls, stopped_at=stopped_at)
        made.append(candidate)
        return candidate

    yield make
    for candidate in made:
        if hasattr(candidate, "task") and not candidate.task.done():
            await candidate.stop()


# --- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"lease_duration": 10.0, "renew_deadline": 10.0},
            "lease duration .* greater than the renew deadline",
        ),
        ({"lease_duration": 9.0}, "lease duration .* greater than the renew deadline"),
        (
            {"renew_deadline": 2.4, "retry_period": 2.0},
            r"renew deadline .* greater than 1.2 x the retry period",
        ),
        ({"retry_period": 0.0}, "retry period must be a positive number"),
        ({"retry_period": -1.0}, "retry period must be a positive number"),
        ({"renew_deadline": float("nan")}, "renew deadline must be a positive number"),
        ({"lease_duration": float("inf")}, "lease duration must be a positive number"),
        ({"lease_duration": 0.9, "renew_deadline": 0.5, "retry_period": 0.1}, "at least 1s"),
        ({"identity": ""}, "identity must not be empty"),
        ({"lease_name": ""}, "lease name must not be empty"),
        ({"namespace": ""}, "lease namespace must not be empty"),
    ],
)
def test_config_validation_rejects_unsafe_timings(settings: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"lease_name": "memop", "namespace": "ns", **settings}
    config = LeaderElectionConfig(**fields)
    with pytest.raises(ValueError, match=message):
        config.validate()
    with pytest.raises(ValueError, match=message):
        LeaderElector(object(), config)  # type: ignore[arg-type]


def test_config_defaults_are_controller_runtimes() -> None:
    config = LeaderElectionConfig("memop", "ns")
    config.validate()
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15.0, 10.0, 2.0)
    assert config.release_on_cancel
    assert config.lease_duration_seconds == 15
    LeaderElectionConfig("l", "ns", lease_duration=1.0, renew_deadline=0.6, retry_period=0.2).validate()
    assert LeaderElectionConfig("l", "ns", lease_duration=1.5).lease_duration_seconds == 2


def test_default_identity_is_hostname_and_a_fresh_uuid() -> None:
    identity = default_identity()
    host, _, suffix = identity.rpartition("_")
    assert host == socket.gethostname()
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", suffix)
    assert default_identity() != identity
    assert LeaderElectionConfig("l", "ns").identity != LeaderElectionConfig("l", "ns").identity


def test_micro_time_is_rfc3339_with_microseconds_in_utc() -> None:
    assert micro_time(1_700_000_000.25) == "2023-11-14T22:13:20.250000Z"


# --- one candidate ------------------------------------------------------------------------------


async def test_absent_lease_is_created_then_renewed_by_one_put_each_period(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    a = candidates("a", "solo")
    a.start()
    await wait_for(lambda: a.elector.is_leader)
    assert a.elector.leader_elected.is_set()
    assert [(r.verb, r.status) for r in apiserver.log.filter(resource="leases", user_agent="a")] == [
        ("get", 404),
        ("create", 201),
    ]
    created_at = micro_time(a.clock.time())
    assert spec_of(apiserver, "solo") == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "acquireTime": created_at,
        "renewTime": created_at,
        "leaseTransitions": 0,
    }
    assert MICRO_TIME.match(created_at)

    for _ in range(3):
        await a.tick(2.0)
        spec = spec_of(apiserver, "solo")
        assert spec["renewTime"] == micro_time(a.clock.time())
        assert (spec["holderIdentity"], spec["acquireTime"], spec["leaseTransitions"]) == ("a", created_at, 0)
    # The leader's renewal is a single PUT guarded by the resourceVersion it last wrote.
    assert [r.verb for r in apiserver.log.filter(resource="leases", user_agent="a")][2:] == ["update"] * 3
    assert a.elector.is_leader
    assert a.calls == ["new:a", "started"]


async def test_metric_and_callbacks_follow_leadership_zero_one_zero(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    write_lease(
        apiserver, "flip", {"holderIdentity": "other", "leaseDurationSeconds": 4, "leaseTransitions": 2}
    )
    a = candidates("a", "flip", lease_duration=4.0, renew_deadline=3.0, retry_period=1.0)
    a.start()
    await a.settle(1)
    assert master_status("flip") == 0
    assert not a.elector.is_leader
    assert a.elector.leader == "other"
    assert "held by other" in a.elector.last_error
    for _ in range(3):
        await a.tick(1.0)
        assert master_status("flip") == 0
    await a.tick(1.0)  # 4 s after it first saw the record, which never changed
    assert a.elector.is_leader
    assert master_status("flip") == 1
    assert spec_of(apiserver, "flip")["leaseTransitions"] == 3
    assert isinstance(await a.stop(), asyncio.CancelledError)
    assert master_status("flip") == 0
    assert a.elector.lost.is_set()
    assert not a.elector.leader_elected.is_set()
    assert a.calls == ["new:other", "new:a", "started", "stopped"]


async def test_a_raising_callback_does_not_disturb_the_election(
    apiserver: ApiServer, connect: Callable[[str], Client]
) -> None:
    def boom(*_: object) -> None:
        raise RuntimeError("callback bug")

    clock = FakeClock()
    config = LeaderElectionConfig("cb", NS, identity="a")
    elector = LeaderElector(
        connect("a"),
        config,
        clock=clock,
        on_started_leading=boom,
        on_new_leader=boom,
        on_stopped_leading=boom,
    )
    task = asyncio.create_task(elector.run())
    await wait_for(lambda: elector.attempts >= 1)
    assert elector.is_leader
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert spec_of(apiserver, "cb")["holderIdentity"] == ""


async def test_run_may_only_be_called_once(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    a = candidates("a", "once")
    a.start()
    await a.settle(1)
    with pytest.raises(RuntimeError, match="once"):
        await a.elector.run()


# --- two candidates -----------------------------------------------------------------------------


async def test_candidates_starting_together_elect_exactly_one(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    group = [candidates(name, "together") for name in ("a", "b", "c")]
    for candidate in group:
        candidate.start()
    for candidate in group:
        await candidate.settle(1)
    leaders = [c.identity for c in group if c.elector.is_leader]
    assert len(leaders) == 1
    assert spec_of(apiserver, "together")["holderIdentity"] == leaders[0]
    # Everyone keeps time together: the leader renews, the others see it and keep waiting.
    for _ in range(10):
        for candidate in group:
            await candidate.tick(2.0)
        assert [c.identity for c in group if c.elector.is_leader] == leaders
        assert all(c.elector.leader == leaders[0] for c in group)


async def test_standby_never_compares_remote_renew_time_with_its_own_clock(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    # The leader's wall clock is an hour behind: its renewTime always looks an hour old to b.
    a = candidates("a", "skew", clock=FakeClock(start=1000.0, wall_start=WALL - 3600), retry_period=2.5)
    b = candidates("b", "skew", clock=FakeClock(start=77_000.0, wall_start=WALL), retry_period=2.5)
    a.start()
    await wait_for(lambda: a.elector.is_leader)
    b.start()
    await b.settle(1)
    assert b.elector.leader == "a"
    assert not b.elector.is_leader

    # Both keep time for 30 s, twice the lease duration: a renews, b sees each renewal.
    for _ in range(12):
        await a.tick(2.5)
        await b.tick(2.5)
        assert a.elector.is_leader
        assert not b.elector.is_leader
    assert spec_of(apiserver, "skew")["renewTime"] == micro_time(a.clock.time())

    # a freezes (stops renewing). b last saw the record change at its last attempt.
    last_change_seen = b.clock.monotonic()
    for _ in range(5):
        await b.tick(2.5)
        assert not b.elector.is_leader, f"b took over after {b.clock.monotonic() - last_change_seen}s"
    await b.tick(2.5)
    assert b.clock.monotonic() - last_change_seen == 15.0
    assert b.elector.is_leader
    spec = spec_of(apiserver, "skew")
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    assert spec["acquireTime"] == spec["renewTime"] == micro_time(b.clock.time())

    # a is cancelled late: releasing must not clear a lease that is no longer a's.
    await a.stop()
    assert spec_of(apiserver, "skew")["holderIdentity"] == "b"
    assert b.calls == ["new:a", "new:b", "started"]


async def test_leader_that_stops_renewing_is_replaced_after_lease_duration_of_local_time(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    # This time the leader's wall clock is ahead: its renewTime looks like the future to b.
    a = candidates(
        "a", "crash", clock=FakeClock(wall_start=WALL + 3600), retry_period=2.5, release_on_cancel=False
    )
    b = candidates("b", "crash", clock=FakeClock(start=5.0, wall_start=WALL), retry_period=2.5)
    a.start()
    await wait_for(lambda: a.elector.is_leader)
    b.start()
    await b.settle(1)
    await a.tick(2.5)
    await b.tick(2.5)
    last_change_seen = b.clock.monotonic()
    writes_before = apiserver.log.count(verb="update", resource="leases", user_agent="a")

    assert isinstance(await a.stop(), asyncio.CancelledError)
    assert not a.elector.is_leader
    assert apiserver.log.count(verb="update", resource="leases", user_agent="a") == writes_before
    assert spec_of(apiserver, "crash")["holderIdentity"] == "a"

    for _ in range(5):
        await b.tick(2.5)
        assert not b.elector.is_leader
    await b.tick(2.5)
    assert b.elector.is_leader
    assert b.clock.monotonic() - last_change_seen == 15.0
    assert spec_of(apiserver, "crash")["leaseTransitions"] == 1


async def test_released_lease_is_taken_over_within_one_retry_period(
    apiserver: ApiServer, candidates: Callable[..., Candidate], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memop.leaderelection")
    a = candidates("a", "handover")
    b = candidates("b", "handover", clock=FakeClock(start=300.0, wall_start=WALL + 7))
    a.start()
    await wait_for(lambda: a.elector.is_leader)
    b.start()
    await b.settle(1)
    await a.tick(2.0)

    assert isinstance(await a.stop(), asyncio.CancelledError)
    released = spec_of(apiserver, "handover")
    assert released["holderIdentity"] == ""
    assert released["leaseDurationSeconds"] == 1
    assert released["renewTime"] == released["acquireTime"] == micro_time(a.clock.time())
    assert released["leaseTransitions"] == 0
    assert a.calls == ["new:a", "started", "stopped"]

    await b.tick(2.0)
    assert b.elector.is_leader
    spec = spec_of(apiserver, "handover")
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["leaseDurationSeconds"]) == ("b", 1, 15)
    messages = [r.getMessage() for r in caplog.records if r.name == "memop.leaderelection"]
    assert messages == [
        "attempting to acquire leader lease default/handover...",
        "new leader elected for lease default/handover: a",
        "successfully acquired lease default/handover",
        "attempting to acquire leader lease default/handover...",
        "new leader elected for lease default/handover: a",
        "stopped leading lease default/handover: shutting down",
        "released lease default/handover",
        "new leader elected for lease default/handover: b",
        "successfully acquired lease default/handover",
    ]


async def test_cancelled_standby_writes_nothing(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    a = candidates("a", "standby")
    b = candidates("b", "standby")
    a.start()
    await wait_for(lambda: a.elector.is_leader)
    b.start()
    await b.settle(1)
    assert isinstance(await b.stop(), asyncio.CancelledError)
    assert apiserver.log.counts_by_verb(resource="leases", user_agent="b") == {"get": 1}
    assert not b.elector.lost.is_set()
    assert b.calls == ["new:a"]
    assert spec_of(apiserver, "standby")["holderIdentity"] == "a"


async def test_conflicting_write_loses_that_round_without_crashing(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    write_lease(apiserver, "race", {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 2})
    # b's PUT is held back long enough for another writer to get in first.
    held = apiserver.faults.delay(0.3, times=1, verb="update", resource="leases", user_agent="b")
    b = candidates("b", "race", retry_period=2.5)
    b.start()
    await wait_for(lambda: held.hits == 1)
    write_lease(
        apiserver, "race", {"holderIdentity": "intruder", "leaseDurationSeconds": 15, "leaseTransitions": 3}
    )
    await b.settle(1)
    assert not b.task.done()
    assert not b.elector.is_leader
    assert "409" in b.elector.last_error
    assert apiserver.log.filter(verb="update", resource="leases", user_agent="b")[0].status == 409

    await b.tick(2.5)  # sees the intruder's record for the first time: valid for 15 s from now
    seen = b.clock.monotonic()
    assert b.elector.leader == "intruder"
    while not b.elector.is_leader:
        await b.tick(2.5)
    assert b.clock.monotonic() - seen == 15.0
    assert spec_of(apiserver, "race")["leaseTransitions"] == 4


# --- losing the lease ---------------------------------------------------------------------------


@pytest.mark.parametrize("failure", ["500 on lease updates", "API server down"])
async def test_leader_stops_by_renew_deadline_when_renewals_fail(
    apiserver: ApiServer,
    candidates: Callable[..., Candidate],
    failure: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a = candidates("a", "failing")
    a.start()
    await wait_for(lambda: a.elector.is_leader)
    await a.tick(2.0)
    last_renewal = a.clock.monotonic()
    assert spec_of(apiserver, "failing")["renewTime"] == micro_time(a.clock.time())

    if failure == "API server down":
        await apiserver.stop()
    else:
        apiserver.faults.fail(500, times=None, verb="update", resource="leases")
    for _ in range(4):  # attempts 2, 4, 6 and 8 s after the last renewal fail; a still leads
        await a.tick(2.0)
        assert a.elector.is_leader
        assert not a.elector.lost.is_set()
        assert a.elector.last_error
    a.clock.advance(2.0)
    await wait_for(a.task.done)

    assert a.stopped_at == [last_renewal + 10.0]  # renew_deadline after the last renewal was sent
    assert a.stopped_at[0] < last_renewal + 15.0  # before anyone may take the lease over
    with pytest.raises(LeadershipLost, match=re.escape("failed to renew lease default/failing within 10.0s")):
        a.task.result()
    assert a.elector.lost.is_set()
    assert not a.elector.is_leader
    assert master_status("failing") == 0
    assert a.calls == ["new:a", "started", "stopped"]
    failed = [r for r in caplog.records if r.getMessage().startswith("failed to renew lease default/failing")]
    assert len(failed) == 4
    assert all(r.levelno == logging.WARNING for r in failed)
    lost = [
        r for r in caplog.records if r.getMessage().startswith("lost leadership of lease default/failing")
    ]
    assert len(lost) == 1
    assert lost[0].levelno == logging.ERROR


async def test_renewal_that_hangs_is_abandoned_at_the_renew_deadline(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    a = candidates("a", "hang")
    a.start()
    await wait_for(lambda: a.elector.is_leader)
    acquired = a.clock.monotonic()
    stuck = apiserver.faults.delay(30.0, verb="update", resource="leases")
    a.clock.advance(2.0)
    await wait_for(lambda: stuck.hits == 1)  # the renewal PUT is now in flight, unanswered
    a.clock.advance(7.5)
    assert a.elector.is_leader
    a.clock.advance(0.5)
    assert not a.elector.is_leader  # at the deadline, even before the loop notices
    await wait_for(a.task.done)
    assert a.stopped_at == [acquired + 10.0]
    assert isinstance(a.task.exception(), LeadershipLost)
    assert "no answer from the API server" in a.elector.last_error
    apiserver.faults.clear()


async def test_acquire_attempt_that_hangs_is_abandoned_and_retried(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    stuck = apiserver.faults.delay(30.0, times=1, verb="get", resource="leases")
    a = candidates("a", "slow-start")
    a.start()
    await wait_for(lambda: stuck.hits == 1)
    a.clock.advance(10.0)  # an acquire attempt is bounded by renew_deadline
    await a.settle(1)
    assert not a.elector.is_leader
    assert "no answer" in a.elector.last_error
    await a.tick(2.0)
    assert a.elector.is_leader
    # The abandoned attempt left no cancellation behind: the task keeps working normally.
    await a.tick(2.0)
    assert a.elector.is_leader
    assert not a.task.done()


# --- Retry-After --------------------------------------------------------------------------------
# The Client waits out a 429's Retry-After before its retry. These are the cases where the wait
# is cut short (the attempt's deadline, a shutdown) and the elector asks the lease again in a
# new call: that call must not come sooner than the server asked either.


def lease_requests(apiserver: ApiServer, identity: str) -> list[tuple[str, int]]:
    return [(r.verb, r.status) for r in apiserver.log.filter(resource="leases", user_agent=identity)]


async def test_release_on_shutdown_waits_out_the_retry_after_of_the_cut_renewal(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    """Shut down while the renewal waits out a 429: the release asks only once the server's
    Retry-After has passed (within its retry_period bound), then clears the holder."""
    a = candidates("a", "throttled-release", client_retries=5)
    a.start()
    await wait_for(lambda: a.elector.is_leader)
    throttle = apiserver.faults.fail(429, times=1, verb="update", resource="leases", retry_after=1)
    a.clock.advance(2.0)
    # The renewal's deadline timer and the Client's 1 s wait for its retry.
    await wait_for(lambda: throttle.hits == 1 and a.clock.pending_timers() == 2)
    before = lease_requests(apiserver, "a")
    assert before[-1] == ("update", 429)
    a.task.cancel()
    await wait_for(a.elector.lost.is_set)  # the renewal is cut: its timers are gone
    # The release is bounded by retry_period (a timer), and waits on the Client (another).
    await wait_for(lambda: a.task.done() or a.clock.pending_timers() == 2)
    assert lease_requests(apiserver, "a") == before
    a.clock.advance(1.0)
    await wait_for(a.task.done)
    assert lease_requests(apiserver, "a") == [*before, ("get", 200), ("update", 200)]
    assert spec_of(apiserver, "throttled-release")["holderIdentity"] == ""


async def test_acquire_attempt_cut_while_throttled_waits_out_the_retry_after_before_asking_again(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    """A 429 asks for 20 s, longer than an acquire attempt may take (renew_deadline, 10 s):
    the attempt is abandoned at its deadline, and the next one, a retry_period later, waits
    out the rest of the 20 s before it reads the lease."""
    throttle = apiserver.faults.fail(429, times=1, verb="get", resource="leases", retry_after=20)
    a = candidates("a", "throttled-acquire", client_retries=5)
    started = a.clock.monotonic()
    a.start()
    await wait_for(lambda: throttle.hits == 1 and a.clock.pending_timers() == 2)
    a.clock.advance(10.0)
    await a.settle(1)
    assert not a.elector.is_leader
    a.clock.advance(2.0)  # the next attempt is due
    await wait_for(lambda: a.elector.is_leader or a.clock.pending_timers() == 2)
    assert lease_requests(apiserver, "a") == [("get", 429)]
    a.clock.advance(7.9)
    await wait_for(lambda: a.elector.is_leader or a.clock.pending_timers() == 2)
    assert lease_requests(apiserver, "a") == [("get", 429)]
    a.clock.advance(0.1)
    await wait_for(lambda: a.elector.is_leader)
    assert a.clock.monotonic() - started == 20.0
    assert lease_requests(apiserver, "a") == [("get", 429), ("get", 404), ("create", 201)]


async def test_leader_throttled_past_its_renew_deadline_stops_there_without_asking_again(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    """Honouring Retry-After never stretches leadership: a renewal told to wait 30 s is
    abandoned at the renew deadline, the leader stops then, and it sends nothing more."""
    a = candidates("a", "throttled-renewal", client_retries=5, release_on_cancel=False)
    a.start()
    await wait_for(lambda: a.elector.is_leader)
    acquired = a.clock.monotonic()
    throttle = apiserver.faults.fail(429, times=1, verb="update", resource="leases", retry_after=30)
    a.clock.advance(2.0)
    await wait_for(lambda: throttle.hits == 1 and a.clock.pending_timers() == 2)
    a.clock.advance(8.0)
    await wait_for(a.task.done)
    assert a.stopped_at == [acquired + 10.0]
    assert isinstance(a.task.exception(), LeadershipLost)
    assert lease_requests(apiserver, "a") == [("get", 404), ("create", 201), ("update", 429)]


@pytest.mark.parametrize(
    ("holder", "reason"), [("thief", "now held by thief"), ("", "released by its holder")]
)
async def test_leader_stops_at_once_when_it_sees_another_or_no_holder(
    apiserver: ApiServer, candidates: Callable[..., Candidate], holder: str, reason: str
) -> None:
    a = candidates("a", "taken")
    a.start()
    await wait_for(lambda: a.elector.is_leader)
    # Someone rewrites the lease (an operator by hand): a's next fast-path PUT conflicts, the
    # read shows it is not a's any more, and a stops at once instead of retrying until its
    # deadline, and without writing itself back (a standby may already have taken it).
    spec = spec_of(apiserver, "taken")
    write_lease(apiserver, "taken", {**spec, "holderIdentity": holder})
    await a.tick(2.0)
    await wait_for(a.task.done)
    with pytest.raises(LeadershipLost, match=reason):
        a.task.result()
    assert a.stopped_at == [a.clock.monotonic()]
    assert spec_of(apiserver, "taken")["holderIdentity"] == holder
    assert [(r.verb, r.status) for r in apiserver.log.filter(resource="leases", user_agent="a")][2:] == [
        ("update", 409),
        ("get", 200),
    ]


async def test_real_clock_bounds_a_stuck_renewal_by_the_renew_deadline(
    apiserver: ApiServer, connect: Callable[[str], Client]
) -> None:
    stopped: list[float] = []
    clock: Clock = RealClock()
    config = LeaderElectionConfig(
        "real", NS, identity="a", lease_duration=1.0, renew_deadline=0.6, retry_period=0.2
    )
    elector = LeaderElector(
        connect("a"), config, clock=clock, on_stopped_leading=lambda: stopped.append(time.time())
    )
    task = asyncio.create_task(elector.run())
    try:
        await wait_for(lambda: elector.is_leader, timeout=3)
        await wait_for(
            lambda: apiserver.log.count(verb="update", resource="leases", status=200) >= 1, timeout=3
        )
        apiserver.faults.delay(5.0, verb="update", resource="leases")
        await wait_for(task.done, timeout=3)
    finally:
        apiserver.faults.clear()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert isinstance(task.exception(), LeadershipLost)
    # The server stamps a request when it arrives, after the elector sent it: the leader
    # stopped within renew_deadline of its last successful renewal, well inside the lease.
    last_ok = max(r.time for r in apiserver.log.filter(verb="update", resource="leases", status=200))
    assert len(stopped) == 1
    assert stopped[0] - last_ok <= 0.6 + 0.15  # the deadline, plus event-loop lag
    assert stopped[0] - last_ok < 1.0
