"""The Memcached reconciler, one reconcile at a time, against the in-memory API server.

Each test drives ``MemcachedReconciler.reconcile`` by hand over a real client and a real cache
(watches included), so every request memop sends is in the server's request log and paths that
the operator end-to-end tests reach only by chance are reached on purpose: a Deployment with the
tutorial's shared selector, one memop does not control, drift in each field memop owns, a cache
that is behind the server, 409s and 403s. No simulated controllers run here: nothing changes
unless the test or the reconciler writes it.

Also here: the watches ``setup`` declares (which events reach the queue, mapped to which
Memcached) and ``pod_transform``.
"""

from __future__ import annotations

import copy
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.memcached.api import FINALIZER, MEMCACHEDS, parse_spec
from memop.memcached.controller import (
    BLOCKED_RECHECK_SECONDS,
    CACHE_TRANSFORMS,
    MemcachedReconciler,
    declare_informers,
    deployment_transform,
    memcached_transform,
    pod_transform,
    pods_to_memcached,
    setup,
)
from memop.memcached.desired import deployment_patch, desired_deployment
from memop.memcached.status import compute_status, nodes
from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import ADDED, DELETED, MODIFIED, RESYNC, resource_version
from memop.runtime.client.client import Client
from memop.runtime.client.errors import Conflict, Forbidden
from memop.runtime.client.resources import DEPLOYMENTS, EVENTS, NAMESPACES, PODS, Resource
from memop.runtime.controller.reconcile import Request, Result
from memop.runtime.manager.events import EventRecorder
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.requestlog import RequestRecord
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import install_crd
from memop.testing.wait import wait_for

MEMOP = "memop-unit/reconciler"
NAME = "cache"
OTHER_FINALIZER = "example.com/other"
MEMOP_LOGGERS = ("memop.memcached", "memop.controller", "memop.events")


def rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def memcached(name: str = NAME, finalizers: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": meta, "spec": spec}


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
    reconciler: MemcachedReconciler
    clock: FakeClock
    namespace: str

    async def synced(self) -> None:
        """Wait until memop's cache holds exactly what the server holds in the namespace."""

        async def same() -> bool:
            for resource in (MEMCACHEDS, DEPLOYMENTS, PODS):
                items, _ = await self.client.list_all(resource, self.namespace)
                server = {i["metadata"]["name"]: resource_version(i) for i in items}
                cached = {
                    o["metadata"]["name"]: resource_version(o)
                    for o in self.cache.list(resource, self.namespace)
                }
                if server != cached:
                    return False
            return True

        await wait_for(same, timeout=10)

    async def reconcile(self, name: str = NAME) -> tuple[Result | None, list[RequestRecord]]:
        """One reconcile; returns its result and the requests it sent (watches and Events aside)."""
        before = len(self.server.log)
        result = await self.reconciler.reconcile(Request(self.namespace, name))
        return result, self.sent_since(before)

    def sent_since(self, before: int) -> list[RequestRecord]:
        return [
            r
            for r in self.server.log.records[before:]
            if r.user_agent.startswith(MEMOP) and r.verb not in ("list", "watch") and r.resource != "events"
        ]

    async def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        await self.recorder.flush()
        items, _ = await self.client.list_all(EVENTS, self.namespace)
        return [e for e in items if reason is None or e["reason"] == reason]

    async def get(self, resource: Resource, name: str = NAME) -> dict[str, Any]:
        return await self.client.get(resource, name, self.namespace)

    async def converge(self, name: str = NAME) -> None:
        """Reconcile until a reconcile writes nothing."""
        for _ in range(5):
            await self.synced()
            _, sent = await self.reconcile(name)
            if not sent:
                return
        raise AssertionError("no convergence in 5 reconciles")


def kinds(sent: list[RequestRecord]) -> list[tuple[str, str, str]]:
    return [(r.verb, r.resource, r.subresource) for r in sent]


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with ApiServer() as server, ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="test")
        memop = Client(api, user_agent=MEMOP, max_retries=0)
        await install_crd(client)
        namespace = f"unit-{uuid.uuid4().hex[:8]}"
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
        clock = FakeClock()
        cache = Cache(memop, namespaces=[namespace])
        declare_informers(cache)
        recorder = EventRecorder(memop, "memcached-controller", clock=clock)
        recorder.start()
        await cache.start()
        assert await cache.wait_for_sync(10)
        try:
            yield Env(
                server,
                client,
                cache,
                recorder,
                MemcachedReconciler(memop, cache, recorder, clock),
                clock,
                namespace,
            )
        finally:
            await recorder.stop()
            await cache.stop()


