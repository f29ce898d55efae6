"""The desired Deployment and the drift check: no write for server defaults, a converging patch
for every change to what memop owns, a signal for the immutable selector."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.memcached.api import MemcachedSpec, ResourceRequirements, parse_quantity, parse_spec
from memop.memcached.controller import deployment_transform
from memop.memcached.desired import (
    SelectorMismatch,
    deployment_patch,
    desired_deployment,
    labels,
    selector_labels,
)
from memop.memcached.status import compute_status
from memop.runtime.cache.labels import Selector
from memop.testing.apiserver.patch import merge_patch

Obj = dict[str, Any]


def memcached(name: str = "cache", namespace: str = "ns", uid: str = "uid-1", **spec: Any) -> Obj:
    return {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "generation": 1},
        "spec": spec,
    }


def desired_for(obj: Obj) -> Obj:
    return desired_deployment(obj, parse_spec(obj))


def respell(quantity: Any) -> str:
    """The same quantity, spelled differently (as the server canonicalises: "1000m" -> "1")."""
    value = parse_quantity(quantity)
    if value.denominator == 1:
        return str(value.numerator)
    return f"{int(value * 1000)}m" if (value * 1000).denominator == 1 else f"{int(value * 10**9)}n"


def server_defaults(deployment: Obj) -> Obj:
    """What a real API server returns for a created Deployment: every defaulted field filled in,
    quantities respelled, bookkeeping metadata and a status added."""
    out = copy.deepcopy(deployment)
    meta = out["metadata"]
    meta.update(
        uid="dep-uid",
        resourceVersion="12345",
        generation=1,
        creationTimestamp="2024-05-01T10:00:00Z",
        annotations={"deployment.kubernetes.io/revision": "1"},
        managedFields=[{"manager": "memop", "operation": "Update"}],
    )
    spec = out["spec"]
    spec.setdefault("replicas", 1)
    spec.update(
        progressDeadlineSeconds=600,
        revisionHistoryLimit=10,
        strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
    )
    template = spec["template"]
    template["metadata"]["creationTimestamp"] = None
    pod = template["spec"]
    pod.update(
        dnsPolicy="ClusterFirst",
        restartPolicy="Always",
        schedulerName="default-scheduler",
        terminationGracePeriodSeconds=30,
    )
    pod.setdefault("securityContext", {})
    for container in pod["containers"]:
        container.update(
            imagePullPolicy="IfNotPresent",
            terminationMessagePath="/dev/termination-log",
            terminationMessagePolicy="File",
        )
        for port in container.get("ports", []):
            port.setdefault("protocol", "TCP")
        resources = container.setdefault("resources", {})
        for part in ("limits", "requests"):
            if part in resources:
                resources[part] = {k: respell(v) for k, v in resources[part].items()}
    out["status"] = {"observedGeneration": 1, "replicas": spec["replicas"], "readyReplicas": spec["replicas"]}
    return out


def owned(deployment: Obj) -> Obj:
    """The fields memop owns, normalised as deployment_patch compares them."""
    meta = deployment["metadata"]
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    res = container.get("resources") or {}
    limits = {k: parse_quantity(v) for k, v in (res.get("limits") or {}).items()}
    requests = {**limits, **{k: parse_quantity(v) for k, v in (res.get("requests") or {}).items()}}
    mine = set(labels(meta["name"]))
    return {
        "labels": {k: v for k, v in meta["labels"].items() if k in mine},
        "controller": [r for r in meta["ownerReferences"] if r.get("controller")],
        "replicas": spec.get("replicas", 1),
        "selector": spec["selector"],
        "template_labels": {k: v for k, v in spec["template"]["metadata"]["labels"].items() if k in mine},
        "pod_security": {
            k: pod["securityContext"].get(k) for k in ("runAsNonRoot", "runAsUser", "seccompProfile")
        },
        "name": container["name"],
        "image": container["image"],
        "command": container["command"],
        "ports": [{k: p.get(k) for k in ("containerPort", "name", "protocol")} for p in container["ports"]],
        "limits": limits,
        "requests": requests,
        "security": {
            k: container["securityContext"].get(k)
            for k in ("allowPrivilegeEscalation", "capabilities", "runAsNonRoot", "runAsUser")
        },
    }


# --- the desired Deployment ---------------------------------------------------------------------


def test_desired_deployment_shape() -> None:
    obj = memcached(
        size=3, memoryLimitMiB=128, resources={"limits": {"memory": "256Mi"}, "requests": {"cpu": 1}}
    )
    dep = desired_for(obj)
    want_labels = {
        "app.kubernetes.io/name": "memcached",
        "app.kubernetes.io/instance": "cache",
        "app.kubernetes.io/managed-by": "memop",
    }
    assert dep == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "cache",
            "namespace": "ns",
            "labels": want_labels,
            "ownerReferences": [
                {
                    "apiVersion": "cache.example.com/v1alpha1",
                    "kind": "Memcached",
                    "name": "cache",
                    "uid": "uid-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "cache"}
            },
            "template": {
                "metadata": {"labels": want_labels},
                "spec": {
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 1001,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "memcached",
                            "image": "memcached:1.6.26-alpine3.19",
                            "command": ["memcached", "--memory-limit=128", "-o", "modern", "-v"],
                            "ports": [{"containerPort": 11211, "name": "memcached", "protocol": "TCP"}],
                            "resources": {"limits": {"memory": "256Mi"}, "requests": {"cpu": "1"}},
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                                "runAsNonRoot": True,
                                "runAsUser": 1001,
                            },
                        }
                    ],
                },
            },
        },
    }


def test_no_resources_means_empty_resources() -> None:
    container = desired_for(memcached())["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {}


def test_two_memcacheds_never_select_each_others_pods() -> None:
    a = desired_for(memcached("a", uid="ua"))
    b = desired_for(memcached("b", uid="ub"))
    select_a = Selector.from_label_selector(a["spec"]["selector"])
    select_b = Selector.from_label_selector(b["spec"]["selector"])
    assert select_a.matches(a["spec"]["template"]["metadata"]["labels"])
    assert select_b.matches(b["spec"]["template"]["metadata"]["labels"])
    assert not select_a.matches(b["spec"]["template"]["metadata"]["labels"])
    assert not select_b.matches(a["spec"]["template"]["metadata"]["labels"])
    assert "app.kubernetes.io/managed-by" not in a["spec"]["selector"]["matchLabels"]
    assert selector_labels("a").items() <= labels("a").items()


def test_each_call_returns_a_fresh_object() -> None:
    obj = memcached(resources={"limits": {"cpu": "1"}})
    spec = parse_spec(obj)
    first = desired_deployment(obj, spec)
    first["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "9"
    first["metadata"]["labels"]["x"] = "y"
    second = desired_deployment(obj, spec)
    assert second["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "1"
    assert "x" not in second["metadata"]["labels"]
    assert spec.resources == ResourceRequirements(limits={"cpu": "1"})


def test_missing_identity_is_a_key_error() -> None:
    obj = memcached()
    del obj["metadata"]["uid"]
    with pytest.raises(KeyError):
        desired_for(obj)


# --- drift: nothing to do -----------------------------------------------------------------------

_SPECS = st.fixed_dictionaries(
    {},
    optional={
        "size": st.integers(0, 50),
        "image": st.sampled_from(
            ["memcached:1.6.26-alpine3.19", "memcached:1.6.29", "registry.local/mc@sha256:ab"]
        ),
        "memoryLimitMiB": st.integers(1, 4096),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "limits": st.fixed_dictionaries(
                    {},
                    optional={
                        "cpu": st.sampled_from(["1", "1000m", "2", 2, "1500m"]),
                        "memory": st.sampled_from(["256Mi", "268435456", "1Gi", 1073741824]),
                    },
                ),
                "requests": st.fixed_dictionaries(
                    {},
                    optional={
                        "cpu": st.sampled_from(["100m", "0.1", "1"]),
                        "memory": st.sampled_from(["64Mi", "67108864", "128Mi"]),
                    },
                ),
            },
        ),
    },
)


@given(_SPECS)
@settings(max_examples=150)
def test_server_defaulting_never_causes_a_diff(spec: dict[str, Any]) -> None:
    obj = memcached(**spec)
    desired = desired_for(obj)
    assert deployment_patch(server_defaults(desired), desired) is None
    assert deployment_patch(desired, desired) is None


def test_quantities_in_other_spellings_are_equal() -> None:
    desired = desired_for(
        memcached(resources={"limits": {"cpu": "1", "memory": "64Mi"}, "requests": {"cpu": "0.5"}})
    )
    current = server_defaults(desired)
    current["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1000m", "memory": "67108864"},
        "requests": {"cpu": "500m"},
    }
    assert deployment_patch(current, desired) is None


def test_request_defaulted_from_its_limit_is_equal() -> None:
    desired = desired_for(memcached(resources={"limits": {"memory": "64Mi"}}))
    current = server_defaults(desired)
    current["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"memory": "64Mi"}
    assert deployment_patch(current, desired) is None


def test_what_others_add_is_left_alone() -> None:
    desired = desired_for(memcached(size=2))
    current = server_defaults(desired)
    current["metadata"]["labels"]["team"] = "cache"
    current["metadata"]["annotations"]["note"] = "x"
    current["metadata"]["ownerReferences"].append(
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "u2"}
    )
    template = current["spec"]["template"]
    template["metadata"]["labels"]["sidecar.istio.io/inject"] = "false"
    template["metadata"]["annotations"] = {"kubectl.kubernetes.io/restartedAt": "2024-05-01T11:00:00Z"}
    template["spec"]["securityContext"]["fsGroup"] = 2000
    template["spec"]["nodeSelector"] = {"pool": "cache"}
    container = template["spec"]["containers"][0]
    container["env"] = [{"name": "X", "value": "1"}]
    container["securityContext"]["readOnlyRootFilesystem"] = True
    current["spec"]["strategy"] = {"type": "Recreate"}
    assert deployment_patch(current, desired) is None


# --- drift: a patch that converges --------------------------------------------------------------


def _container(d: Obj) -> Obj:
    return d["spec"]["template"]["spec"]["containers"][0]


Mutation = Callable[[Obj], None]

MUTATIONS: dict[str, Mutation] = {
    "replicas": lambda d: d["spec"].__setitem__("replicas", 7),
    "replicas absent (server default 1)": lambda d: d["spec"].pop("replicas"),
    "label changed": lambda d: d["metadata"]["labels"].__setitem__("app.kubernetes.io/managed-by", "helm"),
    "label removed": lambda d: d["metadata"]["labels"].pop("app.kubernetes.io/instance"),
    "labels gone": lambda d: d["metadata"].pop("labels"),
    "owner reference removed": lambda d: d["metadata"].__setitem__("ownerReferences", []),
    "owner reference not controller": lambda d: d["metadata"]["ownerReferences"][0].__setitem__(
        "controller", False
    ),
    "owner references gone": lambda d: d["metadata"].pop("ownerReferences"),
    "template label changed": lambda d: d["spec"]["template"]["metadata"]["labels"].__setitem__(
        "app.kubernetes.io/managed-by", "x"
    ),
    "image": lambda d: _container(d).__setitem__("image", "memcached:latest"),
    "command": lambda d: _container(d).__setitem__("command", ["memcached", "-m", "1"]),
    "command removed": lambda d: _container(d).pop("command"),
    "port number": lambda d: _container(d)["ports"][0].__setitem__("containerPort", 11212),
    "port name": lambda d: _container(d)["ports"][0].__setitem__("name", "mc"),
    "port protocol": lambda d: _container(d)["ports"][0].__setitem__("protocol", "UDP"),
    "extra port": lambda d: _container(d)["ports"].append({"containerPort": 9150, "protocol": "TCP"}),
    "ports removed": lambda d: _container(d).pop("ports"),
    "limit changed": lambda d: _container(d)["resources"].__setitem__(
        "limits", {"cpu": "3", "memory": "1Gi"}
    ),
    "extra limit": lambda d: (
        _container(d)["resources"].setdefault("limits", {}).__setitem__("ephemeral-storage", "1Gi")
    ),
    "resources removed": lambda d: _container(d).pop("resources"),
    "request changed": lambda d: _container(d)["resources"].__setitem__("requests", {"cpu": "3m"}),
    "container privilege": lambda d: _container(d)["securityContext"].__setitem__(
        "allowPrivilegeEscalation", True
    ),
    "capabilities": lambda d: _container(d)["securityContext"].__setitem__(
        "capabilities", {"drop": ["NET_RAW"]}
    ),
    "container context removed": lambda d: _container(d).pop("securityContext"),
    "container root": lambda d: _container(d)["securityContext"].__setitem__("runAsUser", 0),
    "pod root": lambda d: d["spec"]["template"]["spec"]["securityContext"].__setitem__("runAsUser", 0),
    "pod nonroot false": lambda d: d["spec"]["template"]["spec"]["securityContext"].__setitem__(
        "runAsNonRoot", False
    ),
    "pod context removed": lambda d: d["spec"]["template"]["spec"].pop("securityContext"),
    "seccomp localhost": lambda d: d["spec"]["template"]["spec"]["securityContext"].__setitem__(
        "seccompProfile", {"type": "Localhost", "localhostProfile": "p.json"}
    ),
    "seccomp unconfined": lambda d: d["spec"]["template"]["spec"]["securityContext"].__setitem__(
        "seccompProfile", {"type": "Unconfined"}
    ),
    "container renamed": lambda d: _container(d).__setitem__("name", "cache"),
    "sidecar added": lambda d: d["spec"]["template"]["spec"]["containers"].append(
        {"name": "exporter", "image": "e"}
    ),
    "sidecar first": lambda d: d["spec"]["template"]["spec"]["containers"].insert(
        0, {"name": "x", "image": "e"}
    ),
    "containers empty": lambda d: d["spec"]["template"]["spec"].__setitem__("containers", []),
    "runAsNonRoot as 1": lambda d: _container(d)["securityContext"].__setitem__("runAsNonRoot", 1),
}

DESIRED_SPEC = {
    "size": 3,
    "resources": {"limits": {"cpu": "1", "memory": "128Mi"}, "requests": {"cpu": "500m"}},
}


def check_converges(current: Obj, desired: Obj) -> Obj:
    patch = deployment_patch(current, desired)
    assert patch is not None
    patched = merge_patch(current, patch)
    assert deployment_patch(patched, desired) is None, patch
    assert owned(patched) == owned(desired)
    return patched


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_each_change_to_an_owned_field_gets_a_converging_patch(name: str) -> None:
    desired = desired_for(memcached(**DESIRED_SPEC))
    current = server_defaults(desired)
    current["metadata"]["labels"]["team"] = "cache"  # foreign: must survive the patch
    MUTATIONS[name](current)
    before = copy.deepcopy(current)
    desired_before = copy.deepcopy(desired)
    patched = check_converges(current, desired)
    assert current == before  # inputs untouched
    assert desired == desired_before
    if "team" in (current["metadata"].get("labels") or {}):
        assert patched["metadata"]["labels"]["team"] == "cache"
    assert patched["spec"]["strategy"] == current["spec"]["strategy"]
    container = patched["spec"]["template"]["spec"]["containers"][0]
    # Server defaults of our container survive a rewrite of the containers list.
    if any(c.get("name") == "memcached" for c in current["spec"]["template"]["spec"]["containers"]):
        assert container["terminationMessagePath"] == "/dev/termination-log"
        assert container["imagePullPolicy"] == "IfNotPresent"


@given(st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=5, unique=True), _SPECS)
@settings(max_examples=150)
def test_any_combination_of_changes_converges_in_one_patch(names: list[str], spec: dict[str, Any]) -> None:
    desired = desired_for(memcached(**spec))
    current = server_defaults(desired)
    for name in names:
        # An earlier mutation may have removed what this one changes.
        with contextlib.suppress(KeyError, IndexError):
            MUTATIONS[name](current)
    patch = deployment_patch(current, desired)
    if patch is None:
        # Only when the mutations undid each other as far as memop's fields go.
        assert owned(current) == owned(desired)
        return
    patched = merge_patch(current, patch)
    assert deployment_patch(patched, desired) is None
    assert owned(patched) == owned(desired)
    # And the server defaulting the patched object again changes nothing memop cares about.
    assert deployment_patch(server_defaults(patched), desired) is None


def test_replicas_only_change_is_a_replicas_only_patch() -> None:
    old = desired_for(memcached(size=3))
    new = desired_for(memcached(size=5))
    assert deployment_patch(server_defaults(old), new) == {"spec": {"replicas": 5}}


def test_spec_change_patch_carries_the_merged_container() -> None:
    old = desired_for(memcached(memoryLimitMiB=64))
    new = desired_for(memcached(memoryLimitMiB=256, image="memcached:1.6.29"))
    current = server_defaults(old)
    patch = deployment_patch(current, new)
    assert patch is not None
    assert set(patch) == {"spec"}
    assert set(patch["spec"]) == {"template"}
    (container,) = patch["spec"]["template"]["spec"]["containers"]
    assert container["command"][1] == "--memory-limit=256"
    assert container["image"] == "memcached:1.6.29"
    assert container["terminationMessagePolicy"] == "File"


def test_removed_limit_is_removed_not_kept() -> None:
    old = desired_for(memcached(resources={"limits": {"cpu": "1", "memory": "1Gi"}}))
    new = desired_for(memcached(resources={"limits": {"cpu": "1"}}))
    patched = check_converges(server_defaults(old), new)
    assert patched["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}}


def test_missing_owner_reference_is_added_beside_the_others() -> None:
    desired = desired_for(memcached())
    current = server_defaults(desired)
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u9"}
    current["metadata"]["ownerReferences"] = [other]
    patch = deployment_patch(current, desired)
    assert patch == {"metadata": {"ownerReferences": [other, desired["metadata"]["ownerReferences"][0]]}}


def test_label_patch_touches_only_our_keys() -> None:
    desired = desired_for(memcached())
    current = server_defaults(desired)
    current["metadata"]["labels"] = {"team": "x", "app.kubernetes.io/name": "memcached"}
    patch = deployment_patch(current, desired)
    assert patch == {
        "metadata": {
            "labels": {"app.kubernetes.io/instance": "cache", "app.kubernetes.io/managed-by": "memop"}
        }
    }


# --- drift: the immutable selector --------------------------------------------------------------


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"app.kubernetes.io/name": "memcached"}},  # the tutorial's shared selector
        {"matchLabels": {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "other"}},
        {
            "matchLabels": {
                "app.kubernetes.io/name": "memcached",
                "app.kubernetes.io/instance": "cache",
                "app.kubernetes.io/managed-by": "memop",
            }
        },
        {
            "matchLabels": {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "cache"},
            "matchExpressions": [{"key": "x", "operator": "Exists"}],
        },
        None,
    ],
)
def test_selector_mismatch_is_signalled_not_patched(selector: Any) -> None:
    desired = desired_for(memcached())
    current = server_defaults(desired)
    if selector is None:
        del current["spec"]["selector"]
    else:
        current["spec"]["selector"] = selector
    with pytest.raises(SelectorMismatch) as caught:
        deployment_patch(current, desired)
    assert caught.value.desired == desired["spec"]["selector"]


def test_spec_is_not_touched_by_parse() -> None:
    assert parse_spec(memcached()) == MemcachedSpec()


# --- what the cache keeps of a Deployment (controller.deployment_transform) ----------------------

_GROWN = st.fixed_dictionaries(
    {
        "generation": st.integers(1, 5),
        "observed": st.integers(0, 5),
        "replicas": st.integers(0, 5),
        "updated": st.integers(0, 5),
        "ready": st.integers(0, 5),
        "available": st.integers(0, 5),
        "progressing": st.sampled_from(["NewReplicaSetAvailable", "ProgressDeadlineExceeded", None]),
    }
)


def with_rollout_status(deployment: Obj, grown: dict[str, Any]) -> Obj:
    """A Deployment as the deployment controller leaves it: counts and both conditions."""
    out = copy.deepcopy(deployment)
    out["metadata"]["generation"] = grown["generation"]
    conditions = [
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "ok"}
    ]
    if grown["progressing"] is not None:
        conditions.append(
            {"type": "Progressing", "status": "False", "reason": grown["progressing"], "message": "stuck"}
        )
    out["status"] = {
        "observedGeneration": grown["observed"],
        "replicas": grown["replicas"],
        "updatedReplicas": grown["updated"],
        "readyReplicas": grown["ready"],
        "availableReplicas": grown["available"],
        "unavailableReplicas": 1,
        "collisionCount": 0,
        "conditions": conditions,
    }
    return out


def test_deployment_transform_keeps_what_is_read_and_drops_the_rest() -> None:
    live = with_rollout_status(
        server_defaults(desired_for(memcached(size=2))),
        {"generation": 2, "observed": 2, "replicas": 2, "updated": 2, "ready": 2, "available": 2,
         "progressing": "NewReplicaSetAvailable"},
    )  # fmt: skip
    live["metadata"].update(deletionTimestamp="2024-05-01T11:00:00Z", finalizers=["example.com/f"])
    before = copy.deepcopy(live)
    kept = deployment_transform(live)
    assert live == before  # the input is not changed
    assert kept["apiVersion"] == "apps/v1"
    assert kept["kind"] == "Deployment"
    assert set(kept["metadata"]) == {
        "name", "namespace", "uid", "resourceVersion", "generation", "labels", "ownerReferences",
        "deletionTimestamp", "finalizers",
    }  # fmt: skip
    assert kept["metadata"]["labels"] == live["metadata"]["labels"]
    assert kept["metadata"]["ownerReferences"] == live["metadata"]["ownerReferences"]
    # Dropped: the rollout tunables; kept: everything deployment_patch compares, template whole.
    assert set(kept["spec"]) == {"replicas", "selector", "template"}
    assert kept["spec"]["template"] == live["spec"]["template"]
    assert kept["status"] == {
        "observedGeneration": 2,
        "replicas": 2,
        "updatedReplicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
    }  # a healthy Progressing condition is not read: dropped
    live["status"]["conditions"][1].update(reason="ProgressDeadlineExceeded")
    assert deployment_transform(live)["status"]["conditions"] == [live["status"]["conditions"][1]]


@pytest.mark.parametrize(
    ("deployment", "kept"),
    [
        ({}, {"metadata": {}, "status": {}}),
        ({"metadata": None, "status": None}, {"metadata": {}, "status": {}}),
        ({"spec": ["not", "a", "map"]}, {"metadata": {}, "spec": ["not", "a", "map"], "status": {}}),
        ({"spec": None}, {"metadata": {}, "status": {}}),
        (
            {"status": {"conditions": "Progressing", "replicas": 1}},
            {"metadata": {}, "status": {"replicas": 1}},
        ),
        (
            {"status": {"conditions": ["x", {"type": "Progressing"}, {"type": "ReplicaFailure"}]}},
            {"metadata": {}, "status": {}},
        ),
        (
            {"status": {"conditions": ["x", {"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]}},
            {
                "metadata": {},
                "status": {"conditions": [{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]},
            },
        ),
    ],
)
def test_deployment_transform_takes_odd_shapes_as_they_come(deployment: Obj, kept: Obj) -> None:
    assert deployment_transform(deployment) == kept


@given(st.lists(st.sampled_from(sorted(MUTATIONS)), max_size=4, unique=True), _SPECS, _SPECS, _GROWN)
@settings(max_examples=200)
def test_the_reconciler_decides_the_same_on_the_transformed_deployment(
    names: list[str], old_spec: dict[str, Any], new_spec: dict[str, Any], grown: dict[str, Any]
) -> None:
    """Whatever the live Deployment holds, the patch and the status computed from the cached
    (transformed) copy are those computed from the whole object."""
    live = with_rollout_status(server_defaults(desired_for(memcached(**old_spec))), grown)
    for name in names:
        with contextlib.suppress(KeyError, IndexError):
            MUTATIONS[name](live)
    cr = memcached(**new_spec)
    desired = desired_for(cr)
    cached = deployment_transform(live)
    try:
        expected = deployment_patch(live, desired)
    except SelectorMismatch:
        with pytest.raises(SelectorMismatch):
            deployment_patch(cached, desired)
    else:
        assert deployment_patch(cached, desired) == expected
    spec = parse_spec(cr)
    pods = [{"metadata": {"name": "p"}, "status": {"phase": "Running"}}]
    now = "2024-05-01T10:00:00Z"
    assert compute_status(cr, spec, cached, pods, now) == compute_status(cr, spec, live, pods, now)
