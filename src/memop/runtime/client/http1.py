"""Keep-alive HTTP/1.1 connections to the API server for memop's requests and watches (private).

Why not aiohttp: a PATCH to a real kube-apiserver over TLS cost 1,170 µs of CPU
through a bare aiohttp session and 455 µs through this module (uvloop, same connection reuse,
same JSON decoding; httpx took 3,600 and aiosonic 1,100 and more). Three writes per Memcached
made aiohttp's request path the largest part of memop's CPU. The parsing is httptools' (llhttp,
the parser of Node.js, also uvicorn's); this module only keeps connections and frames requests.

What it does, as Go's net/http transport does for client-go:

- one request at a time per connection; idle connections are reused (the most recently used
  first), at most ``limit`` connections at once, further requests wait for one;
- a connection the server closed, or that stayed idle longer than ``idle_timeout``, is not
  reused; a response the server ends with ``Connection: close`` closes it;
- ``Accept-Encoding: gzip`` is sent (kube-apiserver compresses answers over 128 KiB: large
  lists), and gzip answers are decompressed;
- a request cancelled or timed out mid-way closes its connection (its state is unknown);
- an answer read as it arrives (:meth:`Http1Pool.stream`, a watch) holds its connection until
  closed, is never compressed, and pauses reading when its reader falls behind; with a
  ``batch_window`` it also pauses reading during a burst, so the burst is read in batches
  (see :meth:`Http1Pool.stream`).

It does not retry, except a GET on a kept-alive connection that died as it left (Go's rule):
:class:`memop.runtime.client.client.Client` decides what is safe to retry. Proxied connections
stay on aiohttp.
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import ssl
import sys
import termios
import time
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, NamedTuple, TypeVar, cast

import httptools

__all__ = ["Http1ConnectError", "Http1Error", "Http1Pool", "Http1Response", "Http1Stream"]

_T = TypeVar("_T")

# A stream's unread bytes past which its connection stops reading until the reader catches up
# (what follows waits in the kernel's socket buffers). No limit on an event's size: a line
# longer than this is read in pieces. Small, because a batch window's backlog is read whole
# at the window's end: each piece is held in memory until its events are handled.
STREAM_BUFFER = 2**18
# The most Http1Stream.readany hands out at once (more when one piece is larger), and the
# size of the buffer a pool's connections read into.
READ_BYTES = 2**16

# As Go's http.DefaultTransport (IdleConnTimeout): an idle connection older than this is closed.
DEFAULT_IDLE_TIMEOUT = 90.0


class Http1Response(NamedTuple):
    status: int
    reason: str
    # Lower-case names; a repeated header's values joined with ", " (RFC 9110 5.3).
    headers: Mapping[str, str]
    body: bytes


class Http1Error(Exception):
    """The exchange failed: the connection broke, the answer was not HTTP, or it could not be
    decoded. The request may have reached the server."""


class Http1ConnectError(Http1Error):
    """No connection could be opened: the request never reached the server."""


class _Connection(asyncio.BufferedProtocol):
    """One connection; one request at a time (HTTP/1.1 without pipelining)."""

    def __init__(self, read_buffer: memoryview) -> None:
        self.transport: asyncio.Transport | None = None
        self._read_buffer = read_buffer
        self.closed = False
        self.idle_since = time.monotonic()
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Http1Response] | None = None
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._reason = ""
        self._keep_alive = True
        self._timer: asyncio.TimerHandle | None = None
        self.answered = False  # any byte of an answer ever arrived
        self.answered_this = False  # any byte of the current request's answer
        self.reads = 0  # pieces read from the transport, ever
        # The answer being read as it arrives (a watch), instead of whole.
        self.stream: Http1Stream | None = None

    # asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; a stream's has write().
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        # The pool's one buffer, whatever the hint. A Protocol's data_received gets a new bytes
        # per read: over TLS a 256 KiB one, shrunk to what came, whose remains glibc's heap
        # kept as holes between long-lived objects. Reading here instead cost 7% less CPU and
        # 2.7 MB less peak RSS at 10,000 Memcacheds (real v1.36.2, docs/performance). One
        # buffer serves every connection: each transport (asyncio's and uvloop's, TCP and
        # TLS) fills it and calls buffer_updated before it returns, and the parser copies out
        # what it keeps.
        return self._read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.answered = self.answered_this = True
        self.reads += 1
        try:
            self._parser.feed_data(self._read_buffer[:nbytes])
        except httptools.HttpParserError as error:
            self._fail(Http1Error(f"the answer is not valid HTTP/1.1: {error}"))
            self.close()

    def eof_received(self) -> bool:
        # The server closed its side: this connection cannot carry another request.
        self.closed = True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(Http1Error(f"the connection was closed before the answer ended{_because(exc)}"))

    # httptools' callbacks -----------------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self._reason += status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        previous = self._headers.get(key)
        self._headers[key] = text if previous is None else f"{previous}, {text}"

    def on_headers_complete(self) -> None:
        if self.stream is not None:
            headers, self._headers = self._headers, {}
            reason, self._reason = self._reason, ""
            self.stream.on_head(self._parser.get_status_code(), reason, headers)

    def on_body(self, body: bytes) -> None:
        if self.stream is not None:
            self.stream.on_body(body)
        else:
            self._body.append(body)

    def on_message_complete(self) -> None:
        self._stop_timer()
        self._keep_alive = self._parser.should_keep_alive()
        if self.stream is not None:
            self.stream.on_end()
            return
        waiter, self._waiter = self._waiter, None
        headers, self._headers = self._headers, {}
        body = b"".join(self._body)
        self._body = []
        reason, self._reason = self._reason, ""
        if waiter is None or waiter.done():
            # An answer nobody asked for (a 408 before the server closes an idle connection).
            self.close()
            return
        try:
            body = _decoded(body, headers.get("content-encoding"))
        except Http1Error as error:
            waiter.set_exception(error)
            self.close()
            return
        waiter.set_result(Http1Response(self._parser.get_status_code(), reason, headers, body))

    # ours ----------------------------------------------------------------------------------

    @property
    def reusable(self) -> bool:
        return not self.closed and self._keep_alive and self._waiter is None and self.stream is None

    def start_stream(self, head: bytes, stream: Http1Stream) -> None:
        assert self.transport is not None
        self.stream = stream
        self.answered_this = False
        self.transport.write(head)

    def send(
        self, head: bytes, body: bytes | None, deadline: float | None, timeout: float | None
    ) -> asyncio.Future[Http1Response]:
        """Write the request; the future is the answer, or Http1Error once ``deadline`` (the
        loop's time) has passed without it."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        self.answered_this = False
        if deadline is not None:
            self._timer = loop.call_at(deadline, self._expire, timeout)
        self.transport.write(head + body if body else head)
        return self._waiter

    def _expire(self, timeout: float | None) -> None:
        self._timer = None
        self._fail(Http1Error(f"no answer within {timeout or 0:g} s (waiting for the answer)"))
        self.close()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, error: Http1Error) -> None:
        self._stop_timer()
        if self.stream is not None:
            self.stream.on_error(error)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)


