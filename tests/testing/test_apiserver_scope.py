"""Paths that do not fit a kind's scope, answered as kube-apiserver does.

A cluster-scoped kind has no route under ``/namespaces/{ns}/`` (404 NotFound); a namespaced kind
is listed and watched across namespaces at its bare path, but has no single-object route there
(404) and no other method on that collection (405). Every test here also runs against a real
cluster with USE_EXISTING_CLUSTER=true.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.conftest import Http, Reply


def _not_found(reply: Reply) -> None:
    assert reply.status == 404, reply.body
    assert reply.body["kind"] == "Status"
    assert reply.body["reason"] == "NotFound"
    assert reply.body["message"] == "the server could not find the requested resource"


@pytest.mark.parametrize(
    "path",
    [
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/clusterroles",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/clusterroles/view",
        "/api/v1/namespaces/{ns}/namespaces",
        "/api/v1/namespaces/{ns}/namespaces/{ns}",
        "/api/v1/namespaces/{ns}/nodes",
    ],
)
async def test_a_cluster_scoped_kind_is_not_found_under_a_namespace(
    http: Http, namespace: str, path: str
) -> None:
    _not_found(await http.get(path.format(ns=namespace)))


async def test_a_cluster_scoped_kind_is_served_at_its_own_paths(http: Http, namespace: str) -> None:
    assert (await http.get("/apis/rbac.authorization.k8s.io/v1/clusterroles")).status == 200
    assert (await http.get(f"/api/v1/namespaces/{namespace}")).body["metadata"]["name"] == namespace
    assert (await http.get(f"/api/v1/namespaces/{namespace}/status")).status == 200


async def test_writes_of_a_cluster_scoped_kind_under_a_namespace_are_not_found(
    http: Http, namespace: str
) -> None:
    role: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"memop-scope-{namespace}"},
        "rules": [],
    }
    base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/clusterroles"
    _not_found(await http.post(base, role))
    _not_found(await http.delete(f"{base}/{role['metadata']['name']}"))
    gone = await http.get(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role['metadata']['name']}")
    assert gone.status == 404  # nothing was created


async def test_a_namespaced_object_is_not_found_without_its_namespace(http: Http, namespace: str) -> None:
    created = await http.post(
        f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "c"}, "data": {"k": "v"}}
    )
    assert created.status == 201, created.body
    _not_found(await http.get("/api/v1/configmaps/c"))
    _not_found(await http.patch("/api/v1/configmaps/c", {"data": {"k": "w"}}))
    _not_found(await http.delete("/api/v1/configmaps/c"))
    _not_found(await http.get("/apis/apps/v1/deployments/web/scale"))
    # Listing across namespaces is served, and the object is untouched.
    listed = await http.get("/api/v1/configmaps", query={"fieldSelector": f"metadata.namespace={namespace}"})
    assert listed.status == 200
    assert [item["data"] for item in listed.body["items"] if item["metadata"]["name"] == "c"] == [{"k": "v"}]


async def test_a_namespaced_collection_without_a_namespace_is_only_read(http: Http) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    for reply in (await http.post("/api/v1/configmaps", cm), await http.delete("/api/v1/configmaps")):
        assert reply.status == 405, reply.body
        assert reply.body["reason"] == "MethodNotAllowed"
    async with http.watch("/api/v1/configmaps", {"timeoutSeconds": 1}) as stream:
        assert stream.status == 200
