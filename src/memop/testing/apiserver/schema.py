"""CRD structural-schema behaviour: validation, defaulting and pruning of custom resources.

Applies a CRD version's ``openAPIV3Schema`` the way the kube-apiserver does (kube-openapi's
validators as driven by ``apiextensions-apiserver``), with the server's error texts:

- :func:`validate` returns every :class:`FieldError`, in the server's order (per value: type,
  string, number, list, enum, then the object's properties and ``required``; after the whole
  schema pass, the embedded-resource and ``x-kubernetes-list-type`` checks);
- :func:`apply_defaults` removes non-nullable nulls that have no default, then fills ``default``
  values top-down, so defaults inside defaulted objects and inside list items are filled too;
- :func:`prune` drops fields the schema does not declare, except under
  ``x-kubernetes-preserve-unknown-fields`` and ``apiVersion``/``kind``/``metadata`` of the root and
  of embedded resources.

The server runs them as prune, apply_defaults, validate. All three are pure: they never mutate
their arguments. Supported keywords: type (object, array, string, integer, number, boolean),
format int32/int64/float/double ranges, nullable, enum, required, properties,
additionalProperties (schema or bool), items, minimum/maximum with exclusiveMinimum/
exclusiveMaximum, multipleOf, minLength/maxLength, pattern, minItems/maxItems,
minProperties/maxProperties, default, x-kubernetes-preserve-unknown-fields,
x-kubernetes-int-or-string, x-kubernetes-embedded-resource, x-kubernetes-list-type (set, map) with
x-kubernetes-list-map-keys; ``pattern`` matches as Go's RE2 does (:func:`go_regexp`). String
formats (date-time, ...), allOf/anyOf/oneOf/not and CEL rules
(x-kubernetes-validations) are not evaluated.
"""

from __future__ import annotations

import functools
import json
import math
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from memop.runtime.api.validation import json_type

Schema = Mapping[str, Any]


@dataclass(frozen=True)
class FieldError:
    """One field-level error, as ``k8s.io/apimachinery/pkg/util/validation/field.Error``."""

    field: str  # "spec.size"
    type: str  # "FieldValueInvalid" | "FieldValueRequired" | "FieldValueNotSupported" | ...
    message: str  # 'spec.size: Invalid value: -1: spec.size in body should be greater than ...'


# --- how the server prints values -----------------------------------------------------------------


def go_float(value: float) -> str:
    """Go's ``%v`` of a float64: shortest digits, exponent form from 1e+06 up or below 1e-04."""
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)  # finite, so never "n"/"N"/"F"
    text = "".join(map(str, digits))
    point = len(text) + exponent  # the decimal point sits after this many digits
    x = point - 1
    if x < -4 or x >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        out = f"{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"
    elif point <= 0:
        out = "0." + "0" * -point + text
    elif point >= len(text):
        out = text + "0" * (point - len(text))
    else:
        out = text[:point] + "." + text[point:]
    return ("-" if sign else "") + out


def _go_number(value: float) -> str:
    """A number as ``%v`` prints the float64 the server decoded for it."""
    return go_float(float(value))


def go_quote(text: str) -> str:
    """Go's ``%q`` of a string (``strconv.Quote``): printable characters as they are, the rest
    escaped."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch == " " or (ch.isprintable() and not ch.isspace()):
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _json_float(value: float) -> str:
    """``encoding/json``'s float64: shortest digits, exponent form below 1e-6 or from 1e21."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if 1e-6 <= magnitude < 1e21:
        text = format(Decimal(repr(value)), "f")
        return text[:-2] if text.endswith(".0") else text
    mantissa, exponent = repr(value).replace("E", "e").split("e")
    mantissa = mantissa[:-2] if mantissa.endswith(".0") else mantissa
    sign = "-" if exponent.startswith("-") else "+"
    return f"{mantissa}e{sign}{int(exponent.lstrip('+-'))}"


_HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def go_json(value: Any, *, sort_keys: bool = True) -> str:
    """``json.Marshal`` of a decoded JSON value: compact, floats and escapes (``<``, ``>``,
    ``&``) as Go writes them. Go sorts the keys of a map but writes a struct's fields in their
    declaration order: pass a struct as a dict in that order with ``sort_keys=False``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return "".join(_HTML_ESCAPES.get(ch, ch) for ch in json.dumps(value, ensure_ascii=False))
    if isinstance(value, Mapping):
        items = sorted(value.items()) if sort_keys else list(value.items())
        return "{" + ",".join(f"{go_json(str(k))}:{go_json(v, sort_keys=sort_keys)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(v, sort_keys=sort_keys) for v in value) + "]"
    return go_json(str(value))


def go_repr(value: Any) -> str:
    """How ``field.Error`` prints a bad value (``ErrorBody``, v1.36): numbers and bools as
    ``%v``, strings as ``%q``, anything else as its JSON (``json.Marshal``)."""
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    return go_json(value)  # null, bools and integers print the same either way


def _field(path: str) -> str:
    return path or "<nil>"


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    field = _field(path)
    return FieldError(field, "FieldValueInvalid", f"{field}: Invalid value: {go_repr(value)}: {detail}")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# --- patterns: Go RE2 syntax in Python's re -------------------------------------------------------

# Go's Perl classes are ASCII-only; Python's are Unicode (\d matches "٣").
_PERL_CLASSES = {"d": "0-9", "s": "\\t\\n\\f\\r ", "w": "0-9A-Za-z_"}
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_FLAG_GROUP = re.compile(r"\(\?([imsU]*(?:-[imsU]*)?)([:)])")


def _go_escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """The Python form of the escape at ``pattern[i]`` (a backslash) and the index after it."""
    if i + 1 >= len(pattern):
        return "\\", i + 1  # a trailing backslash: Go rejects it, and so does Python
    c = pattern[i + 1]
    if c == "x" and pattern.startswith("{", i + 2):
        end = pattern.find("}", i + 3)
        digits = pattern[i + 3 : end]
        if end > 0 and digits and all(d in string.hexdigits for d in digits):
            return f"\\U{int(digits, 16):08x}", end + 1
    if c in _PERL_CLASSES:
        return (_PERL_CLASSES[c] if in_class else f"[{_PERL_CLASSES[c]}]"), i + 2
    if c in "DSW" and not in_class:
        return f"[^{_PERL_CLASSES[c.lower()]}]", i + 2
    if not in_class:
        if c == "z":
            return "\\Z", i + 2
        if c in "bB":
            return f"(?a:\\{c})", i + 2
    return pattern[i : i + 2], i + 2


def _go_class(pattern: str, i: int) -> tuple[str, int]:
    """The Python form of the character class opening at ``pattern[i]`` and the index after it."""
    out = ["["]
    i += 1
    if pattern.startswith("^", i):
        out.append("^")
        i += 1
    if pattern.startswith("]", i):  # a leading "]" is literal
        out.append("\\]")
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        c = pattern[i]
        if c == "\\":
            text, i = _go_escape(pattern, i, in_class=True)
            out.append(text)
            continue
        if c == "[" and pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            name = pattern[i + 2 : end] if end > 0 else ""
            if name in _POSIX_CLASSES:
                out.append(_POSIX_CLASSES[name])
                i = end + 2
                continue
        # Literal in Go; "[" (nested set) and doubled "&", "~", "|" mean more to Python.
        out.append("\\" + c if c in "[&~|" else c)
        i += 1
    out.append("]")
    return "".join(out), i + 1


def go_regexp(pattern: str) -> str:
    """A Python ``re`` pattern that matches what Go's ``regexp`` (RE2) matches with ``pattern``.

    The server validates ``pattern`` with Go's ``regexp.MatchString``: ``$`` (without the ``m``
    flag) matches only at the end of the text, where Python's also matches before a final
    newline; ``\\z``, ``\\Q...\\E``, ``\\x{...}``, ``(?<name>...)`` and POSIX classes
    (``[[:alpha:]]``) have Python forms; ``\\d``, ``\\s``, ``\\w`` and ``\\b`` are ASCII-only. The
    ``m`` flag is applied by rewriting ``^`` and ``$``, as Python allows flags only up front.
    """
    out: list[str] = []
    # Per open group: whether ``m`` is on, and the flag groups opened by ``(?flags)`` in it,
    # closed before each ``|`` (and reopened after it) and at the group's end.
    frames: list[tuple[list[bool], list[str]]] = [([False], [])]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        multiline, opened = frames[-1]
        if c == "\\":
            if pattern.startswith("Q", i + 1):
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2 : end if end >= 0 else n]
                out.append(re.escape(literal))
                i = end + 2 if end >= 0 else n
                continue
            text, i = _go_escape(pattern, i, in_class=False)
            out.append(text)
            continue
        if c == "[":
            text, i = _go_class(pattern, i)
            out.append(text)
            continue
        if c == "$":
            out.append("(?m:$)" if multiline[0] else "\\Z")
        elif c == "^":
            out.append("(?m:^)" if multiline[0] else "\\A")
        elif c == "(":
            flags = _FLAG_GROUP.match(pattern, i)
            if flags is not None:
                on, _, off = flags.group(1).partition("-")
                mode = ("m" in on or multiline[0]) and "m" not in off
                on, off = on.replace("m", ""), off.replace("m", "")
                scoped = f"(?{on}-{off}:" if off else f"(?{on}:"
                if flags.group(2) == ":":
                    out.append(scoped)
                    frames.append(([mode], []))
                else:  # (?flags) sets them up to the end of the enclosing group
                    multiline[0] = mode
                    if on or off:
                        out.append(scoped)
                        opened.append(scoped)
                i = flags.end()
                continue
            if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
                out.append("(?P<")  # Go 1.22's named group syntax
                i += 3
            else:
                out.append("(")
                i += 1
            frames.append(([multiline[0]], []))
            continue
        elif c == ")":
            if len(frames) > 1:
                out.append(")" * len(frames.pop()[1]))
            out.append(")")
        elif c == "|":
            out.append(")" * len(opened) + "|" + "".join(opened))
        else:
            out.append(c)
        i += 1
    out.append(")" * len(frames[0][1]))
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(go_regexp(pattern))


# --- validation -------------------------------------------------------------------------------------

_INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_FLOAT32_MAX = 3.4028234663852886e38
_NUMERIC_FORMATS = frozenset(("int32", "int64", "uint32", "uint64", "float", "float32", "double", "float64"))


def _range_error(value: Any, type_name: str, fmt: str, prefix: str, path: str) -> FieldError | None:
    """IsValueValidAgainstRange: can the value be held by the schema's numeric type and format?"""
    if type_name == "integer":
        low, high = _INT_RANGES.get(fmt, _INT_RANGES["int64"])
        ok = (not isinstance(value, float) or value.is_integer()) and low <= value <= high
    elif fmt in ("float", "float32"):
        ok = abs(value) <= _FLOAT32_MAX
    else:
        return None
    if ok:
        return None
    what = f"{type_name} with format {fmt}" if fmt else type_name
    # A plain error, not a validation error: the server files it under no field.
    return FieldError(
        "<nil>",
        "FieldValueInvalid",
        f'<nil>: Invalid value: "": {prefix} value must be of type {what} in {path}',
    )


