"""The Memcached CustomResourceDefinition, generated from the API declaration in ``api``.

Nothing here restates a field: the spec and status schemas come from
:func:`memop.memcached.api.schema_of`, names from the API constants. The committed
``manifests/crd/cache.example.com_memcacheds.yaml`` is :func:`crd_yaml` verbatim (a test checks
it); regenerate every CRD with ``python -m memop manifests crd``.
"""

from __future__ import annotations

from typing import Any

from memop.memcached import api
from memop.runtime.api import crdgen
from memop.runtime.api.crdgen import AGE_COLUMN, GENERATE_COMMAND, CrdNames, printer_column

__all__ = ["GENERATE_COMMAND", "NAMES", "crd", "crd_yaml", "openapi_schema"]

NAMES = CrdNames(api.GROUP, api.VERSION, api.KIND, api.PLURAL, api.SINGULAR, api.SHORT_NAMES)


def openapi_schema() -> dict[str, Any]:
    """The structural openAPIV3Schema of the Memcached kind (whole object)."""
    return crdgen.object_schema(
        "Memcached is a memcached cache run by memop as a Deployment.",
        # default {} makes the server default an absent spec, and then every field in it.
        {
            "default": {},
            **api.schema_of(api.MemcachedSpec, "MemcachedSpec is the desired state of a Memcached."),
        },
        api.schema_of(api.MemcachedStatus, "MemcachedStatus is the observed state of a Memcached."),
        **{"x-kubernetes-validations": [{"message": r.message, "rule": r.rule} for r in api.ROOT_RULES]},
    )


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition (apiextensions.k8s.io/v1) as a dict; a fresh one per call."""
    return crdgen.custom_resource_definition(
        NAMES,
        openapi_schema(),
        [
            printer_column("Size", ".spec.size", "integer"),
            printer_column("Ready", ".status.readyReplicas", "integer"),
            printer_column("Available", '.status.conditions[?(@.type=="Available")].status', "string"),
            AGE_COLUMN,
        ],
    )


def crd_yaml() -> str:
    """The CRD as the YAML document committed under manifests/crd (deterministic)."""
    return crdgen.crd_yaml(crd(), "memop.memcached")
