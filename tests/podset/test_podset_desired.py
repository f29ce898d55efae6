"""The pod a PodSet creates, which pods count, and which go first when scaling down."""

from __future__ import annotations

from typing import Any

from memop.podset.api import PodSetSpec
from memop.podset.desired import (
    DEFAULT_TEMPLATE,
    INSTANCE_LABEL,
    desired_pod,
    is_active,
    is_ready,
    pods_to_delete,
)

PODSET = {"metadata": {"name": "ps", "namespace": "ns", "uid": "u-1", "generation": 1}}


def pod(
    name: str, phase: str | None = "Running", created: str = "2024-01-01T00:00:00Z", **meta: Any
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase} if phase else {}
    return {"metadata": {"name": name, "creationTimestamp": created, **meta}, "status": status}


def test_the_default_pod_is_the_tutorials_busybox() -> None:
    desired = desired_pod(PODSET, PodSetSpec(replicas=2))
    assert desired["metadata"] == {
        "generateName": "ps-pod-",
        "namespace": "ns",
        "labels": {"version": "v0.1", INSTANCE_LABEL: "ps"},
        "ownerReferences": [
            {
                "apiVersion": "batch.tutorial.kubebuilder.io/v1",
                "kind": "PodSet",
                "name": "ps",
                "uid": "u-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    assert desired["spec"] == {
        "containers": [{"name": "busybox", "image": "busybox", "command": ["sleep", "3600"]}]
    }
    desired["spec"]["containers"].clear()  # a fresh dict: the default is not shared
    assert DEFAULT_TEMPLATE["spec"]["containers"]


def test_a_template_gives_labels_annotations_and_spec_and_the_instance_label_wins() -> None:
    template = {
        "metadata": {
            "labels": {"app": "web", INSTANCE_LABEL: "other"},
            "annotations": {"a": "b"},
            "name": "x",
        },
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }
    desired = desired_pod(PODSET, PodSetSpec(1, template))
    assert desired["metadata"]["labels"] == {"app": "web", INSTANCE_LABEL: "ps"}
    assert desired["metadata"]["annotations"] == {"a": "b"}
    assert "name" not in desired["metadata"]
    assert desired["spec"] == template["spec"]
    assert desired["spec"] is not template["spec"]
    assert desired_pod(PODSET, PodSetSpec(1, {}))["spec"] == {}  # the server says what is missing


def test_pending_and_running_pods_count_finished_and_terminating_ones_do_not() -> None:
    assert is_active(pod("a", "Running"))
    assert is_active(pod("a", "Pending"))
    assert is_active(pod("a", None))  # no phase yet: Pending
    assert not is_active(pod("a", "Failed"))
    assert not is_active(pod("a", "Succeeded"))
    assert not is_active(pod("a", "Unknown"))
    assert not is_active(pod("a", "Running", deletionTimestamp="2024-01-01T00:00:00Z"))
    assert not is_active({"metadata": "junk", "status": ["junk"]} | {"status": {"phase": "Failed"}})


def test_ready_is_the_ready_condition() -> None:
    assert is_ready({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert not is_ready({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert not is_ready({"status": {"conditions": "junk"}})
    assert not is_ready({})


def test_scale_down_takes_pending_pods_first_then_the_newest() -> None:
    pods = [
        pod("old-running", "Running", "2024-01-01T00:00:01Z"),
        pod("new-running", "Running", "2024-01-01T00:00:09Z"),
        pod("old-pending", "Pending", "2024-01-01T00:00:02Z"),
        pod("new-pending", None, "2024-01-01T00:00:05Z"),
        pod("b-same-second", "Running", "2024-01-01T00:00:07Z"),
        pod("a-same-second", "Running", "2024-01-01T00:00:07Z"),
    ]
    order = [p["metadata"]["name"] for p in pods_to_delete(pods, len(pods))]
    assert order == [
        "new-pending",
        "old-pending",
        "new-running",
        "b-same-second",
        "a-same-second",
        "old-running",
    ]
    assert [p["metadata"]["name"] for p in pods_to_delete(pods, 2)] == order[:2]
    assert pods_to_delete(pods, 0) == []
    assert pods_to_delete(list(reversed(pods)), 3) == pods_to_delete(pods, 3)
