"""Kubernetes API errors as typed exceptions, built from the server's ``Status`` body.

Callers branch on the type (``except Conflict``), never on status codes. ``is_retryable`` is
the single place that decides which failures are worth another attempt.

A namespace closed to new content is its own type, :class:`NamespaceClosed`, because nothing
about it is a failure to report: a create in a namespace being deleted is a 403 (the
NamespaceLifecycle admission plugin), :class:`NamespaceTerminating`, which is a
:class:`Forbidden` but says nothing of permissions; once the namespace is gone the create is a
404 naming the namespace, :class:`NamespaceGone`, a :class:`NotFound`. Both carry the
namespace's name (``namespace``). Code that handles a Forbidden (an RBAC hint) lets a
NamespaceClosed through first.
"""

from __future__ import annotations

import re
from typing import Any


class ApiError(Exception):
    """A request the API server answered with a failure ``Status``."""

    code: int = 0

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        reason: str = "",
        body: dict[str, Any] | None = None,
        method: str = "",
        path: str = "",
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.reason = reason
        self.body = body or {}
        self.method = method
        self.path = path

    def __str__(self) -> str:
        where = f" ({self.method} {self.path})" if self.method else ""
        return f"{self.code} {self.reason or type(self).__name__}: {self.message}{where}"


class BadRequest(ApiError):
    code = 400


class Unauthorized(ApiError):
    code = 401


class Forbidden(ApiError):
    code = 403


class NotFound(ApiError):
    code = 404


class MethodNotAllowed(ApiError):
    code = 405


class Conflict(ApiError):
    """409 with reason Conflict: the object changed since it was read (stale resourceVersion)."""

    code = 409


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: a create named an object that exists."""


class Gone(ApiError):
    """410: the requested resourceVersion is older than the server keeps (relist)."""

    code = 410


class UnsupportedMediaType(ApiError):
    code = 415


class Invalid(ApiError):
    """422: the object failed validation; ``causes`` lists the fields."""

    code = 422

    @property
    def causes(self) -> list[dict[str, Any]]:
        details = self.body.get("details") or {}
        causes = details.get("causes") or []
        return [c for c in causes if isinstance(c, dict)]


class TooManyRequests(ApiError):
    """429: throttled; ``retry_after`` is the server's Retry-After in seconds, if it sent one."""

    code = 429

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx: the server failed; ``retry_after`` is set when it asked for a pause (503)."""

    code = 500

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class NamespaceClosed(ApiError):
    """The request's namespace takes no new content: it is being deleted
    (:class:`NamespaceTerminating`) or gone (:class:`NamespaceGone`). ``namespace`` names it
    ("" when the answer did not say which)."""

    namespace: str = ""


class NamespaceTerminating(NamespaceClosed, Forbidden):
    """403 with the cause NamespaceTerminating: nothing can be created in a namespace that
    has a deletionTimestamp (updates and deletions still work there)."""


class NamespaceGone(NamespaceClosed, NotFound):
    """404 whose details name the namespace (kind ``namespaces``): it no longer exists."""


class TransportError(Exception):
    """The request did not get an answer: connection refused or reset, timeout, broken stream."""


class ConnectError(TransportError):
    """No connection could be opened: the request never reached the server."""


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    410: Gone,
    415: UnsupportedMediaType,
    422: Invalid,
}


def error_from_status(
    code: int,
    body: dict[str, Any] | None,
    *,
    retry_after: float | None = None,
    method: str = "",
    path: str = "",
) -> ApiError:
    """The typed error for an HTTP status ``code`` and the ``Status`` object the server sent."""
    body = body if isinstance(body, dict) else {}
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or f"HTTP {code}")
    common: dict[str, Any] = {"code": code, "reason": reason, "body": body, "method": method, "path": path}
    if code == 409:
        cls: type[ApiError] = AlreadyExists if reason == "AlreadyExists" else Conflict
        return cls(message, **common)
    if code == 429:
        return TooManyRequests(message, retry_after=retry_after, **common)
    if code >= 500:
        return ServerError(message, retry_after=retry_after, **common)
    closed = _closed_namespace(code, body, path)
    if closed is not None:
        cls, namespace = closed
        error = cls(message, **common)
        error.namespace = namespace
        return error
    return _BY_CODE.get(code, ApiError)(message, **common)


NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"
_TERMINATING_MESSAGE = re.compile(r"namespace (\S+) is being terminated")
_NAMESPACE_IN_PATH = re.compile(r"/namespaces/([^/?]+)/")


def _closed_namespace(code: int, body: dict[str, Any], path: str) -> tuple[type[NamespaceClosed], str] | None:
    """(the type, the namespace) when the answer says the namespace is closed; else None.

    A v1.36 kube-apiserver answers a create in a terminating namespace with 403 and
    ``details.causes: [{"reason": "NamespaceTerminating", "message": "namespace X is being
    terminated", "field": "metadata.namespace"}]``, and one in a vanished namespace with 404
    and ``details: {"name": "X", "kind": "namespaces"}``."""
    details = body.get("details")
    if not isinstance(details, dict):
        return None
    if code == 403:
        causes = details.get("causes")
        for cause in causes if isinstance(causes, list) else ():
            if isinstance(cause, dict) and cause.get("reason") == NAMESPACE_TERMINATING_CAUSE:
                found = _TERMINATING_MESSAGE.search(str(cause.get("message") or ""))
                in_path = _NAMESPACE_IN_PATH.search(path)
                name = found.group(1) if found else in_path.group(1) if in_path else ""
                return NamespaceTerminating, name
        return None
    if code == 404 and details.get("kind") == "namespaces" and not details.get("group"):
        name = details.get("name")
        return NamespaceGone, name if isinstance(name, str) else ""
    return None


def is_retryable(error: BaseException) -> bool:
    """Whether trying the same request again may succeed without anything else changing."""
    return isinstance(error, TooManyRequests | ServerError | TransportError)


def at_least_retry_after(delay: float, error: BaseException | None) -> float:
    """``delay``, or the Retry-After the server sent with ``error`` when that is longer: a
    backoff never retries sooner than the server asked. Only TooManyRequests and ServerError
    carry one (``retry_after``, None when the answer had no usable header)."""
    retry_after = getattr(error, "retry_after", None)
    if isinstance(retry_after, int | float) and retry_after > delay:
        return float(retry_after)
    return delay
