"""The PodSet reconciler and its wiring: ``spec.replicas`` pods, managed directly, and status.

Level-based: each reconcile reads the PodSet and its pods from the cache (an indexed lookup by
owner uid, never a scan), creates or deletes the difference, and writes status only when it
changed, so a converged PodSet costs no request.

It never makes more pods than asked, even when its cache lags behind its own writes, which is
where a naive controller creates twice: every write is recorded in the cache
(``Cache.record_write``: the next reconcile reads its own creates), and guarded by expectations
(``memop.runtime.controller.expectations``, as the ReplicaSet controller does): while pods it created or
deleted are not yet observed, a reconcile reports status but neither creates nor deletes, and a
pod it deleted is not counted even if the cache still shows it. A delete answered 404 (someone
deleted the pod first) keeps its expectation: that deletion is on its way through the watch, and
until it arrives the pod must not be counted either (the ReplicaSet controller lowers it instead
and may delete one pod too many meanwhile).

Pods are created in batches of 1, 2, 4... (the ReplicaSet controller's slow start), at most
:data:`BURST_REPLICAS` per reconcile. A pod the API server refuses (400/422: the template cannot
make a valid pod) makes the PodSet Degraded (InvalidTemplate) with the server's message and a
Warning Event; no pod is created again for that generation of the PodSet, with no retry: the
next edit of the spec tries again. Other failures are retried with backoff.

Watches: the PodSet (generation changes and deletion: our own status writes do not trigger
reconciles) and its pods (their own informer, selected by the instance label and stripped to
what is read here), so a pod deleted or failed behind its back is replaced at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from memop.podset.api import GROUP, KIND, PODSETS, InvalidSpec, PodSetSpec, parse_spec
from memop.podset.desired import INSTANCE_LABEL, desired_pod, is_active, pods_to_delete
from memop.podset.status import DEGRADED, compute_status
from memop.runtime.api.conditions import find_condition
from memop.runtime.cache.cache import Cache
from memop.runtime.cache.labels import EQUALS, Requirement, Selector
from memop.runtime.cache.store import Obj
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, BadRequest, Conflict, Invalid, NamespaceClosed, NotFound
from memop.runtime.client.resources import PODS
from memop.runtime.controller import predicates
from memop.runtime.controller.controller import Controller, ControllerBuilder
from memop.runtime.controller.definition import SetupContext
from memop.runtime.controller.expectations import Expectations
from memop.runtime.controller.reconcile import Request, Result
from memop.runtime.controller.status import update_status
from memop.runtime.manager.events import NORMAL, WARNING, EventRecorder
from memop.runtime.sharding.ring import BUCKET_LABEL
from memop.runtime.util.clock import Clock, RealClock, rfc3339

log = logging.getLogger("memop.podset")

CONTROLLER_NAME = "podset"
# Pods created by one reconcile at most (the ReplicaSet controller's burstReplicas).
BURST_REPLICAS = 500
INVALID_TEMPLATE = "InvalidTemplate"

# Only the PodSets' pods are watched: other pods (most of a cluster's) never reach this
# informer. Reads add the PodSet's name to it (see instance_selector).
POD_SELECTOR = Selector.parse(INSTANCE_LABEL)


def instance_selector(name: str) -> Selector:
    """The pods of the PodSet ``name``; implies POD_SELECTOR, so the read goes to its informer."""
    return Selector([*POD_SELECTOR.requirements, Requirement(INSTANCE_LABEL, EQUALS, (name,))])


def owner_request(pod: Obj) -> Request | None:
    """The PodSet that controls ``pod`` (the expectations' key), if one does."""
    meta = pod.get("metadata") or {}
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if (
            isinstance(ref, dict)
            and ref.get("controller") is True
            and ref.get("kind") == KIND
            and str(ref.get("apiVersion") or "").partition("/")[0] == GROUP
            and isinstance(ref.get("name"), str)
        ):
            return Request(str(meta.get("namespace") or ""), ref["name"])
    return None


class PodSetReconciler:
    """Drives one PodSet towards ``spec.replicas`` pods. See the module docstring."""

    def __init__(
        self,
        client: Client,
        cache: Cache,
        recorder: EventRecorder,
        expectations: Expectations[Request],
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.cache = cache
        self.recorder = recorder
        self.expectations = expectations
        self._clock = clock or RealClock()

    async def reconcile(self, request: Request) -> Result | None:
        podset = self.cache.get(PODSETS, request.name, request.namespace)
        if podset is None:
            self.expectations.forget(request)
            return None  # gone: its pods are garbage-collected through their ownerReference
        if podset["metadata"].get("deletionTimestamp"):
            return None  # going: the garbage collector takes its pods, nothing to add
        try:
            spec = parse_spec(podset)
        except InvalidSpec as invalid:
            # Retrying cannot fix a bad spec; its next edit triggers a reconcile.
            log.warning("invalid spec: %s", invalid)
            self.recorder.record(podset, WARNING, "InvalidSpec", str(invalid))
            await self._write_status(request, podset, None, ("InvalidSpec", str(invalid)))
            return None
        degraded = None
        if self.expectations.satisfied(request):
            degraded = await self._scale(request, podset, spec)
        await self._write_status(request, podset, spec.replicas, degraded)
        # Writes not observed yet: their events wake us; if they never come, the TTL does.
        wait = self.expectations.expires_in(request)
        return Result(requeue_after=wait) if wait else None

    def _pods(self, request: Request, podset: Obj) -> list[Obj]:
        """The PodSet's pods that count (active, and not deleted by us already)."""
        meta = podset["metadata"]
        deleted = self.expectations.pending_deletions(request)
        pods = self.cache.list(
            PODS, meta["namespace"], selector=instance_selector(meta["name"]), owner_uid=meta["uid"]
        )
        return [p for p in pods if is_active(p) and p["metadata"].get("uid") not in deleted]

    async def _scale(self, request: Request, podset: Obj, spec: PodSetSpec) -> tuple[str, str] | None:
        """Create or delete the difference; the Degraded (reason, message) to report, if any."""
        pods = self._pods(request, podset)
        missing = spec.replicas - len(pods)
        if missing > 0:
            refused = _refused_template(podset)
            if refused is not None:
                return refused  # this generation's template was refused: wait for an edit
            return await self._create(request, podset, spec, min(missing, BURST_REPLICAS))
        if missing < 0:
            return await self._delete(request, podset, spec, pods_to_delete(pods, -missing))
        return None

    async def _create(
        self, request: Request, podset: Obj, spec: PodSetSpec, count: int
    ) -> tuple[str, str] | None:
        # Debug: each pod's Event says it at info level, and a line per scale-up costs more CPU
        # than the reconcile around it.
        log.debug("creating %d pods", count)
        self.expectations.expect(request, creations=count)  # before: the watch may be first
        done, batch, error = 0, 1, None
        while done < count and error is None:
            size = min(batch, count - done)
            results = await asyncio.gather(
                *(self._create_one(request, podset, spec) for _ in range(size)), return_exceptions=True
            )
            error = _first_error(results)
            done, batch = done + size, batch * 2
        for _ in range(count - done):
            self.expectations.creation_observed(request)  # skipped after a failure: never observed
        if error is None:
            return None
        if isinstance(error, NamespaceClosed):
            # Being deleted or gone: no failure to report, the runtime says it once, no retry.
            raise error
        message = f"failed to create a pod: {_describe(error)}"
        if isinstance(error, Invalid | BadRequest):
            # The template cannot make a valid pod: retrying cannot help, an edit of the spec can.
            log.warning("%s", message)
            self.recorder.record(podset, WARNING, "FailedCreate", message)
            return (INVALID_TEMPLATE, message)
        await self._fail(request, podset, spec, ("FailedCreate", message), error)

    async def _create_one(self, request: Request, podset: Obj, spec: PodSetSpec) -> None:
        try:
            created = await self.client.create(
                PODS,
                desired_pod(podset, spec, self.cache.shard_labels(podset)),
                podset["metadata"]["namespace"],
            )
        except BaseException:
            self.expectations.creation_observed(request)  # failed: will never be observed
            raise
        self.cache.record_write(PODS, created)
        name = created["metadata"]["name"]
        self.recorder.record(podset, NORMAL, "SuccessfulCreate", f"Created pod: {name}")

    async def _delete(
        self, request: Request, podset: Obj, spec: PodSetSpec, victims: Sequence[Mapping[str, Any]]
    ) -> tuple[str, str] | None:
        log.debug("deleting pods %s", ", ".join(str(p["metadata"].get("name")) for p in victims))
        uids = [str(p["metadata"].get("uid")) for p in victims]
        self.expectations.expect(request, deletions=uids)  # before: the watch may be first
        results = await asyncio.gather(
            *(self._delete_one(request, podset, pod) for pod in victims), return_exceptions=True
        )
        error = _first_error(results)
        if error is None:
            return None
        await self._fail(
            request, podset, spec, ("FailedDelete", f"failed to delete a pod: {_describe(error)}"), error
        )

    async def _delete_one(self, request: Request, podset: Obj, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            # The uid precondition: never a pod that took the name of the one we chose.
            answer = await self.client.delete(
                PODS, meta["name"], meta["namespace"], preconditions={"uid": meta["uid"]}
            )
        except (NotFound, Conflict):
            # Deleted already (by someone, or replaced under its name): its deletion is on its
            # way through the watch, so the expectation stays until it arrives (or expires).
            return
        except BaseException:
            self.expectations.deletion_observed(request, meta["uid"])  # will never be observed
            raise
        if answer is not None and (answer.get("metadata") or {}).get("deletionTimestamp"):
            # Graceful deletion: the pod lingers, terminating. (An immediate delete answers
            # with the pod as it was: nothing newer to record.)
            self.cache.record_write(PODS, answer)
        self.recorder.record(podset, NORMAL, "SuccessfulDelete", f"Deleted pod: {meta['name']}")

    async def _fail(
        self, request: Request, podset: Obj, spec: PodSetSpec, failure: tuple[str, str], error: Exception
    ) -> NoReturn:
        """Report a failed write where the user looks (a Warning Event and Degraded, with the
        ``failure``'s reason and message) and raise it: the controller logs it and retries."""
        self.recorder.record(podset, WARNING, *failure)
        await self._write_status(request, podset, spec.replicas, failure)
        raise error

    async def _write_status(
        self, request: Request, podset: Obj, replicas: int | None, degraded: tuple[str, str] | None
    ) -> None:
        now = rfc3339(self._clock.time())
        status = compute_status(podset, replicas, self._pods(request, podset), now, degraded)
        await update_status(self.client, self.cache, PODSETS, podset, status)


def _refused_template(podset: Obj) -> tuple[str, str] | None:
    """(reason, message) when this generation of the PodSet already had its template refused."""
    status = podset.get("status")
    condition = find_condition(status.get("conditions") if isinstance(status, dict) else None, DEGRADED)
    if (
        condition is not None
        and condition.get("reason") == INVALID_TEMPLATE
        and condition.get("observedGeneration") == podset["metadata"].get("generation")
    ):
        return (INVALID_TEMPLATE, str(condition.get("message") or ""))
    return None


def _first_error(results: Sequence[object]) -> Exception | None:
    """The first failure among ``asyncio.gather``'s results; a cancellation is raised."""
    for result in results:
        if isinstance(result, Exception):
            return result
        if isinstance(result, BaseException):
            raise result
    return None


def _describe(error: BaseException) -> str:
    return error.message if isinstance(error, ApiError) else str(error)


def pod_transform(pod: Obj) -> Obj:
    """Keep what the reconciler reads of a pod: identity and age (name, uid, creationTimestamp
    for the scale-down order), deletionTimestamp, the instance label (the informer's and
    reads' selector), the controller reference (the cache's owner index), the phase and the
    Ready condition's status. Pods are the bulk of the cache; the rest is never read."""
    meta = pod.get("metadata") or {}
    status = pod.get("status")
    status = status if isinstance(status, dict) else {}
    keep = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")
    kept_meta: Obj = {k: meta[k] for k in keep if k in meta}
    labels = meta.get("labels")
    if isinstance(labels, dict) and INSTANCE_LABEL in labels:
        kept_meta["labels"] = {k: labels[k] for k in (INSTANCE_LABEL, BUCKET_LABEL) if k in labels}
    refs = meta.get("ownerReferences")
    controllers = [
        {k: ref[k] for k in ("apiVersion", "kind", "name", "uid", "controller") if k in ref}
        for ref in (refs if isinstance(refs, list) else ())
        if isinstance(ref, dict) and ref.get("controller") is True
    ]
    if controllers:
        kept_meta["ownerReferences"] = controllers
    kept_status: Obj = {"phase": status["phase"]} if "phase" in status else {}
    conditions = status.get("conditions")
    ready = [
        {"type": "Ready", "status": c.get("status")}
        for c in (conditions if isinstance(conditions, list) else ())
        if isinstance(c, dict) and c.get("type") == "Ready"
    ]
    if ready:
        kept_status["conditions"] = ready[:1]
    return {"metadata": kept_meta, "status": kept_status}


def declare_informers(cache: Cache, expectations: Expectations[Request]) -> None:
    """The informers the reconciler reads, declared before anything else asks for them (the
    first caller fixes a transform), with ``expectations`` observing the pods."""
    cache.informer(PODSETS)
    pods = cache.informer(
        PODS,
        label_selector=POD_SELECTOR,
        transform=pod_transform,
        # Equal across a PodSet's pods: held once (see memop.runtime.cache.sharing).
        shared=(("metadata", "labels"), ("metadata", "ownerReferences"), ("status",)),
    )
    # Before the controller's handlers: a reconcile a pod event triggers sees it observed.
    pods.add_handler(expectations.handler(owner_request))


def setup(context: SetupContext) -> Controller:
    """Declare the podset controller on ``context.cache``; the caller runs it (a Manager)."""
    expectations: Expectations[Request] = Expectations()
    declare_informers(context.cache, expectations)
    return (
        ControllerBuilder(context.cache, CONTROLLER_NAME)
        .for_(PODSETS, predicates.generation_changed)
        .owns(PODS, label_selector=POD_SELECTOR)
        .with_options(max_concurrent_reconciles=context.max_concurrent_reconciles)
        .build(PodSetReconciler(context.client, context.cache, context.recorder, expectations))
    )
