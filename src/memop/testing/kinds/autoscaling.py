"""autoscaling/v2 HorizontalPodAutoscalers as kube-apiserver v1.36 serves them.

Defaulting is ``SetDefaults_HorizontalPodAutoscaler``: ``minReplicas`` 1, a CPU utilization
target of 80% when no metric is given, and, once ``behavior`` is set, every rule it leaves out
(scale up: no stabilization window, Max of 4 pods or 100% per 15 s; scale down: a 300 s window,
Max of 100% per 15 s). The status subresource starts as ``{desiredReplicas: 0, currentMetrics:
null}`` (a field without ``omitempty``, null whenever the list is empty); the registry keeps no
``metadata.generation`` (kube-apiserver v1.36.2 sets none, on create or on spec changes).
Validation as ``ValidateHorizontalPodAutoscaler`` where operators meet it: ``minReplicas`` at least 1,
``maxReplicas`` above 0 and not below ``minReplicas``, a target reference with a kind, a
name and an apiVersion naming a group, and metric types. autoscaling/v1 (which a real server
also serves) is not served.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.testing.apiserver.objects import JsonDict, invalid, not_supported, required
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.schema import FieldError
from memop.testing.apiserver.strategy import Kind
from memop.testing.kinds.builtins import BuiltinStrategy, _decoding, check_integers, path_segment_name_errors

HORIZONTAL_POD_AUTOSCALERS = ResourceType(
    "autoscaling",
    "v2",
    "horizontalpodautoscalers",
    "HorizontalPodAutoscaler",
    True,
    "horizontalpodautoscaler",
    ("hpa",),
    has_status=True,
    categories=("all",),
)
_METRIC_TYPES = ["ContainerResource", "External", "Object", "Pods", "Resource"]
_SCALE_UP = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
_SCALE_DOWN = {
    "stabilizationWindowSeconds": 300,
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}
_INTEGERS = (("HorizontalPodAutoscalerSpec", "spec", ("minReplicas", "maxReplicas"), "int32"),)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _rules(given: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``GenerateHPAScaleUpRules``/``GenerateHPAScaleDownRules``: the given fields, the rest
    defaulted."""
    rules = dict(given) if isinstance(given, dict) else {}
    for key, value in defaults.items():
        if rules.get(key) is None:
            rules[key] = [dict(p) for p in value] if isinstance(value, list) else value
    return rules


def default_autoscaler(obj: JsonDict) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    check_integers(obj, _INTEGERS)
    spec.setdefault("scaleTargetRef", {})
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }
        ]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _rules(behavior.get("scaleUp"), _SCALE_UP)
        behavior["scaleDown"] = _rules(behavior.get("scaleDown"), _SCALE_DOWN)


def _api_version_errors(ref: Mapping[str, Any], old_ref: Mapping[str, Any] | None) -> list[FieldError]:
    """``ValidateAPIVersion`` of the target with the registry's options: skipped on an update
    that keeps its apiVersion and kind, an empty group allowed only for a ReplicationController
    (kube-apiserver v1.36.2 refuses an empty apiVersion otherwise)."""
    version, kind = str(ref.get("apiVersion") or ""), ref.get("kind")
    if (
        old_ref is not None
        and old_ref.get("apiVersion") == ref.get("apiVersion")
        and old_ref.get("kind") == kind
    ):
        return []
    path = "spec.scaleTargetRef.apiVersion"
    if version.count("/") > 1:  # schema.ParseGroupVersion
        return [invalid(path, version, f"unexpected GroupVersion string: {version}")]
    group, slash, _ = version.partition("/")
    if not slash:  # "v1": a version of the core group
        group = ""
    if not group and kind != "ReplicationController":
        return [invalid(path, version, "apiVersion must specify API group")]
    return []


def _autoscaler_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[FieldError]:
    spec = _map(obj.get("spec"))
    errs: list[FieldError] = []
    low, high = spec.get("minReplicas"), spec.get("maxReplicas", 0)
    if isinstance(low, int) and low < 1:
        errs.append(invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    if isinstance(high, int) and high < 1:
        errs.append(invalid("spec.maxReplicas", high, "must be greater than 0"))
    if isinstance(low, int) and isinstance(high, int) and high < low:
        errs.append(invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"))
    ref = _map(spec.get("scaleTargetRef"))
    for key in ("kind", "name"):
        value = str(ref.get(key) or "")
        if not value:
            errs.append(required(f"spec.scaleTargetRef.{key}"))
        else:
            errs.extend(
                invalid(f"spec.scaleTargetRef.{key}", value, m) for m in path_segment_name_errors(value)
            )
    old_ref = None if old is None else _map(_map(old.get("spec")).get("scaleTargetRef"))
    errs.extend(_api_version_errors(ref, old_ref))
    for i, metric in enumerate(spec.get("metrics") or ()):
        kind = _map(metric).get("type")
        if kind not in _METRIC_TYPES:
            errs.append(not_supported(f"spec.metrics[{i}].type", kind, _METRIC_TYPES))
    return errs


class HorizontalPodAutoscalerStrategy(BuiltinStrategy):
    generation = False
    unconditional_update = True
    strategic_merge = True
    times = (("status", "lastScaleTime"), ("status", "conditions", "*", "lastTransitionTime"))

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(rtype, lambda: default_autoscaler(obj))
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {"desiredReplicas": 0, "currentMetrics": None}

    def storage_form(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        """``status.currentMetrics`` has no ``omitempty``: an empty or missing list reads back
        as null (kube-apiserver v1.36.2 answers ``"currentMetrics": null``)."""
        status = obj.get("status")
        if isinstance(status, dict) and not status.get("currentMetrics"):
            status["currentMetrics"] = None
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _autoscaler_errors(obj)

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _autoscaler_errors(new, old)


KINDS: tuple[Kind, ...] = (Kind(HORIZONTAL_POD_AUTOSCALERS, HorizontalPodAutoscalerStrategy()),)
