"""Whether an object has reached the state its spec asks for, from its own status: the rules of
kstatus (sigs.k8s.io/cli-utils ``pkg/kstatus/status``), which ``kubectl apply --wait``-style
tools, Flux and Config Sync use.

The generic rules come first and decide alone when they can:

- a ``metadata.deletionTimestamp``: Terminating;
- ``status.observedGeneration`` present and not ``metadata.generation``: InProgress (its
  controller has not seen the latest spec);
- a ``Reconciling`` condition True: InProgress; a ``Stalled`` condition True: Failed.

Then the kind's own rule: Deployment, StatefulSet, DaemonSet and ReplicaSet compare their
replica counts (and a Deployment's ``ProgressDeadlineExceeded`` is Failed); a Job is Current
once started or Complete, Failed when its ``Failed`` condition is True; a Pod is Current when
Running and Ready or finished, Failed when a container crash-loops; a PersistentVolumeClaim
when Bound; a LoadBalancer Service once it has an ingress address; a Namespace when Active; a
CustomResourceDefinition when Established. ConfigMaps, Secrets, PodDisruptionBudgets and
CronJobs are always Current. Any other kind: its ``Ready`` condition when it has one (kstatus
leaves that out; most controllers write one), else Current.

Everything here is pure: an object in, a :class:`Readiness` out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

CURRENT = "Current"
IN_PROGRESS = "InProgress"
FAILED = "Failed"
TERMINATING = "Terminating"


@dataclass(frozen=True)
class Readiness:
    """An object's state: ``status`` is one of :data:`CURRENT`, :data:`IN_PROGRESS`,
    :data:`FAILED`, :data:`TERMINATING`; ``reason`` a CamelCase word; ``message`` for people."""

    status: str
    reason: str
    message: str

    @property
    def current(self) -> bool:
        return self.status == CURRENT


# A kind's rule: the object (with its status) -> its readiness. A rule may also answer a bool
# (True: Current, False: InProgress), for a user's rule that only says ready or not.
ReadinessRule = Callable[[Mapping[str, Any]], "Readiness | bool"]


def _current(message: str) -> Readiness:
    return Readiness(CURRENT, "Current", message)


def _progress(reason: str, message: str) -> Readiness:
    return Readiness(IN_PROGRESS, reason, message)


def _failed(reason: str, message: str) -> Readiness:
    return Readiness(FAILED, reason, message)


def _field(obj: Mapping[str, Any], *path: str) -> Any:
    value: Any = obj
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _int(obj: Mapping[str, Any], *path: str, default: int = 0) -> int:
    value = _field(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _str(obj: Mapping[str, Any], *path: str, default: str = "") -> str:
    value = _field(obj, *path)
    return value if isinstance(value, str) else default


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = _field(obj, "status", "conditions")
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def _condition(obj: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    return next((c for c in _conditions(obj) if c.get("type") == condition_type), None)


def _is_true(obj: Mapping[str, Any], condition_type: str) -> bool:
    found = _condition(obj, condition_type)
    return found is not None and found.get("status") == "True"


def _generic(obj: Mapping[str, Any]) -> Readiness | None:
    kind = _str(obj, "kind", default="object")
    if _field(obj, "metadata", "deletionTimestamp"):
        return Readiness(TERMINATING, "Terminating", "being deleted")
    generation = _field(obj, "metadata", "generation")
    observed = _field(obj, "status", "observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed != generation:
        return _progress(
            "LatestGenerationNotObserved",
            f"{kind} generation is {generation}, but latest observed generation is {observed}",
        )
    for condition in _conditions(obj):
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Reconciling":
            return _progress(
                str(condition.get("reason") or "Reconciling"), str(condition.get("message") or "")
            )
        if condition.get("type") == "Stalled":
            return _failed(str(condition.get("reason") or "Stalled"), str(condition.get("message") or ""))
    return None


def _first(*checks: tuple[bool, str, str]) -> Readiness | None:
    """InProgress with the reason and message of the first (failing, reason, message) that
    fails, in kstatus's order; None when none does."""
    for failing, reason, message in checks:
        if failing:
            return _progress(reason, message)
    return None


