"""Predicates (which events are worth a reconcile) and handlers (which requests they enqueue)."""

from __future__ import annotations

from typing import Any

import pytest

from memop.runtime.cache.store import ADDED, DELETED, MODIFIED, RESYNC
from memop.runtime.client.resources import NAMESPACES, Resource
from memop.runtime.controller import predicates
from memop.runtime.controller.handlers import (
    PRIMARY_RESOURCE_ANNOTATION,
    PRIMARY_RESOURCE_TYPE_ANNOTATION,
    annotated_owner,
    enqueue_controller_owner,
    enqueue_mapped,
    enqueue_object,
    map_to_annotated_owner,
    owner_annotations,
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


def test_enqueue_controller_owner_finds_a_cluster_scoped_owner_from_any_namespace() -> None:
    # A cluster-scoped owner's children, namespaced or not, carry its ownerReference: the
    # owner is in no namespace, whichever namespace the child is in.
    mapper = enqueue_controller_owner("example.com", "Project", owner_namespaced=False)
    assert mapper(ADDED, obj(owners=[ref("p1", kind="Project", api_version="example.com/v1")]), None) == [
        Request("", "p1")
    ]
    cluster_child = {
        "metadata": {
            "name": "p1",
            "ownerReferences": [ref("p1", kind="Project", api_version="example.com/v1")],
        }
    }
    assert mapper(ADDED, cluster_child, None) == [Request("", "p1")]


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


SYNCS = Resource("example.com", "v1", "configmapsyncs", "ConfigMapSync")
CLUSTER_SYNCS = Resource(
    "example.com", "v1", "clusterconfigmapsyncs", "ClusterConfigMapSync", namespaced=False
)


def annotated(annotations: dict[str, Any], ns: str = "elsewhere") -> dict[str, Any]:
    return obj("copy", ns=ns, annotations=annotations)


def test_owner_annotations_follow_operator_libs_convention() -> None:
    owner = {"metadata": {"name": "sync", "namespace": "team-a", "uid": "u1"}}
    assert owner_annotations(owner, SYNCS) == {
        "operator-sdk/primary-resource": "team-a/sync",
        "operator-sdk/primary-resource-type": "ConfigMapSync.example.com",
    }
    assert owner_annotations({"metadata": {"name": "all"}}, CLUSTER_SYNCS) == {
        PRIMARY_RESOURCE_ANNOTATION: "/all",
        PRIMARY_RESOURCE_TYPE_ANNOTATION: "ClusterConfigMapSync.example.com",
    }
    assert owner_annotations({"metadata": {"name": "n"}}, NAMESPACES)[PRIMARY_RESOURCE_TYPE_ANNOTATION] == (
        "Namespace"
    )
    with pytest.raises(ValueError, match="namespaced"):
        owner_annotations({"metadata": {"name": "sync"}}, SYNCS)


def test_a_child_anywhere_maps_back_to_the_owner_its_annotations_name() -> None:
    owner = {"metadata": {"name": "sync", "namespace": "team-a"}}
    child = annotated(owner_annotations(owner, SYNCS))
    assert annotated_owner(child, SYNCS) == Request("team-a", "sync")
    assert map_to_annotated_owner(SYNCS)(child) == [Request("team-a", "sync")]
    cluster_child = annotated(owner_annotations({"metadata": {"name": "all"}}, CLUSTER_SYNCS), ns="")
    assert annotated_owner(cluster_child, CLUSTER_SYNCS) == Request("", "all")
    # What operator-lib itself writes for a cluster-scoped owner, and for a core-group kind.
    assert annotated_owner(
        annotated(
            {
                PRIMARY_RESOURCE_ANNOTATION: "all",
                PRIMARY_RESOURCE_TYPE_ANNOTATION: "ClusterConfigMapSync.example.com",
            }
        ),
        CLUSTER_SYNCS,
    ) == Request("", "all")
    assert annotated_owner(
        annotated({PRIMARY_RESOURCE_ANNOTATION: "/n", PRIMARY_RESOURCE_TYPE_ANNOTATION: "Namespace."}),
        NAMESPACES,
    ) == Request("", "n")


@pytest.mark.parametrize(
    "annotations",
    [
        {},
        {PRIMARY_RESOURCE_ANNOTATION: "team-a/sync"},  # no type
        {PRIMARY_RESOURCE_ANNOTATION: "team-a/sync", PRIMARY_RESOURCE_TYPE_ANNOTATION: "Other.example.com"},
        {
            PRIMARY_RESOURCE_ANNOTATION: "team-a/sync",
            PRIMARY_RESOURCE_TYPE_ANNOTATION: "ConfigMapSync.other.io",
        },
        {PRIMARY_RESOURCE_ANNOTATION: "team-a/sync", PRIMARY_RESOURCE_TYPE_ANNOTATION: "ConfigMapSync"},
        {PRIMARY_RESOURCE_ANNOTATION: "sync", PRIMARY_RESOURCE_TYPE_ANNOTATION: "ConfigMapSync.example.com"},
        {
            PRIMARY_RESOURCE_ANNOTATION: "team-a/",
            PRIMARY_RESOURCE_TYPE_ANNOTATION: "ConfigMapSync.example.com",
        },
        {PRIMARY_RESOURCE_ANNOTATION: "a/b/c", PRIMARY_RESOURCE_TYPE_ANNOTATION: "ConfigMapSync.example.com"},
        {PRIMARY_RESOURCE_ANNOTATION: 3, PRIMARY_RESOURCE_TYPE_ANNOTATION: "ConfigMapSync.example.com"},
    ],
)
def test_annotations_that_name_no_owner_of_the_kind_map_to_nothing(annotations: dict[str, Any]) -> None:
    assert annotated_owner(annotated(annotations), SYNCS) is None
    assert map_to_annotated_owner(SYNCS)(annotated(annotations)) == []


def test_moving_a_child_to_another_owner_enqueues_both() -> None:
    old = annotated(owner_annotations({"metadata": {"name": "one", "namespace": "a"}}, SYNCS))
    new = annotated(owner_annotations({"metadata": {"name": "two", "namespace": "b"}}, SYNCS))
    mapper = enqueue_mapped(map_to_annotated_owner(SYNCS))
    assert sorted(mapper(MODIFIED, new, old), key=str) == sorted(
        [Request("a", "one"), Request("b", "two")], key=str
    )
    assert annotated_owner({"metadata": {"annotations": "not a map"}}, SYNCS) is None
    assert annotated_owner(None, SYNCS) is None
