"""memop.runtime.client.client against hand-written HTTP answers a real API server rarely gives on demand.

A tiny aiohttp server on 127.0.0.1 serves exactly the bytes each test needs (a malformed watch
line, a stream cut mid-chunk, an HTML error from a proxy, a request that never gets an answer),
so the client's handling of them is checked over a real socket. Everything an API server does
on its own (verbs, Status errors, faults) is tested in test_client.py against memop.testing.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration
from prometheus_client import REGISTRY

from memop.runtime.client import errors, watchstream
from memop.runtime.client.client import Client, Unreachable, parse_retry_after
from memop.runtime.client.resources import CONFIGMAPS, NAMESPACES, Resource
from memop.runtime.util.clock import FakeClock

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CM_PATH = "/api/v1/namespaces/ns/configmaps"


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


def cm(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": data,
    }


def requests_counted(host: str, code: str, method: str) -> float:
    value = REGISTRY.get_sample_value(
        "rest_client_requests_total", {"code": code, "method": method, "host": host}
    )
    return value or 0.0


class Raw:
    """Routes registered by a test, and what the server received."""

    def __init__(self) -> None:
        self.app = web.Application()
        self.received: list[web.Request] = []
        self.release = asyncio.Event()  # set at teardown: handlers that wait forever return
        self.url = ""
        self.host = ""

    def route(self, method: str, path: str, handler: Handler) -> None:
        async def recording(request: web.Request) -> web.StreamResponse:
            self.received.append(request)
            return await handler(request)

        self.app.router.add_route(method, path, recording)

    def count(self, method: str) -> int:
        return sum(1 for r in self.received if r.method == method)


@asynccontextmanager
async def serve(raw: Raw) -> AsyncIterator[Raw]:
    runner = web.AppRunner(raw.app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    raw.host = f"127.0.0.1:{port}"
    raw.url = f"http://{raw.host}"
    try:
        yield raw
    finally:
        raw.release.set()
        await runner.cleanup()


@asynccontextmanager
async def client_for(url: str, *, pool_size: int = 100, **kwargs: Any) -> AsyncIterator[Client]:
    config = Configuration(host=url)
    config.connection_pool_maxsize = pool_size
    config.api_key = {"BearerToken": "s3cret"}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    async with ApiClient(config) as api:
        kwargs.setdefault("rand", random.Random(7))
        yield Client(api, **kwargs)


def json_answer(status: int, body: Any, headers: dict[str, str] | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(body, status=status, headers=headers)

    return handler


async def test_headers_auth_user_agent_and_query() -> None:
    raw = Raw()
    raw.route("GET", CM_PATH, json_answer(200, {"kind": "ConfigMapList", "items": [], "metadata": {}}))
    async with serve(raw), client_for(raw.url, user_agent="memop/test (unit)") as client:
        await client.list(CONFIGMAPS, "ns", label_selector="a=b,c!=d", limit=7, resource_version="0")
    request = raw.received[0]
    assert request.headers["User-Agent"] == "memop/test (unit)"
    assert request.headers["Authorization"] == "Bearer s3cret"
    assert request.headers["Accept"] == "application/json"
    assert dict(request.query) == {"labelSelector": "a=b,c!=d", "limit": "7", "resourceVersion": "0"}


async def test_malformed_watch_lines_are_skipped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        await response.write(b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}\n')
        await response.write(b"this is not json\n")
        # One event split over two chunks must still arrive whole.
        await response.write(b'{"type":"MODIFIED","obj')
        await response.write(b'ect":{"metadata":{"name":"a","resourceVersion":"2"}}}\n')
        await response.write(b"[1, 2, 3]\n")
        await response.write(b'{"type":"EXPLODED","object":{}}\n')
        await response.write(b'{"type":"ADDED","object":"not an object"}\n')
        await response.write(b"\n")
        await response.write(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5"}}}\n')
        await response.write(b'{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"6"}}}\n')
        # A last line cut short before a clean end of stream.
        await response.write(b'{"type":"ADDED","object":{"metadata":')
        await response.write_eof()
        return response

    raw = Raw()
    raw.route("GET", CM_PATH, stream)
    caplog.set_level(logging.WARNING, logger="memop.client")
    async with serve(raw), client_for(raw.url) as client:
        events = [
            e
            async for e in client.watch(
                CONFIGMAPS, "ns", resource_version="1", timeout_seconds=30, read_timeout=5.0
            )
        ]
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [
        ("ADDED", "1"),
        ("MODIFIED", "2"),
        ("BOOKMARK", "5"),
        ("DELETED", "6"),
    ]
    warnings = [r.getMessage() for r in caplog.records if r.name == "memop.client"]
    assert len(warnings) == 5, warnings
    assert "this is not json" in warnings[0]
    assert '{"type":"ADDED","object":{"metadata":' in warnings[-1]
    query = raw.received[0].query
    assert dict(query) == {
        "watch": "true",
        "resourceVersion": "1",
        "timeoutSeconds": "30",
        "allowWatchBookmarks": "true",
    }


async def test_watch_cut_mid_stream_raises_transport_error() -> None:
    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}\n')
        await response.write(b'{"type":"MODIFIED","object":{"meta')
        assert request.transport is not None
        request.transport.close()  # the chunked body never gets its terminating chunk
        return response

    raw = Raw()
    raw.route("GET", CM_PATH, cut)
    async with serve(raw), client_for(raw.url) as client:
        stream = client.watch(CONFIGMAPS, "ns", resource_version="1", timeout_seconds=30, read_timeout=5.0)
        assert (await anext(stream))["type"] == "ADDED"
        with pytest.raises(errors.TransportError, match=r"broke: .*closed before the answer ended"):
            await anext(stream)


async def test_silent_watch_times_out_and_closing_releases_the_connection() -> None:
    async def silent(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}\n')
        await raw.release.wait()
        return response

    raw = Raw()
    raw.route("GET", CM_PATH, silent)
    raw.route("GET", CM_PATH + "/x", json_answer(200, cm("x")))
    # One connection in the pool: a watch that kept its connection would starve the GET below.
    async with serve(raw), client_for(raw.url, pool_size=1, timeout=1.0, max_retries=0) as client:
        stream = client.watch(CONFIGMAPS, "ns", resource_version="1", timeout_seconds=30, read_timeout=0.3)
        assert (await anext(stream))["type"] == "ADDED"
        start = asyncio.get_running_loop().time()
        with pytest.raises(errors.TransportError, match="watch"):
            await anext(stream)
        assert 0.25 <= asyncio.get_running_loop().time() - start < 3.0

        # Closing an iterator in the middle of a stream closes its connection at once.
        stream = client.watch(CONFIGMAPS, "ns", resource_version="1", timeout_seconds=30, read_timeout=30)
        assert (await anext(stream))["type"] == "ADDED"
        await stream.aclose()
        assert (await client.get(CONFIGMAPS, "x", "ns"))["metadata"]["name"] == "x"


async def test_non_200_watch_and_error_event_raise_typed_errors() -> None:
    gone = {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410, "message": "too old"}

    async def error_event(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"ERROR","object":{"kind":"Status","code":500,"message":"boom"}}\n')
        await response.write_eof()
        return response

    raw = Raw()
    raw.route("GET", CM_PATH, json_answer(410, gone))
    raw.route("GET", "/api/v1/namespaces/other/configmaps", error_event)
    async with serve(raw), client_for(raw.url) as client:
        # The counters are the process's, keyed by host: an earlier test's server may have had
        # this port. Count from what they say now.
        gone_before = requests_counted(raw.host, "410", "GET")
        ok_before = requests_counted(raw.host, "200", "GET")
        with pytest.raises(errors.Gone) as gone_info:
            async for _ in client.watch(
                CONFIGMAPS, "ns", resource_version="1", timeout_seconds=5, read_timeout=5
            ):
                pass
        assert gone_info.value.reason == "Expired"
        with pytest.raises(errors.ServerError, match="boom"):
            async for _ in client.watch(
                CONFIGMAPS, "other", resource_version="1", timeout_seconds=5, read_timeout=5
            ):
                pass
        assert requests_counted(raw.host, "410", "GET") - gone_before == 1
        assert requests_counted(raw.host, "200", "GET") - ok_before == 1


async def test_events_that_arrive_together_are_handed_over_together_in_order() -> None:
    def line(kind: str, rv: int) -> bytes:
        return b'{"type":"%s","object":{"metadata":{"name":"a","resourceVersion":"%d"}}}\n' % (
            kind.encode(),
            rv,
        )

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        # Three events and the start of a fourth in one chunk, the fourth's end in the next.
        await response.write(
            line("ADDED", 1) + line("MODIFIED", 2) + line("MODIFIED", 3) + line("DELETED", 4)[:9]
        )
        await first_batch_seen.wait()
        await response.write(line("DELETED", 4)[9:])
        # Events before an ERROR line are delivered, then the error is raised.
        error = b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"old"}}\n'
        await response.write(line("ADDED", 5) + error + line("ADDED", 6))
        await response.write_eof()
        return response

    first_batch_seen = asyncio.Event()
    raw = Raw()
    raw.route("GET", CM_PATH, stream)
    async with serve(raw), client_for(raw.url) as client:
        batches: list[list[str]] = []

        async def consume() -> None:
            async for batch in client.watch_batches(
                CONFIGMAPS, "ns", resource_version="1", timeout_seconds=30, read_timeout=5.0
            ):
                batches.append([])
                for event in batch:
                    batches[-1].append(event["object"]["metadata"]["resourceVersion"])
                first_batch_seen.set()

        with pytest.raises(errors.Gone, match="old"):
            await consume()
    assert batches[0] == ["1", "2", "3"]
    assert [rv for batch in batches for rv in batch] == ["1", "2", "3", "4", "5"]


@pytest.mark.parametrize("with_newline", [False, True])
async def test_a_line_longer_than_any_event_breaks_the_watch(
    monkeypatch: pytest.MonkeyPatch, with_newline: bool
) -> None:
    monkeypatch.setattr(watchstream, "MAX_EVENT_BYTES", 4096)

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}\n')
        huge = b'{"type":"ADDED","object":{"data":"' + b"x" * 5000 + b'"}}'
        if with_newline:
            await response.write(huge + b"\n")
        else:
            for start in range(0, len(huge), 1000):
                await response.write(huge[start : start + 1000])
        await raw.release.wait()
        return response

    raw = Raw()
    raw.route("GET", CM_PATH, stream)
    async with serve(raw), client_for(raw.url) as client:
        seen: list[str] = []

        async def consume() -> None:
            async for event in client.watch(
                CONFIGMAPS, "ns", resource_version="1", timeout_seconds=30, read_timeout=5.0
            ):
                seen.append(event["object"]["metadata"]["resourceVersion"])

        with pytest.raises(errors.TransportError, match="unreadable line"):
            await consume()
    assert seen == ["1"]


async def test_error_body_that_is_not_a_status() -> None:
    async def proxy(request: web.Request) -> web.StreamResponse:
        return web.Response(status=502, text="<html>bad gateway</html>", content_type="text/html")

    raw = Raw()
    raw.route("GET", CM_PATH + "/x", proxy)
    async with serve(raw), client_for(raw.url, max_retries=0) as client:
        with pytest.raises(errors.ServerError) as info:
            await client.get(CONFIGMAPS, "x", "ns")
    assert info.value.code == 502
    assert "bad gateway" in info.value.message


async def test_request_timeout_is_a_transport_error() -> None:
    async def hang(request: web.Request) -> web.StreamResponse:
        await raw.release.wait()
        return web.json_response({})

    raw = Raw()
    raw.route("GET", CM_PATH + "/x", hang)
    async with serve(raw), client_for(raw.url, timeout=0.2, max_retries=0) as client:
        before = requests_counted(raw.host, "<error>", "GET")  # the process's counter: see above
        with pytest.raises(errors.TransportError):
            await client.get(CONFIGMAPS, "x", "ns")
        assert requests_counted(raw.host, "<error>", "GET") - before == 1


async def test_answer_lost_after_sending_create_is_not_retried_but_get_is() -> None:
    async def vanish(request: web.Request) -> web.StreamResponse:
        await request.read()
        assert request.transport is not None
        request.transport.close()  # the request arrived; the answer never leaves
        return web.Response()

    raw = Raw()
    raw.route("POST", CM_PATH, vanish)
    raw.route("GET", CM_PATH + "/x", vanish)
    clock = RecordingClock()
    async with serve(raw), client_for(raw.url, clock=clock, max_retries=3) as client:
        with pytest.raises(errors.TransportError):
            await drive(clock, client.create(CONFIGMAPS, cm("x")))
        assert raw.count("POST") == 1
        assert clock.sleeps == []
        with pytest.raises(errors.TransportError):
            await drive(clock, client.get(CONFIGMAPS, "x", "ns"))
        # Four attempts, each sent once: as Go's transport, memop's connections send a GET again
        # at once only when a kept-alive connection turns out closed, not on a new connection
        # (aiohttp resent every idempotent request once, so this was 8).
        assert raw.count("GET") == 4
        assert len(clock.sleeps) == 3


async def test_connection_refused_makes_even_a_create_wait_for_the_server_then_give_up_unsent() -> None:
    """A refused connection never reached the server, so even a create may be sent again; but
    it marks the server unreachable, and the retry waits for the shared probe to find it
    answering (at most as long as its retries would have taken) instead of knocking on the
    closed port itself."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on ``port`` now: every connection attempt is refused. The counters are
    # the process's: an earlier test may have counted a refused request to this same port
    # (the kernel hands ports out again), so this test counts from what they say now.
    host = f"127.0.0.1:{port}"
    posts_before = requests_counted(host, "<error>", "POST")
    gets_before = requests_counted(host, "<error>", "GET")
    clock = RecordingClock()
    async with client_for(f"http://127.0.0.1:{port}", clock=clock, max_retries=2) as client:
        with pytest.raises(Unreachable, match="not sent"):
            await drive(clock, client.create(CONFIGMAPS, cm("x")))
        assert not client.reachability.reachable
        # The retry's wait, as long as its 2 retries' backoff (the other sleeps are the probe's).
        assert any(sleep == pytest.approx(0.1 + 0.2) for sleep in clock.sleeps)
        probes = client.reachability.probes
        await client.close()  # stops the probe
        assert clock.pending_timers() == 0
    assert requests_counted(host, "<error>", "POST") - posts_before == 1
    assert probes >= 1
    assert requests_counted(host, "<error>", "GET") - gets_before == probes


