"""Cache: reflectors per namespace scope, reads from memory, sync, resync, handlers, own writes.

Runs against the in-memory API server over real HTTP through the real Client.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from memop.runtime.cache.cache import CLIENT_SIDE, Cache
from memop.runtime.cache.labels import Selector
from memop.runtime.cache.store import ADDED, MODIFIED, RESYNC, Obj
from memop.runtime.client.client import Client
from memop.runtime.client.resources import CONFIGMAPS, NAMESPACES, PODS, SECRETS
from memop.runtime.sharding.keys import BY_UID
from memop.runtime.sharding.ring import Ring
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=0.2) as srv:
        yield srv


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="cache-test", max_retries=0, timeout=5)


class Events:
    """A handler that records (type, namespace/name, resourceVersion)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def __call__(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        meta = obj["metadata"]
        self.seen.append((event_type, f"{meta.get('namespace', '')}/{meta['name']}", meta["resourceVersion"]))

    def of(self, event_type: str) -> list[str]:
        return sorted(name for kind, name, _ in self.seen if kind == event_type)


async def namespaces(client: Client, *names: str) -> None:
    for name in names:
        await client.create(NAMESPACES, {"metadata": {"name": name}})


def configmap(name: str, labels: dict[str, str] | None = None, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "example.com/v1", "kind": "Owner", "name": "o", "uid": owner, "controller": True}
        ]
    return {"metadata": meta, "data": {"k": name}}


def names(objs: list[Obj]) -> list[str]:
    return sorted(f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objs)


async def test_a_scoped_cache_watches_each_namespace_and_nothing_else(
    server: ApiServer, client: Client
) -> None:
    await namespaces(client, "a", "b", "c")
    for ns in ("a", "b", "c"):
        await client.create(CONFIGMAPS, configmap("before"), ns)
    cache = Cache(client, namespaces=["a", "b", "a"])
    configmaps = cache.informer(CONFIGMAPS)
    cluster_scoped = cache.informer(NAMESPACES)
    assert [r.namespace for r in configmaps.reflectors] == ["a", "b"]
    assert [r.namespace for r in cluster_scoped.reflectors] == [None]
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=5)
        for ns in ("a", "b", "c"):
            await client.create(CONFIGMAPS, configmap("after"), ns)
        await wait_for(lambda: len(cache.list(CONFIGMAPS)) == 4, timeout=5)
        assert names(cache.list(CONFIGMAPS)) == ["a/after", "a/before", "b/after", "b/before"]
        assert cache.get(CONFIGMAPS, "before", "c") is None
        assert {"a", "b", "c"} <= {o["metadata"]["name"] for o in cache.list(NAMESPACES)}
        assert (cache.in_scope("a"), cache.in_scope("c"), cache.in_scope(None)) == (True, False, True)
        # One LIST and WATCH per namespace, no cluster-wide one, for the namespaced kind.
        for ns in ("a", "b"):
            assert server.log.count(verb="list", resource="configmaps", namespace=ns) == 1
            assert server.log.count(verb="watch", resource="configmaps", namespace=ns) >= 1
        assert server.log.count(verb="list", resource="configmaps", namespace="c") == 0
        assert server.log.count(verb="watch", resource="configmaps", namespace="c") == 0
        assert server.log.count(verb="list", resource="configmaps", namespace="") == 0
    finally:
        await cache.stop()


async def test_an_unscoped_cache_runs_one_cluster_wide_reflector(server: ApiServer, client: Client) -> None:
    await namespaces(client, "a", "b")
    cache = Cache(client)
    assert [r.namespace for r in cache.informer(CONFIGMAPS).reflectors] == [None]
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=5)
        await client.create(CONFIGMAPS, configmap("x"), "a")
        await client.create(CONFIGMAPS, configmap("y"), "b")
        await wait_for(lambda: names(cache.list(CONFIGMAPS)) == ["a/x", "b/y"], timeout=5)
        assert names(cache.list(CONFIGMAPS, "b")) == ["b/y"]
        assert server.log.count(verb="list", resource="configmaps", namespace="") == 1
    finally:
        await cache.stop()


