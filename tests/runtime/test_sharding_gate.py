"""The shard gate: which requests a sharded controller reconciles, parks or drops."""

from __future__ import annotations

from typing import Any

from memop.runtime.cache.cache import Cache
from memop.runtime.client.reachability import Reachability
from memop.runtime.client.resources import CONFIGMAPS
from memop.runtime.controller.reconcile import Request
from memop.runtime.sharding.gate import ShardGate
from memop.runtime.sharding.keys import BY_UID
from memop.runtime.sharding.ring import Ring


async def _never_probed() -> int:
    raise AssertionError("the cache never starts: nothing is probed")


class _NeverCalled:
    """A client for a cache that never starts: nothing is listed or watched."""

    reachability = Reachability(_never_probed)


def _cache_with(uids: dict[str, str]) -> tuple[Cache, dict[str, int]]:
    cache = Cache(_NeverCalled(), namespaces=["ns"])  # type: ignore[arg-type]  # never started
    informer = cache.informer(CONFIGMAPS, shard_key=BY_UID)
    cache.enable_sharding(Ring(4), server_side=True)
    shards = {}
    for name, uid in uids.items():
        obj: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns", "uid": uid}}
        informer.store.upsert(obj)
        shard = cache.shard_of(CONFIGMAPS, obj)
        assert shard is not None
        shards[name] = shard
    return cache, shards


def _uids_in_two_shards() -> dict[str, str]:
    """Two objects whose uids fall in different shards of four."""
    ring = Ring(4)
    found: dict[int, str] = {}
    index = 0
    while len(found) < 2:
        uid = f"00000000-0000-0000-0000-{index:012d}"
        found.setdefault(ring.shard_of_value(uid), uid)
        index += 1
    first, second = found.values()
    return {"a": first, "b": second}


async def test_a_syncing_shards_requests_are_parked_then_handed_back_once_active() -> None:
    cache, shards = _cache_with(_uids_in_two_shards())
    gate = ShardGate(cache, CONFIGMAPS)
    a, b = Request("ns", "a"), Request("ns", "b")
    gate.activate(shards["a"])
    gate.begin(shards["b"])
    assert gate.admit(a) == shards["a"]
    gate.finish(shards["a"])
    assert gate.admit(b) is None  # syncing: parked, not reconciled
    assert gate.admit(b) is None
    assert gate.in_flight(shards["b"]) == 0
    assert gate.activate(shards["b"]) == {b}  # once, to be queued again
    assert gate.admit(b) == shards["b"]
    gate.finish(shards["b"])
    assert gate.activate(shards["b"]) == set()


async def test_a_shard_given_up_while_syncing_forgets_what_it_parked() -> None:
    cache, shards = _cache_with(_uids_in_two_shards())
    gate = ShardGate(cache, CONFIGMAPS)
    b = Request("ns", "b")
    gate.begin(shards["b"])
    assert gate.admit(b) is None
    await gate.drain(shards["b"])
    assert gate.admit(b) is None  # not ours: dropped, not parked
    assert gate.activate(shards["b"]) == set()


async def test_requests_of_shards_never_taken_are_dropped_and_losing_membership_clears_all() -> None:
    cache, shards = _cache_with(_uids_in_two_shards())
    gate = ShardGate(cache, CONFIGMAPS)
    a, b = Request("ns", "a"), Request("ns", "b")
    assert gate.admit(a) is None
    gate.begin(shards["b"])
    assert gate.admit(b) is None
    gate.deactivate_all()
    assert gate.activate(shards["b"]) == set()
    assert gate.admit(Request("ns", "missing")) is None
