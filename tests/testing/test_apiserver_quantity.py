"""Canonical quantities, as kube-apiserver returns what it stored."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.testing.apiserver.quantity import QuantityError, canonical, parse


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("1000m", "1"),
        ("0.5", "500m"),
        ("1.5", "1500m"),
        ("1500m", "1500m"),
        ("2000", "2k"),
        ("1500", "1500"),
        ("2048Ki", "2Mi"),
        ("1.5Gi", "1536Mi"),
        ("1023Ki", "1023Ki"),
        ("512Mi", "512Mi"),
        ("0.5Ki", "512"),
        ("128974848", "128974848"),
        ("129e6", "129e6"),
        ("1e3", "1e3"),
        ("100M", "100M"),
        ("0", "0"),
        ("0.0001", "100u"),
        ("0.0000000001", "1n"),
        ("-1500m", "-1500m"),
    ],
)
def test_canonical_forms(written: str, stored: str) -> None:
    assert canonical(written) == stored


@pytest.mark.parametrize("text", ["", "lots", "1Xi", "1.2.3", "Mi", "1 Mi"])
def test_malformed_quantities(text: str) -> None:
    with pytest.raises(QuantityError):
        canonical(text)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e-3"]),
)
def test_canonical_keeps_the_value_and_is_stable(number: int, suffix: str) -> None:
    text = f"{number}{suffix}"
    once = canonical(text)
    assert canonical(once) == once
    assert parse(once)[0] == parse(text)[0]
    assert isinstance(parse(once)[0], Decimal)
