"""The three PATCH flavours of the Kubernetes API, applied to plain JSON values.

- :func:`merge_patch` — JSON merge patch (RFC 7386, ``application/merge-patch+json``);
- :func:`json_patch` — JSON patch (RFC 6902, ``application/json-patch+json``), with the leniencies
  of the ``evanphx/json-patch`` v4 library the kube-apiserver uses;
- :func:`strategic_merge_patch` — strategic merge patch (``application/strategic-merge-patch+json``)
  for built-in kinds, a transcription of the apply half of
  ``k8s.io/apimachinery/pkg/util/strategicpatch`` driven by the ``patchStrategy``/``patchMergeKey``
  struct tags of the built-in types (tabulated in :data:`_KIND_SCHEMAS`).

Invariants: no function mutates its arguments, and the result never shares a mutable container
with them (callers may store it). Failures raise :class:`PatchError` (a ValueError) whose message
is the text the real server puts in its Status, and whose ``code`` is the HTTP status it answers
with; a failed JSON-patch ``test`` raises :class:`PatchTestFailed`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

BAD_REQUEST = 400
UNPROCESSABLE = 422
INTERNAL = 500


class PatchError(ValueError):
    """The patch cannot be applied; the message says why, ``code`` is the real server's status."""

    def __init__(self, message: str, *, code: int = UNPROCESSABLE) -> None:
        super().__init__(message)
        self.code = code


class PatchTestFailed(PatchError):
    """A JSON-patch ``test`` operation did not match the document."""


def _clone(value: Any) -> Any:
    # JSON values only: much faster than copy.deepcopy, and never shares a container.
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


def _go(value: Any) -> str:
    """A value as Go's ``%v`` prints a decoded JSON value (for error messages)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go(v) for v in value) + "]"
    return str(value)


def _go_type(value: Any) -> str:
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "<nil>"


# --- RFC 7386 ------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch: ``null`` deletes, objects merge recursively, anything else replaces.

    Never mutates its inputs; the result shares no container with them.
    """
    if not isinstance(patch, dict):
        return _clone(patch)
    result = {k: _clone(v) for k, v in target.items()} if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = merge_patch(result.get(key), value)
        else:
            result[key] = _clone(value)
    return result


# --- RFC 6902 ------------------------------------------------------------------------------------

_MISSING: Any = object()


def _json_equal(a: Any, b: Any) -> bool:
    """Deep equality of JSON values where booleans are not numbers and ``1`` is not ``1.0``.

    The server compares scalars by their JSON text, so 1 and 1.0 differ there too.
    """
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(_json_equal(v, b[k]) for k, v in a.items())
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_json_equal, a, b))
    return type(a) is type(b) and a == b


def _pointer(path: str, what: str, op: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(
            f"{op} operation failed to decode {what}: JSON pointer must be empty or start with '/': {path!r}",
            code=UNPROCESSABLE,
        )
    # RFC 6901: "~1" first, then "~0", so "~01" decodes to "~1".
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _index(token: str, size: int, *, allow_end: bool) -> int:
    if allow_end and token == "-":
        return size
    if not token.isascii() or not token.isdigit():
        raise PatchError(f"value was not a proper array index: '{token}'")
    idx = int(token)
    if idx > size or (idx == size and not allow_end):
        raise PatchError(f"Unable to access invalid index: {idx}: invalid index referenced")
    return idx


def _parent(doc: Any, tokens: list[str], op: str, path: str, which: str = "path") -> Any:
    """The container holding the last token, or a PatchError if the way there is missing."""
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isascii() and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            node = _MISSING
            break
    if not isinstance(node, (dict, list)):
        raise PatchError(f'{op} operation does not apply: doc is missing {which}: "{path}": missing value')
    return node


def _get(doc: Any, tokens: list[str], op: str, path: str, which: str = "path") -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens, op, path, which)
    key = tokens[-1]
    if isinstance(parent, dict):
        if key not in parent:
            raise PatchError(f"error in {op} for path: '{path}': missing value")
        return parent[key]
    return parent[_index(key, len(parent), allow_end=False)]


