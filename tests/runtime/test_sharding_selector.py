"""memop.runtime.sharding.selector: the server's hash, ranges, and selectors as the server reads them."""

from __future__ import annotations

import pytest

from memop.runtime.sharding.selector import (
    HASH_SPACE,
    NAMESPACE,
    UID,
    ShardRange,
    field_value,
    fnv1a_64,
    format_bound,
    in_ranges,
    render_selector,
)
from memop.testing.apiserver.sharding import parse_shard_selector

# Go's hash/fnv golden values (fnv_test.go), the inputs of apimachinery's hash_test.go, and a
# non-ASCII string (hashed as UTF-8 bytes), all computed with Go's fnv.New64a.
VECTORS = [
    ("", 0xCBF29CE484222325),
    ("a", 0xAF63DC4C8601EC8C),
    ("abc", 0xE71FA2190541574B),
    ("test", 0xF9E6E6EF197C2B25),
    ("different", 0x88F38C6C33321162),
    ("test-uid-12345", 0xD4C53B72F9287C28),
    ("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", 0x93754B7248A00EB9),
    ("default", 0xEBADA5168620C5FE),
    ("kube-system", 0xDF65C7BC1D82B35E),
    ("héllo", 0xA35FF71F960240E0),
]


@pytest.mark.parametrize(("text", "expected"), VECTORS)
def test_fnv1a_64_matches_go(text: str, expected: int) -> None:
    assert fnv1a_64(text) == expected


def test_bounds_are_sixteen_hex_digits_and_two_to_the_64_has_seventeen() -> None:
    assert format_bound(0) == "0x0000000000000000"
    assert format_bound(0xAB) == "0x00000000000000ab"
    assert format_bound(HASH_SPACE - 1) == "0xffffffffffffffff"
    assert format_bound(HASH_SPACE) == "0x10000000000000000"


def test_render_selector_writes_what_the_server_parses_and_echoes() -> None:
    halves = [ShardRange(0, 1 << 63), ShardRange(1 << 63, HASH_SPACE)]
    text = render_selector(UID, halves)
    assert text == (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || "
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
    )
    parsed = parse_shard_selector(text)
    assert parsed.key == UID
    assert list(parsed.ranges) == halves
    assert str(parsed) == text  # the server's String(): what metadata.shardInfo.selector carries


@pytest.mark.parametrize("count", [1, 3, 4, 7])
def test_round_trip_of_even_splits(count: int) -> None:
    bounds = [HASH_SPACE * i // count for i in range(count + 1)]
    ranges = [ShardRange(bounds[i], bounds[i + 1]) for i in range(count)]
    for key in (UID, NAMESPACE):
        for shard in ranges:
            text = render_selector(key, [shard])
            assert parse_shard_selector(text).ranges == (shard,)
        assert parse_shard_selector(render_selector(key, ranges)).ranges == tuple(ranges)


def test_ranges_are_half_open_and_or_ed() -> None:
    low, high = ShardRange(0, 10), ShardRange(20, HASH_SPACE)
    assert 0 in low
    assert 9 in low
    assert 10 not in low
    assert in_ranges(5, [low, high])
    assert in_ranges(HASH_SPACE - 1, [low, high])
    assert not in_ranges(15, [low, high])
    assert not in_ranges(5, [])


@pytest.mark.parametrize(("start", "end"), [(5, 5), (6, 5), (-1, 5), (0, HASH_SPACE + 1)])
def test_ranges_the_server_would_refuse_cannot_be_built(start: int, end: int) -> None:
    with pytest.raises(ValueError, match="start < end"):
        ShardRange(start, end)


def test_render_selector_refuses_what_the_server_would_not_take() -> None:
    with pytest.raises(ValueError, match="unsupported shard key"):
        render_selector("object.metadata.name", [ShardRange(0, HASH_SPACE)])
    # No ranges would render "", which the server reads as no selector at all: everything.
    with pytest.raises(ValueError, match="at least one range"):
        render_selector(UID, [])


def test_field_value_is_what_the_server_hashes() -> None:
    obj = {"metadata": {"name": "a", "namespace": "ns", "uid": "u-1"}}
    assert field_value(obj, UID) == "u-1"
    assert field_value(obj, NAMESPACE) == "ns"
    assert field_value({"metadata": {"name": "node-1", "uid": "u-2"}}, NAMESPACE) == ""
    with pytest.raises(ValueError, match="unsupported shard key"):
        field_value(obj, "object.metadata.name")
