"""PersistentVolumeClaims, PersistentVolumes, ResourceQuotas, LimitRanges,
HorizontalPodAutoscalers and PriorityClasses over HTTP, as kube-apiserver v1.36 answers: their
defaults, the finalizers its admission plugins add, the status subresources and the validation
errors operators run into, each the real server's message."""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http, Reply

SCHEDULING = "/apis/scheduling.k8s.io/v1/priorityclasses"
STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
IMMUTABLE_CLAIM = (
    'PersistentVolumeClaim "{name}" is invalid: spec: Forbidden: spec is immutable after creation '
    "except resources.requests and volumeAttributesClassName for bound claims"
)


def core(ns: str, plural: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/{plural}" + (f"/{name}" if name else "")


def claim(name: str, **spec: Any) -> dict[str, Any]:
    body = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, **spec}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": body}


def causes(reply: Reply) -> set[tuple[str, str]]:
    """A 422's causes as (field, message) pairs."""
    return {(c["field"], c["message"]) for c in reply.body["details"]["causes"]}


def invalid(kind: str, name: str, *errors: str) -> str:
    joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f'{kind} "{name}" is invalid: {joined}'


async def test_a_claim_is_pending_filesystem_and_protected(
    http: Http, cluster: ClusterHandle, namespace: str
) -> None:
    body = claim("data", resources={"requests": {"storage": "1024Mi"}})
    body["status"] = {"phase": "Bound"}
    created = await http.post(core(namespace, "persistentvolumeclaims"), body)
    assert created.status == 201, created.body
    assert created.body["spec"]["volumeMode"] == "Filesystem"
    assert created.body["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    assert created.body["status"] == {"phase": "Pending"}
    assert created.body["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert "generation" not in created.body["metadata"]
    # A Pending claim cannot grow; kube-apiserver v1.36.2 words it as any other spec change (and
    # appends a diff of the Go structs, which is no part of the contract).
    for change in (
        {"resources": {"requests": {"storage": "2Gi"}}},
        {"accessModes": ["ReadWriteMany"]},
    ):
        changed = await http.patch(core(namespace, "persistentvolumeclaims", "data"), {"spec": change})
        assert changed.status == 422, changed.body
        assert changed.body["message"].startswith(IMMUTABLE_CLAIM.format(name="data"))
    deleted = await http.delete(core(namespace, "persistentvolumeclaims", "data"))
    assert deleted.status == 200
    if not cluster.real:  # a real pvc-protection controller lets go of an unused claim at once
        kept = await http.get(core(namespace, "persistentvolumeclaims", "data"))
        assert kept.body["metadata"]["deletionTimestamp"]


async def bind_claim(http: Http, cluster: ClusterHandle, namespace: str, name: str, klass: str) -> str:
    """Bind claim ``name`` (1Gi of class ``klass``) to a volume, as the cluster's binder does: a real
    cluster's PV controller binds a volume made for the claim; the in-memory server (no simulated
    controllers here) is told the claim is Bound with 1Gi. Returns the volume's name ("" if none)."""
    if not cluster.real:
        reply = await http.patch(
            core(namespace, "persistentvolumeclaims", name) + "/status",
            {"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}},
        )
        assert reply.status == 200, reply.body
        return ""
    volume = f"memop-test-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": f"/tmp/{volume}"},
            "storageClassName": klass,
            "claimRef": {"namespace": namespace, "name": name},
        },
    }
    reply = await http.post("/api/v1/persistentvolumes", body)
    assert reply.status == 201, reply.body

    async def bound() -> bool:
        got = await http.get(core(namespace, "persistentvolumeclaims", name))
        return bool(got.body.get("status", {}).get("phase") == "Bound")

    await wait_for(bound, timeout=60, message=f"claim {name} not bound to {volume}")
    return volume


