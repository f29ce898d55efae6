"""Shard keys: how an object of a watched resource maps to a shard of the ring.

- :data:`BY_UID`: the object's own uid, hashed by the server (``shardSelector`` on
  ``object.metadata.uid``). The key of the objects a controller is *for*: the most even split.
- :data:`BY_NAMESPACE`: its namespace (``object.metadata.namespace``). Every object of a
  namespace lands on one replica: children in their owner's namespace follow it without any
  label, but the split is only as even as the namespaces are many and alike.
- :data:`BY_OWNER_BUCKET`: the owner's bucket in the label
  :data:`~memop.runtime.sharding.ring.BUCKET_LABEL`, which controllers put on the children they
  create (:meth:`memop.runtime.cache.cache.Cache.shard_labels`). Children follow their owner's uid
  and the split is as even as the owners'; the API server filters them by label selector, which
  every server honours. A child without the label is in no shard.

A key gives both what to ask the server for (a shard selector, or a label requirement) and the
check every replica makes itself on what arrives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memop.runtime.cache.labels import IN, Requirement
from memop.runtime.sharding.ring import BUCKET_LABEL, BUCKETS, Ring
from memop.runtime.sharding.selector import NAMESPACE, UID, fnv1a_64, render_selector

__all__ = ["BY_NAMESPACE", "BY_OWNER_BUCKET", "BY_UID", "ShardKey"]


@dataclass(frozen=True)
class ShardKey:
    """One way to map objects to shards; use the module's three constants."""

    name: str
    field: str | None = None  # the server-side field, for uid and namespace keys

    @property
    def needs_server_gate(self) -> bool:
        """Whether the server filters by this key only with ShardedListAndWatch on."""
        return self.field is not None

    def shard_of(self, ring: Ring, obj: Any) -> int | None:
        """The shard ``obj`` belongs to; None when it has no key (a child without the label)."""
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict):
            return None
        if self.field == UID:
            uid = meta.get("uid")
            return ring.shard_of(fnv1a_64(uid)) if isinstance(uid, str) and uid else None
        if self.field == NAMESPACE:
            namespace = meta.get("namespace")
            return ring.shard_of(fnv1a_64(namespace if isinstance(namespace, str) else ""))
        labels = meta.get("labels")
        value = labels.get(BUCKET_LABEL) if isinstance(labels, dict) else None
        if not isinstance(value, str) or not value.isdigit() or int(value) >= BUCKETS:
            return None
        return ring.shard_of_bucket(int(value))

    def shard_selector(self, ring: Ring, shard: int) -> str | None:
        """The ``shardSelector`` for ``shard``, or None for a label key."""
        if self.field is None:
            return None
        return render_selector(self.field, [ring.range_of(shard)])

    def label_requirement(self, ring: Ring, shard: int) -> Requirement | None:
        """The label requirement selecting ``shard``'s objects, or None for a field key."""
        if self.field is not None:
            return None
        return Requirement.new(BUCKET_LABEL, IN, [str(b) for b in ring.buckets_of(shard)])


BY_UID = ShardKey("uid", UID)
BY_NAMESPACE = ShardKey("namespace", NAMESPACE)
BY_OWNER_BUCKET = ShardKey("owner-bucket")
