"""The manager runs the webhook server on every replica: a standby that never leads answers
admission requests and reports the ``webhook`` readiness check; a certificate that cannot be
loaded stops the start with one error line. On the in-memory API server.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import ssl
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient

from memop.runtime import CONFIGMAPS, LEASES, NAMESPACES, Client, ControllerBuilder, Manager, ManagerOptions
from memop.runtime.controller.reconcile import Request, Result
from memop.runtime.leaderelection.lease import LeaderElectionConfig
from memop.runtime.manager.manager import EXIT_FAILED, EXIT_OK
from memop.runtime.manager.server import Address
from memop.runtime.webhook.declarations import AdmissionRequest, AdmissionWebhook, Obj
from memop.runtime.webhook.server import WebhookServerOptions
from memop.testing.apiserver.server import ApiServer
from memop.testing.tls import ServingCertificates
from memop.testing.wait import wait_for

NS = "hooks"


class Nothing:
    async def reconcile(self, request: Request) -> Result | None:
        return None


class NoPlainPods:
    """A validator of a kind of the test's own (no CRD needed: the handler only reads JSON)."""

    async def validate_create(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]:
        return ["checked by a standby"]

    async def validate_update(self, old: Obj, new: Obj, request: AdmissionRequest) -> Sequence[str]:
        return []

    async def validate_delete(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]:
        return []


WEBHOOK = AdmissionWebhook("example.memop.dev", "v1", "Gizmo", "gizmos", validator=NoPlainPods())


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with ApiServer() as server, ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="webhook-manager-test")


@pytest.fixture(scope="module")
def pair() -> ServingCertificates:
    return ServingCertificates.generate("webhooks")


def manager_for(client: Client, cert_dir: Path, **options: object) -> Manager:
    manager = Manager(
        client,
        ManagerOptions(
            namespaces=(NS,),
            probe_address=Address("127.0.0.1", 0),
            webhook=WebhookServerOptions(host="127.0.0.1", port=0, cert_dir=cert_dir),
            cache_sync_timeout=5.0,
            **options,  # type: ignore[arg-type]
        ),
    )
    manager.add(ControllerBuilder(manager.cache, "gizmos").for_(CONFIGMAPS).build(Nothing()))
    manager.add_webhooks([WEBHOOK])
    return manager


async def test_a_standby_serves_webhooks_and_is_ready(
    client: Client, pair: ServingCertificates, tmp_path: Path
) -> None:
    await client.create(NAMESPACES, {"metadata": {"name": NS}})
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await client.create(
        LEASES,
        {
            "metadata": {"name": "gizmo-lock"},
            "spec": {"holderIdentity": "the-leader", "leaseDurationSeconds": 3600, "renewTime": now},
        },
        NS,
    )
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    election = LeaderElectionConfig("gizmo-lock", NS, identity="standby", lease_duration=15, retry_period=0.2)
    manager = manager_for(client, tmp_path, leader_election=election)
    stop = asyncio.Event()
    run = asyncio.create_task(manager.run(stop))
    try:
        await wait_for(lambda: manager.webhook_server.ready() is None and manager.cache.has_synced)
        trust = ssl.create_default_context(cadata=pair.ca_pem.decode())
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "example.memop.dev", "version": "v1", "kind": "Gizmo"},
                "resource": {"group": "example.memop.dev", "version": "v1", "resource": "gizmos"},
                "operation": "CREATE",
                "name": "g",
                "namespace": NS,
                "object": {"apiVersion": "example.memop.dev/v1", "kind": "Gizmo", "metadata": {"name": "g"}},
            },
        }
        url = f"https://127.0.0.1:{manager.webhook_server.port}{WEBHOOK.validating_path}"
        probes = manager.server.bound["/readyz"]
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json=review, ssl=trust) as response:
                answer = json.loads(await response.read())
            assert answer["response"]["warnings"] == ["checked by a standby"]
            async with http.get(f"http://{probes}/readyz?verbose") as response:
                assert "[+]webhook ok" in await response.text()
        assert manager.elector is not None
        assert not manager.leading.is_set()
        assert not manager.elector.leader_elected.is_set()
    finally:
        stop.set()
        assert await run == EXIT_OK
    assert manager.webhook_server.ready() is not None
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", manager.webhook_server.port)


async def test_without_a_certificate_the_manager_exits_with_one_line(
    client: Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = manager_for(client, tmp_path / "missing")
    with caplog.at_level(logging.ERROR):
        assert await manager.run(asyncio.Event()) == EXIT_FAILED
    [line] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert line.name == "memop.manager"
    assert line.exc_info is None
    assert "cannot serve webhooks: cannot read the webhook certificate" in line.getMessage()
    assert "missing/tls.crt: No such file or directory" in line.getMessage()
    assert manager.server.bound  # the probe server had started, and is stopped again
    assert not manager.server._runners


async def test_without_webhooks_there_is_no_webhook_server(client: Client, tmp_path: Path) -> None:
    manager = Manager(
        client, ManagerOptions(namespaces=(NS,), webhook=WebhookServerOptions(cert_dir=tmp_path / "none"))
    )
    manager.add(ControllerBuilder(manager.cache, "plain").for_(CONFIGMAPS).build(Nothing()))
    await client.create(NAMESPACES, {"metadata": {"name": NS}})
    stop = asyncio.Event()
    run = asyncio.create_task(manager.run(stop))
    await wait_for(manager.leading.is_set)
    assert manager.webhook_server.port is None
    stop.set()
    assert await run == EXIT_OK
