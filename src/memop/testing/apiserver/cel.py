"""Just enough of a CEL parser for kube-apiserver's shard selectors (:mod:`memop.testing.apiserver.sharding`).

kube-apiserver parses ``shardSelector`` with cel-go's parser (no macros) and then walks the tree,
and its error messages name what it found by cel-go's expression kinds ("unexpected expression
kind 3" for a bare identifier). So this parser builds the same tree shapes cel-go does for the
whole CEL expression grammar (calls with cel-go's operator names, selects, identifiers, literals,
lists, maps, messages), without evaluating anything.

Errors: a syntax error reads ``Syntax error: ...`` as cel-go's do, but its wording after that
is this parser's, not ANTLR's; "reserved identifier: X" is cel-go's word for word, and, as in
cel-go, any syntax error is reported before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# cel-go's ast.ExprKind values (what "%v" prints for a kind).
CALL, COMPREHENSION, IDENT, LIST, LITERAL, MAP, SELECT, STRUCT = 1, 2, 3, 4, 5, 6, 7, 8

# Identifiers cel-go refuses as variables (still fine as field names after a dot).
_RESERVED = frozenset(
    {"as", "break", "const", "continue", "else", "false", "for", "function", "if", "import", "in"}
    | {"let", "loop", "package", "namespace", "null", "return", "true", "var", "void", "while"}
)

_BINARY = {
    "==": "_==_",
    "!=": "_!=_",
    "<": "_<_",
    "<=": "_<=_",
    ">": "_>_",
    ">=": "_>=_",
    "in": "@in",
    "+": "_+_",
    "-": "_-_",
    "*": "_*_",
    "/": "_/_",
    "%": "_%_",
}

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\n\f]+|//[^\n]*)
    |(?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
        |'(?:\\.|[^\\'\n\r])*'|"(?:\\.|[^\\"\n\r])*"))
    |(?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:[0-9]+\.[0-9]+|\.[0-9]+)(?:[eE][+-]?[0-9]+)?
        |[0-9]+[eE][+-]?[0-9]+|[0-9]+[uU]?)
    |(?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
    |(?P<op>\|\||&&|==|!=|<=|>=|[<>!+\-*/%?:.,()\[\]{}])
    """,
    re.VERBOSE | re.DOTALL,
)

_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "`": "`",
    "?": "?",
}
_ESCAPE = re.compile(
    r"\\(?:([abfnrtv\\'\"`?])|[xX]([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-3][0-7]{2})|(.))"
)


class CelSyntaxError(Exception):
    """The text is not a CEL expression (the message is what cel-go's first error would say)."""


@dataclass(slots=True)
class Expr:
    """One node of the tree: ``kind`` is cel-go's ExprKind; the rest depends on it."""

    kind: int
    function: str = ""  # CALL
    args: list[Expr] = field(default_factory=list)  # CALL (target excluded), LIST, MAP, STRUCT
    name: str = ""  # IDENT, SELECT (field name)
    operand: Expr | None = None  # SELECT, CALL's target
    value: Any = None  # LITERAL
    go_type: str = ""  # LITERAL: what Go's %T prints for the value cel-go hands out


@dataclass(slots=True)
class _Token:
    kind: str  # "string" | "number" | "ident" | "op" | "eof"
    text: str


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise CelSyntaxError(f"Syntax error: token recognition error at: '{text[pos]}'")
        pos = match.end()
        kind = match.lastgroup or ""
        if kind != "space":
            out.append(_Token(kind, match.group()))
    out.append(_Token("eof", "<EOF>"))
    return out


