"""Leader election between real memop processes: one reconciles, a standby takes over safely.

Every assertion about who did what comes from the in-memory API server's request log, where
each request carries its process's User-Agent ``memop/<version> (<identity>)``:

- leadership terms are computed from the successful Lease writes: a term of process P starts
  at P's first successful create/update of the Lease after someone else's and lasts until
  P's last one of that run;
- a write to a Memcached-managed object (memcacheds, memcacheds/status, deployments) by P is
  legitimate only inside P's term, at most one lease duration after P's last successful
  Lease write. Checked over the whole run, this says no two replicas ever wrote in
  overlapping terms.

Short timings (lease 2 s, renew deadline 1.5 s, retry 0.5 s) keep the tests fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass

from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import LEASES
from memop.runtime.leaderelection.lease import JITTER_FACTOR
from memop.testing.apiserver.requestlog import RequestRecord
from memop.testing.apiserver.server import ApiServer
from memop.testing.envtest import Kube
from memop.testing.memcached import available, memcached_manifest
from memop.testing.process import MemopProcess, MemopProcesses, sample_value
from memop.testing.wait import wait_for

TIMEOUT = 30
LEASE_NAME = "memop-leader.cache.example.com"
LEASE_NAMESPACE = "default"
LEASE_DURATION = 2.0
RENEW_DEADLINE = 1.5
RETRY_PERIOD = 0.5
LEADER_ARGS = (
    "--leader-elect",
    "--leader-election-namespace", LEASE_NAMESPACE,
    "--leader-elect-lease-duration", f"{LEASE_DURATION}s",
    "--leader-elect-renew-deadline", f"{RENEW_DEADLINE}s",
    "--leader-elect-retry-period", f"{RETRY_PERIOD}s",
)  # fmt: skip
# The longest a candidate waits between two attempts (client-go's jittered retry period).
MAX_RETRY_WAIT = RETRY_PERIOD * (1 + JITTER_FACTOR)
# For process scheduling on a loaded CI machine, on top of the protocol's own bounds.
ALLOWANCE = 0.7
MANAGED = {("memcacheds", ""), ("memcacheds", "status"), ("deployments", "")}
WRITES = ("create", "update", "patch", "delete", "deletecollection")


async def converge(client: Client, namespace: str, *names: str) -> None:
    for name in names:
        await wait_for(lambda n=name: available(client, namespace, n), timeout=TIMEOUT)  # type: ignore[misc]


def agent(process: MemopProcess) -> str:
    ua = process.user_agent()
    assert ua is not None, "the process has not logged its identity yet"
    return ua


async def holder(client: Client) -> str:
    try:
        lease = await client.get(LEASES, LEASE_NAME, LEASE_NAMESPACE)
    except NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def wait_leader(client: Client, candidates: Sequence[MemopProcess]) -> MemopProcess:
    """The candidate holding the lease, once one does."""

    async def leader() -> MemopProcess | None:
        identity = await holder(client)
        return next((p for p in candidates if identity and p.identity() == identity), None)

    found = await wait_for(leader, timeout=TIMEOUT)
    assert found is not None
    return found


async def master_status_is(process: MemopProcess, expected: float) -> bool:
    """Whether ``leader_election_master_status{name=<lease>}`` reads ``expected`` right now."""
    samples = await process.samples()
    return sample_value(samples, "leader_election_master_status", name=LEASE_NAME) == expected


def lease_writes(server: ApiServer) -> list[RequestRecord]:
    """Successful creates and updates of the Lease, in arrival order."""
    records = [
        r
        for r in server.log.filter(resource="leases", namespace=LEASE_NAMESPACE)
        if r.verb in ("create", "update") and r.status in (200, 201) and (r.name in ("", LEASE_NAME))
    ]
    return sorted(records, key=lambda r: r.time)


def managed_writes(server: ApiServer) -> list[RequestRecord]:
    """Every write request memop processes sent for Memcached-managed objects (any answer)."""
    records = [
        r
        for r in server.log.filter(user_agent="memop/")
        if r.verb in WRITES and (r.resource, r.subresource) in MANAGED
    ]
    return sorted(records, key=lambda r: r.time)


@dataclass
class Term:
    agent: str
    start: float  # arrival of its first successful Lease write
    last: float  # arrival of its last successful Lease write


def terms(server: ApiServer) -> list[Term]:
    found: list[Term] = []
    for write in lease_writes(server):
        if found and found[-1].agent == write.user_agent:
            found[-1].last = write.time
        else:
            found.append(Term(write.user_agent, write.time, write.time))
    return found


def assert_writes_only_in_own_terms(server: ApiServer) -> None:
    """No managed write outside its writer's leadership term (see the module docstring)."""
    all_terms = terms(server)
    assert all_terms, "nobody ever held the lease"
    for write in managed_writes(server):
        current = [t for t in all_terms if t.start <= write.time]
        assert current, f"{write.verb} {write.resource} by {write.user_agent} before anyone led"
        term = current[-1]
        assert term.agent == write.user_agent, (
            f"{write.verb} {write.resource}/{write.subresource} {write.namespace}/{write.name} by "
            f"{write.user_agent} at {write.time:.3f} while {term.agent} led (since {term.start:.3f})"
        )
        assert write.time <= term.last + LEASE_DURATION, (
            f"{write.verb} {write.resource} by {write.user_agent} at {write.time:.3f}, after its lease "
            f"(last renewed at {term.last:.3f}) could have expired"
        )


