"""Kubernetes label selectors (``k8s.io/apimachinery/pkg/labels``), parsed once, matched fast.

Owns the selector grammar (``a=b,c==d,e!=f,g in (x,y),h notin (z),i,!j,n>3,n<9``), the validation
of keys and values the API server applies, the conversion from a ``metav1.LabelSelector`` and
matching.

Invariants of a :class:`Selector`:

- it is immutable; its requirements are valid (keys are qualified names, values are label values,
  each operator has the number of values it needs) and stably sorted by key, as Kubernetes sorts
  them, so ``str()`` gives the same canonical text the Go client sends and ``parse(str(s)) == s``;
- equality and hashing ignore requirement order and duplicates (two selectors are equal when they
  are made of the same set of requirements);
- :meth:`Selector.matches` never parses, never uses a regular expression and allocates nothing:
  the requirements are precompiled at construction into per-operator tuples of
  ``(key, value)`` / ``(key, frozenset)`` pairs, because it runs for every object of every list.

Parsing follows the Go lexer and parser token by token, including its quirks: ``in``/``notin`` are
keywords only in operator position (``in in (in)`` is a valid selector), ``a=`` and ``a in ()``
select the empty value, and ``!=``/``notin`` match objects that lack the key. One deliberate
difference: Go stops reading at a NUL byte, here a NUL is an ordinary (and therefore invalid)
character.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Operators, spelled as k8s.io/apimachinery/pkg/selection spells them.
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)


class InvalidSelectorError(ValueError):
    """A selector (string or LabelSelector) is malformed; the message is the API server's text."""


# --- validation (k8s.io/apimachinery/pkg/util/validation), with the server's messages ---------

