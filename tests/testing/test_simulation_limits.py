"""The simulated control plane paced as kube-controller-manager's client rate limits pace a real
one, and a control plane without nodes: the token bucket, a paced work loop, the controllers
lagging behind many Deployments and catching up at their rate, pods left Pending and
unschedulable, and the server's and ``serve``'s options. Fake clock, in-process store; the last
tests go through the served API."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.store import Store
from memop.testing.controllers import ControllerLimits, SimulatedControllers
from memop.testing.controllers.common import TokenBucket, WorkLoop
from memop.testing.controllers.scheduler import NO_NODES
from tests.testing.test_simulation_inprocess import deployment, idle


async def settle() -> None:
    """Let every task that can run at this fake instant run (workers blocked on their bucket
    then wait on the fake clock)."""
    for _ in range(50):
        await asyncio.sleep(0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_the_bucket_starts_full_refills_at_its_rate_and_lends_tokens(clock: FakeClock) -> None:
    bucket = TokenBucket(20, 30, clock=clock)
    assert bucket.delay() == 0
    bucket.take(30)
    assert bucket.delay() == pytest.approx(1 / 20)
    bucket.take(9)  # a sync's writes are taken after the fact: the bucket goes into debt
    assert bucket.delay() == pytest.approx(10 / 20)
    clock.advance(0.5)
    assert bucket.delay() == 0
    clock.advance(100)  # never more than the burst
    bucket.take(30)
    assert bucket.delay() == pytest.approx(1 / 20)
    assert bucket.taken == 69
    with pytest.raises(ValueError, match="qps > 0"):
        TokenBucket(0, 30, clock=clock)
    with pytest.raises(ValueError, match="burst >= 1"):
        ControllerLimits(qps=20, burst=0)


async def test_a_paced_loop_syncs_a_burst_then_one_key_per_token(clock: FakeClock) -> None:
    writes = 0
    synced: list[int] = []

    def sync(key: int) -> float | None:
        nonlocal writes
        synced.append(key)
        writes += 2  # each sync writes twice: it waits for two tokens' worth after it
        return None

    loop: WorkLoop[int] = WorkLoop("paced", sync, clock=clock)
    loop.pace(TokenBucket(10, 4, clock=clock), lambda: writes)
    loop.start()
    try:
        for key in range(10):
            loop.add(key)
        await settle()
        # 4 tokens: the first sync takes 2, the second leaves 0; the third waits for one.
        assert synced == [0, 1]
        clock.advance(0.1)
        await settle()
        assert synced == [0, 1, 2]
        clock.advance(0.1)  # the debt of the third sync's second write
        await settle()
        assert synced == [0, 1, 2]
        clock.advance(0.1)
        await settle()
        assert synced == [0, 1, 2, 3]
        for _ in range(10):  # the bucket never holds more than its burst: time in steps
            clock.advance(0.5)
            await settle()
        assert synced == list(range(10))
        assert loop.limiter is not None
        assert loop.limiter.taken == 20
    finally:
        await loop.stop()


async def test_rate_limited_controllers_lag_behind_many_deployments_and_catch_up(clock: FakeClock) -> None:
    store = Store()
    deployments = store.resource("apps", "v1", "deployments")
    replicasets = store.resource("apps", "v1", "replicasets")
    pods = store.resource("", "v1", "pods")
    sim = SimulatedControllers(store, clock=clock, limits=ControllerLimits(qps=20, burst=30))
    await sim.start()
    try:
        for i in range(40):
            store.create(deployments, "default", deployment(f"d{i}", replicas=1))
        await settle()
        # The deployment controller's burst: per Deployment a ReplicaSet, its ScalingReplicaSet
        # Event and a status write, 3 tokens; 30 tokens reach 10 Deployments, then it waits.
        created = len(store.list(replicasets, "default")[0])
        assert 9 <= created <= 11
        assert sim.deployments.loop.limiter is not None
        assert sim.deployments.loop.limiter.taken <= 33
        # Each controller has a bucket of its own, as kube-controller-manager's clients do.
        assert sim.replicasets.loop.limiter is not sim.deployments.loop.limiter
        clock.advance(1.0)
        await settle()
        later = len(store.list(replicasets, "default")[0])
        assert created < later <= created + 8  # 20 tokens more at most
        for _ in range(40):
            clock.advance(1.0)
            await settle()
        await idle(sim)
        assert len(store.list(replicasets, "default")[0]) == 40
        assert len(store.list(pods, "default")[0]) == 40
        d = store.get(deployments, "default", "d39")
        assert d["status"]["readyReplicas"] == 1
        # Pod creations took a token each for the pod and one for its SuccessfulCreate Event.
        assert sim.replicasets.loop.limiter is not None
        assert sim.replicasets.loop.limiter.taken >= 80
    finally:
        await sim.stop()


async def test_without_nodes_pods_stay_pending_unschedulable_as_kube_scheduler_says(clock: FakeClock) -> None:
    store = Store()
    deployments = store.resource("apps", "v1", "deployments")
    pods = store.resource("", "v1", "pods")
    sim = SimulatedControllers(store, clock=clock, nodes=False, pod_ready_delay=1.0)
    pod_updates: list[str] = []
    store.add_listener(
        lambda change: (
            pod_updates.append(change.entry.obj["metadata"]["name"])
            if change.type == "MODIFIED" and change.storage.rtype.kind == "Pod"
            else None
        )
    )
    await sim.start()
    try:
        store.create(deployments, "default", deployment("web", replicas=2))
        await idle(sim)
        clock.advance(60)
        await idle(sim)
        listed, _ = store.list(pods, "default")
        assert len(listed) == 2
        for pod in listed:
            status = pod["status"]
            assert status["phase"] == "Pending"
            assert "podIP" not in status
            assert "startTime" not in status
            [cond] = status["conditions"]
            assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
                "PodScheduled",
                "False",
                "Unschedulable",
                NO_NODES,
            )
        clock.advance(600)
        await idle(sim)
        # One status write per pod by the scheduler, and none after: created, then marked.
        assert sorted(pod_updates) == sorted(p["metadata"]["name"] for p in listed)
        d = store.get(deployments, "default", "web")
        assert d["status"].get("readyReplicas", 0) == 0
        assert d["status"]["unavailableReplicas"] == 2
        conditions = {c["type"]: c["status"] for c in d["status"]["conditions"]}
        assert conditions["Available"] == "False"
    finally:
        await sim.stop()


async def test_the_server_passes_the_limits_and_nodes_to_its_simulation() -> None:
    from memop.testing.apiserver.server import ApiServer  # noqa: PLC0415

    async with ApiServer(
        simulate_controllers=True, controller_limits=ControllerLimits(qps=5, burst=2), nodes=False
    ) as server:
        assert server.controllers is not None
        assert server.controllers.limits == ControllerLimits(qps=5, burst=2)
        assert server.controllers.kubelet.nodes is False
        limiter = server.controllers.kubelet.loop.limiter
        assert limiter is not None
        assert (limiter.qps, limiter.burst) == (50.0, 100)
    async with ApiServer(simulate_controllers=True) as server:
        # Off by default: tests want their pods at once.
        assert server.controllers is not None
        assert server.controllers.deployments.loop.limiter is None
        assert server.controllers.kubelet.nodes is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--simulate-controllers", "--controller-qps", "-1"], "--controller-qps must not be negative"),
        (["--simulate-controllers", "--controller-burst", "0"], "--controller-burst must be at least 1"),
        (["--controller-qps", "20"], "need --simulate-controllers"),
        (["--no-nodes"], "need --simulate-controllers"),
    ],
)
def test_serve_refuses_bad_simulation_options_in_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memop.testing", "serve", "--kubeconfig", str(tmp_path / "kc"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "kc").exists()