def _unescape(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        simple, hex2, hex4, hex8, octal, bad = m.groups()
        if simple:
            return _ESCAPES[simple]
        if bad is not None:
            raise CelSyntaxError(f"Syntax error: token recognition error at: '\\{bad}'")
        return chr(int(hex2 or hex4 or hex8 or "0", 16) if octal is None else int(octal, 8))

    return _ESCAPE.sub(one, body)


def _literal(token: _Token) -> Expr:
    text = token.text
    if token.kind == "string":
        prefix = re.match(r"[rRbB]*", text)
        flags = prefix.group().lower() if prefix else ""
        quoted = text[len(flags) :]
        quote = 3 if quoted[:3] in ("'''", '"""') else 1
        body = quoted[quote:-quote]
        value = body if "r" in flags else _unescape(body)
        if "b" in flags:
            return Expr(LITERAL, value=value.encode("utf-8", "surrogatepass"), go_type="[]uint8")
        return Expr(LITERAL, value=value, go_type="string")
    if text[-1] in "uU":
        return Expr(LITERAL, value=int(text[:-1], 0), go_type="uint64")
    if text[:2] in ("0x", "0X"):
        return Expr(LITERAL, value=int(text, 16), go_type="int64")
    if any(c in text for c in ".eE"):
        return Expr(LITERAL, value=float(text), go_type="float64")
    return Expr(LITERAL, value=int(text), go_type="int64")


def _call(function: str, *args: Expr) -> Expr:
    return Expr(CALL, function=function, args=list(args))


def _balanced(function: str, terms: list[Expr]) -> Expr:
    """cel-go's balancer: a chain of || (or &&) as a balanced tree, leaves kept in order."""
    if len(terms) == 1:
        return terms[0]
    mid = (len(terms) + 1) // 2
    return _call(function, _balanced(function, terms[:mid]), _balanced(function, terms[mid:]))


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0
        self.reserved: list[str] = []  # reported after syntax errors, as cel-go's visitor does

    @property
    def token(self) -> _Token:
        return self.tokens[self.pos]

    def accept(self, *texts: str) -> str | None:
        token = self.token
        if token.kind in ("op", "ident") and token.text in texts:
            self.pos += 1
            return token.text
        return None

    def expect(self, text: str) -> None:
        if self.accept(text) is None:
            raise CelSyntaxError(f"Syntax error: mismatched input '{self.token.text}' expecting '{text}'")

    def parse(self) -> Expr:
        expr = self.expr()
        if self.token.kind != "eof":
            raise CelSyntaxError(f"Syntax error: extraneous input '{self.token.text}' expecting <EOF>")
        if self.reserved:
            raise CelSyntaxError(f"reserved identifier: {self.reserved[0]}")
        return expr

    def expr(self) -> Expr:
        condition = self.logical("||", "_||_", lambda: self.logical("&&", "_&&_", self.relation))
        if self.accept("?") is None:
            return condition
        yes = self.logical("||", "_||_", lambda: self.logical("&&", "_&&_", self.relation))
        self.expect(":")
        return _call("_?_:_", condition, yes, self.expr())

    def logical(self, op: str, function: str, operand: Any) -> Expr:
        terms = [operand()]
        while self.accept(op) is not None:
            terms.append(operand())
        return _balanced(function, terms)

    def relation(self) -> Expr:
        left = self.additive()
        while (op := self.accept("<", "<=", ">", ">=", "==", "!=", "in")) is not None:
            left = _call(_BINARY[op], left, self.additive())
        return left

    def additive(self) -> Expr:
        left = self.multiplicative()
        while (op := self.accept("+", "-")) is not None:
            left = _call(_BINARY[op], left, self.multiplicative())
        return left

    def multiplicative(self) -> Expr:
        left = self.unary()
        while (op := self.accept("*", "/", "%")) is not None:
            left = _call(_BINARY[op], left, self.unary())
        return left

    def unary(self) -> Expr:
        for op, function in (("!", "!_"), ("-", "-_")):
            count = 0
            while self.token.text == op and not self._negative_number():
                self.pos += 1
                count += 1
            if count:
                operand = self.member()
                return _call(function, operand) if count % 2 else operand
        return self.member()

    def _negative_number(self) -> bool:
        return self.token.text == "-" and self.tokens[self.pos + 1].kind == "number"

    def member(self) -> Expr:
        expr = self.primary()
        while True:
            if self.accept(".") is not None:
                name = self.identifier()
                if self.accept("(") is not None:
                    expr = Expr(CALL, function=name, args=self.list_of(")"), operand=expr)
                else:
                    expr = Expr(SELECT, name=name, operand=expr)
            elif self.accept("[") is not None:
                index = self.expr()
                self.expect("]")
                expr = _call("_[_]", expr, index)
            elif self.token.text == "{" and expr.kind in (IDENT, SELECT) and self._qualified(expr):
                self.pos += 1
                expr = Expr(STRUCT, args=self.entries("}", keys="field"))
            else:
                return expr

    @staticmethod
    def _qualified(expr: Expr) -> bool:
        while expr.kind == SELECT and expr.operand is not None:
            expr = expr.operand
        return expr.kind == IDENT

    def identifier(self) -> str:
        token = self.token
        if token.kind != "ident" or token.text == "in":
            raise CelSyntaxError(f"Syntax error: mismatched input '{token.text}' expecting IDENTIFIER")
        self.pos += 1
        return token.text

    def primary(self) -> Expr:
        token = self.token
        if self._negative_number():
            self.pos += 2
            literal = _literal(self.tokens[self.pos - 1])
            literal.value = -literal.value
            return literal
        if token.kind in ("string", "number"):
            self.pos += 1
            return _literal(token)
        if token.kind == "ident" and token.text in ("true", "false"):
            self.pos += 1
            return Expr(LITERAL, value=token.text == "true", go_type="bool")
        if token.kind == "ident" and token.text == "null":
            self.pos += 1
            return Expr(LITERAL, value=None, go_type="structpb.NullValue")
        if self.accept("(") is not None:
            inner = self.expr()
            self.expect(")")
            return inner
        if self.accept("[") is not None:
            return Expr(LIST, args=self.list_of("]"))
        if self.accept("{") is not None:
            return Expr(MAP, args=self.entries("}", keys="expr"))
        dot = "." if self.accept(".") is not None else ""
        name = dot + self.identifier()
        if self.accept("(") is not None:
            return Expr(CALL, function=name, args=self.list_of(")"))
        if name.lstrip(".") in _RESERVED:
            self.reserved.append(name.lstrip("."))
        return Expr(IDENT, name=name)

    def list_of(self, close: str) -> list[Expr]:
        return self._separated(close, lambda: [self.expr()])

    def entries(self, close: str, *, keys: str) -> list[Expr]:
        def entry() -> list[Expr]:
            key = Expr(IDENT, name=self.identifier()) if keys == "field" else self.expr()
            self.expect(":")
            return [key, self.expr()]

        return self._separated(close, entry)

    def _separated(self, close: str, item: Callable[[], list[Expr]]) -> list[Expr]:
        """Comma-separated items up to ``close``, a trailing comma allowed (as CEL's grammar)."""
        out: list[Expr] = []
        while self.accept(close) is None:
            if out:
                self.expect(",")
                if self.accept(close) is not None:
                    break
            out.extend(item())
        return out


def parse(text: str) -> Expr:
    """The tree cel-go's parser builds for ``text``; CelSyntaxError when it would not parse."""
    return _Parser(text).parse()