_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile(_QNAME_FMT)
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = rf"{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_MAX_NAME = 63
_MAX_PREFIX = 253


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # validation.RegexError, double spaces included, so messages match the server's byte for byte.
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _go_quote(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable() and ch.isascii():
            out.append(ch)
        else:
            out.append(ascii(ch)[1:-1])
    out.append('"')
    return "".join(out)


def qualified_name_errors(value: str) -> list[str]:
    """Why ``value`` is not a qualified name (label/annotation key); empty when it is one."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > _MAX_PREFIX:
                errs.append(f"prefix part must be no more than {_MAX_PREFIX} characters")
            if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
                errs.append(
                    "prefix part "
                    + _regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com")
                )
    else:
        return [
            "a qualified name "
            + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > _MAX_NAME:
        errs.append(f"name part must be no more than {_MAX_NAME} characters")
    if not _QNAME_RE.fullmatch(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    """Why ``value`` is not a valid label value; empty when it is one (the empty string is)."""
    return _bounded_format_errors(
        value, _MAX_NAME, _LABEL_VALUE_RE, _LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"
    )


_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character"
)


def dns1123_label_errors(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 label (IsDNS1123Label); empty when it is one."""
    return _bounded_format_errors(
        value,
        _MAX_NAME,
        re.compile(_DNS1123_LABEL_FMT),
        _DNS1123_LABEL_MSG,
        _DNS1123_LABEL_FMT,
        "my-name",
        "123-abc",
    )


def dns1123_subdomain_errors(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1123 subdomain (IsDNS1123Subdomain); empty when it is one."""
    return _bounded_format_errors(
        value,
        _MAX_PREFIX,
        _DNS1123_SUBDOMAIN_RE,
        _DNS1123_SUBDOMAIN_MSG,
        _DNS1123_SUBDOMAIN_FMT,
        "example.com",
    )


def _bounded_format_errors(
    value: str, limit: int, pattern: re.Pattern[str], msg: str, fmt: str, *examples: str
) -> list[str]:
    """apimachinery's two checks of a name: its length, then its format."""
    errs: list[str] = []
    if len(value) > limit:
        errs.append(f"must be no more than {limit} characters")
    if not pattern.fullmatch(value):
        errs.append(_regex_error(msg, fmt, *examples))
    return errs


def _json_strings(values: list[str] | None) -> str:
    # How field.Invalid prints a []string since v1.36 (its JSON; null for a nil slice).
    return "null" if values is None else json.dumps(values, separators=(",", ":"), ensure_ascii=False)


def _invalid(path: str, value: str, errs: list[str]) -> str:
    return f"{path}: Invalid value: {_go_quote(value)}: {'; '.join(errs)}"


def _parse_int64(text: object) -> int | None:
    # strconv.ParseInt(s, 10, 64): optional sign, ASCII digits only, no '_' or spaces.
    if not isinstance(text, str):
        return None
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    value = int(text)
    if not -(2**63) <= value < 2**63:
        return None
    return value


# --- requirements -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key <operator> values`` term; build it with :meth:`Requirement.new` to validate it.

    ``values`` is sorted and duplicate-free (Kubernetes keeps them in a string set).
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def new(cls, key: str, operator: str, values: Iterable[str] | None = ()) -> Requirement:
        """Validate like ``labels.NewRequirement``; ``None`` is Go's nil slice (no values given
        in a LabelSelector), which an error prints as ``null`` where an empty list is ``[]``.

        Raises InvalidSelectorError (a ValueError) carrying the API server's message.
        """
        vals = sorted(set(values or ()))
        shown = _json_strings(None if values is None else vals)
        errs: list[str] = []
        key_errs = qualified_name_errors(key)
        if key_errs:
            errs.append(_invalid("key", key, key_errs))
        if operator in (IN, NOT_IN):
            if not vals:
                errs.append(
                    f"values: Invalid value: {shown}: for 'in', 'notin' operators, values set can't be empty"
                )
        elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
            if len(vals) != 1:
                errs.append(
                    f"values: Invalid value: {shown}: exact-match compatibility requires one single value"
                )
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if vals:
                errs.append(
                    f"values: Invalid value: {shown}: values set must be empty for exists and does not exist"
                )
        elif operator in (GREATER_THAN, LESS_THAN):
            if len(vals) != 1:
                errs.append(
                    f"values: Invalid value: {shown}: for 'Gt', 'Lt' operators, exactly one value is required"
                )
            for i, v in enumerate(vals):
                if _parse_int64(v) is None:
                    errs.append(
                        f"values[{i}]: Invalid value: {_go_quote(v)}: "
                        "for 'Gt', 'Lt' operators, the value must be an integer"
                    )
        else:
            supported = ", ".join(_go_quote(o) for o in (*_BINARY_OPERATORS, EXISTS, DOES_NOT_EXIST))
            errs.append(f"operator: Unsupported value: {_go_quote(operator)}: supported values: {supported}")
        for i, v in enumerate(vals):
            value_errs = label_value_errors(v)
            if value_errs:
                errs.append(_invalid(f"values[{i}][{key}]", v, value_errs))
        if errs:
            raise InvalidSelectorError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
        return cls(key, operator, tuple(vals))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this one requirement (Requirement.Matches)."""
        op = self.operator
        if op in (EQUALS, DOUBLE_EQUALS, IN):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_EQUALS, NOT_IN):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if self.key not in labels or len(self.values) != 1:
            return False
        have, want = _parse_int64(labels[self.key]), _parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op == GREATER_THAN else have < want

    def __str__(self) -> str:
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        joined = ",".join(self.values)
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({joined})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{symbol}{joined}"


# --- lexer and parser (a transcription of the Go recursive-descent parser) ---------------------

_END, _IDENT, _ERROR = "end", "ident", "error"
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_KEYWORDS = frozenset((IN, NOT_IN))
_BINARY_TOKENS = {
    IN: IN,
    NOT_IN: NOT_IN,
    "=": EQUALS,
    "==": DOUBLE_EQUALS,
    "!=": NOT_EQUALS,
    ">": GREATER_THAN,
    "<": LESS_THAN,
}


def _lex(text: str) -> list[tuple[str, str]]:
    """Tokens as (kind, literal); kind is _IDENT, _END, _ERROR, a keyword or the symbol itself."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append((_END, ""))
            return tokens
        ch = text[i]
        if ch in _SPECIAL:
            # Longest match among the symbol tokens: only "==" and "!=" are two characters long.
            two = text[i : i + 2]
            if two in ("==", "!="):
                tokens.append((two, two))
                i += 2
            else:
                tokens.append((ch, ch))
                i += 1
            continue
        start = i
        while i < n and text[i] not in _SPECIAL and text[i] not in _WHITESPACE:
            i += 1
        word = text[start:i]
        tokens.append((word if word in _KEYWORDS else _IDENT, word))


class _Parser:
    def __init__(self, text: str) -> None:
        self._tokens = _lex(text)
        self._pos = 0

    # In "values" context the keywords are plain identifiers: `in in (in)` is valid.
    def _peek(self, values: bool = True) -> tuple[str, str]:
        kind, lit = self._tokens[self._pos]
        if values and kind in _KEYWORDS:
            kind = _IDENT
        return kind, lit

    def _next(self, values: bool = True) -> tuple[str, str]:
        token = self._peek(values)
        self._pos += 1
        return token

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, lit = self._peek()
            if kind == _END:
                return reqs
            if kind not in (_IDENT, "!"):
                raise InvalidSelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self._requirement())
            except ValueError as err:
                raise InvalidSelectorError(f"unable to parse requirement: {err}") from None
            kind, lit = self._next()
            if kind == _END:
                return reqs
            if kind != ",":
                raise InvalidSelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self._peek()
            if kind not in (_IDENT, "!"):
                raise InvalidSelectorError(f"found '{lit}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        operator = ""
        kind, key = self._next()
        if kind == "!":
            operator = DOES_NOT_EXIST
            kind, key = self._next()
        if kind != _IDENT:
            raise InvalidSelectorError(f"found '{key}', expected: identifier")
        key_errs = qualified_name_errors(key)
        if key_errs:
            raise InvalidSelectorError(_invalid("<nil>", key, key_errs))
        if self._peek()[0] in (_END, ","):
            operator = operator or EXISTS
        if operator:
            # "!a=b" stops here; the caller then complains about the "=".
            return Requirement.new(key, operator)
        kind, lit = self._next(values=False)
        operator = _BINARY_TOKENS.get(kind, "")
        if not operator:
            raise InvalidSelectorError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        values = self._value_set() if operator in (IN, NOT_IN) else self._exact_value()
        return Requirement.new(key, operator, values)

    def _value_set(self) -> set[str]:
        kind, lit = self._next()
        if kind != "(":
            raise InvalidSelectorError(f"found '{lit}' expected: '('")
        kind, lit = self._peek()
        if kind == ")":
            self._next()
            return {""}
        if kind not in (_IDENT, ","):
            raise InvalidSelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self._identifiers()
        if self._next()[0] != ")":
            raise InvalidSelectorError(f"found '{lit}', expected: ')'")
        return values

    def _identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            kind, lit = self._next()
            if kind == _IDENT:
                values.add(lit)
                kind2, lit2 = self._peek()
                if kind2 == ")":
                    return values
                if kind2 != ",":
                    raise InvalidSelectorError(f"found '{lit2}', expected: ',' or ')'")
            elif kind == ",":
                # An empty slot between commas (or next to a parenthesis) is the empty value.
                if not values:
                    values.add("")
                kind2 = self._peek()[0]
                if kind2 == ")":
                    values.add("")
                    return values
                if kind2 == ",":
                    self._next()
                    values.add("")
            else:
                raise InvalidSelectorError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        if self._peek()[0] in (_END, ","):
            return {""}
        kind, lit = self._next()
        if kind != _IDENT:
            raise InvalidSelectorError(f"found '{lit}', expected: identifier")
        return {lit}


# --- the selector ------------------------------------------------------------------------------

_NO_LABELS: Mapping[str, str] = {}
_LABEL_SELECTOR_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


_requirement_key = operator.attrgetter("key")


class Selector:
    """A conjunction of label requirements; the empty selector matches everything."""

    __slots__ = (
        "_absent",
        "_equal",
        "_hash",
        "_in",
        "_not_in",
        "_numeric",
        "_present",
        "_requirements",
        "_terms",
    )

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        """Take already-validated requirements (see :meth:`Requirement.new`)."""
        # Stable sort by key, as Go's sort.Sort(ByKey) behaves on the short lists selectors are.
        ordered = tuple(sorted(requirements, key=_requirement_key))
        equal: list[tuple[str, str]] = []
        in_: list[tuple[str, frozenset[str]]] = []
        not_in: list[tuple[str, frozenset[str]]] = []
        present: list[str] = []
        absent: list[str] = []
        numeric: list[Requirement] = []
        for r in ordered:
            if r.operator in (EQUALS, DOUBLE_EQUALS) or (r.operator == IN and len(r.values) == 1):
                equal.append((r.key, r.values[0]))
            elif r.operator == IN:
                in_.append((r.key, frozenset(r.values)))
            elif r.operator in (NOT_EQUALS, NOT_IN):
                not_in.append((r.key, frozenset(r.values)))
            elif r.operator == EXISTS:
                present.append(r.key)
            elif r.operator == DOES_NOT_EXIST:
                absent.append(r.key)
            else:
                numeric.append(r)
        self._fill(
            ordered,
            tuple(equal),
            in_=tuple(in_),
            not_in=tuple(not_in),
            present=tuple(present),
            absent=tuple(absent),
            numeric=tuple(numeric),
        )

    def _fill(
        self,
        requirements: tuple[Requirement, ...] | None,
        equal: tuple[tuple[str, str], ...],
        *,
        in_: tuple[tuple[str, frozenset[str]], ...] = (),
        not_in: tuple[tuple[str, frozenset[str]], ...] = (),
        present: tuple[str, ...] = (),
        absent: tuple[str, ...] = (),
        numeric: tuple[Requirement, ...] = (),
    ) -> None:
        """Every slot, from the requirements sorted by key (None: made from ``equal`` when
        first asked for, see :meth:`_reqs`) and the same requirements by kind of check."""
        self._requirements = requirements
        # Cheapest and most selective checks first: they reject most objects.
        self._equal = equal
        self._in = in_
        self._not_in = not_in
        self._present = present
        self._absent = absent
        self._numeric = numeric
        # Computed on the first hash: most selectors (one per reconcile's list) are never hashed.
        self._hash: int | None = None
        self._terms: frozenset[tuple[str, str, tuple[str, ...]]] | None = None

    def implies(self, other: Selector) -> bool:
        """Whether every requirement of ``other`` is also one of this selector's, as written
        (``a=b`` is not ``a in (b)``): then everything this selector selects, ``other`` does.
        Used to find the informer that holds every object a read can return."""
        return other._terms_() <= self._terms_()

    def _terms_(self) -> frozenset[tuple[str, str, tuple[str, ...]]]:
        # The requirements as tuples: hashed in C, where a Requirement (a dataclass) hashes in
        # Python; made once per selector.
        if self._terms is None:
            if self._requirements is None:  # from_validated_set: equalities, Requirements not made
                self._terms = frozenset((key, EQUALS, (value,)) for key, value in self._equal)
            else:
                self._terms = frozenset((r.key, r.operator, r.values) for r in self._requirements)
        return self._terms

    def _reqs(self) -> tuple[Requirement, ...]:
        if self._requirements is None:
            self._requirements = tuple(Requirement(key, EQUALS, (value,)) for key, value in self._equal)
        return self._requirements

    @classmethod
    def parse(cls, text: str | None) -> Selector:
        """Parse a label selector string; ``""``/``None`` select everything. ValueError if invalid."""
        if not text:
            return _EVERYTHING
        return cls(_Parser(text).parse())

    @classmethod
    def from_validated_set(cls, labels: Mapping[str, str]) -> Selector:
        """Select what carries every one of ``labels`` (Go's ``labels.SelectorFromValidatedSet``).

        Nothing is validated: for pairs built in code, parsing a selector string on every call
        would cost more than the lookup it serves. An invalid pair just selects nothing.
        """
        # Built directly, not through __init__ (one per reconcile that lists a child kind by its
        # owner's labels): every requirement is an equality, and the keys are distinct, so
        # sorting the pairs sorts by key.
        selector = cls.__new__(cls)
        selector._fill(None, tuple(sorted(labels.items())))
        return selector

    @classmethod
    def from_label_selector(cls, obj: Mapping[str, Any] | None) -> Selector:
        """Convert a ``metav1.LabelSelector`` dict (``matchLabels``, ``matchExpressions``).

        ``None`` and ``{}`` select everything. Raises ValueError for an unknown operator, In/NotIn
        without values, Exists/DoesNotExist with values, or an invalid key or value.
        """
        if not obj:
            return _EVERYTHING
        match_labels = obj.get("matchLabels") or {}
        expressions = obj.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping):
            raise InvalidSelectorError(f"matchLabels must be an object, not {type(match_labels).__name__}")
        if not isinstance(expressions, list):
            raise InvalidSelectorError(f"matchExpressions must be a list, not {type(expressions).__name__}")
        reqs: list[Requirement] = []
        for key, value in match_labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidSelectorError(f"matchLabels must map strings to strings: {key!r}: {value!r}")
            reqs.append(Requirement.new(key, EQUALS, (value,)))
        for expr in expressions:
            if not isinstance(expr, Mapping):
                raise InvalidSelectorError(
                    f"a matchExpressions entry must be an object, not {type(expr).__name__}"
                )
            operator = expr.get("operator")
            op = _LABEL_SELECTOR_OPERATORS.get(operator) if isinstance(operator, str) else None
            if op is None:
                raise InvalidSelectorError(
                    f"{_go_quote(str(operator))} is not a valid label selector operator"
                )
            key = expr.get("key")
            values = expr.get("values")
            if not isinstance(key, str):
                raise InvalidSelectorError(f"a matchExpressions key must be a string, not {key!r}")
            if values is not None and (
                not isinstance(values, list) or not all(isinstance(v, str) for v in values)
            ):
                raise InvalidSelectorError(
                    f"matchExpressions values must be a list of strings, not {values!r}"
                )
            reqs.append(Requirement.new(key, op, values))
        return cls(reqs)

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        """The requirements, sorted by key."""
        return self._reqs()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with these labels (``None`` = no labels) is selected."""
        if labels is None:
            labels = _NO_LABELS
        get = labels.get
        for key, value in self._equal:
            if get(key) != value:
                return False
        try:
            for key, values in self._in:
                if get(key) not in values:
                    return False
            for key, values in self._not_in:
                have = get(key)
                if have is not None and have in values:
                    return False
        except TypeError:
            # An unhashable label value (a malformed object) is in no value set.
            return self._match_slowly(labels)
        for key in self._present:
            if key not in labels:
                return False
        for key in self._absent:
            if key in labels:
                return False
        return all(req.matches(labels) for req in self._numeric)

    def _match_slowly(self, labels: Mapping[str, Any]) -> bool:
        return all(r.matches(labels) for r in self._reqs())

    def exact_pairs(self) -> dict[str, str]:
        """Labels every selected object must carry with exactly this value (for index lookups).

        From ``k=v``, ``k==v`` and ``k in (v)``; when a key has several such requirements (which
        no object can satisfy unless they agree) the first one is returned.
        """
        pairs: dict[str, str] = {}
        for key, value in self._equal:
            pairs.setdefault(key, value)
        return pairs

    def is_empty(self) -> bool:
        """Whether this selector has no requirements (it matches everything)."""
        if self._requirements is None:  # from_validated_set: equalities only, not made yet
            return not self._equal
        return not self._requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self._reqs())

    def __repr__(self) -> str:
        return f"Selector.parse({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selector):
            return NotImplemented
        return frozenset(self._reqs()) == frozenset(other._reqs())

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._reqs()))
        return self._hash


_EVERYTHING = Selector()
