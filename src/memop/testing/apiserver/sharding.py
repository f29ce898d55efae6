"""``shardSelector`` as kube-apiserver v1.36 reads it, with its ``ShardedListAndWatch`` gate on.

:func:`parse_shard_selector` takes what cel-go's parser makes of the text (:mod:`memop.testing.apiserver.cel`)
and walks it as the apiserver's ``sharding.Parse`` does, with its error messages word for word:
``shardRange(<field>, '<start>', '<end>')`` calls joined by ``||``, all on one field
(``object.metadata.uid`` or ``object.metadata.namespace``), bounds of 16 lowercase hex digits
(or ``'0x10000000000000000'``), start below end. The server answers a selector that fails here
with a 500 whose message is ``invalid shard selector: `` and this error (:func:`invalid_selector`):
the apiserver's registry returns a plain error, which its handlers turn into a reasonless 500.

What it selects is computed with :mod:`memop.runtime.sharding.selector`'s hash, the one replicas
use client-side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memop.runtime.sharding.selector import (
    KEYS,
    ShardRange,
    field_value,
    fnv1a_64,
    in_ranges,
    render_selector,
)
from memop.testing.apiserver import cel
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.schema import go_quote

_MAX_END = "0x10000000000000000"


class InvalidShardSelector(ValueError):
    """The selector does not parse; the message is the apiserver's, without its prefix."""


@dataclass(frozen=True, slots=True)
class ShardSelector:
    """A parsed selector: the objects whose ``key`` hashes into any of ``ranges``."""

    key: str
    ranges: tuple[ShardRange, ...]

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return in_ranges(fnv1a_64(field_value(obj, self.key)), self.ranges)

    def __str__(self) -> str:
        """The canonical text (Go's ``String()``): what a list's ``metadata.shardInfo`` echoes."""
        return render_selector(self.key, self.ranges)


def invalid_selector(error: InvalidShardSelector) -> ApiError:
    """The server's answer to a selector that does not parse: 500, no reason."""
    return ApiError(500, "", f"invalid shard selector: {error}")


def parse_shard_selector(text: str) -> ShardSelector:
    """Parse ``text`` as the apiserver does (InvalidShardSelector with its message otherwise)."""
    text = text.strip()
    if not text:
        raise InvalidShardSelector(
            "empty shard selector is not allowed; omit the parameter for unfiltered lists"
        )
    try:
        tree = cel.parse(text)
    except cel.CelSyntaxError as error:
        raise InvalidShardSelector(f"CEL parse error: {error}") from None
    requirements = _walk(tree)
    key = requirements[0][0]
    for other, _ in requirements[1:]:
        if other != key:
            raise InvalidShardSelector(
                f"all shard ranges must use the same field, got {go_quote(key)} and {go_quote(other)}"
            )
    return ShardSelector(key, tuple(r for _, r in requirements))


def _walk(expr: cel.Expr) -> list[tuple[str, ShardRange]]:
    if expr.kind == cel.CALL:
        if expr.function == "_||_":
            return _walk(expr.args[0]) + _walk(expr.args[1])
        if expr.function == "shardRange":
            # A method-style call (x.shardRange(...)) counts too: cel-go's FunctionName() and
            # Args() leave its target out, and the apiserver never looks at it.
            return [_shard_range(expr.args)]
        raise InvalidShardSelector(
            f"unsupported function {go_quote(expr.function)}; only shardRange() and || are allowed"
        )
    raise InvalidShardSelector(
        f"unexpected expression kind {expr.kind}; expected shardRange() call or || operator"
    )


def _shard_range(args: list[cel.Expr]) -> tuple[str, ShardRange]:
    if len(args) != 3:
        raise InvalidShardSelector(f"shardRange() requires exactly 3 arguments, got {len(args)}")
    try:
        path = _field_path(args[0])
    except InvalidShardSelector as error:
        raise InvalidShardSelector(f"shardRange() first argument: {error}") from None
    if path not in KEYS:
        raise InvalidShardSelector(f"unsupported field path {go_quote(path)}; supported: {', '.join(KEYS)}")
    start = _hex_literal(args[1], "hexStart")
    end = _hex_literal(args[2], "hexEnd")
    # Valid bounds have 16 digits, or 17 for 2^64 alone: by length, then as text (Go's HexLess).
    if not (len(start), start) < (len(end), end):
        raise InvalidShardSelector(f"shard range start {start} must be less than end {end}")
    return path, ShardRange(int(start, 16), int(end, 16))


def _field_path(expr: cel.Expr) -> str:
    if expr.kind == cel.IDENT:
        return expr.name
    if expr.kind == cel.SELECT and expr.operand is not None:
        return f"{_field_path(expr.operand)}.{expr.name}"
    raise InvalidShardSelector(
        f"expected field path (e.g. object.metadata.uid), got expression kind {expr.kind}"
    )


def _hex_literal(expr: cel.Expr, name: str) -> str:
    if expr.kind != cel.LITERAL:
        raise InvalidShardSelector(
            f"{name} must be a string literal (e.g. '0xff'), got expression kind {expr.kind}"
        )
    if not isinstance(expr.value, str):
        raise InvalidShardSelector(f"{name} must be a string literal, got {expr.go_type}")
    text: str = expr.value
    if not text.startswith("0x"):
        raise InvalidShardSelector(f"{name} must have '0x' prefix, got {go_quote(text)}")
    digits = text[2:]
    size = len(digits.encode())  # Go's len(): bytes
    if not digits:
        raise InvalidShardSelector(f"{name}: hex value is required after '0x'")
    if size > 17:
        raise InvalidShardSelector(f"{name}: hex value too long ({size} chars, max 17): {go_quote(digits)}")
    for char in digits:
        if char not in "0123456789abcdef":
            raise InvalidShardSelector(f"{name}: invalid hex character {go_quote(char)} in {go_quote(text)}")
    if size == 17:
        if text != _MAX_END:
            raise InvalidShardSelector(
                f"{name}: 17-digit hex value must be '{_MAX_END}' (2^64), got {go_quote(text)}"
            )
    elif size != 16:
        padded = "0x" + "0" * (16 - size) + digits
        raise InvalidShardSelector(
            f"{name} must be a 0x-prefixed 16-digit hex value, got {go_quote(text)} "
            f"(did you mean {go_quote(padded)}?)"
        )
    return text


def compile_shard_selector(text: str | None) -> ShardSelector | None:
    """A request's ``shardSelector`` (None when absent or empty, which the server ignores), or
    the server's 500 ApiError when it does not parse (:func:`invalid_selector`)."""
    if not text:
        return None
    try:
        return parse_shard_selector(text)
    except InvalidShardSelector as error:
        raise invalid_selector(error) from None
