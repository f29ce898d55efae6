"""A tiny HTTPS webhook for the in-memory server's webhook tests: an aiohttp server on
127.0.0.1 with a certificate of a test CA (memop.testing.tls), whose answer to each path a test
sets, and which records every review it receives."""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from memop.testing.tls import ServingCertificates

Handler = Callable[[dict[str, Any]], Awaitable[web.StreamResponse] | dict[str, Any]]


def allowed(review: dict[str, Any], **response: Any) -> dict[str, Any]:
    """An AdmissionReview v1 answer to ``review``."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": True, **response},
    }


def json_patch(review: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    encoded = base64.b64encode(json.dumps(operations).encode()).decode()
    return allowed(review, patchType="JSONPatch", patch=encoded)


ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
# The label of the objects a test's configuration is probed with (test_webhooks_admission).
MARKER_LABEL = "memop.test/marker"


@dataclass
class Webhook:
    certificates: ServingCertificates
    handlers: dict[str, Handler] = field(default_factory=dict)
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.certificates.ca_pem).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def client_config(self, path: str) -> dict[str, Any]:
        return {"url": self.url(path), "caBundle": self.ca_bundle}

    def reviews(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in self.received if p == path]

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.certificates.server_context())
        await site.start()
        server = getattr(site, "_server", None)
        self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        labels = (((body.get("request") or {}).get("object") or {}).get("metadata") or {}).get("labels") or {}
        if MARKER_LABEL in labels:  # a probe of whether a configuration is in effect: refused
            return web.json_response(allowed(body, allowed=False, status={"message": "marker"}))
        # A real cluster's root-CA publisher writes kube-root-ca.crt into every namespace, at
        # times after a test's webhooks are in place: answered, but not the test's to count.
        if (body.get("request") or {}).get("name") != ROOT_CA_CONFIGMAP:
            self.received.append((request.path, body))
        handler = self.handlers.get(request.path)
        if handler is None:
            return web.Response(status=404, text="no handler")
        result = handler(body)
        if not isinstance(result, dict):
            return await result
        return web.json_response(result)