def _deployment(obj: Mapping[str, Any]) -> Readiness:
    # No progressDeadlineSeconds (or the "never" value): the controller sets no Progressing.
    progressing = _int(obj, "spec", "progressDeadlineSeconds", default=2**31 - 1) == 2**31 - 1
    for condition in _conditions(obj):
        if condition.get("type") == "Progressing":
            if condition.get("reason") == "ProgressDeadlineExceeded":
                return _failed("ProgressDeadlineExceeded", "Progress deadline exceeded")
            if condition.get("status") == "True" and condition.get("reason") == "NewReplicaSetAvailable":
                progressing = True
    spec = _int(obj, "spec", "replicas", default=1)
    replicas = _int(obj, "status", "replicas")
    updated = _int(obj, "status", "updatedReplicas")
    ready = _int(obj, "status", "readyReplicas")
    available = _int(obj, "status", "availableReplicas")
    behind = _first(
        (spec > replicas, "LessReplicas", f"Replicas: {replicas}/{spec}"),
        (spec > updated, "LessUpdated", f"Updated: {updated}/{spec}"),
        (replicas > spec, "ExtraPods", f"Pending termination: {replicas - spec}"),
        (updated > available, "LessAvailable", f"Available: {available}/{updated}"),
        (spec > ready, "LessReady", f"Ready: {ready}/{spec}"),
        (not progressing, "ReplicaSetNotAvailable", "ReplicaSet not Available"),
        (not _is_true(obj, "Available"), "DeploymentNotAvailable", "Deployment not Available"),
    )
    return behind or _current(f"Deployment is available. Replicas: {replicas}")


def _statefulset(obj: Mapping[str, Any]) -> Readiness:
    if _str(obj, "spec", "updateStrategy", "type") == "OnDelete":
        return _current("StatefulSet is using the ondelete update strategy")
    spec = _int(obj, "spec", "replicas", default=1)
    replicas = _int(obj, "status", "replicas")
    ready = _int(obj, "status", "readyReplicas")
    updated = _int(obj, "status", "updatedReplicas")
    behind = _first(
        (spec > replicas, "LessReplicas", f"Replicas: {replicas}/{spec}"),
        (spec > ready, "LessReady", f"Ready: {ready}/{spec}"),
        (replicas > spec, "ExtraPods", f"Pending termination: {replicas - spec}"),
    )
    if behind is not None:
        return behind
    partition = _int(obj, "spec", "updateStrategy", "rollingUpdate", "partition", default=-1)
    if partition != -1:
        if updated < spec - partition:
            return _progress("PartitionRollout", f"updated: {updated}/{spec - partition}")
        return _current(f"Partition rollout complete. updated: {updated}")
    current = _int(obj, "status", "currentReplicas")
    behind = _first(
        (spec > current, "LessCurrent", f"current: {current}/{spec}"),
        (
            _str(obj, "status", "currentRevision") != _str(obj, "status", "updateRevision"),
            "RevisionMismatch",
            "Waiting for updated revision to match current",
        ),
    )
    return behind or _current(f"All replicas scheduled as expected. Replicas: {replicas}")


