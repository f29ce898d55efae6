"""The PodSet API, ``batch.tutorial.kubebuilder.io/v1``: names, spec, schema, validation.

The group, kind and field names are the "k8s operator practice" kubebuilder tutorial's, so its
manifests apply unchanged: ``spec.replicas``; ``status.readyReplicas`` and ``status.podNames``.
memop adds ``spec.template`` (a core/v1 PodTemplateSpec; the tutorial's hard-coded busybox pod
is the default), ``status.observedGeneration`` and ``status.conditions``.

:func:`parse_spec` applies the schema's defaults and checks in Python, worded as the API server
words them (``spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or
equal to 0``), for a CRD installed without its schema or with an older one. The pod template is
checked only as far as building a pod needs (and for ``restartPolicy``, below): the API server
validates the pods themselves, and its answer is reported as it is.

``restartPolicy`` must be ``Always`` (or absent), as for a ReplicaSet: a pod that may finish
would be replaced each time it does, for ever, and the finished ones would pile up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memop.runtime.api.conditions import conditions_schema
from memop.runtime.api.validation import json_type, type_error
from memop.runtime.client.resources import Resource

GROUP = "batch.tutorial.kubebuilder.io"
VERSION = "v1"
KIND = "PodSet"
PLURAL = "podsets"
SINGULAR = "podset"
API_VERSION = f"{GROUP}/{VERSION}"
PODSETS = Resource(GROUP, VERSION, PLURAL, KIND)

DEFAULT_REPLICAS = 1  # as a ReplicaSet's (the tutorial's Go zero value would be 0: no pods)
INT32_MAX = 2**31 - 1
# The PodSet's name is the value of its pods' instance label.
NAME_MAX_LENGTH = 63
RESTART_POLICIES = ("Always",)


@dataclass(frozen=True)
class PodSetSpec:
    """A PodSet's defaulted, validated spec. ``template`` None: the default pod."""

    replicas: int = DEFAULT_REPLICAS
    template: dict[str, Any] | None = None


class InvalidSpec(ValueError):
    """The spec cannot be acted on; ``str()`` is the API server's message (``[a, b]`` for several)."""

    def __init__(self, messages: list[str]) -> None:
        self.messages = tuple(messages)
        super().__init__(messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]")


def _replicas_error(value: Any) -> str | None:
    """What the API server says of ``value`` as spec.replicas, or None when it is fine."""
    path = "spec.replicas"
    if isinstance(value, bool) or not isinstance(value, int):
        return type_error(path, value, "integer")
    if value < 0:
        return f"{path}: Invalid value: {value}: {path} in body should be greater than or equal to 0"
    if value > INT32_MAX:
        return f"{path}: Invalid value: {value}: {path} in body should be less than or equal to {INT32_MAX}"
    return None


def _string_map(path: str, value: Any, errors: list[str]) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        errors.append(type_error(path, value, "object"))
        return
    for key, item in value.items():
        if not isinstance(item, str):
            errors.append(type_error(f"{path}.{key}", item, "string"))


def _template(value: Any, errors: list[str]) -> dict[str, Any] | None:
    path = "spec.template"
    if not isinstance(value, Mapping):
        errors.append(type_error(path, value, "object"))
        return None
    before = len(errors)
    meta = value.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        errors.append(type_error(f"{path}.metadata", meta, "object"))
    elif meta is not None:
        _string_map(f"{path}.metadata.labels", meta.get("labels"), errors)
        _string_map(f"{path}.metadata.annotations", meta.get("annotations"), errors)
    spec = value.get("spec")
    if spec is not None and not isinstance(spec, Mapping):
        errors.append(type_error(f"{path}.spec", spec, "object"))
    elif spec is not None and spec.get("restartPolicy") not in (None, *RESTART_POLICIES):
        policy = spec["restartPolicy"]
        shown = json.dumps(policy) if isinstance(policy, str) else json_type(policy)
        supported = ", ".join(f'"{p}"' for p in RESTART_POLICIES)
        errors.append(f"{path}.spec.restartPolicy: Unsupported value: {shown}: supported values: {supported}")
    return dict(value) if len(errors) == before else None


