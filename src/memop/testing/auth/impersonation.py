"""Impersonation (``kubectl --as``), as kube-apiserver's impersonation filter does it
(``staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation.go``).

The ``Impersonate-User``, ``Impersonate-Group``, ``Impersonate-Uid`` and ``Impersonate-Extra-<key>``
headers make the request act as that user, if the requester may ``impersonate`` each of them:
a user (``users``, cluster scope), a ServiceAccount's username (``serviceaccounts`` in its
namespace; its groups are added when no group is asked for), each group (``groups``), the uid
(``uids`` in ``authentication.k8s.io``) and each extra value (``userextras/<key>`` there). The
first one refused answers 403 with kube-apiserver's message (``users "bob" is forbidden: User
"alice" cannot impersonate resource "users" in API group "" at the cluster scope``). The
impersonated user gets ``system:authenticated`` unless a group says ``system:authenticated`` or
``system:unauthenticated`` (``system:anonymous`` gets ``system:unauthenticated``). Groups, a uid
or extras without a user is a 400.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol
from urllib.parse import unquote

from memop.testing.apiserver.errors import bad_request
from memop.testing.auth.authn import (
    ANONYMOUS,
    AUTHENTICATED,
    SERVICE_ACCOUNT_PREFIX,
    UNAUTHENTICATED,
    UserInfo,
    service_account_groups,
)
from memop.testing.auth.forbidden import forbidden_request
from memop.testing.auth.rbac import Attributes, Authorizer

USER, GROUP, UID = "Impersonate-User", "Impersonate-Group", "Impersonate-Uid"
EXTRA_PREFIX = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"


class Headers(Protocol):
    """A request's headers (aiohttp's CIMultiDictProxy)."""

    def getall(self, key: str, default: list[str]) -> list[str]: ...

    def items(self) -> Iterable[tuple[str, str]]: ...


def impersonated(authorizer: Authorizer, requester: UserInfo, headers: Headers) -> UserInfo:
    """The user the request acts as: ``requester``, or whom its Impersonate-* headers name
    (ApiError 403 when the requester may not, 400 for a malformed request)."""
    username = (headers.getall(USER, []) or [""])[0]
    groups = list(headers.getall(GROUP, []))
    uid = (headers.getall(UID, []) or [""])[0]
    extra: dict[str, list[str]] = {}
    for key, value in headers.items():
        if key.lower().startswith(EXTRA_PREFIX):
            extra.setdefault(unquote(key[len(EXTRA_PREFIX) :]).lower(), []).append(value)
    if not username:
        if groups or uid or extra:
            raise bad_request(f"requested {_asked(groups, uid, extra)} without impersonating a user")
        return requester
    checks: list[Attributes] = []
    if username.startswith(SERVICE_ACCOUNT_PREFIX) and username.count(":") == 3:
        _, _, namespace, name = username.split(":")
        checks.append(_attrs(requester, "", "serviceaccounts", name, namespace=namespace))
        if not groups:
            groups = list(service_account_groups(namespace)[:2])
    else:
        checks.append(_attrs(requester, "", "users", username))
    checks.extend(_attrs(requester, "", "groups", group) for group in headers.getall(GROUP, []))
    for key, values in extra.items():
        checks.extend(
            _attrs(requester, AUTHENTICATION_GROUP, "userextras", v, subresource=key) for v in values
        )
    if uid:
        checks.append(_attrs(requester, AUTHENTICATION_GROUP, "uids", uid))
    for attrs in checks:
        decision = authorizer.authorize(attrs)
        if not decision.allowed:
            raise forbidden_request(attrs, decision.reason)
    if username == ANONYMOUS:
        if UNAUTHENTICATED not in groups:
            groups.append(UNAUTHENTICATED)
    elif AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return UserInfo(username, tuple(groups), uid, {key: tuple(values) for key, values in extra.items()})


def _attrs(
    requester: UserInfo, group: str, resource: str, name: str, *, namespace: str = "", subresource: str = ""
) -> Attributes:
    return Attributes(
        requester,
        "impersonate",
        group=group,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )


def _asked(groups: list[str], uid: str, extra: dict[str, list[str]]) -> str:
    """What was asked for, as the filter's error lists it."""
    asked = [f"groups={groups}"] if groups else []
    if uid:
        asked.append(f"uid={uid}")
    asked.extend(f"extra[{key}]={values}" for key, values in extra.items())
    return "[" + " ".join(asked) + "]"
