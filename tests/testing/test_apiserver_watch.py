"""WATCH over HTTP: replay from a resourceVersion, initial events, selectors, bookmarks, expiry
and timeouts, read both raw and through kubernetes_asyncio's Watch."""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes_asyncio import client, watch

from memop.testing.apiserver.server import ApiServer

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


# A label on what a test creates, to select it from what the cluster keeps in every namespace.
MINE = {"test": "mine"}


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


async def test_watch_replays_changes_after_a_resource_version(http: Http, namespace: str) -> None:
    start = (await http.post(cm_path(namespace), {"metadata": {"name": "a", "labels": MINE}})).body[
        "metadata"
    ]["resourceVersion"]
    await http.post(cm_path(namespace), {"metadata": {"name": "b", "labels": MINE}})
    await http.put(cm_path(namespace, "a"), {"metadata": {"name": "a", "labels": MINE}, "data": {"x": "1"}})
    b_last = (await http.get(cm_path(namespace, "b"))).body
    await http.delete(cm_path(namespace, "b"))
    # Selected: what the cluster publishes into a new namespace may come after start.
    async with http.watch(
        cm_path(namespace), {"resourceVersion": start, "labelSelector": "test=mine"}
    ) as stream:
        assert stream.status == 200
        events = await stream.take(3)
        assert summary(events) == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
        assert events[1]["object"]["data"] == {"x": "1"}
        assert events[0]["object"]["kind"] == "ConfigMap"
        assert events[0]["object"]["apiVersion"] == "v1"
        deleted = events[2]["object"]
        assert int(deleted["metadata"]["resourceVersion"]) > int(b_last["metadata"]["resourceVersion"])
        assert deleted["metadata"]["uid"] == b_last["metadata"]["uid"]
        await http.post(cm_path(namespace), {"metadata": {"name": "c", "labels": MINE}})
        live = await stream.next_not_bookmark()
        assert live is not None
        assert summary([live]) == [("ADDED", "c")]


async def test_watch_without_a_version_starts_with_the_current_objects(http: Http, namespace: str) -> None:
    for name in ("a", "b"):
        await http.post(cm_path(namespace), {"metadata": {"name": name, "labels": MINE}})
    # Selected: a namespace also holds what the cluster publishes there (kube-root-ca.crt).
    async with http.watch(cm_path(namespace), {"labelSelector": "test=mine"}) as stream:
        initial = await stream.take(2)
        assert sorted(summary(initial)) == [("ADDED", "a"), ("ADDED", "b")]
        await http.delete(cm_path(namespace, "a"))
        event = await stream.next_not_bookmark()
        assert event is not None
        assert summary([event]) == [("DELETED", "a")]


async def test_watch_is_scoped_to_its_namespace(http: Http, namespace: str, cluster: ClusterHandle) -> None:
    other = f"{namespace}-other"
    await http.post("/api/v1/namespaces", {"metadata": {"name": other}})
    try:
        rv = (await http.get(cm_path(namespace))).body["metadata"]["resourceVersion"]
        # Selected by label too: the cluster publishes its own ConfigMaps into new namespaces
        # (kube-root-ca.crt), maybe after rv.
        mine = {"resourceVersion": rv, "labelSelector": "test=mine"}
        async with (
            http.watch(cm_path(namespace), mine) as scoped,
            http.watch(
                "/api/v1/configmaps", {**mine, "fieldSelector": f"metadata.namespace={other}"}
            ) as everywhere,
        ):
            await http.post(cm_path(other), {"metadata": {"name": "elsewhere", "labels": MINE}})
            await http.post(cm_path(namespace), {"metadata": {"name": "here", "labels": MINE}})
            here = await scoped.next_not_bookmark()
            assert here is not None
            assert summary([here]) == [("ADDED", "here")]
            theirs = await everywhere.next_not_bookmark()
            assert theirs is not None
            assert summary([theirs]) == [("ADDED", "elsewhere")]
    finally:
        if cluster.real:
            await http.delete(f"/api/v1/namespaces/{other}")