async def test_a_bound_claim_grows_only_through_an_expandable_class(
    http: Http, cluster: ClusterHandle, namespace: str
) -> None:
    klass = f"memop-test-{uuid.uuid4().hex[:8]}"
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": klass},
        "provisioner": "memop.test/none",
        "allowVolumeExpansion": False,
    }
    reply = await http.post(STORAGE_CLASSES, storage_class)
    assert reply.status == 201, reply.body
    created = await http.post(
        core(namespace, "persistentvolumeclaims"), claim("data", storageClassName=klass)
    )
    assert created.status == 201, created.body
    volume = ""
    try:
        volume = await bind_claim(http, cluster, namespace, "data", klass)
        path = core(namespace, "persistentvolumeclaims", "data")

        def requesting(storage: str) -> dict[str, Any]:
            return {"spec": {"resources": {"requests": {"storage": storage}}}}

        refused = await http.patch(path, requesting("2Gi"))
        assert refused.status == 403, refused.body
        assert refused.body["message"] == (
            'persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be '
            "resized and the storageclass that provisions the pvc must support resize"
        )
        shrunk = await http.patch(path, requesting("512Mi"))
        assert shrunk.status == 422, shrunk.body
        assert shrunk.body["message"] == (
            'PersistentVolumeClaim "data" is invalid: spec.resources.requests.storage: Forbidden: '
            "field can not be less than status.capacity"
        )
        limited = await http.patch(path, {"spec": {"resources": {"limits": {"storage": "3Gi"}}}})
        assert limited.status == 422, limited.body
        assert limited.body["message"].startswith(IMMUTABLE_CLAIM.format(name="data"))
        expandable = await http.patch(f"{STORAGE_CLASSES}/{klass}", {"allowVolumeExpansion": True})
        assert expandable.status == 200, expandable.body

        async def grown() -> Reply | None:  # admission reads classes from an informer's cache
            reply = await http.patch(path, requesting("2Gi"))
            return reply if reply.status != 403 else None

        reply = await wait_for(grown, timeout=30, message="the class's expansion never admitted")
        assert reply.status == 200, reply.body
        assert reply.body["spec"]["resources"]["requests"] == {"storage": "2Gi"}
    finally:
        await http.delete(core(namespace, "persistentvolumeclaims", "data"))
        if volume:
            await http.delete(f"/api/v1/persistentvolumes/{volume}")
        await http.delete(f"{STORAGE_CLASSES}/{klass}")


async def test_a_claim_needs_access_modes_and_storage(http: Http, namespace: str) -> None:
    body = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "empty"}, "spec": {}}
    reply = await http.post(core(namespace, "persistentvolumeclaims"), body)
    assert reply.status == 422
    assert reply.body["message"] == invalid(
        "PersistentVolumeClaim",
        "empty",
        "spec.accessModes: Required value: at least 1 access mode is required",
        "spec.resources[storage]: Required value",
    )
    bad = claim("bad", accessModes=["ReadWriteSometimes"], volumeMode="Raw")
    reply = await http.post(core(namespace, "persistentvolumeclaims"), bad)
    assert reply.body["message"] == invalid(
        "PersistentVolumeClaim",
        "bad",
        'spec.accessModes: Unsupported value: "ReadWriteSometimes": supported values: "ReadOnlyMany", '
        '"ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"',
        'spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"',
    )


