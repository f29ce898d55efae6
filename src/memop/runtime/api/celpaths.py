"""The ``fieldPath`` of a CEL rule, checked as kube-apiserver checks it when a CRD is written.

A rule's ``fieldPath`` names where its error is reported, relative to the schema node that
carries the rule: a sequence of ``.name`` and ``['name']`` (single-quoted, with backslash
escapes), each naming a property of an object or a key of a map (``additionalProperties``).
Anything else (a path into a list, a scalar, a field the schema does not declare, a
``preserve-unknown-fields`` object) makes kube-apiserver refuse the whole CRD with
``fieldPath: Invalid value: "...": must be a valid path``
(apiextensions-apiserver's ``cel.ValidFieldPath``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# The scanner of ValidFieldPath: '.', '[' and ']' alone, a single-quoted string (up to the
# first quote not after a backslash), or the text up to the next delimiter.
_TOKEN = re.compile(r"[.\[\]]|'(?:[^'\\]|\\.)*'|'.*|[^.\[\]]+", re.DOTALL)
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "'": "'", "\\": "\\"}


def field_path_error(path: str, schema: Mapping[str, Any]) -> str | None:
    """Why kube-apiserver refuses ``path`` as the ``fieldPath`` of a rule on ``schema``; None
    when it accepts it (an empty path is no path, and accepted)."""
    if not path:
        return None
    if not path.strip():
        return "must be non-empty if specified"
    if "\n" in path or "\r" in path:
        return "must not contain line breaks"
    tokens = _TOKEN.findall(path)
    node: Mapping[str, Any] = schema
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == ".":
            name = tokens[i + 1] if i + 1 < len(tokens) else None
            i += 2
        elif token == "[":
            quoted = tokens[i + 1] if i + 1 < len(tokens) else ""
            closed = i + 2 < len(tokens) and tokens[i + 2] == "]"
            if len(quoted) < 2 or quoted[0] != "'" or quoted[-1] != "'" or not closed:
                return f"{path!r} is no JSONPath of .field and ['key'] steps"
            name = _unescape(quoted[1:-1])
            i += 3
        else:
            return f"{path!r} is no JSONPath of .field and ['key'] steps"
        if name is None:
            return f"{path!r} ends with a dot"
        step = _step(node, name)
        if step is None:
            return f"{path!r}: {name!r} is no field of the schema the rule is on"
        node = step
    return None


def _step(node: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        found = properties.get(name)
        return found if isinstance(found, Mapping) else None
    values = node.get("additionalProperties")
    return values if isinstance(values, Mapping) else None


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), text)
