"""The pure parts of declarative children: the subset comparison that skips an apply, kstatus
readiness per kind, the stamping of a child, the owner's conditions, the RBAC derived from the
child kinds, the REST mapping of built-in kinds, and the errors a declaration raises at once."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from memop.runtime.api.model import CustomResource, Model, Status
from memop.runtime.api.permissions import Scope
from memop.runtime.client.resources import (
    CLUSTER_ROLE_BINDINGS,
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACES,
    NETWORK_POLICIES,
    PRIORITY_CLASSES,
    ROLE_BINDINGS,
    SERVICES,
    Resource,
)
from memop.runtime.client.restmapper import BUILTIN_KINDS, builtin_resource, split_api_version
from memop.runtime.controller.applied import configuration_hash, holds
from memop.runtime.controller.declarative import declarative_controller
from memop.runtime.controller.declarative.children import (
    APPLIED_ANNOTATION,
    CONTROLLER_LABEL,
    ChildError,
    ObservedChild,
    ObservedChildren,
    stamp,
    to_object,
)
from memop.runtime.controller.declarative.rules import bind_rules, declarative_rules
from memop.runtime.controller.declarative.status import ChildReadiness, Problem, degraded_as, owner_conditions
from memop.runtime.controller.readiness import CURRENT, FAILED, IN_PROGRESS, TERMINATING, Readiness, readiness

# --- the subset comparison ---------------------------------------------------------------------

LIVE_DEPLOYMENT: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "ns", "uid": "u", "labels": {"app": "web", "other": "x"}},
    "spec": {
        "replicas": 2,
        "revisionHistoryLimit": 10,
        "template": {
            "spec": {
                "containers": [
                    {"name": "side", "image": "side:1"},
                    {
                        "name": "web",
                        "image": "web:1",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "500m"}},
                    },
                ]
            }
        },
    },
    "status": {"replicas": 2},
}


def applied(**spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "web", "image": "web:1", "ports": [{"containerPort": 80}]}
    container.update(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [container]}}},
    }


def test_a_live_object_with_defaults_and_other_fields_holds_what_was_applied() -> None:
    assert holds(LIVE_DEPLOYMENT, applied())


@pytest.mark.parametrize(
    "change",
    [
        {"image": "web:2"},  # a changed value
        {"command": ["serve"]},  # a field the live object lacks
        {"ports": [{"containerPort": 81}]},
        {"ports": [{"containerPort": 80}, {"containerPort": 443}]},  # a positional list of another length
    ],
)
def test_a_live_object_does_not_hold_a_changed_configuration(change: dict[str, Any]) -> None:
    assert not holds(LIVE_DEPLOYMENT, applied(**change))


def test_lists_of_named_items_compare_by_name_not_position() -> None:
    # The live list has another container first: "web" is still found by its name.
    assert holds(LIVE_DEPLOYMENT, applied())
    missing = applied()
    missing["spec"]["template"]["spec"]["containers"][0]["name"] = "api"
    assert not holds(LIVE_DEPLOYMENT, missing)


def test_types_matter_except_between_numbers() -> None:
    assert holds({"a": 1}, {"a": 1.0})
    assert not holds({"a": "1"}, {"a": True})
    assert not holds({"a": 1}, {"a": True})
    assert not holds({"a": {"b": 1}}, {"a": [1]})
    assert not holds({"a": None}, {"a": {}})


def test_a_missing_member_holds_a_zero_value() -> None:
    # The API server omits false, 0, "", {} and [] (Go's omitempty): they read back as absent.
    for zero in (False, 0, "", {}, [], None):
        assert holds({"spec": {}}, {"spec": {"x": zero}}), zero
    assert not holds({"spec": {}}, {"spec": {"x": True}})
    assert not holds({"spec": {}}, {"spec": {"x": {"y": 1}}})
    assert holds({"spec": {}}, {"spec": {"x": {"y": 0}}})


def test_apiversion_and_kind_are_not_compared() -> None:
    # Cached list items lack them.
    assert holds(
        {"metadata": {"name": "x"}}, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    )


def test_the_configuration_hash_ignores_key_order_and_sees_every_change() -> None:
    a = {"data": {"x": "1", "y": "2"}, "metadata": {"name": "n"}}
    b = {"metadata": {"name": "n"}, "data": {"y": "2", "x": "1"}}
    assert configuration_hash(a) == configuration_hash(b)
    assert configuration_hash(a) != configuration_hash({"data": {"x": "1"}, "metadata": {"name": "n"}})


# --- readiness (kstatus) -----------------------------------------------------------------------


def deployment(spec: dict[str, Any], status: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "d", "generation": generation},
        "spec": spec,
        "status": {"observedGeneration": 1, **status},
    }


AVAILABLE = [
    {"type": "Available", "status": "True"},
    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
]


@pytest.mark.parametrize(
    ("spec", "status", "generation", "expected", "reason"),
    [
        (
            {"replicas": 2},
            {
                "replicas": 2,
                "updatedReplicas": 2,
                "readyReplicas": 2,
                "availableReplicas": 2,
                "conditions": AVAILABLE,
            },
            1,
            CURRENT,
            "Current",
        ),
        ({"replicas": 2}, {"replicas": 1, "conditions": AVAILABLE}, 1, IN_PROGRESS, "LessReplicas"),
        ({"replicas": 2}, {"replicas": 2, "updatedReplicas": 1}, 1, IN_PROGRESS, "LessUpdated"),
        ({"replicas": 1}, {"replicas": 2, "updatedReplicas": 1}, 1, IN_PROGRESS, "ExtraPods"),
        (
            {"replicas": 1},
            {"replicas": 1, "updatedReplicas": 1, "availableReplicas": 0},
            1,
            IN_PROGRESS,
            "LessAvailable",
        ),
        (
            {"replicas": 1},
            {"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1, "readyReplicas": 0},
            1,
            IN_PROGRESS,
            "LessReady",
        ),
        (
            {"progressDeadlineSeconds": 600},
            {
                "replicas": 1,
                "updatedReplicas": 1,
                "availableReplicas": 1,
                "readyReplicas": 1,
                "conditions": AVAILABLE[:1],
            },
            1,
            IN_PROGRESS,
            "ReplicaSetNotAvailable",
        ),
        (
            {"progressDeadlineSeconds": 2**31 - 1},
            {"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1, "readyReplicas": 1},
            1,
            IN_PROGRESS,
            "DeploymentNotAvailable",
        ),
        (
            {},
            {
                "conditions": [
                    {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
                ]
            },
            1,
            FAILED,
            "ProgressDeadlineExceeded",
        ),
        (
            {"replicas": 2},
            {
                "replicas": 2,
                "updatedReplicas": 2,
                "readyReplicas": 2,
                "availableReplicas": 2,
                "conditions": AVAILABLE,
            },
            2,
            IN_PROGRESS,
            "LatestGenerationNotObserved",
        ),
    ],
)
def test_deployment_readiness_follows_kstatus(
    spec: dict[str, Any], status: dict[str, Any], generation: int, expected: str, reason: str
) -> None:
    found = readiness(deployment(spec, status, generation), "apps", "Deployment")
    assert (found.status, found.reason) == (expected, reason)


def test_generic_rules_come_first() -> None:
    terminating = {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert readiness(terminating, "", "ConfigMap").status == TERMINATING
    stalled = {
        "metadata": {},
        "status": {"conditions": [{"type": "Stalled", "status": "True", "reason": "Broken"}]},
    }
    assert (readiness(stalled, "x.io", "Thing").status, readiness(stalled, "x.io", "Thing").reason) == (
        FAILED,
        "Broken",
    )
    reconciling = {"status": {"conditions": [{"type": "Reconciling", "status": "True"}]}}
    assert readiness(reconciling, "", "ConfigMap").status == IN_PROGRESS


@pytest.mark.parametrize(
    ("group", "kind", "obj", "expected"),
    [
        (
            "apps",
            "StatefulSet",
            {
                "spec": {"replicas": 2},
                "status": {
                    "replicas": 2,
                    "readyReplicas": 2,
                    "currentReplicas": 2,
                    "currentRevision": "a",
                    "updateRevision": "a",
                },
            },
            CURRENT,
        ),
        (
            "apps",
            "StatefulSet",
            {
                "spec": {"replicas": 2},
                "status": {
                    "replicas": 2,
                    "readyReplicas": 2,
                    "currentReplicas": 2,
                    "currentRevision": "a",
                    "updateRevision": "b",
                },
            },
            IN_PROGRESS,
        ),
        ("apps", "StatefulSet", {"spec": {"updateStrategy": {"type": "OnDelete"}}}, CURRENT),
        (
            "apps",
            "StatefulSet",
            {
                "spec": {"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 2}}},
                "status": {"replicas": 3, "readyReplicas": 3, "updatedReplicas": 0},
            },
            IN_PROGRESS,
        ),
        (
            "apps",
            "DaemonSet",
            {
                "metadata": {"generation": 1},
                "status": {
                    "observedGeneration": 1,
                    "desiredNumberScheduled": 2,
                    "currentNumberScheduled": 2,
                    "updatedNumberScheduled": 2,
                    "numberAvailable": 2,
                    "numberReady": 2,
                },
            },
            CURRENT,
        ),
        (
            "apps",
            "DaemonSet",
            {"metadata": {"generation": 1}, "status": {"desiredNumberScheduled": 2}},
            IN_PROGRESS,
        ),
        (
            "apps",
            "DaemonSet",
            {
                "metadata": {"generation": 1},
                "status": {"observedGeneration": 1, "desiredNumberScheduled": 2, "currentNumberScheduled": 1},
            },
            IN_PROGRESS,
        ),
        (
            "apps",
            "ReplicaSet",
            {
                "spec": {"replicas": 1},
                "status": {
                    "replicas": 1,
                    "fullyLabeledReplicas": 1,
                    "availableReplicas": 1,
                    "readyReplicas": 1,
                },
            },
            CURRENT,
        ),
        (
            "apps",
            "ReplicaSet",
            {"status": {"conditions": [{"type": "ReplicaFailure", "status": "True"}]}},
            IN_PROGRESS,
        ),
        ("batch", "Job", {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}, CURRENT),
        ("batch", "Job", {"status": {"conditions": [{"type": "Failed", "status": "True"}]}}, FAILED),
        ("batch", "Job", {"status": {}}, IN_PROGRESS),
        ("batch", "Job", {"status": {"startTime": "2026-01-01T00:00:00Z", "active": 1}}, CURRENT),
        ("", "PersistentVolumeClaim", {"status": {"phase": "Pending"}}, IN_PROGRESS),
        ("", "PersistentVolumeClaim", {"status": {"phase": "Bound"}}, CURRENT),
        ("", "Service", {"spec": {"type": "ClusterIP"}}, CURRENT),
        ("", "Service", {"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {}}}, IN_PROGRESS),
        (
            "",
            "Service",
            {"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}},
            CURRENT,
        ),
        ("", "Namespace", {"status": {"phase": "Active"}}, CURRENT),
        ("", "Namespace", {"status": {"phase": "Terminating"}}, IN_PROGRESS),
        (
            "",
            "Pod",
            {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            CURRENT,
        ),
        (
            "",
            "Pod",
            {
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                    ],
                }
            },
            FAILED,
        ),
        ("", "Pod", {"status": {"phase": "Pending"}}, IN_PROGRESS),
        ("", "Pod", {"status": {"phase": "Succeeded"}}, CURRENT),
        ("policy", "PodDisruptionBudget", {"status": {}}, CURRENT),
        ("", "ConfigMap", {}, CURRENT),
        (
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            {"status": {"conditions": [{"type": "Established", "status": "True"}]}},
            CURRENT,
        ),
        (
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            {"status": {"conditions": [{"type": "NamesAccepted", "status": "False", "reason": "Taken"}]}},
            FAILED,
        ),
        (
            "example.com",
            "Widget",
            {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Waiting"}]}},
            IN_PROGRESS,
        ),
        ("example.com", "Widget", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, CURRENT),
        ("example.com", "Widget", {}, CURRENT),
    ],
)
def test_kind_readiness_rules(group: str, kind: str, obj: dict[str, Any], expected: str) -> None:
    assert readiness(obj, group, kind).status == expected


def test_a_users_rule_replaces_the_kinds_but_not_the_generic_ones() -> None:
    rules = {"example.com/Widget": lambda obj: bool(obj.get("status", {}).get("up"))}
    assert readiness({"status": {"up": True}}, "example.com", "Widget", rules).status == CURRENT
    assert readiness({"status": {"up": False}}, "example.com", "Widget", rules).status == IN_PROGRESS
    custom = {"example.com/Widget": lambda obj: Readiness(FAILED, "Broken", "it broke")}
    assert readiness({}, "example.com", "Widget", custom).reason == "Broken"
    deleting = {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"up": True}}
    assert readiness(deleting, "example.com", "Widget", rules).status == TERMINATING


# --- children ----------------------------------------------------------------------------------

NAMESPACED_OWNER = {"metadata": {"name": "app", "namespace": "ns", "uid": "owner-uid"}}
CLUSTER_OWNER = {"metadata": {"name": "proj", "uid": "owner-uid"}}
APPS = Resource("example.com", "v1", "apps", "App")
PROJECTS_RESOURCE = Resource("example.com", "v1", "projects", "Project", namespaced=False)


def test_stamp_makes_a_child_its_owners() -> None:
    child = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": {"a": "b"}},
        "data": {},
    }
    stamped = stamp(copy.deepcopy(child), CONFIGMAPS, NAMESPACED_OWNER, APPS, {CONTROLLER_LABEL: "app"})
    meta = stamped["metadata"]
    assert meta["namespace"] == "ns"
    assert meta["labels"] == {"a": "b", CONTROLLER_LABEL: "app"}
    (reference,) = meta["ownerReferences"]
    assert reference == {
        "apiVersion": "example.com/v1",
        "kind": "App",
        "name": "app",
        "uid": "owner-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    digest = meta["annotations"][APPLIED_ANNOTATION]
    # Stamping again gives the same digest (the annotation is not part of it).
    assert (
        stamp(copy.deepcopy(stamped), CONFIGMAPS, NAMESPACED_OWNER, APPS, {CONTROLLER_LABEL: "app"})
        == stamped
    )
    changed = stamp({**copy.deepcopy(child), "data": {"x": "1"}}, CONFIGMAPS, NAMESPACED_OWNER, APPS, {})
    assert changed["metadata"]["annotations"][APPLIED_ANNOTATION] != digest


def test_stamp_drops_a_status() -> None:
    child = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "status": {"replicas": 1},
    }
    assert "status" not in stamp(child, DEPLOYMENTS, NAMESPACED_OWNER, APPS, {})


def test_stamp_refuses_what_an_owner_reference_cannot_point_from() -> None:
    elsewhere = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "other"}}
    with pytest.raises(ChildError, match="owner_annotations") as error:
        stamp(elsewhere, CONFIGMAPS, NAMESPACED_OWNER, APPS, {})
    assert error.value.reason == "CrossNamespaceChild"
    with pytest.raises(ChildError) as error:
        stamp({"metadata": {"name": "n"}}, NAMESPACES, NAMESPACED_OWNER, APPS, {})
    assert error.value.reason == "ClusterScopedChild"
    with pytest.raises(ChildError) as error:
        stamp({"metadata": {"name": "c"}}, CONFIGMAPS, CLUSTER_OWNER, PROJECTS_RESOURCE, {})
    assert error.value.reason == "ChildNamespaceMissing"
    # A cluster-scoped owner owns both namespaced children (anywhere) and cluster-scoped ones.
    assert stamp(
        {"metadata": {"name": "c", "namespace": "x"}}, CONFIGMAPS, CLUSTER_OWNER, PROJECTS_RESOURCE, {}
    )
    namespace = stamp({"metadata": {"name": "n"}}, NAMESPACES, CLUSTER_OWNER, PROJECTS_RESOURCE, {})
    assert namespace["metadata"]["ownerReferences"][0]["kind"] == "Project"


def test_to_object_takes_dicts_models_and_kubernetes_models() -> None:
    from kubernetes_asyncio.client import V1ConfigMap, V1ObjectMeta  # noqa: PLC0415

    model = V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=V1ObjectMeta(name="c", owner_references=None),
        data={"a": "b"},
    )
    assert to_object(model) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"a": "b"},
    }

    class Spec(Model):
        min_ready_seconds: int = 0
        note: str | None = None

    assert to_object(Spec(min_ready_seconds=3)) == {"minReadySeconds": 3}
    source = {"metadata": {"name": "x"}}
    copied = to_object(source)
    copied["metadata"]["name"] = "y"
    assert source == {"metadata": {"name": "x"}}
    with pytest.raises(ChildError):
        to_object(42)


def test_observed_children_are_found_by_kind_and_name() -> None:
    deployment = {"metadata": {"name": "web"}, "status": {"availableReplicas": 1}}
    children = ObservedChildren(
        [ObservedChild(SERVICES, {"metadata": {"name": "web"}}), ObservedChild(DEPLOYMENTS, deployment)]
    )
    assert children.get("Deployment") is deployment
    assert children.get("apps/Deployment", "web") is deployment
    assert children.get("apps/Deployment", "api") is None
    assert children.get("batch/Deployment") is None
    assert len(children) == 2


# --- the owner's conditions --------------------------------------------------------------------

NOW = "2026-01-01T00:00:00Z"


def states(*statuses: str) -> list[ChildReadiness]:
    return [
        ChildReadiness(CONFIGMAPS, f"c{i}", Readiness(s, "R", f"msg {i}")) for i, s in enumerate(statuses)
    ]


def by_type(conditions: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in conditions}


def test_the_owners_conditions_summarise_its_children() -> None:
    ready = owner_conditions(None, 3, None, states(CURRENT, CURRENT), NOW)
    assert by_type(ready) == {
        "Ready": ("True", "ChildrenReady"),
        "Progressing": ("False", "ChildrenReady"),
        "Degraded": ("False", "AsExpected"),
    }
    assert {c["observedGeneration"] for c in ready} == {3}
    pending = owner_conditions(ready, 3, None, states(CURRENT, IN_PROGRESS), "2026-01-02T00:00:00Z")
    assert by_type(pending)["Ready"] == ("False", "ChildrenNotReady")
    assert by_type(pending)["Progressing"] == ("True", "ChildrenNotReady")
    assert "ConfigMap c1: msg 1" in pending[0]["message"]
    failed = owner_conditions(None, 1, None, states(FAILED), NOW)
    assert by_type(failed)["Degraded"] == ("True", "ChildFailed")
    problem = owner_conditions(None, 1, Problem("Forbidden", "no"), states(CURRENT), NOW)
    assert by_type(problem) == {
        k: (s, "Forbidden") for k, s in (("Ready", "False"), ("Progressing", "False"), ("Degraded", "True"))
    }
    # Recomputed unchanged, the conditions are equal: nothing to write.
    assert owner_conditions(ready, 3, None, states(CURRENT, CURRENT), "2026-03-03T00:00:00Z") == ready


def test_a_problem_is_reported_once_per_generation() -> None:
    problem = Problem("InvalidSpec", "spec.x: bad")
    conditions = owner_conditions(None, 2, problem, [], NOW)
    assert degraded_as(conditions, problem, 2)
    assert not degraded_as(conditions, problem, 3)
    assert not degraded_as(conditions, Problem("InvalidSpec", "spec.y: bad"), 2)
    assert not degraded_as(None, problem, 2)


def test_many_children_are_summarised() -> None:
    conditions = owner_conditions(None, 1, None, states(*[IN_PROGRESS] * 5), NOW)
    assert conditions[0]["message"].endswith("and 2 more")


# --- RBAC --------------------------------------------------------------------------------------


def test_rules_follow_the_child_kinds() -> None:
    rules = declarative_rules(APPS, [DEPLOYMENTS, NETWORK_POLICIES], finalizer=False)
    triples = {r.triple for r in rules}
    for verb in ("list", "watch", "patch", "create", "delete"):
        assert ("apps", "deployments", verb) in triples
        assert ("networking.k8s.io", "networkpolicies", verb) in triples
    assert ("example.com", "apps/status", "patch") in triples
    assert ("example.com", "apps/finalizers", "update") in triples  # blockOwnerDeletion
    assert ("example.com", "apps", "patch") not in triples  # no finalizer without on_delete
    assert ("example.com", "apps", "patch") in {r.triple for r in declarative_rules(APPS, [], finalizer=True)}
    assert len(rules) == len({(*r.triple, r.resource_names) for r in rules})
    assert all(r.scope is Scope.WATCHED for r in rules)


def test_a_child_binding_adds_bind_on_its_named_role() -> None:
    binding: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "admins"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
    }
    view = copy.deepcopy(binding)
    view["roleRef"]["name"] = "view"
    cluster = {**copy.deepcopy(binding), "kind": "ClusterRoleBinding"}
    cluster["roleRef"] = {"kind": "Role", "name": "own"}
    rules = bind_rules([binding, view, cluster, {"apiVersion": "v1", "kind": "ConfigMap"}])
    assert [(r.resource, r.verb, r.resource_names) for r in rules] == [
        ("clusterroles", "bind", ("admin", "view")),
        ("roles", "bind", ("own",)),
    ]
    rules = declarative_rules(
        PROJECTS_RESOURCE, [ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS], finalizer=False, child_objects=[binding]
    )
    assert ("rbac.authorization.k8s.io", "clusterroles", "bind") in {r.triple for r in rules}


def test_rules_on_cluster_scoped_kinds_are_granted_cluster_wide() -> None:
    # A namespaced install's Roles cannot grant a cluster-scoped resource: the Namespace child,
    # the cluster-scoped owner's own kind and a ClusterRole's bind go to its ClusterRole.
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "roleRef": {"kind": "ClusterRole", "name": "admin"},
    }
    rules = declarative_rules(
        PROJECTS_RESOURCE, [NAMESPACES, ROLE_BINDINGS], finalizer=True, child_objects=[binding]
    )
    scopes = {(r.group, r.resource): r.scope for r in rules}
    assert scopes[("", "namespaces")] is Scope.CLUSTER
    assert scopes[(PROJECTS_RESOURCE.group, PROJECTS_RESOURCE.plural)] is Scope.CLUSTER
    assert scopes[(PROJECTS_RESOURCE.group, f"{PROJECTS_RESOURCE.plural}/status")] is Scope.CLUSTER
    assert scopes[("rbac.authorization.k8s.io", "clusterroles")] is Scope.CLUSTER
    assert scopes[("rbac.authorization.k8s.io", "rolebindings")] is Scope.WATCHED


# --- kinds -------------------------------------------------------------------------------------


def test_builtin_kinds_map_to_their_resources_in_any_version() -> None:
    assert builtin_resource("apps/v1", "Deployment") == DEPLOYMENTS
    assert builtin_resource("v1", "Namespace") == NAMESPACES
    assert builtin_resource("scheduling.k8s.io/v1", "PriorityClass") == PRIORITY_CLASSES
    assert builtin_resource("autoscaling/v1", "HorizontalPodAutoscaler") == Resource(
        "autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler"
    )
    assert builtin_resource("example.com/v1", "Widget") is None
    assert builtin_resource("apps", "Deployment") is None  # no version
    assert split_api_version("v1") == ("", "v1")
    assert len(BUILTIN_KINDS) == 67  # kube-apiserver v1.36's `kubectl api-resources`


# --- declarations ------------------------------------------------------------------------------


class Site(CustomResource, group="example.com", version="v1"):
    """A namespaced owner."""

    class SiteSpec(Model):
        name: str

    spec: SiteSpec
    status: Status = Status()


def test_a_namespaced_owner_with_a_cluster_scoped_child_kind_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="owner_annotations"):
        declarative_controller(Site, lambda site: [], children=(NAMESPACES,))


def test_child_kinds_are_found_from_the_samples() -> None:
    def children(site: Site) -> list[dict[str, Any]]:
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": site.spec.name}}]

    definition = declarative_controller(
        Site, children, samples=[{"metadata": {"name": "s"}, "spec": {"name": "x"}}]
    )
    assert ("", "configmaps", "create") in {r.triple for r in definition.rules}
    assert list(definition.samples()) == ["example.com_v1_site.yaml"]
    assert definition.name == "site"
    assert definition.crds()[0]["spec"]["names"]["kind"] == "Site"


def test_a_sample_of_an_unknown_child_kind_or_an_invalid_sample_is_a_clear_error() -> None:
    def widget(site: Site) -> list[dict[str, Any]]:
        return [{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}]

    with pytest.raises(ValueError, match="declare its resource in children="):
        declarative_controller(Site, widget, samples=[{"metadata": {"name": "s"}, "spec": {"name": "x"}}])
    with pytest.raises(ValueError, match="not a valid Site"):
        declarative_controller(Site, widget, samples=[{"metadata": {"name": "s"}, "spec": {"name": 3}}])


def test_quantities_compare_by_value() -> None:
    # The API server stores a quantity canonically: what was applied as 1000m reads back as 1.
    assert holds({"limits": {"cpu": "1"}}, {"limits": {"cpu": "1000m"}})
    assert holds({"limits": {"cpu": "1"}}, {"limits": {"cpu": 1}})
    assert holds({"limits": {"memory": "1Gi"}}, {"limits": {"memory": "1024Mi"}})
    assert not holds({"limits": {"cpu": "2"}}, {"limits": {"cpu": "1000m"}})
    assert not holds({"image": "web:1"}, {"image": "web:2"})


# --- the validating webhook --------------------------------------------------------------------


async def test_the_webhook_refuses_what_the_type_or_validate_refuses() -> None:
    from memop.runtime.controller.declarative.webhook import TypedValidator  # noqa: PLC0415
    from memop.runtime.webhook.declarations import AdmissionRequest, ValidationError  # noqa: PLC0415

    def validate(new: Site, old: Site | None) -> list[str]:
        if new.spec.name == "forbidden":
            raise ValueError("that name is reserved")
        if old is not None and old.spec.name != new.spec.name:
            return ["renaming keeps the old children until they are pruned"]
        return []

    validator = TypedValidator(Site, validate)
    request = AdmissionRequest("u", "CREATE", ("example.com", "v1", "Site"), ("example.com", "v1", "sites"),
                               "ns", "s", None, None, False, {})  # fmt: skip

    def site(name: Any) -> dict[str, Any]:
        return {
            "apiVersion": "example.com/v1",
            "kind": "Site",
            "metadata": {"name": "s"},
            "spec": {"name": name},
        }

    assert await validator.validate_create(site("a"), request) == []
    assert await validator.validate_update(site("a"), site("b"), request) == [
        "renaming keeps the old children until they are pruned"
    ]
    with pytest.raises(ValidationError) as refused:
        await validator.validate_create(site(3), request)
    assert [e.field for e in refused.value.errors] == ["spec.name"]
    with pytest.raises(ValidationError, match="that name is reserved"):
        await validator.validate_create(site("forbidden"), request)
    assert await validator.validate_delete(site("a"), request) == ()


def test_a_declaration_with_validate_serves_a_validating_webhook() -> None:
    definition = declarative_controller(
        Site, lambda site: [], children=(CONFIGMAPS,), validate=lambda new, old: []
    )
    (webhook,) = definition.webhooks
    assert (webhook.group, webhook.kind, webhook.plural, webhook.namespaced) == (
        "example.com",
        "Site",
        "sites",
        True,
    )
    assert webhook.validator is not None
    assert declarative_controller(Site, lambda site: [], children=(CONFIGMAPS,)).webhooks == ()
