"""memop's HTTP/1.1 connections (memop.runtime.client.http1) against loopback servers: what a
server may answer (kept-alive or closed connections, chunked and gzip bodies, garbage), the
connection limit, timeouts and refused ports. The Client's use of it over TLS is covered by
tests/runtime/test_client_env.py and every test that talks to the in-memory API server."""

from __future__ import annotations

import asyncio
import gzip
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from memop.runtime.client.http1 import (
    READ_BYTES,
    STREAM_BUFFER,
    Http1ConnectError,
    Http1Error,
    Http1Pool,
    Http1Stream,
)
from memop.testing.tls import ServingCertificates
from memop.testing.wait import wait_for

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def aiohttp_server(handler: Handler) -> AsyncIterator[int]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        server = site._server
        assert server is not None
        yield server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    finally:
        await runner.cleanup()


@asynccontextmanager
async def raw_server(answer: Callable[[int], bytes | None]) -> AsyncIterator[tuple[int, list[int]]]:
    """A server that reads one request per connection and writes ``answer(n)`` (the n-th
    connection's), then closes; None: closes without answering. Yields its port and the
    number of requests each connection got."""
    requests: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(requests)
        requests.append(0)
        try:
            await reader.readuntil(b"\r\n\r\n")
            requests[index] += 1
            data = answer(index)
            if data is not None:
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], requests
    finally:
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def serving(
    serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[int]:
    """A loopback server calling ``serve`` for each connection; yields its port."""
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def pool_for(port: int, **options: float) -> AsyncIterator[Http1Pool]:
    pool = Http1Pool("127.0.0.1", port, ssl_context=None, **options)  # type: ignore[arg-type]
    try:
        yield pool
    finally:
        await pool.close()


async def test_sequential_requests_reuse_one_connection_and_carry_headers_and_bodies() -> None:
    seen: list[tuple[str, str, str | None, bytes, int]] = []

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        assert request.transport is not None
        seen.append(
            (request.method, request.path_qs, request.headers.get("X-Test"), body, id(request.transport))
        )
        return web.json_response({"n": len(seen)}, headers={"Warning": "299 - one"})

    async with aiohttp_server(echo) as port, pool_for(port) as pool:
        first = await pool.request("PATCH", "/a/b?x=1%202", {"X-Test": "t"}, b'{"k":1}')
        second = await pool.request("GET", "/c", {})
    assert (first.status, first.reason, first.body) == (200, "OK", b'{"n": 1}')
    assert first.headers["content-type"] == "application/json; charset=utf-8"
    assert first.headers["warning"] == "299 - one"
    assert second.body == b'{"n": 2}'
    assert [s[:4] for s in seen] == [("PATCH", "/a/b?x=1%202", "t", b'{"k":1}'), ("GET", "/c", None, b"")]
    assert seen[0][4] == seen[1][4]  # the same connection
    assert pool.connections_opened == 1


async def test_chunked_and_gzip_answers_are_whole_and_decoded() -> None:
    payload = b'{"items":[' + b",".join(b'{"i":%d}' % i for i in range(20000)) + b"]}"

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(payload), 7000):
            await response.write(payload[start : start + 7000])
        await response.write_eof()
        return response

    async def gzipped(request: web.Request) -> web.Response:
        assert request.headers["Accept-Encoding"] == "gzip"  # asked for, as client-go does
        return web.Response(body=gzip.compress(payload), headers={"Content-Encoding": "gzip"})

    async def route(request: web.Request) -> web.StreamResponse:
        return await (chunked if request.path == "/chunked" else gzipped)(request)

    async with aiohttp_server(route) as port, pool_for(port) as pool:
        assert (await pool.request("GET", "/chunked", {})).body == payload
        assert (await pool.request("GET", "/gzip", {})).body == payload
        assert (await pool.request("GET", "/chunked", {})).body == payload
    assert pool.connections_opened == 1


