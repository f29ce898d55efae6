"""memop.runtime.logs: the format chosen by the terminal, JSON fields, reconcile context."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from memop.runtime import logs


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def emit(stream: io.StringIO, fmt: str | None, level: str = "info") -> list[str]:
    logs.configure(level, fmt, stream=stream)
    log = logging.getLogger("memop.test")
    with logs.log_context(controller="memcached", namespace="ns", name="cache", reconcileID="r-1"):
        log.info("reconciled %s", "cache", extra={"replicas": 3})
    log.debug("hidden at info")
    return stream.getvalue().splitlines()


def test_json_unless_the_stream_is_a_terminal() -> None:
    (line,) = emit(io.StringIO(), None)
    record = json.loads(line)
    assert record["level"] == "info"
    assert record["logger"] == "memop.test"
    assert record["msg"] == "reconciled cache"
    assert record["ts"].endswith("Z")
    assert (record["controller"], record["namespace"], record["name"], record["reconcileID"]) == (
        "memcached", "ns", "cache", "r-1"
    )  # fmt: skip
    assert record["replicas"] == 3


def test_console_on_a_terminal_and_either_when_asked() -> None:
    (line,) = emit(Terminal(), None)
    assert " INFO    memop.test reconciled cache  " in line
    assert line.endswith("controller=memcached namespace=ns name=cache reconcileID=r-1 replicas=3")
    (forced,) = emit(Terminal(), "json")
    assert json.loads(forced)["msg"] == "reconciled cache"
    (plain,) = emit(io.StringIO(), "console")
    assert "reconciled cache" in plain
    assert not plain.startswith("{")


def test_the_level_filters_and_the_context_ends_with_its_block() -> None:
    stream = io.StringIO()
    lines = emit(stream, "json", level="debug")
    assert [json.loads(line)["msg"] for line in lines] == ["reconciled cache", "hidden at info"]
    assert "controller" not in json.loads(lines[1])
    assert logs.current_context() == {}