async def test_delete_options_body_and_status_answer() -> None:
    bodies: list[Any] = []

    async def delete(request: web.Request) -> web.StreamResponse:
        bodies.append(await request.json() if request.can_read_body else None)
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success"})

    raw = Raw()
    raw.route("DELETE", "/api/v1/namespaces/x", delete)
    async with serve(raw), client_for(raw.url) as client:
        assert await client.delete(NAMESPACES, "x") is None
        assert (
            await client.delete(
                NAMESPACES,
                "x",
                propagation_policy="Foreground",
                preconditions={"uid": "u1"},
                grace_period_seconds=0,
            )
            is None
        )
    assert bodies[0] is None
    assert bodies[1] == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Foreground",
        "preconditions": {"uid": "u1"},
        "gracePeriodSeconds": 0,
    }


async def test_names_are_path_escaped_and_required() -> None:
    roles = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)

    raw = Raw()
    raw.route(
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
        json_answer(200, {"kind": "ClusterRole", "metadata": {"name": "system:x"}}),
    )
    async with serve(raw), client_for(raw.url) as client:
        got = await client.get(roles, "system:x")
        assert got["metadata"]["name"] == "system:x"
        assert raw.received[0].match_info["name"] == "system:x"
        with pytest.raises(ValueError, match="empty"):
            await client.get(roles, "")
        with pytest.raises(ValueError, match="namespace"):
            await client.get(CONFIGMAPS, "x")