async def test_a_closed_connection_is_not_reused() -> None:
    def answer(index: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

    async with raw_server(answer) as (port, requests), pool_for(port) as pool:
        for _ in range(3):
            assert (await pool.request("GET", "/", {})).body == b"ok"
    assert requests == [1, 1, 1]
    assert pool.connections_opened == 3


async def test_a_kept_alive_connection_the_server_closed_while_idle_is_replaced() -> None:
    # The server says keep-alive, then closes: the next request must not fail.
    def answer(index: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    async with raw_server(answer) as (port, requests), pool_for(port) as pool:
        assert (await pool.request("GET", "/", {})).body == b"ok"
        await wait_for(lambda: pool.open_connections == 0 or _all_closed(pool), timeout=5)
        assert (await pool.request("POST", "/", {}, b"{}")).body == b"ok"
    assert requests == [1, 1]


def _all_closed(pool: Http1Pool) -> bool:
    return all(connection.closed for connection in pool._idle)


async def test_a_get_is_sent_again_when_a_kept_alive_connection_dies_with_it_but_a_post_is_not() -> None:
    """Go's transport rule: only on a reused connection that gave no byte of the answer, and only
    what is safe to repeat. The race (the server closes as the request leaves) is made certain
    here: the server keeps the first connection open after its answer and closes it unanswered
    on the second request."""
    arrivals: list[tuple[int, bytes]] = []
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        number = connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrivals.append((number, head.split(b" ", 1)[0]))
                length = (
                    int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n")[0])
                    if b"ength: " in head
                    else 0
                )
                await reader.readexactly(length)
                if len([a for a in arrivals if a[0] == number]) == 2:
                    return  # dies with the second request of a connection, unanswered
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except asyncio.IncompleteReadError:
            return
        finally:
            writer.close()

    async with serving(serve) as port, pool_for(port) as pool:
        assert (await pool.request("GET", "/", {})).body == b"ok"
        assert (await pool.request("GET", "/", {})).body == b"ok"  # sent again on connection 2
        assert arrivals == [(1, b"GET"), (1, b"GET"), (2, b"GET")]
        with pytest.raises(Http1Error, match="closed before the answer ended"):
            await pool.request("POST", "/", {}, b"{}")  # connection 2's second: not repeated
        assert arrivals[3:] == [(2, b"POST")]


async def test_at_most_limit_connections_at_once() -> None:
    running = 0
    most = 0
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1
        return web.Response(text="done")

    async with aiohttp_server(slow) as port, pool_for(port, limit=2) as pool:
        calls = [asyncio.create_task(pool.request("GET", f"/{i}", {})) for i in range(5)]
        await wait_for(lambda: running == 2, timeout=5)
        release.set()
        answers = await asyncio.gather(*calls)
    assert [a.body for a in answers] == [b"done"] * 5
    assert most == 2
    assert pool.connections_opened == 2


async def test_a_timeout_closes_the_connection_and_the_pool_goes_on() -> None:
    stall = asyncio.Event()

    async def maybe_stall(request: web.Request) -> web.Response:
        if request.path == "/stall":
            await stall.wait()
        return web.Response(text="ok")

    async with aiohttp_server(maybe_stall) as port, pool_for(port) as pool:
        with pytest.raises(Http1Error, match=r"no answer within 0.2 s \(waiting for the answer\)"):
            await pool.request("GET", "/stall", {}, timeout=0.2)
        assert pool.open_connections == 0
        stall.set()
        assert (await pool.request("GET", "/", {}, timeout=5)).body == b"ok"


async def test_a_refused_port_is_a_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        async with pool_for(port) as pool:
            with pytest.raises(Http1ConnectError, match=f"cannot connect to 127.0.0.1:{port}"):
                await pool.request("GET", "/", {})


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n", "not valid HTTP/1.1"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "closed before the answer ended"),
        (None, "closed before the answer ended"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Encoding: gzip\r\n\r\nabc",
            "cannot be decompressed",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Encoding: br\r\n\r\nabc", "did not ask for: br"),
    ],
)
async def test_what_is_not_a_whole_answer_is_an_error(answer: bytes | None, message: str) -> None:
    async with raw_server(lambda index: answer) as (port, _), pool_for(port) as pool:
        with pytest.raises(Http1Error, match=message):
            await pool.request("GET", "/", {})


def test_the_pool_works_on_uvloop_whose_transports_are_not_asyncio_s() -> None:
    """memop runs on uvloop where it is installed (``--event-loop auto``)."""
    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> tuple[list[bytes], int]:
        async def hello(request: web.Request) -> web.Response:
            return web.Response(text=f"hello {request.path}")

        async with aiohttp_server(hello) as port, pool_for(port) as pool:
            bodies = [(await pool.request("GET", f"/{i}", {})).body for i in range(3)]
            return bodies, pool.connections_opened

    bodies, opened = uvloop.run(scenario())
    assert bodies == [b"hello /0", b"hello /1", b"hello /2"]
    assert opened == 1


@pytest.fixture(scope="module")
def certificates() -> ServingCertificates:
    return ServingCertificates.generate()


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_answers_many_reads_long_arrive_whole_on_every_loop_and_transport(
    loop: str, tls: bool, certificates: ServingCertificates
) -> None:
    """A connection reads into one buffer its pool lends every connection (``READ_BYTES``)
    instead of a new ``bytes`` per read: the transports (asyncio's and uvloop's, TCP and TLS)
    fill it and say how much they wrote. Answers many buffers long must arrive whole, also
    while another connection of the pool reads into the same buffer."""
    run = asyncio.run if loop == "asyncio" else pytest.importorskip("uvloop").run
    body = bytes(range(256)) * (5 * READ_BYTES // 256 + 7)  # not a whole number of reads
    lines = [b"%d %s\n" % (n, b"x" * n) for n in range(0, 3 * READ_BYTES, 997)]

    async def answer(request: web.Request) -> web.StreamResponse:
        if request.path == "/whole":
            return web.Response(body=body)
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for line in lines:
            await response.write(line)
        await response.write_eof()
        return response

    async def scenario() -> tuple[list[bytes], bytes, int]:
        app = web.Application()
        app.router.add_get("/{tail:.*}", answer)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certificates.server_context() if tls else None)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        client_tls = ssl.create_default_context(cadata=certificates.ca_pem.decode()) if tls else None
        pool = Http1Pool("127.0.0.1", port, ssl_context=client_tls)

        async def read_stream() -> bytes:
            stream = await pool.stream("GET", "/stream", {}, timeout=10, read_timeout=10)
            try:
                return b"".join(await read_all(stream))
            finally:
                stream.close()

        async def read_wholes() -> list[bytes]:
            return [(await pool.request("GET", "/whole", {}, timeout=10)).body for _ in range(3)]

        try:
            # Two connections at once, their reads interleaved in the one buffer.
            streamed, wholes = await asyncio.gather(read_stream(), read_wholes())
            return wholes, streamed, pool.connections_opened
        finally:
            await pool.close()
            await runner.cleanup()

    wholes, streamed, opened = run(scenario())
    assert wholes == [body, body, body]
    assert streamed == b"".join(lines)
    assert opened == 2


async def test_a_request_that_waits_too_long_for_a_free_connection_times_out() -> None:
    stall = asyncio.Event()

    async def stalled(request: web.Request) -> web.Response:
        await stall.wait()
        return web.Response(text="ok")

    async with aiohttp_server(stalled) as port, pool_for(port, limit=1) as pool:
        first = asyncio.create_task(pool.request("GET", "/", {}))
        await wait_for(lambda: pool.open_connections == 1, timeout=5)
        with pytest.raises(Http1Error, match=r"no answer within 0.2 s \(waiting for a free connection\)"):
            await pool.request("GET", "/", {}, timeout=0.2)
        stall.set()
        assert (await first).body == b"ok"
        assert (await pool.request("GET", "/", {}, timeout=5)).body == b"ok"


async def read_all(stream: Http1Stream) -> list[bytes]:
    chunks = []
    while chunk := await stream.readany():
        chunks.append(chunk)
    return chunks


async def test_a_stream_is_read_as_it_arrives_and_its_connection_kept_when_read_whole() -> None:
    more = asyncio.Event()

    async def lines(request: web.Request) -> web.StreamResponse:
        if request.path != "/watch":
            return web.Response(text="ok")
        assert "Accept-Encoding" not in request.headers  # streams are never compressed
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b'{"type":"ADDED"}\n')
        await more.wait()
        await response.write(b'{"type":"MODIFIED"}\n')
        await response.write_eof()
        return response

    async with aiohttp_server(lines) as port, pool_for(port) as pool:
        stream = await pool.stream("GET", "/watch", {}, timeout=5, read_timeout=5)
        assert (stream.status, stream.headers["content-type"]) == (200, "application/json")
        assert await stream.readany() == b'{"type":"ADDED"}\n'  # before the answer ends
        more.set()
        assert b"".join(await read_all(stream)) == b'{"type":"MODIFIED"}\n'
        stream.close()
        assert pool.open_connections == 1  # kept: the answer was read whole
        assert (await pool.request("GET", "/x", {})).status == 200
        assert pool.connections_opened == 1


