"""kube-scheduler, simulated: every schedulable pod is bound to the cluster's one node.

A pod is schedulable when it has no ``spec.nodeName``, names ``default-scheduler`` as its
``spec.schedulerName`` (another scheduler's pods stay unbound), has no ``spec.schedulingGates``,
is not being deleted and is Pending. With nodes (the default) the scheduler binds it to
:data:`~memop.testing.controllers.node.NODE_NAME` through
:func:`memop.testing.apiserver.binding.assign`, the code the binding endpoint runs: one write
sets ``spec.nodeName`` and ``PodScheduled`` True, with a Scheduled Event. While the Node object
is missing (a test deleted it; the kubelet registers it again) pods wait, unwritten, and are
bound once it is back.

A pod with scheduling gates is left alone, as kube-scheduler's queue leaves it: the API server
gave it ``PodScheduled`` False, ``SchedulingGated`` when it was created. A pod created with a
``spec.nodeName`` never reaches the scheduler.

With ``nodes=False`` the cluster has no node, as a control plane without kubelets: the
scheduler finds nowhere to put a new pod and says so once, in one status write
(``PodScheduled`` False, ``Unschedulable``, "no nodes available to schedule pods", as
kube-scheduler v1.36 writes it), with a FailedScheduling Event; the pod stays Pending forever
and no Deployment ever becomes Available.

Invariant: ``_waiting`` holds the keys of pods found schedulable while the node was missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.runtime.util.clock import Clock
from memop.testing.apiserver import binding
from memop.testing.apiserver.store import Store, StoreEvent
from memop.testing.controllers.cache import ObjectCache
from memop.testing.controllers.common import (
    Obj,
    WorkLoop,
    being_deleted,
    condition,
    meta,
    rfc3339,
    status_body,
)
from memop.testing.controllers.node import NODE_NAME
from memop.testing.kinds.builtins import pod_condition

Key = tuple[str, str]  # (namespace, name)

NO_NODES = "no nodes available to schedule pods"
SCHEDULER_NAME = "default-scheduler"  # the pods it schedules name it (the API server's default)


def schedulable(pod: Mapping[str, Any]) -> bool:
    """Unbound, for the default scheduler, not being deleted and Pending (gated or not)."""
    spec = pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    return (
        not spec.get("nodeName")
        and spec.get("schedulerName", SCHEDULER_NAME) == SCHEDULER_NAME
        and not being_deleted(pod)
        and phase in (None, "Pending")
    )


def unschedulable_status(pod: Mapping[str, Any], now: float) -> Obj:
    """The status kube-scheduler gives a pod it cannot place because there is no node."""
    cond = pod_condition("PodScheduled", "False", rfc3339(now), "Unschedulable", NO_NODES)
    generation = meta(pod).get("generation")
    if generation is not None:
        cond["observedGeneration"] = generation
    return {**(pod.get("status") or {}), "phase": "Pending", "conditions": [cond]}


class Scheduler:
    """Binds schedulable pods to the node, or with ``nodes=False`` marks them unschedulable
    (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock, nodes: bool = True) -> None:
        self._store = store
        self._cache = cache
        self._clock = clock
        self.nodes = nodes
        self._pods = store.resource("", "v1", "pods")
        self._nodes = store.resource("", "v1", "nodes")
        self._waiting: set[Key] = set()
        self.loop: WorkLoop[Key] = WorkLoop("scheduler", self._sync, clock=clock, workers=1)

    def on_event(self, event: StoreEvent) -> None:
        """Queue schedulable pods; the node's return wakes the pods waiting for it."""
        if event.rtype.group != "":
            return
        m = meta(event.obj)
        if event.rtype.kind == "Node":
            if event.type == "ADDED" and m.get("name") == NODE_NAME:
                for key in self._waiting:
                    self.loop.add(key)
                self._waiting.clear()
        elif event.rtype.kind == "Pod":
            key = (m.get("namespace", ""), m.get("name", ""))
            if event.type == "DELETED":
                self._waiting.discard(key)
            elif schedulable(event.obj):
                self.loop.add(key)

    def _sync(self, key: Key) -> None:
        ns, name = key
        pod = self._cache.get(self._pods, ns, name)
        if pod is None or not schedulable(pod) or (pod.get("spec") or {}).get("schedulingGates"):
            return
        if not self.nodes:
            scheduled = condition(pod, "PodScheduled")
            if scheduled is None or scheduled.get("reason") == "SchedulingGated":
                self._store.update(
                    self._pods,
                    ns,
                    name,
                    status_body(pod, unschedulable_status(pod, self._clock.time())),
                    subresource="status",
                )
                self.loop.record_event()  # FailedScheduling
            return
        if self._cache.get(self._nodes, None, NODE_NAME) is None:
            self._waiting.add(key)
            return
        # kube-scheduler's binding names the pod's uid, so a pod deleted and made again under the
        # same name is never bound by a decision about the old one.
        binding.assign(self._store, ns, name, NODE_NAME, uid=str(meta(pod).get("uid") or ""))
        self.loop.record_event()  # Scheduled
