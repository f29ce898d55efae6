"""The in-memory objects of one resource, with the indexes reconcilers read through.

Objects are the plain dicts ``json.loads`` produced, with ``metadata.managedFields`` removed
and the resource's transform applied on the way in (:meth:`ObjectStore.prepare`), then
compacted: rebuilt with every string interned (but the values no two objects share). They are
shared, not copied, on the way out: **callers must treat what ``get``/``list`` return as
read-only** (copy before changing), because copying every object on every read would cost more
than the reads themselves.

Why compact: the cache is most of an operator's memory, and most of an object's bytes are
strings that every object of the kind repeats — field names (``json.loads`` shares them only
within one document, so every watch event brings its own copies), and values such as image
names, label values, condition types and reasons. Interned, each is held once. A prepared
object is also made of fresh containers only, so it keeps nothing of the parsed input alive
and the input (managedFields, fields the transform dropped) is freed whole. It costs about
as much CPU as parsing the prepared object again (a few microseconds for a pod).

Equal subtrees at the paths a resource declares (``shared``: a Deployment's pod template, a
pod's labels) are held once, through a :class:`memop.runtime.cache.sharing.SubtreeSharer` per store:
another reason the objects must never be changed in place. With ``MEMOP_CHECK_CACHE=1`` in the
environment (the test suite sets it) the store verifies that: it keeps each object's JSON and
compares it when the object is replaced or removed, logging an error and recording the key in
:data:`MUTATIONS_DETECTED` when a caller changed it.

Custom indexes (:meth:`ObjectStore.add_index`, controller-runtime's field indexers): a named
function from a stored object to the values it is found under (a ConfigMapSync under the
``namespace/name`` of its source ConfigMap), kept current through every add, update, delete and
relist, so a read by value (:meth:`ObjectStore.by_index`) costs a lookup, not a scan.

The indexes by namespace, owner and label are built on the first read that needs each (a
``list`` by that filter, ``keys`` of a namespace) and kept from then on: most stores are only
ever read by name (an operator's own kind, the children it gets by name), and for them the
indexes cost memory (a third of a cached Deployment's overhead) and CPU on every change for
nothing. Custom indexes are declared to be read, so they are kept from the start.

Invariants: every key in ``_objects`` appears in exactly the index entries its object implies
(namespace, controller owner uid, each label pair, the values each custom index function gave
for it when it was stored) and in no other, in every index built so far; an index entry with no
keys left is removed, so the indexes never grow with churn (see :class:`KeyIndex`).
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import sys
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from typing import Any

from memop.runtime.cache.labels import Selector
from memop.runtime.cache.sharing import EVERY_ITEM, LEAF, Path, PathTree, SubtreeSharer, path_tree
from memop.runtime.client.resources import Resource
from memop.runtime.util import jsoncodec

log = logging.getLogger("memop.store")

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "" when cluster-scoped, name)
Transform = Callable[[Obj], Obj]
# A custom index: the values a stored object is found under (none: it is not indexed).
IndexFunc = Callable[[Obj], Iterable[str]]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
RESYNC = "RESYNC"

CHECK_ENV = "MEMOP_CHECK_CACHE"
# (resource, key) of every cached object found changed in place (with MEMOP_CHECK_CACHE=1).
MUTATIONS_DETECTED: list[tuple[str, tuple[str, str]]] = []
MUTATION_MARK = "changed in place by its reader"  # in the error logged (tests look for it)


def object_key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def resource_version(obj: Obj | None) -> str:
    if not obj:
        return ""
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def dig(obj: Any, *path: str) -> Any:
    """The value at ``path`` in nested mappings, or None where a step is missing or is not a
    mapping (an object as read may be malformed: a reconciler must not crash on it)."""
    for key in path:
        # A plain dict (what the cache and the client hold) passes without the ABC check.
        if type(obj) is not dict and not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def controller_reference(owner: Mapping[str, Any], resource: Resource) -> dict[str, Any]:
    """The controller ownerReference from a child to ``owner`` (of ``resource``): garbage
    collection deletes the child when the owner goes, the child's events map back to the owner
    (see controller_owner_uid), and blockOwnerDeletion makes a foreground deletion of the owner
    wait for the child."""
    meta = owner["metadata"]
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_owner_uid(obj: Obj) -> str | None:
    """The uid of the ownerReference marked ``controller: true``, if any."""
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    if type(refs) is not list:
        return None  # absent, or malformed (a watch can bring anything): it names no owner
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller") is True:
            uid = ref.get("uid")
            return uid if isinstance(uid, str) else None
    return None


def _labels(obj: Obj) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def _label_pairs(obj: Obj) -> list[tuple[str, str]]:
    # Only string pairs can be indexed; anything else is a malformed object we still store.
    return [(k, v) for k, v in _labels(obj).items() if isinstance(k, str) and isinstance(v, str)]


class ObjectStore:
    """One resource's objects by (namespace, name), indexed by namespace, owner and label."""

    def __init__(
        self,
        resource: Resource,
        transform: Transform | None = None,
        shared: tuple[Path, ...] = (),
        *,
        implied_labels: Mapping[str, str] | None = None,
        aliases: Mapping[Path, Path] | None = None,
    ) -> None:
        """``implied_labels``: label pairs every object carries (those the watch's label
        selector requires). They are not indexed: their entries would hold every key.
        ``aliases``: path -> path of the same object; the subtree at the first, when equal to
        the one at the second, is held as that one (see :func:`hold_aliases`)."""
        self.resource = resource
        self._implied_labels = frozenset((implied_labels or {}).items())
        self._transform = transform
        self._shared = shared
        self._sharer = SubtreeSharer()
        self._shared_tree = path_tree(shared)
        self._aliases = tuple((aliases or {}).items())
        for path, _ in self._aliases:
            if not path or any(
                len(shared_path) < len(path) and path[: len(shared_path)] == shared_path
                for shared_path in shared
            ):
                # A subtree held by many objects must not be changed for one of them.
                raise ValueError(f"alias path {path!r} is empty or inside a shared subtree of {shared!r}")
        # MEMOP_CHECK_CACHE=1: key -> the JSON of the object as stored, to catch mutations.
        self._fingerprints: dict[Key, str] | None = {} if os.environ.get(CHECK_ENV) == "1" else None
        self._objects: dict[Key, Obj] = {}
        # Built on first use (see the module docstring): None until then.
        self._by_namespace: KeyIndex | None = None
        self._by_owner: KeyIndex | None = None
        self._by_label: KeyIndex | None = None
        # Custom indexes by name: the function, its index, and the values it gave each stored
        # key (kept, so an object is unindexed from exactly where it went in, whatever the
        # function would say now). Keys with no values are not in the last dict.
        self._custom: dict[str, tuple[IndexFunc, KeyIndex, dict[Key, tuple[str, ...]]]] = {}

    # -- reads -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._objects)

    def get(self, name: str, namespace: str | None = None) -> Obj | None:
        """The cached object, or None. Read-only."""
        return self._objects.get((namespace or "", name))

    def list(
        self,
        namespace: str | None = None,
        *,
        selector: Selector | str | None = None,
        owner_uid: str | None = None,
        index: tuple[str, str] | None = None,
    ) -> list[Obj]:
        """Objects matching every given filter, in no particular order. Read-only.

        ``index``: (name, value) of a custom index (:meth:`add_index`); only the objects its
        function put under ``value``. KeyError for an index never added.

        The narrowest index among namespace, owner, custom index and the selector's exact
        label pairs picks the candidates; the remaining filters are checked on those only.
        """
        if isinstance(selector, str):
            selector = Selector.parse(selector)
        candidate_sets: builtins.list[Collection[Key]] = []
        indexed: Collection[Key] | None = None
        if index is not None:
            indexed = self._index_members(*index)
            candidate_sets.append(indexed)
        if namespace:
            candidate_sets.append(self._namespace_index().members(namespace))
        if owner_uid is not None:
            candidate_sets.append(self._owner_index().members(owner_uid))
        if selector is not None and not selector.is_empty():
            for pair in selector.exact_pairs().items():
                if pair not in self._implied_labels:  # else: every key; matches() still checks
                    candidate_sets.append(self._label_index().members(pair))
        keys: Iterable[Key] = self._objects.keys()
        if candidate_sets:
            smallest: Collection[Key] = min(candidate_sets, key=len)
            keys = smallest
        result = []
        for key in keys:
            obj = self._objects[key]
            if namespace and key[0] != namespace:
                continue
            if owner_uid is not None and controller_owner_uid(obj) != owner_uid:
                continue
            if indexed is not None and indexed is not keys and key not in indexed:
                continue
            if selector is not None and not selector.matches(_labels(obj)):
                continue
            result.append(obj)
        return result

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        """The objects the custom index ``name`` holds under ``value``. Read-only. KeyError for
        an index never added."""
        return [self._objects[key] for key in self._index_members(name, value)]

    def index_values(self, name: str) -> builtins.list[str]:
        """Every value the custom index ``name`` holds at least one object under."""
        return [value for value in self._custom_entry(name)[1].entries() if isinstance(value, str)]

    def _index_members(self, name: str, value: str) -> Collection[Key]:
        return self._custom_entry(name)[1].members(value)

    def _custom_entry(self, name: str) -> tuple[IndexFunc, KeyIndex, dict[Key, tuple[str, ...]]]:
        entry = self._custom.get(name)
        if entry is None:
            raise KeyError(f"{self.resource.kind} has no index named {name!r} (add_index declares one)")
        return entry

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Index every object, now stored and to come, under the values ``fn`` gives it.

        ``fn`` sees the object as stored (after the transform) and must treat it as
        read-only; it returns the values (strings) to find the object under, none to leave it
        out. It runs once each time an object is stored. An exception it raises is logged and
        the object left out of that index (the object itself is stored). ValueError when an
        index of that name exists.
        """
        if name in self._custom:
            raise ValueError(f"{self.resource.kind} already has an index named {name!r}")
        self._custom[name] = (fn, KeyIndex(), {})
        for key, obj in self._objects.items():
            self._index_custom(name, key, obj)

    def keys(self, namespace: str | None = None) -> builtins.list[Key]:
        if namespace is None:
            return list(self._objects)
        return list(self._namespace_index().members(namespace))

    def _namespace_index(self) -> KeyIndex:
        if self._by_namespace is None:
            self._by_namespace = KeyIndex()
            for key in self._objects:
                self._by_namespace.add(key[0], key)
        return self._by_namespace

    def _owner_index(self) -> KeyIndex:
        if self._by_owner is None:
            self._by_owner = KeyIndex()
            for key, obj in self._objects.items():
                owner = controller_owner_uid(obj)
                if owner is not None:
                    self._by_owner.add(owner, key)
        return self._by_owner

    def _label_index(self) -> KeyIndex:
        if self._by_label is None:
            self._by_label = KeyIndex()
            for key, obj in self._objects.items():
                for pair in self._indexed_label_pairs(obj):
                    self._by_label.add(pair, key)
        return self._by_label

    # -- writes (the reflector's) ------------------------------------------------------------

    def prepare(self, obj: Obj) -> Obj:
        """The object to store for ``obj`` as read from the API: without managedFields (nobody
        reads them; they are often half an object), transformed, and compacted (see the
        module docstring). ``obj`` may be changed in the process and must not be used after.
        """
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        return self._transformed_copy(obj)

    def prepare_copy(self, obj: Obj) -> Obj:
        """:meth:`prepare` for an object its caller keeps using (a write's answer): ``obj`` is
        left as it is. Transforms never change their input; compaction copies the rest."""
        meta = obj.get("metadata")
        if isinstance(meta, dict) and "managedFields" in meta:
            meta = dict(meta)  # a copy and a del: a fifth of a comprehension's time
            del meta["managedFields"]
            obj = {**obj, "metadata": meta}
        return self._transformed_copy(obj)

    def _transformed_copy(self, obj: Obj) -> Obj:
        if self._transform is not None:
            obj = self._transform(obj)
        obj = compact_sharing(obj, self._shared_tree, self._sharer) if self._shared_tree else compact(obj)
        if self._aliases:
            hold_aliases(obj, self._aliases)
        return obj

    @property
    def transformed(self) -> bool:
        """Whether objects are stored through a transform (a view of what readers read)."""
        return self._transform is not None

    def upsert(self, obj: Obj) -> Obj | None:
        """Store ``obj`` (already prepared); return the object it replaced, if any."""
        key = object_key(obj)
        old = self._objects.get(key)
        if old is not None:
            self._check_unchanged(key, old)
            self._unindex(key, old)
        self._objects[key] = obj
        self._index(key, obj)
        if self._fingerprints is not None:
            self._fingerprints[key] = _fingerprint(obj)
        return old

    def remove(self, key: Key) -> Obj | None:
        """Drop the object at ``key``; return it, or None if it was not there."""
        old = self._objects.pop(key, None)
        if old is not None:
            self._check_unchanged(key, old)
            self._unindex(key, old)
            if self._fingerprints is not None:
                del self._fingerprints[key]
        return old

    def _check_unchanged(self, key: Key, obj: Obj) -> None:
        if self._fingerprints is None or self._fingerprints.get(key) == _fingerprint(obj):
            return
        MUTATIONS_DETECTED.append((self.resource.plural, key))
        log.error(
            "a cached %s was " + MUTATION_MARK + ": cached objects are read-only",
            self.resource.plural,
            extra={"object": f"{key[0]}/{key[1]}" if key[0] else key[1]},
        )

    def replace(
        self,
        objects: Iterable[Obj],
        namespace: str | None = None,
        *,
        list_version: str | None = None,
        scope: Callable[[Obj], bool] | None = None,
    ) -> builtins.list[tuple[str, Obj, Obj | None]]:
        """Make the store (or the part of it in ``namespace``) hold exactly ``objects``.

        Returns the changes that takes, as (type, object, old object) in the order a watcher
        would have seen them: ADDED for new keys, MODIFIED where the resourceVersion differs,
        DELETED (carrying the last known state) for keys that are gone. Objects must be prepared.

        ``list_version``: the resourceVersion of the list ``objects`` come from. A stored object
        newer than it was written by us after the list's snapshot (``Cache.record_write``
        while the list was under way): it is kept as it is, not taken back to the list's older
        state or deleted, since the watch from ``list_version`` brings whatever follows. Without
        this a relist would forget a pod we just created, and a reconcile create it again.

        ``scope``: only stored objects it accepts are this list's to delete (one shard's
        reflector, in a store other shards' reflectors fill too).
        """
        snapshot = _as_int(list_version)
        changes: builtins.list[tuple[str, Obj, Obj | None]] = []
        seen: set[Key] = set()
        for obj in objects:
            key = object_key(obj)
            seen.add(key)
            old = self._objects.get(key)
            if old is not None and (resource_version(old) == resource_version(obj) or _newer(old, snapshot)):
                continue
            self.upsert(obj)
            changes.append((ADDED if old is None else MODIFIED, obj, old))
        in_scope = self.keys(namespace) if namespace else list(self._objects)
        if scope is not None:
            in_scope = [key for key in in_scope if scope(self._objects[key])]
        for key in in_scope:
            if key not in seen and not _newer(self._objects[key], snapshot):
                gone = self.remove(key)
                if gone is not None:
                    changes.append((DELETED, gone, gone))
        return changes

    # -- indexes -----------------------------------------------------------------------------

    def _index(self, key: Key, obj: Obj) -> None:
        if self._by_namespace is not None:
            self._by_namespace.add(key[0], key)
        if self._by_owner is not None and (owner := controller_owner_uid(obj)) is not None:
            self._by_owner.add(owner, key)
        if self._by_label is not None:
            for pair in self._indexed_label_pairs(obj):
                self._by_label.add(pair, key)
        for name in self._custom:
            self._index_custom(name, key, obj)

    def _index_custom(self, name: str, key: Key, obj: Obj) -> None:
        fn, index, values_of = self._custom[name]
        try:
            values = tuple(dict.fromkeys(v for v in fn(obj) if isinstance(v, str)))
        except Exception:
            # A user's function failing on one (perhaps malformed) object must not stop the
            # reflector that stores it, nor leave the other indexes half-updated.
            log.exception("index %r of %s failed on %s/%s", name, self.resource.kind, key[0], key[1])
            return
        if values:
            values_of[key] = values
            for value in values:
                index.add(value, key)

    def _indexed_label_pairs(self, obj: Obj) -> builtins.list[tuple[str, str]]:
        return [pair for pair in _label_pairs(obj) if pair not in self._implied_labels]

    def _unindex(self, key: Key, obj: Obj) -> None:
        if self._by_namespace is not None:
            self._by_namespace.discard(key[0], key)
        if self._by_owner is not None and (owner := controller_owner_uid(obj)) is not None:
            self._by_owner.discard(owner, key)
        if self._by_label is not None:
            for pair in self._indexed_label_pairs(obj):
                self._by_label.discard(pair, key)
        for _, index, values_of in self._custom.values():
            for value in values_of.pop(key, ()):
                index.discard(value, key)


def equal_but_version(a: Obj, b: Obj) -> bool:
    """Whether two stored objects are equal but for ``metadata.resourceVersion``: a change
    made only in what the store's transform dropped (their equal subtrees are mostly the same
    shared instances, compared by identity)."""
    if a.keys() != b.keys():
        return False
    for key, value in a.items():
        if key != "metadata":
            if value != b[key]:
                return False
            continue
        other = b[key]
        if type(value) is not dict or type(other) is not dict or value.keys() != other.keys():
            return bool(value == other)
        for name, item in value.items():
            if name != "resourceVersion" and item != other[name]:
                return False
    return True


def _as_int(version: str | None) -> int | None:
    try:
        return int(version) if version else None
    except ValueError:
        return None  # not an etcd revision: nothing can be compared


def _newer(obj: Obj, snapshot: int | None) -> bool:
    """Whether ``obj`` was stored at a resourceVersion after ``snapshot``."""
    if snapshot is None:
        return False
    version = _as_int(resource_version(obj))
    return version is not None and version > snapshot


def _fingerprint(obj: Obj) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


_intern = sys.intern
# Values of these keys are never interned: no two objects share a resourceVersion, and a uid
# appears in its object and at most in a few owner references. Interning them saved nothing and
# grew the interpreter's table of interned strings by an entry each (about 2 MB at 30,000 pods).
_NOT_INTERNED = frozenset(("resourceVersion", "uid"))


def compact(obj: Obj) -> Obj:
    """A copy of the JSON object ``obj``: every dict and list rebuilt, every string (key or
    value) interned but the values of :data:`_NOT_INTERNED` keys, other values (numbers,
    booleans, None) as they are."""
    return _compact_dict(obj)


def _compact_dict(source: dict[Any, Any]) -> dict[Any, Any]:
    # Two mutually recursive loops rather than one generic function: most values are strings,
    # and testing for them inline saves a call per value (a third of the cost).
    out = {}
    value: Any
    for key, item in source.items():
        kind = type(item)
        if kind is str:
            value = item if key in _NOT_INTERNED else _intern(item)
        elif kind is dict:
            value = _compact_dict(item)
        elif kind is list:
            value = _compact_list(item)
        else:
            value = item
        out[_intern(key) if type(key) is str else key] = value
    return out


def compact_sharing(obj: Obj, shared: PathTree, sharer: SubtreeSharer) -> Obj:
    """:func:`compact` of ``obj`` with the subtrees at the ``shared`` paths held once through
    ``sharer`` (:mod:`memop.runtime.cache.sharing`): a subtree equal to one held already is
    not copied at all, only looked up (a Deployment's pod template, the bulk of it)."""
    return _compact_dict_sharing(obj, shared, sharer)


def hold_aliases(obj: Obj, aliases: Iterable[tuple[Path, Path]]) -> None:
    """For each (path, target) of ``aliases``, hold the subtree at ``path`` of ``obj`` as the
    one at ``target`` when the two are equal JSON (a Deployment's pod-template labels, equal to
    its own labels: a dict less per Deployment). ``obj`` is a compacted copy of the store's own:
    its containers along ``path`` are its alone (the store refuses alias paths inside shared
    subtrees). Equal means the same JSON value (:func:`~memop.runtime.util.jsoncodec.same`), so
    ``1`` and ``true`` stay apart."""
    for path, target in aliases:
        parent = dig(obj, *path[:-1])
        held = dig(obj, *target)
        if type(parent) is not dict or type(held) not in (dict, list):
            continue
        value = parent.get(path[-1])
        try:
            if value is held or not jsoncodec.same(value, held):
                continue
        except (TypeError, ValueError):  # not JSON (cannot come from the API): leave it apart
            continue
        parent[path[-1]] = held


def _compact_value(item: Any) -> Any:
    kind = type(item)
    if kind is str:
        return _intern(item)
    if kind is dict:
        return _compact_dict(item)
    if kind is list:
        return _compact_list(item)
    return item


def _compact_dict_sharing(source: dict[Any, Any], shared: PathTree, sharer: SubtreeSharer) -> dict[Any, Any]:
    out = {}
    value: Any
    for key, item in source.items():
        below = shared.get(key) if type(key) is str else None
        if below is None:
            value = item if type(item) is str and key in _NOT_INTERNED else _compact_value(item)
        elif below is LEAF:
            value = sharer.share_copy(item, _compact_value)
        else:
            value = _compact_below(item, below, sharer)
        out[_intern(key) if type(key) is str else key] = value
    return out


def _compact_below(item: Any, shared: PathTree, sharer: SubtreeSharer) -> Any:
    """``item`` compacted, with the ``shared`` paths below it shared."""
    if type(item) is dict:
        return _compact_dict_sharing(item, shared, sharer)
    every = shared.get(EVERY_ITEM)
    if type(item) is list and every is not None:
        if every is LEAF:
            return [sharer.share_copy(element, _compact_value) for element in item]
        return [_compact_below(element, every, sharer) for element in item]
    return _compact_value(item)


def _compact_list(source: builtins.list[Any]) -> builtins.list[Any]:
    out = []
    value: Any
    for item in source:
        kind = type(item)
        if kind is str:
            value = _intern(item)
        elif kind is dict:
            value = _compact_dict(item)
        elif kind is list:
            value = _compact_list(item)
        else:
            value = item
        out.append(value)
    return out


class KeyIndex:
    """Index entry (a namespace, an owner uid, a label pair) -> the keys of the objects that
    have it; an entry with no keys left is removed.

    An entry with a single key holds that key, not a set of one. Most owner and label entries
    have one key (each Deployment has its own owner uid and instance label), and the smallest
    set costs 216 bytes: at 10,000 Deployments that was 4 MiB of sets of one.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[Hashable, Key | set[Key]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, entry: Hashable, key: Key) -> None:
        held = self._entries.get(entry)
        if held is None:
            self._entries[entry] = key
        elif type(held) is set:
            held.add(key)
        elif held != key:
            self._entries[entry] = {held, key}  # type: ignore[arg-type]

    def discard(self, entry: Hashable, key: Key) -> None:
        held = self._entries.get(entry)
        if held is None:
            return
        if type(held) is set:
            held.discard(key)
            if len(held) == 1:
                (self._entries[entry],) = held
        elif held == key:
            del self._entries[entry]

    def entries(self) -> Collection[Hashable]:
        """Every entry that holds at least one key (read-only; valid until the index next changes)."""
        return self._entries.keys()

    def members(self, entry: Hashable) -> Collection[Key]:
        """The keys under ``entry`` (read-only; valid until the index next changes)."""
        held = self._entries.get(entry)
        if held is None:
            return ()
        if type(held) is set:
            return held
        return (held,)  # type: ignore[return-value]
