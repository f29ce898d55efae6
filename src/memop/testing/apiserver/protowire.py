"""The protobuf wire format, read into the JSON Go's ``encoding/json`` would write of the same object.

A :class:`Message` declares, for each field number, the JSON name, the value's type, its shape
(one value, a repeated field, a ``map<string, T>``) and its presence in JSON, which follows the Go
struct tag the field has in k8s.io/api:

- ``OMIT`` (``omitempty`` on a string, number, bool, slice or map): written only when not empty;
- ``POINTER`` (a ``*T`` field): written whenever the body sets it, zero or not;
- ``ALWAYS`` (no ``omitempty``, or a struct, which ``omitempty`` never omits): written always,
  as its zero value when the body does not carry it (``""``, ``0``, ``null`` for a slice or map,
  ``{}`` for a message, ``null`` for a ``metav1.Time``).

Kubernetes' Go encoder (gogo-protobuf, proto2) writes every non-pointer field, so a decoded object
has the same keys, in the Go struct's order, as the JSON kubectl would have sent for it.

Invariants: a field number the message does not declare raises :class:`UnknownField` unless its
value is the zero value (what Go's encoder writes for a newer API's unset field): a body is never
decoded partially. Bytes that are not valid protobuf raise :class:`WireError`.
"""

from __future__ import annotations

import base64
import datetime
import enum
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

# Wire types (https://protobuf.dev/programming-guides/encoding/): Kubernetes' messages use only
# varints and length-delimited fields; the fixed widths are read so that they can be refused clearly.
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
_FIXED_SIZE = {FIXED64: 8, FIXED32: 4}


class WireError(ValueError):
    """The bytes are not a valid protobuf encoding of the message being read."""


class UnknownField(Exception):
    """The body sets a field this module's tables do not declare (``path`` says where)."""

    def __init__(self, message: str, number: int, path: str) -> None:
        super().__init__(f"field {number} of {message} (at {path or 'the top level'})")
        self.message = message
        self.number = number
        self.path = path


class Scalar(enum.Enum):
    """A field type decoded to one JSON value."""

    STRING = "string"
    BYTES = "bytes"  # base64 in JSON, as Go writes a []byte
    INT = "int"  # int32 and int64 alike: a negative int32 is sign-extended to 64 bits on the wire
    BOOL = "bool"
    TIME = "time"  # metav1.Time {seconds, nanos}: RFC 3339 to the second; empty means null
    QUANTITY = "quantity"  # resource.Quantity {string}
    INT_OR_STRING = "intorstr"  # intstr.IntOrString {type, intVal, strVal}
    FIELDS_V1 = "fieldsv1"  # metav1.FieldsV1 {Raw}: JSON bytes


class Flag(enum.Flag):
    """A field's shape and presence (see the module docstring); the defaults need no flag."""

    NONE = 0
    LIST = enum.auto()  # repeated
    MAP = enum.auto()  # map<string, type>
    POINTER = enum.auto()
    ALWAYS = enum.auto()
    INLINE = enum.auto()  # an embedded Go struct with json:",inline": its fields join the parent's


NONE, LIST, MAP, POINTER, ALWAYS, INLINE = (
    Flag.NONE, Flag.LIST, Flag.MAP, Flag.POINTER, Flag.ALWAYS, Flag.INLINE
)  # fmt: skip

# Types that are Go structs: written even when zero unless they are pointers.
_STRUCTS = (Scalar.TIME, Scalar.QUANTITY, Scalar.INT_OR_STRING)


@dataclass(frozen=True)
class Field:
    """Field ``number`` of a message: its JSON ``name``, ``type`` and ``flags``."""

    number: int
    name: str
    type: Scalar | Message
    flags: Flag = NONE

    @property
    def struct(self) -> bool:
        """A Go struct, which ``omitempty`` never omits."""
        return isinstance(self.type, Message) or self.type in _STRUCTS

    @property
    def omit_empty(self) -> bool:
        """Left out of the JSON when the body sets it to its zero value."""
        if self.flags & (POINTER | ALWAYS):
            return False
        return bool(self.flags & (LIST | MAP)) or not self.struct