def _add(doc: Any, tokens: list[str], value: Any, op: str, path: str) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens, op, path)
    key = tokens[-1]
    if isinstance(parent, dict):
        parent[key] = value
    else:
        parent.insert(_index(key, len(parent), allow_end=True), value)
    return doc


def _remove(doc: Any, tokens: list[str], op: str, path: str) -> Any:
    if not tokens:
        raise PatchError(f"error in {op} for path: '{path}': cannot remove the whole document")
    parent = _parent(doc, tokens, op, path)
    key = tokens[-1]
    if isinstance(parent, dict):
        if key not in parent:
            raise PatchError(
                f"error in {op} for path: '{path}': Unable to remove nonexistent key: {key}: missing value"
            )
        return parent.pop(key)
    return parent.pop(_index(key, len(parent), allow_end=False))


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 JSON patch (add/remove/replace/move/copy/test); never mutates ``target``.

    Follows the kube-apiserver's library where it is more lenient than the RFC: ``replace`` of a
    missing object member adds it, and ``test`` of a missing member against ``null`` passes.
    Negative array indices (another non-RFC extension of that library) are refused.
    Raises PatchError (code 400 for a malformed patch, 422 for one that does not apply) and
    PatchTestFailed for a failed ``test``.
    """
    if not isinstance(operations, list):
        raise PatchError(
            f"json: cannot unmarshal {_go_type(operations)} into Go value of type jsonpatch.Patch",
            code=BAD_REQUEST,
        )
    doc = _clone(target)
    for operation in operations:
        if not isinstance(operation, dict):
            raise PatchError(
                f"json: cannot unmarshal {_go_type(operation)} into Go value of type jsonpatch.Operation",
                code=BAD_REQUEST,
            )
        op = operation.get("op")
        path = operation.get("path")
        if op not in ("add", "remove", "replace", "move", "copy", "test"):
            raise PatchError(f"Unexpected kind: {_go(op) if op is not None else 'unknown'}")
        if not isinstance(path, str):
            raise PatchError(f"{op} operation failed to decode path")
        tokens = _pointer(path, "path", op)
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f"{op} operation does not apply: missing value for path: {path}")
        value = _clone(operation.get("value"))
        if op == "add":
            doc = _add(doc, tokens, value, op, path)
        elif op == "remove":
            _remove(doc, tokens, op, path)
        elif op == "replace":
            if not tokens:
                doc = value
                continue
            parent = _parent(doc, tokens, op, path)
            if isinstance(parent, dict):
                parent[tokens[-1]] = value
            else:
                parent[_index(tokens[-1], len(parent), allow_end=False)] = value
        elif op == "test":
            if tokens:
                parent = _parent(doc, tokens, op, path)
                if isinstance(parent, dict) and tokens[-1] not in parent:
                    if value is None:
                        continue
                    raise PatchTestFailed(f"testing value {path} failed: test failed")
            if not _json_equal(_get(doc, tokens, op, path), value):
                raise PatchTestFailed(f"testing value {path} failed: test failed")
        else:
            from_path = operation.get("from")
            if not isinstance(from_path, str):
                raise PatchError(f"{op} operation failed to decode from")
            from_tokens = _pointer(from_path, "from", op)
            if op == "move":
                if from_tokens == tokens:
                    continue
                # RFC 6902 4.4: a location cannot be moved into one of its children.
                if tokens[: len(from_tokens)] == from_tokens:
                    raise PatchError(f"move operation does not apply: {from_path} is a prefix of {path}")
                doc = _add(doc, tokens, _remove(doc, from_tokens, op, from_path), op, path)
            else:
                copied = _clone(_get(doc, from_tokens, op, from_path, "from path"))
                doc = _add(doc, tokens, copied, op, path)
    return doc


# --- strategic merge patch: the schema ------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    """The patch metadata of one field: its struct tags, and the schema of what it holds."""

    strategy: str = ""  # "merge" | "replace" | "" (lists: replace; maps: merge)
    merge_key: str = ""  # for lists of objects merged by a key
    fields: Mapping[str, _Field] | None = None  # the struct (or list element struct), if known


_Schema = Mapping[str, _Field]
_EMPTY: _Schema = {}


def _merge(key: str = "", fields: _Schema | None = None) -> _Field:
    return _Field("merge", key, fields)


def _struct(fields: _Schema) -> _Field:
    return _Field(fields=fields)


_CONDITIONS = _merge("type")
_OBJECT_META: _Schema = {"finalizers": _merge(), "ownerReferences": _merge("uid")}
_CONTAINER: _Schema = {
    "ports": _merge("containerPort"),
    "env": _merge("name"),
    "volumeMounts": _merge("mountPath"),
    "volumeDevices": _merge("devicePath"),
}
_POD_SPEC: _Schema = {
    "volumes": _merge("name"),
    "initContainers": _merge("name", _CONTAINER),
    "containers": _merge("name", _CONTAINER),
    "ephemeralContainers": _merge("name", _CONTAINER),
    "imagePullSecrets": _merge("name"),
    "hostAliases": _merge("ip"),
    "topologySpreadConstraints": _merge("topologyKey"),
    "schedulingGates": _merge("name"),
    "resourceClaims": _merge("name"),
}
_POD_TEMPLATE_SPEC: _Schema = {"metadata": _struct(_OBJECT_META), "spec": _struct(_POD_SPEC)}
_STATUS_WITH_CONDITIONS = _struct({"conditions": _CONDITIONS})


def _kind(spec: _Schema | None = None, status: _Field | None = None, **extra: _Field) -> _Schema:
    schema: dict[str, _Field] = {"metadata": _struct(_OBJECT_META), **extra}
    if spec is not None:
        schema["spec"] = _struct(spec)
    if status is not None:
        schema["status"] = status
    return schema


_WORKLOAD = _kind({"template": _struct(_POD_TEMPLATE_SPEC)}, _STATUS_WITH_CONDITIONS)
_JOB_TEMPLATE: _Schema = {
    "metadata": _struct(_OBJECT_META),
    "spec": _struct({"template": _struct(_POD_TEMPLATE_SPEC)}),
}

# Kind -> the patch metadata of its fields, from the struct tags of the built-in types. Kinds not
# listed have only ObjectMeta's tags (finalizers, ownerReferences); CustomResourceDefinition and the
# like declare no other merge lists, so their other lists are replaced.
_KIND_SCHEMAS: Mapping[str, _Schema] = {
    "Pod": _kind(
        _POD_SPEC,
        _struct(
            {
                "conditions": _CONDITIONS,
                "podIPs": _merge("ip"),
                "hostIPs": _merge("ip"),
                "resourceClaimStatuses": _merge("name"),
            }
        ),
    ),
    "PodTemplate": _kind(template=_struct(_POD_TEMPLATE_SPEC)),
    "Deployment": _WORKLOAD,
    "ReplicaSet": _WORKLOAD,
    "StatefulSet": _WORKLOAD,
    "DaemonSet": _WORKLOAD,
    "ReplicationController": _WORKLOAD,
    "Job": _WORKLOAD,
    "CronJob": _kind({"jobTemplate": _struct(_JOB_TEMPLATE)}),
    "Service": _kind({"ports": _merge("port")}, _STATUS_WITH_CONDITIONS),
    "Namespace": _kind(status=_STATUS_WITH_CONDITIONS),
    "Node": _kind({"podCIDRs": _merge()}, _struct({"conditions": _CONDITIONS, "addresses": _merge("type")})),
    "ServiceAccount": _kind(secrets=_merge("name")),
    "PersistentVolumeClaim": _kind(status=_STATUS_WITH_CONDITIONS),
    "PodDisruptionBudget": _kind(status=_STATUS_WITH_CONDITIONS),
    "HorizontalPodAutoscaler": _kind(status=_STATUS_WITH_CONDITIONS),
    "MutatingWebhookConfiguration": _kind(webhooks=_merge("name")),
    "ValidatingWebhookConfiguration": _kind(webhooks=_merge("name")),
}
_DEFAULT_KIND: _Schema = _kind()


class _OpenApiFields(Mapping[str, _Field]):
    """The patch metadata of a struct read from its OpenAPI schema's ``properties``
    (``x-kubernetes-patch-strategy`` and ``x-kubernetes-patch-merge-key``), converted on
    access: the schema may be recursive."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._properties: Mapping[str, Any] = schema.get("properties") or {}

    def __getitem__(self, key: str) -> _Field:
        prop = self._properties[key]
        strategies = str(prop.get("x-kubernetes-patch-strategy") or "").split(",")
        strategy = "merge" if "merge" in strategies else "replace" if "replace" in strategies else ""
        inner = prop.get("items") if prop.get("type") == "array" else prop
        fields = _OpenApiFields(inner) if isinstance(inner, Mapping) and "properties" in inner else None
        return _Field(strategy, str(prop.get("x-kubernetes-patch-merge-key") or ""), fields)

    def __iter__(self) -> Iterator[str]:
        return iter(self._properties)

    def __len__(self) -> int:
        return len(self._properties)


