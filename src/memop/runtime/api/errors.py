"""A stored object that does not fit its type, reported in the API server's words.

:class:`InvalidObject` is what :meth:`CustomResource.parse
<memop.runtime.api.model.CustomResource.parse>` raises, whatever it was given: one
:class:`~memop.runtime.webhook.declarations.FieldError` per bad field, each with the API
server's field path (``spec.containers[0].image``), reason (``FieldValueInvalid``,
``FieldValueRequired``, ``FieldValueTypeInvalid``, ``FieldValueNotSupported``...) and message
(``Invalid value: 0: spec.replicas in body should be greater than or equal to 1``), so a
condition or an Event says what ``kubectl apply`` would have said had the CRD's schema checked it.

:func:`from_pydantic` translates Pydantic's errors. The field types of
:mod:`memop.runtime.api` raise :class:`SchemaViolation` from their validators, which carries
the server's message already, with ``{path}`` standing for the field's path.
"""

from __future__ import annotations

import enum
import json
import math
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import pydantic

from memop.runtime.api.validation import type_error
from memop.runtime.webhook.declarations import FieldError


class InvalidObject(ValueError):
    """An object that is not a valid instance of its type. ``errors`` holds one FieldError
    per bad field; ``str()`` is the API server's aggregate (one error: ``spec.x: Invalid
    value: ...``; several: ``[spec.x: ..., spec.y: ...]``)."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        if not errors:
            raise ValueError("an InvalidObject needs at least one FieldError")
        self.errors: tuple[FieldError, ...] = tuple(errors)
        messages = list(dict.fromkeys(f"{e.field}: {e.message}" for e in self.errors))
        super().__init__(messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]")


class SchemaViolation(ValueError):
    """Raised by a field type's validator: ``detail`` is the API server's text after
    ``Invalid value: <value>: `` (``Unsupported value: <value>: `` for the reason
    ``FieldValueNotSupported``; nothing before it for other reasons), where ``{path}``
    stands for the field's path (``{path} in body should match '...'``)."""

    def __init__(self, value: Any, detail: str, reason: str = "FieldValueInvalid", *, at: str = "") -> None:
        super().__init__(detail)
        self.value = value
        self.detail = detail
        self.reason = reason
        self.at = at  # a path below the field's (``[3]`` for an item of a list)


def go_value(value: Any) -> str:
    """How the API server prints a bad value in a message: numbers and booleans as Go's
    ``%v``, strings quoted, anything else as compact JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return json.dumps(repr(value))


def type_mismatch(path: str, value: Any, expected: str) -> FieldError:
    """The server's error for a value of the wrong JSON type (``expected``: ``integer``,
    ``integer,string``...)."""
    message = type_error(path, value, expected).removeprefix(f"{path}: ")
    return FieldError(path, message, "FieldValueTypeInvalid")


# Pydantic's error types for a value of the wrong JSON type, by the type the field wants.
_TYPE_ERRORS = {
    "int_type": "integer",
    "int_parsing": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "float_parsing": "number",
    "string_type": "string",
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "list_type": "array",
    "tuple_type": "array",
    "set_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "dataclass_type": "object",
    "datetime_type": "string",
    "datetime_parsing": "string",
    "date_type": "string",
    "date_parsing": "string",
    "enum": "string",
}
# The words before the bad value in the server's message, by reason.
_VALUE_PREFIXES = {
    "FieldValueInvalid": "Invalid value",
    "FieldValueTypeInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueDuplicate": "Duplicate value",
}
_BOUNDS = {
    "greater_than_equal": ("ge", "greater than or equal to"),
    "greater_than": ("gt", "greater than"),
    "less_than_equal": ("le", "less than or equal to"),
    "less_than": ("lt", "less than"),
}


def from_pydantic(error: pydantic.ValidationError, model: type[pydantic.BaseModel]) -> InvalidObject:
    """The InvalidObject for Pydantic's ``error`` raised validating ``model``."""
    found: list[FieldError] = []
    for detail in error.errors(include_url=False):
        path, annotation = _locate(model, detail["loc"])
        found.append(_field_error(path, annotation, detail))
    return InvalidObject(list(dict.fromkeys(found)))


