"""RBAC's escalation prevention on role and binding writes (``pkg/registry/rbac/*/policybased``).

kube-apiserver lets a user write a Role or ClusterRole only with the permissions it grants, and
a RoleBinding or ClusterRoleBinding only of a role whose permissions they hold or may ``bind``:

- Members of ``system:masters`` are never checked (``EscalationAllowed``).
- A role write passes when the user may ``escalate`` that role (``roles``/``clusterroles``, the
  request's name and namespace), or when the update changes only the fields the garbage
  collector writes (owner references, finalizers); else the role's rules must be covered by the
  user's own in the request's namespace (only ClusterRoleBindings for a ClusterRole), or the
  write is 403 ``<kind> "name" is forbidden: user "u" (groups=[...]) is attempting to grant RBAC
  permissions not currently held:\\n...``. A ClusterRole with an ``aggregationRule`` (before or
  after an update) also needs every permission: ``... is forbidden: must have cluster-admin
  privileges to use the aggregationRule``.
- A binding write passes when the user may ``bind`` the referenced role (verb ``bind`` on
  ``roles``/``clusterroles`` named by ``roleRef``, in the binding's namespace, "" for a
  ClusterRoleBinding), or holds every permission of that role there; a role that does not
  exist is 404 NotFound naming the binding's resource and the role's name (as measured on
  v1.36.2), a missing permission the 403 above.

The checks run where kube-apiserver runs them: after the mutating admission webhooks and
before validation (:class:`~memop.testing.auth.writes.GuardedWrite` runs them in the store).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.testing.apiserver.errors import forbidden, not_found
from memop.testing.apiserver.requestlog import RequestInfo
from memop.testing.apiserver.resources import ResourceType
from memop.testing.auth.authn import UserInfo
from memop.testing.auth.rbac import (
    FULL_AUTHORITY,
    RBAC_GROUP,
    Attributes,
    Authorizer,
    GroupResource,
    RuleResolver,
)
from memop.testing.auth.rbac import escalation_error as _escalation_error

ROLE_RESOURCES = frozenset(("roles", "clusterroles"))
BINDING_RESOURCES = frozenset(("rolebindings", "clusterrolebindings"))
_ROLE_KINDS = {"Role": "roles", "ClusterRole": "clusterroles"}
# What IsOnlyMutatingGCFields lets change, and what the server sets whatever the body says.
_GC_FIELDS = ("ownerReferences", "finalizers", "selfLink", "managedFields")
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation", "deletionTimestamp")


def _only_gc_fields(obj: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    new_meta = dict(obj.get("metadata") or {})
    old_meta = old.get("metadata") or {}
    for key in (*_GC_FIELDS, *_SERVER_FIELDS):
        new_meta.pop(key, None)
        if key in old_meta:
            new_meta[key] = old_meta[key]
    return {**obj, "metadata": new_meta} == old


def _has_aggregation_rule(obj: Mapping[str, Any] | None) -> bool:
    rule = (obj or {}).get("aggregationRule")
    return isinstance(rule, dict) and bool(rule.get("clusterRoleSelectors"))


class EscalationCheck:
    """The checks of the module docstring, for one user's writes."""

    def __init__(self, authorizer: Authorizer, resolver: RuleResolver) -> None:
        self.authorizer = authorizer
        self.resolver = resolver

    def check(
        self,
        user: UserInfo,
        info: RequestInfo,
        rtype: ResourceType,
        obj: Mapping[str, Any],
        old: Mapping[str, Any] | None,
    ) -> None:
        """Raise the ApiError kube-apiserver answers when ``user`` may not write ``obj``."""
        if old is not None and _only_gc_fields(obj, old):
            return
        name = str((obj.get("metadata") or {}).get("name") or info.name)
        namespace = info.namespace if rtype.namespaced else ""
        if rtype.plural in ROLE_RESOURCES:
            self._check_role(user, info, rtype, name, obj, old=old)
        else:
            self._check_binding(user, rtype, name, namespace, obj)

    def _check_role(
        self,
        user: UserInfo,
        info: RequestInfo,
        rtype: ResourceType,
        name: str,
        obj: Mapping[str, Any],
        *,
        old: Mapping[str, Any] | None,
    ) -> None:
        namespace = info.namespace if rtype.namespaced else ""
        escalate = Attributes(
            user, "escalate", group=info.group, resource=info.resource, namespace=namespace, name=info.name
        )
        if self.authorizer.authorize(escalate).allowed:
            return
        rules = [r for r in obj.get("rules") or () if isinstance(r, dict)]
        refusal = _escalation_error(self.resolver, user, namespace, rules)
        if refusal is not None:
            raise forbidden(rtype, name, refusal)
        aggregates = _has_aggregation_rule(obj) or _has_aggregation_rule(old)
        if aggregates and _escalation_error(self.resolver, user, namespace, FULL_AUTHORITY) is not None:
            raise forbidden(rtype, name, "must have cluster-admin privileges to use the aggregationRule")

    def _check_binding(
        self, user: UserInfo, rtype: ResourceType, name: str, namespace: str, obj: Mapping[str, Any]
    ) -> None:
        ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
        assert isinstance(ref, dict)
        plural = _ROLE_KINDS.get(str(ref.get("kind")))
        if plural is None:
            return  # validation refuses the kind, after this check
        role_name = str(ref.get("name") or "")
        bind = Attributes(
            user,
            "bind",
            group=str(ref.get("apiGroup") or ""),
            resource=plural,
            namespace=namespace,
            name=role_name,
        )
        if self.authorizer.authorize(bind).allowed:
            return
        try:
            rules = self.resolver.role_reference_rules(ref, namespace)
        except LookupError:
            # Measured on kube-apiserver v1.36.2: 404 naming the binding's resource with the
            # role's name (rolebindings.rbac.authorization.k8s.io "missing-role" not found).
            raise not_found(GroupResource(RBAC_GROUP, rtype.plural), role_name) from None
        refusal = _escalation_error(self.resolver, user, namespace, rules)
        if refusal is not None:
            raise forbidden(rtype, name, refusal)