# --- a new Memcached, then nothing -------------------------------------------------------------


async def test_a_new_memcached_takes_three_writes_and_then_none(env: Env) -> None:
    await env.client.create(MEMCACHEDS, memcached(size=2), env.namespace)
    await env.synced()
    result, sent = await env.reconcile()
    assert result is None
    assert kinds(sent) == [
        ("patch", "memcacheds", ""),  # the finalizer
        ("create", "deployments", ""),
        ("patch", "memcacheds", "status"),
    ]
    cr = await env.get(MEMCACHEDS)
    assert cr["metadata"]["finalizers"] == [FINALIZER]
    # Conditions are stamped with the reconciler's clock.
    for c in cr["status"]["conditions"]:
        assert c["lastTransitionTime"] == rfc3339(env.clock.time())
        assert c["observedGeneration"] == cr["metadata"]["generation"]
    deployment = await env.get(DEPLOYMENTS)
    assert deployment_patch(deployment, desired_deployment(cr, parse_spec(cr))) is None
    assert [e["type"] for e in await env.events("Created")] == ["Normal"]
    await env.synced()
    result, sent = await env.reconcile()
    assert (result, sent) == (None, [])


async def test_the_cached_deployment_holds_its_template_labels_as_its_own_labels(env: Env) -> None:
    # CACHE_ALIASES: equal, so held as one dict (whether stored from our create's answer or
    # from the watch), and the reconcile still finds nothing to change.
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    await env.converge()
    cached = env.cache.get(DEPLOYMENTS, NAME, env.namespace)
    assert cached is not None
    assert cached["spec"]["template"]["metadata"]["labels"] is cached["metadata"]["labels"]
    assert cached["metadata"]["labels"] == (await env.get(DEPLOYMENTS))["metadata"]["labels"]


async def test_a_condition_gets_a_new_time_only_when_it_flips(env: Env) -> None:
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    await env.converge()
    first = await env.get(MEMCACHEDS)
    assert condition(first, "Available")["status"] == "False"
    env.clock.advance(60)
    await env.client.patch(MEMCACHEDS, NAME, {"spec": {"size": 0}}, env.namespace)
    await env.converge()
    second = await env.get(MEMCACHEDS)
    assert condition(second, "Available")["status"] == "True"
    assert condition(second, "Available")["lastTransitionTime"] == rfc3339(env.clock.time())
    for kind in ("Progressing", "Degraded"):  # still what they were: their times stay
        assert condition(second, kind)["status"] == condition(first, kind)["status"]
        assert condition(second, kind)["lastTransitionTime"] == condition(first, kind)["lastTransitionTime"]
    assert {c["observedGeneration"] for c in second["status"]["conditions"]} == {2}


# --- drift -----------------------------------------------------------------------------------------

C = "/spec/template/spec/containers/0"
DRIFT: dict[str, list[dict[str, Any]]] = {
    "replicas": [{"op": "replace", "path": "/spec/replicas", "value": 5}],
    "image": [{"op": "replace", "path": f"{C}/image", "value": "memcached:evil"}],
    "command": [{"op": "replace", "path": f"{C}/command", "value": ["memcached", "-m", "1"]}],
    "ports": [{"op": "replace", "path": f"{C}/ports", "value": [{"containerPort": 11212, "name": "x"}]}],
    "container security": [
        {"op": "replace", "path": f"{C}/securityContext/allowPrivilegeEscalation", "value": True},
        {"op": "remove", "path": f"{C}/securityContext/capabilities"},
    ],
    "pod security": [{"op": "remove", "path": "/spec/template/spec/securityContext/seccompProfile"}],
    "resources": [{"op": "add", "path": f"{C}/resources", "value": {"limits": {"memory": "1Gi"}}}],
    "labels": [{"op": "replace", "path": "/metadata/labels/app.kubernetes.io~1managed-by", "value": "me"}],
    "pod labels": [{"op": "remove", "path": "/spec/template/metadata/labels/app.kubernetes.io~1managed-by"}],
    "sidecar": [
        {"op": "add", "path": "/spec/template/spec/containers/-", "value": {"name": "s", "image": "b"}}
    ],
}


