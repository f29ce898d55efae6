"""A namespace's Pod Security policy from its labels, as ``k8s.io/pod-security-admission/api``
(v1.36) resolves it: levels, versions, and the enforce/audit/warn modes.

Invariants:

- a :class:`Version` is ``latest`` or ``v1.<minor>``: the only versions the labels can name;
  ``latest`` is newer than every numbered version;
- :func:`policy_to_evaluate` always returns a usable policy, with the label errors beside it:
  an unparsable enforce level fails closed (``restricted``), an unparsable audit or warn level
  fails open (``privileged``), an unparsable version is ``latest``;
- a label left out keeps the server's default, ``privileged:latest`` for every mode (the
  default PodSecurityConfiguration of kube-apiserver), except that warn follows an enforce level
  set explicitly stricter than it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from memop.testing.apiserver.objects import invalid
from memop.testing.apiserver.schema import FieldError

PRIVILEGED = "privileged"
BASELINE = "baseline"
RESTRICTED = "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)  # from the least strict to the strictest

_PREFIX = "pod-security.kubernetes.io/"
ENFORCE_LABEL = _PREFIX + "enforce"
ENFORCE_VERSION_LABEL = _PREFIX + "enforce-version"
AUDIT_LABEL = _PREFIX + "audit"
AUDIT_VERSION_LABEL = _PREFIX + "audit-version"
WARN_LABEL = _PREFIX + "warn"
WARN_VERSION_LABEL = _PREFIX + "warn-version"

_VERSION = re.compile(r"v1\.([0-9]|[1-9][0-9]*)")
_MAX_INT = 2**63 - 1  # strconv.Atoi's limit: a larger minor is no version
_LEVEL_ERROR = "must be one of " + ", ".join(LEVELS)
_VERSION_ERROR = 'must be "latest" or "v1.x"'
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Version:
    """A policy version: ``v1.<minor>``, or ``latest`` when ``minor`` is None."""

    minor: int | None

    def __str__(self) -> str:
        return "latest" if self.minor is None else f"v1.{self.minor}"

    def older(self, other: Version) -> bool:
        """Whether this version is older than ``other`` (``latest`` is never older)."""
        if self.minor is None:
            return False
        return other.minor is None or self.minor < other.minor


LATEST = Version(None)


@dataclass(frozen=True, slots=True)
class LevelVersion:
    """A level at a version, printed ``level:version`` (``restricted:latest``)."""

    level: str
    version: Version

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"


@dataclass(frozen=True, slots=True)
class Policy:
    """What a namespace enforces (refuses pods), audits and warns about."""

    enforce: LevelVersion
    audit: LevelVersion
    warn: LevelVersion

    def fully_privileged(self) -> bool:
        return PRIVILEGED == self.enforce.level == self.audit.level == self.warn.level


DEFAULT_POLICY = Policy(*(LevelVersion(PRIVILEGED, LATEST),) * 3)


def compare_levels(a: str, b: str) -> int:
    """-1, 0 or 1 as ``a`` is less strict than, as strict as, or stricter than ``b``."""
    return (LEVELS.index(a) > LEVELS.index(b)) - (LEVELS.index(a) < LEVELS.index(b))


def parse_level(text: str) -> str | None:
    """The level ``text`` names, None when it names none."""
    return text if text in LEVELS else None


def parse_version(text: str) -> Version | None:
    """The version ``text`` names (``latest`` or ``v1.x``), None when it names none."""
    if text == "latest":
        return LATEST
    match = _VERSION.fullmatch(text)
    if match is None or int(match.group(1)) > _MAX_INT:
        return None
    return Version(int(match.group(1)))


def _parsed(
    labels: Mapping[str, Any],
    label: str,
    parse: Callable[[str], _T | None],
    *,
    detail: str,
    fallback: _T,
    errors: list[FieldError],
) -> _T | None:
    """The value of ``label`` parsed (None when the label is absent); an unparsable one is
    ``fallback``, with its error added to ``errors``."""
    text = labels.get(label)
    if text is None:
        return None
    parsed = parse(str(text))
    if parsed is None:
        errors.append(invalid(f"metadata.labels[{label}]", str(text), detail))
        return fallback
    return parsed


def policy_to_evaluate(labels: Mapping[str, Any] | None) -> tuple[Policy, list[FieldError]]:
    """The policy of a namespace labelled ``labels`` and the errors of its invalid Pod Security
    labels (``PolicyToEvaluate``): see the module docstring for what an invalid label means."""
    if not labels:
        return DEFAULT_POLICY, []
    errors: list[FieldError] = []

    def level(label: str, fallback: str) -> str | None:
        return _parsed(labels, label, parse_level, detail=_LEVEL_ERROR, fallback=fallback, errors=errors)

    def version(label: str) -> Version | None:
        return _parsed(labels, label, parse_version, detail=_VERSION_ERROR, fallback=LATEST, errors=errors)

    default = DEFAULT_POLICY.enforce  # every mode's default
    enforce_level = level(ENFORCE_LABEL, RESTRICTED)  # an invalid enforce level fails closed
    # Warn follows enforce only where the enforce label parsed.
    enforce_set = enforce_level is not None and parse_level(str(labels[ENFORCE_LABEL])) is not None
    enforce_version = version(ENFORCE_VERSION_LABEL)
    audit_level = level(AUDIT_LABEL, PRIVILEGED)  # audit and warn fail open
    audit_version = version(AUDIT_VERSION_LABEL)
    warn_level = level(WARN_LABEL, PRIVILEGED)
    warn_version = version(WARN_VERSION_LABEL)
    enforce = LevelVersion(enforce_level or default.level, enforce_version or default.version)
    audit = LevelVersion(audit_level or default.level, audit_version or default.version)
    warn = LevelVersion(warn_level or default.level, warn_version or default.version)
    if warn_level is None and enforce_set and compare_levels(enforce.level, warn.level) > 0:
        warn = LevelVersion(enforce.level, warn.version if warn_version is not None else enforce.version)
    return Policy(enforce, audit, warn), errors
