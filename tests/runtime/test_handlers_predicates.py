"""Predicates (which events are worth a reconcile) and handlers (which requests they enqueue)."""

from __future__ import annotations

from typing import Any

from memop.runtime.cache.store import ADDED, DELETED, MODIFIED, RESYNC
from memop.runtime.controller import predicates
from memop.runtime.controller.handlers import (
    enqueue_controller_owner,
    enqueue_mapped,
    enqueue_object,
    request_for,
)
from memop.runtime.controller.reconcile import Request

ALWAYS = (ADDED, DELETED, RESYNC)


def obj(
    name: str = "x",
    *,
    ns: str = "ns",
    rv: str = "1",
    generation: int = 1,
    labels: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "resourceVersion": rv,
        "generation": generation,
        "labels": labels or {},
        "ownerReferences": owners or [],
        **meta,
    }
    return {"apiVersion": "v1", "kind": "Thing", "metadata": metadata}


def ref(
    name: str, kind: str = "Memcached", api_version: str = "cache.example.com/v1", controller: Any = True
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": f"uid-{name}",
        "controller": controller,
    }


def test_resource_version_changed() -> None:
    pred = predicates.resource_version_changed
    assert not pred(MODIFIED, obj(rv="2"), obj(rv="2"))
    assert pred(MODIFIED, obj(rv="3"), obj(rv="2"))
    assert pred(MODIFIED, obj(), None)
    for kind in ALWAYS:
        assert pred(kind, obj(rv="2"), obj(rv="2"))


def test_generation_changed_drops_status_and_metadata_only_updates() -> None:
    pred = predicates.generation_changed
    assert not pred(MODIFIED, obj(rv="2", labels={"a": "b"}), obj(rv="1"))
    assert pred(MODIFIED, obj(rv="2", generation=2), obj(rv="1"))
    # The start of a deletion passes although the generation stays.
    assert pred(MODIFIED, obj(rv="2", deletionTimestamp="2024-01-01T00:00:00Z"), obj(rv="1"))
    for kind in ALWAYS:
        assert pred(kind, obj(rv="2"), obj(rv="1"))
    # Objects without metadata do not break it.
    assert pred(MODIFIED, {"metadata": None}, {"metadata": {"generation": 1}})


def test_label_selector_matches_the_new_or_the_old_object() -> None:
    pred = predicates.label_selector("app=web,tier!=db")
    assert pred(ADDED, obj(labels={"app": "web"}), None)
    assert not pred(ADDED, obj(labels={"app": "web", "tier": "db"}), None)
    assert not pred(DELETED, obj(labels={"app": "other"}), obj(labels={"app": "web"}))
    assert pred(MODIFIED, obj(labels={"app": "other"}), obj(labels={"app": "web"}))  # leaving
    assert pred(MODIFIED, obj(labels={"app": "web"}), obj(labels={"app": "other"}))  # joining
    assert not pred(MODIFIED, obj(labels={"app": "a"}), obj(labels={"app": "b"}))
    assert not pred(ADDED, {"metadata": {"name": "x", "labels": "not a map"}}, None)


def test_all_of_needs_every_predicate() -> None:
    both = predicates.all_of(predicates.label_selector("app=web"), predicates.generation_changed)
    assert both(MODIFIED, obj(generation=2, labels={"app": "web"}), obj(labels={"app": "web"}))
    assert not both(MODIFIED, obj(labels={"app": "web"}), obj(labels={"app": "web"}))
    assert not both(ADDED, obj(labels={"app": "db"}), None)


def test_enqueue_object_and_request_for() -> None:
    assert enqueue_object(ADDED, obj("a", ns="n"), None) == [Request("n", "a")]
    assert request_for({"metadata": {"name": "cluster-scoped"}}) == Request("", "cluster-scoped")
    assert str(Request("n", "a")) == "n/a"
    assert str(Request("", "a")) == "a"


def test_enqueue_controller_owner_maps_only_the_controlling_owner_of_the_kind() -> None:
    mapper = enqueue_controller_owner("cache.example.com", "Memcached")
    assert mapper(ADDED, obj(owners=[ref("m1")]), None) == [Request("ns", "m1")]
    assert mapper(ADDED, obj(owners=[ref("m1", controller=False)]), None) == []
    assert mapper(ADDED, obj(owners=[ref("m1", controller="true")]), None) == []  # not a bool
    assert mapper(ADDED, obj(owners=[ref("m1", kind="Other")]), None) == []
    assert mapper(ADDED, obj(owners=[ref("m1", api_version="other.example.com/v1")]), None) == []
    # The group matters, not the version.
    assert mapper(ADDED, obj(owners=[ref("m1", api_version="cache.example.com/v2")]), None) == [
        Request("ns", "m1")
    ]
    assert mapper(ADDED, obj(owners=[ref("m0", controller=False), ref("m1")]), None) == [Request("ns", "m1")]
    # An update that moves the controller reference reconciles both owners.
    moved = mapper(MODIFIED, obj(owners=[ref("m2")]), obj(owners=[ref("m1")]))
    assert sorted(moved) == [Request("ns", "m1"), Request("ns", "m2")]
    assert mapper(MODIFIED, obj(owners=[ref("m1")]), obj(owners=[ref("m1")])) == [Request("ns", "m1")]
    assert (
        mapper(ADDED, {"metadata": {"name": "x", "ownerReferences": ["junk", {"controller": True}]}}, None)
        == []
    )
    core = enqueue_controller_owner("", "ConfigMap")
    assert core(ADDED, obj(owners=[ref("cm", kind="ConfigMap", api_version="v1")]), None) == [
        Request("ns", "cm")
    ]


def test_enqueue_mapped_maps_the_new_and_the_old_object() -> None:
    def by_label(o: dict[str, Any]) -> list[Request]:
        target = o["metadata"]["labels"].get("target")
        return [Request("ns", target)] if target else []

    mapper = enqueue_mapped(by_label)
    assert mapper(ADDED, obj(labels={"target": "a"}), None) == [Request("ns", "a")]
    moved = mapper(MODIFIED, obj(labels={"target": "b"}), obj(labels={"target": "a"}))
    assert sorted(moved) == [Request("ns", "a"), Request("ns", "b")]
    same = obj(labels={"target": "a"})
    assert mapper(RESYNC, same, same) == [Request("ns", "a")]
    assert mapper(ADDED, obj(), None) == []