@pytest.mark.parametrize("drift", list(DRIFT))
async def test_drift_in_an_owned_field_is_put_back_with_one_patch(env: Env, drift: str) -> None:
    await env.client.create(MEMCACHEDS, memcached(size=2, resources={"limits": {"cpu": "1"}}), env.namespace)
    await env.converge()
    await env.client.patch(DEPLOYMENTS, NAME, DRIFT[drift], env.namespace, patch_type="json")
    await env.synced()
    _, sent = await env.reconcile()
    # One patch puts it back; the status may follow (no deployment controller runs here, so a
    # new Deployment generation stays unobserved: Progressing says so).
    assert kinds(sent)[0] == ("patch", "deployments", "")
    assert kinds(sent)[1:] in ([], [("patch", "memcacheds", "status")])
    cr = await env.get(MEMCACHEDS)
    deployment = await env.get(DEPLOYMENTS)
    assert deployment_patch(deployment, desired_deployment(cr, parse_spec(cr))) is None
    assert len(deployment["spec"]["template"]["spec"]["containers"]) == 1
    reason = "Scaled" if drift == "replicas" else "Updated"
    assert [e["type"] for e in await env.events(reason)] == ["Normal"]
    # What the server defaults in the rewritten Deployment causes no further write.
    await env.synced()
    assert (await env.reconcile())[1] == []


async def test_what_others_add_to_the_deployment_causes_no_write(env: Env) -> None:
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    await env.converge()
    await env.client.patch(
        DEPLOYMENTS,
        NAME,
        [
            {"op": "add", "path": "/metadata/annotations", "value": {"team": "cache"}},
            {"op": "add", "path": "/metadata/labels/team", "value": "cache"},
            {"op": "add", "path": f"{C}/env", "value": [{"name": "X", "value": "1"}]},
            {"op": "replace", "path": "/spec/revisionHistoryLimit", "value": 3},
        ],
        env.namespace,
        patch_type="json",
    )
    await env.synced()
    _, sent = await env.reconcile()
    assert [k for k in kinds(sent) if k[1] == "deployments"] == []


async def test_a_spec_change_updates_the_deployment_and_says_so(env: Env) -> None:
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    await env.converge()
    await env.client.patch(MEMCACHEDS, NAME, {"spec": {"size": 3, "memoryLimitMiB": 128}}, env.namespace)
    await env.synced()
    _, sent = await env.reconcile()
    assert kinds(sent) == [("patch", "deployments", ""), ("patch", "memcacheds", "status")]
    deployment = await env.get(DEPLOYMENTS)
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["containers"][0]["command"][1] == "--memory-limit=128"
    [updated] = await env.events("Updated")
    assert updated["message"] == f"Updated Deployment {NAME}"
    assert not await env.events("Scaled")  # more than replicas changed: one Updated event
    await env.client.patch(MEMCACHEDS, NAME, {"spec": {"size": 1}}, env.namespace)
    await env.synced()
    await env.reconcile()
    [scaled] = await env.events("Scaled")
    assert scaled["message"] == f"Scaled Deployment {NAME} from 3 to 1"


