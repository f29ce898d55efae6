"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource.Quantity``).

A :class:`Quantity` is an exact decimal number read from one of apimachinery's forms: a
number with a binary suffix (``Ki`` .. ``Ei``, powers of 1024), a decimal SI suffix (``n u m
"" k M G T P E``) or a decimal exponent (``e3``, ``E-6``). It keeps the family of its suffix
(its *format*), because the canonical string the API server stores and returns depends on it:

- precision finer than nano units is rounded up, away from zero (``3.001n`` is ``4n``), so
  asking for a little of a resource never becomes asking for none;
- a binary quantity is capped at 2^63-1, and one below 1 is decimal from then on;
- ``str()`` is apimachinery's ``String()``: binary quantities that are whole numbers from 1024
  up use the largest binary suffix that keeps the number whole (``1024Ki`` is ``1Mi``,
  ``1.5Gi`` is ``1536Mi``); everything else uses the largest power of 1000 that keeps it
  whole, with the decimal suffix of that power (``0.5`` is ``500m``, ``2000`` is ``2k``) or, in
  exponent form or beyond ``E``, ``e<power>`` (``1e3``, ``1e21``).

Quantities compare by value whatever their form (``Quantity("1") == Quantity("1000m")``),
hash consistently with that, add and subtract exactly, and give :meth:`Quantity.value` and
:meth:`Quantity.milli_value` rounded up as apimachinery's ``Value()`` and ``MilliValue()`` do.
Numeric exponents are limited to ±:data:`MAX_EXPONENT` (so a hostile ``1e999999999`` cannot
cost unbounded arithmetic).

Used as a Pydantic field type it accepts a string, an integer, or (built in Python, not read
from JSON, where the schema refuses it) a float, and serialises to the canonical string.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
    from pydantic_core import CoreSchema

# The pattern controller-gen writes for a resource.Quantity field (a superset of the grammar:
# it also allows a fractional exponent, which parsing refuses).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
    r"|(\.[0-9]+))))?$"
)
# The pattern ParseQuantity's error names (apimachinery's ErrFormatWrong), as the API server
# words a malformed quantity in a built-in object.
FORMAT_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
MAX_EXPONENT = 1000
_GRAMMAR = re.compile(
    r"([+-]?)([0-9]+)?(?:\.([0-9]*))?"  # sign, whole digits, fraction digits
    r"(?:(?P<binary>[KMGTPE]i)|(?P<exponent>[eE][-+]?[0-9]+)|(?P<decimal>[numkMGTPE]))?"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_BINARY_SUFFIX = {v: k for k, v in _BINARY.items()}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()} | {0: ""}
_NANO = -9
_MAX_BINARY = 2**63 - 1

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]


class QuantityError(ValueError):
    """Not a quantity; the message is the API server's."""


