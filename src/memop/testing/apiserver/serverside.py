"""Server-side apply (``application/apply-patch+yaml``) as a v1.36 kube-apiserver answers it,
without the type schemas structured-merge-diff has: the same list and atomic-type rules as
:mod:`memop.testing.apiserver.managedfields` (keyed list items, ``metadata.finalizers`` a set, the
built-in atomic types).

An apply is a manager's whole opinion of the object (its *apply configuration*). Against the
live object:

- **merge**: the configuration is merged into the live object (maps member by member, keyed
  lists item by item, a set value by value, atomic lists and values replaced);
- **prune**: what the manager applied last time and left out now is removed, unless another
  manager (or this one's new configuration) owns it;
- **conflicts**: a field the apply changes that another manager owns is a conflict: 409 naming
  each (manager, path), and nothing written; with ``force=true`` the apply takes those fields
  from their managers instead;
- **ownership**: the manager's ``Apply`` entry becomes exactly the configuration's fields (list
  items with ``"."``, maps without); fields that no longer exist leave every entry; entries are
  ordered as the server orders them (Apply before Update, then by time and manager).

Applying to an object that does not exist creates it (201). Every function here is pure: inputs
(which may be stored objects) are never mutated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from memop.testing.apiserver import managedfields
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.managedfields import FieldSet, Path

APPLY = "Apply"
UPDATE = "Update"
_ITEM = "*"


# --- the configuration's fields ----------------------------------------------------------------


def applied_fields(config: Mapping[str, Any], *, builtin: bool = True) -> FieldSet:
    """The fieldset an apply of ``config`` gives its manager: every leaf and atomic value, each
    keyed list item (with ``"."``) and set value; not the maps themselves, not the type fields
    and server-owned metadata."""
    out: FieldSet = {}
    for key, value in config.items():
        if key in ("apiVersion", "kind"):
            continue
        fields = _applied(value, (key,), builtin)
        if fields is not None:
            out[f"f:{key}"] = fields
    return out


def _applied(value: Any, path: Path, builtin: bool) -> FieldSet | None:
    """None: nothing owned here (an empty map, only server-owned metadata)."""
    if managedfields.is_atomic(path, builtin):
        return {}
    if isinstance(value, dict):
        if not value:
            # An empty map the configuration names is itself owned (structured-merge-diff makes
            # it a member of the set): a real v1.36 server keeps "f:data": {} for "data": {}.
            return {}
        out: FieldSet = {}
        for key, item in value.items():
            if path == ("metadata",) and key in managedfields.SYSTEM_METADATA:
                continue
            fields = _applied(item, (*path, key), builtin)
            if fields is not None:
                out[f"f:{key}"] = fields
        return out or None
    if isinstance(value, list):
        members = managedfields.list_members(path, value)
        if members is None:
            return {}  # an atomic list: owned whole
        items: FieldSet = {}
        for key, item in members.items():
            if item is managedfields.SET_VALUE:
                items[key] = {}
            else:
                items[key] = {".": {}, **(_applied(item, (*path, _ITEM), builtin) or {})}
        return items or None
    return {}


# --- merge and prune -----------------------------------------------------------------------


def merge(live: Any, config: Any, path: Path = (), *, builtin: bool = True) -> Any:
    """``config`` merged into ``live`` (a new value; neither input is changed)."""
    if managedfields.is_atomic(path, builtin):
        return config
    if isinstance(live, dict) and isinstance(config, dict):
        out = dict(live)
        for key, value in config.items():
            out[key] = merge(live[key], value, (*path, key), builtin=builtin) if key in live else value
        return out
    if isinstance(live, list) and isinstance(config, list):
        live_members = managedfields.list_members(path, live)
        config_members = managedfields.list_members(path, config)
        if live_members is None or config_members is None:
            return config  # an atomic list: replaced
        if path == managedfields.FINALIZERS:  # a set: the values not yet there are added
            return [*live, *(v for v in config if _set_key(v) not in live_members)]
        # Live items keep their places, merged with the configuration's item of the same key;
        # the configuration's new items follow, in its order.
        merged = [
            merge(item, config_members[key], (*path, _ITEM), builtin=builtin)
            if key in config_members
            else item
            for key, item in live_members.items()
        ]
        merged.extend(item for key, item in config_members.items() if key not in live_members)
        return merged
    return config


def prune(obj: Any, last: FieldSet, keep: FieldSet) -> Any:
    """``obj`` without the fields of ``last`` (what the manager applied before) that ``keep``
    (its new configuration and every other manager's fields) does not hold. A map emptied that
    way goes too, and so does a list item nobody else holds any of; fields ``last`` never
    named (server defaults, fields nobody manages) stay."""
    pruned, _ = _prune(obj, last, keep, (), ())
    return pruned


def _prune(
    value: Any, last: FieldSet, keep: FieldSet, path: Path, protected: tuple[str, ...]
) -> tuple[Any, bool]:
    """(the pruned value, whether anything was removed). ``protected``: the key fields of the
    list item ``value`` is, never removed while the item stays."""
    if isinstance(value, dict):
        out = dict(value)
        removed = False
        for key, sub in last.items():
            if not key.startswith("f:"):
                continue
            name = key[2:]
            if name not in out or name in protected:
                continue
            kept = keep.get(key)
            if kept is not None and not kept:
                continue  # someone owns it whole
            if not sub and kept is None:
                del out[name]
                removed = True
                continue
            child, changed = _prune(out[name], sub, kept or {}, (*path, name), ())
            if not changed:
                continue
            removed = True
            if kept is None and isinstance(child, dict | list) and not child:
                del out[name]
            else:
                out[name] = child
        return out, removed
    if isinstance(value, list):
        members = managedfields.list_members(path, value)
        if members is None:
            return value, False
        keys = [_set_key(v) for v in value] if path == managedfields.FINALIZERS else list(members)
        out_list = []
        removed = False
        for key, item in zip(keys, value, strict=True):
            sub = last.get(key)
            kept = keep.get(key)
            if sub is None or (kept is not None and not kept):
                out_list.append(item)  # never applied by this manager, or owned whole by another
                continue
            if kept is None and (not sub or "." in sub):
                removed = True  # this manager brought the item and nobody else holds any of it
                continue
            child, changed = _prune(item, sub, kept or {}, (*path, _ITEM), _key_fields(key))
            out_list.append(child)
            removed = removed or changed
        return out_list, removed
    return value, False


def _set_key(value: Any) -> str:
    return "v:" + json.dumps(value, separators=(",", ":"))


def _key_fields(key: str) -> tuple[str, ...]:
    """The fields that make a keyed item's key."""
    if not key.startswith("k:"):
        return ()
    return tuple(json.loads(key[2:]))


# --- conflicts and ownership -----------------------------------------------------------------


def overlap(owned: FieldSet, changed: FieldSet) -> FieldSet:
    """The fields of ``owned`` whose value ``changed`` (a fieldset from
    :func:`managedfields.changed_fields`) says changed: an owned leaf that changed, or an owned
    map or list that came into being or changed type. A map whose members changed is not itself
    changed: owning ``f:data: {}`` (the map) does not conflict with a new ``data`` key."""
    out: FieldSet = {}
    for key, sub in owned.items():
        if key == "." or key not in changed:
            continue
        moved = changed[key]
        if not moved or (not sub and "." in moved):
            out[key] = {}
        elif sub:
            inner = overlap(sub, moved)
            if inner:
                out[key] = inner
    return out


def leaf_paths(fields: FieldSet, prefix: str = "") -> Iterator[str]:
    """The paths of a fieldset's leaves as structured-merge-diff prints them
    (``.spec.containers[name="c"].image``, ``.metadata.finalizers[="x"]``)."""
    for key, sub in fields.items():
        if key == ".":
            continue
        path = prefix + _path_element(key)
        if sub and set(sub) != {"."}:
            yield from leaf_paths(sub, path)
        else:
            yield path


def _path_element(key: str) -> str:
    kind, _, body = key.partition(":")
    if kind == "f":
        return "." + body
    if kind == "v":
        return f"[={body}]"
    fields = json.loads(body)
    return "[" + ",".join(f"{name}={json.dumps(fields[name])}" for name in sorted(fields)) + "]"


def manager_name(entry: Mapping[str, Any]) -> str:
    """How a conflict error names a managedFields entry: ``"m"`` for an Apply entry, ``"m" using
    v1`` for an Update entry, with ``with subresource "status"`` when it has one."""
    name = json.dumps(str(entry.get("manager") or ""))
    if entry.get("subresource"):
        name += f" with subresource {json.dumps(entry['subresource'])}"
    if entry.get("operation") == UPDATE:
        name += f" using {entry.get('apiVersion')}"
    return name


def conflict_error(conflicts: list[tuple[Mapping[str, Any], list[str]]]) -> ApiError:
    """409 Conflict with one FieldManagerConflict cause per (manager, path), worded as v1.36 does."""
    pairs = [(manager_name(entry), path) for entry, paths in conflicts for path in paths]
    causes = [
        {"reason": "FieldManagerConflict", "message": f"conflict with {manager}", "field": path}
        for manager, path in pairs
    ]
    if len(pairs) == 1:
        message = f"Apply failed with 1 conflict: conflict with {pairs[0][0]}: {pairs[0][1]}"
    else:
        lines = []
        for manager in sorted({manager for manager, _ in pairs}):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {path}" for m, path in pairs if m == manager)
        message = f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})


