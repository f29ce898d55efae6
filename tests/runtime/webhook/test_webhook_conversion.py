"""The conversion handler: ConversionReview in, ConversionReview out, hub and spoke
(memop.runtime.webhook.conversion).

A kind declared here: ``Gadget`` of ``example.memop.dev`` with hub ``v2`` (``spec.replicas``)
and spokes ``v1`` (``spec.size``) and ``v3`` (``spec.count``, and ``spec.color`` that the hub
keeps in an annotation).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from memop.runtime.webhook.conversion import ConversionHandler
from memop.runtime.webhook.declarations import Conversion, Obj, Spoke

GROUP = "example.memop.dev"
COLOR = "example.memop.dev/v3-color"


def _renamed(obj: Obj, old: str, new: str) -> Obj:
    out = {**obj, "spec": dict(obj.get("spec", {}))}
    if old in out["spec"]:
        out["spec"][new] = out["spec"].pop(old)
    return out


def v1_to_hub(obj: Obj) -> Obj:
    return _renamed(obj, "size", "replicas")


def v1_from_hub(obj: Obj) -> Obj:
    return _renamed(obj, "replicas", "size")


def v3_to_hub(obj: Obj) -> Obj:
    out = _renamed(obj, "count", "replicas")
    color = out["spec"].pop("color", None)
    out["metadata"] = dict(out["metadata"])
    if color is not None:
        out["metadata"]["annotations"] = {**out["metadata"].get("annotations", {}), COLOR: color}
    if out["spec"].get("replicas") == 13:
        raise ValueError("thirteen is unlucky")
    return out


def v3_from_hub(obj: Obj) -> Obj:
    out = _renamed(obj, "replicas", "count")
    out["metadata"] = dict(out["metadata"])
    annotations = dict(out["metadata"].get("annotations", {}))
    if COLOR in annotations:
        out["spec"]["color"] = annotations.pop(COLOR)
        out["metadata"]["annotations"] = annotations
    if out["spec"].get("count") == 99:
        out["metadata"]["name"] = "renamed"
    return out


GADGETS = Conversion(
    group=GROUP,
    kind="Gadget",
    plural="gadgets",
    hub="v2",
    spokes={"v1": Spoke(v1_to_hub, v1_from_hub), "v3": Spoke(v3_to_hub, v3_from_hub)},
)


def gadget(version: str, **spec: Any) -> Obj:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "Gadget",
        "metadata": {"name": "g1", "namespace": "ns1", "uid": "u-1", "annotations": {"keep": "me"}},
        "spec": spec,
    }


def review(desired: str, *objects: Obj, api_version: str = "apiextensions.k8s.io/v1") -> bytes:
    request = {"uid": "req-1", "desiredAPIVersion": desired, "objects": list(objects)}
    return json.dumps({"apiVersion": api_version, "kind": "ConversionReview", "request": request}).encode()


async def convert(body: bytes) -> dict[str, Any]:
    status, reply = await ConversionHandler([GADGETS]).handle(body, "application/json")
    assert status == 200, reply
    decoded = json.loads(reply)
    assert decoded["kind"] == "ConversionReview"
    assert decoded["response"]["uid"] == "req-1"
    response: dict[str, Any] = decoded["response"]
    return response


async def test_spoke_to_spoke_goes_through_the_hub_and_back() -> None:
    v3 = gadget("v3", count=3, color="red")
    response = await convert(review(f"{GROUP}/v1", v3))
    assert response["result"]["status"] == "Success"
    [v1] = response["convertedObjects"]
    assert v1["apiVersion"] == f"{GROUP}/v1"
    assert v1["spec"] == {"size": 3}
    assert v1["metadata"]["annotations"] == {"keep": "me", COLOR: "red"}
    # And back, losslessly.
    back = await convert(review(f"{GROUP}/v3", v1))
    assert back["convertedObjects"] == [v3]


async def test_to_and_from_the_hub_is_one_step_and_same_version_is_unchanged() -> None:
    response = await convert(review(f"{GROUP}/v2", gadget("v1", size=2), gadget("v2", replicas=5)))
    assert [o["spec"] for o in response["convertedObjects"]] == [{"replicas": 2}, {"replicas": 5}]
    assert {o["apiVersion"] for o in response["convertedObjects"]} == {f"{GROUP}/v2"}
    down = await convert(review(f"{GROUP}/v1", gadget("v2", replicas=4)))
    assert down["convertedObjects"][0]["spec"] == {"size": 4}
    assert down["convertedObjects"][0]["apiVersion"] == f"{GROUP}/v1"


async def test_a_v1beta1_review_is_answered_in_v1beta1() -> None:
    status, reply = await ConversionHandler([GADGETS]).handle(
        review(f"{GROUP}/v1", gadget("v2"), api_version="apiextensions.k8s.io/v1beta1"), "application/json"
    )
    assert status == 200
    assert json.loads(reply)["apiVersion"] == "apiextensions.k8s.io/v1beta1"


@pytest.mark.parametrize(
    ("desired", "obj", "message"),
    [
        (f"{GROUP}/v9", gadget("v1"), "Gadget.example.memop.dev has no version 'v9' (versions: v2, v1, v3)"),
        (f"{GROUP}/v1", gadget("v0"), "Gadget.example.memop.dev has no version 'v0'"),
        (f"{GROUP}/v1", {**gadget("v1"), "kind": "Gizmo"},
         "no conversion is declared for Gizmo.example.memop.dev"),
        ("other.dev/v1", gadget("v1"),
         "cannot convert Gadget ns1/g1 of group 'example.memop.dev' to other.dev/v1"),
        (f"{GROUP}/v2", gadget("v3", count=13),
         "the v3 → v2 conversion of Gadget ns1/g1 failed: ValueError: thirteen is unlucky"),
        (f"{GROUP}/v3", gadget("v1", size=99),
         "the v2 → v3 conversion of Gadget ns1/g1 changed metadata.name"),
    ],
)  # fmt: skip
async def test_what_cannot_be_converted_is_a_failure_with_one_log_line(
    desired: str, obj: Obj, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="memop.webhook"):
        response = await convert(review(desired, gadget("v1", size=1), obj))
    assert response["result"]["status"] == "Failure"
    assert message in response["result"]["message"]
    assert response["convertedObjects"] == []
    assert len([r for r in caplog.records if r.name == "memop.webhook"]) == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"nope", "the body is not JSON"),
        (b'{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}', "has no request"),
        (b'{"apiVersion": "apiextensions.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}',
         "expected a ConversionReview"),
        (b'{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": {"objects": []}}',
         "request has no uid"),
        (b'{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": {"uid": "u"}}',
         "no desiredAPIVersion"),
        (b'{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", '
         b'"request": {"uid": "u", "desiredAPIVersion": "a/v1", "objects": {}}}', "objects is not a list"),
    ],
)  # fmt: skip
async def test_a_body_that_is_no_conversion_review_is_a_400(body: bytes, reason: str) -> None:
    status, reply = await ConversionHandler([GADGETS]).handle(body, "application/json")
    assert status == 400
    assert reason in json.loads(reply)["message"]


async def test_a_kind_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match=r"two conversions declared for Gadget\.example\.memop\.dev"):
        ConversionHandler([GADGETS, GADGETS])