def _daemonset(obj: Mapping[str, Any]) -> Readiness:
    kind = _str(obj, "kind", default="DaemonSet")
    desired = _int(obj, "status", "desiredNumberScheduled", default=-1)
    current = _int(obj, "status", "currentNumberScheduled")
    updated = _int(obj, "status", "updatedNumberScheduled")
    available = _int(obj, "status", "numberAvailable")
    ready = _int(obj, "status", "numberReady")
    behind = _first(
        (
            not isinstance(_field(obj, "metadata", "generation"), int),
            "NoGeneration",
            f"{kind} metadata.generation not found",
        ),
        (
            not isinstance(_field(obj, "status", "observedGeneration"), int),
            "NoObservedGeneration",
            f"{kind} status.observedGeneration not found",
        ),
        (desired == -1, "NoDesiredNumber", "Missing .status.desiredNumberScheduled"),
        (desired > current, "LessCurrent", f"Current: {current}/{desired}"),
        (desired > updated, "LessUpdated", f"Updated: {updated}/{desired}"),
        (desired > available, "LessAvailable", f"Available: {available}/{desired}"),
        (desired > ready, "LessReady", f"Ready: {ready}/{desired}"),
    )
    return behind or _current(f"All replicas scheduled as expected. Replicas: {desired}")


def _replicaset(obj: Mapping[str, Any]) -> Readiness:
    spec = _int(obj, "spec", "replicas", default=1)
    replicas = _int(obj, "status", "replicas")
    labelled = _int(obj, "status", "fullyLabeledReplicas")
    available = _int(obj, "status", "availableReplicas")
    ready = _int(obj, "status", "readyReplicas")
    behind = _first(
        (_is_true(obj, "ReplicaFailure"), "ReplicaFailure", "Replica Failure condition. Check Pods"),
        (spec > labelled, "LessLabelled", f"Labelled: {labelled}/{spec}"),
        (spec > available, "LessAvailable", f"Available: {available}/{spec}"),
        (spec > ready, "LessReady", f"Ready: {ready}/{spec}"),
        (replicas > spec, "ExtraPods", f"Pending termination: {replicas - spec}"),
    )
    return behind or _current(f"ReplicaSet is available. Replicas: {replicas}")


def _job(obj: Mapping[str, Any]) -> Readiness:
    parallelism = _int(obj, "spec", "parallelism", default=1)
    completions = _int(obj, "spec", "completions", default=parallelism)
    succeeded, failed = _int(obj, "status", "succeeded"), _int(obj, "status", "failed")
    for condition in _conditions(obj):
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return _current(f"Job Completed. succeeded: {succeeded}/{completions}")
        if condition.get("type") == "Failed":
            return _failed("JobFailed", f"Job Failed. failed: {failed}/{completions}")
        if condition.get("type") == "Suspended":
            return _current("Job is suspended")
    if not _str(obj, "status", "startTime"):
        return _progress("JobNotStarted", "Job not started")
    active = _int(obj, "status", "active")
    return _current(f"Job in progress. success:{succeeded}, active: {active}, failed: {failed}")


def _pod(obj: Mapping[str, Any]) -> Readiness:
    phase = _str(obj, "status", "phase")
    if phase == "Succeeded":
        return _current("Pod has completed successfully")
    if phase == "Failed":
        return _current("Pod has completed, but not successfully")
    if phase == "Running":
        if _is_true(obj, "Ready"):
            return _current("Pod is Ready")
        statuses = _field(obj, "status", "containerStatuses")
        looping = [
            str(s.get("name"))
            for s in (statuses if isinstance(statuses, list) else ())
            if isinstance(s, Mapping) and _field(s, "state", "waiting", "reason") == "CrashLoopBackOff"
        ]
        if looping:
            return _failed("ContainerCrashLooping", f"Containers in CrashLoop state: {','.join(looping)}")
        return _progress("PodRunningNotReady", "Pod is running but is not Ready")
    if phase == "Pending":
        scheduled = _condition(obj, "PodScheduled")
        if (
            scheduled is not None
            and scheduled.get("status") == "False"
            and scheduled.get("reason") == "Unschedulable"
        ):
            # kstatus waits 15 s after creation before calling it Failed; without a clock here,
            # an unschedulable pod stays InProgress, with the scheduler's message.
            return _progress("PodNotScheduled", str(scheduled.get("message") or "Pod has not been scheduled"))
        return _progress("PodPending", "Pod is in the Pending phase")
    return _progress("PodNotObserved", "Pod phase not available")


