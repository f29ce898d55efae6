"""Chaos with sharding: three ``--sharding`` replicas keep every Memcached right while the cluster
misbehaves, and no two of them ever work on one Memcached at once.

The faults of tests/chaos/test_chaos.py, on the in-memory API server with the
ShardedListAndWatch gate on: every watch dropped every ``DROP_EVERY`` seconds, 7% of memop's
requests failing with 500 or 429 (Lease renewals, takes and releases included), once a 410 to
every watch, once a server restart (watch cache rebuilt), and once a replica SIGKILLed; the
supervisor starts a new replica in its place (a new identity: the ring changes twice). The
drops and failures go on while every Memcached is scaled, and then deleted.

Checked after each stage: every Memcached converged (or is gone, after the deletion), no
traceback in any replica's output, no exit without a logged reason. At the end, from the
server's request log only (memop.testing.apiserver.shardholding): every write a replica sent for a
Memcached or its Deployment arrived while that replica held the Memcached's shard.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.resources import LEASES, NAMESPACES
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import install_crd
from memop.testing.wait import wait_for
from tests.chaos.test_chaos import (
    NAMESPACES_USED,
    Chaos,
    Replicas,
    convergence_problems,
    create_memcached,
    get,
    in_batches,
    leftovers,
    stage_timeout,
)
from tests.shardcheck import check_memcached_writes_inside_holdings

pytestmark = pytest.mark.fake_only

CRS = 120
SHARDS = 8
LEASE_NAMESPACE = "default"
RESTART_DOWNTIME = 1.0
SHARDED_ARGS = [
    "--controllers", "memcached",
    "--sharding",
    "--shards", str(SHARDS),
    "--leader-election-namespace", LEASE_NAMESPACE,
    "--leader-elect-lease-duration", "4s",
    "--leader-elect-renew-deadline", "3s",
    "--leader-elect-retry-period", "500ms",
    "--max-concurrent-reconciles", "4",
    "--watch-namespace", ",".join(NAMESPACES_USED),
]  # fmt: skip


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(
        simulate_controllers=True, pod_ready_delay=0.05, feature_gates={"ShardedListAndWatch": True}
    ) as running:
        yield running


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="chaos-test")


def shards_held(server: ApiServer, replicas: Replicas) -> int:
    """Shards whose Lease names a live replica."""
    live = {p.identity() for p in replicas.running}
    held = 0
    for shard in range(SHARDS):
        lease = get(server, LEASES, LEASE_NAMESPACE, f"memop-shard-{shard}-of-{SHARDS}") or {}
        if (lease.get("spec") or {}).get("holderIdentity") in live:
            held += 1
    return held


async def test_sharded_replicas_converge_through_chaos_and_never_share_a_memcached(
    server: ApiServer, client: Client, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    server.write_kubeconfig(kubeconfig)
    await install_crd(client)
    for namespace in NAMESPACES_USED:
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
    keys = [(NAMESPACES_USED[i % len(NAMESPACES_USED)], f"mc-{i:03d}") for i in range(CRS)]
    replicas = Replicas(kubeconfig, args=SHARDED_ARGS, count=3)
    chaos = Chaos(server)
    one_offs: list[str] = []
    uids: dict[tuple[str, str], str] = {}
    try:
        await replicas.start()
        await wait_for(lambda: shards_held(server, replicas) == SHARDS, timeout=30, message=replicas.describe)
        # Ready: every replica's informers have listed its shards (its watches are open).
        await asyncio.gather(*(p.wait_ready(30) for p in replicas.running))
        chaos.start()

        async def expire_history() -> None:
            # The chaos drops every watch every few seconds: the 410 goes out once the replicas
            # have watches open again (right after a drop there may be none to reach).
            await wait_for(lambda: any(not w.closing for w in server.watches.watchers()), timeout=30)
            server.compact()
            expired = await server.expire_watches()
            one_offs.append(f"410 to {expired} watches")
            assert expired > 0

        async def restart_server() -> None:
            await server.restart(downtime=RESTART_DOWNTIME, rebuild_watch_cache=True)
            one_offs.append("API server restarted")

        async def kill_replica() -> None:
            victim = replicas.running[0]
            victim.send(signal.SIGKILL)
            one_offs.append(f"replica {victim.identity()} killed")

        async def stage(problems: Any) -> None:
            await wait_for(
                lambda: not problems(),
                timeout=stage_timeout(CRS),
                interval=0.25,
                message=lambda: "\n".join(problems()[:20]) + "\n" + replicas.describe(),
            )
            output = replicas.output_problems()
            assert not output, "\n\n".join(output[:5])

        await in_batches(
            keys, 4, lambda key: create_memcached(client, key), [expire_history, restart_server, kill_replica]
        )
        assert len(one_offs) == 3, one_offs
        await stage(lambda: convergence_problems(server, CRS, 1))
        for namespace, name in keys:
            uids[(namespace, name)] = (get(server, MEMCACHEDS, namespace, name) or {})["metadata"]["uid"]
        await asyncio.gather(*(client.patch(MEMCACHEDS, n, {"spec": {"size": 2}}, ns) for ns, n in keys))
        await stage(lambda: convergence_problems(server, CRS, 2))
        await asyncio.gather(*(client.delete(MEMCACHEDS, n, ns) for ns, n in keys))
        await stage(lambda: leftovers(server))
    finally:
        await chaos.stop()
        await replicas.stop()

    assert replicas.exits[-signal.SIGKILL] == 1, replicas.exits
    figures = chaos.figures()
    for fault in ("watch_drops", "injected_500", "injected_429"):
        assert figures[fault] > 0, figures
    checked = check_memcached_writes_inside_holdings(
        server.log, uids, shards=SHARDS, lease_namespace=LEASE_NAMESPACE
    )
    assert checked >= CRS  # every Memcached's finalizer and status writes, at least
    print(f"\nsharded chaos: {one_offs}, {figures}, exits {dict(replicas.exits)}, {checked} writes checked")
