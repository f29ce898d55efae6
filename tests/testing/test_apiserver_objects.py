"""Object lifecycle over HTTP: server-set metadata, validation, optimistic concurrency, status
subresources, server-side defaults and deletion, as kube-apiserver does them.

Every test here runs against the in-memory server and, with USE_EXISTING_CLUSTER=true, against
a real cluster; the ones that need the fake's control over time or garbage collection say so.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http, Reply

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
UID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


def deploy_path(ns: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{ns}/deployments" + (f"/{name}" if name else "")


def deployment(name: str, image: str = "memcached:1.6.21", replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "memcached", "image": image, "ports": [{"containerPort": 11211}]}]
                },
            },
        },
    }


async def test_create_sets_server_metadata(http: Http, namespace: str) -> None:
    reply = await http.post(
        cm_path(namespace),
        {"metadata": {"name": "a"}, "data": {"k": "v"}},
        query={"fieldManager": "memop-test"},
    )
    assert reply.status == 201, reply.body
    meta = reply.body["metadata"]
    assert reply.body["kind"] == "ConfigMap"
    assert reply.body["apiVersion"] == "v1"
    assert UID.match(meta["uid"])
    assert RFC3339.match(meta["creationTimestamp"])
    assert meta["resourceVersion"].isdigit()
    assert "generation" not in meta  # ConfigMaps have no generation
    [entry] = meta["managedFields"]
    assert entry["manager"] == "memop-test"
    assert entry["operation"] == "Update"
    assert entry["fieldsType"] == "FieldsV1"
    assert entry["fieldsV1"]["f:data"] == {".": {}, "f:k": {}}  # the map is new: "." owns it


async def test_manager_defaults_to_the_user_agent_product(http: Http, namespace: str) -> None:
    reply = await http.post(cm_path(namespace), {"metadata": {"name": "a"}, "data": {"k": "v"}})
    # kubernetes_asyncio sends "OpenAPI-Generator/<version>/python".
    assert reply.body["metadata"]["managedFields"][0]["manager"] == "OpenAPI-Generator"


async def test_resource_versions_increase_across_kinds(http: Http, namespace: str) -> None:
    first = await http.post(cm_path(namespace), {"metadata": {"name": "a"}})
    second = await http.post(deploy_path(namespace), deployment("web"))
    third = await http.put(cm_path(namespace, "a"), {"metadata": {"name": "a"}, "data": {"x": "1"}})
    versions = [int(r.body["metadata"]["resourceVersion"]) for r in (first, second, third)]
    assert versions == sorted(versions)
    assert len(set(versions)) == 3


async def test_generate_name_appends_five_characters(http: Http, namespace: str) -> None:
    reply = await http.post(cm_path(namespace), {"metadata": {"generateName": "web-"}})
    assert reply.status == 201
    assert re.fullmatch(r"web-[bcdfghjklmnpqrstvwxz2456789]{5}", reply.body["metadata"]["name"])
    assert reply.body["metadata"]["generateName"] == "web-"


async def test_invalid_name_is_422_with_causes(http: Http, namespace: str) -> None:
    reply = await http.post(cm_path(namespace), {"metadata": {"name": "Bad_Name"}})
    assert reply.status == 422
    body = reply.body
    assert body["kind"] == "Status"
    assert body["reason"] == "Invalid"
    assert body["message"].startswith(
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
        "a lowercase RFC 1123 subdomain"
    )
    assert body["details"]["name"] == "Bad_Name"
    assert body["details"]["kind"] == "ConfigMap"
    [cause] = body["details"]["causes"]
    assert cause["reason"] == "FieldValueInvalid"
    assert cause["field"] == "metadata.name"
    assert cause["message"].startswith('Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain')


async def test_missing_name_is_required(http: Http, namespace: str) -> None:
    reply = await http.post(cm_path(namespace), {"metadata": {}})
    assert reply.status == 422
    assert reply.body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: name or generateName is required",
            "field": "metadata.name",
        }
    ]


async def test_create_in_a_missing_namespace_is_404(http: Http, cluster: ClusterHandle) -> None:
    reply = await http.post(cm_path("no-such-namespace-x1"), {"metadata": {"name": "a"}})
    assert reply.status == 404
    assert reply.body["reason"] == "NotFound"
    assert reply.body["message"] == 'namespaces "no-such-namespace-x1" not found'
    assert reply.body["details"] == {"name": "no-such-namespace-x1", "kind": "namespaces"}


async def test_create_of_an_existing_name_is_409_already_exists(http: Http, namespace: str) -> None:
    await http.post(deploy_path(namespace), deployment("web"))
    reply = await http.post(deploy_path(namespace), deployment("web"))
    assert reply.status == 409
    assert reply.body["reason"] == "AlreadyExists"
    assert reply.body["message"] == 'deployments.apps "web" already exists'
    assert reply.body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}


async def test_update_with_a_stale_resource_version_is_409_conflict(http: Http, namespace: str) -> None:
    created = (await http.post(deploy_path(namespace), deployment("web"))).body
    stale = dict(created)
    await http.put(deploy_path(namespace, "web"), {**created, "spec": {**created["spec"], "replicas": 2}})
    reply = await http.put(deploy_path(namespace, "web"), {**stale, "spec": {**stale["spec"], "replicas": 3}})
    assert reply.status == 409
    assert reply.body["reason"] == "Conflict"
    assert reply.body["message"] == (
        'Operation cannot be fulfilled on deployments.apps "web": the object has been modified; please apply '
        "your changes to the latest version and try again"
    )
    assert reply.body["details"] == {"name": "web", "group": "apps", "kind": "deployments"}


async def test_update_without_resource_version(http: Http, namespace: str) -> None:
    await http.post(cm_path(namespace), {"metadata": {"name": "a"}})
    unconditional = await http.put(cm_path(namespace, "a"), {"metadata": {"name": "a"}, "data": {"x": "1"}})
    assert unconditional.status == 200
    assert unconditional.body["data"] == {"x": "1"}

    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    await http.post(lease_path, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    reply = await http.put(f"{lease_path}/l", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}})
    assert reply.status == 422
    assert reply.body["message"] == (
        'leases.coordination.k8s.io "l" is invalid: metadata.resourceVersion: Invalid value: 0: must be '
        "specified for an update"
    )


async def test_update_of_a_missing_object_is_404(http: Http, namespace: str) -> None:
    reply = await http.put(cm_path(namespace, "nope"), {"metadata": {"name": "nope"}})
    assert reply.status == 404
    assert reply.body["message"] == 'configmaps "nope" not found'


async def test_update_with_another_name_is_400(http: Http, namespace: str) -> None:
    await http.post(cm_path(namespace), {"metadata": {"name": "a"}})
    reply = await http.put(cm_path(namespace, "a"), {"metadata": {"name": "b"}})
    assert reply.status == 400
    assert reply.body["reason"] == "BadRequest"
    assert reply.body["message"] == "the name of the object (b) does not match the name on the URL (a)"


async def put_current(
    http: Http, path: str, change: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[dict[str, Any], Reply]:
    """GET ``path``, PUT ``change(current)`` back, and start over on a 409: on a real cluster a
    controller (the deployment controller writing status) may update the object in between.
    Returns the object read and the answer to the PUT that was not a conflict."""

    async def attempt() -> tuple[dict[str, Any], Reply] | None:
        current: dict[str, Any] = (await http.get(path)).body
        reply = await http.put(path, change(current))
        return None if reply.status == 409 else (current, reply)

    return await wait_for(attempt, timeout=30, message=f"a PUT of {path} without a conflict")


async def test_identical_update_is_a_no_op(http: Http, namespace: str) -> None:
    await http.post(deploy_path(namespace), deployment("web"))
    current, again = await put_current(http, deploy_path(namespace, "web"), lambda obj: obj)
    assert again.status == 200
    assert again.body["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]
    assert again.body["metadata"]["generation"] == 1


async def test_generation_counts_spec_changes_only(http: Http, namespace: str) -> None:
    created = (await http.post(deploy_path(namespace), deployment("web"))).body
    assert created["metadata"]["generation"] == 1
    labelled = await http.patch(deploy_path(namespace, "web"), {"metadata": {"labels": {"extra": "1"}}})
    assert labelled.body["metadata"]["generation"] == 1
    scaled = await http.patch(deploy_path(namespace, "web"), {"spec": {"replicas": 2}})
    assert scaled.body["metadata"]["generation"] == 2
    # Deployments also count annotation changes (they are copied to ReplicaSets).
    annotated = await http.patch(deploy_path(namespace, "web"), {"metadata": {"annotations": {"a": "b"}}})
    assert annotated.body["metadata"]["generation"] == 3
    status = await http.patch(
        deploy_path(namespace, "web") + "/status", {"status": {"observedGeneration": 3}}
    )
    assert status.status == 200
    assert status.body["metadata"]["generation"] == 3


async def test_status_subresource_splits_spec_and_status(http: Http, namespace: str) -> None:
    # Status values no deployment controller would write (on a real cluster one writes status).
    body = deployment("web")
    body["status"] = {"replicas": 5}
    created = (await http.post(deploy_path(namespace), body)).body
    assert created["status"] == {}  # dropped on create
    _, main = await put_current(
        http,
        deploy_path(namespace, "web"),
        lambda obj: {**obj, "spec": {**obj["spec"], "minReadySeconds": 1}, "status": {"replicas": 7}},
    )
    assert main.status == 200, main.body
    assert main.body["spec"]["minReadySeconds"] == 1
    assert main.body["status"].get("replicas") != 7  # the main resource ignores status
    assert main.body["metadata"]["generation"] == 2
    _, via_status = await put_current(
        http,
        deploy_path(namespace, "web") + "/status",
        lambda obj: {**obj, "spec": {**obj["spec"], "replicas": 9}, "status": {"replicas": 3}},
    )
    assert via_status.status == 200, via_status.body
    assert via_status.body["status"] == {"replicas": 3}
    assert via_status.body["spec"]["replicas"] == 1  # /status ignores spec
    assert via_status.body["metadata"]["generation"] == 2


async def test_status_of_a_kind_without_status_subresource_is_404(http: Http, namespace: str) -> None:
    await http.post(cm_path(namespace), {"metadata": {"name": "a"}})
    reply = await http.get(cm_path(namespace, "a") + "/status")
    assert reply.status == 404


async def test_deployment_defaults(http: Http, namespace: str) -> None:
    spec = (await http.post(deploy_path(namespace), deployment("web", image="memcached"))).body["spec"]
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Always"
    assert pod["dnsPolicy"] == "ClusterFirst"
    assert pod["schedulerName"] == "default-scheduler"
    assert pod["terminationGracePeriodSeconds"] == 30
    assert pod["securityContext"] == {}
    [container] = pod["containers"]
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
    assert container["imagePullPolicy"] == "Always"  # untagged image means :latest
    assert container["ports"] == [{"containerPort": 11211, "protocol": "TCP"}]
    assert container["resources"] == {}


async def test_image_pull_policy_follows_the_tag(http: Http, namespace: str) -> None:
    tagged = (await http.post(deploy_path(namespace), deployment("a", image="memcached:1.6"))).body
    latest = (await http.post(deploy_path(namespace), deployment("b", image="memcached:latest"))).body
    assert tagged["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert latest["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"


async def test_deployment_validation(http: Http, namespace: str) -> None:
    body = deployment("web")
    body["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    reply = await http.post(deploy_path(namespace), body)
    assert reply.status == 422
    assert reply.body["message"] == (
        'Deployment.apps "web" is invalid: spec.template.metadata.labels: Invalid value: '
        '{"app":"other"}: `selector` does not match template `labels`'
    )
    assert reply.body["details"]["group"] == "apps"
    assert reply.body["details"]["kind"] == "Deployment"


async def test_pod_defaults(http: Http, namespace: str) -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
    created = (await http.post(f"/api/v1/namespaces/{namespace}/pods", pod)).body
    assert created["spec"]["enableServiceLinks"] is True
    assert created["spec"]["restartPolicy"] == "Always"
    assert created["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert created["status"]["phase"] == "Pending"
    assert created["status"]["qosClass"] == "BestEffort"
    limited = {
        "metadata": {"name": "q"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "busybox:1.36",
                    "resources": {"limits": {"cpu": "1", "memory": "64Mi"}},
                }
            ]
        },
    }
    guaranteed = (await http.post(f"/api/v1/namespaces/{namespace}/pods", limited)).body
    # On pods (not templates) limits default the requests.
    assert guaranteed["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "64Mi"}
    assert guaranteed["status"]["qosClass"] == "Guaranteed"


async def test_a_pod_counts_generations_of_its_spec(http: Http, namespace: str) -> None:
    """As kube-apiserver v1.36.2 answers: 1 on create, +1 per spec change and on deletion;
    labels and status leave it (a real cluster's binding, which sets spec.nodeName, too)."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    pod = {
        "metadata": {"name": "p", "finalizers": ["memop.test/hold"]},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    }
    created = await http.post(path, pod)
    assert created.status == 201, created.body
    assert created.body["metadata"]["generation"] == 1
    try:
        labelled = await http.patch(f"{path}/p", {"metadata": {"labels": {"a": "b"}}})
        assert labelled.body["metadata"]["generation"] == 1
        deadline = await http.patch(f"{path}/p", {"spec": {"activeDeadlineSeconds": 600}})
        assert deadline.body["metadata"]["generation"] == 2
        told = await http.patch(f"{path}/p/status", {"status": {"message": "hi"}})
        assert told.status == 200, told.body
        assert told.body["metadata"]["generation"] == 2
        deleted = await http.delete(f"{path}/p", {"gracePeriodSeconds": 0})
        assert deleted.status == 200, deleted.body
        assert deleted.body["metadata"]["generation"] == 3
    finally:
        await http.patch(f"{path}/p", {"metadata": {"finalizers": None}})