def test_parse_retry_after() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after(None, now) is None
    assert parse_retry_after("", now) is None
    assert parse_retry_after("3", now) == 3.0
    assert parse_retry_after(" 1.5 ", now) == 1.5
    assert parse_retry_after("-4", now) == 0.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:30 GMT", now) == 10.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after("nan", now) is None


async def test_list_all_relists_in_full_when_a_continue_token_expires() -> None:
    expired = {
        "kind": "Status",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
        "message": "The provided continue parameter is too old to display a consistent list result.",
    }

    async def pages(request: web.Request) -> web.StreamResponse:
        query = request.query
        if "continue" in query:
            return web.json_response(expired, status=410)
        if "limit" in query:
            page = {"metadata": {"resourceVersion": "10", "continue": "c1"}, "items": [cm("a")]}
            return web.json_response({"kind": "ConfigMapList", "apiVersion": "v1", **page})
        items = [{"metadata": {"name": n, "namespace": "ns"}} for n in ("a", "b", "c")]
        return web.json_response(
            {
                "kind": "ConfigMapList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": "12"},
                "items": items,
            }
        )

    raw = Raw()
    raw.route("GET", CM_PATH, pages)
    async with serve(raw), client_for(raw.url) as client:
        items, rv = await client.list_all(CONFIGMAPS, "ns", page_size=1)
    assert [i["metadata"]["name"] for i in items] == ["a", "b", "c"]
    assert all((i["apiVersion"], i["kind"]) == ("v1", "ConfigMap") for i in items)
    assert rv == "12"
    assert [dict(r.query) for r in raw.received] == [{"limit": "1"}, {"limit": "1", "continue": "c1"}, {}]