@dataclass(frozen=True)
class Message:
    """A protobuf message: its Go type's ``name`` and its fields, in the Go struct's order."""

    name: str
    fields: tuple[Field, ...]
    by_number: Mapping[int, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_number", {f.number: f for f in self.fields})


def message(name: str, *fields: Field) -> Message:
    """``Message(name, fields)``, the fields given as arguments (the tables read as the .proto does)."""
    return Message(name, fields)


def read_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Each field of an encoded message: (number, wire type, value), the value an ``int`` for a
    varint and ``bytes`` otherwise, in the order the body has them."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire == VARINT:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == LENGTH:
            size, pos = _varint(data, pos)
            if pos + size > end:
                raise WireError(f"field {number}: {size} bytes announced, {end - pos} left")
            yield number, wire, data[pos : pos + size]
            pos += size
        elif wire in _FIXED_SIZE:
            size = _FIXED_SIZE[wire]
            if pos + size > end:
                raise WireError(f"field {number}: truncated")
            yield number, wire, data[pos : pos + size]
            pos += size
        else:
            raise WireError(f"field {number}: wire type {wire} is not supported")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")


def _signed(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def decode(msg: Message, data: bytes, path: str = "") -> dict[str, Any]:
    """The JSON object of ``data``, an encoded ``msg``: keys in the message's order, each present
    as the field's presence rule says. ``path`` (``spec.template``) names where, for errors."""
    values: dict[int, Any] = {}
    for number, wire, raw in read_fields(data):
        spec = msg.by_number.get(number)
        if spec is None:
            # Go's encoder writes every non-pointer field, so a newer client sends fields added
            # since these tables were written even when unset: a zero value means "not set".
            if raw in (0, b""):
                continue
            raise UnknownField(msg.name, number, path)
        where = f"{path}.{spec.name}" if path else spec.name
        if spec.flags & LIST:
            items = values.setdefault(number, [])
            if wire == LENGTH and isinstance(raw, bytes) and spec.type in (Scalar.INT, Scalar.BOOL):  # packed
                items.extend(_value(spec.type, VARINT, v, where) for _, _, v in _packed(raw))
            else:
                items.append(_value(spec.type, wire, raw, f"{where}[{len(items)}]"))
        elif spec.flags & MAP:
            key, value = _entry(spec, wire, raw, where)
            values.setdefault(number, {})[key] = value
        else:
            # A repeated occurrence of a singular field: the last one wins, as in protobuf.
            values[number] = _value(spec.type, wire, raw, where)
    out: dict[str, Any] = {}
    for spec in msg.fields:
        if spec.number in values:
            value = values[spec.number]
            if spec.omit_empty and _empty(value):
                continue
        elif spec.flags & (POINTER | LIST | MAP):
            if not spec.flags & ALWAYS:
                continue
            value = None  # a nil pointer, slice or map without omitempty
        elif spec.flags & ALWAYS or spec.struct:
            value = _zero_value(spec.type, f"{path}.{spec.name}" if path else spec.name)
        else:
            continue
        if spec.flags & INLINE:
            out.update(value)
        else:
            out[spec.name] = value
    return out


def _packed(raw: bytes) -> Iterator[tuple[int, int, int]]:
    pos = 0
    while pos < len(raw):
        value, pos = _varint(raw, pos)
        yield 0, VARINT, value


def _entry(spec: Field, wire: int, raw: int | bytes, where: str) -> tuple[str, Any]:
    if wire != LENGTH or not isinstance(raw, bytes):
        raise WireError(f"{where}: a map entry must be length-delimited")
    key: Any = ""
    value: Any = None
    for number, entry_wire, entry_raw in read_fields(raw):
        if number == 1:
            key = _value(Scalar.STRING, entry_wire, entry_raw, where)
        elif number == 2:
            value = _value(spec.type, entry_wire, entry_raw, f"{where}.{key}")
        else:
            raise WireError(f"{where}: map entry field {number}")
    if value is None:
        value = _zero_value(spec.type, f"{where}.{key}")
    return key, value


def _value(kind: Scalar | Message, wire: int, raw: int | bytes, where: str) -> Any:
    if kind in (Scalar.INT, Scalar.BOOL):
        if wire != VARINT or not isinstance(raw, int):
            raise WireError(f"{where}: expected a varint")
        return _signed(raw) if kind is Scalar.INT else raw != 0
    if wire != LENGTH or not isinstance(raw, bytes):
        raise WireError(f"{where}: expected a length-delimited value")
    if isinstance(kind, Message):
        return decode(kind, raw, where)
    if kind is Scalar.STRING:
        # Go keeps a string's bytes as they are and encoding/json writes U+FFFD for invalid UTF-8.
        return raw.decode("utf-8", errors="replace")
    if kind is Scalar.BYTES:
        return base64.b64encode(raw).decode("ascii")
    if kind is Scalar.TIME:
        return _time(raw, where)
    if kind is Scalar.QUANTITY:
        return decode(_QUANTITY, raw, where).get("string", "0")
    if kind is Scalar.INT_OR_STRING:
        parts = decode(_INT_OR_STRING, raw, where)
        return parts.get("strVal", "") if parts.get("type") == 1 else parts.get("intVal", 0)
    # metav1.FieldsV1 {Raw: the managed fields' JSON}.
    document = b"".join(v for n, _, v in read_fields(raw) if n == 1 and isinstance(v, bytes))
    try:
        return json.loads(document) if document else None
    except ValueError as error:
        raise WireError(f"{where}: not JSON: {error}") from None


def _time(raw: bytes, where: str) -> str | None:
    # metav1.Time: no bytes is the zero time (JSON null); otherwise the seconds only (nanos are
    # dropped on decoding, as JSON carries whole seconds).
    if not raw:
        return None
    seconds = decode(_TIMESTAMP, raw, where).get("seconds", 0)
    try:
        stamp = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        raise WireError(f"{where}: time {seconds} out of range") from None
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def _empty(value: Any) -> bool:
    return value in ("", 0, False, None) or (isinstance(value, (list, dict)) and not value)


def _zero_value(kind: Scalar | Message, where: str) -> Any:
    """What Go's encoding/json writes for a type's zero value."""
    if kind in (Scalar.INT, Scalar.BOOL):
        return _value(kind, VARINT, 0, where)
    return _value(kind, LENGTH, b"", where)


_TIMESTAMP = message("Timestamp", Field(1, "seconds", Scalar.INT), Field(2, "nanos", Scalar.INT))
_QUANTITY = message("Quantity", Field(1, "string", Scalar.STRING))
_INT_OR_STRING = message(
    "IntOrString",
    Field(1, "type", Scalar.INT),
    Field(2, "intVal", Scalar.INT),
    Field(3, "strVal", Scalar.STRING),
)
