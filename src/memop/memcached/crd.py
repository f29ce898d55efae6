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
from memop.runtime.api.crdgen import AGE_COLUMN, GENERATE_COMMAND, CrdNames, CrdVersion, printer_column

__all__ = ["GENERATE_COMMAND", "NAMES", "crd", "crd_yaml", "openapi_schema"]

NAMES = CrdNames(api.GROUP, api.VERSION, api.KIND, api.PLURAL, api.SINGULAR, api.SHORT_NAMES)


def openapi_schema(version: str = api.VERSION) -> dict[str, Any]:
    """The structural openAPIV3Schema of the Memcached kind (whole object) at ``version``
    (``v1alpha1`` or ``v1beta1``); KeyError for another."""
    spec_type = {api.VERSION: api.MemcachedSpec, api.V1BETA1: api.MemcachedSpecV1beta1}[version]
    return crdgen.object_schema(
        "Memcached is a memcached cache run by memop as a Deployment.",
        # default {} makes the server default an absent spec, and then every field in it.
        {
            "default": {},
            **api.schema_of(spec_type, "MemcachedSpec is the desired state of a Memcached."),
        },
        api.schema_of(api.MemcachedStatus, "MemcachedStatus is the observed state of a Memcached."),
        **{"x-kubernetes-validations": [{"message": r.message, "rule": r.rule} for r in api.ROOT_RULES]},
    )


_SIZE = printer_column("Size", ".spec.size", "integer")
_STATUS_COLUMNS = [
    printer_column("Ready", ".status.readyReplicas", "integer"),
    printer_column("Available", '.status.conditions[?(@.type=="Available")].status', "string"),
    AGE_COLUMN,
]
# Shown by `kubectl get -o wide` only, so both versions show the same default columns.
_PORT = printer_column("Port", ".spec.containerPort", "integer", priority=1)


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition (apiextensions.k8s.io/v1) as a dict; a fresh one per call.

    Both versions are served; v1alpha1 is stored (the hub, the version the controller reads).
    No ``spec.conversion`` here: the install's manifests point it at memop's conversion webhook.
    """
    return crdgen.custom_resource_definition(
        NAMES,
        versions=[
            CrdVersion(api.VERSION, openapi_schema(api.VERSION), [_SIZE, *_STATUS_COLUMNS], storage=True),
            CrdVersion(api.V1BETA1, openapi_schema(api.V1BETA1), [_SIZE, *_STATUS_COLUMNS, _PORT]),
        ],
    )


def crd_yaml() -> str:
    """The CRD as the YAML document committed under manifests/crd (deterministic)."""
    return crdgen.crd_yaml(crd(), "memop.memcached")
