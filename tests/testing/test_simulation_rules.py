"""The simulation's pure rules, checked against upstream's: hashes, fenceposts, Deployment
status and conditions, pod deletion order, kubelet statuses, namespace conditions."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from memop.testing.controllers.common import rfc3339
from memop.testing.controllers.kubelet import pending_status, pod_ip, running_status
from memop.testing.controllers.namespace import deletion_conditions
from memop.testing.controllers.replicaset import deletion_order
from memop.testing.controllers.rollout import deployment_status as status_of
from memop.testing.controllers.rollout import (
    fenceposts,
    fnv32a,
    max_unavailable,
    pod_template_hash,
    set_condition,
    with_hash_label,
    without_hash,
)

T0 = 1_700_000_000.0


def deployment(
    replicas: int = 3, generation: int = 1, status: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": generation},
        "spec": {"replicas": replicas, "progressDeadlineSeconds": 600, **spec},
        "status": status or {},
    }


def rs(name: str, replicas: int, *, current: int = 0, ready: int = 0, available: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"replicas": replicas},
        "status": {"replicas": current, "readyReplicas": ready, "availableReplicas": available},
    }


def test_fnv32a_matches_the_reference_vectors() -> None:
    assert fnv32a(b"") == 0x811C9DC5
    assert fnv32a(b"a") == 0xE40C292C
    assert fnv32a(b"foobar") == 0xBF9CF968


def test_pod_template_hash_is_stable_safe_and_sensitive() -> None:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    h = pod_template_hash(template)
    assert h == pod_template_hash(copy.deepcopy(template))
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert 1 <= len(h) <= 10
    other = copy.deepcopy(template)
    other["spec"]["containers"][0]["image"] = "y"
    assert pod_template_hash(other) != h
    assert pod_template_hash(template, 1) != h


def test_hash_label_round_trips() -> None:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {}}
    labelled = with_hash_label(template, "abc")
    assert labelled["metadata"]["labels"] == {"app": "web", "pod-template-hash": "abc"}
    assert template["metadata"]["labels"] == {"app": "web"}  # not mutated
    assert without_hash(labelled) == template


@pytest.mark.parametrize(
    ("replicas", "strategy", "expected"),
    [
        (4, None, (1, 1)),  # 25 % / 25 %: surge rounds up, unavailable down
        (3, None, (1, 0)),
        (10, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}, (0, 1)),
        (10, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%", "maxUnavailable": 2}}, (5, 2)),
        (10, {"type": "Recreate"}, (0, 0)),
    ],
)
def test_fenceposts(replicas: int, strategy: dict[str, Any] | None, expected: tuple[int, int]) -> None:
    spec = {"strategy": strategy} if strategy else {}
    assert fenceposts(deployment(replicas, **spec)) == expected


def test_max_unavailable_is_zero_without_replicas_and_capped_by_them() -> None:
    assert max_unavailable(deployment(0)) == 0
    big = deployment(2, strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 5}})
    assert max_unavailable(big) == 2


def test_set_condition_keeps_transition_time_while_status_holds() -> None:
    first = {
        "type": "Available",
        "status": "False",
        "reason": "A",
        "lastTransitionTime": "t0",
        "lastUpdateTime": "t0",
    }
    same = {**first, "lastTransitionTime": "t1", "lastUpdateTime": "t1"}
    assert set_condition([first], same) == [first]  # same status and reason: untouched
    moved = set_condition([first], {**same, "reason": "B"})
    assert moved[0]["lastTransitionTime"] == "t0"
    assert moved[0]["reason"] == "B"
    flipped = set_condition([first], {**same, "status": "True"})
    assert flipped[0]["lastTransitionTime"] == "t1"


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions", [])}


def test_a_rollout_walks_through_upstream_conditions() -> None:
    d = deployment(3)
    created = set_condition(
        [],
        {
            "type": "Progressing",
            "status": "True",
            "reason": "NewReplicaSetCreated",
            "message": 'Created new replica set "web-abc"',
            "lastUpdateTime": rfc3339(T0),
            "lastTransitionTime": rfc3339(T0),
        },
    )
    new = rs("web-abc", 3)
    s1, requeue = status_of(d, [new], new, now=T0, conditions=created)
    assert s1["observedGeneration"] == 1
    assert s1["unavailableReplicas"] == 3
    assert "replicas" not in s1
    assert "availableReplicas" not in s1
    assert conditions(s1) == {
        "Progressing": ("True", "NewReplicaSetCreated"),
        "Available": ("False", "MinimumReplicasUnavailable"),
    }
    assert requeue == pytest.approx(601.0)

    d["status"] = s1
    new = rs("web-abc", 3, current=3)
    s2, _ = status_of(d, [new], new, now=T0 + 5)
    assert conditions(s2)["Progressing"] == ("True", "ReplicaSetUpdated")
    progressing = next(c for c in s2["conditions"] if c["type"] == "Progressing")
    assert progressing["message"] == 'ReplicaSet "web-abc" is progressing.'
    assert progressing["lastTransitionTime"] == rfc3339(T0)
    assert progressing["lastUpdateTime"] == rfc3339(T0 + 5)

    d["status"] = s2
    new = rs("web-abc", 3, current=3, ready=3, available=3)
    s3, requeue = status_of(d, [new], new, now=T0 + 9)
    assert conditions(s3) == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    assert s3["replicas"] == s3["updatedReplicas"] == s3["readyReplicas"] == s3["availableReplicas"] == 3
    assert "unavailableReplicas" not in s3
    assert requeue is None

    d["status"] = s3
    s4, _ = status_of(d, [new], new, now=T0 + 60)
    assert s4 == s3  # nothing changed, nothing to write


def test_old_replicas_count_until_scaled_away() -> None:
    d = deployment(2)
    old = rs("web-old", 2, current=2, ready=2, available=2)
    new = rs("web-new", 2, current=2)
    s, _ = status_of(d, [new, old], new, now=T0)
    assert s["replicas"] == 4
    assert s["updatedReplicas"] == 2
    assert s["availableReplicas"] == 2
    assert conditions(s)["Available"] == ("True", "MinimumReplicasAvailable")


def test_a_stuck_rollout_times_out_after_the_progress_deadline() -> None:
    d = deployment(
        1,
        status={
            "conditions": [
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "ReplicaSetUpdated",
                    "message": "m",
                    "lastUpdateTime": rfc3339(T0),
                    "lastTransitionTime": rfc3339(T0),
                }
            ]
        },
    )
    new = rs("web-abc", 1, current=1)
    d["status"].update({"replicas": 1, "updatedReplicas": 1})
    before, requeue = status_of(d, [new], new, now=T0 + 100)
    assert conditions(before)["Progressing"] == ("True", "ReplicaSetUpdated")
    assert requeue == pytest.approx(501.0)
    after, requeue = status_of(d, [new], new, now=T0 + 601)
    assert conditions(after)["Progressing"] == ("False", "ProgressDeadlineExceeded")
    assert requeue is None


def pod(
    name: str, created: float, phase: str = "Running", ready_at: float | None = None, restarts: int = 0
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [{"restartCount": restarts}]}
    if ready_at is not None:
        status["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(ready_at)}]
    return {"metadata": {"name": name, "creationTimestamp": rfc3339(created)}, "spec": {}, "status": status}


def test_scale_down_deletes_unready_then_newest_first() -> None:
    pods = [
        pod("old-ready", T0, ready_at=T0 + 1),
        pod("new-ready", T0 + 10, ready_at=T0 + 11),
        pod("running-unready", T0 + 2),
        pod("pending", T0 + 3, phase="Pending"),
        pod("restarted", T0 + 10, ready_at=T0 + 11, restarts=3),
    ]
    order = [p["metadata"]["name"] for p in sorted(pods, key=deletion_order)]
    assert order == ["pending", "running-unready", "restarted", "new-ready", "old-ready"]


def test_kubelet_statuses_look_like_a_kubelets() -> None:
    p = {
        "metadata": {"name": "p", "uid": "u"},
        "spec": {"containers": [{"name": "a", "image": "memcached:1.6"}, {"name": "b", "image": "busybox"}]},
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    }
    pending = pending_status(p, T0)
    assert pending["phase"] == "Pending"
    by_type = {c["type"]: c for c in pending["conditions"]}
    assert by_type["PodScheduled"]["status"] == "True"
    assert by_type["Ready"]["message"] == "containers with unready status: [a b]"
    p["status"] = pending
    running = running_status(p, T0 + 3, "10.244.0.7")
    assert running["phase"] == "Running"
    assert running["podIP"] == "10.244.0.7"
    assert {c["type"]: c["status"] for c in running["conditions"]} == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    assert running["startTime"] == rfc3339(T0)  # kept from Pending
    assert [c["ready"] for c in running["containerStatuses"]] == [True, True]
    assert all("running" in c["state"] for c in running["containerStatuses"])


def test_pod_ips_are_distinct_and_valid() -> None:
    ips = {pod_ip(n) for n in range(2000)}
    assert len(ips) == 2000
    assert all(0 < int(ip.rsplit(".", 1)[1]) < 255 for ip in ips)


def test_namespace_conditions_use_upstream_texts() -> None:
    conds = {t: (s, r, m) for t, s, r, m in deletion_conditions({"pods.": 2}, {"example.com/x": 1})}
    assert conds["NamespaceContentRemaining"] == (
        "True",
        "SomeResourcesRemain",
        "Some resources are remaining: pods. has 2 resource instances",
    )
    assert conds["NamespaceFinalizersRemaining"] == (
        "True",
        "SomeFinalizersRemain",
        "Some content in the namespace has finalizers remaining: example.com/x in 1 resource instances",
    )
    empty = {t: s for t, s, _, _ in deletion_conditions({}, {})}
    assert empty["NamespaceContentRemaining"] == "False"
    assert empty["NamespaceFinalizersRemaining"] == "False"
