"""Sharding membership against the in-memory API server, over real HTTP through the real Client.

Members share one FakeClock and have no jitter, so a round falls due every retry period (2 s);
``Group.tick`` advances the clock one period and waits until every running member has finished
the round that fell due. The work on shards is a recording listener: after every tick, no shard
may be worked on by two members, counting a shard being given up as still worked on until its
drain has finished.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from memop.runtime.client.client import Client
from memop.runtime.client.resources import LEASES
from memop.runtime.sharding import membership as membership_module
from memop.runtime.sharding.membership import (
    GROUP_LABEL,
    MembershipLost,
    ShardingConfig,
    ShardMembership,
    member_lease_name,
)
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

NS = "default"
SHARDS = 8


@dataclass
class Work:
    """What a replica's controllers would do with the shards the membership hands them."""

    active: set[int] = field(default_factory=set)
    draining: set[int] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    gate: asyncio.Event | None = None  # while unset, drains do not finish
    lost_called: bool = False

    async def acquired(self, shards: Sequence[int]) -> None:
        self.calls.append(f"acquired {', '.join(map(str, shards))}")
        self.active.update(shards)

    async def releasing(self, shard: int) -> None:
        self.calls.append(f"releasing {shard}")
        self.draining.add(shard)
        try:
            if self.gate is not None:
                await self.gate.wait()
        finally:
            self.draining.discard(shard)
            self.active.discard(shard)

    def lost(self) -> None:
        self.lost_called = True
        self.active.clear()


