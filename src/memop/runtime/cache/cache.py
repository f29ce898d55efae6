"""The cache: informers, each an ObjectStore of one resource kept current by reflectors.

A resource usually has one informer. Controllers that each watch only their own part of a
big resource (the pods labelled as theirs) declare one informer per label selector, with its
own transform: one controller's narrow view (memcached pods, stripped to their phase) never
hides the objects or the fields another controller reads. Reads and handlers name the
informer by its selector; a read with a selector is served by the informer whose selector the
read's selector implies (see :meth:`Cache.informer_for`).

Reconcilers read from here (``get``/``list`` cost no API call); controllers subscribe handlers
to informers. When the cache is scoped to namespaces, a namespaced resource gets one reflector
per namespace and objects elsewhere never enter the store; cluster-scoped resources always get
one cluster-wide reflector.

Custom indexes (:meth:`Cache.add_index`, controller-runtime's ``FieldIndexer``) are declared per
resource before the cache starts and kept by every informer of that resource, so a map function
can find the objects that refer to another (``by_index``) without scanning them all.

Invariants: an informer's handlers see every change to its store exactly once and in store
order, except an update that changes only what the informer's transform drops (and the
resourceVersion): that one is stored but told to no one, since no reader can see it; a handler
added after objects are stored is first replayed the current objects as ADDED (as client-go's
shared informer does), so no subscriber misses state.

Sharded (:meth:`Cache.enable_sharding`), an informer declared with a ``shard_key`` holds only
the objects of the shards this replica owns. Each owned shard has its own reflectors, which
ask the server for that shard only (a ``shardSelector``, or the owner-bucket label) and check
every object themselves: :meth:`Cache.add_shard` starts them (their first LIST reports the
shard's objects as ADDED, so each is reconciled once) and :meth:`Cache.remove_shard` stops
them and forgets the shard's objects, without relisting the shards kept. When the server
ignores ``shardSelector`` (the ShardedListAndWatch gate is off) an informer keyed by uid or
namespace has one reflector for all its shards that filters client-side; gaining a shard then
relists it once.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import contextvars
import logging
import random
from collections.abc import Callable, Iterable, Mapping, Sequence

from memop.runtime import metrics
from memop.runtime.cache.labels import Requirement, Selector
from memop.runtime.cache.reflector import ListWatcher, Reflector, ShardScope
from memop.runtime.cache.sharing import Path
from memop.runtime.cache.store import (
    ADDED,
    MODIFIED,
    RESYNC,
    IndexFunc,
    Obj,
    ObjectStore,
    Transform,
    object_key,
    resource_version,
)
from memop.runtime.client.resources import Resource
from memop.runtime.sharding.keys import BY_OWNER_BUCKET, ShardKey
from memop.runtime.sharding.ring import BUCKET_LABEL, Ring, bucket_label_value
from memop.runtime.util.clock import Clock, RealClock
from memop.runtime.util.tasks import cancel_and_wait

log = logging.getLogger("memop.cache")

EventHandler = Callable[[str, Obj, Obj | None], None]


class Informer:
    """A resource's store, the reflectors filling it and the handlers told of each change."""

    def __init__(
        self,
        resource: Resource,
        store: ObjectStore,
        *,
        label_selector: Selector | None = None,
        shard_key: ShardKey | None = None,
        exclusive: bool = False,
    ) -> None:
        self.resource = resource
        self.store = store
        self.label_selector = label_selector
        self.shard_key = shard_key
        # Never handed to a caller that names no selector (see Cache.informer).
        self.exclusive = exclusive
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
        for handler in tuple(self._handlers):  # a handler may remove itself meanwhile
            self._call(handler, event_type, obj, old)

    def resync(self) -> None:
        """Replay every stored object to the handlers as RESYNC; no API call."""
        for obj in self.store.list():
            self.dispatch(RESYNC, obj, obj)

    @property
    def has_synced(self) -> bool:
        # A sharded informer of a replica that owns no shard yet has nothing to wait for.
        started = bool(self.reflectors) or self.shard_key is not None
        return started and all(r.synced.is_set() for r in self.reflectors)

    def _call(self, handler: EventHandler, event_type: str, obj: Obj, old: Obj | None) -> None:
        # One handler's bug must not starve the others or kill the reflector feeding them.
        try:
            handler(event_type, obj, old)
        except Exception:
            log.exception("event handler failed on %s %s", event_type, self.resource.kind)


