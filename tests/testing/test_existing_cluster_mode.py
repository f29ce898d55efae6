"""The server's tests really are written to run against an existing cluster.

With ``USE_EXISTING_CLUSTER=true`` and ``KUBECONFIG`` the ``cluster`` fixture talks to whatever
the kubeconfig names, knowing nothing of the fake. Here that "existing cluster" is
``python -m memop.testing serve --simulate-controllers`` in another process: a cluster with
controllers that write status and collect garbage behind the tests' backs, reached only
through a kubeconfig. The tests must pass there unchanged, and only the ones needing the
fake's controls (fault injection, compaction, restart) may be skipped, with a reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memop.testing.process import serving

ROOT = Path(__file__).resolve().parents[2]
SUITES = [
    "tests/testing/test_apiserver_objects.py",
    "tests/testing/test_apiserver_patch.py",
    "tests/testing/test_apiserver_list.py",
    "tests/testing/test_apiserver_watch.py",
    "tests/testing/test_apiserver_crd.py",
    "tests/testing/test_apiserver_faults.py",
]

pytestmark = pytest.mark.fake_only


@pytest.fixture
def served_cluster(tmp_path: Path) -> Iterator[Path]:
    with serving(tmp_path / "kubeconfig", "--simulate-controllers") as server:
        yield server.kubeconfig


def test_the_server_tests_pass_against_an_existing_cluster(served_cluster: Path) -> None:
    env = {**os.environ, "USE_EXISTING_CLUSTER": "true", "KUBECONFIG": str(served_cluster)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *SUITES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    summary = re.search(r"(\d+) passed, (\d+) skipped", output)
    assert summary is not None, output[-2000:]
    passed, skipped = int(summary[1]), int(summary[2])
    assert passed >= 60, output[-2000:]
    # Every skip is a fake-only test, for that reason; the fault-injection module is all skipped.
    skips = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert skips
    assert all("needs the in-memory API server" in line for line in skips), skips
    assert any("test_apiserver_faults.py" in line for line in skips)
    assert skipped < passed
