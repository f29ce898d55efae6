"""Equal subtrees of cached objects held once, and the store's check that nobody writes into them."""

from __future__ import annotations

import copy
import logging
import sys
import tracemalloc
from typing import Any

import pytest

from memop.memcached.api import MEMCACHEDS, parse_spec
from memop.memcached.controller import CACHE_SHARED, CACHE_TRANSFORMS
from memop.memcached.desired import desired_deployment
from memop.runtime.cache import store as store_module
from memop.runtime.cache.sharing import SubtreeSharer, path_tree, share_paths
from memop.runtime.cache.store import ObjectStore, compact, compact_sharing
from memop.runtime.client.resources import CONFIGMAPS, DEPLOYMENTS, PODS


def test_equal_subtrees_come_back_as_one_instance() -> None:
    sharer = SubtreeSharer()
    first = sharer.share({"a": [1, {"b": "c"}], "d": None})
    second = sharer.share({"d": None, "a": [1, {"b": "c"}]})  # key order does not matter
    assert second is first
    assert sharer.share({"a": [1, {"b": "x"}], "d": None}) is not first
    assert sharer.share([1, 2]) == [1, 2]
    assert len(sharer) == 3


def test_values_equal_in_python_but_not_in_json_are_not_merged() -> None:
    sharer = SubtreeSharer()
    # True == 1 == 1.0 in Python; as JSON they are three different values, and "1" a fourth.
    variants: list[Any] = [{"a": True}, {"a": 1}, {"a": 1.0}, {"a": "1"}, {"a": None}, ["a", 1], ["a", True]]
    shared = [sharer.share(copy.deepcopy(v)) for v in variants]
    assert shared == variants
    assert [type(s["a"]) if isinstance(s, dict) else type(s[1]) for s in shared] == [
        bool, int, float, str, type(None), int, bool,
    ]  # fmt: skip
    assert len({id(s) for s in shared}) == len(variants)
    # Key order does not matter for a dict, and does for a list; a dict never stands for a list.
    first = sharer.share({"x": "1", "y": 2})
    assert sharer.share({"y": 2, "x": "1"}) is first
    assert sharer.share([2, "1"]) is not sharer.share(["1", 2])
    assert sharer.share(["x", "y"]) is not sharer.share({"x": "y"})
    # Nested values too.
    nested = sharer.share({"a": {"b": [1, True]}})
    assert sharer.share({"a": {"b": [1, True]}}) is nested
    assert sharer.share({"a": {"b": [1, 1]}}) is not nested


def test_scalars_and_non_json_values_pass_through() -> None:
    sharer = SubtreeSharer()
    assert sharer.share("text") == "text"
    assert sharer.share(3) == 3
    odd = {"set": {1, 2}}
    assert sharer.share(odd) is odd
    assert len(sharer) == 0


def test_the_table_forgets_what_nothing_uses_and_stays_bounded_under_churn() -> None:
    sharer = SubtreeSharer(purge_at=64)
    kept = [sharer.share({"kept": i}) for i in range(10)]
    for i in range(10_000):
        sharer.share({"gone": i})  # used by nobody once shared
        assert len(sharer) <= 2 * 64
    sharer.purge()
    assert len(sharer) == 10
    assert sharer.share({"kept": 3}) is kept[3]


def test_share_paths_follows_keys_and_every_list_item() -> None:
    sharer = SubtreeSharer()
    paths = (("spec", "template"), ("status", "conditions", "*"), ("missing", "path"), ("spec", "n", "x"))

    def obj(name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "spec": {"template": {"containers": [{"image": "i"}]}, "n": 1},
            "status": {"conditions": [{"type": "A"}, {"type": "B", "name": name}]},
        }

    one, two = obj("one"), obj("two")
    share_paths(one, paths, sharer)
    share_paths(two, paths, sharer)
    assert one["spec"]["template"] is two["spec"]["template"]
    assert one["status"]["conditions"][0] is two["status"]["conditions"][0]
    assert one["status"]["conditions"][1] is not two["status"]["conditions"][1]
    assert one == obj("one")
    assert two == obj("two")
    odd = {"status": {"conditions": "not a list"}, "spec": []}
    share_paths(odd, paths, sharer)
    assert odd == {"status": {"conditions": "not a list"}, "spec": []}


def _memcached(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "finalizers": ["f"]},
        "spec": {"size": 3},
        "status": {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": "t"}]},
    }


