"""Expectations: set before writing, lowered by what the informer observes, expired on a fake clock."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from memop.runtime.cache.store import ADDED, DELETED, MODIFIED, RESYNC
from memop.runtime.controller.expectations import EXPECTATIONS_TIMEOUT, Expectations
from memop.runtime.util.clock import FakeClock

KEY = ("ns", "owner")


def child(uid: str, owner: str = "owner", *, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"pod-{uid}", "namespace": "ns", "uid": uid, "labels": {"owner": owner}}
    if terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": meta}


def key_of(obj: dict[str, Any]) -> tuple[str, str] | None:
    owner = obj["metadata"].get("labels", {}).get("owner")
    return ("ns", owner) if owner else None


def make() -> tuple[Expectations[tuple[str, str]], FakeClock]:
    clock = FakeClock()
    return Expectations(clock=clock), clock


def test_nothing_expected_is_satisfied() -> None:
    exp, _ = make()
    assert exp.satisfied(KEY)
    assert exp.pending_deletions(KEY) == frozenset()
    assert exp.expires_in(KEY) is None
    exp.expect(KEY)  # expecting nothing records nothing
    assert len(exp) == 0


def test_creations_are_counted_down_by_added_events() -> None:
    exp, _ = make()
    observe = exp.handler(key_of)
    exp.expect(KEY, creations=2)
    assert not exp.satisfied(KEY)
    observe(ADDED, child("a"), None)
    assert not exp.satisfied(KEY)
    observe(MODIFIED, child("a"), child("a"))  # an update is not a creation
    observe(ADDED, child("x", owner="other"), None)  # another owner's child
    assert not exp.satisfied(KEY)
    observe(ADDED, child("b"), None)
    assert exp.satisfied(KEY)
    assert len(exp) == 0  # met entries are dropped at once


def test_deletions_are_tracked_by_uid() -> None:
    exp, _ = make()
    observe = exp.handler(key_of)
    exp.expect(KEY, deletions=["a", "b"])
    assert exp.pending_deletions(KEY) == {"a", "b"}
    observe(DELETED, child("c"), child("c"))  # not one of ours: no effect
    assert exp.pending_deletions(KEY) == {"a", "b"}
    observe(DELETED, child("a"), child("a"))
    assert exp.pending_deletions(KEY) == {"b"}
    assert not exp.satisfied(KEY)
    observe(DELETED, child("b"), child("b"))
    assert exp.satisfied(KEY)


def test_graceful_deletion_counts_once_when_the_deletion_timestamp_appears() -> None:
    exp, _ = make()
    observe = exp.handler(key_of)
    exp.expect(KEY, deletions=["a"])
    observe(MODIFIED, child("a"), child("a"))  # some other update
    assert not exp.satisfied(KEY)
    observe(MODIFIED, child("a", terminating=True), child("a"))
    assert exp.satisfied(KEY)
    exp.expect(KEY, deletions=["b"])
    # Still terminating, then gone: neither is a new observation of "a".
    observe(MODIFIED, child("a", terminating=True), child("a", terminating=True))
    observe(DELETED, child("a", terminating=True), child("a", terminating=True))
    assert exp.pending_deletions(KEY) == {"b"}


def test_a_child_added_already_terminating_is_a_deletion_not_a_creation() -> None:
    exp, _ = make()
    observe = exp.handler(key_of)
    exp.expect(KEY, creations=1, deletions=["a"])
    observe(ADDED, child("a", terminating=True), None)
    assert exp.pending_deletions(KEY) == frozenset()
    assert not exp.satisfied(KEY)  # the creation is still awaited


def test_failed_writes_are_lowered_by_the_caller() -> None:
    exp, _ = make()
    exp.expect(KEY, creations=3, deletions=["a"])
    for _ in range(3):
        exp.creation_observed(KEY)
    exp.deletion_observed(KEY, "a")
    assert exp.satisfied(KEY)
    exp.creation_observed(KEY)  # nothing recorded: a no-op
    assert exp.satisfied(KEY)


def test_expect_replaces_what_was_recorded() -> None:
    exp, _ = make()
    exp.expect(KEY, creations=5)
    exp.expect(KEY, deletions=["a"])
    exp.deletion_observed(KEY, "a")
    assert exp.satisfied(KEY)


def test_extra_added_events_do_not_make_later_expectations_negative_forever() -> None:
    exp, _ = make()
    observe = exp.handler(key_of)
    exp.expect(KEY, creations=1)
    observe(ADDED, child("a"), None)
    observe(ADDED, child("b"), None)  # no entry any more: ignored
    exp.expect(KEY, creations=1)
    assert not exp.satisfied(KEY)


def test_expectations_expire_after_the_timeout(caplog: pytest.LogCaptureFixture) -> None:
    exp, clock = make()
    exp.expect(KEY, creations=1, deletions=["a"])
    assert exp.expires_in(KEY) == EXPECTATIONS_TIMEOUT
    clock.advance(EXPECTATIONS_TIMEOUT - 1)
    assert not exp.satisfied(KEY)
    assert exp.expires_in(KEY) == 1
    assert exp.pending_deletions(KEY) == {"a"}
    clock.advance(1)
    with caplog.at_level(logging.WARNING, logger="memop.expectations"):
        assert exp.pending_deletions(KEY) == frozenset()
        assert exp.satisfied(KEY)
    assert len(exp) == 0
    assert "expired after 300s with 1 creations and 1 deletions not observed" in caplog.text


def test_the_timeout_is_configurable() -> None:
    clock = FakeClock()
    exp: Expectations[str] = Expectations(clock=clock, timeout=2.0)
    exp.expect("k", creations=1)
    clock.advance(2.0)
    assert exp.satisfied("k")


def test_forget_drops_a_key_and_leaves_the_others() -> None:
    exp, _ = make()
    exp.expect(KEY, creations=1)
    exp.expect(("ns", "b"), creations=1)
    exp.forget(KEY)
    exp.forget(("ns", "never"))
    assert exp.satisfied(KEY)
    assert not exp.satisfied(("ns", "b"))


def test_the_handler_ignores_resyncs_unowned_objects_and_objects_without_uid() -> None:
    exp, _ = make()
    observe = exp.handler(key_of)
    exp.expect(KEY, creations=1, deletions=["a"])
    observe(RESYNC, child("a", terminating=True), child("a"))
    observe(ADDED, {"metadata": {"name": "unowned"}}, None)
    observe(DELETED, {"metadata": {"labels": {"owner": "owner"}}}, None)  # no uid
    assert exp.pending_deletions(KEY) == {"a"}
    assert not exp.satisfied(KEY)
