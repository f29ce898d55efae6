"""The server's discovery against kube-apiserver v1.36.2's, recorded from Kubernetes' sources.

``data/discovery-v1.36.2.json.gz`` holds v1.36.2's checked-in discovery documents (api/discovery
of the source tree, generated from a running kube-apiserver; GA versions, which is what a server
with the default feature gates serves), extracted by bench/extract_builtin_api.py. Every
built-in resource must be listed as there: name, kind, singular name, verbs, short names,
categories, scope, storage version hash and subresources, in the legacy documents and in the
aggregated ones (apidiscovery.k8s.io/v2), and ``kubectl api-resources`` must print the rows the
real server printed (/work/shared/measurements/api-resources-v1.36.2.txt, kept here).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.apiserver.discovery import AGGREGATED_MEDIA_TYPE
from memop.testing.kinds.generic import NOT_SERVED
from tests.testing.test_apiserver_discovery import KUBECTL, kubectl

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

DATA = Path(__file__).parent / "data"
RECORDED = json.loads(gzip.decompress((DATA / "discovery-v1.36.2.json.gz").read_bytes()))
# What `kubectl api-resources -o name` printed on a v1.36.2 kube-apiserver (default feature gates).
API_RESOURCES = (DATA / "api-resources-v1.36.2.txt").read_text().split()
# Listed by v1.36.2, not by the in-memory server (memop.testing.kinds.generic.NOT_SERVED says why).
UNLISTED = {(f"/apis/{g}/{v}" if g else f"/api/{v}", plural) for g, v, plural in NOT_SERVED}


def _expected(path: str, real: bool) -> list[dict[str, Any]]:
    return [
        r
        for r in RECORDED["legacy"][path]["resources"]
        if real or (path, r["name"].split("/")[0]) not in UNLISTED
    ]


def _not_served(key: tuple[str, str, str], real: bool) -> bool:
    return not real and key in NOT_SERVED


def _listed(group: str, version: dict[str, Any], real: bool) -> bool:
    """Whether the server lists a recorded group version (not all of it is NOT_SERVED)."""
    return any(
        not _not_served((group, version["version"], r["resource"]), real) for r in version["resources"]
    )


@pytest.mark.parametrize("path", sorted(RECORDED["legacy"]))
async def test_every_built_in_resource_is_listed_as_v1_36_lists_it(
    http: Http, cluster: ClusterHandle, path: str
) -> None:
    expected = _expected(path, cluster.real)
    reply = await http.get(path)
    if not expected:
        assert reply.status == 404, reply.body
        return
    assert reply.status == 200, reply.body
    served = {r["name"]: r for r in reply.body["resources"]}
    # Custom resources of other tests may share a group version; built-ins are what is compared.
    assert {r["name"]: served.get(r["name"]) for r in expected} == {r["name"]: r for r in expected}
    assert reply.body["groupVersion"] == RECORDED["legacy"][path]["groupVersion"]


async def test_the_group_list_names_every_v1_36_group_version_in_its_order(
    http: Http, cluster: ClusterHandle
) -> None:
    recorded_groups = [
        (
            item["metadata"]["name"],
            [v["version"] for v in item["versions"] if _listed(item["metadata"]["name"], v, cluster.real)],
        )
        for item in RECORDED["aggregated"]["items"]
    ]
    groups = [
        (g["name"], [v["version"] for v in g["versions"]]) for g in (await http.get("/apis")).body["groups"]
    ]
    built_in = {name for name, _ in recorded_groups}
    assert [g for g in groups if g[0] in built_in] == recorded_groups
    assert (await http.get("/api")).body["versions"] == ["v1"]


async def test_aggregated_discovery_lists_what_v1_36_lists(http: Http, cluster: ClusterHandle) -> None:
    reply = await http.get("/apis", accept=f"{AGGREGATED_MEDIA_TYPE},application/json")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == AGGREGATED_MEDIA_TYPE
    assert reply.body["kind"] == "APIGroupDiscoveryList"
    served = {
        (item["metadata"]["name"], version["version"], resource["resource"]): resource
        for item in reply.body["items"]
        for version in item["versions"]
        for resource in version["resources"]
    }
    for item in RECORDED["aggregated"]["items"]:
        group = item["metadata"]["name"]
        for version in item["versions"]:
            for resource in version["resources"]:
                key = (group, version["version"], resource["resource"])
                if _not_served(key, cluster.real):
                    assert key not in served
                else:
                    assert served.get(key) == resource, key
    core = await http.get("/api", accept=AGGREGATED_MEDIA_TYPE)
    [item] = core.body["items"]
    assert [v["version"] for v in item["versions"]] == ["v1"]
    core_served = {r["resource"]: r for r in item["versions"][0]["resources"]}
    for resource in _expected("/api/v1", cluster.real):
        if "/" not in resource["name"]:
            row = core_served[resource["name"]]
            assert (row["verbs"], row.get("shortNames", []), row["singularResource"]) == (
                resource["verbs"],
                resource.get("shortNames", []),
                resource["singularName"],
            )


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
async def test_kubectl_api_resources_lists_the_rows_of_a_v1_36_server(cluster: ClusterHandle) -> None:
    listed = (await kubectl(cluster, "api-resources", "-o", "name")).split()
    built_in = [name for name in listed if "." not in name or name.split(".", 1)[1] in _GROUPS]
    assert sorted(built_in) == sorted(API_RESOURCES)


_GROUPS = {item["metadata"]["name"] for item in RECORDED["aggregated"]["items"]}
