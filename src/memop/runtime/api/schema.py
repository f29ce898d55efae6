"""The structural OpenAPI schema and the CRD of a :class:`~memop.runtime.api.model.CustomResource`.

What controller-gen does for Go types with markers, done for Pydantic models:

- every nested model is written inline where it is used (no ``$ref``); a model that contains
  itself cannot be written so and is a :class:`SchemaError`;
- Python types map to OpenAPI types: ``bool`` boolean, ``int`` integer with format int64 (a
  Python int is unbounded, so the widest Kubernetes integer; bound it with ``ge``/``le``),
  ``float`` number, ``str`` string, ``datetime``/``date`` string with format date-time/date,
  ``Literal[...]`` and ``enum.Enum`` an enum of one type, ``list[X]`` array, ``dict[str, X]``
  object with ``additionalProperties``, a model an object with ``properties``, ``Any`` and
  ``dict[str, Any]`` preserve unknown fields, :class:`~memop.runtime.api.quantity.Quantity`
  and :data:`~memop.runtime.api.fields.IntOrString` int-or-string;
- ``X | None`` is ``nullable: true``; ``int | str`` is int-or-string; any other union has no
  structural schema and is a :class:`SchemaError` naming the field;
- ``Field(ge, gt, le, lt, multiple_of, min_length, max_length, pattern)`` give ``minimum``,
  ``exclusiveMinimum``..., ``minLength``/``minItems``/``minProperties`` as the type is; a
  ``multiple_of`` that is no whole number is a :class:`SchemaError` (kube-apiserver checks
  whole values against it cut to an integer, and so refuses them);
- a field without a default is ``required``; a default is written serialised (by alias); a
  ``None`` default is no default;
- descriptions: a field's docstring or ``Field(description=...)``, else its model's docstring;
- the markers of :mod:`memop.runtime.api.fields` write their extensions;
- at the root, ``metadata`` is ``{type: object}`` and, when every field of the spec has a
  default, ``spec`` has ``default: {}``, so an object created without a spec gets the defaults.

A dict's key type is checked in Python only (OpenAPI v3 has no schema for keys), and CEL rules
are checked by the API server only, but for their ``fieldPath``, which must name a field under
the rule's value as kube-apiserver requires (:mod:`memop.runtime.api.celpaths`).
"""

from __future__ import annotations

import datetime
import enum
import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

import annotated_types
import pydantic
import pydantic_core
from pydantic.fields import FieldInfo

from memop.runtime.api.celpaths import field_path_error
from memop.runtime.api.crdgen import CrdVersion, custom_resource_definition
from memop.runtime.api.fields import INT_OR_STRING_SCHEMA, ListType, MapType, model_markers

if TYPE_CHECKING:
    from memop.runtime.api.model import CustomResource

# The texts controller-gen writes for the type meta of every kind.
API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should "
    "convert recognized schemas to the latest internal value, and may reject unrecognized values. "
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
)
KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents. Servers may infer "
    "this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More "
    "info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)


class SchemaError(TypeError):
    """A model the CRD schema cannot express; the message names the field and what to do."""


def crd_of(kind: type[CustomResource]) -> dict[str, Any]:
    """The ``apiextensions.k8s.io/v1`` CRD of ``kind``: names, scope, short names, categories,
    printer columns, the status subresource when the kind declares ``status``, the scale
    subresource when it declares ``scale=``, and the structural schema."""
    info = kind._kind()
    schema = openapi_schema(kind)
    subresources: dict[str, Any] = {}
    if "status" in kind.model_fields:
        subresources["status"] = {}
    if info.scale is not None:
        _check_scale_paths(
            kind.__name__, schema, info.scale.spec_replicas_path, info.scale.status_replicas_path
        )
        subresources["scale"] = info.scale.to_dict()
    version = CrdVersion(
        info.version,
        schema,
        [c.to_dict() for c in info.printer_columns],
        served=True,
        storage=True,
        subresources=subresources,
    )
    return custom_resource_definition(info.names, versions=[version])


