"""The DaemonSet controller, simulated: one pod of every DaemonSet on each simulated node.

The simulated cluster has one node (:data:`~memop.testing.controllers.node.NODE_NAME`), or none
with ``nodes=False``. A
DaemonSet gets a pod for each node (``generateName: <ds>-``, the template's labels with
``controller-revision-hash`` and ``pod-template-generation``, a controller ownerReference and the
node affinity on ``metadata.name`` the real controller sets), pods of an older template are
replaced, and the status (desiredNumberScheduled, currentNumberScheduled, numberReady,
updatedNumberScheduled, numberAvailable, numberMisscheduled, observedGeneration) is written
through the status subresource when it changed.
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
    status_body,
)
from memop.testing.controllers.node import NODE_NAME
from memop.testing.controllers.statefulset import REVISION_LABEL, revision
from memop.testing.kinds.workloads import TEMPLATE_GENERATION

Key = tuple[str, str]  # (namespace, name)
GENERATION_LABEL = "pod-template-generation"


def _ready(pod: Mapping[str, Any]) -> bool:
    cond = condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


def _node_affinity(node: str) -> Obj:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


class DaemonSetController:
    """Keeps a pod of every DaemonSet on each node (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock, nodes: bool = True) -> None:
        self._store = store
        self._cache = cache
        self.nodes = [NODE_NAME] if nodes else []
        self._sets = store.resource("apps", "v1", "daemonsets")
        self._pods = store.resource("", "v1", "pods")
        self.loop: WorkLoop[Key] = WorkLoop("daemonset", self._sync, clock=clock, workers=1)

    def on_event(self, event: StoreEvent) -> None:
        key = owner_key(event, ("apps", "DaemonSet"), ("", "Pod"))
        if key is not None:
            self.loop.add(key)

    def _sync(self, key: Key) -> float | None:
        ns, name = key
        ds = self._cache.get(self._sets, ns, name)
        if ds is None:
            return None
        uid = meta(ds)["uid"]
        update = revision(ds)
        pods = [
            p
            for rtype, p in self._cache.dependents(uid)
            if rtype.group == "" and rtype.kind == "Pod" and is_controlled_by(p, uid) and not being_deleted(p)
        ]
        if not being_deleted(ds):
            for pod in [p for p in pods if meta(p).get("labels", {}).get(REVISION_LABEL) != update]:
                delete_if_present(self._store, self._pods, pod)
                pods.remove(pod)
            placed = {self._node_of(p) for p in pods}
            for node in self.nodes:
                if node not in placed:
                    pods.append(self._create_pod(ds, node, update))
        ready = sum(1 for p in pods if _ready(p))
        status: Obj = {
            "currentNumberScheduled": len(pods),
            "numberMisscheduled": 0,
            "desiredNumberScheduled": len(self.nodes),
            "numberReady": ready,
            "observedGeneration": meta(ds).get("generation", 0),
            "updatedNumberScheduled": len(pods),
            "numberAvailable": ready,
        }
        if len(self.nodes) - ready > 0:
            status["numberUnavailable"] = len(self.nodes) - ready
        status = {
            k: v
            for k, v in status.items()
            if v
            or k in ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady")
        }
        if status != (ds.get("status") or {}):
            self._store.update(self._sets, ns, name, status_body(ds, status), subresource="status")
        return None

    @staticmethod
    def _node_of(pod: Mapping[str, Any]) -> str:
        terms = (
            (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution", {})
            .get("nodeSelectorTerms", [])
        )
        for term in terms:
            for field in term.get("matchFields") or ():
                if field.get("key") == "metadata.name" and field.get("values"):
                    return str(field["values"][0])
        return ""

    def _create_pod(self, ds: Obj, node: str, update: str) -> Obj:
        m = meta(ds)
        template = (ds.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        generation = (m.get("annotations") or {}).get(TEMPLATE_GENERATION, "1")
        labels = {**(tmeta.get("labels") or {}), REVISION_LABEL: update, GENERATION_LABEL: generation}
        pod_meta: Obj = {
            "generateName": f"{m['name']}-",
            "namespace": m["namespace"],
            "labels": labels,
            "ownerReferences": [new_controller_ref(ds)],
        }
        if tmeta.get("annotations"):
            pod_meta["annotations"] = tmeta["annotations"]
        spec = {**(template.get("spec") or {}), "affinity": _node_affinity(node)}
        self.loop.record_event()  # SuccessfulCreate
        return self._store.create(
            self._pods,
            m["namespace"],
            {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec},
        )
