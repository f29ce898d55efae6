"""Just enough OpenAPI v3 for kubectl: /openapi/v3 and one document per served group/version.

kubectl 1.32 validates manifests on the server (``fieldValidation=Strict``) only when the
OpenAPI v3 document of the object's group/version shows a PATCH operation for its kind with a
``fieldValidation`` query parameter; otherwise it downloads /openapi/v2 to validate on the
client. So each document lists, per served resource, a PATCH path tagged with
``x-kubernetes-group-version-kind`` and that parameter. The request bodies declare JSON and
merge patches only (no schemas), so kubectl builds strategic merge patches from its compiled-in
types for built-in kinds and JSON merge patches for custom resources, as it does against a real
server whose schemas it cannot use. /openapi/v2 stays 404.
"""

from __future__ import annotations

import hashlib
from typing import Any

from memop.testing.apiserver.resources import ResourceType

_PARAMS = [
    {
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": "string", "uniqueItems": True},
    }
    for name, description in (
        ("dryRun", "When present, indicates that modifications should not be persisted."),
        (
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        (
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request "
            "containing unknown or duplicate fields.",
        ),
    )
]


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _hash(rtypes: list[ResourceType]) -> str:
    text = ",".join(sorted(f"{r.group}/{r.version}/{r.plural}/{r.kind}/{r.namespaced}" for r in rtypes))
    return hashlib.sha512(text.encode()).hexdigest()[:64].upper()


def root(rtypes: list[ResourceType]) -> dict[str, Any]:
    """``/openapi/v3``: where each group/version's document is."""
    by_gv: dict[str, list[ResourceType]] = {}
    for rtype in rtypes:
        by_gv.setdefault(_gv_path(rtype.group, rtype.version), []).append(rtype)
    return {
        "paths": {
            gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={_hash(members)}"}
            for gv, members in sorted(by_gv.items())
        }
    }


def group_version(rtypes: list[ResourceType], gv_path: str) -> dict[str, Any] | None:
    """``/openapi/v3/<gv_path>``, or None when nothing is served there."""
    members = [r for r in rtypes if _gv_path(r.group, r.version) == gv_path]
    if not members:
        return None
    paths: dict[str, Any] = {}
    for rtype in sorted(members, key=lambda r: r.plural):
        base = "/" + gv_path + ("/namespaces/{namespace}" if rtype.namespaced else "")
        gvk = {"group": rtype.group, "kind": rtype.kind, "version": rtype.version}
        patch = {
            "operationId": f"patch{rtype.kind}",
            "parameters": _PARAMS,
            "requestBody": {
                "content": {
                    "application/json-patch+json": {"schema": {"type": "object"}},
                    "application/merge-patch+json": {"schema": {"type": "object"}},
                }
            },
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        }
        paths[f"{base}/{rtype.plural}/{{name}}"] = {"patch": patch}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-memop"},
        "paths": paths,
        "components": {"schemas": {}},
    }
