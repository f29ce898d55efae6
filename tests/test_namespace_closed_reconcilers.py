"""memop's three reconcilers in a namespace being deleted: no RBAC hint, no failure reported.

Each reconciler is driven by hand (as tests/memcached/test_controller.py does) over a real
client and cache on the in-memory API server, with no simulated controllers: a deleted
namespace stays Terminating with its content untouched, the window in which, on a real cluster,
the namespace controller has deleted a resource's child but not yet the resource. There the
reconcile that puts the child back is refused (403, NamespaceTerminating): it must raise
:class:`NamespaceTerminating` for the runtime to handle (forget the request, one info line) and
nothing else: no "memop is not allowed" line, no Warning Event, no Degraded condition written.
The runtime's side is tested in tests/runtime/test_namespace_closed.py.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from kubernetes_asyncio.client import ApiClient

from memop import memcached, mypod, podset
from memop.memcached.api import MEMCACHEDS
from memop.mypod.api import MYPODS
from memop.podset.api import PODSETS
from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import resource_version
from memop.runtime.client.client import Client
from memop.runtime.client.closednamespaces import ClosedNamespaces
from memop.runtime.client.errors import NamespaceTerminating
from memop.runtime.client.resources import DEPLOYMENTS, NAMESPACES, PODS, Resource
from memop.runtime.controller.definition import ControllerDefinition, SetupContext
from memop.runtime.controller.reconcile import Reconciler, Request
from memop.runtime.manager.events import EventRecorder
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import install_crd
from memop.testing.wait import wait_for

MEMOP = "memop-unit/closed"
NAME = "x"
POD_SPEC = {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}


@dataclass
class Env:
    server: ApiServer
    client: Client  # the test's own
    cache: Cache
    recorder: EventRecorder
    closed: ClosedNamespaces
    reconciler: Reconciler
    namespace: str
    resources: tuple[Resource, ...]

    async def caught_up(self) -> bool:
        """Whether the cache holds what the server holds in the namespace (names and versions)."""
        for resource in self.resources:
            items, _ = await self.client.list_all(resource, self.namespace)
            server = {i["metadata"]["name"]: resource_version(i) for i in items}
            cached = {
                o["metadata"]["name"]: resource_version(o) for o in self.cache.list(resource, self.namespace)
            }
            if server != cached:
                return False
        return True

    async def converge(self) -> None:
        """Reconcile until a reconcile sends no write."""
        for _ in range(6):
            await wait_for(self.caught_up, timeout=10)
            before = len(self.server.log)
            await self.reconciler.reconcile(Request(self.namespace, NAME))
            writes = [
                r
                for r in self.server.log.records[before:]
                if r.user_agent.startswith(MEMOP)
                and r.verb not in ("get", "list", "watch")
                and r.resource != "events"
            ]
            if not writes:
                return
        raise AssertionError("no convergence in 6 reconciles")


@contextlib.asynccontextmanager
async def make_env(
    server: ApiServer, api: ApiClient, definition: ControllerDefinition, resources: tuple[Resource, ...]
) -> AsyncIterator[Env]:
    client = Client(api, user_agent="test")
    memop = Client(api, user_agent=MEMOP, max_retries=0)
    await install_crd(client)
    namespace = f"closed-{uuid.uuid4().hex[:8]}"
    await client.create(NAMESPACES, {"metadata": {"name": namespace}})
    cache = Cache(memop, namespaces=[namespace])
    closed = ClosedNamespaces()
    recorder = EventRecorder(memop, f"{definition.name}-controller", closed_namespaces=closed)
    controller = definition.setup(SetupContext(cache, memop, recorder))
    recorder.start()
    await cache.start()
    assert await cache.wait_for_sync(10)
    try:
        yield Env(server, client, cache, recorder, closed, controller.reconciler, namespace, resources)
    finally:
        await recorder.stop()
        await cache.stop()


@pytest.fixture
async def server() -> AsyncIterator[tuple[ApiServer, ApiClient]]:
    async with ApiServer() as srv, ApiClient(srv.client_configuration()) as api:
        yield srv, api


async def refused_quietly(
    env: Env,
    resource: Resource,
    delete_child: Callable[[], Awaitable[None]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Delete the converged resource's child, then the namespace (left Terminating), and check
    that the reconcile that puts the child back raises NamespaceTerminating and does nothing else."""
    caplog.set_level(logging.INFO, logger="memop")
    await env.converge()
    await env.recorder.flush()
    dropped = env.recorder.dropped
    await delete_child()
    await wait_for(env.caught_up, timeout=10)
    deleted = await env.client.delete(NAMESPACES, env.namespace)
    assert deleted is not None
    assert deleted["metadata"].get("deletionTimestamp")
    before = await env.client.get(resource, NAME, env.namespace)
    since = len(caplog.records)

    with pytest.raises(NamespaceTerminating) as refused:
        await env.reconciler.reconcile(Request(env.namespace, NAME))

    assert refused.value.namespace == env.namespace
    after = await env.client.get(resource, NAME, env.namespace)
    assert resource_version(after) == resource_version(before)  # no failure written in status
    await env.recorder.flush()
    assert env.recorder.dropped == dropped  # no Event recorded (it would have been refused)
    assert env.namespace not in env.closed
    loud = [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records[since:]
        if r.name.startswith("memop") and r.levelno >= logging.WARNING
    ]
    assert loud == []


async def test_memcached_does_not_call_a_namespace_being_deleted_a_permission_problem(
    server: tuple[ApiServer, ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    async with make_env(*server, memcached.DEFINITION, (MEMCACHEDS, DEPLOYMENTS)) as env:
        manifest = {"apiVersion": MEMCACHEDS.api_version, "kind": "Memcached", "metadata": {"name": NAME}}
        await env.client.create(MEMCACHEDS, {**manifest, "spec": {"size": 1}}, env.namespace)

        async def delete_deployment() -> None:
            await env.client.delete(DEPLOYMENTS, NAME, env.namespace)

        await refused_quietly(env, MEMCACHEDS, delete_deployment, caplog)


async def test_podset_does_not_report_a_namespace_being_deleted_as_a_failed_create(
    server: tuple[ApiServer, ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    async with make_env(*server, podset.DEFINITION, (PODSETS, PODS)) as env:
        await env.client.create(PODSETS, {"metadata": {"name": NAME}, "spec": {"replicas": 2}}, env.namespace)

        async def delete_a_pod() -> None:
            pods, _ = await env.client.list_all(PODS, env.namespace)
            await env.client.delete(PODS, pods[0]["metadata"]["name"], env.namespace, grace_period_seconds=0)

        await refused_quietly(env, PODSETS, delete_a_pod, caplog)


async def test_mypod_does_not_call_a_namespace_being_deleted_pod_forbidden(
    server: tuple[ApiServer, ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    async with make_env(*server, mypod.DEFINITION, (MYPODS, PODS)) as env:
        await env.client.create(
            MYPODS, {"metadata": {"name": NAME}, "spec": {"podSpec": POD_SPEC}}, env.namespace
        )

        async def delete_the_pod() -> None:
            await env.client.delete(PODS, NAME, env.namespace, grace_period_seconds=0)

        await refused_quietly(env, MYPODS, delete_the_pod, caplog)
