"""Which checks a level and version run, in which order, and how their violations are worded
together (``policy/registry.go`` and ``checks.go`` of ``k8s.io/pod-security-admission``).

Invariants:

- the checks run in one fixed order: the baseline checks sorted by ID, then the restricted ones
  sorted by ID (Go's byte order, which Python's ``sorted`` of ASCII IDs matches); a message lists
  its violations in that order;
- ``privileged`` runs nothing; ``baseline`` runs the baseline checks; ``restricted`` runs the
  restricted checks and the baseline checks none of them overrides at that version;
- a version newer than the newest check version (:data:`MAX_VERSION`), ``latest`` included,
  is evaluated as that newest version; an older one with each check's version in force then
  (a check not yet defined at it does not run).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .checks import CHECKS, Check, CheckFn, Violation
from .policy import BASELINE, PRIVILEGED, RESTRICTED, LevelVersion, Version

# The newest policy version any check defines: v1.35 in kube-apiserver v1.36.
MAX_VERSION = Version(max(v.minimum_minor for check in CHECKS for v in check.versions))

_ORDERED = tuple(
    sorted((c for c in CHECKS if c.level == BASELINE), key=lambda c: c.id)
    + sorted((c for c in CHECKS if c.level == RESTRICTED), key=lambda c: c.id)
)


def _in_force(check: Check, minor: int) -> tuple[CheckFn, tuple[str, ...]] | None:
    """The function and overrides of ``check`` at policy version v1.<minor>, None before it exists."""
    current = None
    for versioned in check.versions:
        if versioned.minimum_minor <= minor:
            current = (versioned.check, versioned.overrides)
    return current


@functools.cache
def checks_for(level: str, minor: int) -> tuple[CheckFn, ...]:
    """The check functions ``level`` runs at v1.<minor>, in message order."""
    if level == PRIVILEGED:
        return ()
    in_force = {c.id: (c, found) for c in _ORDERED if (found := _in_force(c, minor)) is not None}
    if level == BASELINE:
        return tuple(found[0] for check, found in in_force.values() if check.level == BASELINE)
    overridden = {o for check, found in in_force.values() if check.level == RESTRICTED for o in found[1]}
    return tuple(found[0] for id_, (check, found) in in_force.items() if id_ not in overridden)


def evaluate(policy: LevelVersion, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> list[Violation]:
    """The violations of a pod (its metadata and spec) against ``policy``, in message order;
    empty when it is allowed."""
    version = MAX_VERSION if MAX_VERSION.older(policy.version) else policy.version
    assert version.minor is not None  # latest is newer than MAX_VERSION
    return [v for check in checks_for(policy.level, version.minor) if (v := check(meta, spec)) is not None]


def forbidden_detail(violations: list[Violation]) -> str:
    """``reason (detail), reason, ...``: the violations as a refusal or a warning words them."""
    return ", ".join(f"{v.reason} ({v.detail})" if v.detail else v.reason for v in violations)


def forbidden_reason(violations: list[Violation]) -> str:
    """``reason, reason``: the violations' reasons alone, as namespace warnings word them."""
    return ", ".join(v.reason for v in violations)
