"""The running operator under failure: conflicts, repeated failures, and a deletion held by
another finalizer. (Creation, scaling, drift, 500s, 403s on Deployments and invalid specs are in
test_memcached_operator.py; single reconciles are in tests/memcached/test_controller.py.)
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

from memop.memcached.api import FINALIZER, MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import DEPLOYMENTS, EVENTS
from memop.testing.envtest import Kube
from memop.testing.memcached import converged, memcached_manifest
from memop.testing.operator import RunningOperator, event_recorded
from memop.testing.wait import wait_for

TIMEOUT = 30
OTHER_FINALIZER = "example.com/other"


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return {}


async def test_conflicts_are_retried_promptly_without_error_logs(
    kube: Kube,
    client: Client,
    namespace: str,
    operator: RunningOperator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = kube.fake
    caplog.set_level(logging.INFO)
    rule = server.faults.fail(409, times=3, verb="patch", resource="memcacheds", subresource="")
    await client.create(MEMCACHEDS, memcached_manifest("busy", size=1), namespace)
    cr = await wait_for(lambda: converged(client, namespace, "busy", 1), timeout=TIMEOUT)
    assert rule.hits == 3
    assert FINALIZER in cr["metadata"]["finalizers"]
    memop = [r for r in caplog.records if r.name.startswith("memop")]
    assert [r.getMessage() for r in memop if r.levelno >= logging.WARNING] == []
    assert sum("conflict, will retry" in r.getMessage() for r in memop) == 3
    assert operator.controller.stats.errors == 0
    assert condition(cr, "Degraded")["status"] == "False"
    # Promptly: each retry follows its 409 within the workqueue's first backoff steps, not
    # after a resync or a long error backoff.
    patches = server.log.filter(
        user_agent=operator.user_agent, verb="patch", resource="memcacheds", subresource=""
    )
    times = [r.time for r in patches]
    assert [r.status for r in patches][:4] == [409, 409, 409, 200]
    assert max(b - a for a, b in itertools.pairwise(times[:4])) < 1.0


async def test_a_failure_that_repeats_is_one_event_with_a_count(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    server = kube.fake
    server.faults.forbid(verb="create", resource="deployments")
    await client.create(MEMCACHEDS, memcached_manifest("denied", size=1), namespace)

    async def counted() -> list[dict[str, Any]] | None:
        events, _ = await client.list_all(EVENTS, namespace)
        forbidden = [e for e in events if e["reason"] == "Forbidden"]
        return forbidden if forbidden and forbidden[0].get("count", 1) >= 3 else None

    [event] = await wait_for(counted, timeout=TIMEOUT)
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "denied"
    assert event["lastTimestamp"] >= event["firstTimestamp"]
    server.faults.clear()
    await wait_for(lambda: converged(client, namespace, "denied", 1), timeout=TIMEOUT)


async def test_deletion_held_by_another_finalizer_shows_finalizing(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(
        MEMCACHEDS, memcached_manifest("held", finalizers=[OTHER_FINALIZER], size=1), namespace
    )
    await wait_for(lambda: converged(client, namespace, "held", 1), timeout=TIMEOUT)
    await client.delete(MEMCACHEDS, "held", namespace)

    async def finalized() -> dict[str, Any] | None:
        cr = await client.get(MEMCACHEDS, "held", namespace)
        degraded = condition(cr, "Degraded")
        done = (
            cr["metadata"].get("finalizers") == [OTHER_FINALIZER] and degraded.get("reason") == "Finalizing"
        )
        return cr if done else None

    cr = await wait_for(finalized, timeout=TIMEOUT)
    degraded = condition(cr, "Degraded")
    assert degraded["status"] == "True"
    assert FINALIZER in degraded["message"]
    assert degraded["observedGeneration"] == cr["metadata"]["generation"]
    await event_recorded(
        client, namespace, lambda e: (e["reason"], e["type"]) == ("Finalizing", "Warning"), TIMEOUT
    )
    # The other finalizer's owner finishes; then the Deployment goes with garbage collection.
    await client.patch(MEMCACHEDS, "held", {"metadata": {"finalizers": None}}, namespace)

    async def gone() -> bool:
        for resource in (MEMCACHEDS, DEPLOYMENTS):
            try:
                await client.get(resource, "held", namespace)
                return False
            except NotFound:
                pass
        return True

    await wait_for(gone, timeout=TIMEOUT)
