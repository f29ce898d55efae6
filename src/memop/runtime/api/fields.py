"""Kubernetes field types and schema markers for :class:`~memop.runtime.api.model.Model` fields.

Field types (``typing.Annotated`` aliases: a Python type, its validation in Python with the
API server's wording, and its schema fragment):

- :data:`LabelKey`, :data:`LabelValue`: a label's key (an optional DNS subdomain prefix and
  ``/``, then a name) and value (apimachinery's IsQualifiedName and IsValidLabelValue);
- :data:`DNS1123Label`, :data:`DNS1123Subdomain`: names of namespaces, Services, most objects;
- :data:`IntOrString`: ``intstr.IntOrString`` (a port by number or name, ``maxUnavailable``);
- :class:`~memop.runtime.api.quantity.Quantity` is a field type of its own.

Markers, in ``Annotated[...]`` on a field or, for those that make sense there, as a class
decorator on a model (``@Cel("self.min <= self.max")``):

- :class:`Cel`: a CEL rule, ``x-kubernetes-validations`` (checked by the API server only);
- :class:`ListType`: ``x-kubernetes-list-type`` ``atomic``, ``set`` (items unique) or ``map``
  (items unique by ``keys``), checked in Python too;
- :class:`MapType`: ``x-kubernetes-map-type`` ``atomic`` or ``granular``;
- :class:`PreserveUnknownFields`: ``x-kubernetes-preserve-unknown-fields`` (what
  ``dict[str, Any]`` and ``Any`` give without it);
- :class:`Schema`: an escape hatch, a schema fragment merged over the generated one.

A marker writes its part of a field's schema in ``apply_kube_schema(schema)``; the schema
generator (:mod:`memop.runtime.api.schema`) calls it for every marker it finds.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic.alias_generators import to_camel

from memop.runtime.api.errors import SchemaViolation
from memop.runtime.api.validation import json_type
from memop.runtime.cache.labels import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
    from pydantic_core import CoreSchema

T = TypeVar("T", bound=type)

# Where a class decorator keeps the markers of a model (its own; the schema collects the MRO's).
MODEL_MARKERS = "__kube_markers__"
CEL_REASONS = ("FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate")


def model_markers(model: type) -> list[Any]:
    """The markers declared on ``model`` and its bases, bases first."""
    found: list[Any] = []
    for klass in reversed(model.__mro__):
        found += klass.__dict__.get(MODEL_MARKERS, ())
    return found


class _ModelMarker:
    """A marker that may also decorate a model class."""

    def __call__(self, model: T) -> T:
        own = list(model.__dict__.get(MODEL_MARKERS, ()))
        setattr(model, MODEL_MARKERS, (*own, self))
        return model


@dataclass(frozen=True)
class Cel(_ModelMarker):
    """A CEL validation rule (``x-kubernetes-validations``; Kubebuilder's
    ``+kubebuilder:validation:XValidation``). ``rule`` sees the value as ``self`` (and, for
    transition rules, ``oldSelf``); ``message`` or ``message_expression`` is what the user is
    told; ``reason`` one of :data:`CEL_REASONS`; ``field_path`` the JSONPath (from ``self``) the
    error is reported at. The API server evaluates it; Python parsing does not."""

    rule: str
    message: str | None = None
    message_expression: str | None = None
    reason: str | None = None
    field_path: str | None = None

    def __post_init__(self) -> None:
        if not self.rule.strip():
            raise TypeError("Cel: the rule is empty")
        if self.reason is not None and self.reason not in CEL_REASONS:
            raise TypeError(f"Cel: reason {self.reason!r} is not one of {', '.join(CEL_REASONS)}")

    def to_dict(self) -> dict[str, Any]:
        """The ``x-kubernetes-validations`` entry."""
        rule: dict[str, Any] = {"rule": self.rule}
        for key, value in (
            ("message", self.message),
            ("messageExpression", self.message_expression),
            ("reason", self.reason),
            ("fieldPath", self.field_path),
        ):
            if value is not None:
                rule[key] = value
        return rule

    def apply_kube_schema(self, schema: dict[str, Any]) -> None:
        schema.setdefault("x-kubernetes-validations", []).append(self.to_dict())


@dataclass(frozen=True)
class ListType:
    """``x-kubernetes-list-type``: ``atomic`` (replaced whole by a merge), ``set`` (scalar
    items, each once) or ``map`` (object items, each once by ``keys``, which must be required
    or defaulted fields of the item; give their Python or JSON names). Duplicates are refused
    in Python as the API server refuses them: ``Duplicate value: ...``."""

    type: Literal["atomic", "set", "map"]
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.type not in ("atomic", "set", "map"):
            raise TypeError(f"ListType: {self.type!r} is not atomic, set or map")
        if (self.type == "map") != bool(self.keys):
            raise TypeError("ListType: a map list needs keys=, and only a map list has keys")
        if isinstance(self.keys, str):
            raise TypeError("ListType: keys= is a tuple of names, not one string")

    @functools.cached_property
    def json_keys(self) -> list[str]:
        """The map keys by their JSON names."""
        return [to_camel(k) for k in self.keys]

    def apply_kube_schema(self, schema: dict[str, Any]) -> None:
        schema["x-kubernetes-list-type"] = self.type
        if self.keys:
            schema["x-kubernetes-list-map-keys"] = self.json_keys

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        from pydantic_core import core_schema  # noqa: PLC0415

        inner = handler(source)
        if self.type == "atomic":
            return inner
        return core_schema.no_info_after_validator_function(self._check_unique, inner)

    def _check_unique(self, items: Sequence[Any]) -> Sequence[Any]:
        seen: set[Any] = set()
        for index, item in enumerate(items):
            identity = self._identity(item)
            if identity in seen:
                value = _json_form(item)
                if self.type == "map" and isinstance(value, Mapping):
                    value = {k: value.get(k) for k in self.json_keys}
                raise SchemaViolation(value, "", "FieldValueDuplicate", at=f"[{index}]")
            seen.add(identity)
        return items

    def _identity(self, item: Any) -> Any:
        """What makes ``item`` itself in this list: its value (a set), its keys' values (a map)."""
        if self.type == "map":
            fields = getattr(type(item), "model_fields", {})
            values = []
            for key, json_key in zip(self.keys, self.json_keys, strict=True):
                name = next((n for n, f in fields.items() if json_key in (n, f.alias) or key == n), key)
                values.append(_scalar_identity(getattr(item, name, None)))
            return tuple(values)
        return _scalar_identity(item)


