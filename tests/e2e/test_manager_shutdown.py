"""Stopping the real process: SIGTERM finishes in-flight work and releases the lease; a second
signal, or the graceful timeout, cuts it short; a slow start never delays a stop.

A reconcile is held in flight by delaying memop's Deployment create on the in-memory server;
the delay rule's hit count says when the request has arrived.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import LEASES
from memop.testing.apiserver.faults import DelayRule
from memop.testing.envtest import Kube
from memop.testing.memcached import memcached_manifest
from memop.testing.process import MemopProcess, MemopProcesses
from memop.testing.wait import wait_for

TIMEOUT = 30
LEASE_NAME = "memop-leader.cache.example.com"
RENEW_DEADLINE = 1.5
LEADER_ARGS = (
    "--leader-elect",
    "--leader-election-namespace", "default",
    "--leader-elect-lease-duration", "2s",
    "--leader-elect-renew-deadline", f"{RENEW_DEADLINE}s",
    "--leader-elect-retry-period", "0.5s",
)  # fmt: skip
# Process scheduling on a loaded CI machine, on top of what memop itself may take.
ALLOWANCE = 1.5


async def lease_spec(client: Client) -> dict[str, Any]:
    try:
        lease = await client.get(LEASES, LEASE_NAME, "default")
    except NotFound:
        return {}
    return dict(lease.get("spec") or {})


async def leading(client: Client, memop: MemopProcess) -> bool:
    identity = memop.identity()
    return identity is not None and (await lease_spec(client)).get("holderIdentity") == identity


async def reconcile_in_flight(client: Client, namespace: str, rule: DelayRule) -> None:
    """Create a Memcached and return once memop's Deployment create for it is held by ``rule``."""
    await client.create(MEMCACHEDS, memcached_manifest("slow"), namespace)
    await wait_for(lambda: rule.hits >= 1, timeout=TIMEOUT)


def said(memop: MemopProcess, start: str) -> bool:
    return memop.find(lambda r: str(r.get("msg", "")).startswith(start)) is not None


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_finishes_the_in_flight_reconcile_takes_no_new_work_releases_the_lease_and_exits_0(
    kube: Kube, client: Client, namespace: str, memops: MemopProcesses, signum: signal.Signals
) -> None:
    server = kube.fake
    hold = 1.5
    rule = server.faults.delay(hold, verb="create", resource="deployments", user_agent="memop/")
    memop = await memops.start(*LEADER_ARGS)
    await wait_for(lambda: leading(client, memop), timeout=TIMEOUT)
    await reconcile_in_flight(client, namespace, rule)

    memop.send(signum)
    await memop.wait_log(lambda r: r.get("msg") == "shutting down", timeout=TIMEOUT)
    # Work arriving during the shutdown is left for the next leader.
    await client.create(MEMCACHEDS, memcached_manifest("late"), namespace)
    assert await memop.wait(TIMEOUT) == 0
    exited = time.time()

    (create,) = server.log.filter(verb="create", resource="deployments", user_agent="memop/")
    assert create.status == 201, "the in-flight create was not cut short"
    assert exited >= create.time + hold
    assert not said(memop, "cancelling"), "a reconcile was cancelled within the graceful timeout"
    late = [r for r in server.log.filter(user_agent="memop/") if r.name == "late" or "late" in r.path]
    assert not late, f"work taken after the signal: {late}"
    cr = await client.get(MEMCACHEDS, "late", namespace)
    assert not cr["metadata"].get("finalizers")
    spec = await lease_spec(client)
    assert spec["holderIdentity"] == "", "\n".join(memop.lines[-15:])
    assert spec["leaseDurationSeconds"] == 1
    # Released after the reconcile finished, not before: the lease covered the whole of it.
    release = max(
        r.time for r in server.log.filter(verb="update", resource="leases", user_agent="memop/", status=200)
    )
    assert release >= create.time + hold
    assert said(memop, f"received {signum.name}, shutting down gracefully")
    assert said(memop, "released lease")
    assert not said(memop, "Unclosed"), "an HTTP session was left open"


