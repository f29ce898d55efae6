"""A declarative controller's children as data: what ``desired`` returns turned into apply
configurations (plain dicts in the API's camelCase JSON), stamped as the owner's, and the
children observed after applying them, as the user's status function reads them.

Pure functions and small value types; the reconciler does the I/O.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from memop.runtime.cache.store import Obj, controller_reference
from memop.runtime.client.resources import Resource
from memop.runtime.controller.applied import configuration_hash

# On every child: which controller made it. The children's cache selects on it, so it holds
# only this controller's children, and pruning considers only them.
CONTROLLER_LABEL = "declarative.memop.dev/controller"
# On every child: the digest of its whole apply configuration (see memop.runtime.controller.applied).
APPLIED_ANNOTATION = "declarative.memop.dev/applied"


class ChildError(ValueError):
    """A child ``desired`` returned cannot be applied as it is (not an object, no apiVersion,
    kind or name, a namespace its owner cannot own it in). Retrying cannot help: the owner's
    spec or the controller's code must change."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def to_object(child: Any) -> Obj:
    """``child`` as a fresh JSON dict: a mapping (copied), a kubernetes_asyncio model (by its
    ``attribute_map``: camelCase), a Pydantic model (by alias, without None), or anything with a
    ``to_dict()`` that returns the JSON form (memop's CustomResource). ChildError otherwise."""
    if isinstance(child, Mapping):
        copied: Obj = _copy(child)  # stamped in place after: the caller's object stays as it was
        return copied
    if hasattr(child, "openapi_types") and hasattr(child, "attribute_map"):
        converted = _kubernetes_model(child)
    elif hasattr(child, "to_dict"):
        converted = child.to_dict()
    elif hasattr(child, "model_dump"):
        converted = child.model_dump(mode="json", by_alias=True, exclude_none=True)
    else:
        raise ChildError("InvalidChild", f"desired() returned a {type(child).__name__}, not an object")
    if not isinstance(converted, dict):
        raise ChildError("InvalidChild", f"a {type(child).__name__} converted to {type(converted).__name__}")
    return converted


def _copy(value: Any) -> Any:
    """A JSON value copied container by container (a fraction of copy.deepcopy's cost)."""
    kind = type(value)
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    if kind in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_copy(item) for item in value]
    return value


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _kubernetes_model(value: Any) -> Any:
    """What kubernetes_asyncio's ``ApiClient.sanitize_for_serialization`` gives, without an
    ApiClient (its constructor sets up a connection pool)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_kubernetes_model(item) for item in value]
    if isinstance(value, dict):
        return {key: _kubernetes_model(item) for key, item in value.items()}
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return {
        value.attribute_map[attr]: _kubernetes_model(getattr(value, attr))
        for attr in value.openapi_types
        if getattr(value, attr) is not None
    }


def identity(obj: Obj) -> tuple[str, str, str]:
    """(apiVersion, kind, name) of an apply configuration; ChildError when one is missing."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    for field, value in (("apiVersion", api_version), ("kind", kind), ("metadata.name", name)):
        if not isinstance(value, str) or not value:
            raise ChildError("InvalidChild", f"a child desired() returned has no {field}: {_short(obj)}")
    return str(api_version), str(kind), str(name)


def stamp(
    obj: Obj,
    resource: Resource,
    owner: Obj,
    owner_resource: Resource,
    labels: Mapping[str, str],
) -> Obj:
    """``obj`` (owned by the caller, changed in place and returned) made the owner's child: any
    ``status`` dropped (a subresource, not applied with the object), its namespace defaulted to
    the owner's, ``labels`` added, a controller ownerReference to the
    owner (replacing any other reference to it) and the digest of the result as an annotation.

    ChildError for a child an ownerReference cannot point from: a cluster-scoped child of a
    namespaced owner, a child in another namespace than its namespaced owner, or a namespaced
    child of a cluster-scoped owner without a namespace."""
    obj.pop("status", None)  # the status subresource's, never applied with the object
    meta = obj.setdefault("metadata", {})
    owner_meta = owner["metadata"]
    owner_namespace = owner_meta.get("namespace") or ""
    where = _describe(resource, meta)
    if not resource.namespaced:
        if owner_resource.namespaced:
            raise ChildError("ClusterScopedChild", f"{where} is cluster-scoped: {_ANNOTATIONS_HINT}")
        meta.pop("namespace", None)
    elif owner_resource.namespaced:
        namespace = meta.setdefault("namespace", owner_namespace)
        if namespace != owner_namespace:
            raise ChildError(
                "CrossNamespaceChild",
                f"{where} is in namespace {namespace}, not its owner's ({owner_namespace}): "
                + _ANNOTATIONS_HINT,
            )
    elif not meta.get("namespace"):
        raise ChildError(
            "ChildNamespaceMissing", f"{where} needs metadata.namespace: its owner is cluster-scoped"
        )
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    reference = controller_reference(owner, owner_resource)
    others = [r for r in meta.get("ownerReferences") or () if r.get("uid") != reference["uid"]]
    meta["ownerReferences"] = [*others, reference]
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != APPLIED_ANNOTATION}
    meta["annotations"] = annotations  # the digest covers everything but itself
    meta["annotations"] = {**annotations, APPLIED_ANNOTATION: configuration_hash(obj)}
    return obj


_ANNOTATIONS_HINT = (
    "an ownerReference cannot point from it to a namespaced owner. Write such a child with "
    "ControllerBuilder.watches(..., map_to_annotated_owner(...)) and owner_annotations() "
    "(memop.runtime.controller.handlers), and delete it in a finalizer"
)


def _describe(resource: Resource, meta: Mapping[str, Any]) -> str:
    namespace = meta.get("namespace")
    name = meta.get("name")
    return (
        f"{resource.kind} {namespace}/{name}"
        if namespace and resource.namespaced
        else f"{resource.kind} {name}"
    )


def _short(obj: Obj) -> str:
    text = repr(obj)
    return text if len(text) <= 200 else text[:200] + "..."


@dataclass(frozen=True)
class ObservedChild:
    """One child as it is after this reconcile: its resource and the object (read-only)."""

    resource: Resource
    object: Obj

    @property
    def name(self) -> str:
        return str(self.object["metadata"]["name"])


class ObservedChildren:
    """The children a reconcile applied (or found holding their configuration), in the order
    ``desired`` returned them, for a status function::

        deployment = children.get("Deployment", "web")   # or "apps/Deployment"
        available = (deployment or {}).get("status", {}).get("availableReplicas", 0)
    """

    def __init__(self, children: list[ObservedChild]) -> None:
        self._children = children

    def __iter__(self) -> Iterator[ObservedChild]:
        return iter(self._children)

    def __len__(self) -> int:
        return len(self._children)

    def get(self, kind: str, name: str | None = None) -> Obj | None:
        """The first child of ``kind`` (``"Deployment"`` or ``"apps/Deployment"``), named
        ``name`` when given; None when there is none."""
        group, _, bare = kind.rpartition("/")
        for child in self._children:
            if child.resource.kind != bare or (group and child.resource.group != group):
                continue
            if name is None or child.name == name:
                return child.object
        return None