async def test_reads_are_served_from_memory_with_every_index(server: ApiServer, client: Client) -> None:
    await namespaces(client, "a", "b")
    await client.create(CONFIGMAPS, configmap("web-1", {"app": "web", "tier": "front"}, owner="u1"), "a")
    await client.create(CONFIGMAPS, configmap("web-2", {"app": "web", "tier": "back"}, owner="u2"), "a")
    await client.create(CONFIGMAPS, configmap("db", {"app": "db"}, owner="u1"), "b")
    cache = Cache(client)
    cache.informer(CONFIGMAPS)
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=5)
        requests = len(server.log.filter())
        got = cache.get(CONFIGMAPS, "web-1", "a")
        assert got is not None
        assert got["data"] == {"k": "web-1"}
        assert "managedFields" not in got["metadata"]
        assert cache.get(CONFIGMAPS, "web-1", "b") is None
        assert names(cache.list(CONFIGMAPS, "a")) == ["a/web-1", "a/web-2"]
        assert names(cache.list(CONFIGMAPS, selector="app=web")) == ["a/web-1", "a/web-2"]
        assert names(cache.list(CONFIGMAPS, selector="app in (web,db),tier!=back")) == ["a/web-1", "b/db"]
        assert names(cache.list(CONFIGMAPS, owner_uid="u1")) == ["a/web-1", "b/db"]
        assert names(cache.list(CONFIGMAPS, "b", owner_uid="u1", selector="app=db")) == ["b/db"]
        assert cache.list(CONFIGMAPS, "b", owner_uid="u2") == []
        assert len(server.log.filter()) == requests  # not one API call
    finally:
        await cache.stop()


async def test_wait_for_sync_reports_a_reflector_that_cannot_list(server: ApiServer, client: Client) -> None:
    server.faults.fail(403, times=None, verb="list", resource="pods")
    cache = Cache(client, namespaces=["default"])
    cache.informer(CONFIGMAPS)
    cache.informer(PODS)
    await cache.start()
    try:
        assert not await cache.wait_for_sync(timeout=0.5)
        assert not cache.has_synced
        assert cache.informer(CONFIGMAPS).has_synced
        unsynced = cache.unsynced()
        assert len(unsynced) == 1
        assert "pods in default" in unsynced[0]
        server.faults.clear()
        # The reflector keeps retrying with backoff; once a LIST succeeds the cache is synced.
        assert await cache.wait_for_sync(timeout=10)
        assert cache.has_synced
        assert cache.unsynced() == []
    finally:
        await cache.stop()


async def test_resync_replays_the_cache_without_calling_the_api(server: ApiServer, client: Client) -> None:
    await client.create(CONFIGMAPS, configmap("one"), "default")
    await client.create(CONFIGMAPS, configmap("two"), "default")
    clock = FakeClock()
    cache = Cache(client, namespaces=["default"], resync_period=100.0, clock=clock)
    events = Events()
    cache.informer(CONFIGMAPS).add_handler(events)
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=5)
        assert events.of(ADDED) == ["default/one", "default/two"]
        requests = len(server.log.filter(verb="list")) + len(server.log.filter(verb="get"))
        clock.advance(89.0)  # before the earliest jittered period (90 s)
        await asyncio.sleep(0)
        assert events.of(RESYNC) == []
        clock.advance(22.0)  # past the latest (110 s)
        await wait_for(lambda: events.of(RESYNC) == ["default/one", "default/two"], timeout=5)
        clock.advance(111.0)
        await wait_for(lambda: len(events.of(RESYNC)) == 4, timeout=5)
        assert len(server.log.filter(verb="list")) + len(server.log.filter(verb="get")) == requests
    finally:
        await cache.stop()


