"""Leader for life against the in-memory API server, over real HTTP through the real Client.

Replicas are played by Pod objects (the simulated kubelet runs them); the server's garbage
collector deletes the lock when its owner Pod goes, as kube-controller-manager's does. Each
candidate has its own FakeClock and no jitter, so its backoff is exact: ``Candidate.tick``
advances its clock to the next attempt and waits until that attempt has completed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from memop.manifests import rbac
from memop.runtime.client.client import Client
from memop.runtime.client.resources import CONFIGMAPS, PODS, Resource
from memop.runtime.leaderelection.leaderforlife import (
    LeaderForLife,
    LeaderForLifeConfig,
    LeaderForLifeError,
    Verdict,
    judge,
)
from memop.runtime.leaderelection.lease import LeadershipLost
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.errors import ApiError as StoreError
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

NS = "default"
LOCK = "memop-lock"


def master_status(name: str = LOCK) -> float | None:
    return REGISTRY.get_sample_value("leader_election_master_status", {"name": name})


def store_lock(server: ApiServer) -> dict[str, Any] | None:
    try:
        return server.store.get(server.store.resource("", "v1", "configmaps"), NS, LOCK)
    except StoreError:
        return None


def lock_owner(server: ApiServer) -> str | None:
    lock = store_lock(server)
    if lock is None:
        return None
    [ref] = lock["metadata"]["ownerReferences"]
    return str(ref["name"])


def pod_manifest(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "manager", "image": "memop"}]}}


class Recording:
    """A Client that records the keyword arguments of its deletes and can run a hook before
    reading a Pod (to change the world between the elector's reads)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.deletes: list[dict[str, Any]] = []
        self.before_pod_read: Callable[[], Any] | None = None

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        if res == PODS and self.before_pod_read is not None:
            hook, self.before_pod_read = self.before_pod_read, None
            await hook()
        return await self.client.get(res, name, namespace)

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        return await self.client.create(res, obj, namespace)

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **kwargs: Any) -> Any:
        self.deletes.append({"resource": res.plural, "name": name, **kwargs})
        return await self.client.delete(res, name, namespace, **kwargs)


@dataclass
class Candidate:
    elector: LeaderForLife
    clock: FakeClock
    client: Recording
    task: asyncio.Task[None] = field(init=False)

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run())

    async def settle(self, attempts: int) -> None:
        """Until ``attempts`` attempts completed, or it leads, or run() ended."""
        await wait_for(
            lambda: (
                self.elector.attempts >= attempts or self.elector.leader_elected.is_set() or self.task.done()
            ),
            timeout=5,
            message=lambda: f"attempts={self.elector.attempts} {self.elector.last_error}",
        )

    async def tick(self) -> None:
        """Advance to the next attempt (the last wait scheduled) and wait for it."""
        done = self.elector.attempts
        await wait_for(lambda: len(self.elector.waits) >= done, timeout=5)
        self.clock.advance(self.elector.waits[done - 1])
        await self.settle(done + 1)


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(simulate_controllers=True) as running:
        yield running


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="test", max_retries=0)


@pytest.fixture
async def candidates() -> AsyncIterator[Callable[..., Candidate]]:
    """``candidates(server, pod)``: a candidate for ``pod`` on ``server``, stopped afterwards."""
    made: list[Candidate] = []
    apis: list[ApiClient] = []

    def make(server: ApiServer, pod: str, *, rand: float = 0.0, recheck_period: float = 30.0) -> Candidate:
        api = ApiClient(server.client_configuration())
        apis.append(api)
        clock = FakeClock()
        recording = Recording(Client(api, user_agent=f"memop/{pod}", max_retries=0, clock=clock))
        config = LeaderForLifeConfig(LOCK, NS, pod, recheck_period=recheck_period)
        candidate = Candidate(
            LeaderForLife(recording, config, clock=clock, rand=lambda: rand), clock, recording
        )
        made.append(candidate)
        return candidate

    yield make
    for candidate in made:
        if hasattr(candidate, "task"):
            candidate.task.cancel()
            await asyncio.gather(candidate.task, return_exceptions=True)
    for api in apis:
        await api.close()


async def make_pod(client: Client, name: str) -> dict[str, Any]:
    return await client.create(PODS, pod_manifest(name), NS)


