"""The MyPod reconciler and its wiring: one owned pod per MyPod, its status from the cache.

Level-based: a reconcile reads the MyPod and the pod of its name from the cache, makes at most
one write to the pod (create, or delete to replace it: see ``memop.mypod.desired`` for how a
change is detected) and writes the status when it changed.
A converged MyPod costs no request.

A pod is replaced in two steps: the old one is deleted (with its uid as precondition) and the
new one created by a later reconcile, once the watch reports the old one gone. On a real
cluster a deleted pod lingers with a deletionTimestamp until its kubelet has stopped it, and a
pod of the same name cannot be created before; waiting for the watch costs nothing, where
retrying the create would fail until then.

What memop cannot fix becomes a Degraded condition, a Warning Event and one log line (the
Event and the line only when the condition is new):
- InvalidSpec: the spec lacks the schema's shape (the CRD was installed without its schema).
- PodInvalid: the API server refused the pod (422, or 400 when it cannot decode it), in its
  words. Retrying cannot fix it: memop does not try the same generation again, the next one
  is reconciled.
- PodConflict: a pod of that name exists that this MyPod does not control (or without the
  label memop finds its pods by). Never taken over; rechecked every BLOCKED_RECHECK_SECONDS,
  since its removal sends no event memop watches. (A pod left by a deleted MyPod of the same
  name is no conflict: the garbage collector deletes it, and the watch says when.)
- PodForbidden: 403 (RBAC, a quota, Pod Security admission), rechecked likewise. Not when the
  namespace is being deleted (or gone): that is no failure, the runtime says it once and
  retries nothing (``NamespaceClosed``).
Anything else the API server answers is a ReconcileError, retried with backoff.

Watches: MyPods (generation changes and deletion: memop's status writes trigger nothing) and,
through their own informer, the pods labelled :data:`~memop.mypod.desired.LABEL`, mapped to
their controlling MyPod.
"""

from __future__ import annotations

import logging

from memop.mypod.api import MYPODS, InvalidSpec, MyPodSpec, parse_spec
from memop.mypod.desired import (
    LABEL,
    METADATA,
    SPEC_HASH,
    desired_pod,
    left_by_namesake,
    replacement_reason,
    spec_hash,
)
from memop.mypod.status import DEGRADED, Failure, compute_status
from memop.runtime.api.conditions import TRUE, find_condition
from memop.runtime.cache.cache import Cache
from memop.runtime.cache.labels import EQUALS, Requirement, Selector
from memop.runtime.cache.store import Obj, controller_owner_uid
from memop.runtime.client.client import Client
from memop.runtime.client.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    NamespaceClosed,
    NotFound,
    TransportError,
)
from memop.runtime.client.resources import PODS
from memop.runtime.controller import predicates
from memop.runtime.controller.controller import Controller, ControllerBuilder
from memop.runtime.controller.definition import SetupContext
from memop.runtime.controller.reconcile import Request, Result
from memop.runtime.controller.status import update_status
from memop.runtime.manager.events import NORMAL, WARNING, EventRecorder
from memop.runtime.sharding.ring import BUCKET_LABEL
from memop.runtime.util.clock import Clock, RealClock, rfc3339

log = logging.getLogger("memop.mypod")

CONTROLLER_NAME = "mypod"
BLOCKED_RECHECK_SECONDS = 60.0
# memop's pods informer holds only the pods of MyPods: the rest of a cluster's pods never reach it.
POD_SELECTOR = Selector.parse(LABEL)