class Http1Pool:
    """Connections to one server (``host``:``port``, TLS with ``ssl_context`` unless None)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        limit: int = 100,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self._server_hostname = server_hostname
        self._idle_timeout = idle_timeout
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._slots = asyncio.Semaphore(limit)
        self._closed = False
        # The Host header: the authority as the URL names it (IPv6 in brackets).
        authority = f"[{host}]" if ":" in host else host
        self._host_header = f"Host: {authority}:{port}\r\n"
        self.connections_opened = 0
        # Streams whose reading pauses until their batch window ends (loop time), and the one
        # timer that resumes them: one wakeup for all the streams whose windows end together.
        self._held: dict[Http1Stream, float] = {}
        self._release_timer: asyncio.TimerHandle | None = None
        # What every connection reads into (_Connection.get_buffer): a pool lives on one loop.
        self._read_buffer = memoryview(bytearray(READ_BYTES))

    @property
    def open_connections(self) -> int:
        return len(self._idle) + len(self._busy)

    async def request(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        *,
        timeout: float | None = None,
    ) -> Http1Response:
        """Send one request (``target``: the path and query, already encoded) and return the
        whole answer, any status, within ``timeout`` seconds (None: no limit). Cancelled or
        timed out, its connection is closed."""
        if self._closed:
            raise Http1ConnectError("the connection pool is closed")
        head = self._head(method, target, headers, body)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        await self._acquire(deadline, timeout)
        try:
            return await self._on_a_connection(
                method,
                deadline,
                timeout,
                lambda connection: self._exchange(connection, head, body, deadline, timeout),
            )
        finally:
            self._slots.release()

    async def stream(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        read_timeout: float,
        batch_window: float = 0.0,
    ) -> Http1Stream:
        """Send a request whose answer is read as it arrives (a watch): returns once its status
        and headers are in (within ``timeout`` to connect, ``read_timeout`` for the headers);
        then :meth:`Http1Stream.readany` reads it, waiting at most ``read_timeout`` for each
        byte. The stream holds its connection until :meth:`Http1Stream.close`.

        ``batch_window`` (seconds, 0: off): when a piece of the answer arrives within that
        time of the previous one, the stream is in a burst: its connection stops reading for
        ``batch_window``, and what the server sent meanwhile waits in the socket, to be read
        and handed over at once: all of it, before the stream can be held again (a busy
        stream never falls behind). An answer that trickles in is read as it arrives; a burst
        is handed over once per window instead of an event at a time. Measured on a real
        kube-apiserver (docs/performance/watch-batching.md): handling the events of a burst
        in batches costs memop less CPU per event than handling each as it arrives."""
        if self._closed:
            raise Http1ConnectError("the connection pool is closed")
        head = self._head(method, target, headers, None, gzip=False)
        deadline = asyncio.get_running_loop().time() + timeout
        await self._acquire(deadline, timeout)
        try:
            return await self._on_a_connection(
                method,
                deadline,
                timeout,
                lambda connection: self._start_stream(connection, head, read_timeout, batch_window),
            )
        except BaseException:
            self._slots.release()
            raise

    def _hold(self, stream: Http1Stream, window: float) -> None:
        """Resume ``stream``'s reading once ``window`` seconds have passed."""
        loop = asyncio.get_running_loop()
        due = loop.time() + window
        self._held[stream] = due
        if self._release_timer is None or self._release_timer.when() > due:
            if self._release_timer is not None:
                self._release_timer.cancel()
            self._release_timer = loop.call_at(due, self._release_due)

    def _unhold(self, stream: Http1Stream) -> None:
        self._held.pop(stream, None)
        if not self._held and self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None

    def _release_due(self) -> None:
        """The timer: resume the streams whose window has ended, and wait for the next one."""
        self._release_timer = None
        now = asyncio.get_running_loop().time()
        due = [stream for stream, at in self._held.items() if at <= now]
        for stream in due:
            del self._held[stream]
            stream.release()
        if self._held:
            self._release_timer = asyncio.get_running_loop().call_at(
                min(self._held.values()), self._release_due
            )

    async def _acquire(self, deadline: float | None, timeout: float | None) -> None:
        """Take a slot (one of ``limit`` connections). asyncio.timeout only around what may
        wait (a free slot, a new connection): around every request it cost 2% of memop's CPU;
        the wait for an answer has its connection's timer."""
        if self._slots.locked():
            await self._bounded(self._slots.acquire(), deadline, timeout, "waiting for a free connection")
        else:
            await self._slots.acquire()

    async def _on_a_connection(
        self,
        method: str,
        deadline: float | None,
        timeout: float | None,
        use: Callable[[_Connection], Awaitable[_T]],
    ) -> _T:
        """``use`` a kept-alive connection, or a new one."""
        connection = self._reusable()
        if connection is None:
            connection = await self._bounded(self._connect(), deadline, timeout, "connecting")
        reused = connection.answered
        try:
            return await use(connection)
        except Http1Error:
            # A kept-alive connection the server closed just as we sent: as Go's transport,
            # send again on a new one only what is safe to repeat (a GET: no body).
            if not (reused and method == "GET" and not connection.answered_this):
                raise
        connection = await self._bounded(self._connect(), deadline, timeout, "connecting")
        return await use(connection)

    async def _start_stream(
        self, connection: _Connection, head: bytes, read_timeout: float, batch_window: float
    ) -> Http1Stream:
        stream = Http1Stream(self, connection, read_timeout, batch_window)
        self._busy.add(connection)
        connection.start_stream(head, stream)
        try:
            await stream.wait_for_head()
        except BaseException:
            self._busy.discard(connection)
            connection.stream = None
            connection.close()
            raise
        return stream

    def _end_stream(self, connection: _Connection, *, whole: bool) -> None:
        """A stream is done with its connection: kept if its answer was read whole."""
        self._busy.discard(connection)
        connection.stream = None
        if whole and connection.reusable and not self._closed:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
        else:
            connection.close()
        self._slots.release()

    @staticmethod
    async def _bounded(
        step: Coroutine[Any, Any, _T], deadline: float | None, timeout: float | None, stage: str
    ) -> _T:
        if deadline is None:
            return await step
        try:
            async with asyncio.timeout_at(deadline):
                return await step
        except TimeoutError:
            message = f"no answer within {timeout:g} s ({stage})"
            raise (Http1ConnectError if stage == "connecting" else Http1Error)(message) from None

    async def close(self) -> None:
        """Close every connection; requests under way fail."""
        self._closed = True
        if self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None
        self._held.clear()
        for connection in [*self._idle, *self._busy]:
            connection.close()
        self._idle.clear()
        # Let the transports run their connection_lost before the loop may close.
        await asyncio.sleep(0)

    async def _exchange(
        self,
        connection: _Connection,
        head: bytes,
        body: bytes | None,
        deadline: float | None,
        timeout: float | None,
    ) -> Http1Response:
        self._busy.add(connection)
        try:
            response = await connection.send(head, body, deadline, timeout)
        except BaseException:
            connection.close()
            raise
        finally:
            self._busy.discard(connection)
        if connection.reusable and not self._closed:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
        else:
            connection.close()
        return response

    def _head(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None, *, gzip: bool = True
    ) -> bytes:
        lines = [f"{method} {target} HTTP/1.1\r\n", self._host_header]
        lines.extend(f"{name}: {value}\r\n" for name, value in headers.items())
        if body is not None:
            lines.append(f"Content-Length: {len(body)}\r\n")
        # A stream is never compressed (kube-apiserver does not compress watches).
        lines.append("Accept-Encoding: gzip\r\n\r\n" if gzip else "\r\n")
        return "".join(lines).encode("latin-1")

    def _reusable(self) -> _Connection | None:
        """The most recently used idle connection still fit for a request, if any."""
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable and now - connection.idle_since < self._idle_timeout:
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await loop.create_connection(
                lambda: _Connection(self._read_buffer),
                self.host,
                self.port,
                ssl=self._ssl,
                server_hostname=(self._server_hostname or self.host) if self._ssl is not None else None,
            )
        except (OSError, ssl.SSLError) as error:
            raise Http1ConnectError(f"cannot connect to {self.host}:{self.port}: {error}") from error
        self.connections_opened += 1
        return protocol


