"""The namespace controller, simulated: a Terminating namespace is emptied, then removed.

When a namespace has a deletionTimestamp, every object of every namespaced resource in it is
deleted (background propagation, at most :data:`BATCH` per sync so the event loop keeps
serving). Objects with finalizers stay until whoever owns the finalizer removes it; the
namespace's status conditions say what remains, with upstream's types, reasons and messages.
Once nothing is left, ``kubernetes`` is removed from ``spec.finalizers`` through the
``finalize`` subresource, and the API server removes the namespace for good (unless other spec
or metadata finalizers are still there, as in a real cluster).

The namespace is synced again whenever an object in it disappears, and every
:data:`RECHECK` seconds while content remains (a backstop, as upstream requeues).
"""

from __future__ import annotations

from memop.runtime.util.clock import Clock
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.store import Store, StoreEvent
from memop.testing.controllers.cache import ObjectCache
from memop.testing.controllers.common import (
    Obj,
    WorkLoop,
    being_deleted,
    meta,
    metadata_for_write,
    rfc3339,
    status_body,
)

BATCH = 500
RECHECK = 2.0
FINALIZER = "kubernetes"


def _join_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{what} in {n} resource instances" for what, n in sorted(counts.items()))


def deletion_conditions(
    remaining: dict[str, int], finalizers: dict[str, int]
) -> list[tuple[str, str, str, str]]:
    """(type, status, reason, message) of a Terminating namespace's conditions, given how many
    objects remain per ``<resource>.<group>`` and how many hold each finalizer."""
    if remaining:
        listed = ", ".join(f"{gr} has {n} resource instances" for gr, n in sorted(remaining.items()))
        content = ("True", "SomeResourcesRemain", f"Some resources are remaining: {listed}")
    else:
        content = ("False", "ContentRemoved", "All content successfully removed")
    if finalizers:
        held = (
            "True",
            "SomeFinalizersRemain",
            f"Some content in the namespace has finalizers remaining: {_join_counts(finalizers)}",
        )
    else:
        held = ("False", "ContentHasNoFinalizers", "All content-preserving finalizers finished")
    return [
        (
            "NamespaceDeletionDiscoveryFailure",
            "False",
            "ResourcesDiscovered",
            "All resources successfully discovered",
        ),
        (
            "NamespaceDeletionGroupVersionParsingFailure",
            "False",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
        ),
        (
            "NamespaceDeletionContentFailure",
            "False",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
        ("NamespaceContentRemaining", *content),
        ("NamespaceFinalizersRemaining", *held),
    ]


class NamespaceController:
    """Empties and removes Terminating namespaces (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock) -> None:
        self._store = store
        self._cache = cache
        self._clock = clock
        self._namespaces = store.resource("", "v1", "namespaces")
        # Names of namespaces with a deletionTimestamp, kept from events so that the deletion
        # of any object in one of them can wake its namespace cheaply.
        self._terminating: set[str] = set()
        self.loop: WorkLoop[str] = WorkLoop("namespace", self._sync, clock=clock, workers=1)

    def on_event(self, event: StoreEvent) -> None:
        """Track Terminating namespaces; wake one when something in it is deleted."""
        m = meta(event.obj)
        if event.rtype.group == "" and event.rtype.kind == "Namespace":
            name = m.get("name", "")
            if event.type == "DELETED":
                self._terminating.discard(name)
            elif being_deleted(event.obj):
                self._terminating.add(name)
                self.loop.add(name)
            return
        if event.type == "DELETED" and self._terminating:
            ns = m.get("namespace")
            if ns in self._terminating:
                self.loop.add(ns)

    def _sync(self, name: str) -> float | None:
        ns = self._cache.get(self._namespaces, None, name)
        if ns is None or not being_deleted(ns):
            return None
        remaining: dict[str, int] = {}
        finalizers: dict[str, int] = {}
        deleted = 0
        # Several served versions (or groups: core and events.k8s.io Events) can list the same
        # stored object; each is handled once.
        seen: set[str] = set()
        for rtype in self._store.resources():
            if not rtype.namespaced:
                continue
            try:
                items, _ = self._store.list(rtype, name)
            except ApiError as err:
                if err.code in (404, 405):
                    continue
                raise
            for obj in items:
                m = meta(obj)
                if m.get("uid") in seen:
                    continue
                seen.add(m.get("uid", ""))
                if not being_deleted(obj):
                    if deleted >= BATCH:
                        continue
                    deleted += 1
                    try:
                        self._store.delete(
                            rtype,
                            name,
                            m["name"],
                            propagation_policy="Background",
                            preconditions={"uid": m["uid"]},
                        )
                    except ApiError as err:
                        if err.code not in (404, 409):
                            raise
                    continue
                remaining[f"{rtype.plural}.{rtype.group}"] = (
                    remaining.get(f"{rtype.plural}.{rtype.group}", 0) + 1
                )
                for finalizer in m.get("finalizers") or []:
                    finalizers[finalizer] = finalizers.get(finalizer, 0) + 1
        if deleted:
            return 0.0  # look again: count what the deletions left behind
        self._write_conditions(ns, remaining, finalizers)
        if remaining:
            return RECHECK
        self._finalize(name)
        return None

    def _write_conditions(self, ns: Obj, remaining: dict[str, int], finalizers: dict[str, int]) -> None:
        status = ns.get("status") or {}
        old = {c.get("type"): c for c in status.get("conditions") or []}
        stamp = rfc3339(self._clock.time())
        conditions = []
        changed = False
        for type_, value, reason, message in deletion_conditions(remaining, finalizers):
            prev = old.get(type_)
            if prev is not None and (prev.get("status"), prev.get("reason"), prev.get("message")) == (
                value,
                reason,
                message,
            ):
                conditions.append(prev)
                continue
            changed = True
            since = (
                prev.get("lastTransitionTime") if prev is not None and prev.get("status") == value else stamp
            )
            conditions.append(
                {
                    "type": type_,
                    "status": value,
                    "lastTransitionTime": since,
                    "reason": reason,
                    "message": message,
                }
            )
        if not changed:
            return
        body = status_body(ns, {**status, "conditions": conditions})
        self._store.update(self._namespaces, None, meta(ns)["name"], body, subresource="status")

    def _finalize(self, name: str) -> None:
        ns = self._cache.get(self._namespaces, None, name)
        spec_finalizers = ((ns or {}).get("spec") or {}).get("finalizers") or []
        if ns is not None and FINALIZER in spec_finalizers:
            spec = {**(ns.get("spec") or {}), "finalizers": [f for f in spec_finalizers if f != FINALIZER]}
            body = {**ns, "metadata": metadata_for_write(ns), "spec": spec}
            # With no finalizer left anywhere, the API server removes the namespace on this write.
            self._store.update(self._namespaces, None, name, body, subresource="finalize")