@functools.total_ordering
class Quantity:
    """An exact resource quantity: ``Quantity("1.5Gi")``, ``Quantity(2)``, ``Quantity("500m")``.

    Immutable. Equal (and equally hashed) when the values are, whatever the form.
    ``str()`` is the canonical form. Raises :class:`QuantityError` for text that is no quantity.
    """

    __slots__ = ("_exponent", "_format", "_mantissa")
    _mantissa: int  # the value is _mantissa * 10**_exponent, with _exponent >= -9
    _exponent: int
    _format: Format

    def __init__(self, value: str | int | float | Quantity) -> None:
        if isinstance(value, Quantity):
            self._mantissa, self._exponent, self._format = value._mantissa, value._exponent, value._format
        elif isinstance(value, bool) or not isinstance(value, str | int | float):
            raise QuantityError(f"a quantity is a string or a number, not {type(value).__name__}")
        elif isinstance(value, int):
            self._mantissa, self._exponent, self._format = value, 0, "DecimalSI"
        else:
            self._mantissa, self._exponent, self._format = _parse(
                value if isinstance(value, str) else repr(value)
            )

    @classmethod
    def _of(cls, mantissa: int, exponent: int, fmt: Format) -> Quantity:
        quantity = cls.__new__(cls)
        quantity._mantissa, quantity._exponent = _round_to_nano(mantissa, exponent)
        quantity._format = fmt
        return quantity

    @property
    def format(self) -> Format:
        """``BinarySI``, ``DecimalSI`` or ``DecimalExponent``: the suffix family of the input,
        which decides the canonical form."""
        return self._format

    def as_decimal(self) -> Decimal:
        """The exact value."""
        return Decimal(self._mantissa).scaleb(self._exponent)

    def value(self) -> int:
        """The value rounded up to a whole number, away from zero (apimachinery's ``Value()``)."""
        return _scaled(self._mantissa, self._exponent, 0)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up away from zero (``MilliValue()``)."""
        return _scaled(self._mantissa, self._exponent, -3)

    def is_zero(self) -> bool:
        return self._mantissa == 0

    def __str__(self) -> str:
        return _canonical(self._mantissa, self._exponent, self._format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def _key(self) -> tuple[int, int]:
        """(mantissa, exponent) with trailing zeros moved into the exponent: equal values, equal keys."""
        mantissa, exponent = self._mantissa, self._exponent
        if mantissa == 0:
            return 0, 0
        while mantissa % 10 == 0:
            mantissa //= 10
            exponent += 1
        return mantissa, exponent

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._key() == other._key()
        if isinstance(other, int | str) and not isinstance(other, bool):
            try:
                return self == Quantity(other)
            except QuantityError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: Quantity | str | int) -> bool:
        mine, theirs = _aligned(self, Quantity(other))
        return mine < theirs

    def __add__(self, other: Quantity | str | int) -> Quantity:
        theirs = Quantity(other)
        a, b = _aligned(self, theirs)
        return Quantity._of(a + b, min(self._exponent, theirs._exponent), self._sum_format(theirs))

    def __sub__(self, other: Quantity | str | int) -> Quantity:
        theirs = Quantity(other)
        a, b = _aligned(self, theirs)
        return Quantity._of(a - b, min(self._exponent, theirs._exponent), self._sum_format(theirs))

    def __radd__(self, other: Quantity | str | int) -> Quantity:
        # sum() starts from 0; 0 + q is q, in q's format.
        return Quantity(other) + self

    def __bool__(self) -> bool:
        return not self.is_zero()

    def __neg__(self) -> Quantity:
        return Quantity._of(-self._mantissa, self._exponent, self._format)

    def _sum_format(self, other: Quantity) -> Format:
        # apimachinery's Add and Sub keep the receiver's format, unless it is zero.
        return other._format if self.is_zero() else self._format

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        from pydantic_core import core_schema  # noqa: PLC0415 (usable without Pydantic)

        return core_schema.with_info_plain_validator_function(
            _validate_field,
            serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="json"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        return cls.kube_schema()

    @staticmethod
    def kube_schema() -> dict[str, Any]:
        """The OpenAPI schema controller-gen writes for a ``resource.Quantity`` field."""
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }


def _validate_field(value: Any, info: Any) -> Quantity:
    """A Quantity field's value, or the API server's error for it (``{path}`` is filled in)."""
    from memop.runtime.api.errors import SchemaViolation  # noqa: PLC0415
    from memop.runtime.api.validation import json_type  # noqa: PLC0415

    if isinstance(value, Quantity):
        return value
    from_json = info.mode == "json"
    allowed = int | str if from_json else int | str | float
    if (
        isinstance(value, bool)
        or not isinstance(value, allowed)
        or (isinstance(value, float) and not value.is_integer() and from_json)
    ):
        actual = json_type(value)
        raise SchemaViolation(
            actual, f'{{path}} in body must be of type integer,string: "{actual}"', "FieldValueTypeInvalid"
        )
    try:
        return Quantity(value)
    except QuantityError:
        raise SchemaViolation(value, f"{{path}} in body should match '{QUANTITY_PATTERN}'") from None


def _parse(text: str) -> tuple[int, int, Format]:
    """(mantissa, exponent, format) of a quantity string, rounded and capped as ParseQuantity does."""
    match = _GRAMMAR.fullmatch(text)
    if match is None or not (match.group(2) or match.group(3)):
        raise QuantityError(f"quantities must match the regular expression '{FORMAT_PATTERN}'")
    sign, whole, fraction = match.group(1), match.group(2) or "", match.group(3) or ""
    mantissa = int(whole + fraction or "0")
    exponent = -len(fraction)
    fmt: Format
    if match.group("binary"):
        fmt = "BinarySI"
        mantissa *= 2 ** (10 * _BINARY[match.group("binary")])  # exact, fraction digits kept
    elif match.group("exponent"):
        fmt = "DecimalExponent"
        shift = int(match.group("exponent")[1:])
        if abs(shift) > MAX_EXPONENT:
            raise QuantityError(f"quantities' exponents must be within ±{MAX_EXPONENT}: {text!r}")
        exponent += shift
    else:
        fmt = "DecimalSI"
        exponent += _DECIMAL.get(match.group("decimal") or "", 0)
    if sign == "-":
        mantissa = -mantissa
    mantissa, exponent = _round_to_nano(mantissa, exponent)
    if fmt == "BinarySI":
        if _scaled(abs(mantissa), exponent, 0) > _MAX_BINARY:
            mantissa, exponent = (_MAX_BINARY if mantissa > 0 else -_MAX_BINARY), 0
        elif exponent < 0 and abs(mantissa) < 10**-exponent:  # below 1 (not 0): decimal from now on
            fmt = "DecimalSI"
    return mantissa, exponent, fmt


def _round_to_nano(mantissa: int, exponent: int) -> tuple[int, int]:
    """The value rounded up, away from zero, to whole nano units (exponent at least -9)."""
    if exponent >= _NANO:
        return mantissa, exponent
    if _NANO - exponent > len(str(abs(mantissa))):  # less than a nano unit: it rounds to one
        return (0 if mantissa == 0 else (1 if mantissa > 0 else -1)), _NANO
    return _scaled(mantissa, exponent, _NANO), _NANO


def _scaled(mantissa: int, exponent: int, scale: int) -> int:
    """The value in units of 10**scale, rounded up away from zero."""
    shift = exponent - scale
    power: int = 10 ** abs(shift)
    if shift >= 0:
        return mantissa * power
    quotient, remainder = divmod(abs(mantissa), power)
    quotient += 1 if remainder else 0
    return quotient if mantissa >= 0 else -quotient


def _aligned(a: Quantity, b: Quantity) -> tuple[int, int]:
    """The two mantissas over the smaller of the two exponents."""
    exponent = min(a._exponent, b._exponent)
    return a._mantissa * 10 ** (a._exponent - exponent), b._mantissa * 10 ** (b._exponent - exponent)


def _canonical(mantissa: int, exponent: int, fmt: Format) -> str:
    """apimachinery's ``String()`` of mantissa * 10**exponent in format ``fmt``."""
    if mantissa == 0:
        return "0"
    if fmt == "BinarySI":
        whole = _scaled(mantissa, exponent, 0) if exponent < 0 else mantissa * 10**exponent
        exact = exponent >= 0 or whole * 10**-exponent == mantissa
        if exact and abs(whole) >= 1024:
            power = 0
            while power < 6 and whole % 1024 == 0:
                whole //= 1024
                power += 1
            return f"{whole}{_BINARY_SUFFIX.get(power, '')}"
        fmt = "DecimalSI"  # below 1024, or a fraction: shown in decimal rather than rounded
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt == "DecimalSI" and exponent in _DECIMAL_SUFFIX:
        return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"
    return str(mantissa) if exponent == 0 else f"{mantissa}e{exponent}"
