"""Create-or-patch: make an object have the fields a function sets, creating it if it is missing
(controller-runtime's ``controllerutil.CreateOrPatch``).

    result, cm = await create_or_patch(client, CONFIGMAPS, {"metadata": {"name": n, "namespace": ns}},
                                       lambda obj: obj.setdefault("data", {}).update(wanted))

reads the object; if it does not exist, ``mutate`` fills the given object and it is created
("created"); otherwise ``mutate`` changes a copy of the current object and the merge patch from
the current object to the changed copy is sent, only when it is not empty ("patched", or
"unchanged" with no request). The patch carries only what ``mutate`` changed, so fields others
wrote meanwhile are kept; a list ``mutate`` changes is sent whole (a merge patch replaces lists),
so a list others write too is better written through server-side apply
(:meth:`memop.runtime.client.client.Client.apply`).

Like controller-runtime's, the patch is not conditional on the resourceVersion: the
reconcile that computed ``mutate`` is level-based and runs again on the next change. The status
is not written here (controller-runtime patches it separately): use
:func:`memop.runtime.controller.status.update_status`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Literal

from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import Obj
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import Resource

OperationResult = Literal["created", "patched", "unchanged"]
Mutate = Callable[[Obj], None]

# Fields a patch never carries: the server's own, and the status (its own subresource).
_SERVER_METADATA = frozenset(
    (
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "managedFields",
        "selfLink",
    )
)


async def create_or_patch(
    client: Client,
    resource: Resource,
    obj: Obj,
    mutate: Mutate,
    *,
    cache: Cache | None = None,
) -> tuple[OperationResult, Obj]:
    """Make the object ``obj`` names (``metadata.name``, and ``namespace`` for a namespaced
    resource) have what ``mutate`` sets; returns what was done and the object as it now is.

    ``mutate(o)`` changes ``o`` in place: the current object (a copy), or ``obj`` itself when
    the object does not exist yet; it must set the same fields either way and leave the name and
    namespace alone (ValueError otherwise). With ``cache``, the current object is read from the
    cache (no GET; the resource must have an informer) and the answer recorded there; without,
    it is read from the server. AlreadyExists when the cache did not hold an object that exists
    (the controller retries once its cache caught up); other API errors as the client raises
    them.
    """
    meta = obj.get("metadata") or {}
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        raise ValueError(f"create_or_patch of a {resource.kind} needs metadata.name")
    if cache is not None:
        current = cache.get(resource, name, namespace)
    else:
        try:
            current = await client.get(resource, name, namespace)
        except NotFound:
            current = None
    if current is None:
        mutate(obj)
        _check_identity(resource, obj, name, namespace)
        created = await client.create(resource, obj, namespace)
        if cache is not None:
            cache.record_write(resource, created)
        return "created", created
    desired = copy.deepcopy(current)  # a cached object is read-only
    mutate(desired)
    _check_identity(resource, desired, name, namespace)
    patch = merge_patch(_writable(current), _writable(desired))
    if not patch:
        return "unchanged", current
    patched = await client.patch(resource, name, patch, namespace)
    if cache is not None:
        cache.record_write(resource, patched)
    return "patched", patched


def merge_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: changed and added members,
    None for removed ones; lists and non-object values whole. ``{}`` when they are equal."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            if isinstance(old[key], dict) and isinstance(value, dict):
                patch[key] = merge_patch(old[key], value)
            else:
                patch[key] = value
    for key in old:
        if key not in new:
            patch[key] = None
    return patch


def _writable(obj: Obj) -> Obj:
    """``obj`` without its status and the metadata the server sets."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if k not in _SERVER_METADATA}
    return out


def _check_identity(resource: Resource, obj: Obj, name: str, namespace: Any) -> None:
    meta = obj.get("metadata") or {}
    if meta.get("name") != name or (
        resource.namespaced and (meta.get("namespace") or None) != (namespace or None)
    ):
        raise ValueError(f"create_or_patch: mutate must not change the {resource.kind}'s name or namespace")
