"""Label selectors: the grammar, validation and matching of k8s.io/apimachinery/pkg/labels."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.runtime.cache.labels import InvalidSelectorError, Requirement, Selector

# --- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("   ", ""),
        ("a=b", "a=b"),
        ("a==b", "a==b"),
        ("a!=b", "a!=b"),
        ("a in (x,y)", "a in (x,y)"),
        ("a notin (y,x)", "a notin (x,y)"),
        ("a", "a"),
        ("!a", "!a"),
        ("! a", "!a"),
        ("a>3", "a>3"),
        ("a=", "a="),
        ("a!=", "a!="),
        ("a in ()", "a in ()"),
        ("a in (,x)", "a in (,x)"),
        ("a in (x,)", "a in (,x)"),
        ("a in (x,,y)", "a in (,x,y)"),
        ("a in(x)", "a in (x)"),
        ("a in (x, y)", "a in (x,y)"),
        ("a in (x,x)", "a in (x)"),
        (" a = b ,\tc\n!= d\r", "a=b,c!=d"),
        # Sorted by key, stably: same-key requirements keep their order.
        ("z=1,a=2,m", "a=2,m,z=1"),
        ("k!=2,k!=1", "k!=2,k!=1"),
        # "in"/"notin" are keywords only in operator position.
        ("in in (in,notin)", "in in (in,notin)"),
        ("notin notin (in)", "notin notin (in)"),
        ("in", "in"),
        ("!notin", "!notin"),
        ("a=in", "a=in"),
        ("example.com/app.kubernetes.io-x=v_1.2-3", "example.com/app.kubernetes.io-x=v_1.2-3"),
        (
            "app.kubernetes.io/name=memcached,app.kubernetes.io/instance in (a,b)",
            "app.kubernetes.io/instance in (a,b),app.kubernetes.io/name=memcached",
        ),
    ],
)
def test_parse_canonical_form(text: str, canonical: str) -> None:
    sel = Selector.parse(text)
    assert str(sel) == canonical
    assert Selector.parse(canonical) == sel


def test_none_and_empty_select_everything() -> None:
    for sel in (
        Selector.parse(None),
        Selector.parse(""),
        Selector.from_label_selector(None),
        Selector.from_label_selector({}),
        Selector.from_label_selector({"matchLabels": {}}),
    ):
        assert sel.is_empty()
        assert str(sel) == ""
        assert sel.matches(None)
        assert sel.matches({"a": "b"})
        assert sel.exact_pairs() == {}
    assert not Selector.parse("a").is_empty()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        (",", "found ',', expected: !, identifier, or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a,,b", "found ',', expected: identifier after ','"),
        ("a in", "unable to parse requirement: found '' expected: '('"),
        ("a in x", "unable to parse requirement: found 'x' expected: '('"),
        ("a in (x", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'"),
        ("a in (,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("a===b", "unable to parse requirement: found '=', expected: identifier"),
        ("=b", "found '=', expected: !, identifier, or 'end of string'"),
        ("a>x", "for 'Gt', 'Lt' operators, the value must be an integer"),
        ("a<", "for 'Gt', 'Lt' operators, the value must be an integer"),
        ("a<-3", 'values[0][a]: Invalid value: "-3": a valid label must be'),  # as in Go: not a label value
        ("a>99999999999999999999", "the value must be an integer"),
        ("-a", '<nil>: Invalid value: "-a": name part must consist of alphanumeric characters'),
        ("a-", "name part must consist of alphanumeric characters"),
        ("a/b/c", "a qualified name must consist of alphanumeric characters"),
        ("/a", "prefix part must be non-empty"),
        ("a/", "name part must be non-empty"),
        ("Example.com/a", "prefix part a lowercase RFC 1123 subdomain must consist of"),
        ("x" * 64, "name part must be no more than 63 characters"),
        ("a=-b", 'values[0][a]: Invalid value: "-b": a valid label must be an empty string'),
        ("a=" + "v" * 64, "must be no more than 63 characters"),
        ("a in (ok,b@d)", 'Invalid value: "b@d"'),
        ("a=b\x00", "Invalid value"),
        ("a=é", "Invalid value"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidSelectorError) as info:
        Selector.parse(text)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_error_texts_match_the_server_exactly() -> None:
    prefix = r"^unable to parse requirement: <nil>: Invalid value: \"-a\": "
    with pytest.raises(ValueError, match=prefix) as info:
        Selector.parse("-a")
    assert str(info.value).endswith(
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    )


def test_key_and_value_length_limits() -> None:
    Selector.parse("x" * 63 + "=" + "v" * 63)
    prefix = ".".join(["p" * 63] * 3) + "." + "q" * 61  # 253 characters
    assert len(prefix) == 253
    Selector.parse(prefix + "/" + "n" * 63)
    with pytest.raises(ValueError, match="prefix part must be no more than 253 characters"):
        Selector.parse(prefix + "q/n")


# --- matching -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        ("a=b", None, False),
        ("a==b", {"a": "b", "x": "y"}, True),
        ("a=", {"a": ""}, True),
        ("a=", {}, False),
        ("a!=b", {"a": "b"}, False),
        ("a!=b", {"a": "c"}, True),
        ("a!=b", {}, True),  # != matches objects that lack the key
        ("a!=", {"a": ""}, False),
        ("a in (x,y)", {"a": "y"}, True),
        ("a in (x,y)", {"a": "z"}, False),
        ("a in (x,y)", {}, False),
        ("a in ()", {"a": ""}, True),
        ("a notin (x,y)", {"a": "x"}, False),
        ("a notin (x,y)", {"a": "z"}, True),
        ("a notin (x,y)", {}, True),  # notin matches objects that lack the key
        ("a", {"a": ""}, True),
        ("a", {"b": "a"}, False),
        ("!a", {"b": "a"}, True),
        ("!a", {"a": ""}, False),
        ("!a", None, True),
        ("n>3", {"n": "4"}, True),
        ("n>3", {"n": "3"}, False),
        ("n>3", {"n": "x"}, False),
        ("n>3", {"n": "+4"}, True),
        ("n>3", {"n": " 4"}, False),
        ("n>3", {"n": "4_0"}, False),
        ("n>3", {}, False),
        ("n<1", {"n": "-2"}, True),
        ("n<1", {"n": "1"}, False),
        ("n<10", {"n": "99999999999999999999"}, False),  # out of int64: not a number to Go
        ("a=b,c!=d,e in (f),g notin (h),i,!j,n>1", {"a": "b", "c": "x", "e": "f", "i": "", "n": "2"}, True),
        (
            "a=b,c!=d,e in (f),g notin (h),i,!j,n>1",
            {"a": "b", "c": "x", "e": "f", "i": "", "n": "2", "j": "1"},
            False,
        ),
        ("a=b,a=c", {"a": "b"}, False),
    ],
)
def test_matches(text: str, labels: dict[str, str] | None, expected: bool) -> None:
    assert Selector.parse(text).matches(labels) is expected


def test_exact_pairs() -> None:
    assert Selector.parse("a=b,c==d,e in (f),g in (h,i),j!=k,l,!m,n>1").exact_pairs() == {
        "a": "b",
        "c": "d",
        "e": "f",
    }
    # Conflicting exact requirements: either value is a correct index key (nothing can match).
    assert Selector.parse("a=b,a=c").exact_pairs() in ({"a": "b"}, {"a": "c"})


def test_equality_and_hash_ignore_order_and_duplicates() -> None:
    a = Selector.parse("x=1,y in (b,a),!z")
    b = Selector.parse("!z, y in (a,b), x=1, x=1")
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != Selector.parse("x=1")
    assert a != "x=1,y in (a,b),!z"
    assert Selector.parse("a=b") != Selector.parse("a==b")  # different operators, as in Go


# --- from_label_selector ------------------------------------------------------------------------


def test_from_validated_set_selects_what_carries_every_pair() -> None:
    selector = Selector.from_validated_set({"app": "memcached", "instance": "a"})
    assert selector == Selector.parse("instance=a,app=memcached")
    assert selector.exact_pairs() == {"app": "memcached", "instance": "a"}
    assert selector.matches({"app": "memcached", "instance": "a", "extra": "x"})
    assert not selector.matches({"app": "memcached", "instance": "b"})
    assert not selector.matches({"app": "memcached"})
    assert Selector.from_validated_set({}).is_empty()
    assert not Selector.from_validated_set({"a": "b"}).is_empty()
    # Built without __init__ (its requirements made on first use): the same selector in every
    # way a parsed one is, whichever is asked first.
    parsed = Selector.parse("app=memcached,instance=a")
    assert hash(Selector.from_validated_set({"instance": "a", "app": "memcached"})) == hash(parsed)
    assert str(Selector.from_validated_set({"instance": "a", "app": "memcached"})) == str(parsed)
    assert (
        Selector.from_validated_set({"instance": "a", "app": "memcached"}).requirements == parsed.requirements
    )
    assert {parsed: 1}[Selector.from_validated_set({"app": "memcached", "instance": "a"})] == 1


def test_implies_compares_requirements_as_written() -> None:
    read = Selector.from_validated_set({"app": "memcached", "instance": "a"})
    assert read.implies(Selector.parse("app=memcached"))
    assert read.implies(Selector.parse("instance=a,app=memcached"))
    assert read.implies(Selector())
    assert not read.implies(Selector.parse("app=other"))
    assert not read.implies(Selector.parse("app in (memcached)"))  # as written: another requirement
    assert not Selector().implies(Selector.parse("app=memcached"))
    parsed = Selector.parse("app=memcached,tier in (a,b),!legacy")
    assert parsed.implies(Selector.parse("tier in (b,a)"))
    assert parsed.implies(Selector.parse("!legacy,app=memcached"))
    assert not parsed.implies(Selector.parse("tier in (a)"))


def test_from_label_selector() -> None:
    sel = Selector.from_label_selector(
        {
            "matchLabels": {"app": "memcached", "tier": "cache"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "staging"]},
                {"key": "canary", "operator": "NotIn", "values": ["true"]},
                {"key": "owner", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []},
            ],
        }
    )
    assert str(sel) == "app=memcached,canary notin (true),env in (prod,staging),!legacy,owner,tier=cache"
    assert Selector.parse(str(sel)) == sel
    base = {"app": "memcached", "tier": "cache", "env": "prod", "owner": "me"}
    assert sel.matches(base)
    assert sel.matches({**base, "canary": "false"})
    assert not sel.matches({**base, "canary": "true"})
    assert not sel.matches({**base, "legacy": "1"})
    assert not sel.matches({k: v for k, v in base.items() if k != "owner"})
    assert not sel.matches({**base, "env": "dev"})
    assert sel.exact_pairs() == {"app": "memcached", "tier": "cache"}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        # Bad values print as JSON (v1.36), a missing list as Go's nil slice does.
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: ["x"]: values set must be empty for exists and does not exist',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]},
            "values set must be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "in", "values": ["x"]}]},
            '"in" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            '"Gt" is not a valid label selector operator',
        ),
        ({"matchExpressions": [{"key": "a"}]}, '"None" is not a valid label selector operator'),
        ({"matchExpressions": [{"key": "-a", "operator": "Exists"}]}, 'key: Invalid value: "-a"'),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}, "list of strings"),
        ({"matchExpressions": ["a"]}, "must be an object"),
        ({"matchExpressions": {"key": "a"}}, "must be a list"),
        ({"matchLabels": {"a": "-b"}}, 'Invalid value: "-b"'),
        ({"matchLabels": {"a": 1}}, "strings to strings"),
        ({"matchLabels": ["a"]}, "must be an object"),
    ],
)
def test_from_label_selector_errors(obj: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidSelectorError) as info:
        Selector.from_label_selector(obj)
    assert message in str(info.value)


def test_requirement_new_validates() -> None:
    assert Requirement.new("a", "in", ["y", "x", "y"]).values == ("x", "y")
    with pytest.raises(ValueError, match="exact-match compatibility requires one single value"):
        Requirement.new("a", "=", ["x", "y"])
    with pytest.raises(ValueError, match=r"operator: Unsupported value: \"~\""):
        Requirement.new("a", "~")
    with pytest.raises(ValueError, match=r"^\[key: Invalid value: \"-\".*, values: Invalid value"):
        Requirement.new("-", "in")


# --- properties ---------------------------------------------------------------------------------

_ALNUM = "abcxyzABZ019"
_KEY_POOL = ["a", "b", "app", "in", "notin", "example.com/a", "x.y-z_w"]
_VALUE_POOL = ["", "v", "w", "in", "notin", "1", "2", "10", "A.b_c-9"]

_name = st.builds(
    lambda first, mid, last: first + mid + last if last else first,
    st.sampled_from(_ALNUM),
    st.text(alphabet=_ALNUM + "-_.", max_size=5),
    st.sampled_from(["", *_ALNUM]),
)
_label = st.builds(
    lambda first, mid, last: first + mid + last if last else first,
    st.sampled_from("abz09"),
    st.text(alphabet="abz09-", max_size=4),
    st.sampled_from(["", "a", "9"]),
)
_prefix = st.lists(_label, min_size=1, max_size=3).map(".".join)
_key = st.one_of(
    st.sampled_from(_KEY_POOL),
    _name,
    st.builds(lambda p, n: f"{p}/{n}", _prefix, _name),
)
_value = st.one_of(st.sampled_from(_VALUE_POOL), _name)
_int_value = st.integers(min_value=0, max_value=2**63 - 1).map(str)
_label_int = st.integers(min_value=-(2**64), max_value=2**64).map(str)

# A requirement as plain data: (key, operator, values) with operators spelt as in the text.
_requirement = st.one_of(
    st.tuples(_key, st.sampled_from(["=", "==", "!="]), st.lists(_value, min_size=1, max_size=1)),
    # Unique values: like Go's parser, ours rejects two empty values in a row before ')' ("(,,)").
    st.tuples(_key, st.sampled_from(["in", "notin"]), st.lists(_value, min_size=1, max_size=4, unique=True)),
    st.tuples(_key, st.sampled_from(["exists", "!"]), st.just([])),
    st.tuples(_key, st.sampled_from([">", "<"]), st.lists(_int_value, min_size=1, max_size=1)),
)
_labels = st.one_of(
    st.none(),
    st.dictionaries(
        st.one_of(st.sampled_from(_KEY_POOL), _key),
        st.one_of(st.sampled_from([*_VALUE_POOL, "-2", "+3", " 4", "٣"]), _label_int, _value),
        max_size=6,
    ),
)
_space = st.sampled_from(["", "", " ", "  ", "\t", "\n", "\r"])


def _render(req: tuple[str, str, list[str]], ws: list[str]) -> str:
    """The requirement as text, with arbitrary whitespace where the grammar allows it."""
    key, op, values = req
    if op == "exists":
        return f"{ws[0]}{key}{ws[1]}"
    if op == "!":
        return f"{ws[0]}!{ws[1]}{key}{ws[2]}"
    if op in ("in", "notin"):
        inner = ",".join(f"{ws[3]}{v}{ws[4]}" for v in values)
        # The keyword needs whitespace on its left to be a separate token.
        return f"{ws[0]}{key} {ws[1]}{op}{ws[2]}({inner}){ws[5]}"
    return f"{ws[0]}{key}{ws[1]}{op}{ws[2]}{values[0]}{ws[3]}"


def _reference_matches(reqs: list[tuple[str, str, list[str]]], labels: dict[str, str] | None) -> bool:
    """The documented semantics, written out one requirement at a time."""
    labels = labels or {}
    for key, op, values in reqs:
        present = key in labels
        value = labels.get(key)
        if op in ("=", "==", "in"):
            ok = present and value in values
        elif op in ("!=", "notin"):
            ok = not present or value not in values
        elif op == "exists":
            ok = present
        elif op == "!":
            ok = not present
        else:
            # strconv.ParseInt: optional sign, ASCII digits, nothing else.
            text = labels.get(key, "")
            have = int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None
            ok = (
                have is not None
                and -(2**63) <= have < 2**63
                and (have > int(values[0]) if op == ">" else have < int(values[0]))
            )
        if not ok:
            return False
    return True


@settings(max_examples=300, deadline=None)
@given(
    reqs=st.lists(_requirement, max_size=5),
    spaces=st.lists(st.lists(_space, min_size=6, max_size=6), min_size=5, max_size=5),
    labels=st.lists(_labels, min_size=1, max_size=4),
)
def test_parse_matches_reference_and_round_trips(
    reqs: list[tuple[str, str, list[str]]], spaces: list[list[str]], labels: list[dict[str, str] | None]
) -> None:
    text = ",".join(_render(r, ws) for r, ws in zip(reqs, spaces, strict=False))
    sel = Selector.parse(text)
    assert len(sel.requirements) == len(reqs)
    assert sel.is_empty() is (not reqs)
    again = Selector.parse(str(sel))
    assert again == sel
    assert hash(again) == hash(sel)
    assert str(again) == str(sel)
    for ls in labels:
        expected = _reference_matches(reqs, ls)
        assert sel.matches(ls) is expected
        assert again.matches(ls) is expected
        assert all(r.matches(ls or {}) for r in sel.requirements) is expected
        if expected and ls is not None:
            # Every selected object carries the exact pairs (what makes them a safe index key).
            assert all(ls.get(k) == v for k, v in sel.exact_pairs().items())


@settings(max_examples=200, deadline=None)
@given(
    match_labels=st.dictionaries(_key, _value, max_size=3),
    exprs=st.lists(
        st.one_of(
            st.tuples(_key, st.sampled_from(["In", "NotIn"]), st.lists(_value, min_size=1, max_size=3)),
            st.tuples(_key, st.sampled_from(["Exists", "DoesNotExist"]), st.just([])),
        ),
        max_size=3,
    ),
    labels=st.lists(_labels, min_size=1, max_size=4),
)
def test_from_label_selector_matches_reference(
    match_labels: dict[str, str], exprs: list[tuple[str, str, list[str]]], labels: list[dict[str, str] | None]
) -> None:
    obj = {
        "matchLabels": match_labels,
        "matchExpressions": [{"key": k, "operator": op, "values": vs} for k, op, vs in exprs],
    }
    sel = Selector.from_label_selector(obj)
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    reqs = [(k, "=", [v]) for k, v in match_labels.items()] + [(k, ops[op], vs) for k, op, vs in exprs]
    assert Selector.parse(str(sel)) == sel
    for ls in labels:
        assert sel.matches(ls) is _reference_matches(reqs, ls)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab=!(),<> \tinotx-1", max_size=20))
def test_parse_never_fails_other_than_with_value_error(text: str) -> None:
    try:
        sel = Selector.parse(text)
    except InvalidSelectorError:
        return
    assert Selector.parse(str(sel)) == sel


def test_malformed_label_values_do_not_match_set_requirements() -> None:
    bad: Any = {"a": {"not": "a string"}, "n": ["1"]}
    assert not Selector.parse("a in (x,y)").matches(bad)
    assert Selector.parse("a notin (x,y)").matches(bad)
    assert not Selector.parse("n>0").matches(bad)
    assert Selector.parse("a,n").matches(bad)
