"""memop.runtime.client.client against an API server: verbs, typed errors, retries, QPS, watches, metrics.

Tests that only use the API run on the ``cluster`` fixture (the in-memory server, or a real
cluster with USE_EXISTING_CLUSTER=true); tests that inject faults or read the request log take
``cluster.fake`` and skip on a real cluster.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from memop.runtime.client import errors
from memop.runtime.client.client import RETRY_BASE_DELAY, Client
from memop.runtime.client.resources import CONFIGMAPS, DEPLOYMENTS, Resource
from memop.runtime.util import jsoncodec
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle

T = TypeVar("T")
USER_AGENT = "memop-client-test/1.0"


class RecordingClock(FakeClock):
    """A FakeClock that remembers every sleep asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        await super().sleep(delay)


async def drive(clock: FakeClock, awaitable: Awaitable[T], *, deadline: float = 5.0) -> T:
    """Await ``awaitable`` while firing every timer it sets on ``clock`` as soon as it is set."""
    task = asyncio.ensure_future(awaitable)
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while not task.done():
        if loop.time() > end:
            task.cancel()
            raise AssertionError("the call did not finish in time")
        if clock.pending_timers():
            clock.advance(3600.0)
        await asyncio.sleep(0.001)
    return task.result()


def make_client(cluster: ClusterHandle, **kwargs: Any) -> Client:
    kwargs.setdefault("user_agent", USER_AGENT)
    kwargs.setdefault("rand", random.Random(3))
    return Client(cluster.api_client(), **kwargs)


def cm(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def deployment(name: str, namespace: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]},
            },
        },
    }


def requests_total(client: Client, code: str, method: str) -> float:
    labels = {"code": code, "method": method, "host": client.host}
    return REGISTRY.get_sample_value("rest_client_requests_total", labels) or 0.0


def durations_observed(client: Client, verb: str) -> float:
    labels = {"verb": verb, "host": client.host}
    return REGISTRY.get_sample_value("rest_client_request_duration_seconds_count", labels) or 0.0


# Verbs ---------------------------------------------------------------------------------------


