"""Secrets (core/v1 ``secrets``) as kube-apiserver v1.36 serves them.

What a client sees, from ``pkg/apis/core/v1`` (decoding, defaults, the v1 -> internal
conversion), ``pkg/apis/core/validation`` (``ValidateSecret``, ``ValidateSecretUpdate``) and
``pkg/registry/core/secret`` (the strategy):

- ``data`` values are ``[]byte``: their JSON form is base64 (Go's ``StdEncoding``, see
  :mod:`memop.testing.apiserver.goencoding`), and a value Go cannot decode fails the request with 400
  ``Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte N``
  (a PATCH whose result holds one: 422 on the field ``patch``). What is stored and returned is
  the canonical encoding of the decoded bytes.
- ``stringData`` is write-only: on every create, update and patch its entries are copied into
  ``data`` (a key in both takes the ``stringData`` value) and it is never stored or returned.
- ``type`` defaults to ``Opaque`` and never changes (422 ``field is immutable``); the well-known
  types require their keys (``tls.crt`` and ``tls.key`` for ``kubernetes.io/tls``, ...).
- once ``immutable: true`` is stored, ``data`` (and so ``stringData``) and ``immutable`` itself
  may not change (422 ``field is immutable when `immutable` is set``); metadata still may.
- keys are config keys (``[-._a-zA-Z0-9]+``, at most 253 characters, not ``.``, ``..`` or
  ``..*``), and the values total at most 1 MiB (:data:`MAX_SECRET_SIZE`).
- ``type`` is a selectable field (``fieldSelector=type=kubernetes.io/tls``); no generation, no
  status, and DELETE answers with a Status.

Not served: the token controller that fills ``kubernetes.io/service-account-token`` Secrets, and
the warning a v1.36 server gives for a ``kubernetes.io/tls`` Secret whose key does not match its
certificate.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from typing import Any

from memop.testing.apiserver.errors import DecodeError
from memop.testing.apiserver.goencoding import Base64Error, std_decode, unmarshal_object_error
from memop.testing.apiserver.objects import JsonDict, forbidden, invalid, required, too_long
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.schema import FieldError
from memop.testing.apiserver.strategy import Strategy

SECRETS = ResourceType("", "v1", "secrets", "Secret", True, "secret")

MAX_SECRET_SIZE = 1024 * 1024  # core.MaxSecretSize: the bytes of all data values together
OPAQUE = "Opaque"
IMMUTABLE_MESSAGE = "field is immutable when `immutable` is set"

# The well-known types' required data keys (k8s.io/api/core/v1 constants).
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"
DOCKERCFG, DOCKERCFG_KEY = "kubernetes.io/dockercfg", ".dockercfg"
DOCKER_CONFIG_JSON, DOCKER_CONFIG_JSON_KEY = "kubernetes.io/dockerconfigjson", ".dockerconfigjson"
BASIC_AUTH, BASIC_AUTH_KEYS = "kubernetes.io/basic-auth", ("username", "password")
SSH_AUTH, SSH_AUTH_KEY = "kubernetes.io/ssh-auth", "ssh-privatekey"
TLS, TLS_KEYS = "kubernetes.io/tls", ("tls.crt", "tls.key")

_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY_RE = re.compile(_CONFIG_KEY_FMT)


def config_key_errors(key: str) -> list[str]:
    """``validation.IsConfigMapKey``: why ``key`` is no ConfigMap or Secret key (empty when it is)."""
    errs = []
    if len(key.encode()) > 253:
        errs.append("must be no more than 253 characters")
    if not _CONFIG_KEY_RE.fullmatch(key):
        errs.append(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
            f"'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '{_CONFIG_KEY_FMT}')"
        )
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


# --- decoding: the typed fields of a v1 Secret --------------------------------------------------------
#
# A decode error has two wordings: encoding/json's (a create or update body, a JSON or merge patch
# result), reported for the first bad value in document order; and the unstructured converter's (a
# strategic merge patch result), which walks the struct's fields in declaration order and stops at
# the first. _Bad carries both.


class _Bad(Exception):
    def __init__(self, json_error: str, converter_error: str) -> None:
        super().__init__(json_error)
        self.json_error = json_error
        self.converter_error = converter_error


def _json_type(value: Any) -> str:
    """encoding/json's name of a JSON value's type in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else "object" if isinstance(value, dict) else "array"


