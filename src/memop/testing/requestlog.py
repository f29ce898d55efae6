"""What the test API server was asked: one record per request, in arrival order.

Verbs are the audit verbs of Kubernetes (get, list, watch, create, update, patch, delete,
deletecollection), derived from the HTTP method and the path the way kube-apiserver's
RequestInfoFactory does; non-resource requests (discovery, health) are logged with their
method in lower case and an empty resource. Tests assert exactly which calls a controller made.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass


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
