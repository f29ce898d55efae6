"""Pure Deployment arithmetic of kube-controller-manager's deployment controller
(``pkg/controller/deployment/util``): pod-template hashes, surge/unavailability fenceposts,
status counts and the Available/Progressing conditions.

Nothing here reads a clock or the store: callers pass ``now`` (epoch seconds), so the rules
can be tested exactly. Status dicts omit zero counts, as the real API's ``omitempty`` does.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from memop.testing.controllers.common import Obj, meta, parse_rfc3339, rfc3339

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"

AVAILABLE = "Available"
PROGRESSING = "Progressing"
MIN_AVAILABLE = "MinimumReplicasAvailable"
MIN_UNAVAILABLE = "MinimumReplicasUnavailable"
NEW_RS_CREATED = "NewReplicaSetCreated"
RS_UPDATED = "ReplicaSetUpdated"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"

DEFAULT_REVISION_HISTORY = 10
DEFAULT_PROGRESS_DEADLINE = 600

# k8s.io/apimachinery/pkg/util/rand: the alphabet SafeEncodeString maps bytes into (no vowels,
# no look-alikes), so hashes never spell words.
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def fnv32a(data: bytes) -> int:
    """32-bit FNV-1a, the hash ``ComputeHash`` uses."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def pod_template_hash(template: Mapping[str, Any], collision_count: int | None = None) -> str:
    """The ``pod-template-hash`` of a pod template: FNV-1a of its canonical JSON (and of the
    collision count, when set), printed in decimal and safe-encoded, as ``ComputeHash`` does."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(4, "little")
    return "".join(_ALPHANUMS[b % len(_ALPHANUMS)] for b in str(fnv32a(data)).encode())


def without_hash(template: Mapping[str, Any]) -> Obj:
    """The template minus its pod-template-hash label (for ``EqualIgnoreHash``)."""
    out = dict(template)
    tmeta = dict(out.get("metadata") or {})
    labels = dict(tmeta.get("labels") or {})
    labels.pop(HASH_LABEL, None)
    if labels:
        tmeta["labels"] = labels
    else:
        tmeta.pop("labels", None)
    out["metadata"] = tmeta
    return out


def with_hash_label(template: Mapping[str, Any], value: str) -> Obj:
    """A deep copy of the template whose labels include ``pod-template-hash=value``."""
    out = copy.deepcopy(dict(template))
    tmeta = out.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: value}
    return out


def desired_replicas(obj: Mapping[str, Any]) -> int:
    """``spec.replicas`` of a Deployment or ReplicaSet (API default 1)."""
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def count(obj: Mapping[str, Any] | None, field: str) -> int:
    """An integer status field of ``obj`` (0 when absent)."""
    if obj is None:
        return 0
    return int((obj.get("status") or {}).get(field) or 0)


def revision(rs: Mapping[str, Any]) -> int:
    """The deployment.kubernetes.io/revision of a ReplicaSet (0 when absent or garbled)."""
    try:
        return int((meta(rs).get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def is_rolling(d: Mapping[str, Any]) -> bool:
    """Whether the Deployment's strategy is RollingUpdate (the default) rather than Recreate."""
    strategy = (d.get("spec") or {}).get("strategy") or {}
    return bool(strategy.get("type", "RollingUpdate") != "Recreate")


