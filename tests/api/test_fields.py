"""memop.runtime's Kubernetes field types and markers: validation in Python, in the server's words."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from memop.runtime import (
    DNS1123Label,
    DNS1123Subdomain,
    IntOrString,
    InvalidObject,
    LabelKey,
    LabelValue,
    ListType,
    MapType,
    Model,
)
from memop.runtime.api.fields import Cel, model_markers


class Port(Model):
    name: str
    port: int = 80
    protocol: str = "TCP"


class Names(Model):
    key: LabelKey = "app"
    value: LabelValue = ""
    label: DNS1123Label = "a"
    subdomain: DNS1123Subdomain = "a.b"
    target: IntOrString = 80
    tags: Annotated[list[str], ListType("set")] = Field(default_factory=list)
    ports: Annotated[list[Port], ListType("map", keys=("name", "protocol"))] = Field(default_factory=list)
    order: Annotated[list[str], ListType("atomic")] = Field(default_factory=list)


def _errors(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    with pytest.raises(InvalidObject) as caught:
        Names.parse(obj)
    return [(e.field, e.reason, e.message) for e in caught.value.errors]


@pytest.mark.parametrize(
    "key", ["app", "app.kubernetes.io/name", "example.com/My_Name-1", "a" * 63, "x/" + "a" * 63]
)
def test_label_keys_that_kubernetes_accepts(key: str) -> None:
    assert Names.parse({"key": key}).key == key


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("-app", "name part must consist of alphanumeric characters"),
        ("a" * 64, "name part must be no more than 63 characters"),
        ("Example.com/app", "prefix part a lowercase RFC 1123 subdomain must consist of"),
        ("/app", "prefix part must be non-empty"),
        ("a/b/c", "a qualified name must consist of"),
        ("", "name part must be non-empty"),
    ],
)
def test_label_keys_that_kubernetes_refuses(key: str, why: str) -> None:
    [(field, reason, message)] = _errors({"key": key})
    assert (field, reason) == ("key", "FieldValueInvalid")
    assert message.startswith(f"Invalid value: {key!r}: ".replace("'", '"'))
    assert why in message


def test_label_values() -> None:
    assert Names.parse({"value": ""}).value == ""
    assert Names.parse({"value": "v1.2_3-x"}).value == "v1.2_3-x"
    [(_, _, message)] = _errors({"value": "-bad"})
    assert "a valid label must be an empty string or consist of alphanumeric characters" in message
    [(_, _, message)] = _errors({"value": "a" * 64})
    assert "must be no more than 63 characters" in message


def test_dns1123_names() -> None:
    assert Names.parse({"label": "my-app-1", "subdomain": "my.app-1.example"}).subdomain == "my.app-1.example"
    [(field, _, message)] = _errors({"label": "My.App"})
    assert field == "label"
    assert message == (
        'Invalid value: "My.App": a lowercase RFC 1123 label must consist of lower case alphanumeric '
        "characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
        "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    )
    [(_, _, message)] = _errors({"subdomain": "a_b"})
    assert "a lowercase RFC 1123 subdomain must consist of" in message
    [(_, _, message)] = _errors({"subdomain": "a" * 254})
    assert "must be no more than 253 characters" in message


def test_int_or_string_takes_either_and_nothing_else() -> None:
    assert Names.parse({"target": 8080}).target == 8080
    assert Names.parse({"target": "http"}).target == "http"
    assert Names.parse({"target": "25%"}).to_dict()["target"] == "25%"
    for bad, actual in ((1.5, "number"), (True, "boolean"), (None, "null"), ([1], "array")):
        assert _errors({"target": bad}) == [
            (
                "target",
                "FieldValueTypeInvalid",
                f'Invalid value: "{actual}": target in body must be of type integer,string: "{actual}"',
            )
        ]


def test_a_set_list_refuses_duplicates_as_the_server_does() -> None:
    assert Names.parse({"tags": ["a", "b"]}).tags == ["a", "b"]
    assert _errors({"tags": ["a", "b", "a"]}) == [("tags[2]", "FieldValueDuplicate", 'Duplicate value: "a"')]


def test_a_map_list_refuses_two_items_with_the_same_keys() -> None:
    ok = Names.parse({"ports": [{"name": "http"}, {"name": "http", "protocol": "UDP"}]})
    assert [p.protocol for p in ok.ports] == ["TCP", "UDP"]
    assert _errors({"ports": [{"name": "http", "port": 1}, {"name": "http", "port": 2}]}) == [
        ("ports[1]", "FieldValueDuplicate", 'Duplicate value: {"name":"http","protocol":"TCP"}')
    ]


def test_an_atomic_list_may_repeat_items() -> None:
    assert Names.parse({"order": ["a", "a"]}).order == ["a", "a"]


def test_markers_refuse_what_kubernetes_does_not_know() -> None:
    with pytest.raises(TypeError, match="is not atomic, set or map"):
        ListType("bag")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a map list needs keys="):
        ListType("map")
    with pytest.raises(TypeError, match="only a map list has keys"):
        ListType("set", keys=("a",))
    with pytest.raises(TypeError, match="is not atomic or granular"):
        MapType("loose")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reason 'Bad' is not one of"):
        Cel("self > 0", reason="Bad")
    with pytest.raises(TypeError, match="the rule is empty"):
        Cel(" ")


def test_cel_rules_on_a_model_by_decorator_and_class_keyword_are_collected_with_the_bases() -> None:
    @Cel("self.min <= self.max", message="min must not exceed max")
    class Range(Model, validations=[Cel("has(self.min)")]):
        min: int = 0
        max: int = 0

    class Wider(Range):
        pass

    assert [m.rule for m in model_markers(Wider)] == ["has(self.min)", "self.min <= self.max"]
    with pytest.raises(TypeError, match="validations= takes Cel rules"):

        class Wrong(Model, validations=["self > 0"]):
            pass


def test_a_set_compares_items_as_json_does() -> None:
    class Numbers(Model):
        values: Annotated[list[Any], ListType("set")] = Field(default_factory=list)

    assert Numbers.parse({"values": [1, True, "1"]}).values == [1, True, "1"]
    with pytest.raises(InvalidObject, match=r"values\[1\]: Duplicate value: 1"):
        Numbers.parse({"values": [1, 1.0]})


def test_a_bad_map_key_is_reported_at_the_map() -> None:
    class Labelled(Model):
        labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)

    with pytest.raises(InvalidObject) as caught:
        Labelled.parse({"labels": {"-bad": "ok", "good": "-bad"}})
    assert [(e.field, e.message.split(":")[1].strip()) for e in caught.value.errors] == [
        ("labels", '"-bad"'),
        ("labels.good", '"-bad"'),
    ]