async def test_a_pod_image_must_not_have_surrounding_whitespace(http: Http, namespace: str) -> None:
    """validateContainerOnlyForPod: Pods refuse it (containers and init containers, on create and
    update); pod templates keep accepting it for backward compatibility."""
    pods = f"/api/v1/namespaces/{namespace}/pods"
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox:1.36\n"}],
            "containers": [{"name": "c", "image": " memcached:1.6"}, {"name": "d", "image": "busybox:1.36"}],
        },
    }
    reply = await http.post(pods, pod)
    assert reply.status == 422, reply.body
    assert reply.body["reason"] == "Invalid"
    assert reply.body["message"] == (
        'Pod "p" is invalid: [spec.containers[0].image: Invalid value: " memcached:1.6": must not have '
        'leading or trailing whitespace, spec.initContainers[0].image: Invalid value: "busybox:1.36\\n": '
        "must not have leading or trailing whitespace]"
    )
    assert [(c["reason"], c["field"]) for c in reply.body["details"]["causes"]] == [
        ("FieldValueInvalid", "spec.containers[0].image"),
        ("FieldValueInvalid", "spec.initContainers[0].image"),
    ]

    pod["spec"] = {"containers": [{"name": "c", "image": "memcached:1.6"}]}
    assert (await http.post(pods, pod)).status == 201
    patched = await http.patch(
        f"{pods}/p",
        {"spec": {"containers": [{"name": "c", "image": "memcached:1.6\t"}]}},
        content_type="application/strategic-merge-patch+json",
    )
    assert patched.status == 422, patched.body
    whitespace = {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "memcached:1.6\\t": must not have leading or trailing whitespace',
        "field": "spec.containers[0].image",
    }
    # An update checks the images twice (the pod-only checks, then ValidateContainerUpdates): a
    # v1.36 server lists the cause twice and its message, an aggregate, once.
    assert patched.body["details"]["causes"] == [whitespace, whitespace]
    assert patched.body["message"] == f'Pod "p" is invalid: spec.containers[0].image: {whitespace["message"]}'

    body = deployment("web", image=" memcached:1.6 ")
    body["spec"]["replicas"] = 0  # no pods: a real ReplicaSet controller could not create them
    created = await http.post(deploy_path(namespace), body)
    assert created.status == 201, created.body
    assert created.body["spec"]["template"]["spec"]["containers"][0]["image"] == " memcached:1.6 "
    rs = {**body, "apiVersion": "apps/v1", "kind": "ReplicaSet"}
    replicasets = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
    assert (await http.post(replicasets, rs)).status == 201


