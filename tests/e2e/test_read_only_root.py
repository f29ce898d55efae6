"""memop writes nothing at run time, as its image promises: ``--version``, ``--help`` and a run
against an HTTPS API server (a kubeconfig whose CA is inline, /metrics over HTTPS with the
self-signed certificate) work with no writable filesystem at all: every write refused
(tests/readonly_root.py), no usable temporary directory, HOME and TMPDIR paths that do not
exist. The image's Pod mounts an emptyDir on /tmp only as room for code that needs it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import CLUSTER_ROLE_BINDINGS, DEPLOYMENTS, SERVICE_ACCOUNTS
from memop.testing.envtest import Kube
from memop.testing.memcached import memcached_manifest
from memop.testing.process import MemopProcess, _flag_variables
from memop.testing.wait import wait_for
from tests.readonly_root import REFUSED

READONLY_ROOT = Path(__file__).resolve().parents[1] / "readonly_root.py"
TIMEOUT = 60


@pytest.fixture
def apiserver_options(apiserver_options: dict[str, Any]) -> dict[str, Any]:
    """conftest's server, over HTTPS: its kubeconfig carries the CA as certificate-authority-data."""
    return {**apiserver_options, "tls": True}


def read_only_environment(tmp_path: Path) -> dict[str, str]:
    """The environment of a memop with nowhere to write: TMPDIR and HOME name paths that do not
    exist (the image's HOME=/tmp on a read-only root is no better), no bytecode written."""
    missing = tmp_path / "does-not-exist"
    inherited = _flag_variables() | {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}
    environment = {k: v for k, v in os.environ.items() if k not in inherited}
    environment.update(
        TMPDIR=str(missing / "tmp"),
        TEMP=str(missing / "tmp"),
        TMP=str(missing / "tmp"),
        HOME=str(missing / "home"),
        PYTHONDONTWRITEBYTECODE="1",
        ENABLE_WEBHOOKS="false",
    )
    return environment


def refusals(output: str) -> list[str]:
    """The writes the harness refused, from the process's output."""
    return [line for line in output.splitlines() if line.startswith(REFUSED)]


class ReadOnlyMemop(MemopProcess):
    """A memop process run by tests/readonly_root.py: ``python -m memop`` with every write refused."""

    @property
    def command(self) -> list[str]:
        python, dash_m, memop, *args = super().command
        assert (dash_m, memop) == ("-m", "memop")
        return [python, str(READONLY_ROOT), *args]


def test_the_harness_refuses_writes_and_leaves_no_temporary_directory(tmp_path: Path) -> None:
    """What the tests below rely on: in the harness a write fails as on a read-only mount
    (EROFS), is reported, and tempfile finds no usable directory."""
    probe = f"""
import errno, sys, tempfile
sys.path.insert(0, {str(READONLY_ROOT.parent)!r})
import readonly_root
readonly_root.install()
try:
    open({str(tmp_path / "x")!r}, "w")
except OSError as error:
    assert error.errno == errno.EROFS
try:
    tempfile.gettempdir()
except FileNotFoundError:
    print("no temporary directory")
"""
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env=read_only_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "no temporary directory\n"
    assert refusals(result.stderr)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_version_and_help_need_no_writable_filesystem(argv: list[str], tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(READONLY_ROOT), *argv],
        env=read_only_environment(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout
    assert not refusals(result.stderr), result.stderr
    assert list(tmp_path.iterdir()) == []


async def test_a_run_over_https_with_an_inline_ca_needs_no_writable_filesystem(
    kube: Kube, client: Client, namespace: str, tmp_path: Path
) -> None:
    """memop as the image runs it outside a Pod: ready, reconciling (a Memcached's Deployment
    made), exit 0 on SIGTERM, and not one write attempted."""
    kubeconfig = tmp_path / "kubeconfig"
    kube.fake.write_kubeconfig(kubeconfig)
    assert "certificate-authority-data" in kubeconfig.read_text()
    before = sorted(tmp_path.rglob("*"))
    memop = ReadOnlyMemop(kubeconfig, ["--metrics-secure"], env=read_only_environment(tmp_path))
    await memop.start()
    try:
        await memop.wait_ready(timeout=TIMEOUT)
        await memop.wait_log(lambda r: str(r.get("msg", "")).startswith("serving metrics"), timeout=TIMEOUT)
        await client.create(MEMCACHEDS, memcached_manifest("readonly"), namespace)

        async def deployed() -> bool:
            try:
                await client.get(DEPLOYMENTS, "readonly", namespace)
            except NotFound:
                return False
            return True

        await wait_for(deployed, timeout=TIMEOUT, message=lambda: "\n".join(memop.lines[-30:]))
        memop.send(signal.SIGTERM)
        code = await memop.wait(timeout=TIMEOUT)
    finally:
        await asyncio.shield(memop.stop())
    output = "\n".join(memop.lines)
    assert code == 0, output
    assert not refusals(output), output
    assert sorted(tmp_path.rglob("*")) == before


# The in-cluster config, as a Pod has it: the service account's token and CA files, read where
# they are mounted. memop's command line reads them from the fixed kubelet path, so this runs
# load_configuration and a request in a process of its own, every write refused there too.
IN_CLUSTER_REQUEST = """
import asyncio, pathlib, sys
sys.path.insert(0, {tests!r})
import readonly_root
readonly_root.install()
from kubernetes_asyncio.client import ApiClient
from memop.runtime.client.client import Client
from memop.runtime.client.kubeconfig import load_configuration
from memop.runtime.client.resources import NAMESPACES

async def main():
    environ = {{"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": {port!r}}}
    configuration = await load_configuration(None, environ=environ, service_account_dir=pathlib.Path({sa!r}))
    async with ApiClient(configuration) as api_client:
        namespaces = await Client(api_client).list(NAMESPACES)
    print(sorted(n["metadata"]["name"] for n in namespaces["items"]))

asyncio.run(main())
"""


async def test_the_in_cluster_config_needs_no_writable_filesystem(
    kube: Kube, client: Client, namespace: str, tmp_path: Path
) -> None:
    certificates = kube.fake.certificates
    assert certificates is not None
    # A ServiceAccount that may list namespaces (view, cluster-wide), and a token of it: the
    # server authenticates it as a cluster does.
    await client.create(SERVICE_ACCOUNTS, {"metadata": {"name": "reader"}}, namespace)
    view = {
        "metadata": {"name": f"reader-{namespace}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
    }
    await client.create(CLUSTER_ROLE_BINDINGS, view)
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(kube.fake.service_account_token(namespace, "reader"))
    (sa / "ca.crt").write_bytes(certificates.ca_pem)
    (sa / "namespace").write_text(namespace)
    before = sorted(tmp_path.rglob("*"))
    port = kube.fake.url.rsplit(":", 1)[1]
    source = IN_CLUSTER_REQUEST.format(tests=str(READONLY_ROOT.parent), port=port, sa=str(sa))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        source,
        env=read_only_environment(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    assert process.returncode == 0, err.decode()
    assert namespace in out.decode()
    assert not refusals(err.decode()), err.decode()
    assert sorted(tmp_path.rglob("*")) == before
