"""The MyPod operator end to end: MyPods in, pods, status and Events out.

Runs on the in-memory API server (its kubelets make pods Running with IPs; pods are deleted at
once) and, unchanged, on a real cluster (USE_EXISTING_CLUSTER=true), where a deleted pod
lingers until its kubelet has stopped it. A finalizer the test puts on a pod makes it linger
on both, so what memop does meanwhile is seen on both.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from memop import mypod
from memop.mypod.api import MYPODS
from memop.mypod.crd import crd
from memop.mypod.desired import LABEL
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import PODS
from memop.runtime.controller.reconcile import Request
from memop.testing.envtest import Kube
from memop.testing.operator import RunningOperator, event_recorded, install_crd
from memop.testing.wait import wait_for

TIMEOUT = 30
HOLD = "e2e.memop.test/hold"
POD_SPEC: dict[str, Any] = {
    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
    "terminationGracePeriodSeconds": 0,
}


@pytest.fixture
async def operator(kube: Kube, client: Client, namespace: str) -> AsyncIterator[RunningOperator]:
    """memop running only the mypod controller, watching the test's namespace."""
    await install_crd(client, crd())
    # As its ServiceAccount with the RBAC its manifests grant: a request they lack is a 403.
    running = RunningOperator(
        kube.configuration, namespaces=[namespace], controllers=mypod.DEFINITION, rbac=True
    )
    await running.start()
    yield running
    await running.stop()


def manifest(name: str, pod_spec: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": MYPODS.api_version,
        "kind": MYPODS.kind,
        "metadata": {"name": name},
        "spec": {"podSpec": copy.deepcopy(pod_spec or POD_SPEC), **spec},
    }


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return {}


