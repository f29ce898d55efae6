"""JSON merge patch, JSON patch and strategic merge patch, checked against the RFC examples and the
patches kubectl really sends."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.testing.apiserver.patch import (
    PatchError,
    PatchTestFailed,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)

# --- RFC 7386 -----------------------------------------------------------------------------------

# RFC 7386 Appendix A, verbatim.
RFC7386_CASES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC7386_CASES)
def test_merge_patch_rfc_examples(target: Any, patch: Any, expected: Any) -> None:
    before = copy.deepcopy((target, patch))
    assert merge_patch(target, patch) == expected
    assert (target, patch) == before


def test_merge_patch_result_shares_nothing_with_inputs() -> None:
    target = {"spec": {"list": [1, 2], "keep": {"x": 1}}}
    patch = {"spec": {"new": {"deep": [3]}}}
    result = merge_patch(target, patch)
    result["spec"]["list"].append(9)
    result["spec"]["keep"]["x"] = 2
    result["spec"]["new"]["deep"].append(4)
    assert target == {"spec": {"list": [1, 2], "keep": {"x": 1}}}
    assert patch == {"spec": {"new": {"deep": [3]}}}


def test_merge_patch_typical_controller_patches() -> None:
    obj = {
        "metadata": {"name": "m", "labels": {"app": "m", "old": "x"}, "finalizers": ["a"]},
        "spec": {"size": 3, "image": "memcached:1.6"},
        "status": {"readyReplicas": 1},
    }
    patched = merge_patch(obj, {"metadata": {"labels": {"old": None, "new": "y"}, "finalizers": ["b"]}})
    assert patched["metadata"] == {"name": "m", "labels": {"app": "m", "new": "y"}, "finalizers": ["b"]}
    assert merge_patch(obj, {"status": {"readyReplicas": 3, "conditions": []}})["status"] == {
        "readyReplicas": 3,
        "conditions": [],
    }


# --- RFC 6902 -----------------------------------------------------------------------------------

# RFC 6902 Appendix A (the ones with a result).
RFC6902_CASES = [
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
    (
        {"foo": ["bar", "baz"]},
        [{"op": "add", "path": "/foo/1", "value": "qux"}],
        {"foo": ["bar", "qux", "baz"]},
    ),
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    (
        {"baz": "qux", "foo": "bar"},
        [{"op": "replace", "path": "/baz", "value": "boo"}],
        {"baz": "boo", "foo": "bar"},
    ),
    (
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
    ),
    (
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
    ),
    (
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
        {"baz": "qux", "foo": ["a", 2, "c"]},
    ),
    (
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
    ),
    (
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
        {"foo": "bar", "baz": "qux"},
    ),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
    (
        {"foo": ["bar"]},
        [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
        {"foo": ["bar", ["abc", "def"]]},
    ),
    # Beyond the appendix.
    (
        {"a": {"b/c": 1, "d~e": 2}},
        [{"op": "remove", "path": "/a/b~1c"}, {"op": "replace", "path": "/a/d~0e", "value": 3}],
        {"a": {"d~e": 3}},
    ),
    (
        {"a": [1, 2]},
        [{"op": "copy", "from": "/a", "path": "/b"}, {"op": "add", "path": "/b/0", "value": 0}],
        {"a": [1, 2], "b": [0, 1, 2]},
    ),
    ({"a": 1}, [{"op": "add", "path": "", "value": {"b": 2}}], {"b": 2}),
    ({"a": 1}, [{"op": "replace", "path": "", "value": [1]}], [1]),
    ({"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}], {"a": 1}),
    ({"a": {"b": 1}}, [{"op": "test", "path": "", "value": {"a": {"b": 1}}}], {"a": {"b": 1}}),
    ({"a": [1]}, [{"op": "add", "path": "/a/1", "value": 2}], {"a": [1, 2]}),
    # The kube-apiserver's library is lenient here (evanphx/json-patch v4): replace of a missing
    # member adds it, and a missing member tests equal to null.
    ({"status": {}}, [{"op": "replace", "path": "/status/ready", "value": 3}], {"status": {"ready": 3}}),
    ({"a": 1}, [{"op": "test", "path": "/b", "value": None}], {"a": 1}),
]


@pytest.mark.parametrize(("doc", "ops", "expected"), RFC6902_CASES)
def test_json_patch_examples(doc: Any, ops: Any, expected: Any) -> None:
    before = copy.deepcopy((doc, ops))
    assert json_patch(doc, ops) == expected
    assert (doc, ops) == before


@pytest.mark.parametrize(
    ("doc", "ops", "message"),
    [
        (
            {"foo": "bar"},
            [{"op": "add", "path": "/baz/bat", "value": "qux"}],
            'add operation does not apply: doc is missing path: "/baz/bat"',
        ),
        ({"foo": "bar"}, [{"op": "remove", "path": "/nope"}], "Unable to remove nonexistent key: nope"),
        ({"a": [1, 2]}, [{"op": "remove", "path": "/a/2"}], "Unable to access invalid index: 2"),
        ({"a": [1, 2]}, [{"op": "add", "path": "/a/3", "value": 0}], "Unable to access invalid index: 3"),
        ({"a": [1, 2]}, [{"op": "replace", "path": "/a/2", "value": 0}], "Unable to access invalid index: 2"),
        (
            {"a": [1, 2]},
            [{"op": "add", "path": "/a/x", "value": 0}],
            "value was not a proper array index: 'x'",
        ),
        ({"a": [1, 2]}, [{"op": "remove", "path": "/a/-1"}], "value was not a proper array index: '-1'"),
        ({"a": [1, 2]}, [{"op": "remove", "path": "/a/-"}], "value was not a proper array index: '-'"),
        ({"a": 1}, [{"op": "move", "from": "/b", "path": "/c"}], "Unable to remove nonexistent key: b"),
        ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}], "/a is a prefix of /a/b/c"),
        ({"a": 1}, [{"op": "copy", "from": "/b", "path": "/c"}], "error in copy for path: '/b'"),
        ({"a": 1}, [{"op": "explode", "path": "/a"}], "Unexpected kind: explode"),
        ({"a": 1}, [{"path": "/a"}], "Unexpected kind: unknown"),
        ({"a": 1}, [{"op": "add", "path": "a", "value": 1}], "JSON pointer must be empty or start with '/'"),
        ({"a": 1}, [{"op": "add", "path": "/b"}], "missing value"),
        ({"a": 1}, [{"op": "remove", "path": ""}], "cannot remove the whole document"),
        ({"a": 1}, [{"op": "add", "path": 5, "value": 1}], "failed to decode path"),
        ({"a": 1}, [{"op": "copy", "path": "/b"}], "failed to decode from"),
        ({"a": "x"}, [{"op": "add", "path": "/a/b", "value": 1}], "doc is missing path"),
    ],
)
def test_json_patch_errors(doc: Any, ops: Any, message: str) -> None:
    before = copy.deepcopy(doc)
    with pytest.raises(PatchError) as info:
        json_patch(doc, ops)
    assert message in str(info.value)
    assert not isinstance(info.value, PatchTestFailed)
    assert info.value.code == 422
    assert doc == before


@pytest.mark.parametrize("ops", [{"op": "add"}, "x", None, [1], [["add"]]])
def test_json_patch_malformed_documents_are_bad_requests(ops: Any) -> None:
    with pytest.raises(PatchError) as info:
        json_patch({}, ops)
    assert info.value.code == 400


@pytest.mark.parametrize(
    ("doc", "value"),
    [
        ({"a": 1}, True),  # booleans are not numbers
        ({"a": True}, 1),
        ({"a": 0}, False),
        ({"a": 1}, 1.0),  # the server compares JSON text: 1 and 1.0 differ
        ({"a": "10"}, 10),  # RFC 6902 A.15
        ({"a": None}, 0),
        ({"a": [1, 2]}, [2, 1]),
        ({"a": [1, 2]}, [1, 2, 3]),
        ({"a": {"b": 1}}, {"b": 1, "c": None}),
        ({"a": {"b": [True]}}, {"b": [1]}),
        ({"a": 1}, None),
    ],
)
def test_json_patch_test_op_is_strict(doc: Any, value: Any) -> None:
    with pytest.raises(PatchTestFailed, match=r"^testing value /a failed: test failed$") as info:
        json_patch(doc, [{"op": "test", "path": "/a", "value": value}])
    assert info.value.code == 422


def test_json_patch_test_guards_the_following_ops() -> None:
    """The optimistic-concurrency idiom: test resourceVersion, then change."""
    obj = {"metadata": {"resourceVersion": "7"}, "spec": {"size": 1}}
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "replace", "path": "/spec/size", "value": 3},
    ]
    assert json_patch(obj, ops)["spec"]["size"] == 3
    stale = {**obj, "metadata": {"resourceVersion": "8"}}
    with pytest.raises(PatchTestFailed, match="testing value /metadata/resourceVersion failed"):
        json_patch(stale, ops)


def test_json_patch_later_ops_see_earlier_ones_and_result_is_independent() -> None:
    doc: dict[str, Any] = {"metadata": {}}
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": "/metadata/labels", "value": {}},
        {"op": "add", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "memcached"},
        {"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"},
    ]
    result = json_patch(doc, ops)
    assert result == {
        "metadata": {
            "labels": {"app.kubernetes.io/name": "memcached"},
            "annotations": {"app.kubernetes.io/name": "memcached"},
        }
    }
    result["metadata"]["labels"]["x"] = "y"
    assert "x" not in result["metadata"]["annotations"]
    assert ops[0]["value"] == {}


# --- strategic merge patch: realistic kubectl patches -------------------------------------------


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "cache",
            "namespace": "default",
            "labels": {"app": "cache"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "finalizers": ["example.com/a", "example.com/b"],
            "ownerReferences": [
                {
                    "apiVersion": "cache.example.com/v1",
                    "kind": "Memcached",
                    "name": "cache",
                    "uid": "u1",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "cache"}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
            "template": {
                "metadata": {"labels": {"app": "cache"}},
                "spec": {
                    "containers": [
                        {
                            "name": "memcached",
                            "image": "memcached:1.6.21",
                            "args": ["-m", "64"],
                            "ports": [
                                {"containerPort": 11211, "name": "memcached", "protocol": "TCP"},
                                {"containerPort": 9150, "name": "metrics", "protocol": "TCP"},
                            ],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "resources": {"limits": {"memory": "64Mi"}},
                        },
                        {"name": "exporter", "image": "exporter:1"},
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "tolerations": [{"key": "a", "operator": "Exists"}],
                },
            },
        },
        "status": {
            "replicas": 3,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            ],
        },
    }


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return result


def smp(target: dict[str, Any], patch: dict[str, Any], kind: str = "Deployment") -> dict[str, Any]:
    """Apply and check that neither input was touched."""
    before = copy.deepcopy((target, patch))
    result = strategic_merge_patch(target, patch, kind)
    assert (target, patch) == before
    return result


def test_kubectl_apply_changing_an_image() -> None:
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": '{"new":1}'}},
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "memcached"}, {"name": "exporter"}],
                    "containers": [{"image": "memcached:1.6.22", "name": "memcached"}],
                }
            }
        },
    }
    result = smp(deployment(), patch)
    expected = deployment()
    expected["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = '{"new":1}'
    containers(expected)[0]["image"] = "memcached:1.6.22"
    assert result == expected


def test_kubectl_apply_removing_a_port() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "memcached"}, {"name": "exporter"}],
                    "containers": [
                        {
                            "$setElementOrder/ports": [{"containerPort": 11211}],
                            "name": "memcached",
                            "ports": [{"$patch": "delete", "containerPort": 9150}],
                        }
                    ],
                }
            }
        }
    }
    result = smp(deployment(), patch)
    assert containers(result)[0]["ports"] == [
        {"containerPort": 11211, "name": "memcached", "protocol": "TCP"}
    ]
    assert [c["name"] for c in containers(result)] == ["memcached", "exporter"]
    assert containers(result)[0]["env"] == containers(deployment())[0]["env"]


def test_kubectl_apply_removing_a_field_and_a_container() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "memcached"}],
                    "containers": [
                        {"name": "memcached", "resources": None, "args": ["-m", "128"]},
                        {"$patch": "delete", "name": "exporter"},
                    ],
                }
            }
        }
    }
    result = smp(deployment(), patch)
    assert [c["name"] for c in containers(result)] == ["memcached"]
    assert "resources" not in containers(result)[0]
    assert containers(result)[0]["args"] == ["-m", "128"]  # a list without merge key: replaced


def test_kubectl_apply_env_changes_keep_the_declared_order() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "memcached"}, {"name": "exporter"}],
                    "containers": [
                        {
                            "$setElementOrder/env": [{"name": "C"}, {"name": "A"}],
                            "name": "memcached",
                            "env": [{"name": "C", "value": "3"}, {"$patch": "delete", "name": "B"}],
                        }
                    ],
                }
            }
        }
    }
    result = smp(deployment(), patch)
    assert containers(result)[0]["env"] == [{"name": "C", "value": "3"}, {"name": "A", "value": "1"}]


def test_kubectl_apply_switching_deployment_strategy_uses_retain_keys() -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": None, "type": "Recreate"}}}
    assert smp(deployment(), patch)["spec"]["strategy"] == {"type": "Recreate"}


def test_kubectl_apply_changing_a_volume_source_uses_retain_keys() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/volumes": [{"name": "data"}],
                    "volumes": [
                        {"$retainKeys": ["configMap", "name"], "configMap": {"name": "cfg"}, "name": "data"}
                    ],
                }
            }
        }
    }
    result = smp(deployment(), patch)
    assert result["spec"]["template"]["spec"]["volumes"] == [{"name": "data", "configMap": {"name": "cfg"}}]


def test_retain_keys_rejects_a_patch_with_keys_outside_the_list() -> None:
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": {}}}}
    with pytest.raises(PatchError, match=r"^invalid patch format of retainKeys$") as info:
        smp(deployment(), patch)
    assert info.value.code == 400
    with pytest.raises(PatchError, match="invalid patch format of retainKeys"):
        smp(deployment(), {"spec": {"strategy": {"$retainKeys": "type"}}})


def test_plain_patch_adds_a_container_first_as_the_server_does() -> None:
    # Without $setElementOrder a new item goes before the live items (mergeSortedSlice puts patch
    # items first unless the live list says otherwise); kubectl apply always sends the order.
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "busybox"}]}}}}
    result = smp(deployment(), patch)
    assert [c["name"] for c in containers(result)] == ["sidecar", "memcached", "exporter"]
    assert containers(result)[1] == containers(deployment())[0]


def test_order_rules_from_the_design_proposal() -> None:
    """kubernetes/community preserve-order-in-strategic-merge-patch.md, the examples it shares
    with the implementation."""
    live = {"spec": {"containers": [{"name": "B", "v": 0}, {"name": "C", "v": 0}, {"name": "A", "v": 0}]}}
    patch = {"spec": {"containers": [{"name": "A", "v": 1}, {"name": "B", "v": 1}, {"name": "D", "v": 1}]}}
    result = smp(live, patch, "Pod")["spec"]["containers"]
    assert result == [
        {"name": "C", "v": 0},
        {"name": "A", "v": 1},
        {"name": "B", "v": 1},
        {"name": "D", "v": 1},
    ]

    reorder = {"spec": {"$setElementOrder/containers": [{"name": "A"}, {"name": "B"}]}}
    live2 = {"spec": {"containers": [{"name": "B"}, {"name": "A"}]}}
    assert smp(live2, reorder, "Pod")["spec"]["containers"] == [{"name": "A"}, {"name": "B"}]

    ignore_unknown = {
        "spec": {
            "$setElementOrder/containers": [{"name": "C"}, {"name": "A"}, {"name": "B"}],
            "containers": [{"name": "A", "x": 1}, {"name": "B", "x": 1}],
        }
    }
    live3 = {"spec": {"containers": [{"name": "A"}, {"name": "B"}]}}
    assert smp(live3, ignore_unknown, "Pod")["spec"]["containers"] == [
        {"name": "A", "x": 1},
        {"name": "B", "x": 1},
    ]


def test_server_only_items_interleave_by_their_live_position() -> None:
    # mergeSortedSlice keeps each server-only item after the patch items it followed in the live
    # list (the design proposal's prose simplifies this to "server-only items first").
    live = {"spec": {"containers": [{"name": n} for n in "CBDAE"]}}
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "A"}, {"name": "B"}],
            "containers": [{"name": "A", "x": 1}, {"name": "B", "x": 1}],
        }
    }
    result = smp(live, patch, "Pod")["spec"]["containers"]
    assert [c["name"] for c in result] == ["C", "D", "A", "B", "E"]
    assert result[2] == {"name": "A", "x": 1}


def test_set_element_order_must_agree_with_the_patch_list() -> None:
    patch = {"spec": {"$setElementOrder/containers": [{"name": "A"}], "containers": [{"name": "B", "x": 1}]}}
    with pytest.raises(PatchError, match="doesn't match \\$setElementOrder list") as info:
        smp({"spec": {"containers": [{"name": "A"}]}}, patch, "Pod")
    assert info.value.code == 500


def test_finalizers_are_a_merged_primitive_list() -> None:
    obj = deployment()
    added = smp(obj, {"metadata": {"finalizers": ["example.com/c", "example.com/a"]}})
    assert added["metadata"]["finalizers"] == ["example.com/c", "example.com/a", "example.com/b"]
    removed = smp(obj, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a", "nope"]}})
    assert removed["metadata"]["finalizers"] == ["example.com/b"]
    # What kubectl apply sends when its manifest goes from [a, b] to [b, d].
    applied = smp(
        obj,
        {
            "metadata": {
                "$setElementOrder/finalizers": ["example.com/b", "example.com/d"],
                "$deleteFromPrimitiveList/finalizers": ["example.com/a"],
                "finalizers": ["example.com/d"],
            }
        },
    )
    assert applied["metadata"]["finalizers"] == ["example.com/b", "example.com/d"]
    # Deleting from a list the object does not have is a no-op, and null removes the list.
    assert (
        "finalizers"
        not in smp({"metadata": {}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})["metadata"]
    )
    assert "finalizers" not in smp(obj, {"metadata": {"finalizers": None}})["metadata"]


def test_owner_references_merge_by_uid() -> None:
    ref2 = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u2"}
    result = smp(deployment(), {"metadata": {"ownerReferences": [ref2]}})
    assert [r["uid"] for r in result["metadata"]["ownerReferences"]] == ["u2", "u1"]
    result = smp(deployment(), {"metadata": {"ownerReferences": [{"uid": "u1", "controller": False}]}})
    assert result["metadata"]["ownerReferences"][0]["controller"] is False
    assert result["metadata"]["ownerReferences"][0]["name"] == "cache"
    result = smp(deployment(), {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "u1"}]}})
    assert result["metadata"]["ownerReferences"] == []


def test_status_conditions_merge_by_type() -> None:
    patch = {
        "status": {
            "conditions": [
                {"type": "Available", "status": "False", "reason": "Down"},
                {"type": "ReplicaFailure", "status": "True"},
            ]
        }
    }
    result = smp(deployment(), patch)
    assert result["status"]["conditions"] == [
        {"type": "Available", "status": "False", "reason": "Down"},
        {"type": "ReplicaFailure", "status": "True"},
        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
    ]
    pod = {"status": {"conditions": [{"type": "Ready", "status": "False"}], "podIPs": [{"ip": "10.0.0.1"}]}}
    result = smp(
        pod,
        {"status": {"conditions": [{"type": "Ready", "status": "True"}], "podIPs": [{"ip": "10.0.0.2"}]}},
        "Pod",
    )
    assert result["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert result["status"]["podIPs"] == [{"ip": "10.0.0.2"}, {"ip": "10.0.0.1"}]


def test_lists_without_a_merge_key_are_replaced() -> None:
    result = smp(deployment(), {"spec": {"template": {"spec": {"tolerations": [{"key": "b"}]}}}})
    assert result["spec"]["template"]["spec"]["tolerations"] == [{"key": "b"}]
    crd = {
        "spec": {"versions": [{"name": "v1", "served": True}, {"name": "v2", "served": False}]},
        "metadata": {"finalizers": ["x"]},
    }
    patched = smp(
        crd,
        {"spec": {"versions": [{"name": "v2", "served": True}]}, "metadata": {"finalizers": ["y"]}},
        "CustomResourceDefinition",
    )
    assert patched["spec"]["versions"] == [{"name": "v2", "served": True}]
    assert patched["metadata"]["finalizers"] == ["y", "x"]  # ObjectMeta is ObjectMeta in every kind


def test_other_kinds() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}
    assert smp(svc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}, "Service")["spec"]["ports"] == [
        {"port": 80, "targetPort": 9090},
        {"port": 443},
    ]
    pod = {
        "spec": {
            "containers": [{"name": "a", "volumeMounts": [{"mountPath": "/x", "name": "v"}]}],
            "initContainers": [{"name": "i", "env": [{"name": "E", "value": "1"}]}],
            "imagePullSecrets": [{"name": "s1"}],
            "hostAliases": [{"ip": "1.1.1.1", "hostnames": ["a"]}],
        }
    }
    patch = {
        "spec": {
            "containers": [{"name": "a", "volumeMounts": [{"mountPath": "/y", "name": "w"}]}],
            "initContainers": [{"name": "i", "env": [{"name": "E", "value": "2"}]}],
            "imagePullSecrets": [{"name": "s2"}],
            "hostAliases": [{"ip": "1.1.1.1", "hostnames": ["b"]}],
        }
    }
    result = smp(pod, patch, "Pod")["spec"]
    assert result["containers"][0]["volumeMounts"] == [
        {"mountPath": "/y", "name": "w"},
        {"mountPath": "/x", "name": "v"},
    ]
    assert result["initContainers"][0]["env"] == [{"name": "E", "value": "2"}]
    assert result["imagePullSecrets"] == [{"name": "s2"}, {"name": "s1"}]
    assert result["hostAliases"] == [{"ip": "1.1.1.1", "hostnames": ["b"]}]
    job = {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b"}]}}}}
    patched = smp(job, {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "2"}]}}}}, "Job")
    assert patched["spec"]["template"]["spec"]["containers"] == [{"name": "a", "image": "2"}, {"name": "b"}]
    cron = {"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}}}}
    patched = smp(
        cron,
        {"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "b"}]}}}}}},
        "CronJob",
    )
    assert [c["name"] for c in patched["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]] == [
        "b",
        "a",
    ]


def test_patch_directive_on_maps() -> None:
    obj = deployment()
    replaced = smp(obj, {"spec": {"template": {"metadata": {"labels": {"$patch": "replace", "tier": "x"}}}}})
    assert replaced["spec"]["template"]["metadata"]["labels"] == {"tier": "x"}
    deleted = smp(obj, {"metadata": {"annotations": {"$patch": "delete"}}})
    assert deleted["metadata"]["annotations"] == {}
    whole = smp(obj, {"$patch": "replace", "kind": "Deployment"})
    assert whole == {"kind": "Deployment"}
    with pytest.raises(PatchError, match="unknown patch type: merge in map") as info:
        smp(obj, {"spec": {"$patch": "merge"}})
    assert info.value.code == 500


def test_patch_directive_in_lists() -> None:
    obj = deployment()
    replaced = smp(
        obj,
        {
            "spec": {
                "template": {"spec": {"containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}]}}
            }
        },
    )
    assert containers(replaced) == [{"name": "only", "image": "x"}]
    with pytest.raises(PatchError, match="merging lists cannot yet be specified in the patch"):
        smp(obj, {"spec": {"template": {"spec": {"containers": [{"$patch": "merge"}]}}}})
    with pytest.raises(PatchError, match="unknown patch type: bogus"):
        smp(obj, {"spec": {"template": {"spec": {"containers": [{"$patch": "bogus", "name": "a"}]}}}})
    with pytest.raises(PatchError, match="does not contain declared merge key: name"):
        smp(obj, {"spec": {"template": {"spec": {"containers": [{"$patch": "delete"}]}}}})


def test_missing_merge_key_is_refused_like_the_server() -> None:
    with pytest.raises(PatchError) as info:
        smp(deployment(), {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}})
    assert str(info.value) == "map: map[image:x] does not contain declared merge key: name"
    assert info.value.code == 500


def test_new_fields_lose_directives_and_nulls() -> None:
    obj = {"metadata": {"name": "x"}}
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "a", "image": None, "$setElementOrder/env": [{"name": "E"}]},
                        {"$patch": "delete", "name": "gone"},
                    ],
                    "dnsPolicy": None,
                }
            }
        },
        "status": {"$patch": "replace", "x": 1},
        "extra": None,
    }
    result = smp(obj, patch)
    assert result == {
        "metadata": {"name": "x"},
        "spec": {"template": {"spec": {"containers": [{"name": "a"}]}}},
    }


def test_type_changes_take_the_patch_value() -> None:
    obj = {"spec": {"a": [1], "b": {"x": 1}, "c": 1, "d": "s"}}
    patch = {"spec": {"a": {"y": None, "z": 2}, "b": [1], "c": {"k": "v"}, "d": 2}}
    assert smp(obj, patch, "Whatever") == {"spec": {"a": {"z": 2}, "b": [1], "c": {"k": "v"}, "d": 2}}


def test_merge_lists_of_mixed_types_are_refused() -> None:
    with pytest.raises(PatchError, match="list element types are not identical"):
        smp({"metadata": {"finalizers": ["a"]}}, {"metadata": {"finalizers": [1]}})
    with pytest.raises(PatchError, match="lists of lists are not supported"):
        smp({"metadata": {"finalizers": ["a"]}}, {"metadata": {"finalizers": [["b"]]}})


def test_bad_directive_keys() -> None:
    with pytest.raises(PatchError, match=r"^invalid patch format of primitive list$") as info:
        smp({"metadata": {}}, {"metadata": {"$deleteFromPrimitiveList": ["a"]}})
    assert info.value.code == 400
    with pytest.raises(PatchError, match=r"^invalid patch format of setElementOrder list$"):
        smp({"metadata": {}}, {"metadata": {"$setElementOrder": []}})
    with pytest.raises(PatchError, match="cannot unmarshal"):
        strategic_merge_patch({}, [], "Pod")  # type: ignore[arg-type]


def test_strategic_merge_patch_result_is_independent() -> None:
    obj = deployment()
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "new", "env": [{"name": "X"}]}]}}}}
    result = strategic_merge_patch(obj, patch, "Deployment")
    containers(result)[0]["env"].append({"name": "Y"})
    containers(result)[1]["ports"].clear()
    assert patch["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "X"}]
    assert len(containers(obj)[0]["ports"]) == 2


# --- properties ---------------------------------------------------------------------------------

_keys = st.sampled_from(["a", "b", "c", "d"])
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["x", "y", ""]))
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
    max_leaves=12,
)
# Lists of scalars only: where SMP without a schema and RFC 7386 are meant to agree.
_flat_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(_scalars.filter(lambda v: v is not None), max_size=3),
        st.dictionaries(_keys, inner, max_size=3),
    ),
    max_leaves=12,
)


def _has_null_member(value: Any) -> bool:
    if isinstance(value, dict):
        return any(v is None or _has_null_member(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_null_member(v) for v in value)
    return False


@settings(max_examples=200, deadline=None)
@given(target=_json, patch=_json)
def test_merge_patch_properties(target: Any, patch: Any) -> None:
    before = json.dumps([target, patch])
    once = merge_patch(target, patch)
    assert json.dumps([target, patch]) == before
    assert merge_patch(once, patch) == once  # idempotent
    if isinstance(patch, dict):
        assert isinstance(once, dict)
        for key, value in patch.items():
            if value is None:
                assert key not in once
            elif not isinstance(value, dict):
                assert once[key] == value
    else:
        assert once == patch


@settings(max_examples=200, deadline=None)
@given(
    target=st.dictionaries(_keys, _flat_json, max_size=4),
    patch=st.dictionaries(_keys, _flat_json, max_size=4),
)
def test_strategic_merge_without_schema_agrees_with_merge_patch(
    target: dict[str, Any], patch: dict[str, Any]
) -> None:
    assert strategic_merge_patch(target, patch, "NoSuchKind") == merge_patch(target, patch)


@settings(max_examples=200, deadline=None)
@given(doc=st.dictionaries(_keys, _json, max_size=4), value=_json, data=st.data())
def test_json_patch_add_test_remove_round_trip(doc: dict[str, Any], value: Any, data: st.DataObject) -> None:
    # Pick an existing container somewhere in the document and a fresh place in it.
    paths: list[tuple[str, Any]] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, (dict, list)):
            paths.append((path, node))
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for k, v in items:
                walk(v, f"{path}/{str(k).replace('~', '~0').replace('/', '~1')}")

    walk(doc, "")
    parent_path, parent = data.draw(st.sampled_from(paths))
    if isinstance(parent, dict):
        key = data.draw(st.sampled_from(["new", "a/b", "m~n"]).filter(lambda k: k not in parent))
        where = parent_path + "/" + key.replace("~", "~0").replace("/", "~1")
    else:
        where = parent_path + "/" + str(data.draw(st.integers(0, len(parent))))
    added = json_patch(
        doc, [{"op": "add", "path": where, "value": value}, {"op": "test", "path": where, "value": value}]
    )
    assert json_patch(added, [{"op": "remove", "path": where}]) == doc
    assert _has_null_member(added) == (
        _has_null_member(doc) or _has_null_member(value) or (isinstance(parent, dict) and value is None)
    )