def _lookup(schema: _Schema, key: str) -> _Field:
    return schema.get(key) or _Field()


# --- strategic merge patch: the algorithm ---------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList"
_ERR_PRIMITIVE_LIST = "invalid patch format of primitive list"
_ERR_RETAIN_KEYS = "invalid patch format of retainKeys"
_ERR_SET_ORDER = "invalid patch format of setElementOrder list"


def _same(a: Any, b: Any) -> bool:
    # Go's == on decoded JSON scalars: a bool never equals a number.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _hashable(value: Any) -> tuple[str, Any] | None:
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("z", None)
    return None


def _positions(order: list[Any], merge_key: str, is_map: bool) -> Callable[[Any], int]:
    """index(): where an item (by merge key for maps, by value otherwise) first occurs in order."""

    def probe(item: Any) -> Any:
        if is_map:
            return item.get(merge_key) if isinstance(item, dict) else None
        return item

    table: dict[tuple[str, Any], int] = {}
    slow: list[tuple[int, Any]] = []
    for i, item in enumerate(order):
        value = probe(item)
        key = _hashable(value)
        if key is None:
            slow.append((i, value))
        else:
            table.setdefault(key, i)

    def position(item: Any) -> int:
        value = probe(item)
        key = _hashable(value)
        if key is not None:
            return table.get(key, -1)
        return next((i for i, v in slow if _same(v, value)), -1)

    return position


