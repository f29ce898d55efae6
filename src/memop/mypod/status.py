"""A MyPod's status, from its pod as the cache holds it.

Pure, and stable: recomputing an unchanged situation gives the stored status again
(``lastTransitionTime`` moves only when a condition flips), so nothing is written.

``podPhase``, ``podIp``, ``nodeIp`` and ``createdTimestamp`` describe the MyPod's *current*
pod: controlled by it, not being deleted, made from its current podSpec. Otherwise they are
absent rather than left describing a pod that is going away (a replaced pod's IP is not the
new pod's). The status this returns carries ``None`` for those it no longer reports, so that
written as a JSON merge patch it removes them.

Conditions (CamelCase reasons, ``observedGeneration`` = metadata.generation):
- Ready: True (PodReady) when the current pod reports Ready. Otherwise False: PodMissing (no
  pod of this MyPod), PodConflict (a pod of that name this MyPod does not control), Replacing
  (podSpec changed: the old pod is being deleted, the new one is created once it is gone),
  PodTerminating (the pod is being deleted, or is a deleted namesake MyPod's that the garbage
  collector will delete: a new one is created once it is gone), PodSucceeded or
  PodFailed (a finished pod is kept, as a bare pod would be), PodNotReady.
- Degraded: True while memop cannot do its job, with the caller's failure: InvalidSpec,
  PodInvalid (the API server refused the pod), PodConflict, PodForbidden, ReconcileError.
  False (AsExpected) otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from memop.mypod.desired import SPEC_HASH, left_by_namesake
from memop.runtime.api.conditions import FALSE, TRUE, find_condition, set_condition
from memop.runtime.cache.store import controller_owner_uid, dig

READY = "Ready"
DEGRADED = "Degraded"
POD_FIELDS = ("podPhase", "podIp", "nodeIp", "createdTimestamp")
# The Ready reasons given only for the MyPod's current pod: the one the pod fields describe.
_CURRENT = ("PodReady", "PodNotReady", "PodSucceeded", "PodFailed")


class Failure(NamedTuple):
    """Why memop cannot do its job: the Degraded condition's reason and message."""

    reason: str
    message: str


def _unix_seconds(timestamp: Any) -> int | None:
    try:
        return int(datetime.fromisoformat(timestamp).timestamp())
    except (TypeError, ValueError):
        return None


def _pod_fields(pod: Mapping[str, Any]) -> dict[str, Any]:
    fields = {
        "podPhase": dig(pod, "status", "phase") or "Pending",  # every pod is created Pending
        "podIp": dig(pod, "status", "podIP"),
        "nodeIp": dig(pod, "status", "hostIP"),
        "createdTimestamp": _unix_seconds(dig(pod, "metadata", "creationTimestamp")),
    }
    return {k: v for k, v in fields.items() if v}


def _ready(
    mypod: Mapping[str, Any], pod: Mapping[str, Any] | None, spec_hash: str | None
) -> tuple[str, str, str]:
    name = dig(pod, "metadata", "name")
    if pod is None:
        return FALSE, "PodMissing", "this MyPod has no pod"
    ours = controller_owner_uid(dict(pod)) == dig(mypod, "metadata", "uid")
    if ours and spec_hash is not None and dig(pod, "metadata", "annotations", SPEC_HASH) != spec_hash:
        message = f"podSpec changed: Pod {name} is being replaced; the new one is created once it is gone"
        return FALSE, "Replacing", message
    if dig(pod, "metadata", "deletionTimestamp"):
        return FALSE, "PodTerminating", f"Pod {name} is being deleted; a new one is created once it is gone"
    if not ours and left_by_namesake(pod, mypod):
        message = f"Pod {name} is a deleted MyPod's; a new one is created once it is garbage-collected"
        return FALSE, "PodTerminating", message
    if not ours:
        return FALSE, "PodConflict", f"Pod {name} exists and is not controlled by this MyPod"
    phase = dig(pod, "status", "phase") or "Pending"
    if phase in ("Succeeded", "Failed"):
        return FALSE, f"Pod{phase}", f"Pod {name} has {phase.lower()}; delete it to start a new one"
    ready = find_condition(dig(pod, "status", "conditions"), "Ready")
    if ready is not None and ready.get("status") == TRUE:
        return TRUE, "PodReady", f"Pod {name} is ready"
    return FALSE, "PodNotReady", f"Pod {name} is {phase}, not ready"


def compute_status(
    mypod: Mapping[str, Any],
    pod: Mapping[str, Any] | None,
    spec_hash: str | None,
    now: str,
    failure: Failure | None = None,
) -> dict[str, Any]:
    """The whole status of ``mypod`` (see the module docstring), to merge-patch onto it.

    ``pod`` is the cached pod of the MyPod's name (None when there is none), whoever controls
    it; ``spec_hash`` the SPEC_HASH of the current podSpec (None when the spec is invalid: the
    pod is then not judged stale). ``now`` (RFC 3339) stamps conditions that flip.
    """
    meta = mypod.get("metadata") or {}
    generation = meta.get("generation")
    generation = generation if isinstance(generation, int) else 0
    old = mypod.get("status")
    if not isinstance(old, Mapping):
        old = {}  # none yet (or junk someone wrote: replaced)
    status, reason, message = _ready(mypod, pod, spec_hash)
    fields = _pod_fields(pod) if pod is not None and reason in _CURRENT else {}
    conditions = old.get("conditions") if isinstance(old.get("conditions"), list) else []
    conditions = set_condition(conditions, READY, status, reason, message, generation, now)
    if failure is None:
        conditions = set_condition(conditions, DEGRADED, FALSE, "AsExpected", "", generation, now)
    else:
        conditions = set_condition(conditions, DEGRADED, TRUE, *failure, generation, now)
    gone = {k: None for k in POD_FIELDS if k not in fields and k in old}
    return {**fields, **gone, "observedGeneration": generation, "conditions": conditions}
