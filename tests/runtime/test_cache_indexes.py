"""Custom cache indexes: ObjectStore.add_index / by_index, and Cache.add_index kept current by
the informers through adds, updates, deletes and relists.

The ConfigMapSync shape: an object names another in a field (here a ConfigMap's annotation
``source``, "namespace/name"), and the index finds every object naming a given one.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.runtime.cache.cache import Cache
from memop.runtime.cache.labels import Selector
from memop.runtime.cache.store import ADDED, DELETED, MODIFIED, Obj, ObjectStore
from memop.runtime.client.client import Client
from memop.runtime.client.resources import CONFIGMAPS, NAMESPACES, PODS
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

SOURCE = "source"


def by_source(obj: Obj) -> list[str]:
    """The "namespace/name" an object's ``source`` annotation names (none without one)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(SOURCE)
    return [value] if isinstance(value, str) else []


def cm(name: str, namespace: str = "a", rv: int = 1, source: str | None = None, **labels: str) -> Obj:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": str(rv)}
    if source is not None:
        meta["annotations"] = {SOURCE: source}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta}


def names(objs: Iterable[Obj]) -> list[str]:
    return sorted(f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in objs)


# -- the store ---------------------------------------------------------------------------------


def test_the_index_follows_adds_updates_and_deletes() -> None:
    store = ObjectStore(CONFIGMAPS)
    store.add_index(SOURCE, by_source)
    store.upsert(store.prepare(cm("x", source="src/one")))
    store.upsert(store.prepare(cm("y", "b", source="src/one")))
    store.upsert(store.prepare(cm("z", source="src/two")))
    store.upsert(store.prepare(cm("plain")))
    assert names(store.by_index(SOURCE, "src/one")) == ["a/x", "b/y"]
    assert names(store.by_index(SOURCE, "src/two")) == ["a/z"]
    assert store.by_index(SOURCE, "src/none") == []
    store.upsert(store.prepare(cm("x", rv=2, source="src/two")))  # moves from one to two
    assert names(store.by_index(SOURCE, "src/one")) == ["b/y"]
    assert names(store.by_index(SOURCE, "src/two")) == ["a/x", "a/z"]
    store.upsert(store.prepare(cm("z", rv=3)))  # no longer indexed
    assert names(store.by_index(SOURCE, "src/two")) == ["a/x"]
    store.remove(("b", "y"))
    assert store.by_index(SOURCE, "src/one") == []
    assert sorted(store.index_values(SOURCE)) == ["src/two"]  # empty entries do not stay


def test_a_relist_replaces_the_index_with_the_store() -> None:
    store = ObjectStore(CONFIGMAPS)
    store.add_index(SOURCE, by_source)
    for obj in (cm("x", source="s/1"), cm("y", source="s/1"), cm("z", source="s/2")):
        store.upsert(store.prepare(obj))
    changes = store.replace(
        [store.prepare(cm("x", rv=5, source="s/2")), store.prepare(cm("w", rv=6, source="s/1"))],
        list_version="6",
    )
    assert {(kind, o["metadata"]["name"]) for kind, o, _ in changes} == {
        (MODIFIED, "x"),
        (ADDED, "w"),
        (DELETED, "y"),
        (DELETED, "z"),
    }
    assert names(store.by_index(SOURCE, "s/1")) == ["a/w"]
    assert names(store.by_index(SOURCE, "s/2")) == ["a/x"]


def test_an_object_can_be_under_several_values_and_an_index_added_late_sees_what_is_stored() -> None:
    store = ObjectStore(CONFIGMAPS)
    store.upsert(store.prepare(cm("x", env="prod", team="web")))
    store.upsert(store.prepare(cm("y", env="dev")))

    def label_values(obj: Obj) -> list[str]:
        return [*sorted(obj["metadata"].get("labels", {}).values()), "prod"]  # a repeat counts once

    store.add_index("labels", label_values)
    assert names(store.by_index("labels", "prod")) == ["a/x", "a/y"]
    assert names(store.by_index("labels", "web")) == ["a/x"]
    store.remove(("a", "x"))
    assert names(store.by_index("labels", "prod")) == ["a/y"]
    assert store.by_index("labels", "web") == []
    with pytest.raises(ValueError, match="already has an index named 'labels'"):
        store.add_index("labels", label_values)
    with pytest.raises(KeyError, match="no index named 'nope'"):
        store.by_index("nope", "x")


def test_list_combines_the_index_with_namespace_and_labels() -> None:
    store = ObjectStore(CONFIGMAPS)
    store.add_index(SOURCE, by_source)
    store.upsert(store.prepare(cm("x", "a", source="s/1", tier="web")))
    store.upsert(store.prepare(cm("y", "b", source="s/1", tier="web")))
    store.upsert(store.prepare(cm("z", "a", source="s/1", tier="db")))
    store.upsert(store.prepare(cm("w", "a", source="s/2", tier="web")))
    assert names(store.list(index=(SOURCE, "s/1"))) == ["a/x", "a/z", "b/y"]
    assert names(store.list("a", index=(SOURCE, "s/1"))) == ["a/x", "a/z"]
    assert names(store.list(selector="tier=web", index=(SOURCE, "s/1"))) == ["a/x", "b/y"]
    assert names(store.list("a", selector="tier=web", index=(SOURCE, "s/1"))) == ["a/x"]
    # The label index is the narrower here: the custom index still filters.
    assert names(store.list(selector="tier=db", index=(SOURCE, "s/2"))) == []


