"""Fixtures for end-to-end tests of memop's operators, on memop's pytest plugin.

The plugin (:mod:`memop.testing.plugin`) gives ``kube``, ``client``, ``namespace``,
``install_crds`` and ``run_operator``. Here the in-memory cluster simulates
kube-controller-manager and kubelets (garbage collection, Deployment → ReplicaSet → Pod, pods
turning Ready after 50 ms), plain HTTP; the client comes with memop's CRDs installed (whose
objects' finalizers the plugin drops before deleting the namespace); ``operator`` is the
Memcached controller watching the test's namespace; ``memops`` starts memop processes. With
USE_EXISTING_CLUSTER=true and KUBECONFIG the same tests run against that cluster.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memop import memcached
from memop.builtin import PROJECT
from memop.runtime.client.client import Client
from memop.testing.envtest import Kube
from memop.testing.operator import RunningOperator
from memop.testing.plugin import InstallCrds, RunOperator
from memop.testing.process import MemopProcesses


@pytest.fixture
def apiserver_options() -> dict[str, Any]:
    return {"simulate_controllers": True, "pod_ready_delay": 0.05}


@pytest.fixture
async def client(client: Client, install_crds: InstallCrds) -> Client:
    """The plugin's client, once memop's CRDs (all three controllers') are Established."""
    await install_crds(PROJECT)
    return client


@pytest.fixture
async def operator(
    run_operator: RunOperator, client: Client, namespace: str
) -> AsyncIterator[RunningOperator]:
    """memop's Memcached controller running in-process, watching the test's namespace, as its
    ServiceAccount with the RBAC its manifests grant there (a request they do not grant fails
    with the API server's 403)."""
    async with run_operator(memcached.DEFINITION, namespaces=[namespace], rbac=True) as running:
        yield running


@pytest.fixture
async def memops(kube: Kube, tmp_path: Path) -> AsyncIterator[MemopProcesses]:
    """memop processes against the in-memory server (skipped on a real cluster), stopped after."""
    path = tmp_path / "kubeconfig"
    kube.fake.write_kubeconfig(path)
    group = MemopProcesses(path)
    yield group
    await group.stop()
