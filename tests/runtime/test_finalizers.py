"""memop.runtime.controller.finalizers against an API server: one request or none, never another
writer's finalizer lost, a stale read answered with Conflict.

Runs on the ``cluster`` fixture: the in-memory server, or a real cluster with
USE_EXISTING_CLUSTER=true (every object's finalizers are dropped before the test ends, so the
namespace can go).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from prometheus_client import REGISTRY

from memop.runtime.cache.cache import Cache
from memop.runtime.client.client import Client
from memop.runtime.client.errors import Conflict, NotFound
from memop.runtime.client.resources import CONFIGMAPS
from memop.runtime.controller.finalizers import add_finalizer, finalizers_of, has_finalizer, remove_finalizer
from memop.runtime.controller.reconcile import TerminalError
from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle

MINE = "example.com/mine"
OTHER = "example.com/other"
THIRD = "example.com/third"


@pytest.fixture
async def client(cluster: ClusterHandle) -> Client:
    return Client(cluster.api_client(), user_agent="finalizers-test", max_retries=0)


@pytest.fixture
async def made(client: Client, namespace: str) -> AsyncIterator[list[str]]:
    """Names of ConfigMaps the test made: their finalizers are dropped at the end."""
    names: list[str] = []
    yield names
    for name in names:
        with contextlib.suppress(NotFound):
            await client.patch(CONFIGMAPS, name, {"metadata": {"finalizers": None}}, namespace)


def sent(client: Client) -> float:
    """Requests ``client``'s host has been sent so far (every code and method)."""
    total = 0.0
    for metric in REGISTRY.collect():
        if metric.name != "rest_client_requests":
            continue
        for sample in metric.samples:
            if sample.name == "rest_client_requests_total" and sample.labels.get("host") == client.host:
                total += sample.value
    return total


async def configmap(
    client: Client, namespace: str, made: list[str], name: str, finalizers: list[str]
) -> dict[str, Any]:
    made.append(name)
    body: dict[str, Any] = {"metadata": {"name": name, "finalizers": finalizers}, "data": {"k": "v"}}
    return await client.create(CONFIGMAPS, body, namespace)


def test_has_finalizer_and_finalizers_of_read_only_a_list_of_names() -> None:
    assert has_finalizer({"metadata": {"finalizers": [OTHER, MINE]}}, MINE)
    assert not has_finalizer({"metadata": {}}, MINE)
    assert not has_finalizer({}, MINE)
    # A string would pass `in` as a substring test: a malformed list names no finalizer.
    assert not has_finalizer({"metadata": {"finalizers": f"x{MINE}x"}}, MINE)
    assert finalizers_of({"metadata": {}}) == []
    assert finalizers_of({"metadata": {"finalizers": [MINE, 3]}}) is None


async def test_malformed_finalizers_are_never_written_over(client: Client) -> None:
    before = sent(client)
    obj = {"metadata": {"name": "m", "namespace": "ns", "resourceVersion": "1", "finalizers": "nope"}}
    with pytest.raises(TerminalError, match="not a list of names"):
        await add_finalizer(client, CONFIGMAPS, obj, MINE)
    obj["metadata"]["finalizers"] = [MINE, {"not": "a name"}]
    with pytest.raises(TerminalError, match="not a list of names"):
        await remove_finalizer(client, CONFIGMAPS, obj, MINE)
    assert sent(client) == before


async def test_adding_keeps_the_others_and_sends_one_request_then_none(
    client: Client, namespace: str, made: list[str]
) -> None:
    cm = await configmap(client, namespace, made, "add", [OTHER])
    before = sent(client)
    added = await add_finalizer(client, CONFIGMAPS, cm, MINE)
    assert sent(client) == before + 1
    assert added["metadata"]["finalizers"] == [OTHER, MINE]
    assert (await client.get(CONFIGMAPS, "add", namespace))["metadata"]["finalizers"] == [OTHER, MINE]
    before = sent(client)
    assert await add_finalizer(client, CONFIGMAPS, added, MINE) is added
    assert sent(client) == before


async def test_adding_from_a_stale_read_is_a_conflict_and_drops_nothing(
    client: Client, namespace: str, made: list[str]
) -> None:
    """Someone added a finalizer after we read the object: a merge patch of our list would
    replace theirs; the resourceVersion precondition makes it a 409 instead."""
    stale = await configmap(client, namespace, made, "stale-add", [])
    await client.patch(CONFIGMAPS, "stale-add", {"metadata": {"finalizers": [OTHER]}}, namespace)
    with pytest.raises(Conflict):
        await add_finalizer(client, CONFIGMAPS, stale, MINE)
    fresh = await client.get(CONFIGMAPS, "stale-add", namespace)
    assert fresh["metadata"]["finalizers"] == [OTHER]
    added = await add_finalizer(client, CONFIGMAPS, fresh, MINE)  # the retry, from a fresh read
    assert added["metadata"]["finalizers"] == [OTHER, MINE]


async def test_adding_needs_the_resource_version() -> None:
    with pytest.raises(ValueError, match="resourceVersion"):
        await add_finalizer(None, CONFIGMAPS, {"metadata": {"name": "m"}}, MINE)  # type: ignore[arg-type]