async def test_delete_answers_status_or_object(http: Http, namespace: str) -> None:
    cm = (await http.post(cm_path(namespace), {"metadata": {"name": "a"}})).body
    reply = await http.delete(cm_path(namespace, "a"))
    assert reply.status == 200
    assert reply.body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "a", "kind": "configmaps", "uid": cm["metadata"]["uid"]},
    }
    assert (await http.get(cm_path(namespace, "a"))).status == 404
    assert (await http.delete(cm_path(namespace, "a"))).status == 404
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
    await http.post(f"/api/v1/namespaces/{namespace}/pods", pod)
    deleted_pod = await http.delete(f"/api/v1/namespaces/{namespace}/pods/p")
    assert deleted_pod.status == 200
    assert deleted_pod.body["kind"] == "Pod"  # pods answer with the object


async def test_finalizers_hold_deletion(http: Http, namespace: str) -> None:
    created = (
        await http.post(cm_path(namespace), {"metadata": {"name": "a", "finalizers": ["example.com/hold"]}})
    ).body
    reply = await http.delete(cm_path(namespace, "a"))
    assert reply.status == 200
    held = reply.body
    assert held["kind"] == "ConfigMap"
    assert RFC3339.match(held["metadata"]["deletionTimestamp"])
    assert held["metadata"]["deletionGracePeriodSeconds"] == 0
    assert int(held["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert (await http.get(cm_path(namespace, "a"))).status == 200

    adding = await http.patch(
        cm_path(namespace, "a"), {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}
    )
    assert adding.status == 422
    assert adding.body["message"] == (
        'ConfigMap "a" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the '
        'object is being deleted, found new finalizers []string{"example.com/more"}'
    )
    released = await http.patch(cm_path(namespace, "a"), {"metadata": {"finalizers": None}})
    assert released.status == 200
    assert (await http.get(cm_path(namespace, "a"))).status == 404


async def test_delete_preconditions(http: Http, namespace: str) -> None:
    created = (await http.post(cm_path(namespace), {"metadata": {"name": "a"}})).body
    wrong_uid = await http.delete(
        cm_path(namespace, "a"), {"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}
    )
    assert wrong_uid.status == 409
    assert wrong_uid.body["reason"] == "Conflict"
    assert wrong_uid.body["message"] == (
        'Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition '
        "(00000000-0000-0000-0000-000000000000) does not match the UID in record "
        f"({created['metadata']['uid']}). The object might have been deleted and then recreated"
    )
    wrong_rv = await http.delete(cm_path(namespace, "a"), {"preconditions": {"resourceVersion": "1"}})
    assert wrong_rv.status == 409
    right = await http.delete(
        cm_path(namespace, "a"),
        {
            "preconditions": {
                "uid": created["metadata"]["uid"],
                "resourceVersion": created["metadata"]["resourceVersion"],
            }
        },
    )
    assert right.status == 200


@pytest.mark.fake_only
async def test_propagation_policies_add_gc_finalizers(http: Http, namespace: str) -> None:
    # A real cluster's garbage collector removes these finalizers at once.
    for name, policy, finalizer in (("f", "Foreground", "foregroundDeletion"), ("o", "Orphan", "orphan")):
        await http.post(deploy_path(namespace), deployment(name))
        reply = await http.delete(deploy_path(namespace, name), query={"propagationPolicy": policy})
        assert reply.status == 200
        assert reply.body["metadata"]["finalizers"] == [finalizer]
        assert reply.body["metadata"]["deletionTimestamp"]
        assert reply.body["metadata"]["generation"] == 2  # marking for deletion bumps it
    await http.post(deploy_path(namespace), deployment("b"))
    background = await http.delete(deploy_path(namespace, "b"), {"propagationPolicy": "Background"})
    assert background.body["kind"] == "Status"
    bad = await http.delete(deploy_path(namespace, "f"), query={"propagationPolicy": "Sometimes"})
    assert bad.status == 422


async def test_deletecollection_with_a_label_selector(http: Http, namespace: str) -> None:
    for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
        await http.post(cm_path(namespace), {"metadata": {"name": name, "labels": {"tier": tier}}})
    reply = await http.delete(cm_path(namespace), query={"labelSelector": "tier=x"})
    assert reply.status == 200
    assert reply.body["kind"] == "ConfigMapList"
    remaining = (await http.get(cm_path(namespace), query={"labelSelector": "tier"})).body["items"]
    assert [i["metadata"]["name"] for i in remaining] == ["c"]


async def test_initial_namespaces_exist(http: Http) -> None:
    names = {i["metadata"]["name"] for i in (await http.get("/api/v1/namespaces")).body["items"]}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


async def test_default_namespace_cannot_be_deleted(http: Http) -> None:
    reply = await http.delete("/api/v1/namespaces/default")
    assert reply.status == 403
    assert reply.body["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'


@pytest.mark.fake_only
async def test_namespace_deletion_terminates(http: Http, namespace: str) -> None:
    # Without the simulated namespace controller the namespace stays Terminating.
    reply = await http.delete(f"/api/v1/namespaces/{namespace}")
    assert reply.status == 200
    assert reply.body["status"]["phase"] == "Terminating"
    assert reply.body["metadata"]["deletionTimestamp"]
    assert reply.body["spec"]["finalizers"] == ["kubernetes"]
    create = await http.post(cm_path(namespace), {"metadata": {"name": "late"}})
    assert create.status == 403
    assert create.body["message"] == (
        f'configmaps "late" is forbidden: unable to create new content in namespace {namespace} because it '
        "is being terminated"
    )
    again = await http.delete(f"/api/v1/namespaces/{namespace}")
    assert again.status == 409
    finalize = await http.put(
        f"/api/v1/namespaces/{namespace}/finalize", {**reply.body, "spec": {"finalizers": []}}
    )
    assert finalize.status == 200
    assert (await http.get(f"/api/v1/namespaces/{namespace}")).status == 404


async def test_events_share_storage_across_versions(http: Http, namespace: str) -> None:
    core_event = {
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace},
        "reason": "Started",
        "message": "hello",
        "type": "Normal",
        "source": {"component": "memop"},
        "count": 3,
        "firstTimestamp": "2024-01-01T00:00:00Z",
        "lastTimestamp": "2024-01-01T00:00:05Z",
    }
    assert (await http.post(f"/api/v1/namespaces/{namespace}/events", core_event)).status == 201
    new = (await http.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/e1")).body
    assert new["apiVersion"] == "events.k8s.io/v1"
    assert new["regarding"]["name"] == "p"
    assert new["note"] == "hello"
    assert new["reason"] == "Started"
    assert new["deprecatedSource"] == {"component": "memop"}
    assert new["deprecatedCount"] == 3

    events_v1 = {
        "metadata": {"name": "e2"},
        "eventTime": "2024-01-01T00:00:00.000000Z",
        "reportingController": "memop.example.com/operator",
        "reportingInstance": "memop-0",
        "action": "Reconcile",
        "reason": "Scaled",
        "regarding": {"kind": "Deployment", "name": "d", "namespace": namespace},
        "note": "scaled to 3",
        "type": "Normal",
        "series": {"count": 2, "lastObservedTime": "2024-01-01T00:01:00.000000Z"},
    }
    created = await http.post(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", events_v1)
    assert created.status == 201, created.body
    core = (await http.get(f"/api/v1/namespaces/{namespace}/events/e2")).body
    assert core["involvedObject"]["name"] == "d"
    assert core["message"] == "scaled to 3"
    assert core["reportingComponent"] == "memop.example.com/operator"
    assert core["series"]["count"] == 2
    selected = await http.get(
        f"/api/v1/namespaces/{namespace}/events", query={"fieldSelector": "involvedObject.name=d"}
    )
    assert [e["metadata"]["name"] for e in selected.body["items"]] == ["e2"]


async def test_events_k8s_io_requires_its_fields(http: Http, namespace: str) -> None:
    reply = await http.post(
        f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
        {"metadata": {"name": "e"}, "regarding": {"namespace": namespace}, "type": "Normal"},
    )
    assert reply.status == 422
    fields = {c["field"] for c in reply.body["details"]["causes"]}
    assert {"eventTime"} <= fields


async def test_status_writes_are_owned_separately(http: Http, namespace: str) -> None:
    await http.post(deploy_path(namespace), deployment("web"), query={"fieldManager": "creator"})
    # A value no deployment controller writes, read from the answer: on a real cluster the
    # controller's own status writes take over the fields it sets right after.
    patched = await http.patch(
        deploy_path(namespace, "web") + "/status",
        {"status": {"replicas": 7}},
        query={"fieldManager": "status-writer"},
    )
    assert patched.status == 200, patched.body
    managed = patched.body["metadata"]["managedFields"]
    by_manager = {(m["manager"], m.get("subresource")): m for m in managed}
    assert ("creator", None) in by_manager
    status_entry = by_manager[("status-writer", "status")]
    assert status_entry["fieldsV1"] == {"f:status": {"f:replicas": {}}}
    assert "f:status" not in by_manager[("creator", None)]["fieldsV1"]


async def test_quantities_come_back_canonical(http: Http, namespace: str) -> None:
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1000m", "memory": "2048Mi"},
        "requests": {"cpu": 0.5, "memory": "1.5Gi"},
    }
    created = await http.post(deploy_path(namespace), body)
    assert created.status == 201, created.body
    resources = created.body["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {
        "limits": {"cpu": "1", "memory": "2Gi"},
        "requests": {"cpu": "500m", "memory": "1536Mi"},
    }
    body["metadata"]["name"] = "bad"
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"memory": "lots"}}
    bad = await http.post(deploy_path(namespace), body)
    assert bad.status == 400
    assert bad.body["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: quantities must match the regular '
        "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )


async def test_requests_may_not_exceed_limits(http: Http, namespace: str) -> None:
    """validateResourceRequirements, for pod templates as for pods: a request above its limit is
    422, printed in canonical form; an extended resource must request exactly its limit."""
    body = deployment("web")
    container = body["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"cpu": "1"}, "requests": {"cpu": "2000m"}}
    reply = await http.post(deploy_path(namespace), body)
    assert reply.status == 422, reply.body
    assert reply.body["message"] == (
        'Deployment.apps "web" is invalid: spec.template.spec.containers[0].resources.requests: '
        'Invalid value: "2": must be less than or equal to cpu limit of 1'
    )
    assert reply.body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "2": must be less than or equal to cpu limit of 1',
            "field": "spec.template.spec.containers[0].resources.requests",
        }
    ]
    container["resources"] = {"limits": {"example.com/gpu": "2"}, "requests": {"example.com/gpu": "1"}}
    extended = await http.post(deploy_path(namespace), body)
    assert extended.status == 422, extended.body
    assert extended.body["details"]["causes"][0]["message"] == (
        'Invalid value: "1": must be equal to example.com/gpu limit of 2'
    )
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "busybox:1.36",
                    "resources": {"limits": {"memory": "1Gi"}, "requests": {"memory": "2Gi"}},
                }
            ]
        },
    }
    refused = await http.post(f"/api/v1/namespaces/{namespace}/pods", pod)
    assert refused.status == 422, refused.body
    assert refused.body["message"] == (
        'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "2Gi": '
        "must be less than or equal to memory limit of 1Gi"
    )
    container["resources"] = {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "1", "memory": "512Mi"},
    }
    assert (await http.post(deploy_path(namespace), body)).status == 201


