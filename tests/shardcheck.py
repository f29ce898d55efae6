"""The sharding invariant for Memcacheds, checked from what the API server saw: every write a
``--sharding`` replica sent for a Memcached or its Deployment arrived while that replica held the
Memcached's shard (the ring's shard of its uid). For the tests of sharded memop
(tests/e2e/test_manager_sharding.py, tests/chaos/test_chaos_sharded.py); the generic pieces are
:mod:`memop.testing.apiserver.shardholding`'s.

What the server saw is the in-memory server's request log, or on a real cluster kube-apiserver's
audit log, when :data:`AUDIT_LOG_ENV` names it (:func:`requests_in`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from memop.runtime.sharding.ring import Ring
from memop.testing.apiserver.requestlog import RequestRecord, records_from_audit_events
from memop.testing.apiserver.shardholding import holdings, writes_outside_holdings
from memop.testing.envtest import Kube

# kube-apiserver's audit log on a real cluster: its --audit-log-path, written with
# --audit-log-format=json by a policy that logs writes to Leases, Memcacheds (and their status)
# and Deployments at level Metadata or above.
AUDIT_LOG_ENV = "KUBE_AUDIT_LOG"
NO_AUDIT_LOG = (
    f"who wrote what on a real cluster comes from kube-apiserver's audit log: set {AUDIT_LOG_ENV} "
    "to its --audit-log-path (--audit-log-format=json; writes to leases, memcacheds and "
    "deployments logged at level Metadata) to check it"
)

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

    held = holdings(records, lease_namespace)
    assert held, (
        f"no shard Lease in {lease_namespace} was taken as far as the log shows (are Lease updates logged?)"
    )
    problems, checked = writes_outside_holdings(records, held, shard_of, agent_prefix="memop/")
    assert not problems, "\n".join(problems[:10])
    return checked


def requests_in(kube: Kube, namespace: str) -> list[RequestRecord] | None:
    """The requests the test's cluster has answered so far in ``namespace``, in arrival order:
    the in-memory server's log, or on a real cluster the audit log :data:`AUDIT_LOG_ENV` names
    (only its lines that mention ``namespace`` are parsed: a shared cluster's log is long);
    None on a real cluster without it (skip with :data:`NO_AUDIT_LOG`)."""
    if kube.server is not None:
        return sorted((r for r in kube.server.log if r.namespace == namespace), key=lambda r: r.time)
    path = os.environ.get(AUDIT_LOG_ENV)
    if not path:
        return None
    with open(path, encoding="utf-8") as lines:
        records = records_from_audit_events(line for line in lines if namespace in line)
    return [r for r in records if r.namespace == namespace]
