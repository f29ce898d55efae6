"""Deleting a namespace full of converged resources, while memop runs, is no error and no RBAC problem.

The three controllers run in one memop; a namespace holds 30 Memcacheds, 10 PodSets and 10
MyPods, converged; the namespace is deleted and waited for until gone. Its deletion deletes
their children, which wakes their reconciles: memop must not try to put them back as failures
to retry, nor send Events there as permission problems (issue 25, item 6: 10,810 ERROR lines
from reconciles and 14,456 from Events at 10,000 Memcacheds). What memop logged meanwhile is
counted: no warning or error about the namespace, at most one line saying it is being deleted
(or gone), no traceback, no reconcile error counted; and memop still works: a Memcached in
another namespace converges after. Runs unchanged against a real cluster
(USE_EXISTING_CLUSTER=true).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any

import pytest
from prometheus_client import REGISTRY

from memop.builtin import PROJECT
from memop.memcached.api import MEMCACHEDS
from memop.mypod.api import MYPODS
from memop.podset.api import PODSETS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import NAMESPACES
from memop.testing.memcached import converged, memcached_manifest
from memop.testing.operator import event_recorded, release_finalizers
from memop.testing.plugin import NAMESPACE_PREFIX, RunOperator
from memop.testing.wait import wait_for

TIMEOUT = 120
MEMCACHED_COUNT, PODSET_COUNT, MYPOD_COUNT = 30, 10, 10
PODSET_REPLICAS = 2
POD_SPEC = {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    status = obj.get("status") or {}
    return status.get("observedGeneration") == obj["metadata"].get("generation") and any(
        c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or []
    )


def memcached_converged(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return (
        condition_true(obj, "Available")
        and status.get("readyReplicas") == 1
        and len(status.get("nodes") or []) == 1
    )


def podset_converged(obj: dict[str, Any]) -> bool:
    return condition_true(obj, "Available") and len(obj["status"].get("podNames") or []) == PODSET_REPLICAS


def mypod_converged(obj: dict[str, Any]) -> bool:
    return condition_true(obj, "Ready") and bool(obj["status"].get("podIp"))


async def all_converged(client: Client, namespace: str) -> bool:
    """Whether every resource of the three kinds in ``namespace`` is converged (one LIST each)."""
    for resource, count, done in (
        (MEMCACHEDS, MEMCACHED_COUNT, memcached_converged),
        (PODSETS, PODSET_COUNT, podset_converged),
        (MYPODS, MYPOD_COUNT, mypod_converged),
    ):
        items, _ = await client.list_all(resource, namespace)
        if len(items) != count or not all(done(item) for item in items):
            return False
    return True


async def namespace_gone(client: Client, name: str) -> bool:
    try:
        await client.get(NAMESPACES, name)
    except NotFound:
        return True
    return False


def errors_counted() -> dict[str, float]:
    return {
        name: REGISTRY.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": name})
        or 0.0
        for name in PROJECT.controller_names
    }


def operator_records(caplog: pytest.LogCaptureFixture, since: int) -> list[logging.LogRecord]:
    """What memop logged from record ``since`` on; the in-memory server's own lines left out."""
    return [
        r
        for r in caplog.records[since:]
        if r.name.startswith("memop") and not r.name.startswith("memop.testing")
    ]


async def test_deleting_a_namespace_of_converged_resources_is_neither_an_error_nor_an_rbac_problem(
    client: Client, namespace: str, run_operator: RunOperator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memop")
    doomed = f"{NAMESPACE_PREFIX}doomed-{uuid.uuid4().hex[:8]}"
    await client.create(NAMESPACES, {"metadata": {"name": doomed}})
    try:
        async with run_operator(PROJECT, namespaces=[doomed, namespace]) as operator:
            for i in range(MEMCACHED_COUNT):
                await client.create(MEMCACHEDS, memcached_manifest(f"mc-{i}", size=1), doomed)
            for i in range(PODSET_COUNT):
                podset = {"metadata": {"name": f"set-{i}"}, "spec": {"replicas": PODSET_REPLICAS}}
                await client.create(PODSETS, podset, doomed)
            for i in range(MYPOD_COUNT):
                await client.create(
                    MYPODS, {"metadata": {"name": f"single-{i}"}, "spec": {"podSpec": POD_SPEC}}, doomed
                )
            await wait_for(lambda: all_converged(client, doomed), timeout=TIMEOUT)

            since = len(caplog.records)
            errors_before = errors_counted()
            await client.delete(NAMESPACES, doomed)
            await wait_for(lambda: namespace_gone(client, doomed), timeout=TIMEOUT)

            # Still healthy: a new resource elsewhere converges, and its Event is sent. The
            # Finalizing Events of the deleted Memcacheds were recorded before it, by the same
            # recorder: once it is there, they have all had their turn.
            await client.create(MEMCACHEDS, memcached_manifest("after", size=1), namespace)
            await wait_for(lambda: converged(client, namespace, "after", 1), timeout=TIMEOUT)
            await event_recorded(
                client,
                namespace,
                lambda e: e["involvedObject"].get("name") == "after" and e["reason"] == "Created",
                TIMEOUT,
            )
            operator.check()
            errors_after = errors_counted()
        records = operator_records(caplog, since)  # with the lines of its shutdown
    finally:
        for resource in (MEMCACHEDS, PODSETS, MYPODS):
            with contextlib.suppress(NotFound):
                await release_finalizers(client, resource, doomed)
        with contextlib.suppress(NotFound):
            await client.delete(NAMESPACES, doomed)

    about_it = [f"{r.levelname} {r.name}: {r.getMessage()}" for r in records if doomed in r.getMessage()]
    loud = [line for line in about_it if not line.startswith(("INFO", "DEBUG"))]
    assert loud == [], "\n".join(loud[:20])
    deleted_lines = [
        line
        for line in about_it
        if f"namespace {doomed} is being deleted" in line or f"namespace {doomed} is gone" in line
    ]
    assert len(deleted_lines) <= 1, deleted_lines
    assert [r.getMessage() for r in records if r.exc_info] == []
    assert errors_after == errors_before