async def test_a_stream_closed_early_closes_its_connection_and_frees_its_slot() -> None:
    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        while True:
            await response.write(b"x" * 1000 + b"\n")
            await asyncio.sleep(0.01)

    async with aiohttp_server(endless) as port, pool_for(port, limit=1) as pool:
        stream = await pool.stream("GET", "/", {}, timeout=5, read_timeout=5)
        assert await stream.readany()
        stream.close()
        stream.close()  # idempotent
        assert pool.open_connections == 0
        again = await pool.stream("GET", "/", {}, timeout=5, read_timeout=5)  # the one slot is free
        again.close()
    assert pool.connections_opened == 2


async def test_a_silent_stream_times_out_and_a_broken_one_fails() -> None:
    done = asyncio.Event()

    async def silent(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await done.wait()
        return response

    async with aiohttp_server(silent) as port, pool_for(port) as pool:
        stream = await pool.stream("GET", "/", {}, timeout=5, read_timeout=0.2)
        with pytest.raises(Http1Error, match=r"no answer within 0.2 s \(waiting for the next byte\)"):
            await stream.readany()
        stream.close()
        done.set()

    def cut(index: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"

    async with raw_server(cut) as (port, _), pool_for(port) as pool:
        stream = await pool.stream("GET", "/", {}, timeout=5, read_timeout=5)
        assert await stream.readany() == b"hello"
        with pytest.raises(Http1Error, match="closed before the answer ended"):
            await stream.readany()
        stream.close()
        assert pool.open_connections == 0


async def test_headers_that_never_come_time_out_with_the_read_timeout() -> None:
    done = asyncio.Event()

    async def mute(request: web.Request) -> web.Response:
        await done.wait()
        return web.Response()

    async with aiohttp_server(mute) as port, pool_for(port, limit=1) as pool:
        with pytest.raises(Http1Error, match=r"no answer within 0.2 s \(waiting for the headers\)"):
            await pool.stream("GET", "/", {}, timeout=5, read_timeout=0.2)
        assert pool.open_connections == 0
        with pytest.raises(Http1Error, match="waiting for the headers"):
            await pool.stream("GET", "/", {}, timeout=5, read_timeout=0.2)  # the slot was freed
        done.set()


async def test_a_reader_behind_pauses_the_connection_until_it_reads() -> None:
    total = 3 * STREAM_BUFFER

    async def flood(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_length = total
        await response.prepare(request)
        for _ in range(total // 65536):
            await response.write(b"y" * 65536)
        return response

    async with aiohttp_server(flood) as port, pool_for(port) as pool:
        stream = await pool.stream("GET", "/", {}, timeout=5, read_timeout=5)
        await wait_for(lambda: stream._paused, timeout=5)
        assert stream._buffered <= STREAM_BUFFER + 2**18
        received = sum(len(chunk) for chunk in await read_all(stream))
        stream.close()
    assert received == total


def numbered(numbers: range) -> bytes:
    return b"".join(b'{"n":%d}\n' % n for n in numbers)


def burst_of(count: int) -> Handler:
    """A handler that writes ``count`` numbered lines one by one, then ends the answer."""

    async def burst(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for n in range(count):
            await response.write(numbered(range(n, n + 1)))
        await response.write_eof()
        return response

    return burst


def chunked(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked answer."""
    return b"%x\r\n%s\r\n" % (len(data), data)


async def read_all_releasing(stream: Http1Stream) -> list[bytes]:
    """read_all, ending each batch window at once instead of waiting for the pool's timer."""
    chunks = []
    while True:
        if stream.held:
            stream.release()
        chunk = await stream.readany()
        if not chunk:
            return chunks
        chunks.append(chunk)


async def test_a_burst_pauses_reading_for_the_batch_window_and_loses_nothing() -> None:
    second, rest = asyncio.Event(), asyncio.Event()

    async def burst(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b'{"n":1}\n')
        await second.wait()
        await response.write(b'{"n":2}\n')
        await rest.wait()
        for n in range(3, 30):
            await response.write(b'{"n":%d}\n' % n)
        await response.write_eof()
        return response

    async with aiohttp_server(burst) as port, pool_for(port) as pool:
        # A window longer than the test: only release() (the pool's timer) resumes reading.
        stream = await pool.stream("GET", "/", {}, timeout=5, read_timeout=5, batch_window=3600)
        transport = stream._connection.transport
        assert transport is not None
        assert await stream.readany() == b'{"n":1}\n'
        assert not stream.held
        assert transport.is_reading()
        second.set()
        assert await stream.readany() == b'{"n":2}\n'
        # The second within the window: the socket keeps what follows until the window ends.
        assert stream.held
        assert not transport.is_reading()
        rest.set()
        received = b"".join(await read_all_releasing(stream))
        stream.close()
        assert received == numbered(range(3, 30))
        assert pool.open_connections == 1  # read whole, so kept


async def test_the_pools_timer_ends_the_batch_window() -> None:
    async with aiohttp_server(burst_of(20)) as port, pool_for(port) as pool:
        # Nothing but the timer resumes a held stream here: a stream left paused would fail
        # with the read timeout instead of ending.
        stream = await pool.stream("GET", "/", {}, timeout=5, read_timeout=10, batch_window=0.05)
        received = b"".join(await read_all(stream))
        stream.close()
        assert received == numbered(range(20))
        assert not pool._held
        assert pool._release_timer is None


async def test_a_stream_closed_while_held_gives_back_a_connection_that_reads() -> None:
    # The whole answer in one write, so one read brings both events and the end: the second
    # event holds the stream, which is then closed with its connection still paused.
    whole = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + chunked(b'{"n":1}\n')
        + chunked(b'{"n":2}\n')
        + b"0\r\n\r\n"
    )

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(whole)
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        finally:
            writer.close()

    async with serving(serve) as port, pool_for(port) as pool:
        stream = await pool.stream("GET", "/", {}, timeout=5, read_timeout=5, batch_window=3600)
        assert b"".join(await read_all(stream)) == b'{"n":1}\n{"n":2}\n'
        assert stream.held
        stream.close()
        assert not stream.held
        assert not pool._held
        assert pool._release_timer is None
        answer = await pool.request("GET", "/again", {}, timeout=5)
        assert (answer.status, answer.body) == (200, b"ok")
        assert pool.connections_opened == 1  # the same connection, reading again


async def test_a_release_reads_all_that_waited_before_the_stream_is_held_again() -> None:
    # Far more than one transport read (at most 256 KiB) waits in the socket when the window
    # ends. Held again after one read, the stream would read one read's worth per window and
    # a busy watch would fall ever further behind its server.
    backlog = [numbered(range(n, n + 100)) for n in range(0, 20_000, 100)]  # ~250 KB
    backlog_bytes = b"".join(backlog) * 4
    second, rest, written, finish = asyncio.Event(), asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Every write waits until the kernel has it all: nothing stays in this process.
        writer.transport.set_write_buffer_limits(0)
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(b'{"n":1}\n'))
            await writer.drain()
            await second.wait()
            writer.write(chunked(b'{"n":2}\n'))
            await writer.drain()
            await rest.wait()
            for _ in range(4):
                writer.write(b"".join(chunked(lines) for lines in backlog))
            await writer.drain()
            written.set()
            await finish.wait()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        finally:
            writer.close()

    async with serving(serve) as port, pool_for(port) as pool:
        stream = await pool.stream("GET", "/", {}, timeout=5, read_timeout=5, batch_window=3600)
        assert await stream.readany() == b'{"n":1}\n'
        second.set()
        assert await stream.readany() == b'{"n":2}\n'
        assert stream.held
        rest.set()
        await asyncio.wait_for(written.wait(), timeout=10)
        stream.release()  # the window ends, once
        received = b""
        async with asyncio.timeout(10):
            while len(received) < len(backlog_bytes):
                received += await stream.readany()
        assert received == backlog_bytes
        finish.set()
        assert b"".join(await read_all_releasing(stream)) == b""
        stream.close()


async def test_a_stream_without_a_batch_window_is_never_held() -> None:
    async with aiohttp_server(burst_of(50)) as port, pool_for(port) as pool:
        stream = await pool.stream("GET", "/", {}, timeout=5, read_timeout=5)
        chunks = []
        while chunk := await stream.readany():
            assert not stream.held
            chunks.append(chunk)
        stream.close()
        assert b"".join(chunks) == numbered(range(50))
