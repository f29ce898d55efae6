"""Typed decoding of a built-in kind's object from its OpenAPI v3 schema, as kube-apiserver's
decoder (``sigs.k8s.io/json`` into the Go struct) does it.

:func:`structural` turns a component schema of :mod:`memop.testing.apiserver.builtinapi` into a
self-contained schema (references inlined; the Go types the decoder special-cases marked:
``resource.Quantity``, ``intstr.IntOrString``, ``metav1.Time``/``MicroTime``,
``runtime.RawExtension``). :func:`decode` then does what decoding into the Go struct does:

- a field the struct does not have is dropped (its path is reported, for ``fieldValidation``);
- a value of the wrong JSON type fails with encoding/json's error, the first one in document
  order (``json: cannot unmarshal string into Go struct field StatefulSetSpec.spec.replicas of
  type int32``), an integer out of its Go type's range too;
- a quantity comes back canonical (``1000m`` -> ``1``), a time in UTC, nulls are dropped;
- a ``[]byte`` field must be standard base64 (or a JSON array of bytes, returned as base64).

Not modelled: named string types (an enum field's type is reported as ``string`` where Go says
``v1.PersistentVolumeReclaimPolicy``), and ``omitempty``-less fields appearing with zero values
in what the server returns (only required numbers and booleans are filled in).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memop.testing.apiserver import builtinapi, times
from memop.testing.apiserver.goencoding import Base64Error, std_decode
from memop.testing.apiserver.quantity import canonical as canonical_quantity

Schema = dict[str, Any]

_REF = "#/components/schemas/"
# Go types whose own UnmarshalJSON decides what they accept (x-memop-go marks them).
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
_MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_RAW = (
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
)
_SPECIAL: dict[str, Schema] = {
    _QUANTITY: {"x-memop-go": "quantity", "x-kubernetes-int-or-string": True},
    _INT_OR_STRING: {"x-memop-go": "int-or-string", "x-kubernetes-int-or-string": True},
    _TIME: {"x-memop-go": "time", "type": "string"},
    _MICRO_TIME: {"x-memop-go": "micro-time", "type": "string"},
    **{raw: {"x-memop-go": "raw", "x-kubernetes-preserve-unknown-fields": True} for raw in _RAW},
}
_INT_RANGES = {"int32": 2**31, "int64": 2**63}


def _go_struct_name(name: str) -> str:
    """``io.k8s.api.apps.v1.StatefulSetSpec`` -> ``v1.StatefulSetSpec`` (Go's type String())."""
    return ".".join(name.split(".")[-2:])


@functools.cache
def structural(name: str) -> Schema:
    """The self-contained schema of component ``name`` (cached; shared sub-schemas, and
    cycles, are the same dict objects)."""
    return _Resolver(builtinapi.schemas()).resolve(name)


class _Resolver:
    def __init__(self, components: Mapping[str, Any]) -> None:
        self._components = components
        self._done: dict[str, Schema] = {}

    def resolve(self, name: str) -> Schema:
        if name in self._done:
            return self._done[name]
        out: Schema = {}
        self._done[name] = out  # before filling it: a recursive type refers to itself
        special = _SPECIAL.get(name)
        if special is not None:
            out.update(special)
        else:
            out.update(self._inline(self._components[name]))
            if "properties" in out:
                out["x-memop-struct"] = _go_struct_name(name)
        return out

    def _inline(self, schema: Mapping[str, Any]) -> Schema:
        ref = schema.get("$ref")
        all_of = schema.get("allOf")
        base: Schema = {}
        if isinstance(ref, str):
            base = self.resolve(ref.removeprefix(_REF))
        elif all_of and len(all_of) == 1 and "$ref" in all_of[0]:
            base = self.resolve(str(all_of[0]["$ref"]).removeprefix(_REF))
        if base:
            extra = {k: v for k, v in schema.items() if k in ("default", "x-kubernetes-list-type")}
            return {**base, **extra} if extra else base
        out: Schema = {}
        for key, value in schema.items():
            if key == "properties":
                out[key] = {k: self._inline(v) for k, v in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
                out[key] = self._inline(value)
            elif key not in ("allOf", "oneOf", "anyOf"):
                out[key] = value
        return out


def go_type(schema: Mapping[str, Any]) -> str:
    """The Go type a schema stands for, as encoding/json's errors print it."""
    special = schema.get("x-memop-go")
    if special == "int-or-string":
        return "intstr.IntOrString"
    if special == "quantity":
        return "resource.Quantity"
    if special in ("time", "micro-time"):
        return "v1.Time" if special == "time" else "v1.MicroTime"
    if "x-memop-struct" in schema:
        return str(schema["x-memop-struct"])
    kind = schema.get("type")
    if kind == "array":
        return "[]" + go_type(schema.get("items") or {})
    if kind == "object":
        values = schema.get("additionalProperties")
        return "map[string]" + (go_type(values) if isinstance(values, Mapping) else "interface {}")
    if kind == "integer":
        return str(schema.get("format") or "int64")
    if kind == "number":
        return "float64"
    if kind == "boolean":
        return "bool"
    return "string"


class TypedDecodeError(ValueError):
    """The value does not decode into the Go struct; the message is the decoder's."""


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


@dataclass
class _Context:
    struct: str  # the Go struct whose field is being decoded
    fields: tuple[str, ...]  # the JSON field names from the root (no indices, no map keys)
    path: str  # the path with indices, as unknown-field warnings print it
    unknown: list[str] = field(default_factory=list)

    def type_error(self, value: Any, shown_type: str) -> TypedDecodeError:
        shown = _json_kind(value)
        if isinstance(value, int | float) and not isinstance(value, bool) and "int" in shown_type:
            shown = f"number {value}"
        return TypedDecodeError(
            f"json: cannot unmarshal {shown} into Go struct field {self.struct}.{'.'.join(self.fields)} "
            f"of type {shown_type}"
        )


def decode(
    schema: Mapping[str, Any], obj: Mapping[str, Any], skip: frozenset[str]
) -> tuple[dict[str, Any], list[str]]:
    """``obj`` (a JSON object) decoded into the struct ``schema`` describes, and the paths of the
    fields it dropped as unknown; the top-level fields in ``skip`` (metadata) are kept as they are.
    Raises TypedDecodeError, or QuantityError / TimeFormatError from those types' decoders."""
    root = _Context(_bare(schema, ""), (), "")
    out: dict[str, Any] = {}
    properties = schema.get("properties") or {}
    for key, value in obj.items():
        if key in skip:
            out[key] = value
        elif key not in properties:
            root.unknown.append(key)
        elif value is not None:
            child = _Context(root.struct, (key,), key, root.unknown)
            out[key] = _value(properties[key], value, child)
    return out, root.unknown


def _value(schema: Mapping[str, Any], value: Any, ctx: _Context) -> Any:
    special = schema.get("x-memop-go")
    if special is not None:
        return _special(str(special), value, ctx)
    if "x-memop-struct" in schema or "properties" in schema:
        return _struct(schema, value, ctx)
    kind = schema.get("type")
    if kind == "array":
        if not isinstance(value, list):
            raise ctx.type_error(value, go_type(schema))
        items = schema.get("items") or {}
        return [
            None
            if item is None
            else _value(items, item, _Context(ctx.struct, ctx.fields, f"{ctx.path}[{i}]", ctx.unknown))
            for i, item in enumerate(value)
        ]
    if kind == "object":
        if not isinstance(value, dict):
            raise ctx.type_error(value, go_type(schema))
        values = schema.get("additionalProperties")
        if not isinstance(values, Mapping) or schema.get("x-kubernetes-preserve-unknown-fields"):
            return value
        return {
            k: None
            if v is None
            else _value(values, v, _Context(ctx.struct, ctx.fields, f"{ctx.path}.{k}", ctx.unknown))
            for k, v in value.items()
        }
    return _scalar(schema, kind, value, ctx)


def _scalar(schema: Mapping[str, Any], kind: Any, value: Any, ctx: _Context) -> Any:
    if kind == "integer":
        fmt = str(schema.get("format") or "int64")
        low, high = (
            (0, 256) if fmt == "uint8" else (-_INT_RANGES.get(fmt, 2**63), _INT_RANGES.get(fmt, 2**63))
        )
        if isinstance(value, int) and not isinstance(value, bool) and low <= value < high:
            return value
        raise ctx.type_error(value, fmt)
    if kind == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        raise ctx.type_error(value, "float64")
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        raise ctx.type_error(value, "bool")
    if kind == "string" and schema.get("format") == "byte":
        return _bytes(value, ctx)
    if kind == "string" and not isinstance(value, str):
        raise ctx.type_error(value, "string")
    return value


def _bytes(value: Any, ctx: _Context) -> str:
    """A ``[]byte`` field: standard base64 (Go's decoder reports where it is not), or a JSON
    array of bytes, which the typed object serialises back as base64."""
    if isinstance(value, str):
        try:
            std_decode(value.encode("utf-8", "surrogatepass"))
        except Base64Error as error:
            raise TypedDecodeError(str(error)) from None
        return value
    if isinstance(value, list):
        items = [_value({"type": "integer", "format": "uint8"}, item, ctx) for item in value]
        return base64.b64encode(bytes(items)).decode()
    raise ctx.type_error(value, "[]uint8")


def _bare(schema: Mapping[str, Any], default: str) -> str:
    """The struct's name without its package, as encoding/json names the struct of a field."""
    name = schema.get("x-memop-struct")
    return str(name).rsplit(".", 1)[-1] if name else default


def _struct(schema: Mapping[str, Any], value: Any, ctx: _Context) -> Any:
    if not isinstance(value, dict):
        raise ctx.type_error(value, go_type(schema))
    properties = schema.get("properties") or {}
    struct = _bare(schema, ctx.struct)
    out: dict[str, Any] = {}
    for key, item in value.items():
        path = f"{ctx.path}.{key}"
        if key not in properties:
            ctx.unknown.append(path)
        elif item is not None:
            out[key] = _value(properties[key], item, _Context(struct, (*ctx.fields, key), path, ctx.unknown))
    return out


def _special(special: str, value: Any, ctx: _Context) -> Any:
    if special == "raw":
        return value
    if special == "quantity":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return canonical_quantity(str(value))
        return canonical_quantity(value)
    if special == "int-or-string":
        if isinstance(value, str) or (
            isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31
        ):
            return value
        shown = (
            _json_kind(value)
            if not isinstance(value, int | float) or isinstance(value, bool)
            else f"number {value}"
        )
        raise TypedDecodeError(f"json: cannot unmarshal {shown} into Go value of type int32")
    return times.canonical(value, micro=special == "micro-time")
