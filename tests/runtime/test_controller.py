"""Controller: concurrency, per-key exclusion, Result semantics, resilience to exceptions.

Events come from the in-memory API server through the real client, reflector and cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from memop.runtime import predicates
from memop.runtime.cache import Cache
from memop.runtime.client import Client
from memop.runtime.controller import Controller, ControllerBuilder
from memop.runtime.errors import Conflict
from memop.runtime.reconcile import Request, Result, TerminalError
from memop.runtime.resources import CONFIGMAPS
from memop.testing.server import ApiServer
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


async def test_an_exception_never_kills_a_worker(client: Client, cache: Cache) -> None:
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
