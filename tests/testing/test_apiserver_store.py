"""The Store contract the simulated controllers build on: copies, events, indexes, history."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.resources import CRDS, NAMESPACES
from memop.testing.apiserver.store import Store, StoreEvent
from memop.testing.kinds import builtins

CMS = builtins.CONFIGMAPS
DEPLOYMENTS = builtins.DEPLOYMENTS


def test_results_and_arguments_are_never_shared() -> None:
    store = Store()
    body: dict[str, Any] = {"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}}
    created = store.create(CMS, "default", body)
    assert body == {"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}}
    created["data"]["k"] = "changed"
    body["metadata"]["labels"]["x"] = "changed"
    got = store.get(CMS, "default", "a")
    assert got["data"] == {"k": "v"}
    assert got["metadata"]["labels"] == {"x": "1"}
    items, rv = store.list(CMS, "default")
    items[0]["data"]["k"] = "changed"
    assert store.get(CMS, "default", "a")["data"] == {"k": "v"}
    assert rv == got["metadata"]["resourceVersion"]


def test_subscribers_see_every_change_in_order() -> None:
    store = Store()
    events: list[StoreEvent] = []
    unsubscribe = store.subscribe(events.append)
    store.create(CMS, "default", {"metadata": {"name": "a"}})
    current = store.get(CMS, "default", "a")
    store.update(CMS, "default", "a", {**current, "data": {"k": "v"}})
    store.delete(CMS, "default", "a")
    assert [(e.type, e.rtype, e.obj["metadata"]["name"]) for e in events] == [
        ("ADDED", CMS, "a"),
        ("MODIFIED", CMS, "a"),
        ("DELETED", CMS, "a"),
    ]
    versions = [int(e.obj["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)
    assert len(set(versions)) == 3
    assert events[0].old is None
    assert events[1].old is not None
    assert "data" not in events[1].old
    assert events[2].obj["data"] == {"k": "v"}  # the last state, stamped with the deleting version
    events[1].obj["data"]["k"] = "mutated"  # subscribers get copies
    unsubscribe()
    store.create(CMS, "default", {"metadata": {"name": "b"}})
    assert len(events) == 3


def test_removing_the_last_finalizer_deletes_with_one_event() -> None:
    store = Store()
    store.create(CMS, "default", {"metadata": {"name": "a", "finalizers": ["x.io/hold"]}})
    held = store.delete(CMS, "default", "a")
    assert held["metadata"]["deletionTimestamp"]
    events: list[StoreEvent] = []
    store.subscribe(events.append)
    held["metadata"]["finalizers"] = []
    store.update(CMS, "default", "a", held)
    assert [e.type for e in events] == ["DELETED"]
    with pytest.raises(ApiError) as missing:
        store.get(CMS, "default", "a")
    assert missing.value.code == 404


def test_dependents_of_follows_owner_references() -> None:
    store = Store()
    owner = store.create(CMS, "default", {"metadata": {"name": "owner"}})
    uid = owner["metadata"]["uid"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid, "controller": True}
    store.create(CMS, "default", {"metadata": {"name": "child", "ownerReferences": [ref]}})
    store.create(CMS, "default", {"metadata": {"name": "other"}})
    assert [(rt, o["metadata"]["name"]) for rt, o in store.dependents_of(uid)] == [(CMS, "child")]
    child = store.get(CMS, "default", "child")
    child["metadata"]["ownerReferences"] = []
    store.update(CMS, "default", "child", child)
    assert store.dependents_of(uid) == []


def test_namespaces_finalize_through_the_finalize_subresource() -> None:
    store = Store()
    store.create(NAMESPACES, None, {"metadata": {"name": "ns"}})
    terminating = store.delete(NAMESPACES, None, "ns")
    assert terminating["status"]["phase"] == "Terminating"
    # spec.finalizers cannot be changed through the main resource.
    terminating["spec"]["finalizers"] = []
    assert store.update(NAMESPACES, None, "ns", terminating)["spec"]["finalizers"] == ["kubernetes"]
    store.update(NAMESPACES, None, "ns", terminating, subresource="finalize")
    with pytest.raises(ApiError):
        store.get(NAMESPACES, None, "ns")


def test_resource_lookup() -> None:
    store = Store()
    assert store.resource("apps", "v1", "deployments") == DEPLOYMENTS
    assert store.resource_for_kind("apps/v1", "Deployment") == DEPLOYMENTS
    assert store.resource_for_kind("events.k8s.io/v1", "Event") == builtins.EVENTS_V1
    assert CRDS in store.resources()
    with pytest.raises(ApiError) as missing:
        store.resource("apps", "v1", "nothings")
    assert missing.value.code == 404


def test_a_crd_created_in_the_store_is_served() -> None:
    store = Store()
    store.create(
        CRDS,
        None,
        {
            "metadata": {"name": "things.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        },
    )
    things = store.resource("example.com", "v1", "things")
    assert (things.kind, things.singular, things.namespaced) == ("Thing", "thing", True)
    created = store.create(things, "default", {"metadata": {"name": "t"}, "spec": {"anything": 1}})
    assert created["apiVersion"] == "example.com/v1"
    assert created["spec"] == {"anything": 1}
    store.delete(CRDS, None, "things.example.com")
    with pytest.raises(ApiError):
        store.resource("example.com", "v1", "things")


def test_history_is_bounded() -> None:
    store = Store(history_size=2)
    start = store.resource_version
    for name in ("a", "b", "c"):
        store.create(CMS, "default", {"metadata": {"name": name}})
    with pytest.raises(ApiError) as expired:
        list(store.history_since(start))
    assert expired.value.code == 410
    assert [c.entry.obj["metadata"]["name"] for c in store.history_since(store.resource_version - 2)] == [
        "b",
        "c",
    ]


def _attempt(store: Store, op: str, name: str) -> None:
    if op == "create":
        store.create(CMS, "default", {"metadata": {"name": name}})
    elif op == "update":
        store.update(CMS, "default", name, {"metadata": {"name": name}})
    else:
        store.delete(CMS, "default", name)


_ops = st.lists(
    st.tuples(
        st.sampled_from(["create", "update", "delete"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["1", "2"]),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(_ops)
def test_events_replay_to_the_listed_state(ops: list[tuple[str, str, str]]) -> None:
    store = Store()
    replayed: dict[str, dict[str, Any]] = {}

    def apply(event: StoreEvent) -> None:
        if event.rtype == CMS and event.obj["metadata"]["namespace"] == "default":
            if event.type == "DELETED":
                replayed.pop(event.obj["metadata"]["name"])
            else:
                replayed[event.obj["metadata"]["name"]] = event.obj

    store.subscribe(apply)
    last_rv = store.resource_version
    for op, name, value in ops:
        exists = name in replayed
        if op == "create" and not exists:
            store.create(CMS, "default", {"metadata": {"name": name}, "data": {"v": value}})
        elif op == "update" and exists:
            current = store.get(CMS, "default", name)
            store.update(CMS, "default", name, {**current, "data": {"v": value}})
        elif op == "delete" and exists:
            store.delete(CMS, "default", name)
        else:
            with pytest.raises(ApiError) as failed:
                _attempt(store, op, name)
            assert failed.value.code == (409 if op == "create" else 404)
        assert store.resource_version >= last_rv
        last_rv = store.resource_version
    items, rv = store.list(CMS, "default")
    assert {i["metadata"]["name"]: i for i in items} == replayed
    assert int(rv) == store.resource_version