class _Validator:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.late: list[FieldError] = []  # embedded-resource and list-type checks run after

    def value(self, schema: Schema, value: Any, path: str) -> None:
        nullable = bool(schema.get("nullable"))
        types = self._types(schema)
        fmt = schema.get("format") or ""
        if value is None:
            if types and not nullable:
                self._type_error(path, ",".join(types), "null")
            if "enum" in schema and not nullable:
                self._enum(schema["enum"], value, path)
            return
        if types or fmt:
            # Numeric formats only bound the value (below): servers up to 1.35 drop them from CRD
            # schemas, so a wrong type is reported against the type, not the format.
            self._type(types, "" if fmt in _NUMERIC_FORMATS else fmt, value, path)
        if isinstance(value, str):
            self._string(schema, value, path)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self._number(schema, types, fmt, value, path)
        elif isinstance(value, list):
            self._list(schema, value, path)
        if "enum" in schema:
            self._enum(schema["enum"], value, path)
        if isinstance(value, dict):
            self._object(schema, value, path)
            if schema.get("x-kubernetes-embedded-resource"):
                self._embedded(value, path)

    @staticmethod
    def _types(schema: Schema) -> list[str]:
        if schema.get("x-kubernetes-int-or-string"):
            return ["integer", "string"]
        kind = schema.get("type")
        return [kind] if isinstance(kind, str) and kind else []

    def _type_error(self, path: str, expected: str, actual: str) -> None:
        field = _field(path)
        self.errors.append(
            FieldError(
                field,
                "FieldValueTypeInvalid",
                f"{field}: Invalid value: {go_quote(actual)}: {path} in body must be of type {expected}: "
                f"{go_quote(actual)}",
            )
        )

    def _type(self, types: list[str], fmt: str, value: Any, path: str) -> None:
        actual = json_type(value)
        data_format = {"integer": "int64", "number": "float64"}.get(actual, "")
        float_int = actual == "number" and float(value).is_integer() and "integer" in types
        int_float = actual == "integer" and "number" in types
        if (
            fmt
            and not isinstance(value, (str, list))
            and not (
                actual in types
                or data_format == fmt
                or float_int
                or int_float
                or (fmt == "int64" and data_format == "int32")
            )
        ):
            self._type_error(path, fmt, data_format)
        elif fmt and isinstance(value, (str, list)) and "number" not in types and "integer" not in types:
            return
        elif not (actual in types or float_int or int_float):
            self._type_error(path, ",".join(types), actual)

    def _string(self, schema: Schema, value: str, path: str) -> None:
        # The server's string validator stops at the first failure.
        max_length = schema.get("maxLength")
        if max_length is not None and len(value) > max_length:
            unit = "byte" if max_length == 1 else "bytes"
            field = _field(path)
            self.errors.append(
                FieldError(
                    field, "FieldValueTooLong", f"{field}: Too long: may not be more than {max_length} {unit}"
                )
            )
            return
        min_length = schema.get("minLength")
        if min_length is not None and len(value) < min_length:
            self.errors.append(
                _invalid(path, value, f"{path} in body should be at least {min_length} chars long")
            )
            return
        pattern = schema.get("pattern")
        if pattern and not _pattern(pattern).search(value):
            self.errors.append(_invalid(path, value, f"{path} in body should match '{pattern}'"))

    def _number(self, schema: Schema, types: list[str], fmt: str, value: float, path: str) -> None:
        type_name = "integer" if "integer" in types else "number"
        checked = _range_error(value, type_name, fmt, "Checked", path)
        if checked:
            self.errors.append(checked)
        multiple = schema.get("multipleOf")
        if multiple and type_name == "number" and isinstance(value, int) and multiple != int(multiple):
            # kube-openapi's MultipleOfNativeType: a value decoded as an integer is checked
            # against the factor cut to an integer (0.5 becomes 0, refused as a factor).
            factor = int(multiple)
            if factor <= 0:
                detail = f"factor MultipleOf declared for {path} must be positive: {factor}"
                self.errors.append(_invalid(path, factor, detail))
            elif value % factor:
                self.errors.append(_invalid(path, value, f"{path} in body should be a multiple of {factor}"))
        elif multiple:
            quotient = Decimal(repr(value)) / Decimal(repr(multiple))
            if quotient != quotient.to_integral_value():
                self.errors.append(
                    _invalid(path, value, f"{path} in body should be a multiple of {_go_number(multiple)}")
                )
        for bound, exclusive_key, prefix, below in (
            ("minimum", "exclusiveMinimum", "Minimum boundary", True),
            ("maximum", "exclusiveMaximum", "Maximum boundary", False),
        ):
            limit = schema.get(bound)
            if limit is None:
                continue
            exclusive = bool(schema.get(exclusive_key))
            boundary = _range_error(limit, type_name, fmt, prefix, path)
            if boundary:
                self.errors.append(boundary)
            elif isinstance(value, int):
                # The server compares integers with the bound truncated to an integer.
                limit = int(limit)
            if below:
                failed = value <= limit if exclusive else value < limit
                words = "greater than" if exclusive else "greater than or equal to"
            else:
                failed = value >= limit if exclusive else value > limit
                words = "less than" if exclusive else "less than or equal to"
            if failed:
                self.errors.append(
                    _invalid(path, value, f"{path} in body should be {words} {_go_number(limit)}")
                )

    def _list(self, schema: Schema, value: list[Any], path: str) -> None:
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                self.value(items, item, f"{path}[{i}]")
        min_items = schema.get("minItems")
        if min_items is not None and len(value) < min_items:
            self.errors.append(
                _invalid(path, len(value), f"{path} in body should have at least {min_items} items")
            )
        max_items = schema.get("maxItems")
        if max_items is not None and len(value) > max_items:
            self.errors.append(_too_many(path, len(value), max_items))
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "set":
            self._set(value, path)
        elif list_type == "map":
            self._map_list(schema, value, path)

    def _enum(self, allowed: list[Any], value: Any, path: str) -> None:
        if any(_enum_equal(value, a) for a in allowed):
            return
        shown = ", ".join(
            go_quote(a if isinstance(a, str) else json.dumps(a, separators=(",", ":"))) for a in allowed
        )
        field = _field(path)
        self.errors.append(
            FieldError(
                field,
                "FieldValueNotSupported",
                f"{field}: Unsupported value: {go_repr(value)}: supported values: {shown}",
            )
        )

    def _object(self, schema: Schema, value: dict[str, Any], path: str) -> None:
        count = len(value)
        min_props, max_props = schema.get("minProperties"), schema.get("maxProperties")
        if min_props is not None and count < min_props:
            self.errors.append(
                _invalid(path, count, f"{path} in body should have at least {min_props} properties")
            )
            return
        if max_props is not None and count > max_props:
            self.errors.append(_too_many(path, count, max_props))
            return
        properties: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                continue
            if additional is False:
                self.errors.append(
                    _invalid(path, key, f"{_child(path, key)} in body is a forbidden property")
                )
            elif isinstance(additional, Mapping):
                self.value(additional, item, _child(path, key))
        for key, sub in properties.items():
            if key in value:
                self.value(sub, value[key], _child(path, key))
        for key in schema.get("required") or ():
            if key not in value:
                field = _child(path, key)
                self.errors.append(FieldError(field, "FieldValueRequired", f"{field}: Required value"))

    def _embedded(self, value: dict[str, Any], path: str) -> None:
        for key in ("apiVersion", "kind"):
            if key not in value:
                field = _child(path, key)
                self.late.append(
                    FieldError(field, "FieldValueRequired", f"{field}: Required value: must not be empty")
                )
        for key in ("apiVersion", "kind"):
            if key not in value:
                continue
            item, field = value[key], _child(path, key)
            if not isinstance(item, str):
                self.late.append(_invalid(field, item, "must be a string"))
            elif not item:
                self.late.append(_invalid(field, item, "must not be empty"))
            elif key == "apiVersion" and item.count("/") > 1:
                self.late.append(_invalid(field, item, f"unexpected GroupVersion string: {item}"))
            elif key == "kind" and not _DNS1035.fullmatch(item.lower()):
                self.late.append(
                    _invalid(field, item, "may have mixed case, but should otherwise match: " + _DNS1035_MSG)
                )

    def _set(self, value: list[Any], path: str) -> None:
        seen: list[Any] = []
        for i, item in enumerate(value):
            if any(_enum_equal(item, s) for s in seen):
                field = f"{path}[{i}]"
                self.late.append(
                    FieldError(field, "FieldValueDuplicate", f"{field}: Duplicate value: {go_repr(item)}")
                )
            else:
                seen.append(item)

    def _map_list(self, schema: Schema, value: list[Any], path: str) -> None:
        keys: list[str] = list(schema.get("x-kubernetes-list-map-keys") or ())
        item_props: Mapping[str, Any] = (schema.get("items") or {}).get("properties") or {}
        seen: list[dict[str, Any]] = []
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            identity: dict[str, Any] = {}
            missing = False
            for key in keys:
                if key in item:
                    identity[key] = item[key]
                elif "default" in (item_props.get(key) or {}):
                    identity[key] = item_props[key]["default"]
                else:
                    field = f"{path}[{i}].{key}"
                    self.late.append(FieldError(field, "FieldValueRequired", f"{field}: Required value"))
                    missing = True
            if missing:
                continue
            if any(identity == s for s in seen):
                field = f"{path}[{i}]"
                self.late.append(
                    FieldError(field, "FieldValueDuplicate", f"{field}: Duplicate value: {go_repr(identity)}")
                )
            else:
                seen.append(identity)


