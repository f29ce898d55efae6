"""apps/v1 StatefulSets and DaemonSets as kube-apiserver v1.36 serves them.

Defaulting is ``SetDefaults_StatefulSet``/``SetDefaults_DaemonSet`` (update strategies, replicas,
revision history, a StatefulSet's PVC retention policy) plus the pod template's and the claim
templates' defaults. Both have a status subresource (a StatefulSet a scale one too), count
generations on spec changes and validate as ``ValidateStatefulSet``/``ValidateDaemonSet`` do
where operators meet them: the selector (required, not empty, matching the template's labels,
immutable), the template (containers, ``restartPolicy: Always``), the update strategies and, for a
StatefulSet, which spec fields an update may change at all. A DaemonSet keeps its template
generation in the ``deprecated.daemonset.template.generation`` annotation, as apps/v1 stores it.
Neither kind has selectable fields beyond metadata.name and metadata.namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.testing.apiserver.objects import JsonDict, forbidden, invalid, not_supported
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.schema import FieldError
from memop.testing.apiserver.strategy import Kind
from memop.testing.kinds.builtins import (
    BuiltinStrategy,
    _decoding,
    _immutable_selector,
    check_integers,
    default_pod_template,
    validate_workload,
)
from memop.testing.kinds.volumes import default_claim_spec

STATEFUL_SETS = ResourceType(
    "apps",
    "v1",
    "statefulsets",
    "StatefulSet",
    True,
    "statefulset",
    ("sts",),
    has_status=True,
    categories=("all",),
)
DAEMON_SETS = ResourceType(
    "apps", "v1", "daemonsets", "DaemonSet", True, "daemonset", ("ds",), has_status=True, categories=("all",)
)
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"

# The StatefulSet spec fields an update may change (ValidateStatefulSetUpdate).
_STATEFUL_SET_MUTABLE = frozenset(
    (
        "replicas",
        "ordinals",
        "template",
        "updateStrategy",
        "revisionHistoryLimit",
        "persistentVolumeClaimRetentionPolicy",
        "minReadySeconds",
    )
)
_STATEFUL_SET_INTEGERS = (
    ("StatefulSetSpec", "spec", ("replicas", "revisionHistoryLimit", "minReadySeconds"), "int32"),
)
_DAEMON_SET_INTEGERS = (("DaemonSetSpec", "spec", ("revisionHistoryLimit", "minReadySeconds"), "int32"),)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _negative(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value < 0


def _non_negative_errors(spec: Mapping[str, Any], *keys: str) -> list[FieldError]:
    return [
        invalid(f"spec.{key}", spec[key], "must be greater than or equal to 0")
        for key in keys
        if _negative(spec.get(key))
    ]


# --- StatefulSet -----------------------------------------------------------------------------------


def default_stateful_set(obj: JsonDict) -> None:
    """``SetDefaults_StatefulSet`` (StatefulSetAutoDeletePVC is GA) and the templates' defaults."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    check_integers(obj, _STATEFUL_SET_INTEGERS)
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            if strategy.get("rollingUpdate") is None:
                strategy["rollingUpdate"] = {}
        rolling = strategy.get("rollingUpdate")
        if (
            strategy["type"] == "RollingUpdate"
            and isinstance(rolling, dict)
            and rolling.get("partition") is None
        ):
            rolling["partition"] = 0
    retention = spec.get("persistentVolumeClaimRetentionPolicy")
    if not isinstance(retention, dict):
        retention = spec["persistentVolumeClaimRetentionPolicy"] = {}
    for key in ("whenDeleted", "whenScaled"):
        if not retention.get(key):
            retention[key] = "Retain"
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    default_pod_template(spec.setdefault("template", {}))
    for claim in spec.get("volumeClaimTemplates") or ():
        if isinstance(claim, dict):
            claim.setdefault("metadata", {})
            default_claim_spec(claim.setdefault("spec", {}))
            claim.setdefault("status", {"phase": "Pending"})


def _stateful_set_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _map(obj.get("spec"))
    errs = validate_workload(obj, "statefulset")
    policy = spec.get("podManagementPolicy")
    if policy not in ("OrderedReady", "Parallel"):
        errs.append(not_supported("spec.podManagementPolicy", policy, ["OrderedReady", "Parallel"]))
    strategy = _map(spec.get("updateStrategy"))
    kind = strategy.get("type")
    if kind not in ("RollingUpdate", "OnDelete"):
        errs.append(not_supported("spec.updateStrategy.type", kind, ["RollingUpdate", "OnDelete"]))
    elif kind == "OnDelete" and strategy.get("rollingUpdate") is not None:
        errs.append(
            invalid(
                "spec.updateStrategy.rollingUpdate",
                strategy["rollingUpdate"],
                "only allowed for updateStrategy 'RollingUpdate'",
            )
        )
    elif _negative(_map(strategy.get("rollingUpdate")).get("partition")):
        partition = strategy["rollingUpdate"]["partition"]
        errs.append(
            invalid(
                "spec.updateStrategy.rollingUpdate.partition", partition, "must be greater than or equal to 0"
            )
        )
    errs.extend(_non_negative_errors(spec, "minReadySeconds"))
    return errs


class StatefulSetStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True
    times = (("status", "conditions", "*", "lastTransitionTime"),)

    def scale_paths(self, rtype: ResourceType) -> tuple[str, str, str | None] | None:
        return ("spec.replicas", "status.replicas", None)

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(rtype, lambda: default_stateful_set(obj))
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {"replicas": 0, "availableReplicas": 0}

    def bumps_generation(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> bool:
        return new.get("spec") != old.get("spec")

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _stateful_set_errors(obj)

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs = _stateful_set_errors(new)
        new_spec, old_spec = _map(new.get("spec")), _map(old.get("spec"))
        fixed = (set(new_spec) | set(old_spec)) - _STATEFUL_SET_MUTABLE
        if any(new_spec.get(key) != old_spec.get(key) for key in fixed):
            errs.append(
                forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                    "'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
                    "'minReadySeconds' are forbidden",
                )
            )
        return errs


# --- DaemonSet -------------------------------------------------------------------------------------


def default_daemon_set(obj: JsonDict) -> None:
    """``SetDefaults_DaemonSet`` and the pod template's defaults."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    check_integers(obj, _DAEMON_SET_INTEGERS)
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.get("rollingUpdate")
            if not isinstance(rolling, dict):
                rolling = strategy["rollingUpdate"] = {}
            if rolling.get("maxUnavailable") is None:
                rolling["maxUnavailable"] = 1
            if rolling.get("maxSurge") is None:
                rolling["maxSurge"] = 0
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    default_pod_template(spec.setdefault("template", {}))


def _daemon_set_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _map(obj.get("spec"))
    errs = validate_workload(obj, "daemonset")
    if not isinstance(spec.get("selector"), dict):
        # No selector selects nothing, so it never matches the template (no Required error).
        template_labels = _map(_map(_map(spec.get("template")).get("metadata")).get("labels"))
        mismatch = invalid(
            "spec.template.metadata.labels",
            dict(template_labels),
            "`selector` does not match template `labels`",
        )
        errs = [mismatch, *(e for e in errs if e.field != "spec.selector")]
    kind = _map(spec.get("updateStrategy")).get("type")
    if kind not in ("RollingUpdate", "OnDelete"):
        errs.append(not_supported("spec.updateStrategy.type", kind, ["OnDelete", "RollingUpdate"]))
    errs.extend(_non_negative_errors(spec, "minReadySeconds", "revisionHistoryLimit"))
    return errs


def _template_generation(obj: Mapping[str, Any]) -> int:
    value = _map(_map(obj.get("metadata")).get("annotations")).get(TEMPLATE_GENERATION)
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def _set_template_generation(obj: JsonDict, generation: int) -> None:
    meta = obj.setdefault("metadata", {})
    annotations = meta.get("annotations")
    meta["annotations"] = {
        **(annotations if isinstance(annotations, dict) else {}),
        TEMPLATE_GENERATION: str(generation),
    }


class DaemonSetStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True
    times = (("status", "conditions", "*", "lastTransitionTime"),)

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(rtype, lambda: default_daemon_set(obj))
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        }

    def prepare_create(self, obj: JsonDict, rtype: ResourceType) -> None:
        _set_template_generation(obj, 1)

    def prepare_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> None:
        # The template generation counts template changes (spec.templateGeneration internally).
        generation = _template_generation(old)
        new_template = _map(new.get("spec")).get("template")
        if new_template != _map(old.get("spec")).get("template"):
            generation += 1
        _set_template_generation(new, generation)

    def bumps_generation(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> bool:
        return new.get("spec") != old.get("spec")

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _daemon_set_errors(obj)

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        # ValidateDaemonSetUpdate: the spec update's checks (an immutable selector) come first.
        return _immutable_selector(new, old) + _daemon_set_errors(new)


KINDS: tuple[Kind, ...] = (
    Kind(STATEFUL_SETS, StatefulSetStrategy()),
    Kind(DAEMON_SETS, DaemonSetStrategy()),
)
