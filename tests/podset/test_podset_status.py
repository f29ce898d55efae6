"""A PodSet's status from its pods: fields, conditions, and stability (no change, no write)."""

from __future__ import annotations

from typing import Any

from memop.podset.status import compute_status
from memop.runtime.controller.status import status_changed

NOW, LATER = "2024-01-01T00:00:00Z", "2024-01-01T00:05:00Z"


def podset(generation: int = 2, status: Any = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "ps", "generation": generation}}
    if status is not None:
        obj["status"] = status
    return obj


def pod(name: str, ready: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_fields_and_conditions_while_scaling_and_once_ready() -> None:
    status = compute_status(podset(), 3, [pod("b", False), pod("a", True)], NOW)
    assert status["podNames"] == ["a", "b"]
    assert (status["readyReplicas"], status["observedGeneration"]) == (1, 2)
    assert conditions(status) == {
        "Available": ("False", "ReplicasNotReady"),
        "Progressing": ("True", "Scaling"),
        "Degraded": ("False", "AsExpected"),
    }
    done = compute_status(podset(), 2, [pod("b", True), pod("a", True)], NOW)
    assert conditions(done)["Available"] == ("True", "ReplicasReady")
    assert conditions(done)["Progressing"] == ("False", "Scaled")
    assert compute_status(podset(), 0, [], NOW)["podNames"] == []
    assert conditions(compute_status(podset(), 0, [], NOW))["Available"] == ("True", "ReplicasReady")


def test_recomputing_the_same_situation_changes_nothing() -> None:
    pods = [pod("a", True)]
    first = compute_status(podset(), 1, pods, NOW)
    again = compute_status(podset(status=first), 1, pods, LATER)
    assert not status_changed(first, again)
    flipped = compute_status(podset(status=first), 2, pods, LATER)
    times = {c["type"]: c["lastTransitionTime"] for c in flipped["conditions"]}
    assert times == {"Available": LATER, "Progressing": LATER, "Degraded": NOW}


def test_degraded_carries_the_reason_and_message() -> None:
    status = compute_status(podset(), 2, [], NOW, ("InvalidTemplate", "failed to create a pod: no"))
    [degraded] = [c for c in status["conditions"] if c["type"] == "Degraded"]
    assert (degraded["status"], degraded["reason"], degraded["message"]) == (
        "True", "InvalidTemplate", "failed to create a pod: no"
    )  # fmt: skip
    assert degraded["observedGeneration"] == 2


def test_an_invalid_spec_keeps_what_availability_said() -> None:
    before = compute_status(podset(), 1, [pod("a", True)], NOW)
    status = compute_status(podset(3, before), None, [pod("a", True)], LATER, ("InvalidSpec", "bad"))
    assert conditions(status)["Available"] == ("True", "ReplicasReady")
    fresh = compute_status(podset(1, {"conditions": "junk"}), None, [], NOW, ("InvalidSpec", "bad"))
    assert conditions(fresh)["Available"] == ("Unknown", "InvalidSpec")
    assert compute_status({"metadata": {"generation": -1}}, 1, [], NOW)["observedGeneration"] == 0
