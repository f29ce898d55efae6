"""A thin async Kubernetes client: plain dicts in and out, typed errors, timeouts, retries, metrics.

:class:`Client` speaks REST to the API server with the settings of a caller-owned
``kubernetes_asyncio.client.ApiClient`` (TLS client certificates, proxy settings and
bearer-token auth, including token refresh from a kubeconfig or the in-cluster service
account). Requests and watches go through memop's own kept-alive HTTP/1.1 connections
(:mod:`memop.runtime.client.http1`, a third of aiohttp's CPU per request), or through the
ApiClient's aiohttp session when a proxy applies. It addresses objects by
:class:`memop.runtime.client.resources.Resource` and never
builds the generated model classes: a response is its body decoded as JSON
(:mod:`memop.runtime.util.jsoncodec`; a Deployment costs ~0.07 ms that way against ~1 ms
through the models).

Invariants, for every request it sends:

- it has a deadline: ``timeout`` seconds for a normal call (connecting, sending, reading the
  whole answer); for a watch, ``timeout`` to connect and ``read_timeout`` between two bytes;
- a failure surfaces as a :mod:`memop.runtime.client.errors` type: the server's ``Status`` as an
  :class:`~memop.runtime.client.errors.ApiError` subclass (``Retry-After`` in ``retry_after``), no
  answer at all as :class:`~memop.runtime.client.errors.TransportError`;
- it is counted in ``rest_client_requests_total{code,method,host}`` (``code`` is
  ``"<error>"`` when no answer came, as in client-go) and, except watches, timed in
  ``rest_client_request_duration_seconds{verb,host}``; every retry attempt counts;
- it carries ``User-Agent: <user_agent>`` when one was given;
- with ``qps`` set, it first takes a token from a client-side bucket (watches excepted, as
  they are long-lived and few);
- to one object (its path, or its subresource's), it is not sent sooner than the server
  asked: after an answer there with ``Retry-After`` (a 429, or a 5xx carrying one), every
  request to that path waits until that time has passed, whichever call sends it. So a new
  call after one cancelled while it waited for its retry (its caller's deadline, a shutdown)
  still waits the rest. Collection paths are shared by unrelated callers (a reflector's LIST
  and WATCH, every worker's creates): there only the call's own retries wait, and the
  reflector applies Retry-After to its next LIST or WATCH itself.

Retries (see :class:`Client` for the exact rule) happen here, bounded and with jittered
exponential backoff, only for calls that are safe to repeat. Everything above (reflectors,
workqueues) still sees the failure when the retries run out and applies its own backoff.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
import random
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from email.utils import parsedate_to_datetime
from typing import Any, Literal, NamedTuple
from urllib.parse import quote, urlencode, urlsplit
from urllib.request import getproxies_environment, proxy_bypass

import aiohttp
from kubernetes_asyncio.client import ApiClient
from prometheus_client import Counter
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from yarl import URL

from memop.runtime.client import watchstream
from memop.runtime.client.errors import (
    ApiError,
    ConnectError,
    TooManyRequests,
    TransportError,
    at_least_retry_after,
    error_from_status,
    is_retryable,
)
from memop.runtime.client.http1 import Http1ConnectError, Http1Error, Http1Pool, Http1Stream
from memop.runtime.client.reachability import Reachability
from memop.runtime.client.resources import Resource
from memop.runtime.metrics import REST_CLIENT_REQUEST_DURATION, REST_CLIENT_REQUESTS, WATCH_RECEIVED_BYTES
from memop.runtime.util import jsoncodec
from memop.runtime.util.clock import Clock, RealClock, first_of
from memop.runtime.util.tokenbucket import TokenBucket

log = logging.getLogger("memop.client")

PatchType = Literal["merge", "json", "strategic"]

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}

# Server-side apply; the body is JSON, which is YAML.
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"

# client-go's DefaultBurst, used when only qps is given.
DEFAULT_BURST = 10
# Backoff between retries: attempt n waits a uniformly jittered value in [c/2, c] where
# c = min(RETRY_MAX_DELAY, RETRY_BASE_DELAY * 2**(n-1)), or the server's Retry-After if longer.
# Short on purpose: these retries absorb blips; longer outages are the callers' backoff's job.
RETRY_BASE_DELAY = 0.1
RETRY_MAX_DELAY = 5.0

_EXCERPT = 200
_METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Write answers whose JSON answer_json keeps. A caller records an answer right after the call
# returns it (nothing else runs in between unless it awaits), so a few suffice; each holds an
# object and its JSON alive.
_RECENT_ANSWERS = 16
_JSON_WHITESPACE = frozenset(b" \t\r\n")
# What Reachability asks (a failure to reach it is the probe's own to count).
_PROBE_PATH = "/readyz"
# Expired Retry-After holds are dropped when a new one finds this many paths held.
_NOT_BEFORE_PRUNE_AT = 256
# The auth scheme kubernetes_asyncio's generated APIs ask for: a bearer token from
# configuration.api_key (refreshed through configuration.refresh_api_key_hook).
_AUTH_SETTINGS = ["BearerToken"]
# The read buffer of kubernetes_asyncio's session: watch events can carry objects up to etcd's
# 1.5 MiB request limit, beyond aiohttp's default buffer.
_READ_BUFFER = 2**21

Query = Sequence[tuple[str, str]]
# An alias, because inside Client ``list`` names the LIST verb, not the builtin.
ObjectList = list[dict[str, Any]]
# A request's query parameters, as the auth settings may extend them.
_Params = list[tuple[str, str]]


class _RetryWhen(enum.Enum):
    # Repeating the call cannot do anything a single call would not: retry on any
    # is_retryable failure.
    RETRYABLE = "retryable"
    # Repeating the call might apply it twice: retry only when the server certainly did
    # not act on it (429, or the connection was never opened).
    NOT_APPLIED = "not-applied"


def _use_a_lean_session(api_client: ApiClient, base_url: str) -> None:
    """Give the ApiClient an aiohttp session that does per request only what a Kubernetes
    client needs, and the pool of HTTP/1.1 connections that carries memop's requests.

    kubernetes_asyncio builds its session with ``trust_env=True`` and a cookie jar:

    - with ``trust_env``, before every request aiohttp reads ``~/.netrc`` and the proxy
      variables, each in a worker thread: two thread hand-offs per call, which were over a third
      of memop's CPU in bench/converge.py. Our host never changes, so the proxy question has one
      answer, asked here once: when a proxy variable applies to the API server, the new session
      keeps ``trust_env`` (aiohttp then sends through that proxy, as client-go would).
      ``~/.netrc`` is not a source of Kubernetes credentials (client-go never reads it), and a
      ``~/.netrc`` entry for the API server's host would even break every request: aiohttp
      refuses to combine its credentials with our Authorization header (a ValueError);
    - the cookie jar filters cookies for every request and stores those of every answer: a
      tenth of a request's instructions (callgrind). client-go's HTTP client has no cookie jar,
      so a cookie an API server or a proxy in front of it sets is never sent back; the new
      session has none either (``DummyCookieJar``).

    Everything else is kept: the TLS context and connection limit kubernetes_asyncio derives
    from the configuration (built again here, by the same rules, see :func:`_tls_context`), the
    read buffer it sizes for large watch events. The new connector also holds the
    :class:`~memop.runtime.client.http1.Http1Pool` that sends every request, watches included,
    when no proxy applies (a third of aiohttp's CPU per request), so closing the ApiClient
    closes both.
    The old session, never used, is detached and its connector closed. tests/runtime/
    test_client_env.py pins the behaviour. A session made here (the only kind with a
    ``DummyCookieJar``) is left alone, so several Clients may share one ApiClient.
    """
    rest = getattr(api_client, "rest_client", None)
    session = getattr(rest, "pool_manager", None)
    if not isinstance(session, aiohttp.ClientSession):
        return
    if isinstance(session.cookie_jar, aiohttp.DummyCookieJar):
        return
    old_connector = session.connector
    if old_connector is None or session.closed:
        return
    configuration = api_client.configuration
    url = urlsplit(base_url)
    proxies = getproxies_environment()
    proxied = url.scheme in proxies and not proxy_bypass(url.hostname or "")
    tls = _tls_context(configuration) if url.scheme == "https" else None
    limit = old_connector.limit
    http1 = None
    if not proxied and not getattr(rest, "proxy", None) and url.scheme in ("http", "https") and url.hostname:
        http1 = Http1Pool(
            url.hostname,
            url.port or (443 if url.scheme == "https" else 80),
            ssl_context=tls,
            server_hostname=getattr(rest, "server_hostname", None),
            limit=limit or 100,
        )
    connector = _Connector(http1=http1, limit=limit, ssl=tls if tls is not None else True)
    lean = aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=proxied,
        read_bufsize=_READ_BUFFER,
    )
    session.detach()
    _close_soon(old_connector)
    assert rest is not None
    rest.pool_manager = lean


class _Connector(aiohttp.TCPConnector):
    """aiohttp's connector (used when a proxy applies), which also owns memop's HTTP/1.1
    pool: the ApiClient's close closes its session, the session this connector, and this the
    pool."""

    def __init__(self, *, http1: Http1Pool | None, **options: Any) -> None:
        super().__init__(**options)
        self.http1 = http1

    async def close(self, **options: Any) -> None:
        # Whatever options this aiohttp's close takes (abort_ssl since 3.12), passed on.
        if self.http1 is not None:
            await self.http1.close()
        await super().close(**options)


def _tls_context(configuration: Any) -> ssl.SSLContext:
    """The TLS context kubernetes_asyncio's RESTClientObject builds from a configuration: its
    CA bundle, client certificate and verification settings."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if getattr(configuration, "disable_strict_ssl_verification", False):
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


# Closing an unused connector is a coroutine; the tasks are held here until they end.
_CLOSING: set[asyncio.Task[None]] = set()


def _close_soon(connector: aiohttp.BaseConnector) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        # No loop runs (a Client made outside one): the unused connector holds no connection.
        return
    task: asyncio.Task[None] = loop.create_task(_closed(connector))
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)


