"""The Memcached reconciler and its wiring: one owned Deployment per Memcached, status from the cache.

Level-based and idempotent: every reconcile reads the Memcached, its Deployment and its pods
from the cache, computes what should be, and writes only the difference. A reconcile of a
converged Memcached makes no API request at all. Writes go through the API and are recorded in
the cache (``Cache.record_write``) so the next reconcile reads its own writes.

Watches: the Memcached itself (generation changes, deletion, and changes of the annotation
holding v1beta1's containerPort only: our own status and finalizer writes do not trigger
reconciles), the Deployments it controls, and pods mapped to
their Memcached through the per-instance label, so ``status.nodes`` follows pods.
"""

from __future__ import annotations

import logging
from typing import Any

from memop.memcached.api import (
    CONTAINER_PORT_ANNOTATION,
    FINALIZER,
    MEMCACHEDS,
    InvalidSpec,
    MemcachedSpec,
    parse_spec,
)
from memop.memcached.desired import (
    APP_NAME,
    INSTANCE_LABEL,
    NAME_LABEL,
    SelectorMismatch,
    deployment_patch,
    desired_deployment,
)
from memop.memcached.status import compute_status
from memop.runtime.cache.cache import Cache
from memop.runtime.cache.labels import Selector
from memop.runtime.cache.sharing import EVERY_ITEM, Path
from memop.runtime.cache.store import Obj, Transform, controller_owner_uid
from memop.runtime.client.client import Client
from memop.runtime.client.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    NamespaceClosed,
    NotFound,
    TransportError,
)
from memop.runtime.client.resources import DEPLOYMENTS, PODS, Resource
from memop.runtime.controller import predicates
from memop.runtime.controller.controller import Controller, ControllerBuilder
from memop.runtime.controller.finalizers import add_finalizer, finalizers_of, has_finalizer, remove_finalizer
from memop.runtime.controller.reconcile import Request, Result
from memop.runtime.controller.status import update_status
from memop.runtime.manager.events import NORMAL, WARNING, EventRecorder
from memop.runtime.sharding.keys import BY_OWNER_BUCKET
from memop.runtime.sharding.ring import BUCKET_LABEL
from memop.runtime.util.clock import Clock, RealClock, rfc3339

log = logging.getLogger("memop.memcached")

CONTROLLER_NAME = "memcached"
BLOCKED_RECHECK_SECONDS = 60.0