async def test_a_late_handler_is_replayed_the_stored_objects_and_a_failing_one_harms_no_other(
    client: Client,
) -> None:
    await client.create(CONFIGMAPS, configmap("old"), "default")
    cache = Cache(client, namespaces=["default"])
    informer = cache.informer(CONFIGMAPS)
    calls: list[str] = []

    def broken(event_type: str, obj: Obj, old: Obj | None) -> None:
        calls.append(event_type)
        raise RuntimeError("a bug in a handler")

    informer.add_handler(broken)
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=5)
        late = Events()
        informer.add_handler(late)
        assert late.seen
        assert late.of(ADDED) == ["default/old"]
        await client.patch(CONFIGMAPS, "old", {"data": {"k": "changed"}}, "default")
        await client.create(CONFIGMAPS, configmap("new"), "default")
        await wait_for(lambda: late.of(ADDED) == ["default/new", "default/old"], timeout=5)
        assert late.of(MODIFIED) == ["default/old"]
        assert calls == [ADDED, MODIFIED, ADDED]  # it kept being called, and raised each time
        informer.remove_handler(late)
        await client.create(CONFIGMAPS, configmap("unseen"), "default")
        await wait_for(lambda: cache.get(CONFIGMAPS, "unseen", "default") is not None, timeout=5)
        assert "default/unseen" not in late.of(ADDED)
    finally:
        await cache.stop()


async def test_a_change_of_others_our_write_carries_reaches_the_handlers_once(
    server: ApiServer, client: Client
) -> None:
    # Someone starts deleting the object (a finalizer holds it) while our watch is behind; our
    # next write's answer carries the deletionTimestamp. Recording that answer must tell the
    # handlers the deletion started (old without it, new with it): once the store holds it,
    # the stream's older event changes nothing and must not take the store back in time.
    body = configmap("cm")
    body["metadata"]["finalizers"] = ["example.com/keep"]
    await client.create(CONFIGMAPS, body, "default")
    cache = Cache(client, namespaces=["default"])
    seen: list[tuple[str, str, bool, bool]] = []

    def deletion(obj: Obj | None) -> bool:
        return bool(obj and obj["metadata"].get("deletionTimestamp"))

    def record(kind: str, obj: Obj, old: Obj | None) -> None:
        seen.append((kind, obj["metadata"]["resourceVersion"], deletion(old), deletion(obj)))

    cache.informer(CONFIGMAPS).add_handler(record)
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=5)
        reflector = cache.informer(CONFIGMAPS).reflectors[0]
        seen.clear()
        server.silence_watches(True)
        await client.delete(CONFIGMAPS, "cm", "default")
        written = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "ours"}}, "default")
        assert deletion(written)
        assert cache.record_write(CONFIGMAPS, written)
        version = written["metadata"]["resourceVersion"]
        assert seen == [(MODIFIED, version, False, True)]
        server.silence_watches(False)
        await wait_for(lambda: int(reflector.last_resource_version) >= int(version), timeout=5)
        assert seen == [(MODIFIED, version, False, True)]
        stored = cache.get(CONFIGMAPS, "cm", "default")
        assert stored is not None
        assert stored["metadata"]["resourceVersion"] == version
        assert stored["data"] == {"k": "ours"}
    finally:
        await cache.stop()


