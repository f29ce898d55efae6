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

    @property
    def triple(self) -> tuple[str, str, str]:
        return (self.group, self.resource, self.verb)


def watched(group: str, resource: str, why: str, *verbs: str) -> tuple[Rule, ...]:
    """The rules granting each of ``verbs`` on ``resource`` where the controllers watch."""
    return tuple(Rule(group, resource, verb, Scope.WATCHED, why) for verb in verbs)


def own_kind(group: str, plural: str, children: str) -> tuple[Rule, ...]:
    """What every controller of a custom resource needs on its own kind: list and watch (its
    cache; the start-up check lists with limit=1), patch of the status subresource, and update
    of ``<plural>/finalizers``, which no request sends: the API server checks it
    (OwnerReferencesPermissionEnforcement) before it lets the controller set
    blockOwnerDeletion in its ``children``'s ownerReference."""
    return (
        Rule(
            group,
            plural,
            "list",
            Scope.WATCHED,
            "cache (list then watch); the start-up check lists with limit=1",
        ),
        Rule(group, plural, "watch", Scope.WATCHED, "cache"),
        Rule(group, f"{plural}/status", "patch", Scope.WATCHED, "reconciler: status (merge patch)"),
        Rule(
            group,
            f"{plural}/finalizers",
            "update",
            Scope.WATCHED,
            f"admission, not a request: blockOwnerDeletion in the {children}' ownerReference needs it "
            "(OwnerReferencesPermissionEnforcement)",
            sent=False,
        ),
    )
