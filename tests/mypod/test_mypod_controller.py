"""The MyPod reconciler, one reconcile at a time, against the in-memory API server.

No simulated kubelet or garbage collector runs here: nothing changes unless the test or the
reconciler writes it, so each test states exactly which requests a reconcile sends. Also here:
what the pods informer holds (only labelled pods, stripped) and the watches ``setup`` declares.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.mypod.api import MYPODS
from memop.mypod.controller import (
    BLOCKED_RECHECK_SECONDS,
    POD_SELECTOR,
    MyPodReconciler,
    declare_informers,
    mypod_transform,
    pod_transform,
    setup,
)
from memop.mypod.crd import crd
from memop.mypod.desired import LABEL, METADATA, SPEC_HASH
from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import resource_version
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ServerError
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, EVENTS, NAMESPACES, PODS
from memop.runtime.controller.definition import SetupContext
from memop.runtime.controller.reconcile import Request, Result
from memop.runtime.manager.events import EventRecorder
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import install_crd
from memop.testing.wait import wait_for

MEMOP = "memop-unit/mypod"
POD_SPEC: dict[str, Any] = {"containers": [{"name": "main", "image": "pause:3.10"}]}
RUNNING = {"phase": "Running", "podIP": "10.244.0.9", "hostIP": "172.18.0.2"}


def manifest(name: str = "web", pod_spec: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    pod_spec = copy.deepcopy(pod_spec or POD_SPEC)
    return {
        "apiVersion": "harryyann.github.io/v1",
        "kind": "MyPod",
        "metadata": {"name": name},
        "spec": {"podSpec": pod_spec, **spec},
    }


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return {}


@dataclass
class Env:
    server: ApiServer
    client: Client  # the test's own
    cache: Cache
    recorder: EventRecorder
    reconciler: MyPodReconciler
    namespace: str

    async def synced(self) -> None:
        """Wait until memop's cache holds what the server holds (labelled pods only)."""

        async def same() -> bool:
            for resource, selector in ((MYPODS, None), (PODS, str(POD_SELECTOR))):
                items, _ = await self.client.list_all(resource, self.namespace, label_selector=selector)
                server = {i["metadata"]["name"]: resource_version(i) for i in items}
                cached = {
                    o["metadata"]["name"]: resource_version(o)
                    for o in self.cache.list(resource, self.namespace, selector=selector)
                }
                if server != cached:
                    return False
            return True

        await wait_for(same, timeout=10)

    async def reconcile(self, name: str = "web") -> tuple[Result | None, list[tuple[str, str, str]]]:
        """One reconcile after the cache caught up; its result and the writes it sent."""
        await self.synced()
        before = len(self.server.log)
        result = await self.reconciler.reconcile(Request(self.namespace, name))
        sent = [
            (r.verb, r.resource, r.subresource)
            for r in self.server.log.records[before:]
            if r.user_agent.startswith(MEMOP) and r.verb not in ("list", "watch") and r.resource != "events"
        ]
        return result, sent

    async def events(self, reason: str) -> list[dict[str, Any]]:
        await self.recorder.flush()
        items, _ = await self.client.list_all(EVENTS, self.namespace)
        return [e for e in items if e["reason"] == reason]

    async def get(self, resource: Any, name: str = "web") -> dict[str, Any]:
        return await self.client.get(resource, name, self.namespace)


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
        declare_informers(cache)
        recorder = EventRecorder(memop, "mypod-controller", clock=clock)
        recorder.start()
        await cache.start()
        assert await cache.wait_for_sync(10)
        try:
            yield Env(
                server, client, cache, recorder, MyPodReconciler(memop, cache, recorder, clock), namespace
            )
        finally:
            await recorder.stop()
            await cache.stop()


async def test_a_new_mypod_takes_a_create_and_a_status_write_then_each_change_one_write(env: Env) -> None:
    await env.client.create(MYPODS, manifest(), env.namespace)
    assert await env.reconcile() == (None, [("create", "pods", ""), ("patch", "mypods", "status")])
    cr = await env.get(MYPODS)
    assert cr["status"]["podPhase"] == "Pending"
    assert condition(cr, "Ready")["reason"] == "PodNotReady"
    assert len(await env.events("Created")) == 1
    assert await env.reconcile() == (None, [])
    await env.client.patch_status(PODS, "web", {"status": RUNNING}, env.namespace)
    assert await env.reconcile() == (None, [("patch", "mypods", "status")])
    cr = await env.get(MYPODS)
    assert (cr["status"]["podIp"], cr["status"]["nodeIp"]) == ("10.244.0.9", "172.18.0.2")
    assert await env.reconcile() == (None, [])