# Measured on a real kube-apiserver: handling a burst's watch events in batches of a quarter
# of a second and more took a tenth off memop's CPU to converge 3,000 Memcacheds, half a
# second 13-16%, a second no more (docs/performance/watch-batching.md).
DEFAULT_WATCH_BATCH_WINDOW = 0.5


class Cache:
    """Informers for the resources a manager's controllers read, in a namespace scope.

    ``namespaces`` None or empty means all namespaces. ``resync_period`` (seconds, None for
    never) replays every cached object to the handlers from memory, jittered by ±10% like
    controller-runtime's SyncPeriod. ``watch_batch_window`` (seconds, 0: off): during a burst
    of events, each watch is read once per window instead of as each event arrives (see
    :meth:`memop.runtime.client.client.Client.watch_batches`); the Manager sets it.
    """

    def __init__(
        self,
        client: ListWatcher,
        *,
        namespaces: Sequence[str] | None = None,
        resync_period: float | None = None,
        watch_read_timeout: float = 150.0,
        watch_batch_window: float = 0.0,
        page_size: int = 500,
        clock: Clock | None = None,
        rand: random.Random | None = None,
    ) -> None:
        self.namespaces = tuple(dict.fromkeys(namespaces or ()))
        self._client = client
        self._resync_period = resync_period
        self._read_timeout = watch_read_timeout
        self._batch_window = watch_batch_window
        self._page_size = page_size
        self._clock = clock or RealClock()
        self._rand = rand or random.Random()
        # The client's: one probe for every reflector and request when the server is down.
        self.reachability = client.reachability
        # resource -> label selector (None: all objects) -> informer. By resource first: every
        # read looks up the informers of one resource.
        self._informers: dict[Resource, dict[Selector | None, Informer]] = {}
        # resource -> index name -> function: every informer of the resource, present or
        # future, keeps these indexes.
        self._indexers: dict[Resource, dict[str, IndexFunc]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._reflector_tasks: dict[Reflector, asyncio.Task[None]] = {}
        self._running: set[Informer] = set()  # informers whose reflectors were started
        self._started = False
        self._said_unlabelled: set[Resource] = set()  # kinds written without the bucket label
        # Sharding (enable_sharding): the ring, whether the server filters by shardSelector,
        # and the shards this replica owns now.
        self.ring: Ring | None = None
        self.server_side_sharding = False
        # Set when objects outside the shards arrive though the server was said to filter them.
        self.selector_ignored = asyncio.Event()
        self.shards: set[int] = set()
        # Held while shards are added or removed and while the mode switches: each of these
        # awaits reflectors stopping, and one interleaved with another left reflectors running
        # that no informer lists (never stopped, and a shard's one, once the server ignored
        # its selector, dropped the objects of the replica's other shards from the store).
        self._reshaping = asyncio.Lock()
        self._warned_ignored: set[Resource] = set()
        self._exported: set[Resource] = set()

    def informer(
        self,
        resource: Resource,
        *,
        transform: Transform | None = None,
        shared: tuple[Path, ...] = (),
        label_selector: Selector | None = None,
        shard_key: ShardKey | None = None,
        exclusive: bool = False,
        aliases: Mapping[Path, Path] | None = None,
    ) -> Informer:
        """The informer for ``resource`` and ``label_selector``, created on first use (and
        started if the cache runs).

        ``transform`` runs on every object as it enters the store (after managedFields are
        stripped), to drop fields no controller reads; it returns a new object and must not
        change the one it is given (:meth:`record_write` passes objects their writer still
        uses). An update that changes only what it drops is stored but not told to the
        handlers (nothing they can read changed). The subtrees at the ``shared`` paths are
        held once however many objects have them equal (see :mod:`memop.runtime.cache.sharing`);
        ``aliases`` maps a path to another path of the same object whose subtree it often
        equals, to hold the two as one (``{("spec", "template", "metadata", "labels"):
        ("metadata", "labels")}`` for Deployments; see
        :func:`~memop.runtime.cache.store.hold_aliases`). ``label_selector`` narrows the watch
        itself. The transform, shared paths and aliases are fixed by the first caller.
        ``shard_key``: how its objects map to shards when the cache is sharded (see the module
        docstring); an informer first declared without one (shared by another controller) gets
        it here.

        Without a ``label_selector`` (and no transform), a resource that already has exactly
        one informer gets that one, whatever its selector: code that only subscribes to a
        resource (a controller's watch) need not repeat how its owner declared it. An informer
        created ``exclusive`` is left out of that: it holds one controller's own objects (a
        declarative controller's children, by its label), which another controller's
        ``owns(resource)`` must not mistake for all of them.
        """
        if label_selector is not None and label_selector.is_empty():
            label_selector = None
        by_selector = self._informers.setdefault(resource, {})
        informer = by_selector.get(label_selector)
        if informer is None and label_selector is None and transform is None and not shared and not aliases:
            existing = [i for i in self._informers_of(resource) if not i.exclusive]
            if len(existing) == 1:
                informer = existing[0]
            elif existing:
                raise ValueError(_ambiguous(resource, existing))
        if informer is None:
            informer = self._new_informer(
                resource, transform, shared, label_selector, exclusive=exclusive, aliases=aliases
            )
            by_selector[label_selector] = informer
        if shard_key is not None and informer.shard_key != shard_key:
            if informer.shard_key is not None:
                if self.ring is None:
                    return informer  # unsharded, the key changes nothing: the first stays
                # One informer is split one way (a controller for a kind that also owns it).
                raise ValueError(
                    f"{resource.kind} is sharded by {informer.shard_key.name} already, not by "
                    f"{shard_key.name}: give the one with the other key an informer of its own "
                    "(a label_selector)"
                )
            if self._started and self.ring is not None:
                raise RuntimeError(f"{resource.kind}: shard keys must be set before the cache starts")
            informer.shard_key = shard_key
            if self.ring is not None:
                informer.reflectors = []  # never started: they come with the shards
        if self._started and informer not in self._running:
            self._start_informer(informer)
        return informer

    def _new_informer(
        self,
        resource: Resource,
        transform: Transform | None,
        shared: tuple[Path, ...],
        label_selector: Selector | None,
        *,
        exclusive: bool = False,
        aliases: Mapping[Path, Path] | None = None,
    ) -> Informer:
        implied = label_selector.exact_pairs() if label_selector is not None else None
        store = ObjectStore(resource, transform, shared, implied_labels=implied, aliases=aliases)
        for name, fn in self._indexers.get(resource, {}).items():
            store.add_index(name, fn)
        informer = Informer(resource, store, label_selector=label_selector, exclusive=exclusive)
        informer.reflectors = self._new_reflectors(informer)
        return informer

    def _new_reflectors(
        self,
        informer: Informer,
        label_selector: Selector | None = None,
        shard: ShardScope | None = None,
    ) -> builtins.list[Reflector]:
        """One reflector per watched namespace (or one cluster-wide) for ``informer``."""
        resource = informer.resource
        scopes: Iterable[str | None] = self.namespaces if resource.namespaced and self.namespaces else [None]
        return [
            Reflector(
                self._client,
                resource,
                informer.store,
                informer.dispatch,
                namespace=namespace,
                label_selector=label_selector or informer.label_selector,
                read_timeout=self._read_timeout,
                page_size=self._page_size,
                clock=self._clock,
                rand=self._rand,
                reachability=self.reachability,
                shard=shard,
                batch_window=self._batch_window,
            )
            for namespace in scopes
        ]

    def _informers_of(self, resource: Resource) -> builtins.list[Informer]:
        return list(self._informers.get(resource, {}).values())

    def _all_informers(self) -> builtins.list[Informer]:
        return [informer for by_selector in self._informers.values() for informer in by_selector.values()]

    def informer_for(self, resource: Resource, selector: Selector | None = None) -> Informer:
        """The informer that serves a read of ``resource`` filtered by ``selector``.

        The one informer of the resource; or, when it has several, the one whose label
        selector ``selector`` implies (every requirement of the informer's is one of the
        read's), so it holds every object the read can return. ValueError when none or more
        than one does: the read would silently miss objects. An ``exclusive`` informer serves
        only reads whose selector implies its own.
        """
        by_selector = self._informers.get(resource)
        if by_selector is not None and len(by_selector) == 1:
            # The common case, on every cache read: one informer, which serves every read
            # unless it is exclusive (then the general rule below decides).
            for only in by_selector.values():
                if not only.exclusive:
                    return only
        informers = [i for i in self._informers_of(resource) if not i.exclusive or _covers(selector, i)]
        if len(informers) == 1:
            return informers[0]
        if not informers:
            return self.informer(resource)
        covering = [i for i in informers if _covers(selector, i)]
        if len(covering) > 1:
            # The narrowest: an unselected informer covers everything but holds more.
            covering = [i for i in covering if i.label_selector is not None] or covering
        if len(covering) != 1:
            raise ValueError(_ambiguous(resource, informers, selector))
        return covering[0]

    def add_index(self, resource: Resource, name: str, fn: IndexFunc) -> None:
        """Index the cached objects of ``resource`` under the values ``fn`` gives each, for
        :meth:`by_index` and ``list(..., index=(name, value))``.

        Declare it before the cache starts (a controller's setup), as controller-runtime's
        ``IndexField``: every informer of ``resource``, declared before or after, keeps the
        index through adds, updates, deletes and relists. ``fn`` sees each object as stored
        (after the informer's transform: keep what it reads), must not change it, and returns
        the values (strings) to find it under; an exception is logged and leaves that object
        out of the index. RuntimeError once the cache has started; ValueError for a name the
        resource already has.
        """
        if self._started:
            raise RuntimeError(
                f"index {name!r} of {resource.kind}: indexes must be added before the cache starts"
            )
        indexers = self._indexers.setdefault(resource, {})
        if name in indexers:
            raise ValueError(f"{resource.kind} already has an index named {name!r}")
        indexers[name] = fn
        for informer in self._informers_of(resource):
            informer.store.add_index(name, fn)

    def by_index(self, resource: Resource, name: str, value: str) -> builtins.list[Obj]:
        """The cached objects of ``resource`` that the index ``name`` holds under ``value``.
        Read-only: copy before changing them. KeyError for an index never added."""
        if name not in self._indexers.get(resource, {}):
            raise KeyError(f"{resource.kind} has no index named {name!r}: add_index declares one")
        return self.informer_for(resource).store.by_index(name, value)

    # -- sharding ----------------------------------------------------------------------------

    def enable_sharding(self, ring: Ring, *, server_side: bool) -> None:
        """Keep only owned shards' objects in the informers that have a shard key (see the
        module docstring); no shard is owned until :meth:`add_shard`. ``server_side``: whether
        the API server honours ``shardSelector`` (else uid and namespace keys filter here)."""
        if self._started:
            raise RuntimeError("sharding must be enabled before the cache starts")
        self.ring = ring
        self.server_side_sharding = server_side
        for informer in self._sharded_informers():
            informer.reflectors = []  # never started: they come with the shards

    @property
    def sharded(self) -> bool:
        return self.ring is not None

    def shard_labels(self, owner: Obj) -> dict[str, str]:
        """The labels a controller puts on the children it creates for ``owner`` (and on its
        pod templates), so they reach the replica that owns the owner: the owner's bucket when
        the cache is sharded, nothing otherwise."""
        uid = (owner.get("metadata") or {}).get("uid")
        if self.ring is None or not isinstance(uid, str) or not uid:
            return {}
        return {BUCKET_LABEL: bucket_label_value(uid)}

    def shard_of(self, resource: Resource, obj: Obj) -> int | None:
        """The shard of ``obj`` by its informer's key; None when not sharded or keyless."""
        informer = self.informer_for(resource)
        if self.ring is None or informer.shard_key is None:
            return None
        return informer.shard_key.shard_of(self.ring, obj)

    async def add_shard(self, shard: int) -> None:
        """:meth:`add_shards` of one shard."""
        await self.add_shards((shard,))

    async def add_shards(self, shards: Iterable[int]) -> None:
        """Start watching ``shards`` in every sharded informer. Returns at once; their objects
        arrive as ADDED when each reflector's first LIST is stored.

        Where the replica filters itself (client-side), one reflector keeps all its shards and
        is relisted to fetch the gained ones: once for the shards given together, so a
        replica's shards taken in one round cost one LIST, not one each."""
        ring = self._sharded_ring()
        async with self._reshaping:
            gained = sorted(set(shards) - self.shards)
            if not gained:
                return
            self.shards.update(gained)
            for informer in self._sharded_informers():
                key = informer.shard_key
                assert key is not None
                self._export_objects_owned(informer.resource)
                if key.needs_server_gate and not self.server_side_sharding:
                    await self._stop_reflectors(informer, informer.reflectors)
                    reflectors = self._new_reflectors(informer, shard=self._client_side_scope(informer, ring))
                else:
                    reflectors = [r for s in gained for r in self._shard_reflectors(informer, ring, s)]
                informer.reflectors.extend(reflectors)
                if self._started:
                    self._start_reflectors(reflectors)

    def _shard_reflectors(self, informer: Informer, ring: Ring, shard: int) -> builtins.list[Reflector]:
        """``shard``'s own reflectors of ``informer``: a shardSelector or a label requirement."""
        key = informer.shard_key
        assert key is not None
        return self._new_reflectors(
            informer,
            label_selector=_with(informer.label_selector, key.label_requirement(ring, shard)),
            shard=self._shard_scope(informer, ring, shard),
        )

    async def set_server_side_sharding(self, server_side: bool) -> None:
        """The API server's filtering changed (its ShardedListAndWatch gate, with a restart):
        the informers keyed by uid or namespace restart their reflectors in the other mode, one
        per owned shard (server-side) or one for all (client-side), each listing once; those
        keyed by a label are not touched (every server filters labels)."""
        ring = self._sharded_ring()
        async with self._reshaping:
            if server_side == self.server_side_sharding:
                return
            self.server_side_sharding = server_side
            self._warned_ignored.clear()
            for informer in self._sharded_informers():
                key = informer.shard_key
                if key is None or not key.needs_server_gate:
                    continue
                await self._stop_reflectors(informer, informer.reflectors)
                if not self.shards:
                    reflectors: builtins.list[Reflector] = []
                elif server_side:
                    shards = sorted(self.shards)
                    reflectors = [r for s in shards for r in self._shard_reflectors(informer, ring, s)]
                else:
                    reflectors = self._new_reflectors(informer, shard=self._client_side_scope(informer, ring))
                informer.reflectors = reflectors
                if self._started:
                    self._start_reflectors(reflectors)

    def shard_has_synced(self, shard: int) -> bool:
        """Whether every reflector keeping ``shard`` (its own, or the one filtering client-side
        for all the replica's shards) has stored its first LIST, or found its resource no longer
        served (a deleted CRD's: no object of it is left to wait for; an uninstall takes shards
        while the install's CRDs go)."""
        name = _shard_name(self._sharded_ring(), shard)
        return all(
            r.synced.is_set() or r.unserved
            for informer in self._sharded_informers()
            for r in informer.reflectors
            if r.shard_name in (name, CLIENT_SIDE)
        )

    async def wait_shard_synced(self, shard: int, timeout: float) -> bool:
        """Wait until :meth:`shard_has_synced` (polled every 50 ms: in client-side mode a later
        shard's gain replaces the reflector being waited for); False after ``timeout`` seconds."""
        deadline = self._clock.monotonic() + timeout
        while not self.shard_has_synced(shard):
            if self._clock.monotonic() >= deadline:
                return False
            await self._clock.sleep(0.05)
        return True

    async def remove_shard(self, shard: int) -> None:
        """Stop watching ``shard`` and forget its objects (no DELETED events: they still
        exist, another replica owns them now). The shards kept are not relisted."""
        ring = self._sharded_ring()
        async with self._reshaping:
            if shard not in self.shards:
                return
            self.shards.discard(shard)
            for informer in self._sharded_informers():
                key = informer.shard_key
                assert key is not None
                gone = [r for r in informer.reflectors if r.shard_name == _shard_name(ring, shard)]
                await self._stop_reflectors(informer, gone)
                if not self.shards:
                    await self._stop_reflectors(informer, informer.reflectors)
                for obj in informer.store.list():
                    if key.shard_of(ring, obj) == shard:
                        informer.store.remove(object_key(obj))

    def owner_bucket_scopes(self) -> builtins.list[tuple[Resource, Selector | None, str | None]]:
        """Where the informers keyed by owner bucket list: ``(resource, their own label selector,
        namespace or None for cluster-wide)``, one per namespace watched."""
        out: builtins.list[tuple[Resource, Selector | None, str | None]] = []
        for informer in self._sharded_informers():
            if informer.shard_key is None or informer.shard_key.name != BY_OWNER_BUCKET.name:
                continue
            resource = informer.resource
            scopes = self.namespaces if resource.namespaced and self.namespaces else (None,)
            out += [(resource, informer.label_selector, namespace) for namespace in scopes]
        return out

    def kinds_filtered_by_shard_selector(self) -> builtins.list[str]:
        """The kinds whose shards the server filters only with ShardedListAndWatch on."""
        informers = self._sharded_informers()
        return sorted({i.resource.kind for i in informers if i.shard_key and i.shard_key.needs_server_gate})

    def _export_objects_owned(self, resource: Resource) -> None:
        """``memop_sharding_objects_owned{resource}``, read from the stores at each scrape."""
        if resource in self._exported:
            return
        self._exported.add(resource)
        metrics.SHARDING_OBJECTS_OWNED.labels(str(resource)).set_function(
            lambda: sum(len(i.store) for i in self._informers_of(resource) if i.shard_key is not None)
        )

    def _sharded_ring(self) -> Ring:
        if self.ring is None:
            raise RuntimeError("the cache is not sharded: call enable_sharding first")
        return self.ring

    def _sharded_informers(self) -> builtins.list[Informer]:
        return [i for i in self._all_informers() if i.shard_key is not None]

    def _shard_scope(self, informer: Informer, ring: Ring, shard: int) -> ShardScope:
        key = informer.shard_key
        assert key is not None
        filtered = metrics.SHARDING_OBJECTS_FILTERED.labels(str(informer.resource))

        def ignored() -> None:
            filtered.inc()
            if key.needs_server_gate and informer.resource not in self._warned_ignored:
                # Correct still (we filter), but every replica now receives every object.
                self._warned_ignored.add(informer.resource)
                self.selector_ignored.set()  # the manager asks the server again at once
                log.warning(
                    "the API server sent %s outside this replica's shards: it ignores shardSelector "
                    "(is the ShardedListAndWatch feature gate off?); memop filters them itself",
                    informer.resource.kind,
                )

        return ShardScope(
            _shard_name(ring, shard),
            key.shard_selector(ring, shard),
            lambda obj: key.shard_of(ring, obj) == shard,
            ignored,
            kept_elsewhere=lambda obj: key.shard_of(ring, obj) in self.shards,
        )

    def _client_side_scope(self, informer: Informer, ring: Ring) -> ShardScope:
        key = informer.shard_key
        assert key is not None
        filtered = metrics.SHARDING_OBJECTS_FILTERED.labels(str(informer.resource))
        owned = self.shards
        return ShardScope(CLIENT_SIDE, None, lambda obj: key.shard_of(ring, obj) in owned, filtered.inc)

    async def _stop_reflectors(self, informer: Informer, reflectors: Iterable[Reflector]) -> None:
        stopping = builtins.list(reflectors)
        tasks = [task for r in stopping if (task := self._reflector_tasks.pop(r, None)) is not None]
        await cancel_and_wait(tasks)
        informer.reflectors = [r for r in informer.reflectors if r not in stopping]

    def in_scope(self, namespace: str | None) -> bool:
        """Whether objects in ``namespace`` are watched by this cache."""
        return not self.namespaces or not namespace or namespace in self.namespaces

    # -- reads -------------------------------------------------------------------------------

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj | None:
        """The cached object or None. Read-only: copy before changing it. A resource with
        several informers must be read with :meth:`list` and a selector."""
        return self.informer_for(resource).store.get(name, namespace)

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        selector: Selector | str | None = None,
        owner_uid: str | None = None,
        index: tuple[str, str] | None = None,
    ) -> list[Obj]:
        """Cached objects matching every filter given: ``namespace``, label ``selector``,
        controller ``owner_uid``, and ``index`` = (name, value) of an index :meth:`add_index`
        declared. Read-only: copy before changing them."""
        if isinstance(selector, str):
            selector = Selector.parse(selector)
        if index is not None and index[0] not in self._indexers.get(resource, {}):
            raise KeyError(f"{resource.kind} has no index named {index[0]!r}: add_index declares one")
        store = self.informer_for(resource, selector).store
        return store.list(namespace, selector=selector, owner_uid=owner_uid, index=index)

    def record_write(self, resource: Resource, obj: Obj, *, defer: bool = False) -> bool:
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

        ``defer``: inside a reconcile (:class:`DeferredWrites`), the object is stored when the
        reconcile ends, unless a later write of the same object is recorded first, whose answer
        then stands for both: for a write the reconcile usually follows with another of the
        same object (a finalizer added, then the status written), so that the first answer is
        never prepared for the store. Until then the cache holds the object as before the
        write. Outside a reconcile, or with ``defer`` False, it is stored at once.
        """
        meta = obj.get("metadata") or {}
        scope = _DEFERRED.get()
        # A task the reconcile started may outlive it, in a copy of its context: its scope is
        # closed by then, and its writes are stored at once.
        pending = scope.pending if scope is not None and scope.open else None
        if pending is not None:
            key = (id(self), resource, meta.get("namespace") or "", meta.get("name") or "")
            if defer:
                pending[key] = (self, resource, obj)  # a later deferred write of it replaces it
                self._expect_echoes(resource, obj)
                return False
            # This answer is newer than any deferred one of the same object.
            pending.pop(key, None)
        stored_any = False
        labels = meta.get("labels")
        for informer in self._informers_selecting(resource, labels):
            if self.ring is not None and _misses_bucket_label(informer, labels):
                self._say_unlabelled(resource, obj)
            stored_any = _record(informer, obj, self._client) or stored_any
        return stored_any

    def _informers_selecting(self, resource: Resource, labels: object) -> builtins.list[Informer]:
        """The informers of ``resource`` whose label selector selects an object with ``labels``
        (its metadata.labels as read, None or malformed when it has none)."""
        by_selector = self._informers.get(resource)
        if not by_selector:
            return []
        matched = labels if isinstance(labels, dict) else None
        return [
            informer
            for informer in by_selector.values()
            if informer.label_selector is None or informer.label_selector.matches(matched)
        ]

    def _expect_echoes(self, resource: Resource, obj: Obj) -> None:
        """Let the watch events of a deferred write's answer be skipped undecoded, once the
        store holds that version or a later one (a later answer recorded meanwhile); an event
        that comes before is decoded and applied as any other."""
        for informer in self._informers_selecting(resource, (obj.get("metadata") or {}).get("labels")):
            reflector = _covering_reflector(informer, obj)
            if reflector is not None:
                reflector.expect_echo(obj, self._client.answer_json(obj))

    def _say_unlabelled(self, resource: Resource, obj: Obj) -> None:
        """One line per kind: a child written without its owner's bucket label is in no shard's
        watch, so the next reconcile finds it missing and creates it again (409s, forever)."""
        if resource in self._said_unlabelled:
            return
        self._said_unlabelled.add(resource)
        meta = obj.get("metadata") or {}
        log.error(
            "%s %s/%s was written without the label %s: sharded replicas watch %s by their owner's "
            "bucket, so none will see it; put cache.shard_labels(owner) on the labels of what a "
            "controller creates (said once per kind)",
            resource.kind,
            meta.get("namespace") or "",
            meta.get("name") or "",
            BUCKET_LABEL,
            resource.plural,
            extra={"resource": str(resource)},
        )

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every reflector (and those of informers created later). Returns at once."""
        if self._started:
            return
        self._started = True
        for informer in self._all_informers():
            self._start_informer(informer)
        if self._resync_period:
            self._tasks.append(asyncio.create_task(self._resync_loop(), name="cache-resync"))

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until every informer has stored its first LIST; False if ``timeout`` passes first."""
        waits = [r.synced.wait() for i in self._all_informers() for r in i.reflectors]
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*waits)
        except TimeoutError:
            return False
        return True

    @property
    def has_synced(self) -> bool:
        return self._started and all(i.has_synced for i in self._all_informers())

    def unsynced(self) -> builtins.list[str]:
        """Names of the reflectors still waiting for their first LIST (for readiness messages)."""
        return [repr(r) for i in self._all_informers() for r in i.reflectors if not r.synced.is_set()]

    async def stop(self) -> None:
        """Cancel every reflector and wait for them to end."""
        tasks, self._tasks = self._tasks, []
        tasks.extend(self._reflector_tasks.values())
        self._reflector_tasks.clear()
        self._running.clear()
        await cancel_and_wait(tasks)
        self._started = False

    def _start_informer(self, informer: Informer) -> None:
        # A sharded informer has the reflectors of the shards added so far (none, or some
        # added before the start); the others come with add_shard.
        self._running.add(informer)
        self._start_reflectors(informer.reflectors)

    def _start_reflectors(self, reflectors: Iterable[Reflector]) -> None:
        for reflector in reflectors:
            task = asyncio.create_task(reflector.run(), name=f"reflector {reflector!r}")
            self._reflector_tasks[reflector] = task

    async def _resync_loop(self) -> None:
        assert self._resync_period is not None
        while True:
            await self._clock.sleep(self._resync_period * self._rand.uniform(0.9, 1.1))
            for informer in self._all_informers():
                informer.resync()


def _misses_bucket_label(informer: Informer, labels: object) -> bool:
    """Whether an object of an informer keyed by owner bucket lacks the bucket label."""
    key = informer.shard_key
    if key is None or key.name != BY_OWNER_BUCKET.name:
        return False
    return not (isinstance(labels, dict) and BUCKET_LABEL in labels)


def _covers(read: Selector | None, informer: Informer) -> bool:
    """Whether ``informer`` holds every object a read filtered by ``read`` can return: it has
    no label selector, or every requirement of its selector is one of the read's."""
    required = informer.label_selector
    return required is None or (read is not None and read.implies(required))


