"""The shard gate: which of a controller's requests this replica may reconcile right now.

A request names its object (namespace/name); its shard is that of the object in the cache,
or, for an object just deleted, the shard it was in (kept until its reconcile succeeds, so
the reconcile that sees it gone still runs here). A request whose object is in no active
shard of ours is not reconciled: it is another replica's, or it was queued before its shard
was given up.

A shard just taken is *syncing* until its objects and their children are in the cache (the
first LIST of each of its reflectors): its requests are parked, not reconciled (a reconcile then
would not see children that exist, and try to make them again), and queued again when the shard
becomes active (:meth:`ShardGate.activate`).

Giving a shard up (:meth:`ShardGate.drain`) first deactivates it, so no reconcile of it starts
any more, then waits for those already running to finish; only then may the shard's Lease be
released. The queue keeps no per-shard list: a request of a drained shard that is still queued
is dropped when a worker takes it, before anything runs.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from memop.runtime.cache.store import Obj
from memop.runtime.client.resources import Resource
from memop.runtime.controller.reconcile import Request

if TYPE_CHECKING:
    from memop.runtime.cache.cache import Cache

__all__ = ["ShardGate"]


class ShardGate:
    """The shards a controller works on, and its reconciles in flight per shard."""

    def __init__(self, cache: Cache, resource: Resource) -> None:
        self._cache = cache
        self._resource = resource
        self.active: set[int] = set()
        # Shards taken whose cache is still syncing, and the requests that came for them meanwhile.
        self.syncing: set[int] = set()
        self._parked: dict[int, set[Request]] = {}
        self._in_flight: dict[int, int] = {}
        self._idle: dict[int, asyncio.Event] = {}
        # Objects deleted from an active shard whose requests have not yet been reconciled.
        self._deleted: dict[Request, int] = {}

    def shard_of(self, request: Request) -> int | None:
        obj = self._cache.informer_for(self._resource).store.get(request.name, request.namespace or None)
        if obj is not None:
            return self._cache.shard_of(self._resource, obj)
        return self._deleted.get(request)

    def deleted(self, obj: Obj) -> None:
        """The primary object left the cache (its informer's DELETED event)."""
        shard = self._cache.shard_of(self._resource, obj)
        meta = obj.get("metadata") or {}
        if shard is not None and shard in self.active:
            self._deleted[Request(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = shard

    def admit(self, request: Request) -> int | None:
        """The request's shard, counted in flight until :meth:`finish`, when it is active here;
        None (nothing counted) otherwise, the request parked if its shard is syncing."""
        shard = self.shard_of(request)
        if shard is None or shard not in self.active:
            if shard in self.syncing:
                self._parked.setdefault(shard, set()).add(request)
            return None
        self._in_flight[shard] = self._in_flight.get(shard, 0) + 1
        self._idle.setdefault(shard, asyncio.Event()).clear()
        return shard

    def finish(self, shard: int) -> None:
        left = self._in_flight.get(shard, 0) - 1
        if left > 0:
            self._in_flight[shard] = left
            return
        self._in_flight.pop(shard, None)
        idle = self._idle.get(shard)
        if idle is not None:
            idle.set()

    def reconciled(self, request: Request) -> None:
        """The request's reconcile succeeded: a deleted object's is done with."""
        self._deleted.pop(request, None)

    def begin(self, shard: int) -> None:
        """``shard`` is ours, its cache syncing: park its requests until :meth:`activate`."""
        if shard not in self.active:
            self.syncing.add(shard)

    def activate(self, shard: int) -> set[Request]:
        """Reconcile ``shard``'s requests from now on; returns those parked while it synced,
        to be queued again."""
        self.syncing.discard(shard)
        self.active.add(shard)
        return self._parked.pop(shard, set())

    async def drain(self, shard: int) -> None:
        """Start nothing more of ``shard`` and return once its running reconciles finished."""
        self.syncing.discard(shard)
        self._parked.pop(shard, None)
        self.active.discard(shard)
        for request in [r for r, s in self._deleted.items() if s == shard]:
            del self._deleted[request]
        if self._in_flight.get(shard):
            await self._idle.setdefault(shard, asyncio.Event()).wait()

    def deactivate_all(self) -> None:
        """Start nothing more of any shard (membership lost: running reconciles are cancelled
        by the caller)."""
        self.active.clear()
        self.syncing.clear()
        self._parked.clear()
        self._deleted.clear()

    def in_flight(self, shard: int) -> int:
        return self._in_flight.get(shard, 0)
