"""The Memcached API: defaults and validation from the one declaration, quantities, names."""

from __future__ import annotations

import dataclasses
import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.memcached import api
from memop.memcached.api import (
    DEFAULT_IMAGE,
    IMAGE_PATTERN,
    MEMCACHEDS,
    QUANTITY_PATTERN,
    InvalidSpec,
    MemcachedSpec,
    ResourceRequirements,
    parse_quantity,
    parse_spec,
    quantities_equal,
)

REPO = Path(__file__).resolve().parents[2]


def mc(spec: Any = None, name: str = "cache", **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"},
        **extra,
    }
    if spec is not None:
        obj["spec"] = spec
    return obj


def errors_of(obj: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(obj)
    return [e.message for e in caught.value.errors]


# --- names --------------------------------------------------------------------------------------


def test_names() -> None:
    assert api.Resource("cache.example.com", "v1alpha1", "memcacheds", "Memcached") == MEMCACHEDS
    assert MEMCACHEDS.namespaced
    assert (api.GROUP, api.VERSION, api.KIND) == ("cache.example.com", "v1alpha1", "Memcached")
    assert api.FINALIZER == "cache.example.com/finalizer"
    assert MEMCACHEDS.api_version == api.API_VERSION


# --- defaults -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        mc(),
        mc({}),
        {**mc(), "spec": None},
        mc({"size": None, "image": None, "memoryLimitMiB": None, "resources": None}),
    ],
)
def test_absent_and_null_fields_take_their_defaults(obj: dict[str, Any]) -> None:
    spec = parse_spec(obj)
    assert spec == MemcachedSpec(size=1, image=DEFAULT_IMAGE, memory_limit_mib=64, resources=None)
    assert spec.to_dict() == {"size": 1, "image": "memcached:1.6.26-alpine3.19", "memoryLimitMiB": 64}


def test_unknown_fields_are_ignored_like_the_server_prunes_them() -> None:
    assert parse_spec(mc({"size": 2, "replicas": 9, "resources": {"claims": [{"name": "x"}]}})).size == 2


def test_integral_floats_are_integers_booleans_are_not() -> None:
    assert parse_spec(mc({"size": 3.0})).size == 3
    assert errors_of(mc({"size": True})) == [
        'spec.size: Invalid value: "boolean": spec.size in body must be of type integer: "boolean"'
    ]


_QUANTITY_TEXT = st.from_regex(QUANTITY_PATTERN, fullmatch=True).filter(
    lambda q: not q.startswith("-") and abs(_exponent(q)) < 30
)


def _exponent(q: str) -> int:
    m = re.search(r"[eE]([+-]?[0-9]+)$", q)
    return int(m.group(1)) if m else 0