def _scalar_identity(value: Any) -> Any:
    # As the server compares JSON values: numbers by value (1 is 1.0), booleans apart from them.
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str) or value is None:
        return ("string", value)
    return ("json", json.dumps(_json_form(value), sort_keys=True, default=str))


def _json_form(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", by_alias=True, exclude_none=True) if callable(dump) else value


@dataclass(frozen=True)
class MapType(_ModelMarker):
    """``x-kubernetes-map-type``: ``atomic`` (replaced whole by a merge) or ``granular``, on a
    map field or an object."""

    type: Literal["atomic", "granular"]

    def __post_init__(self) -> None:
        if self.type not in ("atomic", "granular"):
            raise TypeError(f"MapType: {self.type!r} is not atomic or granular")

    def apply_kube_schema(self, schema: dict[str, Any]) -> None:
        schema["x-kubernetes-map-type"] = self.type


@dataclass(frozen=True)
class PreserveUnknownFields(_ModelMarker):
    """``x-kubernetes-preserve-unknown-fields: true``: the API server keeps fields the schema
    does not declare (``dict[str, Any]`` and ``Any`` fields have it already)."""

    def apply_kube_schema(self, schema: dict[str, Any]) -> None:
        schema["x-kubernetes-preserve-unknown-fields"] = True


@dataclass(frozen=True)
class Schema(_ModelMarker):
    """A schema fragment merged over the generated schema of the field (or model): for what
    nothing else here expresses (``format``, ``x-kubernetes-embedded-resource``...). The CRD
    must stay structural; the fragment is not checked against the Python type."""

    fragment: Mapping[str, Any] = field(default_factory=dict)

    def __hash__(self) -> int:
        # Hashable by content: typing hashes the metadata of Annotated[X, Schema(...)] when it
        # is a member of a union (``| None``), and a dict is not hashable.
        return hash(json.dumps(self.fragment, sort_keys=True, default=repr))

    def apply_kube_schema(self, schema: dict[str, Any]) -> None:
        schema.update(copy.deepcopy(dict(self.fragment)))


@dataclass(frozen=True)
class _StringFormat:
    """A string field checked by one of apimachinery's name rules, and its schema's
    ``maxLength`` and ``pattern`` (which say the same, as far as a pattern can)."""

    errors: Callable[[str], list[str]]
    max_length: int
    pattern: str

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        from pydantic_core import core_schema  # noqa: PLC0415

        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: str) -> str:
        problems = self.errors(value)
        if problems:
            raise SchemaViolation(value, "; ".join(problems))
        return value

    def apply_kube_schema(self, schema: dict[str, Any]) -> None:
        schema["maxLength"] = self.max_length
        schema["pattern"] = self.pattern


_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"

LabelKey = Annotated[
    str, _StringFormat(qualified_name_errors, 253 + 1 + 63, rf"^({_DNS_SUBDOMAIN}/)?{_NAME}$")
]
"""A label (or annotation) key: ``app``, ``app.kubernetes.io/name``. The schema's pattern
cannot bound the prefix to 253 characters; Python parsing does. As the key of a map
(``dict[LabelKey, LabelValue]``) only Python parsing checks it: a CRD's schema cannot
constrain a map's keys, so the API server stores ``{"": ""}`` and the object's parse fails
(its controller reports InvalidSpec)."""
LabelValue = Annotated[str, _StringFormat(label_value_errors, 63, rf"^({_NAME})?$")]
"""A label value: empty, or up to 63 letters, digits, ``-``, ``_``, ``.``, alphanumeric at both ends."""
DNS1123Label = Annotated[str, _StringFormat(dns1123_label_errors, 63, f"^{_DNS_LABEL}$")]
"""A DNS-1123 label: lower-case letters, digits and ``-``, alphanumeric at both ends, at most 63."""
DNS1123Subdomain = Annotated[str, _StringFormat(dns1123_subdomain_errors, 253, f"^{_DNS_SUBDOMAIN}$")]
"""DNS-1123 labels joined by ``.``, at most 253 characters (most objects' names)."""


@dataclass(frozen=True)
class _IntOrString:
    """``intstr.IntOrString``: an integer or a string, nothing else (no coercion)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        from pydantic_core import core_schema  # noqa: PLC0415

        return core_schema.no_info_plain_validator_function(_int_or_string)

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        return {"anyOf": [{"type": "integer"}, {"type": "string"}]}

    def apply_kube_schema(self, schema: dict[str, Any]) -> None:
        schema.pop("type", None)
        schema.update(INT_OR_STRING_SCHEMA)


INT_OR_STRING_SCHEMA: Mapping[str, Any] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}


def _int_or_string(value: Any) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        actual = json_type(value)
        raise SchemaViolation(
            actual, f'{{path}} in body must be of type integer,string: "{actual}"', "FieldValueTypeInvalid"
        )
    return value


IntOrString = Annotated[int | str, _IntOrString()]
"""An integer or a string (``intstr.IntOrString``): a port by number or name, ``25%``."""
