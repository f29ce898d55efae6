"""Server-side Tables over HTTP: negotiation, the Table's shape, includeObject, watches, and a
CRD's printer columns.

Every test runs against the in-memory server and, with USE_EXISTING_CLUSTER=true, against a
real cluster: the expected cells are what a v1.36 kube-apiserver answered. The built-in
kinds' cells are in test_apiserver_printers.py.
"""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.apiserver import columns
from memop.testing.wait import wait_for
from tests.conftest import WatchStream
from tests.testing.test_apiserver_crd import CRDS, established
from tests.testing.test_apiserver_discovery import widget_crd

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

# What kubectl get sends (k8s.io/kubectl/pkg/cmd/get).
KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)
AGE = re.compile(r"^\d+s$")  # of an object made by the test


def ago(seconds: float, *, micro: bool = False) -> str:
    """The RFC 3339 time ``seconds`` before now."""
    stamp = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


async def get_table(http: Http, path: str, accept: str = KUBECTL_ACCEPT, **query: Any) -> dict[str, Any]:
    reply = await http.get(path, accept=accept, query=query)
    assert reply.status == 200, reply.body
    assert reply.body["kind"] == "Table", reply.body
    body: dict[str, Any] = reply.body
    return body


@asynccontextmanager
async def watch_tables(http: Http, path: str, query: dict[str, str]) -> AsyncIterator[WatchStream]:
    """A watch asking for Tables as kubectl get -w does."""
    query = {"watch": "true", **query}
    response = await http._send("GET", path, query=query, accept=KUBECTL_ACCEPT, timeout=60)
    try:
        yield WatchStream(response)
    finally:
        response.close()


def rows(table: dict[str, Any]) -> dict[str, list[Any]]:
    """The cells of each row, by the name of its object."""
    return {row["object"]["metadata"]["name"]: row["cells"] for row in table["rows"]}


def header(table: dict[str, Any]) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"]]


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


async def make_configmaps(http: Http, namespace: str, *names: str) -> None:
    for name in names:
        reply = await http.post(
            cm_path(namespace), {"metadata": {"name": name}, "data": {"a": "1", "b": "2"}}
        )
        assert reply.status == 201, reply.body


def mine(table: dict[str, Any]) -> dict[str, list[Any]]:
    """The rows of the test's ConfigMaps (a namespace also holds kube-root-ca.crt and the like)."""
    return {name: cells for name, cells in rows(table).items() if not name.endswith(".crt")}


# --- negotiation and shape --------------------------------------------------------------------------


async def test_a_list_as_a_table(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, "one", "two")
    table = await get_table(http, cm_path(namespace))
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"]["resourceVersion"].isdigit()
    assert table["columnDefinitions"] == list(columns.CONFIGMAPS)
    assert [c[:2] for c in mine(table).values()] == [["one", 2], ["two", 2]]
    assert all(AGE.match(c[2]) for c in mine(table).values())
    plain = (await http.get(cm_path(namespace, "one"))).body
    row = next(r for r in table["rows"] if r["cells"][0] == "one")
    assert row == {
        "cells": row["cells"],
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": plain["metadata"],
        },
    }


async def test_clients_that_ask_for_no_table_get_what_they_always_got(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, "one")
    for accept in (
        "application/json",
        "*/*",
        "application/json;as=Table;v=v1;g=wrong.example.com, application/json",
        "application/json;as=Table;v=v2;g=meta.k8s.io, application/json",
        "application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5, application/json",
    ):
        listed = await http.get(cm_path(namespace), accept=accept)
        assert listed.body["kind"] == "ConfigMapList", accept
        got = await http.get(cm_path(namespace, "one"), accept=accept, query={"includeObject": "bogus"})
        assert got.body["kind"] == "ConfigMap", accept


async def test_table_versions_and_clause_order(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, "one")
    beta = await get_table(
        http, cm_path(namespace, "one"), "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
    )
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1"
    assert beta["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    for accept in (
        "application/json;as=Table;g=meta.k8s.io;v=v1",
        "*/*;as=Table;v=v1;g=meta.k8s.io",
        "application/json;q=0.5, application/json;as=Table;v=v1;g=meta.k8s.io",
    ):
        table = await get_table(http, cm_path(namespace, "one"), accept)
        assert table["apiVersion"] == "meta.k8s.io/v1", accept


async def test_one_object_as_a_table(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, "one")
    plain = (await http.get(cm_path(namespace, "one"))).body
    table = await get_table(http, cm_path(namespace, "one"))
    assert table["metadata"] == {"resourceVersion": plain["metadata"]["resourceVersion"]}
    assert len(table["columnDefinitions"]) == 3
    assert [r["cells"][:2] for r in table["rows"]] == [["one", 2]]


