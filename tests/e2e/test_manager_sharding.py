"""Sharding between real memop processes (``--sharding``): replicas split the Memcacheds, a
killed replica's shards move to the others, and no Memcached is ever written by a replica that
did not hold its shard at that moment.

Who held which shard when comes from the in-memory API server's request log, as the leader
election tests read terms: a replica's successful writes of a shard's Lease alternate between
taking it (holder: itself) and clearing it (after draining), so its holding intervals are
[take, clear], open-ended when it was killed. Every write memop sent to a Memcached-managed
object must fall inside an interval of its sender on that Memcached's shard (the ring's shard
of its uid). Run with the ShardedListAndWatch gate on (server-side filtering) and off (every
replica filters itself).

Short timings (lease 2 s, renew deadline 1.5 s, retry 0.5 s) keep the tests fast.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Sequence
from typing import Any

import pytest

from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.sharding.ring import Ring
from memop.testing.envtest import Kube
from memop.testing.memcached import available, memcached_manifest
from memop.testing.process import MemopProcess, MemopProcesses, sample_value
from memop.testing.requestlog import RequestRecord
from memop.testing.server import ApiServer
from memop.testing.wait import wait_for

TIMEOUT = 60
NAMESPACE = "default"
SHARDS = 8
LEASE_DURATION = 2.0
SHARDING_ARGS = (
    "--sharding",
    "--shards", str(SHARDS),
    "--leader-election-namespace", NAMESPACE,
    "--leader-elect-lease-duration", f"{LEASE_DURATION}s",
    "--leader-elect-renew-deadline", "1.5s",
    "--leader-elect-retry-period", "0.5s",
    "--max-concurrent-reconciles", "2",
)  # fmt: skip
MANAGED = {("memcacheds", ""), ("memcacheds", "status"), ("deployments", "")}
WRITES = ("create", "update", "patch", "delete", "deletecollection")


@pytest.fixture(params=[True, False], ids=["gate-on", "gate-off"])
def apiserver_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    return {
        "simulate_controllers": True,
        "pod_ready_delay": 0.05,
        "feature_gates": {"ShardedListAndWatch": request.param},
    }


def shard_lease(shard: int) -> str:
    return f"memop-shard-{shard}-of-{SHARDS}"


def holding(server: ApiServer) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """(user agent, shard) -> the intervals it held the shard (see the module docstring)."""
    writes: dict[tuple[str, int], list[float]] = {}
    for record in server.log.filter(resource="leases", namespace=NAMESPACE, verb="update"):
        if record.status != 200 or not record.name.startswith("memop-shard-"):
            continue
        shard = int(record.name.split("-")[2])
        writes.setdefault((record.user_agent, shard), []).append(record.time)
    intervals: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for key, times in writes.items():
        times.sort()
        pairs = [
            (times[i], times[i + 1] if i + 1 < len(times) else float("inf")) for i in range(0, len(times), 2)
        ]
        intervals[key] = pairs
    return intervals


def managed_writes(server: ApiServer) -> list[RequestRecord]:
    return sorted(
        (
            r
            for r in server.log.filter(user_agent="memop/")
            if r.verb in WRITES and (r.resource, r.subresource) in MANAGED
        ),
        key=lambda r: r.time,
    )


def assert_writes_inside_holdings(server: ApiServer, uids: dict[tuple[str, str], str]) -> None:
    ring = Ring(SHARDS)
    held = holding(server)
    checked = 0
    for write in managed_writes(server):
        uid = uids.get((write.namespace, write.name))
        if uid is None:
            continue  # not one of this test's Memcacheds
        shard = ring.shard_of_value(uid)
        intervals = held.get((write.user_agent, shard), [])
        assert any(start <= write.time <= end for start, end in intervals), (
            f"{write.verb} {write.resource}/{write.subresource} {write.namespace}/{write.name} "
            f"(shard {shard}) by {write.user_agent} at {write.time:.3f}, outside its holdings {intervals}"
        )
        checked += 1
    assert checked


async def converge(client: Client, namespace: str, names: Sequence[str]) -> None:
    for name in names:
        await wait_for(lambda n=name: available(client, namespace, n), timeout=TIMEOUT)  # type: ignore[misc]


async def owned(process: MemopProcess) -> float:
    samples = await process.samples()
    return sample_value(samples, "memop_sharding_shards_owned", group="memop") or 0.0


async def test_replicas_share_the_memcacheds_and_a_killed_ones_move(
    kube: Kube, client: Client, memops: MemopProcesses, namespace: str
) -> None:
    server = kube.fake
    replicas = list(await asyncio.gather(*(memops.start(*SHARDING_ARGS) for _ in range(3))))
    await asyncio.gather(*(p.wait_ready(TIMEOUT) for p in replicas))

    async def split_evenly(processes: Sequence[MemopProcess]) -> bool:
        counts = sorted([await owned(p) for p in processes])
        return sum(counts) == SHARDS and counts[-1] - counts[0] <= 1

    await wait_for(lambda: split_evenly(replicas), timeout=TIMEOUT)
    names = [f"mc-{i}" for i in range(12)]
    for name in names:
        await client.create(MEMCACHEDS, memcached_manifest(name), namespace)
    await converge(client, namespace, names)
    writers = {w.user_agent for w in managed_writes(server) if w.namespace == namespace}
    assert len(writers) == 3  # all three did some of the work

    victim = replicas[0]
    killed_at = time.time()
    assert await victim.kill() == -signal.SIGKILL
    survivors = replicas[1:]
    await wait_for(lambda: split_evenly(survivors), timeout=TIMEOUT)
    moved_by = time.time()
    # Taken over once the lease had expired in the others' eyes, not before.
    assert moved_by - killed_at >= LEASE_DURATION
    later = [f"late-{i}" for i in range(8)]
    for name in later:
        await client.create(MEMCACHEDS, memcached_manifest(name), namespace)
    for name in names[:4]:
        current = await client.get(MEMCACHEDS, name, namespace)
        current["spec"]["size"] = 2
        await client.update(MEMCACHEDS, current)
    await converge(client, namespace, later)
    for name in names[:4]:
        await wait_for(lambda n=name: available(client, namespace, n, size=2), timeout=TIMEOUT)  # type: ignore[misc]

    uids = {}
    for name in names + later:
        uids[(namespace, name)] = (await client.get(MEMCACHEDS, name, namespace))["metadata"]["uid"]
    assert_writes_inside_holdings(server, uids)
    gate = server.feature_gates["ShardedListAndWatch"]
    for process in survivors:
        samples = await process.samples()
        assert sample_value(samples, "memop_sharding_server_side", group="memop") == (1.0 if gate else 0.0)
        mode_line = process.find(
            lambda r: "shardSelector" in r.get("msg", "") and "sharding group" in r.get("msg", "")
        )
        assert mode_line is not None
        assert ("server-side" in mode_line["msg"]) == gate