def _field_error(path: str, annotation: Any, detail: Any) -> FieldError:
    kind = detail["type"]
    value = detail.get("input")
    ctx = detail.get("ctx") or {}
    field = path or "<nil>"
    if kind == "missing":
        return FieldError(field, "Required value", "FieldValueRequired")
    if kind == "value_error" and isinstance(ctx.get("error"), SchemaViolation):
        violation: SchemaViolation = ctx["error"]
        field += violation.at
        text = violation.detail.replace("{path}", field)
        prefix = _VALUE_PREFIXES.get(violation.reason)
        if prefix:
            text = f"{prefix}: {go_value(violation.value)}" + (f": {text}" if text else "")
        return FieldError(field, text, violation.reason)
    if kind == "literal_error" or _is_int_or_string(annotation) or kind in _TYPE_ERRORS:
        choices = _literal_choices(annotation)
        if choices is not None and (kind == "literal_error" or value is not None):
            shown = ", ".join(go_value(c) for c in choices)
            text = f"Unsupported value: {go_value(value)}: supported values: {shown}"
            return FieldError(field, text, "FieldValueNotSupported")
        if _is_int_or_string(annotation):
            return type_mismatch(field, value, "integer,string")
        return type_mismatch(field, value, _TYPE_ERRORS.get(kind, "object"))
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return _invalid(field, value, f"{field} in body should be {words} {go_value(ctx.get(key))}")
    if kind == "multiple_of":
        multiple = go_value(ctx.get("multiple_of"))
        return _invalid(field, value, f"{field} in body should be a multiple of {multiple}")
    if kind == "string_too_short":
        minimum = ctx.get("min_length")
        return _invalid(field, value, f"{field} in body should be at least {minimum} chars long")
    if kind == "string_too_long":
        limit = ctx.get("max_length")
        unit = "byte" if limit == 1 else "bytes"
        return FieldError(field, f"Too long: may not be more than {limit} {unit}", "FieldValueTooLong")
    if kind == "string_pattern_mismatch":
        return _invalid(field, value, f"{field} in body should match '{ctx.get('pattern')}'")
    if kind == "too_short":
        count = ctx.get("actual_length", 0)
        unit = "items" if isinstance(value, list) else "properties"
        return _invalid(field, count, f"{field} in body should have at least {ctx.get('min_length')} {unit}")
    if kind == "too_long":
        limit = ctx.get("max_length")
        unit = "item" if limit == 1 else "items"
        text = f"Too many: {ctx.get('actual_length')}: must have at most {limit} {unit}"
        return FieldError(field, text, "FieldValueTooMany")
    return _invalid(field, value, str(detail.get("msg", "invalid")))


def _invalid(field: str, value: Any, text: str) -> FieldError:
    return FieldError(field, f"Invalid value: {go_value(value)}: {text}", "FieldValueInvalid")


# --- finding the field a Pydantic location names ------------------------------------------------


_SEQUENCES = (list, tuple, set, frozenset, typing.Sequence)


def _locate(model: type[pydantic.BaseModel], loc: Iterable[int | str]) -> tuple[str, Any]:
    """The API server's path for Pydantic's location ``loc`` in ``model``, and the annotation
    of the field there (None where it cannot be told). Pydantic's union member tags in ``loc``
    are no part of the path."""
    path = ""
    annotation: Any = model
    steps = list(loc)
    for index, step in enumerate(steps):
        annotation = _unwrap(annotation)
        if steps[index + 1 : index + 2] == ["[key]"] and get_origin(annotation) in (dict, typing.Mapping):
            # A bad key: the server reports it at the map, as ValidateLabels does.
            args = get_args(annotation)
            return path, _unwrap(args[0] if args else None)
        if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
            name = str(step)
            path = f"{path}.{name}" if path else name
            annotation = _field_annotation(annotation, name)
        elif get_origin(annotation) in _SEQUENCES and isinstance(step, int):
            path = f"{path}[{step}]"
            args = get_args(annotation)
            annotation = args[0] if args else None
        elif get_origin(annotation) in (dict, typing.Mapping):
            path = f"{path}.{step}" if path else str(step)
            args = get_args(annotation)
            annotation = args[1] if len(args) == 2 else None
        elif _union_members(annotation) or _is_int_or_string(annotation):
            continue  # a union member's tag
        else:
            path = f"{path}[{step}]" if isinstance(step, int) else (f"{path}.{step}" if path else str(step))
            annotation = None
    return path, _unwrap(annotation)


def _field_annotation(model: type[pydantic.BaseModel], name: str) -> Any:
    for field_name, info in model.model_fields.items():
        if name in (field_name, info.alias):
            return info.annotation
    return None


def _unwrap(annotation: Any) -> Any:
    """The annotation without Annotated metadata and without ``| None``."""
    while True:
        if get_origin(annotation) is typing.Annotated:
            annotation = get_args(annotation)[0]
            continue
        members = _union_members(annotation)
        if members is not None:
            others = [m for m in members if m is not type(None)]
            if len(others) == 1:
                annotation = others[0]
                continue
        return annotation


def _union_members(annotation: Any) -> tuple[Any, ...] | None:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return None


def _is_int_or_string(annotation: Any) -> bool:
    members = _union_members(annotation)
    return members is not None and {_unwrap(m) for m in members if m is not type(None)} == {int, str}


def _literal_choices(annotation: Any) -> tuple[Any, ...] | None:
    """The values a Literal or an Enum allows (None for any other annotation)."""
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return tuple(member.value for member in annotation)
    return None
