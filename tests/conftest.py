"""memop's own fixtures, beside the ones its pytest plugin gives every project.

The plugin (:mod:`memop.testing.plugin`, loaded through its ``pytest11`` entry point) gives
``kube``, ``client``, ``namespace``, ``install_crds``, ``run_operator`` and the check that no
test changes a cached object in place. Here: the in-memory server as memop's own server
tests want it (``apiserver_options``: plain HTTP, the root CA publisher and nothing else acting
behind the tests' backs), ``cluster`` (the plugin's ``kube`` with a kubeconfig file and API
clients), a bare ``apiserver``, raw ``http``, the ``fake_only`` marker and the figures report.

With ``USE_EXISTING_CLUSTER=true`` and ``KUBECONFIG`` set the same tests run against that real
cluster (``cluster.server`` is None). Tests that need the fake's controls (fault injection,
compaction, restart) take ``cluster.fake`` (or are marked ``fake_only``) and are skipped on a
real cluster with a reason.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import hypothesis
import pytest
from kubernetes_asyncio import client

from memop.testing.apiserver.server import ApiServer
from memop.testing.envtest import FAKE_ONLY_REASON, Kube, use_existing_cluster

# Hypothesis's wall-clock checks (a 200 ms deadline per example, the too_slow health check on
# generation) measure the machine, not the property: on a 2-core VM running an API server
# beside the suite, a stall of a second made a spec generator "too slow" once. The properties
# and the number of examples stay the same; tests that need timing measure it themselves.
hypothesis.settings.register_profile(
    "memop", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile("memop")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--chaos-crs",
        type=int,
        default=None,
        help="Memcacheds in the chaos test (default: $MEMOP_CHAOS_CRS, else 300)",
    )


# A test that measures something records it with record_property(FIGURES, {...}); the figures
# are printed at the end of the run, passed or failed, without -s.
FIGURES = "figures"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    reports = [r for outcome in ("passed", "failed") for r in terminalreporter.stats.get(outcome, ())]
    figures = [
        (r.nodeid, value)
        for r in reports
        if getattr(r, "when", None) == "call"
        for name, value in getattr(r, "user_properties", ())
        if name == FIGURES
    ]
    if figures:
        terminalreporter.section("figures")
        for nodeid, value in figures:
            terminalreporter.write_line(f"{nodeid}: {json.dumps(value, sort_keys=True)}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fake_only: needs the in-memory API server (skipped on a real cluster)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not use_existing_cluster():
        return
    skip = pytest.mark.skip(reason=FAKE_ONLY_REASON)
    for item in items:
        if "fake_only" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def apiserver_options() -> dict[str, Any]:
    """memop's server tests meet namespaces as a cluster has them (every cluster's
    kube-controller-manager puts a kube-root-ca.crt ConfigMap in each, so none can assume an
    empty namespace) with nothing else acting behind their backs; plain HTTP."""
    return {"publish_root_ca": True}


@dataclass
class ClusterHandle:
    """Where the tests' Kubernetes API is: a kubeconfig, API clients, and the fake when it is one."""

    kubeconfig: Path
    server: ApiServer | None
    _configuration: client.Configuration
    _clients: list[client.ApiClient] = field(default_factory=list)

    @property
    def real(self) -> bool:
        return self.server is None

    @property
    def fake(self) -> ApiServer:
        """The in-memory server; skips the test on a real cluster."""
        if self.server is None:
            pytest.skip(FAKE_ONLY_REASON)
        return self.server

    def api_client(self) -> client.ApiClient:
        """A new kubernetes_asyncio ApiClient for this cluster, closed when the test ends."""
        api = client.ApiClient(self._configuration)
        self._clients.append(api)
        return api

    async def close(self) -> None:
        for api in self._clients:
            await api.close()
        self._clients.clear()


@pytest.fixture
async def apiserver() -> AsyncIterator[ApiServer]:
    """A started in-memory API server, stopped after the test."""
    server = ApiServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def cluster(kube: Kube) -> AsyncIterator[ClusterHandle]:
    """The plugin's ``kube`` as memop's server tests use it (a kubeconfig path, API clients)."""
    assert kube.kubeconfig is not None  # the plugin's kube always has one
    handle = ClusterHandle(kube.kubeconfig, kube.server, kube.configuration)
    try:
        yield handle
    finally:
        await handle.close()


@dataclass
class Reply:
    """A raw API answer: status, headers and the decoded JSON body (text when not JSON)."""

    status: int
    headers: Mapping[str, str]
    body: Any


class WatchStream:
    """The events of one open watch, read line by line."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.status = response.status

    async def next(self, timeout: float = 5.0) -> dict[str, Any] | None:
        """The next event, or None when the server ended the stream cleanly."""
        line = await asyncio.wait_for(self.response.content.readline(), timeout)
        if not line:
            return None
        event: dict[str, Any] = json.loads(line)
        return event

    async def take(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        events = []
        for _ in range(count):
            event = await self.next(timeout)
            assert event is not None, f"stream ended after {events}"
            events.append(event)
        return events

    async def next_not_bookmark(self, timeout: float = 5.0) -> dict[str, Any] | None:
        while True:
            event = await self.next(timeout)
            if event is None or event["type"] != "BOOKMARK":
                return event


class Http:
    """Raw requests to the cluster through kubernetes_asyncio (its auth and TLS), for checking
    status codes, headers and bodies exactly."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: float = 30.0,
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": accept, "Content-Type": content_type}
        params = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()]
        response: aiohttp.ClientResponse = await self._api.call_api(
            path,
            method,
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        return response

    async def request(self, method: str, path: str, **kwargs: Any) -> Reply:
        response = await self._send(method, path, **kwargs)
        try:
            text = await response.text()
        finally:
            response.release()
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = text
        return Reply(response.status, dict(response.headers), body)

    async def get(self, path: str, **kwargs: Any) -> Reply:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, body: Any, **kwargs: Any) -> Reply:
        return await self.request("POST", path, body=body, **kwargs)

    async def put(self, path: str, body: Any, **kwargs: Any) -> Reply:
        return await self.request("PUT", path, body=body, **kwargs)

    async def patch(
        self, path: str, body: Any, content_type: str = "application/merge-patch+json", **kwargs: Any
    ) -> Reply:
        return await self.request("PATCH", path, body=body, content_type=content_type, **kwargs)

    async def delete(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return await self.request("DELETE", path, body=body, **kwargs)

    @asynccontextmanager
    async def watch(
        self, path: str, query: Mapping[str, Any] | None = None, timeout: float = 60.0
    ) -> AsyncIterator[WatchStream]:
        """Open ``GET path?watch=true&...``; the stream is closed when the block ends."""
        response = await self._send("GET", path, query={"watch": "true", **(query or {})}, timeout=timeout)
        try:
            yield WatchStream(response)
        finally:
            response.close()


@pytest.fixture
async def http(cluster: ClusterHandle) -> Http:
    """Raw HTTP access to the test's cluster."""
    return Http(cluster.api_client())
