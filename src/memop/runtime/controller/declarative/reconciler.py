"""The reconciler behind :func:`memop.runtime.controller.declarative.declarative_controller`.

One reconcile of an owner, level-based, reading only the cache:

1. gone: nothing. Being deleted: with a cleanup (``on_delete``), run it once, then remove the
   finalizer; without one there is nothing to do (garbage collection deletes the children).
   A reconcile that reads the owner again before the watch says it is gone (or after a failed
   removal) only removes the finalizer: the cleanup is not run twice by one process.
2. parse the stored owner into its typed class; an object that fails (stored while the webhook
   was off, or by an older version) is reported (``Degraded``/``InvalidSpec`` and one Warning
   Event) and never acted on, nor retried: its next edit wakes it.
3. with a cleanup, add the finalizer (one patch, once).
4. ``desired(owner)``: each child stamped as the owner's (namespace, labels, controller
   ownerReference, digest), mapped to its resource (a kind first met now is watched from now
   on), and server-side applied only when the cached child does not already hold it.
5. prune the owner's children (this controller's label and the owner's uid as controller) that
   ``desired`` no longer returns, each deleted with a uid precondition.
6. the status: the children's readiness (kstatus), the user's fields, written only when changed.

A converged owner therefore costs no request. Failures: an API error from an apply or a delete
is reported in ``Degraded`` and a Warning Event, then raised for the rate-limited retry; a child
that cannot be owned (cluster-scoped or in another namespace than its namespaced owner, or
held by another owner) is reported and not retried at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from memop.runtime.api.errors import InvalidObject
from memop.runtime.cache.cache import Cache, Informer
from memop.runtime.cache.labels import Selector
from memop.runtime.cache.store import Obj, controller_owner_uid
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, Conflict, Forbidden, NamespaceClosed, NotFound
from memop.runtime.client.resources import Resource
from memop.runtime.client.restmapper import RestMapper, UnknownKind
from memop.runtime.controller.applied import holds
from memop.runtime.controller.controller import Controller, WatchSpec
from memop.runtime.controller.declarative.children import (
    CONTROLLER_LABEL,
    ChildError,
    ObservedChild,
    ObservedChildren,
    identity,
    stamp,
    to_object,
)
from memop.runtime.controller.declarative.status import (
    ChildReadiness,
    Problem,
    degraded_as,
    owner_conditions,
    owner_status,
)
from memop.runtime.controller.finalizers import add_finalizer, has_finalizer, remove_finalizer
from memop.runtime.controller.handlers import enqueue_controller_owner
from memop.runtime.controller.readiness import ReadinessRule, readiness
from memop.runtime.controller.reconcile import Request, Result
from memop.runtime.controller.status import update_status
from memop.runtime.manager.events import NORMAL, WARNING, EventRecorder
from memop.runtime.sharding.keys import BY_OWNER_BUCKET
from memop.runtime.util.clock import Clock, RealClock, rfc3339

log = logging.getLogger("memop.declarative")

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

# How soon an owner whose child name is taken by another owner's child looks again: that
# child's events wake the other owner, not this one.
NOT_OWNED_RETRY = 60.0
# How long a reconcile waits for the first list of a kind it just started watching.
NEW_KIND_SYNC_TIMEOUT = 30.0


# Owners remembered as cleaned up while their finalizer is being removed (see _cleaned).
_MAX_CLEANED = 4096


class TypedKind(Protocol[T_co]):
    """What a declarative controller needs of its owner's class (memop's CustomResource)."""

    @classmethod
    def resource(cls) -> Resource: ...

    @classmethod
    def parse(cls, obj: Mapping[str, Any]) -> T_co: ...


Desired = Callable[[Any], Iterable[Any]]
StatusFunc = Callable[[Any, ObservedChildren], Any]
Cleanup = Callable[[Any], Awaitable[None]]


class DeclarativeReconciler:
    """Reconciles owners of ``kind`` towards ``desired``'s children (see the module docstring).
    ``controller`` is set once the controller is built: new kinds are watched through it."""

    def __init__(
        self,
        name: str,
        kind: TypedKind[Any],
        desired: Desired,
        *,
        client: Client,
        cache: Cache,
        recorder: EventRecorder,
        field_manager: str,
        mapper: RestMapper,
        status: StatusFunc | None = None,
        ready: Mapping[str, ReadinessRule] | None = None,
        on_delete: Cleanup | None = None,
        finalizer: str = "",
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.owner_resource = kind.resource()
        self.desired = desired
        self.client = client
        self.cache = cache
        self.recorder = recorder
        self.field_manager = field_manager
        self.mapper = mapper
        self.status = status
        self.ready = dict(ready or {})
        self.on_delete = on_delete
        self.finalizer = finalizer
        self.clock = clock or RealClock()
        self.selector = Selector.parse(f"{CONTROLLER_LABEL}={name}")
        self.controller: Controller | None = None
        # The uids of owners whose on_delete has run: a reconcile that reads one from the cache
        # before its deletion's watch event arrives (the finalizer's removal deleted it), or
        # after a failed removal, removes the finalizer again without cleaning up twice. A uid
        # names one object forever; oldest first, at most _MAX_CLEANED.
        self._cleaned: dict[str, None] = {}
        # Each child kind's informer (label-selected: only this controller's children).
        self.informers: dict[Resource, Informer] = {}
        self._watching = asyncio.Lock()

    def watch(self, resource: Resource, *, at_setup: bool) -> Informer:
        """Watch children of ``resource`` through an informer of their own (``exclusive``: no
        other controller's ``owns(resource)`` takes it for all of the kind's objects)."""
        assert self.controller is not None, "the controller is built before its kinds are watched"
        self.cache.informer(resource, label_selector=self.selector, exclusive=True)
        informer = self.controller.add_watch(self.watch_spec(resource, at_setup=at_setup))
        self.informers[resource] = informer
        return informer

    def watch_spec(self, resource: Resource, *, at_setup: bool) -> WatchSpec:
        """How children of ``resource`` are watched: this controller's label, mapped to their
        owner by the controller ownerReference. Sharded, a kind declared at setup follows its
        owner's bucket; one met at run time is watched whole (shard keys are fixed at start)."""
        owner = self.owner_resource
        mapper = enqueue_controller_owner(owner.group, owner.kind, owner_namespaced=owner.namespaced)
        shard_key = BY_OWNER_BUCKET if at_setup and self.cache.sharded else None
        return WatchSpec(resource, mapper, (), True, self.selector, shard_key)

    # -- the reconcile ---------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        owner = self.cache.get(self.owner_resource, request.name, request.namespace or None)
        if owner is None:
            return None
        if owner["metadata"].get("deletionTimestamp"):
            await self._finish_deletion(owner)
            return None
        try:
            typed = self.kind.parse(owner)
        except InvalidObject as invalid:
            log.warning("invalid %s, not acted on: %s", self.owner_resource.kind, invalid)
            await self._report(owner, Problem("InvalidSpec", str(invalid)), (), None)
            return None
        if self.on_delete is not None and not has_finalizer(owner, self.finalizer):
            owner = await add_finalizer(
                self.client, self.owner_resource, owner, self.finalizer, cache=self.cache
            )
        try:
            returned = list(self.desired(typed))
        except Exception as error:
            # A bug in desired(): said on the object, and raised for the traceback and a retry.
            problem = Problem("DesiredFailed", f"desired() raised {type(error).__name__}: {error}")
            await self._report(owner, problem, (), typed)
            raise
        try:
            wanted = await self._wanted(owner, returned)
        except ChildError as error:
            await self._report(owner, Problem(error.reason, str(error)), (), typed)
            return None
        observed: list[ObservedChild] = []
        try:
            for resource, child in wanted:
                applied = await self._apply(owner, resource, child)
                if applied is None:
                    message = (
                        f"{resource.kind} {child['metadata']['name']} exists and is controlled by "
                        f"another owner: delete it or rename this {self.owner_resource.kind}'s child"
                    )
                    await self._report(owner, Problem("ChildNotOwned", message), observed, typed)
                    return Result(requeue_after=NOT_OWNED_RETRY)
                observed.append(ObservedChild(resource, applied))
            await self._prune(owner, wanted)
        except NamespaceClosed:
            raise  # not a failure: the controller forgets or retries it quietly
        except ApiError as error:
            await self._report(owner, _api_problem(error), observed, typed)
            raise
        await self._report(owner, None, observed, typed)
        return None

    async def _wanted(self, owner: Obj, returned: Iterable[Any]) -> list[tuple[Resource, Obj]]:
        """The children ``desired`` ``returned`` as (resource, stamped configuration), each kind
        watched."""
        labels = {CONTROLLER_LABEL: self.name, **self.cache.shard_labels(owner)}
        wanted: list[tuple[Resource, Obj]] = []
        seen: set[tuple[Resource, str, str]] = set()
        for child in returned:
            obj = to_object(child)
            api_version, kind, _ = identity(obj)
            try:
                resource = await self.mapper.resource_for(api_version, kind)
            except UnknownKind as error:
                raise ChildError("UnknownKind", str(error)) from None
            stamp(obj, resource, owner, self.owner_resource, labels)
            meta = obj["metadata"]
            key = (resource, meta.get("namespace") or "", meta["name"])
            if key in seen:
                raise ChildError("DuplicateChild", f"desired() returned {kind} {meta['name']} twice")
            seen.add(key)
            if resource.namespaced and not self.cache.in_scope(meta.get("namespace")):
                raise ChildError(
                    "NamespaceNotWatched",
                    f"{kind} {meta['name']} is in namespace {meta['namespace']}, which this operator "
                    "does not watch (--watch-namespace)",
                )
            await self._watch(resource)
            wanted.append((resource, obj))
        return wanted

    async def _watch(self, resource: Resource) -> None:
        """Watch children of ``resource`` from now on, waiting (a while) for its first list."""
        if resource in self.informers:
            return
        async with self._watching:
            if resource in self.informers:
                return
            if self.owner_resource.namespaced and not resource.namespaced:
                raise ChildError("ClusterScopedChild", f"{resource.kind} is cluster-scoped: {_HINT}")
            informer = self.watch(resource, at_setup=False)
            log.info("watching a new child kind", extra={"resource": str(resource)})
        waits = [reflector.synced.wait() for reflector in informer.reflectors]
        try:
            async with asyncio.timeout(NEW_KIND_SYNC_TIMEOUT):
                await asyncio.gather(*waits)
        except TimeoutError:
            # Applying is safe without it (the server merges); only the skip and pruning
            # need the cache, and they catch up once it lists.
            log.warning("the cache of %s has not listed yet; applying anyway", resource)

    async def _apply(self, owner: Obj, resource: Resource, child: Obj) -> Obj | None:
        """Apply ``child`` unless the cached one holds it; the child as it now is, or None when
        a child of that name is controlled by another owner."""
        meta = child["metadata"]
        live = self.informers[resource].store.get(meta["name"], meta.get("namespace"))
        if live is not None:
            controller = controller_owner_uid(live)
            if controller is not None and controller != owner["metadata"]["uid"]:
                return None
            if holds(live, child):
                return live
        applied = await self.client.apply(resource, child, field_manager=self.field_manager, force=True)
        self.cache.record_write(resource, applied)
        verb = "Created" if live is None else "Updated"
        self._event(owner, NORMAL, verb, f"{verb} {resource.kind} {_where(meta)}")
        return applied

    async def _prune(self, owner: Obj, wanted: Sequence[tuple[Resource, Obj]]) -> None:
        """Delete the owner's children that ``wanted`` leaves out (ApplySet-like inventory:
        this controller's label, the owner's uid as controller)."""
        keep = {(r, o["metadata"].get("namespace") or "", o["metadata"]["name"]) for r, o in wanted}
        uid = owner["metadata"]["uid"]
        for resource, informer in list(self.informers.items()):
            for child in informer.store.list(None, owner_uid=uid):
                meta = child["metadata"]
                if (resource, meta.get("namespace") or "", meta["name"]) in keep or meta.get(
                    "deletionTimestamp"
                ):
                    continue
                try:
                    await self.client.delete(
                        resource, meta["name"], meta.get("namespace"), preconditions={"uid": meta["uid"]}
                    )
                except (NotFound, Conflict):
                    continue  # gone already, or another object of that name now
                self._event(
                    owner, NORMAL, "Pruned", f"Deleted {resource.kind} {_where(meta)}: no longer desired"
                )

    async def _finish_deletion(self, owner: Obj) -> None:
        if not has_finalizer(owner, self.finalizer):
            return
        if self.on_delete is None:
            await self._let_go(owner)
            return
        try:
            typed = self.kind.parse(owner)
        except InvalidObject as invalid:
            # Cleaning up after a spec that does not parse could remove the wrong things.
            await self._report(owner, Problem("InvalidSpec", str(invalid)), (), None)
            return
        uid = str(owner["metadata"].get("uid") or "")
        if uid not in self._cleaned:
            try:
                await self.on_delete(typed)
            except Exception as error:
                self._event(owner, WARNING, "CleanupFailed", f"on_delete failed: {error}")
                raise
            if len(self._cleaned) >= _MAX_CLEANED:
                del self._cleaned[next(iter(self._cleaned))]
            self._cleaned[uid] = None
        with contextlib.suppress(NotFound):  # NotFound: removed already, the object is gone
            await remove_finalizer(self.client, self.owner_resource, owner, self.finalizer, cache=self.cache)

    async def _let_go(self, owner: Obj) -> None:
        """Remove the finalizer a version of this controller with ``on_delete`` left on an owner
        now being deleted: there is no cleanup to run any more, and keeping it would hold the
        owner forever. Without ``patch`` on the owner's kind (RBAC derived from a definition with
        no ``on_delete`` does not grant it) the user is told how, once, and it is not retried."""
        try:
            await remove_finalizer(self.client, self.owner_resource, owner, self.finalizer, cache=self.cache)
        except Forbidden as error:
            message = (
                f"finalizer {self.finalizer} was added by a version of this controller with on_delete; "
                f"this one has none and may not remove it ({error.message}): remove it from "
                "metadata.finalizers, or grant patch on this kind"
            )
            log.warning("%s %s: %s", self.owner_resource.kind, _where(owner["metadata"]), message)
            self._event(owner, WARNING, "FinalizerLeft", message)
        except NotFound:
            return

    # -- the status ------------------------------------------------------------------------

    async def _report(
        self, owner: Obj, problem: Problem | None, observed: Iterable[ObservedChild], typed: Any
    ) -> None:
        """Write the owner's status (only when it changed), and a Warning Event for a problem
        its conditions do not already report."""
        meta = owner["metadata"]
        generation = int(meta.get("generation") or 0)
        stored = owner.get("status")
        current: dict[str, Any] = stored if isinstance(stored, dict) else {}
        if problem is not None and not degraded_as(current.get("conditions"), problem, generation):
            self._event(owner, WARNING, problem.reason, problem.message)
        children = list(observed)
        states = [
            ChildReadiness(
                c.resource, c.name, readiness(c.object, c.resource.group, c.resource.kind, self.ready)
            )
            for c in children
        ]
        conditions = owner_conditions(
            current.get("conditions"), generation, problem, states, rfc3339(self.clock.time())
        )
        extra = None
        if self.status is not None and typed is not None and problem is None:
            extra = _status_fields(self.status(typed, ObservedChildren(children)))
        await update_status(
            self.client,
            self.cache,
            self.owner_resource,
            owner,
            owner_status(current, generation, conditions, extra),
        )

    def _event(self, owner: Obj, event_type: str, reason: str, message: str) -> None:
        # Cached objects may lack apiVersion and kind (list items): the Event needs them.
        involved = {**owner, "apiVersion": self.owner_resource.api_version, "kind": self.owner_resource.kind}
        self.recorder.record(involved, event_type, reason, message)


_HINT = (
    "an ownerReference cannot point from it to a namespaced owner; write it with "
    "owner_annotations() and watch it with map_to_annotated_owner() (memop.runtime.controller.handlers)"
)


def _where(meta: Mapping[str, Any]) -> str:
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def _api_problem(error: ApiError) -> Problem:
    if isinstance(error, Forbidden):
        return Problem("Forbidden", f"the operator's RBAC does not allow it: {error}")
    return Problem("ApplyFailed", str(error))


def _status_fields(extra: Any) -> dict[str, Any]:
    """The user's status fields as JSON: a mapping, or a model (by alias, without None)."""
    if extra is None:
        return {}
    if isinstance(extra, Mapping):
        fields = dict(extra)
    elif hasattr(extra, "to_dict"):
        fields = extra.to_dict()
    else:
        raise TypeError(f"status() returned a {type(extra).__name__}, not a mapping or a model")
    fields.pop("conditions", None)
    fields.pop("observedGeneration", None)
    return fields
