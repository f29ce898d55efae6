"""The JSONPath of client-go (``k8s.io/client-go/util/jsonpath``) that CRD printer columns use.

A transcription of its parser and evaluator, applied to decoded JSON (dicts, lists, str, int,
float, bool, None), with missing keys allowed as the apiextensions-apiserver's table convertor
allows them. What it keeps of client-go's behaviour, because a column's cell depends on it:

- a field of a non-object, or of ``null``, yields nothing (no error); ``[n]`` of a non-list, an
  index out of range, and a filter over a non-list are errors;
- a filter compares one value with one value of the same basic kind (bool, integer, float,
  string): an integer against a float, or anything against ``null``, an object or a list, is
  an error, as in the forked ``text/template`` comparisons client-go uses;
- ``['key']`` takes single quotes only and splits ``['a.b']`` into two fields; ``..`` yields
  every object, list and non-empty string below it, but never a leaf.

:func:`parse` raises :class:`JsonPathError` for what the Go parser refuses;
:meth:`Template.find` raises it for what the Go evaluator refuses (its callers turn both into
an empty cell). :func:`text` prints one found value as ``PrintResults`` does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memop.testing.apiserver.schema import go_float, go_json


class JsonPathError(ValueError):
    """The path does not parse, or its evaluation fails, as client-go's would."""