def _check_merge_keys(merge_key: str, *lists: list[Any]) -> None:
    for items in lists:
        for item in items:
            if not isinstance(item, dict):
                raise PatchError(
                    f"expected a map[string]interface {{}}, but received a {_go_type(item)}", code=INTERNAL
                )
            if merge_key not in item:
                raise PatchError(
                    f"map: {_go(item)} does not contain declared merge key: {merge_key}", code=INTERNAL
                )


def _normalize_slice_order(items: list[Any], order: list[Any], merge_key: str, is_map: bool) -> list[Any]:
    """normalizeSliceOrder: sort ``items`` by their place in ``order``; deletions go last."""
    to_delete: list[Any] = []
    if is_map:
        _check_merge_keys(merge_key, items, order)
        kept = [i for i in items if i.get(_DIRECTIVE) != "delete"]
        to_delete = [i for i in items if i.get(_DIRECTIVE) == "delete"]
        items = kept
    position = _positions(order, merge_key, is_map)
    # Go's sort.SliceStable with a comparator that calls anything absent from `order` "less": on
    # the short lists at hand that is an insertion sort, reproduced here with the same comparator.
    keyed = [(position(item), item) for item in items]
    for i in range(1, len(keyed)):
        j = i
        while j > 0:
            a, b = keyed[j][0], keyed[j - 1][0]
            if a >= 0 and b >= 0 and not a < b:
                break
            keyed[j], keyed[j - 1] = keyed[j - 1], keyed[j]
            j -= 1
    return [item for _, item in keyed] + to_delete