def _pvc(obj: Mapping[str, Any]) -> Readiness:
    phase = _str(obj, "status", "phase", default="unknown")
    if phase != "Bound":
        return _progress("NotBound", f"PVC is not Bound. phase: {phase}")
    return _current("PVC is Bound")


def _service(obj: Mapping[str, Any]) -> Readiness:
    if _str(obj, "spec", "type", default="ClusterIP") == "LoadBalancer":
        ingress = _field(obj, "status", "loadBalancer", "ingress")
        if not (isinstance(ingress, list) and ingress):
            return _progress("NoIngress", "LoadBalancer Service has no ingress address yet")
    return _current("Service is ready")


def _namespace(obj: Mapping[str, Any]) -> Readiness:
    phase = _str(obj, "status", "phase")
    if phase == "Active":
        return _current("Namespace is Active")
    return _progress("NamespaceNotActive", f"Namespace phase: {phase or 'unknown'}")


def _crd(obj: Mapping[str, Any]) -> Readiness:
    for condition in _conditions(obj):
        if condition.get("type") == "NamesAccepted" and condition.get("status") == "False":
            return _failed(
                str(condition.get("reason") or "NamesNotAccepted"), str(condition.get("message") or "")
            )
        if condition.get("type") == "Established":
            if condition.get("status") == "False" and condition.get("reason") != "Installing":
                return _failed(
                    str(condition.get("reason") or "NotEstablished"), str(condition.get("message") or "")
                )
            if condition.get("status") == "True":
                return _current("CRD is established")
    return _progress("Installing", "Install in progress")


def _always(obj: Mapping[str, Any]) -> Readiness:
    return _current("Resource is always ready")


def _ready_condition(obj: Mapping[str, Any]) -> Readiness:
    ready = _condition(obj, "Ready")
    if ready is None or ready.get("status") == "True":
        return _current("Resource is current")
    return _progress(str(ready.get("reason") or "NotReady"), str(ready.get("message") or "Ready is not True"))


# By "group/Kind" ("Kind" for the core group), as kstatus keys its rules.
BUILTIN_RULES: dict[str, Callable[[Mapping[str, Any]], Readiness]] = {
    "Service": _service,
    "Pod": _pod,
    "Secret": _always,
    "ConfigMap": _always,
    "Namespace": _namespace,
    "PersistentVolumeClaim": _pvc,
    "apps/StatefulSet": _statefulset,
    "apps/DaemonSet": _daemonset,
    "apps/Deployment": _deployment,
    "apps/ReplicaSet": _replicaset,
    "policy/PodDisruptionBudget": _always,
    "batch/CronJob": _always,
    "batch/Job": _job,
    "apiextensions.k8s.io/CustomResourceDefinition": _crd,
}


def kind_key(group: str, kind: str) -> str:
    """How rules are keyed: ``"apps/Deployment"``, or ``"Service"`` for the core group."""
    return f"{group}/{kind}" if group else kind


def readiness(
    obj: Mapping[str, Any], group: str, kind: str, rules: Mapping[str, ReadinessRule] | None = None
) -> Readiness:
    """The readiness of ``obj``, an object of ``kind`` in ``group``: the generic rules, then the
    rule ``rules`` gives for its kind (a user's), else the built-in one (see the module
    docstring). A user's rule replaces the kind's rule, not the generic ones: a child being
    deleted or not yet observed by its controller is never Current."""
    found = _generic(obj)
    if found is not None:
        return found
    key = kind_key(group, kind)
    custom = (rules or {}).get(key)
    if custom is not None:
        answer = custom(obj)
        if isinstance(answer, Readiness):
            return answer
        return _current(f"{kind} is ready") if answer else _progress("NotReady", f"{kind} is not ready yet")
    return BUILTIN_RULES.get(key, _ready_condition)(obj)
