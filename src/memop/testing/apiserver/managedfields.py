"""``metadata.managedFields`` bookkeeping for Update operations, in the FieldsV1 format.

The real server tracks field ownership with structured-merge-diff. This keeps the observable
shape and the main rules without the type schemas: one entry per (manager, operation,
subresource); a write gives its manager every field it changed or added; other managers lose
those fields; fields that no longer exist belong to nobody; entries left empty disappear.

What a write owns is structured-merge-diff's comparison of the object before and after (on a
create, before is the zero value of the kind, :func:`zero_value`): every leaf that is new or
different, and every map, list or list item that did not exist before, which FieldsV1 writes as
a ``".": {}`` member beside its children (``f:metadata: {f:labels: {.: {}, f:app: {}}}``). A map
that existed before (a Deployment's ``spec``, which even the zero value has) lists only the
children that changed. List items are keyed (``k:{"name":"x"}``) when every item carries a
usual merge key, and ``metadata.finalizers`` is a set (``v:"x"``); other lists are atomic, and
so are the built-in types marked atomic (label selectors, owner and object references, RBAC's
roleRef and subjects): they are leaves, whatever they hold.

Fieldsets are nested dicts (``{"f:spec": {"f:replicas": {}}}``) and every function here is
pure: inputs, which may be shared with stored objects, are never mutated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

FieldSet = dict[str, Any]
Path = tuple[str, ...]  # field names, and "*" for a list item

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
_ITEM = "*"

# The maps and lists present in the zero value of each built-in kind, as the server serialises
# an empty object of it (non-pointer structs as objects, slices and pointers without omitempty
# as null), from the v1.36 Go types. Leaves are left out: only whether a map or list existed
# before matters. Every other kind (custom resources) starts from nothing but its metadata.
_RBAC = "rbac.authorization.k8s.io"
_TEMPLATE = {"metadata": {}, "spec": {"containers": None}}
_ZERO_VALUES: dict[tuple[str, str], dict[str, Any]] = {
    ("", "Namespace"): {"spec": {}, "status": {}},
    ("", "Pod"): {"spec": {"containers": None}, "status": {}},
    ("", "Event"): {"involvedObject": {}, "source": {}},
    ("", "Service"): {"spec": {}, "status": {"loadBalancer": {}}},
    ("apps", "Deployment"): {
        "spec": {"selector": None, "template": _TEMPLATE, "strategy": {}},
        "status": {},
    },
    ("apps", "ReplicaSet"): {"spec": {"selector": None, "template": _TEMPLATE}, "status": {}},
    ("coordination.k8s.io", "Lease"): {"spec": {}},
    (_RBAC, "Role"): {"rules": None},
    (_RBAC, "ClusterRole"): {"rules": None},
    (_RBAC, "RoleBinding"): {"roleRef": {}},
    (_RBAC, "ClusterRoleBinding"): {"roleRef": {}},
    ("policy", "PodDisruptionBudget"): {"spec": {}, "status": {}},
    ("networking.k8s.io", "Ingress"): {"spec": {}, "status": {"loadBalancer": {}}},
    ("networking.k8s.io", "NetworkPolicy"): {"spec": {"podSelector": {}}},
    ("networking.k8s.io", "IngressClass"): {"spec": {}},
    ("apps", "StatefulSet"): {
        "spec": {"selector": None, "template": _TEMPLATE, "updateStrategy": {}},
        "status": {},
    },
    ("apps", "DaemonSet"): {
        "spec": {"selector": None, "template": _TEMPLATE, "updateStrategy": {}},
        "status": {},
    },
    ("batch", "Job"): {"spec": {"template": _TEMPLATE}, "status": {}},
    ("batch", "CronJob"): {
        "spec": {"jobTemplate": {"metadata": {}, "spec": {"template": _TEMPLATE}}},
        "status": {},
    },
    ("", "PersistentVolumeClaim"): {"spec": {"resources": {}}, "status": {}},
    ("", "PersistentVolume"): {"spec": {}, "status": {}},
    ("", "ResourceQuota"): {"spec": {}, "status": {}},
    ("", "LimitRange"): {"spec": {"limits": None}},
    ("autoscaling", "HorizontalPodAutoscaler"): {"spec": {"scaleTargetRef": {}}, "status": {}},
    ("apiextensions.k8s.io", "CustomResourceDefinition"): {
        "spec": {"names": {}, "versions": None},
        "status": {"conditions": None, "acceptedNames": {}, "storedVersions": None},
    },
}

# Built-in fields of atomic types (+structType=atomic, +mapType=atomic): owned as a whole.
_ATOMIC_BUILTIN = frozenset(
    (
        ("spec", "selector"),  # metav1.LabelSelector; a Service's selector map
        ("involvedObject",),  # core/v1 Event: ObjectReference
        ("related",),
        ("regarding",),  # events.k8s.io/v1 Event
        ("roleRef",),
        ("subjects", _ITEM),
    )
)
_ATOMIC_BUILTIN_LAST = frozenset(("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"))


def zero_value(group: str, kind: str) -> dict[str, Any]:
    """The zero value of a kind as the fieldset comparison sees it (see the module docstring)."""
    return {"metadata": {}, **_ZERO_VALUES.get((group, kind), {})}


def _atomic(path: Path, builtin: bool) -> bool:
    if path[:2] == ("metadata", "ownerReferences") and path[2:] == (_ITEM,):
        return True  # metav1.OwnerReference, in every kind's ObjectMeta
    if not builtin:
        return False
    if path in _ATOMIC_BUILTIN or path[-2:] == ("imagePullSecrets", _ITEM):
        return True
    return len(path) >= 2 and path[-2] == "valueFrom" and path[-1] in _ATOMIC_BUILTIN_LAST


def _item_key(item: Any, path: Path) -> str | None:
    if not isinstance(item, dict):
        return None
    if path == ("metadata", "ownerReferences"):
        fields: dict[str, Any] = {"uid": item.get("uid")}  # whatever else the item holds
    elif "name" in item and isinstance(item["name"], str):
        fields = {"name": item["name"]}
    elif "containerPort" in item:
        fields = {"containerPort": item["containerPort"], "protocol": item.get("protocol", "TCP")}
    elif "uid" in item:
        fields = {"uid": item["uid"]}
    elif "type" in item and isinstance(item["type"], str):
        fields = {"type": item["type"]}
    else:
        return None
    return "k:" + json.dumps(fields, separators=(",", ":"), sort_keys=True)


def _keyed(items: list[Any], path: Path) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for item in items:
        key = _item_key(item, path)
        if key is None or key in out:
            return None
        out[key] = item
    return out


def _set_members(path: Path, value: list[Any]) -> dict[str, Any] | None:
    """The members of a list by their FieldsV1 key: ``v:`` values of a set, ``k:`` items of a
    keyed list; None for an atomic list."""
    if path == ("metadata", "finalizers"):
        return {"v:" + json.dumps(v, separators=(",", ":")): _MISSING for v in value}
    return _keyed(value, path) if value else {}


def _fields(value: Any, path: Path, builtin: bool, *, added: bool) -> FieldSet:
    """Every field in ``value``; with ``added`` (it did not exist before), also the ``"."`` of
    each map, list and list item in it that has members."""
    if _atomic(path, builtin):
        return {}
    if isinstance(value, dict):
        out = {
            f"f:{k}": _fields(v, (*path, k), builtin, added=added)
            for k, v in value.items()
            if not (path == ("metadata",) and k in _SYSTEM_METADATA)
        }
    elif isinstance(value, list):
        members = _set_members(path, value)
        if members is None:
            return {}
        out = {
            key: {} if item is _MISSING else _fields(item, (*path, _ITEM), builtin, added=added)
            for key, item in members.items()
        }
    else:
        return {}
    return {".": {}, **out} if added and out else out


def fields_of(obj: Mapping[str, Any], *, builtin: bool = True) -> FieldSet:
    """Every field set in ``obj`` (without type fields and server-owned metadata)."""
    out: FieldSet = {}
    for key, value in obj.items():
        if key in _TYPE_FIELDS:
            continue
        fields = _fields(value, (key,), builtin, added=False)
        if key != "metadata" or fields:
            out[f"f:{key}"] = fields
    return out


def _diff(old: Any, new: Any, path: Path, builtin: bool) -> FieldSet | None:
    """The fields a write from ``old`` to ``new`` gives its manager; None when nothing changed."""
    if old is new or (old is not _MISSING and old == new):
        return None
    if old is _MISSING:
        return _fields(new, path, builtin, added=True)
    if _atomic(path, builtin):
        return {}
    if isinstance(new, dict) and isinstance(old, dict | None):
        out: FieldSet = {}
        for key, value in new.items():
            if (not path and key in _TYPE_FIELDS) or (path == ("metadata",) and key in _SYSTEM_METADATA):
                continue
            sub = _diff((old or {}).get(key, _MISSING), value, (*path, key), builtin)
            if sub is not None:
                out[f"f:{key}"] = sub
        return out or None
    if isinstance(new, list) and isinstance(old, list | None):
        new_members = _set_members(path, new)
        old_members = _set_members(path, old or [])
        if new_members is not None and old_members is not None:
            out = {}
            for key, item in new_members.items():
                if item is _MISSING:  # a set's value
                    if key not in old_members:
                        out[key] = {}
                    continue
                sub = _diff(old_members.get(key, _MISSING), item, (*path, _ITEM), builtin)
                if sub is not None:
                    out[key] = sub
            return out or None
        return {}  # an atomic list changed
    return _fields(new, path, builtin, added=False)  # a leaf, or a value of another type


def changed_fields(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], *, builtin: bool = True
) -> FieldSet:
    """The fieldset a write from ``old`` to ``new`` touches (``old``: the object before, or on a
    create the kind's :func:`zero_value`; ``builtin``: a built-in kind, whose atomic types are
    known)."""
    return _diff(dict(old) if old is not None else {"metadata": {}}, new, (), builtin) or {}


def union(a: FieldSet, b: FieldSet) -> FieldSet:
    out = dict(a)
    for key, sub in b.items():
        out[key] = union(out[key], sub) if key in out else sub
    return out


def subtract(a: FieldSet, b: FieldSet) -> FieldSet:
    """``a`` without the fields of ``b`` (a leaf of ``b`` removes the whole subtree of ``a``). A
    map or list of ``a`` whose members all went to ``b`` stays ``a``'s if ``a`` owned it (its
    ``"."``): FieldsV1 writes that as a leaf, ``f:data: {}``."""
    out: FieldSet = {}
    for key, sub in a.items():
        if key not in b:
            out[key] = sub
            continue
        removed = b[key]
        if not removed:
            continue  # b owns this field itself, as a leaf: a loses it and everything below
        if not sub:
            if "." not in removed:
                out[key] = sub  # a owns the map itself, b only members of it
            continue
        rest = subtract(sub, removed)
        if rest == {".": {}}:
            out[key] = {}
        elif rest:
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


def decode_error(entries: Any) -> str | None:
    """Why ``DecodeManagedFields`` refuses ``entries`` (its checks of each entry's operation,
    apiVersion and fieldsType), None when it takes them."""
    for index, entry in enumerate(entries if isinstance(entries, list) else ()):
        if not isinstance(entry, dict):
            continue
        if entry.get("operation") not in ("Apply", "Update"):
            return "operation must be `Apply` or `Update`"
        if not entry.get("apiVersion"):
            return "apiVersion must not be empty"
        fields_type = entry.get("fieldsType") or ""
        if not fields_type:
            return f"missing fieldsType in managed fields entry {index}"
        if fields_type != "FieldsV1":
            return f'invalid fieldsType "{fields_type}" in managed fields entry {index}'
    return None


# --- for server-side apply (memop.testing.apply), which follows the same rules ----------------

SYSTEM_METADATA = _SYSTEM_METADATA
# What list_members gives each value of a set (metadata.finalizers).
SET_VALUE = _MISSING
FINALIZERS: Path = ("metadata", "finalizers")


def is_atomic(path: Path, builtin: bool) -> bool:
    """Whether the field at ``path`` is owned whole (an atomic built-in type)."""
    return _atomic(path, builtin)


def list_members(path: Path, value: list[Any]) -> dict[str, Any] | None:
    """A list's members by FieldsV1 key (``k:{...}`` items, or ``v:...`` set values mapped to
    :data:`SET_VALUE`), in list order; None for a list that is atomic."""
    return _set_members(path, value)
