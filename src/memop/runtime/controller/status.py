"""Writing a status only when it changed: the last step of every reconcile.

A reconciler computes the whole status from what it read (pure, so recomputing an unchanged
situation gives an equal status: see :mod:`memop.runtime.api.conditions` for transition times) and
hands it to :func:`update_status`, which patches the status subresource only when something
differs and records the answer in the cache. A converged object therefore costs no request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import Obj
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import Resource


def status_changed(old_status: object, new_status: Mapping[str, Any]) -> bool:
    """Whether writing ``new_status`` would change the stored ``old_status`` (None: no status
    yet). Exact: every field counts, including transition times and condition order. A stored
    status that is not an object (a list someone wrote through the status subresource of a
    CRD without a schema) is always changed: ours replaces it."""
    if old_status is None:
        return dict(new_status) != {}
    if not isinstance(old_status, Mapping):
        return True
    return dict(old_status) != dict(new_status)


async def update_status(
    client: Client, cache: Cache, resource: Resource, obj: Obj, status: Mapping[str, Any]
) -> Obj:
    """Merge-patch ``status`` onto ``obj``'s status subresource when it differs from the stored
    one; returns the object as it now is (``obj`` itself when nothing was written, or when the
    object was deleted meanwhile: its deletion is on its way through the watch)."""
    if not status_changed(obj.get("status"), status):
        return obj
    meta = obj["metadata"]
    try:
        patched = await client.patch_status(
            resource, meta["name"], {"status": dict(status)}, meta.get("namespace")
        )
    except NotFound:
        return obj
    cache.record_write(resource, patched)
    return patched
