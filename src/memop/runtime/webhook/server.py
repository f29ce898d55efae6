"""The webhook server (controller-runtime's ``webhook.Server``): HTTPS on port 9443, one handler
per path, the serving certificate read from a directory and reloaded when it changes.

TLS: 1.2 at least; ALPN offers ``http/1.1`` only, as Kubebuilder's scaffold does by default
(HTTP/2 off: CVE-2023-44487's rapid resets). The certificate and key are ``tls.crt`` and
``tls.key`` in ``cert_dir`` (names configurable, as controller-runtime's CertName/KeyName),
where a Secret is mounted (cert-manager's, or memop's self-managed one).

Reloading (controller-runtime's ``certwatcher`` polls every 10 s besides watching with inotify;
memop only polls, so a change is served within one period, well inside the minute or more the
kubelet takes to update a mounted Secret): every ``cert_poll_period`` seconds of the injected
clock both files are read; when their bytes changed, a new TLS context is built from them and
new connections are served with it (the listening context's SNI callback hands each handshake
the current one; connections already open keep theirs). A pair that does not load (half
written, key and certificate that do not match) leaves the previous one serving and is logged
once, until the files change again.
At start a missing or unreadable pair is a :class:`CertificateError` with a one-line message.

Handlers take the body and Content-Type and return the HTTP status and body; each is counted
and timed in :mod:`memop.runtime.webhook.metrics` under its path. The server needs no leader:
every replica serves, so the API server's calls are spread over the Service's endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from memop.runtime.util.clock import Clock, RealClock
from memop.runtime.webhook.admission import AdmissionHandler
from memop.runtime.webhook.conversion import ConversionHandler
from memop.runtime.webhook.declarations import CONVERSION_PATH, AdmissionWebhook, Conversion
from memop.runtime.webhook.metrics import Handler, instrumented

log = logging.getLogger("memop.webhook")

DEFAULT_PORT = 9443
# controller-runtime's maxRequestSize: two objects of 3 MB and 1 MB for the rest.
MAX_REQUEST_SIZE = 7 * 1024 * 1024


def default_cert_dir() -> Path:
    """controller-runtime's default certificate directory: ``<temp dir>/k8s-webhook-server/
    serving-certs``, the temp dir as Go's ``os.TempDir`` has it (``$TMPDIR``, else ``/tmp``).

    Not ``tempfile.gettempdir()``: that one creates a file to find a *writable* directory, and
    fails where none is (a read-only root filesystem), while this directory is only read, often
    from a Secret mounted read-only at ``/tmp/k8s-webhook-server/serving-certs``."""
    return Path(os.environ.get("TMPDIR") or "/tmp") / "k8s-webhook-server" / "serving-certs"


@dataclass(frozen=True)
class WebhookServerOptions:
    """Where and how the webhook server listens.

    host: the address to listen on; empty means every interface (controller-runtime's default).
    port: 9443 by default (controller-runtime's DefaultPort); 0 picks a free one (tests).
    cert_dir: where ``cert_name`` and ``key_name`` are read from (:func:`default_cert_dir`,
        controller-runtime's default, as the environment has it when the options are made); a
        Secret mounted there is picked up again when the kubelet updates it.
    cert_poll_period: seconds between two reads of the pair (controller-runtime's 10 s).
    """

    host: str = ""
    port: int = DEFAULT_PORT
    cert_dir: Path = field(default_factory=default_cert_dir)
    cert_name: str = "tls.crt"
    key_name: str = "tls.key"
    cert_poll_period: float = 10.0

    @property
    def cert_path(self) -> Path:
        return Path(self.cert_dir) / self.cert_name

    @property
    def key_path(self) -> Path:
        return Path(self.cert_dir) / self.key_name


class CertificateError(Exception):
    """The serving certificate cannot be loaded; the message says which file and why."""


def server_context(cert_path: Path, key_path: Path) -> ssl.SSLContext:
    """A server context for the pair: TLS 1.2 or later, ALPN ``http/1.1`` only; SSLError or
    OSError when the pair does not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    context.load_cert_chain(cert_path, key_path)
    return context


class CertificateWatcher:
    """The current TLS context for a certificate and key on disk (see the module docstring).

    Invariant: ``context`` was built from ``_loaded``, the bytes of the files last loaded;
    ``_failed`` holds the bytes of the last pair that did not load, so it is logged once.
    """

    def __init__(self, cert_path: Path, key_path: Path, *, clock: Clock, period: float) -> None:
        self.cert_path = cert_path
        self.key_path = key_path
        self._clock = clock
        self._period = period
        self._loaded: tuple[bytes, bytes] | None = None
        self._failed: tuple[bytes, bytes] | None = None
        self._context: ssl.SSLContext | None = None
        self.reloads = 0

    @property
    def context(self) -> ssl.SSLContext:
        assert self._context is not None, "load() first"
        return self._context

    def load(self) -> None:
        """Load the pair, or CertificateError saying why not."""
        try:
            pair = self._read()
            self._context = server_context(self.cert_path, self.key_path)
        except ssl.SSLError as error:  # an OSError too: first
            raise CertificateError(
                f"{self.cert_path} and {self.key_path} are not a valid certificate and key pair "
                f"(ssl: {error.reason or error})"
            ) from None
        except OSError as error:
            reason = error.strerror or str(error)
            raise CertificateError(
                f"cannot read the webhook certificate {error.filename}: {reason}"
            ) from None
        self._loaded = pair

    def reload(self) -> bool:
        """Read the pair again; load it if it changed. True when a new pair now serves."""
        try:
            pair = self._read()
        except OSError as error:
            self._say_failed(None, f"cannot read {error.filename}: {error.strerror or error}")
            return False
        if pair in (self._loaded, self._failed):
            return False
        try:
            context = server_context(self.cert_path, self.key_path)
        except OSError as error:  # ssl.SSLError included
            self._say_failed(pair, f"{type(error).__name__}: {getattr(error, 'reason', None) or error}")
            return False
        self._context, self._loaded, self._failed = context, pair, None
        self.reloads += 1
        log.info("loaded the new webhook serving certificate from %s", self.cert_path)
        return True

    def _say_failed(self, pair: tuple[bytes, bytes] | None, reason: str) -> None:
        key = pair or (b"", b"")
        if key == self._failed:
            return
        self._failed = key
        log.error("cannot load the changed webhook certificate, still serving the previous one: %s", reason)

    def _read(self) -> tuple[bytes, bytes]:
        return self.cert_path.read_bytes(), self.key_path.read_bytes()

    async def run(self) -> None:
        """Reload every period until cancelled."""
        while True:
            await self._clock.sleep(self._period)
            self.reload()


class WebhookServer:
    """Serves the admission and conversion handlers registered before :meth:`start`.

    ``add_admission`` registers a kind's defaulter at its mutating path and its validator at
    its validating path; ``add_conversion`` adds a kind to the one conversion handler at
    ``/convert``. A path registered twice is a ValueError (controller-runtime panics).
    """

    def __init__(self, options: WebhookServerOptions | None = None, *, clock: Clock | None = None) -> None:
        self.options = options or WebhookServerOptions()
        self._clock = clock or RealClock()
        self._routes: dict[str, Handler] = {}
        self._conversions = ConversionHandler()
        self._watcher: CertificateWatcher | None = None
        self._runner: web.AppRunner | None = None
        self._poll: asyncio.Task[None] | None = None
        self.port: int | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(self._routes)

    @property
    def has_handlers(self) -> bool:
        return bool(self._routes)

    @property
    def certificates(self) -> CertificateWatcher | None:
        """The watcher of the serving pair, once started."""
        return self._watcher

    def register(self, path: str, handler: Handler) -> None:
        """Serve ``handler`` at ``path`` (POST), counted and timed under ``webhook=path``."""
        if self._runner is not None:
            raise RuntimeError("register webhooks before the server starts")
        if path in self._routes:
            raise ValueError(f"two webhooks are declared at {path}")
        self._routes[path] = instrumented(path, handler)

    def add_admission(self, webhook: AdmissionWebhook) -> None:
        handler = AdmissionHandler(webhook)
        if webhook.defaulter is not None:
            self.register(webhook.mutating_path, handler.mutate)
        if webhook.validator is not None:
            self.register(webhook.validating_path, handler.validate)

    def add_conversion(self, conversion: Conversion) -> None:
        self._conversions.add(conversion)
        if CONVERSION_PATH not in self._routes:
            self.register(CONVERSION_PATH, self._conversions.handle)

    def add(self, webhooks: Iterable[AdmissionWebhook] = (), conversions: Iterable[Conversion] = ()) -> None:
        """Register a controller's declarations (``ControllerDefinition.webhooks`` and
        ``.conversions``)."""
        for webhook in webhooks:
            self.add_admission(webhook)
        for conversion in conversions:
            self.add_conversion(conversion)

    async def start(self) -> None:
        """Load the certificate and listen; CertificateError or OSError (address taken) when
        it cannot. The certificate is then polled until :meth:`stop`."""
        options = self.options
        watcher = CertificateWatcher(
            options.cert_path, options.key_path, clock=self._clock, period=options.cert_poll_period
        )
        watcher.load()
        live = watcher.context

        def current(ssl_object: ssl.SSLObject, _name: str | None, context: ssl.SSLContext) -> None:
            # Called for every handshake, with or without SNI (OpenSSL's servername callback).
            if watcher.context is not context:
                ssl_object.context = watcher.context

        live.sni_callback = current
        app = web.Application(client_max_size=MAX_REQUEST_SIZE)
        for path, handler in self._routes.items():
            app.router.add_post(path, _endpoint(handler))
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, options.host or None, options.port, ssl_context=live)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner, self._watcher = runner, watcher
        self.port = int(runner.addresses[0][1]) if runner.addresses else options.port
        self._poll = asyncio.create_task(watcher.run(), name="webhook-certificate-poll")
        log.info(
            "serving webhooks %s on %s:%d over HTTPS, certificate from %s",
            ", ".join(self._routes), options.host or "*", self.port, options.cert_dir,
        )  # fmt: skip

    async def stop(self) -> None:
        """Stop polling and listening (requests in progress get aiohttp's shutdown grace)."""
        poll, self._poll = self._poll, None
        if poll is not None:
            poll.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poll
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def ready(self) -> str | None:
        """The readiness check (controller-runtime's StartedChecker): None once the certificate
        is loaded, the handlers registered and the socket listening, else why not."""
        if not self._routes:
            return "no webhook registered"
        if self._runner is None:
            return "the webhook server is not serving"
        return None


def _endpoint(handler: Handler) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def serve(request: web.Request) -> web.Response:
        body = await request.read()
        status, reply = await handler(body, request.headers.get("Content-Type", ""))
        return web.Response(status=status, body=reply, content_type="application/json")

    return serve