def is_applier(entry: Mapping[str, Any], manager: str, subresource: str | None) -> bool:
    """Whether ``entry`` is ``manager``'s Apply entry (on ``subresource``)."""
    return (
        entry.get("manager") == manager
        and entry.get("operation") == APPLY
        and (entry.get("subresource") or None) == subresource
    )


def entry_fields(entry: Mapping[str, Any]) -> FieldSet:
    fields = entry.get("fieldsV1")
    return fields if isinstance(fields, dict) else {}


def find_conflicts(
    entries: list[dict[str, Any]], manager: str, subresource: str | None, changed: FieldSet
) -> list[tuple[dict[str, Any], FieldSet]]:
    """Each other manager's entry with the fields of it the apply changes (non-empty only)."""
    found = []
    for entry in entries:
        if is_applier(entry, manager, subresource):
            continue
        taken = overlap(entry_fields(entry), changed)
        if taken:
            found.append((entry, taken))
    return found


def apply_entries(
    entries: list[dict[str, Any]],
    *,
    manager: str,
    subresource: str | None,
    api_version: str,
    when: str,
    applied: FieldSet,
    taken: list[tuple[dict[str, Any], FieldSet]],
    present: FieldSet,
) -> list[dict[str, Any]]:
    """The managedFields after the apply: the applier's Apply entry holds ``applied`` (at time
    ``when``), the others lose what a forced apply has ``taken`` from them and whatever no
    longer exists (``present`` is the new object's fieldset); empty entries go."""
    lost = {id(entry): fields for entry, fields in taken}
    out: list[dict[str, Any]] = []
    for entry in entries:
        if is_applier(entry, manager, subresource):
            continue
        fields = entry_fields(entry)
        kept = managedfields.intersect(managedfields.subtract(fields, lost.get(id(entry), {})), present)
        if kept == fields:
            out.append(entry)
        elif kept:
            out.append({**entry, "fieldsV1": kept})
    fields = managedfields.intersect(applied, present)
    if fields:
        mine: dict[str, Any] = {
            "manager": manager,
            "operation": APPLY,
            "apiVersion": api_version,
            "time": when,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
        }
        if subresource:
            mine["subresource"] = subresource
        out.append(mine)
    # The server's order: Apply before Update, then by time, manager, apiVersion, subresource.
    out.sort(
        key=lambda e: (
            str(e.get("operation") or ""),
            str(e.get("time") or ""),
            str(e.get("manager") or ""),
            str(e.get("apiVersion") or ""),
            str(e.get("subresource") or ""),
        )
    )
    return out


def previous_applied(entries: list[dict[str, Any]], manager: str, subresource: str | None) -> FieldSet:
    """What ``manager`` applied last (on ``subresource``): its Apply entry's fields."""
    for entry in entries:
        if is_applier(entry, manager, subresource):
            return entry_fields(entry)
    return {}


def applied_time(entries: list[dict[str, Any]], manager: str, subresource: str | None) -> str | None:
    """The time of ``manager``'s Apply entry, if it has one."""
    for entry in entries:
        if is_applier(entry, manager, subresource):
            time = entry.get("time")
            return time if isinstance(time, str) else None
    return None


def others_fields(entries: list[dict[str, Any]], manager: str, subresource: str | None) -> FieldSet:
    """Every field another entry owns (an applier's or an updater's): what a prune keeps besides
    the applier's new configuration."""
    out: FieldSet = {}
    for entry in entries:
        if not is_applier(entry, manager, subresource):
            out = managedfields.union(out, entry_fields(entry))
    return out
