"""Sharding between real memop processes (``--sharding``): replicas split the Memcacheds, a
killed replica's shards move to the others, and no Memcached is ever written by a replica that
did not hold its shard at that moment.

Who held which shard when comes from what the API server saw, as the leader election tests read
terms: a replica's successful writes of a shard's Lease alternate between taking it (holder:
itself) and clearing it (after draining), so its holding intervals are [take, clear],
open-ended when it was killed. Every write memop sent to a Memcached-managed object must fall
inside an interval of its sender on that Memcached's shard (the ring's shard of its uid). Run
with the ShardedListAndWatch gate on (server-side filtering) and off (every replica filters
itself).

On a real cluster (USE_EXISTING_CLUSTER=true, KUBECONFIG) the same tests run unchanged: the
memop processes run here with that kubeconfig, watching and leasing in the test's fresh
namespace only (deleted after, with its Leases and Memcacheds); who wrote what comes from
kube-apiserver's audit log when KUBE_AUDIT_LOG names it (tests/shardcheck.py), else those
checks are skipped, once everything else has run; the server's own gate decides which of
gate-on and gate-off runs (the other is skipped). Convergence is memop's part only (a
Deployment at the size, the generation observed in status): pods need not run.

Short timings (lease 4 s, renew deadline 3 s, retry 0.5 s) keep the tests fast.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.leaderelection.lease import JITTER_FACTOR
from memop.runtime.sharding.probe import server_filters_by_shard_selector
from memop.testing.apiserver.requestlog import RequestRecord
from memop.testing.envtest import Kube
from memop.testing.memcached import memcached_manifest, reconciled
from memop.testing.process import MemopProcess, MemopProcesses, sample_value
from memop.testing.wait import wait_for
from tests.shardcheck import MANAGED, NO_AUDIT_LOG, check_memcached_writes_inside_holdings, requests_in

TIMEOUT = 60
GATE = "ShardedListAndWatch"
SHARDS = 8
# Longer than the leader election tests' (2 s / 1.5 s): four replicas, the server and the test
# share two cores here, and a replica starved of CPU for its renew deadline rightly exits.
LEASE_DURATION = 4.0
RETRY_PERIOD = 0.5  # a replica renews its member Lease this often


def sharding_args(namespace: str) -> tuple[str, ...]:
    """A replica's flags: its Leases and the Memcacheds it watches in the test's namespace only."""
    return (
        "--sharding",
        "--shards", str(SHARDS),
        "--watch-namespace", namespace,
        "--leader-election-namespace", namespace,
        "--leader-elect-lease-duration", f"{LEASE_DURATION}s",
        "--leader-elect-renew-deadline", "3s",
        "--leader-elect-retry-period", f"{RETRY_PERIOD}s",
        "--max-concurrent-reconciles", "2",
    )  # fmt: skip


@pytest.fixture(params=[True, False], ids=["gate-on", "gate-off"])
def apiserver_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The in-memory server with the gate on or off (ignored on a real cluster: see ``gate``)."""
    return {
        "simulate_controllers": True,
        "pod_ready_delay": 0.05,
        "feature_gates": {GATE: request.param},
    }


@pytest.fixture
async def gate(kube: Kube, client: Client, namespace: str, apiserver_options: dict[str, Any]) -> bool:
    """Whether the API server filters by shardSelector, as it answers memop's probe (a built-in
    kind's list echoes ``metadata.shardInfo`` only with the gate on).
    The in-memory server must answer as the parameter set its gate; on a real cluster the
    server's own gate decides, and the parameter asking for the other is skipped."""
    wanted = apiserver_options["feature_gates"][GATE]
    filters = await server_filters_by_shard_selector(client, namespace)
    if filters != wanted and kube.real:
        pytest.skip(
            f"the cluster's API server has its {GATE} gate {'on' if filters else 'off'} "
            f"(it {'filters by' if filters else 'ignores'} shardSelector): this case needs it "
            f"{'on' if wanted else 'off'}"
        )
    assert filters == wanted, f"the in-memory server with {GATE}={wanted} answered as if {GATE}={filters}"
    return filters


