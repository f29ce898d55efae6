"""Leader for life between real memop processes (``--leader-election-mode leader-for-life``).

Each process plays a replica whose Pod is a Pod object in the in-memory server, named to it
by ``POD_NAME`` as the downward API would; the server's garbage collector deletes the lock
when that Pod is deleted, as kube-controller-manager's does. Who wrote what comes from the
server's request log, by each process's User-Agent.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from memop.builtin import PROJECT
from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.kubeconfig import running_in_cluster
from memop.runtime.client.resources import CONFIGMAPS, PODS
from memop.testing.apiserver.server import ApiServer
from memop.testing.envtest import Kube
from memop.testing.memcached import memcached_manifest
from memop.testing.operator import install_crd
from memop.testing.process import MemopProcess, MemopProcesses, sample_value
from memop.testing.wait import wait_for
from tests.e2e.test_manager_leader_election import agent, converge, managed_writes

TIMEOUT = 30
LOCK = "memop-leader.cache.example.com"
LOCK_NAMESPACE = "default"
MAX_BACKOFF = 0.2
ARGS = (
    "--leader-elect",
    "--leader-election-mode", "leader-for-life",
    "--leader-election-namespace", LOCK_NAMESPACE,
    "--leader-for-life-max-backoff", f"{MAX_BACKOFF}s",
    # The controllers whose CRDs install_every_crd installs.
    f"--controllers={','.join(PROJECT.controller_names)}",
)  # fmt: skip


async def install_every_crd(client: Client) -> None:
    """The CRDs of every controller memop runs by default (the fixture installs Memcached's)."""
    for definition in PROJECT.controllers:
        for crd in definition.crds():
            await install_crd(client, crd)


async def lock_owner(client: Client) -> str:
    try:
        lock = await client.get(CONFIGMAPS, LOCK, LOCK_NAMESPACE)
    except NotFound:
        return ""
    refs = lock["metadata"].get("ownerReferences") or []
    return str(refs[0]["name"]) if len(refs) == 1 else ""


async def master_status(process: MemopProcess) -> float | None:
    return sample_value(await process.samples(), "leader_election_master_status", name=LOCK)


async def replica(client: Client, memops: MemopProcesses, pod: str) -> MemopProcess:
    await client.create(
        PODS,
        {"metadata": {"name": pod}, "spec": {"containers": [{"name": "manager", "image": "memop"}]}},
        LOCK_NAMESPACE,
    )
    return await memops.start(*ARGS, env={"POD_NAME": pod})


def lock_created_at(server: ApiServer, ua: str) -> float | None:
    records = server.log.filter(resource="configmaps", namespace=LOCK_NAMESPACE, user_agent=ua)
    return next((r.time for r in records if r.verb == "create" and r.status == 201), None)


async def test_one_replica_leads_a_standby_never_reconciles_and_leads_once_the_pod_is_deleted(
    kube: Kube, client: Client, memops: MemopProcesses, namespace: str, record_property: object
) -> None:
    server = kube.fake
    await install_every_crd(client)
    first, second = await asyncio.gather(
        replica(client, memops, "memop-a"), replica(client, memops, "memop-b")
    )
    # Both are ready (caches synced) whichever leads, as with Leases.
    await asyncio.gather(first.wait_ready(TIMEOUT), second.wait_ready(TIMEOUT))
    owner = await wait_for(lambda: lock_owner(client), timeout=TIMEOUT)
    leader, standby = (first, second) if owner == "memop-a" else (second, first)
    await wait_for(lambda: _status_is(leader, 1.0), timeout=TIMEOUT)
    await wait_for(lambda: _status_is(standby, 0.0), timeout=TIMEOUT)
    await standby.wait_log(lambda r: r.get("msg", "").startswith("not the leader: lock"), TIMEOUT)

    await client.create(MEMCACHEDS, memcached_manifest("one", size=2), namespace)
    await converge(client, namespace, "one")
    assert {w.user_agent for w in managed_writes(server)} == {agent(leader)}

    # The leader's Pod goes: its process stops (the kubelet's SIGTERM), then the Pod object is
    # deleted, and the garbage collector deletes the lock. Nothing is released on the way out.
    assert await leader.terminate() == 0
    stopped_at = time.time()
    deleted_at = time.time()
    await client.delete(PODS, owner, LOCK_NAMESPACE)
    await wait_for(lambda: _status_is(standby, 1.0), timeout=TIMEOUT)
    takeover = lock_created_at(server, agent(standby))
    assert takeover is not None
    assert await lock_owner(client) == standby_pod(owner)
    # The standby waits at most its (jittered) maximum backoff once the collector acted.
    failover = takeover - deleted_at
    assert failover < MAX_BACKOFF * 1.2 + 2.0
    record_property("figures", {"leader_for_life_failover_s": round(failover, 3)})  # type: ignore[operator]

    await client.create(MEMCACHEDS, memcached_manifest("two"), namespace)
    await converge(client, namespace, "one", "two")
    writes = managed_writes(server)
    assert {w.user_agent for w in writes} == {agent(leader), agent(standby)}
    assert all(w.time <= stopped_at for w in writes if w.user_agent == agent(leader))
    assert all(w.time >= takeover for w in writes if w.user_agent == agent(standby))


def standby_pod(owner: str) -> str:
    return "memop-b" if owner == "memop-a" else "memop-a"


async def _status_is(process: MemopProcess, value: float) -> bool:
    return await master_status(process) == value


@pytest.mark.skipif(
    running_in_cluster(), reason="running in a cluster: leader for life is never skipped there"
)
async def test_outside_a_cluster_it_runs_without_election_only_when_asked(
    kube: Kube, client: Client, memops: MemopProcesses, namespace: str
) -> None:
    await install_every_crd(client)
    refused = await memops.start(*ARGS)
    assert await refused.wait(TIMEOUT) == 2
    assert refused.lines == [
        "memop: error: leader-for-life election needs POD_NAME (--pod-name), the Pod that owns the lock; "
        "outside a cluster, --leader-for-life-outside-cluster runs without election"
    ]

    alone = await memops.start(*ARGS, "--leader-for-life-outside-cluster")
    await alone.wait_ready(TIMEOUT)
    skipped = [r for r in alone.records if "election skipped" in r.get("msg", "")]
    assert len(skipped) == 1
    await client.create(MEMCACHEDS, memcached_manifest("alone"), namespace)
    await converge(client, namespace, "alone")
    assert await lock_owner(client) == ""
    assert kube.fake.log.filter(resource="configmaps", user_agent=agent(alone)) == []
