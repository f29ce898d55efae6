"""Feature gates of the in-memory API server, set as kube-apiserver's ``--feature-gates`` sets them.

Only the gates the server implements exist here, each with kube-apiserver v1.36's default; a
gate it does not know is an error (kube-apiserver only warns about one, but a test that asks
this server for a behaviour it lacks, or misspells a gate, should not pass on the default).

- ``ShardedListAndWatch`` (alpha, off): LIST and WATCH honour ``shardSelector``
  (:mod:`memop.testing.apiserver.sharding`); off, the parameter is ignored, even a malformed one.
"""

from __future__ import annotations

from collections.abc import Mapping

SHARDED_LIST_AND_WATCH = "ShardedListAndWatch"

DEFAULTS: Mapping[str, bool] = {SHARDED_LIST_AND_WATCH: False}
"""Every gate the server knows, with its default."""

# Go's strconv.ParseBool, which --feature-gates uses for its values.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def resolve(gates: Mapping[str, bool] | None) -> dict[str, bool]:
    """Every known gate's value: the defaults, overridden by ``gates`` (ValueError for a gate
    the server does not know, TypeError for a value that is not a bool)."""
    resolved = dict(DEFAULTS)
    for name, value in (gates or {}).items():
        if name not in DEFAULTS:
            raise ValueError(f"unrecognized feature gate: {name} (known: {', '.join(sorted(DEFAULTS))})")
        if not isinstance(value, bool):
            raise TypeError(f"feature gate {name} must be true or false, got {value!r}")
        resolved[name] = value
    return resolved


def parse(text: str) -> dict[str, bool]:
    """``--feature-gates`` text (``Name=true,Other=false``) as a mapping, with the flag's own
    messages for a missing or bad value (ValueError); unknown names are checked by :func:`resolve`."""
    gates: dict[str, bool] = {}
    for part in text.split(","):
        if not part:
            continue
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"missing bool value for {name}")
        value = raw.strip()
        if value not in _TRUE and value not in _FALSE:
            raise ValueError(
                f'invalid value of {name}={value}, err: strconv.ParseBool: parsing "{value}": invalid syntax'
            )
        gates[name] = value in _TRUE
    resolve(gates)
    return gates
