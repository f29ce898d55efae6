"""kube-apiserver v1.36's built-in API surface, as package data taken from Kubernetes' sources.

``data/builtin-discovery.json`` lists every built-in resource a v1.36 server with the default
feature gates serves (GA versions): its kind, singular name, scope, verbs, short names,
categories, subresources and storage version hash, as its discovery documents list them, and
what its registry says of writes (generation, unconditional updates, create on update, the
deleted object returned).
``data/builtin-schemas.json.gz`` holds the OpenAPI v3 component schemas of their objects. Both
are extracted from the v1.36.2 source tree by ``bench/extract_builtin_api.py`` (the files say
where from). The discovery table is read on first use (about 40 kB); the schemas only when a
generically served kind first decodes an object (:func:`schemas`).
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from memop.testing.apiserver.resources import ResourceType


@dataclass(frozen=True)
class Subresource:
    """A subresource as discovery lists it (``group``/``version`` only where its kind is of
    another group version, as ``deployments/scale``'s autoscaling/v1 Scale)."""

    name: str
    kind: str
    verbs: tuple[str, ...]
    group: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class BuiltinResource:
    """One built-in resource of kube-apiserver v1.36, with what its discovery says of it."""

    rtype: ResourceType
    verbs: tuple[str, ...]
    subresources: tuple[Subresource, ...]
    storage_version_hash: str
    schema: str  # the name of its object's OpenAPI component schema
    # What its registry's strategy and storage say of writes (pkg/registry/<group>/<resource>):
    # generation, unconditionalUpdate, createOnUpdate, returnDeletedObject. Empty for the
    # resources that store nothing.
    registry: Mapping[str, bool]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.rtype.group, self.rtype.version, self.rtype.plural)


def _data(name: str) -> bytes:
    return resources.files("memop.testing.apiserver").joinpath("data", name).read_bytes()


def _resource(entry: Mapping[str, Any]) -> BuiltinResource:
    subresources = tuple(
        Subresource(s["name"], s["kind"], tuple(s["verbs"]), s.get("group"), s.get("version"))
        for s in entry["subresources"]
    )
    rtype = ResourceType(
        entry["group"],
        entry["version"],
        entry["plural"],
        entry["kind"],
        entry["namespaced"],
        entry["singular"],
        tuple(entry["shortNames"]),
        has_status=any(s.name == "status" for s in subresources),
        categories=tuple(entry["categories"]),
    )
    return BuiltinResource(
        rtype,
        tuple(entry["verbs"]),
        subresources,
        entry["storageVersionHash"],
        entry["schema"],
        dict(entry["registry"]),
    )


# Listed in discovery as v1.36 lists them, no objects stored: (group, plural) -> why.
LISTED_ONLY_REASONS: Mapping[tuple[str, str], str] = {
    ("", "bindings"): "create-only, never stored: memop.testing.apiserver.binding binds the pod it names",
    ("", "componentstatuses"): "reports the health of live control-plane components; the server has none",
    **{
        review: "create-only, never stored: memop.testing.auth.reviews answers it from the authenticator and "
        "RBAC"
        for review in (  # memop.testing.auth.reviews.REVIEW_RESOURCES (which imports the store)
            ("authentication.k8s.io", "tokenreviews"),
            ("authentication.k8s.io", "selfsubjectreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
            ("authorization.k8s.io", "localsubjectaccessreviews"),
            ("authorization.k8s.io", "selfsubjectaccessreviews"),
            ("authorization.k8s.io", "selfsubjectrulesreviews"),
        )
    },
}


@functools.cache
def builtin_resources() -> dict[tuple[str, str, str], BuiltinResource]:
    """Every built-in resource of v1.36, keyed (group, version, plural), in discovery's order."""
    table = json.loads(_data("builtin-discovery.json"))
    return {r.key: r for r in map(_resource, table["resources"])}


def builtin(rtype: ResourceType) -> BuiltinResource | None:
    """What v1.36's discovery says of ``rtype``, when it is a built-in resource of that name
    and kind (a custom resource never is: CRDs cannot define built-in groups' resources)."""
    found = builtin_resources().get((rtype.group, rtype.version, rtype.plural))
    return found if found is not None and found.rtype.kind == rtype.kind else None


@functools.cache
def schemas() -> Mapping[str, Any]:
    """The OpenAPI v3 component schemas of the built-in kinds, by name
    (``io.k8s.api.apps.v1.StatefulSet``); read and decompressed on first use (about 20 ms)."""
    loaded: dict[str, Any] = json.loads(gzip.decompress(_data("builtin-schemas.json.gz")))["schemas"]
    return loaded


@functools.cache
def listed_only() -> tuple[ResourceType, ...]:
    """The built-in resources discovery lists as v1.36 does but the server stores nothing of
    (:data:`LISTED_ONLY_REASONS` says why of each)."""
    return tuple(
        r.rtype
        for r in builtin_resources().values()
        if (r.rtype.group, r.rtype.plural) in LISTED_ONLY_REASONS
    )
