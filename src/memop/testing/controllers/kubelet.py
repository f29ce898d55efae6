"""The kubelet of the simulated cluster's node: it registers its Node and runs the pods bound to it.

With nodes (the default) the kubelet registers the Node object
(:func:`~memop.testing.controllers.node.registered_node`, field manager ``kubelet``) when the
simulation starts, and again whenever it is deleted, as a real kubelet re-registers. It sends no
heartbeats: the node never goes NotReady.

A pod bound to the node (``spec.nodeName`` is :data:`~memop.testing.controllers.node.NODE_NAME`,
by the scheduler of :mod:`memop.testing.controllers.scheduler` or set at creation) that is
Pending is acknowledged: containers creating, with a start time and host IP;
``pod_ready_delay`` seconds later it is ``Running`` with every container running and ready and a
pod IP. With a zero delay the pod goes straight to ``Running`` in one status write: nobody could
have observed the acknowledged Pending state in between, and it halves the kubelet's writes of
big simulations. A pod bound to another node, which does not exist, is never run: it stays
Pending with no status write.

A pod a Job controls runs to completion instead: its containers exit 0 at once, and the pod is
``Succeeded`` (every container terminated, Completed) where another would be running.

Deleting a pod needs no kubelet here: the in-memory API server removes pods at once (no grace
period), and a pod with finalizers waits for whoever owns them.

With ``nodes=False`` there is no kubelet at all: no Node, and no pod ever runs.

Invariant: ``_pending_since`` holds exactly the live pods acknowledged Pending and not yet Running.
"""

from __future__ import annotations

import hashlib
import itertools
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
    meta,
    rfc3339,
    status_body,
)
from memop.testing.controllers.node import HOST_IP, MANAGER, NODE_NAME, registered_node
from memop.testing.kinds.builtins import pod_condition, pod_qos_class

Key = tuple[str, str]  # (namespace, name)


def pod_ip(n: int) -> str:
    """The n-th pod IP of the simulated cluster's 10.244.0.0/16 pod network (n >= 0)."""
    n %= 254 * 256
    return f"10.244.{n // 254}.{n % 254 + 1}"


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def _scheduled_at(pod: Mapping[str, Any], stamp: str) -> str:
    """When the pod was scheduled (its binding's time), ``stamp`` if it was placed at creation."""
    scheduled = condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "True":
        return str(scheduled.get("lastTransitionTime") or stamp)
    return stamp


def pending_status(pod: Mapping[str, Any], now: float) -> Obj:
    """Scheduled, containers being created: what a kubelet reports before they run."""
    stamp = rfc3339(now)
    spec = pod.get("spec") or {}
    scheduled_at = _scheduled_at(pod, stamp)
    names = [c.get("name", "") for c in spec.get("containers") or []]
    unready = f"containers with unready status: [{' '.join(names)}]"
    return {
        "phase": "Pending",
        "conditions": [
            pod_condition("PodReadyToStartContainers", "False", stamp),
            pod_condition("Initialized", "True", stamp),
            pod_condition("Ready", "False", stamp, "ContainersNotReady", unready),
            pod_condition("ContainersReady", "False", stamp, "ContainersNotReady", unready),
            pod_condition("PodScheduled", "True", scheduled_at),
        ],
        "hostIP": HOST_IP,
        "hostIPs": [{"ip": HOST_IP}],
        "startTime": stamp,
        "qosClass": pod_qos_class(pod),
        "containerStatuses": [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": "",
                "lastState": {},
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
            for c in spec.get("containers") or []
        ],
    }


def running_status(pod: Mapping[str, Any], now: float, ip: str) -> Obj:
    """Every container running and ready; keeps the scheduling time and start time it had."""
    stamp = rfc3339(now)
    spec, old = pod.get("spec") or {}, pod.get("status") or {}
    scheduled_at = _scheduled_at(pod, stamp)
    started = old.get("startTime") or stamp
    uid = meta(pod).get("uid", "")
    status: Obj = {
        "phase": "Running",
        "conditions": [
            pod_condition("PodReadyToStartContainers", "True", stamp),
            pod_condition("Initialized", "True", scheduled_at),
            pod_condition("Ready", "True", stamp),
            pod_condition("ContainersReady", "True", stamp),
            pod_condition("PodScheduled", "True", scheduled_at),
        ],
        "hostIP": HOST_IP,
        "hostIPs": [{"ip": HOST_IP}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": started,
        "qosClass": pod_qos_class(pod),
        "containerStatuses": [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": f"{c.get('image', '')}@sha256:{_digest(c.get('image', ''))}",
                "containerID": f"containerd://{_digest(uid, c.get('name', ''))}",
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": stamp}},
            }
            for c in spec.get("containers") or []
        ],
    }
    init = spec.get("initContainers") or []
    if init:
        status["initContainerStatuses"] = [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": f"{c.get('image', '')}@sha256:{_digest(c.get('image', ''))}",
                "containerID": f"containerd://{_digest(uid, 'init', c.get('name', ''))}",
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": started,
                        "finishedAt": stamp,
                    }
                },
            }
            for c in init
        ]
    return status


