"""The controller honours v1beta1's containerPort, which the v1alpha1 object it reads keeps in an
annotation: the Deployment's port and memcached's ``--port``, the cache keeping that annotation,
the watch passing its changes, a bad value reported as InvalidSpec. Reconciles are driven one
at a time against the in-memory API server, as in test_controller.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.memcached.api import CONTAINER_PORT_ANNOTATION, MEMCACHEDS, container_port, parse_spec
from memop.memcached.controller import (
    MemcachedReconciler,
    declare_informers,
    memcached_transform,
    setup,
    spec_changed,
)
from memop.memcached.conversion import to_hub
from memop.memcached.desired import desired_deployment
from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import ADDED, MODIFIED, resource_version
from memop.runtime.client.client import Client
from memop.runtime.client.resources import DEPLOYMENTS, EVENTS, NAMESPACES
from memop.runtime.controller.reconcile import Request
from memop.runtime.manager.events import EventRecorder
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import install_crd
from memop.testing.wait import wait_for

A = CONTAINER_PORT_ANNOTATION
NAME = "cache"


@dataclass
class Env:
    client: Client
    cache: Cache
    recorder: EventRecorder
    reconciler: MemcachedReconciler
    namespace: str

    async def synced(self) -> None:
        """Until memop's cache holds the server's Memcached and Deployment as they are."""

        async def same() -> bool:
            for resource in (MEMCACHEDS, DEPLOYMENTS):
                items, _ = await self.client.list_all(resource, self.namespace)
                cached = {resource_version(o) for o in self.cache.list(resource, self.namespace)}
                if {resource_version(i) for i in items} != cached:
                    return False
            return True

        await wait_for(same, timeout=10)

    async def reconcile(self) -> None:
        await self.synced()
        await self.reconciler.reconcile(Request(self.namespace, NAME))

    async def container(self) -> dict[str, Any]:
        deployment = await self.client.get(DEPLOYMENTS, NAME, self.namespace)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        return container  # type: ignore[no-any-return]


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with ApiServer() as server, ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="test")
        memop = Client(api, user_agent="memop-unit/port", max_retries=0)
        await install_crd(client)
        namespace = f"port-{uuid.uuid4().hex[:8]}"
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
        cache = Cache(memop, namespaces=[namespace])
        declare_informers(cache)
        recorder = EventRecorder(memop, "memcached-controller", clock=FakeClock())
        recorder.start()
        await cache.start()
        assert await cache.wait_for_sync(10)
        try:
            yield Env(
                client, cache, recorder, MemcachedReconciler(memop, cache, recorder, FakeClock()), namespace
            )
        finally:
            await recorder.stop()
            await cache.stop()


def memcached(port: str | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": NAME, "annotations": {"team": "cache"}}
    if port is not None:
        meta["annotations"][A] = port
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": meta, "spec": spec}


def ports(container: dict[str, Any]) -> list[int]:
    return [p["containerPort"] for p in container["ports"]]


async def test_the_deployment_exposes_and_memcached_listens_on_the_annotated_port(env: Env) -> None:
    # What a v1beta1 client's object becomes at v1alpha1, as the API server stores it.
    v1beta1 = {
        **memcached(),
        "apiVersion": "cache.example.com/v1beta1",
        "spec": {"size": 1, "containerPort": 8080},
    }
    await env.client.create(MEMCACHEDS, to_hub(v1beta1), env.namespace)
    # The cache keeps the annotation (and only it: the others are never read).
    await wait_for(lambda: env.cache.get(MEMCACHEDS, NAME, env.namespace) is not None, timeout=10)
    assert env.cache.get(MEMCACHEDS, NAME, env.namespace)["metadata"]["annotations"] == {A: "8080"}  # type: ignore[index]
    await env.reconcile()
    container = await env.container()
    assert ports(container) == [8080]
    assert "--port=8080" in container["command"]

    # A new port (a v1beta1 update, stored as a new annotation value): the Deployment follows.
    await env.client.patch(MEMCACHEDS, NAME, {"metadata": {"annotations": {A: "9090"}}}, env.namespace)
    await env.reconcile()
    container = await env.container()
    assert ports(container) == [9090]
    assert "--port=9090" in container["command"]
    assert "--port=8080" not in container["command"]

    # Back to memcached's default: no --port flag at all, as before v1beta1 existed.
    await env.client.patch(MEMCACHEDS, NAME, {"metadata": {"annotations": {A: None}}}, env.namespace)
    await env.reconcile()
    container = await env.container()
    assert ports(container) == [11211]
    assert not [arg for arg in container["command"] if arg.startswith("--port")]


async def test_a_bad_port_is_an_invalid_spec_not_a_crash(env: Env) -> None:
    await env.client.create(MEMCACHEDS, memcached("eighty", size=1), env.namespace)
    await env.reconcile()
    cr = await env.client.get(MEMCACHEDS, NAME, env.namespace)
    (degraded,) = [c for c in cr["status"]["conditions"] if c["type"] == "Degraded"]
    expected = (
        f'metadata.annotations[{A}]: Invalid value: "eighty": must be a port number, 1 to 65535 in decimal'
        " (v1beta1's spec.containerPort)"
    )
    assert (degraded["status"], degraded["reason"], degraded["message"]) == ("True", "InvalidSpec", expected)
    await env.recorder.flush()
    events, _ = await env.client.list_all(EVENTS, env.namespace)
    assert [e["message"] for e in events if e["reason"] == "InvalidSpec"] == [expected]
    items, _ = await env.client.list_all(DEPLOYMENTS, env.namespace)
    assert items == []


async def test_the_memcached_watch_passes_a_port_change_though_the_generation_stays(env: Env) -> None:
    cr: dict[str, Any] = {
        "metadata": {"name": "c", "namespace": "ns", "generation": 1, "resourceVersion": "1"}
    }

    def changed(annotations: dict[str, str] | None) -> dict[str, Any]:
        return {"metadata": {**cr["metadata"], "resourceVersion": "2", "annotations": annotations}}

    assert spec_changed(ADDED, cr, None)
    assert spec_changed(MODIFIED, changed({A: "8080"}), cr)
    assert spec_changed(MODIFIED, changed(None), changed({A: "8080"}))
    assert not spec_changed(MODIFIED, changed({"other": "x"}), cr)
    assert not spec_changed(MODIFIED, changed({A: "8080", "other": "y"}), changed({A: "8080"}))
    # It is the predicate setup puts on the Memcached watch.
    controller = setup(Cache(env.reconciler.client), env.reconciler.client, env.recorder)  # never started
    (watch,) = [w for w in controller.watches if w.resource == MEMCACHEDS]
    assert list(watch.predicates) == [spec_changed]


def test_the_transform_keeps_the_port_annotation_only() -> None:
    full = memcached("8080", size=2)
    full["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    kept = memcached_transform(full)
    assert kept["metadata"]["annotations"] == {A: "8080"}
    assert container_port(kept) == container_port(full) == 8080
    assert "annotations" not in memcached_transform(memcached(size=2))["metadata"]


def test_container_port_and_parse_spec_agree() -> None:
    assert container_port(memcached()) == 11211
    assert container_port(memcached("65535")) == 65535
    for bad in ("0", "65536", "-1", "08080", "", "1e3"):
        obj = memcached(bad)
        with pytest.raises(ValueError, match=r"must be a port number"):
            container_port(obj)
        with pytest.raises(ValueError, match=r"must be a port number"):
            parse_spec(obj)
    # Pure, as the rest of desired_deployment: the port is read from the object given.
    obj = {
        **memcached("11311"),
        "metadata": {**memcached("11311")["metadata"], "namespace": "ns", "uid": "u"},
    }
    (container,) = desired_deployment(obj, parse_spec(obj))["spec"]["template"]["spec"]["containers"]
    assert container["ports"] == [{"containerPort": 11311, "name": "memcached", "protocol": "TCP"}]
    assert container["command"] == ["memcached", "--memory-limit=64", "--port=11311", "-o", "modern", "-v"]