async def test_a_volume_gets_its_defaults_and_needs_a_source(http: Http) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "memop-test-pv"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/pv"},
        },
    }
    created = await http.post("/api/v1/persistentvolumes", body)
    assert created.status == 201, created.body
    await http.delete("/api/v1/persistentvolumes/memop-test-pv")  # kept until unprotected
    spec = created.body["spec"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["volumeMode"] == "Filesystem"
    assert spec["hostPath"] == {"path": "/tmp/pv", "type": ""}
    # kube-apiserver v1.36.2 times the phase from the start (RFC 3339, whole seconds).
    status = created.body["status"]
    assert status.keys() == {"phase", "lastPhaseTransitionTime"}
    assert status["phase"] == "Pending"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", status["lastPhaseTransitionTime"])
    assert created.body["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    sourceless = {**body, "metadata": {"name": "memop-test-nosource"}, "spec": {**spec, "hostPath": None}}
    del sourceless["spec"]["hostPath"]
    reply = await http.post("/api/v1/persistentvolumes", sourceless)
    assert reply.body["message"] == invalid(
        "PersistentVolume", "memop-test-nosource", "spec: Required value: must specify a volume type"
    )


async def test_a_resource_quota_checks_its_resources(http: Http, namespace: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "10", "requests.memory": "1024Mi", "count/deployments.apps": "2"}},
        "status": {"used": {"pods": "1"}},
    }
    created = await http.post(core(namespace, "resourcequotas"), body)
    assert created.status == 201, created.body
    assert created.body["spec"]["hard"]["requests.memory"] == "1Gi"
    assert created.body["status"] == {}
    bad = {
        **body,
        "metadata": {"name": "bad"},
        "spec": {"hard": {"gpus": "1", "pods": "1500m", "services": "-1", "storage": "1Gi"}},
    }
    reply = await http.post(core(namespace, "resourcequotas"), bad)
    assert reply.status == 422
    assert reply.body["message"].startswith('ResourceQuota "bad" is invalid: [')
    # Go validates spec.hard in map order, which kube-apiserver v1.36.2 varies from one request
    # to the next: the errors are a set. An unknown bare name fails both name checks;
    # ``storage`` is a standard resource but no quota resource.
    assert causes(reply) == {
        ("spec.hard[gpus]", 'Invalid value: "gpus": must be a standard resource type or fully qualified'),
        ("spec.hard[gpus]", 'Invalid value: "gpus": must be a standard resource for quota'),
        ("spec.hard[pods]", 'Invalid value: "1500m": must be an integer'),
        ("spec.hard[services]", 'Invalid value: "-1": must be greater than or equal to 0'),
        ("spec.hard[storage]", 'Invalid value: "storage": must be a standard resource for quota'),
    }


async def test_a_limit_range_defaults_container_limits_and_requests(http: Http, namespace: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "limits"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}}]},
    }
    created = await http.post(core(namespace, "limitranges"), body)
    assert created.status == 201, created.body
    assert created.body["spec"]["limits"] == [
        {
            "type": "Container",
            "max": {"cpu": "2"},
            "min": {"memory": "64Mi"},
            "default": {"cpu": "2"},
            "defaultRequest": {"cpu": "2", "memory": "64Mi"},
        }
    ]
    inverted = {
        **body,
        "metadata": {"name": "inverted"},
        "spec": {
            "limits": [
                {"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "2"}, "default": {"cpu": "1"}}
            ]
        },
    }
    reply = await http.post(core(namespace, "limitranges"), inverted)
    assert reply.status == 422
    assert reply.body["message"] == invalid(
        "LimitRange",
        "inverted",
        'spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1',
        'spec.limits[0].defaultRequest[cpu]: Invalid value: "1": min value 2 is greater than default request '
        "value 1",
        'spec.limits[0].default[cpu]: Invalid value: "2": min value 2 is greater than default value 1',
    )


async def test_an_autoscaler_gets_a_cpu_target_and_behavior_defaults(http: Http, namespace: str) -> None:
    path = f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers"
    body = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 5,
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
        },
    }
    created = await http.post(path, body)
    assert created.status == 201, created.body
    spec = created.body["spec"]
    assert spec["minReplicas"] == 1
    assert spec["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        }
    ]
    assert spec["behavior"] == {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 60,
            "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        },
    }
    # currentMetrics has no omitempty: kube-apiserver v1.36.2 answers null for an empty list.
    assert created.body["status"] == {"desiredReplicas": 0, "currentMetrics": None}
    assert "generation" not in created.body["metadata"]  # the registry counts none
    rescaled = await http.patch(f"{path}/web", {"spec": {"maxReplicas": 6}})
    assert rescaled.status == 200, rescaled.body
    assert "generation" not in rescaled.body["metadata"]
    emptied = await http.patch(f"{path}/web/status", {"status": {"currentMetrics": [], "currentReplicas": 2}})
    assert emptied.status == 200, emptied.body
    assert emptied.body["status"]["currentMetrics"] is None
    assert emptied.body["status"]["currentReplicas"] == 2
    bad = {
        **body,
        "metadata": {"name": "bad"},
        "spec": {"scaleTargetRef": {}, "minReplicas": 3, "maxReplicas": 2},
    }
    reply = await http.post(path, bad)
    assert reply.body["message"] == invalid(
        "HorizontalPodAutoscaler.autoscaling",
        "bad",
        "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
        "spec.scaleTargetRef.kind: Required value",
        "spec.scaleTargetRef.name: Required value",
        'spec.scaleTargetRef.apiVersion: Invalid value: "": apiVersion must specify API group',
    )


