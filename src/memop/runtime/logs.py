"""Structured logging: JSON lines (containers) or console text (humans), with reconcile context.

The controller sets the reconcile context (controller, namespace, name, reconcileID) in a
contextvar before calling a reconciler, so every log line emitted during that reconcile, at any
depth and in any library, carries it without being passed around.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TextIO

_EMPTY: Mapping[str, str] = MappingProxyType({})
_CONTEXT: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "memop_log_context", default=_EMPTY
)

# LogRecord attributes that are plumbing, not data worth printing.
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def log_context(**fields: str) -> LogContext:
    """Add ``fields`` to every log record emitted inside the block (in this task):
    ``with log_context(controller="x"): ...``."""
    return LogContext(fields)


class LogContext:
    """The context manager :func:`log_context` returns. A class rather than a generator
    (``contextlib.contextmanager``): the controller enters one per reconcile, and this takes
    half the time (0.8 against 1.8 us, timeit)."""

    __slots__ = ("_fields", "_token")

    def __init__(self, fields: Mapping[str, str]) -> None:
        self._fields = fields
        self._token: contextvars.Token[Mapping[str, str]] | None = None

    def __enter__(self) -> None:
        self._token = _CONTEXT.set({**_CONTEXT.get(), **self._fields})

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _CONTEXT.reset(self._token)
            self._token = None


def current_context() -> Mapping[str, str]:
    return _CONTEXT.get()


def _extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = dict(_CONTEXT.get())
    for key, value in record.__dict__.items():
        if key not in _RESERVED and not key.startswith("_"):
            fields[key] = value
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, the reconcile context and extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_extra_fields(record))
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class ConsoleFormatter(logging.Formatter):
    """``time LEVEL logger msg key=value ...`` for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created)) + f".{int(record.msecs):03d}"
        extras = " ".join(f"{k}={v}" for k, v in _extra_fields(record).items())
        line = f"{stamp} {record.levelname:<7} {record.name} {record.getMessage()}"
        if extras:
            line += f"  {extras}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(level: str = "info", fmt: str | None = None, stream: TextIO | None = None) -> None:
    """Route the root logger to ``stream`` (stderr) in ``fmt`` (json unless it is a terminal)."""
    stream = stream or sys.stderr
    if fmt is None:
        fmt = "console" if stream.isatty() else "json"
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else ConsoleFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log would print every probe and scrape.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