@pytest.fixture
async def memops(kube: Kube, namespace: str) -> AsyncIterator[MemopProcesses]:
    """memop processes on the test's cluster, in-memory or real (the conftest's run on the
    in-memory server only), stopped before the namespace is deleted."""
    assert kube.kubeconfig is not None  # the plugin's kube always has one
    group = MemopProcesses(kube.kubeconfig)
    yield group
    await group.stop()


def assert_writes_inside_holdings(
    records: list[RequestRecord], namespace: str, uids: dict[tuple[str, str], str]
) -> None:
    assert check_memcached_writes_inside_holdings(records, uids, shards=SHARDS, lease_namespace=namespace)


async def converge(client: Client, namespace: str, names: Sequence[str]) -> None:
    for name in names:
        await wait_for(lambda n=name: reconciled(client, namespace, n, size=1), timeout=TIMEOUT)  # type: ignore[misc]


async def owned(process: MemopProcess) -> float:
    if process.returncode is not None:
        errors = [r.get("msg") for r in process.records if r.get("level") == "error"]
        raise AssertionError(f"replica {process.identity()} exited with {process.returncode}: {errors[-3:]}")
    samples = await process.samples()
    return sample_value(samples, "memop_sharding_shards_owned", group="memop") or 0.0


async def test_replicas_share_the_memcacheds_and_a_killed_ones_move(
    kube: Kube, client: Client, memops: MemopProcesses, namespace: str, gate: bool
) -> None:
    replicas = list(await asyncio.gather(*(memops.start(*sharding_args(namespace)) for _ in range(3))))
    await asyncio.gather(*(p.wait_ready(TIMEOUT) for p in replicas))

    async def split_evenly(processes: Sequence[MemopProcess]) -> bool:
        counts = sorted([await owned(p) for p in processes])
        return sum(counts) == SHARDS and counts[-1] - counts[0] <= 1

    await wait_for(lambda: split_evenly(replicas), timeout=TIMEOUT)
    names = [f"mc-{i}" for i in range(12)]
    for name in names:
        await client.create(MEMCACHEDS, memcached_manifest(name), namespace)
    await converge(client, namespace, names)
    # Before any ring change, each Memcached's writes came from one replica only.
    before_the_kill = requests_in(kube, namespace)
    if before_the_kill is not None:  # else skipped at the end, once the rest has run
        writers: dict[str, set[str]] = {}
        for record in before_the_kill:
            managed = (record.resource, record.subresource) in MANAGED
            if record.user_agent.startswith("memop/") and record.verb in ("patch", "update") and managed:
                writers.setdefault(record.name, set()).add(record.user_agent)
        assert set(writers) == set(names)
        assert all(len(agents) == 1 for agents in writers.values()), writers

    victim = replicas[0]
    killed_at = time.time()
    assert await victim.kill() == -signal.SIGKILL
    survivors = replicas[1:]
    await wait_for(lambda: split_evenly(survivors), timeout=TIMEOUT)
    moved_by = time.time()
    # Taken over once the lease had expired in the others' eyes, not before: a lease duration
    # after the victim's last renewal, which came up to a jittered retry period before the kill.
    assert moved_by - killed_at >= LEASE_DURATION - RETRY_PERIOD * JITTER_FACTOR
    later = [f"late-{i}" for i in range(8)]
    for name in later:
        await client.create(MEMCACHEDS, memcached_manifest(name), namespace)
    for name in names[:4]:
        # A merge patch, as kubectl's: a read-modify-write would race the survivors' status
        # writes (on a real cluster, each Deployment status change the controller-manager makes).
        await client.patch(MEMCACHEDS, name, {"spec": {"size": 2}}, namespace)
    await converge(client, namespace, later)
    for name in names[:4]:
        await wait_for(lambda n=name: reconciled(client, namespace, n, size=2), timeout=TIMEOUT)  # type: ignore[misc]

    # Every Memcached is in exactly one survivor's cache.
    held = 0.0
    for process in survivors:
        samples = await process.samples()
        held += (
            sample_value(samples, "memop_sharding_objects_owned", resource="memcacheds.cache.example.com")
            or 0
        )
    assert held == len(names) + len(later)
    for process in survivors:
        samples = await process.samples()
        assert sample_value(samples, "memop_sharding_server_side", group="memop") == (1.0 if gate else 0.0)
        mode_line = process.find(
            lambda r: "shardSelector" in r.get("msg", "") and "sharding group" in r.get("msg", "")
        )
        assert mode_line is not None
        assert ("server-side" in mode_line["msg"]) == gate

    records = requests_in(kube, namespace)
    if records is None:
        pytest.skip(NO_AUDIT_LOG)
    uids = {}
    for name in names + later:
        uids[(namespace, name)] = (await client.get(MEMCACHEDS, name, namespace))["metadata"]["uid"]
    assert_writes_inside_holdings(records, namespace, uids)