def _record(informer: Informer, obj: Obj, client: ListWatcher) -> bool:
    """:meth:`Cache.record_write` for one informer."""
    reflector = _covering_reflector(informer, obj)
    if reflector is None:
        return False
    meta = obj.get("metadata") or {}
    store = informer.store
    current = store.get(meta.get("name", ""), meta.get("namespace") or None)
    try:
        written = int(meta.get("resourceVersion") or "")
        if written <= int(reflector.last_resource_version or "0") or (
            current is not None and written <= int(resource_version(current) or "0")
        ):
            return False
    except ValueError:  # not an integer: we fall back to waiting for the watch
        return False
    stored = store.prepare_copy(obj)  # the caller keeps using obj
    old = store.upsert(stored)
    # Its event changes nothing now: skipped undecoded.
    reflector.expect_echo(obj, client.answer_json(obj))
    informer.dispatch(ADDED if old is None else MODIFIED, stored, old)
    return True


def _covering_reflector(informer: Informer, obj: Obj) -> Reflector | None:
    """The synced reflector whose stream ``obj`` is in (its namespace, its shard); None when
    there is none yet, or the object is in a shard this replica does not own."""
    reflectors = informer.reflectors
    if len(reflectors) == 1:
        reflector: Reflector | None = reflectors[0] if reflectors[0].covers(obj) else None
    else:
        reflector = next((r for r in reflectors if r.covers(obj)), None)
    return reflector if reflector is not None and reflector.synced.is_set() else None