async def test_a_pod_spec_change_deletes_the_pod_once_and_creates_it_once_it_is_gone(env: Env) -> None:
    await env.client.create(MYPODS, manifest(), env.namespace)
    await env.reconcile()
    old = await env.client.patch(PODS, "web", {"metadata": {"finalizers": ["test/hold"]}}, env.namespace)
    changed = {"containers": [{"name": "main", "image": "pause:3.9"}]}
    await env.client.patch(MYPODS, "web", {"spec": {"podSpec": changed}}, env.namespace)
    assert await env.reconcile() == (None, [("delete", "pods", ""), ("patch", "mypods", "status")])
    assert condition(await env.get(MYPODS), "Ready")["reason"] == "Replacing"
    # The old pod lingers: nothing to do until the watch says it is gone (no hot loop).
    assert await env.reconcile() == (None, [])
    await env.client.patch(PODS, "web", {"metadata": {"finalizers": None}}, env.namespace)
    assert await env.reconcile() == (None, [("create", "pods", ""), ("patch", "mypods", "status")])
    new = await env.get(PODS)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["containers"][0]["image"] == "pause:3.9"
    assert [e["type"] for e in await env.events("Replacing")] == ["Normal"]


async def test_a_labels_change_replaces_the_pod(env: Env) -> None:
    await env.client.create(MYPODS, manifest(podLabels={"a": "1"}), env.namespace)
    await env.reconcile()
    await env.client.patch(MYPODS, "web", {"spec": {"podLabels": {"a": None, "b": "2"}}}, env.namespace)
    assert await env.reconcile() == (None, [("delete", "pods", ""), ("patch", "mypods", "status")])
    assert [e["message"].split(":")[0] for e in await env.events("Replacing")] == [
        "podLabels or podAnnotations changed"
    ]


@pytest.mark.parametrize("name", ["web", "x" * 64])
async def test_a_refused_pod_is_degraded_and_not_sent_again_for_that_generation(env: Env, name: str) -> None:
    # No image; or a name too long for the label (which a real server's CRD refuses first).
    pod_spec = {"containers": [{"name": "main"}]} if name == "web" else POD_SPEC
    await env.client.create(MYPODS, manifest(name, pod_spec), env.namespace)
    assert await env.reconcile(name) == (None, [("create", "pods", ""), ("patch", "mypods", "status")])
    degraded = condition(await env.get(MYPODS, name), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "PodInvalid")
    assert "is invalid" in degraded["message"]
    assert await env.reconcile(name) == (None, [])
    assert [e["message"] for e in await env.events("PodInvalid")] == [degraded["message"]]


async def test_a_pod_the_server_cannot_decode_is_refused_too(env: Env) -> None:
    # A real server answers 400 for a type error ("cannot be handled as a Pod"); this one 422.
    message = 'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string'
    env.server.faults.fail(400, verb="create", resource="pods", message=message)
    await env.client.create(MYPODS, manifest(), env.namespace)
    assert await env.reconcile() == (None, [("create", "pods", ""), ("patch", "mypods", "status")])
    degraded = condition(await env.get(MYPODS), "Degraded")
    assert (degraded["reason"], degraded["message"]) == ("PodInvalid", message)
    assert await env.reconcile() == (None, [])


async def test_a_spec_the_schema_would_refuse_is_degraded_without_a_request_to_pods(env: Env) -> None:
    # The CRD installed without its schema: the server stores anything.
    current = await env.client.get(CUSTOM_RESOURCE_DEFINITIONS, crd()["metadata"]["name"])
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    current["spec"]["versions"][0]["schema"] = schema
    await env.client.update(CUSTOM_RESOURCE_DEFINITIONS, current)
    await env.client.create(MYPODS, manifest(podLabels={"app": 1}), env.namespace)
    assert await env.reconcile() == (None, [("patch", "mypods", "status")])
    degraded = condition(await env.get(MYPODS), "Degraded")
    assert (degraded["reason"], degraded["message"]) == (
        "InvalidSpec",
        'spec.podLabels.app: Invalid value: "integer": spec.podLabels.app in body must be of type'
        ' string: "integer"',
    )
    assert await env.reconcile() == (None, [])
    assert len(await env.events("InvalidSpec")) == 1


