"""``metadata.managedFields`` bookkeeping for Update operations, in the FieldsV1 format.

The real server tracks field ownership with structured-merge-diff. This keeps the observable
shape and the main rules without the type schemas: one entry per (manager, operation,
subresource); a write gives its manager every field it changed or added; other managers lose
those fields; fields that no longer exist belong to nobody; entries left empty disappear.
List items are keyed (``k:{"name":"x"}``) when every item carries a usual merge key, and
``metadata.finalizers`` is a set (``v:"x"``); other lists are atomic.

Fieldsets are nested dicts (``{"f:spec": {"f:replicas": {}}}``) and every function here is
pure: inputs, which may be shared with stored objects, are never mutated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

FieldSet = dict[str, Any]

# Server-owned metadata that never appears in a fieldset.
_SYSTEM_METADATA = frozenset(
    (
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    )
)
_TYPE_FIELDS = frozenset(("apiVersion", "kind"))
_MISSING = object()


def _item_key(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    if "name" in item and isinstance(item["name"], str):
        fields: dict[str, Any] = {"name": item["name"]}
    elif "containerPort" in item:
        fields = {"containerPort": item["containerPort"], "protocol": item.get("protocol", "TCP")}
    elif "uid" in item:
        fields = {"uid": item["uid"]}
    elif "type" in item and isinstance(item["type"], str):
        fields = {"type": item["type"]}
    else:
        return None
    return "k:" + json.dumps(fields, separators=(",", ":"), sort_keys=True)


def _keyed(items: list[Any]) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for item in items:
        key = _item_key(item)
        if key is None or key in out:
            return None
        out[key] = item
    return out


def _value_fields(value: Any, path: tuple[str, ...]) -> FieldSet:
    if isinstance(value, dict):
        return {f"f:{k}": _value_fields(v, (*path, k)) for k, v in value.items()}
    if isinstance(value, list):
        if path == ("metadata", "finalizers"):
            return {"v:" + json.dumps(v, separators=(",", ":")): {} for v in value}
        keyed = _keyed(value) if value else None
        if keyed is not None:
            return {k: {".": {}, **_value_fields(v, path)} for k, v in keyed.items()}
    return {}


def fields_of(obj: Mapping[str, Any]) -> FieldSet:
    """Every field set in ``obj`` (without type fields and server-owned metadata)."""
    out: FieldSet = {}
    for key, value in obj.items():
        if key in _TYPE_FIELDS:
            continue
        if key == "metadata" and isinstance(value, dict):
            meta = {
                f"f:{k}": _value_fields(v, ("metadata", k))
                for k, v in value.items()
                if k not in _SYSTEM_METADATA
            }
            if meta:
                out["f:metadata"] = meta
            continue
        out[f"f:{key}"] = _value_fields(value, (key,))
    return out


def _diff(old: Any, new: Any, path: tuple[str, ...]) -> FieldSet | None:
    """Fields of ``new`` that are new or different from ``old``; None when nothing changed."""
    if old is new:
        return None
    if old is not _MISSING and old == new:
        return None
    if old is _MISSING:
        return _value_fields(new, path)
    if isinstance(old, dict) and isinstance(new, dict):
        out: FieldSet = {}
        for key, value in new.items():
            if not path and key in _TYPE_FIELDS:
                continue
            if path == ("metadata",) and key in _SYSTEM_METADATA:
                continue
            sub = _diff(old.get(key, _MISSING), value, (*path, key))
            if sub is not None:
                out[f"f:{key}"] = sub
        return out or None
    if isinstance(old, list) and isinstance(new, list):
        if path == ("metadata", "finalizers"):
            added = [v for v in new if v not in old]
            return {"v:" + json.dumps(v, separators=(",", ":")): {} for v in added} or None
        old_keyed = _keyed(old) if old else {}
        new_keyed = _keyed(new) if new else {}
        if old_keyed is not None and new_keyed is not None:
            out = {}
            for key, item in new_keyed.items():
                sub = _diff(old_keyed.get(key, _MISSING), item, path)
                if sub is not None:
                    out[key] = {".": {}, **sub}
            return out or None
    return _value_fields(new, path)


def changed_fields(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> FieldSet:
    """The fieldset a write from ``old`` (None: a create) to ``new`` touches."""
    if old is None:
        return fields_of(new)
    return _diff(old, new, ()) or {}


def union(a: FieldSet, b: FieldSet) -> FieldSet:
    out = dict(a)
    for key, sub in b.items():
        out[key] = union(out[key], sub) if key in out else sub
    return out


def subtract(a: FieldSet, b: FieldSet) -> FieldSet:
    """``a`` without the fields of ``b`` (a leaf of ``b`` removes the whole subtree of ``a``)."""
    out: FieldSet = {}
    for key, sub in a.items():
        if key not in b:
            out[key] = sub
            continue
        removed = b[key]
        if not removed or not sub:
            continue
        rest = subtract(sub, removed)
        if rest and set(rest) != {"."}:
            out[key] = rest
    return out


def intersect(a: FieldSet, present: FieldSet) -> FieldSet:
    """The part of ``a`` that still exists in ``present``."""
    out: FieldSet = {}
    for key, sub in a.items():
        if key == ".":
            out[key] = sub
            continue
        if key not in present:
            continue
        out[key] = intersect(sub, present[key]) if sub else sub
    return out


def update_entries(
    entries: Any,
    *,
    manager: str,
    api_version: str,
    subresource: str | None,
    when: str,
    changed: FieldSet,
    present: FieldSet,
) -> list[dict[str, Any]]:
    """The managedFields list after ``manager`` changed ``changed``; ``present`` is the new object's
    full fieldset. Returns a new list; ``entries`` is left untouched."""
    out: list[dict[str, Any]] = []
    mine: dict[str, Any] | None = None
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        raw = entry.get("fieldsV1")
        fields: FieldSet = raw if isinstance(raw, dict) else {}
        is_mine = (
            entry.get("manager") == manager
            and entry.get("operation") == "Update"
            and entry.get("subresource") == subresource
        )
        if is_mine:
            new_fields = intersect(union(fields, changed), present)
            mine = {**entry, "apiVersion": api_version, "fieldsV1": new_fields}
            if changed:
                mine["time"] = when
            if new_fields:
                out.append(mine)
            continue
        new_fields = intersect(subtract(fields, changed), present)
        if new_fields == fields:
            out.append(entry)
        elif new_fields:
            out.append({**entry, "fieldsV1": new_fields})
    if mine is None and changed:
        entry = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "time": when,
            "fieldsType": "FieldsV1",
            "fieldsV1": intersect(changed, present),
        }
        if subresource:
            entry["subresource"] = subresource
        out.append(entry)
    return out
