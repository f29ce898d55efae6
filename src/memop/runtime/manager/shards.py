"""A sharded manager's parts (see :mod:`memop.runtime.manager.manager`): what taking and
giving up a shard does (:class:`ShardWork`, the membership's listener), and whether the API
server filters lists and watches by shardSelector, checked at start and followed while the
replica runs (server-side when its ShardedListAndWatch feature gate is on, else each replica
filters what it receives itself)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memop.runtime import metrics
from memop.runtime.cache.cache import Cache
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, TransportError
from memop.runtime.sharding.adoption import label_children, label_children_until_done
from memop.runtime.sharding.membership import ShardingConfig
from memop.runtime.sharding.probe import server_filters_by_shard_selector
from memop.runtime.util.clock import Clock, first_of
from memop.runtime.util.tasks import cancel_and_wait

if TYPE_CHECKING:
    from memop.runtime.manager.manager import Manager

log = logging.getLogger("memop.manager")


class ShardWork:
    """The manager's side of the membership: a shard's objects enter the cache and its
    requests the controllers' gates; giving one up drains every controller first.

    A shard taken is reconciled once its objects and their children are in the cache: until
    then its requests are parked (see sharding.gate), so that no reconcile misses a child that
    exists and tries to make it again."""

    def __init__(self, manager: Manager) -> None:
        self._manager = manager
        # Per shard held: waiting for its cache to sync, then labelling what was made before
        # sharding if a first pass failed (sharding.adoption).
        self._tasks: dict[int, list[asyncio.Task[Any]]] = {}

    async def acquired(self, shards: Sequence[int], *, label: bool = True) -> None:
        """``label=False`` (an uninstall) skips labelling children made before sharding."""
        manager, cache = self._manager, self._manager.cache
        taken = manager.clock.monotonic()
        if label and cache.owner_bucket_scopes():
            # Before the shards are watched, so that their children arrive with the first LIST;
            # one pass for the shards of a round.
            try:
                await label_children(manager.client, cache, shards)
            except (ApiError, TransportError) as error:
                log.warning(
                    "could not label the children of shards %s made before sharding (they stay "
                    "invisible to every replica until labelled), retrying in the background: %s",
                    ", ".join(map(str, shards)), error,
                )  # fmt: skip
                for shard in shards:  # each its own retry, cancelled when the shard is given up
                    retry = label_children_until_done(manager.client, cache, (shard,), clock=manager.clock)
                    self._track(shard, asyncio.create_task(retry, name=f"sharding-label-children-{shard}"))
        for shard in shards:
            for controller in manager.controllers:
                if controller.gate is not None:
                    controller.gate.begin(shard)
        await cache.add_shards(shards)
        for shard in shards:
            activate = self._activate_when_synced(shard, taken)
            self._track(shard, asyncio.create_task(activate, name=f"sharding-sync-{shard}"))

    def _track(self, shard: int, task: asyncio.Task[Any]) -> None:
        self._tasks.setdefault(shard, []).append(task)

    async def _activate_when_synced(self, shard: int, taken: float) -> None:
        timeout = self._manager.options.cache_sync_timeout
        if not await self._manager.cache.wait_shard_synced(shard, timeout):
            log.warning(
                "shard %d's cache has not synced after %.0fs: reconciling its objects anyway (those "
                "not listed yet are reconciled as they arrive)",
                shard, timeout,
            )  # fmt: skip
        else:
            log.info("shard %d synced %.2fs after it was taken: reconciling its objects", shard,
                     self._manager.clock.monotonic() - taken)  # fmt: skip
        for controller in self._manager.controllers:
            controller.shard_synced(shard)

    async def releasing(self, shard: int) -> None:
        await cancel_and_wait(self._tasks.pop(shard, []))
        gates = [c.gate for c in self._manager.controllers if c.gate is not None]
        await asyncio.gather(*(gate.drain(shard) for gate in gates))
        await self._manager.cache.remove_shard(shard)

    def lost(self) -> None:
        for tasks in self._tasks.values():
            for task in tasks:
                task.cancel()
        self._tasks.clear()
        for controller in self._manager.controllers:
            if controller.gate is not None:
                controller.gate.deactivate_all()

    async def stop(self) -> None:
        """Cancel what still runs for the shards held (the controllers have stopped)."""
        tasks = [task for shard_tasks in self._tasks.values() for task in shard_tasks]
        self._tasks.clear()
        await cancel_and_wait(tasks)


async def choose_shard_filtering(client: Client, cache: Cache, config: ShardingConfig) -> None:
    """At start: ask the API server whether it filters lists and watches by shardSelector
    (its ShardedListAndWatch feature gate), set the cache's mode and say which it is. A failed
    check assumes not: client-side filtering is correct either way, only more traffic."""
    try:
        server_side = await server_filters_by_shard_selector(client, config.namespace)
    except (ApiError, TransportError) as error:
        log.warning("cannot tell whether the API server filters by shardSelector, assuming not: %s", error)
        server_side = False
    cache.server_side_sharding = server_side
    say_shard_filtering(cache, config, server_side, changed=False)


def say_shard_filtering(cache: Cache, config: ShardingConfig, server_side: bool, *, changed: bool) -> None:
    """The log line and metric of the cache's shard filtering mode."""
    metrics.SHARDING_SERVER_SIDE.labels(config.group).set(1 if server_side else 0)
    now = "now " if changed else ""
    if server_side:
        log.info(
            "sharding group %s with %d shards: the API server %sfilters lists and watches by "
            "shardSelector (server-side)",
            config.group, config.shards, now,
        )  # fmt: skip
    else:
        log.warning(
            "sharding group %s with %d shards: the API server %signores shardSelector (its "
            "ShardedListAndWatch feature gate is off), so every replica receives every %s and "
            "filters them itself (client-side): correct, but the work is split, not the traffic",
            config.group, config.shards, now,
            " and ".join(cache.kinds_filtered_by_shard_selector()) or "object",
        )  # fmt: skip


async def follow_shard_filtering(client: Client, cache: Cache, clock: Clock, config: ShardingConfig) -> None:
    """Ask the server again every ``filtering_check_period`` seconds, and at once when
    objects outside the shards arrived, whether it filters by shardSelector; on a change,
    say so and switch the cache's mode (a relist of the uid- and namespace-keyed kinds).
    A failed check changes nothing. Runs until cancelled."""
    while True:
        await first_of(cache.selector_ignored.wait(), clock.sleep(config.filtering_check_period))
        cache.selector_ignored.clear()
        try:
            server_side = await server_filters_by_shard_selector(client, config.namespace)
        except (ApiError, TransportError) as error:
            log.debug("could not check whether the API server filters by shardSelector: %s", error)
            continue
        if server_side != cache.server_side_sharding:
            try:
                await cache.set_server_side_sharding(server_side)
            except Exception:  # a bug: say it, and keep following
                log.exception("could not switch the cache's shard filtering")
            # Said once the reflectors run in the new mode (the line and metric are its news).
            say_shard_filtering(cache, config, server_side, changed=True)
