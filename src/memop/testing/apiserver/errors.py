"""API failures as the in-memory API server raises and serves them, with the real server's texts.

Every failure of a store operation or a request is an :class:`ApiError`; :meth:`ApiError.status`
renders the ``kind: Status`` body kube-apiserver would send. The helper constructors mirror
``k8s.io/apimachinery/pkg/api/errors`` (``NewNotFound``, ``NewConflict``, ``NewInvalid`` ...), so
messages, reasons and ``details`` match what clients parse: ``details.kind`` is the *resource*
(plural) for NotFound/AlreadyExists/Conflict, as in Kubernetes, and the *Kind* for Invalid.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from memop.testing.apiserver.schema import go_quote

OPTIMISTIC_LOCK_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


class GroupResourceLike(Protocol):
    """Anything that names a group and a plural resource (a ResourceType does)."""

    @property
    def group(self) -> str: ...

    @property
    def plural(self) -> str: ...


class ApiError(Exception):
    """A failed API operation: HTTP ``code``, Kubernetes ``reason``, ``message`` and ``details``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        # Extra response headers (Retry-After for 429/503).
        self.headers: dict[str, str] = dict(headers or {})
        # The request's warnings recorded before it failed (memop.testing.apiserver.warningheaders): sent
        # with the failure, as kube-apiserver's recorder has written them to the response.
        self.warnings: list[str] = []

    def status(self) -> dict[str, Any]:
        """The ``kind: Status`` body of this failure, field for field as the real server sends it."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"


def qualified(group: str, plural: str) -> str:
    """``deployments.apps`` / ``pods``: a GroupResource as Kubernetes prints it."""
    return f"{plural}.{group}" if group else plural


def _named_details(rtype: GroupResourceLike, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if rtype.group:
        details["group"] = rtype.group
    details["kind"] = rtype.plural
    return details


def not_found(rtype: GroupResourceLike, name: str) -> ApiError:
    """404 NotFound: ``deployments.apps "x" not found``."""
    return ApiError(
        404,
        "NotFound",
        f'{qualified(rtype.group, rtype.plural)} "{name}" not found',
        _named_details(rtype, name),
    )


def already_exists(rtype: GroupResourceLike, name: str) -> ApiError:
    """409 AlreadyExists: ``deployments.apps "x" already exists``."""
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(rtype.group, rtype.plural)} "{name}" already exists',
        _named_details(rtype, name),
    )


def conflict(rtype: GroupResourceLike, name: str, why: str = OPTIMISTIC_LOCK_MESSAGE) -> ApiError:
    """409 Conflict: ``Operation cannot be fulfilled on deployments.apps "x": <why>``."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(rtype.group, rtype.plural)} "{name}": {why}',
        _named_details(rtype, name),
    )


def conflict_for_kind(group: str, kind: str, name: str, why: str) -> ApiError:
    """409 Conflict naming the Kind, as delete preconditions do (``Deployment.apps "x"``)."""
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    return ApiError(
        409, "Conflict", f'Operation cannot be fulfilled on {qualified(group, kind)} "{name}": {why}', details
    )


class FieldErrorLike(Protocol):
    """A field error (memop.testing.apiserver.schema.FieldError has this shape)."""

    @property
    def field(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def message(self) -> str: ...


def invalid(group: str, kind: str, name: str, errors: Iterable[FieldErrorLike]) -> ApiError:
    """422 Invalid: ``<Kind>.<group> "<name>" is invalid: <errors>`` with one cause per field error.

    ``FieldError.message`` is the full ``field: body`` text; the cause carries the body alone, as
    ``StatusCause.Message = err.ErrorBody()`` in Kubernetes.
    """
    errs = list(errors)
    causes = []
    for err in errs:
        prefix = f"{err.field}: "
        body = err.message[len(prefix) :] if err.field and err.message.startswith(prefix) else err.message
        causes.append({"reason": err.type, "message": body, "field": err.field})
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = causes
    what = f'{qualified(group, kind)} "{name}" is invalid'
    # The message is ErrorList.ToAggregate(): each distinct error once (the causes keep them all).
    messages = list(dict.fromkeys(e.message for e in errs))
    if len(messages) == 1:
        what += f": {messages[0]}"
    elif messages:
        what += ": [" + ", ".join(messages) + "]"
    return ApiError(422, "Invalid", what, details)


def bad_request(message: str) -> ApiError:
    """400 BadRequest with the given message and no details."""
    return ApiError(400, "BadRequest", message)


class DecodeError(ApiError):
    """400: the body does not decode into the kind's typed object. ``detail`` is the decoder's
    own error, which a PATCH reports differently (see :func:`patch_invalid`)."""

    def __init__(self, kind: str, version: str, detail: str, converter_detail: str | None = None) -> None:
        super().__init__(
            400, "BadRequest", f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}'
        )
        self.detail = detail
        # What the unstructured converter says instead, where a strategic merge patch meets it.
        self.converter_detail = converter_detail or detail


def patch_invalid(shown: str, detail: str) -> ApiError:
    """422 for a patch whose result does not decode: kube-apiserver reports the patched object
    (or, for a strategic merge patch, the patch) as an invalid value of the field ``patch``, in
    an Invalid error of no kind and no name: `` "" is invalid: patch: Invalid value: ...``."""
    body = f"Invalid value: {go_quote(shown)}: {detail}"
    return ApiError(
        422,
        "Invalid",
        f' "" is invalid: patch: {body}',
        {"causes": [{"reason": "FieldValueInvalid", "message": body, "field": "patch"}]},
    )


def gone(message: str) -> ApiError:
    """410 Expired (``NewResourceExpired``): a resourceVersion or continue token too old to serve."""
    return ApiError(410, "Expired", message)


def too_old_resource_version(requested: int, oldest: int) -> ApiError:
    """The watch cache's ``too old resource version: N (M)``."""
    return gone(f"too old resource version: {requested} ({oldest})")


def forbidden(rtype: GroupResourceLike, name: str, why: str) -> ApiError:
    """403 Forbidden: ``<resource> "<name>" is forbidden: <why>`` (``NewForbidden``)."""
    resource = qualified(rtype.group, rtype.plural)
    what = f'{resource} "{name}" is forbidden: {why}' if name else f"{resource} is forbidden: {why}"
    return ApiError(403, "Forbidden", what, _named_details(rtype, name))


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    """405 MethodNotAllowed."""
    return ApiError(405, "MethodNotAllowed", message, {})


def unsupported_media_type(accepted: Iterable[str]) -> ApiError:
    """415 UnsupportedMediaType, listing what the endpoint accepts (``NewUnsupportedMediaTypeError``)."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def not_found_path() -> ApiError:
    """404 for a path no API serves (``the server could not find the requested resource``)."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def internal_error(why: str) -> ApiError:
    """500 InternalError (``NewInternalError``)."""
    return ApiError(500, "InternalError", f"Internal error occurred: {why}", {"causes": [{"message": why}]})


def service_unavailable(message: str = "the server is currently unable to handle the request") -> ApiError:
    """503 ServiceUnavailable."""
    return ApiError(503, "ServiceUnavailable", message)


def too_many_requests(retry_after: int = 1) -> ApiError:
    """429 TooManyRequests as API priority and fairness sends it, with a Retry-After header."""
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )
