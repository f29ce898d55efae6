"""The pieces of server-side printing without a server: client-go's JSONPath, HumanDuration,
Accept negotiation and a CRD's column cells (cases from client-go's and apimachinery's own
tests, and from what a v1.36 kube-apiserver printed)."""

from __future__ import annotations

from typing import Any

import pytest

from memop.testing.apiserver import jsonpath, printercolumns
from memop.testing.apiserver.printers import PRINTERS
from memop.testing.apiserver.store import Store
from memop.testing.apiserver.tables import negotiate
from memop.testing.apiserver.times import human_duration
from memop.testing.kinds.registry import FAITHFUL_KINDS

S = 1_000_000_000
M, H, D, Y = 60 * S, 3600 * S, 86400 * S, 365 * 86400 * S


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        (S, "1s"), (70 * S, "70s"), (190 * S, "3m10s"), (70 * M, "70m"), (47 * H, "47h"),
        (49 * H, "2d1h"), ((8 * 24 + 2) * H, "8d"), (367 * D, "367d"), (2 * Y + 25 * H, "2y1d"),
        (8 * Y + 2 * H, "8y"), (-2 * S, "<invalid>"), (-2 * S + 1, "0s"), (0, "0s"), (S - 1, "0s"),
        (2 * M - 1, "119s"), (2 * M, "2m"), (2 * M + S, "2m1s"), (10 * M - 1, "9m59s"), (10 * M + S, "10m"),
        (3 * H - 1, "179m"), (3 * H, "3h"), (3 * H + M, "3h1m"), (8 * H - 1, "7h59m"), (8 * H + 59 * M, "8h"),
        (2 * D - 1, "47h"), (2 * D, "2d"), (8 * D - 1, "7d23h"), (8 * D + 23 * H, "8d"), (2 * Y - 1, "729d"),
        (2 * Y, "2y"), (3 * Y + D - 1, "3y"), (8 * Y - 1, "7y364d"), (8 * Y + 364 * D, "8y"), (9 * Y, "9y"),
    ],
)  # fmt: skip
def test_human_duration(nanoseconds: int, text: str) -> None:
    assert human_duration(nanoseconds) == text


POINTS = [
    {"id": "i1", "x": 4, "y": -5},
    {"id": "i2", "x": -2, "y": -5, "z": 1},
    {"id": "i3", "x": 8, "y": 3},
    {"id": "i4", "x": -6, "y": -1},
    {"id": "i5", "x": 0, "y": 2, "z": 1},
    {"id": "i6", "x": 1, "y": 4},
    {"id": "i7", "x": None, "y": 4},
]
POD = {
    "metadata": {"name": "p", "labels": {"a.b/c": "d"}},
    "spec": {"containers": [{"name": "web", "ports": [{"containerPort": 80}]}, {"name": "log"}]},
    "status": {
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "False"}]
    },
}


def found(path: str, data: Any) -> list[Any]:
    results = jsonpath.parse("{" + path + "}").find(data)
    assert len(results) == 1
    return results[0]


@pytest.mark.parametrize(
    ("path", "data", "values"),
    [
        ("[?(@.z)].id", POINTS, ["i2", "i5"]),
        ("[0]['id']", POINTS, ["i1"]),
        ("[-1]['x']", POINTS, [None]),
        ("[?(@.x > 0)].id", POINTS[:6], ["i1", "i3", "i6"]),
        ("[?(@.x<=-2)].id", POINTS[:6], ["i2", "i4"]),
        ("[?(@.q == 1)].id", POINTS, []),  # no q to compare: no match, no error
        ("[?(@.id != 'i1')].id", POINTS[:3], ["i2", "i3"]),
        ("[1:3].id", POINTS, ["i2", "i3"]),
        ("[::3].id", POINTS, ["i1", "i4", "i7"]),
        ("[0,2].id", POINTS, ["i1", "i3"]),
        ("[*].z", POINTS, [1, 1]),
        (".spec.containers[*].name", POD, ["web", "log"]),
        (".spec.containers[?(@.name=='log')].name", POD, ["log"]),
        ('.status.conditions[?(@.type=="Ready")].status', POD, ["True"]),
        (".metadata.labels['a.b/c']", POD, []),  # split into fields a and b/c, as client-go does
        (".metadata.labels.a\\.b/c", POD, ["d"]),
        ("..containerPort", POD, [80]),
        (".spec.nothing.deeper", POD, []),
        (".metadata.name.deeper", POD, []),
        ("$.metadata.name", POD, ["p"]),
    ],
)
def test_jsonpath_finds_what_client_go_finds(path: str, data: Any, values: list[Any]) -> None:
    assert found(path, data) == values


@pytest.mark.parametrize(
    ("path", "data"),
    [
        (".spec[0]", POD),  # [n] of an object
        (".spec.containers[5]", POD),  # out of range
        ("[?(@.x == 1.0)].id", POINTS),  # an integer against a float
        ("[?(@.x == 'a')].id", POINTS),  # an integer against a string
        ("[?(@.x < 1)].id", POINTS),  # i7's x is null
        ("[?(@.x == 1)].id", POINTS),  # null against an integer, even for ==
        (".metadata[?(@.a)]", POD),  # a filter of an object
        ("[?(@.p[*] > 1)]", [{"p": [1, 2]}]),  # two values to compare
    ],
)
def test_jsonpath_fails_where_client_go_fails(path: str, data: Any) -> None:
    with pytest.raises(jsonpath.JsonPathError):
        jsonpath.parse("{" + path + "}").find(data)


