"""Client.apply (server-side apply) and create_or_patch against an API server.

Runs on the ``cluster`` fixture: the in-memory server, or a real cluster with
USE_EXISTING_CLUSTER=true.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from prometheus_client import REGISTRY

from memop.runtime.cache.cache import Cache
from memop.runtime.client.client import Client
from memop.runtime.client.errors import AlreadyExists, Conflict
from memop.runtime.client.resources import CONFIGMAPS
from memop.runtime.controller.createorpatch import create_or_patch, merge_patch
from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle


@pytest.fixture
async def client(cluster: ClusterHandle) -> Client:
    return Client(cluster.api_client(), user_agent="apply-test", max_retries=0)


def sent(client: Client, method: str | None = None) -> float:
    """Requests sent to ``client``'s host so far (of ``method``, or all)."""
    total = 0.0
    for metric in REGISTRY.collect():
        if metric.name != "rest_client_requests":
            continue
        for sample in metric.samples:
            labels = sample.labels
            if (
                sample.name == "rest_client_requests_total"
                and labels.get("host") == client.host
                and (method is None or labels.get("method") == method)
            ):
                total += sample.value
    return total


def config(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    """An apply configuration without apiVersion and kind: Client.apply fills them in."""
    return {"metadata": {"name": name, "namespace": namespace}, "data": data}


def owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{e['manager']}/{e['operation']}": e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


# -- Client.apply -------------------------------------------------------------------------------


async def test_apply_creates_then_changes_only_what_it_owns(client: Client, namespace: str) -> None:
    created = await client.apply(CONFIGMAPS, config("a", namespace, {"k": "v", "j": "1"}), field_manager="me")
    assert created["data"] == {"k": "v", "j": "1"}
    assert owners(created) == {"me/Apply": {"f:data": {"f:j": {}, "f:k": {}}}}
    # Someone else's field beside ours.
    await client.patch(CONFIGMAPS, "a", {"data": {"theirs": "x"}}, namespace)
    again = await client.apply(CONFIGMAPS, config("a", namespace, {"k": "v2"}), field_manager="me")
    assert again["data"] == {"k": "v2", "theirs": "x"}  # j, no longer applied, is gone
    unchanged = await client.apply(CONFIGMAPS, config("a", namespace, {"k": "v2"}), field_manager="me")
    assert unchanged["metadata"]["resourceVersion"] == again["metadata"]["resourceVersion"]


async def test_apply_conflicts_with_another_manager_unless_forced(client: Client, namespace: str) -> None:
    await client.apply(CONFIGMAPS, config("c", namespace, {"k": "v"}), field_manager="first")
    with pytest.raises(Conflict) as caught:
        await client.apply(CONFIGMAPS, config("c", namespace, {"k": "w"}), field_manager="second")
    assert caught.value.message == 'Apply failed with 1 conflict: conflict with "first": .data.k'
    assert [c["field"] for c in caught.value.body["details"]["causes"]] == [".data.k"]
    assert (await client.get(CONFIGMAPS, "c", namespace))["data"] == {"k": "v"}
    forced = await client.apply(
        CONFIGMAPS, config("c", namespace, {"k": "w"}), field_manager="second", force=True
    )
    assert forced["data"] == {"k": "w"}
    assert owners(forced) == {"second/Apply": {"f:data": {"f:k": {}}}}


async def test_apply_needs_a_manager_and_a_name(client: Client) -> None:
    before = sent(client)
    with pytest.raises(ValueError, match="field_manager"):
        await client.apply(CONFIGMAPS, config("x", "ns", {}), field_manager="")
    with pytest.raises(ValueError, match=r"metadata\.name"):
        await client.apply(CONFIGMAPS, {"metadata": {"namespace": "ns"}}, field_manager="me")
    assert sent(client) == before


# -- create_or_patch ----------------------------------------------------------------------------


def with_data(**data: str) -> Any:
    def mutate(obj: dict[str, Any]) -> None:
        obj.setdefault("data", {}).update(data)
        obj["metadata"].setdefault("labels", {})["app"] = "demo"

    return mutate


async def test_create_or_patch_creates_patches_and_leaves_alone(client: Client, namespace: str) -> None:
    ref = {"metadata": {"name": "cop", "namespace": namespace}}
    before = sent(client)
    result, obj = await create_or_patch(client, CONFIGMAPS, dict(ref), with_data(k="v"))
    assert result == "created"
    assert obj["data"] == {"k": "v"}
    assert obj["metadata"]["labels"] == {"app": "demo"}
    assert sent(client) == before + 2  # the GET that found nothing, the POST
    # Someone adds a label and a key of their own: a patch of ours keeps both.
    await client.patch(
        CONFIGMAPS, "cop", {"metadata": {"labels": {"team": "x"}}, "data": {"theirs": "y"}}, namespace
    )
    before, patches = sent(client), sent(client, "PATCH")
    result, obj = await create_or_patch(client, CONFIGMAPS, dict(ref), with_data(k="v2"))
    assert result == "patched"
    assert obj["data"] == {"k": "v2", "theirs": "y"}
    assert obj["metadata"]["labels"] == {"app": "demo", "team": "x"}
    assert (sent(client), sent(client, "PATCH")) == (before + 2, patches + 1)  # a GET, a PATCH
    before = sent(client)
    result, same = await create_or_patch(client, CONFIGMAPS, dict(ref), with_data(k="v2"))
    assert result == "unchanged"
    assert same["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert sent(client) == before + 1  # the GET only


class CountingClient(Client):
    """A Client that counts its GETs of single objects (the reflectors' LIST and WATCH of the
    cache it feeds are not GETs of this method)."""

    gets = 0

    async def get(self, res: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.gets += 1
        return await super().get(res, name, namespace)


async def test_create_or_patch_from_the_cache_reads_nothing_from_the_server(
    cluster: ClusterHandle, namespace: str
) -> None:
    client = CountingClient(cluster.api_client(), user_agent="apply-test", max_retries=0)
    cache = Cache(client, namespaces=[namespace])
    cache.informer(CONFIGMAPS)
    await cache.start()
    try:
        assert await cache.wait_for_sync(10)
        ref = {"metadata": {"name": "cached", "namespace": namespace}}
        result, _ = await create_or_patch(client, CONFIGMAPS, dict(ref), with_data(k="v"), cache=cache)
        assert result == "created"
        assert cache.get(CONFIGMAPS, "cached", namespace) is not None  # recorded: read at once
        result, _ = await create_or_patch(client, CONFIGMAPS, dict(ref), with_data(k="v2"), cache=cache)
        assert result == "patched"
        assert (cache.get(CONFIGMAPS, "cached", namespace) or {}).get("data") == {"k": "v2"}
        result, _ = await create_or_patch(client, CONFIGMAPS, dict(ref), with_data(k="v2"), cache=cache)
        assert result == "unchanged"
        assert client.gets == 0
    finally:
        await cache.stop()


async def test_create_or_patch_trusts_its_cache_and_never_overwrites_what_it_has_not_seen(
    client: Client, namespace: str, cluster: ClusterHandle
) -> None:
    server = cluster.fake
    cache = Cache(client, namespaces=[namespace])
    cache.informer(CONFIGMAPS)
    await cache.start()
    try:
        assert await cache.wait_for_sync(10)
        server.silence_watches(True)  # the cache falls behind
        await client.create(CONFIGMAPS, {"metadata": {"name": "unseen"}, "data": {"k": "x"}}, namespace)
        ref = {"metadata": {"name": "unseen", "namespace": namespace}}
        with pytest.raises(AlreadyExists):
            await create_or_patch(client, CONFIGMAPS, dict(ref), with_data(k="y"), cache=cache)
        assert (await client.get(CONFIGMAPS, "unseen", namespace))["data"] == {"k": "x"}
        server.silence_watches(False)
        await wait_for(lambda: cache.get(CONFIGMAPS, "unseen", namespace) is not None, timeout=10)
        result, patched = await create_or_patch(client, CONFIGMAPS, dict(ref), with_data(k="y"), cache=cache)
        assert result == "patched"
        assert patched["data"] == {"k": "y"}
    finally:
        server.silence_watches(False)
        await cache.stop()


async def test_create_or_patch_refuses_a_mutation_that_renames(client: Client, namespace: str) -> None:
    def rename(obj: dict[str, Any]) -> None:
        obj["metadata"]["name"] = "other"

    with pytest.raises(ValueError, match="must not change"):
        await create_or_patch(client, CONFIGMAPS, {"metadata": {"name": "n", "namespace": namespace}}, rename)


def test_merge_patch_carries_only_the_difference() -> None:
    old = {"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}, "list": [1, 2]}
    new = {
        "metadata": {"labels": {"a": "1", "c": "3"}},
        "data": {"k": "v"},
        "list": [1, 2, 3],
        "extra": {"x": 1},
    }
    assert merge_patch(old, new) == {
        "metadata": {"labels": {"b": None, "c": "3"}},
        "list": [1, 2, 3],
        "extra": {"x": 1},
    }
    assert merge_patch(old, old) == {}
    assert merge_patch({"a": {"b": 1}}, {"a": 2}) == {"a": 2}
