"""Event handlers: which requests a watch event enqueues (controller-runtime's handler package).

Each mapper turns (event type, object, old object) into the requests to enqueue. For updates
both the old and the new object are mapped, so a change that moves an object from one owner
(or label) to another reconciles both.

Children an ownerReference cannot point from. An ownerReference names an owner in the child's
own namespace or a cluster-scoped one: every child of a cluster-scoped owner (namespaced or
cluster-scoped) and a namespaced owner's child in its own namespace carry one and are watched
with ``owns``; a child in another namespace than its (namespaced) owner, or a cluster-scoped
child of a namespaced owner, cannot have one. For those, operator-lib's
convention (its ``handler.EnqueueRequestForAnnotation``, which Operator SDK users know): the
child carries two annotations, stamped by :func:`owner_annotations`,

- ``operator-sdk/primary-resource: <namespace>/<name>`` (``/<name>`` for a cluster-scoped owner),
- ``operator-sdk/primary-resource-type: <Kind>.<group>`` (``<Kind>`` for the core group),

and the controller watches the child's kind through :func:`map_to_annotated_owner`::

    ControllerBuilder(cache, "configmapsync")
        .for_(CONFIGMAPSYNCS)
        .watches(CONFIGMAPS, map_to_annotated_owner(CONFIGMAPSYNCS))

What an ownerReference would have given, the controller then does itself: nothing
garbage-collects such children, so the owner carries a finalizer
(:func:`memop.runtime.controller.finalizers.add_finalizer`) and its reconcile deletes them when
the owner is being deleted; its RBAC is ``own_kind(..., finalizers=True)`` without
``owner_references`` (no blockOwnerDeletion to admit). The cache must watch the children's
namespaces (all namespaces, or a list holding them), or their events never arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memop.runtime.cache.store import ADDED, MODIFIED, Obj
from memop.runtime.client.resources import Resource
from memop.runtime.controller.reconcile import Request

# operator-lib's annotations (handler.NamespacedNameAnnotation and handler.TypeAnnotation).
PRIMARY_RESOURCE_ANNOTATION = "operator-sdk/primary-resource"
PRIMARY_RESOURCE_TYPE_ANNOTATION = "operator-sdk/primary-resource-type"

Mapper = Callable[[str, Obj, Obj | None], Iterable[Request]]
MapFunc = Callable[[Obj], Iterable[Request]]


def _meta(obj: Obj | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def request_for(obj: Obj) -> Request:
    meta = _meta(obj)
    return Request(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def enqueue_object(event_type: str, obj: Obj, old: Obj | None) -> list[Request]:
    """The object itself (for the kind a controller is ``for``)."""
    return [request_for(obj)]


def enqueue_controller_owner(api_group: str, kind: str, *, owner_namespaced: bool = True) -> Mapper:
    """The object's controlling owner, when that owner is of ``kind`` in ``api_group``.

    An ownerReference names no namespace: a namespaced owner is in the object's own namespace
    (an ownerReference can only point within one), a cluster-scoped owner
    (``owner_namespaced=False``) in none, whatever the object's namespace.
    """

    def owner(obj: Obj | None) -> Request | None:
        meta = _meta(obj)
        refs = meta.get("ownerReferences")
        if not isinstance(refs, list):
            return None  # absent, or malformed (a watch can bring anything): it names no owner
        for ref in refs:
            if not isinstance(ref, dict) or ref.get("controller") is not True:
                continue
            ref_group = str(ref.get("apiVersion") or "").rpartition("/")[0]
            if ref.get("kind") == kind and ref_group == api_group and isinstance(ref.get("name"), str):
                namespace = str(meta.get("namespace") or "") if owner_namespaced else ""
                return Request(namespace, ref["name"])
        return None

    def mapper(event_type: str, obj: Obj, old: Obj | None) -> list[Request]:
        requests = {r for r in (owner(obj), owner(old)) if r is not None}
        return list(requests)

    return mapper


def enqueue_mapped(fn: MapFunc) -> Mapper:
    """Whatever ``fn`` maps the object (and, for updates, the old object) to."""

    def mapper(event_type: str, obj: Obj, old: Obj | None) -> list[Request]:
        requests = set(fn(obj))
        if old is not None and old is not obj:
            requests.update(fn(old))
        return list(requests)

    return mapper


def _group_kind(resource: Resource) -> str:
    # schema.GroupKind.String(): "Kind.group", or "Kind" for the core group.
    return f"{resource.kind}.{resource.group}" if resource.group else resource.kind


def owner_annotations(owner: Mapping[str, Any], resource: Resource) -> dict[str, str]:
    """The annotations that make a child map back to ``owner`` (of ``resource``) through
    :func:`map_to_annotated_owner`, for a child an ownerReference cannot point from (see the
    module docstring). Merge them into the child's ``metadata.annotations``."""
    meta = owner["metadata"]
    namespace = (meta.get("namespace") or "") if resource.namespaced else ""
    if resource.namespaced and not namespace:
        raise ValueError(f"{resource.kind} {meta.get('name')!r} is namespaced: its namespace is needed")
    return {
        PRIMARY_RESOURCE_ANNOTATION: f"{namespace}/{meta['name']}",
        PRIMARY_RESOURCE_TYPE_ANNOTATION: _group_kind(resource),
    }


