"""The PodSet operator end to end: PodSets in, pods, status, Events and garbage collection out.

Runs on the in-memory server and, unchanged, on a real cluster (USE_EXISTING_CLUSTER=true),
where deleted pods linger terminating for a while: only the pods that count (Pending or
Running, not terminating) are compared with ``spec.replicas``. The tests that need fault
injection or the server's request log skip on a real cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from memop import podset
from memop.podset.api import PODSETS
from memop.podset.controller import instance_selector
from memop.podset.crd import crd
from memop.podset.desired import INSTANCE_LABEL, is_active
from memop.runtime.client.client import Client
from memop.runtime.client.errors import Invalid, NotFound
from memop.runtime.client.resources import PODS
from memop.runtime.controller.reconcile import Request
from memop.testing.apiserver.store import StoreEvent
from memop.testing.envtest import Kube
from memop.testing.operator import RunningOperator, event_recorded, install_crd
from memop.testing.wait import wait_for

TIMEOUT = 30


@pytest.fixture
async def operator(kube: Kube, client: Client, namespace: str) -> AsyncIterator[RunningOperator]:
    """memop running the podset controller only, watching the test's namespace."""
    await install_crd(client, crd())
    # As its ServiceAccount with the RBAC its manifests grant: a request they lack is a 403.
    running = RunningOperator(
        kube.configuration, namespaces=[namespace], controllers=podset.DEFINITION, rbac=True
    )
    await running.start()
    yield running
    await running.stop()


