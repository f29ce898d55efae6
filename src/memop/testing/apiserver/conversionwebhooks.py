"""Conversion webhooks of custom resources (``spec.conversion.strategy: Webhook``), as the
apiextensions-apiserver of v1.36 calls them (``conversion/webhook_converter.go``).

Whenever an object changes version (a write in a version other than the storage version, a
read, list or watch in a version other than the stored one), the server sends the CRD's webhook
a ConversionReview (the first of ``conversionReviewVersions`` it knows: v1, v1beta1) and uses
the converted objects: one review per object read or written, and one per list or batch of
watch events for what its version's watch cache (below) lacks. The response is
checked as v1.36 checks it: uid, ``result.status`` Success (else its message is the error), as
many objects as sent, each in the desired apiVersion and the same kind, name, namespace and
uid; of the metadata only labels and annotations are taken from the webhook. A failure is a
500 ``conversion webhook for <group/version, Kind=K> failed: ...`` with no reason (measured on
v1.36.2 for a get, a list and a create in another version); a watch event that cannot be
converted ends the watch, as the real server's encoder error does.

Besides, as kube-apiserver keeps a watch cache for every served version of a CRD, each decoding
the storage's events into its version, every committed change is converted in the background
into every served version other than the storage version (one review per change and version,
the deleted object for a delete: :class:`WatchCaches`). A list or a watch in such a version
is served from that cache, with no review of its own (once the changes committed before it are
converted, as a consistent read from the cache waits for it), and so is a get with a
resourceVersion; a get without one reads storage, past the cache, and asks the webhook each
time; a write's conversions and whatever a cache lacks (an object written before the webhook
was configured) ask it as below. So a create in the storage version sends one review to each
other version, and a create in another version one to the storage version and two back (its
answer, its cache).

How it meets the synchronous store: the conversions a :class:`~memop.testing.apiserver.store.Served` of a
webhook CRD does are cache lookups; a miss raises :class:`ConversionPending`, which the server
resolves (the webhook call) before it runs the request again. The cache is keyed by what a
conversion can depend on besides identity: the desired version and the object without its
metadata, labels and annotations excepted (the webhook may not change the rest of the metadata,
which is restored from the original), so a write's retry, with a new uid or timestamp, meets
the conversion of its first run. CRDs with ``strategy: None`` never come here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.objects import JsonDict, copy_json
from memop.testing.apiserver.webhookclient import CallError, WebhookCalls

if TYPE_CHECKING:
    from memop.testing.apiserver.store import Change, Served, Store

log = logging.getLogger(__name__)

_REVIEW_VERSIONS = ("v1", "v1beta1")
# How long a list or watch waits for the watch cache to have the changes committed before it,
# as the cacher waits for freshness (3 s) before it reads from storage instead; here what the
# cache lacks then is converted by the request itself.
FRESHNESS_WAIT = 3.0
_CACHE_SIZE = 50_000


def _key(obj: Mapping[str, Any], api_version: str) -> str:
    meta = obj.get("metadata") or {}
    rest = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion")}
    kept = {k: meta.get(k) for k in ("labels", "annotations") if meta.get(k)}
    return json.dumps([api_version, obj.get("apiVersion"), kept, rest], sort_keys=True, separators=(",", ":"))


def _gvk(obj: Mapping[str, Any]) -> str:
    """schema.GroupVersionKind's String()."""
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    return f"{group}/{version}, Kind={obj.get('kind') or ''}"


# Converted objects (metadata: labels and annotations only) by _key.
_Cache = OrderedDict[str, JsonDict]


class ConversionPending(Exception):
    """A conversion the cache does not hold yet: :meth:`resolve` calls the webhook."""

    def __init__(
        self,
        conversion: WebhookConversion,
        obj: Mapping[str, Any],
        api_version: str,
        cache: _Cache | None = None,
    ) -> None:
        super().__init__(api_version)
        self.conversion = conversion
        self.obj = obj
        self.api_version = api_version
        self.cache = cache

    async def resolve(self, client: WebhookCalls, batch: list[Mapping[str, Any]] | None = None) -> None:
        """Convert the object (with ``batch``, every object of it in one review) into the cache."""
        objs = [self.obj] if batch is None else batch
        await self.conversion.convert(objs, self.api_version, client, self.cache)