def parse_spec(podset: Mapping[str, Any]) -> PodSetSpec:
    """The spec of ``podset`` (a whole object, as read) with defaults applied.

    Raises InvalidSpec naming every bad field; never anything else, whatever ``podset`` holds.
    ``null`` is the same as absent (the server drops the nulls of non-nullable fields).
    """
    errors: list[str] = []
    meta = podset.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if isinstance(name, str) and len(name) > NAME_MAX_LENGTH:
        detail = f"must be no more than {NAME_MAX_LENGTH} characters"
        errors.append(f"metadata.name: Invalid value: {json.dumps(name)}: {detail}")
    raw = podset.get("spec")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InvalidSpec([*errors, type_error("spec", raw, "object")])
    replicas = raw.get("replicas")
    if replicas is None:
        replicas = DEFAULT_REPLICAS
    elif isinstance(replicas, float) and replicas.is_integer():
        replicas = int(replicas)  # the API server accepts integral numbers as integers
    if (error := _replicas_error(replicas)) is not None:
        errors.append(error)
    template = None if raw.get("template") is None else _template(raw["template"], errors)
    if errors:
        raise InvalidSpec(errors)
    return PodSetSpec(replicas, template)


# --- schema -------------------------------------------------------------------------------------


def _string_map_schema() -> dict[str, Any]:
    return {"additionalProperties": {"type": "string"}, "type": "object"}


SPEC_SCHEMA: dict[str, Any] = {
    "default": {},  # so that an absent (or null) spec gets replicas' default
    "description": "PodSetSpec is the desired state of a PodSet.",
    "properties": {
        "replicas": {
            "default": DEFAULT_REPLICAS,
            "description": "Number of pods to keep Pending or Running.",
            "format": "int32",
            "maximum": INT32_MAX,
            "minimum": 0,
            "type": "integer",
        },
        "template": {
            "description": (
                "The pods to create (a core/v1 PodTemplateSpec, validated by the API server when a"
                " pod is created). Default: the tutorial's busybox running sleep 3600."
            ),
            "properties": {
                "metadata": {
                    "properties": {"annotations": _string_map_schema(), "labels": _string_map_schema()},
                    "type": "object",
                },
                "spec": {
                    "properties": {
                        "restartPolicy": {
                            "description": (
                                "Always only, as for a ReplicaSet: a pod that could finish would be"
                                " replaced every time it did."
                            ),
                            "enum": list(RESTART_POLICIES),
                            "type": "string",
                        }
                    },
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
            "type": "object",
        },
    },
    "type": "object",
}

STATUS_SCHEMA: dict[str, Any] = {
    "description": "PodSetStatus is the observed state of a PodSet.",
    "properties": {
        "conditions": {
            **conditions_schema(),
            "description": "Available, Progressing and Degraded (metav1.Condition), keyed by type.",
        },
        "observedGeneration": {
            "description": "The metadata.generation this status was computed for.",
            "format": "int64",
            "type": "integer",
        },
        "podNames": {
            "description": "Names of the PodSet's pods that are Pending or Running and not terminating.",
            "items": {"type": "string"},
            "type": "array",
        },
        "readyReplicas": {
            "description": "How many of those pods are Ready.",
            "format": "int32",
            "type": "integer",
        },
    },
    "type": "object",
}

# The CRD states it in CEL; parse_spec checks it too.
NAME_RULE = {
    "message": (
        f"metadata.name must be no more than {NAME_MAX_LENGTH} characters: it is the value of the"
        " pods' instance label"
    ),
    "rule": f"size(self.metadata.name) <= {NAME_MAX_LENGTH}",
}
