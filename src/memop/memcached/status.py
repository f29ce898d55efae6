"""A Memcached's status, computed from what the cache holds: its Deployment and its pods.

Pure: the same inputs give the same status, and recomputing an unchanged situation gives a
status equal to the stored one (``lastTransitionTime`` moves only when a condition's status
flips), so :func:`status_changed` is False and the reconciler writes nothing.

Conditions (all with CamelCase reasons, ``observedGeneration`` = metadata.generation):
- Available: True when the Deployment reports at least ``size`` available replicas
  (ReplicasAvailable); with size 0 nothing is wanted, so it is True (ScaledToZero) whatever runs;
  otherwise False (ReplicasUnavailable, or DeploymentMissing before the Deployment exists).
- Progressing: True while the Deployment has not caught up with the desired spec: it does not
  exist yet (DeploymentMissing), its spec.replicas is not ``size`` yet (Scaling), its controller
  has not observed its latest generation, or not all replicas are updated / old ones are still
  there (RollingOut, or ProgressDeadlineExceeded when the Deployment says so). False
  (DeploymentUpToDate) once caught up. Availability is Available's business, not this one's.
- Degraded: True while memop cannot do its job: Finalizing (the Memcached is being deleted;
  with the caller's ``error`` appended when the finalizer cannot be removed), InvalidSpec,
  ReconcileError, with the caller's message; else False (AsExpected).

When the caller passes no Deployment together with ``invalid``, ``error`` or ``finalizing``, it
did not look at the Deployment: readyReplicas, Available and Progressing then keep their
previous values (Unknown, DeploymentNotObserved, if there were none) instead of claiming the
Deployment is gone.

No message names the Memcached or its Deployment (which bears the Memcached's name): a
condition is then equal across the Memcacheds in the same state in the same second, and the
cache holds it once (``CACHE_SHARED``), where a condition naming its object costs a copy and a
table entry each, some 700 bytes a Memcached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memop.memcached.api import FINALIZER, MemcachedSpec
from memop.runtime.api.conditions import FALSE, TRUE, UNKNOWN, find_condition, set_condition
from memop.runtime.cache.store import dig
from memop.runtime.controller.status import status_changed

__all__ = ["compute_status", "nodes", "status_changed"]

AVAILABLE = "Available"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"

# Pods that hold or will hold a cache: the ones worth listing as nodes.
_LIVE_PHASES = ("Pending", "Running")


def _count(obj: Any, *path: str) -> int:
    value = dig(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def nodes(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Sorted names of the pods that are not terminating and are Pending or Running. A pod
    without a phase yet counts as Pending (the API server creates every pod Pending)."""
    names = {
        dig(pod, "metadata", "name")
        for pod in pods
        if not dig(pod, "metadata", "deletionTimestamp")
        and (dig(pod, "status", "phase") or "Pending") in _LIVE_PHASES
    }
    return sorted(name for name in names if isinstance(name, str))


def _available(size: int, deployment: Mapping[str, Any] | None) -> tuple[str, str, str]:
    if size == 0:
        return TRUE, "ScaledToZero", "size is 0: no memcached pods are wanted"
    if deployment is None:
        return FALSE, "DeploymentMissing", "the Deployment does not exist yet"
    available = _count(deployment, "status", "availableReplicas")
    if available >= size:
        return TRUE, "ReplicasAvailable", f"{available}/{size} replicas available"
    return FALSE, "ReplicasUnavailable", f"{available}/{size} replicas available"


def _progressing(size: int, deployment: Mapping[str, Any] | None) -> tuple[str, str, str]:
    if deployment is None:
        return TRUE, "DeploymentMissing", "waiting for the Deployment to be created"
    replicas = dig(deployment, "spec", "replicas")
    replicas = 1 if replicas is None else replicas
    if replicas != size:
        return TRUE, "Scaling", f"the Deployment has {replicas} replicas, {size} wanted"
    generation = _count(deployment, "metadata", "generation")
    observed = _count(deployment, "status", "observedGeneration")
    if observed < generation:
        return (
            TRUE,
            "RollingOut",
            f"the Deployment's generation {generation} is not yet observed by its controller",
        )
    updated = _count(deployment, "status", "updatedReplicas")
    total = _count(deployment, "status", "replicas")
    if updated < replicas:
        message = f"{updated} of {replicas} replicas updated"
    elif total > updated:
        message = f"{total - updated} old replicas pending termination"
    else:
        return FALSE, "DeploymentUpToDate", f"the Deployment is up to date: {updated} replicas updated"
    stuck = find_condition(dig(deployment, "status", "conditions"), "Progressing")
    if stuck is not None and stuck.get("reason") == "ProgressDeadlineExceeded":
        detail = stuck.get("message")
        return TRUE, "ProgressDeadlineExceeded", f"{message}: {detail}" if detail else message
    return TRUE, "RollingOut", message


def _degraded(invalid: str | None, finalizing: bool, error: str | None) -> tuple[str, str, str]:
    if finalizing:
        message = f"the Memcached is being deleted; memop runs its finalizer {FINALIZER}"
        return TRUE, "Finalizing", f"{message}: {error}" if error is not None else message
    if invalid is not None:
        return TRUE, "InvalidSpec", invalid
    if error is not None:
        return TRUE, "ReconcileError", error
    return FALSE, "AsExpected", ""


def compute_status(  # noqa: PLR0917 - the reconciler's established call shape
    memcached: Mapping[str, Any],
    spec: MemcachedSpec | None,
    deployment: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    now: str,
    invalid: str | None = None,
    finalizing: bool = False,
    error: str | None = None,
) -> dict[str, Any]:
    """The whole status of ``memcached`` (see the module docstring for each field).

    ``spec`` is the parsed spec, or None when it is invalid (pass the message as ``invalid``)
    or not parsed (``finalizing``); the size then comes from the Deployment. ``deployment`` is
    the Deployment as cached, None when it does not exist (or was not looked at, see the module
    docstring). ``pods`` are the Memcached's pods. ``now`` (RFC 3339) stamps conditions that flip.
    Existing conditions in ``memcached["status"]`` keep their transition times; conditions of
    other types are kept.
    """
    generation = _count(memcached, "metadata", "generation")
    old = memcached.get("status")
    old = old if isinstance(old, Mapping) else {}
    conditions = old.get("conditions") if isinstance(old.get("conditions"), list) else []

    size = spec.size if spec is not None else None
    if size is None and deployment is not None:
        replicas = dig(deployment, "spec", "replicas")
        size = 1 if replicas is None else replicas
    looked = deployment is not None or (invalid is None and error is None and not finalizing)
    if size is not None and looked:
        ready = _count(deployment, "status", "readyReplicas")
        for condition_type, (status, reason, message) in (
            (AVAILABLE, _available(size, deployment)),
            (PROGRESSING, _progressing(size, deployment)),
        ):
            conditions = set_condition(conditions, condition_type, status, reason, message, generation, now)
    else:
        ready = _count(old, "readyReplicas")
        for condition_type in (AVAILABLE, PROGRESSING):
            if find_condition(conditions, condition_type) is None:
                conditions = set_condition(
                    conditions,
                    condition_type,
                    UNKNOWN,
                    "DeploymentNotObserved",
                    "the Deployment has not been observed yet",
                    generation,
                    now,
                )
    status, reason, message = _degraded(invalid, finalizing, error)
    conditions = set_condition(conditions, DEGRADED, status, reason, message, generation, now)
    return {
        "nodes": nodes(pods),
        "readyReplicas": ready,
        "observedGeneration": generation,
        "conditions": conditions,
    }
