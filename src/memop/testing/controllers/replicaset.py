"""The ReplicaSet controller, simulated: each ReplicaSet keeps ``spec.replicas`` pods.

Pods are created from the template (``generateName: <rs>-``, the template's labels, which for
a Deployment's ReplicaSet include ``pod-template-hash``, and a controller ownerReference) and
deleted in upstream's order when there are too many: unscheduled before scheduled, Pending
before Unknown before Running, not ready before ready, ready for less time before ready for
longer, more restarts first, newest first (``ActivePodsWithRanks`` without the co-location
rank). Pods being deleted, Succeeded or Failed do not count.

At most :data:`BURST` pods are created or deleted per sync (upstream's ``burstReplicas``); the
rest follow in the next sync, so one big scale never holds the event loop for long. The status
(replicas, fullyLabeledReplicas, readyReplicas, availableReplicas, observedGeneration) is
written through the status subresource only when it changed. With ``minReadySeconds`` the
ReplicaSet is synced again when a ready pod is due to become available.

There is no adoption of orphaned pods matching the selector and no release of pods that stop
matching it: the simulation's pods are created by this controller and keep their labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.runtime.util.clock import Clock
from memop.testing.apiserver.store import Store, StoreEvent
from memop.testing.controllers.cache import ObjectCache
from memop.testing.controllers.common import (
    Obj,
    WorkLoop,
    being_deleted,
    condition,
    delete_if_present,
    is_controlled_by,
    meta,
    new_controller_ref,
    owner_key,
    parse_rfc3339,
    status_body,
)
from memop.testing.controllers.rollout import desired_replicas

Key = tuple[str, str]  # (namespace, name)

BURST = 500
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def is_active(pod: Mapping[str, Any]) -> bool:
    """Counted by its ReplicaSet: not being deleted, not Succeeded or Failed."""
    phase = (pod.get("status") or {}).get("phase")
    return not being_deleted(pod) and phase not in ("Succeeded", "Failed")


def is_ready(pod: Mapping[str, Any]) -> bool:
    cond = condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


def ready_since(pod: Mapping[str, Any]) -> float | None:
    """When the pod last became ready (epoch seconds), or None if it is not ready."""
    cond = condition(pod, "Ready")
    if cond is None or cond.get("status") != "True":
        return None
    return parse_rfc3339(cond.get("lastTransitionTime"))


def deletion_order(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """Sort key: the pods to delete first when scaling down sort first."""
    spec, status, m = pod.get("spec") or {}, pod.get("status") or {}, meta(pod)
    since = ready_since(pod)
    restarts = sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or [])
    created = parse_rfc3339(m.get("creationTimestamp")) or 0.0
    return (
        1 if spec.get("nodeName") else 0,
        _PHASE_RANK.get(status.get("phase") or "Pending", 0),
        1 if since is not None else 0,
        -(since or 0.0),
        -restarts,
        -created,
        # Same second: the later name (usually the later create) goes first, for determinism.
        tuple(-ord(c) for c in m.get("name") or ""),
    )


class ReplicaSetController:
    """Keeps every ReplicaSet's pods at its replica count (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock) -> None:
        self._store = store
        self._cache = cache
        self._clock = clock
        self._replicasets = store.resource("apps", "v1", "replicasets")
        self._pods = store.resource("", "v1", "pods")
        self.loop: WorkLoop[Key] = WorkLoop("replicaset", self._sync, clock=clock, workers=1)

    def on_event(self, event: StoreEvent) -> None:
        """Queue the ReplicaSet a change concerns (itself, or the controller of a pod)."""
        key = owner_key(event, ("apps", "ReplicaSet"), ("", "Pod"))
        if key is not None:
            self.loop.add(key)

    def _sync(self, key: Key) -> float | None:
        ns, name = key
        rs = self._cache.get(self._replicasets, ns, name)
        if rs is None:
            return None
        uid = meta(rs)["uid"]
        active = [
            pod
            for rtype, pod in self._cache.dependents(uid)
            if rtype.group == "" and rtype.kind == "Pod" and is_controlled_by(pod, uid) and is_active(pod)
        ]
        more = False
        if not being_deleted(rs):
            diff = len(active) - desired_replicas(rs)
            if diff < 0:
                active.extend(self._create_pods(rs, min(-diff, BURST)))
                more = -diff > BURST
            elif diff > 0:
                doomed = sorted(active, key=deletion_order)[: min(diff, BURST)]
                self._delete_pods(doomed)
                gone = {id(p) for p in doomed}
                active = [p for p in active if id(p) not in gone]
                more = diff > BURST
        status, wake = self._status(rs, active)
        if status != (rs.get("status") or {}):
            self._store.update(self._replicasets, ns, name, status_body(rs, status), subresource="status")
        if more:
            return 0.0
        return wake

    def _create_pods(self, rs: Obj, n: int) -> list[Obj]:
        m = meta(rs)
        template = (rs.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        created = []
        for _ in range(n):
            pod_meta: dict[str, Any] = {
                "generateName": f"{m['name']}-",
                "namespace": m["namespace"],
                "ownerReferences": [new_controller_ref(rs)],
            }
            for field in ("labels", "annotations", "finalizers"):
                if tmeta.get(field):
                    pod_meta[field] = tmeta[field]
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": pod_meta,
                "spec": template.get("spec") or {},
            }
            # The store copies what it is given: the template may be shared with the cache.
            created.append(self._store.create(self._pods, m["namespace"], body))
            self.loop.record_event()  # SuccessfulCreate
        return created

    def _delete_pods(self, pods: list[Obj]) -> None:
        for pod in pods:
            if delete_if_present(self._store, self._pods, pod):
                self.loop.record_event()  # SuccessfulDelete

    def _status(self, rs: Obj, active: list[Obj]) -> tuple[Obj, float | None]:
        """The ReplicaSet status for these active pods, and when a ready pod becomes available."""
        spec = rs.get("spec") or {}
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self._clock.time()
        labelled = ready = available = 0
        wake: float | None = None
        for pod in active:
            labels = meta(pod).get("labels") or {}
            if all(labels.get(k) == v for k, v in template_labels.items()):
                labelled += 1
            since = ready_since(pod)
            if since is None and not is_ready(pod):
                continue
            ready += 1
            if min_ready == 0 or since is None or since + min_ready <= now:
                available += 1
            else:
                due = since + min_ready - now
                wake = due if wake is None else min(wake, due)
        status: Obj = {"replicas": len(active)}
        for field, value in (
            ("fullyLabeledReplicas", labelled),
            ("readyReplicas", ready),
            ("availableReplicas", available),
            ("observedGeneration", int(meta(rs).get("generation") or 0)),
        ):
            if value:
                status[field] = value
        conditions = (rs.get("status") or {}).get("conditions")
        if conditions:
            status["conditions"] = conditions
        return status, wake
