"""The CRD of a :class:`~memop.runtime.api.model.CustomResource` kind."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memop.runtime.api.crdgen import custom_resource_definition, object_schema

if TYPE_CHECKING:
    from memop.runtime.api.model import CustomResource


def crd_of(kind: type[CustomResource]) -> dict[str, Any]:
    """The ``apiextensions.k8s.io/v1`` CRD of ``kind``: its names, scope, and a schema that
    keeps spec and status as they are."""
    info = kind._kind()
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema = object_schema(kind.__doc__ or info.kind, open_object, open_object)
    crd = custom_resource_definition(info.names, schema, [c.to_dict() for c in info.printer_columns])
    if not info.namespaced:
        crd["spec"]["scope"] = "Cluster"
    return crd