async def test_each_verb_on_plain_dicts(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    created = await client.create(CONFIGMAPS, cm("one", namespace))
    assert created["metadata"]["namespace"] == namespace
    assert created["metadata"]["uid"]
    assert created["data"] == {"k": "v"}

    got = await client.get(CONFIGMAPS, "one", namespace)
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    listed = await client.list(CONFIGMAPS, namespace)
    assert listed["kind"] == "ConfigMapList"
    # Besides the kube-root-ca.crt every namespace holds.
    assert [i["metadata"]["name"] for i in listed["items"] if not i["metadata"]["name"].endswith(".crt")] == [
        "one"
    ]
    assert listed["metadata"]["resourceVersion"]

    got["data"] = {"k": "v2"}
    updated = await client.update(CONFIGMAPS, got)
    assert updated["data"] == {"k": "v2"}
    assert updated["metadata"]["resourceVersion"] != got["metadata"]["resourceVersion"]

    merged = await client.patch(CONFIGMAPS, "one", {"data": {"m": "1"}}, namespace)
    assert merged["data"] == {"k": "v2", "m": "1"}
    jsoned = await client.patch(
        CONFIGMAPS,
        "one",
        [{"op": "test", "path": "/data/m", "value": "1"}, {"op": "replace", "path": "/data/m", "value": "2"}],
        namespace,
        patch_type="json",
    )
    assert jsoned["data"]["m"] == "2"
    strategic = await client.patch(
        CONFIGMAPS, "one", {"metadata": {"labels": {"s": "yes"}}}, namespace, patch_type="strategic"
    )
    assert strategic["metadata"]["labels"] == {"s": "yes"}

    deleted = await client.delete(CONFIGMAPS, "one", namespace)
    # A ConfigMap's delete answers with the object (or a bare Status on older servers).
    assert deleted is None or deleted["metadata"]["name"] == "one"
    with pytest.raises(errors.NotFound):
        await client.get(CONFIGMAPS, "one", namespace)
    with pytest.raises(errors.NotFound):
        await client.delete(CONFIGMAPS, "one", namespace)


async def test_a_write_answer_keeps_the_json_it_was_read_from(cluster: ClusterHandle, namespace: str) -> None:
    # What Cache.record_write digests to know that write's watch event without decoding it.
    client = make_client(cluster)
    created = await client.create(CONFIGMAPS, cm("raw", namespace))
    raw = client.answer_json(created)
    assert raw is not None
    assert jsoncodec.loads(bytes(raw)) == created
    assert bytes(raw) == bytes(raw).strip()  # as a watch event embeds it: no trailing newline
    assert client.answer_json(dict(created)) is None  # an equal copy is not that answer
    assert client.answer_json(await client.get(CONFIGMAPS, "raw", namespace)) is None  # reads: never
    patched = [await client.patch(CONFIGMAPS, "raw", {"data": {"n": str(n)}}, namespace) for n in range(20)]
    assert client.answer_json(patched[-1]) is not None
    assert client.answer_json(created) is None  # only the last writes' are kept


async def test_create_fills_namespace_and_type_from_arguments(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    bare = {"metadata": {"name": "bare"}, "data": {"a": "b"}}
    created = await client.create(CONFIGMAPS, bare, namespace)
    assert created["metadata"]["namespace"] == namespace
    assert bare == {"metadata": {"name": "bare"}, "data": {"a": "b"}}  # not mutated
    with pytest.raises(ValueError, match="namespace"):
        await client.create(CONFIGMAPS, {"metadata": {"name": "nowhere"}})


async def test_status_subresource_verbs(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    created = await client.create(DEPLOYMENTS, deployment("web", namespace))
    patched = await client.patch_status(DEPLOYMENTS, "web", {"status": {"observedGeneration": 1}}, namespace)
    assert patched["status"]["observedGeneration"] == 1
    # The status subresource ignores spec changes.
    assert patched["spec"]["replicas"] == created["spec"]["replicas"]

    async def update_status() -> dict[str, Any] | None:
        # On a real cluster the deployment controller writes this status too: a PUT made from
        # an older read is a 409, and a client reads again, as any controller does.
        current = await client.get(DEPLOYMENTS, "web", namespace)
        current["status"]["observedGeneration"] = 2
        current["spec"]["replicas"] = 5
        try:
            return await client.update_status(DEPLOYMENTS, current)
        except errors.Conflict:
            return None

    updated = await wait_for(update_status, timeout=30)
    assert updated["status"]["observedGeneration"] == 2
    assert updated["spec"]["replicas"] == 1


async def test_delete_collection_by_label(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
        await client.create(CONFIGMAPS, cm(name, namespace, team=team))
    await client.delete_collection(CONFIGMAPS, namespace, label_selector="team=x")
    items, _ = await client.list_all(CONFIGMAPS, namespace)
    assert [i["metadata"]["name"] for i in items if i["metadata"]["name"] in ("a", "b", "c")] == ["c"]


async def test_delete_preconditions_and_propagation(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    created = await client.create(CONFIGMAPS, cm("pre", namespace))
    with pytest.raises(errors.Conflict):
        await client.delete(CONFIGMAPS, "pre", namespace, preconditions={"uid": "not-the-uid"})
    await client.delete(
        CONFIGMAPS,
        "pre",
        namespace,
        preconditions={"uid": created["metadata"]["uid"]},
        propagation_policy="Background",
    )
    with pytest.raises(errors.NotFound):
        await client.get(CONFIGMAPS, "pre", namespace)


async def test_list_all_follows_continue_tokens(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    names = [f"cm-{i:02d}" for i in range(7)]
    for name in names:
        await client.create(CONFIGMAPS, cm(name, namespace, app="paged"))
    await client.create(CONFIGMAPS, cm("other", namespace))
    items, rv = await client.list_all(CONFIGMAPS, namespace, label_selector="app=paged", page_size=3)
    assert sorted(i["metadata"]["name"] for i in items) == names
    assert all(i["apiVersion"] == "v1" and i["kind"] == "ConfigMap" for i in items)
    assert rv
    if not cluster.real:
        lists = cluster.fake.log.filter(verb="list", resource="configmaps", namespace=namespace)
        assert len(lists) == 3


async def test_user_agent_is_sent(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    client = make_client(cluster, user_agent="memop/9.9 (pod-x)")
    await client.list(CONFIGMAPS, namespace)
    assert server.log.count(verb="list", resource="configmaps", user_agent="memop/9.9 (pod-x)") == 1


# Typed errors --------------------------------------------------------------------------------


async def test_conflict_and_already_exists_are_told_apart(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    first = await client.create(CONFIGMAPS, cm("c", namespace))
    with pytest.raises(errors.AlreadyExists) as exists:
        await client.create(CONFIGMAPS, cm("c", namespace))
    assert exists.value.code == 409
    assert exists.value.reason == "AlreadyExists"
    await client.patch(CONFIGMAPS, "c", {"data": {"k": "new"}}, namespace)
    with pytest.raises(errors.Conflict) as stale:
        await client.update(CONFIGMAPS, first)
    assert type(stale.value) is errors.Conflict
    assert stale.value.reason == "Conflict"
    with pytest.raises(errors.Conflict):
        await client.patch(
            CONFIGMAPS,
            "c",
            {"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]}, "data": {"x": "y"}},
            namespace,
        )


async def test_invalid_carries_causes(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    with pytest.raises(errors.Invalid) as info:
        await client.create(CONFIGMAPS, cm("Not_A_Valid_Name", namespace))
    assert info.value.code == 422
    assert any(c.get("field") == "metadata.name" for c in info.value.causes)


async def test_injected_statuses_become_typed_errors(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    client = make_client(cluster, max_retries=0)
    await client.create(CONFIGMAPS, cm("x", namespace))

    server.faults.forbid(times=1, verb="get", resource="configmaps")
    with pytest.raises(errors.Forbidden) as forbidden:
        await client.get(CONFIGMAPS, "x", namespace)
    assert "cannot get resource" in forbidden.value.message

    server.faults.fail(410, times=1, verb="list", resource="configmaps")
    with pytest.raises(errors.Gone):
        await client.list(CONFIGMAPS, namespace)

    # The Retry-After cases read objects of their own: the client then holds back every
    # request to that path for as long as the server asked (7 s, 2 s), which the other cases'
    # requests, to x, need not wait out.
    await client.create(CONFIGMAPS, cm("throttled", namespace))
    await client.create(CONFIGMAPS, cm("unavailable", namespace))
    server.faults.fail(429, times=1, verb="get", resource="configmaps", name="throttled", retry_after=7)
    with pytest.raises(errors.TooManyRequests) as throttled:
        await client.get(CONFIGMAPS, "throttled", namespace)
    assert throttled.value.retry_after == 7.0

    server.faults.fail(500, times=1, verb="get", resource="configmaps")
    with pytest.raises(errors.ServerError) as failed:
        await client.get(CONFIGMAPS, "x", namespace)
    assert failed.value.code == 500
    assert failed.value.method == "GET"
    assert failed.value.path == f"/api/v1/namespaces/{namespace}/configmaps/x"

    server.faults.fail(503, times=1, verb="get", resource="configmaps", name="unavailable", retry_after=2)
    with pytest.raises(errors.ServerError) as unavailable:
        await client.get(CONFIGMAPS, "unavailable", namespace)
    assert (unavailable.value.code, unavailable.value.retry_after) == (503, 2.0)

    # What an API server sends for a missing or expired token (the in-memory server does not
    # authenticate, so it is injected).
    server.faults.fail(401, times=1, verb="get", resource="configmaps", message="Unauthorized")
    with pytest.raises(errors.Unauthorized) as unauthorized:
        await client.get(CONFIGMAPS, "x", namespace)
    assert unauthorized.value.code == 401
    assert not errors.is_retryable(unauthorized.value)


async def test_unknown_resource_is_not_found(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    widgets = Resource("example.com", "v1", "widgets", "Widget")
    with pytest.raises(errors.NotFound):
        await client.list(widgets, namespace)


# Retries -------------------------------------------------------------------------------------


async def test_idempotent_calls_retry_through_a_burst_of_failures(
    cluster: ClusterHandle, namespace: str
) -> None:
    server = cluster.fake
    clock = RecordingClock()
    client = make_client(cluster, clock=clock)
    await client.create(CONFIGMAPS, cm("r", namespace))
    server.log.clear()
    ok_before = requests_total(client, "200", "GET")
    failed_before = requests_total(client, "500", "GET")
    timed_before = durations_observed(client, "GET")

    server.faults.fail(500, times=3, verb="get", resource="configmaps")
    got = await drive(clock, client.get(CONFIGMAPS, "r", namespace))
    assert got["metadata"]["name"] == "r"
    statuses = [r.status for r in server.log.filter(verb="get", resource="configmaps")]
    assert statuses == [500, 500, 500, 200]
    # Jittered exponential backoff: retry n waits between half and all of base * 2**(n-1).
    assert len(clock.sleeps) == 3
    for n, slept in enumerate(clock.sleeps, start=1):
        ceiling = RETRY_BASE_DELAY * 2 ** (n - 1)
        assert ceiling / 2 <= slept <= ceiling
    # Every attempt is counted and timed.
    assert requests_total(client, "500", "GET") - failed_before == 3
    assert requests_total(client, "200", "GET") - ok_before == 1
    assert durations_observed(client, "GET") - timed_before == 4

    server.faults.fail(429, times=2, verb="list", resource="configmaps")
    await drive(clock, client.list(CONFIGMAPS, namespace))
    assert [r.status for r in server.log.filter(verb="list")] == [429, 429, 200]

    got["data"] = {"k": "put"}
    server.faults.fail(503, times=1, verb="update", resource="configmaps")
    await drive(clock, client.update(CONFIGMAPS, got))
    assert [r.status for r in server.log.filter(verb="update")] == [503, 200]

    server.faults.fail(500, times=2, verb="patch", resource="configmaps")
    await drive(clock, client.patch(CONFIGMAPS, "r", {"data": {"m": "1"}}, namespace))
    assert [r.status for r in server.log.filter(verb="patch")] == [500, 500, 200]

    server.faults.fail(500, times=1, verb="delete", resource="configmaps")
    await drive(clock, client.delete(CONFIGMAPS, "r", namespace))
    assert [r.status for r in server.log.filter(verb="delete")] == [500, 200]


async def test_retries_are_bounded(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    clock = RecordingClock()
    client = make_client(cluster, clock=clock, max_retries=2)
    server.faults.fail(500, times=None, verb="get", resource="configmaps")
    with pytest.raises(errors.ServerError):
        await drive(clock, client.get(CONFIGMAPS, "r", namespace))
    assert server.log.count(verb="get", resource="configmaps") == 3
    assert len(clock.sleeps) == 2

    server.log.clear()
    no_retries = make_client(cluster, clock=clock, max_retries=0)
    with pytest.raises(errors.ServerError):
        await drive(clock, no_retries.get(CONFIGMAPS, "r", namespace))
    assert server.log.count(verb="get", resource="configmaps") == 1


async def test_non_retryable_errors_are_not_retried(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    clock = RecordingClock()
    client = make_client(cluster, clock=clock)
    with pytest.raises(errors.NotFound):
        await drive(clock, client.get(CONFIGMAPS, "missing", namespace))
    server.faults.forbid(times=None, verb="list", resource="configmaps")
    with pytest.raises(errors.Forbidden):
        await drive(clock, client.list(CONFIGMAPS, namespace))
    assert server.log.count(verb="get", resource="configmaps") == 1
    assert server.log.count(verb="list", resource="configmaps") == 1
    assert clock.sleeps == []


async def test_create_is_not_blindly_retried(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    clock = RecordingClock()
    client = make_client(cluster, clock=clock)
    server.faults.fail(500, times=1, verb="create", resource="configmaps")
    with pytest.raises(errors.ServerError):
        await drive(clock, client.create(CONFIGMAPS, cm("once", namespace)))
    assert server.log.count(verb="create", resource="configmaps") == 1
    server.faults.fail(504, times=1, verb="create", resource="configmaps")
    with pytest.raises(errors.ServerError):
        await drive(clock, client.create(CONFIGMAPS, cm("once", namespace)))
    assert server.log.count(verb="create", resource="configmaps") == 2
    assert clock.sleeps == []

    # A 429 means the server did nothing: that is safe to repeat, after its Retry-After.
    server.faults.fail(429, times=2, verb="create", resource="configmaps", retry_after=2)
    created = await drive(clock, client.create(CONFIGMAPS, cm("once", namespace)))
    assert created["metadata"]["name"] == "once"
    assert server.log.count(verb="create", resource="configmaps") == 5
    assert clock.sleeps == [2.0, 2.0]


async def test_json_patch_retried_only_with_a_test_op(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    clock = RecordingClock()
    client = make_client(cluster, clock=clock)
    await client.create(CONFIGMAPS, cm("j", namespace))
    append = [{"op": "add", "path": "/data/n", "value": "1"}]
    server.faults.fail(500, times=1, verb="patch", resource="configmaps")
    with pytest.raises(errors.ServerError):
        await drive(clock, client.patch(CONFIGMAPS, "j", append, namespace, patch_type="json"))
    assert server.log.count(verb="patch") == 1

    current = await client.get(CONFIGMAPS, "j", namespace)
    guarded = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": current["metadata"]["resourceVersion"]},
        *append,
    ]
    server.faults.fail(500, times=1, verb="patch", resource="configmaps")
    patched = await drive(clock, client.patch(CONFIGMAPS, "j", guarded, namespace, patch_type="json"))
    assert patched["data"]["n"] == "1"
    assert server.log.count(verb="patch") == 3


async def test_retry_after_is_honoured(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    clock = RecordingClock()
    client = make_client(cluster, clock=clock)
    await client.create(CONFIGMAPS, cm("ra", namespace))
    server.faults.fail(429, times=2, verb="get", resource="configmaps", retry_after=3)
    start = clock.monotonic()
    await drive(clock, client.get(CONFIGMAPS, "ra", namespace))
    assert clock.sleeps == [3.0, 3.0]
    assert clock.monotonic() - start >= 6.0

    server.faults.fail(503, times=1, verb="get", resource="configmaps", retry_after=5)
    await drive(clock, client.get(CONFIGMAPS, "ra", namespace))
    assert clock.sleeps[2:] == [5.0]


async def test_retry_after_outlives_a_call_cancelled_while_waiting_it(
    cluster: ClusterHandle, namespace: str
) -> None:
    """A call waiting out a 429's Retry-After is cancelled (its caller's deadline, a
    shutdown): the next call to that path, any caller's, still waits the rest of it, then goes."""
    server = cluster.fake
    clock = FakeClock()
    client = make_client(cluster, clock=clock)
    await client.create(CONFIGMAPS, cm("later", namespace))
    await client.create(CONFIGMAPS, cm("other", namespace))
    server.log.clear()
    server.faults.fail(429, times=1, verb="get", resource="configmaps", name="later", retry_after=7)

    def gets(name: str) -> int:
        return server.log.count(verb="get", resource="configmaps", name=name)

    throttled = asyncio.create_task(client.get(CONFIGMAPS, "later", namespace))
    await wait_for(lambda: gets("later") == 1 and clock.pending_timers() == 1)  # waiting 7 s
    throttled.cancel()
    await asyncio.gather(throttled, return_exceptions=True)
    clock.advance(3.0)
    # Another path is not held up.
    assert (await client.get(CONFIGMAPS, "other", namespace))["metadata"]["name"] == "other"
    again = asyncio.create_task(client.get(CONFIGMAPS, "later", namespace))
    try:
        await wait_for(lambda: again.done() or clock.pending_timers() == 1)
        assert gets("later") == 1  # not asked again: 4 s of the 7 are left
        clock.advance(3.9)
        await wait_for(lambda: clock.pending_timers() == 1)
        assert gets("later") == 1
        clock.advance(0.1)
        got = await asyncio.wait_for(again, 5.0)
    finally:
        again.cancel()
    assert got["metadata"]["name"] == "later"
    assert [r.status for r in server.log.filter(verb="get", name="later")] == [429, 200]


# QPS -----------------------------------------------------------------------------------------


async def test_qps_limit_spaces_requests(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    clock = FakeClock()
    client = make_client(cluster, clock=clock, qps=2.0, burst=2)
    await client.create(CONFIGMAPS, cm("q", namespace))  # takes one token
    clock.advance(10.0)  # the bucket is full again: two tokens
    server.log.clear()

    def gets() -> int:
        return server.log.count(verb="get", resource="configmaps")

    tasks = [asyncio.create_task(client.get(CONFIGMAPS, "q", namespace)) for _ in range(5)]
    try:
        await wait_for(lambda: gets() == 2)
        # The three others wait on the bucket, for 0.5 s, 1 s and 1.5 s.
        await wait_for(lambda: clock.pending_timers() == 3)
        assert gets() == 2
        for expected in (3, 4, 5):
            clock.advance(0.5)
            await wait_for(lambda n=expected: gets() >= n)  # type: ignore[misc]
            assert gets() == expected
        await asyncio.gather(*tasks)

        # The bucket is empty now: another GET waits, but a watch starts at once.
        tasks.append(asyncio.create_task(client.get(CONFIGMAPS, "q", namespace)))
        await wait_for(lambda: clock.pending_timers() == 1)
        stream = client.watch(
            CONFIGMAPS,
            namespace,
            resource_version="",
            timeout_seconds=30,
            read_timeout=5.0,
            field_selector="metadata.name=q",  # not the kube-root-ca.crt every namespace holds
        )
        try:
            event = await asyncio.wait_for(anext(stream), 5.0)
            assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "q")
        finally:
            await stream.aclose()
        assert gets() == 5
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# Watch ---------------------------------------------------------------------------------------


async def test_watch_streams_changes_after_a_resource_version(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    await client.create(CONFIGMAPS, cm("before", namespace))
    _, rv = await client.list_all(CONFIGMAPS, namespace)
    stream = client.watch(
        CONFIGMAPS,
        namespace,
        resource_version=rv,
        timeout_seconds=30,
        read_timeout=10.0,
        # Not what the cluster publishes into a new namespace (kube-root-ca.crt), maybe after rv.
        field_selector="metadata.name=w",
    )
    try:
        await client.create(CONFIGMAPS, cm("w", namespace))
        await client.patch(CONFIGMAPS, "w", {"data": {"k": "2"}}, namespace)
        await client.delete(CONFIGMAPS, "w", namespace)
        seen: list[tuple[str, str]] = []
        while len(seen) < 3:
            event = await asyncio.wait_for(anext(stream), 5.0)
            if event["type"] != "BOOKMARK":
                seen.append((event["type"], event["object"]["metadata"]["name"]))
    finally:
        await stream.aclose()
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


async def test_watch_selectors(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    await client.create(CONFIGMAPS, cm("a", namespace, app="x"))
    await client.create(CONFIGMAPS, cm("b", namespace, app="y"))
    stream = client.watch(
        CONFIGMAPS,
        namespace,
        resource_version="",
        timeout_seconds=30,
        read_timeout=10.0,
        label_selector="app=x",
    )
    try:
        first = await asyncio.wait_for(anext(stream), 5.0)
    finally:
        await stream.aclose()
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "a")


@asynccontextmanager
async def own_server(**kwargs: Any) -> AsyncIterator[tuple[ApiServer, Client]]:
    """A server of the test's own (for settings the shared fixture does not take)."""
    async with ApiServer(**kwargs) as server, ApiClient(server.client_configuration()) as api:
        yield server, Client(api, user_agent=USER_AGENT)


@pytest.mark.fake_only
async def test_watch_bookmarks() -> None:
    async with own_server(bookmark_interval=0.05) as (server, client):
        await client.create(CONFIGMAPS, cm("x", "default"))
        _, rv = await client.list_all(CONFIGMAPS, "default")
        stream = client.watch(
            CONFIGMAPS, "default", resource_version=rv, timeout_seconds=30, read_timeout=5.0
        )
        try:
            event = await asyncio.wait_for(anext(stream), 5.0)
            assert event["type"] == "BOOKMARK"
            assert int(event["object"]["metadata"]["resourceVersion"]) >= int(rv)
        finally:
            await stream.aclose()
        # Without allowWatchBookmarks there are none: the first event is the next change.
        stream = client.watch(
            CONFIGMAPS,
            "default",
            resource_version=rv,
            timeout_seconds=30,
            read_timeout=5.0,
            allow_bookmarks=False,
        )
        try:
            waiting = asyncio.ensure_future(anext(stream))
            await wait_for(lambda: server.log.count(verb="watch") == 2)
            await client.create(CONFIGMAPS, cm("y", "default"))
            event = await asyncio.wait_for(waiting, 5.0)
            assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "y")
        finally:
            await stream.aclose()


async def test_watch_from_a_compacted_version_raises_gone(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    client = make_client(cluster)
    await client.create(CONFIGMAPS, cm("g", namespace))
    _, rv = await client.list_all(CONFIGMAPS, namespace)
    await client.patch(CONFIGMAPS, "g", {"data": {"k": "2"}}, namespace)
    server.compact()
    with pytest.raises(errors.Gone):
        async for _ in client.watch(
            CONFIGMAPS, namespace, resource_version=rv, timeout_seconds=30, read_timeout=5
        ):
            pass


async def test_watch_expired_mid_stream_raises_gone(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    client = make_client(cluster)
    _, rv = await client.list_all(CONFIGMAPS, namespace)
    stream = client.watch(CONFIGMAPS, namespace, resource_version=rv, timeout_seconds=30, read_timeout=5.0)
    try:
        await client.create(CONFIGMAPS, cm("e", namespace))
        assert (await asyncio.wait_for(anext(stream), 5.0))["type"] == "ADDED"
        assert await server.expire_watches() == 1
        with pytest.raises(errors.Gone):
            await asyncio.wait_for(anext(stream), 5.0)
    finally:
        await stream.aclose()


async def test_dropped_watch_raises_transport_error(cluster: ClusterHandle, namespace: str) -> None:
    server = cluster.fake
    client = make_client(cluster)
    _, rv = await client.list_all(CONFIGMAPS, namespace)
    stream = client.watch(CONFIGMAPS, namespace, resource_version=rv, timeout_seconds=30, read_timeout=5.0)
    try:
        await client.create(CONFIGMAPS, cm("d", namespace))
        assert (await asyncio.wait_for(anext(stream), 5.0))["type"] == "ADDED"
        assert await server.drop_watches() == 1
        with pytest.raises(errors.TransportError):
            await asyncio.wait_for(anext(stream), 5.0)
    finally:
        await stream.aclose()


async def test_silent_watch_raises_transport_error_after_read_timeout(
    cluster: ClusterHandle, namespace: str
) -> None:
    server = cluster.fake
    client = make_client(cluster)
    _, rv = await client.list_all(CONFIGMAPS, namespace)
    stream = client.watch(CONFIGMAPS, namespace, resource_version=rv, timeout_seconds=30, read_timeout=0.5)
    try:
        await client.create(CONFIGMAPS, cm("s", namespace))
        assert (await asyncio.wait_for(anext(stream), 5.0))["type"] == "ADDED"
        server.silence_watches(True)
        await client.create(CONFIGMAPS, cm("t", namespace))
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(errors.TransportError):
            await asyncio.wait_for(anext(stream), 5.0)
        assert 0.4 <= loop.time() - start < 4.0
    finally:
        server.silence_watches(False)
        await stream.aclose()


async def test_watch_ends_when_the_server_times_it_out(cluster: ClusterHandle, namespace: str) -> None:
    client = make_client(cluster)
    _, rv = await client.list_all(CONFIGMAPS, namespace)
    counted_before = requests_total(client, "200", "GET")
    loop = asyncio.get_running_loop()
    start = loop.time()
    stream = client.watch(
        CONFIGMAPS,
        namespace,
        resource_version=rv,
        timeout_seconds=1,
        read_timeout=5.0,
        allow_bookmarks=False,
        # Nothing: not even the ConfigMaps a cluster publishes into a new namespace after rv.
        field_selector="metadata.name=nothing-here",
    )
    events = [e async for e in stream]
    assert events == []
    assert 0.9 <= loop.time() - start < 4.0
    assert requests_total(client, "200", "GET") - counted_before == 1


async def test_watch_refused_raises_its_typed_error_and_is_counted(
    cluster: ClusterHandle, namespace: str
) -> None:
    server = cluster.fake
    client = make_client(cluster)
    before = requests_total(client, "403", "GET")
    server.faults.forbid(times=1, verb="watch", resource="configmaps")
    stream = client.watch(CONFIGMAPS, namespace, resource_version="", timeout_seconds=30, read_timeout=5)
    with pytest.raises(errors.Forbidden):
        await anext(stream)
    assert requests_total(client, "403", "GET") - before == 1
