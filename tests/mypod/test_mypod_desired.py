"""The desired pod and change detection: what replaces the pod, and what is no change."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from memop.mypod.api import MyPodSpec
from memop.mypod.desired import (
    LABEL,
    METADATA,
    SPEC_HASH,
    desired_pod,
    metadata_record,
    replacement_reason,
    spec_hash,
)

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
    assert meta["annotations"][METADATA] == metadata_record(spec())


def test_the_spec_hash_is_of_the_pod_spec_as_written() -> None:
    reordered = {"containers": [{"image": "pause:3.10", "name": "main"}]}
    assert spec_hash(spec(reordered)) == spec_hash(spec())
    assert spec_hash(spec(labels={"a": "b"})) == spec_hash(spec())
    changed = {"containers": [{"name": "main", "image": "pause:3.9"}]}
    assert spec_hash(spec(changed)) != spec_hash(spec())


def test_server_defaults_and_admission_additions_are_no_change() -> None:
    s = spec(labels={"app": "web"}, annotations={"note": "a"})
    pod = as_created(desired_pod(MYPOD, s))
    pod["metadata"]["labels"]["theirs"] = "x"  # others' edits to the pod are not memop's business
    assert replacement_reason(pod, s) is None


def test_a_changed_pod_spec_replaces_the_pod() -> None:
    pod = as_created(desired_pod(MYPOD, spec()))
    changed = spec({"containers": [{"name": "main", "image": "pause:3.9"}]})
    assert replacement_reason(pod, changed) == "podSpec changed"
    del pod["metadata"]["annotations"][SPEC_HASH]  # memop cannot tell what it was made from
    assert replacement_reason(pod, spec()) == "podSpec changed"


@pytest.mark.parametrize(
    "after",
    [
        spec(labels={"keep": "2"}, annotations={"note": "a"}),
        spec(labels={"keep": "1"}, annotations={"note": "b"}),
        spec(labels={"keep": "1", "new": "1"}, annotations={"note": "a"}),
        spec(labels={}, annotations={"note": "a"}),
    ],
)
def test_a_labels_or_annotations_change_replaces_the_pod_too(after: MyPodSpec) -> None:
    pod = as_created(desired_pod(MYPOD, spec(labels={"keep": "1"}, annotations={"note": "a"})))
    assert replacement_reason(pod, after) == "podLabels or podAnnotations changed"
    pod["metadata"]["annotations"][METADATA] = "not ours"
    assert replacement_reason(pod, spec(labels={"keep": "1"}, annotations={"note": "a"})) is not None
