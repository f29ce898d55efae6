"""A real Prometheus scrapes a running memop, and promtool lints memop's /metrics.

Needs Debian's ``prometheus`` package (``prometheus`` and ``promtool`` on PATH); skipped with
the reason otherwise. Prometheus runs as a subprocess listening on 127.0.0.1 only (checked
from /proc), scraping memop every second, and is stopped by the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from memop import __version__
from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.testing.envtest import Kube
from memop.testing.memcached import available, memcached_manifest
from memop.testing.process import MemopProcesses, free_port
from memop.testing.wait import wait_for

TIMEOUT = 30
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def listening_addresses(pid: int) -> set[str]:
    """``ip:port`` of every TCP socket process ``pid`` listens on (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = fd.readlink().name
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = set()
    for table, width in (("tcp", 8), ("tcp6", 32)):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and inode in inodes:  # 0A: LISTEN
                    address, port = local.split(":")
                    found.add(f"{_ip(address, width)}:{int(port, 16)}")
    return found


def _ip(hex_address: str, width: int) -> str:
    raw = bytes.fromhex(hex_address)
    if width == 8:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


@contextlib.asynccontextmanager
async def prometheus(config: Path, data: Path, port: int) -> AsyncIterator[asyncio.subprocess.Process]:
    assert PROMETHEUS is not None
    process = await asyncio.create_subprocess_exec(
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                await process.wait()


@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not on PATH (Debian package 'prometheus')")
async def test_prometheus_scrapes_memop(
    kube: Kube, client: Client, namespace: str, memops: MemopProcesses, tmp_path: Path
) -> None:
    memop = await memops.start()
    await memop.wait_ready(TIMEOUT)
    target = (await memop.url("/metrics")).removeprefix("http://").removesuffix("/metrics")

    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [{"job_name": "memop", "static_configs": [{"targets": [target]}]}],
            }
        )
    )
    port = free_port()
    api = f"http://127.0.0.1:{port}/api/v1"
    async with prometheus(config, tmp_path / "data", port) as process, aiohttp.ClientSession() as http:

        async def get(path: str, **params: str) -> Any:
            if process.returncode is not None:
                assert process.stderr is not None
                raise AssertionError(
                    f"prometheus exited {process.returncode}: {await process.stderr.read()!r}"
                )
            try:
                async with http.get(f"{api}/{path}", params=params) as response:
                    if response.status != 200:
                        return None
                    body = await response.json()
            except aiohttp.ClientConnectionError:
                return None
            assert body["status"] == "success", body
            return body["data"]

        async def target_up() -> dict[str, Any] | None:
            data = await get("targets")
            for active in (data or {}).get("activeTargets", []):
                if active["labels"]["job"] == "memop" and active["health"] == "up":
                    return dict(active)
            return None

        # Prometheus publishes discovered targets at most every 5 s: work meanwhile.
        await client.create(MEMCACHEDS, memcached_manifest("scraped"), namespace)
        await wait_for(lambda: available(client, namespace, "scraped"), timeout=TIMEOUT)
        up = await wait_for(target_up, timeout=TIMEOUT)
        assert up["scrapeUrl"] == f"http://{target}/metrics"
        assert up["lastError"] == ""

        async def query(promql: str) -> list[dict[str, Any]]:
            data = await get("query", query=promql)
            return list((data or {}).get("result") or [])

        results = await wait_for(
            lambda: query('controller_runtime_reconcile_total{controller="memcached",result="success"}'),
            timeout=TIMEOUT,
        )
        assert results[0]["metric"]["job"] == "memop"
        assert float(results[0]["value"][1]) >= 1
        build = await wait_for(lambda: query("memop_build_info"), timeout=TIMEOUT)
        assert build[0]["metric"]["version"] == __version__
        assert await wait_for(lambda: query('workqueue_adds_total{name="memcached"} > 0'), timeout=TIMEOUT)
        assert await wait_for(lambda: query("process_cpu_seconds_total"), timeout=TIMEOUT)

        assert listening_addresses(process.pid) == {f"127.0.0.1:{port}"}
        assert {a.split(":")[0] for a in listening_addresses(memop.pid)} == {"127.0.0.1"}


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not on PATH (Debian package 'prometheus')")
async def test_promtool_finds_no_problem_in_memops_metrics(
    kube: Kube, client: Client, namespace: str, memops: MemopProcesses
) -> None:
    assert PROMTOOL is not None
    memop = await memops.start("--leader-elect", "--leader-election-namespace", "default")
    await memop.wait_ready(TIMEOUT)
    # Work first, so that histograms and labelled series have samples to lint.
    await client.create(MEMCACHEDS, memcached_manifest("linted"), namespace)
    await wait_for(lambda: available(client, namespace, "linted"), timeout=TIMEOUT)
    # promtool lints the Prometheus text format (the OpenMetrics one is parsed in
    # test_manager_observability.py).
    status, text = await memop.get("/metrics", Accept="text/plain")
    assert status == 200
    assert "leader_election_master_status" in text
    lint = await asyncio.create_subprocess_exec(
        PROMTOOL,
        "check",
        "metrics",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(lint.communicate(text.encode()), TIMEOUT)
    assert (lint.returncode, out.decode()) == (0, "")