def test_event_lines_skip_only_added_and_modified_objects_their_reader_knows() -> None:
    # The reader is handed each ADDED or MODIFIED line's object as bytes, undecoded; what it
    # says it knows is skipped, anything else is decoded (and an ERROR still raises).
    known_object = b'{"metadata":{"name":"a","resourceVersion":"2"}}'
    lines = [
        b'{"type":"ADDED","object":' + known_object + b"}",
        b'{"type":"MODIFIED","object":' + known_object + b"}",
        b'{"type":"DELETED","object":' + known_object + b"}",
        b'{"type":"MODIFIED","object":{"metadata":{"name":"b","resourceVersion":"3"}}}',
        b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"4"}}}',
    ]
    asked: list[bytes] = []

    def known(raw: memoryview) -> bool:
        asked.append(bytes(raw))
        return bytes(raw) == known_object

    events = list(watchstream.EventLines(lines).events(known))
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("DELETED", "a"),
        ("MODIFIED", "b"),
        ("BOOKMARK", None),
    ]
    assert asked == [known_object, known_object, b'{"metadata":{"name":"b","resourceVersion":"3"}}']
    assert len(list(watchstream.EventLines(lines))) == 5  # without a reader that knows, all of them
    error = b'{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old"}}'
    with pytest.raises(errors.Gone):
        list(watchstream.EventLines([error]).events(known))
