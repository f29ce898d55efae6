"""The probe and metrics HTTP server (aiohttp): ``/healthz``, ``/readyz`` and ``/metrics``.

Probes and metrics listen on separate addresses (controller-runtime's ``:8081`` and ``:8080``)
or share one server when the addresses are equal. An address is ``host:port``; an empty host
(``:8080``) means every interface, port 0 picks a free port (tests), and ``"0"`` disables
that endpoint, as in controller-runtime.

Checks are plain callables returning None when healthy or a short reason when not; a check
that raises counts as failing with the exception as the reason. ``/healthz`` answers from the
event loop, so a wedged loop fails the liveness probe by timing out, which is the point.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder

from memop.runtime.manager.authn import Decision

log = logging.getLogger("memop.server")

Check = Callable[[], str | None]


class Authorizer(Protocol):
    async def decide(self, authorization: str | None, path: str, verb: str = "get") -> Decision: ...


@dataclass(frozen=True)
class Address:
    """Where a server listens: ``host`` (an IP address or name; ``0.0.0.0`` for every
    interface) and ``port`` (0: a free one, the bound port is logged)."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Address | None:
        """``host:port``, ``:port`` (all interfaces), or ``"0"`` (disabled → None)."""
        text = text.strip()
        if text == "0":
            return None
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"invalid bind address {text!r}: expected host:port, :port or 0")
        host = host.strip("[]")
        return cls(host or "0.0.0.0", int(port))  # ":8080": every interface, by convention

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class ProbeServer:
    """Serves probes and metrics until stopped. ``bound`` gives the real addresses after start."""

    def __init__(
        self,
        *,
        probe_address: Address | None,
        metrics_address: Address | None,
        registry: CollectorRegistry = REGISTRY,
        metrics_tls: ssl.SSLContext | None = None,
        metrics_authorizer: Authorizer | None = None,
    ) -> None:
        self.probe_address = probe_address
        self.metrics_address = metrics_address
        self.registry = registry
        self.metrics_tls = metrics_tls
        self.metrics_authorizer = metrics_authorizer
        self.bound: dict[str, Address] = {}
        self._liveness: dict[str, Check] = {}
        self._readiness: dict[str, Check] = {}
        self._runners: list[web.AppRunner] = []

    def add_liveness_check(self, name: str, check: Check) -> None:
        self._liveness[name] = check

    def add_readiness_check(self, name: str, check: Check) -> None:
        self._readiness[name] = check

    async def start(self) -> None:
        servers: list[tuple[Address, list[web.RouteDef]]] = []
        probe_routes = [web.get("/healthz", self._healthz), web.get("/readyz", self._readyz)]
        metrics_routes = [web.get("/metrics", self._metrics)]
        probe, metrics = self.probe_address, self.metrics_address
        # Equal addresses share a server; two ":0" requests are two free ports unless they are
        # the same object (a test asking for one shared server on a free port).
        if probe is not None and (probe is metrics or (probe == metrics and probe.port != 0)):
            if self.metrics_tls is not None:
                raise ValueError("secure metrics need their own address, apart from the probes")
            servers.append((probe, probe_routes + metrics_routes))
        else:
            if probe is not None:
                servers.append((probe, probe_routes))
            if metrics is not None:
                servers.append((metrics, metrics_routes))
        for address, app_routes in servers:
            app = web.Application()
            app.add_routes(app_routes)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            tls = self.metrics_tls if app_routes is metrics_routes else None
            site = web.TCPSite(runner, address.host, address.port, ssl_context=tls)
            await site.start()
            self._runners.append(runner)
            port = int(runner.addresses[0][1]) if runner.addresses else address.port
            real = Address(address.host, port)
            paths = [route.path for route in app_routes if isinstance(route, web.RouteDef)]
            for path in paths:
                self.bound[path] = real
            log.info("serving %s on %s", ", ".join(paths), real)

    async def stop(self) -> None:
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return _check_response(self._liveness, request)

    async def _readyz(self, request: web.Request) -> web.Response:
        return _check_response(self._readiness, request)

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.metrics_authorizer is not None:
            decision = await self.metrics_authorizer.decide(
                request.headers.get("Authorization"), request.path
            )
            if decision.status != 200:
                return web.Response(status=decision.status, text=decision.reason + "\n")
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encoder(self.registry)
        return web.Response(body=body, headers={"Content-Type": content_type})


def _run_check(check: Check) -> str | None:
    try:
        return check()
    except Exception as error:
        return f"check raised {type(error).__name__}: {error}"


def _check_response(checks: dict[str, Check], request: web.Request) -> web.Response:
    failures = {name: reason for name, check in checks.items() if (reason := _run_check(check)) is not None}
    if "verbose" in request.query:
        lines = [f"[{'-' if name in failures else '+'}]{name} {failures.get(name, 'ok')}" for name in checks]
        lines.append("check failed" if failures else "ok")
        return web.Response(status=500 if failures else 200, text="\n".join(lines) + "\n")
    if failures:
        text = "\n".join(f"{name}: {reason}" for name, reason in failures.items())
        return web.Response(status=500, text=text + "\n")
    return web.Response(text="ok")