@dataclass
class Member:
    membership: ShardMembership
    work: Work
    client: Client
    task: asyncio.Task[None] | None = None

    @property
    def identity(self) -> str:
        return self.membership.config.identity

    def start(self) -> None:
        self.task = asyncio.create_task(self.membership.run(), name=f"member-{self.identity}")

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def kill(self) -> None:
        """SIGKILL: stop at once, without leaving."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        self.work.active.clear()  # a dead process works on nothing
        self.work.draining.clear()


@dataclass
class Group:
    clock: FakeClock
    members: list[Member]
    server: ApiServer

    async def settle(self) -> None:
        for member in self.members:
            if member.running:
                await wait_for(lambda m=member: m.membership.rounds >= 1 or not m.running, timeout=5)

    async def tick(self, periods: int = 1) -> None:
        for _ in range(periods):
            due = {id(m): m.membership.rounds + 1 for m in self.members if m.running}
            self.clock.advance(2.0)
            for member in self.members:
                wanted = due.get(id(member))
                if wanted is not None:
                    await wait_for(
                        lambda m=member, d=wanted: m.membership.rounds >= d or not m.running,
                        timeout=5,
                        message=lambda m=member: f"{m.identity} did not finish its round",
                    )
            # Let release tasks that can finish do so before checking.
            for _ in range(20):
                await asyncio.sleep(0)
            self.check_exclusive()

    def check_exclusive(self) -> None:
        seen: dict[int, str] = {}
        for member in self.members:
            for shard in member.work.active | member.work.draining:
                assert shard not in seen, f"shard {shard} worked on by {seen[shard]} and {member.identity}"
                seen[shard] = member.identity

    def holders(self) -> dict[int, str]:
        rtype = self.server.store.resource("coordination.k8s.io", "v1", "leases")
        held = {}
        for shard in range(SHARDS):
            lease = self.server.store.get(rtype, NS, f"test-shard-{shard}-of-{SHARDS}")
            held[shard] = lease["spec"].get("holderIdentity") or ""
        return held


@pytest.fixture
async def group(apiserver: ApiServer) -> AsyncIterator[Callable[..., Any]]:
    clients: list[ApiClient] = []
    made: list[Member] = []
    clock = FakeClock(wall_start=1_700_000_000.0)
    state = Group(clock, made, apiserver)

    # No initial join delay unless a test is about it: the others start members one by one.
    def add(identity: str, *, shards: int = SHARDS, start: bool = True, join_delay: float = 0.0) -> Member:
        api = ApiClient(apiserver.client_configuration())
        clients.append(api)
        client = Client(api, user_agent=identity, max_retries=0, clock=clock)
        work = Work()
        config = ShardingConfig("test", NS, identity=identity, shards=shards, initial_join_delay=join_delay)
        member = Member(ShardMembership(client, config, work, clock=clock, rand=lambda: 0.0), work, client)
        made.append(member)
        if start:
            member.start()
        return member

    def make() -> tuple[Group, Callable[..., Member]]:
        return state, add

    yield make
    for member in made:
        if member.task is not None and not member.task.done():
            await member.kill()
    for api in clients:
        await api.close()


def owned_counts(group: Group) -> list[int]:
    return [len(m.work.active) for m in group.members if m.running]


async def test_a_lone_member_takes_every_shard(group: Callable[..., Any], apiserver: ApiServer) -> None:
    state, add = group()
    a = add("a")
    await state.settle()
    assert a.work.active == set(range(SHARDS))
    # Taken in one round, handed over in one call: the cache relists once, labels in one pass.
    assert a.work.calls == ["acquired " + ", ".join(map(str, range(SHARDS)))]
    assert set(state.holders().values()) == {"a"}
    assert REGISTRY.get_sample_value("memop_sharding_shards_owned", {"group": "test"}) == SHARDS
    leases = await a.client.list(LEASES, NS, label_selector=f"{GROUP_LABEL}=test")
    names = {item["metadata"]["name"] for item in leases["items"]}
    assert member_lease_name("test", "a") in names
    assert len(names) == SHARDS + 1


async def test_members_started_together_split_the_ring_without_handing_a_shard_over(
    group: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """The first of three replicas started together lists the Leases before the others have
    joined: with the initial join delay it takes nothing until the delay has passed, and then
    every member takes its share once, none given up."""
    caplog.set_level(logging.INFO, logger="memop.sharding")
    state, add = group()
    first = add("a", join_delay=2.0)
    await state.settle()  # its first round: it sees only itself
    assert first.work.calls == []
    assert "no member at work: waiting 2.0s" in caplog.text
    others = [add(name, join_delay=2.0) for name in "bc"]
    await state.settle()
    assert all(m.work.calls == [] for m in others)
    await state.tick()
    assert sorted(owned_counts(state)) == [2, 3, 3]
    for member in state.members:
        assert [call.split()[0] for call in member.work.calls] == ["acquired"], member.work.calls
    assert state.holders() == {
        s: next(m.identity for m in state.members if s in m.work.active) for s in range(SHARDS)
    }


async def test_a_lone_member_waits_the_initial_join_delay_not_a_round_longer(
    group: Callable[..., Any], apiserver: ApiServer
) -> None:
    state, add = group()
    a = add("a", join_delay=0.5)
    await state.settle()
    assert a.work.active == set()
    rounds = a.membership.rounds
    # Its next round falls due as the delay ends (and the rounds' 50 ms margin), not a retry
    # period (2 s) later.
    state.clock.advance(0.55)
    await wait_for(lambda: a.work.active == set(range(SHARDS)), timeout=5)
    assert a.membership.rounds == rounds + 1


async def test_a_member_joining_a_working_group_takes_its_share_without_waiting(
    group: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memop.sharding")
    state, add = group()
    add("a")
    await state.settle()
    add("b", join_delay=60.0)
    await state.settle()
    await state.tick(2)  # a gives up half at b's first round; b takes them at the next
    assert owned_counts(state) == [SHARDS // 2, SHARDS // 2]
    assert "waiting" not in caplog.text


async def test_a_joining_member_gets_its_share_only_after_the_holder_drained_it(
    group: Callable[..., Any],
) -> None:
    state, add = group()
    a = add("a")
    await state.settle()
    a.work.gate = asyncio.Event()
    b = add("b")
    await state.settle()
    await state.tick(3)
    # a gives up half, but its drains have not finished: b must not have started on them.
    assert len(a.work.draining) == SHARDS // 2
    assert b.work.active == set()
    assert set(state.holders().values()) == {"a"}
    a.work.gate.set()
    await state.tick(2)
    assert owned_counts(state) == [SHARDS // 2, SHARDS // 2]
    assert a.work.active.isdisjoint(b.work.active)
    assert state.holders() == {s: ("a" if s in a.work.active else "b") for s in range(SHARDS)}
    assert REGISTRY.get_sample_value("memop_sharding_members", {"group": "test"}) == 2


async def test_four_members_split_the_ring_evenly_and_a_killed_ones_shards_move_after_the_lease(
    group: Callable[..., Any],
) -> None:
    state, add = group()
    members = [add(name) for name in "abcd"]
    await state.settle()
    await state.tick(4)
    assert owned_counts(state) == [2, 2, 2, 2]
    victim = members[1]
    orphaned = set(victim.work.active)
    await victim.kill()
    # Within the lease duration (15 s) the others wait: b may still be working, for all they know.
    await state.tick(6)
    assert all(orphaned.isdisjoint(m.work.active) for m in members if m is not victim)
    await state.tick(3)
    taken = set().union(*(m.work.active for m in members if m is not victim))
    assert taken == set(range(SHARDS))
    assert sorted(owned_counts(state)) == [2, 3, 3]


async def test_a_killed_members_shards_are_taken_as_its_lease_runs_out_not_a_round_later(
    group: Callable[..., Any],
) -> None:
    state, add = group()
    a, b = add("a"), add("b")
    await state.settle()
    await state.tick(4)
    orphaned = set(b.work.active)
    await b.kill()
    await state.tick(1)  # a sees b's last renewal, if it had not yet
    # When a counts b gone: the last change of b's Lease it saw, plus the lease duration.
    end = a.membership._member_ends()["b"]
    assert 12.0 < end - state.clock.monotonic() <= 15.0
    while end - state.clock.monotonic() > 2.0:  # a renews and runs its rounds meanwhile
        await state.tick(1)
    state.clock.advance(end - state.clock.monotonic() - 0.01)
    for _ in range(20):
        await asyncio.sleep(0)
    assert orphaned.isdisjoint(a.work.active)  # not one moment early
    state.clock.advance(0.1)  # past it, but well short of the next 2 s round
    await wait_for(lambda: orphaned <= a.work.active, timeout=5)
    state.check_exclusive()


async def test_a_renewal_counts_from_when_the_watch_saw_it_not_from_the_next_round(
    group: Callable[..., Any], apiserver: ApiServer
) -> None:
    """Renewals are seen as they are written (a watch on the group's Leases), not at the next
    round's LIST: a member's shards move a lease duration after its last renewal, not up to a
    retry period later."""
    state, add = group()
    a, b = add("a"), add("b")
    await state.settle()
    await state.tick(3)
    await b.kill()
    # b's last renewal lands between two of a's rounds (written here, as b would have).
    state.clock.advance(1.0)
    renewed_at = state.clock.monotonic()
    name = member_lease_name("test", "b")
    lease = await a.client.get(LEASES, name, NS)
    lease["spec"]["renewTime"] = "2023-11-14T22:13:30.000000Z"
    written = await a.client.update(LEASES, lease)
    version = written["metadata"]["resourceVersion"]
    await wait_for(lambda: version in a.membership._first_seen.get(name, {}), timeout=5)
    state.clock.advance(1.0)  # a's next round lists the renewal a second after it was written
    await wait_for(lambda: a.membership._seen[name].version == version, timeout=5)
    assert a.membership._member_ends()["b"] == renewed_at + 15.0


async def test_a_member_that_leaves_hands_over_at_the_next_round(group: Callable[..., Any]) -> None:
    state, add = group()
    a, b = add("a"), add("b")
    await state.settle()
    await state.tick(3)
    assert owned_counts(state) == [4, 4]
    assert b.task is not None
    b.task.cancel()
    await asyncio.gather(b.task, return_exceptions=True)
    b.work.active.clear()  # the manager stops the controllers before it leaves
    await b.membership.leave()
    assert "b" not in state.holders().values()
    await state.tick(1)
    assert a.work.active == set(range(SHARDS))


async def test_a_member_that_cannot_renew_stops_before_anyone_may_take_over(
    group: Callable[..., Any], apiserver: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    state, add = group()
    a, b = add("a"), add("b")
    await state.settle()
    await state.tick(3)
    assert owned_counts(state) == [4, 4]
    apiserver.faults.fail(503, times=None, user_agent="a")
    lost_at = None
    with caplog.at_level(logging.ERROR, logger="memop.sharding"):
        for tick in range(10):
            await state.tick(1)
            if a.task is not None and a.task.done() and lost_at is None:
                lost_at = tick
            # b never works on a shard while a still may.
            assert not (a.work.active and b.work.active & {s for s, h in state.holders().items() if h == "a"})
    assert lost_at is not None
    assert lost_at <= 5
    assert a.work.lost_called
    assert a.work.active == set()
    assert a.task is not None
    assert isinstance(a.task.exception(), MembershipLost)
    assert "could not renew" in caplog.text
    await state.tick(3)
    assert b.work.active == set(range(SHARDS))


async def test_members_with_another_number_of_shards_take_nothing_until_the_others_are_gone(
    group: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    state, add = group()
    a = add("a")
    await state.settle()
    with caplog.at_level(logging.ERROR, logger="memop.sharding"):
        c = add("c", shards=4)
        await state.settle()
        await state.tick(2)
    assert c.work.active == set()
    assert "another number of shards: a (8)" in caplog.text
    await a.kill()
    await state.tick(10)
    assert c.work.active == {0, 1, 2, 3}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"group": "Bad_Group"}, "must be a DNS label"),
        ({"shards": 10}, "power of two"),
        ({"lease_duration": 10.0}, "greater than the renew deadline"),
        ({"retry_period": 9.0}, "greater than 1.2 x the retry period"),
        ({"namespace": ""}, "lease namespace must not be empty"),
        ({"initial_join_delay": -1.0}, "initial join delay must be 0 or a positive number"),
        ({"initial_join_delay": float("nan")}, "initial join delay must be 0 or a positive number"),
    ],
)
def test_bad_settings_are_refused_with_what_is_wrong(settings: dict[str, Any], message: str) -> None:
    config = ShardingConfig(**{"group": "memop", "namespace": "ns", "identity": "x", **settings})
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_member_lease_names_fold_identities_into_what_a_name_allows() -> None:
    assert member_lease_name("memop", "Host_1f2e-ab") == "memop-member-host-1f2e-ab"
    assert len(member_lease_name("memop", "x" * 400)) <= 253


async def test_leaving_after_the_claim_ran_out_still_hands_over_and_never_raises(
    group: Callable[..., Any],
) -> None:
    state, add = group()
    a = add("a")
    await state.settle()
    assert a.task is not None
    a.task.cancel()
    await asyncio.gather(a.task, return_exceptions=True)
    a.work.active.clear()
    state.clock.advance(30.0)  # a long graceful shutdown: no renewal since
    await a.membership.leave()
    assert set(state.holders().values()) == {""}


@pytest.mark.parametrize(
    ("error", "level", "said"),
    [
        (
            MembershipLost("could not renew Lease ns/m within 3.0s"),
            logging.DEBUG,
            "ended with the membership",
        ),
        (RuntimeError("a listener bug"), logging.ERROR, "release shard 2 failed"),
    ],
)
async def test_how_a_release_ended_is_always_retrieved_and_said(
    error: Exception, level: int, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A release runs unawaited (_start_release). Found by the sharded chaos test: a release
    # whose Lease clear ran past the renew deadline ended with MembershipLost, and asyncio
    # logged "Task exception was never retrieved" when the task was collected.
    unretrieved: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))

    async def release() -> None:
        raise error

    try:
        with caplog.at_level(logging.DEBUG, logger="memop.sharding"):
            task = asyncio.create_task(release(), name="release shard 2")
            task.add_done_callback(membership_module._said_release_end)
            await asyncio.wait({task})
            await asyncio.sleep(0)  # the done callbacks run in the loop's next step
            del task
            gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert unretrieved == []
    assert [r.levelno for r in caplog.records if said in r.getMessage()] == [level]
