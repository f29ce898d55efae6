"""A PodSet's status, computed from the pods that count (see ``desired.is_active``).

Pure, and stable: recomputing an unchanged situation gives the stored status back
(``lastTransitionTime`` moves only when a condition's status flips), so nothing is written.

- podNames: the names of the pods that count, sorted; readyReplicas: how many of them are Ready.
- Available: True when at least ``replicas`` of them are Ready (ReplicasReady).
- Progressing: True while their number is not ``replicas`` (Scaling), else False (Scaled).
- Degraded: True with the reason and message the reconciler gives (InvalidSpec,
  InvalidTemplate, FailedCreate, FailedDelete), else False (AsExpected).

With an invalid spec (``replicas`` None) Available and Progressing keep what they said
(Unknown if nothing yet): there is no count to compare with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memop.podset.desired import is_ready
from memop.runtime.api.conditions import FALSE, TRUE, UNKNOWN, find_condition, set_condition

AVAILABLE = "Available"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"


def compute_status(
    podset: Mapping[str, Any],
    replicas: int | None,
    pods: Sequence[Mapping[str, Any]],
    now: str,
    degraded: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The whole status of ``podset`` with ``pods`` (those that count) and ``degraded``
    ((reason, message), or None when all is well). ``now`` (RFC 3339) stamps transitions."""
    meta = podset.get("metadata") or {}
    generation = meta.get("generation")
    generation = generation if isinstance(generation, int) and generation >= 0 else 0
    old = podset.get("status")
    old_conditions = old.get("conditions") if isinstance(old, Mapping) else None
    conditions = old_conditions if isinstance(old_conditions, list) else []
    names = sorted(str((pod.get("metadata") or {}).get("name")) for pod in pods)
    ready = sum(1 for pod in pods if is_ready(pod))
    if replicas is not None:
        wanted = f"{replicas} wanted"
        available = (TRUE, "ReplicasReady") if ready >= replicas else (FALSE, "ReplicasNotReady")
        progressing = (TRUE, "Scaling") if len(pods) != replicas else (FALSE, "Scaled")
        for kind, (status, reason), message in (
            (AVAILABLE, available, f"{ready} pods ready, {wanted}"),
            (PROGRESSING, progressing, f"{len(pods)} pods, {wanted}"),
        ):
            conditions = set_condition(conditions, kind, status, reason, message, generation, now)
    else:
        for kind in (AVAILABLE, PROGRESSING):
            if find_condition(conditions, kind) is None:
                message = "the spec is invalid"
                conditions = set_condition(conditions, kind, UNKNOWN, "InvalidSpec", message, generation, now)
    status, reason, message = (TRUE, *degraded) if degraded else (FALSE, "AsExpected", "")
    conditions = set_condition(conditions, DEGRADED, status, reason, message, generation, now)
    return {
        "podNames": names,
        "readyReplicas": ready,
        "observedGeneration": generation,
        "conditions": conditions,
    }
