"""The in-memory Kubernetes API server: aiohttp on 127.0.0.1 in front of a :class:`Store`.

memop (through kubernetes_asyncio) and kubectl talk to it over real HTTP. It serves the REST
verbs, watches, discovery and health endpoints with kube-apiserver's status codes and bodies,
logs every request (:attr:`ApiServer.log`) and lets tests inject faults (:attr:`ApiServer.faults`,
:meth:`drop_watches`, :meth:`silence_watches`, :meth:`compact`, :meth:`expire_watches`,
:meth:`restart`). Every request is authenticated and authorized as kube-apiserver does it
(:mod:`memop.testing.auth`, :attr:`ApiServer.auth`): the kubeconfig's token is an administrator's,
ServiceAccount tokens and RBAC act for everyone else, with kube-apiserver's 401 and 403.

Lifecycle: :meth:`start` binds (port 0 picks a free one, kept across :meth:`restart`),
:meth:`stop` closes every connection and awaits every task the server started. The bookmark
ticker and, when asked for, the simulated controllers and the root CA publisher (a
``kube-root-ca.crt`` ConfigMap in every namespace, as every cluster's kube-controller-manager
keeps) are the only background tasks.

Feature gates (``feature_gates``, ``serve --feature-gates``; :mod:`memop.testing.apiserver.featuregates`):
with ``ShardedListAndWatch`` on, as ``kube-apiserver --feature-gates=ShardedListAndWatch=true``,
LIST, WATCH and DELETE of a collection honour ``shardSelector``
(``shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')``, ranges of a
64-bit FNV-1a hash joined by ``||``; :mod:`memop.runtime.sharding.selector` renders them): only
the objects in the shard are listed, watched (initial events too) or deleted, pages are cut
among them, a built-in kind's list echoes ``metadata.shardInfo.selector`` (a custom resource's
list, a Table and a PartialObjectMetadataList do not, as on v1.36), and a selector that does
not parse gets a 500 ``invalid shard selector: ...`` before any watch stream starts. Off (the
default, as on a real server), the parameter is ignored, even a malformed one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from aiohttp import web
from kubernetes_asyncio.client import Configuration
from multidict import CIMultiDict

from memop.runtime.util.clock import Clock, RealClock
from memop.testing.apiserver import binding, discovery, featuregates, openapi, protobuf, tables
from memop.testing.apiserver.admissionwebhooks import Admission, AdmissionPending, Attributes, Webhooks
from memop.testing.apiserver.conversionwebhooks import ConversionPending, WatchCaches, conversion_of
from memop.testing.apiserver.errors import (
    ApiError,
    bad_request,
    internal_error,
    invalid,
    method_not_allowed,
    not_found_path,
    unsupported_media_type,
)
from memop.testing.apiserver.faults import Faults
from memop.testing.apiserver.objects import copy_json, forbidden, required
from memop.testing.apiserver.requestlog import AuditLogWriter, RequestInfo, RequestLog, RequestRecord
from memop.testing.apiserver.routing import check_scope, is_true, parse_request
from memop.testing.apiserver.store import APPLY_PATCH, DEFAULT_MANAGER, Entry, Served, Store
from memop.testing.apiserver.strategy import Kind
from memop.testing.apiserver.warningheaders import warning_headers
from memop.testing.apiserver.watch import Watcher, WatchHub, error_line
from memop.testing.apiserver.webhookclient import WebhookCalls
from memop.testing.auth.authn import ADMIN_TOKEN, UserInfo
from memop.testing.auth.filters import USER_KEY, Auth
from memop.testing.auth.reviews import REVIEW_RESOURCES, Reviews
from memop.testing.controllers.common import ControllerLimits
from memop.testing.controllers.rootca import PLACEHOLDER_CA, RootCAPublisher
from memop.testing.tls import ServingCertificates

if TYPE_CHECKING:
    from memop.testing.controllers import SimulatedControllers

log = logging.getLogger(__name__)

DEFAULT_WATCH_TIMEOUT = 1800.0  # kube-apiserver's --min-request-timeout
TOKEN = ADMIN_TOKEN  # the test client's: an administrator (memop.testing.auth.authn)
_JSON = "application/json"
_T = TypeVar("_T")
_MAX_PASSES = 16  # store runs of one request (each resolves an admission point or a conversion)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _manager(query: Any, user_agent: str) -> str:
    """The field manager: the fieldManager parameter, else the User-Agent's first token."""
    manager = query.get("fieldManager")
    if manager:
        return str(manager)[:128]
    return (user_agent.split("/", 1)[0] or DEFAULT_MANAGER)[:128]


def _json_response(body: bytes, status: int = 200, headers: Any = None) -> web.Response:
    return web.Response(body=body, status=status, content_type=_JSON, headers=headers)


