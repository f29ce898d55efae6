"""Discovery documents of the test API server (/version, /api, /apis, resource lists), built
from what the store serves at the time of the request.

Only the legacy (unaggregated) discovery format is served: clients that ask for aggregated
discovery (``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList``) get an
``application/json`` answer and fall back to the legacy endpoints, as client-go does with an
older server.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from memop.testing.resources import ResourceType

VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-memop",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-12-11T00:00:00Z",
    "goVersion": "go1.23.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# The order kube-apiserver lists the built-in groups in: the aggregator's group priorities,
# highest first, equal ones by name (kube-aggregator's apiservice priorities).
_GROUP_ORDER = (
    "",
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "resource.k8s.io",
)
_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting the preferred version first: GA over beta over alpha, higher first, then
    non-Kubernetes-style versions alphabetically."""
    match = _VERSION_RE.match(version)
    if match is None:
        return (3, 0, 0, version)
    major, stage, minor = int(match.group(1)), match.group(2), int(match.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor, "")


def _groups(rtypes: list[ResourceType]) -> dict[str, list[str]]:
    groups: dict[str, set[str]] = {}
    for rtype in rtypes:
        groups.setdefault(rtype.group, set()).add(rtype.version)
    ordered = sorted(
        groups, key=lambda g: (_GROUP_ORDER.index(g) if g in _GROUP_ORDER else len(_GROUP_ORDER), g)
    )
    return {g: sorted(groups[g], key=version_priority) for g in ordered}


def api_versions(server_address: str) -> dict[str, Any]:
    """``/api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group_doc(group: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(rtypes: list[ResourceType]) -> dict[str, Any]:
    """``/apis``."""
    groups = [_group_doc(g, vs) for g, vs in _groups(rtypes).items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(rtypes: list[ResourceType], group: str) -> dict[str, Any] | None:
    """``/apis/<group>``, or None when nothing is served in it."""
    versions = _groups(rtypes).get(group)
    if not versions or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, versions)}


def resource_list(
    rtypes: list[ResourceType], group: str, version: str, scalable: Collection[ResourceType] = ()
) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/<group>/<version>``, or None when that version is not served;
    ``scalable`` are the types with a scale subresource."""
    served = sorted((r for r in rtypes if r.group == group and r.version == version), key=lambda r: r.plural)
    if not served:
        return None
    resources: list[dict[str, Any]] = []
    for rtype in served:
        doc: dict[str, Any] = {
            "name": rtype.plural,
            "singularName": rtype.singular,
            "namespaced": rtype.namespaced,
            "kind": rtype.kind,
            "verbs": list(VERBS),
        }
        if rtype.short_names:
            doc["shortNames"] = list(rtype.short_names)
        if rtype.categories:
            doc["categories"] = list(rtype.categories)
        resources.append(doc)
        if rtype.plural == "namespaces" and not group:
            resources.append(
                {
                    "name": "namespaces/finalize",
                    "singularName": "",
                    "namespaced": False,
                    "kind": "Namespace",
                    "verbs": ["update"],
                }
            )
        if rtype in scalable:
            resources.append(
                {
                    "name": f"{rtype.plural}/scale",
                    "singularName": "",
                    "namespaced": rtype.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }
            )
        if rtype.has_status:
            resources.append(
                {
                    "name": f"{rtype.plural}/status",
                    "singularName": "",
                    "namespaced": rtype.namespaced,
                    "kind": rtype.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
