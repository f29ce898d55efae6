"""Finalizers: adding and removing one's own without dropping anyone else's.

controller-runtime's ``controllerutil.AddFinalizer`` / ``RemoveFinalizer`` only change the
object in memory and leave the write to the caller; here the write is part of the helper, because
how it is written is what makes it safe. ``metadata.finalizers`` is a list that other
controllers write too, and a merge patch replaces a list whole: a plain ``{"metadata":
{"finalizers": [...]}}`` built from a stale read would silently drop a finalizer someone added
meanwhile. So:

- :func:`add_finalizer` sends a merge patch carrying ``metadata.resourceVersion``, a
  precondition: if the object changed since it was read the server answers 409 Conflict;
- :func:`remove_finalizer` sends a JSON patch that first ``test``\\s that the finalizer is still
  at the index it was read at, then removes that index: if the list moved, nothing is removed
  and the server answers 422, raised here as :class:`~memop.runtime.client.errors.Conflict`.

Neither retries a Conflict: it propagates to the controller, which requeues the request with
the per-object backoff (as controller-runtime does for any error); the next reconcile reads the
newer object from the cache and decides again. Both are no-ops, sending no request, when the
finalizer is already present (absent). Each sends at most one request.

A list that is not a list of strings (no conforming API server stores one) is never written
over: the helpers raise :class:`~memop.runtime.controller.reconcile.TerminalError`, which stops
retrying until the object changes.
"""

from __future__ import annotations

from typing import Any

from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import Obj
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, Conflict
from memop.runtime.client.resources import Resource
from memop.runtime.controller.reconcile import TerminalError


def finalizers_of(obj: Obj) -> list[str] | None:
    """``metadata.finalizers`` ([] when absent), or None when it is not a list of strings (a
    string would pass ``in`` as a substring test and spread into a list of characters)."""
    meta = obj.get("metadata")
    found = meta.get("finalizers") if isinstance(meta, dict) else None
    if found is None:
        return []
    if not isinstance(found, list) or not all(isinstance(f, str) for f in found):
        return None
    return found


def has_finalizer(obj: Obj, finalizer: str) -> bool:
    """Whether ``obj`` carries ``finalizer`` (False when its list is malformed)."""
    found = finalizers_of(obj)
    return found is not None and finalizer in found


async def add_finalizer(
    client: Client, resource: Resource, obj: Obj, finalizer: str, *, cache: Cache | None = None
) -> Obj:
    """Add ``finalizer`` to ``obj`` (of ``resource``) on the server; returns the object as it now
    is: the patch's answer, or ``obj`` itself when it already had the finalizer (no request).

    ``obj`` must carry ``metadata.resourceVersion``: it makes the patch conditional. Raises
    Conflict when the object changed since ``obj`` was read, NotFound when it is gone,
    TerminalError when its finalizers are malformed. With ``cache``, the answer is recorded
    there (:meth:`Cache.record_write`) so the next reconcile reads its own write; inside a
    reconcile, deferred to its end (``defer``: a status write that follows stands for both),
    so use the object this returns, not the cache's, for the rest of the reconcile.
    """
    current = _well_formed(obj, resource)
    if finalizer in current:
        return obj
    meta = obj["metadata"]
    version = meta.get("resourceVersion")
    if not version:
        raise ValueError(
            f"adding a finalizer to {_describe(resource, obj)} needs its metadata.resourceVersion"
        )
    patched = await client.patch(
        resource,
        meta["name"],
        {"metadata": {"finalizers": [*current, finalizer], "resourceVersion": version}},
        meta.get("namespace"),
    )
    if cache is not None:
        cache.record_write(resource, patched, defer=True)
    return patched


async def remove_finalizer(
    client: Client, resource: Resource, obj: Obj, finalizer: str, *, cache: Cache | None = None
) -> Obj:
    """Remove ``finalizer`` from ``obj`` (of ``resource``) on the server; returns the object as
    it now is: the patch's answer, or ``obj`` itself when it had no such finalizer (no request).

    Only that finalizer goes, at the index it has in ``obj``: raises Conflict when the list
    changed there since ``obj`` was read, NotFound when the object is gone, TerminalError when its
    finalizers are malformed. When it was the last finalizer of an object being deleted, the
    server deletes the object and the answer is its last state. With ``cache``, the answer is
    recorded there, unless the object is gone.
    """
    current = _well_formed(obj, resource)
    if finalizer not in current:
        return obj
    index = current.index(finalizer)
    meta = obj["metadata"]
    patch = [
        {"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
        {"op": "remove", "path": f"/metadata/finalizers/{index}"},
    ]
    try:
        patched = await client.patch(resource, meta["name"], patch, meta.get("namespace"), patch_type="json")
    except ApiError as error:
        if error.code != 422:
            raise
        # The test failed (or the index is past the end): the list moved under us.
        raise Conflict(
            f"the finalizers of {_describe(resource, obj)} changed since it was read: {error.message}",
            reason="Conflict",
            body=error.body,
            method=error.method,
            path=error.path,
        ) from error
    patched_meta: Any = patched.get("metadata")
    deleted = (
        isinstance(patched_meta, dict)
        and patched_meta.get("deletionTimestamp")
        and not patched_meta.get("finalizers")
    )
    if cache is not None and not deleted:
        cache.record_write(resource, patched)
    return patched


def _well_formed(obj: Obj, resource: Resource) -> list[str]:
    current = finalizers_of(obj)
    if current is None:
        meta = obj.get("metadata") or {}
        raise TerminalError(
            f"{_describe(resource, obj)} has metadata.finalizers {meta.get('finalizers')!r:.200}, "
            "not a list of names: leaving them alone"
        )
    return current


def _describe(resource: Resource, obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = meta.get("name")
    return f"{resource.kind} {namespace}/{name}" if namespace else f"{resource.kind} {name}"
