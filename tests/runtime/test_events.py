"""memop.runtime.manager.events against the in-memory API server: sending, aggregation of repeats, and
the full-queue warning, which is itself aggregated so a stalled sender cannot flood the log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.runtime.client.client import Client
from memop.runtime.client.resources import EVENTS
from memop.runtime.manager.events import NORMAL, QUEUE_FULL_REPORT_INTERVAL, WARNING, EventRecorder
from memop.runtime.util.clock import FakeClock
from memop.runtime.workqueue.workqueue import AllQueues, WorkQueue
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer() as srv:
        yield srv


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="events-test")


async def settle() -> None:
    """Let the recorder's sender run until it waits again (on a queue or the fake clock)."""
    for _ in range(10):
        await asyncio.sleep(0)


def subject(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
    }


async def events(client: Client) -> list[dict[str, Any]]:
    items, _ = await client.list_all(EVENTS, "default")
    return items


def full_queue_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "memop.events" and "event queue full" in r.getMessage()]


async def test_events_are_sent_and_repeats_bump_the_count(client: Client) -> None:
    recorder = EventRecorder(client, "memcached-controller", host="node-1", clock=FakeClock())
    recorder.start()
    recorder.record(subject("a"), NORMAL, "Created", "created deployment a")
    recorder.record(subject("a"), NORMAL, "Created", "created deployment a")
    recorder.record(subject("a"), WARNING, "Failed", "could not scale")
    await recorder.stop()
    found = sorted(await events(client), key=lambda e: e["reason"])
    assert [(e["reason"], e["type"], e["count"]) for e in found] == [
        ("Created", NORMAL, 2),
        ("Failed", WARNING, 1),
    ]
    assert found[0]["involvedObject"]["name"] == "a"
    assert found[0]["source"] == {"component": "memcached-controller", "host": "node-1"}


