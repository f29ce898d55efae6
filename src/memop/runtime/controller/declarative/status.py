"""The owner's status from its children's readiness: ``Ready``, ``Progressing``, ``Degraded``
and ``observedGeneration``, plus the user's own fields. Pure: recomputing an unchanged
situation gives an equal status (transition times move only when a condition's status flips),
so the reconciler writes the status only when something changed.

- a problem (an apply refused, an invalid spec, a child that cannot be owned): ``Degraded``
  True with its reason and message, ``Ready`` False and ``Progressing`` False with the same reason;
- else a child Failed (kstatus): ``Degraded`` True ``ChildFailed``, ``Ready`` False;
- else a child not Current: ``Progressing`` True, ``Ready`` False, both ``ChildrenNotReady``;
- else ``Ready`` True ``ChildrenReady``, ``Progressing`` False and ``Degraded`` False.

The messages name the first children that are not ready with kstatus's own words
(``Deployment web: Available: 0/1``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memop.runtime.api.conditions import FALSE, TRUE, set_condition
from memop.runtime.client.resources import Resource
from memop.runtime.controller.readiness import FAILED, Readiness

READY = "Ready"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
# How many children a message names before "and n more".
_NAMED = 3


@dataclass(frozen=True)
class Problem:
    """Why the owner cannot converge now: a CamelCase ``reason`` and a message for people."""

    reason: str
    message: str


@dataclass(frozen=True)
class ChildReadiness:
    """One child's readiness, with what names it in a message."""

    resource: Resource
    name: str
    readiness: Readiness

    def describe(self) -> str:
        text = self.readiness.message or self.readiness.status
        return f"{self.resource.kind} {self.name}: {text}"


def _summary(children: Sequence[ChildReadiness]) -> str:
    named = "; ".join(child.describe() for child in children[:_NAMED])
    more = len(children) - _NAMED
    return f"{named}; and {more} more" if more > 0 else named


def owner_conditions(
    existing: Any,
    generation: int,
    problem: Problem | None,
    children: Sequence[ChildReadiness],
    now: str,
) -> list[dict[str, Any]]:
    """The owner's conditions (see the module docstring), from its ``existing`` ones."""
    failed = [c for c in children if c.readiness.status == FAILED]
    pending = [c for c in children if not c.readiness.current]
    if problem is not None:
        ready = progressing = (FALSE, problem.reason, problem.message)
        degraded = (TRUE, problem.reason, problem.message)
    elif failed:
        ready = progressing = (FALSE, "ChildFailed", _summary(failed))
        degraded = (TRUE, "ChildFailed", _summary(failed))
    elif pending:
        ready = (FALSE, "ChildrenNotReady", _summary(pending))
        progressing = (TRUE, "ChildrenNotReady", _summary(pending))
        degraded = (FALSE, "AsExpected", "")
    else:
        count = f"{len(children)} child{'ren' if len(children) != 1 else ''} ready"
        ready = (TRUE, "ChildrenReady", count)
        progressing = (FALSE, "ChildrenReady", count)
        degraded = (FALSE, "AsExpected", "")
    conditions = existing if isinstance(existing, list) else []
    for condition_type, (status, reason, message) in (
        (READY, ready),
        (PROGRESSING, progressing),
        (DEGRADED, degraded),
    ):
        conditions = set_condition(conditions, condition_type, status, reason, message, generation, now)
    return conditions


def owner_status(
    current: Any,
    generation: int,
    conditions: list[dict[str, Any]],
    extra: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The owner's whole status: what it holds now, the user's ``extra`` fields over it, then
    ``observedGeneration`` and ``conditions`` (memop's: ``extra`` cannot set them)."""
    status = dict(current) if isinstance(current, Mapping) else {}
    status.update(extra or {})
    status["observedGeneration"] = generation
    status["conditions"] = conditions
    return status


def degraded_as(existing: Any, problem: Problem, generation: int) -> bool:
    """Whether the ``existing`` conditions already report ``problem`` for ``generation`` (so its
    Event was recorded when it was first reported, and is not again)."""
    for condition in existing if isinstance(existing, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == DEGRADED:
            return (
                condition.get("status") == TRUE
                and condition.get("reason") == problem.reason
                and condition.get("message") == problem.message
                and condition.get("observedGeneration") == generation
            )
    return False
