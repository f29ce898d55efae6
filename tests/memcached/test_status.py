"""Status from the Deployment and pods: nodes, readyReplicas, conditions and their times."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.memcached.api import MemcachedSpec
from memop.memcached.status import compute_status, nodes, status_changed
from memop.runtime.api.conditions import find_condition, set_condition, validate_reason

T0 = "2024-05-01T10:00:00Z"
T1 = "2024-05-01T10:01:00Z"
T2 = "2024-05-01T10:02:00Z"

Obj = dict[str, Any]


def memcached(generation: int = 2, status: Obj | None = None) -> Obj:
    obj: Obj = {"metadata": {"name": "cache", "namespace": "ns", "uid": "u", "generation": generation}}
    if status is not None:
        obj["status"] = status
    return obj


def deployment(
    replicas: int = 3,
    *,
    generation: int = 1,
    observed: int = 1,
    updated: int | None = None,
    total: int | None = None,
    ready: int | None = None,
    available: int | None = None,
    conditions: list[Obj] | None = None,
) -> Obj:
    status: Obj = {"observedGeneration": observed}
    for key, given_count in (
        ("updatedReplicas", updated),
        ("replicas", total),
        ("readyReplicas", ready),
        ("availableReplicas", available),
    ):
        count = replicas if given_count is None else given_count
        if count:  # the API omits zero counts
            status[key] = count
    if conditions:
        status["conditions"] = conditions
    return {
        "metadata": {"name": "cache", "generation": generation},
        "spec": {"replicas": replicas},
        "status": status,
    }


def pod(name: str, phase: str | None = "Running", deleting: bool = False) -> Obj:
    obj: Obj = {"metadata": {"name": name}, "status": {}}
    if phase is not None:
        obj["status"]["phase"] = phase
    if deleting:
        obj["metadata"]["deletionTimestamp"] = T0
    return obj


def cond(status: Obj, ctype: str) -> Obj:
    found = find_condition(status["conditions"], ctype)
    assert found is not None
    return found


def summary(status: Obj) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


SPEC3 = MemcachedSpec(size=3)


# --- nodes --------------------------------------------------------------------------------------


def test_nodes_are_sorted_live_pods() -> None:
    pods = [
        pod("c"),
        pod("a", "Pending"),
        pod("b", None),  # just created: the server has not set a phase in this copy
        pod("d", "Succeeded"),
        pod("e", "Failed"),
        pod("f", "Unknown"),
        pod("g", "Running", deleting=True),
        pod("h", "Pending", deleting=True),
    ]
    assert nodes(pods) == ["a", "b", "c"]
    assert compute_status(memcached(), SPEC3, deployment(), pods, T0)["nodes"] == ["a", "b", "c"]
    assert nodes([]) == []


# --- each situation -----------------------------------------------------------------------------


def test_everything_available() -> None:
    status = compute_status(memcached(), SPEC3, deployment(), [pod("a")], T0)
    assert status["readyReplicas"] == 3
    assert status["observedGeneration"] == 2
    assert summary(status) == {
        "Available": ("True", "ReplicasAvailable"),
        "Progressing": ("False", "DeploymentUpToDate"),
        "Degraded": ("False", "AsExpected"),
    }
    assert [c["type"] for c in status["conditions"]] == ["Available", "Progressing", "Degraded"]
    for c in status["conditions"]:
        assert c["observedGeneration"] == 2
        assert c["lastTransitionTime"] == T0
        validate_reason(c["reason"])
    assert cond(status, "Available")["message"] == "3/3 replicas available"
    assert cond(status, "Degraded")["message"] == ""


def test_deployment_not_created_yet() -> None:
    status = compute_status(memcached(), SPEC3, None, [], T0)
    assert status["readyReplicas"] == 0
    assert status["nodes"] == []
    assert summary(status) == {
        "Available": ("False", "DeploymentMissing"),
        "Progressing": ("True", "DeploymentMissing"),
        "Degraded": ("False", "AsExpected"),
    }


def test_size_zero_is_available() -> None:
    spec = MemcachedSpec(size=0)
    assert summary(compute_status(memcached(), spec, None, [], T0))["Available"] == ("True", "ScaledToZero")
    scaled = compute_status(memcached(), spec, deployment(0), [], T0)
    assert summary(scaled)["Available"] == ("True", "ScaledToZero")
    assert summary(scaled)["Progressing"] == ("False", "DeploymentUpToDate")
    assert scaled["readyReplicas"] == 0
    # Pods still terminating after a scale to zero: available, still progressing.
    draining = compute_status(
        memcached(), spec, deployment(0, total=2, updated=0), [pod("x", deleting=True)], T0
    )
    assert summary(draining)["Available"] == ("True", "ScaledToZero")
    assert summary(draining)["Progressing"] == ("True", "RollingOut")
    assert draining["nodes"] == []


def test_pods_not_available_yet() -> None:
    status = compute_status(memcached(), SPEC3, deployment(ready=1, available=1), [], T0)
    assert status["readyReplicas"] == 1
    assert summary(status)["Available"] == ("False", "ReplicasUnavailable")
    assert cond(status, "Available")["message"] == "1/3 replicas available"
    assert summary(status)["Progressing"] == ("False", "DeploymentUpToDate")


def test_deployment_spec_behind_ours_is_scaling() -> None:
    status = compute_status(memcached(), MemcachedSpec(size=5), deployment(3), [], T0)
    assert summary(status)["Progressing"] == ("True", "Scaling")
    assert summary(status)["Available"] == ("False", "ReplicasUnavailable")


def test_generation_not_observed_is_rolling_out() -> None:
    status = compute_status(memcached(), SPEC3, deployment(generation=2, observed=1), [], T0)
    assert summary(status)["Progressing"] == ("True", "RollingOut")
    assert "generation 2" in cond(status, "Progressing")["message"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"updated": 1, "total": 4}, "1 of 3 replicas updated"),
        ({"updated": 3, "total": 4}, "1 old replicas pending termination"),
    ],
)
def test_rollout_in_progress(kwargs: dict[str, int], message: str) -> None:
    status = compute_status(memcached(), SPEC3, deployment(**kwargs), [], T0)
    assert summary(status)["Progressing"] == ("True", "RollingOut")
    assert cond(status, "Progressing")["message"] == message


def test_progress_deadline_exceeded_is_named() -> None:
    stuck = [
        {
            "type": "Progressing",
            "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": 'ReplicaSet "cache-abc" has timed out progressing.',
        }
    ]
    status = compute_status(
        memcached(), SPEC3, deployment(updated=1, total=4, available=2, conditions=stuck), [], T0
    )
    assert summary(status)["Progressing"] == ("True", "ProgressDeadlineExceeded")
    assert cond(status, "Progressing")["message"] == (
        '1 of 3 replicas updated: ReplicaSet "cache-abc" has timed out progressing.'
    )


def test_invalid_spec_with_the_deployment_known() -> None:
    status = compute_status(
        memcached(), None, deployment(), [pod("a")], T0, invalid="spec.size: Invalid value: -1"
    )
    assert summary(status) == {
        "Available": ("True", "ReplicasAvailable"),  # the last valid spec keeps serving
        "Progressing": ("False", "DeploymentUpToDate"),
        "Degraded": ("True", "InvalidSpec"),
    }
    assert cond(status, "Degraded")["message"] == "spec.size: Invalid value: -1"
    assert status["readyReplicas"] == 3


def test_problem_without_the_deployment_keeps_what_was_known() -> None:
    healthy = compute_status(memcached(), SPEC3, deployment(), [pod("a")], T0)
    obj = memcached(status=healthy)
    for kwargs in ({"invalid": "bad"}, {"error": "boom"}, {"finalizing": True}):
        status = compute_status(obj, None if "invalid" in kwargs else SPEC3, None, [pod("a")], T1, **kwargs)
        assert status["readyReplicas"] == 3
        assert cond(status, "Available") == cond(healthy, "Available")
        assert cond(status, "Progressing") == cond(healthy, "Progressing")
        assert cond(status, "Degraded")["status"] == "True"
        assert cond(status, "Degraded")["lastTransitionTime"] == T1


def test_problem_before_anything_was_known_is_unknown() -> None:
    status = compute_status(memcached(), None, None, [], T0, invalid="bad")
    assert summary(status) == {
        "Available": ("Unknown", "DeploymentNotObserved"),
        "Progressing": ("Unknown", "DeploymentNotObserved"),
        "Degraded": ("True", "InvalidSpec"),
    }
    assert status["readyReplicas"] == 0


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"finalizing": True}, "Finalizing"),
        ({"invalid": "bad spec"}, "InvalidSpec"),
        ({"error": "deployments is forbidden"}, "ReconcileError"),
        ({"finalizing": True, "invalid": "bad", "error": "e"}, "Finalizing"),
        ({"invalid": "bad", "error": "e"}, "InvalidSpec"),
    ],
)
def test_degraded_reasons(kwargs: dict[str, Any], reason: str) -> None:
    status = compute_status(memcached(), SPEC3, deployment(), [], T0, **kwargs)
    assert summary(status)["Degraded"] == ("True", reason)
    message = cond(status, "Degraded")["message"]
    if reason == "Finalizing":
        assert "cache.example.com/finalizer" in message
    else:
        assert message == kwargs["invalid" if reason == "InvalidSpec" else "error"]


def test_finalizing_with_an_error_says_both() -> None:
    forbidden = 'User "memop" cannot patch resource "memcacheds"'
    status = compute_status(memcached(), None, None, [], T0, finalizing=True, error=forbidden)
    degraded = cond(status, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "Finalizing")
    assert degraded["message"] == (
        f"the Memcached is being deleted; memop runs its finalizer cache.example.com/finalizer: {forbidden}"
    )
    plain = cond(compute_status(memcached(), None, None, [], T0, finalizing=True), "Degraded")["message"]
    assert plain == "the Memcached is being deleted; memop runs its finalizer cache.example.com/finalizer"


def test_foreign_conditions_are_kept() -> None:
    foreign = set_condition([], "example.com/Audited", "True", "Checked", "", 1, T0)
    status = compute_status(memcached(status={"conditions": foreign}), SPEC3, deployment(), [], T1)
    assert status["conditions"][0] == foreign[0]


# --- transition times and change detection ------------------------------------------------------


def test_recomputing_an_unchanged_situation_changes_nothing() -> None:
    first = compute_status(memcached(), SPEC3, deployment(), [pod("a")], T0)
    again = compute_status(memcached(status=first), SPEC3, deployment(), [pod("a")], T1)
    assert again == first
    assert not status_changed(first, again)


def test_only_a_flipped_condition_gets_a_new_time() -> None:
    first = compute_status(memcached(), SPEC3, deployment(available=1, ready=1), [], T0)
    second = compute_status(memcached(status=first), SPEC3, deployment(), [], T1)
    assert status_changed(first, second)
    assert cond(second, "Available")["lastTransitionTime"] == T1
    assert cond(second, "Progressing")["lastTransitionTime"] == T0
    assert cond(second, "Degraded")["lastTransitionTime"] == T0
    # A message-only change keeps the time but is still a change worth writing.
    third = compute_status(memcached(status=second), SPEC3, deployment(available=4), [], T2)
    assert cond(third, "Available")["lastTransitionTime"] == T1
    assert cond(third, "Available")["message"] == "4/3 replicas available"
    assert status_changed(second, third)


def test_new_generation_is_a_change() -> None:
    first = compute_status(memcached(2), SPEC3, deployment(), [], T0)
    second = compute_status(memcached(3, status=first), SPEC3, deployment(), [], T1)
    assert status_changed(first, second)
    assert second["observedGeneration"] == 3
    assert all(c["lastTransitionTime"] == T0 for c in second["conditions"])


def test_status_changed_is_exact() -> None:
    status = compute_status(memcached(), SPEC3, deployment(), [pod("a")], T0)
    assert status_changed(None, status)
    assert status_changed({}, status)
    assert not status_changed(dict(status), status)
    for key, value in (("nodes", ["a", "b"]), ("readyReplicas", 2), ("observedGeneration", 9)):
        assert status_changed({**status, key: value}, status)
    timed = [dict(c) for c in status["conditions"]]
    timed[0]["lastTransitionTime"] = T2
    assert status_changed({**status, "conditions": timed}, status)
    assert status_changed({**status, "conditions": list(reversed(status["conditions"]))}, status)
    assert status_changed({**status, "extra": 1}, status)


_COUNTS = st.integers(0, 6)


@given(
    size=st.integers(0, 5),
    replicas=st.integers(0, 5),
    generation=st.integers(1, 3),
    observed=st.integers(0, 3),
    updated=_COUNTS,
    total=_COUNTS,
    ready=_COUNTS,
    available=_COUNTS,
    exists=st.booleans(),
    problem=st.sampled_from([{}, {"invalid": "bad"}, {"error": "e"}, {"finalizing": True}]),
)
@settings(max_examples=300)
def test_invariants(
    *,
    size: int,
    replicas: int,
    generation: int,
    observed: int,
    updated: int,
    total: int,
    ready: int,
    available: int,
    exists: bool,
    problem: dict[str, Any],
) -> None:
    dep = (
        deployment(
            replicas,
            generation=generation,
            observed=observed,
            updated=updated,
            total=total,
            ready=ready,
            available=available,
        )
        if exists
        else None
    )
    spec = None if "invalid" in problem else MemcachedSpec(size=size)
    first = compute_status(memcached(), spec, dep, [pod("p")], T0, **problem)
    types = [c["type"] for c in first["conditions"]]
    assert types == ["Available", "Progressing", "Degraded"]
    for c in first["conditions"]:
        validate_reason(c["reason"])
        assert c["status"] in ("True", "False", "Unknown")
    if dep is not None:
        want = size if spec is not None else replicas
        assert first["readyReplicas"] == ready
        assert (cond(first, "Available")["status"] == "True") == (want == 0 or available >= want)
        caught_up = replicas == want and observed >= generation and updated >= replicas and total <= updated
        assert (cond(first, "Progressing")["status"] == "False") == caught_up
    assert (cond(first, "Degraded")["status"] == "True") == bool(problem)
    # Idempotent: the same inputs later give the stored status back.
    again = compute_status(memcached(status=first), spec, dep, [pod("p")], T1, **problem)
    assert not status_changed(first, again)


@pytest.mark.parametrize(
    "the_deployment",
    [
        None,  # not created yet
        deployment(2),  # scaling
        deployment(generation=2, observed=1),  # rolling out, not yet observed
        deployment(updated=1),  # rolling out
        deployment(),  # up to date
    ],
)
def test_no_condition_names_its_object(the_deployment: Obj | None) -> None:
    # Two Memcacheds in the same state get equal conditions, which the cache holds once
    # (CACHE_SHARED): a condition naming its Memcached or Deployment cost a copy each.
    def named(name: str) -> Obj:
        obj = memcached()
        obj["metadata"]["name"] = name
        if the_deployment is None:
            return compute_status(obj, SPEC3, None, [], T0)
        return compute_status(
            obj, SPEC3, {**the_deployment, "metadata": {**the_deployment["metadata"], "name": name}}, [], T0
        )

    assert named("one")["conditions"] == named("other")["conditions"]
