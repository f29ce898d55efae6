"""The rules apiextensions-apiserver applies to a CRD's openAPIV3Schema, checked in tests.

The in-memory server serves any schema; kube-apiserver refuses a CRD whose schema is not
structural (k8s.io/apiextensions-apiserver/pkg/apiserver/schema: structural.go, validation.go)
or whose defaults do not validate, or whose CEL rules do not parse. :func:`problems` lists
every violation of those rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.testing.apiserver import cel
from memop.testing.apiserver import schema as openapi

_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_TYPES = ("object", "array", "string", "integer", "number", "boolean")


def problems(root: Mapping[str, Any]) -> list[str]:
    """Every rule of a structural schema (with its defaults) that ``root`` breaks; [] when none."""
    found: list[str] = []
    if root.get("type") != "object":
        found.append("<root>: the root must be of type object")
    _node(root, "<root>", found, root)
    metadata = (root.get("properties") or {}).get("metadata")
    if metadata is not None and set(metadata) - {"type"}:
        found.append("metadata: only restrictions on name and generateName are allowed")
    return found


def _node(node: Mapping[str, Any], path: str, found: list[str], root: Mapping[str, Any]) -> None:
    if "$ref" in node:
        found.append(f"{path}: $ref is not allowed")
    int_or_string = bool(node.get("x-kubernetes-int-or-string"))
    preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    kind = node.get("type")
    if not kind and not (int_or_string or preserve):
        found.append(f"{path}: type must not be empty")
    if kind and kind not in _TYPES:
        found.append(f"{path}: unknown type {kind!r}")
    if int_or_string and kind:
        found.append(f"{path}: an int-or-string node has no type")
    for junctor in _JUNCTORS:
        if junctor in node and not (int_or_string and junctor == "anyOf" and node[junctor] == _INT_OR_STRING):
            found.append(f"{path}: {junctor} is only allowed as int-or-string's anyOf")
    if "properties" in node and "additionalProperties" in node:
        found.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if ("properties" in node or "additionalProperties" in node) and kind not in ("object", None):
        found.append(f"{path}: properties on a {kind}")
    if kind == "array" and not isinstance(node.get("items"), Mapping):
        found.append(f"{path}: an array must have items")
    for key in node.get("required") or ():
        if key not in (node.get("properties") or {}):
            found.append(f"{path}: required {key!r} is not a property")
    if "enum" in node:
        for value in node["enum"]:
            if openapi.validate({k: v for k, v in node.items() if k != "default"}, value):
                found.append(f"{path}: enum value {value!r} does not match the node's own schema")
    if "default" in node:
        _default(node, path, found)
    for rule in node.get("x-kubernetes-validations") or ():
        try:
            cel.parse(rule["rule"])
        except cel.CelSyntaxError as error:
            found.append(f"{path}: the rule {rule['rule']!r} does not parse: {error}")
    _list_type(node, path, found)
    for key, child in (node.get("properties") or {}).items():
        _node(child, f"{path}.{key}", found, root)
    additional = node.get("additionalProperties")
    if isinstance(additional, Mapping):
        _node(additional, f"{path}.*", found, root)
    items = node.get("items")
    if isinstance(items, Mapping):
        _node(items, f"{path}[*]", found, root)


def _default(node: Mapping[str, Any], path: str, found: list[str]) -> None:
    default = node["default"]
    if openapi.validate(node, default):
        found.append(f"{path}: the default {default!r} does not validate: {openapi.validate(node, default)}")
    wrapped = {"type": "object", "properties": {"x": node}}
    if openapi.prune(wrapped, {"x": default}) != {"x": default}:
        found.append(f"{path}: the default {default!r} is not pruned")


def _list_type(node: Mapping[str, Any], path: str, found: list[str]) -> None:
    list_type = node.get("x-kubernetes-list-type")
    if list_type is None:
        if "x-kubernetes-list-map-keys" in node:
            found.append(f"{path}: list-map-keys without list-type map")
        return
    if node.get("type") != "array":
        found.append(f"{path}: x-kubernetes-list-type on a {node.get('type')}")
        return
    items = node.get("items") or {}
    if list_type == "set" and items.get("type") in ("object", "array"):
        found.append(f"{path}: a set's items must be scalars")
    if list_type == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        if items.get("type") != "object" or not keys:
            found.append(f"{path}: a map list needs object items and keys")
        for key in keys:
            prop = (items.get("properties") or {}).get(key)
            if prop is None:
                found.append(f"{path}: map key {key!r} is no property of the items")
            elif key not in (items.get("required") or ()) and "default" not in prop:
                found.append(f"{path}: map key {key!r} must be required or defaulted")
            elif prop.get("nullable"):
                found.append(f"{path}: map key {key!r} must not be nullable")
