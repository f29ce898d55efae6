"""Shard selectors as kube-apiserver v1.36 reads them (``shardSelector`` on LIST and WATCH).

A selector such as ``shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')``
asks the server for the objects whose field hashes into [start, end) of the 64-bit FNV-1a space;
several ranges on one field are joined with `` || ``. Replicas that split a resource between them
build their selectors here, and check objects client-side with the same hash the server uses
(so a replica can tell which objects it owns without asking again).

The server is strict about the text: bounds are single-quoted, ``0x``-prefixed, exactly 16
lowercase hex digits, except the end of the whole space, ``'0x10000000000000000'`` (2^64). What
:func:`render_selector` writes is what the server's own ``String()`` writes, so the server's
``metadata.shardInfo.selector`` echo equals the request's selector.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

UID = "object.metadata.uid"
NAMESPACE = "object.metadata.namespace"
KEYS = (UID, NAMESPACE)
"""The fields a selector may hash (the server refuses any other)."""

HASH_SPACE = 1 << 64
"""The exclusive end of the hash space: the last range of a split ends here."""

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = HASH_SPACE - 1


def fnv1a_64(value: str) -> int:
    """The 64-bit FNV-1a hash of ``value``'s UTF-8 bytes (Go's ``hash/fnv.New64a``), which the
    server compares with a selector's ranges."""
    h = _FNV_OFFSET
    for byte in value.encode():
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


@dataclass(frozen=True, slots=True)
class ShardRange:
    """The hashes in [start, end): ``0 <= start < end <= 2**64``, as the server requires."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end <= HASH_SPACE:
            raise ValueError(f"a shard range needs 0 <= start < end <= 2**64, got [{self.start}, {self.end})")

    def __contains__(self, hash_value: int) -> bool:
        return self.start <= hash_value < self.end


def format_bound(value: int) -> str:
    """A bound as the server wants it: ``0x`` and 16 hex digits (17 only for 2**64)."""
    return f"0x{value:016x}"


def render_selector(key: str, ranges: Sequence[ShardRange]) -> str:
    """The ``shardSelector`` for ``ranges`` of ``key`` (:data:`UID` or :data:`NAMESPACE`).

    Raises ValueError without ranges: an empty selector is not "nothing" to the server (it
    lists everything when the parameter is empty), so a replica with no share must not send one.
    """
    if key not in KEYS:
        raise ValueError(f"unsupported shard key {key!r}; supported: {', '.join(KEYS)}")
    if not ranges:
        raise ValueError("a shard selector needs at least one range")
    return " || ".join(
        f"shardRange({key}, '{format_bound(r.start)}', '{format_bound(r.end)}')" for r in ranges
    )


def in_ranges(hash_value: int, ranges: Iterable[ShardRange]) -> bool:
    """Whether ``hash_value`` lies in any of ``ranges`` (the ranges of a selector are OR-ed)."""
    return any(hash_value in r for r in ranges)


def field_value(obj: Mapping[str, Any], key: str) -> str:
    """The text the server hashes for ``key`` in ``obj``: its uid or namespace, "" when unset
    (a cluster-scoped object's namespace hashes as the empty string)."""
    meta = obj.get("metadata") or {}
    if key == UID:
        return str(meta.get("uid") or "")
    if key == NAMESPACE:
        return str(meta.get("namespace") or "")
    raise ValueError(f"unsupported shard key {key!r}; supported: {', '.join(KEYS)}")
