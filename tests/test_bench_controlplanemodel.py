"""bench/controlplanemodel.py: what a real control plane adds to the in-memory server in the
converge bench, a write's latency and CPU spent beside the server, checked against a server in
this process (the bench's own runs use its serve role)."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

pytestmark = pytest.mark.fake_only

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_model() -> ModuleType:
    spec = importlib.util.spec_from_file_location("controlplanemodel", BENCH / "controlplanemodel.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building the class
    spec.loader.exec_module(module)
    return module


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_each_write_waits_and_costs_cpu_beside_the_server(cluster: ClusterHandle, http: Http) -> None:
    # A read that waited like a write would take the write latency at least: 0.3 s keeps that
    # apart from a busy machine's slow read.
    model: Any = load_model().ControlPlaneModel(write_latency=0.3, cpu_per_write=0.05, processes=2)
    await model.start(cluster.fake)
    try:
        assert len(model.pids) == 2
        before = sum(cpu_seconds(pid) for pid in model.pids)
        started = time.monotonic()
        for i in range(4):
            created = await http.post(
                "/api/v1/namespaces/default/configmaps", {"metadata": {"name": f"m{i}"}}
            )
            assert created.status == 201
        # Four writes one after another, each held 0.3 s before it is committed.
        assert time.monotonic() - started >= 1.2
        # A read is not a write: neither delayed nor paid for.
        read_started = time.monotonic()
        assert (await http.get("/api/v1/namespaces/default/configmaps/m0")).status == 200
        assert time.monotonic() - read_started < 0.3
        assert model.writes() == 4
        # 4 writes x 0.05 CPU-s, spent by the load processes (the clock ticks in 10 ms).
        await wait_for(
            lambda: sum(cpu_seconds(pid) for pid in model.pids) - before >= 0.18,
            timeout=20,
            message="the load processes did not spend the writes' CPU",
        )
    finally:
        await model.stop()
    assert model.pids == []


def test_a_negative_latency_or_cpu_is_refused() -> None:
    model = load_model()
    with pytest.raises(ValueError, match="cannot be negative"):
        model.ControlPlaneModel(write_latency=-1)
    with pytest.raises(ValueError, match="cannot be negative"):
        model.ControlPlaneModel(cpu_per_write=-0.1)
