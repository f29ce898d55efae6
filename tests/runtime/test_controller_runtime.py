"""Controller: concurrency, per-key exclusion, Result semantics, resilience to exceptions.

Events come from the in-memory API server through the real client, reflector and cache.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from memop.runtime.cache.cache import Cache
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, Conflict
from memop.runtime.client.resources import CONFIGMAPS, DEPLOYMENTS, LEASES, NAMESPACES
from memop.runtime.controller import predicates
from memop.runtime.controller.controller import Controller, ControllerBuilder, _new_reconcile_id
from memop.runtime.controller.handlers import reports_state_only, reports_up_to_date
from memop.runtime.controller.reconcile import Request, Result, TerminalError
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

NS = "default"
_names = iter(range(1_000_000))


class ScriptedReconciler:
    """Runs ``behaviour(request)`` and records overlap per key and overall."""

    def __init__(self, behaviour: Callable[[Request], Awaitable[Result | None]]) -> None:
        self.behaviour = behaviour
        self.calls: list[Request] = []
        self.running: dict[Request, int] = {}
        self.max_per_key = 0
        self.max_total = 0

    async def reconcile(self, request: Request) -> Result | None:
        self.calls.append(request)
        self.running[request] = self.running.get(request, 0) + 1
        self.max_per_key = max(self.max_per_key, self.running[request])
        self.max_total = max(self.max_total, sum(self.running.values()))
        try:
            return await self.behaviour(request)
        finally:
            self.running[request] -= 1
            if not self.running[request]:
                del self.running[request]

    def count(self, name: str) -> int:
        return sum(1 for r in self.calls if r.name == name)


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with ApiServer() as server, ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="controller-test")


@pytest.fixture
async def cache(client: Client) -> AsyncIterator[Cache]:
    cache = Cache(client, namespaces=[NS])
    yield cache
    await cache.stop()


async def start(cache: Cache, reconciler: ScriptedReconciler, workers: int = 1, **options: Any) -> Controller:
    name = f"test-{next(_names)}"
    controller = (
        ControllerBuilder(cache, name)
        .for_(CONFIGMAPS, predicates.generation_changed)
        .with_options(max_concurrent_reconciles=workers, **options)
        .build(reconciler)
    )
    await cache.start()
    await controller.start()
    return controller


async def make(client: Client, *names: str) -> None:
    for name in names:
        await client.create(CONFIGMAPS, {"metadata": {"name": name}, "data": {}}, NS)


def metric(name: str, controller: Controller, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"controller": controller.name, **labels}) or 0.0


async def test_workers_run_concurrently_up_to_the_limit(client: Client, cache: Cache) -> None:
    release = asyncio.Event()

    async def block(request: Request) -> None:
        await release.wait()

    reconciler = ScriptedReconciler(block)
    controller = await start(cache, reconciler, workers=3)
    await make(client, "a", "b", "c", "d", "e")
    await wait_for(lambda: reconciler.max_total == 3, timeout=5)
    assert metric("controller_runtime_active_workers", controller) == 3
    assert metric("controller_runtime_max_concurrent_reconciles", controller) == 3
    release.set()
    await wait_for(lambda: len(reconciler.calls) == 5, timeout=5)
    assert reconciler.max_total == 3
    await controller.stop(timeout=5)


async def test_a_key_is_never_reconciled_twice_at_once_and_adds_coalesce(
    client: Client, cache: Cache
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(request: Request) -> None:
        entered.set()
        await release.wait()

    reconciler = ScriptedReconciler(slow)
    controller = await start(cache, reconciler, workers=4)
    await make(client, "hot")
    await asyncio.wait_for(entered.wait(), 5)
    for _ in range(5):  # five events while the first reconcile runs
        controller.queue.add(Request(NS, "hot"))
    release.set()
    await wait_for(lambda: reconciler.count("hot") == 2 and not reconciler.running, timeout=5)
    assert reconciler.max_per_key == 1
    assert len(controller.queue) == 0
    await controller.stop(timeout=5)
    assert reconciler.count("hot") == 2  # exactly one rerun for all the adds


async def test_result_semantics(client: Client, cache: Cache) -> None:
    outcomes: dict[str, list[Any]] = {
        "ok": [None],
        "after": [Result(requeue_after=0.2), None],
        "again": [Result(requeue=True), None],
        "error": [RuntimeError("bug"), RuntimeError("bug"), None],
        "terminal": [TerminalError("hopeless")],
        "conflict": [Conflict("stale", code=409, reason="Conflict"), None],
    }

    async def scripted(request: Request) -> Result | None:
        outcome = outcomes[request.name].pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[no-any-return]

    reconciler = ScriptedReconciler(scripted)
    controller = await start(cache, reconciler, workers=2)
    await make(client, *outcomes)
    await wait_for(lambda: all(not v for v in outcomes.values()), timeout=10)
    await wait_for(lambda: not reconciler.running, timeout=5)
    assert {n: reconciler.count(n) for n in outcomes} == {
        "ok": 1, "after": 2, "again": 2, "error": 3, "terminal": 1, "conflict": 2
    }  # fmt: skip
    for name in outcomes:  # every path ends forgotten: no backoff carried into the next event
        assert controller.queue.num_requeues(Request(NS, name)) == 0, name
    assert metric("controller_runtime_reconcile_total", controller, result="success") == 5
    assert metric("controller_runtime_reconcile_total", controller, result="requeue_after") == 1
    assert metric("controller_runtime_reconcile_total", controller, result="requeue") == 2
    assert metric("controller_runtime_reconcile_total", controller, result="error") == 3
    assert metric("controller_runtime_reconcile_errors_total", controller) == 3
    assert metric("controller_runtime_terminal_reconcile_errors_total", controller) == 1
    assert metric("controller_runtime_reconcile_panics_total", controller) == 2
    await controller.stop(timeout=5)


async def test_requeue_after_waits_at_least_the_delay(client: Client, cache: Cache) -> None:
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def once_later(request: Request) -> Result | None:
        times.append(loop.time())
        return Result(requeue_after=0.3) if len(times) == 1 else None

    reconciler = ScriptedReconciler(once_later)
    controller = await start(cache, reconciler)
    await make(client, "x")
    await wait_for(lambda: len(times) == 2, timeout=5)
    assert times[1] - times[0] >= 0.3
    await controller.stop(timeout=5)


async def test_an_exception_never_kills_a_worker(
    client: Client, cache: Cache, caplog: pytest.LogCaptureFixture
) -> None:
    async def explode(request: Request) -> None:
        if request.name.startswith("bad"):
            raise KeyError("a bug in the reconciler")

    reconciler = ScriptedReconciler(explode)
    controller = await start(cache, reconciler, workers=1)
    await make(client, "bad-1", "bad-2")
    await wait_for(lambda: reconciler.count("bad-1") >= 3, timeout=5)
    await make(client, "good")
    await wait_for(lambda: reconciler.count("good") == 1, timeout=5)
    await controller.stop(timeout=5)
    assert metric("controller_runtime_reconcile_panics_total", controller) >= 3
    # Logged with its traceback.
    logged = [r for r in caplog.records if r.name == "memop.controller" and r.exc_info]
    assert logged
    assert all(r.exc_info and isinstance(r.exc_info[1], KeyError) for r in logged)
    assert "in explode" in caplog.text  # the frame where it was raised


async def test_reconcile_timeout_counts_as_an_error_and_retries(client: Client, cache: Cache) -> None:
    async def hang_once(request: Request) -> None:
        if reconciler.count(request.name) == 1:
            await asyncio.Event().wait()

    reconciler = ScriptedReconciler(hang_once)
    controller = await start(cache, reconciler, reconcile_timeout=0.2)
    await make(client, "slow")
    await wait_for(lambda: reconciler.count("slow") == 2 and not reconciler.running, timeout=5)
    assert metric("controller_runtime_reconcile_errors_total", controller) == 1
    await controller.stop(timeout=5)


async def test_stop_lets_in_flight_reconciles_finish_and_takes_no_new_work(
    client: Client, cache: Cache
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    async def work(request: Request) -> None:
        entered.set()
        await release.wait()
        finished.append(request.name)

    reconciler = ScriptedReconciler(work)
    controller = await start(cache, reconciler, workers=1)
    await make(client, "first")
    await asyncio.wait_for(entered.wait(), 5)
    await make(client, "queued")
    await wait_for(lambda: len(controller.queue) == 1, timeout=5)
    stopping = asyncio.create_task(controller.stop(timeout=5))
    await asyncio.sleep(0)
    release.set()
    await stopping
    assert finished == ["first"]


async def test_stop_cancels_reconciles_past_the_graceful_timeout(client: Client, cache: Cache) -> None:
    async def forever(request: Request) -> None:
        await asyncio.Event().wait()

    reconciler = ScriptedReconciler(forever)
    controller = await start(cache, reconciler)
    await make(client, "stuck")
    await wait_for(lambda: bool(reconciler.running), timeout=5)
    await controller.stop(timeout=0.1)
    assert not reconciler.running


async def test_generation_predicate_drops_metadata_only_updates(client: Client, cache: Cache) -> None:
    async def nothing(request: Request) -> None:
        return None

    reconciler = ScriptedReconciler(nothing)
    controller = await start(cache, reconciler)
    await make(client, "cm")
    await wait_for(lambda: reconciler.count("cm") == 1, timeout=5)
    await client.patch(CONFIGMAPS, "cm", {"metadata": {"labels": {"x": "y"}}}, NS)
    # One watch stream delivers in order: once "marker" is reconciled, the label edit on "cm"
    # has been seen (and must have been dropped, since metadata edits leave the generation).
    await make(client, "marker")
    await wait_for(lambda: reconciler.count("marker") == 1, timeout=5)
    assert reconciler.count("cm") == 1
    await controller.stop(timeout=5)


# -- Result handling pinned on a fake clock ------------------------------------------------


async def settle(predicate: Callable[[], bool]) -> None:
    """Wait (on the event loop, not the fake clock) until ``predicate`` holds."""
    await wait_for(predicate, timeout=5)


async def still(reconciler: ScriptedReconciler, calls: int) -> None:
    """Let every ready callback run, then check no further reconcile started."""
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(reconciler.calls) == calls


async def test_each_result_maps_to_its_queue_operation_with_exact_delays(
    client: Client, cache: Cache
) -> None:
    clock = FakeClock()
    script: list[Any] = [
        RuntimeError("first failure"),  # rate-limited: 5 ms
        ApiError("server said no", code=500),  # rate-limited: 10 ms
        Result(requeue=True),  # rate-limited: 20 ms
        Result(requeue_after=30.0),  # forget, then exactly 30 s
        RuntimeError("after the forget"),  # backoff starts afresh: 5 ms
        Result(requeue=True, requeue_after=2.0),  # requeue_after wins: forget, 2 s
        TerminalError("hopeless"),  # forget, never again by itself
        None,  # success (after an event)
    ]

    async def scripted(request: Request) -> Result | None:
        outcome = script.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[no-any-return]

    reconciler = ScriptedReconciler(scripted)
    name = f"test-{next(_names)}"
    controller = ControllerBuilder(cache, name, clock=clock).for_(CONFIGMAPS).build(reconciler)
    await cache.start()
    await controller.start()
    key = Request(NS, "x")
    await make(client, "x")

    async def reconciled(calls: int, requeues: int) -> None:
        await settle(lambda: len(reconciler.calls) == calls and not reconciler.running)
        assert controller.queue.num_requeues(key) == requeues

    async def fires_after(delay: float, calls: int) -> None:
        # Not a hair before the delay (the fake clock moves only when told), then at once.
        clock.advance(delay * 0.9)
        await still(reconciler, calls)
        clock.advance(delay * 0.2)
        await settle(lambda: len(reconciler.calls) == calls + 1)

    await reconciled(1, 1)
    await fires_after(0.005, 1)
    await reconciled(2, 2)
    await fires_after(0.010, 2)
    await reconciled(3, 3)
    await fires_after(0.020, 3)
    await reconciled(4, 0)  # requeue_after forgot the backoff
    await fires_after(30.0, 4)
    await reconciled(5, 1)
    await fires_after(0.005, 5)
    await reconciled(6, 0)
    await fires_after(2.0, 6)
    await reconciled(7, 0)  # terminal: forgotten, and no retry however long we wait
    clock.advance(2000.0)
    await still(reconciler, 7)
    await client.patch(CONFIGMAPS, "x", {"data": {"changed": "yes"}}, NS)  # an event brings it back
    await reconciled(8, 0)
    assert script == []
    assert metric("controller_runtime_reconcile_total", controller, result="error") == 4
    assert metric("controller_runtime_reconcile_total", controller, result="requeue") == 1
    assert metric("controller_runtime_reconcile_total", controller, result="requeue_after") == 2
    assert metric("controller_runtime_reconcile_total", controller, result="success") == 1
    assert metric("controller_runtime_reconcile_errors_total", controller) == 4
    assert metric("controller_runtime_reconcile_panics_total", controller) == 2
    assert metric("controller_runtime_terminal_reconcile_errors_total", controller) == 1
    await controller.stop(timeout=5)


# -- owns, watches, predicates ---------------------------------------------------------------


def lease(name: str, *owners: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "ownerReferences": list(owners), "labels": labels or {}}, "spec": {}}


def owner_ref(obj: dict[str, Any], *, controller: bool = True, kind: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"] if kind is None else "apps/v1",
        "kind": kind or obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": controller,
    }


async def test_owned_objects_enqueue_their_controlling_owner_of_the_for_kind(
    client: Client, cache: Cache
) -> None:
    async def nothing(request: Request) -> None:
        return None

    reconciler = ScriptedReconciler(nothing)
    controller = (
        ControllerBuilder(cache, f"test-{next(_names)}").for_(CONFIGMAPS).owns(LEASES).build(reconciler)
    )
    await cache.start()
    await controller.start()
    parent = await client.create(CONFIGMAPS, {"metadata": {"name": "parent"}, "data": {}}, NS)
    other = await client.create(CONFIGMAPS, {"metadata": {"name": "other"}, "data": {}}, NS)
    await settle(lambda: reconciler.count("parent") == 1 and reconciler.count("other") == 1)

    await client.create(LEASES, lease("child", owner_ref(parent)), NS)
    await settle(lambda: reconciler.count("parent") == 2)
    await client.patch(LEASES, "child", {"metadata": {"labels": {"touched": "yes"}}}, NS)
    await settle(lambda: reconciler.count("parent") == 3)

    # Neither a non-controller owner nor a controller of another kind is enqueued.
    await client.create(LEASES, lease("adopted", owner_ref(other, controller=False)), NS)
    await client.create(LEASES, lease("foreign", owner_ref(other, kind="Deployment")), NS)
    await client.delete(LEASES, "child", NS)  # same stream, so it arrives after the two above
    await settle(lambda: reconciler.count("parent") == 4)
    await settle(lambda: not reconciler.running and len(controller.queue) == 0)
    assert reconciler.count("other") == 1
    assert reconciler.count("adopted") == reconciler.count("foreign") == reconciler.count("child") == 0

    # Moving the controller reference from one owner to another reconciles both.
    await client.create(LEASES, lease("moving", owner_ref(parent)), NS)
    await settle(lambda: reconciler.count("parent") == 5)
    await client.patch(LEASES, "moving", {"metadata": {"ownerReferences": [owner_ref(other)]}}, NS)
    await settle(lambda: reconciler.count("parent") == 6 and reconciler.count("other") == 2)
    await controller.stop(timeout=5)


async def test_owned_objects_enqueue_their_cluster_scoped_owner_from_their_namespace(
    client: Client, cache: Cache
) -> None:
    seen: list[Request] = []

    async def record(request: Request) -> None:
        seen.append(request)

    reconciler = ScriptedReconciler(record)
    controller = (
        ControllerBuilder(cache, f"test-{next(_names)}").for_(NAMESPACES).owns(LEASES).build(reconciler)
    )
    await cache.start()
    await controller.start()
    owner = await client.create(NAMESPACES, {"metadata": {"name": f"owner-{next(_names)}"}})
    name = owner["metadata"]["name"]
    await settle(lambda: reconciler.count(name) == 1)
    # A namespaced child in another namespace than its name: its owner is in none.
    await client.create(
        LEASES, lease(f"child-of-{name}", owner_ref({**owner, "apiVersion": "v1", "kind": "Namespace"})), NS
    )
    await settle(lambda: reconciler.count(name) == 2)
    assert Request("", name) in seen
    assert Request(NS, name) not in seen
    await controller.stop(timeout=5)
    await client.delete(NAMESPACES, name)


async def test_refreshes_from_owned_objects_wait_behind_changes_to_the_controllers_own_kind(
    client: Client, cache: Cache
) -> None:
    gate = asyncio.Event()

    async def held_by_the_gate(request: Request) -> None:
        if request.name == "blocker":
            await gate.wait()

    reconciler = ScriptedReconciler(held_by_the_gate)
    controller = (
        ControllerBuilder(cache, f"test-{next(_names)}").for_(CONFIGMAPS).owns(LEASES).build(reconciler)
    )
    await cache.start()
    await controller.start()
    a = await client.create(CONFIGMAPS, {"metadata": {"name": "a"}, "data": {}}, NS)
    b = await client.create(CONFIGMAPS, {"metadata": {"name": "b"}, "data": {}}, NS)
    await client.create(LEASES, lease("of-b", owner_ref(b)), NS)
    # b twice: for itself, then for its new lease.
    await settle(lambda: reconciler.count("a") == 1 and reconciler.count("b") == 2 and not reconciler.running)
    await client.create(CONFIGMAPS, {"metadata": {"name": "blocker"}, "data": {}}, NS)
    await settle(lambda: "blocker" in {r.name for r in reconciler.running})
    before = len(reconciler.calls)
    # While the only worker is held: a new owned object (state only: low), a status-like
    # change of another (low), then two changes to the controller's own kind (normal).
    await client.create(LEASES, lease("of-a", owner_ref(a)), NS)
    renewed = await client.patch(LEASES, "of-b", {"metadata": {"labels": {"renewed": "1"}}}, NS)
    await client.create(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {}}, NS)
    changed = await client.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, NS)

    def delivered(resource: Any, obj: dict[str, Any]) -> bool:
        cached = cache.get(resource, obj["metadata"]["name"], NS)
        version = obj["metadata"]["resourceVersion"]
        return cached is not None and cached["metadata"]["resourceVersion"] == version

    # Both watch streams have delivered everything (each in order, but not with each other).
    await settle(lambda: delivered(LEASES, renewed) and delivered(CONFIGMAPS, changed))
    assert len(controller.queue) == 3  # a (moved up by its own change), b, c
    gate.set()
    await settle(lambda: len(reconciler.calls) == before + 3 and not reconciler.running)
    assert [r.name for r in reconciler.calls[before:]] == ["c", "a", "b"]
    await controller.stop(timeout=5)


@pytest.mark.parametrize(
    ("event_type", "old_meta", "new_meta", "state_only"),
    [
        ("ADDED", None, {}, True),
        ("MODIFIED", {"generation": 1}, {"generation": 1}, True),
        ("MODIFIED", {}, {"labels": {"x": "y"}}, True),
        ("MODIFIED", {"generation": 1}, {"generation": 2}, False),
        ("MODIFIED", {"generation": 1}, {"generation": 1, "deletionTimestamp": "2024-05-01T10:00Z"}, False),
        ("DELETED", {}, {}, False),
    ],
)
def test_which_events_only_report_state(
    event_type: str, old_meta: dict[str, Any] | None, new_meta: dict[str, Any], state_only: bool
) -> None:
    old = None if old_meta is None else {"metadata": old_meta}
    assert reports_state_only(event_type, {"metadata": new_meta}, old) is state_only


async def test_watches_map_events_through_the_map_function_after_the_predicates(
    client: Client, cache: Cache
) -> None:
    async def nothing(request: Request) -> None:
        return None

    def for_namespace(ns: dict[str, Any]) -> list[Request]:
        return [Request(NS, f"for-{ns['metadata']['name']}")]

    reconciler = ScriptedReconciler(nothing)
    controller = (
        ControllerBuilder(cache, f"test-{next(_names)}")
        .for_(CONFIGMAPS)
        .watches(NAMESPACES, for_namespace, predicates.label_selector("team=x"))
        .build(reconciler)
    )
    await cache.start()
    await controller.start()
    await client.create(NAMESPACES, {"metadata": {"name": "n1", "labels": {"team": "x"}}})
    await client.create(NAMESPACES, {"metadata": {"name": "n2", "labels": {"team": "y"}}})
    await settle(lambda: reconciler.count("for-n1") == 1)
    await client.patch(NAMESPACES, "n2", {"metadata": {"labels": {"team": "x"}}})
    await settle(lambda: reconciler.count("for-n2") == 1)
    # Leaving the selection still passes (the old object matched): the mapped request learns.
    await client.patch(NAMESPACES, "n1", {"metadata": {"labels": {"team": "z"}}})
    await settle(lambda: reconciler.count("for-n1") == 2)
    # Outside the selection before and after: dropped. Then a marker on the same stream.
    await client.patch(NAMESPACES, "n1", {"metadata": {"labels": {"team": "w"}}})
    await client.create(NAMESPACES, {"metadata": {"name": "n3", "labels": {"team": "x"}}})
    await settle(lambda: reconciler.count("for-n3") == 1 and not reconciler.running)
    assert reconciler.count("for-n1") == 2
    assert not any(r.name in ("for-default", "for-kube-system") for r in reconciler.calls)
    await controller.stop(timeout=5)


async def test_resource_version_predicate_passes_real_updates_and_resyncs(
    client: Client, cache: Cache
) -> None:
    async def nothing(request: Request) -> None:
        return None

    reconciler = ScriptedReconciler(nothing)
    controller = (
        ControllerBuilder(cache, f"test-{next(_names)}")
        .for_(CONFIGMAPS, predicates.resource_version_changed)
        .build(reconciler)
    )
    await cache.start()
    await controller.start()
    await make(client, "cm")
    await settle(lambda: reconciler.count("cm") == 1 and not reconciler.running)
    await client.patch(CONFIGMAPS, "cm", {"metadata": {"labels": {"a": "b"}}}, NS)  # a change
    await settle(lambda: reconciler.count("cm") == 2 and not reconciler.running)
    # A resync replays the cache as it is: it always passes (its own event type).
    cache.informer(CONFIGMAPS).resync()
    await settle(lambda: reconciler.count("cm") == 3)
    await controller.stop(timeout=5)


DELETING = {
    "metadata": {"generation": 1, "deletionTimestamp": "2024-05-01T10:00:00Z"},
    "status": {"observedGeneration": 1},
}


@pytest.mark.parametrize(
    ("obj", "up_to_date"),
    [
        ({"metadata": {"generation": 2}, "status": {"observedGeneration": 2}}, True),
        ({"metadata": {"generation": 2}, "status": {"observedGeneration": 1}}, False),
        ({"metadata": {"generation": 2}}, False),  # new: no status yet
        ({"metadata": {}, "status": {"observedGeneration": 1}}, False),  # a kind without generations
        (DELETING, False),
    ],
)
def test_which_added_objects_say_their_controller_is_done_with_them(
    obj: dict[str, Any], up_to_date: bool
) -> None:
    assert reports_up_to_date("ADDED", obj) is up_to_date
    assert reports_up_to_date("MODIFIED", obj) is False


async def test_objects_listed_that_say_they_are_up_to_date_wait_behind_those_that_need_work(
    client: Client, cache: Cache
) -> None:
    """A start, a relist or a shard taken over lists every object: those whose status is for
    their generation go behind the others (low priority), so work still to do comes first."""
    pod = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    deployment = {"spec": {"selector": {"matchLabels": {"app": "x"}}, "template": pod}}
    for name in ("a-done", "b-new", "c-done", "d-new"):
        made = await client.create(DEPLOYMENTS, {"metadata": {"name": name}, **deployment}, NS)
        if name.endswith("done"):
            status = {"status": {"observedGeneration": made["metadata"]["generation"]}}
            await client.patch(DEPLOYMENTS, name, status, NS, subresource="status")

    async def nothing(request: Request) -> None:
        return None

    reconciler = ScriptedReconciler(nothing)
    controller = ControllerBuilder(cache, f"test-{next(_names)}").for_(DEPLOYMENTS).build(reconciler)
    await cache.start()
    await controller.start()
    await settle(lambda: len(reconciler.calls) == 4 and not reconciler.running)
    assert [r.name for r in reconciler.calls] == ["b-new", "d-new", "a-done", "c-done"]
    await controller.stop(timeout=5)


def test_reconcile_ids_are_random_version_4_uuids() -> None:
    ids = [_new_reconcile_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)
