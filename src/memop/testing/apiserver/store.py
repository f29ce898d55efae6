"""The in-memory object store behind the test API server: kube-apiserver's registry semantics on
plain dicts, synchronous and atomic on the event loop.

Invariants:

- One resourceVersion counter for the whole store; every committed change takes the next value,
  which becomes the object's ``metadata.resourceVersion`` (a string) and the change's place in
  the history. A write that changes nothing commits nothing and keeps the version.
- Stored objects, and everything inside them, are never mutated after commit: a write builds a
  new dict (it may share untouched subtrees with the previous version). So readers inside the
  process (watch fan-out, history, list snapshots) can hold references without copying, and
  each stored version is serialised at most once (:class:`Entry`). The public methods hand out
  deep copies and take copies of what they are given.
- ``_history`` keeps the last ``history_size`` changes in resourceVersion order; every change at
  or below ``_compacted`` may be missing from it, so a watch or a consistent list from such a
  version is answered 410 Expired.
- Listeners and subscribers see changes in commit order, each exactly once, even when a
  change's follow-up (a CRD becoming Established) commits more changes.

What it serves is a list of :class:`~memop.testing.apiserver.strategy.Kind` values: the built-in ones of
:mod:`memop.testing.kinds` and the ``extra_kinds`` it is given, each installed with its
strategy (objects a kind creates at start included). The store knows no kind's module but the
Namespace's, whose lifecycle is registry behaviour.

Namespaces are finalized the way the real namespace controller does it: deleting one sets
``deletionTimestamp`` and ``status.phase: Terminating``; whoever empties it then writes
``spec.finalizers`` through the ``finalize`` subresource (``update(..., subresource="finalize")``);
once ``spec.finalizers`` and ``metadata.finalizers`` are both empty the namespace is removed.
Pods are deleted at once (as if never scheduled): there is no kubelet to finish a graceful delete.

Every create and update passes the PodSecurity admission plugin
(:mod:`memop.testing.apiserver.podsecurity`) after the kind's validation and before the validating
webhooks (the ``admission`` hook), as in kube-apiserver's plugin order; the store's own callers
(the simulated controllers) included.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import random
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import yaml

from memop.runtime.cache.labels import InvalidSelectorError, Selector
from memop.runtime.util.clock import Clock, RealClock
from memop.testing.apiserver import managedfields, serverside, times
from memop.testing.apiserver.errors import (
    ApiError,
    DecodeError,
    already_exists,
    bad_request,
    conflict,
    conflict_for_kind,
    forbidden,
    gone,
    invalid,
    not_found,
    not_found_path,
    patch_invalid,
    too_old_resource_version,
    unsupported_media_type,
)
from memop.testing.apiserver.objects import (
    JsonDict,
    copy_json,
    not_supported,
    rfc3339,
    validate_object_meta,
    validate_object_meta_update,
)
from memop.testing.apiserver.objects import forbidden as forbidden_field
from memop.testing.apiserver.objects import invalid as field_invalid
from memop.testing.apiserver.objects import required as field_required
from memop.testing.apiserver.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from memop.testing.apiserver.podsecurity import PodSecurity
from memop.testing.apiserver.resources import NAMESPACES, ResourceType
from memop.testing.apiserver.schema import go_quote, go_repr
from memop.testing.apiserver.sharding import ShardSelector, compile_shard_selector
from memop.testing.apiserver.strategy import Conversion, FieldSelector, Kind, Strategy
from memop.testing.kinds.registry import served_kinds

log = logging.getLogger(__name__)

GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# What the patch routes of built-in resources consume (the apply patches included).
_ROUTE_PATCH_TYPES = frozenset(
    (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH, "application/apply-patch+cbor")
)
DEFAULT_MANAGER = "memop-testing"
# The namespaces a new server has, and those kube-apiserver refuses to delete.
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UNDELETABLE_NAMESPACES = frozenset(("default", "kube-system", "kube-public"))
_EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)
_META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)
# The metav1.Time fields of every kind's ObjectMeta, parsed on decoding (memop.testing.apiserver.times).
_METADATA_TIMES = (
    ("metadata", "creationTimestamp"),
    ("metadata", "deletionTimestamp"),
    ("metadata", "managedFields", times.ITEM, "time"),
)
_SYSTEM_FIELDS = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")
# ObjectMeta's omitempty collections: an empty one is not there once decoded into the Go struct
# (kube-apiserver v1.36.2 answers a create with `labels: {}` without labels, built-in kind or
# custom resource, and a mutating webhook sees none: a JSON patch adding /metadata/labels/x fails).
_OMITTED_WHEN_EMPTY = ("labels", "annotations", "ownerReferences", "finalizers")


def _typed_metadata(obj: JsonDict) -> JsonDict:
    """``obj`` with ObjectMeta's empty omitempty collections left out, as decoding drops them."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in _OMITTED_WHEN_EMPTY:
            if key in meta and meta[key] in ({}, []):
                del meta[key]
    return obj


_PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")


class AdmissionHook(Protocol):
    """A request's admission (memop.testing.apiserver.admissionwebhooks.Admission): the store calls
    ``mutate`` once the request's object is decoded and defaulted and ``validate`` just before it
    commits (``obj`` None for a delete; objects in storage form). Either may raise to suspend the
    write: the caller resolves what it raised and runs the whole write again."""

    def mutate(self, served: Served, obj: JsonDict | None, old: JsonDict | None) -> JsonDict | None: ...

    def validate(self, served: Served, obj: JsonDict | None, old: JsonDict | None) -> JsonDict | None: ...


class Entry:
    """One committed (or view) version of an object and its JSON encoding, made at most once."""

    __slots__ = ("_json", "obj")

    def __init__(self, obj: JsonDict) -> None:
        self.obj = obj
        self._json: bytes | None = None

    def json(self) -> bytes:
        data = self._json
        if data is None:
            data = self._json = json.dumps(self.obj, separators=(",", ":")).encode()
        return data

    def item_json(self, builtin: bool) -> bytes:
        """The encoding as a list item: built-in kinds drop kind/apiVersion there, as typed lists do."""
        data = self.json()
        if not builtin:
            return data
        prefix = (
            b'{"kind":'
            + json.dumps(self.obj.get("kind")).encode()
            + b',"apiVersion":'
            + json.dumps(self.obj.get("apiVersion")).encode()
        )
        if data.startswith(prefix):
            rest = data[len(prefix) :]
            return b"{" + rest[1:] if rest.startswith(b",") else b"{}"
        return json.dumps(
            {k: v for k, v in self.obj.items() if k not in ("kind", "apiVersion")}, separators=(",", ":")
        ).encode()


class Storage:
    """The objects of one group-resource, kept in its storage version."""

    __slots__ = ("crd_name", "objects", "rtype", "served", "strategy", "terminating", "watch_cache_rv")

    def __init__(self, rtype: ResourceType, strategy: Strategy, crd_name: str | None = None) -> None:
        self.rtype = rtype  # the storage version
        self.strategy = strategy
        # namespace ("" when cluster-scoped) -> name -> entry
        self.objects: dict[str, dict[str, Entry]] = {}
        self.served: dict[str, Served] = {}  # version -> served type
        self.crd_name = crd_name  # the CRD that defines it, for custom resources
        self.terminating = False  # its CRD is being deleted: no new objects
        # The resourceVersion its watch cache was initialised at (None: not yet). A watch from an
        # older version is 410 Expired, as a real watch cache holds only what came after its
        # initial LIST (see Store.watch_since).
        self.watch_cache_rv: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.rtype.group, self.rtype.plural)

    def get(self, namespace: str, name: str) -> Entry | None:
        names = self.objects.get(namespace)
        return names.get(name) if names else None

    def count(self) -> int:
        return sum(len(names) for names in self.objects.values())