def openapi_schema(kind: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The whole object's ``openAPIV3Schema`` for a CustomResource class (keys sorted)."""
    schema = _Builder(kind.__name__).model(kind, "")
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"description": API_VERSION_DESCRIPTION, "type": "string"}
    properties["kind"] = {"description": KIND_DESCRIPTION, "type": "string"}
    properties["metadata"] = {"type": "object"}
    status = properties.get("status")
    if status is not None:
        status.pop("default", None)  # the status is the controller's to write, never defaulted
    spec = properties.get("spec")
    spec_type = _model_type(kind.model_fields["spec"].annotation) if "spec" in kind.model_fields else None
    if spec is not None and spec_type is not None and not _has_required(spec_type):
        spec["default"] = {}
        if "spec" in schema.get("required", ()):
            schema["required"].remove("spec")
    if not schema.get("required"):
        schema.pop("required", None)
    return _sorted_schema(schema)


def model_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The structural schema of one model (an object, its properties inline; keys sorted)."""
    return _sorted_schema(_Builder(model.__name__).model(model, ""))


def spec_needs_no_fields(kind: type[pydantic.BaseModel]) -> bool:
    """Whether the kind's spec is a model every field of which has a default (so an absent spec
    is defaulted to ``{}`` by the API server, and by parsing)."""
    field = kind.model_fields.get("spec")
    spec_type = _model_type(field.annotation) if field is not None else None
    return spec_type is not None and not _has_required(spec_type)


def _has_required(model: type[pydantic.BaseModel]) -> bool:
    return any(f.is_required() for f in model.model_fields.values())


def _model_type(annotation: Any) -> type[pydantic.BaseModel] | None:
    base, _, _ = _split(annotation)
    return base if isinstance(base, type) and issubclass(base, pydantic.BaseModel) else None


class _Builder:
    """Writes schemas of one root class; ``where`` strings name fields for errors."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.open: list[type] = []  # the models being written, outermost first

    def _where(self, path: str) -> str:
        return f"{self.root}.{path}" if path else self.root

    def model(self, model: type[pydantic.BaseModel], path: str) -> dict[str, Any]:
        if model in self.open:
            chain = " -> ".join(m.__name__ for m in [*self.open, model])
            raise SchemaError(
                f"{self._where(path)}: {chain}: a model that contains itself has no structural schema"
                " (a CRD schema is written out in full, without references)"
            )
        self.open.append(model)
        schema: dict[str, Any] = {"type": "object"}
        description = _docstring(model)
        if description:
            schema["description"] = description
        properties: dict[str, Any] = {}
        required: list[str] = []
        for name, field in model.model_fields.items():
            key = field.alias or name
            child = f"{path}.{key}" if path else key
            properties[key] = self.field(field, child)
            if field.is_required():
                required.append(key)
        if properties:
            schema["properties"] = properties
        if required:
            schema["required"] = required
        if model.model_config.get("extra") == "allow":
            schema["x-kubernetes-preserve-unknown-fields"] = True
        for marker in model_markers(model):
            marker.apply_kube_schema(schema)
        _check_rule_paths(schema, self._where(path))
        self.open.pop()
        return schema

    def field(self, field: FieldInfo, path: str) -> dict[str, Any]:
        schema = self.annotation(field.annotation, list(field.metadata), path)
        if field.description:
            schema["description"] = inspect.cleandoc(field.description)
        if not field.is_required():
            default = field.get_default(call_default_factory=True)
            if default is not None:
                schema["default"] = _serialised(field.annotation, default, self._where(path))
        return schema

    def annotation(self, annotation: Any, metadata: list[Any], path: str) -> dict[str, Any]:
        base, inner, nullable = _split(annotation)
        metadata = [*inner, *metadata]
        if nullable is None:
            raise SchemaError(
                f"{self._where(path)}: {_show(annotation)}: a union of different types has no structural"
                " schema; use IntOrString for int | str, or a model with optional fields"
            )
        schema = self.base(base, path)
        for item in metadata:
            _constrain(schema, item, self._where(path))
        for item in metadata:
            if isinstance(item, ListType) and item.type == "map":
                _check_map_keys(item, schema, self._where(path))
        _check_rule_paths(schema, self._where(path))
        if nullable:
            schema["nullable"] = True
        return schema

    def base(self, tp: Any, path: str) -> dict[str, Any]:
        origin = get_origin(tp)
        if tp is Any or tp is object:
            return {"x-kubernetes-preserve-unknown-fields": True}
        if _is_int_or_string(tp):
            return dict(INT_OR_STRING_SCHEMA)
        if origin is Literal or (isinstance(tp, type) and issubclass(tp, enum.Enum)):
            return self.enum(tp, path)
        if isinstance(tp, type):
            kube_schema = getattr(tp, "kube_schema", None)
            if callable(kube_schema):
                fragment: Mapping[str, Any] = kube_schema()
                return dict(fragment)
            if issubclass(tp, pydantic.BaseModel):
                return self.model(tp, path)
            for python_type, fragment in _SCALARS:
                if issubclass(tp, python_type):
                    return dict(fragment)
        if origin in (list, tuple, set, frozenset, Sequence, typing.Sequence) or tp in (list, tuple, set):
            return self.array(tp, path)
        if origin in (dict, Mapping, typing.Mapping) or tp is dict:
            return self.mapping(tp, path)
        raise SchemaError(f"{self._where(path)}: {_show(tp)} has no OpenAPI schema in a CRD")

    def enum(self, tp: Any, path: str) -> dict[str, Any]:
        values = list(get_args(tp)) if get_origin(tp) is Literal else [m.value for m in tp]
        kinds = {_json_type(v) for v in values}
        if len(kinds) != 1 or None in kinds:
            raise SchemaError(
                f"{self._where(path)}: the values of {_show(tp)} must all be strings, all integers or"
                " all booleans"
            )
        return {"enum": values, "type": kinds.pop()}

    def array(self, tp: Any, path: str) -> dict[str, Any]:
        args = get_args(tp)
        if get_origin(tp) is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise SchemaError(
                f"{self._where(path)}: {_show(tp)}: a tuple of fixed length has no structural schema;"
                " use list[X] or tuple[X, ...]"
            )
        item = args[0] if args else Any
        return {"items": self.annotation(item, [], f"{path}[]"), "type": "array"}

    def mapping(self, tp: Any, path: str) -> dict[str, Any]:
        args = get_args(tp)
        key, value = args if len(args) == 2 else (str, Any)
        key_base, _, _ = _split(key)
        if key_base is not str:
            raise SchemaError(f"{self._where(path)}: {_show(tp)}: the keys of a map in JSON are strings")
        if value is Any:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return {"additionalProperties": self.annotation(value, [], f"{path}.*"), "type": "object"}


