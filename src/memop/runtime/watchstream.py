"""Decoding a watch response: newline-delimited JSON events in, event dicts or typed errors out.

The API server answers a watch with a chunked stream of ``{"type": ..., "object": ...}`` lines
and ends it cleanly when ``timeoutSeconds`` runs out. This module owns the mapping from what
arrives on that stream to what the caller sees:

- ADDED / MODIFIED / DELETED / BOOKMARK lines are yielded as parsed dicts (``json.loads``,
  never the generated model classes);
- an ERROR line raises the typed error of its ``Status`` (410 → :class:`errors.Gone`);
- a line that is not a well-formed event is logged with a short excerpt and skipped: one bad
  line must not cost the caller a relist;
- a broken connection, a broken chunked encoding or a socket-read timeout raises
  :class:`errors.TransportError`;
- the clean end of the stream ends the iteration.

It never closes the response: its opener (memop.runtime.client) does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from memop.runtime.errors import TransportError, error_from_status

log = logging.getLogger("memop.client")

EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})

# One event carries one object; etcd caps objects at 1.5 MiB of protobuf, which can be a few
# times larger as JSON. Anything beyond this is not an object we could use.
MAX_EVENT_BYTES = 32 * 1024 * 1024

_EXCERPT = 200


def parse_event(line: bytes, where: str = "") -> dict[str, Any] | None:
    """The event on ``line``, or None (logged as a warning) when it is not a well-formed event.

    Blank lines are skipped silently (nothing was lost). ERROR events are returned like the
    others; :func:`read_events` turns them into exceptions.
    """
    text = line.strip()
    if not text:
        return None
    try:
        event = json.loads(text)
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


async def read_events(response: aiohttp.ClientResponse, *, path: str = "") -> AsyncIterator[dict[str, Any]]:
    """Yield the events of an open 200 watch ``response`` until the server ends the stream.

    Raises the typed error of an ERROR event, or TransportError when the stream breaks or stays
    silent longer than the response's socket-read timeout. The caller closes ``response``.
    """
    while True:
        try:
            line = await response.content.readline(max_line_length=MAX_EVENT_BYTES)
        except (aiohttp.ClientError, OSError) as error:
            # ClientPayloadError (broken chunked stream, connection reset mid-body) and
            # SocketTimeoutError (no byte for sock_read seconds) both land here.
            raise TransportError(f"watch {path} broke: {_describe(error)}") from error
        except HttpProcessingError as error:
            # LineTooLong: we cannot find the next event boundary reliably any more.
            raise TransportError(f"watch {path} sent an unreadable line: {error}") from error
        if not line:
            return
        event = parse_event(line, path)
        if event is None:
            continue
        if event["type"] == "ERROR":
            raise error_from_event(event, path=path)
        yield event


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _on(where: str) -> str:
    return f" on {where}" if where else ""
