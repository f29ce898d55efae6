"""The structural schema and the CRD written from a CustomResource's Python types."""

from __future__ import annotations

import datetime
import enum
from typing import Annotated, Any, Literal

import pytest
import yaml
from kube_structural import problems
from pydantic import Field

from memop.runtime import (
    Cel,
    CustomResource,
    DNS1123Label,
    IntOrString,
    LabelKey,
    LabelValue,
    ListType,
    MapType,
    Model,
    PreserveUnknownFields,
    PrinterColumn,
    Quantity,
    Scale,
    Schema,
    Status,
)
from memop.runtime.api.crdgen import crd_yaml
from memop.runtime.api.quantity import QUANTITY_PATTERN
from memop.runtime.api.schema import SchemaError, model_schema, openapi_schema


def _field(annotation: Any, default: Any = ..., **field: Any) -> dict[str, Any]:
    """The schema of one field ``x`` of the given annotation (and Field arguments)."""
    namespace: dict[str, Any] = {"__annotations__": {"x": annotation}}
    if default is not ... or field:
        namespace["x"] = Field(default, **field) if field else default
    model = type("One", (Model,), namespace)
    schema: dict[str, Any] = model_schema(model)["properties"]["x"]
    return schema


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (bool, {"type": "boolean"}),
        (int, {"format": "int64", "type": "integer"}),
        (float, {"type": "number"}),
        (str, {"type": "string"}),
        (datetime.datetime, {"format": "date-time", "type": "string"}),
        (datetime.date, {"format": "date", "type": "string"}),
        (Literal["a", "b"], {"enum": ["a", "b"], "type": "string"}),
        (Literal[1, 2], {"enum": [1, 2], "type": "integer"}),
        (Color, {"enum": ["red", "blue"], "type": "string"}),
        (list[str], {"items": {"type": "string"}, "type": "array"}),
        (tuple[int, ...], {"items": {"format": "int64", "type": "integer"}, "type": "array"}),
        (dict[str, int], {"additionalProperties": {"format": "int64", "type": "integer"}, "type": "object"}),
        (dict[str, Any], {"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
        (Any, {"x-kubernetes-preserve-unknown-fields": True}),
        (int | None, {"format": "int64", "nullable": True, "type": "integer"}),
        (
            int | str,
            {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
        ),
        (
            IntOrString | None,
            {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "nullable": True,
                "x-kubernetes-int-or-string": True,
            },
        ),
        (
            Quantity,
            {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": QUANTITY_PATTERN,
                "x-kubernetes-int-or-string": True,
            },
        ),
        (
            DNS1123Label,
            {"maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "type": "string"},
        ),
        (
            dict[LabelKey, LabelValue],
            {
                "additionalProperties": {
                    "maxLength": 63,
                    "pattern": "^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$",
                    "type": "string",
                },
                "type": "object",
            },
        ),
    ],
)
def test_python_types_map_to_openapi_types(annotation: Any, expected: dict[str, Any]) -> None:
    assert _field(annotation) == expected


@pytest.mark.parametrize(
    ("annotation", "field", "expected"),
    [
        (int, {"ge": 1, "le": 10}, {"maximum": 10, "minimum": 1}),
        (
            int,
            {"gt": 0, "lt": 5},
            {"exclusiveMaximum": True, "exclusiveMinimum": True, "maximum": 5, "minimum": 0},
        ),
        (float, {"multiple_of": 2}, {"multipleOf": 2}),
        (
            str,
            {"min_length": 1, "max_length": 5, "pattern": "^a"},
            {"maxLength": 5, "minLength": 1, "pattern": "^a"},
        ),
        (list[str], {"min_length": 1, "max_length": 3}, {"maxItems": 3, "minItems": 1}),
        (dict[str, str], {"min_length": 1, "max_length": 3}, {"maxProperties": 3, "minProperties": 1}),
        (str, {"description": "Said in Field."}, {"description": "Said in Field."}),
    ],
)
def test_field_constraints_become_schema_keywords(
    annotation: Any, field: dict[str, Any], expected: dict[str, Any]
) -> None:
    schema = _field(annotation, ..., **field)
    assert {k: v for k, v in schema.items() if k in expected} == expected


def test_defaults_are_written_serialised_by_alias_and_none_is_no_default() -> None:
    class Inner(Model):
        max_surge: int = 1

    assert _field(int, 3)["default"] == 3
    assert _field(Quantity, Quantity("1024Mi"))["default"] == "1Gi"
    assert _field(Inner, Inner())["default"] == {"maxSurge": 1}
    assert _field(list[Inner], ..., default_factory=lambda: [Inner(max_surge=2)])["default"] == [
        {"maxSurge": 2}
    ]
    assert "default" not in _field(int | None, None)


class Backend(Model):
    """A backend the app talks to."""

    host: str
    """The backend's host name."""
    port: int = Field(default=80, ge=1, le=65535)


@Cel("self.min <= self.max", message="min must not exceed max")
class Range(Model):
    min: int = 0
    max: int = 0


def test_models_are_inline_objects_with_required_fields_and_descriptions() -> None:
    schema = model_schema(Backend)
    assert schema == {
        "description": "A backend the app talks to.",
        "properties": {
            "host": {"description": "The backend's host name.", "type": "string"},
            "port": {"default": 80, "format": "int64", "maximum": 65535, "minimum": 1, "type": "integer"},
        },
        "required": ["host"],
        "type": "object",
    }
    listed = _field(list[Backend])
    assert listed["items"] == schema
    described = _field(Backend, ..., description="Where to send requests.")
    assert described["description"] == "Where to send requests."


def test_markers_write_their_extensions() -> None:
    assert model_schema(Range)["x-kubernetes-validations"] == [
        {"message": "min must not exceed max", "rule": "self.min <= self.max"}
    ]
    even_port = Cel("self.port % 2 == 0", reason="FieldValueForbidden", field_path=".port")
    assert _field(Annotated[Backend, even_port])["x-kubernetes-validations"] == [
        {"fieldPath": ".port", "reason": "FieldValueForbidden", "rule": "self.port % 2 == 0"}
    ]
    assert _field(Annotated[str, Cel("self != ''", message_expression="'bad: ' + self")])[
        "x-kubernetes-validations"
    ] == [{"messageExpression": "'bad: ' + self", "rule": "self != ''"}]
    assert _field(Annotated[list[str], ListType("set")])["x-kubernetes-list-type"] == "set"
    mapped = _field(Annotated[list[Backend], ListType("map", keys=("host",))])
    assert (mapped["x-kubernetes-list-type"], mapped["x-kubernetes-list-map-keys"]) == ("map", ["host"])
    assert _field(Annotated[dict[str, str], MapType("atomic")])["x-kubernetes-map-type"] == "atomic"
    assert _field(Annotated[Backend, PreserveUnknownFields()])["x-kubernetes-preserve-unknown-fields"] is True
    assert _field(Annotated[str, Schema({"format": "email"})])["format"] == "email"
    optional = _field(Annotated[str, Schema({"format": "email"})] | None)  # hashed by typing's Union
    assert (optional["format"], optional["nullable"]) == ("email", True)

    @MapType("atomic")
    class Selector(Model):
        match_labels: dict[str, str] = {}

    assert model_schema(Selector)["x-kubernetes-map-type"] == "atomic"


class Node(Model):
    children: list[Node] = []


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (int | float, "One.x: int | float: a union of different types has no structural schema"),
        (Backend | Range, "a union of different types has no structural schema; use IntOrString"),
        (tuple[int, str], "a tuple of fixed length has no structural schema"),
        (dict[int, str], "the keys of a map in JSON are strings"),
        (Literal["a", 1], "must all be strings, all integers or all booleans"),
        (bytes, "One.x: bytes has no OpenAPI schema in a CRD"),
        (
            Node,
            r"One.x.children\[\]: One -> Node -> Node: a model that contains itself has no structural schema",
        ),
        (Annotated[list[Backend], ListType("map", keys=("port_name",))], "map key 'portName' is no field"),
        (Annotated[list[Range], ListType("map", keys=("min",))], None),
        (
            Annotated[dict[str, str], ListType("set")],
            "One.x: ListType is for a field of type array, not object",
        ),
        (Annotated[list[str], MapType("atomic")], "One.x: MapType is for a field of type object, not array"),
        # kube-apiserver v1.36 refuses a CRD whose rule's fieldPath names no field under the rule,
        (Annotated[int, Cel("self > 0", field_path=".x")], "One.x: Cel field_path: '.x': 'x' is no field"),
        (Annotated[Backend, Cel("true", field_path=".name")], "'name' is no field of the schema"),
        (Annotated[Backend, Cel("true", field_path="['host'")], "no JSONPath of .field and"),
        # and, for a number with a multipleOf that is no whole number, every value sent as a whole
        # number (kube-openapi checks it against the factor cut to an integer: "factor
        # MultipleOf declared for spec.x must be positive: 0").
        (Annotated[float, Field(multiple_of=0.5)], r"multiple_of=0.5: .* cut to an integer \(0\)"),
        (Annotated[float, Field(multiple_of=2.5)], r"cut to an integer \(2\)"),
    ],
)
def test_what_a_crd_cannot_express_is_a_clear_error(annotation: Any, message: str | None) -> None:
    if message is None:  # a defaulted map key is fine
        _field(annotation)
        return
    with pytest.raises(SchemaError, match=message.replace("|", r"\|")):
        _field(annotation)


