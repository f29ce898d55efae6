"""The PodSet reconciler, one reconcile at a time, against the in-memory API server.

Each test drives ``PodSetReconciler.reconcile`` by hand over a real client and a real cache
(watches included), so every request it sends is in the server's request log. No simulated
controllers or kubelets run: a pod's phase changes only when a test writes it.

Also here: ``pod_transform``, ``owner_request`` and what ``setup`` declares.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.podset import DEFINITION
from memop.podset.api import PODSETS
from memop.podset.controller import (
    POD_SELECTOR,
    PodSetReconciler,
    declare_informers,
    instance_selector,
    owner_request,
    pod_transform,
)
from memop.podset.crd import crd
from memop.podset.desired import INSTANCE_LABEL, is_active
from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import resource_version
from memop.runtime.client.client import Client
from memop.runtime.client.errors import Forbidden
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, EVENTS, NAMESPACES, PODS
from memop.runtime.controller.definition import SetupContext
from memop.runtime.controller.expectations import EXPECTATIONS_TIMEOUT, Expectations
from memop.runtime.controller.reconcile import Request, Result
from memop.runtime.manager.events import EventRecorder
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.requestlog import RequestRecord
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import install_crd
from memop.testing.wait import wait_for

MEMOP = "memop-unit/podset"
NAME = "ps"


def manifest(name: str = NAME, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": PODSETS.api_version, "kind": PODSETS.kind, "metadata": {"name": name}, "spec": spec}


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


@dataclass
class Env:
    server: ApiServer
    client: Client  # the test's own
    cache: Cache
    recorder: EventRecorder
    expectations: Expectations[Request]
    reconciler: PodSetReconciler
    clock: FakeClock
    namespace: str

    async def synced(self) -> None:
        """Wait until memop's cache holds what the server holds in the namespace."""

        async def same() -> bool:
            for resource, selector in ((PODSETS, None), (PODS, INSTANCE_LABEL)):
                items, _ = await self.client.list_all(resource, self.namespace, label_selector=selector)
                cached = self.cache.list(resource, self.namespace, selector=selector)
                if {resource_version(i) for i in items} != {resource_version(o) for o in cached}:
                    return False
            return True

        await wait_for(same, timeout=10)

    async def reconcile(self, name: str = NAME) -> tuple[Result | None, list[tuple[str, str, str]]]:
        """One reconcile: its result and the writes it sent (Events aside)."""
        before = len(self.server.log)
        result = await self.reconciler.reconcile(Request(self.namespace, name))
        return result, writes(self.server.log.records[before:])

    async def pods(self, name: str = NAME) -> list[dict[str, Any]]:
        items, _ = await self.client.list_all(PODS, self.namespace, label_selector=f"{INSTANCE_LABEL}={name}")
        return items

    async def set_phase(self, pod: dict[str, Any], phase: str) -> None:
        name = pod["metadata"]["name"]
        await self.client.patch_status(PODS, name, {"status": {"phase": phase}}, self.namespace)

    async def events(self, reason: str) -> list[dict[str, Any]]:
        await self.recorder.flush()
        items, _ = await self.client.list_all(EVENTS, self.namespace)
        return [e for e in items if e["reason"] == reason]


def writes(records: list[RequestRecord]) -> list[tuple[str, str, str]]:
    return [
        (r.verb, r.resource, r.subresource)
        for r in records
        if r.user_agent.startswith(MEMOP)
        and r.verb not in ("get", "list", "watch")
        and r.resource != "events"
    ]


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with ApiServer() as server, ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="test")
        memop = Client(api, user_agent=MEMOP, max_retries=0)
        await install_crd(client, crd())
        namespace = f"unit-{uuid.uuid4().hex[:8]}"
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
        clock = FakeClock()
        cache = Cache(memop, namespaces=[namespace])
        expectations: Expectations[Request] = Expectations(clock=clock)
        declare_informers(cache, expectations)
        recorder = EventRecorder(memop, "podset-controller", clock=clock)
        recorder.start()
        await cache.start()
        assert await cache.wait_for_sync(10)
        reconciler = PodSetReconciler(memop, cache, recorder, expectations, clock)
        try:
            yield Env(server, client, cache, recorder, expectations, reconciler, clock, namespace)
        finally:
            await recorder.stop()
            await cache.stop()


async def test_a_new_podset_creates_its_pods_in_slow_start_batches_then_writes_nothing(env: Env) -> None:
    await env.client.create(PODSETS, manifest(replicas=3), env.namespace)
    await env.synced()
    result, sent = await env.reconcile()
    assert result is None
    assert sent == [("create", "pods", "")] * 3 + [("patch", "podsets", "status")]
    cr = await env.client.get(PODSETS, NAME, env.namespace)
    pods = await env.pods()
    assert cr["status"]["podNames"] == sorted(p["metadata"]["name"] for p in pods)
    assert cr["status"]["readyReplicas"] == 0
    assert len(await env.events("SuccessfulCreate")) == 3
    assert env.expectations.satisfied(Request(env.namespace, NAME))
    # Reconciled again before the watch brought anything: the cache has its own creates.
    assert await env.reconcile() == (None, [])
    await env.synced()
    assert await env.reconcile() == (None, [])