class WebhookConversion:
    """The conversion of one CRD's objects through its webhook (a cache filled by reviews)."""

    def __init__(self, crd: Mapping[str, Any]) -> None:
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        webhook = conversion.get("webhook") or {}
        self.crd_name = str((crd.get("metadata") or {}).get("name") or "")
        self.client_config: Mapping[str, Any] = webhook.get("clientConfig") or {}
        self.review_versions = [str(v) for v in webhook.get("conversionReviewVersions") or ()]
        self._cache: _Cache = OrderedDict()
        # The watch cache of each served version: (namespace, name) -> (resourceVersion, the
        # object in that version); never older than the change last converted into it.
        self._watch_caches: dict[str, dict[tuple[str, str], tuple[int, JsonDict]]] = {}
        # Background conversions of committed changes not finished yet.
        self.in_flight: set[asyncio.Task[None]] = set()

    def to(self, api_version: str) -> ConvertTo:
        """The synchronous conversion into ``api_version`` a Served holds (ConversionPending on a miss)."""
        return ConvertTo(self, api_version)

    def lookup(self, obj: Mapping[str, Any], api_version: str, cache: _Cache | None = None) -> JsonDict:
        """``obj`` in ``api_version`` from ``cache`` (default the shared one), else
        ConversionPending."""
        if obj.get("apiVersion") == api_version:
            return dict(obj)
        hit = (self._cache if cache is None else cache).get(_key(obj, api_version))
        if hit is None:
            raise ConversionPending(self, obj, api_version, cache)
        return _restore(obj, hit, api_version)

    def cached(self, obj: Mapping[str, Any], api_version: str) -> JsonDict | None:
        """``obj`` (storage form) from the watch cache of ``api_version``, None when the cache
        does not hold it at its resourceVersion."""
        meta = obj.get("metadata") or {}
        held = self._watch_caches.get(api_version, {}).get(_identity(meta))
        if held is None or str(held[0]) != str(meta.get("resourceVersion")):
            return None
        out: JsonDict = copy_json(held[1])
        return out

    async def cache_change(self, change: Change, api_version: str, client: WebhookCalls) -> None:
        """Convert a committed change into the watch cache of ``api_version`` (one review);
        a failure is logged, as the cacher logs an event it cannot decode, and leaves the
        object to the conversions of the requests that need it."""
        obj = change.entry.obj
        try:
            (converted,) = await self._review([obj], api_version, client)
        except _Failed as error:
            log.warning("conversion webhook for %s %s (watch cache of %s)", _gvk(obj), error, api_version)
            return
        cache = self._watch_caches.setdefault(api_version, {})
        key = _identity(obj["metadata"])
        held = cache.get(key)
        if held is not None and held[0] > change.rv:
            return
        # A deleted object stays, at its deleting version, for the watches its event reaches.
        cache[key] = (change.rv, _restore(obj, converted, api_version))

    async def convert_cached(
        self, objs: list[Mapping[str, Any]], api_version: str, client: WebhookCalls
    ) -> list[JsonDict]:
        """``objs`` (storage form) in ``api_version`` as a watch sends them: from the watch
        cache once the changes committed before are in it, the rest in one review (ApiError)."""
        if self.in_flight:
            await asyncio.wait(list(self.in_flight), timeout=FRESHNESS_WAIT)
        missing = [obj for obj in objs if self.cached(obj, api_version) is None]
        await self.convert(missing, api_version, client)
        return [self.cached(obj, api_version) or self.lookup(obj, api_version) for obj in objs]

    async def convert(
        self,
        objs: list[Mapping[str, Any]],
        api_version: str,
        client: WebhookCalls,
        cache: _Cache | None = None,
    ) -> None:
        """One ConversionReview for those of ``objs`` ``cache`` (default the shared one) lacks,
        into it; ApiError 500 on failure."""
        cache = self._cache if cache is None else cache
        wanted: dict[str, Mapping[str, Any]] = {}
        for obj in objs:
            if obj.get("apiVersion") != api_version:
                key = _key(obj, api_version)
                if key not in cache:
                    wanted.setdefault(key, obj)
        if not wanted:
            return
        sent = list(wanted.values())
        what = _gvk(sent[0])
        try:
            converted = await self._review(sent, api_version, client)
        except _Failed as error:
            # Measured on v1.36.2: a bare 500 (no reason, no details) with the converter's error.
            raise ApiError(500, "", f"conversion webhook for {what} {error}") from None
        for key, out in zip(wanted, converted, strict=True):
            cache[key] = {k: v for k, v in out.items() if k != "metadata"} | {
                "metadata": {k: out["metadata"][k] for k in ("labels", "annotations") if k in out["metadata"]}
            }
            if len(cache) > _CACHE_SIZE:
                cache.popitem(last=False)

    async def _review(
        self, objs: list[Mapping[str, Any]], api_version: str, client: WebhookCalls
    ) -> list[JsonDict]:
        version = next((v for v in self.review_versions if v in _REVIEW_VERSIONS), None)
        if version is None:
            raise _Failed("failed: no supported conversion review versions")
        uid = str(uuid.uuid4())
        review = {
            "kind": "ConversionReview",
            "apiVersion": f"apiextensions.k8s.io/{version}",
            "request": {
                "uid": uid,
                "desiredAPIVersion": api_version,
                "objects": [copy_json(o) for o in objs],
            },
        }
        try:
            # kube-apiserver sets no timeout of its own here but the request's (60 s at most).
            answer = await client.post("conversion", self.crd_name, self.client_config, review, 30.0)
        except CallError as error:
            raise _Failed(f"failed: {error}") from None
        converted = _verify(answer, uid, version)
        if len(converted) != len(objs):
            raise _Failed(f"returned {len(converted)} objects, expected {len(objs)}")
        single = len(objs) == 1
        out: list[JsonDict] = []
        for i, (original, item) in enumerate(zip(objs, converted, strict=True)):
            where = "invalid object at index 0" if single else f"invalid converted object at index {i}"
            if not isinstance(item, dict):
                raise _Failed(f"returned {where}: Object 'Kind' is missing in '{json.dumps(item)}'")
            if item.get("apiVersion") != api_version:
                raise _Failed(
                    f"returned {where}: invalid groupVersion "
                    f"(expected {api_version}, received {item.get('apiVersion')})"
                )
            if item.get("kind") != original.get("kind"):
                raise _Failed(
                    f"returned {where}: invalid kind "
                    f"(expected {original.get('kind')}, received {item.get('kind')})"
                )
            reason = _changed_identity(original, item)
            if reason:
                prefix = "invalid object" if single else f"invalid converted object at index {i}"
                raise _Failed(f"returned {prefix}: {reason}")
            meta = item.get("metadata")
            if not isinstance(meta, dict):
                where = "invalid metadata" if single else f"invalid metadata in object at index {i}"
                raise _Failed(f"returned {where}: missing metadata in converted object")
            out.append(item)
        return out