def test_a_map_key_must_be_required_or_defaulted() -> None:
    class Item(Model):
        name: str | None = None

    with pytest.raises(
        SchemaError, match="map key 'name' must be a required field of the items, or have a default"
    ):
        _field(Annotated[list[Item], ListType("map", keys=("name",))])


# --- whole kinds ------------------------------------------------------------------------------


class WebAppSpec(Model):
    """The desired state of a WebApp."""

    image: str = "nginx"
    replicas: int = Field(default=1, ge=0)
    """Pods to run."""


class WebAppStatus(Status):
    """The observed state of a WebApp."""

    replicas: int = 0
    selector: str = ""


class WebApp(
    CustomResource,
    group="apps.example.com",
    version="v1",
    short_names=("wa",),
    categories=("all", "apps"),
    printer_columns=(
        PrinterColumn("Replicas", ".spec.replicas", "integer", "Pods to run."),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date", priority=1),
    ),
    scale=Scale(label_selector_path=".status.selector"),
):
    """A web application."""

    spec: WebAppSpec
    status: WebAppStatus = WebAppStatus()


class Project(CustomResource, group="tenancy.example.com", version="v1alpha1", namespaced=False):
    """A project: a namespace and what is in it."""

    spec: Annotated[Backend, Cel("self.port != 22")]


