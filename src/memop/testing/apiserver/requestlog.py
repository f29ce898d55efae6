"""What the test API server was asked: one record per request, in arrival order.

Verbs are the audit verbs of Kubernetes (get, list, watch, create, update, patch, delete,
deletecollection), derived from the HTTP method and the path the way kube-apiserver's
RequestInfoFactory does; non-resource requests (discovery, health) are logged with their
method in lower case and an empty resource. Tests assert exactly which calls a controller made.

The same records come from a real cluster's audit log: :func:`read_audit_log` reads the JSON
lines kube-apiserver writes with ``--audit-log-path`` and ``--audit-log-format=json`` (level
Metadata or above), and :class:`AuditLogWriter` writes such lines for the in-memory server
(``python -m memop.testing serve --audit-log PATH``), so one check reads either server.
"""

from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """Where a request goes, parsed from its method, path and query."""

    verb: str
    path: str
    resource_request: bool = False
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    # Whether the resource sits under /namespaces/{namespace}/ (a namespace object's own path,
    # /api/v1/namespaces/{name}, names a namespace without being such a path).
    namespaced_path: bool = False


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One answered request."""

    time: float  # wall-clock seconds when it arrived
    verb: str
    group: str
    version: str
    resource: str
    subresource: str
    namespace: str
    name: str
    user_agent: str
    status: int
    path: str
    resource_request: bool

    def matches(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        group: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        user_agent: str | None = None,
        status: int | None = None,
    ) -> bool:
        """Whether every given filter holds (``user_agent`` matches as a prefix)."""
        return (
            (verb is None or self.verb == verb)
            and (resource is None or self.resource == resource)
            and (group is None or self.group == group)
            and (namespace is None or self.namespace == namespace)
            and (name is None or self.name == name)
            and (subresource is None or self.subresource == subresource)
            and (user_agent is None or self.user_agent.startswith(user_agent))
            and (status is None or self.status == status)
        )


class RequestLog:
    """Every request the server answered (watches when their stream starts), the newest
    ``max_records`` of them: a long load run does not grow memory without bound."""

    def __init__(self, max_records: int = 200_000) -> None:
        self._records: deque[RequestRecord] = deque(maxlen=max_records)

    def append(self, record: RequestRecord) -> None:
        self._records.append(record)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(list(self._records))

    @property
    def records(self) -> list[RequestRecord]:
        return list(self._records)

    def filter(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        group: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        user_agent: str | None = None,
        status: int | None = None,
        resources_only: bool = True,
    ) -> list[RequestRecord]:
        """The records matching every given filter; by default only API resource requests."""
        return [
            r
            for r in self._records
            if (r.resource_request or not resources_only)
            and r.matches(
                verb=verb,
                resource=resource,
                group=group,
                namespace=namespace,
                name=name,
                subresource=subresource,
                user_agent=user_agent,
                status=status,
            )
        ]

    def count(self, **filters: str | int | bool | None) -> int:
        """How many records match (same filters as :meth:`filter`)."""
        return len(self.filter(**filters))  # type: ignore[arg-type]

    def counts_by_verb(self, *, resource: str | None = None, user_agent: str | None = None) -> Counter[str]:
        return Counter(r.verb for r in self.filter(resource=resource, user_agent=user_agent))

    def counts_by_resource(self, *, verb: str | None = None, user_agent: str | None = None) -> Counter[str]:
        return Counter(r.resource for r in self.filter(verb=verb, user_agent=user_agent))

    def counts_by_user_agent(self, *, verb: str | None = None, resource: str | None = None) -> Counter[str]:
        """API resource requests per client, keyed by the whole User-Agent header."""
        return Counter(r.user_agent for r in self.filter(verb=verb, resource=resource))

    def counts(self, *, user_agent: str | None = None) -> Counter[tuple[str, str]]:
        """API resource requests per (verb, resource), of one client (User-Agent prefix) or all."""
        return Counter((r.verb, r.resource) for r in self.filter(user_agent=user_agent))

    def clear(self) -> None:
        self._records.clear()


# -- audit logs ------------------------------------------------------------------------------

AUDIT_API_VERSION = "audit.k8s.io/v1"
# The stage at which kube-apiserver logs a request's outcome (watches: when the stream ends).
RESPONSE_COMPLETE = "ResponseComplete"


class AuditLogError(ValueError):
    """A line of an audit log that is not an audit Event."""


def _timestamp(seconds: float) -> str:
    # kube-apiserver's MicroTime: RFC 3339, UTC, microseconds.
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def audit_event(record: RequestRecord) -> dict[str, Any]:
    """``record`` as the audit Event kube-apiserver logs at level Metadata, stage
    ResponseComplete (the fields :func:`records_from_audit_events` reads, and the kind)."""
    event: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": AUDIT_API_VERSION,
        "level": "Metadata",
        "stage": RESPONSE_COMPLETE,
        "requestURI": record.path,
        "verb": record.verb,
        "userAgent": record.user_agent,
        "responseStatus": {"metadata": {}, "code": record.status},
        "requestReceivedTimestamp": _timestamp(record.time),
    }
    if record.resource_request:
        ref = {"resource": record.resource, "apiVersion": record.version}
        optional = (
            ("namespace", record.namespace),
            ("name", record.name),
            ("apiGroup", record.group),
            ("subresource", record.subresource),
        )
        ref.update((key, value) for key, value in optional if value)
        event["objectRef"] = ref
    return event


def _record_of(event: dict[str, Any]) -> RequestRecord:
    ref = event.get("objectRef") or {}
    uri = str(event.get("requestURI") or "")
    received = str(event["requestReceivedTimestamp"])
    return RequestRecord(
        time=datetime.fromisoformat(received).timestamp(),
        verb=str(event["verb"]),
        group=str(ref.get("apiGroup") or ""),
        version=str(ref.get("apiVersion") or ""),
        resource=str(ref.get("resource") or ""),
        subresource=str(ref.get("subresource") or ""),
        namespace=str(ref.get("namespace") or ""),
        name=str(ref.get("name") or ""),
        user_agent=str(event.get("userAgent") or ""),
        status=int((event.get("responseStatus") or {}).get("code") or 0),
        path=uri.split("?", 1)[0],
        resource_request=bool(ref),
    )


def records_from_audit_events(lines: Iterable[str]) -> list[RequestRecord]:
    """The requests of audit log lines (JSON, one Event per line), in arrival order.

    Only ResponseComplete events count (one per request; a watch's when its stream ended), and
    dry runs are left out (they change nothing). A create names its object, as the audit log
    does (the in-memory server's own log leaves a create's name empty). A line that is not an
    audit Event raises :class:`AuditLogError` naming its number; a last line cut short (the
    server still writing) is skipped.
    """
    out: list[RequestRecord] = []
    numbered = list(enumerate(lines, start=1))
    for number, line in numbered:
        text = line.strip()
        if not text:
            continue
        try:
            event = json.loads(text)
        except json.JSONDecodeError as error:
            if number == len(numbered) and not line.endswith("\n"):
                break
            raise AuditLogError(f"audit log line {number} is not JSON: {error}") from None
        if not isinstance(event, dict) or event.get("kind") != "Event" or "verb" not in event:
            raise AuditLogError(f"audit log line {number} is not an audit Event")
        if event.get("stage") != RESPONSE_COMPLETE or "dryRun=" in str(event.get("requestURI") or ""):
            continue
        try:
            out.append(_record_of(event))
        except (KeyError, ValueError) as error:
            raise AuditLogError(f"audit log line {number}: {error!r}") from None
    out.sort(key=lambda record: record.time)
    return out


def read_audit_log(path: str | Path) -> list[RequestRecord]:
    """:func:`records_from_audit_events` of a file (kube-apiserver's ``--audit-log-path``)."""
    with open(path, encoding="utf-8") as lines:
        return records_from_audit_events(lines)


class AuditLogWriter:
    """Appends each record to ``path`` as an audit Event line (see :func:`audit_event`), a line
    at a time (as kube-apiserver's blocking mode): a reader sees every request answered so far."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._out: IO[str] | None = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def write(self, record: RequestRecord) -> None:
        if self._out is not None:
            self._out.write(json.dumps(audit_event(record), separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