@dataclass(eq=False, slots=True)
class Served:
    """A served group/version/resource: its type, its storage and the conversion between them."""

    rtype: ResourceType
    storage: Storage
    to_served: Conversion | None = None  # storage form -> this version
    from_served: Conversion | None = None  # this version -> storage form
    webhook_conversion: bool = False  # the conversions ask a CRD's conversion webhook

    def view(self, entry: Entry) -> Entry:
        return entry if self.to_served is None else Entry(self.to_served(entry.obj))

    def warm(self, obj: JsonDict) -> None:
        """Before a commit: a conversion webhook's conversion of the answer must be asked for
        now (memop.testing.apiserver.conversionwebhooks), not after the write is done."""
        if self.webhook_conversion:
            self.view(Entry(obj))


@dataclass(slots=True)
class Change:
    """A committed change, in storage form (DELETED: last state stamped with the deleting version)."""

    rv: int
    storage: Storage
    type: str
    entry: Entry
    old: JsonDict | None

    @property
    def namespace(self) -> str:
        return str(self.entry.obj["metadata"].get("namespace") or "")


@dataclass
class StoreEvent:
    """A committed change as public subscribers see it (deep copies, storage version's type)."""

    type: str  # "ADDED" | "MODIFIED" | "DELETED"
    rtype: ResourceType
    obj: dict[str, Any]
    old: dict[str, Any] | None


@dataclass(slots=True)
class ListResult:
    entries: list[Entry]  # in the served version
    resource_version: int
    continue_token: str | None
    remaining: int | None
    shard: ShardSelector | None = None  # the shardSelector applied, which built-in lists echo


@dataclass(slots=True)
class DeleteResult:
    entry: Entry  # in the served version
    finished: bool  # the object is gone (False: it waits for finalizers)


