"""The sharding invariant for Memcacheds, checked from the in-memory server's request log: every
write a ``--sharding`` replica sent for a Memcached or its Deployment arrived while that replica
held the Memcached's shard (the ring's shard of its uid). For the tests of sharded memop
(tests/e2e/test_manager_sharding.py, tests/chaos/test_chaos_sharded.py); the generic pieces are
:mod:`memop.testing.shardholding`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from memop.runtime.sharding.ring import Ring
from memop.testing.requestlog import RequestRecord
from memop.testing.shardholding import holdings, writes_outside_holdings

# What memop writes for a Memcached: the Memcached (finalizer), its status, its Deployment (named
# as the Memcached).
MANAGED = frozenset({("memcacheds", ""), ("memcacheds", "status"), ("deployments", "")})


def check_memcached_writes_inside_holdings(
    log: Iterable[RequestRecord], uids: Mapping[tuple[str, str], str], *, shards: int, lease_namespace: str
) -> int:
    """Assert that memop's writes to the Memcacheds ``uids`` names ((namespace, name) → uid) and
    to their Deployments all arrived while their sender held the Memcached's shard (holdings read
    from the shard Leases in ``lease_namespace``); return how many writes were checked."""
    ring = Ring(shards)
    records = sorted(log, key=lambda r: r.time)

    def shard_of(record: RequestRecord) -> int | None:
        uid = uids.get((record.namespace, record.name))
        managed = (record.resource, record.subresource) in MANAGED
        return ring.shard_of_value(uid) if managed and uid is not None else None

    problems, checked = writes_outside_holdings(
        records, holdings(records, lease_namespace), shard_of, agent_prefix="memop/"
    )
    assert not problems, "\n".join(problems[:10])
    return checked
