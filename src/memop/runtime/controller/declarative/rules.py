"""The RBAC a declarative controller's code needs, from the kinds it applies and watches.

Nothing here is declared by hand: the owner's kind gives :func:`own_kind`'s rules (its cache,
its status, ownerReferences with blockOwnerDeletion, a finalizer when there is a cleanup), and
each child kind what the reconciler sends for it:

- ``list`` and ``watch``: the cache of its children (one label-selected informer);
- ``patch``: the server-side apply of each child;
- ``create``: kube-apiserver authorizes an apply that creates the object as a ``create`` too
  (``k8s.io/apiserver/pkg/endpoints/handlers/patch.go`` checks ``createAuthorizerAttributes``,
  verb ``create``, for apply patches of an object that does not exist);
- ``delete``: pruning the children ``desired`` no longer returns.

A child RoleBinding or ClusterRoleBinding also needs ``bind`` on the role it grants (the RBAC
escalation check refuses a binding to a role with permissions its creator lacks, unless the
creator may ``bind`` it), on that role's name only. Events are the manager's rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from memop.runtime.api.permissions import Rule, Scope, own_kind
from memop.runtime.client.resources import Resource

RBAC_GROUP = "rbac.authorization.k8s.io"
_BINDINGS = frozenset(("RoleBinding", "ClusterRoleBinding"))
_ROLE_PLURALS = {"Role": "roles", "ClusterRole": "clusterroles"}


def scope_of(resource: Resource) -> Scope:
    """Where a rule on ``resource`` is granted: where the controllers watch for a namespaced
    kind; cluster-wide for a cluster-scoped one, which no namespaced install's Role can grant."""
    return Scope.WATCHED if resource.namespaced else Scope.CLUSTER


def child_rules(resource: Resource) -> tuple[Rule, ...]:
    """What reconciling children of ``resource`` sends (see the module docstring)."""
    group, plural, scope = resource.group, resource.plural, scope_of(resource)
    return (
        Rule(group, plural, "list", scope, "declarative controller: cache of its children (list then watch)"),
        Rule(group, plural, "watch", scope, "declarative controller: cache of its children"),
        Rule(group, plural, "patch", scope, "declarative controller: server-side apply of each child"),
        Rule(
            group,
            plural,
            "create",
            scope,
            "declarative controller: a server-side apply that creates the child is authorized as a create",
        ),
        Rule(group, plural, "delete", scope, "declarative controller: prune children no longer desired"),
    )


def bind_rules(children: Iterable[Mapping[str, Any]]) -> tuple[Rule, ...]:
    """``bind`` on each named role that a RoleBinding or ClusterRoleBinding among ``children``
    (objects as applied) grants, one rule per role kind with the names sorted."""
    names: dict[str, set[str]] = {}
    for child in children:
        if child.get("kind") not in _BINDINGS or not str(child.get("apiVersion", "")).startswith(
            f"{RBAC_GROUP}/"
        ):
            continue
        ref = child.get("roleRef")
        if not isinstance(ref, Mapping) or ref.get("kind") not in _ROLE_PLURALS:
            continue
        if isinstance(ref.get("name"), str) and ref["name"]:
            names.setdefault(_ROLE_PLURALS[ref["kind"]], set()).add(ref["name"])
    return tuple(
        Rule(
            RBAC_GROUP,
            plural,
            "bind",
            Scope.WATCHED if plural == "roles" else Scope.CLUSTER,
            "declarative controller: its RoleBindings grant these roles (RBAC's escalation check)",
            resource_names=tuple(sorted(found)),
        )
        for plural, found in sorted(names.items())
    )


def declarative_rules(
    owner: Resource,
    children: Iterable[Resource],
    *,
    finalizer: bool,
    child_objects: Iterable[Mapping[str, Any]] = (),
    extra: Iterable[Rule] = (),
) -> tuple[Rule, ...]:
    """Every rule of a declarative controller: its own kind's, each child kind's, ``bind`` for
    the roles ``child_objects`` (children seen at definition time) bind, then ``extra`` (what
    the user's own code sends besides); each (group, resource, verb, names) once."""
    own = own_kind(owner.group, owner.plural, finalizers=finalizer, owner_references=True)
    rules = [
        *(replace(rule, scope=scope_of(owner)) for rule in own),
        *(rule for child in children for rule in child_rules(child)),
        *bind_rules(child_objects),
        *extra,
    ]
    seen: set[tuple[str, str, str, tuple[str, ...]]] = set()
    unique = []
    for rule in rules:
        key = (*rule.triple, rule.resource_names)
        if key not in seen:
            seen.add(key)
            unique.append(rule)
    return tuple(unique)