def _merge_sorted(
    left: list[Any], right: list[Any], server_order: list[Any], merge_key: str, is_map: bool
) -> list[Any]:
    """mergeSortedSlice: interleave server-only items (left) with patch items (right).

    A server-only item goes before a patch item only when both are in the live list and it came
    first there; otherwise the patch item goes first.
    """
    position = _positions(server_order, merge_key, is_map)
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li, ri = position(left[i]), position(right[j])
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _normalize_element_order(
    patch: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    *,
    merge_key: str,
    is_map: bool,
) -> list[Any]:
    patch = _normalize_slice_order(patch, patch_order, merge_key, is_map)
    server_only = _normalize_slice_order(server_only, server_order, merge_key, is_map)
    return _merge_sorted(server_only, patch, server_order, merge_key, is_map)


def _partition(merged: list[Any], by: list[Any], merge_key: str, is_map: bool) -> tuple[list[Any], list[Any]]:
    """Split ``merged`` into (items present in ``by``, items that are not)."""
    if is_map:
        _check_merge_keys(merge_key, merged)
    position = _positions(by, merge_key, is_map)
    inside = [item for item in merged if position(item) >= 0]
    outside = [item for item in merged if position(item) < 0]
    return inside, outside


def _element_kind(*lists: list[Any]) -> str:
    """sliceElementType: the one kind of element all lists hold ("map" or "scalar")."""
    seen: str | None = None
    for items in lists:
        for item in items:
            if isinstance(item, list):
                raise PatchError("lists of lists are not supported", code=UNPROCESSABLE)
            kind = (
                "map"
                if isinstance(item, dict)
                else _go_type(item).replace("int64", "number").replace("float64", "number")
            )
            if seen is None:
                seen = kind
            elif seen != kind:
                raise PatchError(f"list element types are not identical: {_go(list(lists))}", code=INTERNAL)
    if seen is None:
        raise PatchError("no elements in any of the given slices", code=INTERNAL)
    return "map" if seen == "map" else "scalar"


def _dedupe(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if not any(_same(item, o) for o in out):
            out.append(item)
    return out


def _remove_directives(value: Any) -> tuple[Any, bool]:
    """removeDirectives: drop every object carrying ``$patch``; ``False`` if ``value`` is one.

    Also drops the other directive keys and the nulls inside (discardNullValuesFromPatch): the
    real server loses both when it decodes the result into the typed object.
    """
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return None, False
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is None or k == _RETAIN_KEYS or k.startswith((_SET_ORDER, _DELETE_PRIMITIVE)):
                continue
            cleaned, keep = _remove_directives(v)
            if keep:
                out[k] = cleaned
        return out, True
    if isinstance(value, list):
        items = []
        for v in value:
            cleaned, keep = _remove_directives(v)
            if keep:
                items.append(cleaned)
        return items, True
    return value, True


def _delete_matching(original: list[Any], merge_key: str, value: Any) -> list[Any]:
    for i, item in enumerate(original):
        if not isinstance(item, dict):
            raise PatchError(f"value for key {i} is not a map.", code=INTERNAL)
    return [item for item in original if not (merge_key in item and _same(item[merge_key], value))]


def _find(items: list[Any], merge_key: str, value: Any) -> int:
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise PatchError(f"value for key {i} is not a map.", code=INTERNAL)
        if merge_key in item and _same(item[merge_key], value):
            return i
    return -1


def _merge_slice(
    original: list[Any], patch: list[Any], fields: _Schema, merge_key: str, is_delete_list: bool
) -> list[Any]:
    if not original and not patch:
        return original
    is_map = _element_kind(original, patch) == "map"
    if not is_map:
        if is_delete_list:
            return [item for item in original if not any(_same(item, d) for d in patch)]
        merged = _dedupe(original + patch)
        merge_key = ""
    else:
        if not merge_key:
            raise PatchError("cannot merge lists without merge key for type struct", code=INTERNAL)
        # Special elements first: "$patch: delete" removes, "$patch: replace" replaces the list.
        plain: list[Any] = []
        replace = False
        for item in patch:
            directive = item.get(_DIRECTIVE, _MISSING)
            if directive is _MISSING:
                plain.append(item)
            elif directive == "delete":
                if merge_key not in item:
                    raise PatchError(
                        f"map: {_go(item)} does not contain declared merge key: {merge_key}", code=INTERNAL
                    )
                original = _delete_matching(original, merge_key, item[merge_key])
            elif directive == "replace":
                replace = True
            elif directive == "merge":
                raise PatchError("merging lists cannot yet be specified in the patch", code=INTERNAL)
            else:
                raise PatchError(f"unknown patch type: {_go(directive)} in map: {_go(item)}", code=INTERNAL)
        if replace:
            original, patch = [_remove_directives(i)[0] for i in plain], []
        else:
            patch = plain
        merged = list(original)
        for item in patch:
            if merge_key not in item:
                raise PatchError(
                    f"map: {_go(item)} does not contain declared merge key: {merge_key}", code=INTERNAL
                )
            at = _find(merged, merge_key, item[merge_key])
            if at >= 0:
                merged[at] = _merge_map(merged[at], item, fields)
            else:
                merged.append(_remove_directives(item)[0])
    inside, outside = _partition(merged, patch, merge_key, is_map)
    return _normalize_element_order(inside, outside, patch, original, merge_key=merge_key, is_map=is_map)


def _merge_slice_handler(original: Any, patch: Any, field: _Field, is_delete_list: bool) -> list[Any]:
    if not isinstance(original, list) or not isinstance(patch, list):
        raise PatchError(f"expected a []interface {{}}, but received a {_go_type(patch)}", code=INTERNAL)
    if field.strategy == "merge":
        return _merge_slice(original, patch, field.fields or _EMPTY, field.merge_key, is_delete_list)
    replaced: list[Any] = _remove_directives(patch)[0]
    return replaced


def _extract_key(key: str, prefix: str, error: str) -> str:
    head, sep, rest = key.partition("/")
    if not sep or head != prefix:
        raise PatchError(error, code=BAD_REQUEST)
    return rest


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS)
    if not isinstance(retain, list):
        raise PatchError(_ERR_RETAIN_KEYS, code=BAD_REQUEST)
    keep = {_hashable(k) for k in retain}
    for k, v in patch.items():
        if v is None or k.startswith((_DELETE_PRIMITIVE, _SET_ORDER)):
            continue
        if ("s", k) not in keep:
            raise PatchError(_ERR_RETAIN_KEYS, code=BAD_REQUEST)
    for k in [k for k in original if ("s", k) not in keep]:
        del original[k]


