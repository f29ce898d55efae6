"""Kubernetes resource quantities in the canonical form the API server stores and returns.

kube-apiserver decodes every ``resource.Quantity`` of a typed object and serialises it back in
canonical form, so what a client reads can differ from what it wrote: ``1000m`` becomes ``1``,
``0.5`` becomes ``500m``, ``2048Ki`` becomes ``2Mi``, ``1.5Gi`` becomes ``1536Mi``. The rules
are :class:`memop.runtime.api.quantity.Quantity`'s (one implementation for the runtime and the
in-memory server); this module gives the server the string-in, string-out view of them, with
the surrounding whitespace JSON decoding ignores.
"""

from __future__ import annotations

from decimal import Decimal

from memop.runtime.api.quantity import FORMAT_PATTERN as QUANTITY_PATTERN
from memop.runtime.api.quantity import Format, Quantity, QuantityError

__all__ = ["QUANTITY_PATTERN", "QuantityError", "canonical", "parse"]


def _quantity(text: str) -> Quantity:
    if not isinstance(text, str):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    return Quantity(text.strip())


def parse(text: str) -> tuple[Decimal, Format]:
    """(value, format) where format is "BinarySI", "DecimalSI" or "DecimalExponent"."""
    quantity = _quantity(text)
    return quantity.as_decimal(), quantity.format


def canonical(text: str) -> str:
    """The canonical string of a quantity (raises QuantityError when it is not one)."""
    return str(_quantity(text))
