"""Reflector under faults: after each, the store equals the server and every change was seen.

Runs against the in-memory API server over real HTTP through the real Client.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from memop.runtime.cache.reflector import ListWatcher, Reflector
from memop.runtime.cache.store import ADDED, DELETED, MODIFIED, ObjectStore
from memop.runtime.client.client import Client
from memop.runtime.client.reachability import Reachability
from memop.runtime.client.resources import CONFIGMAPS
from memop.runtime.util.backoff import Backoff
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

NS = "default"


class Recorder:
    """Every change the reflector dispatched, and the objects (name -> resourceVersion) a
    handler would believe exist from those changes alone."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.alive: dict[str, str] = {}
        self.violations: list[str] = []

    def __call__(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = obj["metadata"]["name"]
        rv = obj["metadata"].get("resourceVersion", "")
        self.events.append((event_type, name, rv))
        # Recorded rather than raised: the reflector would catch an exception and relist.
        if event_type == DELETED:
            if self.alive.pop(name, None) is None:
                self.violations.append(f"DELETED {name}, which was never added")
        else:
            if (name in self.alive) != (event_type == MODIFIED):
                # An ADDED for a known object, or a MODIFIED for an unknown one: an event was lost.
                self.violations.append(f"{event_type} {name} rv={rv}")
            self.alive[name] = rv

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
    """The store equals the server, and so does what the handler was told (latest versions
    included, so every update reached it, not only creates and deletes)."""
    state = await server_state(client)
    return store_state(store) == state and recorder.alive == state


class Running:
    def __init__(self, client: ListWatcher, **kwargs: Any) -> None:
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
        assert self.recorder.violations == []


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
        assert set(run.recorder.alive) == {"x", "y", "z"}
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
        assert set(run.recorder.alive) == {"a"}
        assert await converged(client, run.store, run.recorder)
        # Each failed LIST was retried (by the client, then the reflector's backoff), not lost.
        assert server.log.count(verb="list", resource="configmaps", status=200) >= 1
        assert server.log.count(verb="list", resource="configmaps", status=500) == 4
        assert server.log.count(verb="list", resource="configmaps", status=429) == 4


async def test_server_restart_is_survived(server: ApiServer, client: Client) -> None:
    async with Running(client) as run:
        await client.create(CONFIGMAPS, configmap("a"), NS)
        await server.restart()
        await client.create(CONFIGMAPS, configmap("b"), NS)
        await client.delete(CONFIGMAPS, "a", NS)
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=10)
        assert run.recorder.deleted() == {"a"}


async def test_a_restart_that_rebuilds_the_watch_cache_relists_once(
    server: ApiServer, client: Client
) -> None:
    for name in ("kept", "deleted-while-down", "changed-while-down"):
        await client.create(CONFIGMAPS, configmap(name), NS)
    async with Running(client) as run:
        restart = asyncio.create_task(server.restart(downtime=0.5, rebuild_watch_cache=True))
        await wait_for(lambda: not server.listening, timeout=5)
        # Changes reaching etcd while this server is down: the reflector's resourceVersion is
        # now older than the rebuilt watch cache, so its watch gets 410 and it must relist.
        configmaps = server.store.resource("", "v1", "configmaps")
        server.store.delete(configmaps, NS, "deleted-while-down")
        server.store.patch(
            configmaps, NS, "changed-while-down", {"data": {"k": "v"}}, "application/merge-patch+json"
        )
        server.store.create(configmaps, NS, configmap("added-while-down"))
        await restart
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=10)
        assert run.reflector.relists == 2  # the first LIST, and one after the restart
        assert run.recorder.deleted() == {"deleted-while-down"}
        assert run.store.get("changed-while-down", NS)["data"] == {"k": "v"}  # type: ignore[index]
        # And it watches again from the relist: later changes arrive without another LIST.
        await client.create(CONFIGMAPS, configmap("after"), NS)
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=10)
        assert run.reflector.relists == 2


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


