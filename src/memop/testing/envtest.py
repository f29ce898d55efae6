"""The envtest convention: which cluster a test talks to.

With ``USE_EXISTING_CLUSTER=true`` (any case) and ``KUBECONFIG`` naming a kubeconfig, tests run
against that real cluster, as controller-runtime's envtest does in its existing-cluster mode;
otherwise against a fresh in-memory :class:`~memop.testing.apiserver.server.ApiServer` on 127.0.0.1 (a
free port), stopped afterwards. ``USE_EXISTING_CLUSTER=true`` without ``KUBECONFIG`` is an
error (:func:`existing_cluster_error`): memop never picks a cluster from ``~/.kube/config`` or a
service account by itself, since tests create and delete objects there.

:func:`cluster` is the whole convention as an async context manager, for code outside pytest
(the :mod:`memop.testing.plugin` fixture ``kube`` is built on it).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kubernetes_asyncio.client import Configuration

    from memop.testing.apiserver.server import ApiServer

USE_EXISTING_CLUSTER = "USE_EXISTING_CLUSTER"
KUBECONFIG = "KUBECONFIG"

FAKE_ONLY_REASON = (
    "needs the in-memory API server (fault injection or its test controls); USE_EXISTING_CLUSTER=true"
)


def existing_cluster_requested() -> bool:
    """Whether ``USE_EXISTING_CLUSTER`` is ``true`` (case-insensitive, as envtest reads it)."""
    return os.environ.get(USE_EXISTING_CLUSTER, "").lower() == "true"


def use_existing_cluster() -> bool:
    """Whether tests run against a real cluster: ``USE_EXISTING_CLUSTER=true`` and ``KUBECONFIG`` set."""
    return existing_cluster_requested() and bool(os.environ.get(KUBECONFIG))


def existing_cluster_error() -> str | None:
    """Why the environment asks for a real cluster that cannot be used, in one line; None when
    it asks for none, or names a kubeconfig file that exists."""
    if not existing_cluster_requested():
        return None
    kubeconfig = os.environ.get(KUBECONFIG, "")
    if not kubeconfig:
        return (
            f"{USE_EXISTING_CLUSTER}=true needs {KUBECONFIG} naming the cluster's kubeconfig "
            f"(memop does not fall back to ~/.kube/config); unset {USE_EXISTING_CLUSTER} to test on "
            "the in-memory API server"
        )
    paths = [Path(part).expanduser() for part in kubeconfig.split(os.pathsep) if part]
    if not any(path.is_file() for path in paths):
        return f"{USE_EXISTING_CLUSTER}=true: {KUBECONFIG}={kubeconfig} names no file"
    return None


@dataclass
class Kube:
    """The cluster a test talks to.

    configuration: how to connect (a kubernetes_asyncio Configuration: give it to
        ``ApiClient``, or to :class:`~memop.testing.operator.RunningOperator`).
    server: the in-memory API server (its store, request log, fault injection), or None on a
        real cluster.
    kubeconfig: a kubeconfig file for this cluster, for a process or kubectl (the in-memory
        server's is written to a temporary file that lives as long as the server); None when
        the Kube was built from a configuration alone.
    """

    configuration: Configuration
    server: ApiServer | None
    kubeconfig: Path | None = None

    @property
    def real(self) -> bool:
        """True on a real cluster (``USE_EXISTING_CLUSTER=true``)."""
        return self.server is None

    @property
    def fake(self) -> ApiServer:
        """The in-memory server; skips the test (with :data:`FAKE_ONLY_REASON`) on a real cluster."""
        if self.server is None:
            pytest.skip(FAKE_ONLY_REASON)
        return self.server


async def existing_cluster() -> Kube:
    """The real cluster ``KUBECONFIG`` names; ValueError (the one-line reason) when it cannot
    be used (see :func:`existing_cluster_error`)."""
    # Imported here: the kubeconfig loader pulls in kubernetes_asyncio.
    from memop.runtime.client.kubeconfig import KubeConfigError, load_configuration  # noqa: PLC0415

    error = existing_cluster_error()
    if error is None and not existing_cluster_requested():
        error = f"{USE_EXISTING_CLUSTER} is not true"
    if error is not None:
        raise ValueError(error)
    kubeconfig = os.environ[KUBECONFIG]
    try:
        configuration = await load_configuration(kubeconfig, origin=KUBECONFIG)
    except KubeConfigError as failure:
        raise ValueError(f"{USE_EXISTING_CLUSTER}=true: {failure}") from None
    return Kube(configuration, None, Path(kubeconfig.split(os.pathsep)[0]).expanduser())


@asynccontextmanager
async def cluster(**server_options: Any) -> AsyncIterator[Kube]:
    """The cluster of the envtest convention, for the duration of the block.

    A real one when the environment says so (``server_options`` are then ignored; ValueError
    when it cannot be used), else an in-memory :class:`~memop.testing.apiserver.server.ApiServer`
    started with ``server_options`` (its keyword arguments: ``tls``, ``simulate_controllers``,
    ``pod_ready_delay``...) and stopped, every connection closed, when the block ends.
    """
    if existing_cluster_requested():
        yield await existing_cluster()
        return
    from memop.testing.apiserver.server import ApiServer  # noqa: PLC0415 - loaded only when one is run

    async with ApiServer(**server_options) as server:
        with tempfile.TemporaryDirectory(prefix="memop-kube-") as directory:
            kubeconfig = Path(directory) / "kubeconfig"
            server.write_kubeconfig(kubeconfig)
            yield Kube(server.client_configuration(), server, kubeconfig)