async def test_a_pod_it_does_not_control_is_rechecked_and_reported_once(env: Env) -> None:
    await env.client.create(PODS, {"metadata": {"name": "web"}, "spec": POD_SPEC}, env.namespace)
    await env.client.create(MYPODS, manifest(), env.namespace)
    recheck = Result(requeue_after=BLOCKED_RECHECK_SECONDS)
    assert await env.reconcile() == (recheck, [("create", "pods", ""), ("patch", "mypods", "status")])
    assert condition(await env.get(MYPODS), "Degraded")["reason"] == "PodConflict"
    assert await env.reconcile() == (recheck, [("create", "pods", "")])
    assert len(await env.events("PodConflict")) == 1
    # With memop's label it is in the cache: no request at all.
    labels = {"metadata": {"labels": {LABEL: "web"}}}
    await env.client.patch(PODS, "web", labels, env.namespace)
    assert await env.reconcile() == (recheck, [("patch", "mypods", "status")])
    assert (await env.get(PODS))["metadata"].get("ownerReferences") is None


async def test_a_pod_left_by_a_deleted_namesake_is_waited_for_not_a_conflict(env: Env) -> None:
    await env.client.create(MYPODS, manifest(), env.namespace)
    await env.reconcile()
    await env.client.delete(MYPODS, "web", env.namespace)  # no garbage collector runs here
    await env.client.create(MYPODS, manifest(), env.namespace)
    assert await env.reconcile() == (None, [("patch", "mypods", "status")])
    cr = await env.get(MYPODS)
    assert condition(cr, "Ready")["reason"] == "PodTerminating"
    assert condition(cr, "Degraded")["status"] == "False"
    await env.client.delete(PODS, "web", env.namespace)  # what the garbage collector does
    assert await env.reconcile() == (None, [("create", "pods", ""), ("patch", "mypods", "status")])
    owner = (await env.get(PODS))["metadata"]["ownerReferences"][0]
    assert owner["uid"] == cr["metadata"]["uid"]


async def test_forbidden_is_rechecked_and_a_server_error_retried(env: Env) -> None:
    env.server.faults.fail(403, times=1, verb="create", resource="pods")
    await env.client.create(MYPODS, manifest(), env.namespace)
    result, _ = await env.reconcile()
    assert result == Result(requeue_after=BLOCKED_RECHECK_SECONDS)
    assert condition(await env.get(MYPODS), "Degraded")["reason"] == "PodForbidden"
    env.server.faults.fail(500, times=1, verb="create", resource="pods")
    with pytest.raises(ServerError):
        await env.reconciler.reconcile(Request(env.namespace, "web"))
    assert condition(await env.get(MYPODS), "Degraded")["reason"] == "ReconcileError"
    await env.reconcile()
    assert condition(await env.get(MYPODS), "Degraded")["status"] == "False"


async def test_only_labelled_pods_reach_the_cache_stripped_to_what_is_read(env: Env) -> None:
    await env.client.create(PODS, {"metadata": {"name": "other"}, "spec": POD_SPEC}, env.namespace)
    await env.client.create(MYPODS, manifest(podLabels={"a": "1"}, podAnnotations={"n": "x"}), env.namespace)
    await env.reconcile()
    await env.client.patch_status(PODS, "web", {"status": RUNNING}, env.namespace)
    await env.synced()
    (cached,) = env.cache.list(PODS, env.namespace, selector=POD_SELECTOR)
    assert set(cached["metadata"]) == {
        "name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels", "annotations",
        "ownerReferences",
    }  # fmt: skip
    assert cached["metadata"]["labels"] == {LABEL: "web"}
    assert set(cached["metadata"]["annotations"]) == {SPEC_HASH, METADATA}
    assert cached["status"] == RUNNING


def test_pod_transform_keeps_the_ready_condition_only() -> None:
    pod = {
        "metadata": {"name": "p", "labels": {"x": "1"}, "annotations": {"kubectl": "big"}},
        "spec": {"containers": []},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "reason": "r"}, {"type": "Initialized"}],
            "containerStatuses": [{}],
        },
    }
    assert pod_transform(pod) == {
        "metadata": {"name": "p", "labels": {}, "annotations": {}},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert pod_transform({"metadata": {"name": "p"}, "status": "junk"}) == {
        "metadata": {"name": "p"},
        "status": {},
    }
    mypod = {"metadata": {"name": "m", "annotations": {"last-applied": "{}"}}, "spec": {}}
    assert mypod_transform(mypod) == {"metadata": {"name": "m"}, "spec": {}}


async def test_setup_watches_mypods_and_their_labelled_pods(env: Env) -> None:
    controller = setup(SetupContext(env.cache, env.reconciler.client, env.recorder))
    watched = [(w.resource, w.label_selector) for w in controller.watches]
    assert watched == [(MYPODS, None), (PODS, POD_SELECTOR)]
