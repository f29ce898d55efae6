"""Plain-dict object helpers shared by the store and the strategies: copies, timestamps, field
errors with the real server's texts, and ObjectMeta validation.

Field errors are :class:`memop.testing.apiserver.schema.FieldError` values whose ``message`` is the full
``<field>: <body>`` text of ``field.Error.Error()`` in Kubernetes; :func:`go_repr` renders a bad
value as that text does (v1.36: ``%v`` for numbers and bools, ``%q`` for strings, JSON for the
rest).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from memop.runtime.cache.labels import label_value_errors, qualified_name_errors
from memop.testing.apiserver.schema import FieldError, go_json, go_quote, go_repr

JsonDict = dict[str, Any]


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars): several times faster than deepcopy."""
    if isinstance(value, dict):
        return {k: copy_json(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) if isinstance(v, dict | list) else v for v in value]
    return value


def rfc3339(seconds: float) -> str:
    """``2024-01-02T03:04:05Z``: metav1.Time's JSON form (whole seconds, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


# --- field errors (k8s.io/apimachinery/pkg/util/validation/field) ------------------------------


def required(path: str, detail: str = "") -> FieldError:
    body = "Required value" + (f": {detail}" if detail else "")
    return FieldError(field=path, type="FieldValueRequired", message=f"{path}: {body}")


def invalid(path: str, value: Any, detail: str, *, raw_value: str | None = None) -> FieldError:
    shown = raw_value if raw_value is not None else go_repr(value)
    body = f"Invalid value: {shown}" + (f": {detail}" if detail else "")
    return FieldError(field=path, type="FieldValueInvalid", message=f"{path}: {body}")


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(field=path, type="FieldValueForbidden", message=f"{path}: Forbidden: {detail}")


def not_supported(path: str, value: Any, supported: list[str]) -> FieldError:
    valid = ", ".join(go_quote(s) for s in supported)
    body = f"Unsupported value: {go_repr(value)}: supported values: {valid}"
    return FieldError(field=path, type="FieldValueNotSupported", message=f"{path}: {body}")


def too_long(path: str, limit: int) -> FieldError:
    return FieldError(
        field=path, type="FieldValueTooLong", message=f"{path}: Too long: may not be more than {limit} bytes"
    )


# --- names (k8s.io/apimachinery/pkg/util/validation) -------------------------------------------

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = rf"{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)


def dns1123_subdomain_errors(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 subdomain (most object names); empty when it is one."""
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
            f"validation is '{_DNS1123_SUBDOMAIN_FMT}')"
        )
    return errs


def dns1123_label_errors(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 label (namespace names); empty when it is one."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errs.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
            "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
            f"validation is '{_DNS1123_LABEL_FMT}')"
        )
    return errs


def validate_name(path: str, name: str, *, label: bool = False) -> list[FieldError]:
    errs = dns1123_label_errors(name) if label else dns1123_subdomain_errors(name)
    return [invalid(path, name, msg) for msg in errs]