class _Blocked(Exception):
    """The pod cannot be written until someone else acts; look again later."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class MyPodReconciler:
    """Drives one MyPod towards its pod and status. See the module docstring."""

    def __init__(
        self, client: Client, cache: Cache, recorder: EventRecorder, clock: Clock | None = None
    ) -> None:
        self.client = client
        self.cache = cache
        self.recorder = recorder
        self._clock = clock or RealClock()

    async def reconcile(self, request: Request) -> Result | None:
        mypod = self.cache.get(MYPODS, request.name, request.namespace)
        if mypod is None or mypod["metadata"].get("deletionTimestamp"):
            return None  # its pod is garbage-collected through the ownerReference
        pod = self._cached_pod(mypod)
        try:
            spec = parse_spec(mypod)
        except InvalidSpec as invalid:
            await self._report(mypod, pod, None, Failure("InvalidSpec", str(invalid)))
            return None  # the next edit of the spec is reconciled
        digest = spec_hash(spec)
        refused = _refused(mypod)
        if refused is not None:
            # The API server refused this generation's pod; it would refuse it again.
            await self._write_status(mypod, pod, digest, refused)
            return None
        try:
            pod = await self._converge(mypod, spec, pod)
        except _Blocked as blocked:
            await self._report(mypod, pod, digest, blocked.failure)
            return Result(requeue_after=BLOCKED_RECHECK_SECONDS)
        except (Invalid, BadRequest) as error:
            # 422, or 400 when the pod cannot even be decoded (a string where a list belongs).
            await self._report(mypod, pod, digest, Failure("PodInvalid", error.message))
            return None
        except NamespaceClosed:
            # The namespace is being deleted (its 403 is no permission problem) or gone: nothing
            # to report or retry, the controller says it once (memop.runtime.controller).
            raise
        except Forbidden as error:
            await self._report(mypod, pod, digest, Failure("PodForbidden", error.message))
            return Result(requeue_after=BLOCKED_RECHECK_SECONDS)
        except Conflict:
            raise  # someone wrote first: requeued promptly, nothing for the user to see
        except ApiError as error:
            message = f"failed to reconcile Pod {request.name}: {error}"
            await self._report(mypod, pod, digest, Failure("ReconcileError", message), quiet=True)
            raise  # retried with backoff; the controller logs it
        await self._write_status(mypod, pod, digest)
        return None

    def _cached_pod(self, mypod: Obj) -> Obj | None:
        """The cached pod of ``mypod``'s name and label, whoever controls it."""
        meta = mypod["metadata"]
        # The label's value is not validated: a name too long for it selects nothing.
        selector = Selector((*POD_SELECTOR.requirements, Requirement(LABEL, EQUALS, (meta["name"],))))
        pods = self.cache.list(PODS, meta["namespace"], selector=selector)
        return next((p for p in pods if p["metadata"].get("name") == meta["name"]), None)

    async def _converge(self, mypod: Obj, spec: MyPodSpec, pod: Obj | None) -> Obj | None:
        """At most one write towards the desired pod; returns the pod as memop now knows it."""
        meta = mypod["metadata"]
        name, namespace = meta["name"], meta["namespace"]
        if pod is None:
            try:
                desired = desired_pod(mypod, spec, self.cache.shard_labels(mypod))
                created = await self.client.create(PODS, desired, namespace)
            except AlreadyExists:
                raise _Blocked(
                    Failure(
                        "PodConflict",
                        f"Pod {name} already exists and is not this MyPod's: it is not controlled by"
                        f" it or lacks the label {LABEL}={name}; delete or rename it",
                    )
                ) from None
            self.cache.record_write(PODS, created)
            self.recorder.record(mypod, NORMAL, "Created", f"Created Pod {name}")
            log.info("created pod %s", name)
            return created
        if pod["metadata"].get("deletionTimestamp") or left_by_namesake(pod, mypod):
            return pod  # its deletion comes through the watch; then a new one is created
        if controller_owner_uid(pod) != meta["uid"]:
            message = f"Pod {name} exists and is not controlled by this MyPod; delete or rename it"
            raise _Blocked(Failure("PodConflict", message))
        reason = replacement_reason(pod, spec)
        if reason is None:
            return pod
        return await self._delete(mypod, pod, reason)

    async def _delete(self, mypod: Obj, pod: Obj, reason: str) -> Obj:
        """Delete the pod of an older spec; returns it as it lingers, or as cached."""
        name = pod["metadata"]["name"]
        try:
            answer = await self.client.delete(
                PODS, name, pod["metadata"]["namespace"], preconditions={"uid": pod["metadata"]["uid"]}
            )
        except NotFound:
            answer = None  # already gone: the watch brings the news, then the new pod is created
        message = f"{reason}: deleted Pod {name}, the new one is created once it is gone"
        self.recorder.record(mypod, NORMAL, "Replacing", message)
        log.info("%s: deleted pod %s to replace it", reason, name)
        if answer is not None and (answer.get("metadata") or {}).get("deletionTimestamp"):
            self.cache.record_write(PODS, answer)  # so the next reconcile does not delete it again
            return answer
        return pod

    async def _report(
        self, mypod: Obj, pod: Obj | None, digest: str | None, failure: Failure, *, quiet: bool = False
    ) -> None:
        """The Degraded condition; with a Warning Event and a log line when it is new. Never raises."""
        if not _reported(mypod, failure):
            self.recorder.record(mypod, WARNING, failure.reason, failure.message)
            if not quiet:
                log.warning("%s: %s", failure.reason, failure.message)
        try:
            await self._write_status(mypod, pod, digest, failure)
        except (ApiError, TransportError) as error:
            log.warning("could not record the failure in status either: %s", error)

    async def _write_status(
        self, mypod: Obj, pod: Obj | None, digest: str | None, failure: Failure | None = None
    ) -> None:
        status = compute_status(mypod, pod, digest, rfc3339(self._clock.time()), failure)
        await update_status(self.client, self.cache, MYPODS, mypod, status)


