"""TokenReview and SubjectAccessReview for the in-memory API server.

Both are create-only, never stored, as on a real server: the answer is computed from a table
the test fills in. :meth:`Reviews.add_token` maps a bearer token to a user (and groups);
:meth:`Reviews.allow` grants a user or group a verb on a non-resource path (``/metrics``) or
on a resource. Members of ``system:masters`` may do anything, as on a real cluster.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from memop.testing.errors import bad_request

TOKEN_REVIEW_GROUP = "authentication.k8s.io"
ACCESS_REVIEW_GROUP = "authorization.k8s.io"
REVIEW_RESOURCES = {(TOKEN_REVIEW_GROUP, "tokenreviews"), (ACCESS_REVIEW_GROUP, "subjectaccessreviews")}


@dataclass
class Reviews:
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (user or group, verb, path or "group/resource") the subject may act on.
    grants: set[tuple[str, str, str]] = field(default_factory=set)

    def add_token(self, token: str, username: str, groups: tuple[str, ...] = (), uid: str = "") -> None:
        user: dict[str, Any] = {"username": username, "groups": [*groups, "system:authenticated"]}
        if uid:
            user["uid"] = uid
        self.tokens[token] = user

    def allow(self, subject: str, verb: str, target: str) -> None:
        """Let ``subject`` (a user or group name) ``verb`` ``target`` (a path like /metrics)."""
        self.grants.add((subject, verb, target))

    def answer(self, group: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            raise bad_request("the review has no spec")
        answer = copy.deepcopy(body)
        answer.setdefault("metadata", {})["creationTimestamp"] = None
        if group == TOKEN_REVIEW_GROUP:
            answer["status"] = self._token_review(body["spec"])
        else:
            answer["status"] = self._access_review(body["spec"])
        return answer

    def _token_review(self, spec: dict[str, Any]) -> dict[str, Any]:
        user = self.tokens.get(str(spec.get("token") or ""))
        if user is None:
            return {"user": {}, "error": "[invalid bearer token, token lookup failed]"}
        return {"authenticated": True, "user": copy.deepcopy(user), "audiences": spec.get("audiences") or []}

    def _access_review(self, spec: dict[str, Any]) -> dict[str, Any]:
        subjects = [str(spec.get("user") or ""), *(str(g) for g in spec.get("groups") or [])]
        if "system:masters" in subjects:
            return {"allowed": True, "reason": "member of system:masters"}
        attributes = spec.get("nonResourceAttributes") or {}
        if attributes:
            verb, target = str(attributes.get("verb") or ""), str(attributes.get("path") or "")
        else:
            attributes = spec.get("resourceAttributes") or {}
            verb = str(attributes.get("verb") or "")
            target = f"{attributes.get('group') or ''}/{attributes.get('resource') or ''}"
        for subject in subjects:
            if (subject, verb, target) in self.grants or (subject, "*", target) in self.grants:
                return {"allowed": True, "reason": f'allowed for "{subject}" by the test\'s grants'}
        return {"allowed": False}