_SCALARS: tuple[tuple[type, Mapping[str, Any]], ...] = (
    (bool, {"type": "boolean"}),  # before int: a bool is an int in Python
    (int, {"format": "int64", "type": "integer"}),
    (float, {"type": "number"}),
    (str, {"type": "string"}),
    (datetime.datetime, {"format": "date-time", "type": "string"}),
    (datetime.date, {"format": "date", "type": "string"}),
)


def _split(annotation: Any) -> tuple[Any, list[Any], bool | None]:
    """(base type, Annotated metadata, nullable) of an annotation; nullable is None for a union
    of several types other than int | str."""
    metadata: list[Any] = []
    nullable = False
    while True:
        if get_origin(annotation) is typing.Annotated:
            base, *extra = get_args(annotation)
            metadata = [*extra, *metadata]
            annotation = base
            continue
        if get_origin(annotation) in (Union, types.UnionType):
            members = get_args(annotation)
            others = [m for m in members if m is not type(None)]
            nullable = nullable or len(others) < len(members)
            if len(others) == 1:
                annotation = others[0]
                continue
            if _is_int_or_string(typing.Union[tuple(others)]):  # noqa: UP007 (built from a list)
                return typing.Union[tuple(others)], metadata, nullable  # noqa: UP007
            return annotation, metadata, None
        return annotation, metadata, nullable


def _is_int_or_string(tp: Any) -> bool:
    if get_origin(tp) not in (Union, types.UnionType):
        return False
    return {_split(m)[0] for m in get_args(tp) if m is not type(None)} == {int, str}