def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """An IntOrString (``3`` or ``"25%"``) resolved against ``total``."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        share = int(text[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(text)


def fenceposts(d: Mapping[str, Any]) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) of a Deployment (``ResolveFenceposts``; 25%/25% defaults).

    Recreate has neither; a rolling update with both zero may lose one pod, as upstream."""
    if not is_rolling(d):
        return 0, 0
    desired = desired_replicas(d)
    rolling = ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    surge = scaled_value(rolling.get("maxSurge", "25%"), desired, round_up=True)
    unavailable = scaled_value(rolling.get("maxUnavailable", "25%"), desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_unavailable(d: Mapping[str, Any]) -> int:
    """``MaxUnavailable``: how many desired pods may be unavailable while still Available."""
    desired = desired_replicas(d)
    if not is_rolling(d) or desired == 0:
        return 0
    return min(fenceposts(d)[1], desired)


def progress_deadline(d: Mapping[str, Any]) -> int | None:
    """spec.progressDeadlineSeconds (600 by default); None when it is "never" (MaxInt32)."""
    value = (d.get("spec") or {}).get("progressDeadlineSeconds", DEFAULT_PROGRESS_DEADLINE)
    if value is None or int(value) >= 2**31 - 1:
        return None
    return int(value)


def find_condition(conditions: Iterable[Obj], type_: str) -> Obj | None:
    """The condition of ``type_`` among ``conditions``, if any."""
    for cond in conditions:
        if cond.get("type") == type_:
            return cond
    return None


def new_condition(type_: str, status: str, reason: str, message: str, now: float) -> Obj:
    """A DeploymentCondition updated and transitioned at ``now``."""
    stamp = rfc3339(now)
    return {
        "type": type_,
        "status": status,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def set_condition(conditions: list[Obj], cond: Obj) -> list[Obj]:
    """``SetDeploymentCondition``: no change when status and reason are the same; otherwise the
    condition is replaced (moved to the end), keeping lastTransitionTime if status is unchanged."""
    current = find_condition(conditions, cond["type"])
    if (
        current is not None
        and current.get("status") == cond["status"]
        and current.get("reason") == cond["reason"]
    ):
        return conditions
    if current is not None and current.get("status") == cond["status"]:
        cond = {**cond, "lastTransitionTime": current.get("lastTransitionTime")}
    return [c for c in conditions if c.get("type") != cond["type"]] + [cond]


def remove_condition(conditions: list[Obj], type_: str) -> list[Obj]:
    """``conditions`` without the one of ``type_``."""
    return [c for c in conditions if c.get("type") != type_]


def paused_conditions(d: Mapping[str, Any], now: float) -> list[Obj]:
    """``checkPausedConditions``: Progressing becomes Unknown/DeploymentPaused while paused and
    Unknown/DeploymentResumed when resumed (only with a progress deadline)."""
    conditions = [dict(c) for c in (d.get("status") or {}).get("conditions") or []]
    if progress_deadline(d) is None:
        return conditions
    paused = bool((d.get("spec") or {}).get("paused"))
    current = find_condition(conditions, PROGRESSING)
    reason = current.get("reason") if current else None
    if paused and reason != PAUSED:
        return set_condition(
            conditions, new_condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused", now)
        )
    if not paused and reason == PAUSED:
        return set_condition(
            conditions, new_condition(PROGRESSING, "Unknown", RESUMED, "Deployment is resumed", now)
        )
    return conditions


def _counts(d: Mapping[str, Any], all_rs: list[Obj], new_rs: Obj | None) -> dict[str, int]:
    total = sum(desired_replicas(rs) for rs in all_rs)
    available = sum(count(rs, "availableReplicas") for rs in all_rs)
    return {
        "observedGeneration": int(meta(d).get("generation") or 0),
        "replicas": sum(count(rs, "replicas") for rs in all_rs),
        "updatedReplicas": count(new_rs, "replicas"),
        "readyReplicas": sum(count(rs, "readyReplicas") for rs in all_rs),
        "availableReplicas": available,
        "unavailableReplicas": max(0, total - available),
    }


def _complete(d: Mapping[str, Any], counts: Mapping[str, int]) -> bool:
    """``DeploymentComplete``: every desired replica updated and available, nothing old left."""
    desired = desired_replicas(d)
    return (
        counts["updatedReplicas"] == desired
        and counts["replicas"] == desired
        and counts["availableReplicas"] == desired
        and counts["observedGeneration"] >= int(meta(d).get("generation") or 0)
    )


def _progressing(old: Mapping[str, Any], counts: Mapping[str, int]) -> bool:
    """``DeploymentProgressing``: more updated/ready/available pods, or fewer old ones."""
    old_updated = int(old.get("updatedReplicas") or 0)
    old_old = int(old.get("replicas") or 0) - old_updated
    new_old = counts["replicas"] - counts["updatedReplicas"]
    return (
        counts["updatedReplicas"] > old_updated
        or new_old < old_old
        or counts["readyReplicas"] > int(old.get("readyReplicas") or 0)
        or counts["availableReplicas"] > int(old.get("availableReplicas") or 0)
    )


def _timed_out(conditions: list[Obj], deadline: int, now: float) -> bool:
    current = find_condition(conditions, PROGRESSING)
    if current is None or current.get("reason") == NEW_RS_AVAILABLE:
        return False
    if current.get("reason") == TIMED_OUT:
        return True
    since = parse_rfc3339(current.get("lastUpdateTime"))
    return since is not None and since + deadline < now


def deployment_status(
    d: Mapping[str, Any],
    all_rs: list[Obj],
    new_rs: Obj | None,
    *,
    now: float,
    conditions: list[Obj] | None = None,
    check_progress: bool = True,
) -> tuple[Obj, float | None]:
    """The status the deployment controller would write, and when to look again (seconds) to
    catch a progress deadline passing (None: no need).

    ``conditions`` are the Deployment's conditions as this sync already changed them (a new
    ReplicaSet created, paused/resumed); by default those of ``d``. ``check_progress`` false
    is ``syncDeploymentStatus`` (paused or deleted: counts and Available only); true is
    ``syncRolloutStatus``.
    """
    old = d.get("status") or {}
    conds = [dict(c) for c in (old.get("conditions") or [])] if conditions is None else list(conditions)
    counts = _counts(d, all_rs, new_rs)
    status: Obj = {k: v for k, v in counts.items() if v}
    if "collisionCount" in old:
        status["collisionCount"] = old["collisionCount"]

    if counts["availableReplicas"] >= desired_replicas(d) - max_unavailable(d):
        avail = new_condition(AVAILABLE, "True", MIN_AVAILABLE, "Deployment has minimum availability.", now)
    else:
        avail = new_condition(
            AVAILABLE, "False", MIN_UNAVAILABLE, "Deployment does not have minimum availability.", now
        )
    conds = set_condition(conds, avail)

    requeue: float | None = None
    deadline = progress_deadline(d)
    if check_progress:
        if deadline is None:
            conds = remove_condition(conds, PROGRESSING)
        else:
            current = find_condition(conds, PROGRESSING)
            done_before = (
                counts["replicas"] == counts["updatedReplicas"]
                and current is not None
                and current.get("reason") == NEW_RS_AVAILABLE
            )
            what = f'ReplicaSet "{meta(new_rs)["name"]}"' if new_rs else f'Deployment "{meta(d).get("name")}"'
            if not done_before:
                if _complete(d, counts):
                    conds = set_condition(
                        conds,
                        new_condition(
                            PROGRESSING, "True", NEW_RS_AVAILABLE, f"{what} has successfully progressed.", now
                        ),
                    )
                elif _progressing(old, counts):
                    cond = new_condition(PROGRESSING, "True", RS_UPDATED, f"{what} is progressing.", now)
                    if current is not None and current.get("status") == "True":
                        cond["lastTransitionTime"] = current.get("lastTransitionTime")
                    conds = [*remove_condition(conds, PROGRESSING), cond]
                elif _timed_out(conds, deadline, now):
                    conds = set_condition(
                        conds,
                        new_condition(
                            PROGRESSING, "False", TIMED_OUT, f"{what} has timed out progressing.", now
                        ),
                    )
            # requeueStuckDeployment: look again when the deadline would pass.
            current = find_condition(conds, PROGRESSING)
            if (
                current is not None
                and current.get("reason") not in (NEW_RS_AVAILABLE, TIMED_OUT)
                and not _complete(d, counts)
            ):
                since = parse_rfc3339(current.get("lastUpdateTime"))
                if since is not None:
                    requeue = max(0.0, since + deadline - now) + 1.0
    if conds:
        status["conditions"] = conds
    return status, requeue
