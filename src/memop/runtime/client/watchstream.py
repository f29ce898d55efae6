"""Decoding a watch response: newline-delimited JSON events in, event dicts or typed errors out.

The API server answers a watch with a chunked stream of ``{"type": ..., "object": ...}`` lines
and ends it cleanly when ``timeoutSeconds`` runs out. This module owns the mapping from what
arrives on that stream to what the caller sees:

- ADDED / MODIFIED / DELETED / BOOKMARK lines are yielded as parsed dicts (JSON decoded by
  :mod:`memop.runtime.util.jsoncodec`,
  never the generated model classes), in batches of what arrived together
  (:func:`read_event_batches`; ``Client.watch`` hands them out one at a time);
- an ERROR line raises the typed error of its ``Status`` (410 → :class:`errors.Gone`);
- a line that is not a well-formed event is logged with a short excerpt and skipped: one bad
  line must not cost the caller a relist;
- a broken connection, a broken chunked encoding or a socket-read timeout raises
  :class:`errors.TransportError`;
- the clean end of the stream ends the iteration.

It never closes the response: its opener (memop.runtime.client.client) does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import aiohttp

from memop.runtime.client.errors import TransportError, error_from_status
from memop.runtime.client.http1 import Http1Error
from memop.runtime.util import jsoncodec

log = logging.getLogger("memop.client")

EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})

# One event carries one object; etcd caps objects at 1.5 MiB of protobuf, which can be a few
# times larger as JSON. Anything beyond this is not an object we could use.
MAX_EVENT_BYTES = 32 * 1024 * 1024

_EXCERPT = 200


def parse_event(line: bytes, where: str = "") -> dict[str, Any] | None:
    """The event on ``line``, or None (logged as a warning) when it is not a well-formed event.

    Blank lines are skipped silently (nothing was lost). ERROR events are returned like the
    others; :class:`EventLines` turns them into exceptions.
    """
    text = line.strip()
    if not text:
        return None
    try:
        event = jsoncodec.loads(text)
    except ValueError as error:
        log.warning("skipping a malformed watch line%s (%s): %.*r", _on(where), error, _EXCERPT, text)
        return None
    if not isinstance(event, dict):
        log.warning("skipping a watch line that is not an event%s: %.*r", _on(where), _EXCERPT, text)
        return None
    kind = event.get("type")
    if kind not in EVENT_TYPES or not isinstance(event.get("object"), dict):
        log.warning(
            "skipping a watch event with no known type or no object%s: %.*r", _on(where), _EXCERPT, text
        )
        return None
    return event


def error_from_event(event: dict[str, Any], *, path: str = "") -> Exception:
    """The typed error an ERROR event's ``Status`` object stands for."""
    status = event["object"]
    code = status.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or code < 400:
        # A Status without a usable code is still a failure of the server's, not a success.
        code = 500
    return error_from_status(code, status, method="WATCH", path=path)


class EventLines:
    """Complete watch lines that arrived together; iterating parses them one at a time.

    Iterating yields the well-formed events in order, skips (and logs) malformed lines, and
    raises the typed error of an ERROR event when it gets to it. Parsing lazily matters: a
    backlog can bring thousands of lines in one read, and parsing them all before using any
    would keep every parsed object alive at once, which costs the garbage collector more than
    the parsing itself.
    """

    __slots__ = ("_lines", "_path")

    def __init__(self, lines: list[bytes], path: str = "") -> None:
        self._lines = lines
        self._path = path

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.events()

    def events(self, known: Callable[[memoryview], bool] | None = None) -> Iterator[dict[str, Any]]:
        """The events, as iterating gives them; with ``known``, the ADDED and MODIFIED lines
        whose object's JSON (as a view of the line's bytes, not decoded) ``known`` says its
        caller holds already are skipped without being decoded. ``known`` must only say so of
        bytes it has seen whole (an exact digest of them, say): a line it claims is lost."""
        for line in self._lines:
            if len(line) > MAX_EVENT_BYTES:
                raise _too_long(self._path)
            if known is not None and (start := _object_start(line)) and known(memoryview(line)[start:-1]):
                continue
            event = parse_event(line, self._path)
            if event is None:
                continue
            if event["type"] == "ERROR":
                raise error_from_event(event, path=self._path)
            yield event


async def read_event_batches(
    readany: Callable[[], Awaitable[bytes]], *, path: str = ""
) -> AsyncIterator[EventLines]:
    """Yield the lines of an open 200 watch answer as :class:`EventLines`: every complete line
    that has arrived when the caller asks again, until the server ends the stream. ``readany``
    reads what has arrived (``b""`` at the end): an
    :class:`~memop.runtime.client.http1.Http1Stream`'s, or an aiohttp response's
    ``content.readany``.

    Batches because a busy stream brings many events per read: handing over what is there in
    one piece costs one trip through the async generators per read instead of one per event.
    The caller iterates each batch before asking for the next.

    Raises TransportError when the stream breaks, stays silent longer than the response's
    socket-read timeout, or sends a line longer than :data:`MAX_EVENT_BYTES` (iterating a
    batch raises the error of an ERROR event). The caller closes the answer.
    """
    pending: list[bytes] = []  # the start of a line whose end has not arrived yet
    pending_size = 0
    while True:
        try:
            chunk = await readany()
        except (aiohttp.ClientError, OSError, Http1Error) as error:
            # A broken chunked stream, a connection reset mid-body, no byte for the read
            # timeout: aiohttp's ClientPayloadError and SocketTimeoutError, or Http1Error.
            raise TransportError(f"watch {path} broke: {_describe(error)}") from error
        if not chunk:
            if pending:
                # The stream ended inside a line: whatever it is, parse_event judges it.
                yield EventLines([b"".join(pending)], path)
            return
        # One split, no copy of the complete lines first: a batch's bytes are held once more,
        # not twice, while its events are handled.
        lines = chunk.split(b"\n")
        rest = lines.pop()  # what follows the last newline: the start of the next line
        if not lines:
            pending.append(rest)
            pending_size += len(rest)
            if pending_size > MAX_EVENT_BYTES:
                raise _too_long(path)
            continue
        if pending:
            pending.append(lines[0])
            lines[0] = b"".join(pending)
        pending = [rest] if rest else []
        pending_size = len(rest)
        yield EventLines(lines, path)
        if pending_size > MAX_EVENT_BYTES:
            raise _too_long(path)


# How the API server writes an added or modified object's event: these bytes, the object's
# JSON, "}" (Go's encoding of metav1.WatchEvent; the line ends there).
_ADDED_PREFIX = b'{"type":"ADDED","object":'
_MODIFIED_PREFIX = b'{"type":"MODIFIED","object":'


def _object_start(line: bytes) -> int:
    """Where the object's JSON starts in an ADDED or MODIFIED event line written as the API
    server writes it (its end is the line's last byte but one); 0 for any other line."""
    if not line.endswith(b"}"):
        return 0
    if line.startswith(_MODIFIED_PREFIX):
        return len(_MODIFIED_PREFIX)
    if line.startswith(_ADDED_PREFIX):
        return len(_ADDED_PREFIX)
    return 0


def _too_long(path: str) -> TransportError:
    # Past this we cannot find the next event boundary reliably any more.
    return TransportError(f"watch {path} sent an unreadable line: longer than {MAX_EVENT_BYTES} bytes")


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _on(where: str) -> str:
    return f" on {where}" if where else ""