def _validate_set_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """The patch list's items must appear in the $setElementOrder list, in the same order."""
    if not order or not patch_list:
        return
    if merge_key:
        for item in patch_list:
            if not isinstance(item, dict):
                raise PatchError(
                    f"expected a map[string]interface {{}}, but received a {_go_type(item)}", code=INTERNAL
                )
        items = [i for i in patch_list if i.get(_DIRECTIVE) != "delete"]
    else:
        items = patch_list
    pi = oi = 0
    while pi < len(items) and oi < len(order):
        item = items[pi]
        if isinstance(item, dict) and _DIRECTIVE in item:
            pi += 1
            continue
        if merge_key:
            _check_merge_keys(merge_key, [item, order[oi]])
            equal = _same(item[merge_key], order[oi][merge_key])
        else:
            equal = _same(item, order[oi])
        if equal:
            pi += 1
        oi += 1
    if pi < len(items):
        raise PatchError(
            f"the order in patch list:\n{_go(patch_list)}\n doesn't match {_SET_ORDER} list:\n{_go(order)}",
            code=INTERNAL,
        )


def _apply_set_element_order(original: dict[str, Any], patch: dict[str, Any], schema: _Schema) -> None:
    """mergePatchIntoOriginal: merge each list named by a $setElementOrder, then order it."""
    for key in [k for k in patch if k.startswith(_SET_ORDER)]:
        order = patch.pop(key)
        if not isinstance(order, list):
            raise PatchError(f"expected a []interface {{}}, but received a {_go_type(order)}", code=INTERNAL)
        name = _extract_key(key, _SET_ORDER, _ERR_SET_ORDER)
        found_original, found_patch = name in original, name in patch
        original_list: list[Any] = []
        patch_list: list[Any] = []
        if found_original:
            if not isinstance(original[name], list):
                raise PatchError(
                    f"expected a []interface {{}}, but received a {_go_type(original[name])}", code=INTERNAL
                )
            original_list = original[name]
        if found_patch:
            if not isinstance(patch[name], list):
                raise PatchError(
                    f"expected a []interface {{}}, but received a {_go_type(patch[name])}", code=INTERNAL
                )
            patch_list = patch[name]
        field = _lookup(schema, name)
        _validate_set_order(patch_list, order, field.merge_key)
        if found_original and found_patch:
            merged = _merge_slice_handler(original_list, patch_list, field, False)
        elif found_original:
            merged = original_list
        elif found_patch:
            merged = _remove_directives(patch_list)[0]
        else:
            continue
        is_map = bool(field.merge_key)
        inside, outside = _partition(merged, order, field.merge_key, is_map)
        is_map = _element_kind(original_list, patch_list) == "map"
        original[name] = _normalize_element_order(
            inside, outside, order, original_list, merge_key=field.merge_key, is_map=is_map
        )
        patch.pop(name, None)


