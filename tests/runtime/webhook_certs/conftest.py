"""Fixtures of the self-managed webhook certificate tests: clients of a bare in-memory API server
(plain HTTP, no simulated controllers), and instances of SelfManagedCertificates on a FakeClock."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from webhook_certs_support import CHECK_INTERVAL, CRD_NAME, NAMESPACE, POLICY, SECRET, SERVICE, Make

from memop.runtime.client.client import Client
from memop.runtime.util.clock import FakeClock
from memop.runtime.webhook.selfmanaged import SelfManagedCertificates
from memop.testing.apiserver.server import ApiServer


@pytest.fixture
def clock() -> FakeClock:
    """Wall time starts now, so the certificates it signs pass a real TLS handshake."""
    return FakeClock(wall_start=time.time())


@pytest.fixture
async def connect(apiserver: ApiServer) -> AsyncIterator[Callable[[], Client]]:
    """A new Client of the test server (its own connection pool) per call, closed afterwards."""
    api_clients: list[ApiClient] = []

    def make() -> Client:
        api = ApiClient(apiserver.client_configuration())
        api_clients.append(api)
        return Client(api, user_agent="webhook-certs-test", max_retries=0)

    yield make
    for api in api_clients:
        await api.close()


@pytest.fixture
def make(connect: Callable[[], Client], clock: FakeClock, tmp_path: Path) -> Make:
    """``make(name, **overrides)``: an instance with its own client and cert dir ``tmp_path/name``."""

    def build(name: str = "replica-0", **overrides: Any) -> SelfManagedCertificates:
        options: dict[str, Any] = {
            "namespace": NAMESPACE,
            "service": SERVICE,
            "secret": SECRET,
            "cert_dir": tmp_path / name,
            "crds": (CRD_NAME,),
            "extra_ips": ("127.0.0.1",),
            "policy": POLICY,
            "check_interval": CHECK_INTERVAL,
            "clock": clock,
        }
        options.update(overrides)
        return SelfManagedCertificates(connect(), **options)

    return build
