"""metav1.Condition helpers: transition times move only on status flips; the API's rules hold."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.runtime.api import conditions as c
from memop.runtime.api.conditions import (
    conditions_equal_ignoring_time,
    find_condition,
    is_true,
    set_condition,
)

T0 = "2024-05-01T10:00:00Z"
T1 = "2024-05-01T10:05:00Z"
T2 = "2024-05-01T10:10:00Z"


def test_new_condition_is_appended_with_now() -> None:
    out = set_condition([], "Available", "True", "ReplicasAvailable", "3/3", 4, T0)
    assert out == [
        {
            "type": "Available",
            "status": "True",
            "observedGeneration": 4,
            "lastTransitionTime": T0,
            "reason": "ReplicasAvailable",
            "message": "3/3",
        }
    ]
    assert set_condition(None, "Available", "True", "R", "", 0, T0)[0]["lastTransitionTime"] == T0


def test_same_status_keeps_transition_time_but_updates_the_rest() -> None:
    first = set_condition([], "Available", "False", "ReplicasUnavailable", "0/3", 1, T0)
    second = set_condition(first, "Available", "False", "Scaling", "1/3", 2, T1)
    assert second == [
        {
            "type": "Available",
            "status": "False",
            "observedGeneration": 2,
            "lastTransitionTime": T0,
            "reason": "Scaling",
            "message": "1/3",
        }
    ]


def test_status_flip_moves_transition_time() -> None:
    first = set_condition([], "Available", "False", "ReplicasUnavailable", "0/3", 1, T0)
    flipped = set_condition(first, "Available", "True", "ReplicasAvailable", "3/3", 1, T1)
    assert flipped[0]["lastTransitionTime"] == T1
    assert flipped[0]["status"] == "True"
    unknown = set_condition(flipped, "Available", "Unknown", "NotObserved", "", 1, T2)
    assert unknown[0]["lastTransitionTime"] == T2


def test_missing_transition_time_is_filled_even_without_a_flip() -> None:
    out = set_condition([{"type": "A", "status": "True"}], "A", "True", "R", "", 0, T1)
    assert out[0]["lastTransitionTime"] == T1


def test_other_conditions_and_order_are_kept_and_inputs_not_mutated() -> None:
    existing = [
        {
            "type": "Foreign",
            "status": "True",
            "reason": "Theirs",
            "message": "x",
            "lastTransitionTime": T0,
            "observedGeneration": 1,
            "extra": {"kept": True},
        },
        {
            "type": "Available",
            "status": "False",
            "reason": "R",
            "message": "",
            "lastTransitionTime": T0,
            "observedGeneration": 1,
        },
    ]
    before = copy.deepcopy(existing)
    out = set_condition(existing, "Available", "True", "R", "", 2, T1)
    out2 = set_condition(out, "Degraded", "False", "AsExpected", "", 2, T1)
    assert existing == before
    assert [x["type"] for x in out2] == ["Foreign", "Available", "Degraded"]
    assert out2[0] == before[0]
    out2[0]["extra"]["kept"] = False  # the result shares nothing with the input
    assert existing[0]["extra"] == {"kept": True}


def test_duplicate_types_collapse_to_one() -> None:
    dup = [
        {"type": "A", "status": "True", "reason": "R", "message": "", "lastTransitionTime": T0},
        {"type": "A", "status": "False", "reason": "R", "message": "", "lastTransitionTime": T0},
    ]
    out = set_condition(dup, "A", "True", "R", "", 0, T1)
    assert len(out) == 1
    assert out[0]["lastTransitionTime"] == T0


@pytest.mark.parametrize(
    "reason",
    [
        "",
        "lower case",
        "1Leading",
        "Trailing,",
        "Trailing:",
        "Has-Dash",
        "New\nLine",
        "Tab\t",
        "Ends\n",
        "X" * 1025,
    ],
)
def test_non_camelcase_reasons_are_refused(reason: str) -> None:
    with pytest.raises(ValueError, match="reason"):
        set_condition([], "Available", "True", reason, "", 0, T0)


@pytest.mark.parametrize("reason", ["A", "a", "CamelCase", "With_Underscore", "a,b:c", "X1", "X" * 1024])
def test_reasons_the_api_accepts_are_accepted(reason: str) -> None:
    assert set_condition([], "Available", "True", reason, "", 0, T0)[0]["reason"] == reason


@given(st.from_regex(c.REASON_PATTERN, fullmatch=True))
@settings(max_examples=100)
def test_every_reason_matching_the_api_pattern_is_accepted(reason: str) -> None:
    # Go's $ does not match before a trailing newline; fullmatch generation mirrors that.
    if len(reason) <= c.REASON_MAX_LENGTH:
        set_condition([], "Available", "True", reason, "", 0, T0)


@given(st.text(max_size=12))
@settings(max_examples=200)
def test_reason_validation_equals_the_api_pattern(reason: str) -> None:
    accepted = re.fullmatch(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", reason) is not None
    try:
        c.validate_reason(reason)
    except ValueError:
        assert not accepted
    else:
        assert accepted


@pytest.mark.parametrize("status", ["true", "TRUE", "", "Yes", None])
def test_status_must_be_true_false_or_unknown(status: Any) -> None:
    with pytest.raises(ValueError, match="status"):
        set_condition([], "Available", status, "R", "", 0, T0)


@pytest.mark.parametrize("ctype", ["", "has space", "-lead", "example.com/", "x" * 317])
def test_invalid_types_are_refused(ctype: str) -> None:
    with pytest.raises(ValueError, match="type"):
        set_condition([], ctype, "True", "R", "", 0, T0)


@pytest.mark.parametrize("ctype", ["Available", "cache.example.com/Ready", "a.b-c_d"])
def test_valid_types_are_accepted(ctype: str) -> None:
    assert set_condition([], ctype, "True", "R", "", 0, T0)[0]["type"] == ctype


def test_negative_generation_is_refused() -> None:
    with pytest.raises(ValueError, match="observedGeneration"):
        set_condition([], "Available", "True", "R", "", -1, T0)


def test_overlong_message_is_truncated_to_the_api_limit() -> None:
    out = set_condition([], "Degraded", "True", "ReconcileError", "x" * 40000, 0, T0)
    message = out[0]["message"]
    assert len(message) == c.MESSAGE_MAX_LENGTH
    assert message.endswith("(truncated)")
    exact = "y" * c.MESSAGE_MAX_LENGTH
    assert set_condition([], "Degraded", "True", "R", exact, 0, T0)[0]["message"] == exact


def test_find_and_is_true() -> None:
    conds = set_condition([], "Available", "True", "R", "", 0, T0)
    conds = set_condition(conds, "Degraded", "False", "R", "", 0, T0)
    assert find_condition(conds, "Available") == conds[0]
    assert find_condition(conds, "Missing") is None
    assert find_condition(None, "Available") is None
    assert find_condition([{"no": "type"}, "junk"], "Available") is None  # type: ignore[list-item]
    assert is_true(conds, "Available")
    assert not is_true(conds, "Degraded")
    assert not is_true(conds, "Missing")
    assert not is_true(None, "Available")
    found = find_condition(conds, "Available")
    assert found is not None
    found["status"] = "False"  # a copy: the list is untouched
    assert is_true(conds, "Available")


def test_equal_ignoring_time() -> None:
    a = set_condition([], "Available", "True", "R", "m", 1, T0)
    a = set_condition(a, "Degraded", "False", "AsExpected", "", 1, T0)
    b = [dict(x, lastTransitionTime=T2) for x in reversed(a)]
    assert conditions_equal_ignoring_time(a, b)
    assert conditions_equal_ignoring_time(None, [])
    assert not conditions_equal_ignoring_time(a, a[:1])
    assert not conditions_equal_ignoring_time(a, [dict(a[0], message="other"), a[1]])
    assert not conditions_equal_ignoring_time(a, [dict(a[0], observedGeneration=2), a[1]])
    assert not conditions_equal_ignoring_time(a, [dict(a[0], status="False"), a[1]])


_STATUSES = st.sampled_from(c.STATUSES)
_REASONS = st.sampled_from(["Alpha", "Beta", "Gamma"])


@given(st.lists(st.tuples(st.sampled_from(["A", "B"]), _STATUSES, _REASONS, st.integers(0, 5)), max_size=30))
@settings(max_examples=200)
def test_transition_time_is_the_time_of_the_last_flip(ops: list[tuple[str, str, str, int]]) -> None:
    conds: list[dict[str, Any]] = []
    model: dict[str, tuple[str, str]] = {}  # type -> (status, time of the last flip)
    for step, (ctype, status, reason, generation) in enumerate(ops):
        now = f"2024-01-01T00:00:{step:02d}Z"
        conds = set_condition(conds, ctype, status, reason, f"step {step}", generation, now)
        if ctype not in model or model[ctype][0] != status:
            model[ctype] = (status, now)
        else:
            model[ctype] = (status, model[ctype][1])
        got = find_condition(conds, ctype)
        assert got is not None
        assert (got["status"], got["lastTransitionTime"]) == model[ctype]
        assert (got["reason"], got["message"], got["observedGeneration"]) == (
            reason,
            f"step {step}",
            generation,
        )
    assert sorted(x["type"] for x in conds) == sorted(model)


def test_schema_matches_the_python_rules() -> None:
    schema = c.condition_schema()
    props = schema["properties"]
    assert props["reason"]["pattern"] == c.REASON_PATTERN
    assert props["reason"]["maxLength"] == c.REASON_MAX_LENGTH
    assert props["type"]["pattern"] == c.TYPE_PATTERN
    assert props["message"]["maxLength"] == c.MESSAGE_MAX_LENGTH
    assert props["status"]["enum"] == list(c.STATUSES)
    assert set(schema["required"]) == set(props) - {"observedGeneration"}
    produced = set_condition([], "Available", "True", "R", "", 0, T0)[0]
    assert set(produced) == set(props)
    listed = c.conditions_schema()
    assert listed["x-kubernetes-list-type"] == "map"
    assert listed["x-kubernetes-list-map-keys"] == ["type"]


def test_types_and_reasons_found_valid_are_remembered_and_invalid_ones_never() -> None:
    c.validate_type("RememberedType")
    c.validate_reason("RememberedReason")
    assert "RememberedType" in c._VALID_TYPES
    assert "RememberedReason" in c._VALID_REASONS
    for bad_type, bad_reason in (("bad type", "bad reason"), ("", ""), ("x" * 400, "Trailing\n")):
        with pytest.raises(ValueError, match="condition type"):
            c.validate_type(bad_type)
        with pytest.raises(ValueError, match="condition reason"):
            c.validate_reason(bad_reason)
        assert bad_type not in c._VALID_TYPES
        assert bad_reason not in c._VALID_REASONS


def test_the_memory_of_valid_reasons_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(c, "_VALID_REASONS", set())
    for n in range(c._MAX_REMEMBERED_VALID + 50):
        c.validate_reason(f"Reason{n}")
    assert len(c._VALID_REASONS) == c._MAX_REMEMBERED_VALID
    c.validate_reason(f"Reason{c._MAX_REMEMBERED_VALID + 10}")  # still accepted, not remembered
