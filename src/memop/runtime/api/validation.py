"""The API server's wording for a field of the wrong type, for controllers' own validation.

A controller that validates its spec in Python (for a CRD installed without its schema, or
with an older one) reports a bad field the way the API server would, so a user sees the same
message from either: ``spec.replicas: Invalid value: "string": spec.replicas in body must be
of type integer: "string"``.

It also holds the API server's rules for names (k8s.io/apimachinery/pkg/util/validation:
IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label), for everything memop checks before a
server would: a project, a namespace flag, a Lease, a scaffolded group or kind.
"""

from __future__ import annotations

import re
from typing import Any

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
LABEL_MAX = 63
SUBDOMAIN_MAX = 253


def is_dns1123_label(text: str) -> bool:
    """Lower-case letters, digits and '-', starting and ending alphanumeric, at most 63."""
    return len(text) <= LABEL_MAX and _DNS1123_LABEL.fullmatch(text) is not None


def is_dns1123_subdomain(text: str) -> bool:
    """DNS-1123 labels joined by '.', at most 253 characters."""
    return len(text) <= SUBDOMAIN_MAX and _DNS1123_SUBDOMAIN.fullmatch(text) is not None


def is_dns1035_label(text: str) -> bool:
    """A DNS-1123 label that starts with a letter (a CRD's plural and kind, a Service name)."""
    return len(text) <= LABEL_MAX and _DNS1035_LABEL.fullmatch(text) is not None


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