async def get_or_none(client: Client, resource: Any, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return await client.get(resource, name, namespace)
    except NotFound:
        return None


async def reported(client: Client, namespace: str, name: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The MyPod and its pod once the MyPod's status describes that pod, Running and ready,
    for the MyPod's current generation."""
    cr = await client.get(MYPODS, name, namespace)
    pod = await get_or_none(client, PODS, name, namespace)
    if pod is None or pod["metadata"].get("deletionTimestamp"):
        return None
    status, pod_status = cr.get("status") or {}, pod.get("status") or {}
    created = int(datetime.fromisoformat(pod["metadata"]["creationTimestamp"]).timestamp())
    ok = (
        status.get("observedGeneration") == cr["metadata"]["generation"]
        and condition(cr, "Ready").get("status") == "True"
        and condition(cr, "Degraded").get("status") == "False"
        and status.get("podPhase") == pod_status.get("phase") == "Running"
        and status.get("podIp") == pod_status.get("podIP")
        and status.get("nodeIp") == pod_status.get("hostIP")
        and status.get("createdTimestamp") == created
    )
    return (cr, pod) if ok else None


async def degraded(client: Client, namespace: str, name: str, reason: str) -> dict[str, Any] | None:
    cr = await client.get(MYPODS, name, namespace)
    c = condition(cr, "Degraded")
    ok = c.get("status") == "True" and c.get("reason") == reason
    return cr if ok and c.get("observedGeneration") == cr["metadata"]["generation"] else None


async def gone(client: Client, resource: Any, name: str, namespace: str) -> bool:
    return await get_or_none(client, resource, name, namespace) is None


async def release(client: Client, namespace: str, name: str) -> None:
    """Drop the test's finalizer from a pod (a real cluster keeps its namespace otherwise)."""
    with contextlib.suppress(NotFound):
        await client.patch(PODS, name, {"metadata": {"finalizers": None}}, namespace)


async def test_status_follows_the_pod_which_goes_with_the_mypod(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(MYPODS, manifest("web", podLabels={"app": "web"}), namespace)
    cr, pod = await wait_for(lambda: reported(client, namespace, "web"), timeout=TIMEOUT)
    assert pod["metadata"]["labels"] == {"app": "web", LABEL: "web"}
    (owner,) = pod["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("MyPod", cr["metadata"]["uid"], True)
    # Someone deletes the pod: memop creates another, and the status follows it.
    await client.delete(PODS, "web", namespace)

    async def new_pod_reported() -> bool:
        found = await reported(client, namespace, "web")
        return found is not None and found[1]["metadata"]["uid"] != pod["metadata"]["uid"]

    await wait_for(new_pod_reported, timeout=TIMEOUT)
    await event_recorded(client, namespace, lambda e: e["reason"] == "Created", TIMEOUT)
    await client.delete(MYPODS, "web", namespace)
    await wait_for(lambda: gone(client, PODS, "web", namespace), timeout=TIMEOUT)
    # Deleted and created again at once: the new one waits for the garbage collector.
    await client.create(MYPODS, manifest("db"), namespace)
    _, first = await wait_for(lambda: reported(client, namespace, "db"), timeout=TIMEOUT)
    await client.delete(MYPODS, "db", namespace)
    await client.create(MYPODS, manifest("db"), namespace)

    async def owned_by_the_new_one() -> bool:
        found = await reported(client, namespace, "db")
        return found is not None and found[1]["metadata"]["uid"] != first["metadata"]["uid"]

    await wait_for(owned_by_the_new_one, timeout=TIMEOUT)


async def test_a_pod_spec_change_replaces_the_pod_and_so_does_a_labels_change(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    labelled = manifest("app", podLabels={"keep": "1", "drop": "1"}, podAnnotations={"note": "a"})
    await client.create(MYPODS, labelled, namespace)
    _, old = await wait_for(lambda: reported(client, namespace, "app"), timeout=TIMEOUT)
    # The old pod lingers (as a real kubelet keeps a pod while it stops it) until released.
    await client.patch(PODS, "app", {"metadata": {"finalizers": [HOLD]}}, namespace)
    try:
        changed = copy.deepcopy(POD_SPEC)
        changed["containers"][0]["env"] = [{"name": "VERSION", "value": "2"}]
        await client.patch(MYPODS, "app", {"spec": {"podSpec": changed}}, namespace)

        async def replacing() -> dict[str, Any] | None:
            cr = await client.get(MYPODS, "app", namespace)
            ready = condition(cr, "Ready")
            ok = cr["status"].get("observedGeneration") == 2 and ready.get("reason") == "Replacing"
            return cr if ok else None

        cr = await wait_for(replacing, timeout=TIMEOUT)
        # Honest while the new pod cannot exist yet: no phase or IPs of the old one, not degraded.
        assert not {"podPhase", "podIp", "nodeIp", "createdTimestamp"} & set(cr["status"])
        assert condition(cr, "Ready")["status"] == "False"
        assert condition(cr, "Degraded")["status"] == "False"
        lingering = await client.get(PODS, "app", namespace)
        assert lingering["metadata"]["uid"] == old["metadata"]["uid"]
        assert lingering["metadata"]["deletionTimestamp"]
    finally:
        await release(client, namespace, "app")

    async def replaced(previous: dict[str, Any]) -> dict[str, Any] | None:
        found = await reported(client, namespace, "app")
        if found is None or found[1]["metadata"]["uid"] == previous["metadata"]["uid"]:
            return None
        return found[1]

    second = await wait_for(lambda: replaced(old), timeout=TIMEOUT)
    assert second["spec"]["containers"][0]["env"] == [{"name": "VERSION", "value": "2"}]
    await event_recorded(client, namespace, lambda e: e["message"].startswith("podSpec changed"), TIMEOUT)
    # Labels and annotations go with the pod too: memop may only create and delete pods.
    spec = {"podLabels": {"keep": "2", "drop": None}, "podAnnotations": {"note": "b"}}
    await client.patch(MYPODS, "app", {"spec": spec}, namespace)
    third = await wait_for(lambda: replaced(second), timeout=TIMEOUT)
    assert third["metadata"]["labels"] == {"keep": "2", LABEL: "app"}
    assert third["metadata"]["annotations"]["note"] == "b"
    await event_recorded(
        client, namespace, lambda e: e["message"].startswith("podLabels or podAnnotations changed"), TIMEOUT
    )


async def test_an_invalid_pod_spec_is_degraded_until_the_spec_is_fixed(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(MYPODS, manifest("bad", {"containers": [{"name": "main"}]}), namespace)
    cr = await wait_for(lambda: degraded(client, namespace, "bad", "PodInvalid"), timeout=TIMEOUT)
    message = condition(cr, "Degraded")["message"]
    assert "spec.containers[0].image: Required value" in message  # the API server's words
    event = await event_recorded(client, namespace, lambda e: e["reason"] == "PodInvalid", TIMEOUT)
    assert (event["type"], event["message"]) == ("Warning", message)
    assert await gone(client, PODS, "bad", namespace)
    # Reconciling the same generation again does not send the pod the server refused.
    controller = operator.controllers["mypod"]
    reconciles = controller.stats.reconciles
    controller.queue.add(Request(namespace, "bad"))
    await wait_for(lambda: controller.stats.reconciles > reconciles and not controller.stats.in_flight)
    if kube.server is not None:
        creates = kube.server.log.filter(user_agent=operator.user_agent, verb="create", resource="pods")
        assert len(creates) == 1
    # A type error: a real API server cannot decode it (400), the in-memory one refuses it (422).
    await client.patch(MYPODS, "bad", {"spec": {"podSpec": {"containers": "main"}}}, namespace)
    cr = await wait_for(lambda: degraded(client, namespace, "bad", "PodInvalid"), timeout=TIMEOUT)
    assert condition(cr, "Degraded")["message"] != message
    await client.patch(MYPODS, "bad", {"spec": {"podSpec": POD_SPEC}}, namespace)
    await wait_for(lambda: reported(client, namespace, "bad"), timeout=TIMEOUT)


async def test_a_pod_it_does_not_control_is_reported_not_taken_over(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    foreign = {"metadata": {"name": "taken", "labels": {"app": "other"}}, "spec": POD_SPEC}
    theirs = await client.create(PODS, foreign, namespace)
    await client.create(MYPODS, manifest("taken"), namespace)
    cr = await wait_for(lambda: degraded(client, namespace, "taken", "PodConflict"), timeout=TIMEOUT)
    assert "Pod taken" in condition(cr, "Degraded")["message"]
    assert condition(cr, "Ready")["status"] == "False"
    await event_recorded(
        client, namespace, lambda e: (e["reason"], e["type"]) == ("PodConflict", "Warning"), TIMEOUT
    )
    pod = await client.get(PODS, "taken", namespace)
    assert pod["metadata"]["uid"] == theirs["metadata"]["uid"]
    assert pod["metadata"]["labels"] == {"app": "other"}
    assert not pod["metadata"].get("ownerReferences")
    # Once it is gone, the recheck (every BLOCKED_RECHECK_SECONDS; here at once) creates ours.
    await client.delete(PODS, "taken", namespace)
    await wait_for(lambda: gone(client, PODS, "taken", namespace), timeout=TIMEOUT)
    operator.controllers["mypod"].queue.add(Request(namespace, "taken"))
    await wait_for(lambda: reported(client, namespace, "taken"), timeout=TIMEOUT)


async def test_the_tutorials_sample_makes_its_pod(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    sample = mypod.SAMPLE | {"metadata": {"name": "mypod-sample", "namespace": namespace}}
    await client.create(MYPODS, sample, namespace)

    async def pod_reported() -> dict[str, Any] | None:
        cr = await client.get(MYPODS, "mypod-sample", namespace)
        pod = await get_or_none(client, PODS, "mypod-sample", namespace)
        if pod is None or (cr.get("status") or {}).get("podPhase") != pod["status"].get("phase"):
            return None
        return pod

    pod = await wait_for(pod_reported, timeout=TIMEOUT)
    assert pod["metadata"]["labels"] == {"sym-app": "mypod", LABEL: "mypod-sample"}
    assert pod["spec"]["nodeSelector"] == {"project": "test"}
    assert pod["metadata"]["annotations"]["v2-vpc"] == "6af350be-c456-44bc-909d-4b92c48b3b54"


# -- the in-memory server only: exact request accounting --------------------------------------


async def test_a_converged_mypod_costs_no_request(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    server = kube.fake
    await client.create(MYPODS, manifest("lean"), namespace)
    await wait_for(lambda: reported(client, namespace, "lean"), timeout=TIMEOUT)
    writes = [
        (r.verb, r.resource, r.subresource)
        for r in server.log.filter(user_agent=operator.user_agent)
        if r.verb in ("create", "update", "patch", "delete") and r.resource != "events"
    ]
    # The pod, then one status write per state it reported (Pending, scheduled, Running).
    assert writes[0] == ("create", "pods", "")
    assert set(writes[1:]) == {("patch", "mypods", "status")}
    assert len(writes) <= 4, writes
    controller = operator.controllers["mypod"]
    before = len(server.log.filter(user_agent=operator.user_agent))
    reconciles = controller.stats.reconciles
    for _ in range(3):
        controller.queue.add(Request(namespace, "lean"))
        await wait_for(lambda: not controller.stats.in_flight and len(controller.queue) == 0)
    await wait_for(lambda: controller.stats.reconciles >= reconciles + 1)
    assert len(server.log.filter(user_agent=operator.user_agent)) == before
