"""memop.testing.apiserver.goencoding against Go's own expectations: the corrupt inputs and offsets of
encoding/base64's tests, its line-break cases, round trips of any bytes, and the syntax errors
encoding/json's tests expect of its scanner."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memop.testing.apiserver.goencoding import Base64Error, std_decode, syntax_error, unmarshal_object_error

# encoding/base64's TestDecodeCorrupt: the input and the offset Go reports (None: no error).
CORRUPT = [
    ("", None),
    ("\n", None),
    ("AAA=\n", None),
    ("AAAA\n", None),
    ("!!!!", 0),
    ("====", 0),
    ("x===", 1),
    ("=AAA", 0),
    ("A=AA", 1),
    ("AA=A", 2),
    ("AA==A", 4),
    ("AAA=AAAA", 4),
    ("AAAAA", 4),
    ("AAAAAA", 4),
    ("A=", 1),
    ("A==", 1),
    ("AA=", 3),
    ("AA==", None),
    ("AAA=", None),
    ("AAAA", None),
    ("AAAAAA=", 7),
    ("YWJjZA=====", 8),
    ("A!\n", 1),
    ("A=\n", 1),
]


@pytest.mark.parametrize(("text", "offset"), CORRUPT)
def test_corrupt_base64_is_refused_at_the_offset_go_reports(text: str, offset: int | None) -> None:
    if offset is None:
        std_decode(text.encode())
        return
    with pytest.raises(Base64Error) as caught:
        std_decode(text.encode())
    assert caught.value.offset == offset
    assert str(caught.value) == f"illegal base64 data at input byte {offset}"


@pytest.mark.parametrize(
    "text",
    [
        "c3VyZQ==",
        "c3VyZQ==\r",
        "c3VyZQ==\n",
        "c3VyZQ==\r\n",
        "c3VyZ\r\nQ==",
        "c3V\ryZ\nQ==",
        "c3V\nyZ\rQ==",
        "c3VyZ\nQ==",
        "c3VyZQ\n==",
        "c3VyZQ=\n=",
        "c3VyZQ=\r\n\r\n=",
    ],
)
def test_line_breaks_are_skipped(text: str) -> None:  # TestNewLineCharacters
    assert std_decode(text.encode()) == b"sure"


def test_unused_bits_are_not_checked() -> None:  # StdEncoding is not Strict (TestDecoderIssue15656)
    assert std_decode(b"WvLTlMrX9NpYDQlEIFlnDB==") == std_decode(b"WvLTlMrX9NpYDQlEIFlnDA==")


@given(st.binary(max_size=64), st.lists(st.integers(min_value=0, max_value=100), max_size=4))
def test_any_bytes_round_trip_with_line_breaks_anywhere(data: bytes, breaks: list[int]) -> None:
    encoded = base64.b64encode(data)
    for at in sorted(breaks, reverse=True):
        cut = at % (len(encoded) + 1)
        encoded = encoded[:cut] + b"\r\n" + encoded[cut:]
    assert std_decode(encoded) == data


@given(st.text(alphabet="ABab01+/=!\n", max_size=12))
def test_what_go_decodes_python_decodes_the_same(text: str) -> None:
    try:
        decoded = std_decode(text.encode())
    except Base64Error:
        return  # Python is laxer with padding ("AAAA=" passes there)
    assert base64.b64decode(text.replace("\n", ""), validate=True) == decoded


# encoding/json's decode and scanner tests: the syntax error of each input.
@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"X": "foo", "Y"}', "invalid character '}' after object key"),
        ('{"X": "foo" "Y": "bar"}', "invalid character '\"' after object key:value pair"),
        ("[1, 2, 3+]", "invalid character '+' after array element"),
        ('{"X":12x}', "invalid character 'x' after object key:value pair"),
        ("\x01 42", "invalid character '\\x01' looking for beginning of value"),
        (" 42 \x01", "invalid character '\\x01' after top-level value"),
        (" false \x01", "invalid character '\\x01' after top-level value"),
        (' "string" \x01', "invalid character '\\x01' after top-level value"),
        ("[2, 3", "unexpected end of JSON input"),
        ('{"X": "foo", "Y": "bar"', "unexpected end of JSON input"),
        ("", "unexpected end of JSON input"),
        ("'a'", "invalid character '\\'' looking for beginning of value"),
        ("nul", "invalid character ' ' in literal null (expecting 'l')"),
        ('"\\x"', "invalid character 'x' in string escape code"),
        ('"\\u12g4"', "invalid character 'g' in \\u hexadecimal character escape"),
        ("1.e5", "invalid character 'e' after decimal point in numeric literal"),
        ("1e+", "invalid character ' ' in exponent of numeric literal"),
        ("-a", "invalid character 'a' in numeric literal"),
        ('{"a"\n:1,}', "invalid character '}' looking for beginning of object key string"),
        ('"tab\tinside"', "invalid character '\\t' in string literal"),
    ],
)
def test_json_syntax_errors(text: str, error: str) -> None:
    assert syntax_error(text.encode()) == error


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=10,
    )
)
def test_every_json_document_is_valid(value: object) -> None:
    assert syntax_error(json.dumps(value).encode()) is None
    assert syntax_error(json.dumps(value, indent=2, ensure_ascii=False).encode()) is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"auths": {}}', None),
        ("null", None),
        (" [1]", "json: cannot unmarshal array into Go value of type map[string]interface {}"),
        ('"s"', "json: cannot unmarshal string into Go value of type map[string]interface {}"),
        ("-1", "json: cannot unmarshal number into Go value of type map[string]interface {}"),
        ("false", "json: cannot unmarshal bool into Go value of type map[string]interface {}"),
        ("{", "unexpected end of JSON input"),
    ],
)
def test_unmarshal_into_a_map(text: str, error: str | None) -> None:
    assert unmarshal_object_error(text.encode()) == error
