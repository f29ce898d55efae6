"""Whether a live object already holds what a server-side apply would set: the test that lets a
declarative controller skip an apply, so a converged owner costs no request.

:func:`holds` is a subset comparison of an apply configuration against the live object (as
the cache holds it): every member the configuration sets must be in the live object with an
equal value; what the live object has besides (defaults the API server filled in, fields other
managers own, the status) does not matter; a member the live object lacks holds a zero value
(``false``, 0, ``""``, ``[]``, a map of them: the API server omits them). Maps compare key by key; a
list whose items are all maps with a ``name`` (containers, ports, env, volumes: the lists
Kubernetes merges by name) compares item by item by name; any other list position by position
and must have the same length; numbers and strings that are both Kubernetes quantities compare
as quantities (``1`` and ``"1000m"`` are equal: the API server stores a quantity in its
canonical form).

A subset comparison cannot see a field the configuration no longer sets but an earlier apply
did (server-side apply would remove it): :func:`configuration_hash` gives a digest of the whole
configuration, which the controller puts on the child as an annotation, itself part of the
configuration, so a changed configuration never holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from memop.runtime.api.quantity import Quantity, QuantityError

# The members of an apply configuration that identify rather than set anything.
_IDENTITY = frozenset(("apiVersion", "kind"))


def holds(live: Any, applied: Any) -> bool:
    """Whether ``live`` holds every member ``applied`` sets, with an equal value (see the module
    docstring). At the top level apiVersion and kind are ignored (cached list items lack them)."""
    if not isinstance(live, dict) or not isinstance(applied, dict):
        return False
    return all(key in _IDENTITY or _member_holds(live, key, value) for key, value in applied.items())


# JSON objects are dicts: exact type checks, not the abc's isinstance (five times the cost,
# and a converged owner's reconcile is mostly this comparison).


def _member_holds(live: dict[str, Any], key: str, applied: Any) -> bool:
    if key in live:
        return _holds(live[key], applied)
    # The API server leaves out a zero value (Go's omitempty): an applied false, 0, "", [], or
    # a map of only such values, reads back as no member at all.
    return _zero(applied)


def _zero(value: Any) -> bool:
    if type(value) is dict:
        return all(_zero(item) for item in value.values())
    return value is None or (not value and isinstance(value, (bool, int, float, str, list)))


def _holds(live: Any, applied: Any) -> bool:
    kind = type(applied)
    if kind is dict:
        if type(live) is not dict:
            return False
        if live == applied:
            return True  # the common case, at C speed: an unchanged subtree no one defaulted
        return all(_member_holds(live, key, value) for key, value in applied.items())
    if kind is list:
        return type(live) is list and (live == applied or _list_holds(live, applied))
    return _scalar_equal(live, applied)


def _list_holds(live: list[Any], applied: list[Any]) -> bool:
    if applied and all(type(item) is dict and type(item.get("name")) is str for item in applied):
        by_name = {item.get("name"): item for item in live if type(item) is dict}
        return all(_holds(by_name.get(item["name"]), item) for item in applied)
    return len(live) == len(applied) and all(_holds(a, b) for a, b in zip(live, applied, strict=True))


def _scalar_equal(live: Any, applied: Any) -> bool:
    if live == applied and (type(live) is type(applied) or (_number(live) and _number(applied))):
        return True
    if isinstance(live, bool) or isinstance(applied, bool):
        return False
    if not isinstance(live, (str, int, float)) or not isinstance(applied, (str, int, float)):
        return False
    try:
        return Quantity(str(live)) == Quantity(str(applied))
    except QuantityError:
        return False


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def configuration_hash(configuration: Mapping[str, Any]) -> str:
    """A short digest of ``configuration`` (canonical JSON: sorted keys), the same for equal
    configurations in any key order."""
    text = orjson.dumps(configuration, option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.sha256(text).hexdigest()[:16]