async def test_priority_classes_default_their_policy_and_reserve_system_names(http: Http) -> None:
    system = {c["metadata"]["name"]: c for c in (await http.get(SCHEDULING)).body["items"]}
    assert system["system-cluster-critical"]["value"] == 2000000000
    assert system["system-node-critical"]["value"] == 2000001000
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "memop-test-high"},
        "value": 1000,
    }
    created = await http.post(SCHEDULING, body)
    assert created.status == 201, created.body
    assert created.body["preemptionPolicy"] == "PreemptLowerPriority"
    assert created.body["metadata"]["generation"] == 1
    try:
        described = await http.patch(f"{SCHEDULING}/memop-test-high", {"description": "urgent"})
        assert described.body["metadata"]["generation"] == 1
        changed = await http.patch(f"{SCHEDULING}/memop-test-high", {"value": 2000})
        assert changed.body["message"] == invalid(
            "PriorityClass.scheduling.k8s.io",
            "memop-test-high",
            "value: Forbidden: may not be changed in an update.",
        )
    finally:
        await http.delete(f"{SCHEDULING}/memop-test-high")
    reserved = await http.post(SCHEDULING, {**body, "metadata": {"name": "system-mine"}})
    assert reserved.body["message"] == invalid(
        "PriorityClass.scheduling.k8s.io",
        "system-mine",
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use "
        "only. error: system-mine is not a known system priority class",
    )
    huge = await http.post(SCHEDULING, {**body, "metadata": {"name": "memop-test-huge"}, "value": 1000000001})
    assert huge.body["message"] == invalid(
        "PriorityClass.scheduling.k8s.io",
        "memop-test-huge",
        "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
    )


async def test_delete_answers_as_each_registry_does(http: Http, namespace: str) -> None:
    """kube-apiserver v1.36.2 (measured): a ResourceQuota's DELETE answers with the quota, a
    claim's with the claim it keeps (deletionTimestamp set, the pvc-protection finalizer holding
    it), a LimitRange's with a Success Status."""
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "5"}},
    }
    assert (await http.post(core(namespace, "resourcequotas"), quota)).status == 201
    deleted = await http.delete(core(namespace, "resourcequotas", "q"))
    assert (deleted.status, deleted.body["kind"]) == (200, "ResourceQuota")
    assert (await http.post(core(namespace, "persistentvolumeclaims"), claim("held"))).status == 201
    deleted = await http.delete(core(namespace, "persistentvolumeclaims", "held"))
    assert (deleted.status, deleted.body["kind"]) == (200, "PersistentVolumeClaim")
    assert deleted.body["metadata"]["deletionTimestamp"]
    limits = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "l"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]},
    }
    assert (await http.post(core(namespace, "limitranges"), limits)).status == 201
    deleted = await http.delete(core(namespace, "limitranges", "l"))
    assert (deleted.status, deleted.body["kind"], deleted.body["status"]) == (200, "Status", "Success")