def _constrain(schema: dict[str, Any], item: Any, where: str) -> None:
    """Writes one piece of Annotated/Field metadata into ``schema``."""
    kind = schema.get("type")
    wants = {ListType: "array", MapType: "object"}.get(type(item))
    if wants is not None and kind != wants:
        raise SchemaError(f"{where}: {type(item).__name__} is for a field of type {wants}, not {kind}")
    apply = getattr(item, "apply_kube_schema", None)
    if callable(apply):
        apply(schema)
        return
    sized = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems")}.get(
        kind or "", ("minProperties", "maxProperties")
    )
    if isinstance(item, annotated_types.Ge):
        schema["minimum"] = item.ge
    elif isinstance(item, annotated_types.Gt):
        schema.update(minimum=item.gt, exclusiveMinimum=True)
    elif isinstance(item, annotated_types.Le):
        schema["maximum"] = item.le
    elif isinstance(item, annotated_types.Lt):
        schema.update(maximum=item.lt, exclusiveMaximum=True)
    elif isinstance(item, annotated_types.MultipleOf):
        _check_multiple_of(item.multiple_of, where)
        schema["multipleOf"] = item.multiple_of
    elif isinstance(item, annotated_types.MinLen):
        schema[sized[0]] = item.min_length
    elif isinstance(item, annotated_types.MaxLen):
        schema[sized[1]] = item.max_length
    elif getattr(item, "pattern", None) is not None:
        pattern = item.pattern
        schema["pattern"] = pattern if isinstance(pattern, str) else pattern.pattern


def _check_map_keys(marker: ListType, schema: Mapping[str, Any], where: str) -> None:
    items = schema.get("items") or {}
    properties = items.get("properties") or {}
    required = set(items.get("required") or ())
    for key in marker.json_keys:
        if key not in properties:
            raise SchemaError(f"{where}: ListType map key {key!r} is no field of the list's items")
        if key not in required and "default" not in properties[key]:
            raise SchemaError(
                f"{where}: ListType map key {key!r} must be a required field of the items, or have a default"
            )


def _check_rule_paths(schema: Mapping[str, Any], where: str) -> None:
    """The fieldPath of each CEL rule on this node names a field under it, as kube-apiserver
    requires of a CRD (else it refuses the whole CRD)."""
    for rule in schema.get("x-kubernetes-validations") or ():
        problem = field_path_error(rule.get("fieldPath") or "", schema)
        if problem is not None:
            raise SchemaError(
                f"{where}: Cel field_path: {problem} (kube-apiserver refuses such a CRD: the path is"
                " taken from the value the rule is on, through its fields and map keys only)"
            )


def _check_multiple_of(multiple: Any, where: str) -> None:
    """kube-apiserver (kube-openapi's MultipleOfNativeType) checks a value sent as a whole
    number (``2``: how kubectl and YAML send ``2.0``, and how a CRD's stored default reads
    back) against the multipleOf cut to an integer: 0.5 becomes 0, refused as a factor, 2.5
    becomes 2. A multiple_of that is no whole number therefore refuses whole values."""
    if multiple != int(multiple):
        raise SchemaError(
            f"{where}: multiple_of={multiple}: kube-apiserver checks a value written as a whole"
            f" number (such as 2) against multipleOf cut to an integer ({int(multiple)}), so it would"
            " refuse whole values, and a whole default would fail every object; use a whole"
            " multiple_of, or scale the field (an int of tenths instead of a float)"
        )


def _check_scale_paths(kind: str, schema: Mapping[str, Any], *paths: str) -> None:
    for path, top in zip(paths, ("spec", "status"), strict=True):
        node: Any = schema
        for part in path.lstrip(".").split("."):
            node = (node.get("properties") or {}).get(part) if isinstance(node, Mapping) else None
        if not path.startswith(f".{top}.") or not isinstance(node, Mapping) or node.get("type") != "integer":
            raise SchemaError(
                f"{kind}: the scale subresource's path {path!r} is no integer field under .{top}"
            )


def _serialised(annotation: Any, value: Any, where: str) -> Any:
    try:
        return pydantic.TypeAdapter(annotation).dump_python(
            value, mode="json", by_alias=True, exclude_none=True
        )
    except pydantic_core.PydanticSerializationError as error:
        raise SchemaError(f"{where}: the default {value!r} cannot be written as JSON: {error}") from None


def _docstring(model: type) -> str:
    own = model.__dict__.get("__doc__")
    return inspect.cleandoc(own) if isinstance(own, str) else ""


def _json_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, str):
        return "string"
    return None


def _show(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def _sorted_schema(schema: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = _sorted(schema)
    return result


def _sorted(value: Any) -> Any:
    """Mapping keys sorted at every level (as controller-gen writes them); lists keep their order."""
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value