class DeferredWrites:
    """The scope of one reconcile for :meth:`Cache.record_write`'s ``defer``: on leaving it
    (returning or raising), every deferred answer not superseded is stored, oldest first.
    The controller enters one around each reconcile. A class, not a generator: one per
    reconcile."""

    __slots__ = ("_token", "open", "pending")

    def __init__(self) -> None:
        # The writes whose recording waits for the end, oldest first: (cache id, resource,
        # namespace, name) -> (cache, resource, answer).
        self.pending: dict[tuple[int, Resource, str, str], tuple[Cache, Resource, Obj]] = {}
        self.open = False
        self._token: contextvars.Token[DeferredWrites | None] | None = None

    def __enter__(self) -> None:
        self.open = True
        self._token = _DEFERRED.set(self)

    def __exit__(self, *exc_info: object) -> None:
        if self._token is None:
            return
        _DEFERRED.reset(self._token)
        self._token = None
        self.open = False
        pending, self.pending = self.pending, {}
        for cache, resource, obj in pending.values():
            cache.record_write(resource, obj)


# The running reconcile's scope; None outside one. A context variable: each worker's task has
# its own.
_DEFERRED: contextvars.ContextVar[DeferredWrites | None] = contextvars.ContextVar(
    "memop_deferred_writes", default=None
)


# The scope name of a reflector that keeps every shard of the replica, filtering itself.
CLIENT_SIDE = "client-side"


def _shard_name(ring: Ring, shard: int) -> str:
    return f"{shard}/{ring.shards}"


def _with(selector: Selector | None, requirement: Requirement | None) -> Selector | None:
    if requirement is None:
        return selector
    return Selector([*(selector.requirements if selector is not None else ()), requirement])


def _ambiguous(resource: Resource, informers: Iterable[Informer], selector: Selector | None = None) -> str:
    selectors = ", ".join(repr(str(i.label_selector or "")) for i in informers)
    read = f" for selector {str(selector)!r}" if selector is not None else ""
    return (
        f"{resource.kind} has informers with label selectors {selectors}: name the one to use"
        f"{read} (pass its label_selector)"
    )
