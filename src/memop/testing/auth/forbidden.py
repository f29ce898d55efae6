"""kube-apiserver's 403 for a request the authorizer did not allow (``responsewriters.Forbidden``,
``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go``), with the
authorizer's reason after ``: `` when it gave one:

- ``deployments.apps "web" is forbidden: User "u" cannot get resource "deployments" in API group
  "apps" in the namespace "ns"``;
- ``nodes is forbidden: User "u" cannot list resource "nodes" in API group "" at the cluster
  scope`` (no name: a list, a watch, a create);
- ``deployments.apps "web" is forbidden: User "u" cannot update resource "deployments/scale" in
  API group "apps" in the namespace "ns"`` (a subresource);
- ``forbidden: User "u" cannot get path "/metrics"`` (a non-resource request).
"""

from __future__ import annotations

from memop.testing.apiserver.errors import ApiError, forbidden
from memop.testing.apiserver.schema import go_quote
from memop.testing.auth.rbac import Attributes, GroupResource


def forbidden_request(attrs: Attributes, reason: str) -> ApiError:
    """The 403 kube-apiserver answers a request the authorizer did not allow (module docstring)."""
    user = go_quote(attrs.user.name)
    if not attrs.resource_request:
        message = f"User {user} cannot {attrs.verb} path {go_quote(attrs.path)}"
    else:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        where = f"in the namespace {go_quote(attrs.namespace)}" if attrs.namespace else "at the cluster scope"
        message = (
            f"User {user} cannot {attrs.verb} resource {go_quote(resource)} in API group "
            f"{go_quote(attrs.group)} {where}"
        )
    if reason:
        message = f"{message}: {reason}"
    if not attrs.group and not attrs.resource:
        return ApiError(403, "Forbidden", f"forbidden: {message}", {})
    return forbidden(GroupResource(attrs.group, attrs.resource), attrs.name, message)
