"""The in-memory server over HTTPS, as every cluster serves: memop's Client, kubernetes_asyncio's
kubeconfig loader and kubectl all trust it through the CA in its kubeconfig, the certificate
outlives restarts, and a client that does not trust the CA is refused."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration

from memop.runtime.client.client import Client
from memop.runtime.client.resources import CONFIGMAPS
from memop.testing.apiserver.server import ApiServer

pytestmark = pytest.mark.fake_only


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(tls=True) as srv:
        yield srv


async def test_the_client_reads_writes_and_watches_over_https_across_a_restart(server: ApiServer) -> None:
    assert server.url.startswith("https://127.0.0.1:")
    async with ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="tls-test")
        created = await client.create(CONFIGMAPS, {"metadata": {"name": "a"}, "data": {"k": "v"}}, "default")
        stream = client.watch(
            CONFIGMAPS, "default", resource_version=created["metadata"]["resourceVersion"],
            timeout_seconds=30, read_timeout=10,
        )  # fmt: skip
        await client.patch(CONFIGMAPS, "a", {"data": {"k": "w"}}, "default")
        event = await asyncio.wait_for(anext(stream), 10)
        assert (event["type"], event["object"]["data"]) == ("MODIFIED", {"k": "w"})
        await stream.aclose()
        await server.restart()  # the same certificate: the client still trusts the server
        assert (await client.get(CONFIGMAPS, "a", "default"))["data"] == {"k": "w"}


async def test_the_kubeconfig_carries_the_ca_for_kubernetes_asyncio(
    server: ApiServer, tmp_path: Path
) -> None:
    path = tmp_path / "kubeconfig"
    server.write_kubeconfig(path)
    configuration = Configuration()
    await config.load_kube_config(config_file=str(path), client_configuration=configuration)
    async with ApiClient(configuration) as api:
        assert (await Client(api).probe("/version")) == 200


async def test_a_client_that_does_not_trust_the_ca_is_refused(server: ApiServer) -> None:
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await http.get(server.url + "/version", ssl=ssl.create_default_context())


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")
async def test_kubectl_works_with_the_kubeconfig(server: ApiServer, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    server.write_kubeconfig(path)
    done = await asyncio.to_thread(
        subprocess.run,
        ["kubectl", "--kubeconfig", str(path), "get", "namespaces", "-o", "name"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "namespace/default" in done.stdout.split()
