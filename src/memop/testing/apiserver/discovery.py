"""Discovery documents of the test API server (/version, /api, /apis, resource lists), built
from what the store serves at the time of the request.

Both formats are served: the legacy documents (``/api``, ``/apis``, ``/api/v1``,
``/apis/<group>/<version>``) and the aggregated ones (``/api`` and ``/apis`` asked for as
``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList``, which kubectl and
client-go ask for first). A built-in resource is listed as kube-apiserver v1.36 lists it (verbs,
subresources, storage version hash: :mod:`memop.testing.apiserver.builtinapi`), whether the server serves
all of it or not (``pods/exec`` is listed, not served); the built-in resources the server lists
without storing objects of (:func:`memop.testing.apiserver.builtinapi.listed_only`) are added. Custom
resources and extra kinds get every verb and their status and scale subresources.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from memop.testing.apiserver import builtinapi
from memop.testing.apiserver.resources import ResourceType

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
    "resource.k8s.io",
    "flowcontrol.apiserver.k8s.io",
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


def _listed(rtypes: list[ResourceType]) -> list[ResourceType]:
    """The served types plus the built-in resources listed without being stored (unless a
    kind now serves one of them)."""
    served = {(r.group, r.version, r.plural) for r in rtypes}
    return [*rtypes, *(r for r in builtinapi.listed_only() if (r.group, r.version, r.plural) not in served)]


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
    groups = [_group_doc(g, vs) for g, vs in _groups(_listed(rtypes)).items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(rtypes: list[ResourceType], group: str) -> dict[str, Any] | None:
    """``/apis/<group>``, or None when nothing is served in it."""
    versions = _groups(_listed(rtypes)).get(group)
    if not versions or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, versions)}


def _subresources(rtype: ResourceType, scalable: Collection[ResourceType]) -> list[builtinapi.Subresource]:
    """A resource's subresources: v1.36's list for a built-in one, else what the server serves."""
    found = builtinapi.builtin(rtype)
    if found is not None:
        return list(found.subresources)
    subs: list[builtinapi.Subresource] = []
    if rtype in scalable:
        subs.append(builtinapi.Subresource("scale", "Scale", ("get", "patch", "update"), "autoscaling", "v1"))
    if rtype.has_status:
        subs.append(builtinapi.Subresource("status", rtype.kind, ("get", "patch", "update")))
    return subs


def _verbs_and_names(rtype: ResourceType, found: builtinapi.BuiltinResource | None) -> dict[str, Any]:
    """A resource's verbs, short names and categories, as both discovery formats list them."""
    doc: dict[str, Any] = {"verbs": list(found.verbs if found is not None else VERBS)}
    if rtype.short_names:
        doc["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        doc["categories"] = list(rtype.categories)
    return doc


def _served_here(rtypes: list[ResourceType], group: str, version: str) -> list[ResourceType]:
    return sorted(
        (r for r in _listed(rtypes) if r.group == group and r.version == version), key=lambda r: r.plural
    )


def resource_list(
    rtypes: list[ResourceType], group: str, version: str, scalable: Collection[ResourceType] = ()
) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/<group>/<version>``, or None when that version is not served;
    ``scalable`` are the types with a scale subresource."""
    served = _served_here(rtypes, group, version)
    if not served:
        return None
    resources: list[dict[str, Any]] = []
    for rtype in served:
        found = builtinapi.builtin(rtype)
        doc: dict[str, Any] = {
            "name": rtype.plural,
            "singularName": rtype.singular,
            "namespaced": rtype.namespaced,
            "kind": rtype.kind,
            **_verbs_and_names(rtype, found),
        }
        if found is not None and found.storage_version_hash:
            doc["storageVersionHash"] = found.storage_version_hash
        resources.append(doc)
        for sub in _subresources(rtype, scalable):
            entry: dict[str, Any] = {
                "name": f"{rtype.plural}/{sub.name}",
                "singularName": "",
                "namespaced": rtype.namespaced,
            }
            if sub.group is not None:
                entry["group"], entry["version"] = sub.group, sub.version
            entry["kind"], entry["verbs"] = sub.kind, list(sub.verbs)
            resources.append(entry)
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


# --- aggregated discovery (apidiscovery.k8s.io/v2) ------------------------------------------------

AGGREGATED_MEDIA_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def wants_aggregated(accept: str) -> bool:
    """Whether an Accept header asks for aggregated discovery v2 in JSON (client-go lists it
    first, then the v2beta1 and plain JSON fallbacks)."""
    for clause in accept.split(","):
        params = {p.strip().partition("=")[0]: p.strip().partition("=")[2] for p in clause.split(";")[1:]}
        media = clause.split(";", 1)[0].strip()
        if (
            media == "application/json"
            and params.get("g") == "apidiscovery.k8s.io"
            and params.get("v") == "v2"
            and params.get("as") == "APIGroupDiscoveryList"
        ):
            return True
    return False


def _kind_ref(kind: str, group: str | None = None, version: str | None = None) -> dict[str, str]:
    return {"group": group or "", "kind": kind, "version": version or ""}


def _aggregated_resource(rtype: ResourceType, scalable: Collection[ResourceType]) -> dict[str, Any]:
    found = builtinapi.builtin(rtype)
    # A built-in resource's own kind names no group/version; a custom resource's names both.
    kind = _kind_ref(rtype.kind) if found is not None else _kind_ref(rtype.kind, rtype.group, rtype.version)
    doc: dict[str, Any] = {
        "resource": rtype.plural,
        "responseKind": kind,
        "scope": "Namespaced" if rtype.namespaced else "Cluster",
        "singularResource": rtype.singular,
        **_verbs_and_names(rtype, found),
    }
    subs = [
        {
            "subresource": sub.name,
            "responseKind": _kind_ref(sub.kind, sub.group, sub.version)
            if sub.group
            else dict(kind, kind=sub.kind),
            "verbs": list(sub.verbs),
        }
        for sub in _subresources(rtype, scalable)
    ]
    if subs:
        doc["subresources"] = subs
    return doc


def aggregated(
    rtypes: list[ResourceType], legacy: bool, scalable: Collection[ResourceType] = ()
) -> dict[str, Any]:
    """The aggregated discovery document of ``/api`` (``legacy``) or ``/apis``."""
    items: list[dict[str, Any]] = []
    for group, versions in _groups(_listed(rtypes)).items():
        if (group == "") != legacy:
            continue
        docs = [
            {
                "version": version,
                "resources": [
                    _aggregated_resource(r, scalable) for r in _served_here(rtypes, group, version)
                ],
                "freshness": "Current",
            }
            for version in versions
        ]
        items.append({"metadata": {"name": group} if group else {}, "versions": docs})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }
