"""Every namespace holds a ``kube-root-ca.crt`` ConfigMap, as kube-controller-manager's root CA
publisher keeps it in every cluster: in the namespaces there from the start and in new ones, put
back when it is deleted or changed. These run on a real cluster too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.apiserver.server import ApiServer
from memop.testing.controllers.rootca import DESCRIPTION, PLACEHOLDER_CA
from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

ROOT_CA = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"


def root_ca_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps/{ROOT_CA}"


async def published(http: Http, namespace: str) -> dict[str, Any]:
    """The namespace's kube-root-ca.crt, once the publisher has written it (a moment after the
    namespace appeared, on a real cluster as here)."""

    async def get() -> dict[str, Any] | None:
        reply = await http.get(root_ca_path(namespace))
        return reply.body if reply.status == 200 else None

    return await wait_for(get, timeout=30)


async def test_a_new_namespace_gets_a_kube_root_ca_crt(http: Http, namespace: str) -> None:
    cm = await published(http, namespace)
    assert set(cm["data"]) == {"ca.crt"}
    pem = cm["data"]["ca.crt"]
    assert pem.startswith("-----BEGIN CERTIFICATE-----\n")
    assert pem.endswith("-----END CERTIFICATE-----\n")
    assert cm["metadata"]["annotations"] == {DESCRIPTION_ANNOTATION: DESCRIPTION}
    [entry] = cm["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == (
        "kube-controller-manager",
        "Update",
        "v1",
    )
    assert entry["fieldsV1"] == {
        "f:data": {".": {}, "f:ca.crt": {}},
        "f:metadata": {"f:annotations": {".": {}, "f:kubernetes.io/description": {}}},
    }
    # A list of the namespace's ConfigMaps finds it: no namespace is empty.
    listed = await http.get(f"/api/v1/namespaces/{namespace}/configmaps")
    assert ROOT_CA in [i["metadata"]["name"] for i in listed.body["items"]]


async def test_the_namespaces_there_from_the_start_have_one(http: Http) -> None:
    for namespace in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert (await published(http, namespace))["data"]["ca.crt"]


async def test_a_deleted_kube_root_ca_crt_comes_back(http: Http, namespace: str) -> None:
    first = await published(http, namespace)
    assert (await http.delete(root_ca_path(namespace))).status == 200

    async def recreated() -> dict[str, Any] | None:
        reply = await http.get(root_ca_path(namespace))
        fresh = reply.status == 200 and reply.body["metadata"]["uid"] != first["metadata"]["uid"]
        return reply.body if fresh else None

    again = await wait_for(recreated, timeout=30)
    assert again["data"] == first["data"]


async def test_a_changed_kube_root_ca_crt_is_put_back(http: Http, namespace: str) -> None:
    first = await published(http, namespace)
    changed = await http.patch(
        root_ca_path(namespace),
        {"metadata": {"annotations": {DESCRIPTION_ANNOTATION: None}}, "data": {"ca.crt": "not a PEM"}},
    )
    assert changed.status == 200, changed.body

    async def restored() -> dict[str, Any] | None:
        cm = (await http.get(root_ca_path(namespace))).body
        annotations = cm["metadata"].get("annotations") or {}
        return cm if cm["data"] == first["data"] and annotations.get(DESCRIPTION_ANNOTATION) else None

    back = await wait_for(restored, timeout=30)
    assert back["metadata"]["uid"] == first["metadata"]["uid"]  # updated, not recreated


@pytest.mark.fake_only
async def test_the_fake_publishes_its_own_ca_or_a_placeholder(cluster: ClusterHandle) -> None:
    # The cluster fixture's server speaks plain HTTP: there is no CA, a placeholder stands in.
    assert cluster.fake.store.get(cluster.fake.store.resource("", "v1", "configmaps"), "default", ROOT_CA)[
        "data"
    ] == {"ca.crt": PLACEHOLDER_CA}
    async with ApiServer(tls=True, publish_root_ca=True) as server:
        configmaps = server.store.resource("", "v1", "configmaps")
        assert server.certificates is not None
        cm = server.store.get(configmaps, "kube-system", ROOT_CA)
        assert cm["data"] == {"ca.crt": server.certificates.ca_pem.decode()}


@pytest.mark.fake_only
async def test_the_publisher_runs_with_the_simulation_or_when_asked(cluster: ClusterHandle) -> None:
    cluster.fake  # noqa: B018 -- this is about the fake's options
    for options, expected in (
        ({}, False),
        ({"simulate_controllers": True}, True),
        ({"publish_root_ca": True}, True),
    ):
        async with ApiServer(**options) as server:
            configmaps = server.store.resource("", "v1", "configmaps")
            items, _ = server.store.list(configmaps, "default")
            assert (ROOT_CA in [i["metadata"]["name"] for i in items]) is expected, options
