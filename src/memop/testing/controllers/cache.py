"""What the simulated controllers know of the store: every object, indexed, with no copies.

The cache is fed synchronously by the store's in-process listener with the store's own
committed objects, which the store never mutates after commit, so the cache can hold them by
reference: a read costs a dict lookup instead of a deep copy, as an informer's does.

Invariants:

* whenever no store change is being dispatched, the cache holds exactly the store's objects,
  each at its latest committed version (so a sync that reads, writes and reads again sees its
  own write);
* objects handed out are shared with the store: callers must never mutate them, and build new
  dicts for anything they send back;
* ``dependents(uid)`` lists exactly the cached objects whose ownerReferences name ``uid``.
"""

from __future__ import annotations

from memop.testing.apiserver.resources import ResourceType
from memop.testing.controllers.common import Obj, meta, owner_refs

# (group, plural) of a stored resource: every served version shares the objects.
GroupResource = tuple[str, str]


class ObjectCache:
    """Every object in the store by uid and by name, and who owns what (see module doc)."""

    def __init__(self) -> None:
        # uid -> (storage type, object)
        self._by_uid: dict[str, tuple[ResourceType, Obj]] = {}
        # (group, plural) -> (namespace or "", name) -> uid
        self._by_name: dict[GroupResource, dict[tuple[str, str], str]] = {}
        # owner uid -> uids of the objects whose ownerReferences name it
        self._dependents: dict[str, set[str]] = {}

    def apply(self, kind: str, rtype: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Record a committed change ("ADDED", "MODIFIED" or "DELETED") of ``obj``."""
        m = meta(obj)
        uid = m.get("uid")
        if not isinstance(uid, str):
            return
        key = (m.get("namespace") or "", m.get("name") or "")
        names = self._by_name.setdefault((rtype.group, rtype.plural), {})
        previous = self._by_uid.get(uid)
        old_owners = {ref["uid"] for ref in owner_refs(previous[1])} if previous else set()
        if kind == "DELETED":
            self._by_uid.pop(uid, None)
            if names.get(key) == uid:
                del names[key]
            new_owners: set[str] = set()
        else:
            self._by_uid[uid] = (rtype, obj)
            names[key] = uid
            new_owners = {ref["uid"] for ref in owner_refs(obj)}
        for owner in old_owners - new_owners:
            dependents = self._dependents.get(owner)
            if dependents is not None:
                dependents.discard(uid)
                if not dependents:
                    del self._dependents[owner]
        for owner in new_owners - old_owners:
            self._dependents.setdefault(owner, set()).add(uid)

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """The object of ``rtype`` at namespace/name, or None."""
        uid = self._by_name.get((rtype.group, rtype.plural), {}).get((namespace or "", name))
        entry = self._by_uid.get(uid) if uid is not None else None
        return entry[1] if entry is not None else None

    def items(self, group: str, plural: str, namespace: str | None = None) -> list[Obj]:
        """Every object of a group/resource (in ``namespace`` when given), in no set order."""
        out = []
        for (ns, _), uid in self._by_name.get((group, plural), {}).items():
            entry = self._by_uid.get(uid)
            if entry is not None and (namespace is None or ns == namespace):
                out.append(entry[1])
        return out

    def by_uid(self, uid: str) -> tuple[ResourceType, Obj] | None:
        """The object with this uid and its storage type, or None."""
        return self._by_uid.get(uid)

    def dependents(self, owner_uid: str) -> list[tuple[ResourceType, Obj]]:
        """The objects whose ownerReferences name ``owner_uid``."""
        out = []
        for uid in self._dependents.get(owner_uid, ()):
            entry = self._by_uid.get(uid)
            if entry is not None:
                out.append(entry)
        return out

    def has_dependents(self, owner_uid: str) -> bool:
        return bool(self._dependents.get(owner_uid))

    def __len__(self) -> int:
        return len(self._by_uid)
