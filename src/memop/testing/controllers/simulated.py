"""The simulated control plane: kube-controller-manager (garbage collector, deployment,
replicaset, statefulset, daemonset, job, cronjob, volume provisioning and protection, resource
quota and namespace controllers), kube-scheduler and the node's kubelet, acting directly on a
:class:`~memop.testing.apiserver.store.Store`.

One in-process store listener (``Store.add_listener``, which hands over the store's own
immutable objects, where ``subscribe`` would deep-copy every change) feeds the shared
:class:`~memop.testing.controllers.cache.ObjectCache` and then every controller. The callback
only updates that cache and adds keys to deduplicating queues; the controllers read the cache
and write the store in their worker tasks (see :mod:`memop.testing.controllers.common`).
``start`` also replays the objects already in the store, as an informer's initial list would,
so the controllers can be started on a non-empty store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from memop.runtime.util.clock import Clock, RealClock
from memop.testing.apiserver.store import Change, Store, StoreEvent
from memop.testing.controllers.cache import ObjectCache
from memop.testing.controllers.common import ControllerLimits, TokenBucket, WorkLoop
from memop.testing.controllers.cronjob import CronJobController
from memop.testing.controllers.daemonset import DaemonSetController
from memop.testing.controllers.deployment import DeploymentController
from memop.testing.controllers.gc import GarbageCollector
from memop.testing.controllers.job import JobController
from memop.testing.controllers.kubelet import Kubelet
from memop.testing.controllers.namespace import NamespaceController
from memop.testing.controllers.quota import QuotaController
from memop.testing.controllers.replicaset import ReplicaSetController
from memop.testing.controllers.scheduler import Scheduler
from memop.testing.controllers.serviceaccounts import ServiceAccountsController
from memop.testing.controllers.statefulset import StatefulSetController
from memop.testing.controllers.volumes import VolumeController

log = logging.getLogger("memop.testing.controllers")


class SimulatedControllers:
    """What makes the in-memory API server behave like a cluster with controllers and nodes.

    ``pod_ready_delay`` is how long a new pod stays Pending before it runs and is ready;
    ``clock`` (default: real time) drives that delay, timestamps and retries.
    ``limits`` (default: none) paces the controllers' writes as kube-controller-manager's
    client rate limits do: with thousands of objects its controllers then lag behind their
    objects, as a real one's do (see :class:`ControllerLimits`). ``nodes=True``: one Node,
    which the scheduler binds pods to and whose kubelet runs them; ``nodes=False``: a cluster
    with no node, where pods are marked unschedulable and stay Pending
    (:class:`~memop.testing.controllers.scheduler.Scheduler`).
    """

    def __init__(
        self,
        store: Store,
        *,
        pod_ready_delay: float = 0.0,
        clock: Clock | None = None,
        limits: ControllerLimits | None = None,
        nodes: bool = True,
    ) -> None:
        self._store = store
        clock = clock or RealClock()
        self.limits = limits
        self.cache = ObjectCache()
        self.gc = GarbageCollector(store, self.cache, clock=clock)
        self.deployments = DeploymentController(store, self.cache, clock=clock)
        self.replicasets = ReplicaSetController(store, self.cache, clock=clock)
        self.scheduler = Scheduler(store, self.cache, clock=clock, nodes=nodes)
        self.kubelet = Kubelet(store, self.cache, clock=clock, pod_ready_delay=pod_ready_delay, nodes=nodes)
        self.namespaces = NamespaceController(store, self.cache, clock=clock)
        self.statefulsets = StatefulSetController(store, self.cache, clock=clock)
        self.daemonsets = DaemonSetController(store, self.cache, clock=clock, nodes=nodes)
        self.jobs = JobController(store, self.cache, clock=clock)
        self.cronjobs = CronJobController(store, self.cache, clock=clock)
        self.volumes = VolumeController(store, self.cache, clock=clock)
        self.quotas = QuotaController(store, self.cache, clock=clock)
        self.service_accounts = ServiceAccountsController(store, self.cache, clock=clock)
        workload_loops = (
            self.statefulsets.loop,
            self.daemonsets.loop,
            self.jobs.loop,
            self.cronjobs.loop,
            self.volumes.loop,
            self.quotas.loop,
            self.service_accounts.loop,
        )
        if limits is not None:
            writes = self._writes
            for loop in (
                self.gc.loop,
                self.deployments.loop,
                self.replicasets.loop,
                self.namespaces.loop,
                *workload_loops,
            ):
                loop.pace(TokenBucket(limits.qps, limits.burst, clock=clock), writes)
            # kube-scheduler and the kubelet each have a client (and a limiter) of their own.
            self.scheduler.loop.pace(TokenBucket(limits.node_qps, limits.node_burst, clock=clock), writes)
            kubelet = TokenBucket(limits.node_qps, limits.node_burst, clock=clock)
            self.kubelet.loop.pace(kubelet, writes)
            self.kubelet.registration.pace(kubelet, writes)
        self._handlers: tuple[Callable[[StoreEvent], None], ...] = (
            self.gc.on_event,
            self.deployments.on_event,
            self.replicasets.on_event,
            self.scheduler.on_event,
            self.kubelet.on_event,
            self.namespaces.on_event,
            self.statefulsets.on_event,
            self.daemonsets.on_event,
            self.jobs.on_event,
            self.cronjobs.on_event,
            self.volumes.on_event,
            self.quotas.on_event,
            self.service_accounts.on_event,
        )
        self._loops: tuple[WorkLoop[Any], ...] = (
            self.gc.loop,
            self.deployments.loop,
            self.replicasets.loop,
            self.scheduler.loop,
            self.kubelet.loop,
            self.kubelet.registration,
            self.namespaces.loop,
            *workload_loops,
        )
        self._unsubscribe: Callable[[], None] | None = None

    async def start(self) -> None:
        """Subscribe to the store, learn what it holds and start the workers (once)."""
        if self._unsubscribe is not None:
            raise RuntimeError("the simulated controllers are already running")
        self._unsubscribe = self._store.add_listener(self._on_change)
        seen: set[str] = set()
        for rtype in self._store.resources():
            items, _ = self._store.list(rtype)
            for obj in items:
                # Objects served in several versions are listed once per version.
                uid = obj.get("metadata", {}).get("uid")
                if uid not in seen:
                    seen.add(uid)
                    self._on_event(StoreEvent("ADDED", rtype, obj, None))
        for loop in self._loops:
            loop.start()

    async def stop(self) -> None:
        """Unsubscribe and stop every worker; idempotent."""
        if self._unsubscribe is None:
            return
        self._unsubscribe()
        self._unsubscribe = None
        for loop in self._loops:
            await loop.stop()

    def _writes(self) -> int:
        return self._store.resource_version

    def pending(self) -> int:
        """Keys ready to be worked on across all controllers (0 when the simulation is idle,
        apart from timers such as pod readiness)."""
        return sum(loop.pending() for loop in self._loops)

    def _on_change(self, change: Change) -> None:
        # The store's own committed objects, never copied: the cache and the handlers only
        # read them (see memop.testing.controllers.cache).
        self._on_event(StoreEvent(change.type, change.storage.rtype, change.entry.obj, change.old))

    def _on_event(self, event: StoreEvent) -> None:
        # The store's callback must never raise: a bug in one handler is logged and the others
        # still see the event.
        try:
            self.cache.apply(event.type, event.rtype, event.obj, event.old)
        except Exception:
            log.exception("simulated controllers: caching %s %s failed", event.type, event.rtype)
        for handler in self._handlers:
            try:
                handler(event)
            except Exception:
                log.exception("simulated controllers: handling %s %s failed", event.type, event.rtype)
