"""JSON in and out of the API server, through orjson, with the standard library's meaning.

Every byte memop reads from the API server (watch events, LIST pages, the answer to each
write) is JSON, and so is every body it sends. orjson decodes a Deployment's watch event in
half the time ``json.loads`` takes and encodes a body ten times faster (``bench/jsoncodec.py``
prints the figures), and it has wheels for every platform CPython ships on.

The functions here keep ``json``'s results where orjson would differ or refuse, so callers see
one behaviour whichever library did the work:

- :func:`loads` falls back to ``json.loads`` on what orjson refuses but the standard library
  reads (``NaN``, ``Infinity``); input neither reads raises ``ValueError`` (as ``json.loads``
  does: ``json.JSONDecodeError`` is one). One difference stays: an integer literal beyond 64
  bits reads as the nearest float, where ``json.loads`` gives an int. The API server never sends
  one: it decodes such a number into a float64 itself (sigs.k8s.io/json) and writes it back in
  exponent form;
- :func:`dumps` returns compact UTF-8 bytes; integer keys become strings as with ``json.dumps``,
  and what orjson cannot encode (integers beyond 64 bits) goes through ``json.dumps``; a value
  neither can encode raises ``TypeError``;
- :func:`canonical` is a key for equal JSON values (sorted keys, compact): equal JSON gives
  equal keys, and unequal JSON (``1`` and ``true``, ``1`` and ``1.0``) unequal keys; :func:`same`
  compares two values that way.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_DUMPS_OPTIONS = orjson.OPT_NON_STR_KEYS
_CANONICAL_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS


def loads(data: bytes | str) -> Any:
    """The JSON value of ``data`` (see the module docstring)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # Beyond JSON (NaN, Infinity) or not JSON at all: the standard library decides, and
        # raises ValueError for what is not JSON.
        return json.loads(data)


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (see the module docstring)."""
    try:
        return orjson.dumps(value, option=_DUMPS_OPTIONS)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def canonical(value: Any) -> bytes:
    """A key equal for equal JSON values, and only for them (see the module docstring)."""
    try:
        return orjson.dumps(value, option=_CANONICAL_OPTIONS)
    except TypeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value: ``==`` takes ``true`` for ``1`` and
    ``1.0``, their canonical forms do not (compared only when ``==`` holds, so a difference
    costs no encoding)."""
    return bool(a == b) and canonical(a) == canonical(b)
