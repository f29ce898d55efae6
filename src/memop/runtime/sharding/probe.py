"""Whether the API server filters lists and watches by ``shardSelector``.

A kube-apiserver v1.36 with the ShardedListAndWatch feature gate answers a built-in kind's list
that carries a shard selector with ``metadata.shardInfo``; without the gate it ignores the
parameter silently (even a malformed one), so its answer is the only way to tell.
"""

from __future__ import annotations

from memop.runtime.client.client import Client
from memop.runtime.client.resources import LEASES
from memop.runtime.sharding.selector import HASH_SPACE, UID, ShardRange, render_selector

__all__ = ["server_filters_by_shard_selector"]


async def server_filters_by_shard_selector(client: Client, namespace: str) -> bool:
    """Ask with one Lease list in ``namespace`` (the whole hash space, at most one item).
    API and transport errors propagate."""
    selector = render_selector(UID, [ShardRange(0, HASH_SPACE)])
    listed = await client.list(LEASES, namespace, limit=1, shard_selector=selector)
    return isinstance((listed.get("metadata") or {}).get("shardInfo"), dict)