async def test_record_write_makes_our_own_write_readable_at_once(server: ApiServer, client: Client) -> None:
    await client.create(CONFIGMAPS, configmap("cm"), "default")
    cache = Cache(client, namespaces=["default"])
    events = Events()
    cache.informer(CONFIGMAPS).add_handler(events)
    # Before the cache syncs nothing is recorded: the LIST will bring the state.
    early = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "early"}}, "default")
    assert not cache.record_write(CONFIGMAPS, early)
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=5)
        reflector = cache.informer(CONFIGMAPS).reflectors[0]
        seen = len(events.seen)
        server.silence_watches(True)  # the watch cannot deliver our write before we record it
        written = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "ours"}}, "default")
        answer = copy.deepcopy(written)
        assert cache.record_write(CONFIGMAPS, written)
        assert written == answer  # the writer's object is left as it is, managedFields and all
        assert "managedFields" in written["metadata"]
        server.silence_watches(False)
        stored = cache.get(CONFIGMAPS, "cm", "default")
        assert stored is not None
        assert stored["data"] == {"k": "ours"}
        written["data"]["k"] = "changed by the caller afterwards"
        assert stored["data"] == {"k": "ours"}  # the store holds its own copy
        # The handlers were told of the change once, when it was recorded; when the watch
        # delivers the same version, nothing is dispatched again.
        version = stored["metadata"]["resourceVersion"]
        assert events.seen[seen:] == [(MODIFIED, "default/cm", version)]
        await wait_for(lambda: int(reflector.last_resource_version) >= int(version), timeout=5)
        assert events.seen[seen:] == [(MODIFIED, "default/cm", version)]
        # A version at or below what the stream delivered is never stored (it may be stale).
        assert not cache.record_write(CONFIGMAPS, written)
        assert not cache.record_write(
            CONFIGMAPS, {**written, "metadata": {**written["metadata"], "resourceVersion": "x"}}
        )
        # Nor is anything for a resource this cache does not hold.
        assert not cache.record_write(PODS, written)
    finally:
        await cache.stop()


async def test_informers_of_one_resource_by_selector_each_hold_their_own_objects_and_writes(
    server: ApiServer, client: Client
) -> None:
    # Two controllers each watch only their own configmaps, one keeping a stripped copy:
    # reads with a selector go to the informer that selector implies, own writes reach each
    # informer that selects them, and a read that could miss objects is refused.
    await client.create(CONFIGMAPS, configmap("red-1", {"team": "red"}), "default")
    await client.create(CONFIGMAPS, configmap("blue-1", {"team": "blue", "tier": "x"}), "default")
    await client.create(CONFIGMAPS, configmap("none"), "default")
    cache = Cache(client, namespaces=["default"])
    red_selector, blue_selector = Selector.parse("team=red"), Selector.parse("team=blue")

    def strip(obj: Obj) -> Obj:
        return {"metadata": obj["metadata"]}

    red = cache.informer(CONFIGMAPS, label_selector=red_selector)
    blue = cache.informer(CONFIGMAPS, label_selector=blue_selector, transform=strip)
    assert cache.informer(CONFIGMAPS, label_selector=Selector.parse("team=red")) is red
    with pytest.raises(ValueError, match="name the one to use"):
        cache.informer(CONFIGMAPS)  # which one?
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=5)
        assert names(cache.list(CONFIGMAPS, "default", selector="team=red")) == ["default/red-1"]
        assert names(cache.list(CONFIGMAPS, "default", selector="team=blue,tier=x")) == ["default/blue-1"]
        assert "data" not in cache.list(CONFIGMAPS, "default", selector=blue_selector)[0]
        assert "data" in red.store.get("red-1", "default")  # type: ignore[operator]
        with pytest.raises(ValueError, match="name the one to use"):
            cache.list(CONFIGMAPS, "default")  # neither informer holds every configmap
        with pytest.raises(ValueError, match="name the one to use"):
            cache.get(CONFIGMAPS, "red-1", "default")
        created = await client.create(CONFIGMAPS, configmap("red-2", {"team": "red"}), "default")
        assert cache.record_write(CONFIGMAPS, created)
        assert red.store.get("red-2", "default") is not None
        assert blue.store.get("red-2", "default") is None
    finally:
        await cache.stop()