class RecordingClient:
    """The real Client, passed through unchanged, with the arguments of each watch recorded."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.watches: list[dict[str, Any]] = []

    async def list(self, res: Any, namespace: str | None = None, **kwargs: Any) -> dict[str, Any]:
        return await self.client.list(res, namespace, **kwargs)

    def watch_batches(self, res: Any, namespace: str | None = None, **kwargs: Any) -> Any:
        self.watches.append(dict(kwargs))
        return self.client.watch_batches(res, namespace, **kwargs)

    @property
    def reachability(self) -> Reachability:
        return self.client.reachability


async def test_each_watch_asks_for_bookmarks_a_random_timeout_and_resumes_where_it_was(
    server: ApiServer, client: Client
) -> None:
    recording = RecordingClient(client)
    async with Running(recording, read_timeout=42.0, rand=random.Random(3)) as run:
        _, list_rv = await client.list_all(CONFIGMAPS, NS)
        await wait_for(lambda: len(recording.watches) == 1, timeout=5)
        assert int(recording.watches[0]["resource_version"]) >= int(list_rv)
        for round_ in range(8):
            created = await client.create(CONFIGMAPS, configmap(f"c{round_}"), NS)
            await wait_for(lambda: run.store.get(f"c{round_}", NS) is not None, timeout=5)  # noqa: B023
            opened = len(recording.watches)
            await server.drop_watches()
            await wait_for(lambda: len(recording.watches) > opened, timeout=5)  # noqa: B023
            resumed = recording.watches[-1]["resource_version"]
            # From where it was (never before the object it has seen, never from scratch).
            assert int(resumed) >= int(created["metadata"]["resourceVersion"])
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=5)
        assert run.reflector.relists == 1
    timeouts = [w["timeout_seconds"] for w in recording.watches]
    assert all(300 <= t < 600 for t in timeouts), timeouts
    assert len(set(timeouts)) > 1  # random per watch, so many processes do not reconnect in lockstep
    assert all(w["allow_bookmarks"] is True and w["read_timeout"] == 42.0 for w in recording.watches)


async def test_a_burst_read_in_batch_windows_is_mirrored_whole_and_in_order(client: Client) -> None:
    recording = RecordingClient(client)
    async with Running(recording, batch_window=0.05) as run:
        assert all(w["batch_window"] == 0.05 for w in recording.watches)
        for n in range(150):
            await client.create(CONFIGMAPS, configmap(f"burst-{n}"), NS)
        await client.patch(CONFIGMAPS, "burst-0", {"data": {"k": "last"}}, NS)
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=30)
        assert run.store.get("burst-0", NS)["data"] == {"k": "last"}  # type: ignore[index]
        added = [name for kind, name, _ in run.recorder.events if kind == ADDED and name.startswith("burst-")]
        assert added == [f"burst-{n}" for n in range(150)]  # the server's order


# -- no hot loops: what must wait on the backoff -------------------------------------------


class SleepRecordingClock(FakeClock):
    """A FakeClock that remembers every sleep asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        await super().sleep(delay)