class Http1Stream:
    """An answer read as it arrives; from :meth:`Http1Pool.stream`."""

    def __init__(
        self, pool: Http1Pool, connection: _Connection, read_timeout: float, batch_window: float = 0.0
    ) -> None:
        self.status = 0
        self.reason = ""
        self.headers: Mapping[str, str] = {}
        self._pool = pool
        self._connection = connection
        self._read_timeout = read_timeout
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._paused = False
        self._eof = False
        self._error: Http1Error | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._closed = False
        self._batch_window = batch_window
        # When the last piece of the answer arrived (loop time), and whether reading is paused
        # until the pool's timer resumes it (see Http1Pool.stream's batch_window).
        self._last_arrival = float("-inf")
        self.held = False
        # Whether the socket had unread bytes, as found after the connection's read number
        # _backlog_read (see _backlog).
        self._backlog_read = -1
        self._backlog_seen = False

    # from the connection --------------------------------------------------------------------

    def on_head(self, status: int, reason: str, headers: Mapping[str, str]) -> None:
        self.status, self.reason, self.headers = status, reason, headers
        if headers.get("content-encoding", "identity") != "identity":
            self.on_error(Http1Error(f"the stream has a Content-Encoding: {headers['content-encoding']}"))
            self._connection.close()
            return
        self._wake()

    def on_body(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        transport = self._connection.transport
        if self._buffered > STREAM_BUFFER and not self._paused and transport is not None:
            # The reader is behind: let TCP hold the rest, as aiohttp's read buffer does.
            self._paused = True
            if not self.held:
                transport.pause_reading()
        if self._batch_window > 0:
            now = asyncio.get_running_loop().time()
            if (
                not self.held
                and transport is not None
                and now - self._last_arrival < self._batch_window
                and not self._backlog(transport)
            ):
                # A burst: what follows waits in the socket until the window ends.
                self.held = True
                if not self._paused:
                    transport.pause_reading()
                self._pool._hold(self, self._batch_window)
            self._last_arrival = now
        self._wake()

    def _backlog(self, transport: asyncio.Transport) -> bool:
        """Whether the socket holds bytes not read yet: what waited during a window is read
        whole before the stream is held again. Holding it again after one transport read would
        let it read one read's worth per window, and a busy watch would fall ever further
        behind its server. Asked once per transport read."""
        reads = self._connection.reads
        if reads != self._backlog_read:
            self._backlog_read = reads
            self._backlog_seen = _unread_bytes(transport) > 0
        return self._backlog_seen

    def release(self) -> None:
        """The batch window ended (the pool's timer): read what arrived meanwhile."""
        if not self.held:
            return
        self.held = False
        transport = self._connection.transport
        if not self._paused and not self._closed and transport is not None and not transport.is_closing():
            transport.resume_reading()

    def on_end(self) -> None:
        self._eof = True
        self._wake()

    def on_error(self, error: Http1Error) -> None:
        if not self._eof and self._error is None:
            self._error = error
        self._wake()

    # the reader's -----------------------------------------------------------------------------

    async def wait_for_head(self) -> None:
        while not self.status:
            if self._error is not None:
                raise self._error
            await self._wait("the headers")

    async def readany(self) -> bytes:
        """What has arrived since the last call (waiting for something if nothing has); b""
        once the answer has ended. Http1Error if it broke or stayed silent ``read_timeout``."""
        while not self._chunks:
            if self._eof:
                return b""
            if self._error is not None:
                raise self._error
            await self._wait("the next byte")
        chunks = self._chunks
        if len(chunks) == 1:
            data = chunks.popleft()
        else:
            # What arrived, up to READ_BYTES: a batch window's backlog handed out in one piece
            # would be held twice over (this join, then its lines) while it is handled.
            taken: list[bytes] = []
            size = 0
            while chunks and size < READ_BYTES:
                piece = chunks.popleft()
                taken.append(piece)
                size += len(piece)
            data = b"".join(taken)
        self._buffered -= len(data)
        if self._paused and self._buffered <= STREAM_BUFFER // 2 and self._connection.transport is not None:
            self._paused = False
            if not self.held:
                self._connection.transport.resume_reading()
        return data

    def close(self) -> None:
        """Give the connection back: kept for another request if the answer was read whole,
        closed otherwise. Idempotent."""
        if self._closed:
            return
        if self.held:
            # Before the connection may serve another request, which must be read.
            self._pool._unhold(self)
            self.release()
        self._closed = True
        whole = self._eof and not self._chunks and self._error is None
        self._pool._end_stream(self._connection, whole=whole)

    async def _wait(self, what: str) -> None:
        loop = asyncio.get_running_loop()
        self._wakeup = waiter = loop.create_future()
        timer = loop.call_later(self._read_timeout, self._time_out, waiter, what)
        try:
            await waiter
        finally:
            timer.cancel()
            self._wakeup = None

    def _time_out(self, waiter: asyncio.Future[None], what: str) -> None:
        if not waiter.done():
            waiter.set_exception(
                Http1Error(f"no answer within {self._read_timeout:g} s (waiting for {what})")
            )

    def _wake(self) -> None:
        waiter = self._wakeup
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _unread_bytes(transport: asyncio.BaseTransport) -> int:
    """How many bytes wait in ``transport``'s socket, not read yet (FIONREAD); 0 when that
    cannot be told (no socket, a platform without the call)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        answer = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except (OSError, ValueError):
        return 0
    return int.from_bytes(answer, sys.byteorder, signed=True)


def _decoded(body: bytes, encoding: str | None) -> bytes:
    if not encoding or encoding == "identity" or not body:
        return body
    try:
        if encoding == "gzip":
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            return zlib.decompress(body)
    except zlib.error as error:
        raise Http1Error(f"the {encoding} answer cannot be decompressed: {error}") from error
    raise Http1Error(f"the answer has a Content-Encoding memop did not ask for: {encoding}")


def _because(exc: Exception | None) -> str:
    return f": {exc}" if exc is not None else ""