async def test_include_object(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, "one")
    plain = (await http.get(cm_path(namespace, "one"))).body
    whole = await get_table(http, cm_path(namespace, "one"), includeObject="Object")
    assert whole["rows"][0]["object"] == plain
    none = await get_table(http, cm_path(namespace), includeObject="None")
    assert {r["object"] is None for r in none["rows"]} == {True}
    meta = await get_table(http, cm_path(namespace, "one"), includeObject="Metadata")
    assert meta["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    message = (
        'Unable to convert to Table as requested: includeObject: Invalid value: "bogus": '
        "must be 'Metadata', 'Object', 'None', or empty"
    )
    for path in (cm_path(namespace), cm_path(namespace, "one")):
        bad = await http.get(path, accept=KUBECTL_ACCEPT, query={"includeObject": "bogus"})
        assert bad.status == 400
        assert (bad.body["reason"], bad.body["message"]) == ("BadRequest", message)
    async with http.watch(cm_path(namespace), {"includeObject": "bogus"}) as stream:
        assert stream.status == 200  # a plain watch ignores it
    bad = await http.get(
        cm_path(namespace), accept=KUBECTL_ACCEPT, query={"watch": "true", "includeObject": "x"}
    )
    assert (bad.status, bad.body["message"]) == (400, message.replace('"bogus"', '"x"'))


async def test_pages_and_empty_lists(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, "a1", "a2", "a3")
    first = await get_table(http, cm_path(namespace), limit=2)
    assert len(first["rows"]) == 2
    assert first["metadata"]["continue"]
    assert first["metadata"]["remainingItemCount"] >= 1
    rest = await get_table(http, cm_path(namespace), limit=100, **{"continue": first["metadata"]["continue"]})
    assert "continue" not in rest["metadata"]
    assert len(first["rows"]) + len(rest["rows"]) >= 3
    empty = await get_table(http, cm_path(namespace), labelSelector="nothing=here")
    assert empty["rows"] == []
    assert empty["columnDefinitions"] == list(columns.CONFIGMAPS)


async def test_a_status_subresource_as_a_table(http: Http, namespace: str) -> None:
    table = await get_table(http, f"/api/v1/namespaces/{namespace}/status")
    assert header(table) == ["Name", "Status", "Age"]
    assert table["rows"][0]["cells"][:2] == [namespace, "Active"]


# --- watches -------------------------------------------------------------------------------------------


