"""The kinds install manifests carry besides workloads, over HTTP as kube-apiserver serves them:
ServiceAccounts, Services (defaults, cluster IP allocation and immutability, port validation),
Roles, ClusterRoles and their bindings (cluster scope, immutable roleRef) and
PodDisruptionBudgets (status subresource)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes_asyncio import client

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def svc_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/services" + (f"/{name}" if name else "")


def service(name: str, *ports: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": list(ports or [{"port": 80}]), **spec},
    }


def binding(
    name: str, role: str, kind: str = "RoleBinding", role_kind: str = "ClusterRole"
) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
    }


async def test_discovery_lists_the_install_kinds(http: Http) -> None:
    core = {r["name"]: r for r in (await http.get("/api/v1")).body["resources"]}
    assert core["serviceaccounts"]["shortNames"] == ["sa"]
    assert core["services"]["shortNames"] == ["svc"]
    assert core["services"]["namespaced"] is True
    assert "services/status" in core
    rbac = {r["name"]: r for r in (await http.get(RBAC)).body["resources"]}
    assert {
        name: rbac[name]["namespaced"]
        for name in ("roles", "rolebindings", "clusterroles", "clusterrolebindings")
    } == {
        "roles": True,
        "rolebindings": True,
        "clusterroles": False,
        "clusterrolebindings": False,
    }
    policy = {r["name"]: r for r in (await http.get("/apis/policy/v1")).body["resources"]}
    assert policy["poddisruptionbudgets"]["shortNames"] == ["pdb"]
    assert "poddisruptionbudgets/status" in policy
    groups = {g["name"] for g in (await http.get("/apis")).body["groups"]}
    assert {"rbac.authorization.k8s.io", "policy"} <= groups


async def test_service_accounts_are_typed_and_return_themselves_on_delete(
    cluster: ClusterHandle, namespace: str
) -> None:
    core = client.CoreV1Api(cluster.api_client())
    created = await core.create_namespaced_service_account(namespace, {"metadata": {"name": "memop"}})
    assert created.metadata.name == "memop"
    assert created.metadata.generation is None
    deleted = await core.delete_namespaced_service_account("memop", namespace)
    assert deleted.kind == "ServiceAccount"


async def test_a_service_gets_the_defaults_and_a_cluster_ip(
    cluster: ClusterHandle, http: Http, namespace: str
) -> None:
    reply = await http.post(svc_path(namespace), service("web", {"name": "http", "port": 80}))
    assert reply.status == 201, reply.body
    spec = reply.body["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["ports"] == [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ipFamilies"] == ["IPv4"]
    assert spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert reply.body["status"] == {"loadBalancer": {}}
    assert "generation" not in reply.body["metadata"]
    other = (await http.post(svc_path(namespace), service("other"))).body["spec"]["clusterIP"]
    assert other != spec["clusterIP"]
    if not cluster.real:
        for ip in (spec["clusterIP"], other):
            assert ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/12")


async def test_a_named_target_port_stays_and_headless_services_get_none(http: Http, namespace: str) -> None:
    named = await http.post(svc_path(namespace), service("named", {"port": 8443, "targetPort": "https"}))
    assert named.body["spec"]["ports"][0]["targetPort"] == "https"
    headless = await http.post(svc_path(namespace), service("headless", clusterIP="None"))
    assert headless.status == 201, headless.body
    assert headless.body["spec"]["clusterIPs"] == ["None"]


async def test_the_cluster_ip_is_immutable_once_set(http: Http, namespace: str) -> None:
    created = (await http.post(svc_path(namespace), service("web"))).body
    ip = created["spec"]["clusterIP"]
    # A PUT that leaves the allocated address out keeps it (patchAllocatedValues).
    body = service("web", {"port": 81})
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    updated = await http.put(svc_path(namespace, "web"), body)
    assert updated.status == 200, updated.body
    assert updated.body["spec"]["clusterIP"] == ip
    assert updated.body["spec"]["ports"][0]["port"] == 81
    first = ipaddress.ip_address(ip)
    moved = str(first + 1 if first.packed[-1] < 200 else first - 1)
    changed = await http.patch(svc_path(namespace, "web"), {"spec": {"clusterIP": moved}})
    assert changed.status == 422, changed.body
    assert changed.body["reason"] == "Invalid"
    assert changed.body["message"] == (
        f'Service "web" is invalid: spec.clusterIPs[0]: Invalid value: ["{moved}"]: may not change once set'
    )
    assert (await http.get(svc_path(namespace, "web"))).body["spec"]["clusterIP"] == ip


async def test_a_requested_cluster_ip_is_kept_and_cannot_be_taken_twice(
    cluster: ClusterHandle, http: Http, namespace: str
) -> None:
    cluster.fake  # noqa: B018 -- the address must lie in the fake's service range
    first = await http.post(svc_path(namespace), service("a", clusterIP="10.96.0.10"))
    assert first.status == 201, first.body
    assert first.body["spec"]["clusterIPs"] == ["10.96.0.10"]
    second = await http.post(svc_path(namespace), service("b", clusterIP="10.96.0.10"))
    assert second.status == 422, second.body
    assert second.body["message"] == (
        'Service "b" is invalid: spec.clusterIPs: Invalid value: ["10.96.0.10"]: '
        "failed to allocate IP 10.96.0.10: provided IP is already allocated"
    )
    outside = await http.post(svc_path(namespace), service("c", clusterIP="192.168.0.1"))
    assert outside.status == 422
    assert "is not in the valid range. The range of valid IPs is 10.96.0.0/12" in outside.body["message"]
    # Deleting the first releases its address.
    assert (await http.delete(svc_path(namespace, "a"))).status == 200
    again = await http.post(svc_path(namespace), service("b", clusterIP="10.96.0.10"))
    assert again.status == 201, again.body


async def test_service_ports_need_a_port_number_in_range(http: Http, namespace: str) -> None:
    for number in (0, 65536):
        reply = await http.post(svc_path(namespace), service("bad", {"port": number, "targetPort": 8080}))
        assert reply.status == 422, reply.body
        assert reply.body["message"] == (
            f'Service "bad" is invalid: spec.ports[0].port: Invalid value: {number}: '
            "must be between 1 and 65535, inclusive"
        )
    unnamed = await http.post(svc_path(namespace), service("two", {"port": 80}, {"port": 81}))
    assert unnamed.status == 422
    assert "spec.ports[0].name: Required value" in unnamed.body["message"]


async def test_node_ports_are_allocated_for_node_port_services(
    cluster: ClusterHandle, http: Http, namespace: str
) -> None:
    reply = await http.post(svc_path(namespace), service("np", {"port": 80}, type="NodePort"))
    assert reply.status == 201, reply.body
    spec = reply.body["spec"]
    assert spec["externalTrafficPolicy"] == "Cluster"
    if not cluster.real:
        assert 30000 <= spec["ports"][0]["nodePort"] <= 32767


async def test_cluster_roles_and_bindings_are_cluster_scoped(http: Http, namespace: str) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"memop-test:{namespace}"},  # RBAC names may hold colons
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }
    created = await http.post(f"{RBAC}/clusterroles", role)
    assert created.status == 201, created.body
    assert "namespace" not in created.body["metadata"]
    crb = binding(f"memop-test:{namespace}", role["metadata"]["name"], kind="ClusterRoleBinding")
    assert (await http.post(f"{RBAC}/clusterrolebindings", crb)).status == 201
    listed = (await http.get(f"{RBAC}/clusterrolebindings")).body["items"]
    assert f"memop-test:{namespace}" in {item["metadata"]["name"] for item in listed}
    # A ClusterRoleBinding may only bind a ClusterRole.
    bad = binding("bad", "some-role", kind="ClusterRoleBinding", role_kind="Role")
    refused = await http.post(f"{RBAC}/clusterrolebindings", bad)
    assert refused.status == 422
    assert (
        'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"' in refused.body["message"]
    )
    for path in (
        f"{RBAC}/clusterrolebindings/memop-test:{namespace}",
        f"{RBAC}/clusterroles/memop-test:{namespace}",
    ):
        assert (await http.delete(path)).status == 200


async def test_namespaced_roles_cannot_grant_non_resource_urls(http: Http, namespace: str) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "metrics"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }
    reply = await http.post(f"{RBAC}/namespaces/{namespace}/roles", role)
    assert reply.status == 422
    assert reply.body["message"] == (
        'Role.rbac.authorization.k8s.io "metrics" is invalid: rules[0].nonResourceURLs: '
        'Invalid value: ["/metrics"]: namespaced rules cannot apply to non-resource URLs'
    )
    role["rules"] = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    assert (await http.post(f"{RBAC}/namespaces/{namespace}/roles", role)).status == 201


async def test_role_ref_is_immutable(cluster: ClusterHandle, http: Http, namespace: str) -> None:
    path = f"{RBAC}/namespaces/{namespace}/rolebindings"
    body = binding("b", "view")
    body["roleRef"].pop("apiGroup")  # defaulted
    body["subjects"].append({"kind": "User", "name": "jane"})  # apiGroup defaulted
    created = await http.post(path, body)
    assert created.status == 201, created.body
    assert created.body["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
    assert created.body["subjects"][1]["apiGroup"] == "rbac.authorization.k8s.io"
    # Subjects may change.
    subjects = [*created.body["subjects"], {"kind": "Group", "name": "ops"}]
    assert (await http.patch(f"{path}/b", {"subjects": subjects})).status == 200
    # roleRef may not, through the typed client either.
    rbac = client.RbacAuthorizationV1Api(cluster.api_client())
    current = await rbac.read_namespaced_role_binding("b", namespace)
    current.role_ref.name = "edit"
    with pytest.raises(client.ApiException) as refused_typed:
        await rbac.replace_namespaced_role_binding("b", namespace, current)
    assert refused_typed.value.status == 422
    assert "cannot change roleRef" in refused_typed.value.body
    changed = await http.patch(f"{path}/b", {"roleRef": {"name": "edit"}})
    assert changed.status == 422
    assert changed.body["message"] == (
        'RoleBinding.rbac.authorization.k8s.io "b" is invalid: roleRef: Invalid value: '
        '{"APIGroup":"rbac.authorization.k8s.io","Kind":"ClusterRole","Name":"edit"}: '
        "cannot change roleRef"
    )
    assert changed.body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: {"APIGroup":"rbac.authorization.k8s.io",'
            '"Kind":"ClusterRole","Name":"edit"}: cannot change roleRef',
            "field": "roleRef",
        }
    ]
    crb = binding(f"memop-test-{namespace}", "view", kind="ClusterRoleBinding")
    assert (await http.post(f"{RBAC}/clusterrolebindings", crb)).status == 201
    crb_path = f"{RBAC}/clusterrolebindings/memop-test-{namespace}"
    refused = await http.patch(crb_path, {"roleRef": {"name": "edit"}})
    assert refused.status == 422
    assert refused.body["message"].startswith(
        f'ClusterRoleBinding.rbac.authorization.k8s.io "memop-test-{namespace}" is invalid: roleRef: '
    )
    assert (await http.delete(crb_path)).status == 200


async def test_pod_disruption_budgets_have_a_status_subresource(http: Http, namespace: str) -> None:
    path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 5},
    }
    created = await http.post(path, pdb)
    assert created.status == 201, created.body
    assert created.body["metadata"]["generation"] == 1
    assert created.body["status"]["disruptionsAllowed"] == 0  # the client's status is dropped
    status = {
        "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
    }
    updated = await http.patch(f"{path}/web/status", status)
    assert updated.status == 200, updated.body
    assert updated.body["status"]["disruptionsAllowed"] == 1
    assert updated.body["metadata"]["generation"] == 1
    respec = await http.patch(f"{path}/web", {"spec": {"maxUnavailable": "50%"}})
    assert respec.body["metadata"]["generation"] == 2
    both = await http.patch(f"{path}/web", {"spec": {"minAvailable": 1}})
    assert both.status == 422
    assert "minAvailable and maxUnavailable cannot be both set" in both.body["message"]
