"""shardSelector over HTTP (kube-apiserver v1.36's ShardedListAndWatch gate): lists, pages and
watches of a shard, the shardInfo echo, the 500 for a selector that does not parse, and the
gate off, which ignores the parameter."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

from memop.runtime.sharding.selector import (
    HASH_SPACE,
    NAMESPACE,
    UID,
    ShardRange,
    fnv1a_64,
    in_ranges,
    render_selector,
)
from memop.testing.__main__ import build_parser
from memop.testing.apiserver import featuregates
from memop.testing.apiserver.sharding import InvalidShardSelector, parse_shard_selector

if TYPE_CHECKING:
    from collections.abc import Callable

    from memop.testing.plugin import InstallCrds
    from tests.conftest import Http, WatchStream

# The gate is a flag of the server: a real cluster may run without it.
pytestmark = pytest.mark.fake_only

HALF = 1 << 63
LOWER = ShardRange(0, HALF)
UPPER = ShardRange(HALF, HASH_SPACE)
GATE_ON = {"publish_root_ca": True, "feature_gates": {featuregates.SHARDED_LIST_AND_WATCH: True}}


@pytest.fixture
def apiserver_options() -> dict[str, Any]:
    return GATE_ON


def selector(*ranges: ShardRange, key: str = UID) -> str:
    return render_selector(key, list(ranges))


def cm_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/configmaps"


async def make_configmaps(http: Http, ns: str, count: int, prefix: str = "cm") -> list[dict[str, Any]]:
    made = []
    for i in range(count):
        reply = await http.post(cm_path(ns), {"metadata": {"name": f"{prefix}-{i:02d}"}})
        assert reply.status == 201, reply.body
        made.append(reply.body)
    return made


async def make_spread(
    http: Http, ns: str, count: int, spread: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """``count`` configmaps in ``ns``, then one more at a time until ``spread`` holds of the
    namespace's configmaps, which are returned as listed. Their uids, and so their shards, are
    drawn at random: a test that needs its shards to hold something makes sure of it (with 12
    configmaps, the lower half held fewer than 3 about once in a hundred runs)."""
    await make_configmaps(http, ns, count)
    for i in range(count, count + 64):  # names stay two digits, so they keep their order
        everything: list[dict[str, Any]] = (await http.get(cm_path(ns))).body["items"]
        if spread(everything):
            return everything
        reply = await http.post(cm_path(ns), {"metadata": {"name": f"cm-{i:02d}"}})
        assert reply.status == 201, reply.body
    raise AssertionError(f"64 more configmaps and still not spread as the test needs: {everything}")


def names(items: list[dict[str, Any]]) -> list[str]:
    return [i["metadata"]["name"] for i in items]


def in_shard(items: list[dict[str, Any]], *ranges: ShardRange) -> list[str]:
    """The names of ``items`` whose uid hashes into ``ranges``, computed here, client-side."""
    return [i["metadata"]["name"] for i in items if in_ranges(fnv1a_64(i["metadata"]["uid"]), ranges)]


async def listed(http: Http, path: str, shard: str, **query: Any) -> dict[str, Any]:
    reply = await http.get(path, query={"shardSelector": shard, **query})
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


# --- the parser's messages (kube-apiserver's, word for word) ------------------------------------

U = "object.metadata.uid"
ZERO, MID, END = "'0x0000000000000000'", "'0x8000000000000000'", "'0x10000000000000000'"
MEASURED_ERRORS = [
    (
        f"shardRange({U}, '0x0', {MID})",
        'hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)',
    ),
    (
        f"shardRange(object.metadata.name, {ZERO}, {MID})",
        'unsupported field path "object.metadata.name"; supported: object.metadata.uid, '
        "object.metadata.namespace",
    ),
    ("uid", "unexpected expression kind 3; expected shardRange() call or || operator"),
    (
        f"shardRange({U}, {MID}, {ZERO})",
        "shard range start 0x8000000000000000 must be less than end 0x0000000000000000",
    ),
    (
        f"shardRange({U}, {ZERO}, {MID}) || shardRange(object.metadata.namespace, {MID}, {END})",
        'all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace"',
    ),
    (f"shardRange({U}, '0X0000000000000000', {MID})", "hexStart must have '0x' prefix"),
    (
        f"shardRange({U}, {ZERO}, '0x20000000000000000')",
        "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64)",
    ),
]
# From the apiserver's parser (apiserver/pkg/sharding/parser.go), not measured.
SOURCE_ERRORS = [
    ("  ", "empty shard selector is not allowed; omit the parameter for unfiltered lists"),
    (f"shardRange({U}, 0, 8)", "hexStart must be a string literal, got int64"),
    (
        f"shardRange({U}, hex(0), {MID})",
        "hexStart must be a string literal (e.g. '0xff'), got expression kind 1",
    ),
    (f"{U} > '0x0'", 'unsupported function "_>_"; only shardRange() and || are allowed'),
    (
        f"shardRange({U}, {ZERO}, {MID}) && shardRange({U}, {MID}, {END})",
        'unsupported function "_&&_"; only shardRange() and || are allowed',
    ),
    (f"shardRange({U}, {ZERO})", "shardRange() requires exactly 3 arguments, got 2"),
    (
        f"shardRange([1], {ZERO}, {MID})",
        "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 4",
    ),
    (f"shardRange({U}, '0x', {MID})", "hexStart: hex value is required after '0x'"),
    (f"shardRange({U}, '0x0g', {MID})", 'hexStart: invalid hex character "g" in "0x0g"'),
    (
        f"shardRange({U}, '0x000000000000000000', {MID})",
        'hexStart: hex value too long (18 chars, max 17): "000000000000000000"',
    ),
    ("shardRange(namespace, '0x0', '0x1')", "CEL parse error: reserved identifier: namespace"),
    ("shardRange(", "CEL parse error: Syntax error: "),
]


@pytest.mark.parametrize(("text", "message"), MEASURED_ERRORS + SOURCE_ERRORS)
def test_parser_messages(text: str, message: str) -> None:
    with pytest.raises(InvalidShardSelector) as caught:
        parse_shard_selector(text)
    assert str(caught.value).startswith(message)


def test_the_parser_takes_what_the_apiserver_takes() -> None:
    spaced = f"  shardRange( {U} ,  {ZERO} ,  {MID} )  "
    assert str(parse_shard_selector(spaced)) == f"shardRange({U}, {ZERO}, {MID})"
    three = " || ".join(
        f"shardRange({U}, '0x{a:016x}', '0x{b:016x}')" for a, b in ((0, 5), (5, 10), (10, 15))
    )
    assert [(r.start, r.end) for r in parse_shard_selector(three).ranges] == [(0, 5), (5, 10), (10, 15)]
    # Double quotes are CEL strings too; the echo is the canonical text.
    double = f'shardRange({U}, "0x0000000000000000", "0x8000000000000000")'
    assert str(parse_shard_selector(double)) == selector(LOWER)


@pytest.mark.parametrize(("text", "message"), MEASURED_ERRORS)
async def test_a_selector_that_does_not_parse_is_a_500_on_lists_and_watches(
    http: Http, namespace: str, text: str, message: str
) -> None:
    reply = await http.get(cm_path(namespace), query={"shardSelector": text})
    assert reply.status == 500
    body = reply.body
    assert body["message"].startswith(f"invalid shard selector: {message}")
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": body["message"],
        "code": 500,
    }  # no reason: the registry's plain error
    # A watch gets the same answer as an HTTP status, before any stream starts.
    async with http.watch(cm_path(namespace), {"shardSelector": text}) as stream:
        assert stream.status == 500
        assert (await stream.response.json()) == body


async def test_label_selector_errors_come_first(http: Http, namespace: str) -> None:
    # The handler validates the list options before the registry parses the shard selector.
    reply = await http.get(cm_path(namespace), query={"shardSelector": "uid", "labelSelector": "a=(b"})
    assert reply.status == 400


# --- lists ----------------------------------------------------------------------------------------


async def test_a_configmap_list_is_filtered_and_echoes_its_selector(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 16)
    everything = (await http.get(cm_path(namespace))).body
    assert "shardInfo" not in everything["metadata"]
    for shard in (LOWER, UPPER):
        body = await listed(http, cm_path(namespace), selector(shard))
        assert names(body["items"]) == in_shard(everything["items"], shard)
        assert body["metadata"]["shardInfo"] == {"selector": selector(shard)}
    # The echo is the server's canonical text, whatever the request's spacing.
    sloppy = f"shardRange({U},{ZERO},{MID})"
    body = await listed(http, cm_path(namespace), sloppy)
    assert body["metadata"]["shardInfo"] == {"selector": selector(LOWER)}
    # The whole space is every object, still marked as a shard.
    body = await listed(http, cm_path(namespace), selector(ShardRange(0, HASH_SPACE)))
    assert names(body["items"]) == names(everything["items"])
    assert "shardInfo" in body["metadata"]


async def test_complementary_ranges_partition_every_object(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 24)

    def keys(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items]

    everything = keys((await http.get("/api/v1/configmaps")).body["items"])
    quarters = [ShardRange(HASH_SPACE * i // 4, HASH_SPACE * (i + 1) // 4) for i in range(4)]
    pieces = [keys((await listed(http, "/api/v1/configmaps", selector(q)))["items"]) for q in quarters]
    assert sum(len(p) for p in pieces) == len(everything)
    assert sorted(k for p in pieces for k in p) == sorted(everything)
    # Two ranges OR-ed are their union, in list order.
    outer = keys((await listed(http, "/api/v1/configmaps", selector(quarters[0], quarters[3])))["items"])
    assert outer == [k for k in everything if k in set(pieces[0]) | set(pieces[3])]


async def test_the_namespace_key(http: Http) -> None:
    spaces = [f"shard-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    for ns in spaces:
        assert (await http.post("/api/v1/namespaces", {"metadata": {"name": ns}})).status == 201
        await make_configmaps(http, ns, 2)
    try:
        for ns in spaces:
            h = fnv1a_64(ns)
            only = selector(ShardRange(h, h + 1), key=NAMESPACE)
            body = await listed(http, "/api/v1/configmaps", only)
            assert {i["metadata"]["namespace"] for i in body["items"]} == {ns}
            assert sorted(names(body["items"])) == ["cm-00", "cm-01", "kube-root-ca.crt"]
        everything = (await http.get("/api/v1/configmaps")).body["items"]
        lower = (await listed(http, "/api/v1/configmaps", selector(LOWER, key=NAMESPACE)))["items"]
        expected = [i for i in everything if fnv1a_64(i["metadata"]["namespace"]) < HALF]
        assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in lower] == [
            (i["metadata"]["namespace"], i["metadata"]["name"]) for i in expected
        ]
        # A cluster-scoped object's namespace is "", whose hash is FNV-1a's offset basis.
        empty = fnv1a_64("")
        nodes = await listed(
            http, "/api/v1/namespaces", selector(ShardRange(empty, empty + 1), key=NAMESPACE)
        )
        assert {n["metadata"]["name"] for n in nodes["items"]} >= set(spaces)
    finally:
        for ns in spaces:
            await http.delete(f"/api/v1/namespaces/{ns}")


async def test_pages_of_a_shard(http: Http, namespace: str) -> None:
    everything = await make_spread(http, namespace, 30, lambda items: len(in_shard(items, LOWER)) > 4)
    expected = in_shard(everything, LOWER)
    assert len(expected) > 4  # more than a page
    shard = selector(LOWER)
    pages: list[list[str]] = []
    token = None
    first = True
    while True:
        query: dict[str, Any] = {"limit": 4}
        if token:
            query["continue"] = token
        body = await listed(http, cm_path(namespace), shard, **query)
        pages.append(names(body["items"]))
        assert body["metadata"]["shardInfo"] == {"selector": shard}
        token = body["metadata"].get("continue")
        if first:
            # kube-apiserver counts what is left as if unsharded: all the objects, less the page.
            assert body["metadata"]["remainingItemCount"] == len(everything) - 4
            first = False
        if not token:
            break
    assert [n for page in pages for n in page] == expected
    assert all(len(page) == 4 for page in pages[:-1])
    assert 1 <= len(pages[-1]) <= 4


async def test_a_continue_token_does_not_carry_the_selector(http: Http, namespace: str) -> None:
    def spread(items: list[dict[str, Any]]) -> bool:
        # A page of 2 of the lower half with more after it, and upper-half names after that page.
        lower = in_shard(items, LOWER)
        return len(lower) > 2 and any(n > lower[1] for n in in_shard(items, UPPER))

    everything = await make_spread(http, namespace, 12, spread)
    first = await listed(http, cm_path(namespace), selector(LOWER), limit=2)
    token = first["metadata"]["continue"]
    last = first["items"][-1]["metadata"]["name"]
    rest = (await http.get(cm_path(namespace), query={"continue": token})).body
    assert names(rest["items"]) == [n for n in names(everything) if n > last]
    assert "shardInfo" not in rest["metadata"]
    # With another selector, the rest of that shard: the token is only a key and a version.
    other = await listed(http, cm_path(namespace), selector(UPPER), **{"continue": token})
    assert names(other["items"]) == [n for n in in_shard(everything, UPPER) if n > last]
    assert other["items"]


async def test_a_custom_resource_list_is_filtered_without_shard_info(
    http: Http, namespace: str, install_crds: InstallCrds
) -> None:
    path = await install_widgets(http, install_crds, namespace, 14)
    everything = (await http.get(path)).body["items"]
    for shard in (LOWER, UPPER):
        body = await listed(http, path, selector(shard))
        assert names(body["items"]) == in_shard(everything, shard)
        assert "shardInfo" not in body["metadata"]  # an UnstructuredList has no SetShardInfo


async def test_a_table_has_no_shard_info(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 6)
    everything = (await http.get(cm_path(namespace))).body["items"]
    reply = await http.get(
        cm_path(namespace),
        query={"shardSelector": selector(LOWER)},
        accept="application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    assert reply.status == 200
    assert reply.body["kind"] == "Table"
    assert [r["cells"][0] for r in reply.body["rows"]] == in_shard(everything, LOWER)
    assert "shardInfo" not in reply.body["metadata"]


async def test_deletecollection_deletes_only_the_shard(http: Http, namespace: str) -> None:
    def configmaps_in(items: list[dict[str, Any]], shard: ShardRange) -> list[str]:
        return [n for n in in_shard(items, shard) if n.startswith("cm-")]

    everything = await make_spread(
        http, namespace, 10, lambda items: bool(configmaps_in(items, LOWER) and configmaps_in(items, UPPER))
    )
    assert configmaps_in(everything, LOWER)
    assert configmaps_in(everything, UPPER)
    reply = await http.delete(cm_path(namespace), query={"shardSelector": selector(LOWER)})
    assert reply.status == 200
    left = names((await http.get(cm_path(namespace))).body["items"])
    # (The root CA publisher puts kube-root-ca.crt back at once when it was in the shard.)
    assert [n for n in left if n.startswith("cm-")] == configmaps_in(everything, UPPER)


# --- watches --------------------------------------------------------------------------------------


async def events(stream: WatchStream, count: int) -> list[tuple[str, str]]:
    out = []
    for _ in range(count):
        event = await stream.next_not_bookmark()
        assert event is not None
        out.append((event["type"], event["object"]["metadata"]["name"]))
    return out


async def test_watches_of_two_shards_split_every_event(http: Http, namespace: str) -> None:
    before = await make_configmaps(http, namespace, 8, prefix="old")
    everything = (await http.get(cm_path(namespace))).body["items"]
    async with (
        http.watch(cm_path(namespace), {"shardSelector": selector(LOWER)}) as low,
        http.watch(cm_path(namespace), {"shardSelector": selector(UPPER)}) as high,
    ):
        assert low.status == high.status == 200
        # Initial events: each watch gets the ADDED of its own shard only.
        for stream, shard in ((low, LOWER), (high, UPPER)):
            assert await events(stream, len(in_shard(everything, shard))) == [
                ("ADDED", n) for n in in_shard(everything, shard)
            ]
        after = await make_configmaps(http, namespace, 8, prefix="new")
        changed = before[0]
        patched = await http.patch(
            f"{cm_path(namespace)}/{changed['metadata']['name']}", {"data": {"a": "b"}}
        )
        assert patched.status == 200
        gone = before[1]
        assert (await http.delete(f"{cm_path(namespace)}/{gone['metadata']['name']}")).status == 200
        changes = [("ADDED", o) for o in after] + [("MODIFIED", changed), ("DELETED", gone)]
        for stream, shard in ((low, LOWER), (high, UPPER)):
            expected = [(kind, o["metadata"]["name"]) for kind, o in changes if in_shard([o], shard)]
            assert await events(stream, len(expected)) == expected
        # Nothing else was queued: the next events of each are the next changes in its shard
        # (created until each shard has one, whatever the uids).
        tail: list[dict[str, Any]] = []
        while not (in_shard(tail, LOWER) and in_shard(tail, UPPER)):
            reply = await http.post(cm_path(namespace), {"metadata": {"name": f"tail-{len(tail):02d}"}})
            assert reply.status == 201
            tail.append(reply.body)
        for stream, shard in ((low, LOWER), (high, UPPER)):
            assert await events(stream, len(in_shard(tail, shard))) == [
                ("ADDED", n) for n in in_shard(tail, shard)
            ]


async def test_a_custom_resource_watch_list_is_filtered(
    http: Http, namespace: str, install_crds: InstallCrds
) -> None:
    path = await install_widgets(http, install_crds, namespace, 10)
    everything = (await http.get(path)).body["items"]
    query = {
        "shardSelector": selector(UPPER),
        "sendInitialEvents": True,
        "allowWatchBookmarks": True,
        "resourceVersionMatch": "NotOlderThan",
    }
    async with http.watch(path, query) as stream:
        expected = in_shard(everything, UPPER)
        initial = [await stream.next() for _ in expected]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in initial if e] == [
            ("ADDED", n) for n in expected
        ]
        end = await stream.next()
        assert end is not None
        assert end["type"] == "BOOKMARK"
        assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        created = []
        for i in range(12):
            reply = await http.post(path, widget(f"later-{i:02d}"))
            assert reply.status == 201
            created.append(reply.body)
        wanted = in_shard(created, UPPER)
        assert await events(stream, len(wanted)) == [("ADDED", n) for n in wanted]


# --- the gate off, and how to set it ------------------------------------------------------------


@pytest.mark.parametrize("apiserver_options", [{"publish_root_ca": True}])
async def test_with_the_gate_off_the_parameter_is_ignored(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 6)
    everything = (await http.get(cm_path(namespace))).body
    for text in (selector(LOWER), "uid", f"shardRange({U}, '0x0', {MID})", "shardRange("):
        body = await listed(http, cm_path(namespace), text)
        assert names(body["items"]) == names(everything["items"])
        assert "shardInfo" not in body["metadata"]
        async with http.watch(cm_path(namespace), {"shardSelector": text}) as stream:
            assert stream.status == 200
            assert await events(stream, len(everything["items"])) == [
                ("ADDED", n) for n in names(everything["items"])
            ]


def test_feature_gates_as_the_flag_reads_them() -> None:
    assert featuregates.parse("ShardedListAndWatch=true") == {"ShardedListAndWatch": True}
    assert featuregates.parse(" ShardedListAndWatch = False ,") == {"ShardedListAndWatch": False}
    assert featuregates.resolve(None) == {"ShardedListAndWatch": False}
    args = build_parser().parse_args(
        ["serve", "--kubeconfig", "k", "--feature-gates", "ShardedListAndWatch=1"]
    )
    assert args.feature_gates == {"ShardedListAndWatch": True}
    assert build_parser().parse_args(["serve", "--kubeconfig", "k"]).feature_gates == {}


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("Sharded=true", "unrecognized feature gate: Sharded"),
        ("ShardedListAndWatch=yes", "invalid value of ShardedListAndWatch=yes"),
        ("ShardedListAndWatch", "missing bool value for ShardedListAndWatch"),
    ],
)
def test_a_bad_feature_gate_flag_is_a_usage_error(
    flag: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", "--kubeconfig", "k", "--feature-gates", flag])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument --feature-gates: {message}" in err


def test_the_constructor_refuses_a_gate_it_does_not_implement() -> None:
    from memop.testing.apiserver.server import ApiServer  # noqa: PLC0415

    with pytest.raises(ValueError, match="unrecognized feature gate: WatchList"):
        ApiServer(feature_gates={"WatchList": True})
    assert ApiServer(feature_gates={"ShardedListAndWatch": True}).feature_gates == {
        "ShardedListAndWatch": True
    }


# --- a custom resource ----------------------------------------------------------------------------


def widget(name: str) -> dict[str, Any]:
    return {"apiVersion": "shard.memop.test/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {}}


async def install_widgets(http: Http, install_crds: InstallCrds, namespace: str, count: int) -> str:
    await install_crds(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.shard.memop.test"},
            "spec": {
                "group": "shard.memop.test",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
    )
    path = f"/apis/shard.memop.test/v1/namespaces/{namespace}/widgets"
    for i in range(count):
        reply = await http.post(path, widget(f"w-{i:02d}"))
        assert reply.status == 201, reply.body
    return path
