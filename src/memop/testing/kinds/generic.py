"""The built-in kinds of kube-apiserver v1.36 that have no hand-written strategy, served
generically from their OpenAPI v3 schemas (:mod:`memop.testing.apiserver.builtinapi`).

A :class:`GenericStrategy` gives such a kind what every built-in kind has:

- typed decoding (:mod:`memop.testing.apiserver.typeddecode`): unknown fields dropped, a wrong type a 400
  with Go's message, quantities and times in canonical form; then the schema's defaults;
- a 422 for a missing required field that Go's validation reports (an object, or a string
  missing or empty, outside ``status``); a required number or boolean gets Go's zero value, as
  the typed object serialises it;
- ``status`` as a subresource where v1.36 has one;
- field selectors on ``metadata.name`` and ``metadata.namespace``, and the fields its
  field-label conversion adds (a Node's ``spec.unschedulable``, a CSR's ``spec.signerName``);
- strategic merge patches, merge keys and strategies from the schema's ``x-kubernetes-patch-*``;
- what its registry says of writes (``metadata.generation``, unconditional updates, create on
  update, the deleted object returned), extracted from its ``pkg/registry`` sources.

Kind-specific defaulting and validation are not modelled: a kind operators create often gets a
hand-written strategy instead, which takes precedence (:func:`generic_kinds` skips what is
served already).

Some built-in resources make no sense without a real backend; they are listed in discovery as
v1.36 lists them but store nothing (:func:`memop.testing.apiserver.builtinapi.listed_only`, each
with the reason), or are left out (:data:`NOT_SERVED`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from memop.testing.apiserver import schema as structural_schema
from memop.testing.apiserver import typeddecode
from memop.testing.apiserver.builtinapi import LISTED_ONLY_REASONS, BuiltinResource, builtin_resources
from memop.testing.apiserver.errors import DecodeError
from memop.testing.apiserver.objects import JsonDict, required
from memop.testing.apiserver.quantity import QuantityError
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.schema import FieldError
from memop.testing.apiserver.strategy import Kind
from memop.testing.apiserver.times import TimeFormatError
from memop.testing.kinds.builtins import BuiltinStrategy

_TOP_LEVEL = frozenset(("apiVersion", "kind", "metadata"))
_ZERO = {"integer": 0, "number": 0, "boolean": False}

# Neither listed nor served: (group, version, plural) -> why.
NOT_SERVED: Mapping[tuple[str, str, str], str] = {
    ("autoscaling", "v1", "horizontalpodautoscalers"): (
        "shares autoscaling/v2's storage through a lossy conversion (metrics kept in annotations) "
        "that is not written; clients use v2, the preferred version"
    ),
}


# The field labels beyond metadata.name/namespace that the generic kinds' field-label conversion
# functions accept (pkg/apis/<group>/v1/conversion.go of v1.36.2), each with what it reads when
# the field is absent (the Go zero value its registry's GetAttrs formats), and how the
# conversion words an unknown label ("core": "field label not supported: <label>"). None of
# these conversions accepts metadata.namespace but the ReplicationController's.
_FIELD_LABELS: Mapping[tuple[str, str], tuple[Mapping[str, str], str]] = {
    ("", "Node"): ({"spec.unschedulable": "false"}, "core"),
    ("", "ReplicationController"): ({"status.replicas": "0"}, "core"),
    ("certificates.k8s.io", "CertificateSigningRequest"): ({"spec.signerName": ""}, "core"),
    ("resource.k8s.io", "ResourceSlice"): (
        {"spec.nodeName": "", "spec.driver": ""},
        "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: {label}",
    ),
}

# The kinds whose registry keeps the status a create sends: a Node's PrepareForCreate
# (pkg/registry/core/node/strategy.go) only drops disabled fields, so a kubelet registers its
# node with its status in one create.
_STATUS_KEPT_ON_CREATE = frozenset({("", "Node")})


class GenericStrategy(BuiltinStrategy):
    """A built-in kind served from its OpenAPI v3 schema (read on its first write)."""

    strategic_merge = True

    def __init__(self, resource: BuiltinResource) -> None:
        self._schema_name = resource.schema
        labels, wording = _FIELD_LABELS.get((resource.rtype.group, resource.rtype.kind), ({}, ""))
        self._field_labels, self._label_wording = labels, wording
        self.core_field_labels = wording == "core"
        self.namespace_field_label = not wording or resource.rtype.namespaced
        # As its registry in kube-apiserver v1.36 does (pkg/registry/<group>/<resource>).
        self.generation = resource.registry.get("generation", False)
        self.unconditional_update = resource.registry.get("unconditionalUpdate", True)
        self.create_on_update = resource.registry.get("createOnUpdate", False)
        self.return_deleted_object = resource.registry.get("returnDeletedObject", False)
        self._keeps_status = (resource.rtype.group, resource.rtype.kind) in _STATUS_KEPT_ON_CREATE

    @functools.cached_property
    def _schema(self) -> dict[str, Any]:
        return typeddecode.structural(self._schema_name)

    def _decoded(self, obj: JsonDict, rtype: ResourceType) -> tuple[JsonDict, list[str]]:
        try:
            return typeddecode.decode(self._schema, obj, _TOP_LEVEL)
        except (typeddecode.TypedDecodeError, QuantityError, TimeFormatError) as error:
            raise DecodeError(rtype.kind, rtype.version, str(error)) from None

    def unknown_fields(self, obj: JsonDict, rtype: ResourceType) -> list[str]:
        return self._decoded(obj, rtype)[1]

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        decoded = self._decoded(obj, rtype)[0]
        defaulted: JsonDict = structural_schema.apply_defaults(self._without_metadata(), decoded)
        _fill_zero_values(self._schema, defaulted)
        return defaulted

    @functools.cached_property
    def _schema_without_metadata(self) -> dict[str, Any]:
        properties = {k: v for k, v in (self._schema.get("properties") or {}).items() if k not in _TOP_LEVEL}
        return {**self._schema, "properties": properties}

    def _without_metadata(self) -> dict[str, Any]:
        # Defaulting leaves ObjectMeta to the store, as the decoding does.
        return self._schema_without_metadata

    def field_labels(self) -> Mapping[str, str]:
        return {label: label for label in self._field_labels}

    def field_label_defaults(self) -> Mapping[str, str]:
        return self._field_labels

    def unsupported_field_label(self, label: str) -> str | None:
        wording = self._label_wording
        return wording.format(label=label) if wording and wording != "core" else None

    def patch_schema(self) -> Mapping[str, Any] | None:
        return self._schema

    def initial_status(self, obj: JsonDict) -> Any:
        """What a typed object's status serialises as when a create's status is dropped (kept,
        for the kinds of :data:`_STATUS_KEPT_ON_CREATE`)."""
        if self._keeps_status and isinstance(obj.get("status"), dict):
            return obj["status"]
        status_schema = (self._schema.get("properties") or {}).get("status")
        if status_schema is None:
            return None
        status: Any = structural_schema.apply_defaults(status_schema, {})
        _fill_zero_values(status_schema, status)
        return status

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _required_errors(self._schema, obj)


def _required_fields(
    schema: Mapping[str, Any], value: Any, path: str = "", *, skip: frozenset[str] = _TOP_LEVEL
) -> Iterator[tuple[dict[str, Any], str, str, Mapping[str, Any]]]:
    """(object, its path, field name, field schema) for each required field of each object in
    ``value``, but for the top-level fields in ``skip`` (ObjectMeta: the store's)."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _required_fields(schema.get("items") or {}, item, f"{path}[{i}]", skip=frozenset())
        return
    if not isinstance(value, dict) or "properties" not in schema:
        return
    properties = schema["properties"]
    for name in schema.get("required") or ():
        if name not in skip:
            yield value, path, name, properties.get(name) or {}
    for key, item in list(value.items()):
        if key in properties and key not in skip:
            yield from _required_fields(
                properties[key], item, f"{path}.{key}" if path else key, skip=frozenset()
            )


def _fill_zero_values(schema: Mapping[str, Any], value: Any) -> None:
    """Give missing required numbers and booleans Go's zero value, as a typed object serialises
    a field without ``omitempty``."""
    for obj, _, name, prop in _required_fields(schema, value):
        if name not in obj and prop.get("type") in _ZERO and not prop.get("x-memop-go"):
            obj[name] = _ZERO[prop["type"]]


def _required_errors(schema: Mapping[str, Any], value: Any) -> list[FieldError]:
    """A Required error for each missing required object and each missing or empty required
    string (Go's validation reports those; an empty list is valid where a field is a list)."""
    errors = []
    # What the server's controllers write (status) is not validated field by field.
    for obj, path, name, prop in _required_fields(schema, value, skip=_TOP_LEVEL | {"status"}):
        # Defaulting gave a required string Go's zero value (the schema's default ""), which
        # is what Go's validation reports as missing.
        missing = name not in obj or (prop.get("type") == "string" and obj[name] == "")
        if missing and (
            prop.get("type") in ("string", "object") or "properties" in prop or prop.get("x-memop-go")
        ):
            errors.append(required(f"{path}.{name}" if path else name))
    return errors


def generic_kinds(served: Iterable[ResourceType]) -> tuple[Kind, ...]:
    """A generic :class:`Kind` for every built-in resource of v1.36 not in ``served`` (the
    hand-written kinds), :func:`~memop.testing.apiserver.builtinapi.listed_only` or :data:`NOT_SERVED`."""
    taken = {(r.group, r.version, r.plural) for r in served}
    kinds = []
    for key, resource in builtin_resources().items():
        rtype = resource.rtype
        if key in taken or key in NOT_SERVED or (rtype.group, rtype.plural) in LISTED_ONLY_REASONS:
            continue
        kinds.append(Kind(rtype, GenericStrategy(resource)))
    return tuple(kinds)
