"""Equal parts of cached objects held once: the pod template of every Deployment of one spec.

Interning strings (:func:`memop.runtime.cache.store.compact`) leaves the containers: a Deployment's
``spec.template.spec`` is some twenty dicts and lists, the same in every Deployment made from
the same spec, and a third of the Deployment's memory. A :class:`SubtreeSharer` hands back one
canonical instance for every subtree equal to one it has seen, so ten thousand such subtrees
cost one. It applies only at the paths a resource declares (:func:`share_paths`): subtrees
that repeat across objects. Sharing a subtree that carries an identity (a uid, a name) would
save nothing and keep a table entry per object.

Shared subtrees are referenced by many cached objects, which is safe because cached objects
are read-only (see :mod:`memop.runtime.cache.store`); the store's mutation check in tests
(``MEMOP_CHECK_CACHE=1``) catches a caller that writes into one.

The table holds each canonical subtree under its canonical JSON (orjson, sorted keys: 0.27 µs
for a condition, where a tuple of its sorted items took 0.85 and twice the bytes). It is purged of
subtrees no cached object uses any more (their only references are the table's) whenever it has
doubled since the last purge, so it stays proportional to the distinct subtrees in use, however
long the process runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from memop.runtime.util import jsoncodec

# A path into an object: keys of nested dicts; "*" stands for every item of a list.
Path = tuple[str, ...]
EVERY_ITEM = "*"

_MIN_PURGE_AT = 256


class SubtreeSharer:
    """One canonical instance per distinct JSON subtree (dicts and lists) given to :meth:`share`."""

    def __init__(self, *, purge_at: int = _MIN_PURGE_AT) -> None:
        self._table: dict[bytes, Any] = {}
        self._min_purge_at = purge_at
        self._purge_at = purge_at

    def __len__(self) -> int:
        return len(self._table)

    def share(self, value: Any) -> Any:
        """``value``, or the equal subtree seen before (then ``value`` is left to be freed).
        Values other than dicts and lists are returned as they are (strings are interned by
        compaction already)."""
        return self.share_copy(value, _unchanged)

    def share_copy(self, value: Any, copy: Callable[[Any], Any]) -> Any:
        """The equal subtree seen before, or else ``copy(value)``, held from now on: the copy is
        made only when no equal subtree is held (``copy`` must keep the value equal:
        compaction). Values other than dicts and lists are copied and returned."""
        if not isinstance(value, dict | list):
            return copy(value)
        try:
            key = jsoncodec.canonical(value)
        except (TypeError, ValueError):  # not JSON (cannot come from the API): keep it apart
            return copy(value)
        canonical = self._table.get(key)
        if canonical is not None:
            return canonical
        copied = copy(value)
        self._table[_kept(key)] = copied
        if len(self._table) >= self._purge_at:
            self.purge()
        return copied

    def purge(self) -> None:
        """Forget the subtrees nothing but this table references."""
        table = self._table
        # getrefcount counts the table's reference and its own argument: 2 means unused.
        for key in [key for key in table if sys.getrefcount(table[key]) <= 2]:
            del table[key]
        self._purge_at = max(self._min_purge_at, 2 * len(self._table))


def _unchanged(value: Any) -> Any:
    return value


def _kept(key: bytes) -> bytes:
    """``key`` in bytes of its own size, to keep in the table: orjson's result holds the whole
    buffer it encoded into (4 KiB of RSS for a 100-byte key, measured), where a table holds a key
    per distinct subtree for as long as an object uses it (a pod's labels: one per pod)."""
    return memoryview(key).tobytes()


# A set of paths as nested dicts: key (or EVERY_ITEM) -> the rest of the paths below it, or
# LEAF where a path ends.
PathTree = dict[str, Any]
LEAF: PathTree = {}


def path_tree(paths: Sequence[Path]) -> PathTree:
    """``paths`` as a :data:`PathTree` (a path ending inside another ends there: its subtree is
    shared whole)."""
    tree: PathTree = {}
    for path in sorted(paths, key=len):
        node = tree
        for step in path[:-1]:
            child = node.setdefault(step, {})
            if child is LEAF:
                break
            node = child
        else:
            node[path[-1]] = LEAF
    return tree


def share_paths(obj: dict[str, Any], paths: Sequence[Path], sharer: SubtreeSharer) -> None:
    """Replace, in place, each subtree of ``obj`` at one of ``paths`` by its shared instance.
    Missing paths and values of unexpected types are skipped."""
    for path in paths:
        _share_at(obj, path, sharer)


def _share_at(container: Any, path: Path, sharer: SubtreeSharer) -> None:
    head, rest = path[0], path[1:]
    if head == EVERY_ITEM:
        if isinstance(container, list):
            for index, item in enumerate(container):
                if rest:
                    _share_at(item, rest, sharer)
                else:
                    container[index] = sharer.share(item)
        return
    if not isinstance(container, dict) or head not in container:
        return
    if rest:
        _share_at(container[head], rest, sharer)
    else:
        container[head] = sharer.share(container[head])
