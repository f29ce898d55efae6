"""``memop demo``: the no-cluster quickstart really runs the operator, and stops cleanly."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from memop.cli.demo import READY_LINE, SAMPLE
from memop.testing.wait import wait_for

ROOT = Path(__file__).resolve().parents[1]


def test_the_demo_sample_is_the_committed_sample() -> None:
    committed = yaml.safe_load((ROOT / "manifests/samples/cache_v1alpha1_memcached.yaml").read_text())
    assert committed == SAMPLE


async def test_demo_converges_the_sample_and_exits_0_on_ctrl_c(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "memop", "demo", "--kubeconfig", str(kubeconfig), "--pod-ready-delay", "0.2",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []

    async def read() -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            lines.append(line.decode())

    reader = asyncio.create_task(read())
    try:
        # Both Memcacheds, the v1beta1 one through memop's own conversion webhook and certificate.
        v1beta1_ready = "demo: Memcached default/memcached-sample-v1beta1 (v1beta1) is Available"
        await wait_for(
            lambda: all(any(ready in line for line in lines) for ready in (READY_LINE, v1beta1_ready)),
            timeout=60,
            message=lambda: "".join(lines),
        )
        assert any(f"kubectl --kubeconfig {kubeconfig} get memcached -w" in line for line in lines)
        assert kubeconfig.exists()
    finally:
        process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(process.wait(), 30)
        await reader
    assert code == 0
    assert lines[-1].strip() == "demo: stopped"


def test_plain_memop_without_a_cluster_is_an_error_not_the_demo(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "memop", "--metrics-bind-address", "0", "--health-probe-bind-address", "0"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "no Kubernetes configuration found" in result.stderr
    assert "demo:" not in result.stdout
