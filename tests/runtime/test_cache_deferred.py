"""Cache.record_write(defer=True): a write's answer stored at the end of the reconcile, unless a
later write of the same object is recorded first (then never prepared at all)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.runtime.cache.cache import Cache, DeferredWrites
from memop.runtime.cache.store import MODIFIED
from memop.runtime.client.client import Client
from memop.runtime.client.resources import CONFIGMAPS
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for
from tests.runtime.test_cache import Events, configmap


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(apiserver.client_configuration()) as api:
        yield Client(api, user_agent="deferred-test", max_retries=0, timeout=5)


@pytest.fixture
async def cache(client: Client) -> AsyncIterator[Cache]:
    await client.create(CONFIGMAPS, configmap("cm"), "default")
    cache = Cache(client, namespaces=["default"])
    cache.informer(CONFIGMAPS)
    await cache.start()
    assert await cache.wait_for_sync(timeout=5)
    yield cache
    await cache.stop()


@pytest.fixture
def events(cache: Cache) -> Events:
    """The changes the cache's handlers are told of from the test's start (not its first list)."""
    told = Events()
    cache.informer(CONFIGMAPS).add_handler(told)
    told.seen.clear()
    return told


async def echoes_skipped_once_past(cache: Cache, version: str) -> int:
    """The echoes the reflector skipped, once its stream is past ``version``."""
    reflector = cache.informer(CONFIGMAPS).reflectors[0]
    await wait_for(lambda: int(reflector.last_resource_version or 0) >= int(version), timeout=5)
    return reflector.echoes_skipped


def data(cache: Cache) -> dict[str, str]:
    stored = cache.get(CONFIGMAPS, "cm", "default")
    assert stored is not None
    return dict(stored["data"])


async def test_a_deferred_answer_is_stored_when_the_reconcile_ends(
    apiserver: ApiServer, client: Client, cache: Cache, events: Events
) -> None:
    apiserver.silence_watches(True)  # the watch cannot bring the write before the scope ends
    with DeferredWrites():
        written = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "deferred"}}, "default")
        assert not cache.record_write(CONFIGMAPS, written, defer=True)
        assert data(cache) == {"k": "cm"}  # as before the write, until the reconcile ends
        assert events.seen == []
    assert data(cache) == {"k": "deferred"}
    version = written["metadata"]["resourceVersion"]
    assert events.seen == [(MODIFIED, "default/cm", version)]
    apiserver.silence_watches(False)
    assert await echoes_skipped_once_past(cache, version) == 1
    assert events.seen == [(MODIFIED, "default/cm", version)]


async def test_a_later_answer_of_the_same_object_stands_for_the_deferred_one(
    apiserver: ApiServer, client: Client, cache: Cache, events: Events
) -> None:
    apiserver.silence_watches(True)
    with DeferredWrites():
        first = await client.patch(CONFIGMAPS, "cm", {"data": {"first": "1"}}, "default")
        cache.record_write(CONFIGMAPS, first, defer=True)
        second = await client.patch(CONFIGMAPS, "cm", {"data": {"second": "2"}}, "default")
        assert cache.record_write(CONFIGMAPS, second)
        assert data(cache) == {"k": "cm", "first": "1", "second": "2"}
    assert data(cache) == {"k": "cm", "first": "1", "second": "2"}  # not taken back to the first
    version = second["metadata"]["resourceVersion"]
    assert events.seen == [(MODIFIED, "default/cm", version)]  # one change told, the later
    apiserver.silence_watches(False)
    # Both echoes, undecoded: the store was past them.
    assert await echoes_skipped_once_past(cache, version) == 2
    assert events.seen == [(MODIFIED, "default/cm", version)]


async def test_an_echo_that_comes_before_the_reconcile_ends_is_applied_as_any_event(
    client: Client, cache: Cache, events: Events
) -> None:
    with DeferredWrites():
        written = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "deferred"}}, "default")
        cache.record_write(CONFIGMAPS, written, defer=True)
        await wait_for(lambda: data(cache) == {"k": "deferred"}, timeout=5)  # the watch brought it
    version = written["metadata"]["resourceVersion"]
    # Decoded, the store not holding that version yet, and told once.
    assert await echoes_skipped_once_past(cache, version) == 0
    assert events.seen == [(MODIFIED, "default/cm", version)]


async def test_a_deferred_answer_is_stored_when_the_reconcile_raises(
    apiserver: ApiServer, client: Client, cache: Cache
) -> None:
    apiserver.silence_watches(True)

    async def failing_reconcile() -> None:
        with DeferredWrites():
            written = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "deferred"}}, "default")
            cache.record_write(CONFIGMAPS, written, defer=True)
            raise RuntimeError("reconcile failed")

    with pytest.raises(RuntimeError, match="reconcile failed"):
        await failing_reconcile()
    assert data(cache) == {"k": "deferred"}


async def test_outside_a_reconcile_a_deferred_answer_is_stored_at_once(
    apiserver: ApiServer, client: Client, cache: Cache
) -> None:
    apiserver.silence_watches(True)
    written = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "now"}}, "default")
    assert cache.record_write(CONFIGMAPS, written, defer=True)
    assert data(cache) == {"k": "now"}


async def test_a_task_that_outlives_the_reconcile_stores_its_answers_at_once(
    apiserver: ApiServer, client: Client, cache: Cache
) -> None:
    # A task started in the reconcile carries a copy of its context, scope included; once the
    # scope has ended nothing would store what it deferred.
    apiserver.silence_watches(True)
    go_on = asyncio.Event()

    async def late_writer() -> bool:
        await go_on.wait()
        written = await client.patch(CONFIGMAPS, "cm", {"data": {"k": "late"}}, "default")
        return cache.record_write(CONFIGMAPS, written, defer=True)

    with DeferredWrites():
        task = asyncio.create_task(late_writer())
    go_on.set()
    assert await task
    assert data(cache) == {"k": "late"}
