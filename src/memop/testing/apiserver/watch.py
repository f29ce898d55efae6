"""Watch fan-out: every committed change, encoded once, delivered to the open watches it concerns.

Invariants:

- Watches are indexed by storage, then by namespace (``None`` for all namespaces), so a change
  only looks at the watches of its resource and namespace before anything else.
- A change is encoded at most once per (served version, event type) and the bytes are shared
  by every watch that gets it; each watch has its own queue of encoded lines, filled
  synchronously at commit time, so a watch sees changes in resourceVersion order and none is
  lost while it waits (or while the server is silenced).
- A ``shardSelector`` (ShardedListAndWatch) filters like a selector, initial events included;
  an object's uid and namespace never change, so an object never moves in or out of a shard.
- With selectors, an object that starts matching arrives as ADDED and one that stops matching
  as DELETED (its previous content, stamped with the change's resourceVersion), as the watch
  cache does.
- A watch whose queue outgrows ``max_queue`` is ended (cleanly, after what it already had):
  the client resumes from its last resourceVersion, as with a real server dropping a slow watcher.
- A watch with an ``encoder`` (one that asked for Tables) has its events encoded for it alone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any, Protocol

from memop.runtime.cache.labels import Selector
from memop.testing.apiserver.errors import ApiError, too_old_resource_version
from memop.testing.apiserver.sharding import ShardSelector, compile_shard_selector
from memop.testing.apiserver.store import Change, Entry, Served, Storage, Store
from memop.testing.apiserver.strategy import FieldSelector

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def event_line(kind: str, object_json: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + object_json + b"}\n"


def error_line(error: ApiError) -> bytes:
    return event_line("ERROR", json.dumps(error.status(), separators=(",", ":")).encode())


def _line(watcher: Watcher, kind: str, entry: Entry) -> bytes:
    """An event about ``entry`` (in the served version) as ``watcher`` wants it encoded."""
    if watcher.encoder is not None:
        return watcher.encoder.event_line(kind, entry)
    return event_line(kind, entry.json())


class EventEncoder(Protocol):
    """Encodes the events of one watch its own way (a
    :class:`~memop.testing.apiserver.tables.TableWriter`)."""

    def event_line(self, kind: str, entry: Entry) -> bytes:
        """The line of an event of type ``kind`` about ``entry`` (in the served version)."""
        ...


class Watcher:
    """One open watch: what it selects and the encoded lines waiting to be written."""

    __slots__ = (
        "_waiter",
        "bookmarks",
        "closing",
        "dropped",
        "encoder",
        "fields",
        "labels",
        "last_rv",
        "namespace",
        "queue",
        "served",
        "shard",
        "transport",
        "unfiltered",
        "user_agent",
    )

    def __init__(
        self,
        served: Served,
        namespace: str | None,
        labels: Selector,
        fields: FieldSelector,
        *,
        bookmarks: bool,
        start_rv: int,
        encoder: EventEncoder | None = None,
        shard: ShardSelector | None = None,
        user_agent: str = "",
    ) -> None:
        self.served = served
        self.user_agent = user_agent  # the client's User-Agent (tests wait for a client's watches)
        self.namespace = namespace  # None: all namespaces
        self.labels = labels
        self.fields = fields
        self.shard = shard
        self.unfiltered = labels.is_empty() and fields.is_empty() and shard is None
        self.bookmarks = bookmarks
        self.queue: list[bytes] = []
        # The writer's pending wait, resolved by wake() (cheaper than an Event plus wait_for).
        self._waiter: asyncio.Future[None] | None = None
        self.closing = False  # end the stream once the queue is written
        self.dropped = False  # the connection was aborted: write nothing more
        self.last_rv = start_rv  # resourceVersion of the last event queued
        self.transport: asyncio.Transport | None = None
        self.encoder = encoder  # None: the shared JSON lines

    def matches(self, obj: dict[str, Any]) -> bool:
        if self.shard is not None and not self.shard.matches(obj):
            return False
        return self.labels.matches(obj["metadata"].get("labels")) and (
            self.fields.is_empty() or self.fields.matches(obj)
        )

    def push(self, line: bytes) -> None:
        self.queue.append(line)
        self.wake()

    def wake(self) -> None:
        """Let the writer look at the queue and the flags again."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Return on the next wake()."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await waiter
        finally:
            self._waiter = None

    def take(self) -> bytes:
        data = b"".join(self.queue)
        self.queue.clear()
        return data