def _degraded(mypod: Obj) -> dict[str, object] | None:
    """The Degraded condition when it is True for the MyPod's current generation."""
    status = mypod.get("status")
    found = find_condition(status.get("conditions") if isinstance(status, dict) else None, DEGRADED)
    if found is None or found.get("status") != TRUE:
        return None
    return found if found.get("observedGeneration") == mypod["metadata"].get("generation") else None


def _refused(mypod: Obj) -> Failure | None:
    """The API server's refusal of this generation's pod, when the status records one."""
    found = _degraded(mypod)
    if found is None or found.get("reason") != "PodInvalid":
        return None
    return Failure("PodInvalid", str(found.get("message") or ""))


def _reported(mypod: Obj, failure: Failure) -> bool:
    found = _degraded(mypod)
    return found is not None and (found.get("reason"), found.get("message")) == failure


_POD_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "ownerReferences",
)


def pod_transform(pod: Obj) -> Obj:
    """Keep what the reconciler reads of a pod: its identity and owner, memop's label and
    annotations (the user's labels and annotations are compared through METADATA, the spec
    through SPEC_HASH, so neither is kept) and the status fields a MyPod reports."""
    meta = pod.get("metadata") or {}
    status = pod.get("status")
    if not isinstance(status, dict):
        status = {}
    kept: Obj = {k: meta[k] for k in _POD_METADATA if k in meta}
    for field, keys in (("labels", (LABEL, BUCKET_LABEL)), ("annotations", (SPEC_HASH, METADATA))):
        values = meta.get(field)
        if isinstance(values, dict):
            kept[field] = {k: values[k] for k in keys if k in values}
    kept_status = {k: status[k] for k in ("phase", "podIP", "hostIP") if k in status}
    conditions = status.get("conditions")
    ready = find_condition(conditions if isinstance(conditions, list) else None, "Ready")
    if ready is not None:
        kept_status["conditions"] = [{"type": "Ready", "status": ready.get("status")}]
    return {"metadata": kept, "status": kept_status}


def mypod_transform(mypod: Obj) -> Obj:
    """A MyPod without its annotations, which the reconciler never reads (``kubectl apply``
    keeps a copy of the whole object there, podSpec included). Status is written by patch,
    so nothing dropped can be written back."""
    meta = mypod.get("metadata")
    if not isinstance(meta, dict) or "annotations" not in meta:
        return mypod
    return {**mypod, "metadata": {k: v for k, v in meta.items() if k != "annotations"}}


def declare_informers(cache: Cache) -> None:
    """The informers the controller reads, with their transforms (fixed by the first caller)."""
    cache.informer(MYPODS, transform=mypod_transform)
    cache.informer(PODS, transform=pod_transform, label_selector=POD_SELECTOR)


def setup(context: SetupContext) -> Controller:
    """Declare the mypod controller on ``context.cache``; the caller runs it (a Manager)."""
    declare_informers(context.cache)
    return (
        ControllerBuilder(context.cache, CONTROLLER_NAME)
        .for_(MYPODS, predicates.generation_changed)
        .owns(PODS, label_selector=POD_SELECTOR)
        .with_options(max_concurrent_reconciles=context.max_concurrent_reconciles)
        .build(MyPodReconciler(context.client, context.cache, context.recorder))
    )