async def test_a_deployment_whose_counts_are_not_numbers_is_put_right(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """No conforming API server serves a Deployment whose ``spec.replicas`` is a string (it
    cannot decode one), but a proxy or an aggregated API in between could: memop's cache then
    holds one. The reconciler neither fails nor trusts it: it logs it and patches the number
    back; status counts that are not numbers count as none."""
    await env.client.create(MEMCACHEDS, memcached(size=2), env.namespace)
    await env.converge()
    ready = {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2,
             "availableReplicas": 2}  # fmt: skip
    await env.client.patch_status(DEPLOYMENTS, NAME, {"status": ready}, env.namespace)
    await env.synced()
    await env.reconcile()
    assert (await env.get(MEMCACHEDS))["status"]["readyReplicas"] == 2
    env.server.silence_watches(True)  # the mangled copies stay in memop's cache
    store = env.cache.informer(DEPLOYMENTS).store
    live = store.get(NAME, env.namespace)
    assert live is not None

    mangled = copy.deepcopy(live)
    mangled["spec"]["replicas"] = "2"
    store.upsert(mangled)
    caplog.set_level(logging.WARNING, logger="memop.memcached")
    result, sent = await env.reconcile()
    assert result is None
    assert kinds(sent) == [("patch", "deployments", "")]  # the response has the real status
    assert (await env.get(DEPLOYMENTS))["spec"]["replicas"] == 2
    assert [r.getMessage() for r in caplog.records] == [
        f"Deployment {NAME} has spec.replicas '2', which is not a number; setting it to 2"
    ]

    mangled = copy.deepcopy(live)
    mangled["status"] = {**ready, "readyReplicas": "two", "availableReplicas": [2]}
    store.upsert(mangled)
    result, sent = await env.reconcile()
    assert result is None
    assert kinds(sent) == [("patch", "memcacheds", "status")]
    status = (await env.get(MEMCACHEDS))["status"]
    assert status["readyReplicas"] == 0
    assert condition({"status": status}, "Available")["status"] == "False"


# --- Deployments memop cannot simply patch ---------------------------------------------------------


async def create_with_the_tutorials_selector(env: Env) -> dict[str, Any]:
    """A Memcached (with our finalizer) and its Deployment with the tutorial's selector, which
    selects every CR's pods; returns the Deployment."""
    cr = await env.client.create(MEMCACHEDS, memcached(size=1, finalizers=[FINALIZER]), env.namespace)
    deployment = desired_deployment(cr, parse_spec(cr))
    deployment["spec"]["selector"] = {"matchLabels": {"app": "memcached"}}
    deployment["spec"]["template"]["metadata"]["labels"] = {"app": "memcached"}
    return await env.client.create(DEPLOYMENTS, deployment, env.namespace)


async def test_a_deployment_with_the_tutorials_shared_selector_is_replaced(env: Env) -> None:
    """The tutorial's selector (app=memcached) selects every CR's pods; the selector is
    immutable, so memop deletes that Deployment (uid precondition) and creates its own."""
    old = await create_with_the_tutorials_selector(env)
    await env.synced()
    result, sent = await env.reconcile()
    assert result == Result(requeue=True)
    assert kinds(sent) == [("delete", "deployments", "")]
    assert [e["type"] for e in await env.events("Recreated")] == ["Normal"]
    await env.converge()
    new = await env.get(DEPLOYMENTS)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": NAME}
    }


def _memop_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("memop")
    ]


async def reconcile_quietly(
    env: Env, caplog: pytest.LogCaptureFixture
) -> tuple[Result | None, list[tuple[str, str, int]]]:
    """One reconcile that must not tell anyone of a failure: no warning or error line, no
    ReconcileError Event, not Degraded. Its result and its requests (verb, resource, status)."""
    caplog.set_level(logging.DEBUG)
    result, sent = await env.reconcile()
    assert _memop_warnings(caplog) == []
    assert await env.events("ReconcileError") == []
    assert condition(await env.get(MEMCACHEDS), "Degraded").get("status") != "True"
    return result, [(r.verb, r.resource, r.status) for r in sent]


