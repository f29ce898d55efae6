"""Event handlers: which requests a watch event enqueues (controller-runtime's handler package).

Each mapper turns (event type, object, old object) into the requests to enqueue. For updates
both the old and the new object are mapped, so a change that moves an object from one owner
(or label) to another reconciles both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from memop.runtime.cache.store import ADDED, MODIFIED, Obj
from memop.runtime.controller.reconcile import Request

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


def enqueue_controller_owner(api_group: str, kind: str) -> Mapper:
    """The object's controlling owner, when that owner is of ``kind`` in ``api_group``.

    The owner is looked up in the object's own namespace, as ownerReferences can only point
    within a namespace (or to cluster-scoped owners, which get namespace "").
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
                return Request(str(meta.get("namespace") or ""), ref["name"])
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