async def test_a_watch_of_tables(http: Http, namespace: str) -> None:
    """kubectl get -w: a LIST, then a WATCH from its resourceVersion, both as Tables."""
    listed = await get_table(http, cm_path(namespace))
    query = {"resourceVersion": listed["metadata"]["resourceVersion"], "fieldSelector": "metadata.name=w"}
    async with watch_tables(http, cm_path(namespace), query) as stream:
        await make_configmaps(http, namespace, "w")
        changed = await http.patch(cm_path(namespace, "w"), {"data": {"c": "3"}})
        assert changed.status == 200
        assert (await http.delete(cm_path(namespace, "w"))).status == 200
        events = await stream.take(3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert [e["object"]["kind"] for e in events] == ["Table"] * 3
    assert events[0]["object"]["columnDefinitions"] == list(columns.CONFIGMAPS)
    assert [e["object"]["columnDefinitions"] for e in events[1:]] == [None, None]
    assert [[r["cells"][:2] for r in e["object"]["rows"]] for e in events] == [
        [["w", 2]],
        [["w", 3]],
        [["w", 3]],
    ]
    for event in events:
        row = event["object"]["rows"][0]
        assert event["object"]["metadata"] == {
            "resourceVersion": row["object"]["metadata"]["resourceVersion"]
        }
        assert row["object"]["kind"] == "PartialObjectMetadata"


async def test_initial_events_and_their_bookmark_as_tables(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, "one")
    query = {
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "fieldSelector": "metadata.name=one",
    }
    async with watch_tables(http, cm_path(namespace), query) as stream:
        added, bookmark = await stream.take(2)
    assert added["type"] == "ADDED"
    assert added["object"]["columnDefinitions"] == list(columns.CONFIGMAPS)
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["columnDefinitions"] is None
    (row,) = bookmark["object"]["rows"]
    assert row["cells"] == ["", 0, "<unknown>"]
    assert row["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    # Pods print their empty object too: the first event carries the columns, whatever it is.
    query["fieldSelector"] = "metadata.name=none"
    async with watch_tables(http, f"/api/v1/namespaces/{namespace}/pods", query) as stream:
        (only,) = await stream.take(1)
    assert only["type"] == "BOOKMARK"
    assert only["object"]["columnDefinitions"] == list(columns.PODS)
    assert only["object"]["rows"][0]["cells"] == [
        "",
        "0/0",
        "",
        "0",
        "<unknown>",
        "<none>",
        "<none>",
        "<none>",
        "<none>",
    ]


# --- a CRD's printer columns -------------------------------------------------------------------------

PRINTER_COLUMNS = [
    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
    {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
    {"name": "Flag", "type": "boolean", "jsonPath": ".spec.flag"},
    {"name": "Avail", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Available")].status'},
    {"name": "Seen", "type": "date", "jsonPath": ".status.seen"},
    {"name": "Obj", "type": "string", "jsonPath": ".spec.obj"},
    {"name": "List", "type": "string", "jsonPath": ".spec.list"},
    {"name": "Items", "type": "string", "jsonPath": ".spec.list[*]"},
    {"name": "Num", "type": "string", "jsonPath": ".spec.size"},
    {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"},
    {"name": "IntOfStr", "type": "integer", "jsonPath": ".spec.text"},
    {
        "name": "Wide",
        "type": "string",
        "jsonPath": ".spec.text",
        "priority": 1,
        "description": "my desc",
        "format": "byte",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
ANY = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def gadget_crd(group: str) -> dict[str, Any]:
    """gadgets.<group>: v1 with PRINTER_COLUMNS, v2 without printer columns."""
    crd = widget_crd(group)
    v1 = crd["spec"]["versions"][0]
    v1["schema"] = {"openAPIV3Schema": ANY}
    v1["additionalPrinterColumns"] = PRINTER_COLUMNS
    crd["spec"]["versions"].append({"name": "v2", "served": True, "storage": False, "schema": v1["schema"]})
    return crd


async def install(http: Http, crd: dict[str, Any], namespace: str) -> str:
    """Create ``crd`` and wait until it serves; the path of its v1 objects in ``namespace``."""
    created = await http.post(CRDS, crd)
    assert created.status == 201, created.body
    await established(http, crd["metadata"]["name"])
    path = f"/apis/{crd['spec']['group']}/v1/namespaces/{namespace}/{crd['spec']['names']['plural']}"
    await wait_for(lambda: _served(http, path), timeout=30)
    return path


@pytest.fixture
async def gadgets(http: Http, namespace: str, cluster: ClusterHandle) -> AsyncIterator[str]:
    """The path of the Gadgets (v1) of the test's namespace, of a CRD with a group of its own."""
    crd = gadget_crd(f"t{uuid.uuid4().hex[:8]}.memop.test")
    try:
        yield await install(http, crd, namespace)
    finally:
        if cluster.real:
            await http.delete(f"{CRDS}/{crd['metadata']['name']}")


async def _served(http: Http, path: str) -> bool:
    return (await http.get(path)).status == 200


async def make_gadget(http: Http, path: str, name: str, spec: Any, status: Any = None) -> None:
    body = {
        "apiVersion": path.split("/")[2] + "/v1",
        "kind": "Gadget",
        "metadata": {"name": name},
        "spec": spec,
    }
    created = await http.post(path, body)
    assert created.status == 201, created.body
    if status is not None:
        updated = await http.patch(f"{path}/{name}/status", {"status": status})
        assert updated.status == 200, updated.body


async def test_printer_columns_of_a_crd(http: Http, gadgets: str) -> None:
    seen = ago(66 * 60 + 20)  # "66m" for the next 39 s
    conditions = [{"type": "Progressing", "status": "False"}, {"type": "Available", "status": "True"}]
    full = {
        "size": 3,
        "ratio": 2.5,
        "flag": True,
        "obj": {"b": 1, "a": "x<y"},
        "list": [1, "two", {"k": "v"}],
    }
    await make_gadget(
        http, gadgets, "full", {**full, "text": "hello"}, {"conditions": conditions, "seen": seen}
    )
    await make_gadget(
        http,
        gadgets,
        "odd",
        {"size": 2.7, "ratio": 4, "flag": "yes", "text": "12", "list": []},
        {
            "conditions": [{"type": "Available", "status": "False"}, {"type": "Available"}],
            "seen": "not-a-date",
        },
    )
    await make_gadget(http, gadgets, "empty", {})
    await make_gadget(
        http,
        gadgets,
        "numbers",
        {
            "size": 12345678901234567,
            "ratio": 1e300,
            "text": 5,
            "obj": {},
            "list": [None, True, 1000000.5, 1e21, 3.0],
        },
        {"seen": seen[:-1] + ".123456Z", "conditions": [{"type": "Available"}]},
    )
    await make_gadget(
        http,
        gadgets,
        "nulls",
        {"size": None, "flag": None, "obj": None, "text": None, "list": [[1, 2], "a b"]},
        {"seen": "2020-01-01"},
    )
    await make_gadget(http, gadgets, "unset", {"list": [0.000001, 1e-7]}, {"seen": ""})
    table = await get_table(http, gadgets)
    assert header(table) == ["Name", *(c["name"] for c in PRINTER_COLUMNS)]
    definitions = table["columnDefinitions"]
    assert definitions[0] == columns.column("Name", columns.NAME, format="name")
    assert definitions[1] == columns.column(
        "Size", "Custom resource definition column (in JSONPath format): .spec.size", type="integer"
    )
    assert definitions[12] == columns.column("Wide", "my desc", format="byte", priority=1)
    got = rows(table)
    assert all(AGE.match(cells.pop()) for cells in got.values())
    o = None
    assert got == {
        "empty": ["empty", o, o, o, o, o, o, o, o, o, o, o, o],
        "full": [
            "full", 3, 2.5, True, "True", "66m", '{"a":"x\\u003cy","b":1}', '[1,"two",{"k":"v"}]', "1", "3",
            o, o, "hello",
        ],
        "nulls": [
            "nulls", o, o, o, o, "<invalid>", "<no value>", '[[1,2],"a b"]', "[1,2]", "<no value>", o, o,
            "<no value>",
        ],
        "numbers": [
            "numbers", 12345678901234567, 1e300, o, o, "66m", "{}", "[null,true,1000000.5,1e+21,3]",
            "<no value>", "12345678901234567", o, 5, "5",
        ],
        "odd": ["odd", 2, 4, o, "False", "<invalid>", o, "[]", o, "2.7", o, o, "12"],
        "unset": ["unset", o, o, o, o, "<unknown>", o, "[0.000001,1e-7]", "1e-06", o, o, o, o],
    }  # fmt: skip


async def test_printer_columns_print_numbers_as_go_does(http: Http, gadgets: str) -> None:
    await make_gadget(http, gadgets, "floats", {"size": 3.0, "ratio": 7, "list": [1e6], "text": 1000000.5})
    cells = (await get_table(http, f"{gadgets}/floats"))["rows"][0]["cells"]
    # Size: an integer column of 3.0; Ratio: a number column of 7; Items: 1e6 as stored (an
    # integer: encoding/json writes it 1000000); Wide: %v of a float.
    assert cells[1:3] == [3, 7]
    assert cells[8] == "1000000"
    assert cells[12] == "1.0000005e+06"


async def test_a_version_without_columns_shows_its_age(http: Http, gadgets: str) -> None:
    await make_gadget(http, gadgets, "g", {"size": 1})
    table = await get_table(http, gadgets.replace("/v1/", "/v2/"))
    assert table["columnDefinitions"] == [
        columns.column("Name", columns.NAME, format="name"),
        columns.column("Age", columns.CREATION_TIMESTAMP, type="date"),
    ]
    assert rows(table)["g"][0] == "g"
    assert AGE.match(rows(table)["g"][1])


async def test_a_watch_of_custom_resources_as_tables(http: Http, gadgets: str) -> None:
    listed = await get_table(http, gadgets)
    async with watch_tables(http, gadgets, {"resourceVersion": listed["metadata"]["resourceVersion"]}) as s:
        await make_gadget(http, gadgets, "w", {"size": 1})
        assert (await http.patch(f"{gadgets}/w", {"spec": {"size": 2}})).status == 200
        events = await s.take(2)
    assert events[0]["object"]["columnDefinitions"][1]["name"] == "Size"
    assert events[1]["object"]["columnDefinitions"] is None
    assert [e["object"]["rows"][0]["cells"][:2] for e in events] == [["w", 1], ["w", 2]]


async def test_time_dependent_cells(http: Http, gadgets: str) -> None:
    for name, seconds in (("m5", 5 * 60 + 3), ("h5", 5 * 3600 + 600 + 20), ("d3", 3 * 86400 + 4 * 3600 + 60)):
        await make_gadget(http, gadgets, name, {}, {"seen": ago(seconds)})
    seen = {name: cells[5] for name, cells in rows(await get_table(http, gadgets)).items()}
    assert seen["m5"] in ("5m3s", "5m4s", "5m5s")
    assert seen == {**seen, "h5": "5h10m", "d3": "3d4h"}


async def test_a_column_that_does_not_parse_ends_the_columns(
    http: Http, namespace: str, cluster: ClusterHandle
) -> None:
    crd = gadget_crd(f"t{uuid.uuid4().hex[:8]}.memop.test")
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "A", "type": "string", "jsonPath": ".spec.a"},
        {"name": "B", "type": "string", "jsonPath": ".spec[x"},  # passes validation, not the parser
        {"name": "C", "type": "string", "jsonPath": ".spec.c"},
    ]
    try:
        path = await install(http, crd, namespace)
        await make_gadget(http, path, "g", {"a": "x", "c": "y"})
        table = await get_table(http, path)
        assert header(table) == ["Name", "A"]
        assert rows(table) == {"g": ["g", "x"]}
    finally:
        if cluster.real:
            await http.delete(f"{CRDS}/{crd['metadata']['name']}")
