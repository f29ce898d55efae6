"""An API server outage, as a cache of many reflectors lives through it on the in-memory server.

While the server refuses connections, the reflectors send nothing of their own: one probe asks
a few times a second for them all. Once it listens again, every watch is back within a second,
however long the outage was (a 90 s outage is the same case on the fake clock in
test_reachability.py: nothing here grows with the outage's length). Needs the fake's restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from memop.runtime.cache.cache import Cache
from memop.runtime.client.client import Client, Unreachable
from memop.runtime.client.errors import ConnectError
from memop.runtime.client.resources import CONFIGMAPS, EVENTS, NAMESPACES
from memop.runtime.controller.controller import ControllerBuilder
from memop.runtime.controller.reconcile import Request, Result
from memop.runtime.manager.events import NORMAL, EventRecorder
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

pytestmark = pytest.mark.fake_only

NAMESPACE_NAMES = ("o1", "o2", "o3", "o4", "o5")
RESOURCES = (CONFIGMAPS, EVENTS)
REFLECTORS = len(NAMESPACE_NAMES) * len(RESOURCES)


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer() as srv:
        yield srv


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(server.client_configuration()) as api:
        # memop's own retry settings: the LISTs after a rebuilt watch cache retry as in memop.
        yield Client(api, user_agent="outage-test", timeout=5)


def failed_requests(client: Client) -> float:
    """Requests of ``client`` that got no answer (refused connections)."""
    value = REGISTRY.get_sample_value(
        "rest_client_requests_total", {"code": "<error>", "method": "GET", "host": client.host}
    )
    return value or 0.0


def watches_since(server: ApiServer, since: float) -> list[float]:
    """Arrival times of the watches the server accepted since ``since`` (wall clock)."""
    accepted = server.log.filter(verb="watch", status=200, user_agent="outage-test")
    return [r.time for r in accepted if r.time >= since]


@pytest.mark.parametrize("rebuild_watch_cache", [False, True], ids=["resume", "relist"])
async def test_every_watch_is_back_within_a_second_and_the_outage_costs_a_few_requests_a_second(
    server: ApiServer, client: Client, rebuild_watch_cache: bool, record_property: pytest.RecordProperty
) -> None:
    for name in NAMESPACE_NAMES:
        await client.create(NAMESPACES, {"metadata": {"name": name}})
    cache = Cache(client, namespaces=NAMESPACE_NAMES)
    for resource in RESOURCES:
        cache.informer(resource)
    await cache.start()
    try:
        assert await cache.wait_for_sync(timeout=10)
        await wait_for(lambda: len(watches_since(server, 0.0)) == REFLECTORS, timeout=10)
        failed_before = failed_requests(client)

        downtime = 3.0
        await server.restart(downtime=downtime, rebuild_watch_cache=rebuild_watch_cache)
        back = time.time()
        await wait_for(lambda: len(watches_since(server, back)) >= REFLECTORS, timeout=10)
        resumed_after = max(watches_since(server, back)[:REFLECTORS]) - back
        refused = failed_requests(client) - failed_before

        # Each reflector's first refused attempt, then only the probe's.
        assert refused <= REFLECTORS + 3 * downtime, refused
        assert resumed_after <= 1.0, resumed_after
        assert cache.reachability.outages == 1
        record_property(
            "figures",
            {"refused requests": refused, "watches back after s": round(resumed_after, 3)},
        )

        # The cache is whole again: a change made after the outage reaches it.
        await client.create(CONFIGMAPS, {"metadata": {"name": "after"}}, "o3")
        await wait_for(lambda: cache.get(CONFIGMAPS, "after", "o3") is not None, timeout=5)
    finally:
        await cache.stop()


async def test_a_call_during_an_outage_waits_for_the_server_instead_of_retrying(
    server: ApiServer, client: Client
) -> None:
    """A reconcile's call that cannot connect marks the server down; its retry then waits for
    the probe to find the server answering, and is sent once, after that."""
    await client.create(CONFIGMAPS, {"metadata": {"name": "kept"}}, "default")
    restart = asyncio.create_task(server.restart(downtime=1.0))
    await wait_for(lambda: not server.listening, timeout=5)
    failed_before = failed_requests(client)
    assert client.unreachable_wait > 3.0  # memop's 5 retries: 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s
    got = await client.get(CONFIGMAPS, "kept", "default")  # the server is down for 1 s of it
    back = time.time()
    await restart
    assert got["metadata"]["name"] == "kept"
    # The one attempt that found the port closed; the rest of the failures are the probe's.
    assert failed_requests(client) - failed_before <= 1 + client.reachability.probes
    assert server.log.count(verb="get", resource="configmaps", name="kept") == 1
    assert server.log.filter(verb="get", resource="configmaps", name="kept")[0].time <= back


async def test_a_call_gives_up_unsent_when_the_server_stays_down_as_long_as_its_retries(
    server: ApiServer,
) -> None:
    async with ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="outage-test", max_retries=2)  # 0.3 s of retries
        await client.create(CONFIGMAPS, {"metadata": {"name": "kept"}}, "default")
        restart = asyncio.create_task(server.restart(downtime=3.0))
        await wait_for(lambda: not server.listening, timeout=5)
        with pytest.raises(ConnectError):
            await client.get(CONFIGMAPS, "kept", "default")  # marks it down
        with pytest.raises(Unreachable, match="not sent"):
            await client.get(CONFIGMAPS, "kept", "default")
        await restart
        await wait_for(lambda: client.reachability.reachable, timeout=5)
        assert (await client.get(CONFIGMAPS, "kept", "default"))["metadata"]["name"] == "kept"


async def test_events_recorded_while_the_server_is_down_are_sent_once_it_answers(
    server: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The Event sender waits for the server rather than fail the Events (here with no client
    retries at all, which would otherwise lose every one of them)."""
    async with ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="outage-test", max_retries=0)
        recorder = EventRecorder(client, "outage-test")
        recorder.start()
        try:
            restart = asyncio.create_task(server.restart(downtime=1.0))
            await wait_for(lambda: not server.listening, timeout=5)
            with pytest.raises(ConnectError):
                await client.get(CONFIGMAPS, "anything", "default")  # a watch or a call finds it down
            subject = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "default"},
            }
            for i in range(3):
                recorder.record(subject, NORMAL, "Changed", f"change {i}")
            await restart
            await asyncio.wait_for(recorder.flush(), 10)
        finally:
            await recorder.stop()
        events, _ = await client.list_all(EVENTS, "default")
    assert sorted(e["message"] for e in events) == ["change 0", "change 1", "change 2"]
    assert "failed to record event" not in caplog.text