class OnFakeClock:
    """A reflector whose clock (backoff sleeps, short-watch detection) only moves when told."""

    def __init__(self, client: ListWatcher) -> None:
        self.clock = SleepRecordingClock()
        self.store = ObjectStore(CONFIGMAPS)
        self.recorder = Recorder()
        self.reflector = Reflector(
            client,
            CONFIGMAPS,
            self.store,
            self.recorder,
            namespace=NS,
            clock=self.clock,
            backoff=Backoff(clock=self.clock, jitter=0.0),
        )
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> OnFakeClock:
        self.task = asyncio.create_task(self.reflector.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task
        assert self.recorder.violations == []

    async def backs_off(self, delay: float) -> None:
        """Wait until the reflector sleeps on the clock (so it is not looping), check for how
        long, and let the sleep end."""
        sleeps = len(self.clock.sleeps)
        await wait_for(
            lambda: self.clock.pending_timers() == 1 and len(self.clock.sleeps) > sleeps, timeout=5
        )
        assert self.clock.sleeps[sleeps:] == [pytest.approx(delay)]
        self.clock.advance(delay)


async def test_a_list_answering_410_is_retried_after_the_backoff(server: ApiServer, client: Client) -> None:
    await client.create(CONFIGMAPS, configmap("a"), NS)
    server.faults.fail(410, times=2, verb="list", resource="configmaps")
    async with OnFakeClock(client) as run:
        await run.backs_off(0.8)
        assert server.log.count(verb="list", resource="configmaps") == 1
        await run.backs_off(1.6)
        await asyncio.wait_for(run.reflector.synced.wait(), 5)
        assert server.log.count(verb="list", resource="configmaps") == 3
        assert set(run.recorder.alive) == {"a"}


async def test_a_watch_answering_410_right_after_its_list_backs_off(
    server: ApiServer, client: Client
) -> None:
    server.faults.fail(410, times=2, verb="watch", resource="configmaps")
    async with OnFakeClock(client) as run:
        await run.backs_off(0.8)
        await run.backs_off(1.6)
        await wait_for(
            lambda: server.log.count(verb="watch", resource="configmaps", status=200) == 1, timeout=5
        )
        assert server.log.count(verb="list", resource="configmaps") == 3
        await client.create(CONFIGMAPS, configmap("b"), NS)
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=5)


async def test_a_watch_expiring_after_a_while_relists_at_once(server: ApiServer, client: Client) -> None:
    async with OnFakeClock(client) as run:
        await wait_for(lambda: server.log.count(verb="watch", resource="configmaps") == 1, timeout=5)
        run.clock.advance(60.0)  # the watch has been running a minute
        await client.create(CONFIGMAPS, configmap("a"), NS)
        await wait_for(lambda: run.store.get("a", NS) is not None, timeout=5)
        await server.expire_watches()
        await wait_for(lambda: run.reflector.relists == 2, timeout=5)
        await client.create(CONFIGMAPS, configmap("b"), NS)
        await wait_for(lambda: converged(client, run.store, run.recorder), timeout=5)
        assert run.clock.sleeps == []


async def test_a_watch_that_ends_at_once_and_empty_backs_off() -> None:
    """A server (or proxy) answering every watch with an empty 200 must not be hammered."""
    watches: list[str] = []

    async def configmaps(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "true":
            watches.append(request.query.get("resourceVersion", ""))
            return web.Response(status=200, content_type="application/json", body=b"")
        return web.json_response({"kind": "ConfigMapList", "metadata": {"resourceVersion": "5"}, "items": []})

    app = web.Application()
    app.router.add_get(f"/api/v1/namespaces/{NS}/configmaps", configmaps)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        configuration = Configuration(host=f"http://127.0.0.1:{runner.addresses[0][1]}")
        async with ApiClient(configuration) as api, OnFakeClock(Client(api, max_retries=0)) as run:
            await run.backs_off(0.8)
            assert watches == ["5"]
            await run.backs_off(1.6)
            assert watches == ["5", "5"]  # resumed from where it was, no relist
            assert run.reflector.relists == 1
    finally:
        await runner.cleanup()


# -- Retry-After: never sooner than the server asked -----------------------------------------


@pytest.fixture
async def unretrying(server: ApiServer) -> AsyncIterator[Client]:
    """A Client that hands every failure to the reflector at once: its own retries would wait
    out the Retry-After on the real clock instead of the reflector's fake one."""
    async with ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="reflector-test", max_retries=0)