async def test_times_come_back_in_their_typed_form(http: Http, namespace: str) -> None:
    """metav1.MicroTime takes exactly six fractional digits, metav1.Time any fraction (dropped),
    both a Z or ±hh:mm zone; both come back in UTC. Anything else does not decode: 400 with Go's
    own time.Parse error (measured on v1.36)."""
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    lease = {
        "metadata": {"name": "leader"},
        "spec": {
            "holderIdentity": "a",
            "leaseDurationSeconds": 15,
            "renewTime": "2024-01-01T01:00:00.500000+01:00",
        },
    }
    created = await http.post(leases, lease)
    assert created.status == 201, created.body
    assert created.body["spec"]["renewTime"] == "2024-01-01T00:00:00.500000Z"  # MicroTime
    refused = {
        "2024-01-01T01:00:00.5+01:00": 'cannot parse ".5+01:00" as ".000000"',
        "2024-01-01T00:00:00Z": 'cannot parse "Z" as ".000000"',
        "2024-01-01T00:00:00.1234567Z": 'cannot parse "7Z" as "Z07:00"',
    }
    for stamp, why in refused.items():
        bad = await http.post(leases, {"metadata": {"name": "x"}, "spec": {"renewTime": stamp}})
        assert bad.status == 400, (stamp, bad.body)
        assert bad.body["message"] == (
            f'Lease in version "v1" cannot be handled as a Lease: parsing time "{stamp}" as '
            f'"2006-01-02T15:04:05.000000Z07:00": {why}'
        )
    events = f"/api/v1/namespaces/{namespace}/events"
    accepted = ("2024-01-01T00:00:00.750Z", "2024-01-01T01:00:00.5+01:00", "2024-01-01T01:00:00+01:00")
    for i, stamp in enumerate(accepted):
        event = {
            "metadata": {"name": f"e{i}"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace},
            "reason": "R",
            "firstTimestamp": stamp,
        }
        made = await http.post(events, event)
        assert made.status == 201, made.body
        assert made.body["firstTimestamp"] == "2024-01-01T00:00:00Z"  # Time: UTC, whole seconds
    refused = {
        "2024-01-01T00:00:00z": ': cannot parse "z" as "Z07:00"',
        "2024-01-01T00:00:00": ': cannot parse "" as "Z07:00"',
        "2024-01-01T00:00:00+0100": ': cannot parse "+0100" as "Z07:00"',
        "yesterday": ': cannot parse "yesterday" as "2006"',
        "2024-02-30T00:00:00Z": None,  # day out of range
    }
    for stamp, why in refused.items():
        event = {
            "metadata": {"name": "x"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "firstTimestamp": stamp,
        }
        bad = await http.post(events, event)
        assert bad.status == 400, (stamp, bad.body)
        layout = ' as "2006-01-02T15:04:05Z07:00"' + why if why else ": day out of range"
        assert bad.body["message"] == (
            f'Event in version "v1" cannot be handled as a Event: parsing time "{stamp}"{layout}'
        )


async def test_condition_times_and_object_meta_times_are_typed_too(http: Http, namespace: str) -> None:
    """A Time in a typed status (a Deployment's conditions) is kept in UTC whole seconds; one in
    ObjectMeta is parsed too, so a bad creationTimestamp fails decoding even though the server
    sets its own."""
    created = await http.post(deploy_path(namespace), deployment("web"))
    assert created.status == 201, created.body
    condition = {
        "type": "Probe",
        "status": "True",
        "lastUpdateTime": "2024-01-01T01:00:00+01:00",
        "lastTransitionTime": "2024-01-01T01:00:00.5+01:00",
    }
    patched = await http.patch(
        deploy_path(namespace, "web") + "/status", {"status": {"conditions": [condition]}}
    )
    assert patched.status == 200, patched.body
    [stored] = [c for c in patched.body["status"]["conditions"] if c["type"] == "Probe"]
    assert (stored["lastUpdateTime"], stored["lastTransitionTime"]) == (
        "2024-01-01T00:00:00Z",
        "2024-01-01T00:00:00Z",
    )
    offset = await http.post(
        cm_path(namespace), {"metadata": {"name": "a", "creationTimestamp": "2024-01-01T01:00:00.5+01:00"}}
    )
    assert offset.status == 201, offset.body
    assert offset.body["metadata"]["creationTimestamp"] != "2024-01-01T00:00:00Z"  # the server's own
    bad = await http.post(cm_path(namespace), {"metadata": {"name": "b", "creationTimestamp": "yesterday"}})
    assert bad.status == 400
    assert bad.body["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: parsing time "yesterday" as '
        '"2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"'
    )


def _put_created(namespace: str) -> dict[str, tuple[str, str, str, dict[str, Any]]]:
    """Per resource: its collection, apiVersion, kind and a body kube-apiserver v1.36.2 takes."""
    rbac = "rbac.authorization.k8s.io/v1"
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
    subjects = [{"kind": "User", "name": "memop-test"}]
    regarding = {"kind": "ConfigMap", "name": "x", "namespace": namespace}
    core, ns = "/api/v1/namespaces", f"namespaces/{namespace}"
    return {
        "events": (
            f"{core}/{namespace}/events",
            "v1",
            "Event",
            {"involvedObject": regarding, "reason": "Tested", "message": "m", "type": "Normal"},
        ),
        "events.k8s.io": (
            f"/apis/events.k8s.io/v1/{ns}/events",
            "events.k8s.io/v1",
            "Event",
            {
                "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingController": "memop.test/x",
                "reportingInstance": "i",
                "action": "Test",
                "reason": "Tested",
                "regarding": regarding,
                "type": "Normal",
            },
        ),
        "leases": (
            f"/apis/coordination.k8s.io/v1/{ns}/leases",
            "coordination.k8s.io/v1",
            "Lease",
            {"spec": {"holderIdentity": "memop-test"}},
        ),
        "services": (f"{core}/{namespace}/services", "v1", "Service", {"spec": {"ports": [{"port": 80}]}}),
        "limitranges": (
            f"{core}/{namespace}/limitranges",
            "v1",
            "LimitRange",
            {"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}},
        ),
        "roles": (f"/apis/{rbac}/{ns}/roles", rbac, "Role", {"rules": []}),
        "rolebindings": (
            f"/apis/{rbac}/{ns}/rolebindings",
            rbac,
            "RoleBinding",
            {"roleRef": role_ref, "subjects": subjects},
        ),
        "clusterroles": (f"/apis/{rbac}/clusterroles", rbac, "ClusterRole", {"rules": []}),
        "clusterrolebindings": (
            f"/apis/{rbac}/clusterrolebindings",
            rbac,
            "ClusterRoleBinding",
            {"roleRef": role_ref, "subjects": subjects},
        ),
    }


@pytest.mark.parametrize("resource", sorted(_put_created("ns")))
async def test_a_put_to_a_missing_name_creates_where_the_registry_allows_it(
    http: Http, namespace: str, resource: str
) -> None:
    """kube-apiserver v1.36.2 (measured): these registries create on update (201); a ConfigMap's
    does not (404)."""
    name = f"memop-put-{uuid.uuid4().hex[:8]}"
    collection, api_version, kind, body = _put_created(namespace)[resource]
    reply = await http.put(
        f"{collection}/{name}", {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, **body}
    )
    try:
        assert reply.status == 201, reply.body
        assert reply.body["metadata"]["name"] == name
        assert (await http.get(f"{collection}/{name}")).status == 200
    finally:
        await http.delete(f"{collection}/{name}")
    missing = await http.put(
        f"/api/v1/namespaces/{namespace}/configmaps/{name}",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
    )
    assert missing.status == 404, missing.body


async def test_a_put_to_a_missing_name_creates_whatever_resource_version_it_carries(
    http: Http, namespace: str
) -> None:
    """kube-apiserver v1.36.2 (measured with kubectl replace): a Lease PUT with a made-up
    resourceVersion to a missing name is created (201), as a renewal after the Lease was
    deleted is; a POST with one is refused."""
    name = f"memop-put-{uuid.uuid4().hex[:8]}"
    collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "resourceVersion": "12345"},
        "spec": {"holderIdentity": "x"},
    }
    reply = await http.put(f"{collection}/{name}", lease)
    try:
        assert reply.status == 201, reply.body
        assert reply.body["metadata"]["resourceVersion"] != "12345"
    finally:
        await http.delete(f"{collection}/{name}")
    posted = await http.post(collection, {**lease, "metadata": {**lease["metadata"], "name": name + "-p"}})
    assert posted.status == 500, posted.body