def succeeded_status(pod: Mapping[str, Any], now: float, ip: str) -> Obj:
    """Every container exited 0: what a kubelet reports for a finished run-to-completion pod."""
    status = running_status(pod, now, ip)
    stamp = rfc3339(now)
    status["phase"] = "Succeeded"
    for cond in status["conditions"]:
        if cond["type"] in ("Ready", "ContainersReady"):
            cond.update(status="False", reason="PodCompleted")
        elif cond["type"] == "PodReadyToStartContainers":
            cond["status"] = "False"
    for container in status["containerStatuses"]:
        started = container["state"]["running"]["startedAt"]
        container.update(ready=False, started=False)
        container["state"] = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": started,
                "finishedAt": stamp,
                "containerID": container["containerID"],
            }
        }
    return status


def _runs_to_completion(pod: Mapping[str, Any]) -> bool:
    """A Job's pod: the simulation lets it succeed."""
    return any(
        ref.get("controller") and ref.get("kind") == "Job" for ref in meta(pod).get("ownerReferences") or ()
    )


def _needs_kubelet(pod: Mapping[str, Any]) -> bool:
    """Bound to this node, not being deleted and not yet running."""
    return (
        (pod.get("spec") or {}).get("nodeName") == NODE_NAME
        and not being_deleted(pod)
        and (pod.get("status") or {}).get("phase") in (None, "Pending")
    )


class Kubelet:
    """Registers the node and runs its pods (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        cache: ObjectCache,
        *,
        clock: Clock,
        pod_ready_delay: float = 0.0,
        nodes: bool = True,
    ) -> None:
        if pod_ready_delay < 0:
            raise ValueError("pod_ready_delay must not be negative")
        self._store = store
        self._cache = cache
        self._clock = clock
        self._delay = pod_ready_delay
        self.nodes = nodes
        self._pods = store.resource("", "v1", "pods")
        self._nodes = store.resource("", "v1", "nodes")
        self._ips = itertools.count()
        # uid -> monotonic time the pod was acknowledged Pending (see the module invariant).
        self._pending_since: dict[str, float] = {}
        self.loop: WorkLoop[Key] = WorkLoop("kubelet", self._sync, clock=clock, workers=1)
        self.registration: WorkLoop[str] = WorkLoop("kubelet-registration", self._register, clock=clock)
        if nodes:
            self.registration.add(NODE_NAME)  # registered once the loop starts

    def on_event(self, event: StoreEvent) -> None:
        """Queue pods that must start or become ready, and the node when it was deleted."""
        if event.rtype.group != "" or not self.nodes:
            return
        m = meta(event.obj)
        if event.rtype.kind == "Node":
            if event.type == "DELETED" and m.get("name") == NODE_NAME:
                self.registration.add(NODE_NAME)
        elif event.rtype.kind == "Pod":
            if event.type == "DELETED":
                self._pending_since.pop(m.get("uid", ""), None)
            elif _needs_kubelet(event.obj):
                self.loop.add((m.get("namespace", ""), m.get("name", "")))

    def _register(self, name: str) -> None:
        if self._cache.get(self._nodes, None, name) is not None:
            return
        try:
            self._store.create(self._nodes, None, registered_node(self._clock.time()), manager=MANAGER)
        except ApiError as err:
            if err.code != 409:  # registered meanwhile: nothing to do, as the kubelet
                raise

    def _sync(self, key: Key) -> float | None:
        ns, name = key
        pod = self._cache.get(self._pods, ns, name)
        if pod is None:
            return None
        m = meta(pod)
        uid = m.get("uid", "")
        if not _needs_kubelet(pod):
            self._pending_since.pop(uid, None)
            return None
        now = self._clock.monotonic()
        since = self._pending_since.get(uid)
        if since is None:
            if not (pod.get("status") or {}).get("startTime") and self._delay > 0:
                self._write_status(pod, pending_status(pod, self._clock.time()))
            # A Pending pod we did not acknowledge (a restart) waits the full delay from now.
            self._pending_since[uid] = since = now
        remaining = since + self._delay - now
        if remaining > 0:
            return remaining
        final = succeeded_status if _runs_to_completion(pod) else running_status
        self._write_status(pod, final(pod, self._clock.time(), pod_ip(next(self._ips))))
        self._pending_since.pop(uid, None)
        return None

    def _write_status(self, pod: Obj, status: Obj) -> None:
        m = meta(pod)
        self._store.update(
            self._pods, m["namespace"], m["name"], status_body(pod, status), subresource="status"
        )