async def test_workers_wait_for_the_server_instead_of_failing_reconciles(server: ApiServer) -> None:
    """A request queued while the server is down is reconciled once it answers, with no failed
    reconcile (here with no client retries, which would otherwise fail it at once)."""
    async with ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="outage-test", max_retries=0)
        await client.create(CONFIGMAPS, {"metadata": {"name": "a"}}, "default")
        reconciled: list[str] = []

        class Reading:
            async def reconcile(self, request: Request) -> Result | None:
                reconciled.append(
                    (await client.get(CONFIGMAPS, request.name, request.namespace))["metadata"]["name"]
                )
                return None

        cache = Cache(client, namespaces=["default"])
        controller = ControllerBuilder(cache, "outage-test").for_(CONFIGMAPS).build(Reading())
        await cache.start()
        await controller.start()
        try:
            await wait_for(lambda: reconciled == ["a"], timeout=10)
            errors = controller.stats.errors
            restart = asyncio.create_task(server.restart(downtime=1.0))
            await wait_for(lambda: not server.listening, timeout=5)
            with pytest.raises(ConnectError):
                await client.get(CONFIGMAPS, "a", "default")  # a watch or a call finds it down
            controller.queue.add(Request("default", "a"))
            await restart
            await wait_for(lambda: reconciled == ["a", "a"], timeout=10)
            assert controller.stats.errors == errors
        finally:
            await controller.stop(timeout=5)
            await cache.stop()