_DNS1035 = re.compile("[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def _too_many(path: str, actual: int, limit: int) -> FieldError:
    field = _field(path)
    unit = "item" if limit == 1 else "items"
    return FieldError(
        field, "FieldValueTooMany", f"{field}: Too many: {actual}: must have at most {limit} {unit}"
    )


def _enum_equal(value: Any, allowed: Any) -> bool:
    """Enum membership: JSON equality, numbers by value (1 matches 1.0), booleans only booleans."""
    if isinstance(value, bool) or isinstance(allowed, bool):
        return type(value) is type(allowed) and value == allowed
    if isinstance(value, dict):
        return (
            isinstance(allowed, dict)
            and value.keys() == allowed.keys()
            and all(_enum_equal(v, allowed[k]) for k, v in value.items())
        )
    if isinstance(value, list):
        return (
            isinstance(allowed, list) and len(value) == len(allowed) and all(map(_enum_equal, value, allowed))
        )
    if isinstance(value, (int, float)):
        return isinstance(allowed, (int, float)) and value == allowed
    return type(value) is type(allowed) and value == allowed


def validate(schema: Mapping[str, Any], obj: Any) -> list[FieldError]:
    """Every violation of ``schema`` (a CRD version's openAPIV3Schema) by the whole object ``obj``.

    Field paths are the server's (``spec.containers[0].name``); messages are its full texts. An
    empty list means the object is valid.
    """
    validator = _Validator()
    validator.value(schema, obj, "")
    return validator.errors + validator.late


# --- defaulting ---------------------------------------------------------------------------------------


def _clone(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


def _sub_schema(schema: Schema, key: str) -> Schema | None:
    """The schema of member ``key`` of an object under ``schema`` (None if it has none)."""
    properties = schema.get("properties") or {}
    if key in properties:
        sub: Schema = properties[key]
        return sub
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, Mapping) else None


def _drop_nulls(value: Any, schema: Schema | None) -> None:
    """PruneNonNullableNullsWithoutDefaults: a null the schema neither allows nor defaults is removed."""
    if schema is None:
        return
    if isinstance(value, dict):
        for key in list(value):
            sub = _sub_schema(schema, key)
            if sub is None:
                continue
            if value[key] is None and not sub.get("nullable") and "default" not in sub:
                del value[key]
            else:
                _drop_nulls(value[key], sub)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for item in value:
                _drop_nulls(item, items)


def _non_nullable_null(value: Any, schema: Schema | None) -> bool:
    return value is None and schema is not None and not schema.get("nullable")


def _default(value: Any, schema: Schema | None) -> None:
    """structuraldefaulting.Default: fill this level's defaults, then recurse into every member."""
    if schema is None:
        return
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        for key, sub in properties.items():
            if "default" in sub and (key not in value or _non_nullable_null(value[key], sub)):
                value[key] = _clone(sub["default"])
        additional = schema.get("additionalProperties")
        for key, item in list(value.items()):
            if key in properties:
                _default(item, properties[key])
            elif isinstance(additional, Mapping):
                if _non_nullable_null(item, additional) and "default" in additional:
                    value[key] = _clone(additional["default"])
                _default(value[key], additional)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                if _non_nullable_null(item, items) and "default" in items:
                    value[i] = _clone(items["default"])
                _default(value[i], items)


def apply_defaults(schema: Mapping[str, Any], obj: Any) -> Any:
    """A copy of ``obj`` with the schema's ``default`` values filled in, as the server defaults.

    Nulls of non-nullable fields are removed first, or replaced by the field's default. A default
    is applied where the field is absent, then the walk continues into it, so defaults nested in a
    defaulted object (and in list items) are applied as well. Defaults are deep-copied.
    """
    result = _clone(obj)
    _drop_nulls(result, schema)
    _default(result, schema)
    return result


# --- pruning -----------------------------------------------------------------------------------------

_META_FIELDS = ("apiVersion", "kind", "metadata")


def _prune(value: Any, schema: Schema | None) -> None:
    if schema is not None and schema.get("x-kubernetes-preserve-unknown-fields"):
        _skip_prune(value, schema)
        return
    if isinstance(value, dict):
        if schema is None:
            value.clear()
            return
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        properties: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key in list(value):
            if embedded and key in _META_FIELDS:
                continue
            if key in properties:
                _prune(value[key], properties[key])
            elif isinstance(additional, Mapping):
                _prune(value[key], additional)
            elif additional is True:
                continue
            else:
                del value[key]
    elif isinstance(value, list):
        items = schema.get("items") if schema is not None else None
        for item in value:
            _prune(item, items if isinstance(items, Mapping) else None)


def _skip_prune(value: Any, schema: Schema) -> None:
    """Under x-kubernetes-preserve-unknown-fields: keep unknown members, still prune known ones."""
    if isinstance(value, dict):
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        properties: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if embedded and key in _META_FIELDS:
                continue
            if key in properties:
                _prune(item, properties[key])
            elif isinstance(additional, Mapping):
                _prune(item, additional)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for item in value:
                _skip_prune(item, items)


def prune(schema: Mapping[str, Any], obj: Any) -> Any:
    """A copy of ``obj`` without the fields ``schema`` does not declare.

    Unknown fields survive under ``x-kubernetes-preserve-unknown-fields: true`` and
    ``additionalProperties: true``; ``apiVersion``, ``kind`` and ``metadata`` are always kept at the
    root and in ``x-kubernetes-embedded-resource`` objects (metadata is left to ObjectMeta
    validation, not pruned here).
    """
    result = _clone(obj)
    root = dict(schema)
    root["x-kubernetes-embedded-resource"] = True
    _prune(result, root)
    return result