async def test_label_selector_watch_sees_objects_enter_and_leave(http: Http, namespace: str) -> None:
    rv = (await http.get(cm_path(namespace))).body["metadata"]["resourceVersion"]
    async with http.watch(cm_path(namespace), {"resourceVersion": rv, "labelSelector": "app=x"}) as stream:
        await http.post(cm_path(namespace), {"metadata": {"name": "m", "labels": {"app": "x"}}})
        await http.post(cm_path(namespace), {"metadata": {"name": "ignored", "labels": {"app": "y"}}})
        await http.patch(cm_path(namespace, "m"), {"data": {"k": "v"}})
        left = await http.patch(cm_path(namespace, "m"), {"metadata": {"labels": {"app": "y"}}})
        await http.patch(cm_path(namespace, "m"), {"metadata": {"labels": {"app": "x"}}})
        await http.delete(cm_path(namespace, "m"))
        events = [await stream.next_not_bookmark() for _ in range(5)]
        assert summary([e for e in events if e is not None]) == [
            ("ADDED", "m"),
            ("MODIFIED", "m"),
            ("DELETED", "m"),
            ("ADDED", "m"),
            ("DELETED", "m"),
        ]
        stopped = events[2]
        assert stopped is not None
        # The object that stopped matching arrives with its previous content and the change's version.
        assert stopped["object"]["metadata"]["labels"] == {"app": "x"}
        assert stopped["object"]["metadata"]["resourceVersion"] == left.body["metadata"]["resourceVersion"]


async def test_watch_of_one_object_by_name(http: Http, namespace: str) -> None:
    rv = (await http.get(cm_path(namespace))).body["metadata"]["resourceVersion"]
    query = {"resourceVersion": rv, "fieldSelector": "metadata.name=target"}
    async with http.watch(cm_path(namespace), query) as stream:
        await http.post(cm_path(namespace), {"metadata": {"name": "other"}})
        await http.post(cm_path(namespace), {"metadata": {"name": "target"}})
        event = await stream.next_not_bookmark()
        assert event is not None
        assert summary([event]) == [("ADDED", "target")]


async def test_timeout_seconds_ends_the_stream_cleanly(http: Http, namespace: str) -> None:
    rv = (await http.get(cm_path(namespace))).body["metadata"]["resourceVersion"]
    started = time.monotonic()
    # Selected: nothing the test makes, not even what the cluster may still publish there.
    query = {"resourceVersion": rv, "timeoutSeconds": 1, "labelSelector": "test=mine"}
    async with http.watch(cm_path(namespace), query) as stream:
        assert await stream.next_not_bookmark(timeout=10) is None
    assert time.monotonic() - started < 5


async def test_kubernetes_asyncio_watch_reads_the_stream(cluster: ClusterHandle, namespace: str) -> None:
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    await core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    listed = await core.list_namespaced_config_map(namespace)
    seen: list[tuple[str, str]] = []

    async def consume() -> None:
        async with watch.Watch() as w:
            async for event in w.stream(
                core.list_namespaced_config_map,
                namespace,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=5,
                _request_timeout=10,
            ):
                # Only the test's own: on a real cluster the root-CA publisher may create
                # kube-root-ca.crt in a new namespace at any time (it once came first here).
                if event["object"].metadata.name in ("a", "b"):
                    seen.append((event["type"], event["object"].metadata.name))
                if len(seen) == 2:
                    w.stop()

    task = asyncio.create_task(consume())
    await core.create_namespaced_config_map(namespace, {"metadata": {"name": "b"}})
    await core.delete_namespaced_config_map("a", namespace)
    await asyncio.wait_for(task, 10)
    assert seen == [("ADDED", "b"), ("DELETED", "a")]


@pytest.mark.fake_only
async def test_a_version_older_than_the_history_gets_an_expired_error_event(
    http: Http, namespace: str, cluster: ClusterHandle
) -> None:
    old = (await http.post(cm_path(namespace), {"metadata": {"name": "a"}})).body["metadata"][
        "resourceVersion"
    ]
    await http.post(cm_path(namespace), {"metadata": {"name": "b"}})
    cluster.fake.compact()
    current = cluster.fake.store.resource_version
    async with http.watch(cm_path(namespace), {"resourceVersion": old}) as stream:
        assert stream.status == 200
        event = await stream.next()
        assert event is not None
        assert event["type"] == "ERROR"
        assert event["object"] == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {old} ({current})",
            "reason": "Expired",
            "code": 410,
        }
        assert await stream.next() is None
    # Watching from the newest version still works after a compaction.
    async with http.watch(cm_path(namespace), {"resourceVersion": str(current)}) as stream:
        await http.post(cm_path(namespace), {"metadata": {"name": "c"}})
        event = await stream.next_not_bookmark()
        assert event is not None
        assert summary([event]) == [("ADDED", "c")]