async def test_a_failed_pod_is_replaced_and_left_in_place(env: Env) -> None:
    await env.client.create(PODSETS, manifest(replicas=2), env.namespace)
    await env.synced()
    await env.reconcile()
    failed = (await env.pods())[0]
    await env.set_phase(failed, "Failed")
    await env.synced()
    _, sent = await env.reconcile()
    assert sent == [("create", "pods", ""), ("patch", "podsets", "status")]
    pods = await env.pods()
    assert len(pods) == 3
    assert failed["metadata"]["name"] in {p["metadata"]["name"] for p in pods}
    cr = await env.client.get(PODSETS, NAME, env.namespace)
    assert failed["metadata"]["name"] not in cr["status"]["podNames"]


async def test_scaling_down_deletes_pending_pods_first_and_counts_them_gone_at_once(env: Env) -> None:
    await env.client.create(PODSETS, manifest(replicas=3), env.namespace)
    await env.synced()
    await env.reconcile()
    pods = await env.pods()
    for pod in pods[:2]:
        await env.set_phase(pod, "Running")
    await env.client.patch(PODSETS, NAME, {"spec": {"replicas": 1}}, env.namespace)
    await env.synced()
    env.server.silence_watches(True)  # the cache will not see the deletions
    try:
        _, sent = await env.reconcile()
        assert sent == [("delete", "pods", "")] * 2 + [("patch", "podsets", "status")]
        remaining = [p["metadata"]["name"] for p in await env.pods()]
        assert remaining in ([pods[0]["metadata"]["name"]], [pods[1]["metadata"]["name"]])
        cached = env.cache.list(PODS, env.namespace, selector=instance_selector(NAME))
        assert len(cached) == 3  # still there in the cache, and not counted:
        cr = await env.client.get(PODSETS, NAME, env.namespace)
        assert cr["status"]["podNames"] == remaining
        result, sent = await env.reconcile()
        assert sent == []
        assert result == Result(requeue_after=EXPECTATIONS_TIMEOUT)  # the TTL, if no event comes
    finally:
        env.server.silence_watches(False)
    await env.synced()
    assert await env.reconcile() == (None, [])
    assert len(await env.events("SuccessfulDelete")) == 2


async def test_a_pod_deleted_by_someone_first_is_not_counted_until_the_watch_says_so(env: Env) -> None:
    await env.client.create(PODSETS, manifest(replicas=2), env.namespace)
    await env.synced()
    await env.reconcile()
    await env.client.patch(PODSETS, NAME, {"spec": {"replicas": 1}}, env.namespace)
    await env.synced()
    env.server.silence_watches(True)
    try:
        env.server.faults.fail(404, verb="delete", resource="pods")  # someone deleted it first
        _, sent = await env.reconcile()
        assert sent == [("delete", "pods", ""), ("patch", "podsets", "status")]
        assert not env.expectations.satisfied(Request(env.namespace, NAME))
        _, sent = await env.reconcile()
        assert sent == []  # not one more delete
    finally:
        env.server.silence_watches(False)
    env.expectations.forget(Request(env.namespace, NAME))  # the 404 was made up: no event comes
    await env.synced()
    _, sent = await env.reconcile()
    assert sent == [("delete", "pods", "")]  # the status said one pod already


async def test_the_expectations_expire_when_an_event_never_comes(env: Env) -> None:
    await env.client.create(PODSETS, manifest(replicas=1), env.namespace)
    await env.synced()
    env.expectations.expect(Request(env.namespace, NAME), creations=1)  # a creation never seen
    result, sent = await env.reconcile()
    assert sent == [("patch", "podsets", "status")]
    assert result == Result(requeue_after=EXPECTATIONS_TIMEOUT)
    env.clock.advance(EXPECTATIONS_TIMEOUT)
    result, sent = await env.reconcile()
    assert (result, sent[0]) == (None, ("create", "pods", ""))