async def test_an_exclusive_informer_is_never_taken_for_all_of_its_resource(
    server: ApiServer, client: Client
) -> None:
    # A declarative controller watches its own configmaps by its label; another controller's
    # owns(CONFIGMAPS), declared after, must get an informer of every configmap, not that one.
    await client.create(CONFIGMAPS, configmap("mine", {"declarative": "x"}), "default")
    await client.create(CONFIGMAPS, configmap("theirs"), "default")
    cache = Cache(client, namespaces=["default"])
    selector = Selector.parse("declarative=x")
    mine = cache.informer(CONFIGMAPS, label_selector=selector, exclusive=True)
    assert cache.informer(CONFIGMAPS, label_selector=selector) is mine
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=5)
        everything = cache.informer(CONFIGMAPS)
        assert everything is not mine
        assert everything.label_selector is None
        assert await cache.wait_for_sync(timeout=5)
        # Reads without a selector are served by that one.
        assert cache.get(CONFIGMAPS, "theirs", "default") is not None
        assert cache.list(CONFIGMAPS, "default", selector=selector)[0]["metadata"]["name"] == "mine"
        assert names(cache.list(CONFIGMAPS, "default")) == ["default/mine", "default/theirs"]
    finally:
        await cache.stop()


async def test_reflectors_count_the_objects_and_watch_bytes_they_receive(client: Client) -> None:
    """What sharding divides between replicas, exported per resource: objects from LISTs and
    watch events, and the bytes of the watch streams."""

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    before = (
        sample("memop_reflector_objects_received_total", resource="secrets", source="list"),
        sample("memop_reflector_objects_received_total", resource="secrets", source="watch"),
        sample("memop_watch_received_bytes_total", resource="secrets"),
    )
    await namespaces(client, "counted")
    await client.create(SECRETS, {"metadata": {"name": "listed"}}, "counted")
    cache = Cache(client, namespaces=["counted"])
    informer = cache.informer(SECRETS)
    await cache.start()
    try:
        assert await cache.wait_for_sync(10)
        await client.create(SECRETS, {"metadata": {"name": "watched"}}, "counted")
        await wait_for(lambda: informer.store.get("watched", "counted") is not None, timeout=10)
    finally:
        await cache.stop()
    listed = sample("memop_reflector_objects_received_total", resource="secrets", source="list") - before[0]
    watched = sample("memop_reflector_objects_received_total", resource="secrets", source="watch") - before[1]
    assert (listed, watched) == (1, 1)
    assert sample("memop_watch_received_bytes_total", resource="secrets") - before[2] > 100


def running_reflectors() -> int:
    return sum(1 for t in asyncio.all_tasks() if t.get_name().startswith("reflector ") and not t.done())


async def test_shards_gained_and_given_up_while_the_filtering_mode_switches_leave_no_stray_reflector(
    client: Client,
) -> None:
    """Gaining or giving up a shard and switching the mode each wait for reflectors to stop; run
    together, they used to interleave: a switch overwrote the reflectors a gain had just started,
    which ran on, stopped by nothing (a shard's one, once the server ignored its selector, took
    the replica's other shards' new objects out of the store, so they were never reconciled)."""
    cache = Cache(client, namespaces=["a"])
    informer = cache.informer(CONFIGMAPS, shard_key=BY_UID)
    cache.enable_sharding(Ring(4), server_side=False)
    await cache.start()
    try:
        await cache.add_shard(0)
        await asyncio.gather(cache.set_server_side_sharding(True), cache.add_shard(1), cache.add_shard(2))
        assert sorted(r.shard_name or "" for r in informer.reflectors) == ["0/4", "1/4", "2/4"]
        assert running_reflectors() == 3
        await asyncio.gather(cache.set_server_side_sharding(False), cache.add_shard(3), cache.remove_shard(1))
        assert [r.shard_name for r in informer.reflectors] == [CLIENT_SIDE]
        assert running_reflectors() == 1
        assert cache.shards == {0, 2, 3}
    finally:
        await cache.stop()


