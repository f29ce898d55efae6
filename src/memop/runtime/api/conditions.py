"""Status conditions in the shape of ``metav1.Condition``, as plain dicts.

Owns the rules the API server enforces on a condition (the OpenAPI schema any CRD embeds for
``status.conditions``, and the same checks in Python) and the one transition rule that makes
conditions useful: ``lastTransitionTime`` moves only when ``status`` flips. Reason, message and
observedGeneration are refreshed in place without touching the transition time, so a controller
can recompute its conditions on every reconcile and write status only when something changed.

Invariants of every list returned here:
- at most one condition per ``type`` (the list is an ``x-kubernetes-list-type: map`` keyed by type);
- the order of existing conditions is kept, new types are appended;
- the caller's lists and dicts are never mutated.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"
STATUSES = (TRUE, FALSE, UNKNOWN)

# The patterns and limits of metav1.Condition (k8s.io/apimachinery/pkg/apis/meta/v1/types.go).
TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
TYPE_MAX_LENGTH = 316
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
REASON_MAX_LENGTH = 1024
MESSAGE_MAX_LENGTH = 32768

_TYPE_RE = re.compile(TYPE_PATTERN)
_REASON_RE = re.compile(REASON_PATTERN)
_TRUNCATED = "... (truncated)"


def condition_schema() -> dict[str, Any]:
    """The OpenAPI v3 schema of one ``metav1.Condition`` (what controller-gen emits for it)."""
    return {
        "description": "Condition contains details for one aspect of the current state of this API Resource.",
        "properties": {
            "lastTransitionTime": {
                "description": (
                    "lastTransitionTime is the last time the condition transitioned from one status"
                    " to another."
                ),
                "format": "date-time",
                "type": "string",
            },
            "message": {
                "description": "message is a human readable message indicating details about the transition.",
                "maxLength": MESSAGE_MAX_LENGTH,
                "type": "string",
            },
            "observedGeneration": {
                "description": (
                    "observedGeneration represents the .metadata.generation that the condition was"
                    " set based upon."
                ),
                "format": "int64",
                "minimum": 0,
                "type": "integer",
            },
            "reason": {
                "description": (
                    "reason contains a programmatic identifier indicating the reason for the"
                    " condition's last transition, in CamelCase."
                ),
                "maxLength": REASON_MAX_LENGTH,
                "minLength": 1,
                "pattern": REASON_PATTERN,
                "type": "string",
            },
            "status": {
                "description": "status of the condition, one of True, False, Unknown.",
                "enum": list(STATUSES),
                "type": "string",
            },
            "type": {
                "description": "type of condition in CamelCase or in foo.example.com/CamelCase.",
                "maxLength": TYPE_MAX_LENGTH,
                "pattern": TYPE_PATTERN,
                "type": "string",
            },
        },
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        "type": "object",
    }


def conditions_schema() -> dict[str, Any]:
    """The schema of a ``conditions`` array: a list-map keyed by ``type``."""
    return {
        "items": condition_schema(),
        "type": "array",
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map",
    }


def validate_reason(reason: str) -> None:
    """Raise ValueError unless ``reason`` is a reason the API server accepts (CamelCase)."""
    if reason in _VALID_REASONS:
        return
    # fullmatch: Python's $ also matches before a final newline, Go's does not.
    if not reason or len(reason) > REASON_MAX_LENGTH or not _REASON_RE.fullmatch(reason):
        raise ValueError(f"condition reason {reason!r} must match {REASON_PATTERN} (CamelCase)")
    _remember_valid(_VALID_REASONS, reason)


def validate_type(condition_type: str) -> None:
    """Raise ValueError unless ``condition_type`` is a condition type the API server accepts."""
    if condition_type in _VALID_TYPES:
        return
    if len(condition_type) > TYPE_MAX_LENGTH or not _TYPE_RE.fullmatch(condition_type):
        raise ValueError(f"condition type {condition_type!r} must match {TYPE_PATTERN}")
    _remember_valid(_VALID_TYPES, condition_type)


# Types and reasons found valid. A controller sets a handful of each, thousands of times: a set
# lookup instead of a regular expression each time. Bounded, since a caller could make reasons
# up as it goes.
_VALID_TYPES: set[str] = set()
_VALID_REASONS: set[str] = set()
_MAX_REMEMBERED_VALID = 256


def _remember_valid(valid: set[str], value: str) -> None:
    if len(valid) < _MAX_REMEMBERED_VALID and type(value) is str:
        valid.add(value)


def _truncate(message: str) -> str:
    # A message over the limit would make the whole status write fail, forever: the reconciler
    # would then be unable to report anything. Truncating keeps the status writable.
    if len(message) <= MESSAGE_MAX_LENGTH:
        return message
    return message[: MESSAGE_MAX_LENGTH - len(_TRUNCATED)] + _TRUNCATED


def find_condition(
    conditions: Iterable[Mapping[str, Any]] | None, condition_type: str
) -> dict[str, Any] | None:
    """The condition of ``condition_type`` (a copy), or None. Tolerates None and junk entries."""
    for condition in conditions or ():
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return dict(condition)
    return None


def is_true(conditions: Iterable[Mapping[str, Any]] | None, condition_type: str) -> bool:
    """True only when the condition exists and its status is exactly "True"."""
    condition = find_condition(conditions, condition_type)
    return condition is not None and condition.get("status") == TRUE


def set_condition(  # noqa: PLR0917 - the positional signature every caller already uses
    conditions: Iterable[Mapping[str, Any]] | None,
    type: str,  # the field's own name in metav1.Condition
    status: str,
    reason: str,
    message: str,
    observed_generation: int,
    now: str,
) -> list[dict[str, Any]]:
    """A new conditions list with condition ``type`` set to the given values.

    ``lastTransitionTime`` becomes ``now`` (an RFC 3339 timestamp) when the condition is new or
    its status differs from the existing one, and is kept otherwise, even when reason, message
    or observedGeneration change. Other conditions are kept as they are, in order. A message
    longer than the API allows is truncated. Raises ValueError on a status other than
    True/False/Unknown, a reason that is not CamelCase, an invalid type, or a negative generation.
    """
    validate_type(type)
    if status not in STATUSES:
        raise ValueError(f"condition status {status!r} must be one of {', '.join(STATUSES)}")
    validate_reason(reason)
    if observed_generation < 0:
        raise ValueError(f"observedGeneration {observed_generation} must be >= 0")
    result: list[dict[str, Any]] = []
    found = False
    for existing in conditions or ():
        # A condition's fields are scalars; deepcopy only what is not (it costs 20x a dict copy).
        entry = {k: copy.deepcopy(v) if isinstance(v, (dict, list)) else v for k, v in existing.items()}
        if entry.get("type") == type and not found:
            found = True
            transitioned = entry.get("status") != status or not entry.get("lastTransitionTime")
            entry.update(
                status=status,
                reason=reason,
                message=_truncate(message),
                observedGeneration=observed_generation,
            )
            if transitioned:
                entry["lastTransitionTime"] = now
        elif entry.get("type") == type:
            continue  # a duplicate type would be rejected by the list-map; drop it
        result.append(entry)
    if not found:
        result.append(
            {
                "type": type,
                "status": status,
                "observedGeneration": observed_generation,
                "lastTransitionTime": now,
                "reason": reason,
                "message": _truncate(message),
            }
        )
    return result


def _without_time(conditions: Iterable[Mapping[str, Any]] | None) -> dict[Any, dict[str, Any]]:
    by_type: dict[Any, dict[str, Any]] = {}
    for condition in conditions or ():
        entry = {k: v for k, v in condition.items() if k != "lastTransitionTime"}
        by_type[condition.get("type")] = entry
    return by_type


def conditions_equal_ignoring_time(
    a: Iterable[Mapping[str, Any]] | None, b: Iterable[Mapping[str, Any]] | None
) -> bool:
    """Whether two condition lists say the same thing, ignoring lastTransitionTime and order.

    Conditions are matched by type (the list-map key); None and [] are equal.
    """
    a_list = list(a or ())
    b_list = list(b or ())
    return len(a_list) == len(b_list) and _without_time(a_list) == _without_time(b_list)
