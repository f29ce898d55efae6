"""How the in-memory API server reaches a webhook (admission or conversion): an HTTPS POST of
a JSON review to ``clientConfig.url``, verifying the server with ``caBundle`` (the system
roots when empty), with a deadline, and the error texts client-go gives kube-apiserver
(``Post "URL?timeout=10s": dial tcp 127.0.0.1:1: connect: connection refused``, ``...: context
deadline exceeded``, measured on v1.36.2).

A ``service`` clientConfig names a Service an in-memory server cannot route to: the call fails
as the real server's does when the Service is missing (``service "x" not found``), or as a
refused connection to its cluster IP when it exists.

:class:`WebhookCalls` keeps a record of every call (for tests: :attr:`ApiServer.webhook_calls`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from memop.testing.apiserver.schema import go_quote

# NewGenericServerResponse's messages by status code (k8s.io/apimachinery/pkg/api/errors).
_GENERIC = {
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    409: "the server reported a conflict",
    422: "the server rejected our request due to an error in our request",
    429: "the server has received too many requests and has asked us to try again later",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, "
    "but may still be processing the request",
}
_MAX_UNSTRUCTURED_BYTES = 2048  # client-go's maxUnstructuredResponseTextBytes


class CallError(Exception):
    """The webhook could not be called or did not answer 200 with JSON (the message is
    client-go's, without kube-apiserver's prefixes)."""


@dataclass(frozen=True, slots=True)
class WebhookCall:
    """One call the server made: for tests to observe what was sent and what came of it."""

    kind: str  # "admission" or "conversion"
    name: str  # the webhook's name (admission) or the CRD's (conversion)
    url: str
    request: dict[str, Any]
    response: dict[str, Any] | None  # None when the call failed
    error: str | None


@dataclass
class WebhookCalls:
    """The record of calls and a cache of TLS contexts by caBundle."""

    calls: list[WebhookCall] = field(default_factory=list)
    _contexts: dict[str, ssl.SSLContext] = field(default_factory=dict)
    # Looks up a Service (namespace, name) in the store: its cluster IP, or None when missing.
    service_ip: Callable[[str, str], str | None] = lambda namespace, name: None

    def _context(self, ca_bundle: str) -> ssl.SSLContext:
        context = self._contexts.get(ca_bundle)
        if context is None:
            if ca_bundle:
                try:
                    pem = base64.b64decode(ca_bundle, validate=True).decode()
                except (binascii.Error, UnicodeDecodeError):
                    pem = ""
                context = ssl.create_default_context()
                if pem:
                    with contextlib.suppress(ssl.SSLError):
                        context.load_verify_locations(cadata=pem)
            else:
                context = ssl.create_default_context()
            self._contexts[ca_bundle] = context
        return context

    async def post(
        self, kind: str, name: str, config: Mapping[str, Any], body: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        """POST ``body`` to the webhook of ``config`` (a clientConfig); its JSON answer, or CallError."""
        url = _url(config)
        seconds = int(timeout) if timeout == int(timeout) else int(timeout) + 1
        target = f"{url}{'&' if '?' in url else '?'}timeout={seconds}s"
        try:
            response = await self._post(config, target, body, timeout)
        except CallError as error:
            self.calls.append(WebhookCall(kind, name, url, body, None, str(error)))
            raise
        self.calls.append(WebhookCall(kind, name, url, body, response, None))
        return response

    async def _post(
        self, config: Mapping[str, Any], target: str, body: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        service = config.get("service")
        if isinstance(service, Mapping):
            namespace, svc = str(service.get("namespace") or ""), str(service.get("name") or "")
            ip = self.service_ip(namespace, svc)
            if ip is None:
                raise CallError(f'Post "{target}": service "{svc}" not found')
            port = service.get("port") or 443
            raise CallError(f'Post "{target}": dial tcp {ip}:{port}: connect: connection refused')
        parts = urlsplit(target)
        context = self._context(str(config.get("caBundle") or ""))
        data = json.dumps(body, separators=(",", ":")).encode()
        try:
            async with asyncio.timeout(timeout):
                connector = aiohttp.TCPConnector(ssl=context, force_close=True)
                async with (
                    aiohttp.ClientSession(connector=connector) as session,
                    session.post(
                        target,
                        data=data,
                        headers={"Content-Type": "application/json", "Accept": "application/json, */*"},
                    ) as response,
                ):
                    raw = await response.read()
                    status = response.status
                    content_type = response.headers.get("Content-Type", "")
        except TimeoutError:
            raise CallError(f'Post "{target}": context deadline exceeded') from None
        except aiohttp.ClientConnectorCertificateError as error:
            reason = getattr(error.certificate_error, "verify_message", "") or str(error.certificate_error)
            if "unable to get local issuer" in reason or "self-signed" in reason or "self signed" in reason:
                reason = "x509: certificate signed by unknown authority"
            raise CallError(f'Post "{target}": tls: failed to verify certificate: {reason}') from None
        except aiohttp.ClientConnectorError as error:
            host = f"{parts.hostname}:{parts.port or 443}"
            why = (
                "connection refused"
                if isinstance(error.os_error, ConnectionRefusedError)
                else str(error.os_error)
            )
            raise CallError(f'Post "{target}": dial tcp {host}: connect: {why}') from None
        except (aiohttp.ClientError, OSError) as error:
            raise CallError(f'Post "{target}": {error}') from None
        return _decode(status, raw, content_type)


def _url(config: Mapping[str, Any]) -> str:
    service = config.get("service")
    if isinstance(service, Mapping):
        path = service.get("path") or ""
        return (
            f"https://{service.get('name')}.{service.get('namespace')}.svc:{service.get('port') or 443}{path}"
        )
    return str(config.get("url") or "")


def _decode(status: int, raw: bytes, content_type: str) -> dict[str, Any]:
    """client-go's ``Do().Into()``: a non-2xx answer becomes the Status its body is, else its
    generic error; a body that is no JSON object is a decoding error."""
    try:
        decoded: Any = json.loads(raw) if raw else None
    except ValueError as error:
        decoded = error
    if not 200 <= status <= 206:  # transformResponse: past 206 PartialContent is a failure
        raise CallError(_failure(status, raw, content_type, decoded))
    if isinstance(decoded, ValueError) or not isinstance(decoded, dict):
        what = "string" if isinstance(decoded, ValueError | str) else type(decoded).__name__
        raise CallError(
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f'{what} into Go value of type struct {{ APIVersion string "json:\\"apiVersion,omitempty\\""; '
            'Kind string "json:\\"kind,omitempty\\"" }'
        )
    return decoded


def _failure(status: int, raw: bytes, content_type: str, decoded: Any) -> str:
    """The error of a non-2xx answer, as client-go's ``Result.Error()`` makes it: a body that
    is a failed Status gives its message; otherwise ``newUnstructuredResponseError``, whose
    server message is the body only for a textual answer (no Content-Type, or ``text/*``) and
    ``unknown`` for any other (a JSON body that is no Status)."""
    if (
        isinstance(decoded, dict)
        and decoded.get("kind") == "Status"
        and decoded.get("apiVersion") in (None, "v1")
        and decoded.get("status") == "Failure"
    ):
        return str(decoded.get("message") or "")
    media = content_type.split(";", 1)[0].strip().lower()
    message = "unknown"
    if not content_type or media.startswith("text/"):
        message = raw[:_MAX_UNSTRUCTURED_BYTES].decode(errors="replace").strip()
    if status in _GENERIC:
        return _GENERIC[status]
    if status in (403, 415):
        return message
    if status == 406:
        if message in ("", "unknown"):
            return "the server was unable to respond with a content type that the client supports"
        return message
    if status >= 500:
        return f"an error on the server ({go_quote(message)}) has prevented the request from succeeding"
    return f"the server responded with the status code {status} but did not return more information"