def test_the_crd_carries_every_class_option() -> None:
    crd = WebApp.crd()
    assert crd["metadata"] == {"name": "webapps.apps.example.com"}
    assert crd["spec"]["names"] == {
        "categories": ["all", "apps"],
        "kind": "WebApp",
        "listKind": "WebAppList",
        "plural": "webapps",
        "shortNames": ["wa"],
        "singular": "webapp",
    }
    assert crd["spec"]["scope"] == "Namespaced"
    [version] = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "labelSelectorPath": ".status.selector",
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
        },
    }
    assert version["additionalPrinterColumns"] == [
        {"description": "Pods to run.", "jsonPath": ".spec.replicas", "name": "Replicas", "type": "integer"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "priority": 1, "type": "date"},
    ]


def test_the_root_schema_is_the_kubebuilder_layout() -> None:
    schema = openapi_schema(WebApp)
    assert schema["description"] == "A web application."
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["properties"]["apiVersion"]["type"] == "string"
    assert "required" not in schema  # the spec has every field defaulted ...
    assert schema["properties"]["spec"]["default"] == {}  # ... so an absent spec is defaulted
    assert "default" not in schema["properties"]["status"]
    assert schema["properties"]["status"]["properties"]["conditions"]["x-kubernetes-list-map-keys"] == [
        "type"
    ]
    assert problems(schema) == []


def test_a_cluster_scoped_kind_without_status() -> None:
    crd = Project.crd()
    assert crd["spec"]["scope"] == "Cluster"
    [version] = crd["spec"]["versions"]
    assert "subresources" not in version
    schema = version["schema"]["openAPIV3Schema"]
    assert schema["required"] == ["spec"]
    assert schema["properties"]["spec"]["x-kubernetes-validations"] == [{"rule": "self.port != 22"}]
    assert problems(schema) == []


def test_a_scale_path_that_names_no_integer_is_an_error() -> None:
    class Scaled(CustomResource, group="a.example.com", version="v1", scale=Scale(".spec.size")):
        spec: WebAppSpec
        status: WebAppStatus = WebAppStatus()

    with pytest.raises(
        SchemaError, match=r"Scaled: the scale subresource's path '\.spec\.size' is no integer"
    ):
        Scaled.crd()


def test_the_structural_check_itself_finds_what_kubernetes_refuses() -> None:
    bad = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "a": {"$ref": "#/x"},
            "b": {"anyOf": [{"type": "string"}, {"type": "integer"}], "type": "string"},
            "c": {"type": "integer", "default": "x"},
            "d": {"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "set"},
            "e": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >"}]},
        },
    }
    found = problems(bad)
    assert any("metadata" in p for p in found)
    assert any("$ref" in p for p in found)
    assert any("anyOf is only allowed" in p for p in found)
    assert any("the default 'x' does not validate" in p for p in found)
    assert any("a set's items must be scalars" in p for p in found)
    assert any("the rule 'self >' does not parse" in p for p in found)


def test_the_crd_writes_as_the_committed_yaml_and_reads_back_the_same() -> None:
    text = crd_yaml(WebApp.crd(), "tests/api/test_schema.py")
    assert yaml.safe_load(text) == WebApp.crd()
