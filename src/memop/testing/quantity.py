"""Kubernetes resource quantities in the canonical form the API server stores and returns.

kube-apiserver decodes every ``resource.Quantity`` of a typed object and serialises it back in
canonical form, so what a client reads can differ from what it wrote: ``1000m`` becomes ``1``,
``0.5`` becomes ``500m``, ``2048Ki`` becomes ``2Mi``, ``1.5Gi`` becomes ``1536Mi``. The rules
(``k8s.io/apimachinery/pkg/api/resource``): the suffix family of the input is kept (binary
``Ki``..``Ei``, decimal ``n``..``E``, or exponent ``e<n>``); a binary quantity below 1Ki or
not a whole number is shown in decimal; decimal forms use the largest power of 1000 that keeps
an integer mantissa; precision finer than nano units is rounded up.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY = re.compile(
    r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"  # sign, number
    r"(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][-+]?[0-9]+)?$"  # binary, decimal or exponent suffix
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_NANO = Decimal("1e-9")


class QuantityError(ValueError):
    """Not a quantity; the message is the API server's."""


def parse(text: str) -> tuple[Decimal, str]:
    """(value, format) where format is "BinarySI", "DecimalSI" or "DecimalExponent"."""
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    sign, number, suffix = match.group(1), match.group(2), match.group(3) or ""
    try:
        value = Decimal(number)
    except InvalidOperation:
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'") from None
    if suffix in _BINARY:
        value *= Decimal(2) ** _BINARY[suffix]
        fmt = "BinarySI"
    elif suffix[:1] in ("e", "E"):
        value = value.scaleb(int(suffix[1:]))
        fmt = "DecimalExponent"
    else:
        value = value.scaleb(_DECIMAL[suffix])
        fmt = "DecimalSI"
    if sign == "-":
        value = -value
    # Precision beyond nano units is rounded up, as ParseQuantity does.
    value = value.quantize(_NANO, rounding=ROUND_CEILING) if value != value.to_integral_value() else value
    return value, fmt


def canonical(text: str) -> str:
    """The canonical string of a quantity (raises QuantityError when it is not one)."""
    value, fmt = parse(text)
    if value == 0:
        return "0"
    if fmt == "BinarySI":
        if -1024 < value < 1024 or value != value.to_integral_value():
            fmt = "DecimalSI"
        else:
            whole = int(value)
            power = 0
            while power < 60 and whole % 1024 == 0:
                whole //= 1024
                power += 10
            suffix = next((k for k, v in _BINARY.items() if v == power), "")
            return f"{whole}{suffix}"
    # Decimal: mantissa * 10**exponent with exponent a multiple of 3, as large as keeps the
    # mantissa whole.
    exponent = -9
    mantissa = value.scaleb(9)
    while exponent < 18 and mantissa % 1000 == 0:
        mantissa /= 1000
        exponent += 3
    number = f"{int(mantissa)}"
    if fmt == "DecimalExponent":
        return number if exponent == 0 else f"{number}e{exponent}"
    return number + _DECIMAL_SUFFIX[exponent]