def test_memops_caches_hold_the_repeated_parts_once() -> None:
    deployments = ObjectStore(DEPLOYMENTS, CACHE_TRANSFORMS[DEPLOYMENTS], CACHE_SHARED[DEPLOYMENTS])
    a, b = (deployments.prepare(desired_deployment(_memcached(n), parse_spec(_memcached(n)))) for n in "ab")
    assert a["spec"]["template"]["spec"] is b["spec"]["template"]["spec"]
    counts = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1}
    c, d = (deployments.prepare({**deployment, "status": dict(counts)}) for deployment in (a, b))
    assert c["status"] is d["status"]  # the replica counts of Deployments in the same state
    assert a["spec"]["selector"] != b["spec"]["selector"]  # per instance: not shared, not equal
    memcacheds = ObjectStore(MEMCACHEDS, None, CACHE_SHARED[MEMCACHEDS])
    x, y = (memcacheds.prepare(_memcached(n)) for n in "xy")
    assert x["spec"] is y["spec"]
    assert x["metadata"]["finalizers"] is y["metadata"]["finalizers"]
    assert x["status"]["conditions"][0] is y["status"]["conditions"][0]
    assert x["metadata"] is not y["metadata"]
    pods = ObjectStore(PODS, CACHE_TRANSFORMS[PODS], CACHE_SHARED[PODS])
    labels = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "x"}
    p, q = (
        pods.prepare(
            {
                "metadata": {"name": n, "namespace": "ns", "labels": dict(labels)},
                "status": {"phase": "Running"},
            }
        )
        for n in ("p1", "p2")
    )
    assert p["metadata"]["labels"] is q["metadata"]["labels"]
    assert p["status"] is q["status"]


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> ObjectStore:
    monkeypatch.setenv(store_module.CHECK_ENV, "1")
    return ObjectStore(CONFIGMAPS, None, (("data",),))


def test_a_reader_changing_a_cached_object_is_reported(
    checked: ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    obj = checked.prepare({"metadata": {"name": "c", "namespace": "ns"}, "data": {"k": "v"}})
    checked.upsert(obj)
    before = len(store_module.MUTATIONS_DETECTED)
    cached = checked.get("c", "ns")
    assert cached is not None
    cached["data"]["k"] = "changed"  # what a reader must never do
    with caplog.at_level(logging.ERROR, logger="memop.store"):
        checked.upsert(checked.prepare(copy.deepcopy(obj)))
    try:
        assert store_module.MUTATIONS_DETECTED[before:] == [("configmaps", ("ns", "c"))]
        assert store_module.MUTATION_MARK in caplog.text
    finally:
        del store_module.MUTATIONS_DETECTED[before:]


def test_an_untouched_object_passes_the_check(checked: ObjectStore) -> None:
    before = len(store_module.MUTATIONS_DETECTED)
    for version in ("1", "2"):
        checked.upsert(checked.prepare({"metadata": {"name": "c", "resourceVersion": version}, "data": {}}))
    assert checked.remove(("", "c")) is not None
    assert store_module.MUTATIONS_DETECTED[before:] == []


def test_compacting_with_shared_paths_copies_only_what_is_not_held_yet() -> None:
    # The store's way in: compaction and sharing in one walk, equal to compacting then sharing,
    # without copying a subtree an equal one of which is held already.
    paths = (("spec", "template"), ("status", "conditions", "*"), ("missing", "path"), ("spec", "n", "x"))
    tree = path_tree(paths)

    def obj(name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": {"template": {"containers": [{"image": "i" + "mage"}]}, "n": 1},
            "status": {"conditions": [{"type": "A"}, {"type": "B", "name": name}]},
        }

    sharer, reference = SubtreeSharer(), SubtreeSharer()
    one, two = (compact_sharing(obj(n), tree, sharer) for n in ("one", "two"))
    assert one == obj("one")
    assert two == obj("two")
    assert one["spec"]["template"] is two["spec"]["template"]
    assert one["status"]["conditions"][0] is two["status"]["conditions"][0]
    assert one["status"]["conditions"][1] is not two["status"]["conditions"][1]
    image = one["spec"]["template"]["containers"][0]["image"]
    assert image is sys.intern("image")  # the held subtree is a compacted copy
    source = obj("three")
    three = compact_sharing(source, tree, sharer)
    assert three["spec"]["template"] is one["spec"]["template"]
    assert three["metadata"] is not source["metadata"]  # the rest is copied, as compact does
    for name in ("one", "two"):
        expected = compact(obj(name))
        share_paths(expected, paths, reference)
        assert compact_sharing(obj(name), tree, SubtreeSharer()) == expected
    odd = {"status": {"conditions": "not a list"}, "spec": [], "missing": {"path": 3}}
    assert compact_sharing(copy.deepcopy(odd), tree, sharer) == odd


def test_path_tree_ends_a_path_where_a_shorter_one_shares_its_subtree_whole() -> None:
    assert path_tree([("a", "b"), ("a", "b", "c"), ("a", "d"), ("e", "*")]) == {
        "a": {"b": {}, "d": {}},
        "e": {"*": {}},
    }


def test_a_table_entry_costs_about_what_its_subtree_and_key_hold() -> None:
    # One entry per distinct subtree, for as long as an object uses it: a pod's labels make
    # one per pod. orjson's bytes hold the whole 4 KiB buffer they were encoded into; the table
    # must keep keys of their own size.
    sharer = SubtreeSharer(purge_at=1_000_000)
    labels = [
        {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": f"mc-{i:05d}"}
        for i in range(2000)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [sharer.share_copy(value, compact) for value in labels]
        per_entry = (tracemalloc.get_traced_memory()[0] - before) / len(labels)
    finally:
        tracemalloc.stop()
    assert len(kept) == len(sharer) == 2000
    assert per_entry < 1000, per_entry