async def test_a_template_the_server_refuses_is_tried_once_per_generation(env: Env) -> None:
    bad = {"spec": {"containers": [{"name": "no-image"}]}}
    await env.client.create(PODSETS, manifest(replicas=4, template=bad), env.namespace)
    await env.synced()
    result, sent = await env.reconcile()
    assert (result, sent) == (None, [("create", "pods", ""), ("patch", "podsets", "status")])
    cr = await env.client.get(PODSETS, NAME, env.namespace)
    degraded = condition(cr, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidTemplate")
    assert "spec.containers[0].image: Required value" in degraded["message"]
    [event] = await env.events("FailedCreate")
    assert (event["type"], event["message"]) == ("Warning", degraded["message"])
    await env.synced()
    assert await env.reconcile() == (None, [])  # same generation: not again
    await env.client.patch(PODSETS, NAME, {"spec": {"replicas": 1, "template": None}}, env.namespace)
    await env.synced()
    _, sent = await env.reconcile()
    assert sent == [("create", "pods", ""), ("patch", "podsets", "status")]
    assert condition(await env.client.get(PODSETS, NAME, env.namespace), "Degraded")["status"] == "False"


async def test_a_refused_create_is_reported_and_retried(env: Env) -> None:
    await env.client.create(PODSETS, manifest(replicas=2), env.namespace)
    await env.synced()
    env.server.faults.fail(403, times=1, verb="create", resource="pods")
    with pytest.raises(Forbidden):
        await env.reconcile()
    cr = await env.client.get(PODSETS, NAME, env.namespace)
    degraded = condition(cr, "Degraded")
    assert degraded["reason"] == "FailedCreate"
    assert 'cannot create resource "pods"' in degraded["message"]
    assert len(await env.events("FailedCreate")) == 1
    assert env.expectations.satisfied(Request(env.namespace, NAME))  # nothing left to wait for
    await env.synced()
    _, sent = await env.reconcile()
    assert sent == [("create", "pods", "")] * 2 + [("patch", "podsets", "status")]


async def test_an_invalid_spec_is_reported_without_pods(env: Env) -> None:
    # The CRD without its schema: the API server takes anything, memop must judge.
    current = await env.client.get(CUSTOM_RESOURCE_DEFINITIONS, crd()["metadata"]["name"])
    for version in current["spec"]["versions"]:
        version["schema"] = {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        }
    await env.client.update(CUSTOM_RESOURCE_DEFINITIONS, current)
    await env.client.create(PODSETS, manifest(replicas="three"), env.namespace)
    await env.synced()
    result, sent = await env.reconcile()
    assert (result, sent) == (None, [("patch", "podsets", "status")])
    degraded = condition(await env.client.get(PODSETS, NAME, env.namespace), "Degraded")
    assert (degraded["reason"], degraded["message"]) == (
        "InvalidSpec",
        'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
    )
    assert len(await env.events("InvalidSpec")) == 1


async def test_a_podset_gone_or_going_is_left_to_the_garbage_collector(env: Env) -> None:
    assert await env.reconcile("absent") == (None, [])
    cr = manifest()
    cr["metadata"]["finalizers"] = ["example.com/hold"]
    await env.client.create(PODSETS, cr, env.namespace)
    await env.client.delete(PODSETS, NAME, env.namespace)
    await env.synced()
    assert await env.reconcile() == (None, [])
    await env.client.patch(PODSETS, NAME, {"metadata": {"finalizers": None}}, env.namespace)


def test_pod_transform_keeps_only_what_is_read() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "creationTimestamp": "t",
            "labels": {INSTANCE_LABEL: "ps", "app": "web"},
            "annotations": {"big": "x" * 1000},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "o"},
                {"apiVersion": "a/v1", "kind": "PodSet", "name": "ps", "uid": "s", "controller": True},
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.1",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
        },
    }
    assert pod_transform(pod) == {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "creationTimestamp": "t",
            "labels": {INSTANCE_LABEL: "ps"},
            "ownerReferences": [
                {"apiVersion": "a/v1", "kind": "PodSet", "name": "ps", "uid": "s", "controller": True}
            ],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    junk = {"metadata": {"name": "j", "labels": "x", "ownerReferences": "y"}, "status": ["z"]}
    assert pod_transform(junk) == {"metadata": {"name": "j"}, "status": {}}


def test_owner_request_is_the_controlling_podset() -> None:
    ref = {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "PodSet",
        "name": "ps",
        "controller": True,
    }
    assert owner_request({"metadata": {"namespace": "ns", "ownerReferences": [ref]}}) == Request("ns", "ps")
    for refs in (
        [{**ref, "controller": False}],
        [{**ref, "apiVersion": "other.io/v1"}],
        [{**ref, "kind": "ReplicaSet"}],
        "junk",
    ):
        assert owner_request({"metadata": {"namespace": "ns", "ownerReferences": refs}}) is None


async def test_setup_watches_the_podsets_and_only_their_pods(env: Env) -> None:
    cache = Cache(env.reconciler.client, namespaces=[env.namespace])
    controller = DEFINITION.setup(SetupContext(cache, env.reconciler.client, env.recorder, 3))
    assert controller.name == "podset"
    assert controller.options.max_concurrent_reconciles == 3
    assert [(w.resource, w.label_selector) for w in controller.watches] == [
        (PODSETS, None),
        (PODS, POD_SELECTOR),
    ]
    assert str(POD_SELECTOR) == INSTANCE_LABEL
    assert cache.informer_for(PODS, instance_selector("x")).label_selector == POD_SELECTOR
    assert is_active({"metadata": {}, "status": {}})
