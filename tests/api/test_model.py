"""memop.runtime's typed API classes: a kind's identity from class keywords, parse and to_dict."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import Field

from memop.runtime import (
    Condition,
    CustomResource,
    InvalidObject,
    KindInfo,
    Model,
    ObjectMeta,
    PrinterColumn,
    Resource,
    Scale,
    Status,
)
from memop.runtime.api.kinds import pluralize


class Port(Model):
    """A port the app listens on."""

    name: str
    port: int = Field(ge=1, le=65535)


class WebAppSpec(Model):
    """What the user wants."""

    replicas: int = Field(default=1, ge=1)
    """How many pods serve the app."""
    image: str = Field(min_length=1)
    mode: Literal["blue", "green"] = "blue"
    ports: list[Port] = Field(default_factory=list, max_length=2)
    env: dict[str, str] = Field(default_factory=dict)
    min_ready_seconds: int | None = None


class WebAppStatus(Status):
    ready_replicas: int = 0


class WebApp(CustomResource, group="apps.example.com", version="v1", short_names=("wa",)):
    """A web application."""

    spec: WebAppSpec
    status: WebAppStatus = WebAppStatus()


class Abstract(CustomResource):
    """A base of kinds, no kind itself."""

    spec: WebAppSpec


class Tenant(
    Abstract,
    group="tenancy.example.com",
    version="v1alpha1",
    kind="Tenancy",
    namespaced=False,
    categories=("all",),
    printer_columns=(PrinterColumn("Image", ".spec.image"),),
    scale=Scale(label_selector_path=".status.selector"),
):
    pass


def test_class_keywords_declare_the_kind() -> None:
    assert WebApp.kube == KindInfo(
        "apps.example.com", "v1", "WebApp", "webapps", "webapp", short_names=("wa",)
    )
    assert WebApp.resource() == Resource("apps.example.com", "v1", "webapps", "WebApp")
    assert Tenant.kube.kind == "Tenancy"
    assert Tenant.kube.plural == "tenancies"
    assert Tenant.resource() == Resource("tenancy.example.com", "v1alpha1", "tenancies", "Tenancy", False)
    assert Tenant.kube.printer_columns[0].to_dict() == {
        "jsonPath": ".spec.image",
        "name": "Image",
        "type": "string",
    }


def test_a_class_without_group_and_version_is_no_kind() -> None:
    assert "kube" not in vars(Abstract)
    with pytest.raises(TypeError, match="Abstract declares no kind"):
        Abstract.resource()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"group": "example", "version": "v1"}, "group 'example' must be a DNS subdomain"),
        ({"group": "a.example.com", "version": "one"}, "version 'one' must look like v1"),
        ({"group": "a.example.com", "version": "v1", "plural": "Bad_Plural"}, "plural: 'Bad_Plural'"),
        ({"group": "a.example.com"}, "needs both group= and version="),
        ({"group": "a.example.com", "version": "v1", "scale": 3}, "scale must be a Scale"),
        (
            {"group": "a.example.com", "version": "v1", "shortnames": ("b",)},
            "unknown class option.s. shortnames",
        ),
    ],
)
def test_bad_class_keywords_are_a_type_error_naming_the_class(options: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message) as caught:
        type("Broken", (CustomResource,), {"__annotations__": {}}, **options)
    assert str(caught.value).startswith("Broken: ")


def test_a_printer_column_of_an_unknown_type_is_refused() -> None:
    with pytest.raises(TypeError, match="type 'text' is not one of"):
        PrinterColumn("X", ".spec.x", "text")


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("memcached", "memcacheds"),
        ("policy", "policies"),
        ("gateway", "gateways"),
        ("ingress", "ingresses"),
        ("box", "boxes"),
        ("batch", "batches"),
        ("person", "people"),
        ("metadata", "metadata"),
        ("webapp", "webapps"),
    ],
)
def test_the_plural_is_kubebuilders(kind: str, plural: str) -> None:
    assert pluralize(kind) == plural


def test_to_dict_is_the_json_form_and_parse_reads_it_back() -> None:
    app = WebApp(metadata=ObjectMeta(name="shop", namespace="prod"), spec=WebAppSpec(image="nginx"))
    assert app.to_dict() == {
        "apiVersion": "apps.example.com/v1",
        "kind": "WebApp",
        "metadata": {"name": "shop", "namespace": "prod"},
        "spec": {"replicas": 1, "image": "nginx", "mode": "blue", "ports": [], "env": {}},
        "status": {"conditions": [], "readyReplicas": 0},
    }
    assert WebApp.parse(app.to_dict()) == app
    assert (app.name, app.namespace, app.uid, app.generation) == ("shop", "prod", "", 0)


def test_parse_keeps_unknown_metadata_and_ignores_unknown_fields() -> None:
    stored = {
        "apiVersion": "apps.example.com/v1",
        "kind": "WebApp",
        "metadata": {"name": "a", "uid": "u1", "generation": 3, "managedFields": [{"manager": "m"}]},
        "spec": {"image": "x", "minReadySeconds": 5, "unknown": True},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Up",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "observedGeneration": 3,
        },
    }
    app = WebApp.parse(stored)
    assert (app.uid, app.generation, app.spec.min_ready_seconds) == ("u1", 3, 5)
    assert app.status.conditions == [
        Condition(type="Ready", status="True", reason="Up", last_transition_time="2026-01-01T00:00:00Z")
    ]
    out = app.to_dict()
    assert out["metadata"]["managedFields"] == [{"manager": "m"}]
    assert "unknown" not in out["spec"]


def test_a_default_status_is_not_shared_between_objects() -> None:
    one = WebApp(spec=WebAppSpec(image="a"))
    two = WebApp(spec=WebAppSpec(image="b"))
    one.status.ready_replicas = 3
    assert two.status.ready_replicas == 0


def _errors(obj: Any) -> list[tuple[str, str, str]]:
    with pytest.raises(InvalidObject) as caught:
        WebApp.parse(obj)
    return [(e.field, e.reason, e.message) for e in caught.value.errors]


def test_parse_reports_each_bad_field_in_the_api_servers_words() -> None:
    errors = _errors(
        {
            "spec": {
                "replicas": 0,
                "image": "",
                "mode": "red",
                "ports": [{"name": "a", "port": 70000}, {"port": "80"}, {"name": "c", "port": 1}],
                "env": {"A": 1},
                "minReadySeconds": "5",
            }
        }
    )
    assert errors == [
        (
            "spec.replicas",
            "FieldValueInvalid",
            "Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
        ),
        (
            "spec.image",
            "FieldValueInvalid",
            'Invalid value: "": spec.image in body should be at least 1 chars long',
        ),
        (
            "spec.mode",
            "FieldValueNotSupported",
            'Unsupported value: "red": supported values: "blue", "green"',
        ),
        ("spec.ports", "FieldValueTooMany", "Too many: 3: must have at most 2 items"),
        (
            "spec.env.A",
            "FieldValueTypeInvalid",
            'Invalid value: "integer": spec.env.A in body must be of type string: "integer"',
        ),
        (
            "spec.minReadySeconds",
            "FieldValueTypeInvalid",
            'Invalid value: "string": spec.minReadySeconds in body must be of type integer: "string"',
        ),
    ]


def test_parse_reports_nested_errors_with_list_indexes() -> None:
    errors = _errors({"spec": {"image": "x", "ports": [{"name": "a", "port": 70000}, {"port": 80}]}})
    assert errors == [
        (
            "spec.ports[0].port",
            "FieldValueInvalid",
            "Invalid value: 70000: spec.ports[0].port in body should be less than or equal to 65535",
        ),
        ("spec.ports[1].name", "FieldValueRequired", "Required value"),
    ]


def test_the_message_is_the_api_servers_aggregate() -> None:
    with pytest.raises(InvalidObject) as one:
        WebApp.parse({"spec": {"image": "x", "replicas": 0}})
    assert (
        str(one.value)
        == "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"
    )
    with pytest.raises(InvalidObject) as two:
        WebApp.parse({"spec": {}, "metadata": {"name": 1}})
    assert str(two.value) == (
        '[metadata.name: Invalid value: "integer": metadata.name in body must be of type string: "integer",'
        " spec.image: Required value]"
    )


def test_parse_refuses_another_kind_and_what_is_no_object() -> None:
    assert _errors({"apiVersion": "apps.example.com/v2", "kind": "Other", "spec": {"image": "x"}}) == [
        (
            "apiVersion",
            "FieldValueNotSupported",
            'Unsupported value: "apps.example.com/v2": supported values: "apps.example.com/v1"',
        ),
        ("kind", "FieldValueNotSupported", 'Unsupported value: "Other": supported values: "WebApp"'),
    ]
    assert _errors([1]) == [
        ("<nil>", "FieldValueTypeInvalid", 'Invalid value: "array": must be of type object')
    ]
    assert _errors({"spec": {"image": object()}})[0][0] == "<nil>"
    assert _errors({"spec": None}) == [
        (
            "spec",
            "FieldValueTypeInvalid",
            'Invalid value: "null": spec in body must be of type object: "null"',
        )
    ]


def test_parse_does_not_coerce_json_types() -> None:
    assert _errors({"spec": {"image": "x", "replicas": "2"}})[0][1] == "FieldValueTypeInvalid"
    assert _errors({"spec": {"image": "x", "replicas": True}})[0][1] == "FieldValueTypeInvalid"
    assert _errors({"spec": {"image": 5}})[0][1] == "FieldValueTypeInvalid"


def test_a_validator_that_fails_unexpectedly_is_still_an_invalid_object() -> None:
    from pydantic import field_validator  # noqa: PLC0415

    class Fragile(Model):
        name: str

        @field_validator("name")
        @classmethod
        def _boom(cls, value: str) -> str:
            raise KeyError(value)

    with pytest.raises(InvalidObject, match="Internal error: validating raised KeyError"):
        Fragile.parse({"name": "x"})


def test_the_status_base_carries_conditions_and_observed_generation() -> None:
    status = WebAppStatus(observed_generation=2, ready_replicas=1)
    assert status.to_dict() == {"conditions": [], "observedGeneration": 2, "readyReplicas": 1}
    with pytest.raises(InvalidObject) as caught:
        WebAppStatus.parse({"conditions": [{"type": "Ready", "status": "Maybe"}]})
    assert [e.field for e in caught.value.errors] == [
        "conditions[0].status",
        "conditions[0].reason",
        "conditions[0].lastTransitionTime",
    ]