async def test_a_full_queue_is_reported_once_per_interval_with_the_count(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    # Not started yet: nothing drains the queue, as when the API server stalls.
    recorder = EventRecorder(client, "memcached-controller", clock=clock, max_queued=3)
    caplog.set_level(logging.WARNING, logger="memop.events")
    for i in range(3 + 50):
        recorder.record(subject(f"o{i}"), NORMAL, "Created", f"created {i}")
    assert recorder.dropped == 50
    (first,) = full_queue_warnings(caplog)
    assert first.getMessage() == (
        "event queue full (3 waiting to be sent): dropped 1 event since the last report, "
        "the latest Created on Memcached/default/o3/uid-o3"
    )

    clock.advance(QUEUE_FULL_REPORT_INTERVAL - 1)
    recorder.record(subject("late"), NORMAL, "Created", "still full")
    assert len(full_queue_warnings(caplog)) == 1
    clock.advance(1)
    recorder.record(subject("later"), NORMAL, "Created", "still full")
    second = full_queue_warnings(caplog)[1]
    assert second.getMessage().startswith(
        "event queue full (3 waiting to be sent): dropped 51 events since the last report, "
        "the latest Created on Memcached/default/later/"
    )
    assert second.__dict__["droppedEvents"] == 51

    # Drops after the last warning are reported on stop, never silently lost.
    recorder.record(subject("last"), NORMAL, "Created", "still full")
    recorder.start()
    await recorder.stop()
    third = full_queue_warnings(caplog)[2]
    assert third.getMessage().endswith("dropped 1 event since the last report")
    assert len(full_queue_warnings(caplog)) == 3
    assert recorder.dropped == 53
    assert len(await events(client)) == 3  # the queued ones were sent on stop


async def test_sending_is_rate_limited_so_a_burst_of_events_trails_its_burst(client: Client) -> None:
    clock = FakeClock()
    recorder = EventRecorder(client, "memcached-controller", clock=clock, qps=2.0, burst=3)
    recorder.start()
    for i in range(7):
        recorder.record(subject(f"o{i}"), NORMAL, "Created", f"created {i}")

    async def sent(count: int) -> bool:
        return len(await events(client)) == count

    # The burst goes at once; the fourth waits for a token (half a second at 2 a second).
    await wait_for(lambda: sent(3), timeout=5)
    await wait_for(lambda: clock.pending_timers() == 1, timeout=5)
    assert await sent(3)
    for expected in (4, 5, 6, 7):
        clock.advance(0.5)
        await wait_for(lambda: sent(expected), timeout=5)  # noqa: B023 - awaited in the loop
    await recorder.stop()
    assert recorder.dropped == 0


async def test_without_a_rate_every_event_goes_at_once(client: Client) -> None:
    clock = FakeClock()
    recorder = EventRecorder(client, "memcached-controller", clock=clock)  # qps None
    recorder.start()
    for i in range(30):
        recorder.record(subject(f"o{i}"), NORMAL, "Created", f"created {i}")
    await recorder.flush()
    assert clock.pending_timers() == 0
    assert len(await events(client)) == 30
    await recorder.stop()


async def test_the_rate_limit_never_turns_into_drops(client: Client) -> None:
    clock = FakeClock()
    # One Event per 1000 s: without the full-speed rule, most of these would wait for hours
    # and the rest be dropped on a full queue.
    recorder = EventRecorder(client, "memcached-controller", clock=clock, qps=0.001, burst=1, max_queued=10)
    for i in range(10):
        recorder.record(subject(f"o{i}"), NORMAL, "Created", f"created {i}")
    recorder.start()

    async def sent(count: int) -> bool:
        return len(await events(client)) == count

    # 10 queued, 9 of them (90%) and more: sent at full speed down to the 9th from the end;
    # the first of the rest takes the one token; the others wait for the clock.
    await wait_for(lambda: sent(3), timeout=5)
    await wait_for(lambda: clock.pending_timers() == 1, timeout=5)
    assert await sent(3)
    assert recorder.dropped == 0
    for expected in range(4, 11):
        clock.advance(1000.0)
        await wait_for(lambda: sent(expected), timeout=5)  # noqa: B023 - awaited in the loop
    await recorder.stop()


async def test_events_wait_while_reconciles_have_work_and_go_after_a_quiet_second(client: Client) -> None:
    """Events must never delay the writes they describe: none is sent while a queue holds
    work, all of them once every queue has been idle for a second, at full speed (no rate
    limit then)."""
    clock = FakeClock()
    first, second = (
        WorkQueue[str]("a", clock=clock, metrics=False),
        WorkQueue[str]("b", clock=clock, metrics=False),
    )
    recorder = EventRecorder(
        client,
        "memcached-controller",
        clock=clock,
        qps=1.0,
        burst=1,
        workload=AllQueues(lambda: [first, second]),
    )
    recorder.start()
    first.add("x")
    second.add("y")
    for i in range(5):
        recorder.record(subject(f"o{i}"), NORMAL, "Created", f"created {i}")
    await settle()
    first.done(await first.get())  # one queue idle, the other still has work
    await settle()
    clock.advance(30.0)  # well within the deferral
    await settle()
    assert await events(client) == []
    second.done(await second.get())
    await settle()
    # Idle, but a burst leaves its queues empty for moments: Events wait for a quiet second.
    clock.advance(0.9)
    await settle()
    second.add("again")  # more work: the quiet second starts over once it is done
    second.done(await second.get())
    await settle()
    clock.advance(0.2)  # the first quiet second is over, but it was not quiet: another starts
    await settle()
    assert await events(client) == []
    clock.advance(1.0)  # a whole quiet second
    await recorder.flush()
    assert len(await events(client)) == 5  # all at once: nothing to compete with
    assert clock.pending_timers() == 0  # and no quiet second for each
    await recorder.stop()


async def test_an_event_deferred_for_max_defer_goes_anyway_at_the_rate_limit(client: Client) -> None:
    clock = FakeClock()
    queue = WorkQueue[str]("busy", clock=clock, metrics=False)
    recorder = EventRecorder(
        client, "memcached-controller", clock=clock, qps=1.0, burst=1, max_defer=60.0,
        workload=AllQueues(lambda: [queue]),
    )  # fmt: skip
    recorder.start()
    queue.add("forever")  # work that never pauses
    for i in range(3):
        recorder.record(subject(f"o{i}"), NORMAL, "Created", f"created {i}")

    async def sent(count: int) -> bool:
        return len(await events(client)) == count

    await wait_for(lambda: clock.pending_timers() == 1, timeout=5)
    clock.advance(59.0)
    await wait_for(lambda: clock.pending_timers() == 1, timeout=5)
    assert await sent(0)
    clock.advance(1.0)
    await wait_for(lambda: sent(1), timeout=5)
    for expected in (2, 3):  # one a second: the rate limit, not a flood
        await wait_for(lambda: clock.pending_timers() == 1, timeout=5)
        assert await sent(expected - 1)
        clock.advance(1.0)
        await wait_for(lambda: sent(expected), timeout=5)  # noqa: B023 - awaited in the loop
    await recorder.stop()


async def test_stop_sends_the_events_held_for_quiet_at_once(client: Client) -> None:
    """The manager stops its recorders after its controllers: with no reconcile work left to
    yield to, Events held for a quiet second (or for busy queues) go at once on stop, not after
    a second that stop's own deadline may cut short (they were lost then)."""
    clock = FakeClock()
    busy, quiet = (
        WorkQueue[str]("busy", clock=clock, metrics=False),
        WorkQueue[str]("quiet", clock=clock, metrics=False),
    )
    recorder = EventRecorder(
        client, "memcached-controller", clock=clock, qps=1.0, burst=1,
        workload=AllQueues(lambda: [busy, quiet]),
    )  # fmt: skip
    recorder.start()
    busy.add("x")
    for i in range(3):
        recorder.record(subject(f"o{i}"), NORMAL, "Created", f"created {i}")
    await settle()
    assert await events(client) == []  # held: a queue has work
    busy.shutdown()  # what stopping the controllers does; the fake clock never moves
    quiet.shutdown()
    await recorder.stop()
    assert sorted(e["message"] for e in await events(client)) == [f"created {i}" for i in range(3)]


async def test_each_object_has_a_spam_budget_of_25_then_one_every_five_minutes(client: Client) -> None:
    # client-go's spam filter: a hot error loop about one object cannot flood the API server,
    # and does not silence the Events about other objects.
    clock = FakeClock()
    # Not started: the Events only queue, so what the filter let through is what is queued.
    recorder = EventRecorder(client, "memcached-controller", clock=clock, remembered=2)
    for _ in range(30):
        recorder.record(subject("a"), WARNING, "Failed", "could not scale")
    assert recorder.dropped == 5
    recorder.record(subject("b"), WARNING, "Failed", "could not scale")
    assert recorder.dropped == 5
    clock.advance(299.0)
    recorder.record(subject("a"), WARNING, "Failed", "could not scale")
    assert recorder.dropped == 6  # not refilled yet
    clock.advance(1.0)
    recorder.record(subject("a"), WARNING, "Failed", "could not scale")
    recorder.record(subject("a"), WARNING, "Failed", "could not scale")
    assert recorder.dropped == 7  # one Event's worth every five minutes
    clock.advance(2 * 300.0)
    for _ in range(3):
        recorder.record(subject("a"), WARNING, "Failed", "could not scale")
    assert recorder.dropped == 8  # two refilled, never more than was spent
    # Only the last `remembered` objects are: one forgotten has its whole budget again.
    recorder.record(subject("c"), WARNING, "Failed", "could not scale")
    recorder.record(subject("b"), WARNING, "Failed", "could not scale")
    recorder.record(subject("a"), WARNING, "Failed", "could not scale")
    assert recorder.dropped == 8