def _merge_map(original: dict[str, Any] | None, patch: dict[str, Any], schema: _Schema) -> dict[str, Any]:
    """mergeMap with the server's options (merge parallel lists, ignore unmatched nulls).

    Works in place on ``original`` and ``patch``: callers pass private copies.
    """
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "replace":
            del patch[_DIRECTIVE]
            return dict(_remove_directives(patch)[0])
        if directive == "delete":
            return {}
        raise PatchError(f"unknown patch type: {_go(directive)} in map: {_go(patch)}", code=INTERNAL)
    if original is None:
        original = {}
    _apply_retain_keys(original, patch)
    _apply_set_element_order(original, patch, schema)
    for patch_key, value in patch.items():
        key, is_delete_list = patch_key, False
        if patch_key.startswith(_DELETE_PRIMITIVE):
            key = _extract_key(patch_key, _DELETE_PRIMITIVE, _ERR_PRIMITIVE_LIST)
            is_delete_list = True
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key, _MISSING)
        same_shape = (isinstance(current, dict) and isinstance(value, dict)) or (
            isinstance(current, list) and isinstance(value, list)
        )
        if current is _MISSING or not same_shape:
            # New or retyped field: take the patch value, unless it is a deletion list.
            if not is_delete_list:
                cleaned, keep = _remove_directives(value)
                if keep:
                    original[key] = cleaned
                else:
                    original.pop(key, None)
            continue
        field = _lookup(schema, key)
        if isinstance(value, dict):
            if field.strategy == "replace":
                original[key] = _remove_directives(value)[0]
            else:
                original[key] = _merge_map(current, value, field.fields or _EMPTY)
        else:
            original[key] = _merge_slice_handler(current, value, field, is_delete_list)
    return original


def strategic_merge_patch(
    target: dict[str, Any], patch: dict[str, Any], kind: str, openapi: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Apply a Kubernetes strategic merge patch to an object of the built-in ``kind``.

    Lists with a merge key in the kind's schema (containers by name, ports by containerPort, env by
    name, conditions by type, ownerReferences by uid, ...) are merged item by item and ordered as
    the server orders them; ``metadata.finalizers`` and other merge lists of scalars are unions;
    every other list is replaced. Directives: ``$patch: replace|delete`` on objects and list items
    (``$patch: merge`` is refused, as the server refuses it), ``$retainKeys``,
    ``$setElementOrder/<list>`` and ``$deleteFromPrimitiveList/<list>``. A kind with no known schema
    only merges ObjectMeta's lists. ``openapi``, the kind's resolved OpenAPI schema, takes the
    patch metadata from its ``x-kubernetes-patch-*`` extensions instead of the tables (the
    generically served kinds). Never mutates its inputs. Raises PatchError.
    """
    if not isinstance(patch, dict):
        raise PatchError(
            f"json: cannot unmarshal {_go_type(patch)} into Go value of type map[string]interface {{}}",
            code=BAD_REQUEST,
        )
    schema = _OpenApiFields(openapi) if openapi is not None else _KIND_SCHEMAS.get(kind, _DEFAULT_KIND)
    original = _clone(target) if isinstance(target, dict) else {}
    return _merge_map(original, _clone(patch), schema)