_RESOURCE_NAMES = st.sampled_from(["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "example.com/gpu"])
_QUANTITY_MAP = st.dictionaries(
    _RESOURCE_NAMES, st.one_of(_QUANTITY_TEXT, st.integers(0, 10**12)), max_size=3
)


@st.composite
def valid_specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["size"] = draw(st.integers(0, api.INT32_MAX))
    if draw(st.booleans()):
        spec["image"] = draw(st.from_regex(r"[a-z0-9./:@_-]{1,40}", fullmatch=True))
    if draw(st.booleans()):
        spec["memoryLimitMiB"] = draw(st.integers(1, api.MAX_MEMORY_LIMIT_MIB))
    if draw(st.booleans()):
        resources: dict[str, Any] = {}
        if draw(st.booleans()):
            resources["limits"] = draw(_QUANTITY_MAP)
        if draw(st.booleans()):
            # Requests no larger than limits: the pod validation parse_spec applies.
            resources["requests"] = {
                k: v
                for k, v in draw(_QUANTITY_MAP).items()
                if k not in resources.get("limits", {})
                or parse_quantity(v) <= parse_quantity(resources["limits"][k])
            }
        spec["resources"] = resources
    return spec


@given(valid_specs())
@settings(max_examples=300)
def test_valid_specs_round_trip_with_defaults_filled_in(spec: dict[str, Any]) -> None:
    parsed = parse_spec(mc(spec))
    expected = {"size": 1, "image": DEFAULT_IMAGE, "memoryLimitMiB": 64}
    expected.update({k: v for k, v in spec.items() if k != "resources"})
    if "resources" in spec:
        expected["resources"] = {
            part: {k: str(v) for k, v in values.items()}
            for part, values in spec["resources"].items()
            if values
        }
    assert parsed.to_dict() == expected
    # Parsing what to_dict gives is the identity: defaults are a fixed point.
    assert parse_spec(mc(parsed.to_dict())) == parsed


def test_declaration_is_the_single_source_of_defaults() -> None:
    schema = api.schema_of(MemcachedSpec, "")["properties"]
    defaults = MemcachedSpec()
    for f in dataclasses.fields(MemcachedSpec):
        prop = schema[f.metadata["json"]]
        if f.default is None:
            assert "default" not in prop
        else:
            assert prop["default"] == f.default == getattr(defaults, f.name)
            # Every schema default passes validation.
            assert getattr(parse_spec(mc({f.metadata["json"]: prop["default"]})), f.name) == f.default


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"size": -1},
            "spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0",
        ),
        (
            {"size": 2**31},
            "spec.size: Invalid value: 2147483648: spec.size in body should be less than or equal"
            " to 2147483647",
        ),
        (
            {"size": "3"},
            'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"',
        ),
        (
            {"size": 1.5},
            'spec.size: Invalid value: "number": spec.size in body must be of type integer: "number"',
        ),
        ({"image": ""}, 'spec.image: Invalid value: "": spec.image in body should be at least 1 chars long'),
        (
            {"image": 7},
            'spec.image: Invalid value: "integer": spec.image in body must be of type string: "integer"',
        ),
        (
            {"image": "memcached :1"},
            f"spec.image: Invalid value: \"memcached :1\": spec.image in body should match '{IMAGE_PATTERN}'",
        ),
        (
            {"memoryLimitMiB": 0},
            "spec.memoryLimitMiB: Invalid value: 0: spec.memoryLimitMiB in body should be"
            " greater than or equal to 1",
        ),
        (
            {"memoryLimitMiB": 67108864},
            "spec.memoryLimitMiB: Invalid value: 67108864: spec.memoryLimitMiB in"
            " body should be less than or equal to 1048576",
        ),
        (
            {"resources": []},
            'spec.resources: Invalid value: "array": spec.resources in body must be of type object: "array"',
        ),
        (
            {"resources": {"limits": "1"}},
            'spec.resources.limits: Invalid value: "string": spec.resources.limits'
            ' in body must be of type object: "string"',
        ),
        (
            {"resources": {"limits": {"cpu": "1 core"}}},
            'spec.resources.limits.cpu: Invalid value: "1 core": spec.resources.limits.cpu'
            f" in body should match '{QUANTITY_PATTERN}'",
        ),
        (
            {"resources": {"limits": {"cpu": 0.5}}},
            'spec.resources.limits.cpu: Invalid value: "number": spec.resources.limits.cpu'
            ' in body must be of type integer,string: "number"',
        ),
        (
            {"resources": {"requests": {"memory": "-1Mi"}}},
            'spec.resources.requests.memory: Invalid value: "-1Mi": must be greater than or equal to 0',
        ),
        (
            {"resources": {"requests": {"memory": -5}}},
            'spec.resources.requests.memory: Invalid value: "-5": must be greater than or equal to 0',
        ),
        (
            {"resources": {"limits": {"cpu": "500m"}, "requests": {"cpu": "1"}}},
            'spec.resources.requests.cpu: Invalid value: "1":'
            " must be less than or equal to cpu limit of 500m",
        ),
        (
            {"resources": {"limits": {"gpu": "1"}}},
            'spec.resources.limits.gpu: Invalid value: "gpu": must be a standard resource for containers',
        ),
        (
            {"resources": {"limits": {"kubernetes.io/foo": "1"}}},
            'spec.resources.limits.kubernetes.io/foo: Invalid value: "kubernetes.io/foo": must be a standard'
            " resource for containers",
        ),
        (
            {"resources": {"limits": {"bad name": "1"}}},
            'spec.resources.limits.bad name: Invalid value: "bad name": name part must consist of'
            " alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric"
            " character",
        ),
        ("big", 'spec: Invalid value: "string": spec in body must be of type object: "string"'),
    ],
)
def test_invalid_fields_are_named_like_the_api_server_does(spec: Any, message: str) -> None:
    assert errors_of(mc(spec)) == [message]
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(mc(spec))
    assert str(caught.value) == message
    assert caught.value.errors[0].field == message.split(":", maxsplit=1)[0]


def test_image_with_a_trailing_newline_is_refused() -> None:
    # Python's $ matches before a final newline; Go's (the API server's) does not.
    assert errors_of(mc({"image": "memcached\n"}))[0].startswith("spec.image: Invalid value:")