def pods_to_memcached(pod: Obj) -> list[Request]:
    """A memcached pod maps to the Memcached named by its instance label."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict) or labels.get(NAME_LABEL) != APP_NAME:
        return []
    instance = labels.get(INSTANCE_LABEL)
    if not isinstance(instance, str) or not instance:
        return []
    return [Request(str(meta.get("namespace") or ""), instance)]


class MemcachedReconciler:
    """Drives one Memcached towards its Deployment and status. See the module docstring."""

    def __init__(
        self, client: Client, cache: Cache, recorder: EventRecorder, clock: Clock | None = None
    ) -> None:
        self.client = client
        self.cache = cache
        self.recorder = recorder
        self._clock = clock or RealClock()

    async def reconcile(self, request: Request) -> Result | None:
        memcached = self.cache.get(MEMCACHEDS, request.name, request.namespace)
        if memcached is None:
            return None  # gone; its Deployment is garbage-collected through the ownerReference
        meta = memcached["metadata"]
        finalizers = finalizers_of(memcached)
        if finalizers is None:
            # No conforming API server stores this (it validates metadata); a proxy could send
            # it. Whatever we wrote in its place could drop someone else's finalizer.
            log.warning(
                "Memcached %s has metadata.finalizers %.200r, not a list of names: leaving them alone",
                meta.get("name"),
                meta.get("finalizers"),
            )
        if meta.get("deletionTimestamp"):
            return await self._finalize(memcached)
        if finalizers is not None and FINALIZER not in finalizers:
            try:
                memcached = await add_finalizer(
                    self.client, MEMCACHEDS, memcached, FINALIZER, cache=self.cache
                )
            except NotFound:
                # Deleted (it had no finalizer of ours to wait for) after our cache read it:
                # nothing is left to reconcile, and its watch event is on the way.
                log.info("Memcached %s is gone, nothing to do", meta.get("name"))
                return None
            except Forbidden as error:
                message = f"memop is not allowed to add its finalizer to Memcacheds here: {error.message}"
                await self._report_failure(memcached, None, "Forbidden", message)
                raise
        try:
            spec = parse_spec(memcached)
        except InvalidSpec as invalid:
            # Retrying cannot fix a bad spec; the next edit of the spec triggers a reconcile.
            log.warning("invalid spec: %s", invalid)
            self.recorder.record(memcached, WARNING, "InvalidSpec", str(invalid))
            await self._write_status(memcached, None, None, invalid=str(invalid))
            return None
        try:
            deployment = await self._ensure_deployment(memcached, spec)
        except _Blocked as blocked:
            # Needs a human; its fix (deleting a foreign object) sends us no event, so look again later.
            await self._report_failure(memcached, spec, blocked.reason, blocked.message)
            return Result(requeue_after=BLOCKED_RECHECK_SECONDS)
        except Conflict:
            raise  # someone wrote first: requeued promptly, nothing for the user to see
        except NamespaceClosed:
            # The namespace is being deleted (its 403 is no permission problem) or gone: nothing
            # to report or retry, the controller says it once (memop.runtime.controller).
            raise
        except Forbidden as error:
            message = f"memop is not allowed to manage Deployments here: {error.message}"
            await self._report_failure(
                memcached, spec, "Forbidden", message, self._cached_deployment(memcached)
            )
            raise
        except ApiError as error:
            message = f"failed to reconcile the Deployment: {error}"
            await self._report_failure(
                memcached, spec, "ReconcileError", message, self._cached_deployment(memcached)
            )
            raise
        if deployment is None:
            return Result(requeue=True)
        await self._write_status(memcached, spec, deployment)
        return None

    def _cached_deployment(self, memcached: Obj) -> Obj | None:
        meta = memcached["metadata"]
        deployment = self.cache.get(DEPLOYMENTS, meta["name"], meta["namespace"])
        if deployment is None or controller_owner_uid(deployment) != meta.get("uid"):
            return None
        return deployment

    async def _report_failure(
        self,
        memcached: Obj,
        spec: MemcachedSpec | None,
        reason: str,
        message: str,
        deployment: Obj | None = None,
        *,
        finalizing: bool = False,
    ) -> None:
        """Tell the user where they look (an Event, the Degraded condition); never raises."""
        log.error("%s", message)
        self.recorder.record(memcached, WARNING, reason, message)
        try:
            await self._write_status(memcached, spec, deployment, error=message, finalizing=finalizing)
        except (ApiError, TransportError) as error:
            log.warning("could not record the failure in status either: %s", error)

    async def _ensure_deployment(self, memcached: Obj, spec: MemcachedSpec) -> Obj | None:
        """The Deployment as it now is on the server (after any write); None to retry soon."""
        meta = memcached["metadata"]
        desired = desired_deployment(memcached, spec, self.cache.shard_labels(memcached))
        current = self.cache.get(DEPLOYMENTS, meta["name"], meta["namespace"])
        if current is None:
            try:
                created = await self.client.create(DEPLOYMENTS, desired, meta["namespace"])
            except AlreadyExists:
                return None  # our cache is behind; the watch brings it
            self.cache.record_write(DEPLOYMENTS, created)
            self.recorder.record(memcached, NORMAL, "Created", f"Created Deployment {meta['name']}")
            return created
        owner = controller_owner_uid(current)
        if owner != meta.get("uid"):
            raise _Blocked(
                "DeploymentConflict",
                f"Deployment {meta['name']} exists and is not controlled by this Memcached"
                f" (its controller uid is {owner}); delete or rename it",
            )
        try:
            patch = deployment_patch(current, desired)
        except SelectorMismatch:
            # The selector is immutable: replace the Deployment (its pods go with it).
            log.info("deployment selector drifted, recreating it")
            try:
                await self.client.delete(
                    DEPLOYMENTS,
                    meta["name"],
                    meta["namespace"],
                    preconditions={"uid": current["metadata"]["uid"]},
                )
            except NotFound:
                # Someone else deleted it (or our cache lags a deletion): gone is what this
                # delete was for. The retry creates ours once the watch has brought the news.
                log.info("deployment %s was already deleted", meta["name"])
            self.recorder.record(memcached, NORMAL, "Recreated", "Deployment selector changed; recreating it")
            return None
        if patch is None:
            return current
        old_replicas = (current.get("spec") or {}).get("replicas")
        if old_replicas is not None and (not isinstance(old_replicas, int) or isinstance(old_replicas, bool)):
            # No conforming API server serves this (it cannot decode it); a proxy or an
            # aggregated API in between could. The patch sets the number again.
            log.warning(
                "Deployment %s has spec.replicas %r, which is not a number; setting it to %d",
                meta["name"],
                old_replicas,
                spec.size,
            )
        try:
            updated = await self.client.patch(DEPLOYMENTS, meta["name"], patch, meta["namespace"])
        except NotFound:
            # Deleted after our cache read it: nothing for the user to fix. The retry creates
            # it once the watch has brought the deletion (as for AlreadyExists above).
            log.info("deployment %s is gone, it will be created again", meta["name"])
            return None
        self.cache.record_write(DEPLOYMENTS, updated)
        if set(patch.get("spec", {})) == {"replicas"} and set(patch) == {"spec"}:
            self.recorder.record(
                memcached,
                NORMAL,
                "Scaled",
                f"Scaled Deployment {meta['name']} from {old_replicas} to {spec.size}",
            )
        else:
            self.recorder.record(memcached, NORMAL, "Updated", f"Updated Deployment {meta['name']}")
        return updated

    async def _write_status(
        self,
        memcached: Obj,
        spec: MemcachedSpec | None,
        deployment: Obj | None,
        *,
        invalid: str | None = None,
        error: str | None = None,
        finalizing: bool = False,
    ) -> Obj:
        meta = memcached["metadata"]
        pods = self.cache.list(
            PODS,
            meta["namespace"],
            selector=Selector.from_validated_set({INSTANCE_LABEL: meta["name"], NAME_LABEL: APP_NAME}),
        )
        status = compute_status(
            memcached,
            spec,
            deployment,
            pods,
            rfc3339(self._clock.time()),
            invalid=invalid,
            finalizing=finalizing,
            error=error,
        )
        return await update_status(self.client, self.cache, MEMCACHEDS, memcached, status)

    async def _finalize(self, memcached: Obj) -> Result | None:
        meta = memcached["metadata"]
        if not has_finalizer(memcached, FINALIZER):
            return None  # not ours to finish (or unreadable: see reconcile); their owners will
        # The finalizer is removed at its index in the object as the cache holds it: the
        # removal's test fails (and we retry) if the list moved since.
        cached = memcached
        memcached = await self._write_status(memcached, None, None, finalizing=True)
        self.recorder.record(
            memcached,
            WARNING,
            "Finalizing",
            f"Deleting Memcached {meta['name']}: running finalizer {FINALIZER}",
        )
        # Cleanup: the Deployment is controlled by this Memcached, so the garbage collector
        # deletes it (and its pods) once the Memcached is gone. Nothing is left to orphan.
        try:
            await remove_finalizer(self.client, MEMCACHEDS, cached, FINALIZER)
        except NotFound:
            return None
        except Forbidden as error:
            message = f"memop is not allowed to remove its finalizer from Memcacheds here: {error.message}"
            await self._report_failure(memcached, None, "Forbidden", message, finalizing=True)
            raise
        except Conflict:
            return Result(requeue=True)  # the finalizer list changed under us: re-read and retry
        log.info("finalizer removed")
        return None


class _Blocked(Exception):
    """The desired state cannot be reached without someone else acting first."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


