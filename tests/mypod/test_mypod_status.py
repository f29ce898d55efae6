"""A MyPod's status from its pod: the tutorial's fields for the current pod only, Ready and
Degraded, and a status that stays equal when nothing changed."""

from __future__ import annotations

from typing import Any

import pytest

from memop.mypod.desired import SPEC_HASH
from memop.mypod.status import Failure, compute_status
from memop.runtime.api.conditions import find_condition
from memop.runtime.controller.status import status_changed
from memop.testing.apiserver.patch import merge_patch

NOW, LATER = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"
HASH = "abc"
# The controller reference of a MyPod named web: another uid is an earlier, deleted namesake.
NAMESAKE = {"apiVersion": "harryyann.github.io/v1", "kind": "MyPod", "name": "web", "controller": True}
MYPOD: dict[str, Any] = {"metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "generation": 2}}


def pod(phase: str | None = "Running", ready: bool = True, **meta: Any) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase is not None:
        status = {"phase": phase, "podIP": "10.244.0.7", "hostIP": "172.18.0.2"}
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    metadata = {
        "name": "web",
        "uid": "p-1",
        "creationTimestamp": "2026-01-01T00:00:10Z",
        "annotations": {SPEC_HASH: HASH},
        "ownerReferences": [{"kind": "MyPod", "name": "web", "uid": "u-1", "controller": True}],
        **meta,
    }
    return {"metadata": metadata, "status": status}


def ready(status: dict[str, Any]) -> tuple[str, str]:
    c = find_condition(status["conditions"], "Ready")
    assert c is not None
    return c["status"], c["reason"]


def degraded(status: dict[str, Any]) -> tuple[str, str, str]:
    c = find_condition(status["conditions"], "Degraded")
    assert c is not None
    return c["status"], c["reason"], c["message"]


def written(mypod: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """The MyPod after ``status`` was merge-patched onto it (as update_status does)."""
    return merge_patch(mypod, {"status": status})  # type: ignore[no-any-return]


def test_a_running_ready_pod() -> None:
    status = compute_status(MYPOD, pod(), HASH, NOW)
    assert {k: v for k, v in status.items() if k != "conditions"} == {
        "podPhase": "Running",
        "podIp": "10.244.0.7",
        "nodeIp": "172.18.0.2",
        "createdTimestamp": 1767225610,
        "observedGeneration": 2,
    }
    assert ready(status) == ("True", "PodReady")
    assert degraded(status) == ("False", "AsExpected", "")
    assert all(c["observedGeneration"] == 2 and c["lastTransitionTime"] == NOW for c in status["conditions"])


def test_a_pod_just_created_is_pending_without_ips() -> None:
    status = compute_status(MYPOD, pod(phase=None), HASH, NOW)
    assert status["podPhase"] == "Pending"
    assert not {"podIp", "nodeIp"} & set(status)
    assert ready(status) == ("False", "PodNotReady")


@pytest.mark.parametrize(
    ("the_pod", "reason"),
    [
        (None, "PodMissing"),
        (pod(annotations={SPEC_HASH: "older"}), "Replacing"),
        (pod(annotations={SPEC_HASH: "older"}, deletionTimestamp=NOW), "Replacing"),
        (pod(deletionTimestamp=NOW), "PodTerminating"),
        (pod(ownerReferences=[]), "PodConflict"),
        (pod(ownerReferences=[{"uid": "x", "controller": True}], deletionTimestamp=NOW), "PodTerminating"),
        (pod(ownerReferences=[{**NAMESAKE, "uid": "u-0"}]), "PodTerminating"),
        (pod(ownerReferences=[{**NAMESAKE, "uid": "u-0", "name": "db"}]), "PodConflict"),
    ],
)
def test_no_current_pod_clears_the_pod_fields(the_pod: dict[str, Any] | None, reason: str) -> None:
    before = written(MYPOD, compute_status(MYPOD, pod(), HASH, NOW))
    status = compute_status(before, the_pod, HASH, LATER)
    # None: the merge patch removes what described a pod that is going or not ours.
    assert {k: status[k] for k in ("podPhase", "podIp", "nodeIp", "createdTimestamp")} == dict.fromkeys(
        ("podPhase", "podIp", "nodeIp", "createdTimestamp")
    )
    assert ready(status) == ("False", reason)
    after = written(before, status)
    assert not {"podPhase", "podIp", "nodeIp", "createdTimestamp"} & set(after["status"])
    assert not status_changed(after["status"], compute_status(after, the_pod, HASH, LATER))


def test_a_finished_pod_is_reported_as_it_is() -> None:
    status = compute_status(MYPOD, pod("Succeeded", ready=False), HASH, NOW)
    assert status["podPhase"] == "Succeeded"
    assert ready(status) == ("False", "PodSucceeded")


def test_without_a_valid_spec_the_pod_is_not_judged_stale() -> None:
    status = compute_status(MYPOD, pod(annotations={}), None, NOW, Failure("InvalidSpec", "bad"))
    assert status["podPhase"] == "Running"
    assert ready(status) == ("True", "PodReady")
    assert degraded(status) == ("True", "InvalidSpec", "bad")


def test_an_unchanged_situation_gives_the_stored_status_and_times_move_on_flips_only() -> None:
    mypod = written(MYPOD, compute_status(MYPOD, pod(ready=False), HASH, NOW))
    assert not status_changed(mypod["status"], compute_status(mypod, pod(ready=False), HASH, LATER))
    flipped = compute_status(mypod, pod(), HASH, LATER)
    times = {c["type"]: c["lastTransitionTime"] for c in flipped["conditions"]}
    assert times == {"Ready": LATER, "Degraded": NOW}
    failed = compute_status(written(mypod, flipped), pod(), HASH, LATER, Failure("PodForbidden", "no"))
    assert degraded(failed) == ("True", "PodForbidden", "no")
