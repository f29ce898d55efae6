"""Fault injection for the test API server: fail chosen requests, fail at random, add latency.

Rules match API resource requests (never discovery or health checks) by audit verb, group,
resource, subresource, namespace, name and user-agent prefix; ``None`` matches anything.
Failures answer with the body the real server would send for that status: a 403 carries the
RBAC message (``deployments.apps "x" is forbidden: User "u" cannot create resource
"deployments" in API group "apps" in the namespace "ns"``), a 429 a Retry-After header, a 409
the optimistic-lock conflict. Rules are checked in the order they were added; the first
matching failure rule with requests left wins. Random failures use their own seeded RNG, so
a chaos run is reproducible.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from memop.testing.apiserver.errors import (
    ApiError,
    conflict,
    forbidden,
    gone,
    internal_error,
    not_found,
    service_unavailable,
    too_many_requests,
)
from memop.testing.apiserver.requestlog import RequestInfo

DEFAULT_USER = "system:serviceaccount:memop-system:memop"


@dataclass
class _GroupResource:
    group: str
    plural: str


@dataclass
class Match:
    """Which requests a rule applies to (``None`` matches anything)."""

    verb: str | None = None
    resource: str | None = None
    group: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    user_agent: str | None = None  # prefix

    def matches(self, info: RequestInfo, user_agent: str) -> bool:
        return (
            info.resource_request
            and (self.verb is None or self.verb == info.verb)
            and (self.resource is None or self.resource == info.resource)
            and (self.group is None or self.group == info.group)
            and (self.namespace is None or self.namespace == info.namespace)
            and (self.name is None or self.name == info.name)
            and (self.subresource is None or self.subresource == info.subresource)
            and (self.user_agent is None or user_agent.startswith(self.user_agent))
        )


@dataclass
class FailureRule:
    """Fail the next ``remaining`` matching requests (``None``: every one until cleared)."""

    status: int
    match: Match
    remaining: int | None = 1
    retry_after: int = 1
    message: str | None = None
    user: str = DEFAULT_USER
    hits: int = 0


@dataclass
class ChaosRule:
    """Fail matching requests with probability ``rate``, drawing the status from ``statuses``
    (a status listed twice is drawn twice as often: ``(500, 500, 429)`` fails two thirds of
    the failed requests with 500)."""

    rate: float
    statuses: tuple[int, ...]
    match: Match
    rng: random.Random = field(repr=False, default_factory=random.Random)
    hits: int = 0
    hits_by_status: Counter[int] = field(default_factory=Counter)


@dataclass
class DelayRule:
    """Hold matching requests ``seconds`` before answering (``remaining`` None: until cleared)."""

    seconds: float
    match: Match
    remaining: int | None = None
    hits: int = 0


class Faults:
    """The fault rules of one server; tests add them, the server consults them per request."""

    def __init__(self) -> None:
        self._failures: list[FailureRule] = []
        self._chaos: list[ChaosRule] = []
        self._delays: list[DelayRule] = []

    def fail(
        self,
        status: int = 500,
        *,
        times: int | None = 1,
        verb: str | None = None,
        resource: str | None = None,
        group: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        user_agent: str | None = None,
        retry_after: int = 1,
        message: str | None = None,
        user: str = DEFAULT_USER,
    ) -> FailureRule:
        """Answer the next ``times`` matching requests with ``status`` (None: all of them)."""
        rule = FailureRule(
            status,
            Match(verb, resource, group, namespace, name, subresource, user_agent),
            times,
            retry_after,
            message,
            user,
        )
        self._failures.append(rule)
        return rule

    def forbid(
        self,
        *,
        times: int | None = None,
        verb: str | None = None,
        resource: str | None = None,
        group: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        user_agent: str | None = None,
        user: str = DEFAULT_USER,
    ) -> FailureRule:
        """RBAC denies matching requests (403 with the real message) until cleared by default."""
        return self.fail(
            403,
            times=times,
            verb=verb,
            resource=resource,
            group=group,
            namespace=namespace,
            name=name,
            subresource=subresource,
            user_agent=user_agent,
            user=user,
        )

    def chaos(
        self,
        rate: float,
        *,
        statuses: int | Sequence[int] = 500,
        seed: int = 0,
        verb: str | None = None,
        resource: str | None = None,
        group: str | None = None,
        namespace: str | None = None,
        user_agent: str | None = None,
    ) -> ChaosRule:
        """Fail a random ``rate`` (0..1) of matching requests, reproducibly for a given ``seed``."""
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be between 0 and 1")
        codes = (statuses,) if isinstance(statuses, int) else tuple(statuses)
        rule = ChaosRule(
            rate, codes, Match(verb, resource, group, namespace, None, None, user_agent), random.Random(seed)
        )
        self._chaos.append(rule)
        return rule

    def delay(
        self,
        seconds: float,
        *,
        times: int | None = None,
        verb: str | None = None,
        resource: str | None = None,
        group: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        user_agent: str | None = None,
    ) -> DelayRule:
        """Add ``seconds`` of latency to matching requests."""
        rule = DelayRule(seconds, Match(verb, resource, group, namespace, name, None, user_agent), times)
        self._delays.append(rule)
        return rule

    def clear(self) -> None:
        """Remove every rule."""
        self._failures.clear()
        self._chaos.clear()
        self._delays.clear()

    def latency_for(self, info: RequestInfo, user_agent: str) -> float:
        total = 0.0
        for rule in self._delays:
            if (rule.remaining is None or rule.remaining > 0) and rule.match.matches(info, user_agent):
                if rule.remaining is not None:
                    rule.remaining -= 1
                rule.hits += 1
                total += rule.seconds
        return total

    def failure_for(self, info: RequestInfo, user_agent: str) -> ApiError | None:
        """The error to answer this request with, if a rule says so (consumes one use of it)."""
        for rule in self._failures:
            if (rule.remaining is None or rule.remaining > 0) and rule.match.matches(info, user_agent):
                if rule.remaining is not None:
                    rule.remaining -= 1
                rule.hits += 1
                return fault_error(
                    rule.status, info, retry_after=rule.retry_after, message=rule.message, user=rule.user
                )
        for chaos in self._chaos:
            if chaos.match.matches(info, user_agent) and chaos.rng.random() < chaos.rate:
                status = chaos.rng.choice(chaos.statuses)
                chaos.hits += 1
                chaos.hits_by_status[status] += 1
                return fault_error(status, info)
        return None


def rbac_message(info: RequestInfo, user: str) -> str:
    """``User "u" cannot <verb> resource "<r>[/<sub>]" in API group "<g>" ...`` as the RBAC
    authorizer words it."""
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    where = f'in the namespace "{info.namespace}"' if info.namespace else "at the cluster scope"
    return f'User "{user}" cannot {info.verb} resource "{resource}" in API group "{info.group}" {where}'


def fault_error(
    status: int,
    info: RequestInfo,
    *,
    retry_after: int = 1,
    message: str | None = None,
    user: str = DEFAULT_USER,
) -> ApiError:
    """The failure a real server would send with ``status`` for this request."""
    gr = _GroupResource(info.group, info.resource)
    if status == 403:
        return forbidden(gr, info.name, message or rbac_message(info, user))
    if status == 409:
        return conflict(gr, info.name) if message is None else conflict(gr, info.name, message)
    if status == 429:
        return too_many_requests(retry_after)
    if status == 404:
        return not_found(gr, info.name)
    if status == 410:
        return gone(message or "too old resource version")
    if status == 500:
        return internal_error(message or "injected fault")
    if status == 503:
        error = service_unavailable(message or "the server is currently unable to handle the request")
        error.headers["Retry-After"] = str(retry_after)
        return error
    if status == 504:
        return ApiError(
            504,
            "Timeout",
            message
            or "Timeout: request did not complete within requested timeout - context deadline exceeded",
            {},
        )
    return ApiError(status, "", message or f"injected fault ({status})")