def _ordered(obj: JsonDict, meta: JsonDict) -> JsonDict:
    ordered_meta = {k: meta[k] for k in _META_ORDER if k in meta}
    if len(ordered_meta) != len(meta):
        ordered_meta.update((k, v) for k, v in meta.items() if k not in ordered_meta)
    out: JsonDict = {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"), "metadata": ordered_meta}
    out.update((k, v) for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata"))
    return out


def _scoped(
    fields: managedfields.FieldSet, rtype: ResourceType, subresource: str | None
) -> managedfields.FieldSet:
    """Where a status subresource exists, main writes own no status and status writes own only it."""
    if not rtype.has_status:
        return fields
    if subresource == "status":
        return {k: v for k, v in fields.items() if k == "f:status"}
    return {k: v for k, v in fields.items() if k != "f:status"}


def _apply_configuration(body: Any, rtype: ResourceType) -> JsonDict:
    """The apply configuration in ``body`` (raw YAML, of which JSON is a part, or decoded), owned
    by the caller; 400 for what the server refuses before merging."""
    if isinstance(body, bytes | str):
        try:
            body = yaml.safe_load(body)
        except yaml.YAMLError as error:
            raise bad_request(f"error decoding YAML: {error}") from None
    if not isinstance(body, dict):
        raise bad_request(f"error decoding YAML: the apply configuration is not a {rtype.kind} object")
    config: JsonDict = copy_json(body)
    version, kind = config.get("apiVersion"), config.get("kind")
    if (version, kind) != (rtype.api_version, rtype.kind):
        # schema.GroupVersionKind's String(), as the field manager's version check prints it.
        group, _, plain = str(version or "").rpartition("/")
        raise bad_request(f"invalid object type: {group}/{plain}, Kind={kind or ''}")
    meta = config.get("metadata")
    if isinstance(meta, dict) and meta.get("managedFields") is not None:
        raise bad_request("metadata.managedFields must be nil")
    return config


def _apply_scope(config: JsonDict, rtype: ResourceType, subresource: str | None) -> JsonDict:
    """What of an apply configuration reaches the object: where a status subresource exists, a
    main apply leaves the status alone and a status apply changes only the status."""
    if not rtype.has_status:
        return config
    if subresource == "status":
        return {k: v for k, v in config.items() if k in ("apiVersion", "kind", "status")}
    return {k: v for k, v in config.items() if k != "status"}


def _check_admitted_managed(meta: JsonDict, before: Any, warnings: list[str] | None) -> None:
    """managedFieldsValidatingAdmissionController: managedFields a mutating webhook left invalid
    are put back as they were before admission, with a warning."""
    problem = managedfields.decode_error(meta.get("managedFields"))
    if problem is None:
        return
    _set_managed(meta, before or [])
    if warnings is not None:
        warnings.append(
            ".metadata.managedFields was in an invalid state after admission; this could be caused "
            f"by an outdated mutating admission controller; please fix your requests: {problem}"
        )


def _set_managed(meta: JsonDict, entries: list[dict[str, Any]]) -> None:
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)


def _get_path(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split(".") if path else ():
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _set_path(obj: JsonDict, path: str, value: Any) -> None:
    parts = path.split(".")
    cur = obj
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = cur[part] = {}
        cur = nxt
    cur[parts[-1]] = value


def _scale(obj: Mapping[str, Any], paths: tuple[str, str, str | None]) -> JsonDict:
    """The autoscaling/v1 Scale view of an object."""
    spec_path, status_path, selector_path = paths
    meta = obj["metadata"]
    if selector_path is None:
        selector_obj = _get_path(obj, "spec.selector")
        try:
            selector = (
                str(Selector.from_label_selector(selector_obj)) if isinstance(selector_obj, dict) else ""
            )
        except InvalidSelectorError:
            selector = ""
    else:
        found = _get_path(obj, selector_path) if selector_path else None
        selector = found if isinstance(found, str) else ""
    status: JsonDict = {"replicas": _get_path(obj, status_path) or 0}
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": _get_path(obj, spec_path) or 0},
        "status": status,
    }


def encode_continue(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\x00"}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        rv = int(data["rv"])
        start = str(data["start"])
    except (ValueError, KeyError, TypeError, binascii.Error) as error:
        raise bad_request(f"continue key is not valid: {error}") from None
    if data.get("v") != "meta.k8s.io/v1" or rv <= 0:
        raise bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        )
    return rv, start.rstrip("\x00")


class Store:
    """All objects of the fake cluster, with the registry rules of kube-apiserver (see module doc)."""

    def __init__(
        self,
        *,
        history_size: int = 10_000,
        clock: Clock | None = None,
        seed: int | None = None,
        extra_kinds: Iterable[Kind] = (),
    ) -> None:
        """``extra_kinds`` are served besides the built-in ones (memop.testing.kinds), or instead
        of a generically served one; ValueError when one is already served otherwise."""
        if history_size < 1:
            raise ValueError("history_size must be at least 1")
        self._clock: Clock = clock or RealClock()
        self._random = random.Random(seed)
        self._rv = 0
        self._history: deque[Change] = deque()
        self._history_size = history_size
        self._compacted = 0  # every change at or below this version may be gone from the history
        self._storages: dict[tuple[str, str], Storage] = {}
        self._served: dict[tuple[str, str, str], Served] = {}
        self._by_kind: dict[tuple[str, str], Served] = {}
        self._owners: dict[str, set[tuple[tuple[str, str], str, str]]] = {}  # owner uid -> dependents
        self._listeners: list[Callable[[Change], None]] = []
        self._subscribers: list[Callable[[StoreEvent], None]] = []
        self._unserve_listeners: list[Callable[[Served], None]] = []
        self._pending: deque[Change] = deque()
        self._dispatching = False
        self._pod_security = PodSecurity(self._namespace_object, self._pods_in)
        self._install_kinds(served_kinds(extra_kinds))

    # --- registry -------------------------------------------------------------------------------

    def _install_kinds(self, kinds: tuple[Kind, ...]) -> None:
        for kind in kinds:
            shared = kind.stored_as
            storage = (
                self._storages[(shared.group, shared.plural)]
                if shared is not None
                else self.add_storage(kind.rtype, kind.strategy)
            )
            self.serve(storage, kind.rtype, kind.to_served, kind.from_served)
        namespaces = self.served_for(NAMESPACES)
        for name in INITIAL_NAMESPACES:
            self.write_create(namespaces, None, {"metadata": {"name": name}}, manager="kube-apiserver")
        for kind in kinds:
            for obj in kind.initial:
                namespace = obj["metadata"].get("namespace")
                served = self.served_for(kind.rtype)
                self.write_create(served, namespace, copy_json(obj), manager="kube-apiserver")
        # The built-in resources' watch caches start with the server, once it has its namespaces.
        for storage in self._storages.values():
            storage.watch_cache_rv = self._rv

    def add_storage(self, rtype: ResourceType, strategy: Strategy, crd_name: str | None = None) -> Storage:
        """Register the storage of a group-resource (``rtype`` is its storage version)."""
        storage = Storage(rtype, strategy, crd_name)
        self._storages[storage.key] = storage
        return storage

    def storage_for(self, group: str, plural: str) -> Storage | None:
        return self._storages.get((group, plural))

    def serve(
        self,
        storage: Storage,
        rtype: ResourceType,
        to_served: Conversion | None = None,
        from_served: Conversion | None = None,
        *,
        webhook_conversion: bool = False,
    ) -> Served:
        """Serve ``rtype`` from ``storage`` (replacing any earlier registration of the same GVR);
        ``webhook_conversion``: the conversions may raise ConversionPending."""
        served = Served(rtype, storage, to_served, from_served, webhook_conversion)
        self._served[(rtype.group, rtype.version, rtype.plural)] = served
        self._by_kind[(rtype.api_version, rtype.kind)] = served
        storage.served[rtype.version] = served
        if rtype.version == storage.rtype.version:
            storage.rtype = rtype  # a CRD update may have brought a new schema
        return served

    def unserve(self, rtype: ResourceType) -> None:
        """Stop serving ``rtype``; open watches on it are told through the unserve listeners."""
        served = self._served.pop((rtype.group, rtype.version, rtype.plural), None)
        if served is None:
            return
        if self._by_kind.get((rtype.api_version, rtype.kind)) is served:
            del self._by_kind[(rtype.api_version, rtype.kind)]
        served.storage.served.pop(rtype.version, None)
        for listener in list(self._unserve_listeners):
            listener(served)

    def remove_storage(self, storage: Storage) -> None:
        """Forget a storage and everything in it (no events: its CRD is gone)."""
        for served in list(storage.served.values()):
            self.unserve(served.rtype)
        for names in storage.objects.values():
            for entry in names.values():
                self._index_owners(storage, None, entry.obj)
        storage.objects.clear()
        self._storages.pop(storage.key, None)

    def served(self, group: str, version: str, plural: str) -> Served:
        """The served type at a GVR, or a 404 ApiError. Serving a custom resource for the first
        time initialises its watch cache, as kube-apiserver creates a CRD's storage (and cacher)
        at the first request for it."""
        served = self._served.get((group, version, plural))
        if served is None:
            raise not_found_path()
        if served.storage.watch_cache_rv is None:
            served.storage.watch_cache_rv = self._rv
        return served

    def served_for(self, rtype: ResourceType) -> Served:
        return self.served(rtype.group, rtype.version, rtype.plural)

    def all_served(self) -> list[Served]:
        return list(self._served.values())

    def resource(self, group: str, version: str, plural: str) -> ResourceType:
        """The served ResourceType at a GVR (404 ApiError when nothing serves it)."""
        return self.served(group, version, plural).rtype

    def resource_for_kind(self, api_version: str, kind: str) -> ResourceType:
        """The served ResourceType of a kind (404 ApiError when nothing serves it)."""
        served = self._by_kind.get((api_version, kind))
        if served is None:
            raise ApiError(404, "NotFound", f'no matches for kind "{kind}" in version "{api_version}"', {})
        return served.rtype

    def resources(self) -> list[ResourceType]:
        return [served.rtype for served in self._served.values()]

    @property
    def resource_version(self) -> int:
        """The latest committed resourceVersion."""
        return self._rv

    @property
    def compacted_version(self) -> int:
        return self._compacted

    # --- listeners ------------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[Change], None]) -> Callable[[], None]:
        """In-process fast path: ``listener`` gets every Change (shared, read-only objects)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def add_unserve_listener(self, listener: Callable[[Served], None]) -> None:
        self._unserve_listeners.append(listener)

    def subscribe(self, callback: Callable[[StoreEvent], None]) -> Callable[[], None]:
        """Call ``callback`` synchronously after every committed change, with deep copies; it must
        not raise or block. Returns the function that unsubscribes it."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _dispatch(self, change: Change) -> None:
        self._pending.append(change)
        if self._dispatching:
            return
        self._dispatching = True
        try:
            while self._pending:
                current = self._pending.popleft()
                for listener in list(self._listeners):
                    try:
                        listener(current)
                    except Exception:
                        log.exception("store listener failed")
                if self._subscribers:
                    event = StoreEvent(
                        current.type,
                        current.storage.rtype,
                        copy_json(current.entry.obj),
                        copy_json(current.old) if current.old is not None else None,
                    )
                    for callback in list(self._subscribers):
                        try:
                            callback(event)
                        except Exception:
                            log.exception("store subscriber failed")
                try:
                    current.storage.strategy.after_write(self, current)
                except Exception:
                    log.exception("follow-up of a %s change failed", current.storage.rtype)
        finally:
            self._dispatching = False

    # --- history --------------------------------------------------------------------------------

    def history_since(self, rv: int) -> Iterator[Change]:
        """Changes after ``rv`` in order; 410 Expired when some of them are no longer kept."""
        if rv < self._compacted:
            raise too_old_resource_version(rv, self._compacted)
        history = self._history
        if not history or history[-1].rv <= rv:
            return iter(())
        # Binary search: the history is sorted by rv.
        lo, hi = 0, len(history)
        while lo < hi:
            mid = (lo + hi) // 2
            if history[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return (history[i] for i in range(lo, len(history)))

    def watch_since(self, storage: Storage, rv: int) -> Iterator[Change]:
        """The changes of ``storage`` after ``rv``, as its watch cache serves them: 410 Expired
        (``too old resource version: N (M)``) when ``rv`` is older than the cache's window, which
        starts where the cache was initialised (server start for built-in resources, the first
        request for a custom resource) or at the last compaction, whichever is later."""
        if storage.watch_cache_rv is None:
            storage.watch_cache_rv = self._rv
        oldest = max(storage.watch_cache_rv, self._compacted)
        if rv < oldest:
            raise too_old_resource_version(rv, oldest)
        return (change for change in self.history_since(rv) if change.storage is storage)

    def compact(self) -> None:
        """Forget the history: every resourceVersion so far becomes too old to watch from."""
        self._compacted = self._rv
        self._history.clear()

    def _state_at(self, storage: Storage, rv: int) -> dict[str, dict[str, Entry]]:
        """The objects of ``storage`` as they were at ``rv`` (undoing later changes)."""
        state = {ns: dict(names) for ns, names in storage.objects.items()}
        if rv >= self._rv:
            return state
        undo = [c for c in self.history_since(rv) if c.storage is storage]
        for change in reversed(undo):
            meta = change.entry.obj["metadata"]
            ns, name = str(meta.get("namespace") or ""), str(meta["name"])
            if change.type == "ADDED":
                state.get(ns, {}).pop(name, None)
            elif change.old is not None:
                state.setdefault(ns, {})[name] = Entry(change.old)
        return state

    # --- commit ---------------------------------------------------------------------------------

    def _commit(self, storage: Storage, kind: str, obj: JsonDict, old: JsonDict | None) -> Entry:
        """Stamp the next resourceVersion on ``obj`` (owned, metadata included) and store it."""
        self._rv += 1
        rv = self._rv
        meta = obj["metadata"]
        meta["resourceVersion"] = str(rv)
        ns, name = str(meta.get("namespace") or ""), str(meta["name"])
        entry = Entry(_ordered(obj, meta))
        if kind == "DELETED":
            names = storage.objects.get(ns)
            if names is not None:
                names.pop(name, None)
                if not names:
                    del storage.objects[ns]
            self._index_owners(storage, old, None)
        else:
            storage.objects.setdefault(ns, {})[name] = entry
            self._index_owners(storage, old, entry.obj)
        change = Change(rv, storage, kind, entry, old)
        if len(self._history) >= self._history_size:
            self._compacted = self._history.popleft().rv
        self._history.append(change)
        self._dispatch(change)
        return entry

    def _index_owners(self, storage: Storage, old: JsonDict | None, new: JsonDict | None) -> None:
        old_refs = (old or {}).get("metadata", {}).get("ownerReferences") or ()
        new_refs = (new or {}).get("metadata", {}).get("ownerReferences") or ()
        if not old_refs and not new_refs:
            return
        source = new or old
        assert source is not None
        meta = source["metadata"]
        key = (storage.key, str(meta.get("namespace") or ""), str(meta["name"]))
        old_uids = {r.get("uid") for r in old_refs if isinstance(r, dict)}
        new_uids = {r.get("uid") for r in new_refs if isinstance(r, dict)}
        for uid in old_uids - new_uids:
            dependents = self._owners.get(str(uid))
            if dependents is not None:
                dependents.discard(key)
                if not dependents:
                    del self._owners[str(uid)]
        for uid in new_uids - old_uids:
            self._owners.setdefault(str(uid), set()).add(key)

    def _remove(self, storage: Storage, current: Entry) -> Entry:
        """Delete ``current`` for good: one DELETED change carrying its last state."""
        obj = current.obj
        return self._commit(storage, "DELETED", {**obj, "metadata": dict(obj["metadata"])}, obj)

    # --- decoding and common checks ---------------------------------------------------------------

    def _decode(self, served: Served, body: Any) -> JsonDict:
        """An owned request body as a storage-form object: type fields checked and set first."""
        rtype = served.rtype
        if not isinstance(body, dict):
            raise bad_request(f"the body of the request is not a {rtype.kind} object")
        api_version = body.get("apiVersion")
        kind = body.get("kind")
        if api_version and api_version != rtype.api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rtype.api_version})"
            )
        if kind and kind != rtype.kind:
            raise bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})"
            )
        meta = body.get("metadata")
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise bad_request(
                f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
                "metadata must be an object"
            )
        obj: JsonDict = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
        for key, value in body.items():
            if key not in ("kind", "apiVersion", "metadata"):
                obj[key] = value
        if served.from_served is not None:
            obj = served.from_served(obj)
        strategy = served.storage.strategy
        try:
            times.normalize(obj, _METADATA_TIMES, micro=False)
            times.normalize(obj, strategy.times, micro=False)
            times.normalize(obj, strategy.micro_times, micro=True)
        except times.TimeFormatError as error:
            raise DecodeError(rtype.kind, rtype.version, str(error)) from None
        return obj

    def _scope(self, rtype: ResourceType, namespace: str | None, meta: JsonDict) -> str:
        """The namespace a write targets ("" for cluster scope), reconciling URL and body."""
        if not rtype.namespaced:
            meta.pop("namespace", None)
            return ""
        body_ns = meta.get("namespace")
        if not namespace:
            if not body_ns:
                raise bad_request(
                    "an empty namespace may not be set during creation"
                    if namespace == ""
                    else "the namespace of the object is required"
                )
            namespace = str(body_ns)
        elif body_ns and body_ns != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
        return namespace

    def _check_namespace_open(self, rtype: ResourceType, namespace: str, name: str) -> None:
        """NamespaceLifecycle admission: no creates in a missing or terminating namespace."""
        if not rtype.namespaced:
            return
        ns_storage = self._storages[("", "namespaces")]
        ns = ns_storage.get("", namespace)
        if ns is None:
            raise not_found(NAMESPACES, namespace)
        if ns.obj["metadata"].get("deletionTimestamp"):
            error = forbidden(
                rtype,
                name,
                f"unable to create new content in namespace {namespace} because it is being terminated",
            )
            assert error.details is not None
            error.details["causes"] = [
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ]
            raise error

    def _unknown_fields(
        self, served: Served, obj: JsonDict, field_validation: str | None, warnings: list[str] | None
    ) -> None:
        if field_validation == "Ignore":
            return
        unknown = served.storage.strategy.unknown_fields(obj, served.rtype)
        if not unknown:
            return
        texts = [f'unknown field "{path}"' for path in unknown]
        if field_validation == "Strict":
            kind, version = served.rtype.kind, served.rtype.version
            raise bad_request(
                f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: '
                + ", ".join(texts)
            )
        if warnings is not None:
            warnings.extend(texts)

    def _raise_invalid(self, rtype: ResourceType, name: str, errors: list[Any]) -> None:
        if errors:
            raise invalid(rtype.group, rtype.kind, name, errors)

    def check_subresource(self, served: Served, subresource: str | None) -> None:
        """404 unless ``served`` has that subresource (status, or finalize for namespaces)."""
        if subresource is None:
            return
        rtype = served.rtype
        if subresource == "status" and rtype.has_status:
            return
        if subresource == "finalize" and rtype == NAMESPACES:
            return
        raise not_found_path()

    def _now(self) -> str:
        return rfc3339(self._clock.time())

    def now(self) -> str:
        """The store's clock as a ``metav1.Time``: what a registry stamps on what it writes."""
        return self._now()

    # --- create ------------------------------------------------------------------------------------

    def write_create(
        self,
        served: Served,
        namespace: str | None,
        body: Any,
        *,
        manager: str = DEFAULT_MANAGER,
        dry_run: bool = False,
        field_validation: str | None = None,
        warnings: list[str] | None = None,
        managed: Callable[[JsonDict], list[dict[str, Any]]] | None = None,
        admission: AdmissionHook | None = None,
        by_update: bool = False,
    ) -> Entry:
        """Create from an owned body; returns the stored version (served form). ``managed``: the
        new object's managedFields from the object (an apply's), instead of an Update's.
        ``by_update``: a PUT to a missing name of a kind created so, whose resourceVersion is
        ignored (kube-apiserver v1.36.2 answered 201 to a Lease PUT with a made-up one)."""
        storage, rtype, strategy = served.storage, served.rtype, served.storage.strategy
        obj = self._decode(served, body)
        meta = obj["metadata"]
        ns = self._scope(rtype, namespace, meta)
        if storage.terminating:
            raise ApiError(
                405,
                "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
                {},
            )
        if by_update:
            meta.pop("resourceVersion", None)
        elif meta.get("resourceVersion"):
            raise ApiError(500, "", "resourceVersion should not be set on objects to be created")
        self._unknown_fields(served, obj, field_validation, warnings)
        for key in (*_SYSTEM_FIELDS, "managedFields", "selfLink"):
            meta.pop(key, None)
        obj = strategy.default(_typed_metadata(obj), rtype)
        # create.go records the write in managedFields before admission and the registry's
        # PrepareForCreate: the mutating webhooks see the entry, and what they or the strategy
        # add is nobody's.
        _set_managed(
            obj["metadata"], managed(obj) if managed is not None else self._created(served, obj, manager)
        )
        if admission is not None:
            before = obj["metadata"].get("managedFields")
            obj = self._mutated(served, admission, obj, None)
            _check_admitted_managed(obj["metadata"], before, warnings)
        meta = obj["metadata"]
        if rtype.has_status:
            status = strategy.initial_status(obj)
            if status is None:
                obj.pop("status", None)
            else:
                obj["status"] = status
        # The name and uid exist before the strategy prepares the object, as in kube-apiserver
        # (a Job's generated selector holds both).
        generate = meta.get("generateName") if not meta.get("name") else None
        if generate:
            meta["name"] = self._generate_name(storage, ns, str(generate))
        meta["uid"] = str(uuid.UUID(int=self._random.getrandbits(128), version=4))
        strategy.prepare_create(obj, rtype)
        strategy.record_times(obj, None, self._now())
        name = str(meta.get("name") or "")
        self._check_namespace_open(rtype, ns, name)
        self._raise_invalid(rtype, name, strategy.allocate(self, obj, None))
        errors = validate_object_meta(meta, name_errors=strategy.name_errors)
        if name:
            errors.extend(strategy.validate_create(obj, rtype))
        self._raise_invalid(rtype, name, errors)
        obj = strategy.storage_form(obj, rtype)
        meta = obj["metadata"]
        # Validating admission runs before storage answers AlreadyExists (registry/store.go).
        self._admit_pod_security(served, obj, None, None, warnings)
        if storage.get(ns, name) is not None:
            raise already_exists(rtype, name)
        meta["creationTimestamp"] = self._now()
        if strategy.generation:
            meta["generation"] = 1
        if admission is not None:
            obj = admission.validate(served, obj, None) or obj
            meta = obj["metadata"]
        served.warm(obj)
        if dry_run:
            return served.view(Entry(_ordered(obj, meta)))
        return served.view(self._commit(storage, "ADDED", obj, None))

    def _created(self, served: Served, obj: JsonDict, manager: str) -> list[dict[str, Any]]:
        """The managedFields of a new object: ``manager``'s Update of every field it sets."""
        rtype, builtin = served.rtype, served.storage.strategy.builtin
        zero = managedfields.zero_value(served.storage.rtype.group, served.storage.rtype.kind)
        return managedfields.update_entries(
            None,
            manager=manager,
            api_version=rtype.api_version,
            subresource=None,
            when=self._now(),
            changed=_scoped(managedfields.changed_fields(zero, obj, builtin=builtin), rtype, None),
            present=_scoped(managedfields.fields_of(obj, builtin=builtin), rtype, None),
        )

    def _mutated(
        self, served: Served, admission: AdmissionHook, obj: JsonDict, old: JsonDict | None
    ) -> JsonDict:
        """The object after the mutating webhooks, defaulted again as kube-apiserver does."""
        mutated = admission.mutate(served, obj, old)
        if mutated is None or mutated is obj:
            return obj
        if old is None:
            for key in _SYSTEM_FIELDS:
                mutated["metadata"].pop(key, None)
        return served.storage.strategy.default(_typed_metadata(mutated), served.rtype)

    def _generate_name(self, storage: Storage, namespace: str, prefix: str) -> str:
        base = prefix[: 63 - 5] if len(prefix) > 58 else prefix
        for _ in range(8):
            name = base + "".join(self._random.choice(GENERATE_NAME_ALPHABET) for _ in range(5))
            if storage.get(namespace, name) is None:
                return name
        return name

    # --- update ------------------------------------------------------------------------------------

    def write_update(
        self,
        served: Served,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        manager: str = DEFAULT_MANAGER,
        dry_run: bool = False,
        field_validation: str | None = None,
        warnings: list[str] | None = None,
        admission: AdmissionHook | None = None,
    ) -> Entry:
        """PUT semantics on an owned body; returns the stored version (served form)."""
        self.check_subresource(served, subresource)
        storage, rtype, strategy = served.storage, served.rtype, served.storage.strategy
        ns = (namespace or "") if rtype.namespaced else ""
        existing = storage.get(ns, name)
        if existing is None:
            if strategy.create_on_update and subresource is None:
                return self.write_create(
                    served,
                    namespace,
                    body,
                    manager=manager,
                    dry_run=dry_run,
                    field_validation=field_validation,
                    warnings=warnings,
                    admission=admission,
                    by_update=True,
                )
            raise not_found(rtype, name)
        obj = self._decode(served, body)
        self._check_identity(served, obj["metadata"], ns, name)
        rv = obj["metadata"].get("resourceVersion")
        if rv:
            if str(rv) != existing.obj["metadata"]["resourceVersion"]:
                raise conflict(rtype, name)
        elif not strategy.unconditional_update:
            raise invalid(
                rtype.group,
                rtype.plural,
                name,
                [field_invalid("metadata.resourceVersion", 0, "must be specified for an update")],
            )
        self._unknown_fields(served, obj, field_validation, warnings)
        return self._apply_update(
            served,
            existing,
            obj,
            subresource,
            manager=manager,
            dry_run=dry_run,
            admission=admission,
            warnings=warnings,
        )

    def _check_identity(self, served: Served, meta: JsonDict, namespace: str, name: str) -> None:
        body_name = meta.get("name")
        if body_name is None or body_name == "":
            meta["name"] = name
        elif body_name != name:
            raise bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        if served.rtype.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)

    def _apply_update(
        self,
        served: Served,
        existing: Entry,
        obj: JsonDict,
        subresource: str | None,
        *,
        manager: str,
        dry_run: bool,
        managed: Callable[[JsonDict, JsonDict], list[dict[str, Any]]] | None = None,
        admission: AdmissionHook | None = None,
        warnings: list[str] | None = None,
    ) -> Entry:
        """Store ``obj`` over ``existing``. ``managed``: the managedFields from (old, new) (an
        apply's), instead of an Update's; equal to the old ones, nothing is written."""
        storage, rtype, strategy = served.storage, served.rtype, served.storage.strategy
        old = existing.obj
        old_meta = old["metadata"]
        obj = strategy.default(_typed_metadata(obj), rtype)
        if admission is not None:
            obj = self._mutated(served, admission, obj, old)
        if subresource == "status":
            new = {**old, "metadata": dict(old_meta)}
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
        elif subresource == "finalize":
            spec = dict(old.get("spec") or {})
            finalizers = (obj.get("spec") or {}).get("finalizers")
            if finalizers:
                spec["finalizers"] = finalizers
            else:
                spec.pop("finalizers", None)
            new = {**old, "metadata": dict(old_meta), "spec": spec}
        else:
            new = obj
            meta = new["metadata"]
            for key in _SYSTEM_FIELDS:
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            meta.pop("managedFields", None)
            meta.pop("selfLink", None)
            if rtype.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            strategy.prepare_update(new, old, rtype)
            self._raise_invalid(rtype, str(old_meta["name"]), strategy.allocate(self, new, old))
        strategy.record_times(new, old, self._now())
        meta = new["metadata"]
        errors = validate_object_meta(meta, name_errors=strategy.name_errors)
        errors.extend(validate_object_meta_update(meta, old_meta))
        errors.extend(strategy.validate_update(new, old, rtype))
        self._raise_invalid(rtype, str(old_meta["name"]), errors)
        if subresource is None:
            strategy.admit_update(self, new, old, rtype)
        new = strategy.storage_form(new, rtype)
        self._admit_pod_security(served, new, old, subresource, warnings)
        if old_meta.get("deletionTimestamp") and self._finalized(storage, new):
            if admission is not None:
                admission.validate(served, new, old)
            # As kube-apiserver v1.36.2 answers (measured): the object as this update left it
            # (its finalizers gone) at the version it had; the DELETED event carries the last
            # stored state (its finalizers still there) at the deleting version.
            meta["resourceVersion"] = old_meta["resourceVersion"]
            if "managedFields" in old_meta:
                meta["managedFields"] = old_meta["managedFields"]
            answer = Entry(_ordered(new, meta))
            served.warm(answer.obj)
            if not dry_run:
                self._remove(storage, existing)
            return served.view(answer)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if managed is not None:
            _set_managed(meta, managed(old, new))
        elif "managedFields" in old_meta:
            meta["managedFields"] = old_meta["managedFields"]
        if new == old:
            if admission is not None:
                admission.validate(served, new, old)
            return served.view(existing)
        if strategy.generation and "generation" in old_meta and strategy.bumps_generation(new, old, rtype):
            meta["generation"] = int(old_meta["generation"]) + 1
        if managed is None:
            _set_managed(
                meta,
                managedfields.update_entries(
                    old_meta.get("managedFields"),
                    manager=manager,
                    api_version=rtype.api_version,
                    subresource=subresource,
                    when=self._now(),
                    changed=_scoped(
                        managedfields.changed_fields(old, new, builtin=strategy.builtin), rtype, subresource
                    ),
                    present=managedfields.fields_of(new, builtin=strategy.builtin),
                ),
            )
        if admission is not None:
            new = admission.validate(served, new, old) or new
            meta = new["metadata"]
        served.warm(new)
        if dry_run:
            return served.view(Entry(_ordered(new, meta)))
        return served.view(self._commit(storage, "MODIFIED", new, old))

    def write_through(
        self, served: Served, existing: Entry, new: JsonDict, *, dry_run: bool = False
    ) -> Entry:
        """Store ``new`` (owned) over ``existing`` as a registry's ``GuaranteedUpdate`` does when
        a REST handler writes past the strategy (a pod's binding): no defaulting, validation,
        admission or managedFields entry, only the next resourceVersion and one MODIFIED event."""
        served.warm(new)
        if dry_run:
            new["metadata"]["resourceVersion"] = existing.obj["metadata"]["resourceVersion"]
            return served.view(Entry(_ordered(new, new["metadata"])))
        return served.view(self._commit(served.storage, "MODIFIED", new, existing.obj))

    def _admit_pod_security(
        self,
        served: Served,
        obj: JsonDict,
        old: JsonDict | None,
        subresource: str | None,
        warnings: list[str] | None,
    ) -> None:
        """The PodSecurity validating admission plugin (memop.testing.apiserver.podsecurity) on a
        create (``old`` None) or update: it raises the refusal, and adds its warnings. It runs
        before the validating webhooks, as in kube-apiserver's plugin order."""
        found = self._pod_security.validate(served.rtype, subresource, obj, old)
        if warnings is not None:
            warnings.extend(found)

    def _namespace_object(self, name: str) -> JsonDict | None:
        """The stored namespace ``name`` (shared: read only), None when there is none."""
        storage = self._storages.get(("", "namespaces"))
        entry = storage.get("", name) if storage is not None else None
        return entry.obj if entry is not None else None

    def _pods_in(self, namespace: str) -> list[JsonDict]:
        """The stored pods of ``namespace`` (shared: read only)."""
        storage = self._storages.get(("", "pods"))
        names = storage.objects.get(namespace) if storage is not None else None
        return [entry.obj for entry in (names or {}).values()]

    def _finalized(self, storage: Storage, obj: JsonDict) -> bool:
        if obj["metadata"].get("finalizers"):
            return False
        return not (storage.rtype == NAMESPACES and (obj.get("spec") or {}).get("finalizers"))

    # --- patch -------------------------------------------------------------------------------------

    def accepted_patch_types(self, served: Served) -> list[str]:
        types = [JSON_PATCH, MERGE_PATCH]
        if served.storage.strategy.strategic_merge:
            types.append(STRATEGIC_MERGE_PATCH)
        types.append(APPLY_PATCH)
        return types

    def check_patch_type(self, served: Served, patch_type: str) -> None:
        """415 unless ``patch_type`` is a patch this resource takes. A built-in resource's route
        refuses a media type no patch has before its handler runs (go-restful's bare ``415:
        Unsupported Media Type``); the handler lists what it accepts."""
        if served.storage.strategy.builtin and patch_type not in _ROUTE_PATCH_TYPES:
            raise ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
        accepted = self.accepted_patch_types(served)
        if patch_type not in accepted:
            raise unsupported_media_type(accepted)

    def write_patch(
        self,
        served: Served,
        namespace: str | None,
        name: str,
        patch: Any,
        content_type: str,
        *,
        subresource: str | None = None,
        manager: str = DEFAULT_MANAGER,
        dry_run: bool = False,
        field_validation: str | None = None,
        warnings: list[str] | None = None,
        admission: AdmissionHook | None = None,
    ) -> Entry:
        """PATCH semantics: ``patch`` is the decoded body (or raw bytes); returns the stored version."""
        patch_type = content_type.split(";", 1)[0].strip().lower()
        self.check_patch_type(served, patch_type)
        if patch_type == APPLY_PATCH:
            entry, _ = self.write_apply(
                served,
                namespace,
                name,
                patch,
                manager=manager,
                subresource=subresource,
                dry_run=dry_run,
                field_validation=field_validation,
                warnings=warnings,
            )
            return entry
        self.check_subresource(served, subresource)
        storage, rtype = served.storage, served.rtype
        ns = (namespace or "") if rtype.namespaced else ""
        existing = storage.get(ns, name)
        if existing is None:
            raise not_found(rtype, name)
        if isinstance(patch, bytes | str):
            try:
                patch = json.loads(patch)
            except ValueError as error:
                raise bad_request(f"error decoding patch: {error}") from None
        current = served.view(existing).obj
        try:
            if patch_type == MERGE_PATCH:
                if not isinstance(patch, dict):
                    raise bad_request("error decoding patch: a merge patch must be a JSON object")
                result = merge_patch(current, patch)
            elif patch_type == JSON_PATCH:
                _check_json_patch(patch)
                result = json_patch(current, patch)
            else:
                if not isinstance(patch, dict):
                    raise bad_request("error decoding patch: a strategic merge patch must be a JSON object")
                result = strategic_merge_patch(
                    current, patch, rtype.kind, served.storage.strategy.patch_schema()
                )
        except PatchError:
            raise ApiError(
                422, "Invalid", "the server rejected our request due to an error in our request", {}
            ) from None
        if not isinstance(result, dict):
            raise ApiError(
                422, "Invalid", "the server rejected our request due to an error in our request", {}
            )
        # What the patch made may not decode into the typed object: 422 on the field "patch",
        # showing the patched object, or the patch itself for a strategic merge patch (which
        # kube-apiserver applies through the unstructured converter, with its own wording).
        shown = (
            _go_sprint(patch)
            if patch_type == STRATEGIC_MERGE_PATCH
            else json.dumps(_type_fields_first(result), separators=(",", ":"))
        )
        try:
            # memop.testing.apiserver.patch guarantees the result shares no container with its inputs, so
            # it is ours to finish in place.
            obj = self._decode(served, result)
            self._check_identity(served, obj["metadata"], ns, name)
            rv = obj["metadata"].get("resourceVersion")
            if rv and str(rv) != existing.obj["metadata"]["resourceVersion"]:
                raise conflict(rtype, name)
            self._unknown_fields(served, obj, field_validation, warnings)
            return self._apply_update(
                served,
                existing,
                obj,
                subresource,
                manager=manager,
                dry_run=dry_run,
                admission=admission,
                warnings=warnings,
            )
        except DecodeError as error:
            detail = error.converter_detail if patch_type == STRATEGIC_MERGE_PATCH else error.detail
            raise patch_invalid(shown, detail) from None

    # --- apply ------------------------------------------------------------------------------------

    def write_apply(
        self,
        served: Served,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        manager: str,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str | None = None,
        warnings: list[str] | None = None,
        admission: AdmissionHook | None = None,
    ) -> tuple[Entry, bool]:
        """Server-side apply of the configuration ``body`` (raw YAML or JSON, or decoded) by
        ``manager`` (see :mod:`memop.testing.apiserver.serverside`); returns the stored version and
        whether the apply created the object."""
        self.check_subresource(served, subresource)
        storage, rtype, strategy = served.storage, served.rtype, served.storage.strategy
        if not manager:
            raise invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                [field_required("fieldManager", "is required for apply patch")],
            )
        config = _apply_configuration(body, rtype)
        ns = (namespace or "") if rtype.namespaced else ""
        builtin = strategy.builtin
        existing = storage.get(ns, name)
        if existing is None:
            if subresource is not None:
                raise not_found(rtype, name)  # a subresource never creates
            created_fields = _scoped(serverside.applied_fields(config, builtin=builtin), rtype, None)
            meta = config.setdefault("metadata", {})
            if isinstance(meta, dict):
                self._check_identity(served, meta, ns, name)

            def created(obj: JsonDict) -> list[dict[str, Any]]:
                return serverside.apply_entries(
                    [],
                    manager=manager,
                    subresource=None,
                    api_version=rtype.api_version,
                    when=self._now(),
                    applied=created_fields,
                    taken=[],
                    present=managedfields.fields_of(obj, builtin=builtin),
                )

            entry = self.write_create(
                served,
                namespace,
                config,
                manager=manager,
                dry_run=dry_run,
                field_validation=field_validation,
                warnings=warnings,
                managed=created,
                admission=admission,
            )
            return entry, True
        current = served.view(existing).obj
        entries = [e for e in current["metadata"].get("managedFields") or () if isinstance(e, dict)]
        applied = _scoped(serverside.applied_fields(config, builtin=builtin), rtype, subresource)
        last = serverside.previous_applied(entries, manager, subresource)
        merged = serverside.merge(current, _apply_scope(config, rtype, subresource), builtin=builtin)
        keep = managedfields.union(applied, serverside.others_fields(entries, manager, subresource))
        merged = serverside.prune(merged, last, keep)
        changed = _scoped(managedfields.changed_fields(current, merged, builtin=builtin), rtype, subresource)
        taken = serverside.find_conflicts(entries, manager, subresource, changed)
        if taken and not force:
            raise serverside.conflict_error(
                [(entry, list(serverside.leaf_paths(fields))) for entry, fields in taken]
            )
        try:
            obj = self._decode(served, merged)
        except DecodeError as error:
            raise patch_invalid(
                json.dumps(_type_fields_first(merged), separators=(",", ":")), error.detail
            ) from None
        self._check_identity(served, obj["metadata"], ns, name)
        rv = obj["metadata"].get("resourceVersion")
        if rv and str(rv) != existing.obj["metadata"]["resourceVersion"]:
            raise conflict(rtype, name)
        self._unknown_fields(served, obj, field_validation, warnings)
        previous_time = serverside.applied_time(entries, manager, subresource)

        def updated(old: JsonDict, new: JsonDict) -> list[dict[str, Any]]:
            moved = _scoped(managedfields.changed_fields(old, new, builtin=builtin), rtype, subresource)
            if not moved and not taken and applied == last:
                return entries  # a no-op: nothing is written, no time moves
            when = self._now() if moved or applied != last or previous_time is None else previous_time
            return serverside.apply_entries(
                entries,
                manager=manager,
                subresource=subresource,
                api_version=rtype.api_version,
                when=when,
                applied=applied,
                taken=taken,
                present=managedfields.fields_of(new, builtin=builtin),
            )

        entry = self._apply_update(
            served,
            existing,
            obj,
            subresource,
            manager=manager,
            dry_run=dry_run,
            managed=updated,
            admission=admission,
            warnings=warnings,
        )
        return entry, False

    # --- delete ------------------------------------------------------------------------------------

    def write_delete(
        self,
        served: Served,
        namespace: str | None,
        name: str,
        *,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        admission: AdmissionHook | None = None,
    ) -> DeleteResult:
        """DELETE semantics; the result says whether the object is gone or waits for finalizers."""
        storage, rtype = served.storage, served.rtype
        ns = (namespace or "") if rtype.namespaced else ""
        existing = storage.get(ns, name)
        if existing is None:
            raise not_found(rtype, name)
        old = existing.obj
        old_meta = old["metadata"]
        if propagation_policy is not None and propagation_policy not in _PROPAGATION_POLICIES:
            raise invalid(
                "",
                "DeleteOptions",
                "",
                [not_supported("propagationPolicy", propagation_policy, [*_PROPAGATION_POLICIES, "nil"])],
            )
        for key, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = (preconditions or {}).get(key)
            if wanted is not None and wanted != old_meta.get(key):
                tail = (
                    "The object might have been deleted and then recreated"
                    if key == "uid"
                    else "The object might have been modified"
                )
                raise conflict_for_kind(
                    rtype.group,
                    rtype.kind,
                    name,
                    f"the {label} in the precondition ({wanted}) does not match the {label} "
                    f"in record ({old_meta.get(key)}). {tail}",
                )
        is_namespace = storage.rtype == NAMESPACES
        if is_namespace:
            if name in UNDELETABLE_NAMESPACES:
                raise forbidden(rtype, name, "this namespace may not be deleted")
            if old_meta.get("deletionTimestamp"):
                raise conflict(
                    rtype,
                    name,
                    "The system is ensuring all content is removed from this namespace.  "
                    "Upon completion, this namespace will automatically be purged by the "
                    "system.",
                )
        if admission is not None:
            admission.mutate(served, None, old)
            admission.validate(served, None, old)
        served.warm(old)
        finalizers = list(old_meta.get("finalizers") or ())
        registry_finalizer = storage.strategy.delete_finalizer()
        if (
            registry_finalizer
            and not old_meta.get("deletionTimestamp")
            and registry_finalizer not in finalizers
        ):
            finalizers.append(registry_finalizer)
        if propagation_policy is not None:
            finalizers = [f for f in finalizers if f not in ("orphan", "foregroundDeletion")]
            if propagation_policy == "Orphan":
                finalizers.append("orphan")
            elif propagation_policy == "Foreground":
                finalizers.append("foregroundDeletion")
        pending = bool(finalizers) or (is_namespace and bool((old.get("spec") or {}).get("finalizers")))
        if not pending:
            if dry_run:
                return DeleteResult(served.view(existing), True)
            return DeleteResult(served.view(self._remove(storage, existing)), True)
        meta = dict(old_meta)
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = self._now()
            if meta.get("generation"):
                meta["generation"] = int(meta["generation"]) + 1
        if not is_namespace:
            meta["deletionGracePeriodSeconds"] = 0
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
        new = {**old, "metadata": meta}
        if is_namespace:
            new["status"] = {**(old.get("status") or {}), "phase": "Terminating"}
        served.warm(new)
        if new == old or dry_run:
            return DeleteResult(served.view(existing if new == old else Entry(_ordered(new, meta))), False)
        return DeleteResult(served.view(self._commit(storage, "MODIFIED", new, old)), False)

    # --- scale subresource ----------------------------------------------------------------------------

    def _scale_paths(self, served: Served) -> tuple[str, str, str | None]:
        paths = served.storage.strategy.scale_paths(served.rtype)
        if paths is None:
            raise not_found_path()
        return paths

    def read_scale(self, served: Served, namespace: str | None, name: str) -> Entry:
        """The autoscaling/v1 Scale of an object (404 when its kind has no scale subresource)."""
        paths = self._scale_paths(served)
        return Entry(_scale(self.read(served, namespace, name).obj, paths))

    def write_scale(
        self,
        served: Served,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        patch_type: str | None = None,
        manager: str = DEFAULT_MANAGER,
        dry_run: bool = False,
    ) -> Entry:
        """PUT (``patch_type`` None) or PATCH a Scale: sets the object's replicas, returns the new Scale."""
        paths = self._scale_paths(served)
        rtype = served.rtype
        ns = (namespace or "") if rtype.namespaced else ""
        existing = served.storage.get(ns, name)
        if existing is None:
            raise not_found(rtype, name)
        scale = _scale(served.view(existing).obj, paths)
        if patch_type is not None:
            if isinstance(body, bytes | str):
                try:
                    body = json.loads(body)
                except ValueError as error:
                    raise bad_request(f"error decoding patch: {error}") from None
            try:
                if patch_type == JSON_PATCH:
                    _check_json_patch(body)
                    body = json_patch(scale, body)
                elif isinstance(body, dict):
                    body = merge_patch(scale, body)
                else:
                    raise bad_request("error decoding patch: a merge patch must be a JSON object")
            except PatchError:
                raise ApiError(
                    422, "Invalid", "the server rejected our request due to an error in our request", {}
                ) from None
        if not isinstance(body, dict):
            raise bad_request("the body of the request is not a Scale object")
        replicas = (body.get("spec") or {}).get("replicas", 0)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise invalid(
                "autoscaling",
                "Scale",
                name,
                [field_invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
            )
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv and str(rv) != existing.obj["metadata"]["resourceVersion"]:
            raise conflict(rtype, name)
        obj = copy_json(served.view(existing).obj)
        _set_path(obj, paths[0], replicas)
        updated = self._apply_update(
            served, existing, self._decode(served, obj), None, manager=manager, dry_run=dry_run
        )
        return Entry(_scale(updated.obj, paths))

    # --- read --------------------------------------------------------------------------------------

    def read(self, served: Served, namespace: str | None, name: str) -> Entry:
        rtype = served.rtype
        entry = served.storage.get((namespace or "") if rtype.namespaced else "", name)
        if entry is None:
            raise not_found(rtype, name)
        return served.view(entry)

    def selectors(
        self, served: Served, label_selector: str | None, field_selector: str | None
    ) -> tuple[Selector, FieldSelector]:
        """Compile a list/watch's selectors for ``served`` (400 ApiError when malformed)."""
        try:
            labels = Selector.parse(label_selector)
        except InvalidSelectorError as error:
            raise bad_request(str(error)) from None
        fields = FieldSelector.compile(field_selector, served.storage.strategy, served.rtype.namespaced)
        return labels, fields

    def read_list(
        self,
        served: Served,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        shard_selector: str | None = None,
    ) -> ListResult:
        """LIST semantics, pagination included; entries are in the served version.

        ``shard_selector`` (pass it only with the ShardedListAndWatch gate on) keeps the objects
        of that shard (:mod:`memop.testing.apiserver.sharding`; a 500 ApiError when it does not parse).
        Pages are cut among the objects it keeps, and a continue token holds no selector: the
        client sends the same one with it, as with label selectors."""
        labels, fields = self.selectors(served, label_selector, field_selector)
        storage = served.storage
        start = ""
        list_rv = self._rv
        _check_list_options(resource_version, resource_version_match, continue_token)
        # After the options' checks: the apiserver's handler validates those, its registry then
        # parses the shard selector, before the storage reads a continue token.
        shard = compile_shard_selector(shard_selector)
        if continue_token:
            if resource_version:
                raise bad_request("specifying resource version is not allowed when using continue")
            list_rv, start = decode_continue(continue_token)
            if list_rv < self._compacted:
                raise gone(_EXPIRED_CONTINUE)
            state = self._state_at(storage, list_rv)
        elif resource_version_match == "Exact":
            try:
                list_rv = int(resource_version or "")
            except ValueError:
                raise bad_request(f"invalid resource version: {resource_version}") from None
            if list_rv > self._rv:
                raise ApiError(
                    504,
                    "Timeout",
                    f"Too large resource version: {list_rv}, current: {self._rv}",
                    {
                        "causes": [
                            {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                        ],
                        "retryAfterSeconds": 1,
                    },
                )
            if list_rv < self._compacted:
                raise too_old_resource_version(list_rv, self._compacted)
            state = self._state_at(storage, list_rv)
        else:
            state = storage.objects
        if limit is not None and limit <= 0:
            limit = None
        if resource_version == "0" and not continue_token:
            limit = None  # served from the watch cache, which ignores limit
        scoped = namespace if served.rtype.namespaced and namespace else None
        name_pin = fields.exact("metadata.name")
        namespaces = [scoped] if scoped is not None else sorted(state)
        items: list[Entry] = []
        next_key: str | None = None
        remaining = 0
        scanned = 0  # every object from the start key on, in or out of the shard
        for ns in namespaces:
            names = state.get(ns)
            if not names:
                continue
            keys = (
                [name_pin]
                if name_pin is not None and name_pin in names
                else ([] if name_pin is not None else sorted(names))
            )
            for name in keys:
                key = f"{ns}/{name}" if ns else name
                if start and key <= start:
                    continue
                scanned += 1
                entry = names[name]
                obj = entry.obj
                if shard is not None and not shard.matches(obj):
                    continue
                if not labels.matches(obj["metadata"].get("labels")):
                    continue
                if not fields.is_empty() and not fields.matches(obj):
                    continue
                if limit is not None and len(items) >= limit:
                    remaining += 1
                    continue
                items.append(served.view(entry))
                next_key = key
        token = None
        if limit is not None and remaining and next_key is not None:
            token = encode_continue(list_rv, next_key)
        exact = labels.is_empty() and fields.is_empty()
        if token and exact and shard is not None and limit is not None:
            # kube-apiserver counts what is left as if there were no shard selector (its
            # predicate's Empty() looks at labels and fields only): every object from the page's
            # start on, less the page's size. An overcount, as the server sends it.
            remaining = scanned - limit
        return ListResult(items, list_rv, token, remaining if token and exact else None, shard)

    def dependents_of(self, owner_uid: str) -> list[tuple[ResourceType, dict[str, Any]]]:
        """Objects whose ownerReferences name ``owner_uid`` (copies, with their storage type)."""
        out: list[tuple[ResourceType, dict[str, Any]]] = []
        for storage_key, ns, name in sorted(self._owners.get(owner_uid, ())):
            storage = self._storages.get(storage_key)
            entry = storage.get(ns, name) if storage is not None else None
            if storage is not None and entry is not None:
                out.append((storage.rtype, copy_json(entry.obj)))
        return out

    def objects(self, storage: Storage) -> Iterable[Entry]:
        """Every stored entry of ``storage`` (storage form, shared: read only)."""
        for names in list(storage.objects.values()):
            yield from list(names.values())

    # --- the contract API (deep copies in, deep copies out) ---------------------------------------

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        return copy_json(self.read(self.served_for(rtype), namespace, name).obj)  # type: ignore[no-any-return]

    def list(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        result = self.read_list(
            self.served_for(rtype), namespace, label_selector=label_selector, field_selector=field_selector
        )
        return [copy_json(e.obj) for e in result.entries], str(result.resource_version)

    def create(
        self,
        rtype: ResourceType,
        namespace: str | None,
        obj: dict[str, Any],
        *,
        manager: str = DEFAULT_MANAGER,
    ) -> dict[str, Any]:
        entry = self.write_create(self.served_for(rtype), namespace, copy_json(obj), manager=manager)
        return copy_json(entry.obj)  # type: ignore[no-any-return]

    def update(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        obj: dict[str, Any],
        *,
        subresource: str | None = None,
        manager: str = DEFAULT_MANAGER,
    ) -> dict[str, Any]:
        entry = self.write_update(
            self.served_for(rtype), namespace, name, copy_json(obj), subresource=subresource, manager=manager
        )
        return copy_json(entry.obj)  # type: ignore[no-any-return]

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        content_type: str,
        *,
        subresource: str | None = None,
        manager: str = DEFAULT_MANAGER,
    ) -> dict[str, Any]:
        entry = self.write_patch(
            self.served_for(rtype),
            namespace,
            name,
            copy_json(body),
            content_type,
            subresource=subresource,
            manager=manager,
        )
        return copy_json(entry.obj)  # type: ignore[no-any-return]

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        *,
        propagation_policy: str | None = None,
        preconditions: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Delete (or start deleting) an object; returns its last state either way."""
        result = self.write_delete(
            self.served_for(rtype),
            namespace,
            name,
            propagation_policy=propagation_policy,
            preconditions=preconditions,
        )
        return copy_json(result.entry.obj)  # type: ignore[no-any-return]


def _check_list_options(
    resource_version: str | None, resource_version_match: str | None, continue_token: str | None
) -> None:
    """``ValidateListOptions`` for a LIST: 422 Invalid ListOptions when resourceVersionMatch
    comes without resourceVersion, with continue, with an unknown value, or as Exact for "0"."""
    if not resource_version_match:
        return
    path = "resourceVersionMatch"
    errors = []
    if not resource_version:
        errors.append(
            forbidden_field(path, "resourceVersionMatch is forbidden unless resourceVersion is provided")
        )
    if continue_token:
        errors.append(forbidden_field(path, "resourceVersionMatch is forbidden when continue is provided"))
    if resource_version_match not in ("Exact", "NotOlderThan"):
        errors.append(not_supported(path, resource_version_match, ["Exact", "NotOlderThan", ""]))
    if resource_version_match == "Exact" and resource_version == "0":
        errors.append(
            forbidden_field(path, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        )
    if errors:
        raise invalid("meta.k8s.io", "ListOptions", "", errors)


def _type_fields_first(obj: Any) -> Any:
    """An object with apiVersion and kind first, as a typed object encodes."""
    if not isinstance(obj, dict):
        return obj
    head = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    return {**head, **{k: v for k, v in obj.items() if k not in head}}


def _go_sprint(value: Any) -> str:
    """Go's ``%v`` of a decoded JSON value (``map[k:v]`` with sorted keys, ``[a b]``)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_sprint(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_sprint(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return go_repr(float(value))  # encoding/json decodes every number as a float64
    return str(value)


def _check_json_patch(patch: Any) -> None:
    """Reject a malformed JSON patch with 400, as jsonpatch.DecodePatch does."""
    if not isinstance(patch, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    for op in patch:
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            raise bad_request("json: cannot unmarshal into Go value of type jsonpatch.Operation")
        if op["op"] not in ("add", "remove", "replace", "move", "copy", "test"):
            raise bad_request(f"Unexpected kind: {go_quote(op['op'])}")
        if not isinstance(op.get("path"), str):
            raise bad_request("jsonpatch: operation missing path")