RESOURCE_VERSION_REQUIRED = {
    "validatingwebhookconfigurations": (
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "webhooks": [],
        },
    ),
    "mutatingwebhookconfigurations": (
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "webhooks": [],
        },
    ),
    "poddisruptionbudgets": (
        "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
        },
    ),
}


@pytest.mark.parametrize("resource", sorted(RESOURCE_VERSION_REQUIRED))
async def test_an_update_without_a_resource_version_is_refused_where_the_registry_says_so(
    http: Http, namespace: str, resource: str
) -> None:
    """kube-apiserver v1.36.2 (measured): webhook configurations and PodDisruptionBudgets need
    metadata.resourceVersion on a PUT (their registries do not allow unconditional updates)."""
    collection, body = RESOURCE_VERSION_REQUIRED[resource]
    collection = collection.format(namespace=namespace)
    name = f"memop-rv-{uuid.uuid4().hex[:8]}"
    created = await http.post(collection, {**body, "metadata": {"name": name}})
    assert created.status == 201, created.body
    try:
        reply = await http.put(
            f"{collection}/{name}", {**body, "metadata": {"name": name, "labels": {"a": "b"}}}
        )
        assert reply.status == 422, reply.body
        assert reply.body["message"].endswith(
            f'"{name}" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an '
            "update"
        )

        async def versioned_put() -> bool:  # a real disruption controller writes a PDB's status
            current = (await http.get(f"{collection}/{name}")).body
            labelled = {**current, "metadata": {**current["metadata"], "labels": {"a": "b"}}}
            answer = await http.put(f"{collection}/{name}", labelled)
            assert answer.status in (200, 409), answer.body
            return answer.status == 200

        await wait_for(versioned_put, timeout=30)
    finally:
        await http.delete(f"{collection}/{name}")
