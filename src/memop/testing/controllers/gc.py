"""The garbage collector of kube-controller-manager, simulated on the in-memory store.

The object graph is the shared :class:`~memop.testing.controllers.cache.ObjectCache` (every
object by uid, and who owns what), exact at every await. The collector acts on three kinds of
work, keyed by uid:

``attempt``  (the real ``attemptToDeleteItem``) an object whose owners may be gone: its owner
             references are sorted into *solid* (the owner exists and is not deleting its
             dependents), *dangling* (no such owner, or one in another namespace) and *waiting*
             (the owner is being deleted in the foreground). With a solid owner left, only the
             dangling and waiting references are removed; otherwise the object is deleted —
             in the foreground if a waiting owner is behind it and it has dependents of its
             own, else with the policy its own finalizers ask for (orphan, foreground,
             background).
``gone``     an owner has left the store: every dependent gets an ``attempt``.
``owner``    an object being deleted with the ``orphan`` finalizer has the references to it
             removed from its dependents, then the finalizer; one with ``foregroundDeletion``
             has all its dependents deleted and loses the finalizer once no dependent that
             says ``blockOwnerDeletion`` is left.

Every write carries the resourceVersion (or, for deletes, the uid) of the object just read, so
nothing the user changed meanwhile is clobbered; a failure is retried by the work loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.runtime.util.clock import Clock
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.store import Store, StoreEvent
from memop.testing.controllers.cache import ObjectCache
from memop.testing.controllers.common import (
    Obj,
    WorkLoop,
    being_deleted,
    meta,
    metadata_for_write,
    owner_refs,
)

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"

Key = tuple[str, str]  # (action, uid); action is "attempt", "gone" or "owner"


def _finalizers(obj: Mapping[str, Any]) -> list[str]:
    return list(meta(obj).get("finalizers") or ())


def deleting_dependents(obj: Mapping[str, Any]) -> bool:
    """Being deleted in the foreground: waiting for its dependents to go first."""
    return being_deleted(obj) and FOREGROUND in _finalizers(obj)


def _finalizing(obj: Mapping[str, Any]) -> bool:
    """Being deleted with a finalizer only the garbage collector removes."""
    finalizers = _finalizers(obj)
    return being_deleted(obj) and (ORPHAN in finalizers or FOREGROUND in finalizers)


def _same_scope(owner_type: ResourceType, owner: Obj, dependent: Mapping[str, Any]) -> bool:
    # A namespaced owner can only own objects in its own namespace; a reference across
    # namespaces resolves to nothing, as in the real collector.
    return not owner_type.namespaced or meta(owner).get("namespace") == meta(dependent).get("namespace")


class GarbageCollector:
    """Deletes what no live owner holds any more; honours orphan and foreground deletion."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock) -> None:
        self._store = store
        self._cache = cache
        self.loop: WorkLoop[Key] = WorkLoop("garbage-collector", self._sync, clock=clock, workers=1)

    # -- events (synchronous, cheap) --------------------------------------------------------

    def on_event(self, event: StoreEvent) -> None:
        """Queue what a committed change makes necessary (the cache already reflects it)."""
        obj = event.obj
        uid = meta(obj).get("uid")
        if not isinstance(uid, str):
            return
        add, cache = self.loop.add, self._cache
        refs = owner_refs(obj)
        owners = {ref["uid"] for ref in refs}
        if event.old is not None:
            owners.update(ref["uid"] for ref in owner_refs(event.old))
        if event.type == "DELETED":
            add(("gone", uid))
        else:
            if _finalizing(obj):
                add(("owner", uid))
            for ref in refs:
                owner = cache.by_uid(ref["uid"])
                if owner is None or deleting_dependents(owner[1]) or not _same_scope(*owner, obj):
                    # Dangling, or its owner waits for it to go: the object must be looked at.
                    add(("attempt", uid))
                    break
        # A dependent appeared, changed or left: an owner waiting for its dependents may be done.
        for owner_uid in owners:
            owner = cache.by_uid(owner_uid)
            if owner is not None and deleting_dependents(owner[1]):
                add(("owner", owner_uid))

    # -- work ------------------------------------------------------------------------------

    def _sync(self, key: Key) -> float | None:
        action, uid = key
        if action == "gone":
            for _rtype, dependent in self._cache.dependents(uid):
                self.loop.add(("attempt", meta(dependent)["uid"]))
            return None
        entry = self._cache.by_uid(uid)
        if entry is None:
            return None
        rtype, obj = entry
        if action == "owner":
            self._finalize_owner(rtype, obj)
        else:
            self._attempt_to_delete(rtype, obj)
        return None

    def _attempt_to_delete(self, rtype: ResourceType, obj: Obj) -> None:
        if being_deleted(obj):
            return  # already going; a foreground deletion is the "owner" action's business
        refs = owner_refs(obj)
        if not refs:
            return
        solid = False
        waiting = False
        drop: set[str] = set()  # dangling and waiting owners
        for ref in refs:
            owner = self._cache.by_uid(ref["uid"])
            if owner is None or not _same_scope(*owner, obj):
                drop.add(ref["uid"])
            elif deleting_dependents(owner[1]):
                drop.add(ref["uid"])
                waiting = True
            else:
                solid = True
        if solid:
            if drop:
                self._remove_owner_refs(rtype, obj, drop)
            return
        finalizers = _finalizers(obj)
        if waiting and self._cache.has_dependents(meta(obj)["uid"]):
            policy = "Foreground"
        elif ORPHAN in finalizers:
            policy = "Orphan"
        elif FOREGROUND in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        self._delete(rtype, obj, policy)

    def _finalize_owner(self, rtype: ResourceType, obj: Obj) -> None:
        if not being_deleted(obj):
            return
        uid = meta(obj)["uid"]
        finalizers = _finalizers(obj)
        if ORPHAN in finalizers:
            for dep_type, dependent in self._cache.dependents(uid):
                self._remove_owner_refs(dep_type, dependent, {uid})
            self._remove_finalizer(rtype, obj, ORPHAN)
            return
        if FOREGROUND not in finalizers:
            return
        blocking = False
        for _dep_type, dependent in self._cache.dependents(uid):
            if any(ref["uid"] == uid and ref.get("blockOwnerDeletion") for ref in owner_refs(dependent)):
                blocking = True
            if not being_deleted(dependent):
                self.loop.add(("attempt", meta(dependent)["uid"]))
        if not blocking:
            self._remove_finalizer(rtype, obj, FOREGROUND)

    # -- writes (bodies are new dicts: cached objects are shared with the store) --------------

    def _remove_owner_refs(self, rtype: ResourceType, obj: Obj, uids: set[str]) -> None:
        refs = meta(obj).get("ownerReferences") or []
        kept = [ref for ref in refs if ref.get("uid") not in uids]
        if len(kept) != len(refs):
            self._update(rtype, obj, ownerReferences=kept or None)

    def _remove_finalizer(self, rtype: ResourceType, obj: Obj, finalizer: str) -> None:
        kept = [f for f in _finalizers(obj) if f != finalizer]
        self._update(rtype, obj, finalizers=kept or None)

    def _update(self, rtype: ResourceType, obj: Obj, **metadata: Any) -> None:
        # The body carries the resourceVersion it was read at: a concurrent change makes this
        # a 409 and the key is retried on fresh state.
        body = {**obj, "metadata": metadata_for_write(obj, **metadata)}
        m = meta(obj)
        try:
            self._store.update(rtype, m.get("namespace"), m["name"], body)
        except ApiError as err:
            if err.code != 404:
                raise

    def _delete(self, rtype: ResourceType, obj: Obj, policy: str) -> None:
        m = meta(obj)
        try:
            self._store.delete(
                rtype,
                m.get("namespace"),
                m["name"],
                propagation_policy=policy,
                preconditions={"uid": m["uid"]},
            )
        except ApiError as err:
            # 404: gone already; 409: the uid precondition failed, a new object took the name.
            if err.code not in (404, 409):
                raise