class ApiServer:
    """An in-memory kube-apiserver for tests (an async context manager)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history_size: int = 10_000,
        bookmark_interval: float = 60.0,
        simulate_controllers: bool = False,
        pod_ready_delay: float = 0.0,
        clock: Clock | None = None,
        tls: bool = False,
        publish_root_ca: bool = False,
        controller_limits: ControllerLimits | None = None,
        nodes: bool = True,
        feature_gates: Mapping[str, bool] | None = None,
        audit_log: str | Path | None = None,
        extra_kinds: Iterable[Kind] = (),
    ) -> None:
        """``tls``: serve HTTPS with a certificate of a CA of its own (in :attr:`certificates`;
        the kubeconfig and :meth:`client_configuration` trust it), as every cluster does.

        ``simulate_controllers`` runs kube-controller-manager's controllers and kubelets
        (:mod:`memop.testing.controllers`), its root CA publisher included: a
        ``kube-root-ca.crt`` ConfigMap in every namespace, as in every cluster.
        ``publish_root_ca`` runs that publisher alone, for tests that must meet namespaces as a
        cluster has them with nothing else acting behind their backs.
        ``controller_limits`` (default: none, the simulated controllers write at once) paces
        them as kube-controller-manager's client rate limits do; ``nodes=False`` simulates a
        control plane with no node, whose pods stay Pending, unschedulable (see
        :class:`~memop.testing.controllers.simulated.SimulatedControllers`).

        ``feature_gates``: kube-apiserver's ``--feature-gates`` as a mapping (e.g.
        ``{"ShardedListAndWatch": True}``); only the gates :mod:`memop.testing.apiserver.featuregates`
        knows, others are a ValueError.

        ``audit_log``: also append every request to this file as kube-apiserver's audit log
        does (:class:`~memop.testing.apiserver.requestlog.AuditLogWriter`), a line per request answered.

        ``extra_kinds``: kinds served besides the built-in ones (:mod:`memop.testing.kinds`)."""
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.simulate_controllers = simulate_controllers
        self.publish_root_ca = publish_root_ca or simulate_controllers
        self.pod_ready_delay = pod_ready_delay
        self.controller_limits = controller_limits
        self.nodes = nodes
        self.feature_gates = featuregates.resolve(feature_gates)
        self._clock: Clock = clock or RealClock()
        self.store = Store(history_size=history_size, clock=self._clock, extra_kinds=extra_kinds)
        self.faults = Faults()
        # Authentication, RBAC and the review APIs (memop.testing.auth).
        self.auth = Auth(self.store, self._clock, insecure=not tls)
        self.reviews = Reviews(self.auth)
        self.log = RequestLog()
        self.audit_log = Path(audit_log) if audit_log is not None else None
        self._audit: AuditLogWriter | None = None
        self.watches = WatchHub(self.store)
        # Every admission and conversion webhook call (memop.testing.apiserver.webhookclient.WebhookCall).
        self.webhook_calls = WebhookCalls(service_ip=self._service_ip)
        self.admission_webhooks = Webhooks(self.store, self.webhook_calls, self._convert)
        # Every served version's watch cache of webhook-converted CRDs (conversionwebhooks).
        self.watch_caches = WatchCaches(self.store, self.webhook_calls)
        self.controllers: SimulatedControllers | None = None
        self.root_ca: RootCAPublisher | None = None
        self._runner: web.AppRunner | None = None
        self._bookmarks: asyncio.Task[None] | None = None
        self.certificates = ServingCertificates.generate() if tls else None
        self._ssl = self.certificates.server_context() if self.certificates else None
        self._ca_file: Path | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self._ssl else 'http'}://{self.host}:{self.port}"

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Listen (on a free port when ``port`` was 0) and start the background work."""
        if self._runner is not None:
            raise RuntimeError("the server is already started")
        if self.audit_log is not None and self._audit is None:
            self._audit = AuditLogWriter(self.audit_log)
        await self.auth.start()
        if self.publish_root_ca:
            # Before listening: the namespaces that exist have their kube-root-ca.crt by the
            # first request.
            ca_pem = self.certificates.ca_pem.decode() if self.certificates else PLACEHOLDER_CA
            self.root_ca = RootCAPublisher(self.store, ca_pem, clock=RealClock())
            await self.root_ca.start()
        await self._listen()
        self._bookmarks = asyncio.create_task(self._bookmark_ticker(), name="apiserver-bookmarks")
        if self.simulate_controllers:
            # Imported only when asked for: the simulation is optional and heavier to load.
            from memop.testing.controllers import SimulatedControllers  # noqa: PLC0415

            self.controllers = SimulatedControllers(
                self.store,
                pod_ready_delay=self.pod_ready_delay,
                limits=self.controller_limits,
                nodes=self.nodes,
            )
            await self.controllers.start()

    async def stop(self) -> None:
        """Close every connection and stop every task the server started."""
        await self.auth.stop()
        if self.root_ca is not None:
            await self.root_ca.stop()
            self.root_ca = None
        if self.controllers is not None:
            await self.controllers.stop()
            self.controllers = None
        if self._bookmarks is not None:
            self._bookmarks.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._bookmarks
            self._bookmarks = None
        await self.watch_caches.close()
        await self._close()
        if self._ca_file is not None:
            self._ca_file.unlink(missing_ok=True)
            self._ca_file = None
        if self._audit is not None:
            self._audit.close()
            self._audit = None

    @property
    def listening(self) -> bool:
        """Whether the port accepts connections (False before :meth:`start`, after :meth:`stop`
        and during the downtime of a :meth:`restart`)."""
        return self._runner is not None

    async def restart(self, *, downtime: float = 0.0, rebuild_watch_cache: bool = False) -> None:
        """Simulate a kube-apiserver restart: close every connection (watches break), then listen
        again on the same port. Returns once the server listens again.

        The objects, their resourceVersions and uids are always kept, as etcd keeps them; the
        background tasks (bookmarks, simulated controllers) keep running, like the cluster's
        other components, and may commit changes during the downtime.

        - ``downtime``: seconds (real time: clients see a real refused port) during which
          connections are refused, between the close and the new listen.
        - ``rebuild_watch_cache``: the restarted server's watch cache starts at the
          resourceVersion current when it listens again, so a watch (or a consistent list, or a
          continue token) from any older resourceVersion gets 410 Expired and its client must
          relist, while one from that resourceVersion or newer works (KEP 1904). This compacts
          the store, which also expires exact-version lists and continue tokens from before
          (a real server might still serve those from etcd until etcd compacts).
        - With neither (the default) the restart only closes connections: watches can resume
          from any resourceVersion still in the history.
        """
        if downtime < 0:
            raise ValueError("downtime must not be negative")
        await self._close()
        if downtime > 0:
            # A simulated outage, not a wait for state: the port stays closed this long.
            await asyncio.sleep(downtime)
        if rebuild_watch_cache:
            # At the new listen, not at the close: changes committed during the downtime were
            # in etcd before the watch cache was initialised, so they are not in its history.
            self.store.compact()
        await self._listen()

    async def _listen(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True, ssl_context=self._ssl)
        await site.start()
        if self.port == 0:
            server = getattr(site, "_server", None)
            sockets = getattr(server, "sockets", None) or []
            self.port = int(sockets[0].getsockname()[1])
        self._runner = runner

    async def _close(self) -> None:
        runner, self._runner = self._runner, None
        self.watches.drop_all()
        if runner is not None:
            await runner.cleanup()

    async def _bookmark_ticker(self) -> None:
        while True:
            await self._clock.sleep(self.bookmark_interval)
            self.watches.bookmark_all()

    # --- test controls ---------------------------------------------------------------------------

    async def drop_watches(self) -> int:
        """Abort every open watch connection (clients see a broken chunked stream)."""
        count = self.watches.drop_all()
        await asyncio.sleep(0)
        return count

    def silence_watches(self, silenced: bool) -> None:
        """While silenced, watches stay open but get no bytes at all; nothing is lost meanwhile."""
        self.watches.set_silenced(silenced)

    def compact(self) -> None:
        """Expire every resourceVersion so far: a watch or continue from any of them gets 410."""
        self.store.compact()

    async def expire_watches(self) -> int:
        """Send every open watch a 410 Expired ERROR event and end it."""
        count = self.watches.expire_all()
        await asyncio.sleep(0)
        return count

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig for this server (the administrator's bearer token, the CA with ``tls``,
        current context set)."""
        cluster: dict[str, str] = {"server": self.url}
        if self.certificates is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.certificates.ca_pem).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "memop-test", "cluster": cluster}],
            "users": [{"name": "memop-test", "user": {"token": TOKEN}}],
            "contexts": [
                {
                    "name": "memop-test",
                    "context": {"cluster": "memop-test", "user": "memop-test", "namespace": "default"},
                }
            ],
            "current-context": "memop-test",
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.kubeconfig(), sort_keys=False))

    def client_configuration(self, token: str = TOKEN) -> Configuration:
        """A kubernetes_asyncio Configuration pointing at this server, authenticating with
        ``token``: the administrator's by default, or one of :meth:`Reviews.add_token` or of a
        ServiceAccount (:meth:`service_account_token`)."""
        configuration = Configuration()
        configuration.host = self.url
        configuration.api_key = {"BearerToken": f"Bearer {token}"}  # what load_kube_config sets
        if self.certificates is not None:
            if self._ca_file is None:
                # ssl loads a CA only from a file; removed on stop.
                fd, name = tempfile.mkstemp(prefix="memop-test-ca-", suffix=".crt")
                with os.fdopen(fd, "wb") as out:
                    out.write(self.certificates.ca_pem)
                self._ca_file = Path(name)
            configuration.ssl_ca_cert = str(self._ca_file)
        return configuration

    def service_account_token(self, namespace: str, name: str, *, expiration: int = 3600) -> str:
        """A token of the ServiceAccount ``namespace/name`` (which must exist: KeyError
        otherwise), as its ``token`` subresource issues, valid ``expiration`` seconds."""
        storage = self.store.storage_for("", "serviceaccounts")
        entry = storage.get(namespace, name) if storage is not None else None
        if entry is None:
            raise KeyError(f"no ServiceAccount {namespace}/{name}")
        uid = str(entry.obj["metadata"]["uid"])
        return self.auth.authenticator.mint(namespace, name, uid, expiration=expiration).token

    # --- webhooks -------------------------------------------------------------------------------------

    def _service_ip(self, namespace: str, name: str) -> str | None:
        storage = self.store.storage_for("", "services")
        entry = storage.get(namespace, name) if storage is not None else None
        return None if entry is None else str((entry.obj.get("spec") or {}).get("clusterIP") or "")

    async def _convert(self, served: Served, obj: dict[str, Any], to_served: bool) -> dict[str, Any]:
        """``obj`` from storage form into ``served``'s version (``to_served``), or back."""
        convert = served.to_served if to_served else served.from_served
        if convert is None:
            return obj
        for _ in range(_MAX_PASSES):
            try:
                return convert(obj)
            except ConversionPending as pending:
                await pending.resolve(self.webhook_calls)
        raise internal_error("conversion did not settle")

    def _admission(
        self,
        request: web.Request,
        info: RequestInfo,
        namespace: str | None,
        dry_run: bool,
        body: Any = None,
    ) -> Admission | None:
        """The request's admission, None when no webhook configuration exists. ``body``: a
        create's, whose name is the request's (create.go)."""
        if not self.admission_webhooks.active:
            return None
        name = info.name
        if not name and isinstance(body, dict) and isinstance(body.get("metadata"), dict):
            name = str(body["metadata"].get("name") or "")
        if (info.group, info.resource) == ("", "namespaces"):
            # RequestInfo takes /namespaces/NAME as the namespace, and create.go sets a created
            # Namespace's name as it: a webhook sees request.namespace = the Namespace's name.
            namespace = name
        query = request.query
        options: dict[str, Any] = {}
        if dry_run:
            options["dryRun"] = ["All"]
        for key in ("fieldManager", "fieldValidation"):
            if query.get(key):
                options[key] = query[key]
        user: UserInfo = request[USER_KEY]
        attrs = Attributes(
            operation="",
            subresource=info.subresource,
            namespace=namespace or "",
            name=name,
            user=user.to_json(),
            dry_run=dry_run,
            options=options,
        )
        return self.admission_webhooks.admission(attrs)

    async def _run(
        self,
        call: Callable[[], _T],
        admission: Admission | None = None,
        batch: Callable[[], list[Mapping[str, Any]]] | None = None,
        warnings: list[str] | None = None,
    ) -> _T:
        """Run a store call until no admission point or conversion is pending (see
        memop.testing.apiserver.admissionwebhooks); ``batch``: the objects to convert together when one
        of them needs its conversion webhook (a list's). A failure carries the request's
        ``warnings`` and the webhooks' recorded so far, as kube-apiserver sends them with it."""
        try:
            for _ in range(_MAX_PASSES):
                try:
                    return call()
                except AdmissionPending as pending:
                    assert admission is not None
                    await admission.resolve(pending)
                except ConversionPending as pending:
                    await pending.resolve(self.webhook_calls, batch() if batch is not None else None)
            raise internal_error("admission did not settle")
        except ApiError as error:
            error.warnings = list(_admitted(warnings or [], admission))
            raise

    # --- request handling ---------------------------------------------------------------------------

    def _record(self, info: RequestInfo, user_agent: str, status: int, started: float) -> None:
        record = RequestRecord(
            time=started,
            verb=info.verb,
            group=info.group,
            version=info.version,
            resource=info.resource,
            subresource=info.subresource,
            namespace=info.namespace,
            name=info.name,
            user_agent=user_agent,
            status=status,
            path=info.path,
            resource_request=info.resource_request,
        )
        self.log.append(record)
        if self._audit is not None:
            self._audit.write(record)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = self._clock.time()
        info = parse_request(request.method, request.path, request.query)
        user_agent = request.headers.get("User-Agent", "")
        logged = False
        status = 500
        try:
            delay = self.faults.latency_for(info, user_agent)
            if delay > 0:
                await self._clock.sleep(delay)
            failure = self.faults.failure_for(info, user_agent)
            if failure is not None:
                status = failure.code
                return _json_response(_dumps(failure.status()), failure.code, failure.headers or None)
            user = request[USER_KEY] = self.auth.authenticate(request.headers)
            self.auth.authorize(user, info, request.query)
            if not info.resource_request:
                response = self._non_resource(request)
            elif info.verb == "watch":
                logged = True
                return await self._watch(request, info, user_agent, started)
            elif (info.group, info.resource) in REVIEW_RESOURCES and info.verb == "create":
                answer = self.reviews.answer(info, await self._body(request), user)
                response = _json_response(_dumps(answer), 201)
            elif (info.resource, info.subresource, info.verb) == ("serviceaccounts", "token", "create"):
                answer = self.auth.token_request(info, await self._body(request))
                response = _json_response(_dumps(answer), 201)
            elif binding.is_binding(info):
                dry_run = request.query.get("dryRun") == "All"
                answer = binding.create(self.store, info, await self._body(request), dry_run=dry_run)
                response = _json_response(_dumps(answer), 201)
            else:
                response = await self._resource(request, info, user_agent)
            status = response.status
            return response
        except ApiError as error:
            status = error.code
            headers = _with_warnings(error.headers, error.warnings)
            return _json_response(_dumps(error.status()), error.code, headers)
        except ConnectionResetError:
            # The client went away before its request's body arrived (an operator stopped
            # mid-request): nobody will read an answer, and it is no fault of the server's.
            log.info("request %s %s: the client closed the connection first", request.method, request.path)
            failure = internal_error("the client closed the connection before its request's body arrived")
            return _json_response(_dumps(failure.status()), 500)
        except Exception as error:
            log.exception("request %s %s failed", request.method, request.path)
            failure = internal_error(f"{type(error).__name__}: {error}")
            return _json_response(_dumps(failure.status()), 500)
        finally:
            if not logged:
                self._record(info, user_agent, status, started)

    def _non_resource(self, request: web.Request) -> web.Response:
        path = request.path.rstrip("/") or "/"
        rtypes = self.store.resources()
        scalable = {
            s.rtype for s in self.store.all_served() if s.storage.strategy.scale_paths(s.rtype) is not None
        }
        if path == "/version":
            return _json_response(_dumps(discovery.VERSION))
        if path in ("/healthz", "/readyz", "/livez") or path.startswith(("/healthz/", "/readyz/", "/livez/")):
            return web.Response(text="ok", content_type="text/plain")
        if path in ("/api", "/apis") and discovery.wants_aggregated(request.headers.get("Accept", "")):
            aggregated_doc = discovery.aggregated(rtypes, path == "/api", scalable)
            headers = {"Content-Type": discovery.AGGREGATED_MEDIA_TYPE, "Vary": "Accept"}
            return web.Response(body=_dumps(aggregated_doc), headers=headers)
        if path == "/api":
            return _json_response(_dumps(discovery.api_versions(f"{self.host}:{self.port}")))
        if path == "/apis":
            return _json_response(_dumps(discovery.api_group_list(rtypes)))
        if path == "/openapi/v3":
            return _json_response(_dumps(openapi.root(rtypes)))
        if path.startswith("/openapi/v3/"):
            spec = openapi.group_version(rtypes, path[len("/openapi/v3/") :])
            if spec is None:
                raise not_found_path()
            return _json_response(_dumps(spec))
        parts = path.strip("/").split("/")
        doc: dict[str, Any] | None = None
        if parts[0] == "api" and len(parts) == 2:
            doc = discovery.resource_list(rtypes, "", parts[1], scalable)
        elif parts[0] == "apis" and len(parts) == 2:
            doc = discovery.api_group(rtypes, parts[1])
        elif parts[0] == "apis" and len(parts) == 3:
            doc = discovery.resource_list(rtypes, parts[1], parts[2], scalable)
        elif parts[0] in ("api", "apis"):
            raise not_found_path()
        if doc is None:
            if parts[0] in ("api", "apis"):
                raise not_found_path()
            return web.Response(status=404, text="404 page not found\n", content_type="text/plain")
        return _json_response(_dumps(doc))

    async def _body(self, request: web.Request) -> Any:
        content_type = request.content_type
        if content_type not in ("application/json", "application/yaml", protobuf.MEDIA_TYPE):
            # CBOR is not decoded (no client sends it unasked).
            raise unsupported_media_type(["application/json", "application/yaml", protobuf.MEDIA_TYPE])
        raw = await request.read()
        if not raw:
            raise bad_request("the body of the request was empty")
        if content_type == protobuf.MEDIA_TYPE:
            # kubectl create of a built-in kind sends protobuf: read as the JSON it stands for.
            try:
                return protobuf.decode(raw)
            except protobuf.UndecodableProtobuf as error:
                raise ApiError(415, "UnsupportedMediaType", str(error)) from None
            except protobuf.MalformedProtobuf as error:
                raise bad_request(str(error)) from None
        try:
            if content_type == "application/yaml":
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as error:
            raise bad_request(f"couldn't get version/kind; json parse error: {error}") from None

    async def _resource(self, request: web.Request, info: RequestInfo, user_agent: str) -> web.Response:
        store = self.store
        served = store.served(info.group, info.version, info.resource)
        check_scope(info, namespaced=served.rtype.namespaced, builtin=served.storage.strategy.builtin)
        query = request.query
        namespace = info.namespace or None
        if served.rtype.namespaced and info.resource == "namespaces":
            namespace = None
        if not served.rtype.namespaced:
            namespace = None
        verb = info.verb
        manager = _manager(query, user_agent)
        dry_run = query.get("dryRun") == "All"
        validation = query.get("fieldValidation") or None
        warnings: list[str] = []
        if info.subresource == "scale":
            return await self._scale(request, served, namespace, info, manager=manager, dry_run=dry_run)
        if info.subresource and info.subresource not in ("status", "finalize"):
            raise not_found_path()
        if verb == "get":
            if info.subresource == "finalize":
                raise method_not_allowed()
            store.check_subresource(served, info.subresource or None)
            # Without a resourceVersion kube-apiserver reads from storage, past the watch cache.
            if query.get("resourceVersion"):
                read = await self.watch_caches.listed(served)
            else:
                read = self.watch_caches.got(served)
            entry = await self._run(lambda: store.read(read, namespace, info.name))
            table = self._table_writer(request, served)
            if table is not None:
                meta = {"resourceVersion": entry.obj["metadata"].get("resourceVersion")}
                return _json_response(table.table([entry], meta))
            return self._entry_response(entry)
        if verb == "list":
            table = self._table_writer(request, served)
            listed = await self.watch_caches.listed(served)
            return await self._run(
                lambda: self._list(listed, namespace, query, table),
                batch=lambda: [e.obj for e in self._scope_entries(served, namespace)],
            )
        if verb == "create":
            if info.subresource or (served.rtype.namespaced and not info.namespace):
                raise method_not_allowed()
            body = await self._body(request)
            admission = self._admission(request, info, namespace, dry_run, body)
            copies = admission is not None or served.webhook_conversion
            guarded = self.auth.guard(request[USER_KEY], info, admission)

            def create() -> Entry:
                warnings.clear()
                return store.write_create(
                    served,
                    namespace,
                    copy_json(body) if copies else body,
                    manager=manager,
                    dry_run=dry_run,
                    field_validation=validation,
                    warnings=warnings,
                    admission=guarded,
                )

            entry = await self._run(create, admission, warnings=warnings)
            return self._entry_response(entry, 201, _admitted(warnings, admission))
        if verb == "update":
            body = await self._body(request)
            admission = self._admission(request, info, namespace, dry_run)
            copies = admission is not None or served.webhook_conversion
            guarded = self.auth.guard(request[USER_KEY], info, admission)

            created = False

            def update() -> Entry:
                nonlocal created
                warnings.clear()
                key = (namespace or "") if served.rtype.namespaced else ""
                created = served.storage.get(key, info.name) is None  # a create on update: 201
                return store.write_update(
                    served,
                    namespace,
                    info.name,
                    copy_json(body) if copies else body,
                    subresource=info.subresource or None,
                    manager=manager,
                    dry_run=dry_run,
                    field_validation=validation,
                    warnings=warnings,
                    admission=guarded,
                )

            entry = await self._run(update, admission, warnings=warnings)
            return self._entry_response(entry, 201 if created else 200, _admitted(warnings, admission))
        if verb == "patch":
            content_type = request.headers.get("Content-Type", "")
            patch_type = content_type.split(";", 1)[0].strip().lower()
            store.check_patch_type(served, patch_type)
            raw = await request.read()
            admission = self._admission(request, info, namespace, dry_run)
            guarded = self.auth.guard(request[USER_KEY], info, admission)
            if patch_type == APPLY_PATCH:

                def apply() -> tuple[Entry, bool]:
                    warnings.clear()
                    return store.write_apply(
                        served,
                        namespace,
                        info.name,
                        raw,
                        manager=str(query.get("fieldManager") or "")[:128],
                        force=is_true(query.get("force")),
                        subresource=info.subresource or None,
                        dry_run=dry_run,
                        field_validation=validation,
                        warnings=warnings,
                        admission=guarded,
                    )

                entry, created = await self._run(apply, admission, warnings=warnings)
                return self._entry_response(entry, 201 if created else 200, _admitted(warnings, admission))
            if "force" in query:
                error = forbidden("force", "may not be specified for non-apply patch")
                raise invalid("meta.k8s.io", "PatchOptions", "", [error])

            def patch() -> Entry:
                warnings.clear()
                return store.write_patch(
                    served,
                    namespace,
                    info.name,
                    raw,
                    content_type,
                    subresource=info.subresource or None,
                    manager=manager,
                    dry_run=dry_run,
                    field_validation=validation,
                    warnings=warnings,
                    admission=guarded,
                )

            entry = await self._run(patch, admission, warnings=warnings)
            return self._entry_response(entry, 200, _admitted(warnings, admission))
        if verb == "delete":
            if info.subresource:
                raise method_not_allowed()
            options = await self._delete_options(request)
            admission = self._admission(request, info, namespace, dry_run)
            if admission is not None:
                admission.attrs.delete_options = _delete_options(options)
            result = await self._run(
                lambda: store.write_delete(
                    served, namespace, info.name, dry_run=dry_run, admission=admission, **options
                ),
                admission,
            )
            if result.finished and not served.storage.strategy.return_deleted_object:
                meta = result.entry.obj["metadata"]
                details: dict[str, Any] = {"name": meta["name"]}
                if served.rtype.group:
                    details["group"] = served.rtype.group
                details["kind"] = served.rtype.plural
                details["uid"] = meta.get("uid")
                body = {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": details,
                }
                return _json_response(_dumps(body), 200, _with_warnings(None, _admitted([], admission)))
            return self._entry_response(result.entry, 200, _admitted([], admission))
        if verb == "deletecollection":
            return await self._delete_collection(request, served, namespace, dry_run)
        raise method_not_allowed()

    async def _scale(
        self,
        request: web.Request,
        served: Served,
        namespace: str | None,
        info: RequestInfo,
        *,
        manager: str,
        dry_run: bool,
    ) -> web.Response:
        store = self.store
        if info.verb == "get":
            return self._entry_response(store.read_scale(served, namespace, info.name))
        if info.verb == "update":
            body = await self._body(request)
            return self._entry_response(
                store.write_scale(served, namespace, info.name, body, manager=manager, dry_run=dry_run)
            )
        if info.verb == "patch":
            patch_type = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
            store.check_patch_type(served, patch_type)
            raw = await request.read()
            return self._entry_response(
                store.write_scale(
                    served, namespace, info.name, raw, patch_type=patch_type, manager=manager, dry_run=dry_run
                )
            )
        raise method_not_allowed()

    def _entry_response(
        self, entry: Entry, status: int = 200, warnings: list[str] | None = None
    ) -> web.Response:
        return _json_response(entry.json(), status, _with_warnings(None, warnings))

    def _scope_entries(self, served: Served, namespace: str | None) -> list[Entry]:
        """The objects a list of ``served`` in ``namespace`` (None: all) may hold."""
        storage = served.storage
        if namespace is not None and served.rtype.namespaced:
            return list((storage.objects.get(namespace) or {}).values())
        return list(self.store.objects(storage))

    def _list_bytes(self, served: Served, entries: list[Entry], meta: dict[str, Any]) -> bytes:
        builtin = served.storage.strategy.builtin
        items = b",".join(e.item_json(builtin) for e in entries)
        rtype = served.rtype
        return (
            b'{"kind":'
            + _dumps(rtype.list_kind)
            + b',"apiVersion":'
            + _dumps(rtype.api_version)
            + b',"metadata":'
            + _dumps(meta)
            + b',"items":['
            + items
            + b"]}"
        )

    def _shard_selector(self, query: Mapping[str, str]) -> str | None:
        """The request's shardSelector when the gate is on; with it off the server never reads
        the parameter, so even a malformed one changes nothing."""
        if not self.feature_gates[featuregates.SHARDED_LIST_AND_WATCH]:
            return None
        return query.get("shardSelector") or None

    def _table_writer(self, request: web.Request, served: Served) -> tables.TableWriter | None:
        """How to answer as a Table, when the request asks for one (see memop.testing.apiserver.tables)."""
        accept = request.headers.get("Accept")
        return tables.table_writer(self.store, served, accept, request.query, self._clock.time)

    def _list(
        self, served: Served, namespace: str | None, query: Any, table: tables.TableWriter | None = None
    ) -> web.Response:
        limit_text = query.get("limit")
        try:
            limit = int(limit_text) if limit_text else None
        except ValueError:
            raise bad_request(f"invalid limit: {limit_text}") from None
        result = self.store.read_list(
            served,
            namespace,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            limit=limit,
            continue_token=query.get("continue"),
            resource_version=query.get("resourceVersion"),
            resource_version_match=query.get("resourceVersionMatch"),
            shard_selector=self._shard_selector(query),
        )
        meta: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining:
            meta["remainingItemCount"] = result.remaining
        if result.shard is not None and served.storage.strategy.builtin and table is None:
            # Only typed lists (ListMeta's SetShardInfo) echo it: a custom resource's
            # UnstructuredList does not, nor does a Table, which copies the list's metadata
            # field by field.
            meta["shardInfo"] = {"selector": str(result.shard)}
        if table is not None:
            return _json_response(table.table(result.entries, meta))
        return _json_response(self._list_bytes(served, result.entries, meta))

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        query = request.query
        body: Any = {}
        if request.can_read_body:
            raw = await request.read()
            if raw.strip():
                try:
                    body = json.loads(raw)
                except ValueError as error:
                    raise bad_request(f"couldn't get version/kind; json parse error: {error}") from None
        if not isinstance(body, dict):
            raise bad_request("the body of a delete must be a DeleteOptions object")
        policy = body.get("propagationPolicy") or query.get("propagationPolicy")
        orphan = body.get("orphanDependents")
        if orphan is None and query.get("orphanDependents") is not None:
            orphan = is_true(query.get("orphanDependents"))
        if policy is None and orphan is not None:
            policy = "Orphan" if orphan else "Background"
        preconditions = body.get("preconditions") if isinstance(body.get("preconditions"), dict) else None
        return {"propagation_policy": policy, "preconditions": preconditions}

    async def _delete_collection(
        self, request: web.Request, served: Served, namespace: str | None, dry_run: bool
    ) -> web.Response:
        options = await self._delete_options(request)
        query = request.query
        result = self.store.read_list(
            served,
            namespace,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            # The registry's DeleteCollection lists with the request's ListOptions, shard and all.
            shard_selector=self._shard_selector(query),
        )
        warnings: list[str] = []  # one recorder for the request: every delete's webhooks'
        for entry in result.entries:
            meta = entry.obj["metadata"]
            admission = self._admission(
                request, RequestInfo(verb="delete", path=request.path), namespace, dry_run
            )
            if admission is not None:
                # AdmissionToValidateObjectDeleteFunc: the request's attributes, no name.
                admission.attrs.delete_options = _delete_options(options)
            try:
                await self._run(
                    lambda meta=meta, admission=admission: self.store.write_delete(  # type: ignore[misc]
                        served,
                        meta.get("namespace"),
                        str(meta["name"]),
                        dry_run=dry_run,
                        admission=admission,
                        **options,
                    ),
                    admission,
                )
            except ApiError as error:
                # Store.DeleteCollection (one worker, kube-apiserver's default): an object gone
                # meanwhile is skipped; any other failure ends the request, the rest undeleted.
                if error.code != 404:
                    error.warnings = [*warnings, *error.warnings]
                    raise
            warnings.extend(_admitted([], admission))
        meta_out = {"resourceVersion": str(result.resource_version)}
        body = self._list_bytes(served, result.entries, meta_out)
        return _json_response(body, 200, _with_warnings(None, warnings))

    # --- watch ---------------------------------------------------------------------------------------

    async def _watch(
        self, request: web.Request, info: RequestInfo, user_agent: str, started: float
    ) -> web.StreamResponse:
        try:
            served = self.store.served(info.group, info.version, info.resource)
            check_scope(info, namespaced=served.rtype.namespaced, builtin=served.storage.strategy.builtin)
            query = request.query
            namespace = info.namespace if served.rtype.namespaced and info.namespace else None
            field_selector = query.get("fieldSelector")
            if info.name:
                pin = f"metadata.name={info.name}"
                field_selector = f"{field_selector},{pin}" if field_selector else pin
            timeout_text = query.get("timeoutSeconds")
            try:
                timeout = float(timeout_text) if timeout_text else DEFAULT_WATCH_TIMEOUT
            except ValueError:
                raise bad_request(f"invalid timeoutSeconds: {timeout_text}") from None
            send_initial_text = query.get("sendInitialEvents")
            send_initial = None if send_initial_text is None else is_true(send_initial_text)
            bookmarks = is_true(query.get("allowWatchBookmarks"))
            if send_initial is not None:
                self._check_watch_list(send_initial, bookmarks, query.get("resourceVersionMatch"))
            table = self._table_writer(request, served)
            watched, transform = served, None
            conversion = conversion_of(served) if served.webhook_conversion else None
            if conversion is not None:
                # Watched in the storage version, each batch of events converted as it is written.
                storage = served.storage
                watched = storage.served.get(storage.rtype.version) or Served(storage.rtype, storage)
                api_version = served.rtype.api_version

                async def transform(data: bytes) -> bytes:
                    return await self._convert_events(conversion, api_version, data)

            try:
                watcher: Watcher | None = self.watches.open(
                    watched,
                    namespace,
                    label_selector=query.get("labelSelector"),
                    field_selector=field_selector,
                    resource_version=query.get("resourceVersion"),
                    allow_bookmarks=bookmarks,
                    send_initial_events=send_initial,
                    encoder=table,
                    shard_selector=self._shard_selector(query),
                    user_agent=user_agent,
                )
                expired = None
            except ApiError as error:
                if error.code != 410:
                    raise
                watcher, expired = None, error
        except ApiError as error:
            self._record(info, user_agent, error.code, started)
            return _json_response(_dumps(error.status()), error.code, error.headers or None)
        self._record(info, user_agent, 200, started)
        response = web.StreamResponse(status=200, headers={"Content-Type": _JSON})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if watcher is None:
            assert expired is not None
            await response.write(error_line(expired))
            await response.write_eof()
            return response
        watcher.transport = request.transport
        try:
            await self._stream(response, watcher, timeout, transform)
        finally:
            self.watches.close(watcher)
        return response

    def _check_watch_list(self, send_initial: bool, bookmarks: bool, match: str | None) -> None:
        errors = []
        if match != "NotOlderThan":
            errors.append(
                forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )
            )
        if send_initial and not bookmarks:
            errors.append(
                required(
                    "allowWatchBookmarks",
                    "allowWatchBookmarks must be set to true when sendInitialEvents is specified",
                )
            )
        if errors:
            raise invalid("meta.k8s.io", "ListOptions", "", errors)

    async def _convert_events(self, conversion: Any, api_version: str, data: bytes) -> bytes:
        """Watch lines (storage version) with their objects in ``api_version``: one
        ConversionReview for the batch; ApiError when the webhook fails."""
        events = [json.loads(line) for line in data.splitlines() if line.strip()]
        changes = [e for e in events if e.get("type") in ("ADDED", "MODIFIED", "DELETED")]
        converted = await conversion.convert_cached(
            [e["object"] for e in changes], api_version, self.webhook_calls
        )
        for event, obj in zip(changes, converted, strict=True):
            event["object"] = obj
        out = []
        for event in events:
            obj = event.get("object")
            if event.get("type") == "BOOKMARK" and isinstance(obj, dict):
                obj["apiVersion"] = api_version
            out.append(json.dumps(event, separators=(",", ":")).encode() + b"\n")
        return b"".join(out)

    async def _stream(
        self,
        response: web.StreamResponse,
        watcher: Watcher,
        timeout: float,
        transform: Callable[[bytes], Awaitable[bytes]] | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        hub = self.watches
        timed_out = False

        def time_out() -> None:
            nonlocal timed_out
            timed_out = True
            watcher.wake()

        # One timer for the stream's whole life: a timer per wait would cost a heap entry for
        # every event written.
        timer = loop.call_later(timeout, time_out)
        try:
            while not watcher.dropped:
                if watcher.queue and not hub.silenced:
                    # Like the apiserver, which flushes only once its event channel is empty: let
                    # the changes committed in this turn of the loop join the write.
                    await asyncio.sleep(0)
                    if watcher.dropped or hub.silenced:
                        continue
                    data = watcher.take()
                    if transform is not None:
                        try:
                            data = await transform(data)
                        except ApiError as error:
                            # As kube-apiserver's encoder error: logged, and the watch ends.
                            log.error("Failed to encode watch event: %s", error.message)
                            break
                    try:
                        await response.write(data)
                    except (ConnectionError, RuntimeError):
                        return
                    continue
                if hub.silenced:
                    # A silenced server keeps the stream open past its timeout, like a hung one.
                    await watcher.wait()
                elif watcher.closing or timed_out:
                    break
                else:
                    await watcher.wait()
        finally:
            timer.cancel()
        if watcher.dropped:
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            await response.write_eof()


def _with_warnings(headers: Mapping[str, str] | None, warnings: list[str] | None) -> Any:
    """``headers`` and the ``Warning`` headers of ``warnings`` (memop.testing.apiserver.warningheaders),
    None when there are none."""
    values = warning_headers(warnings) if warnings else []
    if not values:
        return headers or None
    out: CIMultiDict[str] = CIMultiDict(headers or {})
    for value in values:
        out.add("Warning", value)
    return out


def _admitted(warnings: list[str], admission: Admission | None) -> list[str]:
    """The request's warnings, the admission webhooks' after the server's own."""
    if admission is None or not admission.warnings:
        return warnings
    return [*warnings, *admission.warnings]


def _delete_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The DeleteOptions fields a delete's review carries."""
    out: dict[str, Any] = {}
    if options.get("propagation_policy"):
        out["propagationPolicy"] = options["propagation_policy"]
    if options.get("preconditions"):
        out["preconditions"] = options["preconditions"]
    return out