def manifest(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": PODSETS.api_version, "kind": PODSETS.kind, "metadata": {"name": name}, "spec": spec}


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return {}


async def active_pods(client: Client, namespace: str, name: str) -> list[dict[str, Any]]:
    pods, _ = await client.list_all(PODS, namespace, label_selector=f"{INSTANCE_LABEL}={name}")
    return [p for p in pods if is_active(p)]


async def converged(client: Client, namespace: str, name: str, replicas: int) -> dict[str, Any] | None:
    """The PodSet once its status is current and says ``replicas`` pods, all Ready, and exactly
    those pods exist."""
    try:
        cr = await client.get(PODSETS, name, namespace)
    except NotFound:
        return None
    status = cr.get("status") or {}
    names = sorted(p["metadata"]["name"] for p in await active_pods(client, namespace, name))
    ok = (
        status.get("observedGeneration") == cr["metadata"]["generation"]
        and len(names) == replicas
        and status.get("podNames") == names
        and status.get("readyReplicas") == replicas
        and condition(cr, "Available").get("status") == "True"
        and condition(cr, "Degraded").get("status") == "False"
    )
    return cr if ok else None


async def test_create_scale_up_and_down_and_delete(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(PODSETS, manifest("ps", replicas=2), namespace)
    cr = await wait_for(lambda: converged(client, namespace, "ps", 2), timeout=TIMEOUT)
    assert condition(cr, "Progressing")["status"] == "False"
    for pod in await active_pods(client, namespace, "ps"):
        meta = pod["metadata"]
        assert meta["name"].startswith("ps-pod-")
        assert meta["labels"] == {INSTANCE_LABEL: "ps", "version": "v0.1"}
        [owner] = meta["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (
            "PodSet", cr["metadata"]["uid"], True, True
        )  # fmt: skip
        [container] = pod["spec"]["containers"]
        assert (container["image"], container["command"]) == ("busybox", ["sleep", "3600"])
    for replicas in (4, 1, 0, 2):
        await client.patch(PODSETS, "ps", {"spec": {"replicas": replicas}}, namespace)
        await wait_for(lambda r=replicas: converged(client, namespace, "ps", r), timeout=TIMEOUT)  # type: ignore[misc]
    for reason in ("SuccessfulCreate", "SuccessfulDelete"):
        await event_recorded(client, namespace, lambda e, r=reason: e["reason"] == r, TIMEOUT)  # type: ignore[misc]
    await client.delete(PODSETS, "ps", namespace)

    async def collected() -> bool:
        # On a real cluster the garbage collector deletes them gracefully: they may linger,
        # terminating (so no longer active), until their kubelet is done.
        return not await active_pods(client, namespace, "ps")

    await wait_for(collected, timeout=TIMEOUT)


async def test_a_pod_deleted_behind_its_back_is_replaced(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(PODSETS, manifest("heal", replicas=2), namespace)
    await wait_for(lambda: converged(client, namespace, "heal", 2), timeout=TIMEOUT)
    victim = (await active_pods(client, namespace, "heal"))[0]["metadata"]["name"]
    await client.delete(PODS, victim, namespace)

    async def replaced() -> dict[str, Any] | None:
        cr = await converged(client, namespace, "heal", 2)
        return cr if cr is not None and victim not in cr["status"]["podNames"] else None

    await wait_for(replaced, timeout=TIMEOUT)


async def test_the_template_makes_the_pods_and_one_the_server_refuses_degrades(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    with pytest.raises(Invalid, match=r'spec.template.spec.restartPolicy: Unsupported value: "Never"'):
        await client.create(
            PODSETS, manifest("never", template={"spec": {"restartPolicy": "Never"}}), namespace
        )
    bad = {"spec": {"containers": [{"name": "no-image"}]}}
    await client.create(PODSETS, manifest("bad", replicas=3, template=bad), namespace)

    async def degraded() -> dict[str, Any] | None:
        c = condition(await client.get(PODSETS, "bad", namespace), "Degraded")
        return c if c.get("reason") == "InvalidTemplate" else None

    c = await wait_for(degraded, timeout=TIMEOUT)
    assert "spec.containers[0].image: Required value" in c["message"]
    await event_recorded(
        client,
        namespace,
        lambda e: e["type"] == "Warning" and e["reason"] == "FailedCreate" and "image" in e["message"],
        TIMEOUT,
    )
    reconciles = operator.controller.stats.reconciles
    for _ in range(5):  # reconciles of the same generation do not try again
        operator.controller.queue.add(Request(namespace, "bad"))
        await wait_for(
            lambda: not operator.controller.stats.in_flight and len(operator.controller.queue) == 0
        )
    assert operator.controller.stats.reconciles - reconciles < 10
    assert not await active_pods(client, namespace, "bad")
    if kube.server is not None:  # one pod asked for (slow start), never again for this generation
        creates = kube.server.log.filter(user_agent=operator.user_agent, verb="create", resource="pods")
        assert len(creates) == 1
    fixed = {
        "metadata": {"labels": {"app": "web", INSTANCE_LABEL: "not-mine"}, "annotations": {"note": "hi"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27-alpine"}]},
    }
    await client.patch(PODSETS, "bad", {"spec": {"template": fixed}}, namespace)
    await wait_for(lambda: converged(client, namespace, "bad", 3), timeout=TIMEOUT)
    for pod in await active_pods(client, namespace, "bad"):
        assert pod["metadata"]["labels"] == {"app": "web", INSTANCE_LABEL: "bad"}
        assert pod["metadata"]["annotations"]["note"] == "hi"
        assert pod["spec"]["containers"][0]["image"] == "nginx:1.27-alpine"


# -- the in-memory server only: request accounting and fault injection ---------------------------


async def test_converged_costs_no_request_and_status_is_written_once_per_change(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    server = kube.fake
    statuses: list[Any] = []  # the PodSet's status after each change the server stored

    def on_change(event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        key = (meta.get("namespace"), meta["name"])
        ours = event.rtype.plural == "podsets" and key == (namespace, "lean")
        if ours and (not statuses or event.obj.get("status") != statuses[-1]):
            statuses.append(event.obj.get("status"))

    unsubscribe = server.store.subscribe(on_change)
    try:
        await client.create(PODSETS, manifest("lean", replicas=2), namespace)
        cr = await wait_for(lambda: converged(client, namespace, "lean", 2), timeout=TIMEOUT)
    finally:
        unsubscribe()
    writes = [
        (r.verb, r.resource, r.subresource)
        for r in server.log.filter(user_agent=operator.user_agent)
        if r.verb in ("create", "update", "patch", "delete") and r.resource != "events"
    ]
    assert writes[:2] == [("create", "pods", "")] * 2, writes
    status_writes = writes[2:]
    assert set(status_writes) == {("patch", "podsets", "status")}, writes
    # Each write changed the status: 2 pods Pending, then as many more as the pods became
    # Ready at distinct moments (how many depends on the kubelets' timing, not on memop).
    assert len(status_writes) == len(statuses) - 1, statuses  # the first is the PodSet as created
    assert cr["status"]["podNames"] == sorted(cr["status"]["podNames"])
    before = len(server.log.filter(user_agent=operator.user_agent))
    reconciles = operator.controller.stats.reconciles
    for _ in range(3):
        operator.controller.queue.add(Request(namespace, "lean"))
        await wait_for(
            lambda: not operator.controller.stats.in_flight and len(operator.controller.queue) == 0
        )
    assert operator.controller.stats.reconciles > reconciles
    assert len(server.log.filter(user_agent=operator.user_agent)) == before


def pod_counter(namespace: str, name: str) -> tuple[dict[str, Any], list[str]]:
    """A store subscriber that checks, at every pod the server creates for the PodSet, that no
    more pods count than ``spec.replicas`` says at that moment. Returns it, with the list of
    violations it fills in."""
    live: set[str] = set()
    state: dict[str, Any] = {"replicas": 0, "live": live}
    violations: list[str] = []

    def on_change(event: StoreEvent) -> None:
        meta = event.obj["metadata"]
        if meta.get("namespace") != namespace:
            return
        if event.rtype.plural == "podsets" and meta["name"] == name:
            state["replicas"] = (event.obj.get("spec") or {}).get("replicas", 1)
        elif event.rtype.plural == "pods" and (meta.get("labels") or {}).get(INSTANCE_LABEL) == name:
            if event.type == "DELETED" or not is_active(event.obj):
                live.discard(meta["uid"])
            else:
                live.add(meta["uid"])
            if event.type == "ADDED" and len(live) > state["replicas"]:
                violations.append(f"{len(live)} pods for replicas {state['replicas']} at {meta['name']}")

    state["on_change"] = on_change
    return state, violations


async def test_never_more_pods_than_replicas_while_the_pod_watch_is_slowed_or_dropped(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    server = kube.fake
    state, violations = pod_counter(namespace, "lag")
    unsubscribe = server.store.subscribe(state["on_change"])
    try:
        await client.create(PODSETS, manifest("lag", replicas=3), namespace)
        await wait_for(lambda: converged(client, namespace, "lag", 3), timeout=TIMEOUT)
        slow = server.faults.delay(0.2, verb="watch", resource="pods", user_agent=operator.user_agent)
        for replicas in (5, 2, 4, 1, 3):
            await server.drop_watches()
            await client.patch(PODSETS, "lag", {"spec": {"replicas": replicas}}, namespace)
            pod = next(iter(await active_pods(client, namespace, "lag")), None)
            if pod is not None:  # and one deleted behind its back
                with contextlib.suppress(NotFound):
                    await client.delete(PODS, pod["metadata"]["name"], namespace)
            for _ in range(20):
                operator.controller.queue.add(Request(namespace, "lag"))
                await asyncio.sleep(0)  # a yield, not a wait: memop reconciles meanwhile
        await wait_for(lambda: slow.hits > 0, timeout=TIMEOUT)  # memop's pod watch was held
        server.faults.clear()
        await wait_for(lambda: converged(client, namespace, "lag", 3), timeout=TIMEOUT)
    finally:
        unsubscribe()
    assert not violations
    assert len(state["live"]) == 3


async def test_forced_reconciles_while_the_cache_lags_make_no_extra_writes(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    server = kube.fake
    name = "force"
    await client.create(PODSETS, manifest(name, replicas=2), namespace)
    await wait_for(lambda: converged(client, namespace, name, 2), timeout=TIMEOUT)
    controller = operator.controller
    cache = operator.manager.cache

    def writes(verb: str) -> int:
        return len(server.log.filter(user_agent=operator.user_agent, verb=verb, resource="pods"))

    async def force(times: int) -> None:
        for _ in range(times):
            controller.queue.add(Request(namespace, name))
            await wait_for(lambda: not controller.stats.in_flight and len(controller.queue) == 0)

    def cached_active() -> int:
        return sum(1 for p in cache.list(PODS, namespace, selector=instance_selector(name)) if is_active(p))

    # memop's pod watch is cut and its next one held (ended below by a restart): from here its
    # cache learns of pods only from memop's own writes.
    server.faults.delay(60, times=1, verb="watch", resource="pods", user_agent=operator.user_agent)
    await server.drop_watches()
    creates, deletes = writes("create"), writes("delete")
    await client.patch(PODSETS, name, {"spec": {"replicas": 4}}, namespace)
    await wait_for(lambda: writes("create") == creates + 2, timeout=TIMEOUT)
    await force(20)
    assert writes("create") == creates + 2
    await client.patch(PODSETS, name, {"spec": {"replicas": 1}}, namespace)
    await wait_for(lambda: writes("delete") == deletes + 3, timeout=TIMEOUT)
    await force(20)
    assert writes("delete") == deletes + 3
    assert writes("create") == creates + 2
    assert cached_active() == 4  # the cache still shows the deleted pods: it did lag
    assert len(await active_pods(client, namespace, name)) == 1
    cr = await client.get(PODSETS, name, namespace)
    assert len(cr["status"]["podNames"]) == 1  # they are not counted
    await server.restart()  # ends the held watch: the cache catches up
    await wait_for(lambda: cached_active() == 1, timeout=TIMEOUT)
    await wait_for(lambda: converged(client, namespace, name, 1), timeout=TIMEOUT)
    assert (writes("create"), writes("delete")) == (creates + 2, deletes + 3)
