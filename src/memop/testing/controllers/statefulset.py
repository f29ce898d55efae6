"""The StatefulSet controller, simulated: pods with ordinal names, their claims, and the status.

A StatefulSet with ``replicas`` n gets the pods ``<name>-<start>`` .. ``<name>-<start+n-1>``
(``spec.ordinals.start``, 0 by default), each from the template with the
``controller-revision-hash``, ``statefulset.kubernetes.io/pod-name`` and
``apps.kubernetes.io/pod-index`` labels, ``hostname`` the pod's name and ``subdomain`` the
``serviceName``, a controller ownerReference, and for each ``volumeClaimTemplates`` entry a
PersistentVolumeClaim ``<claim>-<pod>`` (created once, kept when the pod goes, as with the
default Retain policy) mounted as that volume. With ``podManagementPolicy: OrderedReady`` (the
default) a pod is created only once every pod before it is running and ready, and scaling down
removes the highest ordinal first, one at a time; ``Parallel`` creates and deletes them all at
once. A template change replaces the pods of the old revision, highest ordinal first, one at a
time (RollingUpdate, no partition). The status (replicas, readyReplicas, currentReplicas,
updatedReplicas, availableReplicas, currentRevision, updateRevision, observedGeneration,
collisionCount) is written through the status subresource when it changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from memop.runtime.util.clock import Clock
from memop.testing.apiserver.errors import ApiError
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

Key = tuple[str, str]  # (namespace, name)
REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def revision(sts: Mapping[str, Any]) -> str:
    """``<name>-<hash of the template>``: the revision name pods are labelled with."""
    template = (sts.get("spec") or {}).get("template") or {}
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return f"{meta(sts).get('name', '')}-{int(digest[:8], 16) % 10**10:x}"


def _running_and_ready(pod: Mapping[str, Any]) -> bool:
    cond = condition(pod, "Ready")
    phase = (pod.get("status") or {}).get("phase")
    return phase == "Running" and cond is not None and cond.get("status") == "True"


class StatefulSetController:
    """Keeps every StatefulSet's ordinal pods (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock) -> None:
        self._store = store
        self._cache = cache
        self._sets = store.resource("apps", "v1", "statefulsets")
        self._pods = store.resource("", "v1", "pods")
        self._claims = store.resource("", "v1", "persistentvolumeclaims")
        self.loop: WorkLoop[Key] = WorkLoop("statefulset", self._sync, clock=clock, workers=1)

    def on_event(self, event: StoreEvent) -> None:
        key = owner_key(event, ("apps", "StatefulSet"), ("", "Pod"))
        if key is not None:
            self.loop.add(key)

    def _sync(self, key: Key) -> float | None:
        ns, name = key
        sts = self._cache.get(self._sets, ns, name)
        if sts is None:
            return None
        spec = sts.get("spec") or {}
        uid = meta(sts)["uid"]
        start = int((spec.get("ordinals") or {}).get("start") or 0)
        wanted = [f"{name}-{i}" for i in range(start, start + int(spec.get("replicas") or 0))]
        pods = {
            meta(p)["name"]: p
            for rtype, p in self._cache.dependents(uid)
            if rtype.group == "" and rtype.kind == "Pod" and is_controlled_by(p, uid)
        }
        ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        update = revision(sts)
        if not being_deleted(sts):
            self._scale(sts, wanted, pods, ordered, update)
        live = [p for p in pods.values() if not being_deleted(p)]
        status: Obj = {
            "observedGeneration": meta(sts).get("generation", 0),
            "replicas": len(live),
            "readyReplicas": sum(1 for p in live if _running_and_ready(p)),
            "currentReplicas": sum(
                1 for p in live if meta(p).get("labels", {}).get(REVISION_LABEL) == update
            ),
            "updatedReplicas": sum(
                1 for p in live if meta(p).get("labels", {}).get(REVISION_LABEL) == update
            ),
            "availableReplicas": sum(1 for p in live if _running_and_ready(p)),
            "currentRevision": update,
            "updateRevision": update,
            "collisionCount": 0,
        }
        status = {
            k: v for k, v in status.items() if v or k in ("replicas", "availableReplicas", "collisionCount")
        }
        if status != (sts.get("status") or {}):
            self._store.update(self._sets, ns, name, status_body(sts, status), subresource="status")
        return None

    def _scale(self, sts: Obj, wanted: list[str], pods: dict[str, Obj], ordered: bool, update: str) -> None:
        """Create missing pods, delete surplus and outdated ones, in the policy's order."""
        for pod_name in wanted:
            pod = pods.get(pod_name)
            if pod is None:
                pods[pod_name] = self._create_pod(sts, pod_name, wanted.index(pod_name), update)
                if ordered:
                    return
            elif ordered and (being_deleted(pod) or not _running_and_ready(pod)):
                return
        surplus = sorted((n for n in pods if n not in wanted), key=lambda n: -int(n.rsplit("-", 1)[1]))
        outdated = [
            n for n in reversed(wanted) if meta(pods[n]).get("labels", {}).get(REVISION_LABEL) != update
        ]
        for pod_name in surplus + outdated:
            pod = pods[pod_name]
            if not being_deleted(pod):
                self._delete(pod)
            if ordered or pod_name in outdated:
                return

    def _create_pod(self, sts: Obj, pod_name: str, index: int, update: str) -> Obj:
        m = meta(sts)
        spec = sts.get("spec") or {}
        template = spec.get("template") or {}
        tmeta = template.get("metadata") or {}
        start = int((spec.get("ordinals") or {}).get("start") or 0)
        labels = {
            **(tmeta.get("labels") or {}),
            REVISION_LABEL: update,
            POD_NAME_LABEL: pod_name,
            POD_INDEX_LABEL: str(start + index),
        }
        pod_spec = dict(template.get("spec") or {})
        pod_spec["hostname"] = pod_name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        volumes = list(pod_spec.get("volumes") or ())
        for claim in spec.get("volumeClaimTemplates") or ():
            claim_name = f"{meta(claim).get('name', '')}-{pod_name}"
            self._ensure_claim(sts, claim, claim_name)
            volumes = [v for v in volumes if v.get("name") != meta(claim).get("name")]
            volumes.append(
                {"name": meta(claim).get("name"), "persistentVolumeClaim": {"claimName": claim_name}}
            )
        if volumes:
            pod_spec["volumes"] = volumes
        pod_meta: Obj = {
            "name": pod_name,
            "namespace": m["namespace"],
            "labels": labels,
            "ownerReferences": [new_controller_ref(sts)],
        }
        if tmeta.get("annotations"):
            pod_meta["annotations"] = tmeta["annotations"]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}
        self.loop.record_event()  # SuccessfulCreate
        return self._store.create(self._pods, m["namespace"], body)

    def _ensure_claim(self, sts: Obj, claim: Mapping[str, Any], claim_name: str) -> None:
        ns = meta(sts)["namespace"]
        if self._cache.get(self._claims, ns, claim_name) is not None:
            return
        selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        labels = {**(meta(claim).get("labels") or {}), **selector}
        body: Obj = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim_name, "namespace": ns, **({"labels": labels} if labels else {})},
            "spec": claim.get("spec") or {},
        }
        try:
            self._store.create(self._claims, ns, body)
        except ApiError as err:
            if err.code != 409:
                raise

    def _delete(self, pod: Obj) -> None:
        if delete_if_present(self._store, self._pods, pod):
            self.loop.record_event()  # SuccessfulDelete