def validate_object_meta(
    meta: Mapping[str, Any],
    *,
    label_names: bool = False,
    name_errors: Callable[[str], list[str]] | None = None,
) -> list[FieldError]:
    """``ValidateObjectMeta`` for the parts clients set: name, labels, annotations, finalizers,
    ownerReferences. Assumes ``meta.name`` was already generated from ``generateName``.
    ``name_errors`` is the kind's name rule when it is neither a DNS-1123 subdomain nor a label."""
    errs: list[FieldError] = []
    name = meta.get("name")
    if not name:
        errs.append(required("metadata.name", "name or generateName is required"))
    elif isinstance(name, str):
        if name_errors is not None:
            errs.extend(invalid("metadata.name", name, msg) for msg in name_errors(name))
        else:
            errs.extend(validate_name("metadata.name", name, label=label_names))
    labels = meta.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            errs.append(invalid("metadata.labels", labels, "must be a map of strings"))
        else:
            for key, value in labels.items():
                for msg in qualified_name_errors(key):
                    errs.append(invalid("metadata.labels", key, msg))
                if not isinstance(value, str):
                    errs.append(invalid("metadata.labels", value, "must be a string"))
                    continue
                for msg in label_value_errors(value):
                    errs.append(invalid("metadata.labels", value, msg))
    annotations = meta.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict):
            errs.append(invalid("metadata.annotations", annotations, "must be a map of strings"))
        else:
            total = 0
            for key, value in annotations.items():
                for msg in qualified_name_errors(key.lower()):
                    errs.append(invalid("metadata.annotations", key, msg))
                total += len(key) + (len(value) if isinstance(value, str) else 0)
            if total > 256 * 1024:
                errs.append(too_long("metadata.annotations", 256 * 1024))
    finalizers = meta.get("finalizers")
    if finalizers is not None:
        if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
            errs.append(invalid("metadata.finalizers", finalizers, "must be a list of strings"))
        else:
            for i, fin in enumerate(finalizers):
                for msg in qualified_name_errors(fin):
                    errs.append(invalid(f"metadata.finalizers[{i}]", fin, msg))
            if "orphan" in finalizers and "foregroundDeletion" in finalizers:
                errs.append(
                    invalid(
                        "metadata.finalizers",
                        finalizers,
                        "finalizer orphan and foregroundDeletion cannot be both set",
                    )
                )
    owners = meta.get("ownerReferences")
    if owners is not None:
        if not isinstance(owners, list):
            errs.append(invalid("metadata.ownerReferences", owners, "must be a list"))
        else:
            controllers = 0
            for i, ref in enumerate(owners):
                path = f"metadata.ownerReferences[{i}]"
                if not isinstance(ref, dict):
                    errs.append(invalid(path, ref, "must be an object"))
                    continue
                for key in ("apiVersion", "kind", "name", "uid"):
                    if not ref.get(key):
                        body = {
                            "apiVersion": "version must not be empty",
                            "kind": "kind must not be empty",
                            "name": "name must not be empty",
                            "uid": "uid must not be empty",
                        }[key]
                        errs.append(invalid(f"{path}.{key}", ref.get(key, ""), body))
                if ref.get("controller") is True:
                    controllers += 1
            if controllers > 1:
                errs.append(
                    invalid(
                        "metadata.ownerReferences",
                        owners,
                        "Only one reference can have Controller set to true",
                        raw_value=go_json([_owner_reference_json(ref) for ref in owners], sort_keys=False),
                    )
                )
    return errs


_OWNER_REFERENCE_FIELDS = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")


def _owner_reference_json(ref: Mapping[str, Any]) -> dict[str, Any]:
    """A metav1.OwnerReference as it marshals: declaration order, unset pointers left out."""
    return {key: ref[key] for key in _OWNER_REFERENCE_FIELDS if key in ref and ref[key] is not None}


def validate_object_meta_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateObjectMetaUpdate``: what may not change, and no new finalizers while deleting."""
    errs: list[FieldError] = []
    if old.get("deletionTimestamp"):
        extra = sorted(set(new.get("finalizers") or ()) - set(old.get("finalizers") or ()))
        if extra:
            errs.append(
                forbidden(
                    "metadata.finalizers",
                    f"no new finalizers can be added if the object is being deleted, found new finalizers "
                    f"[]string{{{', '.join(go_quote(f) for f in extra)}}}",  # %#v, not the bad value
                )
            )
    return errs


# --- label selectors (k8s.io/apimachinery/pkg/apis/meta/v1/validation) -------------------------


def validate_label_selector(selector: Any, path: str) -> list[FieldError]:
    """``ValidateLabelSelector`` of a ``metav1.LabelSelector`` at ``path`` (None: nothing to check):
    the matchLabels' keys and values, each requirement's operator, values and key. matchLabels are
    checked in key order (Go ranges over the map at random)."""
    if not isinstance(selector, Mapping):
        return []
    errs: list[FieldError] = []
    labels = selector.get("matchLabels")
    for key, value in sorted((labels if isinstance(labels, Mapping) else {}).items()):
        errs.extend(invalid(f"{path}.matchLabels", key, msg) for msg in qualified_name_errors(key))
        errs.extend(invalid(f"{path}.matchLabels", value, msg) for msg in label_value_errors(str(value)))
    expressions = selector.get("matchExpressions")
    for i, item in enumerate(expressions if isinstance(expressions, list) else ()):
        expr_path = f"{path}.matchExpressions[{i}]"
        expr: Mapping[str, Any] = item if isinstance(item, Mapping) else {}
        operator, values = expr.get("operator", ""), expr.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                errs.append(
                    required(f"{expr_path}.values", "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(
                    forbidden(
                        f"{expr_path}.values",
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            errs.append(invalid(f"{expr_path}.operator", operator, "not a valid selector operator"))
        key = str(expr.get("key", ""))
        errs.extend(invalid(f"{expr_path}.key", key, msg) for msg in qualified_name_errors(key))
        for j, value in enumerate(values if isinstance(values, list) else ()):
            errs.extend(
                invalid(f"{expr_path}.values[{j}]", value, msg) for msg in label_value_errors(str(value))
            )
    return errs
