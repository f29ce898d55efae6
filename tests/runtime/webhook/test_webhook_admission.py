"""Admission handlers: AdmissionReview in, AdmissionReview out (memop.runtime.webhook.admission).

A small kind declared here (``Widget`` of ``example.memop.dev``) with a defaulter and a
validator; no server: the handlers take the body as the server hands it to them.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from memop.runtime.logs import JsonFormatter
from memop.runtime.webhook.admission import AdmissionHandler, invalid_status, json_patch
from memop.runtime.webhook.declarations import (
    AdmissionRequest,
    AdmissionWebhook,
    FieldError,
    Obj,
    ValidationError,
)
from memop.testing.apiserver.patch import json_patch as server_applies

JSON = "application/json"
GROUP, VERSION, KIND = "example.memop.dev", "v1", "Widget"


class WidgetDefaulter:
    async def default(self, obj: Obj, request: AdmissionRequest) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("size", 1)
        spec.setdefault("ports", [{"name": "main", "port": 8080}])
        obj["metadata"].setdefault("labels", {})["example.memop.dev/defaulted"] = "true"
        if spec.get("explode"):
            raise KeyError("boom")


class WidgetValidator:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any]] = []

    async def validate_create(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]:
        self.calls.append(("create", obj, request))
        return self._check(obj)

    async def validate_update(self, old: Obj, new: Obj, request: AdmissionRequest) -> Sequence[str]:
        self.calls.append(("update", old, new))
        if new["spec"].get("size", 0) < old["spec"].get("size", 0):
            raise ValidationError([FieldError("spec.size", "may not shrink")], warnings=["think again"])
        return self._check(new)

    async def validate_delete(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]:
        self.calls.append(("delete", obj, request))
        if obj["metadata"].get("labels", {}).get("protected") == "true":
            raise PermissionError("this widget is protected")
        return ()

    def _check(self, obj: Obj) -> Sequence[str]:
        spec = obj.get("spec", {})
        errors = []
        if spec.get("size", 0) > 10:
            errors.append(FieldError("spec.size", "Invalid value: 11: must be at most 10"))
        if not spec.get("image"):
            errors.append(FieldError("spec.image", "Required value", reason="FieldValueRequired"))
        if errors:
            raise ValidationError(
                errors, warnings=["spec.legacy is deprecated"] if spec.get("legacy") else ()
            )
        return ["spec.legacy is deprecated"] if spec.get("legacy") else []


@contextmanager
def json_log(logger: str) -> Iterator[list[str]]:
    """The JSON lines ``logger`` writes inside the block, formatted as they are emitted (the
    request's context fields are read then)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    target = logging.getLogger(logger)
    target.addHandler(handler)
    lines: list[str] = []
    try:
        yield lines
    finally:
        target.removeHandler(handler)
        lines += stream.getvalue().splitlines()


def widget(name: str = "w1", **spec: Any) -> Obj:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": "ns1", "annotations": {"a/b~c": "x"}},
        "spec": spec,
    }


def review(operation: str, obj: Obj | None, old: Obj | None = None, **extra: Any) -> bytes:
    name = (obj or old or {}).get("metadata", {}).get("name", "")
    request = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": GROUP, "version": VERSION, "kind": KIND},
        "resource": {"group": GROUP, "version": VERSION, "resource": "widgets"},
        "requestKind": {"group": GROUP, "version": VERSION, "kind": KIND},
        "name": name,
        "namespace": "ns1",
        "operation": operation,
        "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
        **extra,
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


@pytest.fixture
def validator() -> WidgetValidator:
    return WidgetValidator()


@pytest.fixture
def handler(validator: WidgetValidator) -> AdmissionHandler:
    return AdmissionHandler(
        AdmissionWebhook(GROUP, VERSION, KIND, "widgets", defaulter=WidgetDefaulter(), validator=validator)
    )