async def make_lock(client: Client, *refs: dict[str, Any]) -> dict[str, Any]:
    return await client.create(CONFIGMAPS, {"metadata": {"name": LOCK, "ownerReferences": list(refs)}}, NS)


def ref(pod: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}


# --- leading and waiting ---------------------------------------------------------------------------


async def test_two_replicas_one_leads_the_other_waits_and_logs_the_holder(
    server: ApiServer,
    client: Client,
    candidates: Callable[..., Candidate],
    caplog: pytest.LogCaptureFixture,
) -> None:
    pod_a, _ = await make_pod(client, "pod-a"), await make_pod(client, "pod-b")
    a, b = candidates(server, "pod-a"), candidates(server, "pod-b")
    a.start()
    await wait_for(a.elector.leader_elected.is_set, timeout=5)
    assert store_lock(server)["metadata"]["ownerReferences"] == [ref(pod_a)]  # type: ignore[index]
    assert a.elector.is_leader
    assert master_status() == 1

    caplog.set_level(logging.INFO, logger="memop.leaderforlife")
    b.start()
    await b.settle(1)
    for _ in range(3):
        await b.tick()
    assert not b.elector.leader_elected.is_set()
    assert b.elector.leader == "pod-a"
    waiting = [r.getMessage() for r in caplog.records if "not the leader" in r.getMessage()]
    # Who holds the lock, logged once while it stays the same.
    assert waiting == [f"not the leader: lock {NS}/{LOCK} is held by pod pod-a, which is Running; waiting"]
    assert lock_owner(server) == "pod-a"
    assert b.client.deletes == []


async def test_deleting_the_leaders_pod_lets_a_standby_lead_once_the_collector_removes_the_lock(
    server: ApiServer, client: Client, candidates: Callable[..., Candidate]
) -> None:
    await make_pod(client, "pod-a")
    await make_pod(client, "pod-b")
    a, b = candidates(server, "pod-a"), candidates(server, "pod-b")
    a.start()
    await wait_for(a.elector.leader_elected.is_set, timeout=5)
    b.start()
    await b.settle(1)
    assert not b.elector.leader_elected.is_set()

    await client.delete(PODS, "pod-a", NS)
    # b's clock stands still: the garbage collector, not b, removes the lock.
    await wait_for(lambda: store_lock(server) is None, timeout=5)
    await b.tick()
    assert b.elector.leader_elected.is_set()
    assert lock_owner(server) == "pod-b"
    assert b.client.deletes == []


async def test_a_lock_whose_owner_pod_was_evicted_is_taken_over_with_a_uid_precondition(
    server: ApiServer, client: Client, candidates: Callable[..., Candidate]
) -> None:
    evicted = await make_pod(client, "pod-a")
    await make_pod(client, "pod-b")
    lock = await make_lock(client, ref(evicted))
    await wait_for(lambda: _phase(server, "pod-a") == "Running", timeout=5)
    pods = server.store.resource("", "v1", "pods")
    pod = server.store.get(pods, NS, "pod-a")
    pod["status"] = {**pod["status"], "phase": "Failed", "reason": "Evicted", "message": "low on memory"}
    server.store.update(pods, NS, "pod-a", pod, subresource="status")

    b = candidates(server, "pod-b")
    b.start()
    await b.settle(1)
    assert b.elector.leader_elected.is_set()
    assert lock_owner(server) == "pod-b"
    assert b.client.deletes == [
        {"resource": "configmaps", "name": LOCK, "preconditions": {"uid": lock["metadata"]["uid"]}}
    ]
    # Every request of this take-over is granted by manifests/leader-for-life, and every grant is used.
    sent = {(r.group, r.resource, r.verb, r.namespace) for r in server.log.filter(user_agent="memop/pod-b")}
    assert sent == {(rule.group, rule.resource, rule.verb, NS) for rule in rbac.LEADER_FOR_LIFE_RULES}


def _phase(server: ApiServer, name: str) -> str | None:
    pod = server.store.get(server.store.resource("", "v1", "pods"), NS, name)
    return (pod.get("status") or {}).get("phase")