def _go_kind(value: Any) -> str:
    """The reflect.Kind of a value in an unstructured object (what the converter names)."""
    if isinstance(value, bool):
        return "bool"
    kinds: tuple[tuple[type, str], ...] = ((str, "string"), (int, "int64"), (float, "float64"), (dict, "map"))
    return next((kind for python, kind in kinds if isinstance(value, python)), "slice")


def _type_error(value: Any, field: str, go_type: str, converter_error: str) -> _Bad:
    return _Bad(
        f"json: cannot unmarshal {_json_type(value)} into Go struct field Secret.{field} of type {go_type}",
        converter_error,
    )


def _unrecognized(value: Any, go_type: str, kind: str) -> str:
    """The converter's refusal of a value for a scalar field of Go type ``go_type`` and reflect
    kind ``kind``. Reflection deems an integer convertible to a string type (Go's rune
    conversion), which the converter then refuses naming both types; every other mismatch is
    an unrecognized type."""
    if isinstance(value, int) and not isinstance(value, bool) and kind == "string":
        return f"cannot convert int64 to {go_type}"
    return f"unrecognized type: {kind}"


def _bytes(value: Any) -> bytes:
    """One ``data`` value decoded into ``[]byte``; raises :class:`_Bad`."""
    if value is None:
        return b""
    if isinstance(value, str):
        try:
            return std_decode(value.encode("utf-8", "surrogatepass"))
        except Base64Error as error:
            raise _Bad(str(error), f"error decoding from json: {error}") from None
    if isinstance(value, list):
        return _byte_array(value)
    raise _type_error(value, "data", "[]uint8", f"cannot restore slice from {_go_kind(value)}")


def _byte_array(values: list[Any]) -> bytes:
    """A JSON array in a ``[]byte`` field: encoding/json takes numbers 0-255 (null is 0); the
    converter converts every integral number, wrapping as Go's conversions do."""
    json_error = converter_error = ""
    out = bytearray()
    for item in values:
        if item is None:
            out.append(0)
            continue
        number = isinstance(item, int | float) and not isinstance(item, bool)
        if not number:
            json_error = json_error or (
                f"json: cannot unmarshal {_json_type(item)} into Go struct field Secret.data of type uint8"
            )
            converter_error = converter_error or "unrecognized type: uint8"
            continue
        if isinstance(item, float) and not item.is_integer():
            json_error = json_error or (
                f"json: cannot unmarshal number {item!r} into Go struct field Secret.data of type uint8"
            )
            converter_error = converter_error or "cannot convert float64 to uint8"
            continue
        if not (isinstance(item, int) and 0 <= item <= 255):
            json_error = json_error or (
                f"json: cannot unmarshal number {item!r} into Go struct field Secret.data of type uint8"
            )
        out.append(int(item) % 256)
    if json_error or converter_error:
        raise _Bad(json_error, converter_error)
    return bytes(out)