def first_lease_write_after(server: ApiServer, ua: str, after: float) -> float | None:
    return next((w.time for w in lease_writes(server) if w.user_agent == ua and w.time >= after), None)


def last_lease_write(server: ApiServer, ua: str) -> float:
    return max(w.time for w in lease_writes(server) if w.user_agent == ua)


async def test_three_replicas_one_leads_then_kill_and_sigterm_hand_over(
    kube: Kube, client: Client, memops: MemopProcesses, namespace: str
) -> None:
    server = kube.fake
    replicas = list(await asyncio.gather(*(memops.start(*LEADER_ARGS) for _ in range(3))))
    await asyncio.gather(*(p.wait_ready(TIMEOUT) for p in replicas))  # standbys are ready too
    first = await wait_leader(client, replicas)
    for process in replicas:
        expected = 1.0 if process is first else 0.0
        await wait_for(lambda p=process, e=expected: master_status_is(p, e), timeout=TIMEOUT)  # type: ignore[misc]

    await client.create(MEMCACHEDS, memcached_manifest("one", size=2), namespace)
    await converge(client, namespace, "one")
    assert {w.user_agent for w in managed_writes(server)} == {agent(first)}

    # SIGKILL: no release; a standby takes over once the lease has expired in its eyes.
    killed_at = time.time()
    assert await first.kill() == -signal.SIGKILL
    standbys = [p for p in replicas if p is not first]
    second = await wait_leader(client, standbys)
    takeover = first_lease_write_after(server, agent(second), killed_at)
    assert takeover is not None
    # A standby waits a lease duration after it last saw the lease change; it notices the
    # change within one (jittered) retry period and tries again within another.
    assert takeover - killed_at <= LEASE_DURATION + 2 * MAX_RETRY_WAIT + ALLOWANCE
    assert takeover - last_lease_write(server, agent(first)) >= LEASE_DURATION
    await client.create(MEMCACHEDS, memcached_manifest("two"), namespace)
    await converge(client, namespace, "two")

    # SIGTERM: in-flight work ends, the lease is released, the last standby leads at once.
    third = next(p for p in standbys if p is not second)
    termed_at = time.time()
    assert await second.terminate() == 0
    assert second.find(lambda r: r.get("msg", "").startswith("released lease"))
    assert await wait_leader(client, [third]) is third
    handover = first_lease_write_after(server, agent(third), termed_at)
    assert handover is not None
    assert handover - termed_at <= 3.0
    await client.create(MEMCACHEDS, memcached_manifest("three"), namespace)
    await converge(client, namespace, "one", "two", "three")
    assert await master_status_is(third, 1.0)

    writers = {w.user_agent for w in managed_writes(server)}
    assert writers <= {agent(first), agent(second), agent(third)}
    assert agent(third) in writers
    assert [t.agent for t in terms(server)] == [agent(first), agent(second), agent(third)]
    assert_writes_only_in_own_terms(server)


async def test_a_leader_that_cannot_renew_stops_writing_before_its_lease_expires(
    kube: Kube, client: Client, memops: MemopProcesses, namespace: str
) -> None:
    server = kube.fake
    replicas = list(await asyncio.gather(*(memops.start(*LEADER_ARGS) for _ in range(2))))
    await asyncio.gather(*(p.wait_ready(TIMEOUT) for p in replicas))
    leader = await wait_leader(client, replicas)
    standby = next(p for p in replicas if p is not leader)
    await client.create(MEMCACHEDS, memcached_manifest("before"), namespace)
    await converge(client, namespace, "before")
    assert {w.user_agent for w in managed_writes(server)} == {agent(leader)}

    # Keep work coming while the leader's renewals fail, so a write after it should have
    # stopped would show in the log.
    created: list[str] = []

    async def keep_creating() -> None:
        while True:
            name = f"during-{len(created)}"
            await client.create(MEMCACHEDS, memcached_manifest(name), namespace)
            created.append(name)
            await asyncio.sleep(0.1)

    server.faults.fail(500, times=None, verb="update", resource="leases", user_agent=agent(leader))
    creator = asyncio.create_task(keep_creating())
    try:
        code = await leader.wait(timeout=TIMEOUT)
    finally:
        creator.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await creator
    assert code != 0
    assert leader.find(lambda r: r.get("msg", "").startswith("leader election lost"))
    assert await wait_leader(client, [standby]) is standby
    await converge(client, namespace, "before", *created)

    last_renewal = last_lease_write(server, agent(leader))
    own = [w.time for w in managed_writes(server) if w.user_agent == agent(leader)]
    assert max(own) <= last_renewal + LEASE_DURATION
    takeover = first_lease_write_after(server, agent(standby), last_renewal)
    assert takeover is not None
    assert takeover - last_renewal >= LEASE_DURATION
    assert any(w.user_agent == agent(standby) for w in managed_writes(server))
    assert_writes_only_in_own_terms(server)
