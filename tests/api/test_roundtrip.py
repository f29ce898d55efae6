"""Random objects of a typed kind through its generated schema and back, and arbitrary JSON into
``parse``: the Python types and the CRD accept the same objects."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kube_structural import problems
from pydantic import Field

from memop.runtime import (
    Client,
    CustomResource,
    DNS1123Label,
    IntOrString,
    Invalid,
    InvalidObject,
    LabelKey,
    LabelValue,
    ListType,
    Model,
    ObjectMeta,
    Quantity,
    Status,
)
from memop.runtime.api.errors import go_value
from memop.runtime.api.schema import openapi_schema
from memop.runtime.cache.store import dig
from memop.testing import InstallCrds
from memop.testing.apiserver import schema as openapi


class Port(Model):
    """A port a container listens on."""

    container_port: int = Field(ge=1, le=65535)
    name: DNS1123Label | None = None
    protocol: Literal["TCP", "UDP"] = "TCP"


class Container(Model):
    name: DNS1123Label
    image: str = Field(min_length=1, max_length=200)
    ports: Annotated[list[Port], ListType("map", keys=("container_port",))] = []
    resources: dict[str, Quantity] = {}
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"


class Rollout(Model):
    max_unavailable: IntOrString = "25%"
    max_surge: IntOrString | None = None


class ShopSpec(Model):
    """What a shop runs."""

    replicas: int = Field(default=1, ge=0, le=100)
    containers: list[Container] = Field(min_length=1, max_length=3)
    labels: dict[LabelKey, LabelValue] = {}
    rollout: Rollout = Rollout()
    tags: Annotated[list[str], ListType("set")] = []
    weight: float | None = None
    memory: Quantity | None = None
    extra: dict[str, Any] = {}
    suspend: bool = False


class ShopStatus(Status):
    ready_replicas: int = 0
    url: str | None = None


class Shop(CustomResource, group="shop.example.com", version="v1", short_names=("sh",)):
    """A shop."""

    spec: ShopSpec
    status: ShopStatus = ShopStatus()


SCHEMA = openapi_schema(Shop)

# --- valid objects ------------------------------------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_DNS_LABEL = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?", fullmatch=True)
_NAME = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?", fullmatch=True)
_LABEL_KEY = st.builds(
    lambda prefix, name: prefix + name, st.sampled_from(["", "example.com/", "a.b-c/"]), _NAME
)
_LABEL_VALUE = st.one_of(st.just(""), _NAME)
_QUANTITY = st.builds(
    lambda n, suffix: Quantity(f"{n}{suffix}"),
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3"]),
)
_INT_OR_STRING = st.one_of(
    st.integers(min_value=0, max_value=100), st.from_regex(r"[0-9]{1,2}%", fullmatch=True)
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**53), max_value=2**53) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_PORT = st.builds(
    Port,
    container_port=st.integers(min_value=1, max_value=65535),
    name=st.none() | _DNS_LABEL,
    protocol=st.sampled_from(["TCP", "UDP"]),
)
_CONTAINER = st.builds(
    Container,
    name=_DNS_LABEL,
    image=st.text(st.characters(codec="utf-8"), min_size=1, max_size=20),
    ports=st.lists(_PORT, max_size=3, unique_by=lambda p: p.container_port),
    resources=st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/gpu"]), _QUANTITY, max_size=3),
    pull_policy=st.sampled_from(["Always", "IfNotPresent", "Never"]),
)
_SPEC = st.builds(
    ShopSpec,
    replicas=st.integers(min_value=0, max_value=100),
    containers=st.lists(_CONTAINER, min_size=1, max_size=3),
    labels=st.dictionaries(_LABEL_KEY, _LABEL_VALUE, max_size=3),
    rollout=st.builds(Rollout, max_unavailable=_INT_OR_STRING, max_surge=st.none() | _INT_OR_STRING),
    tags=st.lists(_TEXT, max_size=4, unique=True),
    weight=st.none() | st.floats(allow_nan=False, allow_infinity=False),
    memory=st.none() | _QUANTITY,
    extra=st.dictionaries(_TEXT, _JSON, max_size=3),
    suspend=st.booleans(),
)
_STATUS = st.builds(ShopStatus, ready_replicas=st.integers(min_value=0, max_value=100), url=st.none() | _TEXT)
SHOPS = st.builds(
    lambda spec, status: Shop(metadata=ObjectMeta(name="shop"), spec=spec, status=status), _SPEC, _STATUS
)


def test_the_schema_of_the_test_kind_is_structural() -> None:
    assert problems(SCHEMA) == []


@settings(max_examples=200, deadline=None)
@given(SHOPS)
def test_a_valid_object_passes_the_schema_unchanged_and_parses_back_equal(shop: Shop) -> None:
    obj = shop.to_dict()
    assert openapi.prune(SCHEMA, obj) == obj  # the schema declares every field the type writes
    assert openapi.apply_defaults(SCHEMA, obj) == obj  # and every default is already there
    assert openapi.validate(SCHEMA, obj) == []
    assert Shop.parse(obj) == shop


# --- arbitrary input ----------------------------------------------------------------------------


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (objects' members and list items, at every depth)."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _leaves(item, (*path, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replaced(copy[head], rest, new)
    return copy


_ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(min_value=-9e18, max_value=9e18)
    | _TEXT
    | st.sampled_from(["", "1Gi", "25%", "TCP", "a.b/c", "-1", "x" * 70]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(_TEXT | st.sampled_from(["name", "image"]), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SHOPS, st.data())
def test_parse_accepts_exactly_what_the_server_stores(shop: Shop, data: st.DataObject) -> None:
    # One member of a valid object replaced by any JSON value; the server prunes, defaults
    # and validates it; parse must accept the stored object exactly when the server would.
    # (Integers beyond int64 are left out: the server refuses them, so parse never sees one;
    # parse accepts those an int64 field cannot hold.)
    obj = shop.to_dict()
    spec_paths = [p for p in _leaves(obj) if p[:1] in (("spec",), ("status",))]
    path = data.draw(st.sampled_from(spec_paths))
    mutated = _replaced(obj, path, data.draw(_ANY_JSON))
    stored = openapi.apply_defaults(SCHEMA, openapi.prune(SCHEMA, mutated))
    errors = openapi.validate(SCHEMA, stored)
    parsed = _parsed(stored)
    if isinstance(parsed, InvalidObject):
        if not errors and _only_map_key_errors(parsed, stored):
            return  # the one check a CRD's schema cannot make (see _only_map_key_errors)
        assert errors, f"parse refused what the server accepts: {parsed}"
        assert {e.field for e in parsed.errors} & {e.field for e in errors}, (parsed.errors, errors)
    else:
        assert not errors, f"parse accepted what the server refuses: {errors}"
        # What parse read is what was stored, up to canonical quantities: written back, the
        # server takes it as it is, and it reads back the same.
        written = parsed.to_dict()
        assert openapi.validate(SCHEMA, openapi.apply_defaults(SCHEMA, written)) == []
        assert Shop.parse(written) == parsed


def test_a_bad_label_key_is_stored_by_the_server_and_refused_by_parse_alone() -> None:
    # The case hypothesis found: the schema validates label values, not keys.
    obj = Shop(
        metadata=ObjectMeta(name="shop"), spec=ShopSpec(containers=[Container(name="c", image="i")])
    ).to_dict()
    obj["spec"]["labels"] = {"": ""}
    stored = openapi.apply_defaults(SCHEMA, openapi.prune(SCHEMA, obj))
    assert openapi.validate(SCHEMA, stored) == []
    parsed = _parsed(stored)
    assert isinstance(parsed, InvalidObject)
    assert _only_map_key_errors(parsed, stored)
    # A bad value beside it is the schema's to refuse, and is not exempted.
    stored["spec"]["labels"] = {"": "", "good": "-bad"}
    assert openapi.validate(SCHEMA, stored) != []
    bad_value = _parsed(stored)
    assert isinstance(bad_value, InvalidObject)
    assert not _only_map_key_errors(bad_value, stored)


def _only_map_key_errors(invalid: InvalidObject, stored: Any) -> bool:
    """Whether parse refused ``stored`` only for keys of a map of :data:`LabelKey` keys (its
    error names the map and quotes the key). A CRD's structural schema cannot constrain a
    map's keys (it has no propertyNames, and only a CEL rule could, which the in-memory server
    does not evaluate), so the server stores ``{"": ""}`` as ``spec.labels`` and parse alone
    refuses it: the controller reports InvalidSpec. Found by this test, 2026-11-29."""
    for error in invalid.errors:
        mapping = dig(stored, *error.field.split("."))
        if not isinstance(mapping, dict) or not any(
            error.message.startswith(f"Invalid value: {go_value(key)}: ") for key in mapping
        ):
            return False
    return True


def _parsed(obj: Any) -> Shop | InvalidObject:
    try:
        return Shop.parse(obj)
    except InvalidObject as invalid:
        return invalid


@settings(max_examples=300, deadline=None)
@given(_ANY_JSON)
def test_parse_of_anything_is_a_model_or_an_invalid_object(value: Any) -> None:
    for candidate in (value, {"spec": value}, {"spec": {"containers": value}}, {"status": value, "spec": {}}):
        parsed = _parsed(candidate)  # anything else raised fails the test
        assert isinstance(parsed, Shop) or (parsed.errors and str(parsed))


def test_an_invalid_stored_object_is_reported_in_the_servers_words() -> None:
    stored = {
        "apiVersion": "shop.example.com/v1",
        "kind": "Shop",
        "metadata": {"name": "s"},
        "spec": {"replicas": 101, "containers": [{"name": "Web", "image": ""}], "memory": "lots"},
    }
    with pytest.raises(InvalidObject) as caught:
        Shop.parse(stored)
    ours = {(e.field, e.message) for e in caught.value.errors}
    server = {(e.field, e.message.removeprefix(f"{e.field}: ")) for e in openapi.validate(SCHEMA, stored)}
    # Same fields; the same message wherever the schema says it (DNS names are checked with
    # apimachinery's wording, the schema with its pattern).
    assert {f for f, _ in ours} == {f for f, _ in server}
    assert (
        "spec.replicas",
        "Invalid value: 101: spec.replicas in body should be less than or equal to 100",
    ) in ours
    assert (
        "spec.containers[0].image",
        'Invalid value: "": spec.containers[0].image in body should be at least 1 chars long',
    ) in ours
    assert {m for f, m in ours if f == "spec.memory"} == {m for f, m in server if f == "spec.memory"}


# --- through the in-memory API server -----------------------------------------------------------


def _collect(count: int) -> list[Shop]:
    shops: list[Shop] = []

    @settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(SHOPS)
    def collect(shop: Shop) -> None:
        shops.append(shop)

    collect()
    return shops


async def test_random_objects_round_trip_through_the_api_server(
    client: Client, install_crds: InstallCrds, namespace: str
) -> None:
    [crd] = await install_crds(Shop.crd())
    assert problems(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]) == []
    resource = Shop.resource()
    for index, shop in enumerate(_collect(25)):
        shop.metadata = ObjectMeta(name=f"shop-{index}", namespace=namespace)
        created = await client.create(resource, shop.to_dict())
        # The status subresource: a create drops the status, a status write sets it.
        stored = Shop.parse(created)
        assert stored.spec == shop.spec
        assert stored.status == ShopStatus()
        patched = await client.patch_status(
            resource, stored.name, {"status": shop.status.to_dict()}, namespace
        )
        read = Shop.parse(await client.get(resource, stored.name, namespace))
        assert read.spec == shop.spec
        assert read.status == shop.status
        assert Shop.parse(patched).status == shop.status


async def test_the_server_defaults_as_the_type_does_and_refuses_what_parse_refuses(
    client: Client, install_crds: InstallCrds, namespace: str
) -> None:
    await install_crds(Shop.crd())
    resource = Shop.resource()
    minimal = {"metadata": {"name": "minimal"}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
    created = await client.create(
        resource, {"apiVersion": "shop.example.com/v1", "kind": "Shop", **minimal}, namespace
    )
    assert Shop.parse(created).spec == Shop.parse(minimal).spec
    assert created["spec"] == Shop.parse(minimal).spec.to_dict()

    bad = {
        "apiVersion": "shop.example.com/v1",
        "kind": "Shop",
        "metadata": {"name": "bad"},
        "spec": {"replicas": -1, "containers": [], "rollout": {"maxUnavailable": 1.5}, "tags": ["a", "a"]},
    }
    with pytest.raises(Invalid) as refused:
        await client.create(resource, bad, namespace)
    assert refused.value.code == 422
    with pytest.raises(InvalidObject) as caught:
        Shop.parse(bad)
    causes = {c["field"] for c in refused.value.body["details"]["causes"]}
    # The server adds a range error under no field for the 1.5 (not an int64).
    assert (
        {e.field for e in caught.value.errors}
        == causes - {"<nil>"}
        == {
            "spec.replicas",
            "spec.containers",
            "spec.rollout.maxUnavailable",
            "spec.tags[1]",
        }
    )
