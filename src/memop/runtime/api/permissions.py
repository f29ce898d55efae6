"""RBAC permissions as data: what a controller (or the manager) sends, where, and why.

Each controller declares the :class:`Rule` list its code needs (see
:class:`memop.runtime.controller.definition.ControllerDefinition`); ``memop.manifests.rbac``
gathers them into the
manifests' roles, and tests compare them with the requests an API server saw. Keeping the
reason next to each permission makes an audit one table.

A :class:`Rule` holds whatever a Kubernetes PolicyRule can, one verb at a time:

- a verb on a resource (``plural`` or ``plural/subresource``) of an API group, optionally
  limited to some objects by name (``resource_names``, a PolicyRule's ``resourceNames``);
- or a verb on non-resource URLs (``non_resource_urls``, a PolicyRule's ``nonResourceURLs``,
  such as ``/healthz`` or ``/metrics``): ``group`` and ``resource`` empty, and the scope
  :data:`Scope.CLUSTER`, since Kubernetes grants them through a ClusterRole only
  (:func:`non_resource` makes them).

One class rather than two because a controller's ``rules`` are one table and a PolicyRule is
one type; :func:`rule_problem` says what Kubernetes would refuse or ignore in a rule, and
``memop manifests`` refuses such a rule with one error line.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

# Every verb an RBAC rule on resources can name (kubectl create role --verb takes these): the
# request verbs, then the ones the API server checks on special requests (bind and escalate on
# roles, impersonate on users/groups/serviceaccounts, use on PodSecurityPolicies, approve and
# sign on CertificateSigningRequests), then "*". Also the order a rule's verbs are written in.
RESOURCE_VERBS = (
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "bind",
    "escalate",
    "impersonate",
    "use",
    "approve",
    "sign",
    "*",
)
# A non-resource request's verb is its HTTP method, lower-case (the API server's RequestInfo).
NON_RESOURCE_VERBS = ("get", "head", "options", "post", "put", "patch", "delete", "*")
# The verbs Kubernetes authorizes without an object's name: create (the name may not be known
# yet) and deletecollection; list and watch match resourceNames only when the request carries
# a metadata.name field selector, which a cache's list and watch do not.
UNNAMED_VERBS = frozenset(("list", "watch", "create", "deletecollection"))


class Scope(enum.Enum):
    """Where a rule is granted."""

    WATCHED = "watched"  # wherever the controllers watch: all namespaces, or each watched one
    OPERATOR = "operator"  # the operator's own namespace only (leader election)
    # Cluster-scoped TokenReview/SubjectAccessReview creates, only with --metrics-secure.
    METRICS_AUTH = "metrics-auth"
    # Cluster-wide in every install, even one that watches some namespaces only: a ClusterRole
    # of its own. Where non-resource URLs go, and what a controller needs cluster-wide whatever
    # it watches.
    CLUSTER = "cluster"


# The scopes granted by a ClusterRole in every install that grants them at all.
CLUSTER_SCOPES = frozenset((Scope.CLUSTER, Scope.METRICS_AUTH))


@dataclass(frozen=True)
class Rule:
    """One permission: ``verb`` on ``resource`` (``plural`` or ``plural/subresource``) in ``group``,
    on the objects ``resource_names`` names (all when empty); or ``verb`` on the
    ``non_resource_urls`` (``group`` and ``resource`` empty, :data:`Scope.CLUSTER`).

    ``resource_names`` and ``non_resource_urls`` given as lists are kept as tuples. Nothing is
    checked here (a rule is declared at import time, where an error would be a traceback):
    :func:`rule_problem` says what is wrong with one.
    """

    group: str  # "" for the core group
    resource: str
    verb: str
    scope: Scope
    why: str  # the code that needs it
    sent: bool = True  # False: checked by the API server on memop's behalf, never requested
    resource_names: tuple[str, ...] = field(default=(), kw_only=True)
    non_resource_urls: tuple[str, ...] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        for name in ("resource_names", "non_resource_urls"):
            value = getattr(self, name)
            if isinstance(value, (list, set, frozenset)):
                object.__setattr__(self, name, tuple(value))

    @property
    def triple(self) -> tuple[str, str, str]:
        return (self.group, self.resource, self.verb)

    @property
    def key(self) -> tuple[str, str, str, tuple[str, ...], tuple[str, ...]]:
        """What makes two rules the same permission: the triple, the names and the URLs (as sets)."""
        return (
            *self.triple,
            tuple(sorted(set(self.resource_names))),
            tuple(sorted(set(self.non_resource_urls))),
        )

    def grants(self, group: str, resource: str, verb: str, name: str = "") -> bool:
        """Whether this rule lets ``verb`` through on ``resource`` of ``group`` (the object
        ``name``, "" for a request without one), wherever its scope holds."""
        if self.non_resource_urls or self.group not in (group, "*") or self.resource not in (resource, "*"):
            return False
        if self.verb not in (verb, "*"):
            return False
        return not self.resource_names or name in self.resource_names

    def describe(self) -> str:
        """The rule in a line: ``bind clusterroles (rbac.authorization.k8s.io) named admin``."""
        if self.non_resource_urls:
            return f"{self.verb} {', '.join(map(str, self.non_resource_urls))} (non-resource URLs)"
        text = f"{self.verb} {self.resource or '<no resource>'} ({self.group or 'core'})"
        if self.resource_names:
            text += f" named {', '.join(map(str, self.resource_names))}"
        return text


def rule_problem(rule: Rule) -> str:
    """What Kubernetes would refuse or ignore in ``rule``, or "": an unknown verb, a resource
    rule without a resource, ``resource_names`` with a verb Kubernetes authorizes without a name
    (:data:`UNNAMED_VERBS`), non-resource URLs beside a resource or outside a ClusterRole."""
    if not isinstance(rule.scope, Scope):
        return f"scope {rule.scope!r} is not a Scope (Scope.WATCHED, Scope.OPERATOR, Scope.CLUSTER...)"
    for name in ("group", "resource", "verb"):
        if not isinstance(getattr(rule, name), str):
            return f"{name} must be a string, not {getattr(rule, name)!r} (one Rule per verb: see watched())"
    for name in ("resource_names", "non_resource_urls"):
        value = getattr(rule, name)
        if not isinstance(value, tuple) or not all(isinstance(item, str) and item for item in value):
            return f"{name} must be a tuple of non-empty strings, not {value!r}"
    if rule.non_resource_urls:
        return _non_resource_problem(rule)
    if rule.verb not in RESOURCE_VERBS:
        return f"unknown verb {rule.verb!r} (Kubernetes knows: {' '.join(RESOURCE_VERBS)})"
    if not rule.resource:
        return "no resource (name a resource, such as 'configmaps', or non_resource_urls)"
    if rule.resource_names and rule.verb in UNNAMED_VERBS:
        return (
            f"resource_names with {rule.verb!r}: Kubernetes authorizes create and deletecollection "
            "without a name, and list and watch by name only with a metadata.name field selector "
            "(which a cache's list and watch do not send); grant it without resource_names"
        )
    return ""


def _non_resource_problem(rule: Rule) -> str:
    if rule.group or rule.resource or rule.resource_names:
        return "non_resource_urls with a group, resource or resource_names: a rule holds one or the other"
    if rule.verb not in NON_RESOURCE_VERBS:
        return (
            f"unknown verb {rule.verb!r} for non-resource URLs (their verbs are HTTP methods: "
            f"{' '.join(NON_RESOURCE_VERBS)})"
        )
    if rule.scope not in CLUSTER_SCOPES:
        return (
            f"non_resource_urls in scope {rule.scope.name}: Kubernetes grants them in a ClusterRole "
            "only; use Scope.CLUSTER"
        )
    for url in rule.non_resource_urls:
        if not url.startswith("/") or "*" in url[:-1]:
            return f"non-resource URL {url!r}: a path starting with '/', '*' only at its end"
    return ""


def watched(
    group: str, resource: str, why: str, *verbs: str, resource_names: Iterable[str] = ()
) -> tuple[Rule, ...]:
    """The rules granting each of ``verbs`` on ``resource`` where the controllers watch (on the
    objects ``resource_names`` names, all when empty)."""
    names = tuple(resource_names)
    return tuple(Rule(group, resource, verb, Scope.WATCHED, why, resource_names=names) for verb in verbs)


def non_resource(urls: Iterable[str], why: str, *verbs: str) -> tuple[Rule, ...]:
    """The rules granting each of ``verbs`` (HTTP methods: ``get``, ``post``...) on the
    non-resource ``urls`` (``/healthz``, ``/metrics``, ``/logs/*``), cluster-wide."""
    paths = (urls,) if isinstance(urls, str) else tuple(urls)
    return tuple(Rule("", "", verb, Scope.CLUSTER, why, non_resource_urls=paths) for verb in verbs)


def own_kind(
    group: str,
    plural: str,
    *,
    status: bool = True,
    finalizers: bool = False,
    owner_references: bool = False,
) -> tuple[Rule, ...]:
    """What a controller of a custom resource needs on its own kind, each rule only when its code
    does what needs it:

    - always ``list`` and ``watch``: its cache (list then watch; the manager's start-up check
      lists with ``limit=1``);
    - ``status`` (default True): ``patch`` of ``<plural>/status``, the merge patch
      :func:`memop.runtime.controller.status.update_status` sends;
    - ``finalizers``: ``patch`` of the kind itself, which
      :func:`memop.runtime.controller.finalizers.add_finalizer` and ``remove_finalizer`` send
      (a finalizer is in the object's metadata, not in a subresource);
    - ``owner_references``: ``update`` of ``<plural>/finalizers``, which no request sends: the
      API server's OwnerReferencesPermissionEnforcement admission checks it before it lets a
      controller create a child whose ownerReference to this kind sets ``blockOwnerDeletion``
      (as :func:`memop.runtime.cache.store.controller_reference` does). A controller whose
      children carry no ownerReference (children in another namespace, or cluster-scoped, mapped
      back through :func:`memop.runtime.controller.handlers.owner_annotations`) leaves it out.
    """
    rules = [
        Rule(
            group,
            plural,
            "list",
            Scope.WATCHED,
            "cache (list then watch); the start-up check lists with limit=1",
        ),
        Rule(group, plural, "watch", Scope.WATCHED, "cache"),
    ]
    if status:
        rules.append(
            Rule(group, f"{plural}/status", "patch", Scope.WATCHED, "reconciler: status (merge patch)")
        )
    if finalizers:
        rules.append(
            Rule(
                group,
                plural,
                "patch",
                Scope.WATCHED,
                "reconciler: add its finalizer (merge patch), remove it (JSON patch)",
            )
        )
    if owner_references:
        rules.append(
            Rule(
                group,
                f"{plural}/finalizers",
                "update",
                Scope.WATCHED,
                "admission, not a request: blockOwnerDeletion in its children's ownerReference needs it "
                "(OwnerReferencesPermissionEnforcement)",
                sent=False,
            )
        )
    return tuple(rules)