# Go's unicode.IsSpace, i.e. the Unicode White_Space property, written out from its definition
# (not from memop's constant): what strings.TrimSpace trims, so what Kubernetes refuses at either
# end of a container image ("must not have leading or trailing whitespace").
GO_SPACE = [
    *"\t\n\v\f\r ",
    "\u0085",  # NEL
    "\u00a0",  # NO-BREAK SPACE
    "\u1680",  # OGHAM SPACE MARK
    *(chr(c) for c in range(0x2000, 0x200B)),  # EN QUAD .. HAIR SPACE
    "\u2028",  # LINE SEPARATOR
    "\u2029",  # PARAGRAPH SEPARATOR
    "\u202f",  # NARROW NO-BREAK SPACE
    "\u205f",  # MEDIUM MATHEMATICAL SPACE
    "\u3000",  # IDEOGRAPHIC SPACE
]


@pytest.mark.parametrize("space", GO_SPACE, ids=[f"U+{ord(c):04X}" for c in GO_SPACE])
@pytest.mark.parametrize("where", ["leading", "trailing", "inside"])
def test_image_with_unicode_whitespace_is_refused(space: str, where: str) -> None:
    image = {"leading": space + "memcached:1", "trailing": "memcached:1" + space}.get(
        where, f"memcached{space}:1"
    )
    assert errors_of(mc({"image": image})) == [
        f"spec.image: Invalid value: {json.dumps(image, ensure_ascii=False)}: spec.image in body should"
        f" match '{IMAGE_PATTERN}'"
    ]
    # The schema says the same (the server checks it with this very pattern).
    assert not re.fullmatch(IMAGE_PATTERN, image)


@pytest.mark.parametrize(
    "char",
    ["\u200b", "\ufeff", "\u180e", "\x1c", "\x1f", "\u00ad"],
    ids=["ZWSP", "BOM", "MVS", "FS", "US", "SHY"],
)
def test_characters_that_are_not_go_whitespace_pass_as_kubernetes_lets_them(char: str) -> None:
    # Not White_Space (U+180E left it in Unicode 6.3; Python's isspace counts U+001C..U+001F):
    # Kubernetes accepts these in an image, so memop has no business refusing them.
    assert parse_spec(mc({"image": f"memcached{char}"})).image == f"memcached{char}"


@given(st.text(min_size=1, max_size=8))
def test_image_is_refused_exactly_when_it_holds_go_whitespace(image: str) -> None:
    has_space = any(c in GO_SPACE for c in image)
    try:
        parse_spec(mc({"image": image}))
    except InvalidSpec:
        assert has_space
    else:
        assert not has_space
        # Kubernetes' own check (strings.TrimSpace leaves it alone) is therefore met too.
        assert image.strip("".join(GO_SPACE)) == image


def test_every_bad_field_is_reported_in_one_error() -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(mc({"size": -1, "image": "", "memoryLimitMiB": "x"}))
    fields = [e.field for e in caught.value.errors]
    assert fields == ["spec.size", "spec.image", "spec.memoryLimitMiB"]
    text = str(caught.value)
    assert text.startswith("[spec.size: Invalid value: -1:")
    assert text.endswith("]")
    assert text.count(", spec.") == 2


def test_name_too_long_for_a_label_value_is_refused() -> None:
    assert parse_spec(mc({}, name="a" * 63)).size == 1
    assert errors_of(mc({}, name="a" * 64)) == [
        f'metadata.name: Invalid value: "{"a" * 64}": must be no more than 63 characters'
    ]


@pytest.mark.parametrize(
    "name", ["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "example.com/gpu", "nvidia.com/gpu"]
)
def test_container_resource_names_the_api_accepts(name: str) -> None:
    parsed = parse_spec(mc({"resources": {"limits": {name: 1}}}))
    assert parsed.resources == ResourceRequirements(limits={name: "1"}, requests={})


def test_requests_equal_to_limits_in_other_spellings_are_fine() -> None:
    spec = parse_spec(
        mc(
            {
                "resources": {
                    "limits": {"cpu": "1", "memory": "64Mi"},
                    "requests": {"cpu": "1000m", "memory": 67108864},
                }
            }
        )
    )
    assert spec.resources is not None
    assert spec.resources.to_dict() == {
        "limits": {"cpu": "1", "memory": "64Mi"},
        "requests": {"cpu": "1000m", "memory": "67108864"},
    }


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)
_SPECISH = st.fixed_dictionaries(
    {},
    optional={
        "size": _JSON,
        "image": _JSON,
        "memoryLimitMiB": _JSON,
        "resources": _JSON
        | st.fixed_dictionaries(
            {},
            optional={
                "limits": _JSON | st.dictionaries(st.text(max_size=6), _JSON),
                "requests": _JSON | st.dictionaries(st.text(max_size=6), _JSON),
            },
        ),
    },
)