async def test_a_lock_whose_owner_pod_is_gone_is_taken_over_without_waiting_for_the_collector(
    apiserver: ApiServer, candidates: Callable[..., Candidate]
) -> None:
    """No collector on this server: the lock of a Pod that no longer exists stays until the
    candidate sees its owner gone, and a Pod recreated under the same name is not its owner."""
    async with ApiClient(apiserver.client_configuration()) as api:
        client = Client(api, user_agent="test", max_retries=0)
        old = await make_pod(client, "pod-a")
        await make_lock(client, ref(old))
        await client.delete(PODS, "pod-a", NS)
        await make_pod(client, "pod-a")  # same name, new uid
        await make_pod(client, "pod-b")
        b = candidates(apiserver, "pod-b")
        b.start()
        await b.settle(1)
        assert b.elector.leader_elected.is_set()
        lock = await client.get(CONFIGMAPS, LOCK, NS)
        assert [r["name"] for r in lock["metadata"]["ownerReferences"]] == ["pod-b"]


async def test_the_uid_precondition_keeps_a_lock_recreated_meanwhile(
    server: ApiServer, client: Client, candidates: Callable[..., Candidate]
) -> None:
    evicted = await make_pod(client, "pod-a")
    await make_pod(client, "pod-b")
    pod_c = await make_pod(client, "pod-c")
    await make_lock(client, ref(evicted))
    pods = server.store.resource("", "v1", "pods")
    await wait_for(lambda: _phase(server, "pod-a") == "Running", timeout=5)
    pod = server.store.get(pods, NS, "pod-a")
    pod["status"] = {**pod["status"], "phase": "Failed", "reason": "Preempting"}
    server.store.update(pods, NS, "pod-a", pod, subresource="status")

    b = candidates(server, "pod-b")

    async def c_takes_over_first() -> None:
        # Between b's read of the lock and its delete, c replaces the stale lock with its own.
        await client.delete(CONFIGMAPS, LOCK, NS)
        await make_lock(client, ref(pod_c))

    # b reads its own Pod first, then the lock's owner: the hook runs before the second read.
    b.client.before_pod_read = lambda: _arm(b.client, c_takes_over_first)
    b.start()
    await b.settle(1)
    assert not b.elector.leader_elected.is_set()
    assert lock_owner(server) == "pod-c"
    assert len(b.client.deletes) == 1  # refused: 409, the uid is not the lock's any more


async def _arm(client: Recording, hook: Callable[[], Any]) -> None:
    client.before_pod_read = hook


async def test_a_restarted_leader_finds_its_own_lock_and_leads_at_once(
    server: ApiServer, client: Client, candidates: Callable[..., Candidate]
) -> None:
    pod = await make_pod(client, "pod-a")
    await make_lock(client, ref(pod))
    a = candidates(server, "pod-a")
    a.start()
    await a.settle(1)
    assert a.elector.leader_elected.is_set()
    assert a.client.deletes == []
    assert lock_owner(server) == "pod-a"


@pytest.mark.parametrize(
    "owners",
    [
        [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "x",
                "uid": "0c6b7a2e-0000-4000-8000-000000000001",
            }
        ],
        [],
    ],
    ids=["not-a-pod", "no-owner"],
)
async def test_a_lock_not_owned_by_one_pod_is_left_alone(
    apiserver: ApiServer, candidates: Callable[..., Candidate], owners: list[dict[str, Any]]
) -> None:
    async with ApiClient(apiserver.client_configuration()) as api:
        client = Client(api, user_agent="test", max_retries=0)
        await make_pod(client, "pod-b")
        await make_lock(client, *owners)
        b = candidates(apiserver, "pod-b")
        b.start()
        await b.settle(1)
        await b.tick()
        assert not b.elector.leader_elected.is_set()
        assert b.client.deletes == []
        assert "not ours to remove" in b.elector.last_error or "not one Pod" in b.elector.last_error


# --- backoff ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("rand", "stretch"), [(0.0, 1.0), (1.0, 1.2)])
async def test_a_standby_backs_off_from_one_second_doubling_to_sixteen(
    server: ApiServer, client: Client, candidates: Callable[..., Candidate], rand: float, stretch: float
) -> None:
    await make_pod(client, "pod-a")
    await make_pod(client, "pod-b")
    a, b = candidates(server, "pod-a"), candidates(server, "pod-b", rand=rand)
    a.start()
    await wait_for(a.elector.leader_elected.is_set, timeout=5)
    b.start()
    await b.settle(1)
    for _ in range(6):
        await b.tick()
    await wait_for(lambda: len(b.elector.waits) == 7, timeout=5)
    assert b.elector.waits == pytest.approx([s * stretch for s in (1, 2, 4, 8, 16, 16, 16)])
    assert not b.elector.leader_elected.is_set()