async def sleeps_exactly(
    run: OnFakeClock, delay: float, requests: Callable[[], int], *, nth: int = 0
) -> None:
    """The reflector's sleep number ``nth`` (from 0) on the fake clock lasts ``delay`` and it
    sends nothing before it is over: ``requests()`` (a count of the calls it retries) moves
    only once the whole delay passed."""
    await wait_for(lambda: run.clock.pending_timers() == 1 and len(run.clock.sleeps) > nth, timeout=5)
    assert len(run.clock.sleeps) == nth + 1
    assert run.clock.sleeps[nth] == pytest.approx(delay)
    before = requests()
    run.clock.advance(delay - 0.01)
    assert run.clock.pending_timers() == 1  # still asleep
    assert requests() == before
    run.clock.advance(0.01)
    await wait_for(lambda: requests() > before, timeout=5)


@pytest.mark.parametrize("status", [429, 503])
async def test_a_list_failure_with_retry_after_waits_that_long_not_the_backoff(
    server: ApiServer, unretrying: Client, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    await unretrying.create(CONFIGMAPS, configmap("a"), NS)
    server.faults.fail(status, retry_after=7, verb="list", resource="configmaps", times=1)
    async with OnFakeClock(unretrying) as run:
        await sleeps_exactly(run, 7.0, lambda: server.log.count(verb="list", resource="configmaps"))
        await asyncio.wait_for(run.reflector.synced.wait(), 5)
        assert set(run.recorder.alive) == {"a"}
        assert server.log.count(verb="list", resource="configmaps", status=status) == 1
    assert "list of configmaps in default failed, retrying in 7.0s (the server's Retry-After)" in caplog.text


async def test_a_watch_answering_429_with_retry_after_waits_that_long_and_resumes(
    server: ApiServer, unretrying: Client, caplog: pytest.LogCaptureFixture
) -> None:
    server.faults.fail(429, retry_after=7, verb="watch", resource="configmaps", times=1)
    async with OnFakeClock(unretrying) as run:
        await sleeps_exactly(run, 7.0, lambda: server.log.count(verb="watch", resource="configmaps"))
        assert server.log.count(verb="watch", resource="configmaps", status=429) == 1
        await unretrying.create(CONFIGMAPS, configmap("b"), NS)
        await wait_for(lambda: converged(unretrying, run.store, run.recorder), timeout=5)
        assert run.reflector.relists == 1  # a throttled watch is resumed, not relisted
    assert "watch of configmaps in default failed, retrying in 7.0s (the server's Retry-After)" in caplog.text


async def test_after_a_5xx_a_backoff_longer_than_retry_after_is_kept(
    server: ApiServer, unretrying: Client
) -> None:
    server.faults.fail(503, retry_after=1, verb="list", resource="configmaps", times=2)
    lists = lambda: server.log.count(verb="list", resource="configmaps")  # noqa: E731
    async with OnFakeClock(unretrying) as run:
        await sleeps_exactly(run, 1.0, lists)  # the backoff's 0.8 is shorter than Retry-After
        await sleeps_exactly(run, 1.6, lists, nth=1)  # the backoff's 1.6 is longer
        await asyncio.wait_for(run.reflector.synced.wait(), 5)


async def test_a_429_waits_its_retry_after_and_does_not_grow_the_backoff(
    server: ApiServer, unretrying: Client
) -> None:
    """A 429 says when to come back (a watch cache initialising after a restart says 1 s):
    the reflector comes back then, every time, and a later failure starts from a fresh backoff.
    A growing backoff here made watches wait 9 s longer than the server asked."""
    server.faults.fail(429, retry_after=1, verb="watch", resource="configmaps", times=3)
    watches = lambda: server.log.count(verb="watch", resource="configmaps")  # noqa: E731
    async with OnFakeClock(unretrying) as run:
        await asyncio.wait_for(run.reflector.synced.wait(), 5)
        for nth in range(3):
            await sleeps_exactly(run, 1.0, watches, nth=nth)
        await wait_for(lambda: watches() == 4, timeout=5)
        server.faults.fail(500, verb="watch", resource="configmaps", times=1)
        run.clock.advance(2.0)  # an established watch, not a short one
        await server.drop_watches()  # resumed at once, and the 500 then backs off
        await sleeps_exactly(run, 0.8, watches, nth=3)  # the backoff's first step
