"""scheduling.k8s.io/v1 PriorityClasses as kube-apiserver v1.36 serves them.

``preemptionPolicy`` defaults to PreemptLowerPriority; names starting with ``system-`` are
reserved for the two system classes, which the server creates at start
(``system-cluster-critical`` and ``system-node-critical``, as its scheduling post-start hook
does); a user's class may not exceed 1000000000; ``value`` and ``preemptionPolicy`` are
immutable. ``generation`` is 1 from the create on (no update counts). No status subresource, no
selectable fields beyond the name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.testing.apiserver.objects import JsonDict, forbidden, invalid, not_supported
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.schema import FieldError, go_json
from memop.testing.apiserver.strategy import Kind
from memop.testing.kinds.builtins import BuiltinStrategy

PRIORITY_CLASSES = ResourceType(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, "priorityclass", ("pc",)
)
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES: dict[str, tuple[int, str]] = {
    "system-node-critical": (
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    "system-cluster-critical": (
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if "
        "necessary.",
    ),
}
_PREEMPTION_POLICIES = ["PreemptLowerPriority", "Never"]


def _system_class_error(obj: Mapping[str, Any]) -> str | None:
    """``IsKnownSystemPriorityClass``'s error for a ``system-`` class, None when it is one."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    known = SYSTEM_PRIORITY_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if obj.get("value") != known[0]:
        return f"value of {name} PriorityClass must be {known[0]}"
    if obj.get("globalDefault"):
        return f"globalDefault of {name} PriorityClass must be false"
    return None


def _priority_class_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    value = obj.get("value", 0)
    if name.startswith("system-"):
        error = _system_class_error(obj)
        if error is not None:
            errs.append(
                forbidden(
                    "metadata.name",
                    "priority class names with 'system-' prefix are reserved for system use only. "
                    f"error: {error}",
                )
            )
    elif isinstance(value, int) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.append(
            forbidden(
                "value",
                f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
        )
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in _PREEMPTION_POLICIES:
        errs.append(not_supported("preemptionPolicy", policy, _PREEMPTION_POLICIES))
    return errs


class PriorityClassStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True

    def bumps_generation(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> bool:
        return False  # generation 1 on create, never counted on (PrepareForUpdate does nothing)

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        obj.setdefault("value", 0)
        if obj.get("preemptionPolicy") is None:
            obj["preemptionPolicy"] = "PreemptLowerPriority"
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _priority_class_errors(obj)

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs = _priority_class_errors(new)
        if new.get("value") != old.get("value"):
            errs.append(forbidden("value", "may not be changed in an update."))
        if new.get("preemptionPolicy") != old.get("preemptionPolicy"):
            policy = new.get("preemptionPolicy")
            errs.append(invalid("preemptionPolicy", policy, "field is immutable", raw_value=go_json(policy)))
        return errs


def system_priority_classes() -> list[JsonDict]:
    """The classes kube-apiserver creates at start."""
    return [
        {"metadata": {"name": name}, "value": value, "description": description}
        for name, (value, description) in SYSTEM_PRIORITY_CLASSES.items()
    ]


KINDS: tuple[Kind, ...] = (
    Kind(PRIORITY_CLASSES, PriorityClassStrategy(), initial=tuple(system_priority_classes())),
)