async def test_the_echo_of_a_recorded_write_is_skipped_without_being_decoded(
    server: ApiServer, client: Client
) -> None:
    # The watch brings every write of ours back; once record_write stored its answer, that
    # event changes nothing, and the reflector knows it by the bytes alone: the answer's JSON
    # is the event's object's, byte for byte, on this server as on kube-apiserver.
    await client.create(CONFIGMAPS, configmap("cm"), "default")
    cache = Cache(client, namespaces=["default"])
    events = Events()
    cache.informer(CONFIGMAPS).add_handler(events)
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=5)
        reflector = cache.informer(CONFIGMAPS).reflectors[0]
        seen = len(events.seen)
        server.silence_watches(True)
        written = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "ours"}}, "default")
        assert cache.record_write(CONFIGMAPS, written)
        version = written["metadata"]["resourceVersion"]
        server.silence_watches(False)
        await wait_for(lambda: int(reflector.last_resource_version) >= int(version), timeout=5)
        assert reflector.echoes_skipped == 1
        assert events.seen[seen:] == [(MODIFIED, "default/cm", version)]  # told once, when recorded
        # Another writer's change is decoded and applied as ever.
        theirs = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "theirs"}}, "default")
        await wait_for(lambda: cache.get(CONFIGMAPS, "cm", "default")["data"] == {"k": "theirs"}, timeout=5)  # type: ignore[index]
        assert reflector.echoes_skipped == 1
        assert events.seen[-1] == (MODIFIED, "default/cm", theirs["metadata"]["resourceVersion"])
        # An answer recorded other than as the server wrote it matches no event's bytes: its
        # echo is decoded, and judged by its version as before (the store has it already).
        server.silence_watches(True)
        written = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "ours again"}}, "default")
        recorded = {**written, "metadata": {**written["metadata"], "annotations": {"a": "b"}}}
        assert cache.record_write(CONFIGMAPS, recorded)
        version = written["metadata"]["resourceVersion"]
        server.silence_watches(False)
        await wait_for(lambda: int(reflector.last_resource_version) >= int(version), timeout=5)
        assert reflector.echoes_skipped == 1
        stored = cache.get(CONFIGMAPS, "cm", "default")
        assert stored is not None
        assert stored["metadata"]["annotations"] == {"a": "b"}  # not taken back by its own echo
        assert events.seen[-1] == (MODIFIED, "default/cm", version)
    finally:
        await cache.stop()


async def test_an_update_only_the_transform_drops_is_stored_but_not_dispatched(
    server: ApiServer, client: Client
) -> None:
    # What the informer's transform drops no reader can see: an update that changes only that
    # (a pod's conditions, say) is stored for its version, and queues no reconcile.
    await client.create(CONFIGMAPS, {**configmap("cm"), "data": {"k": "1", "noise": "1"}}, "default")
    viewed = Cache(client, namespaces=["default"])
    whole = Cache(client, namespaces=["default"])

    def keep_k(obj: Obj) -> Obj:
        return {"metadata": obj["metadata"], "data": {"k": (obj.get("data") or {}).get("k")}}

    seen, seen_whole = Events(), Events()
    viewed.informer(CONFIGMAPS, transform=keep_k).add_handler(seen)
    whole.informer(CONFIGMAPS).add_handler(seen_whole)
    for cache in (viewed, whole):
        await cache.start()
    try:
        assert await viewed.wait_for_sync(timeout=5)
        assert await whole.wait_for_sync(timeout=5)
        noise = await client.patch(CONFIGMAPS, "cm", {"data": {"noise": "2"}}, "default")
        version = noise["metadata"]["resourceVersion"]
        for cache in (viewed, whole):
            await wait_for(
                lambda c=cache: c.get(CONFIGMAPS, "cm", "default")["metadata"]["resourceVersion"] == version,  # type: ignore[index,misc]
                timeout=5,
            )
        assert seen.of(MODIFIED) == []
        assert seen_whole.of(MODIFIED) == ["default/cm"]  # without a transform every update is told
        seen_version = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "2"}}, "default")
        await wait_for(lambda: seen.of(MODIFIED) == ["default/cm"], timeout=5)
        assert seen.seen[-1][2] == seen_version["metadata"]["resourceVersion"]
        assert viewed.get(CONFIGMAPS, "cm", "default")["data"] == {"k": "2"}  # type: ignore[index]
    finally:
        await viewed.stop()
        await whole.stop()
