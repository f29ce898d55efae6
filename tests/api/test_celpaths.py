"""A CEL rule's fieldPath, accepted or refused as kube-apiserver v1.36.2 does (each case was
written on a real one as the fieldPath of a rule on ``SCHEMA``, with ``--dry-run=server``)."""

from __future__ import annotations

from typing import Any

import pytest

from memop.runtime.api.celpaths import field_path_error

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "port": {"type": "integer"},
        "inner": {"type": "object", "properties": {"a": {"type": "string"}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "list": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "a.b": {"type": "string"},
    },
}

ACCEPTED = ["", ".port", ".inner.a", ".inner", "['port']", "['a.b']", ".labels.x", ".labels['x.y']", ".list"]
REFUSED = [
    ".list[0]",  # no path into a list
    ".list.n",
    ".free.x",  # a preserve-unknown-fields object declares no field
    ".nope",
    ".",
    "port",
    "['port'",
    "[port]",
    ".inner.a.b",  # a string has no fields
    "['it\\'s']",
    " ",
    ".port.",
    "..port",
    ".port\n",
]


@pytest.mark.parametrize("path", ACCEPTED)
def test_paths_kube_apiserver_accepts(path: str) -> None:
    assert field_path_error(path, SCHEMA) is None


@pytest.mark.parametrize("path", REFUSED)
def test_paths_kube_apiserver_refuses(path: str) -> None:
    assert field_path_error(path, SCHEMA) is not None


def test_the_reason_names_the_step_that_is_no_field() -> None:
    assert field_path_error(".inner.b", SCHEMA) == "'.inner.b': 'b' is no field of the schema the rule is on"
