"""``bench/apiserver.py`` (the in-memory server's write rate while it feeds many watches) still
runs and reports its figures, run as a user runs it but at a tiny size. The figures are not
held to the README's targets here (they mean nothing at this size, on a loaded machine), only
checked to exist, to add up, and to show every write delivered to a watch with no errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "apiserver.py"

pytestmark = pytest.mark.fake_only


def run_bench(*args: str) -> dict[str, Any]:
    with subprocess.Popen(
        [sys.executable, str(BENCH), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its writer and watcher processes die with it on a timeout
    ) as bench:
        try:
            stdout, stderr = bench.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.communicate()
            raise
    assert bench.returncode == 0, stderr[-3000:]
    result: dict[str, Any] = json.loads(stdout)
    return result


def test_the_apiserver_benchmark_reports_writes_and_watches() -> None:
    result = run_bench("--clients=4", "--watches=6", "--namespaces=3", "--duration=1", "--warmup=0.2")
    assert result["benchmark"] == "apiserver"
    assert result["clients"] == 4
    assert result["watches_requested"] == 6
    assert result["watches_held"] == 6
    assert result["watches_receiving_events"] == 6
    assert result["write_errors"] == 0
    assert result["error_statuses"] == {}
    assert result["creates"] > 0
    assert result["merge_patches"] > 0
    assert result["writes_per_second"] > 0
    assert result["events_expected"] >= result["creates"] + result["merge_patches"]
    assert result["events_delivered"] == result["events_expected"]
    assert result["watch_failures"] == []
    assert result["latency_ms_p99"] >= result["latency_ms_p50"] > 0
    assert result["server_cpu_utilisation"] > 0