# --- nodes ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """One parsed element: ``kind`` is list, text, field, wildcard, array, filter, recursive,
    union, int, float, bool or identifier; the other fields serve the kinds that need them."""

    kind: str
    nodes: tuple[Node, ...] = ()  # list: its elements; union: its alternatives (lists)
    value: Any = None  # text, field, int, float, bool, identifier: the value; array: the params
    left: Node | None = None  # filter
    right: Node | None = None  # filter
    operator: str = ""  # filter: ==, !=, <, >, <=, >= or "exists"


# Go's ParamsEntry: (value, known, derived), for [start:end:step].
Param = tuple[int, bool, bool]

_DICT_KEY = re.compile(r"^'([^']*)'$")
_SLICE = re.compile(r"^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$")
_FILTER = re.compile(r"^([^!<>=]+)([!<>=]+)(.+?)$")
_TERMINATORS = frozenset(" \t\r\n.,[]$@{}")


class _Parser:
    """``jsonpath.Parser``: a template of text and ``{actions}``, scanned rune by rune."""

    def __init__(self, text: str) -> None:
        self.input = text
        self.pos = 0
        self.start = 0
        self.width = 0  # of the rune last read: 0 at the end, so backing up from there stays
        self.root: list[Node] = []

    def parse(self) -> list[Node]:
        self._text()
        return self.root

    def _next(self) -> str:
        """The next character, or "" at the end."""
        if self.pos >= len(self.input):
            self.width = 0
            return ""
        self.width = 1
        self.pos += 1
        return self.input[self.pos - 1]

    def _backup(self) -> None:
        self.pos -= self.width

    def _peek(self) -> str:
        ch = self._next()
        self._backup()
        return ch

    def _consume(self) -> str:
        value = self.input[self.start : self.pos]
        self.start = self.pos
        return value

    def _text(self) -> None:
        while True:
            if self.input.startswith("{", self.pos):
                if self.pos > self.start:
                    self.root.append(Node("text", value=self._consume()))
                self.pos += 1
                self._consume()
                action: list[Node] = []
                self._inside(action)
                return
            if self._next() == "":
                break
        if self.pos > self.start:
            self.root.append(Node("text", value=self._consume()))

    def _close(self, cur: list[Node]) -> None:
        self.root.append(Node("list", tuple(cur)))

    def _inside(self, cur: list[Node]) -> None:
        """parseInsideAction, as a loop over the elements of one action."""
        while True:
            rest = self.input[self.pos :]
            if rest.startswith("}"):
                self.pos += 1
                self._consume()
                self._close(cur)
                self._text()
                return
            if rest.startswith("[?("):
                cur.append(self._filter())
                continue
            if rest.startswith(".."):
                if cur and cur[-1].kind == "recursive":
                    raise JsonPathError("invalid multiple recursive descent")
                self.pos += 2
                self._consume()
                cur.append(Node("recursive"))
                if _alphanumeric(self._peek()):
                    cur.append(self._field())
                continue
            ch = self._next()
            if ch == "" or ch in "\r\n":
                raise JsonPathError("unclosed action")
            if ch in " @$":
                self._consume()
            elif ch == "[":
                cur.extend(self._array())
            elif ch in "\"'":
                cur.append(self._quote(ch))
            elif ch == ".":
                cur.append(self._field())
            elif ch in "+-" or ch.isdigit():
                self._backup()
                cur.append(self._number())
            elif _alphanumeric(ch):
                self._backup()
                cur.append(self._identifier())
            else:
                raise JsonPathError(f"unrecognized character in action: {ch!r}")

    def _field(self) -> Node:
        self._consume()
        while True:
            ch = self._next()
            if ch == "\\":
                self._next()
            elif ch == "" or ch in _TERMINATORS:
                self._backup()
                break
        value = self._consume()
        return Node("wildcard") if value == "*" else Node("field", value=value.replace("\\", ""))

    def _identifier(self) -> Node:
        while (ch := self._next()) != "" and ch not in _TERMINATORS:
            pass
        self._backup()
        value = self._consume()
        if value in ("true", "false"):
            return Node("bool", value=value == "true")
        return Node("identifier", value=value)

    def _number(self) -> Node:
        if self._peek() in "+-":
            self._next()
        while (ch := self._next()) == "." or ch.isdigit():
            pass
        self._backup()
        value = self._consume()
        if re.fullmatch(r"[+-]?\d+", value):
            return Node("int", value=int(value))
        try:
            return Node("float", value=float(value))
        except ValueError:
            raise JsonPathError(f"cannot parse number {value}") from None

    def _quote(self, end: str) -> Node:
        while True:
            ch = self._next()
            if ch in ("", "\n"):
                raise JsonPathError("unterminated quoted string")
            if ch == end and self.input[self.pos - 2] != "\\":
                break
        value = self._consume()[1:-1]
        return Node("text", value=re.sub(r"\\(.)", r"\1", value))

    def _array(self) -> list[Node]:
        while (ch := self._next()) != "]":
            if ch in ("", "\n"):
                raise JsonPathError("unterminated array")
        text = self._consume()[1:-1]
        if text == "*":
            text = ":"
        parts = text.split(",")
        if len(parts) > 1:
            return [Node("union", tuple(_action(f"[{p.strip(' ')}]") for p in parts))]
        key = _DICT_KEY.match(text)
        if key is not None:
            return list(_action(f".{key.group(1)}").nodes)
        match = _SLICE.match(text)
        if match is None:
            raise JsonPathError(f"invalid array index {text}")
        params: list[Param] = []
        for i, group in enumerate(match.groups()):
            part = (group or "")[1:] if i > 0 else (group or "")
            if group:
                params.append((0, False, False) if i > 0 and part == "" else (int(part), True, False))
            elif i == 1:
                params.append((params[0][0] + 1, True, True))
            else:
                params.append((0, False, False))
        return [Node("array", value=tuple(params))]

    def _filter(self) -> Node:
        self.pos += 3
        self._consume()
        begin = end = False
        pair = ""
        while True:
            ch = self._next()
            if ch in ("", "\n"):
                raise JsonPathError("unterminated filter")
            if ch in "\"'":
                if not begin:
                    begin, pair = True, ch
                elif self.input[self.pos - 2] != "\\" and ch == pair:
                    end = True
            elif ch == ")" and begin == end:
                break
        if self._next() != "]":
            raise JsonPathError("unclosed array expect ]")
        text = self._consume()[:-2]
        match = _FILTER.match(text)
        if match is None:
            return Node("filter", left=_action(text), right=Node("list"), operator="exists")
        left, operator, right = match.groups()
        return Node("filter", left=_action(left), right=_action(right), operator=operator)


def _alphanumeric(ch: str) -> bool:
    return ch == "_" or ch.isalpha() or ch.isdigit()


def _action(text: str) -> Node:
    """``parseAction``: ``text`` as the one action of a template (a list node)."""
    nodes = _Parser("{" + text + "}").parse()
    return nodes[0]


# --- evaluation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """A parsed template: its root nodes (lists for actions, text between them)."""

    nodes: tuple[Node, ...]

    def find(self, data: Any) -> list[list[Any]]:
        """``FindResults``: the values each root node finds (JsonPathError as client-go fails)."""
        return [_walk([data], node) for node in self.nodes]


def parse(text: str) -> Template:
    """Parse a template such as ``{.status.replicas}`` (JsonPathError if Go's parser refuses it)."""
    return Template(tuple(_Parser(text).parse()))


def _walk(values: list[Any], node: Node) -> list[Any]:
    kind = node.kind
    if kind == "list":
        for child in node.nodes:
            values = _walk(values, child)
        return values
    if kind == "text":
        return [node.value]
    if kind in ("int", "float", "bool"):
        return [node.value for _ in values]
    if kind == "field":
        return [v[node.value] for v in values if isinstance(v, dict) and node.value in v]
    if kind == "array":
        return _array(values, node.value)
    if kind == "filter":
        return _filter(values, node)
    if kind == "wildcard":
        return [child for v in values for child in _children(v)]
    if kind == "recursive":
        return _recursive(values)
    if kind == "union":
        return [found for alternative in node.nodes for found in _walk(values, alternative)]
    raise JsonPathError(f"unrecognized identifier {node.value}")


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return list(value.encode())  # indexing a Go string yields its bytes
    return []


def _recursive(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        children = _children(value)
        if children:
            out.append(value)
            out.extend(_recursive(children))
    return out


def _array(values: list[Any], params: tuple[Param, Param, Param]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if value is None:
            continue
        if not isinstance(value, list):
            raise JsonPathError(f"{type(value).__name__} is not array or slice")
        length = len(value)
        (start, start_known, _), (stop, stop_known, derived), (step, step_known, _) = params
        if not start_known:
            start = 0
        if start < 0:
            start += length
        if not stop_known:
            stop = length
        if stop < 0 or (stop == 0 and derived):
            stop += length
        if stop == start:
            return out
        if start >= length or start < 0 or stop > length or stop < 0:
            raise JsonPathError(f"array index out of bounds: length {length}")
        if start > stop:
            raise JsonPathError(f"starting index {start} is greater than ending index {stop}")
        if step_known and step <= 0:
            raise JsonPathError("step must be > 0")
        out.extend(value[start:stop][:: step if step_known else 1])
    return out


def _filter(values: list[Any], node: Node) -> list[Any]:
    assert node.left is not None
    assert node.right is not None
    out: list[Any] = []
    for value in values:
        if not isinstance(value, list):
            raise JsonPathError(f"{value!r} is not array or slice and cannot be filtered")
        for item in value:
            if node.operator == "exists":
                try:
                    if _walk([item], node.left):
                        out.append(item)
                except JsonPathError:
                    pass
                continue
            lefts = _walk([item], node.left)
            if not lefts:
                continue
            if len(lefts) > 1:
                raise JsonPathError("can only compare one element at a time")
            rights = _walk([item], node.right)
            if not rights:
                continue
            if len(rights) > 1:
                raise JsonPathError("can only compare one element at a time")
            if _compare(node.operator, lefts[0], rights[0]):
                out.append(item)
    return out


def _basic_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    raise JsonPathError("invalid type for comparison")


def _less(a: Any, b: Any) -> bool:
    kind = _basic_kind(a)
    if kind != _basic_kind(b):
        raise JsonPathError("incompatible types for comparison")
    if kind == "bool":
        raise JsonPathError("invalid type for comparison")
    return bool(a < b)


def _equal(a: Any, b: Any) -> bool:
    if _basic_kind(a) != _basic_kind(b):
        raise JsonPathError("incompatible types for comparison")
    return bool(a == b)


_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": _equal,
    "!=": lambda a, b: not _equal(a, b),
    "<": _less,
    "<=": lambda a, b: _less(a, b) or _equal(a, b),
    ">": lambda a, b: not (_less(a, b) or _equal(a, b)),
    ">=": lambda a, b: not _less(a, b),
}


def _compare(operator: str, left: Any, right: Any) -> bool:
    comparison = _COMPARISONS.get(operator)
    if comparison is None:
        raise JsonPathError(f"unrecognized filter operator {operator}")
    return comparison(left, right)


# --- printing -------------------------------------------------------------------------------------


def text(value: Any) -> str:
    """``PrintResults`` of one value: objects and lists as ``json.Marshal`` writes them, ``null``
    as ``<no value>`` (text/template's invalid value), the rest as ``fmt.Fprint`` does."""
    if value is None:
        return "<no value>"
    if isinstance(value, dict | list):
        return go_json(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    return str(value)