# --- errors and holding ----------------------------------------------------------------------------


async def test_a_replica_whose_pod_does_not_exist_fails_with_one_line(
    server: ApiServer,
    candidates: Callable[..., Candidate],
) -> None:
    a = candidates(server, "no-such-pod")
    a.start()
    with pytest.raises(LeaderForLifeError, match=r"Pod default/no-such-pod \(POD_NAME\) does not exist"):
        await a.task
    assert master_status() == 0


async def test_the_leader_recreates_a_deleted_lock_and_stops_when_another_pod_owns_it(
    server: ApiServer, client: Client, candidates: Callable[..., Candidate]
) -> None:
    await make_pod(client, "pod-a")
    pod_b = await make_pod(client, "pod-b")
    a = candidates(server, "pod-a", recheck_period=5.0)
    a.start()
    await wait_for(a.elector.leader_elected.is_set, timeout=5)

    await client.delete(CONFIGMAPS, LOCK, NS)
    a.clock.advance(5.0)
    await wait_for(lambda: lock_owner(server) == "pod-a", timeout=5)
    assert a.elector.is_leader

    await client.delete(CONFIGMAPS, LOCK, NS)
    await make_lock(client, ref(pod_b))
    a.clock.advance(5.0)
    with pytest.raises(LeadershipLost, match="now owned by pod-b"):
        await a.task
    assert a.elector.lost.is_set()
    assert not a.elector.leader_elected.is_set()
    assert master_status() == 0


# --- the verdict, exhaustively -----------------------------------------------------------------------

OWN = {"apiVersion": "v1", "kind": "Pod", "name": "me", "uid": "uid-me"}
OTHER = {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "uid-other"}


def _lock(*refs: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": LOCK, "ownerReferences": list(refs)}}


def _pod(uid: str, phase: str | None, reason: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {} if phase is None else {"phase": phase}
    if reason:
        status["reason"] = reason
    return {"metadata": {"name": "other", "uid": uid}, "status": status}


@pytest.mark.parametrize(
    ("lock", "pod", "kind", "why"),
    [
        (_lock(OWN), None, "mine", "owned by this replica's Pod (its container restarted)"),
        (_lock(OTHER), None, "stale", "is gone"),
        (_lock(OTHER), _pod("uid-new", "Running"), "stale", "is gone (a new Pod has its name)"),
        (
            _lock(OTHER),
            _pod("uid-other", "Failed", "Evicted"),
            "stale",
            "has finished (phase Failed, reason Evicted)",
        ),
        (
            _lock(OTHER),
            _pod("uid-other", "Failed", "Preempting"),
            "stale",
            "has finished (phase Failed, reason Preempting)",
        ),
        (_lock(OTHER), _pod("uid-other", "Failed"), "stale", "has finished (phase Failed)"),
        (_lock(OTHER), _pod("uid-other", "Succeeded"), "stale", "has finished (phase Succeeded)"),
        (_lock(OTHER), _pod("uid-other", "Running"), "held", "is Running"),
        (_lock(OTHER), _pod("uid-other", "Pending"), "held", "is Pending"),
        (_lock(OTHER), _pod("uid-other", None), "held", "is not yet scheduled"),
        (
            _lock(OTHER, OTHER),
            None,
            "held",
            "the lock has 2 owner references, not one Pod: not ours to remove",
        ),
        (_lock(), None, "held", "the lock has 0 owner references, not one Pod: not ours to remove"),
    ],
)
def test_judge(lock: dict[str, Any], pod: dict[str, Any] | None, kind: str, why: str) -> None:
    verdict = judge(lock, OWN, pod)
    assert verdict == Verdict(kind, verdict.holder, why)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"lock_name": ""}, "lock name must not be empty"),
        ({"pod_name": ""}, "pod name must not be empty"),
        ({"max_backoff": 0.0}, "maximum backoff must be a positive number"),
        ({"initial_backoff": float("nan")}, "initial backoff must be a positive number"),
    ],
)
def test_config_validation(settings: dict[str, Any], message: str) -> None:
    config = LeaderForLifeConfig(**{"lock_name": LOCK, "namespace": NS, "pod_name": "p", **settings})
    with pytest.raises(ValueError, match=message):
        config.validate()