@given(st.one_of(_JSON, _SPECISH))
@settings(max_examples=300)
def test_garbage_gives_a_spec_or_invalid_spec_nothing_else(spec: Any) -> None:
    errors: tuple[api.FieldError, ...] = ()
    try:
        parsed = parse_spec(mc(spec))
    except InvalidSpec as invalid:
        errors = invalid.errors
        assert errors
    else:
        assert isinstance(parsed, MemcachedSpec)
    for error in errors:
        assert error.message.startswith(f"{error.field}: ")
        assert error.field == "spec" or error.field.startswith("spec.")


@given(st.integers(-(2**40), 2**40))
@settings(max_examples=100)
def test_integer_bounds_come_from_the_schema(value: int) -> None:
    props = api.schema_of(MemcachedSpec, "")["properties"]
    for json_name in ("size", "memoryLimitMiB"):
        ok = props[json_name]["minimum"] <= value <= props[json_name]["maximum"]
        try:
            parse_spec(mc({json_name: value}))
        except InvalidSpec:
            assert not ok
        else:
            assert ok


# --- quantities ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("1000m", "1"),
        ("64Mi", "67108864"),
        ("64Mi", 67108864),
        ("1k", "1e3"),
        ("1k", "1E3"),
        ("0.5Gi", "512Mi"),
        ("1.5", "1500m"),
        (".5", "500m"),
        ("5.", "5"),
        ("+1", "1"),
        ("1e-10", "1n"),
        ("0.1n", "1n"),
        ("1u", "1000n"),
        ("1M", "1000k"),
        ("1Ei", str(2**60)),
        ("1E", str(10**18)),
        ("0", "-0"),
        ("2", 2),
    ],
)
def test_equal_quantities(a: str | int, b: str | int) -> None:
    assert parse_quantity(a) == parse_quantity(b)
    assert quantities_equal(a, b)


def test_values() -> None:
    assert parse_quantity("-1.5Ki") == -1536
    assert parse_quantity("100m") == Fraction(1, 10)
    assert not quantities_equal("1", "1001m")
    assert not quantities_equal("1Mi", "1M")
    assert quantities_equal("junk", "junk")
    assert not quantities_equal("junk", "junk2")


@pytest.mark.parametrize(
    "text",
    [
        "",
        ".",
        "Ki",
        "1.5.5",
        "1e1.5",
        "1 Mi",
        "1mi",
        "1KI",
        "1Kb",
        "1\n",
        " 1",
        "1e",
        "++1",
        "1e+",
        "0x10",
        "1_000",
        "١",
    ],
)
def test_not_quantities(text: str) -> None:
    assert re.fullmatch(QUANTITY_PATTERN, text) is None
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(text)


def test_not_quantity_types() -> None:
    for value in (True, 1.5, None, [1]):
        with pytest.raises(TypeError):
            parse_quantity(value)  # type: ignore[arg-type]


def test_absurd_exponent_is_refused_quickly() -> None:
    with pytest.raises(ValueError, match="exponent"):
        parse_quantity("1e999999999")
    assert "1e99999" in errors_of(mc({"resources": {"limits": {"cpu": "1e99999"}}}))[0]


@given(st.text(alphabet="0123456789.+-eEnumkKMGTPi ", max_size=8))
@settings(max_examples=500)
def test_pattern_and_parser_accept_the_same_strings(text: str) -> None:
    matches = re.fullmatch(QUANTITY_PATTERN, text) is not None
    try:
        parse_quantity(text)
    except ValueError:
        assert not matches
    else:
        assert matches


@given(_QUANTITY_TEXT)
@settings(max_examples=200)
def test_every_string_of_the_grammar_parses(text: str) -> None:
    value = parse_quantity(text)
    assert value * 10**9 == int(value * 10**9)  # nano precision, like the API server


# --- the sample ---------------------------------------------------------------------------------


def test_sample_is_a_valid_memcached_of_size_3() -> None:
    sample = yaml.safe_load((REPO / "manifests/samples/cache_v1alpha1_memcached.yaml").read_text())
    assert (sample["apiVersion"], sample["kind"]) == (api.API_VERSION, api.KIND)
    spec = parse_spec(sample)
    assert spec.size == 3
