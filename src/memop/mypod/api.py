"""The MyPod API, ``harryyann.github.io/v1``: its names, spec and status, declared once.

MyPod comes from the tutorial "使用Kubebuilder编写Operator" (harryyann/mypod-operator): a MyPod
asks for one pod, with ``spec.podAnnotations``, ``spec.podLabels`` and ``spec.podSpec`` (a whole
core/v1 PodSpec), and reports ``status.podPhase``, ``podIp``, ``nodeIp`` and
``createdTimestamp``. The JSON names are the tutorial's; ``observedGeneration`` and
``conditions`` are added.

``podSpec`` is not restated in the CRD (an object whose fields are preserved as written): the
API server validates it as a pod when the pod is created, and that answer is the one memop
reports. :func:`parse_spec` checks only what the CRD schema states, so that a MyPod stored
under a CRD without this schema is refused the same way instead of breaking the reconciler.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memop.runtime.api import conditions
from memop.runtime.api.validation import type_error
from memop.runtime.client.resources import Resource

GROUP = "harryyann.github.io"
VERSION = "v1"
KIND = "MyPod"
PLURAL = "mypods"
SINGULAR = "mypod"
API_VERSION = f"{GROUP}/{VERSION}"
MYPODS = Resource(GROUP, VERSION, PLURAL, KIND)
# The MyPod's name is the value of the pod's per-instance label (memop.mypod.desired.LABEL).
NAME_MAX_LENGTH = 63


class InvalidSpec(ValueError):
    """The MyPod's spec does not have the shape the CRD schema states; ``str()`` is what the
    API server would have said."""


@dataclass(frozen=True)
class MyPodSpec:
    """What the user asks for: the pod's spec as written, its labels and annotations."""

    pod_spec: dict[str, Any]
    pod_labels: dict[str, str]
    pod_annotations: dict[str, str]


def _string_map(description: str) -> dict[str, Any]:
    return {"additionalProperties": {"type": "string"}, "description": description, "type": "object"}


def spec_schema() -> dict[str, Any]:
    """The structural schema of ``spec``."""
    return {
        "description": "MyPodSpec is the desired state of a MyPod: one pod.",
        "properties": {
            "podAnnotations": _string_map("Annotations of the pod. Changing them updates the pod in place."),
            "podLabels": _string_map(
                "Labels of the pod, beside memop's harryyann.github.io/mypod=<name>. Changing them"
                " updates the pod in place."
            ),
            "podSpec": {
                "description": (
                    "The pod's spec (core/v1 PodSpec), validated by the API server when the pod"
                    " is created. Changing it replaces the pod: most of a pod's spec is immutable."
                ),
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            },
        },
        "required": ["podSpec"],
        "type": "object",
    }


def status_schema() -> dict[str, Any]:
    """The structural schema of ``status``."""
    return {
        "description": "MyPodStatus is the observed state of a MyPod's pod.",
        "properties": {
            "conditions": {
                "description": "Ready (the pod is ready) and Degraded (memop cannot do its job).",
                **conditions.conditions_schema(),
            },
            "createdTimestamp": {
                "description": "When the pod was created, in Unix seconds. Absent while there is no pod.",
                "format": "int64",
                "type": "integer",
            },
            "nodeIp": {"description": "The IP of the pod's node (status.hostIP).", "type": "string"},
            "observedGeneration": {
                "description": "The metadata.generation this status was computed for.",
                "format": "int64",
                "type": "integer",
            },
            "podIp": {"description": "The pod's IP (status.podIP).", "type": "string"},
            "podPhase": {
                "description": (
                    "The pod's phase. Absent while there is no pod of the current podSpec"
                    " (being created, replaced, or refused)."
                ),
                "type": "string",
            },
        },
        "type": "object",
    }


def _string_map_value(path: str, value: Any, errors: list[str]) -> dict[str, str]:
    if value is None:
        return {}  # null is absent, as the server drops nulls before validating
    if not isinstance(value, Mapping):
        errors.append(type_error(path, value, "object"))
        return {}
    for key, item in value.items():
        if not isinstance(item, str):
            errors.append(type_error(f"{path}.{key}", item, "string"))
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def parse_spec(obj: Mapping[str, Any]) -> MyPodSpec:
    """The spec of the MyPod ``obj`` (a whole object, as read). Raises InvalidSpec naming every
    field the schema would refuse; never anything else, whatever ``obj`` holds."""
    errors: list[str] = []
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        spec = {}
    pod_spec = spec.get("podSpec")
    if pod_spec is None:
        errors.append("spec.podSpec: Required value")
    elif not isinstance(pod_spec, Mapping):
        errors.append(type_error("spec.podSpec", pod_spec, "object"))
    labels = _string_map_value("spec.podLabels", spec.get("podLabels"), errors)
    annotations = _string_map_value("spec.podAnnotations", spec.get("podAnnotations"), errors)
    if errors:
        raise InvalidSpec(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    assert isinstance(pod_spec, Mapping)
    # A deep copy, since the cached object must not be changed through it.
    return MyPodSpec(json.loads(json.dumps(pod_spec)), labels, annotations)