async def test_removing_takes_only_ours_and_sends_one_request_then_none(
    client: Client, namespace: str, made: list[str]
) -> None:
    cm = await configmap(client, namespace, made, "remove", [OTHER, MINE, THIRD])
    before = sent(client)
    removed = await remove_finalizer(client, CONFIGMAPS, cm, MINE)
    assert sent(client) == before + 1
    assert removed["metadata"]["finalizers"] == [OTHER, THIRD]
    before = sent(client)
    assert await remove_finalizer(client, CONFIGMAPS, removed, MINE) is removed
    assert sent(client) == before


async def test_removing_from_a_stale_read_is_a_conflict_and_removes_nothing(
    client: Client, namespace: str, made: list[str]
) -> None:
    """We read [other, mine, third]; then "other" went, so index 1 is now "third". Removing
    index 1 blindly would take "third": the patch's test fails instead, raised as Conflict."""
    stale = await configmap(client, namespace, made, "stale-remove", [OTHER, MINE, THIRD])
    await client.patch(CONFIGMAPS, "stale-remove", {"metadata": {"finalizers": [MINE, THIRD]}}, namespace)
    with pytest.raises(Conflict, match=r"finalizers of ConfigMap .*/stale-remove changed"):
        await remove_finalizer(client, CONFIGMAPS, stale, MINE)
    fresh = await client.get(CONFIGMAPS, "stale-remove", namespace)
    assert fresh["metadata"]["finalizers"] == [MINE, THIRD]
    removed = await remove_finalizer(client, CONFIGMAPS, fresh, MINE)
    assert removed["metadata"]["finalizers"] == [THIRD]


async def test_removing_the_last_finalizer_of_an_object_being_deleted_lets_it_go(
    client: Client, namespace: str, made: list[str], cluster: ClusterHandle
) -> None:
    await configmap(client, namespace, made, "deleting", [MINE])
    await client.delete(CONFIGMAPS, "deleting", namespace)
    deleting = await client.get(CONFIGMAPS, "deleting", namespace)
    assert deleting["metadata"]["deletionTimestamp"]
    cache = Cache(client, namespaces=[namespace])
    cache.informer(CONFIGMAPS)
    await cache.start()
    try:
        assert await cache.wait_for_sync(10)
        await remove_finalizer(client, CONFIGMAPS, deleting, MINE, cache=cache)

        async def gone() -> bool:
            try:
                await client.get(CONFIGMAPS, "deleting", namespace)
            except NotFound:
                return True
            return False

        await wait_for(gone, timeout=10)
        # The answer (the object's last state) was not recorded: the cache lets it go.
        await wait_for(lambda: cache.get(CONFIGMAPS, "deleting", namespace) is None, timeout=10)
    finally:
        await cache.stop()


async def test_the_removal_that_deletes_answers_the_object_without_finalizers_at_its_last_version(
    client: Client, namespace: str, made: list[str]
) -> None:
    """As kube-apiserver v1.36.2 answers (measured): the finalizers gone, at the version the
    deleting object had; the DELETED event then carries the last stored state (the finalizer
    still there) at a later version."""
    listed = await client.list(CONFIGMAPS, namespace)
    await configmap(client, namespace, made, "last", [MINE])
    await client.delete(CONFIGMAPS, "last", namespace)
    deleting = await client.get(CONFIGMAPS, "last", namespace)
    answer = await remove_finalizer(client, CONFIGMAPS, deleting, MINE)
    assert answer["metadata"].get("finalizers") is None
    assert answer["metadata"]["deletionTimestamp"] == deleting["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["resourceVersion"] == deleting["metadata"]["resourceVersion"]
    events = client.watch(
        CONFIGMAPS, namespace, resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=30, read_timeout=30,
    )  # fmt: skip
    async for event in events:
        meta = event["object"]["metadata"]
        if meta["name"] == "last" and event["type"] == "DELETED":
            assert int(meta["resourceVersion"]) > int(answer["metadata"]["resourceVersion"])
            assert meta["finalizers"] == [MINE]
            break
    await events.aclose()


async def test_with_a_cache_the_next_read_sees_the_write_before_the_watch_does(
    client: Client, namespace: str, made: list[str], cluster: ClusterHandle
) -> None:
    server = cluster.fake
    cm = await configmap(client, namespace, made, "cached", [OTHER])
    cache = Cache(client, namespaces=[namespace])
    cache.informer(CONFIGMAPS)
    await cache.start()
    try:
        assert await cache.wait_for_sync(10)
        await wait_for(lambda: cache.get(CONFIGMAPS, "cached", namespace) is not None, timeout=10)
        server.silence_watches(True)  # the watch brings nothing from here on
        added = await add_finalizer(client, CONFIGMAPS, cm, MINE, cache=cache)
        assert has_finalizer(cache.get(CONFIGMAPS, "cached", namespace) or {}, MINE)
        removed = await remove_finalizer(client, CONFIGMAPS, added, MINE, cache=cache)
        assert cache.get(CONFIGMAPS, "cached", namespace) == {
            **removed,
            "metadata": {k: v for k, v in removed["metadata"].items() if k != "managedFields"},
        }
    finally:
        server.silence_watches(False)
        await cache.stop()
