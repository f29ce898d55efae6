"""Children made before sharding was turned on, labelled for their owner's shard.

A sharded replica watches the children of its owners (:data:`~memop.runtime.sharding.keys.BY_OWNER_BUCKET`)
through the bucket label that controllers put on what they create
(:meth:`memop.runtime.cache.cache.Cache.shard_labels`). A child an unsharded memop made has no
such label, so it reaches no replica: a Memcached's Deployment would look missing and its
create fail with AlreadyExists on every reconcile, a PodSet would make its pods again beside
the old ones.

So when a replica takes shards, it lists each such resource's objects that lack the label
(the informer's own selector plus ``!sharding.memop.dev/bucket``: the server filters, and once
every child is labelled the list is empty), once for the shards taken together, and gives
those whose controller owner falls in one of them their owner's bucket label. The watch then
brings them in like any other child. Only the shard's holder labels them, as it alone writes
the rest of the shard. A failed pass is retried with backoff until it succeeds or the shard is
given up: a child left unlabelled would be lost to every replica.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

from memop.runtime.cache.cache import Cache
from memop.runtime.cache.labels import DOES_NOT_EXIST, Requirement, Selector
from memop.runtime.cache.store import controller_owner_uid
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, NotFound, TransportError
from memop.runtime.client.resources import Resource
from memop.runtime.sharding.ring import BUCKET_LABEL, Ring, bucket_label_value, bucket_of
from memop.runtime.util.backoff import Backoff
from memop.runtime.util.clock import Clock, RealClock

__all__ = ["label_children", "label_children_until_done"]

log = logging.getLogger("memop.sharding")


def _unlabelled(selector: Selector | None) -> str:
    own = selector.requirements if selector is not None else ()
    return str(Selector([*own, Requirement.new(BUCKET_LABEL, DOES_NOT_EXIST, [])]))


async def _label_scope(
    client: Client, ring: Ring, shards: Collection[int], scope: tuple[Resource, Selector | None, str | None]
) -> int:
    resource, selector, namespace = scope
    items, _ = await client.list_all(resource, namespace, label_selector=_unlabelled(selector))
    labelled = 0
    for obj in items:
        meta = obj.get("metadata") or {}
        owner = controller_owner_uid(obj)
        if not owner or ring.shard_of_bucket(bucket_of(owner)) not in shards:
            continue  # not a controlled child, or another shard's
        patch = {"metadata": {"labels": {BUCKET_LABEL: bucket_label_value(owner)}}}
        try:
            await client.patch(resource, str(meta["name"]), patch, meta.get("namespace") or None)
        except NotFound:
            continue  # gone meanwhile: nothing to bring in
        labelled += 1
    return labelled


async def label_children(client: Client, cache: Cache, shards: Collection[int]) -> int:
    """Label the unlabelled children of ``shards``' owners, in every resource the cache watches
    by owner bucket, with one LIST per resource and namespace for all of them, those LISTs at
    once (a taken shard waits for this pass before it is watched); returns how many were
    labelled. The first API error propagates, once every scope's pass has ended."""
    ring = cache.ring
    if ring is None or not shards:
        return 0
    scopes = cache.owner_bucket_scopes()
    results = await asyncio.gather(
        *(_label_scope(client, ring, shards, scope) for scope in scopes), return_exceptions=True
    )
    labelled = 0
    for (resource, _, namespace), done in zip(scopes, results, strict=True):
        if isinstance(done, BaseException):
            raise done
        if done:
            where = f" in {namespace}" if namespace else ""
            log.info(
                "labelled %d %s%s made before sharding for %s, so that their owners' replica sees them",
                done, resource.plural, where, _shards_named(shards),
            )  # fmt: skip
        labelled += done
    return labelled


async def label_children_until_done(
    client: Client, cache: Cache, shards: Collection[int], *, clock: Clock | None = None
) -> int:
    """:func:`label_children`, retried with backoff after an API or transport error (one
    warning line each) until a pass succeeds; cancel it when the shards are given up."""
    clock = clock or RealClock()
    backoff = Backoff(clock=clock)
    while True:
        try:
            return await label_children(client, cache, shards)
        except (ApiError, TransportError) as error:
            delay = backoff.next_delay()
            log.warning(
                "could not label the children of %s made before sharding (they stay invisible to "
                "every replica until labelled), retrying in %.1fs: %s",
                _shards_named(shards), delay, error,
            )  # fmt: skip
            await clock.sleep(delay)


def _shards_named(shards: Collection[int]) -> str:
    listed = sorted(shards)
    return f"shard {listed[0]}" if len(listed) == 1 else "shards " + ", ".join(map(str, listed))
