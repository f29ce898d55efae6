"""The ring: the 64-bit hash space cut into a fixed number of shards, and who owns each.

The space is cut into ``shards`` equal ranges (a power of two, 1 to 256). Shards, not
replicas, are the unit that moves: a replica owns whole shards, so gaining or losing one
never changes the ranges of the others, and each shard is watched by its own reflectors.

Children (a Deployment, a pod) carry their owner's *bucket* in the label
:data:`BUCKET_LABEL`: the top 8 bits of the owner's hash, 0 to 255. The API server can filter
labels but not hash them, and a shard is a contiguous run of buckets, so a replica's children
reflector for shard ``s`` selects ``bucket in (...)`` and gets exactly the children of the
owners in ``s``, whatever the number of shards.

:func:`assign` is the rule every replica computes alike from what the API shows (the live
members and the shards' current holders). It balances (every member gets ``shards // n`` or
one more) and it is sticky: a shard stays with a live holder that is within its quota, so a
member joining or leaving moves only the shards it must.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from memop.runtime.sharding.selector import HASH_SPACE, ShardRange, fnv1a_64

__all__ = ["BUCKETS", "BUCKET_LABEL", "Ring", "assign", "bucket_label_value", "bucket_of"]

BUCKETS = 256
"""Owner buckets (the top 8 bits of the hash): the finest split children can follow."""

BUCKET_LABEL = "sharding.memop.dev/bucket"
"""The label memop's controllers put on the children they create: the owner's bucket."""


@dataclass(frozen=True)
class Ring:
    """``shards`` equal ranges of the hash space; shard ``s`` is ``[s * 2**64 / shards, ...)``."""

    shards: int

    def __post_init__(self) -> None:
        if not 1 <= self.shards <= BUCKETS or self.shards & (self.shards - 1):
            raise ValueError(
                f"the number of shards must be a power of two from 1 to {BUCKETS}, got {self.shards}"
            )

    @property
    def width(self) -> int:
        return HASH_SPACE // self.shards

    def shard_of(self, hash_value: int) -> int:
        return hash_value // self.width

    def shard_of_value(self, value: str) -> int:
        """The shard of a uid or namespace (hashed as the server hashes it)."""
        return self.shard_of(fnv1a_64(value))

    def range_of(self, shard: int) -> ShardRange:
        self._check(shard)
        return ShardRange(shard * self.width, (shard + 1) * self.width)

    def buckets_of(self, shard: int) -> range:
        """The owner buckets whose children belong to ``shard``."""
        self._check(shard)
        per_shard = BUCKETS // self.shards
        return range(shard * per_shard, (shard + 1) * per_shard)

    def shard_of_bucket(self, bucket: int) -> int:
        return bucket // (BUCKETS // self.shards)

    def _check(self, shard: int) -> None:
        if not 0 <= shard < self.shards:
            raise ValueError(f"shard {shard} is not one of the {self.shards} shards")


def bucket_of(value: str) -> int:
    """The bucket of a uid (or namespace): the top 8 bits of its FNV-1a hash."""
    return fnv1a_64(value) >> 56


def bucket_label_value(owner_uid: str) -> str:
    """The :data:`BUCKET_LABEL` value for the children of the owner with ``owner_uid``."""
    return str(bucket_of(owner_uid))


def assign(shards: int, members: Collection[str], holders: Mapping[int, str]) -> dict[int, str]:
    """Who should own each shard: ``{shard: member}`` for every shard, or {} without members.

    ``members`` are the live members' identities; ``holders`` maps a shard to the identity its
    lease names now ("" or absent: nobody). Every replica that sees the same two inputs gets
    the same answer:

    - quotas: ``shards // n`` each, and one more for the ``shards % n`` members that hold the
      most shards now (ties by identity), so a join or a leave moves as few shards as it can;
    - a shard stays with its holder while the holder is live and within its quota, lowest
      shards first;
    - every other shard goes, lowest first, to the members still under quota, in the order
      of the quotas' ranking.
    """
    ranked = _ranked(members, holders)
    if not ranked:
        return {}
    base, extra = divmod(shards, len(ranked))
    quota = {member: base + (1 if index < extra else 0) for index, member in enumerate(ranked)}
    owner: dict[int, str] = {}
    taken = dict.fromkeys(ranked, 0)
    for shard in range(shards):
        holder = holders.get(shard, "")
        if holder in quota and taken[holder] < quota[holder]:
            owner[shard] = holder
            taken[holder] += 1
    waiting = (member for member in ranked for _ in range(quota[member] - taken[member]))
    for shard in range(shards):
        if shard not in owner:
            owner[shard] = next(waiting)
    return owner


def _ranked(members: Collection[str], holders: Mapping[int, str]) -> Sequence[str]:
    held = dict.fromkeys(members, 0)
    for holder in holders.values():
        if holder in held:
            held[holder] += 1
    return sorted(held, key=lambda member: (-held[member], member))
