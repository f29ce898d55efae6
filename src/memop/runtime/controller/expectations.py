"""Expectations: the writes a controller made that its cache has not shown it yet.

After a controller creates or deletes children, its cache learns of it only when the watch
delivers the change. A reconcile in between (another event of the same owner, a forced
requeue) would count the old children and create or delete again. The controllers of
kube-controller-manager (ReplicaSet, Job, DaemonSet) guard against this with expectations
(``k8s.io/kubernetes/pkg/controller/controller_utils.go``: ControllerExpectations and
UIDTrackingControllerExpectations), and this module is theirs:

- before writing, the controller records for the owner (any hashable key) how many creations
  and which deletions it expects (:meth:`Expectations.expect`, which replaces whatever was
  recorded for that key);
- an informer event handler (:meth:`Expectations.handler`) lowers them as the cache observes
  each write: an ADDED object is a creation, a DELETED object or one that gained a
  ``deletionTimestamp`` is the deletion of its uid (graceful deletion counts once, at its start);
- until they are all observed, :meth:`Expectations.satisfied` is False and the controller does
  not create or delete for that owner (it may still report status);
- a write that failed will never be observed: the caller lowers for it itself
  (:meth:`creation_observed`, :meth:`deletion_observed`);
- expectations not met within ``timeout`` (5 minutes, client-go's ExpectationsTimeout) count
  as met, so one lost event cannot stall an owner for ever.

Creations are counted, not named: a generated name is known only once the create returns,
and the watch may deliver the object before that. Deletions are tracked by uid, so a delete
someone else made does not count as ours. As in client-go, an object ADDED already terminating
(seen first after a relist or a restart) is a deletion, not a creation.

In memop, reconcilers also record their own writes in the cache (``Cache.record_write``), which
stores a created object and tells the handlers at once: its ADDED then observes the creation
without waiting for the watch. Expectations cover what that cannot: deletions (an immediate
delete answers with the object as it was: nothing newer to record), and creations whose answer
could not be stored.

Invariants: every entry in ``_entries`` still expects something (a creation count above zero
or a uid); the entry whose last expectation is observed is removed at once, so entries do not
accumulate with writes. Single-threaded (asyncio): no locks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from memop.runtime.cache.cache import EventHandler
from memop.runtime.cache.store import ADDED, DELETED, MODIFIED, Obj
from memop.runtime.util.clock import Clock, RealClock

log = logging.getLogger("memop.expectations")

K = TypeVar("K", bound=Hashable)

# client-go's ExpectationsTimeout: how long an unobserved write holds its owner back.
EXPECTATIONS_TIMEOUT = 300.0


@dataclass
class _Expected:
    creations: int  # creations not observed yet (may go below 0: extra ADDED events)
    deletions: set[str] = field(default_factory=set)  # uids whose deletion is not observed yet
    deadline: float = 0.0  # monotonic time after which they count as met

    def met(self) -> bool:
        return self.creations <= 0 and not self.deletions


class Expectations(Generic[K]):
    """The creations and deletions each owner (key ``K``) still waits to observe.

    ``clock`` (monotonic time) and ``timeout`` (seconds) set the TTL fallback.
    """

    def __init__(self, *, clock: Clock | None = None, timeout: float = EXPECTATIONS_TIMEOUT) -> None:
        self._clock = clock or RealClock()
        self.timeout = timeout
        self._entries: dict[K, _Expected] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def expect(self, key: K, *, creations: int = 0, deletions: Iterable[str] = ()) -> None:
        """Record, *before* sending the writes, that ``key`` waits to observe ``creations``
        new objects and the deletion of the objects with uids ``deletions``. Replaces what
        was recorded for ``key``: call it when :meth:`satisfied`."""
        expected = _Expected(creations, set(deletions), self._clock.monotonic() + self.timeout)
        if expected.met():
            self._entries.pop(key, None)
        else:
            self._entries[key] = expected

    def creation_observed(self, key: K) -> None:
        """One creation for ``key`` was observed, or failed and never will be."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.creations -= 1
            self._drop_if_met(key, entry)

    def deletion_observed(self, key: K, uid: str) -> None:
        """The deletion of ``uid`` was observed, or failed and never will be. A uid ``key``
        does not wait for is ignored."""
        entry = self._entries.get(key)
        if entry is not None and uid in entry.deletions:
            entry.deletions.discard(uid)
            self._drop_if_met(key, entry)

    def satisfied(self, key: K) -> bool:
        """Whether ``key`` may act on the cache again: everything it expected was observed,
        it expected nothing, or its expectations expired (logged: an event was lost)."""
        entry = self._live(key)
        return entry is None

    def pending_deletions(self, key: K) -> frozenset[str]:
        """The uids whose deletion ``key`` still waits to observe: objects the cache may still
        show alive, which must not be counted (else the next reconcile deletes one more)."""
        entry = self._live(key)
        return frozenset(entry.deletions) if entry is not None else frozenset()

    def expires_in(self, key: K) -> float | None:
        """Seconds until ``key``'s expectations expire (None when it expects nothing): when to
        look again if no event comes."""
        entry = self._live(key)
        return None if entry is None else max(0.0, entry.deadline - self._clock.monotonic())

    def forget(self, key: K) -> None:
        """Drop whatever ``key`` expects (its owner is gone)."""
        self._entries.pop(key, None)

    def handler(self, key_of: Callable[[Obj], K | None]) -> EventHandler:
        """An informer event handler that observes creations and deletions of the objects
        ``key_of`` maps to an owner's key (None: not an owner's). Add it to the informer of the
        children before the controller's own handlers, so a reconcile an event triggers sees
        the event observed."""

        def observe(event_type: str, obj: Obj, old: Obj | None) -> None:
            if not self._entries or event_type not in (ADDED, MODIFIED, DELETED):
                return  # the usual case, and resyncs: nothing to observe
            key = key_of(obj)
            if key is None:
                return
            if event_type == DELETED or (
                _terminating(obj) and (event_type == ADDED or not _terminating(old))
            ):
                uid = _uid(obj)
                if uid is not None:
                    self.deletion_observed(key, uid)
            elif event_type == ADDED:
                self.creation_observed(key)

        return observe

    def _live(self, key: K) -> _Expected | None:
        entry = self._entries.get(key)
        if entry is None or self._clock.monotonic() < entry.deadline:
            return entry
        log.warning(
            "expectations of %s expired after %.0fs with %d creations and %d deletions not observed:"
            " acting on the cache as it is",
            key,
            self.timeout,
            max(entry.creations, 0),
            len(entry.deletions),
        )
        del self._entries[key]
        return None

    def _drop_if_met(self, key: K, entry: _Expected) -> None:
        if entry.met():
            del self._entries[key]


def _meta(obj: Obj | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def _terminating(obj: Obj | None) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _uid(obj: Obj) -> str | None:
    uid = _meta(obj).get("uid")
    return uid if isinstance(uid, str) else None