async def test_rebalancing_two_four_three_while_memcacheds_change_loses_nothing(
    kube: Kube, client: Client, memops: MemopProcesses, namespace: str, gate: bool
) -> None:
    """Scale 2 -> 4 -> 3 replicas (two joins, then a SIGTERM) while Memcacheds are created, scaled
    and deleted without pause: every change converges, and no write arrived outside its sender's
    holding of the Memcached's shard. With the gate only: the ring's moves are the same without
    it (the other test and tests/runtime/test_sharding_manager.py cover the fallback)."""
    if not gate:
        pytest.skip("rebalancing is checked with the gate on; the fallback elsewhere")
    replicas = list(await asyncio.gather(*(memops.start(*sharding_args(namespace)) for _ in range(2))))
    await asyncio.gather(*(p.wait_ready(TIMEOUT) for p in replicas))
    uids: dict[tuple[str, str], str] = {}
    sizes: dict[str, int] = {}
    deleted: set[str] = set()
    churning = True

    async def churn() -> None:
        index = 0
        while churning:
            name = f"churn-{index}"
            created = await client.create(MEMCACHEDS, memcached_manifest(name), namespace)
            uids[(namespace, name)] = created["metadata"]["uid"]
            sizes[name] = 1
            if index >= 2:
                await client.patch(MEMCACHEDS, f"churn-{index - 2}", {"spec": {"size": 2}}, namespace)
                sizes[f"churn-{index - 2}"] = 2
            if index >= 4 and index % 3 == 0:
                await client.delete(MEMCACHEDS, f"churn-{index - 4}", namespace)
                deleted.add(f"churn-{index - 4}")
            index += 1
            await asyncio.sleep(0.05)

    churner = asyncio.create_task(churn())
    try:
        await asyncio.sleep(1.0)  # changes under way before the ring changes
        joined = list(await asyncio.gather(*(memops.start(*sharding_args(namespace)) for _ in range(2))))
        await asyncio.gather(*(p.wait_ready(TIMEOUT) for p in joined))
        replicas += joined
        await wait_for(lambda: sum_owned_is(replicas, SHARDS, spread=1), timeout=TIMEOUT)
        assert await replicas[1].terminate() == 0
        survivors = [p for p in replicas if p is not replicas[1]]
        await wait_for(lambda: sum_owned_is(survivors, SHARDS, spread=1), timeout=TIMEOUT)
        await asyncio.sleep(1.0)  # and on after it
    finally:
        churning = False
        await churner
    for name, size in sizes.items():
        if name in deleted:
            await wait_for(lambda n=name: gone(client, namespace, n), timeout=TIMEOUT)  # type: ignore[misc]
        else:
            await wait_for(lambda n=name, s=size: reconciled(client, namespace, n, size=s), timeout=TIMEOUT)  # type: ignore[misc]
    records = requests_in(kube, namespace)
    if records is None:
        pytest.skip(NO_AUDIT_LOG)
    assert_writes_inside_holdings(records, namespace, uids)


async def sum_owned_is(processes: Sequence[MemopProcess], total: int, *, spread: int) -> bool:
    counts = sorted([await owned(p) for p in processes])
    return sum(counts) == total and counts[-1] - counts[0] <= spread


async def gone(client: Client, namespace: str, name: str) -> bool:
    try:
        await client.get(MEMCACHEDS, name, namespace)
    except NotFound:
        return True
    return False
