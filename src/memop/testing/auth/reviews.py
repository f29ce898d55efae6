"""The review APIs of the in-memory API server, answered from its authentication and RBAC.

All are create-only and never stored, as on a real server (the answer is the request with a
``status``):

- ``TokenReview`` (authentication.k8s.io/v1): who ``spec.token`` names (any token the server
  authenticates: the administrator's, a static one of :meth:`Reviews.add_token`, a
  ServiceAccount's), or ``error: [invalid bearer token, token lookup failed]``.
- ``SelfSubjectReview`` (authentication.k8s.io/v1): the requester's own ``userInfo``.
- ``SubjectAccessReview`` (authorization.k8s.io/v1): whether ``spec.user`` with ``spec.groups``
  may do what ``spec.resourceAttributes`` or ``spec.nonResourceAttributes`` say, decided by the
  server's authorizer (``system:masters``, RBAC, then the test's grants of :meth:`Reviews.allow`)
  with its reason; ``LocalSubjectAccessReview`` the same, in the request's namespace.
- ``SelfSubjectAccessReview`` (authorization.k8s.io/v1): the same for the requester.
- ``SelfSubjectRulesReview`` (authorization.k8s.io/v1, ``kubectl auth can-i --list``): the
  requester's RBAC rules in ``spec.namespace`` (the cluster's and that namespace's bindings),
  each split into a resource rule and a non-resource rule, with the roles RBAC could not read as
  ``evaluationError``; no namespace is a 400.
"""

from __future__ import annotations

import copy
from typing import Any

from memop.testing.apiserver.errors import bad_request
from memop.testing.apiserver.requestlog import RequestInfo
from memop.testing.auth.authn import UserInfo
from memop.testing.auth.filters import Auth
from memop.testing.auth.rbac import Attributes, aggregate

TOKEN_REVIEW_GROUP = "authentication.k8s.io"
ACCESS_REVIEW_GROUP = "authorization.k8s.io"
REVIEW_RESOURCES = {
    (TOKEN_REVIEW_GROUP, "tokenreviews"),
    (TOKEN_REVIEW_GROUP, "selfsubjectreviews"),
    (ACCESS_REVIEW_GROUP, "subjectaccessreviews"),
    (ACCESS_REVIEW_GROUP, "localsubjectaccessreviews"),
    (ACCESS_REVIEW_GROUP, "selfsubjectaccessreviews"),
    (ACCESS_REVIEW_GROUP, "selfsubjectrulesreviews"),
}


class Reviews:
    """The review APIs (module docstring) over the server's :class:`Auth`."""

    def __init__(self, auth: Auth) -> None:
        self._auth = auth

    def add_token(self, token: str, username: str, groups: tuple[str, ...] = (), uid: str = "") -> None:
        """Make ``token`` authenticate as ``username`` in ``groups`` and ``system:authenticated``,
        in requests and in TokenReviews."""
        self._auth.authenticator.add_token(token, username, groups, uid)

    def allow(self, subject: str, verb: str, target: str) -> None:
        """Let ``subject`` (a user or group name) ``verb`` ``target`` (a path like /metrics, or
        ``group/resource``), besides what RBAC grants."""
        self._auth.authorizer.grant(subject, verb, target)

    def answer(self, info: RequestInfo, body: Any, requester: UserInfo) -> dict[str, Any]:
        """The created review: ``body`` with the server's ``status``."""
        if not isinstance(body, dict):
            raise bad_request("the review must be an object")
        answer = copy.deepcopy(body)
        answer.setdefault("metadata", {})["creationTimestamp"] = None
        if info.resource == "selfsubjectreviews":
            answer["status"] = {"userInfo": requester.to_json()}
            return answer
        spec = body.get("spec")
        if not isinstance(spec, dict):
            raise bad_request("the review has no spec")
        if info.resource == "tokenreviews":
            answer["status"] = self._token_review(spec)
        elif info.resource == "selfsubjectrulesreviews":
            answer["status"] = self._rules_review(requester, str(spec.get("namespace") or ""))
        elif info.resource == "selfsubjectaccessreviews":
            answer["status"] = self._access_review(requester, spec, "")
        else:
            user = UserInfo(
                str(spec.get("user") or ""),
                tuple(str(g) for g in spec.get("groups") or ()),
                str(spec.get("uid") or ""),
            )
            answer["status"] = self._access_review(user, spec, info.namespace)
        return answer

    def _token_review(self, spec: dict[str, Any]) -> dict[str, Any]:
        user = self._auth.authenticator.review(str(spec.get("token") or ""))
        if user is None:
            return {"user": {}, "error": "[invalid bearer token, token lookup failed]"}
        return {"authenticated": True, "user": user.to_json(), "audiences": spec.get("audiences") or []}

    def _rules_review(self, user: UserInfo, namespace: str) -> dict[str, Any]:
        if not namespace:
            raise bad_request("no namespace on request")
        rules, errors = self._auth.resolver.rules_for(user, namespace)
        resource_rules: list[dict[str, Any]] = []
        non_resource_rules: list[dict[str, Any]] = []
        for rule in rules:
            verbs = list(rule.get("verbs") or [])
            if rule.get("resources"):
                out: dict[str, Any] = {"verbs": verbs}
                for key in ("apiGroups", "resources", "resourceNames"):
                    if rule.get(key):
                        out[key] = list(rule[key])
                resource_rules.append(out)
            if rule.get("nonResourceURLs"):
                non_resource_rules.append({"verbs": verbs, "nonResourceURLs": list(rule["nonResourceURLs"])})
        status: dict[str, Any] = {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": False,
        }
        if errors:
            status["evaluationError"] = aggregate(errors)
        return status

    def _access_review(self, user: UserInfo, spec: dict[str, Any], namespace: str) -> dict[str, Any]:
        non_resource = spec.get("nonResourceAttributes")
        if isinstance(non_resource, dict):
            attrs = Attributes(
                user,
                str(non_resource.get("verb") or ""),
                resource_request=False,
                path=str(non_resource.get("path") or ""),
            )
        else:
            resource = (
                spec.get("resourceAttributes") if isinstance(spec.get("resourceAttributes"), dict) else {}
            )
            assert isinstance(resource, dict)
            attrs = Attributes(
                user,
                str(resource.get("verb") or ""),
                group=str(resource.get("group") or ""),
                resource=str(resource.get("resource") or ""),
                subresource=str(resource.get("subresource") or ""),
                # A LocalSubjectAccessReview is about its own namespace, whatever it says.
                namespace=namespace or str(resource.get("namespace") or ""),
                name=str(resource.get("name") or ""),
            )
        decision = self._auth.authorizer.authorize(attrs)
        status: dict[str, Any] = {"allowed": decision.allowed}
        if decision.reason:
            status["reason"] = decision.reason
        return status