# The labels of a pod memop reads: its Memcached's, and the owner bucket when sharded.
_POD_LABELS = (NAME_LABEL, INSTANCE_LABEL, BUCKET_LABEL)


def pod_transform(pod: Obj) -> Obj:
    """Keep only what the status computation (name, phase, deletionTimestamp) and the pod
    watch and list (the name and instance labels) read of a pod: pods are the bulk of the
    cache (three per Memcached of size 3). Dropped, among the rest: the conditions (readiness
    comes from the Deployment's status), the ownerReferences (a pod's owner is a ReplicaSet,
    which memop never looks up; without them pods stay out of the cache's owner index), the
    uid and the other labels (pod-template-hash: one label index entry less per pod, and the
    kept labels are equal for all the pods of a Memcached, so held once: CACHE_SHARED)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if not isinstance(status, dict):
        _log_dropped_status("Pod", meta, status)
        status = {}
    kept_meta = {
        k: meta[k] for k in ("name", "namespace", "resourceVersion", "deletionTimestamp") if k in meta
    }
    labels = meta.get("labels")
    if isinstance(labels, dict):
        kept_meta["labels"] = {k: labels[k] for k in _POD_LABELS if k in labels}
    elif labels is not None:
        kept_meta["labels"] = labels  # malformed: kept as it is, for the watch to judge
    kept_status = {"phase": status["phase"]} if "phase" in status else {}
    return {"metadata": kept_meta, "status": kept_status}


def _log_dropped_status(kind: str, meta: Obj, status: Any) -> None:
    # No conforming API server sends this; what the reconciler reads of a status is a mapping.
    log.warning(
        "%s %s/%s has status %.200r, not an object: cached without it",
        kind,
        meta.get("namespace"),
        meta.get("name"),
        status,
    )


_DEPLOYMENT_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "labels",
    "ownerReferences",
    "deletionTimestamp",
    "finalizers",
)
_DEPLOYMENT_STATUS = (
    "observedGeneration",
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
)


def deployment_transform(deployment: Obj) -> Obj:
    """Keep what the reconciler reads of a Deployment: ``deployment_patch`` (labels, owner
    references, the whole of spec but strategy and the rollout tunables, the template whole, so
    a rewritten container keeps its server defaults) and ``compute_status`` (generation, the
    replica counts, the Progressing condition when it says ProgressDeadlineExceeded, the only
    case its reason and message are read). Dropped: annotations, creationTimestamp,
    spec.strategy, revisionHistoryLimit, progressDeadlineSeconds and the other conditions (a
    healthy Progressing condition names the ReplicaSet: unique, half a KiB per Deployment)."""
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec")
    status = deployment.get("status") or {}
    if not isinstance(status, dict):
        _log_dropped_status("Deployment", meta, status)
        status = {}
    refs = meta.get("ownerReferences")
    if refs is not None and type(refs) is not list:
        # Kept: the cache's owner index and the owner mapping read it as naming no owner.
        log.warning(
            "Deployment %s/%s has metadata.ownerReferences %.200r, not a list: it names no owner",
            meta.get("namespace"),
            meta.get("name"),
            refs,
        )
    out: Obj = {k: deployment[k] for k in ("apiVersion", "kind") if k in deployment}
    out["metadata"] = {k: meta[k] for k in _DEPLOYMENT_META if k in meta}
    if isinstance(spec, dict):
        out["spec"] = {
            k: v
            for k, v in spec.items()
            if k not in ("strategy", "revisionHistoryLimit", "progressDeadlineSeconds")
        }
    elif spec is not None:
        out["spec"] = spec  # malformed: kept as it is, for the reconciler to judge
    kept_status: Obj = {k: status[k] for k in _DEPLOYMENT_STATUS if k in status}
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        stuck = [
            c
            for c in conditions
            if isinstance(c, dict)
            and c.get("type") == "Progressing"
            and c.get("reason") == "ProgressDeadlineExceeded"
        ]
        if stuck:
            kept_status["conditions"] = stuck
    out["status"] = kept_status
    return out


# Metadata of a Memcached the reconciler never reads.
_MEMCACHED_META_DROPPED = frozenset(("annotations", "creationTimestamp", "generateName", "selfLink"))


def memcached_transform(memcached: Obj) -> Obj:
    """A Memcached without the metadata the reconciler never reads: annotations (``kubectl
    apply`` keeps a copy of the whole object there, last-applied-configuration) but the one
    holding v1beta1's ``containerPort`` (:data:`CONTAINER_PORT_ANNOTATION`), the creation
    timestamp, generateName. Everything it writes goes through patches, so nothing dropped
    here can be written back by mistake."""
    meta = memcached.get("metadata")
    if not isinstance(meta, dict) or _MEMCACHED_META_DROPPED.isdisjoint(meta):
        return memcached
    kept = {k: v for k, v in meta.items() if k not in _MEMCACHED_META_DROPPED}
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and CONTAINER_PORT_ANNOTATION in annotations:
        kept["annotations"] = {CONTAINER_PORT_ANNOTATION: annotations[CONTAINER_PORT_ANNOTATION]}
    return {**memcached, "metadata": kept}


def spec_changed(event_type: str, obj: Obj, old: Obj | None) -> bool:
    """The Memcached predicate: ``generation_changed``, and a change of the annotation holding
    v1beta1's ``containerPort``. A write at v1beta1 that changes only the port changes only
    that annotation of the stored v1alpha1 object, and metadata never bumps the generation."""
    if predicates.generation_changed(event_type, obj, old):
        return True
    return bool(_port_annotation(obj) != _port_annotation(old))


def _port_annotation(obj: Obj | None) -> Any:
    meta = (obj or {}).get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return annotations.get(CONTAINER_PORT_ANNOTATION) if isinstance(annotations, dict) else None


# The transform of each cached resource; setup installs them before any informer of those
# resources exists (the first caller of Cache.informer fixes the transform).
CACHE_TRANSFORMS: dict[Resource, Transform] = {
    MEMCACHEDS: memcached_transform,
    PODS: pod_transform,
    DEPLOYMENTS: deployment_transform,
}

# The parts of cached objects that are equal across many objects, held once each (see
# memop.runtime.cache.sharing): a Deployment's pod template (the same for every Memcached of one
# spec) and its kept status (replica counts: the same for every Deployment in the same state), a
# pod's kept labels and status, a Memcached's spec, finalizers and conditions (equal for the
# Memcacheds that changed in the same second the same way).
CACHE_SHARED: dict[Resource, tuple[Path, ...]] = {
    DEPLOYMENTS: (("spec", "template", "spec"), ("status",)),
    PODS: (("metadata", "labels"), ("status",)),
    MEMCACHEDS: (("spec",), ("metadata", "finalizers"), ("status", "conditions", EVERY_ITEM)),
}


# A Deployment's pod-template labels are its own labels (desired_deployment): held as one dict.
CACHE_ALIASES: dict[Resource, dict[Path, Path]] = {
    DEPLOYMENTS: {("spec", "template", "metadata", "labels"): ("metadata", "labels")},
}


# Only pods labelled as memcached pods are watched: the reconciler lists a Memcached's pods by
# this label and its instance label, and the pod watch maps nothing else, so other pods (most
# of a cluster's) never reach memop: not decoded, not cached.
POD_SELECTOR = Selector.parse(f"{NAME_LABEL}={APP_NAME}")


def declare_informers(cache: Cache, memcached_resource: Resource = MEMCACHEDS) -> None:
    """The informers the controller reads, with their transforms, shared subtrees, aliases and
    (pods) label selector: declared before anything else asks for them (the first caller of
    Cache.informer fixes these)."""
    for resource, kind in ((memcached_resource, MEMCACHEDS), (DEPLOYMENTS, DEPLOYMENTS), (PODS, PODS)):
        cache.informer(
            resource,
            transform=CACHE_TRANSFORMS[kind],
            shared=CACHE_SHARED[kind],
            label_selector=POD_SELECTOR if kind is PODS else None,
            aliases=CACHE_ALIASES.get(kind),
        )


def setup(
    cache: Cache,
    client: Client,
    recorder: EventRecorder,
    *,
    max_concurrent_reconciles: int = 1,
    memcached_resource: Resource = MEMCACHEDS,
) -> Controller:
    """Declare the memcached controller on ``cache``; the caller runs it (a Manager)."""
    declare_informers(cache, memcached_resource)
    reconciler = MemcachedReconciler(client, cache, recorder)
    return (
        ControllerBuilder(cache, CONTROLLER_NAME)
        .for_(memcached_resource, spec_changed)
        .owns(DEPLOYMENTS)
        .watches(PODS, pods_to_memcached, label_selector=POD_SELECTOR, shard_key=BY_OWNER_BUCKET)
        .with_options(max_concurrent_reconciles=max_concurrent_reconciles)
        .build(reconciler)
    )