async def _closed(connector: aiohttp.BaseConnector) -> None:
    await connector.close()


async def _chunks(stream: Http1Stream) -> AsyncGenerator[bytes, None]:
    while chunk := await stream.readany():
        yield chunk


class _Answer(NamedTuple):
    """A whole answer, from either path."""

    status: int
    reason: str
    retry_after: str | None
    body: bytes


class Unreachable(ConnectError):
    """Not sent: the API server has not answered anyone for the whole wait (see
    :attr:`Client.reachability`). Not retried here: the wait was the retry."""


def _worth_retrying(when: _RetryWhen, error: BaseException) -> bool:
    if isinstance(error, Unreachable):
        return False
    if when is _RetryWhen.RETRYABLE:
        return is_retryable(error)
    return isinstance(error, TooManyRequests | ConnectError)


def _retry_predicate(when: _RetryWhen) -> retry_if_exception:
    return retry_if_exception(lambda error: _worth_retrying(when, error))


class Client:
    """Kubernetes REST verbs on plain dicts, over a caller-owned ``ApiClient``.

    Constructor arguments:

    - ``api_client``: supplies the session, TLS, proxy, host and auth; it stays the caller's
      to close.
    - ``user_agent``: the User-Agent of every request (e.g. ``"memop/0.1.0 (pod-abc)"``), so
      the server's request log and audit log name us; None keeps the ApiClient's.
    - ``timeout``: seconds a normal call may take in total (30 s, a generous bound for a
      single object write; large lists are paginated).
    - ``qps`` / ``burst``: a client-side token bucket in front of every request but watches;
      None disables it (the default: the server's API Priority and Fairness answers 429 when
      we ask too much, which is retried). ``burst`` defaults to 10 (client-go's default) and
      means nothing without ``qps``.
    - ``max_retries``: retries after the first attempt (so at most ``max_retries + 1``
      attempts); 0 disables retrying.
    - ``clock``: the clock retries and the token bucket sleep on (tests pass a FakeClock).
    - ``rand``: the source of backoff jitter (tests pass a seeded Random).

    Retry rule. A failed attempt is retried (within ``max_retries``) when ``is_retryable``
    says it may succeed — TooManyRequests, ServerError, TransportError — and repeating the
    call is safe:

    - get, list (every page of list_all), update and update_status (PUT: the whole object
      or status is replaced by the same content), delete and delete_collection, merge and
      strategic-merge patches and server-side applies (all idempotent: applying one twice
      gives what applying it once gives) are retried on every retryable failure;
    - JSON patches are retried on every retryable failure only when they contain a ``test``
      operation: the test is the author's precondition, so a replay of an attempt that was
      applied fails it (422) instead of applying twice. Test ``/metadata/resourceVersion``
      (or a value the patch changes) for this to hold: a test of an unrelated field would
      still pass on a replay;
    - create, and JSON patches without a ``test``, are retried only when the server surely
      did not act: a 429 (rejected before any handler ran) or a connection that could not be
      opened (:class:`ConnectError`). After a 5xx or a timeout the object may have been
      created, so the error goes to the caller, who may find the object in its cache or
      get AlreadyExists when it tries again.

    Below this rule, aiohttp resends GET, PUT and DELETE once by itself when the connection
    drops before the answer (RFC 9112 section 9.3.1); POST and PATCH it never resends.

    Consequences callers should expect: a replay of a write that carried a resourceVersion
    and was applied returns Conflict; a replay of an applied delete raises NotFound.

    The wait before retry n is jittered exponential (0.1 s doubling, capped at 5 s), but
    never shorter than the ``Retry-After`` the server sent with the failure; on an object's
    path, that Retry-After holds for every later request there, not only this call's retry.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        user_agent: str | None = None,
        timeout: float = 30.0,
        qps: float | None = None,
        burst: int | None = None,
        max_retries: int = 5,
        clock: Clock | None = None,
        rand: random.Random | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if max_retries < 0:
            raise ValueError("max_retries must not be negative")
        self.api_client = api_client
        self.user_agent = user_agent
        self.timeout = timeout
        self.max_retries = max_retries
        # The ApiClient's host is fixed for its lifetime; a path prefix (an API proxy) is kept.
        self.base_url: str = str(api_client.configuration.host).rstrip("/")
        # host:port, the ``host`` label of the request metrics (client-go uses url.Host).
        self.host: str = urlsplit(self.base_url).netloc
        # The path of an API behind a prefix (a proxy's), for requests that send a path only.
        self._base_path: str = urlsplit(self.base_url).path.rstrip("/")
        self._clock: Clock = clock or RealClock()
        self._rand = rand or random.Random()
        self._limiter = (
            TokenBucket(qps, burst if burst is not None else DEFAULT_BURST, self._clock) if qps else None
        )
        # Object path -> monotonic time before which the server asked not to be asked there
        # again (the Retry-After of its last answer there that had one). Entries go once passed.
        self._not_before: dict[str, float] = {}
        # The request metrics' children, by (code, method) and by method.
        self._counters: dict[tuple[str, str], Callable[[], None]] = {}
        self._durations: dict[str, Callable[[float], None]] = {}
        # The last writes' answers, by the identity of the dict parsed from each: that dict and
        # the JSON it came from (see answer_json). Oldest first, at most _RECENT_ANSWERS.
        self._answers: dict[int, tuple[dict[str, Any], memoryview]] = {}
        _use_a_lean_session(api_client, self.base_url)
        # Whether the server answers at all, shared by everything that uses this client: a
        # call that cannot connect reports it, and while it is down no call is sent (the
        # reflectors wait on it too), only one probe a few times a second.
        self.reachability = Reachability(self.probe, clock=self._clock)
        # How long a call's retries wait for an unreachable server before giving up: as long as
        # its retries would have taken (their backoff's ceilings), so a call fails as soon as
        # before (a start-up check, a reconcile that then backs off), only without sending.
        self.unreachable_wait = sum(_retry_ceiling(attempt) for attempt in range(1, max_retries + 1))

    def __repr__(self) -> str:
        return f"<Client {self.base_url}>"

    async def close(self) -> None:
        """Stop the reachability probe if one runs; the ApiClient (and its connections) belong
        to the caller, who closes them."""
        await self.reachability.close()

    # Reads ---------------------------------------------------------------------------------

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The object ``name`` (in ``namespace`` for a namespaced resource); NotFound if absent."""
        return _required(
            await self._request("GET", _path(res, namespace, name), when=_RetryWhen.RETRYABLE, held=True),
            "GET",
            res,
        )

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        shard_selector: str | None = None,
    ) -> dict[str, Any]:
        """One LIST call: the raw List object (``items``, ``metadata.resourceVersion``,
        ``metadata.continue``). ``namespace`` None on a namespaced resource lists all
        namespaces. Items may lack apiVersion/kind, as the server sends them.
        ``shard_selector``: v1.36's ``shardSelector`` (see :mod:`memop.runtime.sharding`); a
        server without the ShardedListAndWatch gate ignores it and lists every object."""
        query: list[tuple[str, str]] = []
        _add(query, "labelSelector", label_selector)
        _add(query, "fieldSelector", field_selector)
        _add(query, "shardSelector", shard_selector)
        _add(query, "limit", str(limit) if limit is not None else None)
        _add(query, "continue", continue_token)
        _add(query, "resourceVersion", resource_version)
        return _required(
            await self._request(
                "GET", _collection_path(res, namespace), query=query, when=_RetryWhen.RETRYABLE
            ),
            "LIST",
            res,
        )

    async def list_all(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        resource_version: str | None = None,
    ) -> tuple[ObjectList, str]:
        """Every matching object, following continue tokens: ``(items, list resourceVersion)``.

        Each item has apiVersion and kind (filled in from ``res`` when the server left them
        out). If a continue token expires mid-way (410), the whole list is read again in one
        unpaginated call, as client-go's pager does.
        """
        items: ObjectList = []
        token: str | None = None
        while True:
            try:
                page = await self.list(
                    res,
                    namespace,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    limit=page_size,
                    continue_token=token,
                    # A continue token pins the version; the server rejects both together.
                    resource_version=resource_version if token is None else None,
                )
            except ApiError as error:
                if error.code != 410 or token is None:
                    raise
                log.info("continue token for %s expired after %d items, listing in full", res, len(items))
                items = []
                page = await self.list(
                    res,
                    namespace,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    resource_version=resource_version,
                )
            for item in page.get("items") or ():
                if isinstance(item, dict):
                    item.setdefault("apiVersion", res.api_version)
                    item.setdefault("kind", res.kind)
                items.append(item)
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                return items, str(meta.get("resourceVersion") or "")

    async def api_resources(self, group: str, version: str) -> dict[str, Any]:
        """The discovery document of ``group``/``version`` (an ``APIResourceList``: each resource's
        plural ``name``, ``kind``, ``namespaced`` and verbs), from ``/api/v1`` or
        ``/apis/<group>/<version>``. NotFound when the server does not serve that version."""
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        answer = await self._request("GET", path, when=_RetryWhen.RETRYABLE, held=True)
        if not isinstance(answer, dict):
            raise TransportError(f"GET {path}: the server answered no discovery document")
        return answer

    async def probe(self, path: str = _PROBE_PATH, timeout: float = 2.0) -> int:
        """One GET of ``path`` with no retries: the HTTP status the server answered, whatever
        it is. TransportError when no answer came within ``timeout`` seconds. For
        :class:`memop.runtime.client.reachability.Reachability`, which asks whether the server is up."""
        try:
            answer = await self._send("GET", path, query=(), timeout=timeout)
        except TransportError:
            self._count("<error>", "GET")
            raise
        self._count(str(answer.status), "GET")
        return answer.status

    def answer_json(self, answer: dict[str, Any]) -> memoryview | None:
        """The JSON the server sent for ``answer``, the object one of this client's recent
        writes returned (that very dict, not a copy), trailing whitespace cut: what the watch
        event of that version carries as its object, byte for byte, on kube-apiserver. None
        for any other object, or one older than this client's last 16 writes. The cache digests
        this rather than encoding ``answer`` again (``Cache.record_write``)."""
        entry = self._answers.get(id(answer))
        return entry[1] if entry is not None and entry[0] is answer else None

    def _remember_answer(self, parsed: dict[str, Any], data: bytes) -> None:
        end = len(data)
        while end and data[end - 1] in _JSON_WHITESPACE:
            end -= 1
        if len(self._answers) >= _RECENT_ANSWERS:
            del self._answers[next(iter(self._answers))]
        self._answers[id(parsed)] = (parsed, memoryview(data)[:end])

    # Writes --------------------------------------------------------------------------------

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        """Create ``obj``; returns the created object. ``namespace`` defaults to the object's.

        AlreadyExists when the name is taken. Not retried after a failure that may have
        created the object (see the class docstring).
        """
        namespace = namespace or _meta(obj).get("namespace")
        if res.namespaced and not namespace:
            raise ValueError(f"creating a {res.kind} needs a namespace")
        return _required(
            await self._request(
                "POST",
                _collection_path(res, namespace),
                body=_typed(res, obj),
                when=_RetryWhen.NOT_APPLIED,
            ),
            "POST",
            res,
        )

    async def update(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace the object named by ``obj``'s metadata (PUT); returns the stored object.

        Conflict when ``obj``'s resourceVersion is stale.
        """
        return await self._put(res, obj, None)

    async def update_status(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace the status subresource with ``obj``'s status (PUT .../status)."""
        return await self._put(res, obj, "status")

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Patch an object (or its ``subresource``) and return the result.

        ``patch_type``: "merge" (RFC 7386; add ``metadata.resourceVersion`` to make it
        conditional), "json" (RFC 6902 operations; ``test`` ops are preconditions) or
        "strategic" (built-in kinds only).
        """
        content_type = PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise ValueError(f"unknown patch type {patch_type!r}")
        return _required(
            await self._request(
                "PATCH",
                _path(res, namespace, name, subresource),
                body=patch,
                content_type=content_type,
                when=_patch_retry(patch_type, patch),
                held=True,
            ),
            "PATCH",
            res,
        )

    async def patch_status(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
    ) -> dict[str, Any]:
        """Patch the status subresource (the patch is rooted at the object: ``{"status": ...}``)."""
        return await self.patch(res, name, patch, namespace, patch_type=patch_type, subresource="status")

    async def apply(
        self,
        res: Resource,
        obj: dict[str, Any],
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` as ``field_manager``; returns the object as it now is.

        ``obj`` is an apply configuration: ``metadata.name`` (and ``namespace`` for a namespaced
        resource), and only the fields this manager has an opinion on; apiVersion and kind are
        filled in from ``res`` when missing. The server merges it into the object, creating the
        object if it does not exist, and records the manager as the owner of exactly those
        fields: a field it applied before and leaves out now is removed (unless another manager
        owns it too). A field another manager owns and this apply would change is a conflict:
        Conflict (409, each field in ``body["details"]["causes"]``) and nothing is written,
        unless ``force`` takes ownership of them. ``subresource``: "status" applies the status.

        Sent as ``application/apply-patch+yaml`` (with a JSON body, which is YAML). Retried like
        a merge patch: applying the same configuration twice gives what applying it once gives.
        """
        if not field_manager:
            raise ValueError("a server-side apply needs a field_manager")
        meta = _meta(obj)
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"applying a {res.kind} needs metadata.name")
        query: list[tuple[str, str]] = [("fieldManager", field_manager)]
        if force:
            query.append(("force", "true"))
        return _required(
            await self._request(
                "PATCH",
                _path(res, meta.get("namespace"), name, subresource),
                query=query,
                body=_typed(res, obj),
                content_type=APPLY_CONTENT_TYPE,
                when=_RetryWhen.RETRYABLE,
                held=True,
            ),
            "PATCH",
            res,
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        preconditions: dict[str, Any] | None = None,
        grace_period_seconds: int | None = None,
    ) -> dict[str, Any] | None:
        """Delete an object. Returns it as the server last holds it (with a deletionTimestamp
        if finalizers keep it), or None when the server answered with a bare Status.

        NotFound when it does not exist (callers decide whether that is success); Conflict
        when ``preconditions`` ({"uid": ..., "resourceVersion": ...}) do not hold.
        """
        body = _delete_options(propagation_policy, preconditions, grace_period_seconds)
        answer = await self._request(
            "DELETE", _path(res, namespace, name), body=body, when=_RetryWhen.RETRYABLE, held=True
        )
        if answer is None or answer.get("kind") == "Status":
            return None
        return answer

    async def delete_collection(
        self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None
    ) -> None:
        """Delete every object of ``res`` in ``namespace`` matching ``label_selector``."""
        if res.namespaced and not namespace:
            raise ValueError(f"deleting a collection of {res.kind} needs a namespace")
        query: list[tuple[str, str]] = []
        _add(query, "labelSelector", label_selector)
        await self._request(
            "DELETE", _collection_path(res, namespace), query=query, when=_RetryWhen.RETRYABLE
        )

    # Watch ---------------------------------------------------------------------------------

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int,
        read_timeout: float,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        batch_window: float = 0.0,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """:meth:`watch_batches`, one event at a time."""
        batches = self.watch_batches(
            res,
            namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            read_timeout=read_timeout,
            label_selector=label_selector,
            field_selector=field_selector,
            allow_bookmarks=allow_bookmarks,
            batch_window=batch_window,
        )
        try:
            async for batch in batches:
                for event in batch:
                    yield event
        finally:
            await batches.aclose()

    async def watch_batches(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int,
        read_timeout: float,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        shard_selector: str | None = None,
        batch_window: float = 0.0,
    ) -> AsyncGenerator[watchstream.EventLines, None]:
        """Stream the watch events of ``res`` after ``resource_version`` ("" = from now on,
        starting with the current objects as ADDED).

        Yields the events that had arrived each time the consumer asked, as iterables of
        ``{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK", "object": {...}}`` dicts, in
        order (see :class:`watchstream.EventLines`; iterate each before asking for the next).
        The server ends the stream after ``timeout_seconds``, which ends the iteration. An
        ERROR event raises its typed error (410 → Gone: list again); a non-200 answer raises
        its typed error; a dropped connection, a broken stream or ``read_timeout`` seconds
        without a byte raises TransportError. Malformed lines are logged and skipped.

        The request is sent on the first ``__anext__``. ``aclose()`` (or cancelling the
        consumer) closes the connection at once; an iterator merely dropped is closed when it
        is garbage-collected. No retries here: resuming is the reflector's job.

        ``batch_window`` (seconds, 0: off): during a burst, read the stream once per window
        rather than as each event arrives (see ``Http1Pool.stream``); events that trickle in
        are read at once. Not applied when a proxy carries the watch.
        """
        query: list[tuple[str, str]] = [("watch", "true")]
        _add(query, "resourceVersion", resource_version)
        _add(query, "timeoutSeconds", str(timeout_seconds))
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        _add(query, "labelSelector", label_selector)
        _add(query, "fieldSelector", field_selector)
        _add(query, "shardSelector", shard_selector)
        path = _collection_path(res, namespace)
        received = WATCH_RECEIVED_BYTES.labels(str(res))
        pool = self._pool()
        if pool is not None:
            async for batch in self._watch_on(
                pool, path, query, read_timeout, resource_version, received, batch_window
            ):
                yield batch
            return
        # No total deadline: the stream lasts timeout_seconds by design. sock_read bounds
        # every wait for the next byte (the headers included), which is what detects a
        # connection that died silently.
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self.timeout, sock_connect=self.timeout, sock_read=read_timeout
        )
        try:
            response = await self._open("GET", path, query=query, timeout=timeout)
        except TransportError:
            self._count("<error>", "GET")
            raise
        self._count(str(response.status), "GET")
        finished = False
        try:
            if response.status != 200:
                data = await self._read(response, "GET", path)
                answer = _Answer(
                    response.status, response.reason or "", response.headers.get("Retry-After"), data
                )
                raise self._error_from(answer, "GET", path)
            log.debug("watching %s from resourceVersion %r", path, resource_version)
            read = _counted(response.content.readany, received)
            async for batch in watchstream.read_event_batches(read, path=path):
                yield batch
            finished = True
        finally:
            if finished:
                # The body was read to its end: the connection may serve another request.
                response.release()
            else:
                response.close()

    async def _watch_on(  # noqa: PLR0917 - one private caller
        self,
        pool: Http1Pool,
        path: str,
        query: Query,
        read_timeout: float,
        resource_version: str,
        received: Counter,
        batch_window: float,
    ) -> AsyncGenerator[watchstream.EventLines, None]:
        """:meth:`watch_batches` on memop's own connections: ``self.timeout`` to connect, then
        at most ``read_timeout`` for the headers and for every next byte (what detects a
        connection that died silently); no total deadline, the server ends the stream."""
        headers, params = await self._headers(query, None)
        target = self._base_path + path + "?" + urlencode(params)
        try:
            stream = await pool.stream(
                "GET",
                target,
                headers,
                timeout=self.timeout,
                read_timeout=read_timeout,
                batch_window=batch_window,
            )
        except Http1ConnectError as error:
            self._count("<error>", "GET")
            failure = ConnectError(f"GET {path}: cannot connect to {self.host}: {error}")
            self.reachability.unreachable(failure)
            raise failure from error
        except Http1Error as error:
            self._count("<error>", "GET")
            raise TransportError(f"GET {path}: {_describe(error)}") from error
        self._count(str(stream.status), "GET")
        try:
            if stream.status != 200:
                try:
                    data = b"".join([chunk async for chunk in _chunks(stream)])
                except Http1Error as error:
                    raise TransportError(
                        f"GET {path}: reading the answer failed: {_describe(error)}"
                    ) from error
                raise self._error_from(
                    _Answer(stream.status, stream.reason, stream.headers.get("retry-after"), data),
                    "GET",
                    path,
                )
            log.debug("watching %s from resourceVersion %r", path, resource_version)
            async for batch in watchstream.read_event_batches(_counted(stream.readany, received), path=path):
                yield batch
        finally:
            # Kept for another request if the stream was read to its end, closed otherwise.
            stream.close()

    def _pool(self) -> Http1Pool | None:
        """memop's own connections, unless a proxy applies (then aiohttp carries everything)."""
        connector = getattr(getattr(self.api_client.rest_client, "pool_manager", None), "connector", None)
        return connector.http1 if isinstance(connector, _Connector) else None

    # Plumbing ------------------------------------------------------------------------------

    async def _put(self, res: Resource, obj: dict[str, Any], subresource: str | None) -> dict[str, Any]:
        meta = _meta(obj)
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"updating a {res.kind} needs metadata.name")
        path = _path(res, meta.get("namespace"), name, subresource)
        return _required(
            await self._request("PUT", path, body=_typed(res, obj), when=_RetryWhen.RETRYABLE, held=True),
            "PUT",
            res,
        )

    async def _request(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Any = None,
        content_type: str | None = None,
        when: _RetryWhen,
        held: bool = False,
    ) -> dict[str, Any] | None:
        """Send one call, retried per ``when``; the parsed JSON object answered, None if empty.
        ``held``: ``path`` is one object's, where a Retry-After holds for every later call."""
        # The first attempt runs bare: nearly every call succeeds at once, and tenacity's
        # machinery costs a quarter as much CPU as the HTTP exchange itself. Only after a
        # failure worth retrying does tenacity take over, numbering its attempts from 2.
        try:
            return await self._attempt(method, path, query, body, content_type, held=held)
        except Exception as error:
            if self.max_retries == 0 or not _worth_retrying(when, error):
                raise
            first_error = error
        delay = self._retry_delay(1, first_error)
        self._warn_retry(method, path, 1, delay, first_error)
        await self._clock.sleep(delay)
        # A fresh AsyncRetrying per call: its state is per object (thread-local, not
        # task-local), so sharing one between concurrent tasks would mix their attempts.
        retrying = AsyncRetrying(
            sleep=self._clock.sleep,
            stop=stop_after_attempt(self.max_retries),  # the first attempt is spent
            wait=self._retry_wait,
            retry=_retry_predicate(when),
            before_sleep=self._log_retry,
            reraise=True,
        )
        result: dict[str, Any] | None = await retrying(
            self._retry_attempt, method, path, query, body, content_type, held=held
        )
        return result

    async def _attempt(
        self, method: str, path: str, query: Query, body: Any, content_type: str | None, *, held: bool
    ) -> dict[str, Any] | None:
        """One HTTP exchange: throttle, send, read, count, parse or raise the typed error."""
        if held and self._not_before:
            await self._wait_retry_after(method, path)
        if self._limiter is not None:
            await self._limiter.acquire()
        start = self._clock.monotonic()
        code = "<error>"
        try:
            answer = await self._send(
                method, path, query=query, body=body, content_type=content_type, timeout=self.timeout
            )
            code = str(answer.status)
            data = answer.body
        finally:
            self._count(code, method)
            observe = self._durations.get(method)
            if observe is None:
                observe = self._durations[method] = REST_CLIENT_REQUEST_DURATION.labels(
                    method, self.host
                ).observe
            observe(self._clock.monotonic() - start)
        log.debug("%s %s -> %s (%d bytes)", method, path, code, len(data))
        if not 200 <= answer.status < 300:
            error = self._error_from(answer, method, path)
            if held and (hold := at_least_retry_after(0.0, error)) > 0:
                self._hold_path(path, hold)
            raise error
        if not data.strip():
            return None
        try:
            parsed = jsoncodec.loads(data)
        except ValueError as error:
            raise TransportError(
                f"{method} {path}: the {code} answer is not JSON: {data[:_EXCERPT]!r}"
            ) from error
        if not isinstance(parsed, dict):
            raise TransportError(
                f"{method} {path}: the {code} answer is not a JSON object: {data[:_EXCERPT]!r}"
            )
        if method in _METHODS_WITH_BODY:
            self._remember_answer(parsed, data)
        return parsed

    async def _wait_retry_after(self, method: str, path: str) -> None:
        """Wait until no Retry-After the server sent for ``path`` is still running."""
        while (until := self._not_before.get(path)) is not None:
            delay = until - self._clock.monotonic()
            if delay <= 0:
                del self._not_before[path]
                return
            log.debug("%s %s waits %.2fs more: the server asked for it (Retry-After)", method, path, delay)
            await self._clock.sleep(delay)

    def _hold_path(self, path: str, retry_after: float) -> None:
        now = self._clock.monotonic()
        if len(self._not_before) >= _NOT_BEFORE_PRUNE_AT:
            self._not_before = {p: t for p, t in self._not_before.items() if t > now}
        self._not_before[path] = max(self._not_before.get(path, now), now + retry_after)

    async def _retry_attempt(
        self, method: str, path: str, *args: Any, **kwargs: Any
    ) -> dict[str, Any] | None:
        """A retry's attempt: while the server is known to be down (a call found it closed),
        the retry waits for the shared probe to find it answering rather than knock on the
        closed port itself; a call's first attempt is always sent (a lease renewal every 2 s
        must fail fast and keep trying)."""
        if not self.reachability.reachable:
            await self._wait_reachable(method, path)
        return await self._attempt(method, path, *args, **kwargs)

    async def _wait_reachable(self, method: str, path: str) -> None:
        """Wait for the server to answer again, at most :attr:`unreachable_wait`; Unreachable
        then."""
        await first_of(self.reachability.wait(), self._clock.sleep(self.unreachable_wait))
        if not self.reachability.reachable:
            raise Unreachable(
                f"{method} {path}: not sent, {self.host} has not answered for {self.unreachable_wait:.1f}s"
            )

    async def _open(
        self,
        method: str,
        path: str,
        *,
        query: Query,
        timeout: aiohttp.ClientTimeout,
        body: Any = None,
        content_type: str | None = None,
    ) -> aiohttp.ClientResponse:
        """Send the request through aiohttp and return the response once its headers arrived
        (any status): for watches, and every request when a proxy applies."""
        api = self.api_client
        headers, params = await self._headers(query, content_type)
        # Straight to the ApiClient's aiohttp session, with the settings its RESTClientObject
        # would add (proxy, TLS server name): its request() re-checks and re-encodes what we
        # already hold, a quarter of the client's own CPU per call. The response comes back
        # raw, unread and unchecked: we parse and judge it.
        rest = api.rest_client
        text = self.base_url + path
        if params:
            text += "?" + urlencode(params)
        # Already percent-encoded (path segments by _quote, the query by urlencode): yarl is told
        # so, instead of parsing and re-quoting the URL of every request (4% of memop's CPU).
        url = URL(text, encoded=True)
        options: dict[str, Any] = {"headers": headers, "timeout": timeout}
        if body is not None and method in _METHODS_WITH_BODY:
            options["data"] = jsoncodec.dumps(body)
        if rest.proxy:
            options["proxy"] = rest.proxy
        if rest.proxy_headers:
            options["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            options["server_hostname"] = rest.server_hostname
        try:
            response: aiohttp.ClientResponse = await rest.pool_manager.request(method, url, **options)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as error:
            failure = ConnectError(f"{method} {path}: cannot connect to {self.host}: {error}")
            if path != _PROBE_PATH:
                self.reachability.unreachable(failure)
            raise failure from error
        except (aiohttp.ClientError, OSError) as error:
            # OSError covers TimeoutError, which the total deadline raises.
            raise TransportError(f"{method} {path}: {_describe(error)}") from error
        return response

    async def _headers(self, query: Query, content_type: str | None) -> tuple[dict[str, str], _Params]:
        """A request's headers, and its query parameters (the auth settings may add one)."""
        api = self.api_client
        headers: dict[str, str] = dict(api.default_headers)
        if api.cookie:
            headers["Cookie"] = api.cookie
        if self.user_agent:
            headers["User-Agent"] = self.user_agent
        headers["Accept"] = "application/json"
        headers["Content-Type"] = content_type or "application/json"
        params = list(query)
        # Adds the Authorization header, refreshing an expiring token through the
        # configuration's refresh hook first (exec plugins, in-cluster token rotation).
        await api.update_params_for_auth(headers, params, _AUTH_SETTINGS)
        return headers, params

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Query,
        timeout: float,
        body: Any = None,
        content_type: str | None = None,
    ) -> _Answer:
        """One request with one answer (not a watch), whole: through the HTTP/1.1 pool, or
        aiohttp when a proxy applies."""
        pool = self._pool()
        if pool is None:
            response = await self._open(
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                timeout=aiohttp.ClientTimeout(total=timeout),
            )
            try:
                data = await self._read(response, method, path)
            finally:
                response.release()
            return _Answer(response.status, response.reason or "", response.headers.get("Retry-After"), data)
        headers, params = await self._headers(query, content_type)
        target = self._base_path + path
        if params:
            target += "?" + urlencode(params)
        payload = jsoncodec.dumps(body) if body is not None and method in _METHODS_WITH_BODY else None
        try:
            answer = await pool.request(method, target, headers, payload, timeout=timeout)
        except Http1ConnectError as error:
            failure = ConnectError(f"{method} {path}: cannot connect to {self.host}: {error}")
            if path != _PROBE_PATH:
                self.reachability.unreachable(failure)
            raise failure from error
        except (Http1Error, OSError) as error:
            raise TransportError(f"{method} {path}: {_describe(error)}") from error
        return _Answer(answer.status, answer.reason, answer.headers.get("retry-after"), answer.body)

    async def _read(self, response: aiohttp.ClientResponse, method: str, path: str) -> bytes:
        try:
            return await response.read()
        except (aiohttp.ClientError, OSError) as error:
            raise TransportError(f"{method} {path}: reading the answer failed: {_describe(error)}") from error

    def _error_from(self, answer: _Answer, method: str, path: str) -> ApiError:
        """The typed error for a non-2xx answer; a body that is no Status becomes its message."""
        data = answer.body
        body: dict[str, Any]
        try:
            parsed = jsoncodec.loads(data) if data else None
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            body = parsed
        else:
            # Not from the API server itself (a proxy, a load balancer): keep what it said.
            text = data[:_EXCERPT].decode("utf-8", "replace").strip()
            body = {"message": text or f"HTTP {answer.status} {answer.reason}".strip()}
        retry_after = parse_retry_after(answer.retry_after, self._clock.time())
        return error_from_status(answer.status, body, retry_after=retry_after, method=method, path=path)

    def _count(self, code: str, method: str) -> None:
        # Children resolved once per (code, method): labels() costs more than the increment.
        increment = self._counters.get((code, method))
        if increment is None:
            increment = self._counters[code, method] = REST_CLIENT_REQUESTS.labels(
                code, method, self.host
            ).inc
        increment()

    # tenacity's attempt n is the call's attempt n + 1 (see _request).

    def _retry_wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        return self._retry_delay(state.attempt_number + 1, error)

    def _log_retry(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        delay = float(state.next_action.sleep) if state.next_action is not None else 0.0
        self._warn_retry(state.args[0], state.args[1], state.attempt_number + 1, delay, error)

    def _retry_delay(self, attempt: int, error: BaseException | None) -> float:
        """Seconds to wait after failed attempt number ``attempt``: jittered exponential
        backoff, or the server's Retry-After when that is longer."""
        ceiling = _retry_ceiling(attempt)
        return at_least_retry_after(ceiling / 2 + self._rand.uniform(0.0, ceiling / 2), error)

    def _warn_retry(
        self, method: str, path: str, attempt: int, delay: float, error: BaseException | None
    ) -> None:
        log.warning(
            "%s %s failed (attempt %d of %d), retrying in %.2fs: %s",
            method,
            path,
            attempt,
            self.max_retries + 1,
            delay,
            error,
        )


def _retry_ceiling(attempt: int) -> float:
    """The longest wait after failed attempt number ``attempt`` (from 1), Retry-After apart."""
    return min(RETRY_MAX_DELAY, RETRY_BASE_DELAY * 2.0 ** (attempt - 1))


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - now
        except (TypeError, ValueError):
            return None
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _patch_retry(patch_type: str, patch: Any) -> _RetryWhen:
    if patch_type != "json":
        return _RetryWhen.RETRYABLE
    if isinstance(patch, list) and any(isinstance(op, dict) and op.get("op") == "test" for op in patch):
        return _RetryWhen.RETRYABLE
    return _RetryWhen.NOT_APPLIED


def _path(res: Resource, namespace: str | None, name: str, subresource: str | None = None) -> str:
    if not name:
        # An empty name would address the collection instead of an object.
        raise ValueError(f"a {res.kind} name must not be empty")
    if res.namespaced and not namespace:
        raise ValueError(f"{res.kind} {name!r} is namespaced: a namespace is needed")
    return res.path(_quote(namespace), quote(name, safe=""), subresource)


def _collection_path(res: Resource, namespace: str | None) -> str:
    return res.path(_quote(namespace))


def _quote(segment: str | None) -> str | None:
    return quote(segment, safe="") if segment else None


def _add(query: list[tuple[str, str]], key: str, value: str | None) -> None:
    if value:
        query.append((key, value))


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _typed(res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with apiVersion and kind, filled from ``res`` if missing (never mutates ``obj``)."""
    if "apiVersion" in obj and "kind" in obj:
        return obj
    return {"apiVersion": res.api_version, "kind": res.kind, **obj}


def _delete_options(
    propagation_policy: str | None, preconditions: dict[str, Any] | None, grace_period_seconds: int | None
) -> dict[str, Any] | None:
    options: dict[str, Any] = {}
    if propagation_policy is not None:
        options["propagationPolicy"] = propagation_policy
    if preconditions:
        options["preconditions"] = preconditions
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    if not options:
        return None
    return {"apiVersion": "v1", "kind": "DeleteOptions", **options}


def _required(answer: dict[str, Any] | None, verb: str, res: Resource) -> dict[str, Any]:
    if answer is None:
        raise TransportError(f"{verb} {res}: the server answered with an empty body")
    return answer


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _counted(read: Callable[[], Awaitable[bytes]], received: Counter) -> Callable[[], Awaitable[bytes]]:
    """``read`` counting the bytes it returns into ``received`` (a watch's traffic, per resource:
    what sharding divides between replicas)."""

    async def read_counted() -> bytes:
        data = await read()
        received.inc(len(data))
        return data

    return read_counted
