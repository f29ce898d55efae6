"""The client's session: proxies are honoured, per-request lookups and cookies are not.

kubernetes_asyncio builds its aiohttp session with ``trust_env=True`` and a cookie jar; Client
replaces it with one on the same connector whose per-request environment lookups (proxy
variables, ``~/.netrc``) are off when no proxy applies to the API server, on when one does,
and which keeps no cookies (as client-go). These tests pin each part against the in-memory
API server, a loopback HTTP proxy and a loopback server that sets cookies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from memop.runtime.client.client import Client
from memop.runtime.client.http1 import Http1Pool
from memop.runtime.client.resources import CONFIGMAPS
from memop.testing.apiserver.server import ApiServer

NS = "default"
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


class LoopbackProxy:
    """A forward HTTP proxy stand-in on 127.0.0.1: records each request, answers a ConfigMap."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str | None]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _answer(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, str(request.url), request.headers.get("Authorization")))
        return web.json_response(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-the-proxy", "namespace": NS}}
        )

    async def __aenter__(self) -> LoopbackProxy:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No proxy variables, and a netrc file with credentials for the API server's host."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("REQUEST_METHOD", raising=False)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    return monkeypatch


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer() as srv:
        yield srv


@pytest.fixture
async def proxy() -> AsyncIterator[LoopbackProxy]:
    async with LoopbackProxy() as p:
        yield p


def session_of(api: ApiClient) -> aiohttp.ClientSession:
    session = api.rest_client.pool_manager
    assert isinstance(session, aiohttp.ClientSession)
    return session


def configmap(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


async def test_without_a_proxy_the_session_stops_reading_the_environment_per_request(
    clean_env: pytest.MonkeyPatch, server: ApiServer
) -> None:
    # The premise: left as kubernetes_asyncio builds it, the session reads ~/.netrc on every
    # request, and the entry for our host even breaks bearer-token requests.
    async with ApiClient(server.client_configuration()) as untouched:
        assert session_of(untouched).trust_env
        with pytest.raises(ValueError, match="AUTHORIZATION"):
            await untouched.rest_client.request(
                "GET",
                f"{server.url}/api/v1/namespaces/{NS}/configmaps",
                headers={"Authorization": "Bearer token"},
                _preload_content=False,
            )

    async with ApiClient(server.client_configuration()) as api:
        client = Client(api)
        assert session_of(api).trust_env is False
        created = await client.create(CONFIGMAPS, configmap("plain"), NS)
        assert created["metadata"]["name"] == "plain"
        assert (await client.get(CONFIGMAPS, "plain", NS))["data"] == {"k": "v"}
        items, _ = await client.list_all(CONFIGMAPS, NS)
        assert [i["metadata"]["name"] for i in items] == ["plain"]


def pool_of(api: ApiClient) -> Http1Pool | None:
    connector = session_of(api).connector
    pool = getattr(connector, "http1", None)
    assert pool is None or isinstance(pool, Http1Pool)
    return pool


async def test_requests_share_one_kept_alive_connection_closed_with_the_api_client(
    clean_env: pytest.MonkeyPatch,
) -> None:
    async with ApiServer(tls=True) as server, ApiClient(server.client_configuration()) as api:
        assert server.url.startswith("https://")
        client = Client(api)
        pool = pool_of(api)
        assert pool is not None
        for i in range(5):
            await client.create(CONFIGMAPS, configmap(f"cm-{i}"), NS)
        assert len((await client.list_all(CONFIGMAPS, NS))[0]) == 5
        # Sequential requests, one TLS connection, as client-go's transport keeps them.
        assert pool.connections_opened == 1
        assert pool.open_connections == 1
    assert pool.open_connections == 0
    with pytest.raises(Exception, match="closed"):
        await pool.request("GET", "/readyz", {})


async def test_a_proxy_that_applies_to_the_server_is_used(
    clean_env: pytest.MonkeyPatch, server: ApiServer, proxy: LoopbackProxy
) -> None:
    clean_env.delenv("NETRC")
    clean_env.setenv("HTTP_PROXY", proxy.url)
    async with ApiClient(server.client_configuration()) as api:
        client = Client(api)
        assert session_of(api).trust_env is True  # left alone: aiohttp sends through the proxy
        assert pool_of(api) is None  # and every request goes through aiohttp
        answer = await client.get(CONFIGMAPS, "anything", NS)
    assert answer["metadata"]["name"] == "from-the-proxy"
    assert len(proxy.requests) == 1
    method, url, authorization = proxy.requests[0]
    # A forward proxy gets the absolute URL of the API server, credentials included.
    assert (method, url) == ("GET", f"{server.url}/api/v1/namespaces/{NS}/configmaps/anything")
    assert authorization
    assert authorization.startswith("Bearer ")
    assert server.log.count(verb="get", resource="configmaps") == 0


async def test_a_proxy_the_server_is_exempt_from_is_not_used(
    clean_env: pytest.MonkeyPatch, server: ApiServer, proxy: LoopbackProxy
) -> None:
    clean_env.setenv("HTTP_PROXY", proxy.url)
    clean_env.setenv("NO_PROXY", "127.0.0.1")
    async with ApiClient(server.client_configuration()) as api:
        client = Client(api)
        assert session_of(api).trust_env is False
        await client.create(CONFIGMAPS, configmap("direct"), NS)
        assert (await client.get(CONFIGMAPS, "direct", NS))["metadata"]["name"] == "direct"
    assert proxy.requests == []
    assert server.log.count(verb="get", resource="configmaps") == 1


async def test_cookies_are_never_sent_back_as_client_go_sends_none(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.delenv("NETRC")
    seen: list[str | None] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Cookie"))
        response = web.json_response({"kind": "ConfigMap", "metadata": {"name": "x", "namespace": NS}})
        response.set_cookie("session", "sticky")
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        # A host name: aiohttp's cookie jar refuses cookies from IP addresses.
        configuration = Configuration(host=f"http://localhost:{port}")
        async with ApiClient(configuration) as api:
            client = Client(api)
            await client.get(CONFIGMAPS, "x", NS)
            await client.get(CONFIGMAPS, "x", NS)
            session = session_of(api)
            second = Client(api)  # a second Client on the same ApiClient keeps the same session
            assert session_of(api) is session
            await second.get(CONFIGMAPS, "x", NS)
            connector = session_of(api).connector
            assert connector is not None
        assert seen == [None, None, None]
        assert connector.closed  # closing the ApiClient closed the connector, as before
    finally:
        await runner.cleanup()
