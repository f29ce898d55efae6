"""Reflector under faults: after each, the store equals the server and every change was seen.

Runs against the in-memory API server over real HTTP through the real Client.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.runtime.backoff import Backoff
from memop.runtime.client import Client
from memop.runtime.reflector import Reflector
from memop.runtime.resources import CONFIGMAPS
from memop.runtime.store import DELETED, ObjectStore
from memop.testing.server import ApiServer
from memop.testing.wait import wait_for

NS = "default"


class Recorder:
    """Every change the reflector dispatched, and the set of names it believes exist."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.alive: set[str] = set()

    def __call__(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = obj["metadata"]["name"]
        self.events.append((event_type, name, obj["metadata"].get("resourceVersion", "")))
        if event_type == DELETED:
            self.alive.discard(name)
        else:
            self.alive.add(name)

    def deleted(self) -> set[str]:
        return {name for kind, name, _ in self.events if kind == DELETED}


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=0.2) as srv:
        yield srv


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="reflector-test", max_retries=3, timeout=5)


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": dict(data)}


async def server_state(client: Client) -> dict[str, str]:
    items, _ = await client.list_all(CONFIGMAPS, NS)
    return {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in items}


def store_state(store: ObjectStore) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in store.list(NS)}


async def converged(client: Client, store: ObjectStore, recorder: Recorder) -> bool:
    state = await server_state(client)
    return store_state(store) == state and recorder.alive == set(state)


class Running:
    def __init__(self, client: Client, **kwargs: Any) -> None:
        self.store = ObjectStore(CONFIGMAPS)
        self.recorder = Recorder()
        kwargs.setdefault("backoff", Backoff(initial=0.02, maximum=0.1, jitter=0.1))
        self.reflector = Reflector(client, CONFIGMAPS, self.store, self.recorder, namespace=NS, **kwargs)
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(self.reflector.run())
        await asyncio.wait_for(self.reflector.synced.wait(), 5)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


async def test_list_then_watch_mirrors_creates_updates_and_deletes(client: Client) -> None:
    await client.create(CONFIGMAPS, configmap("before"), NS)
    async with Running(client) as run:
        assert run.recorder.events[0][:2] == ("ADDED", "before")
        await client.create(CONFIGMAPS, configmap("a"), NS)
        await client.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, NS)
        await client.delete(CONFIGMAPS, "before", NS)
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=5)
        assert run.recorder.deleted() == {"before"}
        assert run.store.get("a", NS)["data"] == {"k": "v"}  # type: ignore[index]
        assert run.reflector.relists == 1


async def test_bookmarks_advance_the_resource_version_without_events(
    server: ApiServer, client: Client
) -> None:
    async with Running(client) as run:
        await client.create(CONFIGMAPS, configmap("a"), NS)
        await wait_for(lambda: run.store.get("a", NS) is not None, timeout=5)
        # A write elsewhere moves the global resourceVersion; only a bookmark can tell us.
        await client.create(CONFIGMAPS, configmap("elsewhere"), "kube-system")
        _, latest = await client.list_all(CONFIGMAPS, "kube-system")
        await wait_for(lambda: int(run.reflector.last_resource_version) >= int(latest), timeout=5)
        assert [name for _, name, _ in run.recorder.events] == ["a"]


async def test_dropped_connections_resume_from_the_last_resource_version(
    server: ApiServer, client: Client
) -> None:
    async with Running(client) as run:
        for round_ in range(5):
            await client.create(CONFIGMAPS, configmap(f"c{round_}"), NS)
            if round_ % 2:
                await client.delete(CONFIGMAPS, f"c{round_ - 1}", NS)
            await server.drop_watches()
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=10)
        assert run.recorder.deleted() == {"c0", "c2"}
        assert run.reflector.relists == 1  # resumed every time, never relisted


async def test_a_silent_connection_is_detected_by_the_read_timeout(server: ApiServer, client: Client) -> None:
    async with Running(client, read_timeout=0.5) as run:
        watches = server.log.count(verb="watch", resource="configmaps")
        server.silence_watches(True)
        await client.create(CONFIGMAPS, configmap("during-silence"), NS)
        # The reflector gives up on the silent stream after read_timeout and watches again.
        await wait_for(lambda: server.log.count(verb="watch", resource="configmaps") > watches, timeout=5)
        server.silence_watches(False)
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=10)
        assert run.store.get("during-silence", NS) is not None
        assert run.reflector.relists == 1  # resumed from its resourceVersion, no relist


async def test_forced_410_mid_watch_relists(server: ApiServer, client: Client) -> None:
    async with Running(client) as run:
        await client.create(CONFIGMAPS, configmap("a"), NS)
        await wait_for(lambda: run.store.get("a", NS) is not None, timeout=5)
        await server.expire_watches()
        await client.create(CONFIGMAPS, configmap("b"), NS)
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=10)
        assert run.reflector.relists >= 2


async def test_compaction_while_disconnected_still_delivers_the_deletes_in_the_gap(
    server: ApiServer, client: Client
) -> None:
    for name in ("x", "y", "z"):
        await client.create(CONFIGMAPS, configmap(name), NS)
    async with Running(client) as run:
        assert run.recorder.alive == {"x", "y", "z"}
        # Keep the reflector away: its next watches fail, then delete in the gap and compact.
        server.faults.fail(500, times=3, verb="watch", resource="configmaps")
        await server.drop_watches()
        await client.delete(CONFIGMAPS, "x", NS)
        await client.patch(CONFIGMAPS, "y", {"data": {"changed": "yes"}}, NS)
        server.compact()
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=10)
        assert "x" in run.recorder.deleted()
        assert run.store.get("y", NS)["data"] == {"changed": "yes"}  # type: ignore[index]
        assert run.reflector.relists == 2


async def test_list_failures_429_and_500_are_retried_until_synced(server: ApiServer, client: Client) -> None:
    await client.create(CONFIGMAPS, configmap("a"), NS)
    server.faults.fail(500, times=4, verb="list", resource="configmaps")
    server.faults.fail(429, times=4, verb="list", resource="configmaps", retry_after=0)
    async with Running(client) as run:
        assert run.recorder.alive == {"a"}


async def test_server_restart_is_survived(server: ApiServer, client: Client) -> None:
    async with Running(client) as run:
        await client.create(CONFIGMAPS, configmap("a"), NS)
        await server.restart()
        await client.create(CONFIGMAPS, configmap("b"), NS)
        await client.delete(CONFIGMAPS, "a", NS)
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=10)
        assert run.recorder.deleted() == {"a"}


async def test_managed_fields_never_reach_the_store(client: Client) -> None:
    async with Running(client) as run:
        await client.create(CONFIGMAPS, configmap("a"), NS)
        await wait_for(lambda: run.store.get("a", NS) is not None, timeout=5)
        stored = run.store.get("a", NS)
        assert stored is not None
        assert "managedFields" not in stored["metadata"]
        raw = await client.get(CONFIGMAPS, "a", NS)
        assert raw["metadata"].get("managedFields"), (
            "the server should send managedFields for this to mean anything"
        )
