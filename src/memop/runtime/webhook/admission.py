"""Answering ``admission.k8s.io/v1`` AdmissionReviews with a kind's defaulter and validator.

A handler takes the raw body of the API server's POST and returns the HTTP status and body:

- a valid review gets ``200`` and an AdmissionReview of the same apiVersion whose
  ``response.uid`` is the request's;
- a body that is no valid AdmissionReview (not JSON, another apiVersion or kind, no
  ``request``, no ``uid``, an unknown operation, a missing object, a Content-Type other than
  ``application/json``) gets ``400`` with a ``metav1.Status`` whose message is the one-line
  reason, which the API server quotes in its error.

Defaulting (as controller-runtime's ``defaulterForType``): DELETE and CONNECT are allowed
untouched; otherwise the defaulter changes a copy of ``request.object`` in place and the answer
is the JSON patch from the object received to the changed one (``patchType: JSONPatch``,
base64), or no patch when nothing changed.

Validation (``validatorForType``): CREATE → ``validate_create(object)``, UPDATE →
``validate_update(oldObject, object)``, DELETE → ``validate_delete(oldObject)``, CONNECT is
allowed. Warnings are returned whether allowed or denied.

Denials: :class:`~memop.runtime.webhook.declarations.ValidationError` is ``422 Invalid`` with the
message, details and causes the API server's own ``NewInvalid`` writes; any other exception
from user code is ``403 Forbidden`` naming the exception, and one error log line carrying the
webhook, kind, namespace, name and uid. Never a 500, never a traceback in the response.

The user's code runs inside :func:`memop.runtime.logs.log_context` with those fields, so its own
log lines carry them too.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, get_args

import orjson

from memop.runtime.logs import log_context
from memop.runtime.util import jsoncodec
from memop.runtime.webhook.declarations import (
    AdmissionRequest,
    AdmissionWebhook,
    Defaulter,
    FieldError,
    Obj,
    Operation,
    ValidationError,
    Validator,
)

log = logging.getLogger("memop.webhook")

ADMISSION_GROUP = "admission.k8s.io"
# controller-runtime decodes v1beta1 reviews too (the same shape) and answers in their version.
REVIEW_VERSIONS = (f"{ADMISSION_GROUP}/v1", f"{ADMISSION_GROUP}/v1beta1")
_OPERATIONS: tuple[str, ...] = get_args(Operation)
JSON = "application/json"


class BadReview(Exception):
    """The body is no valid review; the message is the one-line reason."""


def bad_request(reason: str) -> tuple[int, bytes]:
    """A ``400`` whose body is the ``metav1.Status`` the API server reads a failed call's
    reason from."""
    status = {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": reason,
        "reason": "BadRequest",
        "code": 400,
    }
    return 400, orjson.dumps(status)


def check_content_type(content_type: str) -> None:
    """Raise BadReview unless ``content_type`` is JSON (parameters such as a charset allowed:
    controller-runtime compares the whole header, which Go's client sends bare)."""
    if content_type.partition(";")[0].strip().lower() != JSON:
        raise BadReview(f"contentType={content_type}, expected {JSON}")


def load_review(body: bytes, content_type: str, api_versions: Sequence[str], kind: str) -> dict[str, Any]:
    """The review's JSON, checked for Content-Type, apiVersion, kind and a ``request`` with a
    ``uid``; BadReview otherwise."""
    check_content_type(content_type)
    if not body:
        raise BadReview("request body is empty")
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise BadReview(f"the body is not JSON: {error}") from None
    if not isinstance(review, dict):
        raise BadReview(f"expected a {kind} object, got JSON {type(review).__name__}")
    if review.get("kind") != kind or review.get("apiVersion") not in api_versions:
        raise BadReview(
            f"expected a {kind} of {' or '.join(api_versions)}, got kind {review.get('kind')!r} "
            f"apiVersion {review.get('apiVersion')!r}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview(f"the {kind} has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview(f"the {kind}'s request has no uid")
    return review


def parse_request(request: Mapping[str, Any]) -> AdmissionRequest:
    """An AdmissionReview's ``request`` as an :class:`AdmissionRequest`; BadReview when a
    field has the wrong shape."""
    operation = request.get("operation")
    if operation not in _OPERATIONS:
        raise BadReview(f"unknown operation {operation!r}")
    for key in ("object", "oldObject"):
        if request.get(key) is not None and not isinstance(request[key], dict):
            raise BadReview(f"request.{key} is not an object")
    request_kind = request.get("requestKind")
    return AdmissionRequest(
        uid=request["uid"],
        operation=operation,
        kind=_gvk(request.get("kind"), "kind", "kind"),
        resource=_gvk(request.get("resource"), "resource", "resource"),
        namespace=_string(request, "namespace"),
        name=_string(request, "name"),
        object=request.get("object"),
        old_object=request.get("oldObject"),
        dry_run=request.get("dryRun") is True,
        user_info=request.get("userInfo") or {},
        request_kind=_gvk(request_kind, "requestKind", "kind") if request_kind is not None else None,
        sub_resource=_string(request, "subResource"),
        options=request.get("options"),
    )


def _gvk(value: object, name: str, last: str) -> tuple[str, str, str]:
    if not isinstance(value, dict):
        raise BadReview(f"request.{name} is missing")
    parts = (value.get("group", ""), value.get("version", ""), value.get(last, ""))
    if not all(isinstance(part, str) for part in parts):
        raise BadReview(f"request.{name} is not a group, version and {last}")
    return parts


def _string(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key) or ""
    if not isinstance(value, str):
        raise BadReview(f"request.{key} is not a string")
    return value


class AdmissionHandler:
    """Answers one kind's reviews at its mutating and validating paths (see the module
    docstring); :meth:`mutate` and :meth:`validate` take the raw body and Content-Type."""

    def __init__(self, webhook: AdmissionWebhook) -> None:
        self.webhook = webhook

    async def mutate(self, body: bytes, content_type: str) -> tuple[int, bytes]:
        defaulter = self.webhook.defaulter
        assert defaulter is not None, "served only for a webhook with a defaulter"
        path = self.webhook.mutating_path
        return await _serve(body, content_type, path, lambda request: _default(defaulter, request, path))

    async def validate(self, body: bytes, content_type: str) -> tuple[int, bytes]:
        validator = self.webhook.validator
        assert validator is not None, "served only for a webhook with a validator"
        path = self.webhook.validating_path
        return await _serve(body, content_type, path, lambda request: _validate(validator, request, path))


Answer = Callable[[AdmissionRequest], Awaitable[dict[str, Any]]]


async def _serve(body: bytes, content_type: str, path: str, answer: Answer) -> tuple[int, bytes]:
    try:
        review = load_review(body, content_type, REVIEW_VERSIONS, "AdmissionReview")
        request = parse_request(review["request"])
        response = await answer(request)
    except BadReview as error:
        log.warning("bad admission request: %s", error, extra={"webhook": path})
        return bad_request(str(error))
    response["uid"] = request.uid
    reply = {"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}
    return 200, orjson.dumps(reply)


async def _default(defaulter: Defaulter, request: AdmissionRequest, path: str) -> dict[str, Any]:
    if request.operation in ("DELETE", "CONNECT"):
        return {"allowed": True, "status": {"code": 200}}
    if request.object is None:
        raise BadReview(f"request.object is missing on {request.operation}")
    original = request.object
    # The copy the defaulter changes: JSON round trip, a quarter of deepcopy's time.
    obj: Obj = orjson.loads(orjson.dumps(original))
    try:
        with _request_context(path, request):
            await defaulter.default(obj, request)
    except ValidationError as error:
        return _invalid(request, error.errors, error.warnings)
    except Exception as error:
        return _failed(request, path, "defaulter", error)
    patch = json_patch(original, obj)
    if not patch:
        return {"allowed": True}
    return {
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(orjson.dumps(patch)).decode("ascii"),
    }


async def _validate(validator: Validator, request: AdmissionRequest, path: str) -> dict[str, Any]:
    warnings: Sequence[str] = ()
    try:
        with _request_context(path, request):
            if request.operation == "CREATE":
                warnings = await validator.validate_create(_needed(request.object, request), request)
            elif request.operation == "UPDATE":
                old = _needed(request.old_object, request, "oldObject")
                warnings = await validator.validate_update(old, _needed(request.object, request), request)
            elif request.operation == "DELETE":
                # Since Kubernetes 1.15 oldObject holds the object being deleted.
                warnings = await validator.validate_delete(
                    _needed(request.old_object, request, "oldObject"), request
                )
    except BadReview:
        raise
    except ValidationError as error:
        return _invalid(request, error.errors, error.warnings)
    except Exception as error:
        return _failed(request, path, "validator", error)
    response: dict[str, Any] = {"allowed": True, "status": {"code": 200}}
    if warnings:
        response["warnings"] = _warnings(warnings)
    return response


def _needed(obj: Obj | None, request: AdmissionRequest, key: str = "object") -> Obj:
    if obj is None:
        raise BadReview(f"request.{key} is missing on {request.operation}")
    return obj


def _warnings(warnings: Sequence[str]) -> list[str]:
    if isinstance(warnings, str):  # a lone string, not a list of characters
        return [warnings]
    return [str(warning) for warning in warnings]


def _request_context(path: str, request: AdmissionRequest) -> AbstractContextManager[None]:
    return log_context(
        webhook=path, kind=request.kind[2], namespace=request.namespace, name=_name(request), uid=request.uid
    )


def _name(request: AdmissionRequest) -> str:
    if request.name:
        return request.name
    obj = request.object or request.old_object or {}
    name = (obj.get("metadata") or {}).get("name", "")
    return name if isinstance(name, str) else ""


def _qualified_kind(request: AdmissionRequest) -> str:
    group, _, kind = request.kind
    return f"{kind}.{group}" if group else kind


def invalid_status(group: str, kind: str, name: str, errors: Sequence[FieldError]) -> dict[str, Any]:
    """The ``metav1.Status`` of apimachinery's ``NewInvalid``: code 422, reason Invalid, the
    message ``<Kind>.<group> "<name>" is invalid: <field>: <message>`` (several errors in
    brackets, comma-separated, repeats once) and one cause per field."""
    qualified = f"{kind}.{group}" if group else kind
    messages = list(dict.fromkeys(f"{e.field}: {e.message}" for e in errors))
    aggregate = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    details: dict[str, Any] = {"name": name, "group": group, "kind": kind}
    details["causes"] = [{"reason": e.reason, "message": e.message, "field": e.field} for e in errors]
    return {
        "metadata": {},
        "status": "Failure",
        "message": f'{qualified} "{name}" is invalid: {aggregate}',
        "reason": "Invalid",
        "details": details,
        "code": 422,
    }


def _invalid(
    request: AdmissionRequest, errors: Sequence[FieldError], warnings: Sequence[str]
) -> dict[str, Any]:
    group, _, kind = request.kind
    response: dict[str, Any] = {
        "allowed": False,
        "status": invalid_status(group, kind, _name(request), errors),
    }
    if warnings:
        response["warnings"] = _warnings(warnings)
    return response


def _failed(request: AdmissionRequest, path: str, role: str, error: Exception) -> dict[str, Any]:
    what = f"the {_qualified_kind(request)} {role}"
    detail = str(error)
    message = f"{what} failed: {type(error).__name__}" + (f": {detail}" if detail else "")
    with _request_context(path, request):
        log.error("%s raised on %s, request denied", what, request.operation, exc_info=error)
    return {
        "allowed": False,
        "status": {
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "Forbidden",
            "code": 403,
        },
    }


def json_patch(old: Any, new: Any) -> list[dict[str, Any]]:
    """The RFC 6902 operations (add, remove, replace) that turn ``old`` into ``new``.

    Objects are compared key by key, arrays index by index (a grown array gets adds at its end,
    a shrunk one removes from its end), so a default set deep inside yields one operation.
    Values are compared as JSON (``1``, ``1.0`` and ``true`` differ). Equal subtrees cost one C
    comparison each, which is why this is not the ``jsonpatch`` package: it diffs arrays it
    could skip (13 ms for an object holding a 500-item array, 0.4 ms for a small one).
    """
    ops: list[dict[str, Any]] = []
    _diff(old, new, "", ops)
    return ops


def _diff(old: Any, new: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if jsoncodec.same(old, new):
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            child = f"{path}/{_escape(key)}"
            if key in old:
                _diff(old[key], value, child, ops)
            else:
                ops.append({"op": "add", "path": child, "value": value})
    elif isinstance(old, list) and isinstance(new, list):
        common = min(len(old), len(new))
        for index in range(common):
            _diff(old[index], new[index], f"{path}/{index}", ops)
        for index in range(len(old) - 1, common - 1, -1):
            ops.append({"op": "remove", "path": f"{path}/{index}"})
        for value in new[common:]:
            ops.append({"op": "add", "path": f"{path}/-", "value": value})
    else:
        ops.append({"op": "replace", "path": path, "value": new})


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