async def test_a_watch_from_before_the_watch_cache_began_is_expired(http: Http, namespace: str) -> None:
    """The watch cache holds only what came after its initial LIST (at server start for built-in
    resources): an older resourceVersion, such as "1", gets a 200 stream whose only event is a
    410 Expired ERROR naming the oldest version it can still serve, and the stream ends. A real
    server answers the same, with or without bookmarks."""
    created = (await http.post(cm_path(namespace), {"metadata": {"name": "a"}})).body
    for query in ({"resourceVersion": "1"}, {"resourceVersion": "1", "allowWatchBookmarks": True}):
        async with http.watch(cm_path(namespace), query) as stream:
            assert stream.status == 200
            event = await stream.next()
            assert event is not None
            assert event["type"] == "ERROR", event
            status = event["object"]
            assert (status["code"], status["reason"], status["status"]) == (410, "Expired", "Failure")
            match = re.fullmatch(r"too old resource version: 1 \((\d+)\)", status["message"])
            assert match is not None, status["message"]
            assert 1 < int(match[1]) < int(created["metadata"]["resourceVersion"])
            assert await stream.next() is None
    # From a version inside the window (the create's), the watch works.
    since = {"resourceVersion": created["metadata"]["resourceVersion"], "labelSelector": "test=mine"}
    async with http.watch(cm_path(namespace), since) as s:
        await http.post(cm_path(namespace), {"metadata": {"name": "b", "labels": MINE}})
        event = await s.next_not_bookmark()
        assert event is not None
        assert summary([event]) == [("ADDED", "b")]


async def test_history_size_bounds_the_replay() -> None:
    async with ApiServer(history_size=3) as server:
        store = server.store
        cms = store.resource("", "v1", "configmaps")
        first = store.create(cms, "default", {"metadata": {"name": "a"}})
        for name in ("b", "c", "d", "e"):
            store.create(cms, "default", {"metadata": {"name": name}})
        api = client.ApiClient(server.client_configuration())
        try:
            from tests.conftest import Http  # noqa: PLC0415 - the conftest module is importable here

            http = Http(api)
            async with http.watch(
                cm_path("default"), {"resourceVersion": first["metadata"]["resourceVersion"]}
            ) as s:
                event = await s.next()
                assert event is not None
                assert event["type"] == "ERROR"
                assert event["object"]["code"] == 410
        finally:
            await api.close()


async def test_bookmarks_arrive_periodically() -> None:
    async with ApiServer(bookmark_interval=0.05) as server:
        api = client.ApiClient(server.client_configuration())
        try:
            from tests.conftest import Http  # noqa: PLC0415

            http = Http(api)
            rv = server.store.resource_version
            async with http.watch(
                cm_path("default"), {"resourceVersion": rv, "allowWatchBookmarks": True}
            ) as s:
                server.store.create(
                    server.store.resource("", "v1", "configmaps"), "default", {"metadata": {"name": "a"}}
                )
                added = await s.next()
                assert added is not None
                assert added["type"] == "ADDED"
                bookmark = await s.next()
                assert bookmark == {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": "ConfigMap",
                        "apiVersion": "v1",
                        "metadata": {"resourceVersion": added["object"]["metadata"]["resourceVersion"]},
                    },
                }
                # Periodic: they keep coming while nothing changes.
                assert [(await s.next()) == bookmark for _ in range(3)] == [True, True, True]
            async with http.watch(cm_path("default"), {"resourceVersion": rv}) as s:
                # Without allowWatchBookmarks no bookmark is sent; the stream ends at its timeout.
                await s.next()  # the ADDED replayed from history
                with pytest.raises(TimeoutError):
                    await s.next(timeout=0.3)
        finally:
            await api.close()


@pytest.mark.fake_only
async def test_send_initial_events_ends_with_a_marked_bookmark(http: Http, namespace: str) -> None:
    await http.post(cm_path(namespace), {"metadata": {"name": "a", "labels": MINE}})
    query = {
        "sendInitialEvents": True,
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": True,
        "labelSelector": "test=mine",  # not the kube-root-ca.crt every namespace holds
    }
    async with http.watch(cm_path(namespace), query) as stream:
        added, bookmark = await stream.take(2)
        assert summary([added]) == [("ADDED", "a")]
        assert bookmark["type"] == "BOOKMARK"
        assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    bad = await http.get(cm_path(namespace), query={"watch": "true", "sendInitialEvents": "true"})
    assert bad.status == 422
    no_initial = {**query, "sendInitialEvents": False}
    async with http.watch(cm_path(namespace), no_initial) as stream:
        await http.post(cm_path(namespace), {"metadata": {"name": "b", "labels": MINE}})
        event = await stream.next_not_bookmark()
        assert event is not None
        assert summary([event]) == [("ADDED", "b")]