@pytest.mark.parametrize(
    "template", ["{.a[}", "{.a[?(@.x}", "{.a['b}", "{.a[x]}", '{.a["b"]}', "{.a[1:x]}", "{.a", "{.a ~}"]
)
def test_jsonpath_parse_errors(template: str) -> None:
    with pytest.raises(jsonpath.JsonPathError):
        jsonpath.parse(template)


ESCAPED = '{"a":"\\u003c\\u0026\\u003e","b":[1.5,null]}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "<no value>"), ("x", "x"), (True, "true"), (3, "3"), (2.7, "2.7"),
        (1e6 + 0.5, "1.0000005e+06"), (1e-5, "1e-05"), ({"b": [1.5, None], "a": "<&>"}, ESCAPED),
    ],
)  # fmt: skip
def test_jsonpath_prints_as_go_does(value: Any, text: str) -> None:
    assert jsonpath.text(value) == text


PROTOBUF = "application/vnd.kubernetes.protobuf"


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (None, None),
        ("application/json", None),
        ("application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json", "v1beta1"),
        ("application/json;as=Table;v=v2;g=meta.k8s.io, application/json", None),
        ("application/json, application/json;as=Table;v=v1;g=meta.k8s.io", None),
        ("application/json;q=0.9, application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
        ("*/*, application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),  # wildcards sort last
        (f"{PROTOBUF};as=Table;v=v1;g=meta.k8s.io, application/json", None),
        (f"{PROTOBUF};as=Table;v=v1;g=meta.k8s.io, */*;as=Table;v=v1;g=meta.k8s.io", "v1"),
        ("application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", None),
        ("text/html, application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
        (" application/json ; as=Table ; v=v1 ; g=meta.k8s.io", "v1"),
    ],
)
def test_negotiation(accept: str | None, version: str | None) -> None:
    assert negotiate(accept) == version


def test_custom_resource_cells_of_each_type() -> None:
    crd = {
        "spec": {
            "versions": [
                {
                    "name": "v1",
                    "additionalPrinterColumns": [
                        {"name": t, "type": t, "jsonPath": ".v"}
                        for t in ("integer", "number", "boolean", "date", "string")
                    ],
                }
            ]
        }
    }
    printer = printercolumns.printer(crd, "v1")
    now = 1_700_000_000.0

    def cells(value: Any) -> list[Any]:
        return list(printer.row({"metadata": {"name": "n"}, "v": value}, now)["cells"][1:])

    assert cells(7) == [7, 7.0, None, None, "7"]
    assert cells(-2.7) == [-2, -2.7, None, None, "-2.7"]
    assert cells(2**70) == [-(2**63), float(2**70), None, None, "1.1805916207174113e+21"]  # a float64 in Go
    assert cells(True) == [None, None, True, None, "true"]
    assert cells("2023-11-14T22:08:20Z") == [None, None, None, "5m", "2023-11-14T22:08:20Z"]
    assert cells("2023-11-14T23:13:19.5+01:00")[3] == "0s"
    assert cells("2023-11-15T00:00:00Z")[3] == "<invalid>"  # in the future
    assert cells("")[3] == "<unknown>"
    assert cells("0001-01-01T00:00:00Z")[3] == "<unknown>"
    assert cells("yesterday")[3] == "<invalid>"
    assert cells(None) == [None, None, None, None, "<no value>"]
    assert [c["name"] for c in printercolumns.printer({}, "v1").columns] == ["Name", "Age"]


def test_every_built_in_kind_prints_as_kube_apiserver_prints_it() -> None:
    """A kind added to the in-memory server needs its printers.go columns (kube-apiserver gives
    Role, ClusterRole, LimitRange and CustomResourceDefinition only Name and Created At)."""
    defaults = {
        ("", "limitranges"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "clusterroles"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
    }
    served = {(s.rtype.group, s.rtype.plural) for s in Store().all_served() if s.rtype in _FAITHFUL}
    assert (served - defaults) | _PRINTED_GENERIC == set(PRINTERS)


def test_generically_served_kinds_print_name_and_created_at() -> None:
    """Known gap: kube-apiserver has printers.go columns for most of them (a StorageClass's
    Provisioner, ...); the in-memory server gives the kinds it serves generically only the
    default columns, but for Nodes (the simulated cluster registers one, kubectl get nodes
    shows it), and no printer for one of them goes unused."""
    generic = {(s.rtype.group, s.rtype.plural) for s in Store().all_served() if s.rtype not in _FAITHFUL}
    assert generic > _PRINTED_GENERIC
    assert generic & set(PRINTERS) == _PRINTED_GENERIC


# Served generically, printed with their printers.go columns.
_PRINTED_GENERIC = {("", "nodes")}


_FAITHFUL = {kind.rtype for kind in FAITHFUL_KINDS}
