"""The registry of kinds the in-memory API server serves.

Each kind's module describes its kinds as :class:`~memop.testing.apiserver.strategy.Kind` values
(a ``ResourceType`` and a strategy); this module gathers kube-apiserver's built-in ones
(:data:`BUILTIN_KINDS`: :data:`FAITHFUL_KINDS` with hand-written strategies, the rest of
v1.36's served generically by :mod:`memop.testing.kinds.generic`) and the store installs them,
then any extra kinds a test or ``python -m memop.testing serve --extra-kinds`` adds
(:func:`load_kinds`, :func:`check_extra_kinds`, :func:`served_kinds`). The store takes its kinds
from here, and no kind's module imports the store (type annotations aside). How to add a kind:
:mod:`memop.testing.kinds`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from memop.testing.apiserver.resources import CRDS, MUTATING, VALIDATING, ResourceType
from memop.testing.apiserver.strategy import Kind
from memop.testing.kinds import (
    autoscaling,
    batch,
    builtins,
    networking,
    quotas,
    scheduling,
    volumes,
    workloads,
)
from memop.testing.kinds.admissionregistration import WebhookConfigurationStrategy
from memop.testing.kinds.crds import CustomResourceDefinitionStrategy
from memop.testing.kinds.generic import generic_kinds
from memop.testing.kinds.secrets import SECRETS, SecretStrategy

# The built-in kinds with a hand-written strategy, in the order the store installs them (a kind
# sharing a storage comes after the one owning it).
FAITHFUL_KINDS: tuple[Kind, ...] = (
    *builtins.KINDS,
    Kind(SECRETS, SecretStrategy()),
    Kind(MUTATING, WebhookConfigurationStrategy()),
    Kind(VALIDATING, WebhookConfigurationStrategy()),
    Kind(CRDS, CustomResourceDefinitionStrategy()),
    *networking.KINDS,
    *workloads.KINDS,
    *batch.KINDS,
    *volumes.KINDS,
    *quotas.KINDS,
    *autoscaling.KINDS,
    *scheduling.KINDS,
)
# Every built-in kind: the faithful ones, then the rest of v1.36's served generically from their
# OpenAPI schemas (memop.testing.kinds.generic).
BUILTIN_KINDS: tuple[Kind, ...] = (*FAITHFUL_KINDS, *generic_kinds(k.rtype for k in FAITHFUL_KINDS))


class KindSpecError(ValueError):
    """A ``module:attribute`` naming no kinds (the message says why, for the command line)."""


def load_kinds(spec: str) -> tuple[Kind, ...]:
    """The kinds ``module:attribute`` names: a :class:`Kind` or an iterable of them."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise KindSpecError(f"{spec!r} is not of the form module:attribute")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise KindSpecError(f"cannot import {module_name!r}: {error}") from None
    try:
        value = getattr(module, attribute)
    except AttributeError:
        raise KindSpecError(f"module {module_name!r} has no attribute {attribute!r}") from None
    kinds = (value,) if isinstance(value, Kind) else tuple(value) if isinstance(value, Iterable) else ()
    if not kinds or not all(isinstance(kind, Kind) for kind in kinds):
        raise KindSpecError(f"{spec} is not a memop.testing.Kind or a list of them")
    return kinds


def _key(rtype: ResourceType) -> tuple[str, str, str]:
    return (rtype.group, rtype.version, rtype.plural)


def check_extra_kinds(extra: Iterable[Kind]) -> tuple[Kind, ...]:
    """``extra`` as a tuple; ValueError when one names a resource already served by a
    hand-written strategy (or added twice), which would silently replace it. A built-in kind
    served generically may be replaced: that is how a test gives it a strategy of its own."""
    kinds = tuple(extra)
    seen = {_key(k.rtype) for k in FAITHFUL_KINDS}
    for kind in kinds:
        key = _key(kind.rtype)
        if key in seen:
            raise ValueError(f"the API server already serves {kind.rtype}")
        seen.add(key)
    return kinds


def served_kinds(extra: Iterable[Kind]) -> tuple[Kind, ...]:
    """What the store installs: the built-in kinds, those ``extra`` replaces left out, then
    ``extra`` (checked by :func:`check_extra_kinds`)."""
    added = check_extra_kinds(extra)
    replaced = {_key(k.rtype) for k in added}
    return (*(k for k in BUILTIN_KINDS if _key(k.rtype) not in replaced), *added)