async def test_losing_the_lease_during_a_graceful_shutdown_stops_reconciling_at_once(
    kube: Kube, client: Client, namespace: str, memops: MemopProcesses
) -> None:
    """The graceful timeout is 30 s and the reconcile in flight would take 20 s more: once the
    lease cannot be renewed, it is cancelled by the renew deadline and memop exits 1."""
    server = kube.fake
    rule = server.faults.delay(20, verb="create", resource="deployments", user_agent="memop/")
    memop = await memops.start(*LEADER_ARGS)
    await wait_for(lambda: leading(client, memop), timeout=TIMEOUT)
    await reconcile_in_flight(client, namespace, rule)
    agent = memop.user_agent()
    assert agent is not None

    memop.send(signal.SIGTERM)
    await memop.wait_log(lambda r: r.get("msg") == "shutting down", timeout=TIMEOUT)
    failing = time.monotonic()
    server.faults.fail(500, times=None, verb="update", resource="leases", user_agent=agent)
    assert await memop.wait(TIMEOUT) == 1
    assert time.monotonic() - failing < RENEW_DEADLINE + ALLOWANCE
    assert said(memop, "leader election lost while shutting down, cancelling in-flight reconciles")
    assert not said(memop, "released lease")
    last_renewal = max(
        r.time
        for r in server.log.filter(resource="leases", user_agent=agent)
        if r.verb in ("create", "update") and r.status in (200, 201)
    )
    writes = [r.time for r in server.log.filter(user_agent=agent) if r.verb in ("create", "update", "patch")]
    assert max(writes) < last_renewal + RENEW_DEADLINE


async def test_without_release_on_cancel_the_lease_is_left_to_expire(
    client: Client, memops: MemopProcesses
) -> None:
    memop = await memops.start(*LEADER_ARGS, "--no-leader-elect-release-on-cancel")
    await wait_for(lambda: leading(client, memop), timeout=TIMEOUT)
    assert await memop.terminate() == 0
    assert await leading(client, memop)  # still its name on the lease, until it expires
    assert not said(memop, "released lease")


async def test_the_graceful_timeout_cuts_a_slow_reconcile_short(
    kube: Kube, client: Client, namespace: str, memops: MemopProcesses
) -> None:
    server = kube.fake
    rule = server.faults.delay(20, verb="create", resource="deployments", user_agent="memop/")
    memop = await memops.start("--graceful-shutdown-timeout", "0.5s")
    await memop.wait_ready(TIMEOUT)
    await reconcile_in_flight(client, namespace, rule)

    started = time.monotonic()
    memop.send(signal.SIGTERM)
    assert await memop.wait(TIMEOUT) == 0
    assert time.monotonic() - started < 0.5 + ALLOWANCE
    assert said(memop, "cancelling 1 reconciles still running after the graceful shutdown timeout")


async def test_a_second_signal_exits_at_once(
    kube: Kube, client: Client, namespace: str, memops: MemopProcesses
) -> None:
    server = kube.fake
    rule = server.faults.delay(20, verb="create", resource="deployments", user_agent="memop/")
    memop = await memops.start()  # the graceful timeout is 30 s
    await memop.wait_ready(TIMEOUT)
    await reconcile_in_flight(client, namespace, rule)

    memop.send(signal.SIGTERM)
    await memop.wait_log(lambda r: r.get("msg") == "received SIGTERM, shutting down gracefully")
    started = time.monotonic()
    memop.send(signal.SIGINT)
    assert await memop.wait(TIMEOUT) == 1
    assert time.monotonic() - started < ALLOWANCE
    assert said(memop, "second signal SIGINT, exiting at once")


async def test_sigterm_during_a_slow_start_exits_at_once(
    kube: Kube, client: Client, memops: MemopProcesses
) -> None:
    """A stop is not held up by the API server answering memop's start-up check slowly."""
    kube.fake.faults.delay(60, verb="list", resource="memcacheds", user_agent="memop/")
    memop = await memops.start()
    await memop.url("/healthz")  # serving, and stuck in the start-up check
    status, _ = await memop.get("/readyz")
    assert status == 500
    started = time.monotonic()
    memop.send(signal.SIGTERM)
    assert await memop.wait(TIMEOUT) == 0
    assert time.monotonic() - started < ALLOWANCE


async def test_a_standby_stops_at_once_and_leaves_the_lease_alone(
    kube: Kube, client: Client, memops: MemopProcesses
) -> None:
    leader = await memops.start(*LEADER_ARGS)
    await wait_for(lambda: leading(client, leader), timeout=TIMEOUT)
    standby = await memops.start(*LEADER_ARGS)
    await standby.wait_ready(TIMEOUT)
    await standby.wait_log(lambda r: str(r.get("msg", "")).startswith("new leader elected"))
    started = time.monotonic()
    assert await standby.terminate() == 0
    assert time.monotonic() - started < ALLOWANCE
    assert await leading(client, leader)
    assert not said(standby, "released lease")