class WatchHub:
    """All open watches of one server and the fan-out of store changes to them."""

    def __init__(self, store: Store, *, max_queue: int = 100_000) -> None:
        self._store = store
        self._max_queue = max_queue
        self._index: dict[Storage, dict[str | None, set[Watcher]]] = {}
        self.silenced = False
        store.add_listener(self._on_change)
        store.add_unserve_listener(self._on_unserve)

    def watchers(self) -> list[Watcher]:
        return [w for by_ns in self._index.values() for ws in by_ns.values() for w in ws]

    # --- opening and closing -------------------------------------------------------------------

    def open(
        self,
        served: Served,
        namespace: str | None,
        *,
        label_selector: str | None,
        field_selector: str | None,
        resource_version: str | None,
        allow_bookmarks: bool,
        send_initial_events: bool | None,
        encoder: EventEncoder | None = None,
        shard_selector: str | None = None,
        user_agent: str = "",
    ) -> Watcher:
        """Register a watch and queue what it must see first (initial state, or the history since
        ``resource_version``). Raises ApiError: 400 for bad selectors, 410 for a version too old,
        500 for a ``shard_selector`` that does not parse (pass one only with the
        ShardedListAndWatch gate on). ``encoder`` encodes its events instead of the shared JSON
        lines."""
        store = self._store
        labels, fields = store.selectors(served, label_selector, field_selector)
        # The apiserver's registry parses it before the watch cache looks at the version.
        shard = compile_shard_selector(shard_selector)
        if not served.rtype.namespaced:
            namespace = None
        rv_text = resource_version or ""
        initial = rv_text in ("", "0") if send_initial_events is None else send_initial_events
        start = store.resource_version  # no version and no initial events: from now on
        if rv_text not in ("", "0"):
            try:
                start = int(rv_text)
            except ValueError:
                raise ApiError(400, "BadRequest", f"invalid resource version: {rv_text}") from None
        watcher = Watcher(
            served,
            namespace,
            labels,
            fields,
            bookmarks=allow_bookmarks,
            start_rv=store.resource_version,
            encoder=encoder,
            shard=shard,
            user_agent=user_agent,
        )
        if initial:
            for entry in self._current(served.storage, namespace):
                if watcher.unfiltered or watcher.matches(entry.obj):
                    watcher.push(_line(watcher, "ADDED", served.view(entry)))
            if send_initial_events and allow_bookmarks:
                watcher.push(self._bookmark(watcher, store.resource_version, initial_end=True))
        else:
            for change in store.watch_since(served.storage, start):
                if namespace is None or change.namespace == namespace:
                    line = self._line_for(watcher, change, {})
                    if line is not None:
                        watcher.push(line)
        watcher.last_rv = store.resource_version
        self._index.setdefault(served.storage, {}).setdefault(namespace, set()).add(watcher)
        return watcher

    def close(self, watcher: Watcher) -> None:
        by_ns = self._index.get(watcher.served.storage)
        if by_ns is None:
            return
        ws = by_ns.get(watcher.namespace)
        if ws is not None:
            ws.discard(watcher)
            if not ws:
                del by_ns[watcher.namespace]
        if not by_ns:
            del self._index[watcher.served.storage]

    def _current(self, storage: Storage, namespace: str | None) -> Iterable[Entry]:
        if namespace is not None:
            names = storage.objects.get(namespace) or {}
            return [names[n] for n in sorted(names)]
        return [
            names[n]
            for ns in sorted(storage.objects)
            for names in (storage.objects[ns],)
            for n in sorted(names)
        ]

    # --- fan-out -------------------------------------------------------------------------------

    def _on_change(self, change: Change) -> None:
        by_ns = self._index.get(change.storage)
        if not by_ns:
            return
        ns = change.namespace
        scoped = by_ns.get(ns) if ns else None
        everywhere = by_ns.get(None)
        cache: dict[tuple[int, str], bytes] = {}
        for targets in (scoped, everywhere):
            if not targets:
                continue
            for watcher in list(targets):
                if watcher.closing:
                    continue
                line = self._line_for(watcher, change, cache)
                if line is None:
                    continue
                watcher.last_rv = change.rv
                if len(watcher.queue) >= self._max_queue:
                    watcher.closing = True  # too slow: end it; it resumes from what it got
                    watcher.wake()
                    continue
                watcher.push(line)

    def _line_for(
        self, watcher: Watcher, change: Change, cache: dict[tuple[int, str], bytes]
    ) -> bytes | None:
        if watcher.unfiltered:
            kind = change.type
        else:
            now = change.type != "DELETED" and watcher.matches(change.entry.obj)
            before = change.old is not None and watcher.matches(change.old)
            if now:
                kind = "MODIFIED" if before else "ADDED"
            elif before:
                kind = "DELETED"
            else:
                return None
        served = watcher.served
        key = (id(served), kind)
        line = cache.get(key) if watcher.encoder is None else None
        if line is None:
            entry = change.entry
            if kind == "DELETED" and change.type != "DELETED":
                # Stopped matching: the previous content, stamped with this change's version.
                assert change.old is not None
                entry = Entry(
                    {**change.old, "metadata": {**change.old["metadata"], "resourceVersion": str(change.rv)}}
                )
            line = _line(watcher, kind, served.view(entry))
            if watcher.encoder is None:
                cache[key] = line
        return line

    def _on_unserve(self, served: Served) -> None:
        for by_ns in list(self._index.values()):
            for ws in list(by_ns.values()):
                for watcher in list(ws):
                    if watcher.served is served:
                        watcher.closing = True
                        watcher.wake()

    # --- server-wide actions ---------------------------------------------------------------------

    def _bookmark(self, watcher: Watcher, rv: int, *, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        rtype = watcher.served.rtype
        return _line(
            watcher,
            "BOOKMARK",
            Entry({"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}),
        )

    def bookmark_all(self) -> None:
        """Queue a BOOKMARK at the current resourceVersion for every watch that asked for them."""
        if self.silenced:
            return
        rv = self._store.resource_version
        for watcher in self.watchers():
            if watcher.bookmarks and not watcher.closing:
                watcher.push(self._bookmark(watcher, rv))

    def expire_all(self) -> int:
        """Send every watch a 410 Expired ERROR event and end it; returns how many."""
        watchers = [w for w in self.watchers() if not w.closing]
        for watcher in watchers:
            watcher.push(error_line(too_old_resource_version(watcher.last_rv, self._store.resource_version)))
            watcher.closing = True
        return len(watchers)

    def drop_all(self) -> int:
        """Abort every watch connection (the client sees a broken chunked stream); returns how many."""
        watchers = self.watchers()
        for watcher in watchers:
            watcher.dropped = True
            watcher.closing = True
            if watcher.transport is not None:
                watcher.transport.abort()
            watcher.wake()
        return len(watchers)

    def set_silenced(self, silenced: bool) -> None:
        self.silenced = silenced
        if not silenced:
            for watcher in self.watchers():
                watcher.wake()