def _string(value: Any, field: str) -> str:
    """A ``stringData`` value (Go type string); null is the empty string."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise _type_error(value, field, "string", _unrecognized(value, "string", "string"))


def _decode_map(value: Any, field: str, go_type: str) -> Iterator[tuple[str, Any]]:
    if not isinstance(value, dict):
        raise _type_error(value, field, go_type, f"cannot restore map from {_go_kind(value)}")
    yield from value.items()


def _decode_field(key: str, value: Any, decoded: dict[str, Any]) -> None:
    """Decode one typed field into ``decoded``; raises :class:`_Bad` for its first bad value."""
    if key == "data":
        decoded["data"] = {k: _bytes(v) for k, v in _decode_map(value, "data", "map[string][]uint8")}
    elif key == "stringData":
        decoded["stringData"] = {
            k: _string(v, "stringData") for k, v in _decode_map(value, "stringData", "map[string]string")
        }
    elif key == "type":
        if not isinstance(value, str):
            raise _type_error(value, "type", "v1.SecretType", _unrecognized(value, "v1.SecretType", "string"))
        decoded["type"] = value
    elif key == "immutable":
        if not isinstance(value, bool):
            raise _type_error(value, "immutable", "bool", _unrecognized(value, "bool", "bool"))
        decoded["immutable"] = value


# The converter's order: v1.Secret's fields as declared.
_STRUCT_ORDER = ("immutable", "data", "stringData", "type")


def decode(obj: JsonDict, rtype: ResourceType) -> None:
    """Decode a v1 Secret in place as kube-apiserver does on every write: ``data`` values to the
    canonical base64 of their bytes, ``stringData`` merged into ``data`` and dropped, ``type``
    defaulted to ``Opaque``, nulls and an empty ``data`` dropped (Go's nil values and omitempty).
    Raises :class:`DecodeError` (400) for what Go's JSON decoder refuses."""
    decoded: dict[str, Any] = {}
    errors: dict[str, _Bad] = {}
    for key in [k for k in obj if k in _STRUCT_ORDER]:
        value = obj[key]
        if value is None:
            continue
        try:
            _decode_field(key, value, decoded)
        except _Bad as bad:
            errors[key] = bad
    if errors:
        first_in_document = next(iter(errors.values()))
        first_in_struct = next(errors[key] for key in _STRUCT_ORDER if key in errors)
        raise DecodeError(
            rtype.kind,
            rtype.version,
            first_in_document.json_error or first_in_struct.json_error,
            first_in_struct.converter_error or first_in_document.converter_error,
        )
    data: dict[str, bytes] = decoded.get("data", {})
    for key, text in decoded.get("stringData", {}).items():
        data[key] = text.encode()  # StringData overwrites Data (Convert_v1_Secret_To_core_Secret)
    obj.pop("stringData", None)
    if data:
        obj["data"] = {key: base64.b64encode(value).decode("ascii") for key, value in data.items()}
    else:
        obj.pop("data", None)
    if "immutable" in decoded:
        obj["immutable"] = decoded["immutable"]
    else:
        obj.pop("immutable", None)
    obj["type"] = decoded.get("type") or OPAQUE


# --- validation -------------------------------------------------------------------------------------


def _data(obj: Mapping[str, Any]) -> dict[str, bytes]:
    """The bytes of a decoded Secret's data."""
    data = obj.get("data") or {}
    return {key: base64.b64decode(value) for key, value in data.items()}


def validate(obj: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateSecret`` past ObjectMeta, on a decoded Secret. Keys are checked in sorted order
    (Go ranges over the map at random)."""
    errs: list[FieldError] = []
    data = _data(obj)
    for key in sorted(data):
        errs.extend(invalid(f"data[{key}]", key, msg) for msg in config_key_errors(key))
    if sum(map(len, data.values())) > MAX_SECRET_SIZE:
        errs.append(too_long("data", MAX_SECRET_SIZE))
    kind = obj.get("type")
    if kind == SERVICE_ACCOUNT_TOKEN:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if not annotations.get(SERVICE_ACCOUNT_NAME_KEY):
            errs.append(required(f"metadata.annotations[{SERVICE_ACCOUNT_NAME_KEY}]"))
    elif kind in (DOCKERCFG, DOCKER_CONFIG_JSON):
        key = DOCKERCFG_KEY if kind == DOCKERCFG else DOCKER_CONFIG_JSON_KEY
        if key not in data:
            errs.append(required(f"data[{key}]"))
        else:
            problem = unmarshal_object_error(data[key])
            if problem is not None:
                errs.append(invalid(f"data[{key}]", "<secret contents redacted>", problem))
    elif kind == BASIC_AUTH:
        if not any(key in data for key in BASIC_AUTH_KEYS):
            errs.extend(required(f"data[{key}]") for key in BASIC_AUTH_KEYS)
    elif kind == SSH_AUTH:
        if not data.get(SSH_AUTH_KEY):
            errs.append(required(f"data[{SSH_AUTH_KEY}]"))
    elif kind == TLS:
        errs.extend(required(f"data[{key}]") for key in TLS_KEYS if key not in data)
    return errs


def validate_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateSecretUpdate`` past ObjectMeta: ``type`` never changes; after ``immutable: true``
    neither ``immutable`` nor ``data`` does; then the create rules."""
    errs: list[FieldError] = []
    if new.get("type") != old.get("type"):
        errs.append(invalid("type", new.get("type"), "field is immutable"))
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            errs.append(forbidden("immutable", IMMUTABLE_MESSAGE))
        if (new.get("data") or {}) != (old.get("data") or {}):
            errs.append(forbidden("data", IMMUTABLE_MESSAGE))
    return errs + validate(new)


class SecretStrategy(Strategy):
    """The write behaviour of Secrets (``pkg/registry/core/secret``)."""

    builtin = True
    generation = False
    unconditional_update = True
    strategic_merge = True
    core_field_labels = True

    def field_labels(self) -> Mapping[str, str]:
        return {"type": "type"}

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        decode(obj, rtype)
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return validate(obj)

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return validate_update(new, old)
