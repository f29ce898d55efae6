"""The cache: one informer per resource, each an ObjectStore kept current by reflectors.

Reconcilers read from here (``get``/``list`` cost no API call); controllers subscribe handlers
to informers. When the cache is scoped to namespaces, a namespaced resource gets one reflector
per namespace and objects elsewhere never enter the store; cluster-scoped resources always get
one cluster-wide reflector.

Invariants: an informer's handlers see every change to its store exactly once and in store
order; a handler added after objects are stored is first replayed the current objects as
ADDED (as client-go's shared informer does), so no subscriber misses state.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import random
from collections.abc import Callable, Iterable, Sequence

from memop.runtime.clock import Clock, RealClock
from memop.runtime.labels import Selector
from memop.runtime.reflector import ListWatcher, Reflector
from memop.runtime.resources import Resource
from memop.runtime.sharing import Path
from memop.runtime.store import ADDED, MODIFIED, RESYNC, Obj, ObjectStore, Transform, resource_version

log = logging.getLogger("memop.cache")

EventHandler = Callable[[str, Obj, Obj | None], None]


class Informer:
    """A resource's store, the reflectors filling it and the handlers told of each change."""

    def __init__(self, resource: Resource, store: ObjectStore) -> None:
        self.resource = resource
        self.store = store
        self.reflectors: list[Reflector] = []
        self._handlers: list[EventHandler] = []

    def add_handler(self, handler: EventHandler) -> None:
        """Subscribe ``handler``; it is first called with ADDED for every object already stored."""
        self._handlers.append(handler)
        for obj in self.store.list():
            self._call(handler, ADDED, obj, None)

    def remove_handler(self, handler: EventHandler) -> None:
        with contextlib.suppress(ValueError):
            self._handlers.remove(handler)

    def dispatch(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        for handler in list(self._handlers):
            self._call(handler, event_type, obj, old)

    def resync(self) -> None:
        """Replay every stored object to the handlers as RESYNC; no API call."""
        for obj in self.store.list():
            self.dispatch(RESYNC, obj, obj)

    @property
    def has_synced(self) -> bool:
        return bool(self.reflectors) and all(r.synced.is_set() for r in self.reflectors)

    def _call(self, handler: EventHandler, event_type: str, obj: Obj, old: Obj | None) -> None:
        # One handler's bug must not starve the others or kill the reflector feeding them.
        try:
            handler(event_type, obj, old)
        except Exception:
            log.exception("event handler failed on %s %s", event_type, self.resource.kind)


class Cache:
    """Informers for the resources a manager's controllers read, in a namespace scope.

    ``namespaces`` None or empty means all namespaces. ``resync_period`` (seconds, None for
    never) replays every cached object to the handlers from memory, jittered by ±10% like
    controller-runtime's SyncPeriod.
    """

    def __init__(
        self,
        client: ListWatcher,
        *,
        namespaces: Sequence[str] | None = None,
        resync_period: float | None = None,
        watch_read_timeout: float = 150.0,
        page_size: int = 500,
        clock: Clock | None = None,
        rand: random.Random | None = None,
    ) -> None:
        self.namespaces = tuple(dict.fromkeys(namespaces or ()))
        self._client = client
        self._resync_period = resync_period
        self._read_timeout = watch_read_timeout
        self._page_size = page_size
        self._clock = clock or RealClock()
        self._rand = rand or random.Random()
        # The client's: one probe for every reflector and request when the server is down.
        self.reachability = client.reachability
        self._informers: dict[Resource, Informer] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False

    def informer(
        self,
        resource: Resource,
        *,
        transform: Transform | None = None,
        shared: tuple[Path, ...] = (),
        label_selector: Selector | None = None,
    ) -> Informer:
        """The informer for ``resource``, created on first use (and started if the cache runs).

        ``transform`` runs on every object as it enters the store (after managedFields are
        stripped), to drop fields no controller reads; it returns a new object and must not
        change the one it is given (:meth:`record_write` passes objects their writer still
        uses). The subtrees at the ``shared`` paths are held once however many objects have
        them equal (see :mod:`memop.runtime.sharing`); ``label_selector`` narrows the watch
        itself. All are fixed by the first caller.
        """
        informer = self._informers.get(resource)
        if informer is None:
            implied = label_selector.exact_pairs() if label_selector is not None else None
            informer = Informer(resource, ObjectStore(resource, transform, shared, implied_labels=implied))
            scopes: Iterable[str | None] = (
                self.namespaces if resource.namespaced and self.namespaces else [None]
            )
            for namespace in scopes:
                informer.reflectors.append(
                    Reflector(
                        self._client,
                        resource,
                        informer.store,
                        informer.dispatch,
                        namespace=namespace,
                        label_selector=label_selector,
                        read_timeout=self._read_timeout,
                        page_size=self._page_size,
                        clock=self._clock,
                        rand=self._rand,
                        reachability=self.reachability,
                    )
                )
            self._informers[resource] = informer
            if self._started:
                self._start_informer(informer)
        return informer

    def in_scope(self, namespace: str | None) -> bool:
        """Whether objects in ``namespace`` are watched by this cache."""
        return not self.namespaces or not namespace or namespace in self.namespaces

    # -- reads -------------------------------------------------------------------------------

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj | None:
        """The cached object or None. Read-only: copy before changing it."""
        return self.informer(resource).store.get(name, namespace)

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        selector: Selector | str | None = None,
        owner_uid: str | None = None,
    ) -> list[Obj]:
        """Cached objects matching the filters. Read-only: copy before changing them."""
        return self.informer(resource).store.list(namespace, selector=selector, owner_uid=owner_uid)

    def record_write(self, resource: Resource, obj: Obj) -> bool:
        """Store the object a write of ours returned, so the next reconcile reads its own write.

        Without this, a reconcile that runs before the watch delivers our own write sees the
        old object and writes again (a 409 or a duplicate create). The object is stored only
        when its resourceVersion is newer than everything the covering reflector's stream has
        delivered: the stream is ordered, so anything at or below that point (including a later
        deletion) is already in the store and must not be overwritten. resourceVersions are
        compared as integers, which they are on every etcd-backed server; when either is not an
        integer nothing is stored (we fall back to waiting for the watch).

        The handlers are told of the change, as of a watch event: the answer may carry changes
        of others' that the stream has not delivered yet (a deletion started just before our
        status write), and the stream's events up to this version are then skipped, so this
        is the only time they can see them. Returns whether the object was stored.
        """
        informer = self._informers.get(resource)
        if informer is None or not informer.reflectors:
            return False
        namespace = (obj.get("metadata") or {}).get("namespace") or None
        reflector = next(
            (r for r in informer.reflectors if r.namespace is None or r.namespace == namespace), None
        )
        if reflector is None or not reflector.synced.is_set():
            return False
        try:
            written = int(resource_version(obj))
            seen = int(reflector.last_resource_version or "0")
        except ValueError:
            return False
        current = informer.store.get((obj.get("metadata") or {}).get("name", ""), namespace)
        try:
            if written <= seen or (current is not None and written <= int(resource_version(current) or "0")):
                return False
        except ValueError:
            return False
        stored = informer.store.prepare_copy(obj)  # the caller keeps using obj
        old = informer.store.upsert(stored)
        informer.dispatch(ADDED if old is None else MODIFIED, stored, old)
        return True

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every reflector (and those of informers created later). Returns at once."""
        if self._started:
            return
        self._started = True
        for informer in self._informers.values():
            self._start_informer(informer)
        if self._resync_period:
            self._tasks.append(asyncio.create_task(self._resync_loop(), name="cache-resync"))

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until every informer has stored its first LIST; False if ``timeout`` passes first."""
        waits = [r.synced.wait() for i in self._informers.values() for r in i.reflectors]
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*waits)
        except TimeoutError:
            return False
        return True

    @property
    def has_synced(self) -> bool:
        return self._started and all(i.has_synced for i in self._informers.values())

    def unsynced(self) -> builtins.list[str]:
        """Names of the reflectors still waiting for their first LIST (for readiness messages)."""
        return [repr(r) for i in self._informers.values() for r in i.reflectors if not r.synced.is_set()]

    async def stop(self) -> None:
        """Cancel every reflector and wait for them to end."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._started = False

    def _start_informer(self, informer: Informer) -> None:
        for reflector in informer.reflectors:
            self._tasks.append(asyncio.create_task(reflector.run(), name=f"reflector {reflector!r}"))

    async def _resync_loop(self) -> None:
        assert self._resync_period is not None
        while True:
            await self._clock.sleep(self._resync_period * self._rand.uniform(0.9, 1.1))
            for informer in list(self._informers.values()):
                informer.resync()
