"""ObjectStore: indexes stay exact through churn, replace emits the implied changes, and
compact() copies objects with every string interned."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.runtime.cache.store import ADDED, DELETED, MODIFIED, ObjectStore, compact
from memop.runtime.client.resources import PODS


def pod(
    name: str,
    ns: str = "a",
    rv: str = "1",
    labels: dict[str, str] | None = None,
    owner: str | None = None,
    **meta: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": rv, **meta}
    if labels is not None:
        metadata["labels"] = labels
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner, "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}


def test_prepare_strips_managed_fields_and_applies_transform() -> None:
    def drop_spec(obj: dict[str, Any]) -> dict[str, Any]:
        obj.pop("spec", None)
        return obj

    store = ObjectStore(PODS, transform=drop_spec)
    obj = pod("p", managedFields=[{"manager": "kubectl"}])
    obj["spec"] = {"containers": []}
    prepared = store.prepare(obj)
    assert "managedFields" not in prepared["metadata"]
    assert "spec" not in prepared


def test_labels_the_watch_implies_are_not_indexed_yet_still_filter() -> None:
    store = ObjectStore(PODS, implied_labels={"app": "x"})
    store.upsert(pod("a", labels={"app": "x", "i": "1"}))
    store.upsert(pod("b", labels={"app": "x", "i": "2"}))
    store.upsert(pod("c", labels={"app": "y", "i": "1"}))  # say, the answer to a write of ours

    def names(selector: str) -> set[str]:
        return {o["metadata"]["name"] for o in store.list("a", selector=selector)}

    assert store._label_index().members(("app", "x")) == ()  # no entry holding every key
    assert names("app=x") == {"a", "b"}
    assert names("app=x,i=1") == {"a"}
    assert names("app=y") == {"c"}
    store.remove(("a", "a"))
    assert names("app=x") == {"b"}
    assert len(store._label_index()) == 3  # app=y, i=1, i=2


def test_list_filters_by_namespace_owner_and_selector() -> None:
    store = ObjectStore(PODS)
    store.upsert(pod("a1", "a", labels={"app": "x", "tier": "web"}, owner="u1"))
    store.upsert(pod("a2", "a", labels={"app": "y"}, owner="u2"))
    store.upsert(pod("b1", "b", labels={"app": "x"}, owner="u1"))
    names = lambda objs: sorted(o["metadata"]["name"] for o in objs)  # noqa: E731
    assert names(store.list()) == ["a1", "a2", "b1"]
    assert names(store.list("a")) == ["a1", "a2"]
    assert names(store.list(selector="app=x")) == ["a1", "b1"]
    assert names(store.list("a", selector="app=x")) == ["a1"]
    assert names(store.list(selector="app!=x")) == ["a2"]
    assert names(store.list(owner_uid="u1")) == ["a1", "b1"]
    assert names(store.list("b", owner_uid="u2")) == []
    assert names(store.list(selector="app in (x,y),tier")) == ["a1"]
    assert store.get("a1", "a") is not None
    assert store.get("a1", "b") is None


def test_upsert_moves_an_object_between_index_entries() -> None:
    store = ObjectStore(PODS)
    store.upsert(pod("p", labels={"app": "x"}, owner="u1"))
    store.upsert(pod("p", rv="2", labels={"app": "y"}, owner="u2"))
    assert store.list(selector="app=x") == []
    assert store.list(owner_uid="u1") == []
    assert [o["metadata"]["resourceVersion"] for o in store.list(selector="app=y", owner_uid="u2")] == ["2"]


def test_malformed_labels_are_stored_but_not_indexed() -> None:
    store = ObjectStore(PODS)
    bad = pod("p")
    bad["metadata"]["labels"] = {"app": ["not", "a", "string"], "ok": "1"}
    store.upsert(bad)
    assert store.get("p", "a") is bad
    assert len(store.list(selector="ok=1")) == 1
    store.remove(("a", "p"))
    assert len(store) == 0


def test_replace_emits_adds_updates_and_deletes_within_its_namespace_only() -> None:
    store = ObjectStore(PODS)
    store.upsert(pod("keep", "a", rv="1"))
    store.upsert(pod("change", "a", rv="1"))
    store.upsert(pod("gone", "a", rv="1"))
    store.upsert(pod("other", "b", rv="1"))
    changes = store.replace(
        [pod("keep", "a", rv="1"), pod("change", "a", rv="5"), pod("new", "a", rv="6")], "a"
    )
    summary = sorted((kind, obj["metadata"]["name"]) for kind, obj, _ in changes)
    assert summary == [(ADDED, "new"), (DELETED, "gone"), (MODIFIED, "change")]
    deleted = next(c for c in changes if c[0] == DELETED)
    assert deleted[1]["metadata"]["resourceVersion"] == "1"  # the last known state
    assert store.get("other", "b") is not None  # outside the relisted namespace


def test_replace_keeps_what_was_written_after_the_list_was_taken() -> None:
    # A relist's pages are fetched while reconciles run: a pod we created (and recorded, at
    # resourceVersion 12) after the list's snapshot (10) is not in it, and a patch of ours (11)
    # is newer than the listed state. Neither may be forgotten or taken back: the watch from 10
    # brings what follows; forgetting the pod would make a reconcile create it again.
    store = ObjectStore(PODS)
    store.upsert(pod("ours", "a", rv="12"))
    store.upsert(pod("patched", "a", rv="11"))
    store.upsert(pod("gone", "a", rv="3"))
    changes = store.replace([pod("patched", "a", rv="7")], "a", list_version="10")
    assert [(kind, obj["metadata"]["name"]) for kind, obj, _ in changes] == [(DELETED, "gone")]
    assert store.get("ours", "a") is not None
    assert store.get("patched", "a")["metadata"]["resourceVersion"] == "11"  # type: ignore[index]
    # resourceVersions that are not numbers cannot be compared: the list is the truth.
    assert [k for k, _, _ in store.replace([], "a", list_version="x")] == [DELETED, DELETED]


names_st = st.sampled_from(["p1", "p2", "p3", "p4"])
label_st = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["x", "y"]), max_size=2)
ops_st = st.lists(
    st.tuples(
        # "list": a read that builds the indexes it needs there, kept through the ops after it.
        st.sampled_from(["upsert", "remove", "list"]),
        names_st,
        st.sampled_from(["a", "b"]),
        label_st,
        st.sampled_from([None, "u1", "u2"]),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops_st)
def test_indexes_always_agree_with_a_full_scan(
    ops: list[tuple[str, str, str, dict[str, str], str | None]],
) -> None:
    store = ObjectStore(PODS)
    for rv, (op, name, ns, labels, owner) in enumerate(ops):
        if op == "upsert":
            store.upsert(pod(name, ns, rv=str(rv), labels=labels, owner=owner))
        elif op == "remove":
            store.remove((ns, name))
        else:
            store.list(ns, selector=",".join(f"{k}={v}" for k, v in labels.items()) or None, owner_uid=owner)
    everything = store.list()
    for ns in (None, "a", "b"):
        for selector in ("", "app=x", "app=y,tier=x", "tier"):
            for owner in (None, "u1", "u2"):
                expected = [
                    o
                    for o in everything
                    if (ns is None or o["metadata"]["namespace"] == ns)
                    and all(
                        (o["metadata"].get("labels") or {}).get(k) == v
                        for k, v in (p.split("=") for p in selector.split(",") if "=" in p)
                    )
                    and all(
                        p in (o["metadata"].get("labels") or {})
                        for p in selector.split(",")
                        if p and "=" not in p
                    )
                    and (
                        owner is None or (o["metadata"].get("ownerReferences") or [{}])[0].get("uid") == owner
                    )
                ]
                got = store.list(ns, selector=selector or None, owner_uid=owner)
                assert sorted(id(o) for o in got) == sorted(id(o) for o in expected)
    # Index entries with no keys left are dropped, so churn does not grow memory; and every
    # entry holds exactly the keys of the stored objects that have it.
    for index, entries_of in (
        (store._namespace_index(), lambda o: [o["metadata"]["namespace"]]),
        (store._owner_index(), lambda o: [r["uid"] for r in o["metadata"].get("ownerReferences") or []]),
        (store._label_index(), lambda o: list((o["metadata"].get("labels") or {}).items())),
    ):
        expected: dict[Any, set[tuple[str, str]]] = {}
        for o in everything:
            for entry in entries_of(o):
                expected.setdefault(entry, set()).add((o["metadata"]["namespace"], o["metadata"]["name"]))
        assert len(index) == len(expected)
        for entry, keys in expected.items():
            assert sorted(index.members(entry)) == sorted(keys)


# -- compact -------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=30,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=5)


def walk(value: Any) -> Iterator[Any]:
    """Every value in a JSON tree, dict keys included, parents before children."""
    yield value
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def same_types(a: Any, b: Any) -> bool:
    """Equal with the same types throughout (== alone takes True for 1 and 1.0 for 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_types(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_types(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(json_objects)
def test_compact_is_an_equal_copy_sharing_no_container_with_interned_strings(obj: dict[str, Any]) -> None:
    before = copy.deepcopy(obj)
    out = compact(obj)
    assert same_types(out, obj)
    assert same_types(obj, before)  # the input is left as it was
    input_containers = {id(v) for v in walk(obj) if isinstance(v, dict | list)}
    assert not any(id(v) in input_containers for v in walk(out) if isinstance(v, dict | list))
    for value in walk(out):
        if isinstance(value, str) and not _under_unique_key(out, value):
            assert value is sys.intern(value)


def _under_unique_key(tree: Any, value: str) -> bool:
    """Whether ``value`` is (also) the value of a resourceVersion or uid key in ``tree``."""
    if isinstance(tree, dict):
        return any(
            (k in ("resourceVersion", "uid") and v is value) or _under_unique_key(v, value)
            for k, v in tree.items()
        )
    if isinstance(tree, list):
        return any(_under_unique_key(item, value) for item in tree)
    return False


def test_compact_leaves_unique_values_uninterned() -> None:
    # No two objects share a resourceVersion, and a uid only a few owner references: interning
    # them would only grow the interpreter's table of interned strings.
    text = json.dumps(pod("memcached-a", rv="4711815", uid="6f1c2d3e-8a9b-4c5d-9e0f-123456789abc"))
    first, second = compact(json.loads(text)), compact(json.loads(text))
    assert first == second
    assert first["metadata"]["resourceVersion"] is not second["metadata"]["resourceVersion"]
    assert first["metadata"]["uid"] is not second["metadata"]["uid"]
    assert first["metadata"]["name"] is second["metadata"]["name"]


def test_compact_makes_separately_parsed_objects_share_their_strings() -> None:
    text = json.dumps(pod("p", labels={"app.kubernetes.io/name": "memcached-" + "x" * 40}))
    first, second = json.loads(text), json.loads(text)
    value = "memcached-" + "x" * 40
    # json.loads shares nothing between two documents...
    assert (
        first["metadata"]["labels"]["app.kubernetes.io/name"]
        is not second["metadata"]["labels"]["app.kubernetes.io/name"]
    )
    a, b = compact(first), compact(second)
    # ...compacted, each string (values and keys) is held once.
    assert (
        a["metadata"]["labels"]["app.kubernetes.io/name"] is b["metadata"]["labels"]["app.kubernetes.io/name"]
    )
    assert a["metadata"]["labels"]["app.kubernetes.io/name"] == value
    key_a = next(k for k in a["metadata"]["labels"])
    key_b = next(k for k in b["metadata"]["labels"])
    assert key_a is key_b


def test_prepare_keeps_nothing_of_the_parsed_input() -> None:
    store = ObjectStore(PODS)
    parsed = json.loads(json.dumps(pod("p", labels={"app": "x"}, managedFields=[{"manager": "m"}])))
    # Held, not just their ids: prepare frees managedFields, whose id a new list may reuse.
    containers = [v for v in walk(parsed) if isinstance(v, dict | list)]
    prepared = store.prepare(parsed)
    assert not any(v is c for v in walk(prepared) for c in containers if isinstance(v, dict | list))
    assert prepared["metadata"]["labels"] == {"app": "x"}
    assert "managedFields" not in prepared["metadata"]


def test_indexes_are_built_by_the_first_read_that_needs_them() -> None:
    # A store read only by name (an operator's children it gets by name) keeps no index of
    # namespaces, owners or labels: they would cost memory and every change CPU for nothing.
    store = ObjectStore(PODS)
    store.upsert(pod("a1", "a", labels={"app": "x"}, owner="u1"))
    store.upsert(pod("b1", "b", labels={"app": "y"}, owner="u2"))
    assert store.get("a1", "a") is not None
    assert (store._by_namespace, store._by_owner, store._by_label) == (None, None, None)
    assert [o["metadata"]["name"] for o in store.list(selector="app=x")] == ["a1"]
    assert store._by_label is not None
    assert (store._by_namespace, store._by_owner) == (None, None)
    assert [o["metadata"]["name"] for o in store.list(owner_uid="u2")] == ["b1"]
    assert store.keys("b") == [("b", "b1")]
    # Built, they follow every change.
    store.upsert(pod("a2", "b", labels={"app": "x"}, owner="u2"))
    store.remove(("a", "a1"))
    assert [o["metadata"]["name"] for o in store.list(selector="app=x")] == ["a2"]
    assert sorted(o["metadata"]["name"] for o in store.list(owner_uid="u2")) == ["a2", "b1"]
    assert sorted(store.keys("b")) == [("b", "a2"), ("b", "b1")]
    assert store.keys("a") == []


_TEMPLATE_LABELS = ("spec", "template", "metadata", "labels")


def deployment(labels: dict[str, Any], template_labels: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "d", "namespace": "a", "resourceVersion": "1", "labels": labels},
        "spec": {"template": {"metadata": {"labels": template_labels}, "spec": {"containers": []}}},
    }


def test_an_aliased_subtree_equal_to_its_target_is_held_as_the_target() -> None:
    store = ObjectStore(PODS, aliases={_TEMPLATE_LABELS: ("metadata", "labels")})
    for prepare in (store.prepare, store.prepare_copy):
        stored = prepare(deployment({"app": "x", "instance": "d"}, {"app": "x", "instance": "d"}))
        assert stored["spec"]["template"]["metadata"]["labels"] is stored["metadata"]["labels"]
        assert stored == deployment({"app": "x", "instance": "d"}, {"app": "x", "instance": "d"})


def test_an_aliased_subtree_that_differs_even_only_as_json_is_held_apart() -> None:
    store = ObjectStore(PODS, aliases={_TEMPLATE_LABELS: ("metadata", "labels")})
    # {"n": 1} == {"n": True} in Python; as JSON they differ, and each must be kept as it came.
    for labels, template_labels in (
        ({"app": "x"}, {"app": "y"}),
        ({"n": 1}, {"n": True}),
        ({"n": [1]}, {"n": [True]}),
    ):
        stored = store.prepare(deployment(labels, template_labels))
        held = stored["spec"]["template"]["metadata"]["labels"]
        assert held is not stored["metadata"]["labels"]
        assert json.dumps(held) == json.dumps(template_labels)
    # Missing or malformed parents are left alone.
    stored = store.prepare({"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"template": []}})
    assert stored["spec"] == {"template": []}


def test_an_alias_path_inside_a_shared_subtree_is_refused() -> None:
    # Changing a subtree many objects hold would change it for all of them.
    with pytest.raises(ValueError, match="inside a shared subtree"):
        ObjectStore(PODS, shared=(("spec", "template"),), aliases={_TEMPLATE_LABELS: ("metadata", "labels")})
    ObjectStore(
        PODS, shared=(("spec", "template", "spec"),), aliases={_TEMPLATE_LABELS: ("metadata", "labels")}
    )