async def answer(call: Any, body: bytes, content_type: str = "application/json") -> dict[str, Any]:
    status, reply = await call(body, content_type)
    assert status == 200, reply
    decoded = json.loads(reply)
    assert decoded["apiVersion"] == "admission.k8s.io/v1"
    assert decoded["kind"] == "AdmissionReview"
    assert decoded["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    response: dict[str, Any] = decoded["response"]
    return response


def apply_patch(doc: Any, patch: list[dict[str, Any]]) -> Any:
    """RFC 6902 add/remove/replace, written here apart from the code under test."""
    doc = copy.deepcopy(doc)
    for op in patch:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        if not parts:
            assert op["op"] == "replace"
            doc = copy.deepcopy(op["value"])
            continue
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if isinstance(parent, list):
            if op["op"] == "add":
                parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
            elif op["op"] == "remove":
                del parent[int(last)]
            else:
                parent[int(last)] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del parent[last]
        else:
            assert op["op"] == "add" or last in parent, op
            parent[last] = copy.deepcopy(op["value"])
    return doc


async def test_a_default_is_a_base64_json_patch_that_gives_the_defaulted_object(
    handler: AdmissionHandler,
) -> None:
    obj = widget(image="nginx")
    response = await answer(handler.mutate, review("CREATE", obj))
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    expected = copy.deepcopy(obj)
    await WidgetDefaulter().default(expected, None)  # type: ignore[arg-type]
    assert apply_patch(obj, patch) == expected
    assert server_applies(obj, patch) == expected  # as the in-memory API server applies it
    # One operation per default, none replacing what was there.
    assert sorted(op["path"] for op in patch) == [
        "/metadata/labels",
        "/spec/ports",
        "/spec/size",
    ]


async def test_nothing_to_default_is_no_patch(handler: AdmissionHandler) -> None:
    obj = widget(image="nginx", size=3, ports=[{"name": "main", "port": 1}])
    obj["metadata"]["labels"] = {"example.memop.dev/defaulted": "true"}
    response = await answer(handler.mutate, review("UPDATE", obj, widget()))
    assert response == {"uid": response["uid"], "allowed": True}


async def test_delete_is_not_defaulted(handler: AdmissionHandler) -> None:
    response = await answer(handler.mutate, review("DELETE", None, widget()))
    assert response["allowed"] is True
    assert "patch" not in response


def test_json_patch_walks_objects_and_arrays_and_tells_json_types_apart() -> None:
    old = {"a": {"b": 1, "gone": 2, "x/y": [1, 2, 3]}, "l": [{"k": 1}, {"k": 2}], "t": 1, "same": [1] * 50}
    new = {"a": {"b": 2, "x/y": [1, 2]}, "l": [{"k": 1}, {"k": 3}, {"k": 4}], "t": True, "same": [1] * 50}
    patch = json_patch(old, new)
    assert apply_patch(old, patch) == new
    assert server_applies(old, patch) == new
    assert {"op": "replace", "path": "/t", "value": True} in patch
    assert {"op": "remove", "path": "/a/x~1y/2"} in patch
    assert {"op": "replace", "path": "/l/1/k", "value": 3} in patch
    assert not any(op["path"].startswith("/same") for op in patch)
    assert json_patch(old, copy.deepcopy(old)) == []


async def test_validation_warnings_are_returned(
    handler: AdmissionHandler, validator: WidgetValidator
) -> None:
    response = await answer(handler.validate, review("CREATE", widget(image="nginx", legacy=True)))
    assert response["allowed"] is True
    assert response["status"]["code"] == 200
    assert response["warnings"] == ["spec.legacy is deprecated"]
    assert validator.calls[0][0] == "create"
    request = validator.calls[0][2]
    assert request.operation == "CREATE"
    assert request.kind == (GROUP, VERSION, KIND)
    assert request.user_info["username"] == "admin"


async def test_a_validation_error_is_422_invalid_with_apimachinery_wording(handler: AdmissionHandler) -> None:
    response = await answer(handler.validate, review("CREATE", widget(size=11, legacy=True)))
    assert response["allowed"] is False
    assert response["warnings"] == ["spec.legacy is deprecated"]
    status = response["status"]
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    assert status["status"] == "Failure"
    # NewInvalid: '<Kind>.<group> "<name>" is invalid: ' and the field errors aggregated.
    assert status["message"] == (
        'Widget.example.memop.dev "w1" is invalid: '
        "[spec.size: Invalid value: 11: must be at most 10, spec.image: Required value]"
    )
    assert status["details"] == {
        "name": "w1",
        "group": GROUP,
        "kind": KIND,
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": "Invalid value: 11: must be at most 10",
                "field": "spec.size",
            },
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.image"},
        ],
    }


