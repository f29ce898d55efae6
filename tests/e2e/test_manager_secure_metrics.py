"""``--metrics-secure``: /metrics over HTTPS for callers a TokenReview and SubjectAccessReview allow."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import pytest

from memop.manifests import rbac
from memop.runtime.client.client import Client
from memop.testing.envtest import Kube
from memop.testing.process import MemopProcess, MemopProcesses
from memop.testing.tls import ServingCertificates
from memop.testing.wait import wait_for

READER = "system:serviceaccount:monitoring:prometheus"


@pytest.fixture
def memops(kube: Kube, client: Client, memops: MemopProcesses) -> MemopProcesses:
    """conftest's memop processes, with the CRD installed (by ``client``) and the server's
    TokenReviews and SubjectAccessReviews knowing a reader of /metrics and another caller."""
    server = kube.fake
    server.reviews.add_token("reader-token", READER)
    server.reviews.add_token("other-token", "system:serviceaccount:default:other")
    server.reviews.allow(READER, "get", "/metrics")
    return memops


async def scrape(url: str, trust: ssl.SSLContext | bool, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as http, http.get(url, ssl=trust, headers=headers) as response:
        await response.read()
        return response.status


async def test_metrics_need_an_authorised_token_over_https(
    kube: Kube, memops: MemopProcesses, tmp_path: Path
) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    certificates = ServingCertificates.generate("memop-metrics")  # as cert-manager would mount them
    (certs / "tls.crt").write_bytes(certificates.cert_pem)
    (certs / "tls.key").write_bytes(certificates.key_pem)
    memop = await memops.start("--metrics-secure", "--metrics-cert-dir", str(certs))
    await memop.wait_ready()
    address = await wait_for(lambda: memop.address("/metrics"), timeout=30)
    url = f"https://{address}/metrics"
    trust = ssl.create_default_context(cadata=certificates.ca_pem.decode())
    trust.check_hostname = False
    assert await scrape(url, trust) == 401
    assert await scrape(url, trust, "not-a-token") == 401
    assert await scrape(url, trust, "other-token") == 403
    assert await scrape(url, trust, "reader-token") == 200
    with pytest.raises(aiohttp.ClientError):
        await scrape(f"http://{address}/metrics", False, "reader-token")
    status, _ = await memop.get("/healthz")  # probes stay plain HTTP for the kubelet
    assert status == 200
    await _assert_reviews_are_what_the_secure_install_grants(kube, memop)


async def _assert_reviews_are_what_the_secure_install_grants(kube: Kube, memop: MemopProcess) -> None:
    """The reviews memop sent are exactly the METRICS_AUTH rules of memop.manifests.rbac, which only
    manifests/secure-metrics grants (the rest of memop's RBAC is checked in test_rbac_reality)."""
    user_agent = memop.user_agent()
    assert user_agent is not None
    sent = {
        (r.group, rbac.rbac_resource(r.resource, r.subresource), r.verb, r.namespace)
        for r in kube.fake.log.filter(user_agent=user_agent)
        if r.group in ("authentication.k8s.io", "authorization.k8s.io")
    }
    assert {s[:3] for s in sent} == rbac.requested_triples(secure_metrics=True) - rbac.requested_triples()
    assert all(rbac.allowed(*s, secure_metrics=True) for s in sent), sent
    assert not any(rbac.allowed(*s) for s in sent), "an install without --metrics-secure grants reviews"


async def test_without_a_cert_dir_a_self_signed_certificate_is_used_with_a_warning(
    memops: MemopProcesses,
) -> None:
    memop = await memops.start("--metrics-secure")
    await memop.wait_ready()
    await memop.wait_log(lambda r: "self-signed" in r.get("msg", ""))
    address = await wait_for(lambda: memop.address("/metrics"), timeout=30)
    assert await scrape(f"https://{address}/metrics", False, "reader-token") == 200
