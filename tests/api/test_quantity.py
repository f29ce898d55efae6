"""memop.runtime.Quantity against apimachinery's resource.Quantity (cases from its quantity_test.go)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from memop.runtime import InvalidObject, Model, Quantity, QuantityError


@pytest.mark.parametrize(
    ("text", "value", "fmt"),
    [
        ("0", "0", "DecimalSI"),
        ("0Ki", "0", "BinarySI"),
        ("1Ki", "1024", "BinarySI"),
        ("3Ei", str(3 * 2**60), "BinarySI"),
        ("5n", "5e-9", "DecimalSI"),
        ("50k", "5e4", "DecimalSI"),
        ("300T", "3e14", "DecimalSI"),
        ("1E", "1e18", "DecimalSI"),
        ("1E-3", "1e-3", "DecimalExponent"),
        ("1e14", "1e14", "DecimalExponent"),
        ("100.035k", "100035", "DecimalSI"),
        ("0.0005k", "0.5", "DecimalSI"),
        ("0.5e-2", "0.005", "DecimalExponent"),
        ("1.3E+6", "1.3e6", "DecimalExponent"),
        ("6.987654321G", "6987654321", "DecimalSI"),
        ("1.01E", "1.01e18", "DecimalSI"),
        # rounded up to whole nano units, away from zero
        ("3.001n", "4e-9", "DecimalSI"),
        ("-3.001n", "-4e-9", "DecimalSI"),
        ("1.1E-9", "2e-9", "DecimalExponent"),
        ("0.0000000005", "1e-9", "DecimalSI"),
        ("0.00000012345", "124e-9", "DecimalSI"),
        # binary quantities are capped at 2^63-1; below 1 they are decimal
        ("9Ei", str(2**63 - 1), "BinarySI"),
        ("9223372036854775807Ki", str(2**63 - 1), "BinarySI"),
        ("12E", "12e18", "DecimalSI"),
        ("100.035Ki", "102435.84", "BinarySI"),
        ("0.000000000001Ki", "2e-9", "DecimalSI"),
        (".001", "0.001", "DecimalSI"),
        ("1.", "1", "DecimalSI"),
        ("1.G", "1e9", "DecimalSI"),
        ("+1.5", "1.5", "DecimalSI"),
    ],
)
def test_parsing_gives_apimachinerys_value_and_format(text: str, value: str, fmt: str) -> None:
    quantity = Quantity(text)
    assert quantity.as_decimal() == Decimal(value)
    assert quantity.format == fmt


@pytest.mark.parametrize(
    "text",
    [
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "0.1am",
        "aoeu",
        ".5i",
        "1i",
        "-3.01i",
        "-3.01e-",
        " 1",
        "1 ",
        "",
        ".",
        "Mi",
    ],
)
def test_malformed_quantities_are_refused_in_the_servers_words(text: str) -> None:
    with pytest.raises(QuantityError, match=r"quantities must match the regular expression"):
        Quantity(text)


def test_an_exponent_beyond_the_limit_is_refused() -> None:
    with pytest.raises(QuantityError, match="exponents must be within"):
        Quantity("1e1001")


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("1000m", "1"),
        ("0.5", "500m"),
        ("1024Ki", "1Mi"),
        ("1024Mi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("307200Ki", "300Mi"),
        ("1025024Mi", "1001Gi"),
        ("5000m", "5"),
        ("1000M", "1G"),
        ("0.001T", "1G"),
        ("1000u", "1m"),
        ("1.08", "1080m"),
        ("1080000000n", "1080m"),
        ("1000E", "1e21"),
        ("5000E", "5e21"),
        ("1000000E", "1e24"),
        (".001e12", "1e9"),
        ("0.001e0", "1e-3"),
        ("1000e-12", "1e-9"),
        ("80e-3", "80e-3"),
        ("00", "0"),
        ("1025", "1025"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
        ("-1.5Gi", "-1536Mi"),
        ("-9.01", "-9010m"),
        ("129e6", "129e6"),
        ("2000", "2k"),
    ],
)
def test_str_is_the_canonical_form(written: str, canonical: str) -> None:
    assert str(Quantity(written)) == canonical
    assert str(Quantity(canonical)) == canonical


def test_quantities_compare_by_value_across_forms() -> None:
    assert Quantity("1") == Quantity("1000m") == Quantity("1e0") == 1 == Quantity(1)
    assert Quantity("1Ki") == Quantity("1024") == "1.024k"
    assert len({Quantity("1"), Quantity("1000m"), Quantity("0.001k")}) == 1
    assert Quantity("100m") > Quantity("50m")
    assert Quantity("10000T") > Quantity("100Gi")
    assert Quantity("0") == Quantity("0Ki")
    assert sorted([Quantity("1Gi"), Quantity("1G"), Quantity("1M")]) == ["1M", "1G", "1Gi"]
    assert Quantity("1") != "not a quantity"
    assert Quantity("1") != object()


def test_value_and_milli_value_round_up_away_from_zero() -> None:
    assert Quantity("9.01").value() == 10
    assert Quantity("-9.01").value() == -10
    assert Quantity("1.5Gi").value() == 1610612736
    assert Quantity("1.0001m").milli_value() == 2
    assert Quantity("100m").milli_value() == 100
    assert Quantity("1Ki").milli_value() == 1024000


def test_arithmetic_keeps_the_receivers_format_unless_it_is_zero() -> None:
    assert str(Quantity("0") + Quantity("1Gi")) == "1Gi"
    assert str(Quantity("1Gi") + Quantity("0")) == "1Gi"
    assert str(Quantity("0") - Quantity("100m")) == "-100m"
    assert str(Quantity("1Gi") - "512Mi") == "512Mi"
    assert str(Quantity("1") + "500m") == "1500m"
    assert str(-Quantity("100m")) == "-100m"


def test_numbers_are_quantities_and_other_things_are_not() -> None:
    assert str(Quantity(2048)) == "2048"
    assert str(Quantity(0.5)) == "500m"
    assert str(Quantity(Quantity("1Ki"))) == "1Ki"
    with pytest.raises(QuantityError):
        Quantity(True)
    with pytest.raises(QuantityError):
        Quantity(float("nan"))


class Limits(Model):
    memory: Quantity = Quantity("64Mi")
    cpu: Quantity | None = None
    extra: dict[str, Quantity] = Field(default_factory=dict)


def test_a_quantity_field_serialises_canonically_and_parses_strings_and_integers() -> None:
    limits = Limits(memory="1024Mi", cpu=0.5)  # type: ignore[arg-type]
    assert limits.to_dict() == {"memory": "1Gi", "cpu": "500m", "extra": {}}
    parsed = Limits.parse({"memory": 1073741824, "extra": {"gpu": "1"}})
    assert parsed.memory == Quantity("1Gi")
    assert parsed.extra == {"gpu": Quantity(1)}


def test_a_quantity_field_refuses_what_the_schema_refuses() -> None:
    with pytest.raises(InvalidObject) as caught:
        Limits.parse({"memory": 0.5, "cpu": "lots", "extra": {"gpu": True}})
    assert [(e.field, e.reason) for e in caught.value.errors] == [
        ("memory", "FieldValueTypeInvalid"),
        ("cpu", "FieldValueInvalid"),
        ("extra.gpu", "FieldValueTypeInvalid"),
    ]
    assert caught.value.errors[0].message == (
        'Invalid value: "number": memory in body must be of type integer,string: "number"'
    )
    assert caught.value.errors[1].message.startswith(
        'Invalid value: "lots": cpu in body should match \'^(\\+|-)?'
    )


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.integers(min_value=0, max_value=6),
    st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "e3", "e-3", "E6"]),
)
def test_canonical_form_keeps_the_value_and_is_a_fixed_point(whole: int, decimals: int, suffix: str) -> None:
    number = f"{whole}" if not decimals else f"{whole}.{abs(whole) % 10**decimals:0{decimals}d}"
    quantity = Quantity(number + suffix)
    again = Quantity(str(quantity))
    assert again == quantity
    assert str(again) == str(quantity)
    assert hash(again) == hash(quantity)


def test_quantities_sum_and_zero_is_false() -> None:
    assert sum([Quantity("500m"), Quantity("1"), Quantity("1500m")]) == Quantity("3")
    assert str(sum([Quantity("1Gi"), Quantity("1Gi")], Quantity("0"))) == "2Gi"
    assert not Quantity("0m")
    assert Quantity("1n")


def test_pydantics_own_json_schema_works_for_the_field_types() -> None:
    from memop.runtime import IntOrString  # noqa: PLC0415

    class Sized(Model):
        size: Quantity
        port: IntOrString = 80

    properties = Sized.model_json_schema()["properties"]
    assert properties["size"]["x-kubernetes-int-or-string"] is True
    assert properties["port"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