def test_a_failing_index_function_leaves_the_object_stored_and_unindexed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = ObjectStore(CONFIGMAPS)

    def fragile(obj: Obj) -> list[str]:
        return [obj["metadata"]["annotations"][SOURCE]]

    store.add_index(SOURCE, fragile)
    with caplog.at_level(logging.ERROR, logger="memop.store"):
        store.upsert(store.prepare(cm("broken")))
    assert store.get("broken", "a") is not None
    assert store.index_values(SOURCE) == []
    assert "index 'source' of ConfigMap failed on a/broken" in caplog.text
    store.upsert(store.prepare(cm("broken", rv=2, source="s/1")))
    assert names(store.by_index(SOURCE, "s/1")) == ["a/broken"]
    store.remove(("a", "broken"))
    assert store.index_values(SOURCE) == []


# -- the cache, fed by the in-memory API server ------------------------------------------------


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=0.2) as srv:
        yield srv


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="cache-index-test", max_retries=0, timeout=5)


async def create(client: Client, name: str, namespace: str, source: str | None = None) -> None:
    meta: dict[str, Any] = {"name": name}
    if source is not None:
        meta["annotations"] = {SOURCE: source}
    await client.create(CONFIGMAPS, {"metadata": meta}, namespace)


async def test_the_cache_keeps_the_index_through_watch_events_and_a_relist(
    server: ApiServer, client: Client
) -> None:
    for ns in ("a", "b"):
        await client.create(NAMESPACES, {"metadata": {"name": ns}})
    await create(client, "x", "a", "src/one")
    cache = Cache(client, namespaces=["a", "b"])
    cache.add_index(CONFIGMAPS, SOURCE, by_source)  # before the informer: it gets it too
    cache.informer(CONFIGMAPS)
    await cache.start()
    try:
        assert await cache.wait_for_sync(10)
        assert names(cache.by_index(CONFIGMAPS, SOURCE, "src/one")) == ["a/x"]
        await create(client, "y", "b", "src/one")
        await wait_for(lambda: names(cache.by_index(CONFIGMAPS, SOURCE, "src/one")) == ["a/x", "b/y"])
        assert names(cache.list(CONFIGMAPS, "b", index=(SOURCE, "src/one"))) == ["b/y"]
        await client.patch(CONFIGMAPS, "x", {"metadata": {"annotations": {SOURCE: "src/two"}}}, "a")
        await wait_for(lambda: names(cache.by_index(CONFIGMAPS, SOURCE, "src/two")) == ["a/x"])
        assert names(cache.by_index(CONFIGMAPS, SOURCE, "src/one")) == ["b/y"]
        await client.delete(CONFIGMAPS, "y", "b")
        await wait_for(lambda: cache.by_index(CONFIGMAPS, SOURCE, "src/one") == [])

        # A relist: the watches fail while objects change, the history is compacted, and the
        # reflectors list again; the store's replace brings the index along.
        server.faults.fail(500, times=4, verb="watch", resource="configmaps")
        await server.drop_watches()
        await client.delete(CONFIGMAPS, "x", "a")
        await create(client, "z", "b", "src/two")
        await create(client, "w", "a", "src/one")
        server.compact()
        await wait_for(lambda: names(cache.by_index(CONFIGMAPS, SOURCE, "src/two")) == ["b/z"], timeout=20)
        assert names(cache.by_index(CONFIGMAPS, SOURCE, "src/one")) == ["a/w"]
        # Each namespace's reflector: its first LIST and one relist.
        assert sum(r.relists for r in cache.informer(CONFIGMAPS).reflectors) == 4
    finally:
        await cache.stop()


async def test_an_index_reaches_every_informer_of_its_resource(client: Client) -> None:
    """Declared after two label-selected informers of the resource exist, each keeps it; a read
    names its informer through the selector, as any read does."""
    cache = Cache(client)
    web = Selector.parse("tier=web")
    db = Selector.parse("tier=db")
    cache.informer(PODS, label_selector=web)
    cache.informer(PODS, label_selector=db)
    cache.add_index(PODS, "node", lambda pod: [pod.get("spec", {}).get("nodeName", "")])
    for informer in (cache.informer_for(PODS, web), cache.informer_for(PODS, db)):
        informer.store.upsert(
            informer.store.prepare(
                {
                    "metadata": {
                        "name": str(informer.label_selector),
                        "namespace": "a",
                        "labels": {"tier": str(informer.label_selector).split("=")[1]},
                    },
                    "spec": {"nodeName": "n1"},
                }
            )
        )
    assert names(cache.list(PODS, selector=web, index=("node", "n1"))) == ["a/tier=web"]
    assert names(cache.list(PODS, selector=db, index=("node", "n1"))) == ["a/tier=db"]


async def test_indexes_are_declared_once_and_before_the_cache_starts(client: Client) -> None:
    cache = Cache(client)
    cache.add_index(CONFIGMAPS, SOURCE, by_source)
    with pytest.raises(ValueError, match="already has an index named 'source'"):
        cache.add_index(CONFIGMAPS, SOURCE, by_source)
    with pytest.raises(KeyError, match="no index named 'other'"):
        cache.by_index(CONFIGMAPS, "other", "x")
    with pytest.raises(KeyError, match="no index named 'other'"):
        cache.list(CONFIGMAPS, index=("other", "x"))
    cache.informer(CONFIGMAPS)
    await cache.start()
    try:
        with pytest.raises(RuntimeError, match="before the cache starts"):
            cache.add_index(CONFIGMAPS, "late", by_source)
    finally:
        await cache.stop()
