"""v1alpha1 <-> v1beta1: round trips are lossless (a property over generated objects), and the
edge cases the module docstring of memop.memcached.conversion lists, one example each."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.memcached import DEFINITION
from memop.memcached.api import (
    API_VERSION,
    API_VERSION_V1BETA1,
    CONTAINER_PORT_ANNOTATION,
    GROUP,
    KIND,
    PLURAL,
    V1BETA1,
    VERSION,
)
from memop.memcached.conversion import CONVERSION, from_hub, to_hub

A = CONTAINER_PORT_ANNOTATION

# --- generated objects, as an API server hands them over ---------------------------------------

_KEYS = st.one_of(
    st.sampled_from(
        ["app", "example.com/team", f"{GROUP}/other", "kubectl.kubernetes.io/last-applied-configuration"]
    ),
    st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}/)?[a-z0-9]{1,10}", fullmatch=True),
).filter(lambda k: k != A)
_TEXT = st.text(max_size=30)
# Never empty: the server omits empty label and annotation maps.
_LABELS = st.dictionaries(_KEYS, _TEXT, min_size=1, max_size=4)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
_QUANTITIES = st.dictionaries(
    st.sampled_from(["cpu", "memory"]), st.sampled_from(["100m", "1", "64Mi", 3]), max_size=2
)


@st.composite
def _metadata(draw: st.DrawFn) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": draw(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)),
        "namespace": "ns",
        "uid": draw(st.uuids()).hex,
        "resourceVersion": str(draw(st.integers(1, 10**6))),
        "generation": draw(st.integers(1, 50)),
    }
    if draw(st.booleans()):
        meta["labels"] = draw(_LABELS)
    if draw(st.booleans()):
        meta["annotations"] = draw(_LABELS)
    if draw(st.booleans()):
        meta["finalizers"] = ["cache.example.com/finalizer"]
    return meta


@st.composite
def _common_spec(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["size"] = draw(st.integers(0, 2**31 - 1))
    if draw(st.booleans()):
        spec["image"] = draw(
            st.sampled_from(["memcached:1.6.26-alpine3.19", "memcached", "r.io/m@sha256:ab"])
        )
    if draw(st.booleans()):
        spec["memoryLimitMiB"] = draw(st.integers(1, 2**20))
    if draw(st.booleans()):
        spec["resources"] = {"limits": draw(_QUANTITIES), "requests": draw(_QUANTITIES)}
    if draw(st.booleans()):  # a field neither version declares (a newer client, no pruning)
        spec["future"] = draw(_JSON)
    return spec


@st.composite
def _status(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.booleans()):
        return None
    return {
        "nodes": draw(st.lists(st.from_regex(r"[a-z0-9-]{1,12}", fullmatch=True), max_size=3)),
        "readyReplicas": draw(st.integers(0, 5)),
        "observedGeneration": draw(st.integers(1, 50)),
        "conditions": [
            {
                "type": "Available",
                "status": draw(st.sampled_from(["True", "False"])),
                "reason": "R",
                "message": "",
            }
        ],
    }


def _object(api_version: str, meta: dict[str, Any], spec: dict[str, Any], status: Any) -> dict[str, Any]:
    obj = {"apiVersion": api_version, "kind": KIND, "metadata": meta, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


@st.composite
def v1alpha1_objects(draw: st.DrawFn) -> dict[str, Any]:
    meta = draw(_metadata())
    choice = draw(st.sampled_from(["none", "port", "malformed"]))
    if choice != "none":
        value = (
            str(draw(st.integers(-(2**31), 2**31)))
            if choice == "port"
            else draw(st.sampled_from(["", "abc", "08080", "+80", " 80", "80 ", "1e3", "8080.0", "-0", "٨٠"]))
        )
        meta["annotations"] = {**meta.get("annotations", {}), A: value}
    return _object(API_VERSION, meta, draw(_common_spec()), draw(_status()))


@st.composite
def v1beta1_objects(draw: st.DrawFn) -> dict[str, Any]:
    spec = draw(_common_spec())
    if draw(st.integers(0, 3)):  # mostly present, as the schema's default makes it
        spec["containerPort"] = draw(st.integers(1, 65535))
    return _object(API_VERSION_V1BETA1, draw(_metadata()), spec, draw(_status()))


@given(v1alpha1_objects())
@settings(max_examples=150)
def test_v1alpha1_to_v1beta1_and_back_is_the_identity(obj: dict[str, Any]) -> None:
    before = copy.deepcopy(obj)
    spoke = from_hub(obj)
    assert obj == before  # not mutated
    assert spoke["apiVersion"] == API_VERSION_V1BETA1
    annotation = (obj["metadata"].get("annotations") or {}).get(A)
    if annotation is not None and "containerPort" in spoke["spec"]:
        assert A not in (spoke["metadata"].get("annotations") or {})
        assert str(spoke["spec"]["containerPort"]) == annotation
    back = to_hub(spoke)
    assert spoke == from_hub(obj)  # not mutated either
    assert back == obj


@given(v1beta1_objects())
@settings(max_examples=150)
def test_v1beta1_to_v1alpha1_and_back_is_the_identity(obj: dict[str, Any]) -> None:
    before = copy.deepcopy(obj)
    hub = to_hub(obj)
    assert obj == before
    assert hub["apiVersion"] == API_VERSION
    assert "containerPort" not in hub["spec"]
    if "containerPort" in obj["spec"]:
        assert hub["metadata"]["annotations"][A] == str(obj["spec"]["containerPort"])
    assert from_hub(hub) == obj


# --- the edge cases, one example each -----------------------------------------------------------


def beta(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION_V1BETA1, "kind": KIND, "metadata": {"name": "m", **meta}, "spec": spec}


def alpha(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "m", **meta}, "spec": spec}


def test_the_port_goes_into_the_annotation_and_comes_back_out() -> None:
    hub = to_hub(beta({"size": 2, "containerPort": 8080}, annotations={"a": "b"}))
    assert hub == alpha({"size": 2}, annotations={"a": "b", A: "8080"})
    assert from_hub(hub) == beta({"size": 2, "containerPort": 8080}, annotations={"a": "b"})
    # The only annotation: no empty map is left behind on the v1beta1 object.
    assert from_hub(alpha({}, annotations={A: "11211"})) == beta({"containerPort": 11211})


def test_without_a_port_nothing_is_added_and_the_server_defaults_it() -> None:
    assert to_hub(beta({"size": 1})) == alpha({"size": 1})
    assert from_hub(alpha({"size": 1})) == beta({"size": 1})  # no default filled in here


@pytest.mark.parametrize(
    "value", ["", "abc", "08080", "+80", " 80", "8080.0", "1e3", "-0", "99999999999999999999"]
)
def test_a_malformed_annotation_is_kept_and_comes_back_unchanged(value: str) -> None:
    obj = alpha({"size": 1}, annotations={A: value})
    spoke = from_hub(obj)
    assert spoke == beta({"size": 1}, annotations={A: value})
    assert to_hub(spoke) == obj


def test_a_value_the_schema_would_refuse_still_round_trips() -> None:
    # Conversion carries the number; judging it is the validator's and the controller's job.
    obj = alpha({}, annotations={A: "70000"})
    assert from_hub(obj) == beta({"containerPort": 70000})
    assert to_hub(from_hub(obj)) == obj


def test_the_annotation_set_by_a_user_at_v1beta1_gives_way_to_the_field() -> None:
    # The name is the conversion's: the field is what a v1beta1 object says.
    assert to_hub(beta({"containerPort": 9000}, annotations={A: "1234"})) == alpha(
        {}, annotations={A: "9000"}
    )
    # Without the field (which the server's default always sets), it is kept as it is.
    assert to_hub(beta({}, annotations={A: "1234"})) == alpha({}, annotations={A: "1234"})


def test_metadata_status_and_unknown_fields_are_carried_over() -> None:
    obj = beta(
        {"size": 3, "containerPort": 1, "unknown": {"x": [1, None]}},
        namespace="ns",
        uid="u",
        labels={"l": "v"},
        finalizers=["f"],
        ownerReferences=[{"kind": "X", "name": "x", "uid": "o"}],
        managedFields=[{"manager": "kubectl"}],
    )
    obj["status"] = {"readyReplicas": 2, "conditions": [{"type": "Available", "status": "True"}]}
    obj["extra"] = "top-level"
    hub = to_hub(obj)
    assert hub["status"] == obj["status"]
    assert hub["extra"] == "top-level"
    assert hub["spec"] == {"size": 3, "unknown": {"x": [1, None]}}
    assert {k: v for k, v in hub["metadata"].items() if k != "annotations"} == obj["metadata"]
    assert from_hub(hub) == obj


def test_null_and_odd_shapes_never_raise() -> None:
    assert to_hub(beta({"containerPort": None})) == alpha({})
    assert to_hub({"apiVersion": API_VERSION_V1BETA1, "kind": KIND}) == {
        "apiVersion": API_VERSION,
        "kind": KIND,
    }
    assert from_hub({"kind": KIND, "spec": None, "metadata": {"annotations": {A: "1"}}}) == {
        "apiVersion": API_VERSION_V1BETA1,
        "kind": KIND,
        "spec": None,
        "metadata": {"annotations": {A: "1"}},  # no spec to put the port in: kept
    }
    assert to_hub({"spec": {"containerPort": 5}, "metadata": None}) == {
        "apiVersion": API_VERSION,
        "spec": {},
        "metadata": {"annotations": {A: "5"}},
    }
    assert from_hub({"metadata": {"annotations": None}, "spec": {}})["metadata"] == {"annotations": None}


def test_the_results_share_nothing_with_the_input() -> None:
    obj = beta({"containerPort": 8080, "resources": {"limits": {"cpu": "1"}}}, labels={"a": "b"})
    hub = to_hub(obj)
    hub["spec"]["resources"]["limits"]["cpu"] = "2"
    hub["metadata"]["labels"]["a"] = "c"
    assert obj == beta({"containerPort": 8080, "resources": {"limits": {"cpu": "1"}}}, labels={"a": "b"})


def test_the_declaration_in_the_definition() -> None:
    assert DEFINITION.conversions == (CONVERSION,)
    assert (CONVERSION.group, CONVERSION.kind, CONVERSION.plural) == (GROUP, KIND, PLURAL)
    assert CONVERSION.hub == VERSION == "v1alpha1"
    assert CONVERSION.versions == (VERSION, V1BETA1)
    # Every version the CRD serves converts; the stored one is the hub.
    (crd,) = DEFINITION.crds()
    assert {v["name"] for v in crd["spec"]["versions"] if v["served"]} == set(CONVERSION.versions)
    assert [v["name"] for v in crd["spec"]["versions"] if v["storage"]] == [CONVERSION.hub]
    spoke = CONVERSION.spokes[V1BETA1]
    assert spoke.from_hub(spoke.to_hub(beta({"containerPort": 2}))) == beta({"containerPort": 2})