class _Failed(Exception):
    pass


def _changed_identity(original: Mapping[str, Any], item: Mapping[str, Any]) -> str:
    """``validateConvertedObject``."""
    a, b = original.get("metadata") or {}, item.get("metadata") or {}
    for key, label in (("name", "name"), ("namespace", "namespace"), ("uid", "UID")):
        if (a.get(key) or "") != (b.get(key) if isinstance(b, dict) else "") and (a.get(key) or b.get(key)):
            return f"must have the same {label}: {a.get(key) or ''} != {b.get(key) or ''}"
    return ""


def _verify(answer: Mapping[str, Any], uid: str, version: str) -> list[Any]:
    """``getConvertedObjectsFromResponse``."""
    if (answer.get("apiVersion"), answer.get("kind")) != (
        f"apiextensions.k8s.io/{version}",
        "ConversionReview",
    ):
        group, _, plain = str(answer.get("apiVersion") or "").rpartition("/")
        raise _Failed(
            f"failed: expected webhook response of apiextensions.k8s.io/{version}, Kind=ConversionReview, "
            f"got {group}/{plain}, Kind={answer.get('kind') or ''}"
        )
    response = answer.get("response")
    if not isinstance(response, dict):
        raise _Failed("failed: no response provided")
    if version == "v1" and response.get("uid") != uid:
        raise _Failed(f'failed: expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    found = response.get("result")
    result: dict[str, Any] = found if isinstance(found, dict) else {}
    if result.get("status") != "Success":
        if result.get("message"):
            raise _Failed(f"failed: {result['message']}")
        raise _Failed(f"failed: response.result.status was '{result.get('status') or ''}', not 'Success'")
    objects = response.get("convertedObjects")
    return list(objects) if isinstance(objects, list) else []


def _restore(original: Mapping[str, Any], converted: Mapping[str, Any], api_version: str) -> JsonDict:
    """``restoreObjectMeta``: the original's metadata with the converted labels and annotations."""
    meta = dict(original.get("metadata") or {})
    for key in ("labels", "annotations"):
        if key in converted["metadata"]:
            meta[key] = copy_json(converted["metadata"][key])
        else:
            meta.pop(key, None)
    out: JsonDict = {"kind": original.get("kind"), "apiVersion": api_version, "metadata": meta}
    out.update((k, copy_json(v)) for k, v in converted.items() if k not in ("kind", "apiVersion", "metadata"))
    return out


def _identity(meta: Mapping[str, Any]) -> tuple[str, str]:
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class ConvertTo:
    """A Served's conversion into one version through a CRD's webhook (a cache lookup);
    ``from_watch_cache``: the watch cache's object first (a list's or a watch's); ``cache``: a
    request's own conversions instead of the shared ones (a read from storage's)."""

    __slots__ = ("api_version", "cache", "conversion", "from_watch_cache")

    def __init__(
        self,
        conversion: WebhookConversion,
        api_version: str,
        *,
        from_watch_cache: bool = False,
        cache: _Cache | None = None,
    ) -> None:
        self.conversion = conversion
        self.api_version = api_version
        self.from_watch_cache = from_watch_cache
        self.cache = cache

    def __call__(self, obj: Mapping[str, Any]) -> JsonDict:
        if self.from_watch_cache:
            cached = self.conversion.cached(obj, self.api_version)
            if cached is not None:
                return cached
        return self.conversion.lookup(obj, self.api_version, self.cache)


def conversion_of(served: Any) -> WebhookConversion | None:
    """The webhook conversion behind a Served (None for a None strategy or a built-in)."""
    to = getattr(served, "to_served", None)
    return to.conversion if isinstance(to, ConvertTo) else None


class WatchCaches:
    """The background half of the watch caches: each committed change of a webhook-converted
    CRD is converted, in a task of its own, into every served version but the storage one.
    Owns those tasks: :meth:`close` cancels and awaits them."""

    def __init__(self, store: Store, client: WebhookCalls) -> None:
        self._client = client
        self._tasks: set[asyncio.Task[None]] = set()
        store.add_listener(self._on_change)

    def _on_change(self, change: Change) -> None:
        for served in list(change.storage.served.values()):
            conversion = conversion_of(served) if served.webhook_conversion else None
            if conversion is None:
                continue
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # a store written outside the server's loop: no cache to keep
            task = loop.create_task(conversion.cache_change(change, served.rtype.api_version, self._client))
            self._tasks.add(task)
            conversion.in_flight.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(conversion.in_flight.discard)

    @staticmethod
    def got(served: Served) -> Served:
        """The Served a get without resourceVersion reads: kube-apiserver reads it from storage
        (etcd), past the watch cache, and decodes it, so each such get of ``served`` sends its
        own review: the conversions of earlier requests are not reused."""
        conversion = conversion_of(served) if served.webhook_conversion else None
        if conversion is None:
            return served
        to = ConvertTo(conversion, served.rtype.api_version, cache=OrderedDict())
        return dataclasses.replace(served, to_served=to)

    async def listed(self, served: Served) -> Served:
        """The Served a list or watch of ``served`` reads: its version's watch cache first, once
        the changes committed before are converted into it (``served`` itself without one)."""
        conversion = conversion_of(served) if served.webhook_conversion else None
        if conversion is None:
            return served
        if conversion.in_flight:
            await asyncio.wait(list(conversion.in_flight), timeout=FRESHNESS_WAIT)
        to = ConvertTo(conversion, served.rtype.api_version, from_watch_cache=True)
        return dataclasses.replace(served, to_served=to)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
