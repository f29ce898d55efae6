"""Predicates: which watch events are worth a reconcile.

A predicate sees (event type, object, old object) and returns False to drop the event. Only
MODIFIED events are ever filtered by the update predicates here: ADDED, DELETED and RESYNC
always pass. (controller-runtime runs resync events through the update predicates, so a
GenerationChangedPredicate silently disables the periodic resync of the primary kind; here a
resync is its own event type, so the sync period does what its name says.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memop.runtime.cache.labels import Selector
from memop.runtime.cache.store import MODIFIED, Obj, resource_version

Predicate = Callable[[str, Obj, Obj | None], bool]


def _meta(obj: Obj | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def resource_version_changed(event_type: str, obj: Obj, old: Obj | None) -> bool:
    """Drop updates that carry the same resourceVersion (nothing changed)."""
    if event_type != MODIFIED or old is None:
        return True
    return resource_version(obj) != resource_version(old)


def generation_changed(event_type: str, obj: Obj, old: Obj | None) -> bool:
    """Drop updates that leave metadata.generation alone (status-only and metadata-only writes).

    Deletion requests do not bump the generation but set deletionTimestamp; those pass, so a
    finalizer is handled the moment deletion starts.
    """
    if event_type != MODIFIED or old is None:
        return True
    meta, old_meta = _meta(obj), _meta(old)
    if meta.get("deletionTimestamp") != old_meta.get("deletionTimestamp"):
        return True
    return meta.get("generation") != old_meta.get("generation")


def label_selector(selector: Selector | str) -> Predicate:
    """Keep only events whose object (or, for updates, previous object) matches ``selector``."""
    parsed = Selector.parse(selector) if isinstance(selector, str) else selector

    def matches(event_type: str, obj: Obj, old: Obj | None) -> bool:
        labels = _meta(obj).get("labels")
        if parsed.matches(labels if isinstance(labels, dict) else {}):
            return True
        if event_type == MODIFIED and old is not None:
            old_labels = _meta(old).get("labels")
            return parsed.matches(old_labels if isinstance(old_labels, dict) else {})
        return False

    return matches


def all_of(*predicates: Predicate) -> Predicate:
    def combined(event_type: str, obj: Obj, old: Obj | None) -> bool:
        return all(p(event_type, obj, old) for p in predicates)

    return combined
