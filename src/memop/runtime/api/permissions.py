"""RBAC permissions as data: what a controller (or the manager) sends, where, and why.

Each controller declares the :class:`Rule` list its code needs (see
:class:`memop.runtime.controller.definition.ControllerDefinition`); ``memop.manifests.rbac``
gathers them into the
manifests' roles, and tests compare them with the requests an API server saw. Keeping the
reason next to each permission makes an audit one table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Scope(enum.Enum):
    """Where a rule is granted."""

    WATCHED = "watched"  # wherever the controllers watch: all namespaces, or each watched one
    OPERATOR = "operator"  # the operator's own namespace only (leader election)
    # Cluster-scoped TokenReview/SubjectAccessReview creates, only with --metrics-secure.
    METRICS_AUTH = "metrics-auth"


@dataclass(frozen=True)
class Rule:
    """One permission: ``verb`` on ``resource`` (``plural`` or ``plural/subresource``) in ``group``."""

    group: str  # "" for the core group
    resource: str
    verb: str
    scope: Scope
    why: str  # the code that needs it
    sent: bool = True  # False: checked by the API server on memop's behalf, never requested
    # Only these objects (RBAC's resourceNames); empty: every object of the resource.
    resource_names: tuple[str, ...] = ()

    @property
    def triple(self) -> tuple[str, str, str]:
        return (self.group, self.resource, self.verb)


def watched(group: str, resource: str, why: str, *verbs: str) -> tuple[Rule, ...]:
    """The rules granting each of ``verbs`` on ``resource`` where the controllers watch."""
    return tuple(Rule(group, resource, verb, Scope.WATCHED, why) for verb in verbs)


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
      (as :func:`memop.runtime.cache.store.controller_reference` does). Every child of a
      cluster-scoped owner carries one, namespaced or cluster-scoped; so does a namespaced
      owner's child in its own namespace. Only a namespaced owner's children an ownerReference
      cannot point from (in another namespace, or cluster-scoped, mapped back through
      :func:`memop.runtime.controller.handlers.owner_annotations`) carry none: a controller with
      only such children leaves it out.
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
