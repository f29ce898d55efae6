"""The desired pod and change detection: what replaces the pod, what patches it, what is nothing."""

from __future__ import annotations

import copy
import json
from typing import Any

from memop.mypod.api import MyPodSpec
from memop.mypod.desired import (
    LABEL,
    METADATA,
    SPEC_HASH,
    desired_pod,
    metadata_patch,
    needs_replacement,
    spec_hash,
)
from memop.testing.patch import merge_patch

MYPOD: dict[str, Any] = {
    "apiVersion": "harryyann.github.io/v1",
    "kind": "MyPod",
    "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "generation": 1},
}
POD_SPEC: dict[str, Any] = {"containers": [{"name": "main", "image": "pause:3.10"}]}


def spec(pod_spec: dict[str, Any] | None = None, **metadata: dict[str, str]) -> MyPodSpec:
    return MyPodSpec(
        copy.deepcopy(pod_spec or POD_SPEC), metadata.get("labels", {}), metadata.get("annotations", {})
    )


def as_created(desired: dict[str, Any]) -> dict[str, Any]:
    """The pod as the API server stores it: defaulted, and with what admission adds."""
    pod = copy.deepcopy(desired)
    pod["metadata"].update(uid="p-1", resourceVersion="7", creationTimestamp="2026-01-01T00:00:00Z")
    pod["metadata"]["annotations"]["admission.example.com/added"] = "yes"
    pod["spec"].update(restartPolicy="Always", dnsPolicy="ClusterFirst", serviceAccountName="default")
    pod["spec"]["containers"][0].update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/x")
    return pod


def test_the_desired_pod() -> None:
    s = spec(labels={"app": "web"}, annotations={"note": "a"})
    pod = desired_pod(MYPOD, s)
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    meta = pod["metadata"]
    assert (meta["name"], meta["namespace"]) == ("web", "ns")
    assert meta["labels"] == {"app": "web", LABEL: "web"}
    assert meta["annotations"]["note"] == "a"
    assert meta["annotations"][SPEC_HASH] == spec_hash(s)
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "harryyann.github.io/v1",
            "kind": "MyPod",
            "name": "web",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod["spec"] == POD_SPEC
    pod["spec"]["containers"].append({})  # the pod is the caller's: the spec is not shared
    assert s.pod_spec == POD_SPEC


def test_memops_keys_win_over_the_users() -> None:
    s = spec(labels={LABEL: "other"}, annotations={SPEC_HASH: "x", METADATA: "y"})
    meta = desired_pod(MYPOD, s)["metadata"]
    assert meta["labels"] == {LABEL: "web"}
    assert meta["annotations"][SPEC_HASH] == spec_hash(s)
    assert json.loads(meta["annotations"][METADATA])["annotations"] == []


def test_the_spec_hash_is_of_the_pod_spec_as_written() -> None:
    reordered = {"containers": [{"image": "pause:3.10", "name": "main"}]}
    assert spec_hash(spec(reordered)) == spec_hash(spec())
    assert spec_hash(spec(labels={"a": "b"})) == spec_hash(spec())
    changed = {"containers": [{"name": "main", "image": "pause:3.9"}]}
    assert spec_hash(spec(changed)) != spec_hash(spec())


def test_server_defaults_and_admission_additions_are_no_change() -> None:
    s = spec(labels={"app": "web"}, annotations={"note": "a"})
    pod = as_created(desired_pod(MYPOD, s))
    assert not needs_replacement(pod, s)
    assert metadata_patch(pod, s) is None


def test_a_changed_pod_spec_replaces_the_pod() -> None:
    pod = as_created(desired_pod(MYPOD, spec()))
    assert needs_replacement(pod, spec({"containers": [{"name": "main", "image": "pause:3.9"}]}))
    del pod["metadata"]["annotations"][SPEC_HASH]  # memop cannot tell what it was made from
    assert needs_replacement(pod, spec())


def test_a_labels_change_is_a_patch_that_removes_only_what_memop_applied() -> None:
    before = spec(labels={"keep": "1", "drop": "1"}, annotations={"note": "a", "gone": "x"})
    pod = as_created(desired_pod(MYPOD, before))
    pod["metadata"]["labels"]["theirs"] = "x"
    after = spec(labels={"keep": "2", "new": "1"}, annotations={"note": "a"})
    assert not needs_replacement(pod, after)
    patch = metadata_patch(pod, after)
    assert patch is not None
    assert patch["metadata"]["labels"] == {"keep": "2", "new": "1", "drop": None}
    annotations = patch["metadata"]["annotations"]
    assert (annotations["gone"], annotations["note"]) == (None, "a")
    assert SPEC_HASH not in annotations
    assert "admission.example.com/added" not in annotations
    patched = merge_patch(pod, patch)
    assert patched["metadata"]["labels"] == {"keep": "2", "new": "1", "theirs": "x", LABEL: "web"}
    assert metadata_patch(patched, after) is None  # one patch converges
    assert not needs_replacement(patched, after)


def test_a_changed_value_alone_is_a_patch() -> None:
    pod = as_created(desired_pod(MYPOD, spec(annotations={"note": "a"})))
    patch = metadata_patch(pod, spec(annotations={"note": "b"}))
    assert patch is not None
    assert patch["metadata"]["annotations"]["note"] == "b"


def test_a_pod_without_a_readable_record_gets_the_desired_keys_and_loses_none() -> None:
    pod = as_created(desired_pod(MYPOD, spec(labels={"a": "1"})))
    pod["metadata"]["annotations"][METADATA] = "not json"
    patch = metadata_patch(pod, spec(labels={"b": "1"}))
    assert patch is not None
    assert patch["metadata"]["labels"] == {"b": "1"}
