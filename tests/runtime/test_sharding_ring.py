"""The ring: shards of the hash space, owner buckets for children, and the assignment rule."""

from __future__ import annotations

import itertools
import random
import uuid

import pytest

from memop.runtime.sharding.ring import BUCKETS, Ring, assign, bucket_label_value, bucket_of
from memop.runtime.sharding.selector import HASH_SPACE, fnv1a_64


@pytest.mark.parametrize("shards", [1, 2, 4, 16, 256])
def test_the_shards_cover_the_space_without_overlap(shards: int) -> None:
    ring = Ring(shards)
    ranges = [ring.range_of(s) for s in range(shards)]
    assert ranges[0].start == 0
    assert ranges[-1].end == HASH_SPACE
    for before, after in itertools.pairwise(ranges):
        assert before.end == after.start
    assert ring.shard_of(0) == 0
    assert ring.shard_of(HASH_SPACE - 1) == shards - 1


@pytest.mark.parametrize("shards", [0, 3, 12, 512, -4])
def test_a_shard_count_that_is_not_a_power_of_two_up_to_256_is_refused(shards: int) -> None:
    with pytest.raises(ValueError, match="power of two from 1 to 256"):
        Ring(shards)


@pytest.mark.parametrize("shards", [1, 2, 8, 16, 64, 256])
def test_an_owners_bucket_lies_in_the_owners_shard(shards: int) -> None:
    """Children found by their owner's bucket label land exactly where their owner does."""
    ring = Ring(shards)
    rng = random.Random(shards)
    for _ in range(2000):
        uid = str(uuid.UUID(int=rng.getrandbits(128)))
        shard = ring.shard_of_value(uid)
        assert ring.range_of(shard).start <= fnv1a_64(uid) < ring.range_of(shard).end
        assert ring.shard_of_bucket(bucket_of(uid)) == shard
        assert bucket_of(uid) in ring.buckets_of(shard)
        assert bucket_label_value(uid) == str(bucket_of(uid))
    assert sorted(b for s in range(shards) for b in ring.buckets_of(s)) == list(range(BUCKETS))


def test_assign_gives_nothing_without_members() -> None:
    assert assign(16, [], {0: "a"}) == {}


@pytest.mark.parametrize(("shards", "members"), [(16, 1), (16, 3), (16, 4), (16, 5), (8, 8), (4, 6)])
def test_assign_balances_within_one_shard(shards: int, members: int) -> None:
    names = [f"m{i}" for i in range(members)]
    owner = assign(shards, names, {})
    assert sorted(owner) == list(range(shards))
    counts = [list(owner.values()).count(name) for name in names]
    assert max(counts) - min(counts) <= 1
    assert sum(counts) == shards


def test_assign_is_the_same_whatever_order_members_are_seen_in() -> None:
    holders = {0: "b", 1: "b", 2: "a", 5: "gone"}
    first = assign(16, ["a", "b", "c"], holders)
    assert all(assign(16, list(order), holders) == first for order in itertools.permutations("abc"))


def test_assign_keeps_live_holders_and_moves_only_what_a_join_needs() -> None:
    before = assign(16, ["a", "b"], {})
    after = assign(16, ["a", "b", "c"], before)
    moved = [s for s in range(16) if before[s] != after[s]]
    assert all(after[s] == "c" for s in moved)
    assert len(moved) == 5  # c's quota: 16 // 3, the extra shards stay with the larger holders


def test_assign_gives_a_dead_holders_shards_to_the_live_ones() -> None:
    before = assign(16, ["a", "b", "c", "d"], {})
    after = assign(16, ["a", "b", "c"], before)
    for shard in range(16):
        if before[shard] != "d":
            assert after[shard] == before[shard]
        else:
            assert after[shard] in "abc"


def test_assign_takes_back_over_quota_shards_from_a_holder() -> None:
    everything_on_a = dict.fromkeys(range(16), "a")
    owner = assign(16, ["a", "b"], everything_on_a)
    assert list(owner.values()).count("a") == 8
    assert [owner[s] for s in range(8)] == ["a"] * 8  # a keeps its lowest shards
