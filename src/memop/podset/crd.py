"""The PodSet CustomResourceDefinition, generated from the API declaration in ``api``.

The committed ``manifests/crd/batch.tutorial.kubebuilder.io_podsets.yaml`` is :func:`crd_yaml`
verbatim (a test checks it); regenerate every CRD with ``python -m memop manifests crd``.
"""

from __future__ import annotations

import copy
from typing import Any

from memop.podset import api
from memop.runtime.api import crdgen
from memop.runtime.api.crdgen import AGE_COLUMN, CrdNames, printer_column

NAMES = CrdNames(api.GROUP, api.VERSION, api.KIND, api.PLURAL, api.SINGULAR)


def openapi_schema() -> dict[str, Any]:
    """The structural openAPIV3Schema of the PodSet kind (whole object)."""
    return copy.deepcopy(
        crdgen.object_schema(
            "PodSet keeps spec.replicas pods running, created from spec.template.",
            api.SPEC_SCHEMA,
            api.STATUS_SCHEMA,
            **{"x-kubernetes-validations": [api.NAME_RULE]},
        )
    )


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition (apiextensions.k8s.io/v1) as a dict; a fresh one per call."""
    return crdgen.custom_resource_definition(
        NAMES,
        openapi_schema(),
        [
            printer_column("Desired", ".spec.replicas", "integer"),
            printer_column("Ready", ".status.readyReplicas", "integer"),
            AGE_COLUMN,
        ],
    )


def crd_yaml() -> str:
    """The CRD as the YAML document committed under manifests/crd (deterministic); the source
    named in its header is the one ``python -m memop manifests crd`` names."""
    return crdgen.crd_yaml(crd(), "memop.podset")
