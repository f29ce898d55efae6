"""A sharded cache gaining shards (one LIST for the shards of a round), and its shards' reflectors
sharing one store (none drops what another keeps).

Where the replica filters itself (client-side), one reflector keeps every shard of the
replica, and gaining shards relists it: once for
the shards gained together, and never two reflectors for one scope, even when shards are added
from several tasks at once (two reflectors each delivered every object: a replica received
3.37x a lone replica's watch events in a run at 10,000 Memcacheds). Against the in-memory API
server with its ShardedListAndWatch gate off, over real HTTP through the real Client.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.runtime.cache.cache import CLIENT_SIDE, Cache, Informer
from memop.runtime.cache.store import ADDED, DELETED, Obj
from memop.runtime.client.client import Client
from memop.runtime.client.resources import CONFIGMAPS, NAMESPACES, SECRETS
from memop.runtime.sharding.adoption import label_children
from memop.runtime.sharding.keys import BY_OWNER_BUCKET, BY_UID
from memop.runtime.sharding.ring import BUCKET_LABEL, Ring, bucket_label_value
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

NS = "ns"
AGENT = "sharded-cache-test"


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(apiserver.client_configuration()) as api:
        yield Client(api, user_agent=AGENT, max_retries=0, timeout=5)


async def _sharded_configmaps(
    client: Client, ring: Ring, *, server_side: bool, event_type: str, seen: list[str]
) -> tuple[Cache, Informer]:
    """Twelve ConfigMaps in a fresh namespace, and a started cache keeping them by uid on
    ``ring`` (no shard owned yet) that notes the names of its ``event_type`` events in ``seen``."""
    await client.create(NAMESPACES, {"metadata": {"name": NS}})
    for index in range(12):
        await client.create(CONFIGMAPS, {"metadata": {"name": f"cm-{index}"}, "data": {"v": "0"}}, NS)
    cache = Cache(client, namespaces=[NS])
    informer = cache.informer(CONFIGMAPS, shard_key=BY_UID)

    def on_event(kind: str, obj: Obj, _old: Obj | None) -> None:
        if kind == event_type:
            seen.append(obj["metadata"]["name"])

    informer.add_handler(on_event)
    cache.enable_sharding(ring, server_side=server_side)
    await cache.start()
    return cache, informer


async def test_shards_gained_together_cost_one_list_and_never_two_reflectors(
    apiserver: ApiServer, client: Client
) -> None:
    added: list[str] = []
    cache, informer = await _sharded_configmaps(
        client, Ring(4), server_side=False, event_type=ADDED, seen=added
    )
    try:
        await cache.add_shards([0, 1, 2, 3])
        await wait_for(lambda: all(cache.shard_has_synced(s) for s in range(4)), timeout=10)
        assert [r.shard_name for r in informer.reflectors] == [CLIENT_SIDE]
        assert apiserver.log.count(verb="list", resource="configmaps", user_agent=AGENT) == 1
        assert len(informer.store) == 12

        # Given up, then taken again from four tasks at once (as a round's takes once did).
        for shard in range(4):
            await cache.remove_shard(shard)
        assert informer.reflectors == []
        await asyncio.gather(*(cache.add_shard(shard) for shard in range(4)))
        assert [r.shard_name for r in informer.reflectors] == [CLIENT_SIDE]
        await wait_for(lambda: all(cache.shard_has_synced(s) for s in range(4)), timeout=10)
        assert len(informer.store) == 12
        added.clear()
        await client.create(CONFIGMAPS, {"metadata": {"name": "late"}}, NS)
        await wait_for(lambda: "late" in added, timeout=10)
        assert [r.shard_name for r in informer.reflectors] == [CLIENT_SIDE]
    finally:
        await cache.stop()


async def test_children_made_before_sharding_are_labelled_with_one_list_for_the_shards_of_a_round(
    apiserver: ApiServer, client: Client
) -> None:
    await client.create(NAMESPACES, {"metadata": {"name": NS}})
    ring = Ring(4)
    buckets: dict[str, str] = {}
    shard_of: dict[str, int] = {}
    for index in range(12):
        owner = await client.create(CONFIGMAPS, {"metadata": {"name": f"owner-{index}"}}, NS)
        uid = owner["metadata"]["uid"]
        reference = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": f"owner-{index}",
            "uid": uid,
            "controller": True,
        }
        await client.create(
            SECRETS, {"metadata": {"name": f"child-{index}", "ownerReferences": [reference]}}, NS
        )
        buckets[f"child-{index}"] = bucket_label_value(uid)
        shard_of[f"child-{index}"] = ring.shard_of_value(uid)
    cache = Cache(client, namespaces=[NS])
    cache.informer(SECRETS, shard_key=BY_OWNER_BUCKET)
    cache.enable_sharding(ring, server_side=True)
    taken = [0, 1, 2]

    assert await label_children(client, cache, taken) == sum(1 for s in shard_of.values() if s in taken)
    assert apiserver.log.count(verb="list", resource="secrets", user_agent=AGENT) == 1
    for name, bucket in buckets.items():
        labels = (await client.get(SECRETS, name, NS))["metadata"].get("labels") or {}
        assert labels.get(BUCKET_LABEL) == (bucket if shard_of[name] in taken else None), name


async def test_a_shards_reflector_never_drops_what_another_shard_of_the_replica_keeps(
    apiserver: ApiServer, client: Client
) -> None:
    """The server ignores shardSelector (its gate is off) while the cache still takes it to
    filter, as between a restart that turned the gate off and the manager noticing: each shard's
    reflector receives every object. Those of the replica's other shards stay in the store."""
    deleted: list[str] = []
    cache, informer = await _sharded_configmaps(
        client, Ring(2), server_side=True, event_type=DELETED, seen=deleted
    )
    try:
        await cache.add_shards([0, 1])
        await wait_for(lambda: cache.shard_has_synced(0) and cache.shard_has_synced(1), timeout=10)
        for index in range(12):
            await client.patch(CONFIGMAPS, f"cm-{index}", {"data": {"v": "1"}}, NS)

        def updated() -> bool:
            return (
                all((o.get("data") or {}).get("v") == "1" for o in informer.store.list())
                and len(informer.store) == 12
            )

        await wait_for(updated, timeout=10)
        assert deleted == []
    finally:
        await cache.stop()