def annotated_owner(obj: Obj | None, resource: Resource) -> Request | None:
    """The owner of ``resource``'s kind that ``obj``'s annotations name (see
    :func:`owner_annotations`), or None: no such annotations, another kind, or a name that
    does not fit the owner's scope (a namespaced owner needs a namespace, a cluster-scoped one
    has none)."""
    annotations = _meta(obj).get("annotations")
    if not isinstance(annotations, dict):
        return None
    owner_type = annotations.get(PRIMARY_RESOURCE_TYPE_ANNOTATION)
    wanted = _group_kind(resource)
    # operator-lib's SetOwnerAnnotations writes "Kind." for a core-group owner: the same kind.
    if owner_type not in (wanted, f"{resource.kind}."):
        return None
    value = annotations.get(PRIMARY_RESOURCE_ANNOTATION)
    if not isinstance(value, str):
        return None
    namespace, _, name = value.rpartition("/")
    if not name or "/" in namespace or bool(namespace) != resource.namespaced:
        return None
    return Request(namespace, name)


def map_to_annotated_owner(resource: Resource) -> MapFunc:
    """A map function for ``ControllerBuilder.watches``: a child's event enqueues the owner of
    ``resource``'s kind its annotations name (operator-lib's EnqueueRequestForAnnotation). For
    an update both the old and the new owner are enqueued, so moving a child reconciles both."""

    def owner_of(obj: Obj) -> list[Request]:
        request = annotated_owner(obj, resource)
        return [request] if request is not None else []

    return owner_of


def reports_state_only(event_type: str, obj: Obj, old: Obj | None) -> bool:
    """Whether an event of an owned or watched object only reports its state: it appeared, or
    it changed with neither a new ``metadata.generation`` nor a deletion starting (a controller
    queues such events at low priority)."""
    if event_type == ADDED:
        return True
    if event_type != MODIFIED or old is None:
        return False
    meta, old_meta = _meta(obj), _meta(old)
    return meta.get("generation") == old_meta.get("generation") and bool(
        meta.get("deletionTimestamp")
    ) == bool(old_meta.get("deletionTimestamp"))


def reports_up_to_date(event_type: str, obj: Obj) -> bool:
    """Whether a primary object's ADDED event shows one its controller already handled: its
    ``status.observedGeneration`` is its ``metadata.generation`` and it is not being deleted.
    A new object has no status yet, so such an event comes from a list (a start, a relist, a
    shard taken over): its controller queues it at low priority, behind the objects that still
    need work (the reason controller-runtime's priority queue lowers a first list's objects,
    narrowed to those that say they are done)."""
    if event_type != ADDED:
        return False
    meta = _meta(obj)
    status = obj.get("status")
    if not isinstance(status, dict) or meta.get("deletionTimestamp"):
        return False
    generation = meta.get("generation")
    return generation is not None and status.get("observedGeneration") == generation
