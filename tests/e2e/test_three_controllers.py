"""One memop runs the three controllers at once, each working on its own resources only.

A Memcached, a PodSet and a MyPod side by side in one namespace: each controller brings its
own to its desired state, none touches the others' pods, each has its own metrics and Event
source, and the manager's `--controllers` leaves a controller out entirely. Runs unchanged
against a real cluster (USE_EXISTING_CLUSTER=true).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from memop.builtin import PROJECT
from memop.memcached.api import MEMCACHEDS
from memop.mypod.api import MYPODS
from memop.mypod.desired import LABEL as MYPOD_LABEL
from memop.podset.api import PODSETS
from memop.podset.desired import INSTANCE_LABEL as PODSET_LABEL
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import PODS
from memop.testing.memcached import converged, memcached_manifest
from memop.testing.operator import RunningOperator, event_recorded
from memop.testing.plugin import RunOperator
from memop.testing.wait import wait_for

TIMEOUT = 60


@pytest.fixture
async def operator(
    run_operator: RunOperator, client: Client, namespace: str
) -> AsyncIterator[RunningOperator]:
    async with run_operator(PROJECT, namespaces=[namespace]) as running:
        yield running


def ready(obj: dict[str, Any], kind: str) -> bool:
    status = obj.get("status") or {}
    return status.get("observedGeneration") == obj["metadata"].get("generation") and any(
        c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or []
    )


async def live_pods(client: Client, namespace: str, selector: str) -> list[dict[str, Any]]:
    pods, _ = await client.list_all(PODS, namespace, label_selector=selector)
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def test_three_controllers_in_one_process_each_work_on_their_own_resources(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    assert set(operator.controllers) == {"memcached", "podset", "mypod"}
    await client.create(MEMCACHEDS, memcached_manifest("cache", size=2), namespace)
    await client.create(PODSETS, {"metadata": {"name": "set"}, "spec": {"replicas": 3}}, namespace)
    pod_spec = {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}
    await client.create(MYPODS, {"metadata": {"name": "single"}, "spec": {"podSpec": pod_spec}}, namespace)

    async def podset_ready() -> bool:
        obj = await client.get(PODSETS, "set", namespace)
        return ready(obj, "Available") and len(obj["status"]["podNames"]) == 3

    async def mypod_ready() -> bool:
        obj = await client.get(MYPODS, "single", namespace)
        return ready(obj, "Ready") and bool(obj["status"].get("podIp"))

    await wait_for(lambda: converged(client, namespace, "cache", 2), timeout=TIMEOUT)
    await wait_for(podset_ready, timeout=TIMEOUT)
    await wait_for(mypod_ready, timeout=TIMEOUT)

    # Each controller's pods are its own: the memcached pods are the Deployment's, the PodSet's
    # carry its label and no other controller's, and the MyPod's pod is the one named after it.
    memcached_pods = await live_pods(client, namespace, "app.kubernetes.io/instance=cache")
    podset_pods = await live_pods(client, namespace, f"{PODSET_LABEL}=set")
    mypod_pods = await live_pods(client, namespace, f"{MYPOD_LABEL}=single")
    assert len(memcached_pods) == 2
    assert len(podset_pods) == 3
    assert [p["metadata"]["name"] for p in mypod_pods] == ["single"]

    def owners(pods: list[dict[str, Any]]) -> set[str]:
        return {r["kind"] for p in pods for r in p["metadata"].get("ownerReferences") or []}

    assert (owners(memcached_pods), owners(podset_pods), owners(mypod_pods)) == (
        {"ReplicaSet"},
        {"PodSet"},
        {"MyPod"},
    )

    # Each has its own Event source and metrics.
    for kind, source in (("PodSet", "podset-controller"), ("MyPod", "mypod-controller")):
        await event_recorded(
            client,
            namespace,
            lambda e, kind=kind, source=source: (  # type: ignore[misc]
                e["involvedObject"]["kind"] == kind and (e.get("source") or {}).get("component") == source
            ),
            TIMEOUT,
        )
    for name in PROJECT.controller_names:
        reconciled = REGISTRY.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": name, "result": "success"}
        )
        assert reconciled, name

    # Deleting one controller's resource leaves the others' alone.
    await client.delete(PODSETS, "set", namespace)

    async def podset_pods_gone() -> bool:
        try:
            await client.get(PODSETS, "set", namespace)
        except NotFound:
            return not await live_pods(client, namespace, f"{PODSET_LABEL}=set")
        return False

    await wait_for(podset_pods_gone, timeout=TIMEOUT)
    assert len(await live_pods(client, namespace, "app.kubernetes.io/instance=cache")) == 2
    assert len(await live_pods(client, namespace, f"{MYPOD_LABEL}=single")) == 1
