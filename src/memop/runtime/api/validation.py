"""The API server's wording for a field of the wrong type, for controllers' own validation.

A controller that validates its spec in Python (for a CRD installed without its schema, or
with an older one) reports a bad field the way the API server would, so a user sees the same
message from either: ``spec.replicas: Invalid value: "string": spec.replicas in body must be
of type integer: "string"``.
"""

from __future__ import annotations

from typing import Any


def json_type(value: Any) -> str:
    """The JSON type of a decoded value, as the API server's schema validation names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def type_error(path: str, value: Any, expected: str) -> str:
    """The message for ``value`` at ``path`` where the schema wants ``expected`` (e.g.
    "integer", or "integer,string" for int-or-string)."""
    actual = json_type(value)
    return f'{path}: Invalid value: "{actual}": {path} in body must be of type {expected}: "{actual}"'
