"""Secure metrics: TokenReview + SubjectAccessReview through the in-memory API server, over HTTPS."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from kubernetes_asyncio.client import ApiClient

from memop.runtime.client.client import Client
from memop.runtime.manager.authn import MetricsAuthorizer, tls_context
from memop.runtime.manager.server import Address, ProbeServer
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.server import ApiServer
from memop.testing.tls import ServingCertificates


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer() as srv:
        srv.reviews.add_token("prometheus-token", "system:serviceaccount:monitoring:prometheus")
        srv.reviews.add_token("nobody-token", "system:serviceaccount:default:nobody")
        srv.reviews.allow("system:serviceaccount:monitoring:prometheus", "get", "/metrics")
        yield srv


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="authn-test")


def reviews_sent(server: ApiServer) -> int:
    return server.log.count(resource="tokenreviews") + server.log.count(resource="subjectaccessreviews")


async def test_decisions_and_their_cache(server: ApiServer, client: Client) -> None:
    clock = FakeClock()
    authorizer = MetricsAuthorizer(client, ttl=60, clock=clock)
    assert (await authorizer.decide(None, "/metrics")).status == 401
    assert (await authorizer.decide("Basic abc", "/metrics")).status == 401
    assert (await authorizer.decide("Bearer wrong", "/metrics")).status == 401
    denied = await authorizer.decide("Bearer nobody-token", "/metrics")
    assert denied.status == 403
    assert "system:serviceaccount:default:nobody" in denied.reason
    allowed = await authorizer.decide("Bearer prometheus-token", "/metrics")
    assert (allowed.status, allowed.user) == (200, "system:serviceaccount:monitoring:prometheus")
    sent = reviews_sent(server)
    assert (await authorizer.decide("Bearer prometheus-token", "/metrics")).status == 200
    assert reviews_sent(server) == sent  # cached
    clock.advance(61)
    assert (await authorizer.decide("Bearer prometheus-token", "/metrics")).status == 200
    assert reviews_sent(server) == sent + 2  # expired: one TokenReview, one SubjectAccessReview


async def test_reviews_failing_is_a_500_and_not_cached(server: ApiServer, client: Client) -> None:
    authorizer = MetricsAuthorizer(client)
    server.faults.fail(403, times=1, verb="create", resource="tokenreviews")
    assert (await authorizer.decide("Bearer prometheus-token", "/metrics")).status == 500
    assert (await authorizer.decide("Bearer prometheus-token", "/metrics")).status == 200


def serving_pair(directory: Path, certificates: ServingCertificates) -> Path:
    """``directory`` with tls.crt and tls.key, as a mounted kubernetes.io/tls Secret."""
    (directory / "tls.crt").write_bytes(certificates.cert_pem)
    (directory / "tls.key").write_bytes(certificates.key_pem)
    return directory


async def test_metrics_over_https_need_an_authorised_token(
    server: ApiServer, client: Client, tmp_path: Path
) -> None:
    certificates = ServingCertificates.generate("memop-metrics")
    probe = ProbeServer(
        probe_address=Address("127.0.0.1", 0),
        metrics_address=Address("127.0.0.1", 0),
        metrics_tls=tls_context(serving_pair(tmp_path, certificates)),
        metrics_authorizer=MetricsAuthorizer(client),
    )
    await probe.start()
    trust = ssl.create_default_context(cadata=certificates.ca_pem.decode())
    trust.check_hostname = False
    try:
        url = f"https://{probe.bound['/metrics']}/metrics"
        async with aiohttp.ClientSession() as http:
            async with http.get(url, ssl=trust) as resp:
                assert resp.status == 401
            async with http.get(url, ssl=trust, headers={"Authorization": "Bearer nobody-token"}) as resp:
                assert resp.status == 403
            async with http.get(url, ssl=trust, headers={"Authorization": "Bearer prometheus-token"}) as resp:
                assert resp.status == 200
                assert "python_info" in await resp.text()  # the registry was served
            with pytest.raises(aiohttp.ClientError):
                async with http.get(url.replace("https://", "http://")) as resp:
                    await resp.read()
            # Probes stay plain HTTP and open: kubelets do not send tokens.
            async with http.get(f"http://{probe.bound['/healthz']}/healthz") as resp:
                assert resp.status == 200
    finally:
        await probe.stop()


async def test_without_a_cert_dir_the_certificate_is_self_signed() -> None:
    probe = ProbeServer(
        probe_address=Address("127.0.0.1", 0),
        metrics_address=Address("127.0.0.1", 0),
        metrics_tls=tls_context(None),
    )
    await probe.start()
    try:
        bound = probe.bound["/metrics"]
        served = await asyncio.to_thread(ssl.get_server_certificate, (bound.host, bound.port))
    finally:
        await probe.stop()
    certificate = x509.load_pem_x509_certificate(served.encode())
    assert certificate.subject == certificate.issuer
    assert certificate.subject.rfc4514_string() == "CN=memop-metrics"


async def test_secure_metrics_cannot_share_the_probe_address() -> None:
    address = Address("127.0.0.1", 8443)
    tls = tls_context(None)
    probe = ProbeServer(probe_address=address, metrics_address=address, metrics_tls=tls)
    with pytest.raises(ValueError, match="own address"):
        await probe.start()