async def test_a_drifted_deployment_already_gone_is_recreated_without_an_error(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Someone deletes the Deployment with the wrong selector while memop's cache still holds
    it: memop's DELETE answers 404. Already gone is what the delete was for: no error line, no
    Degraded, no ReconcileError Event; the next reconcile creates memop's own Deployment."""
    old = await create_with_the_tutorials_selector(env)
    await env.synced()
    env.server.silence_watches(True)  # memop's cache keeps the deleted Deployment
    await env.client.delete(DEPLOYMENTS, NAME, env.namespace)
    assert await reconcile_quietly(env, caplog) == (Result(requeue=True), [("delete", "deployments", 404)])
    env.server.silence_watches(False)
    await env.converge()
    new = await env.get(DEPLOYMENTS)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == NAME
    assert condition(await env.get(MEMCACHEDS), "Degraded")["status"] == "False"


async def test_a_deployment_gone_before_its_patch_is_recreated_without_an_error(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """The cache is behind a deletion of the Deployment, so the patch that scales it answers
    404: nothing for the user to fix, so no error and no Degraded; the retry creates it."""
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    await env.converge()
    await env.client.patch(MEMCACHEDS, NAME, {"spec": {"size": 2}}, env.namespace)
    await env.synced()
    env.server.silence_watches(True)
    await env.client.delete(DEPLOYMENTS, NAME, env.namespace)
    assert await reconcile_quietly(env, caplog) == (Result(requeue=True), [("patch", "deployments", 404)])
    env.server.silence_watches(False)
    await env.converge()
    assert (await env.get(DEPLOYMENTS))["spec"]["replicas"] == 2


async def test_a_memcached_gone_before_its_finalizer_is_added_is_left_alone(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleted (it had no finalizer yet) while the cache still holds it: the finalizer patch
    answers 404, and nothing is left to do: no error, no Deployment for a Memcached that is gone."""
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    await env.synced()
    env.server.silence_watches(True)
    await env.client.delete(MEMCACHEDS, NAME, env.namespace)
    caplog.set_level(logging.DEBUG)
    result, sent = await env.reconcile()
    assert result is None
    assert [(r.verb, r.resource, r.status) for r in sent] == [("patch", "memcacheds", 404)]
    assert _memop_warnings(caplog) == []
    assert await env.events() == []


async def test_a_deployment_memop_does_not_control_is_left_alone_and_reported(env: Env) -> None:
    foreign = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "labels": {"team": "web"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        },
    }
    foreign = await env.client.create(DEPLOYMENTS, foreign, env.namespace)
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    await env.synced()
    result, sent = await env.reconcile()
    # Nothing can fix it but a human: look again later, not in a hot loop.
    assert result == Result(requeue_after=BLOCKED_RECHECK_SECONDS)
    assert kinds(sent) == [("patch", "memcacheds", ""), ("patch", "memcacheds", "status")]
    assert resource_version(await env.get(DEPLOYMENTS)) == resource_version(foreign)
    degraded = condition(await env.get(MEMCACHEDS), "Degraded")
    assert degraded["status"] == "True"
    assert "is not controlled by this Memcached" in degraded["message"]
    # The same failure again: the existing Event counts it, no second Event, no status write.
    await env.synced()
    result, sent = await env.reconcile()
    assert result == Result(requeue_after=BLOCKED_RECHECK_SECONDS)
    assert sent == []
    [event] = await env.events("DeploymentConflict")
    assert (event["type"], event["count"]) == ("Warning", 2)
    assert event["message"] == degraded["message"]


# --- conflicts and a cache that is behind -----------------------------------------------------------


async def test_a_conflict_is_raised_for_a_prompt_retry_without_an_error_log(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """A writer got in between: the finalizer patch (conditional on the resourceVersion memop
    read) gets a real 409; nothing is reported, nothing is overwritten; the retry succeeds."""
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    await env.synced()
    env.server.silence_watches(True)  # memop's cache stays behind the server
    await env.client.patch(MEMCACHEDS, NAME, {"metadata": {"labels": {"edited": "yes"}}}, env.namespace)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Conflict):
        await env.reconcile()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("memop")]
    assert await env.events() == []
    cr = await env.get(MEMCACHEDS)
    assert "finalizers" not in cr["metadata"]
    assert not cr.get("status")
    env.server.silence_watches(False)
    await env.converge()
    cr = await env.get(MEMCACHEDS)
    assert cr["metadata"]["labels"] == {"edited": "yes"}
    assert cr["metadata"]["finalizers"] == [FINALIZER]


async def test_a_conflict_on_the_deployment_is_not_reported_either(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    await env.converge()
    await env.client.patch(MEMCACHEDS, NAME, {"spec": {"size": 2}}, env.namespace)
    await env.synced()
    env.server.faults.fail(409, times=1, verb="patch", resource="deployments")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Conflict):
        await env.reconcile()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("memop")]
    assert condition(await env.get(MEMCACHEDS), "Degraded")["status"] == "False"
    assert await env.events("ReconcileError") == []
    await env.converge()
    assert (await env.get(DEPLOYMENTS))["spec"]["replicas"] == 2


async def test_removing_the_finalizer_never_removes_another_writers(env: Env) -> None:
    """memop's cache holds [a, ours, other]; meanwhile "a" is removed on the server, so our
    finalizer moved to index 0 and index 1 is "other". The JSON patch's ``test`` makes the
    removal fail instead of taking "other" with it; the retry removes only ours."""
    await env.client.create(
        MEMCACHEDS, memcached(size=1, finalizers=["example.com/a", FINALIZER, OTHER_FINALIZER]), env.namespace
    )
    await env.converge()
    await env.client.delete(MEMCACHEDS, NAME, env.namespace)
    await env.synced()
    env.server.silence_watches(True)
    await env.client.patch(
        MEMCACHEDS,
        NAME,
        [
            {"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/a"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
        ],
        env.namespace,
        patch_type="json",
    )
    result, sent = await env.reconcile()
    assert result == Result(requeue=True)
    assert kinds(sent) == [("patch", "memcacheds", "status"), ("patch", "memcacheds", "")]
    assert sent[-1].status == 422
    cr = await env.get(MEMCACHEDS)
    assert cr["metadata"]["finalizers"] == [FINALIZER, OTHER_FINALIZER]
    degraded = condition(cr, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "Finalizing")
    [event] = await env.events("Finalizing")
    assert event["type"] == "Warning"
    env.server.silence_watches(False)
    await env.synced()
    result, sent = await env.reconcile()
    assert result is None
    assert kinds(sent) == [("patch", "memcacheds", "")]
    cr = await env.get(MEMCACHEDS)
    assert cr["metadata"]["finalizers"] == [OTHER_FINALIZER]
    # The Deployment is left to garbage collection (its ownerReference), not deleted by memop.
    assert not [r for r in env.server.log.records if r.verb == "delete" and r.user_agent.startswith(MEMOP)]
    assert (await env.get(DEPLOYMENTS))["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True


async def test_a_memcached_being_deleted_without_our_finalizer_is_not_touched(env: Env) -> None:
    await env.client.create(MEMCACHEDS, memcached(size=1, finalizers=[OTHER_FINALIZER]), env.namespace)
    await env.client.delete(MEMCACHEDS, NAME, env.namespace)
    await env.synced()
    assert await env.reconcile() == (None, [])


# --- 403 ----------------------------------------------------------------------------------------------


def _error_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_forbidden_to_add_the_finalizer_says_which_permission(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env.server.faults.forbid(verb="patch", resource="memcacheds", subresource="")
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    await env.synced()
    with pytest.raises(Forbidden):
        await env.reconcile()
    missing = 'cannot patch resource "memcacheds" in API group "cache.example.com"'
    assert any(missing in m for m in _error_logs(caplog))
    [event] = await env.events("Forbidden")
    assert event["type"] == "Warning"
    assert missing in event["message"]
    degraded = condition(await env.get(MEMCACHEDS), "Degraded")
    assert degraded["status"] == "True"
    assert missing in degraded["message"]
    env.server.faults.clear()
    await env.converge()
    assert condition(await env.get(MEMCACHEDS), "Degraded")["status"] == "False"


@pytest.mark.parametrize(("verb", "rbac_verb"), [("create", "create"), ("patch", "patch")])
async def test_forbidden_deployment_writes_say_which_permission(
    env: Env, caplog: pytest.LogCaptureFixture, verb: str, rbac_verb: str
) -> None:
    await env.client.create(MEMCACHEDS, memcached(size=1), env.namespace)
    if verb == "patch":
        await env.converge()
        await env.client.patch(MEMCACHEDS, NAME, {"spec": {"size": 2}}, env.namespace)
    env.server.faults.forbid(verb=verb, resource="deployments")
    await env.synced()
    with pytest.raises(Forbidden):
        await env.reconcile()
    missing = f'cannot {rbac_verb} resource "deployments" in API group "apps"'
    assert any(missing in m for m in _error_logs(caplog))
    [event] = await env.events("Forbidden")
    assert missing in event["message"]
    assert missing in condition(await env.get(MEMCACHEDS), "Degraded")["message"]


async def test_forbidden_to_remove_the_finalizer_says_which_permission(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    await env.client.create(MEMCACHEDS, memcached(size=1, finalizers=[OTHER_FINALIZER]), env.namespace)
    await env.converge()
    await env.client.delete(MEMCACHEDS, NAME, env.namespace)
    env.server.faults.forbid(verb="patch", resource="memcacheds", subresource="")
    await env.synced()
    with pytest.raises(Forbidden):
        await env.reconcile()
    missing = 'cannot patch resource "memcacheds" in API group "cache.example.com"'
    assert any(missing in m for m in _error_logs(caplog))
    [event] = await env.events("Forbidden")
    assert missing in event["message"]
    degraded = condition(await env.get(MEMCACHEDS), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "Finalizing")
    assert missing in degraded["message"]
    env.server.faults.clear()
    await env.synced()
    await env.reconcile()
    assert (await env.get(MEMCACHEDS))["metadata"]["finalizers"] == [OTHER_FINALIZER]


# --- status.nodes from the pods ------------------------------------------------------------------


async def test_nodes_are_the_live_pods_of_this_memcached_only(env: Env) -> None:
    await env.client.create(MEMCACHEDS, memcached(size=2), env.namespace)
    await env.converge()

    async def pod(name: str, instance: str = NAME, phase: str | None = None, **meta: Any) -> None:
        labels = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": instance}
        body = {
            "metadata": {"name": name, "labels": labels, **meta},
            "spec": {"containers": [{"name": "memcached", "image": "memcached"}]},
        }
        await env.client.create(PODS, body, env.namespace)
        if phase is not None:
            await env.client.patch_status(PODS, name, {"status": {"phase": phase}}, env.namespace)

    await pod("c-running", phase="Running")
    await pod("b-pending")  # no phase yet: Pending
    await pod("a-succeeded", phase="Succeeded")
    await pod("d-failed", phase="Failed")
    await pod("e-terminating", phase="Running", finalizers=["example.com/hold"])
    await env.client.delete(PODS, "e-terminating", env.namespace)
    await pod("f-other", instance="other", phase="Running")
    await env.converge()
    assert (await env.get(MEMCACHEDS))["status"]["nodes"] == ["b-pending", "c-running"]
    await env.client.delete(PODS, "c-running", env.namespace)
    await env.converge()
    assert (await env.get(MEMCACHEDS))["status"]["nodes"] == ["b-pending"]


# --- the watches setup declares ----------------------------------------------------------------------


def _pod(instance: str | None, name: str = "memcached", namespace: str = "ns") -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name}
    if instance is not None:
        labels["app.kubernetes.io/instance"] = instance
    return {"metadata": {"name": "p", "namespace": namespace, "labels": labels}}


def test_pods_map_to_their_memcached_through_the_instance_label() -> None:
    assert pods_to_memcached(_pod("cache")) == [Request("ns", "cache")]
    assert pods_to_memcached(_pod("cache", name="redis")) == []  # not a memcached pod
    assert pods_to_memcached(_pod(None)) == []
    assert pods_to_memcached(_pod("")) == []
    assert pods_to_memcached({"metadata": {"name": "p", "namespace": "ns", "labels": None}}) == []
    assert pods_to_memcached({}) == []


async def test_setup_watches_memcacheds_by_generation_owned_deployments_and_pods(env: Env) -> None:
    cache = Cache(env.reconciler.client)  # never started: only the declarations are read
    controller = setup(cache, env.reconciler.client, env.recorder)
    watches = {w.resource: w for w in controller.watches}
    assert set(watches) == {MEMCACHEDS, DEPLOYMENTS, PODS}

    def requests(
        resource: Resource, event: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> list[Request]:
        spec = watches[resource]
        if not all(p(event, obj, old) for p in spec.predicates):
            return []
        return list(spec.mapper(event, obj, old))

    cr = {"metadata": {"name": "c", "namespace": "ns", "uid": "u1", "generation": 1, "resourceVersion": "1"}}

    def changed(**meta: Any) -> dict[str, Any]:
        return {**cr, "metadata": {**cr["metadata"], "resourceVersion": "2", **meta}}

    me = [Request("ns", "c")]
    assert requests(MEMCACHEDS, ADDED, cr, None) == me
    assert requests(MEMCACHEDS, DELETED, cr, cr) == me
    assert requests(MEMCACHEDS, RESYNC, cr, cr) == me
    assert requests(MEMCACHEDS, MODIFIED, changed(generation=2), cr) == me
    assert requests(MEMCACHEDS, MODIFIED, changed(deletionTimestamp="2024-05-01T10:00:00Z"), cr) == me
    # Our own status and finalizer writes, and label edits, leave the generation alone.
    assert requests(MEMCACHEDS, MODIFIED, {**changed(), "status": {"nodes": []}}, cr) == []
    assert requests(MEMCACHEDS, MODIFIED, changed(finalizers=[FINALIZER]), cr) == []

    owner = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "c", "uid": "u1"}
    owned = {"metadata": {"name": "c", "namespace": "ns", "ownerReferences": [{**owner, "controller": True}]}}
    assert requests(DEPLOYMENTS, MODIFIED, owned, owned) == me
    not_controller = {"metadata": {"name": "c", "namespace": "ns", "ownerReferences": [owner]}}
    assert requests(DEPLOYMENTS, ADDED, not_controller, None) == []
    assert requests(DEPLOYMENTS, ADDED, {"metadata": {"name": "c", "namespace": "ns"}}, None) == []
    assert requests(PODS, MODIFIED, _pod("c"), _pod("c")) == me
    assert requests(PODS, DELETED, _pod("c"), _pod("c")) == me
    # setup installs its transforms: what the cache stores of a pod is pod_transform's output.
    pod = {**_pod("c"), "spec": {"nodeName": "n1"}, "status": {"phase": "Running", "podIP": "10.0.0.1"}}
    assert cache.informer(PODS).store.prepare(pod) == pod_transform(pod)
    assert {
        MEMCACHEDS: memcached_transform,
        PODS: pod_transform,
        DEPLOYMENTS: deployment_transform,
    } == CACHE_TRANSFORMS
    # Only memcached pods are listed and watched, as the reconciler selects them.
    assert [r.label_selector for r in cache.informer(PODS).reflectors] == ["app.kubernetes.io/name=memcached"]
    assert [r.label_selector for r in cache.informer(DEPLOYMENTS).reflectors] == [None]


async def test_only_memcached_pods_reach_the_cache(env: Env) -> None:
    """Other pods of the namespace are never listed or watched (most of a cluster's pods)."""
    ns = env.namespace
    foreign = {
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }
    ours = {**_pod("c", namespace=ns), "spec": {"containers": [{"name": "memcached", "image": "memcached"}]}}
    ours["metadata"] = {**ours["metadata"], "name": "memcached-pod"}
    await env.client.create(PODS, foreign, ns)
    await env.client.create(PODS, ours, ns)
    await wait_for(lambda: env.cache.get(PODS, "memcached-pod", ns) is not None, timeout=10)
    late = {**foreign, "metadata": {**foreign["metadata"], "name": "web-2"}}
    await env.client.create(PODS, late, ns)
    # A change after web-2, seen by the cache: the watch has passed web-2 without bringing it.
    patched = await env.client.patch(PODS, "memcached-pod", {"metadata": {"labels": {"x": "y"}}}, ns)
    written = patched["metadata"]["resourceVersion"]

    def caught_up() -> bool:
        cached = env.cache.get(PODS, "memcached-pod", ns)
        return cached is not None and cached["metadata"]["resourceVersion"] == written

    await wait_for(caught_up, timeout=10)
    assert [p["metadata"]["name"] for p in env.cache.list(PODS, ns)] == ["memcached-pod"]


def test_memcached_transform_drops_only_metadata_the_reconciler_never_reads() -> None:
    spec = {"size": 2, "image": "memcached:1.6"}
    full = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "generation": 3,
            "labels": {"team": "x"},
            "finalizers": ["cache.example.com/finalizer"],
            "deletionTimestamp": "2024-05-01T10:00:00Z",
            "creationTimestamp": "2024-05-01T09:00:00Z",
            "generateName": "c",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": json.dumps({"spec": spec})},
        },
        "spec": spec,
        "status": {"observedGeneration": 2, "nodes": ["c-1"]},
    }
    before = copy.deepcopy(full)
    kept = memcached_transform(full)
    assert full == before  # the input is left as it is
    assert kept == {
        **full,
        "metadata": {k: full["metadata"][k] for k in (
            "name", "namespace", "uid", "resourceVersion", "generation", "labels", "finalizers",
            "deletionTimestamp",
        )},
    }  # fmt: skip
    assert CACHE_TRANSFORMS[MEMCACHEDS] is memcached_transform
    parsed = parse_spec(full)
    assert parse_spec(kept) == parsed
    now = "2024-05-01T11:00:00Z"
    assert compute_status(kept, parsed, None, [], now) == compute_status(full, parsed, None, [], now)
    plain = {"metadata": {"name": "c"}}
    assert memcached_transform(plain) is plain  # nothing to drop: no copy
    assert memcached_transform({"metadata": "oops"}) == {"metadata": "oops"}


def test_pod_transform_keeps_what_status_and_watches_read() -> None:
    full = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "labels": {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "c"},
            "annotations": {"a": "b"},
            "deletionTimestamp": "2024-05-01T10:00:00Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": True}],
            "creationTimestamp": "2024-05-01T09:00:00Z",
        },
        "spec": {"containers": [{"name": "memcached", "image": "memcached"}], "nodeName": "n1"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "podIP": "10.0.0.1",
        },
    }
    kept = pod_transform(full)
    assert kept == {
        "metadata": {k: full["metadata"][k] for k in (
            "name", "namespace", "resourceVersion", "deletionTimestamp", "labels"
        )},
        "status": {"phase": "Running"},
    }  # fmt: skip
    with_more_labels = {**full, "metadata": {**full["metadata"], "labels": {
        **full["metadata"]["labels"], "pod-template-hash": "abc", "team": "x"
    }}}  # fmt: skip
    assert pod_transform(with_more_labels) == kept  # only the labels memop selects on
    assert pod_transform({"metadata": {"labels": "oops"}})["metadata"]["labels"] == "oops"
    assert pods_to_memcached(kept) == pods_to_memcached(full)
    assert nodes([kept]) == nodes([full])
    assert pod_transform({}) == {"metadata": {}, "status": {}}
