"""``python -m memop.testing serve`` as a real process, driven by kubectl."""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from memop.testing.process import ApiServerProcess, free_port, serving

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
"""


def widget(name: str, size: int) -> str:
    return f"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n  size: {size}\n"


def read_line_containing(proc: subprocess.Popen[str], needle: str, timeout: float) -> str:
    """The first line ``proc`` prints that contains ``needle``, read with a deadline."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not sel.select(left):
                break
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if needle in line:
                return line
    raise AssertionError(f"no line containing {needle!r} within {timeout} s; got {seen!r}")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ApiServerProcess]:
    with serving(tmp_path / "kubeconfig", "--simulate-controllers") as server:
        yield server


def test_serve_help_lists_the_options() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memop.testing", "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in (
        "--kubeconfig",
        "--port",
        "--simulate-controllers",
        "--pod-ready-delay",
        "--bookmark-interval",
        "--history-size",
    ):
        assert flag in out


def test_serve_requires_a_kubeconfig_path() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memop.testing", "serve"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert "--kubeconfig" in result.stderr


def test_sigint_stops_the_server_cleanly(served: ApiServerProcess) -> None:
    assert "current-context" in served.kubeconfig.read_text()
    assert served.process is not None
    served.process.send_signal(signal.SIGINT)
    assert served.process.wait(timeout=20) == 0


def test_serve_listens_on_the_port_asked_for(tmp_path: Path) -> None:
    port = free_port()  # a port that was free a moment ago
    with serving(tmp_path / "kubeconfig", "--port", str(port)) as served:
        assert f"listening on http://127.0.0.1:{port}, kubeconfig {served.kubeconfig}" in served.banner
        server = yaml.safe_load(served.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert server == f"http://127.0.0.1:{port}"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert conn.recv(12) == b"HTTP/1.1 200"
        assert served.process is not None
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=20) == 0


@pytest.mark.parametrize("to_file", [False, True], ids=["output-kept-aside", "output-to-file"])
def test_a_server_that_does_not_start_fails_with_its_output(tmp_path: Path, to_file: bool) -> None:
    log = tmp_path / "server.log" if to_file else None
    with (
        pytest.raises(RuntimeError, match="exited with status 2") as failure,
        serving(tmp_path / "kubeconfig", "--pod-ready-delay", "-1", output=log),
    ):
        pytest.fail("the server started")
    assert "--pod-ready-delay must not be negative" in str(failure.value)
    assert not (tmp_path / "kubeconfig").exists()
    if log is not None:
        assert "--pod-ready-delay must not be negative" in log.read_text()


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kubectl_drives_the_served_api(served: ApiServerProcess, tmp_path: Path) -> None:
    kubeconfig = served.kubeconfig
    assert served.url.startswith("http://127.0.0.1:")
    assert served.banner.endswith(f"kubeconfig {kubeconfig}")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}

    def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60, check=check
        )

    kubectl("apply", "-f", "-", stdin=CRD)
    kubectl("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=30s")
    kubectl("apply", "-f", "-", stdin=widget("first", 1))
    assert kubectl("get", "widget", "first", "-o", "jsonpath={.spec.size}").stdout == "1"

    watcher = subprocess.Popen(
        ["kubectl", "get", "widgets", "-w", "-o", "name"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        read_line_containing(watcher, "widget.example.com/first", timeout=30)
        kubectl("apply", "-f", "-", stdin=widget("second", 2))
        read_line_containing(watcher, "widget.example.com/second", timeout=30)
    finally:
        watcher.terminate()
        watcher.communicate(timeout=10)

    kubectl("delete", "widget", "first")
    missing = kubectl("get", "widget", "first", check=False)
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr

    assert served.process is not None
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=20) == 0
