"""Server-side printing: GET, LIST and WATCH answered as ``meta.k8s.io`` Tables when asked.

kubectl asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` (then v1beta1, then plain
JSON) and prints the columns the server chose: the built-in printers of
:mod:`memop.testing.apiserver.printers`, a CRD's printer columns
(:mod:`memop.testing.apiserver.printercolumns`).
As kube-apiserver v1.36 does it (``endpoints/handlers/response.go``, measured on a real one):

- The Accept clauses are tried by quality (``goautoneg``'s order); the first that JSON can
  serve decides. A Table clause of ``meta.k8s.io`` v1 or v1beta1 gets a Table of that version;
  a Table in another group or version is skipped. A clause without a conversion, or one this
  server does not implement (YAML or a PartialObjectMetadata), gets the plain JSON answer, as
  does a request none of whose clauses fit (kube-apiserver answers that one 406).
- A Table's rows carry the object as ``includeObject`` says: ``Metadata`` (the default, a
  PartialObjectMetadata), ``Object`` (the object itself) or ``None``; anything else is 400.
  A list keeps its resourceVersion, continue token and remaining count; a single object's
  Table has its resourceVersion.
- A watch sends each event's object as a Table of one row; only its first event carries the
  column definitions (the later ones have ``null``), and BOOKMARKs are Tables too (a row of
  the empty object). ERROR events stay Status objects.

Cells are encoded as Go's ``encoding/json`` writes them (``4`` for the float 4.0, ``<`` as
``\\u003c``), since clients compare them as text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memop.testing.apiserver import printercolumns, printers
from memop.testing.apiserver.errors import bad_request
from memop.testing.apiserver.resources import CRDS
from memop.testing.apiserver.schema import go_json, go_quote
from memop.testing.apiserver.store import Entry, Served, Store

TABLE_VERSIONS = ("v1", "v1beta1")
_INCLUDE_OBJECT = ("", "None", "Metadata", "Object")
_JSON_RANGES = (("application", "json"), ("application", "*"), ("*", "*"))
# What kube-apiserver also serves plainly; Tables only in JSON and YAML.
_OTHER_TYPES = {
    ("application", "yaml"): True,
    ("application", "vnd.kubernetes.protobuf"): False,
    ("application", "cbor"): False,
}


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


# --- negotiation -----------------------------------------------------------------------------------


def _clauses(header: str) -> list[tuple[str, str, float, dict[str, str]]]:
    """``goautoneg.ParseAccept``: (type, subtype, q, params), sorted by its (insertion) sort."""
    clauses: list[tuple[str, str, float, dict[str, str]]] = []
    for part in header.split(","):
        media, *params = part.strip(" ").split(";")
        kind, _, sub = media.partition("/")
        kind, sub = kind.strip(" "), sub.strip(" ")
        if not sub:
            if kind != "*":
                continue
            sub = "*"
        elif "/" in sub:
            continue
        q, options = 1.0, {}
        for param in params:
            key, _, value = param.partition("=")
            if not value or "=" in value:
                continue
            if key.strip(" ") == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            else:
                options[key.strip(" ")] = value.strip(" ")
        clauses.append((kind, sub, q, options))

    def less(a: tuple[str, str, float, dict[str, str]], b: tuple[str, str, float, dict[str, str]]) -> bool:
        return a[2] > b[2] or (a[0] != "*" and b[0] == "*") or (a[1] != "*" and b[1] == "*")

    for i in range(1, len(clauses)):
        j = i
        while j > 0 and less(clauses[j], clauses[j - 1]):
            clauses[j], clauses[j - 1] = clauses[j - 1], clauses[j]
            j -= 1
    return clauses


def negotiate(accept: str | None) -> str | None:
    """The ``meta.k8s.io`` version of the Table ``accept`` asks for, or None for plain JSON."""
    for kind, sub, _q, params in _clauses(accept or ""):
        convert = {k: params[k] for k in ("as", "g", "v") if k in params}
        if (kind, sub) not in _JSON_RANGES:
            table_capable = _OTHER_TYPES.get((kind, sub))
            if table_capable is None or (convert and not table_capable):
                continue
            return None  # served plainly here (kube-apiserver would answer in that type)
        if not convert:
            return None
        if convert.get("g") == "meta.k8s.io" and convert.get("v") in TABLE_VERSIONS:
            if convert.get("as") == "Table":
                return convert["v"]
            if convert.get("as") in ("PartialObjectMetadata", "PartialObjectMetadataList"):
                return None
    return None


# --- tables ----------------------------------------------------------------------------------------


def printer_for(store: Store, served: Served) -> printers.Printer:
    """The printer kube-apiserver would use for ``served``."""
    storage = served.storage
    if storage.crd_name is None:
        return printers.PRINTERS.get((served.rtype.group, served.rtype.plural), printers.DEFAULT)
    crds = store.storage_for(CRDS.group, CRDS.plural)
    crd = crds.get("", storage.crd_name) if crds is not None else None
    return printercolumns.printer(crd.obj if crd is not None else {}, served.rtype.version)


class TableWriter:
    """Encodes one request's answer as Tables: a list or object (:meth:`table`), or the events of
    a watch (:meth:`event_line`, which sends the column definitions with the first only)."""

    def __init__(
        self, served: Served, printer: printers.Printer, version: str, include: str, now: Callable[[], float]
    ):
        # Built-in printers read the storage form (an events.k8s.io Event as a core one); a
        # custom resource's columns are its served version's, read from the object as served
        # (converting it back would ask its conversion webhook for every row).
        self._to_storage = served.from_served if served.storage.strategy.builtin else None
        self._printer = printer
        self._version = version.encode()
        self._include = include or "Metadata"
        self._now = now
        self._columns = go_json(list(printer.columns), sort_keys=False).encode()
        self._headers_sent = False

    def table(self, entries: Iterable[Entry], meta: Mapping[str, Any]) -> bytes:
        """A Table of ``entries`` (in the served version) with the list metadata ``meta``."""
        now = self._now()
        rows = b",".join(self._row(entry, now) for entry in entries)
        return self._table(meta, self._columns, rows)

    def event_line(self, kind: str, entry: Entry) -> bytes:
        """A watch event of type ``kind`` whose object is ``entry``'s Table."""
        columns = b"null" if self._headers_sent else self._columns
        self._headers_sent = True
        rv = (entry.obj.get("metadata") or {}).get("resourceVersion")
        table = self._table({"resourceVersion": rv} if rv else {}, columns, self._row(entry, self._now()))
        return b'{"type":"' + kind.encode() + b'","object":' + table + b"}\n"

    def _table(self, meta: Mapping[str, Any], columns: bytes, rows: bytes) -> bytes:
        return (
            b'{"kind":"Table","apiVersion":"meta.k8s.io/'
            + self._version
            + b'","metadata":'
            + _dumps(meta)
            + b',"columnDefinitions":'
            + columns
            + b',"rows":['
            + rows
            + b"]}"
        )

    def _row(self, entry: Entry, now: float) -> bytes:
        obj = entry.obj
        to_storage = self._to_storage
        row = self._printer.row(to_storage(obj) if to_storage is not None else obj, now)
        out = b'{"cells":' + go_json(row["cells"], sort_keys=False).encode()
        if "conditions" in row:
            out += b',"conditions":' + go_json(row["conditions"], sort_keys=False).encode()
        meta = obj.get("metadata") or {}
        include = self._include
        if include == "Object" and (meta.get("annotations") or {}).get("k8s.io/initial-events-end"):
            include = "Metadata"
        if include == "Object":
            body = entry.json()
        elif include == "None":
            body = b"null"
        else:
            body = (
                b'{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/'
                + self._version
                + b'","metadata":'
                + _dumps(meta)
                + b"}"
            )
        return out + b',"object":' + body + b"}"


def table_writer(
    store: Store, served: Served, accept: str | None, query: Mapping[str, str], now: Callable[[], float]
) -> TableWriter | None:
    """The writer of a request's Tables, or None when it did not ask for one; raises the 400
    of a bad ``includeObject``."""
    version = negotiate(accept)
    if version is None:
        return None
    include = query.get("includeObject", "")
    if include not in _INCLUDE_OBJECT:
        raise bad_request(
            f"Unable to convert to Table as requested: includeObject: Invalid value: {go_quote(include)}: "
            "must be 'Metadata', 'Object', 'None', or empty"
        )
    return TableWriter(served, printer_for(store, served), version, include, now)
