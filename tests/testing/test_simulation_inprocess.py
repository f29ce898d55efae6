"""The simulated controllers on a Store in-process, with a fake clock: retries and timers of the
work loops, starting on a non-empty store, the readiness delay and the progress deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.store import Store
from memop.testing.controllers import SimulatedControllers
from memop.testing.controllers.common import WorkLoop
from memop.testing.wait import wait_for


def deployment(name: str, replicas: int = 2, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "memcached:1.6"}]},
            },
            **spec,
        },
    }


async def idle(sim: SimulatedControllers) -> None:
    """Wait until no key is ready in any loop (timers may still be pending)."""

    async def no_work() -> bool:
        await asyncio.sleep(0)
        return sim.pending() == 0

    await wait_for(no_work, message="the simulation to run out of ready work")


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", "")) for c in obj.get("status", {}).get("conditions", [])
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store() -> Store:
    return Store()


async def test_a_failing_sync_is_retried_and_the_worker_survives(clock: FakeClock) -> None:
    calls: list[str] = []

    def sync(key: str) -> float | None:
        calls.append(key)
        if len(calls) == 1:
            raise ApiError(409, "Conflict", "the object has been modified")
        if len(calls) == 2:
            raise RuntimeError("a bug")
        return None

    loop: WorkLoop[str] = WorkLoop("test", sync, clock=clock)
    loop.start()
    try:
        loop.add("k")
        await wait_for(lambda: len(calls) == 1)
        for _ in range(5):
            await asyncio.sleep(0)
        assert calls == ["k"]  # the retry waits for its backoff
        clock.advance(0.005)
        await wait_for(lambda: len(calls) == 2)
        clock.advance(0.010)
        await wait_for(lambda: len(calls) == 3)
        loop.add("k")  # and the worker still takes new work
        await wait_for(lambda: len(calls) == 4)
    finally:
        await loop.stop()


async def test_a_sync_returning_a_delay_runs_again_after_it(clock: FakeClock) -> None:
    calls: list[str] = []

    def sync(key: str) -> float | None:
        calls.append(key)
        return 30.0 if len(calls) == 1 else None

    loop: WorkLoop[str] = WorkLoop("test", sync, clock=clock)
    loop.start()
    try:
        loop.add("k")
        await wait_for(lambda: len(calls) == 1)
        clock.advance(29.9)
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(calls) == 1
        clock.advance(0.1)
        await wait_for(lambda: len(calls) == 2)
    finally:
        await loop.stop()


@pytest.fixture
async def sim(store: Store, clock: FakeClock) -> AsyncIterator[SimulatedControllers]:
    controllers = SimulatedControllers(store, pod_ready_delay=10.0, clock=clock)
    await controllers.start()
    try:
        yield controllers
    finally:
        await controllers.stop()


async def test_pods_become_ready_only_when_the_delay_has_passed(
    store: Store, clock: FakeClock, sim: SimulatedControllers
) -> None:
    deployments = store.resource("apps", "v1", "deployments")
    pods = store.resource("", "v1", "pods")
    store.create(deployments, "default", deployment("web"))
    await idle(sim)
    listed, _ = store.list(pods, "default")
    assert len(listed) == 2
    assert {p["status"]["phase"] for p in listed} == {"Pending"}
    assert all(conditions(p)["PodScheduled"] == ("True", "") for p in listed)

    clock.advance(9.9)
    await idle(sim)
    assert {p["status"]["phase"] for p in store.list(pods, "default")[0]} == {"Pending"}

    clock.advance(0.1)
    await idle(sim)
    assert {p["status"]["phase"] for p in store.list(pods, "default")[0]} == {"Running"}
    d = store.get(deployments, "default", "web")
    assert d["status"]["availableReplicas"] == 2
    assert conditions(d)["Progressing"] == ("True", "NewReplicaSetAvailable")


async def test_a_stuck_rollout_exceeds_its_progress_deadline(
    store: Store, clock: FakeClock, sim: SimulatedControllers
) -> None:
    deployments = store.resource("apps", "v1", "deployments")
    store.create(deployments, "default", deployment("web", progressDeadlineSeconds=5))
    await idle(sim)
    assert conditions(store.get(deployments, "default", "web"))["Progressing"][0] == "True"
    # The pods need 10 s to be ready; the deployment may take 5 s to progress.
    clock.advance(7)
    await idle(sim)
    d = store.get(deployments, "default", "web")
    assert conditions(d)["Progressing"] == ("False", "ProgressDeadlineExceeded")
    assert conditions(d)["Available"] == ("False", "MinimumReplicasUnavailable")


async def test_controllers_started_on_a_full_store_catch_up(store: Store, clock: FakeClock) -> None:
    deployments = store.resource("apps", "v1", "deployments")
    configmaps = store.resource("", "v1", "configmaps")
    store.create(deployments, "default", deployment("early"))
    dangling = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "no-such-uid"}
    store.create(configmaps, "default", {"metadata": {"name": "orphan", "ownerReferences": [dangling]}})
    sim = SimulatedControllers(store, clock=clock)
    await sim.start()
    try:
        await idle(sim)
        d = store.get(deployments, "default", "early")
        assert d["status"]["readyReplicas"] == 2
        with pytest.raises(ApiError) as err:
            store.get(configmaps, "default", "orphan")
        assert err.value.code == 404
    finally:
        await sim.stop()


async def test_stop_is_idempotent_and_start_twice_is_refused(store: Store, clock: FakeClock) -> None:
    sim = SimulatedControllers(store, clock=clock)
    await sim.start()
    with pytest.raises(RuntimeError):
        await sim.start()
    await sim.stop()
    await sim.stop()