def test_one_field_error_is_not_bracketed_and_repeats_are_folded() -> None:
    one = invalid_status("apps", "Deployment", "d", [FieldError("spec.replicas", "must be positive")])
    assert one["message"] == 'Deployment.apps "d" is invalid: spec.replicas: must be positive'
    twice = invalid_status("", "Pod", "p", [FieldError("spec", "bad")] * 2)
    assert twice["message"] == 'Pod "p" is invalid: spec: bad'
    assert len(twice["details"]["causes"]) == 2


async def test_update_reaches_the_validator_with_the_old_object(
    handler: AdmissionHandler, validator: WidgetValidator
) -> None:
    response = await answer(
        handler.validate, review("UPDATE", widget(size=1, image="i"), widget(size=3, image="i"))
    )
    assert response["allowed"] is False
    assert response["status"]["details"]["causes"][0]["field"] == "spec.size"
    assert response["warnings"] == ["think again"]
    kind, old, new = validator.calls[0]
    assert (kind, old["spec"]["size"], new["spec"]["size"]) == ("update", 3, 1)


async def test_delete_reaches_validate_delete_with_the_old_object(
    handler: AdmissionHandler, validator: WidgetValidator
) -> None:
    response = await answer(handler.validate, review("DELETE", None, widget(image="i")))
    assert response["allowed"] is True
    assert validator.calls[0][0] == "delete"
    assert validator.calls[0][1]["metadata"]["name"] == "w1"


async def test_an_exception_in_user_code_is_a_403_denial_and_one_log_line(handler: AdmissionHandler) -> None:
    protected = widget(image="i")
    protected["metadata"]["labels"] = {"protected": "true"}
    with json_log("memop.webhook") as lines:
        response = await answer(handler.validate, review("DELETE", None, protected))
        defaulted = await answer(handler.mutate, review("CREATE", widget(explode=True)))
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["reason"] == "Forbidden"
    assert response["status"]["message"] == (
        "the Widget.example.memop.dev validator failed: PermissionError: this widget is protected"
    )
    assert defaulted["allowed"] is False
    assert defaulted["status"]["message"] == "the Widget.example.memop.dev defaulter failed: KeyError: 'boom'"
    assert "Traceback" not in json.dumps(response)
    assert len(lines) == 2
    line = json.loads(lines[0])
    assert line["level"] == "error"
    assert "PermissionError: this widget is protected" in line["error"]
    assert (line["webhook"], line["namespace"], line["name"], line["uid"]) == (
        "/validate-example-memop-dev-v1-widget",
        "ns1",
        "w1",
        "705ab4f5-6393-11e8-b7cc-42010a800002",
    )


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        (b"{not json", "application/json", "the body is not JSON"),
        (b"", "application/json", "request body is empty"),
        (b"[]", "application/json", "expected a AdmissionReview object"),
        (b'{"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview", "request": {"uid": "u"}}',
         "application/json", "expected a AdmissionReview of admission.k8s.io/v1"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "ConversionReview", "request": {"uid": "u"}}',
         "application/json", "got kind 'ConversionReview'"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', JSON, "has no request"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"dryRun": true}}',
         JSON, "request has no uid"),
        (review("CREATE", widget()), "text/plain", "contentType=text/plain, expected application/json"),
        (review("PATCH", widget()), "application/json", "unknown operation 'PATCH'"),
        (review("CREATE", None), "application/json", "request.object is missing on CREATE"),
    ],
)  # fmt: skip
async def test_a_body_that_is_no_admission_review_is_a_400_with_its_reason(
    handler: AdmissionHandler, body: bytes, content_type: str, reason: str
) -> None:
    for call in (handler.mutate, handler.validate):
        status, reply = await call(body, content_type)
        assert status == 400
        decoded = json.loads(reply)
        assert decoded["kind"] == "Status"
        assert decoded["code"] == 400
        assert reason in decoded["message"]
        assert "\n" not in decoded["message"]


async def test_a_v1beta1_review_is_answered_in_v1beta1(handler: AdmissionHandler) -> None:
    body = json.loads(review("CREATE", widget(image="i")))
    body["apiVersion"] = "admission.k8s.io/v1beta1"
    status, reply = await handler.validate(json.dumps(body).encode(), "application/json; charset=utf-8")
    assert status == 200
    assert json.loads(reply)["apiVersion"] == "admission.k8s.io/v1beta1"
