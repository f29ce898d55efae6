"""Fixtures for end-to-end tests of the operator: a cluster with controllers, the CRD, memop.

Against the in-memory API server the cluster simulates kube-controller-manager and kubelets
(garbage collection, Deployment → ReplicaSet → Pod, pods turning Ready). With
USE_EXISTING_CLUSTER=true and KUBECONFIG the same tests run against that cluster.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration

from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import NAMESPACES
from memop.testing.envtest import Kube, use_existing_cluster
from memop.testing.operator import RunningOperator, install_crd, release_memcacheds
from memop.testing.process import MemopProcesses
from memop.testing.server import ApiServer


@pytest.fixture
async def kube() -> AsyncIterator[Kube]:
    if use_existing_cluster():
        configuration = Configuration()
        await config.load_kube_config(
            config_file=os.environ["KUBECONFIG"], client_configuration=configuration
        )
        yield Kube(configuration, None)
        return
    async with ApiServer(simulate_controllers=True, pod_ready_delay=0.05) as server:
        yield Kube(server.client_configuration(), server)


@pytest.fixture
async def client(kube: Kube) -> AsyncIterator[Client]:
    """The test's own client (user agent e2e-test, so the request log tells it from memop)."""
    async with ApiClient(kube.configuration) as api:
        client = Client(api, user_agent="e2e-test")
        await install_crd(client)
        yield client


@pytest.fixture
async def namespace(kube: Kube, client: Client) -> AsyncIterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    await client.create(NAMESPACES, {"metadata": {"name": name}})
    yield name
    if kube.server is None:
        await release_memcacheds(client, name)
        with contextlib.suppress(NotFound):
            await client.delete(NAMESPACES, name)


@pytest.fixture
async def operator(kube: Kube, client: Client, namespace: str) -> AsyncIterator[RunningOperator]:
    """memop running in-process, watching the test's namespace."""
    running = RunningOperator(kube.configuration, namespaces=[namespace])
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
async def memops(kube: Kube, tmp_path: Path) -> AsyncIterator[MemopProcesses]:
    """memop processes against the in-memory server (skipped on a real cluster), stopped after."""
    path = tmp_path / "kubeconfig"
    kube.fake.write_kubeconfig(path)
    group = MemopProcesses(path)
    yield group
    await group.stop()
