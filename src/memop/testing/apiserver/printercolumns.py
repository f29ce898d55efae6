"""The Table printer of a custom resource: its CRD's ``additionalPrinterColumns``.

As the apiextensions-apiserver builds it (``tableconvertor.New``, v1.36): Name first, then the
columns the CRD declares for the served version, each a JSONPath of the object
(:mod:`memop.testing.apiserver.jsonpath`); a version that declares none gets Age (the creation time), and
a version that declares some gets no Age of its own. A column whose JSONPath does not parse
ends the list: it and the columns after it are dropped, as the real convertor stops there.

A cell is the first value its path finds, or null when it finds none (or fails). A ``string``
column prints that value (objects and lists as JSON); ``integer``, ``number`` and ``boolean``
take only a JSON value of their kind (a float truncated for an integer); ``date`` takes an RFC
3339 string and shows its age ("5m3s", "<invalid>" when it does not parse).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.testing.apiserver import columns, jsonpath
from memop.testing.apiserver.printers import Printer, Row
from memop.testing.apiserver.times import ZERO, TimeFormatError, human_duration, nanoseconds_since, parse

_AGE = {
    "name": "Age",
    "type": "date",
    "description": columns.CREATION_TIMESTAMP,
    "jsonPath": ".metadata.creationTimestamp",
}
_INT64 = 2**63


def printer(crd: Mapping[str, Any], version: str) -> Printer:
    """The printer of ``version`` of the custom resources ``crd`` defines."""
    declared: list[Any] = []
    for served in (crd.get("spec") or {}).get("versions") or ():
        if isinstance(served, Mapping) and served.get("name") == version:
            declared = list(served.get("additionalPrinterColumns") or ())
    headers = [columns.column("Name", columns.NAME, format="name")]
    paths: list[tuple[str, jsonpath.Template]] = []
    for col in declared or [_AGE]:
        path = str(col.get("jsonPath") or "")
        try:
            template = jsonpath.parse("{" + path + "}")
        except jsonpath.JsonPathError:
            break
        kind = str(col.get("type") or "")
        description = (
            col.get("description") or f"Custom resource definition column (in JSONPath format): {path}"
        )
        headers.append(
            columns.column(
                str(col.get("name") or ""),
                str(description),
                type=kind,
                format=str(col.get("format") or ""),
                priority=col.get("priority") if isinstance(col.get("priority"), int) else 0,
            )
        )
        paths.append((kind, template))

    def row(obj: Mapping[str, Any], now: float) -> Row:
        name = (obj.get("metadata") or {}).get("name")
        stored = _as_stored(obj)
        return {
            "cells": [name if isinstance(name, str) else "", *(_cell(k, t, stored, now) for k, t in paths)]
        }

    return Printer(tuple(headers), row)


def _as_stored(value: Any) -> Any:
    """``value`` as kube-apiserver reads it back from storage: a number decodes as an int64 when
    it is one, else as a float64, and encoding/json writes an integral float below 1e21 without
    a fraction (``1e6`` as ``1000000``), which comes back an integer."""
    if isinstance(value, float) and value.is_integer() and -_INT64 <= value < _INT64:
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
        return float(value)
    if isinstance(value, Mapping):
        return {k: _as_stored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_stored(v) for v in value]
    return value


def _cell(kind: str, template: jsonpath.Template, obj: Mapping[str, Any], now: float) -> Any:
    try:
        results = template.find(obj)
    except jsonpath.JsonPathError:
        return None
    if not results or not results[0]:
        return None
    value = results[0][0]
    if kind == "string":
        return jsonpath.text(value)
    return _typed(kind, value, now)


def _typed(kind: str, value: Any, now: float) -> Any:
    """``cellForJSONValue``: the value when it is of the column's type, else null."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "integer" and number:
        if isinstance(value, float):
            # Go's int64(f); out of range (and NaN) it is the minimum on amd64.
            return int(value) if -_INT64 <= value < _INT64 else -_INT64
        return value
    if kind == "number" and number:
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        if value in ("", '""'):
            return "<unknown>"
        try:
            instant = parse(value, micro=False)
        except TimeFormatError:
            return "<invalid>"
        return "<unknown>" if instant == ZERO else human_duration(nanoseconds_since(instant, now))
    return None
