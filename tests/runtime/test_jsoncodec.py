"""memop.runtime.util.jsoncodec: orjson's speed with the standard library's meaning."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memop.runtime.util import jsoncodec

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_loads_reads_what_json_reads(value: Any) -> None:
    text = json.dumps(value)
    assert jsoncodec.loads(text) == json.loads(text)
    assert jsoncodec.loads(text.encode()) == json.loads(text)


@given(JSON_VALUES)
def test_dumps_writes_what_json_reads_back_equal(value: Any) -> None:
    encoded = jsoncodec.dumps(value)
    assert isinstance(encoded, bytes)
    assert json.loads(encoded) == value


def test_nan_and_infinity_fall_back_to_the_standard_library() -> None:
    assert math.isnan(jsoncodec.loads(b"[NaN]")[0])
    assert jsoncodec.loads(b"[-Infinity]") == [-math.inf]


def test_an_integer_beyond_64_bits_reads_as_the_api_server_reads_it_a_float() -> None:
    # kube-apiserver decodes it into a float64 (sigs.k8s.io/json) and never sends the literal.
    assert jsoncodec.loads(b'{"n": 123456789012345678901234567890}') == {"n": 1.2345678901234568e29}
    assert jsoncodec.loads(b'{"n": 18446744073709551615}') == {"n": 2**64 - 1}


def test_dumps_encodes_integers_beyond_64_bits_through_the_standard_library() -> None:
    assert json.loads(jsoncodec.dumps({"n": 2**80})) == {"n": 2**80}


@pytest.mark.parametrize("bad", [b"", b"{", b'{"a": }', b"\xff\xfe", b"[1,]"])
def test_what_is_not_json_raises_value_error(bad: bytes) -> None:
    # json.JSONDecodeError is a ValueError, with the standard library's message.
    with pytest.raises(json.JSONDecodeError, match=r"^Expecting "):
        jsoncodec.loads(bad)


def test_dumps_is_compact_utf8_and_makes_integer_keys_strings_as_json_does() -> None:
    assert jsoncodec.dumps({"a": [1, 2], "é": "ü"}) == '{"a":[1,2],"é":"ü"}'.encode()
    assert json.loads(jsoncodec.dumps({1: "x"})) == json.loads(json.dumps({1: "x"})) == {"1": "x"}


def test_what_neither_library_encodes_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        jsoncodec.dumps({"a": object()})


def test_canonical_is_equal_for_equal_json_and_only_for_it() -> None:
    first, second = {"b": 1, "a": [True, None]}, {"a": [True, None], "b": 1}
    assert jsoncodec.canonical(first) == jsoncodec.canonical(second)
    keys = {jsoncodec.canonical(v) for v in (1, True, 1.0, "1", [1], {"1": 1})}
    assert len(keys) == 6
    assert jsoncodec.canonical({"n": 2**80}) == jsoncodec.canonical({"n": 2**80})


def test_same_is_equality_as_json() -> None:
    assert jsoncodec.same({"a": [1, "x"], "b": None}, {"b": None, "a": [1, "x"]})  # key order aside
    for a, b in (({"a": 1}, {"a": True}), ([1], [1.0]), ({"a": 0}, {"a": False}), ({"a": 1}, {"a": 2})):
        assert not jsoncodec.same(a, b)
    assert jsoncodec.same(2**70, 2**70)  # beyond orjson: the standard library's encoding
