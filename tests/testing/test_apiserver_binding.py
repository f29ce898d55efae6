"""A pod's ``binding`` subresource (and the legacy ``bindings`` collection) as kube-apiserver
v1.36's BindingREST serves it (``pkg/registry/core/pod/storage/storage.go``).

The pods name a scheduler that does not exist, so nothing binds them but the tests, on the
in-memory server and on a real cluster alike.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import ApiClient

from memop.runtime.client.client import Client
from memop.runtime.client.resources import ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS
from memop.testing.envtest import Kube
from memop.testing.operatorrbac import service_account_configuration
from memop.testing.wait import wait_for
from tests.conftest import Http, Reply

NO_SCHEDULER = "memop-test-no-such-scheduler"
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def pods(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/pods" + (f"/{name}" if name else "")


def binding(name: str, node: str = "node-a", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, **metadata},
        "target": {"kind": "Node", "name": node},
    }


async def make_pod(http: Http, ns: str, name: str, metadata: Any = None, **spec: Any) -> dict[str, Any]:
    body = {
        "metadata": {"name": name, **(metadata or {})},
        "spec": {
            "containers": [{"name": "c", "image": "busybox:1.36"}],
            "schedulerName": NO_SCHEDULER,
            **spec,
        },
    }
    reply = await http.post(pods(ns), body)
    assert reply.status == 201, reply.body
    pod: dict[str, Any] = reply.body
    return pod


async def test_a_binding_places_the_pod_in_one_write(http: Http, namespace: str) -> None:
    created = await make_pod(http, namespace, "p", {"annotations": {"a": "1"}, "labels": {"app": "x"}})
    query = {"fieldSelector": "metadata.name=p", "resourceVersion": created["metadata"]["resourceVersion"]}
    async with http.watch(pods(namespace), query) as events:
        reply = await http.post(
            f"{pods(namespace, 'p')}/binding",
            binding("p", annotations={"b": "2"}, labels={"topology.kubernetes.io/zone": "z1"}),
        )
        assert (reply.status, reply.body) == (201, SUCCESS)
        # A later change's event comes next: the binding was one write.
        await http.patch(pods(namespace, "p"), {"metadata": {"labels": {"after": "yes"}}})
        bound = await events.next_not_bookmark()
        after = await events.next_not_bookmark()
    assert bound is not None
    assert after is not None
    assert bound["type"] == "MODIFIED"
    assert after["object"]["metadata"]["labels"]["after"] == "yes"
    pod = bound["object"]
    assert pod["spec"]["nodeName"] == "node-a"
    assert pod["metadata"]["annotations"] == {"a": "1", "b": "2"}
    # PodTopologyLabelsAdmission (beta, on since v1.35): the binding's labels are copied.
    assert pod["metadata"]["labels"] == {"app": "x", "topology.kubernetes.io/zone": "z1"}
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert len(scheduled) == 1
    assert scheduled[0]["status"] == "True"
    assert "reason" not in scheduled[0]
    # Written past the pod strategy: the generation counts no spec change, no manager is added.
    assert pod["metadata"]["generation"] == created["metadata"]["generation"]
    assert pod["metadata"]["managedFields"] == created["metadata"]["managedFields"]


async def test_the_legacy_bindings_collection_binds_the_pod_it_names(http: Http, namespace: str) -> None:
    await make_pod(http, namespace, "legacy")
    reply = await http.post(f"/api/v1/namespaces/{namespace}/bindings", binding("legacy", "node-b"))
    assert (reply.status, reply.body) == (201, SUCCESS)
    assert (await http.get(pods(namespace, "legacy"))).body["spec"]["nodeName"] == "node-b"


async def test_a_bound_pod_is_not_bound_again(http: Http, namespace: str) -> None:
    await make_pod(http, namespace, "placed", nodeName="node-a")
    reply = await http.post(f"{pods(namespace, 'placed')}/binding", binding("placed", "node-b"))
    assert (reply.status, reply.body) == (
        409,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'Operation cannot be fulfilled on pods/binding "placed": '
            'pod placed is already assigned to node "node-a"',
            "reason": "Conflict",
            "details": {"name": "placed", "kind": "pods/binding"},
            "code": 409,
        },
    )


async def test_a_gated_pod_says_so_and_cannot_be_bound(http: Http, namespace: str) -> None:
    created = await make_pod(http, namespace, "gated", schedulingGates=[{"name": "example.com/wait"}])
    (condition,) = created["status"]["conditions"]
    assert condition["type"] == "PodScheduled"
    assert condition["status"] == "False"
    assert condition["reason"] == "SchedulingGated"
    assert condition["message"] == "Scheduling is blocked due to non-empty scheduling gates"
    reply = await http.post(f"{pods(namespace, 'gated')}/binding", binding("gated"))
    assert reply.status == 409
    assert reply.body["message"] == (
        'Operation cannot be fulfilled on pods/binding "gated": pod gated has non-empty .spec.schedulingGates'
    )


async def test_a_missing_or_deleted_pod_is_not_bound(http: Http, namespace: str) -> None:
    missing = await http.post(f"{pods(namespace, 'ghost')}/binding", binding("ghost"))
    assert missing.status == 404
    assert missing.body["message"] == 'pods "ghost" not found'
    await make_pod(http, namespace, "going", {"finalizers": ["example.com/hold"]})
    assert (await http.delete(pods(namespace, "going"))).status == 200
    going = await http.post(f"{pods(namespace, 'going')}/binding", binding("going"))
    assert going.status == 409
    assert going.body["message"] == (
        'Operation cannot be fulfilled on pods/binding "going": pod going is being deleted, '
        "cannot be assigned to a host"
    )
    await http.patch(pods(namespace, "going"), {"metadata": {"finalizers": None}})


async def test_a_binding_names_its_pod_and_a_node(http: Http, namespace: str) -> None:
    created = await make_pod(http, namespace, "p")
    path = f"{pods(namespace, 'p')}/binding"
    mismatch = await http.post(path, binding("other"))
    assert (mismatch.status, mismatch.body["message"]) == (
        400,
        "name in URL does not match name in Binding object",
    )
    # ValidatePodBinding's errors come back as their aggregate: a 500 with no reason.
    nameless = await http.post(path, {**binding("p"), "target": {"kind": "Node"}})
    assert nameless.status == 500
    assert nameless.body["message"] == "target.name: Required value"
    assert "reason" not in nameless.body
    wrong_kind = await http.post(path, {**binding("p"), "target": {"kind": "Pod", "name": "n"}})
    assert wrong_kind.status == 500
    assert (
        wrong_kind.body["message"]
        == 'target.kind: Unsupported value: "Pod": supported values: "Node", "<empty>"'
    )
    # The binding's uid is a precondition on the pod.
    stale = await http.post(path, binding("p", uid="0b2d6c4e-0000-4000-8000-000000000000"))
    assert stale.status == 409
    assert "Precondition failed: UID in precondition" in stale.body["message"]
    dry = await http.post(path, binding("p"), query={"dryRun": "All"})
    assert (dry.status, dry.body) == (201, SUCCESS)
    pod = (await http.get(pods(namespace, "p"))).body
    assert "nodeName" not in pod["spec"]
    assert pod["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_binding_takes_create_on_pods_binding(
    kube: Kube, client: Client, http: Http, namespace: str
) -> None:
    await make_pod(http, namespace, "p")
    await client.create(SERVICE_ACCOUNTS, {"metadata": {"name": "placer"}}, namespace)
    subject = {"kind": "ServiceAccount", "name": "placer"}
    grants = {
        "pods": {
            "apiGroups": [""],
            "resources": ["pods"],
            "verbs": ["get", "list", "create", "update", "patch"],
        },
        "binder": {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    }

    async def grant(name: str) -> None:
        await client.create(ROLES, {"metadata": {"name": name}, "rules": [grants[name]]}, namespace)
        role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
        body = {"metadata": {"name": name}, "roleRef": role, "subjects": [subject]}
        await client.create(ROLE_BINDINGS, body, namespace)

    await grant("pods")
    path = f"{pods(namespace, 'p')}/binding"
    async with ApiClient(await service_account_configuration(kube.configuration, namespace, "placer")) as api:
        placer = Http(api)
        refused = await placer.post(path, binding("p"))
        assert refused.status == 403
        assert refused.body["message"] == (
            f'pods "p" is forbidden: User "system:serviceaccount:{namespace}:placer" cannot create '
            f'resource "pods/binding" in API group "" in the namespace "{namespace}"'
        )
        await grant("binder")

        async def bound() -> Reply | None:
            reply = await placer.post(path, binding("p"))
            return None if reply.status == 403 else reply  # a real cluster's RBAC cache may lag

        allowed = await wait_for(bound, timeout=30, message="the binding allowed")
        assert (allowed.status, allowed.body) == (201, SUCCESS)
