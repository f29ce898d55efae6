"""The MyPod CustomResourceDefinition, generated from the API declaration in ``api``.

The committed ``manifests/crd/harryyann.github.io_mypods.yaml`` is :func:`crd_yaml` verbatim (a
test checks it); regenerate every CRD with ``python -m memop manifests crd``.
"""

from __future__ import annotations

from typing import Any

from memop.mypod import api
from memop.runtime.api import crdgen
from memop.runtime.api.crdgen import AGE_COLUMN, CrdNames, printer_column

__all__ = ["NAMES", "crd", "crd_yaml", "openapi_schema"]

NAMES = CrdNames(api.GROUP, api.VERSION, api.KIND, api.PLURAL, api.SINGULAR)


def openapi_schema() -> dict[str, Any]:
    """The structural openAPIV3Schema of the MyPod kind (whole object)."""
    return crdgen.object_schema(
        "MyPod is one pod run by memop: created, replaced when its spec changes, reported in status.",
        api.spec_schema(),
        api.status_schema(),
        required=["spec"],
        **{
            "x-kubernetes-validations": [
                {
                    "message": (
                        f"metadata.name must be no more than {api.NAME_MAX_LENGTH} characters: it is the"
                        " value of the pod's harryyann.github.io/mypod label"
                    ),
                    "rule": f"size(self.metadata.name) <= {api.NAME_MAX_LENGTH}",
                }
            ]
        },
    )


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition (apiextensions.k8s.io/v1) as a dict; a fresh one per call."""
    return crdgen.custom_resource_definition(
        NAMES,
        openapi_schema(),
        [
            # The tutorial's columns pointed at .status.phase, which it never set.
            printer_column("Phase", ".status.podPhase", "string"),
            printer_column("PodIp", ".status.podIp", "string"),
            printer_column("Ready", '.status.conditions[?(@.type=="Ready")].status', "string"),
            AGE_COLUMN,
        ],
    )


def crd_yaml() -> str:
    """The CRD as the YAML document committed under manifests/crd (deterministic)."""
    return crdgen.crd_yaml(crd(), "memop.mypod")
