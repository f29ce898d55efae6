"""What Go's ``encoding/base64`` and ``encoding/json`` make of bytes, with Go's error texts.

kube-apiserver decodes a ``[]byte`` field (a Secret's ``data`` values, a ConfigMap's
``binaryData``) with ``base64.StdEncoding.Decode``, which is more lenient than Python's
``base64.b64decode(validate=True)`` in one way (it skips ``\\r`` and ``\\n`` anywhere) and stricter
in others (padding is required), and words each refusal as ``illegal base64 data at input byte
N``. Validation of ``kubernetes.io/dockercfg`` Secrets runs ``json.Unmarshal`` on bytes, whose
syntax errors (``invalid character 'x' looking for beginning of value``) come from Go's scanner.
Both are emulated here, byte for byte, so the in-memory server refuses what the real one
refuses with the same words.
"""

from __future__ import annotations

import string
from collections.abc import Callable

_ALPHABET = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"
_DECODE = {ord(c): i for i, c in enumerate(_ALPHABET)}
_NEWLINES = (ord("\n"), ord("\r"))
_PAD = ord("=")


class Base64Error(ValueError):
    """``base64.CorruptInputError``: its text is Go's (``illegal base64 data at input byte 4``)."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"illegal base64 data at input byte {offset}")
        self.offset = offset


def std_decode(data: bytes) -> bytes:
    """``base64.StdEncoding.Decode``: padded standard base64, ``\\r``/``\\n`` ignored, trailing
    bits not checked (Go's Encoding is not Strict). Raises :class:`Base64Error` at the byte Go
    reports."""
    out = bytearray()
    si = 0
    while si < len(data):
        si, chunk = _quantum(data, si)
        out += chunk
    return bytes(out)


def _skip_newlines(data: bytes, si: int) -> int:
    while si < len(data) and data[si] in _NEWLINES:
        si += 1
    return si


def _quantum(data: bytes, si: int) -> tuple[int, bytes]:
    """``Encoding.decodeQuantum``: up to four symbols from ``si``, the next index and the bytes."""
    values = [0, 0, 0, 0]
    size = 4
    j = 0
    while j < 4:
        if si == len(data):
            if j == 0:
                return si, b""
            raise Base64Error(si - j)  # j == 1, or a padded encoding cut short
        byte = data[si]
        si += 1
        value = _DECODE.get(byte)
        if value is not None:
            values[j] = value
            j += 1
            continue
        if byte in _NEWLINES:
            continue
        if byte != _PAD or j < 2:
            raise Base64Error(si - 1)
        if j == 2:
            # "==" is expected; the first "=" is consumed.
            si = _skip_newlines(data, si)
            if si == len(data):
                raise Base64Error(len(data))
            if data[si] != _PAD:
                raise Base64Error(si - 1)
            si += 1
        si = _skip_newlines(data, si)
        if si < len(data):
            raise Base64Error(si)  # trailing garbage after the padding
        size = j
        break
    word = values[0] << 18 | values[1] << 12 | values[2] << 6 | values[3]
    return si, word.to_bytes(3, "big")[: size - 1]


# --- encoding/json: the scanner's syntax errors ----------------------------------------------------

_SPACE = frozenset(b" \t\r\n")
_DIGITS = frozenset(b"0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = frozenset(b'bfnrt\\/"')
_MAX_DEPTH = 10000


class _SyntaxError(Exception):
    pass


def _quote_char(byte: int) -> str:
    """``quoteChar``: the byte the scanner stopped at as Go shows it (``strconv.Quote`` of the rune
    with that value, in single quotes)."""
    if byte == ord("'"):
        return "'\\''"
    if byte == ord('"'):
        return "'\"'"
    named = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 92: "\\\\"}
    if byte in named:
        text = named[byte]
    elif byte < 0x20 or byte == 0x7F:
        text = f"\\x{byte:02x}"
    elif 0x80 <= byte <= 0xA0 or byte == 0xAD:  # not printable for strconv.IsPrint
        text = f"\\u{byte:04x}"
    else:
        text = chr(byte)
    return f"'{text}'"


class _Scanner:
    """``encoding/json``'s scanner, reduced to what decides validity and the error text."""

    def __init__(self) -> None:
        self.stack: list[str] = []  # "key" (parseObjectKey), "value" (parseObjectValue), "array"
        self.step: Callable[[int], None] = self.begin_value
        self.end_top = False

    def fail(self, byte: int, context: str) -> None:
        raise _SyntaxError(f"invalid character {_quote_char(byte)} {context}")

    def push(self, kind: str, byte: int) -> None:
        self.stack.append(kind)
        if len(self.stack) > _MAX_DEPTH:
            self.fail(byte, "exceeded max depth")

    def begin_value_or_empty(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("]"):
            self.end_value(c)
            return
        self.begin_value(c)

    def begin_value(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("{"):
            self.push("key", c)
            self.step = self.begin_string_or_empty
        elif c == ord("["):
            self.push("array", c)
            self.step = self.begin_value_or_empty
        elif c == ord('"'):
            self.step = self.in_string
        elif c == ord("-"):
            self.step = self.neg
        elif c == ord("0"):
            self.step = self.zero
        elif c in _DIGITS:
            self.step = self.digits
        elif c in (ord("t"), ord("f"), ord("n")):
            word = {ord("t"): "true", ord("f"): "false", ord("n"): "null"}[c]
            self.step = self.literal(word, 1)
        else:
            self.fail(c, "looking for beginning of value")

    def begin_string_or_empty(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("}"):
            self.stack[-1] = "value"
            self.end_value(c)
            return
        self.begin_string(c)

    def begin_string(self, c: int) -> None:
        if c in _SPACE:
            return
        if c != ord('"'):
            self.fail(c, "looking for beginning of object key string")
        self.step = self.in_string

    def end_value(self, c: int) -> None:
        if not self.stack:
            self.step = self.end_top_step
            self.end_top = True
            self.end_top_step(c)
            return
        if c in _SPACE:
            self.step = self.end_value
            return
        top = self.stack[-1]
        if top == "key":
            if c != ord(":"):
                self.fail(c, "after object key")
            self.stack[-1] = "value"
            self.step = self.begin_value
        elif top == "value":
            if c == ord(","):
                self.stack[-1] = "key"
                self.step = self.begin_string
            elif c == ord("}"):
                self.pop()
            else:
                self.fail(c, "after object key:value pair")
        elif c == ord(","):
            self.step = self.begin_value
        elif c == ord("]"):
            self.pop()
        else:
            self.fail(c, "after array element")

    def pop(self) -> None:
        self.stack.pop()
        self.step = self.end_value
        if not self.stack:
            self.end_top = True
            self.step = self.end_top_step

    def end_top_step(self, c: int) -> None:
        if c not in _SPACE:
            self.fail(c, "after top-level value")

    def in_string(self, c: int) -> None:
        if c == ord('"'):
            self.step = self.end_value
        elif c == ord("\\"):
            self.step = self.in_string_escape
        elif c < 0x20:
            self.fail(c, "in string literal")

    def in_string_escape(self, c: int) -> None:
        if c in _ESCAPES:
            self.step = self.in_string
        elif c == ord("u"):
            self.step = self.unicode_escape(4)
        else:
            self.fail(c, "in string escape code")

    def unicode_escape(self, left: int) -> Callable[[int], None]:
        def step(c: int) -> None:
            if c not in _HEX:
                self.fail(c, "in \\u hexadecimal character escape")
            self.step = self.in_string if left == 1 else self.unicode_escape(left - 1)

        return step

    def neg(self, c: int) -> None:
        if c == ord("0"):
            self.step = self.zero
        elif c in _DIGITS:
            self.step = self.digits
        else:
            self.fail(c, "in numeric literal")

    def digits(self, c: int) -> None:
        if c not in _DIGITS:
            self.zero(c)

    def zero(self, c: int) -> None:
        if c == ord("."):
            self.step = self.dot
        elif c in (ord("e"), ord("E")):
            self.step = self.exponent
        else:
            self.end_value(c)

    def dot(self, c: int) -> None:
        if c not in _DIGITS:
            self.fail(c, "after decimal point in numeric literal")
        self.step = self.fraction

    def fraction(self, c: int) -> None:
        if c in (ord("e"), ord("E")):
            self.step = self.exponent
        elif c not in _DIGITS:
            self.end_value(c)

    def exponent(self, c: int) -> None:
        if c in (ord("+"), ord("-")):
            self.step = self.exponent_sign
            return
        self.exponent_sign(c)

    def exponent_sign(self, c: int) -> None:
        if c not in _DIGITS:
            self.fail(c, "in exponent of numeric literal")
        self.step = self.exponent_digits

    def exponent_digits(self, c: int) -> None:
        if c not in _DIGITS:
            self.end_value(c)

    def literal(self, word: str, index: int) -> Callable[[int], None]:
        def step(c: int) -> None:
            if c != ord(word[index]):
                self.fail(c, f"in literal {word} (expecting '{word[index]}')")
            self.step = self.end_value if index + 1 == len(word) else self.literal(word, index + 1)

        return step


def syntax_error(data: bytes) -> str | None:
    """``checkValid``: the text of the syntax error ``json.Unmarshal`` reports for ``data``, or
    None when it is one JSON value."""
    scanner = _Scanner()
    try:
        for byte in data:
            scanner.step(byte)
        if not scanner.end_top:
            scanner.step(ord(" "))
    except _SyntaxError as error:
        return str(error)
    return None if scanner.end_top else "unexpected end of JSON input"


def unmarshal_object_error(data: bytes) -> str | None:
    """What ``json.Unmarshal(data, &map[string]interface{}{})`` returns, as text (None: no error):
    a syntax error, or a type error for a value that is not an object (null is accepted)."""
    error = syntax_error(data)
    if error is not None:
        return error
    first = data.lstrip(bytes(_SPACE))[:1]
    kind = {b"[": "array", b'"': "string", b"t": "bool", b"f": "bool"}.get(first)
    if first in (b"{", b"n"):
        return None
    return f"json: cannot unmarshal {kind or 'number'} into Go value of type map[string]interface {{}}"
