"""The in-memory server's restart as a kube-apiserver's: a window of refused connections, and a
watch cache rebuilt at the current resourceVersion (older watches get 410 Expired, KEP 1904),
while every object keeps its resourceVersion and uid. They need the fake, so they skip on a
real cluster."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest

from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

pytestmark = pytest.mark.fake_only

NS = "default"


def cm_path(name: str = "") -> str:
    return f"/api/v1/namespaces/{NS}/configmaps" + (f"/{name}" if name else "")


def rv_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


async def test_connections_are_refused_during_the_downtime(http: Http, cluster: ClusterHandle) -> None:
    server = cluster.fake
    port = server.port
    created = (await http.post(cm_path(), {"metadata": {"name": "a"}})).body
    started = time.monotonic()
    restart = asyncio.create_task(server.restart(downtime=1.0))
    await wait_for(lambda: not server.listening, timeout=5)
    with pytest.raises(aiohttp.ClientConnectionError):
        await http.get(cm_path("a"), timeout=5)
    # The refusal came from inside the window, not from some other failure after it.
    assert not restart.done()
    await restart
    assert time.monotonic() - started >= 1.0
    assert server.listening
    assert server.port == port
    again = await http.get(cm_path("a"))
    assert again.status == 200
    assert again.body["metadata"]["uid"] == created["metadata"]["uid"]
    assert rv_of(again.body) == rv_of(created)


async def test_a_plain_restart_keeps_the_watch_history(http: Http, cluster: ClusterHandle) -> None:
    first = (await http.post(cm_path(), {"metadata": {"name": "a"}})).body
    await http.post(cm_path(), {"metadata": {"name": "b"}})
    await cluster.fake.restart()
    async with http.watch(cm_path(), {"resourceVersion": rv_of(first)}) as stream:
        event = await stream.next_not_bookmark()
        assert event is not None
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "b")


async def test_a_rebuilt_watch_cache_expires_older_versions_and_keeps_every_object(
    http: Http, cluster: ClusterHandle
) -> None:
    server = cluster.fake
    a = (await http.post(cm_path(), {"metadata": {"name": "a"}})).body
    b = (await http.post(cm_path(), {"metadata": {"name": "b"}})).body
    a = (await http.patch(cm_path("a"), {"data": {"k": "v"}})).body
    listed = (await http.get(cm_path())).body
    current = rv_of(listed)
    await server.restart(rebuild_watch_cache=True)

    for older in (rv_of(b), str(int(current) - 1), "1"):
        async with http.watch(cm_path(), {"resourceVersion": older}) as stream:
            # As for compacted history: a 200 whose only event is the 410 Expired Status.
            assert stream.status == 200
            event = await stream.next()
            assert event is not None
            assert event["type"] == "ERROR"
            status = event["object"]
            assert (status["kind"], status["status"], status["code"], status["reason"]) == (
                "Status",
                "Failure",
                410,
                "Expired",
            )
            assert status["message"] == f"too old resource version: {older} ({current})"
            assert await stream.next() is None

    async with http.watch(cm_path(), {"resourceVersion": current}) as stream:
        c = (await http.post(cm_path(), {"metadata": {"name": "c"}})).body
        event = await stream.next_not_bookmark()
        assert event is not None
        assert (event["type"], rv_of(event["object"])) == ("ADDED", rv_of(c))

    # etcd kept everything: same objects, same resourceVersions and uids.
    for before in (a, b):
        got = (await http.get(cm_path(before["metadata"]["name"]))).body
        assert rv_of(got) == rv_of(before)
        assert got["metadata"]["uid"] == before["metadata"]["uid"]
    relisted = (await http.get(cm_path())).body
    mine = {"a", "b", "c"}  # not what the cluster keeps in every namespace (kube-root-ca.crt)
    assert {i["metadata"]["name"]: rv_of(i) for i in relisted["items"] if i["metadata"]["name"] in mine} == {
        "a": rv_of(a),
        "b": rv_of(b),
        "c": rv_of(c),
    }


async def test_changes_during_the_downtime_are_before_the_rebuilt_watch_cache(
    http: Http, cluster: ClusterHandle
) -> None:
    server = cluster.fake
    before = rv_of((await http.post(cm_path(), {"metadata": {"name": "a"}})).body)
    restart = asyncio.create_task(server.restart(downtime=0.5, rebuild_watch_cache=True))
    await wait_for(lambda: not server.listening, timeout=5)
    # Written to etcd (by another apiserver, a controller) while this one was down.
    configmaps = server.store.resource("", "v1", "configmaps")
    during = rv_of(server.store.create(configmaps, NS, {"metadata": {"name": "during"}}))
    await restart
    async with http.watch(cm_path(), {"resourceVersion": before}) as stream:
        event = await stream.next()
        assert event is not None
        assert (event["type"], event["object"]["code"]) == ("ERROR", 410)
    async with http.watch(cm_path(), {"resourceVersion": during}) as stream:
        await http.delete(cm_path("a"))
        event = await stream.next_not_bookmark()
        assert event is not None
        assert (event["type"], event["object"]["metadata"]["name"]) == ("DELETED", "a")


async def test_a_negative_downtime_is_refused(cluster: ClusterHandle) -> None:
    with pytest.raises(ValueError, match="downtime"):
        await cluster.fake.restart(downtime=-1)
    assert cluster.fake.listening
