"""The Job controller, simulated: a Job's pods run to completion and the Job completes.

A Job that is not suspended and not finished gets pods from its template (``generateName:
<job>-``, the template's labels, which hold the generated ``batch.kubernetes.io/job-name`` and
``controller-uid`` ones, a controller ownerReference) until ``parallelism`` are active or enough
are active and succeeded for ``completions``. The simulated kubelet lets a Job's pods succeed
(:mod:`memop.testing.controllers.kubelet`). The status follows, through the status subresource:
``startTime`` once it starts, ``active``/``ready``/``succeeded``/``failed``/``terminating``,
and, once ``succeeded`` reaches ``completions`` (or one pod succeeded when ``completions`` is
unset), the ``SuccessCriteriaMet`` and ``Complete`` conditions with reason CompletionsReached and
a ``completionTime``, as kube-controller-manager v1.36 writes them. A failed pod counts in
``failed`` and is replaced until ``backoffLimit`` failures, then the Job fails
(``FailureTarget`` and ``Failed``, BackoffLimitExceeded). No indexed completions, pod failure
policies or active deadlines.
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
    is_controlled_by,
    meta,
    new_controller_ref,
    owner_key,
    rfc3339,
    status_body,
)

Key = tuple[str, str]  # (namespace, name)

COMPLETED = "Reached expected number of succeeded pods"
BACKOFF_EXCEEDED = "Job has reached the specified backoff limit"


def job_finished(job: Mapping[str, Any]) -> str | None:
    """ "Complete" or "Failed" when the Job has that condition True, else None."""
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def _condition(kind: str, reason: str, message: str, stamp: str) -> Obj:
    return {
        "type": kind,
        "status": "True",
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


class JobController:
    """Runs every Job's pods and writes its status (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock) -> None:
        self._store = store
        self._cache = cache
        self._clock = clock
        self._jobs = store.resource("batch", "v1", "jobs")
        self._pods = store.resource("", "v1", "pods")
        self.loop: WorkLoop[Key] = WorkLoop("job", self._sync, clock=clock, workers=1)

    def on_event(self, event: StoreEvent) -> None:
        key = owner_key(event, ("batch", "Job"), ("", "Pod"))
        if key is not None:
            self.loop.add(key)

    def _sync(self, key: Key) -> float | None:
        ns, name = key
        job = self._cache.get(self._jobs, ns, name)
        if job is None or being_deleted(job) or job_finished(job):
            return None
        spec = job.get("spec") or {}
        uid = meta(job)["uid"]
        pods = [
            pod
            for rtype, pod in self._cache.dependents(uid)
            if rtype.group == "" and rtype.kind == "Pod" and is_controlled_by(pod, uid)
        ]
        active = [p for p in pods if _phase(p) not in ("Succeeded", "Failed") and not being_deleted(p)]
        succeeded = sum(1 for p in pods if _phase(p) == "Succeeded")
        failed = sum(1 for p in pods if _phase(p) == "Failed")
        completions = spec.get("completions")
        backoff = spec.get("backoffLimit", 6)
        status: Obj = dict(job.get("status") or {})
        now = rfc3339(self._clock.time())
        if not spec.get("suspend"):
            status.setdefault("startTime", now)
            done = succeeded >= completions if completions is not None else succeeded > 0
            if failed > backoff:
                status["conditions"] = [
                    _condition("FailureTarget", "BackoffLimitExceeded", BACKOFF_EXCEEDED, now),
                    _condition("Failed", "BackoffLimitExceeded", BACKOFF_EXCEEDED, now),
                ]
            elif done:
                status["conditions"] = [
                    _condition("SuccessCriteriaMet", "CompletionsReached", COMPLETED, now),
                    _condition("Complete", "CompletionsReached", COMPLETED, now),
                ]
                status["completionTime"] = now
            else:
                wanted = int(spec.get("parallelism") or 0)
                if completions is not None:
                    wanted = min(wanted, int(completions) - succeeded)
                for _ in range(max(0, wanted - len(active))):
                    active.append(self._create_pod(job))
        status.update(
            active=len(active),
            ready=sum(1 for p in active if _ready(p)),
            succeeded=succeeded,
            failed=failed,
            terminating=0,
            uncountedTerminatedPods={},
        )
        for key_ in ("active", "succeeded", "failed"):
            if not status[key_]:
                del status[key_]  # omitempty
        if status != (job.get("status") or {}):
            self._store.update(self._jobs, ns, name, status_body(job, status), subresource="status")
        return None

    def _create_pod(self, job: Obj) -> Obj:
        m = meta(job)
        template = (job.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        pod_meta: dict[str, Any] = {
            "generateName": f"{m['name']}-",
            "namespace": m["namespace"],
            "ownerReferences": [new_controller_ref(job)],
        }
        for field in ("labels", "annotations"):
            if tmeta.get(field):
                pod_meta[field] = tmeta[field]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec") or {}}
        self.loop.record_event()  # SuccessfulCreate
        return self._store.create(self._pods, m["namespace"], body)
