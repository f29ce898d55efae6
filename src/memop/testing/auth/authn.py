"""Authentication for the in-memory API server: who a request's bearer token names.

As kube-apiserver authenticates (``staging/src/k8s.io/apiserver/pkg/authentication``):

- The test client's token (:data:`ADMIN_TOKEN`, what :meth:`ApiServer.kubeconfig` and the
  fixtures hand out) names ``memop-test`` in ``system:masters``: an administrator, as the
  kubeconfig kubeadm writes for ``kubernetes-admin``.
- A static token a test registers (:meth:`Authenticator.add_token`) names the user it was
  registered with, in its groups and ``system:authenticated``.
- A ServiceAccount token (:meth:`Authenticator.mint`, what the ``serviceaccounts/<name>/token``
  subresource answers with) names ``system:serviceaccount:NS:NAME`` with the uid of the
  ServiceAccount, the groups ``system:serviceaccounts``, ``system:serviceaccounts:NS`` and
  ``system:authenticated``, and the token's id as the ``authentication.kubernetes.io/credential-id``
  extra (``JTI=<id>``). It is a JWT signed with a key of this server (HS256 where the real server
  signs RS256 with its service-account key): valid until its ``exp``, and only while the
  ServiceAccount it names exists with the same uid.
- A request that presents no token is ``system:anonymous`` in ``system:unauthenticated``: a
  kubeadm cluster runs with ``--anonymous-auth=true`` (the default), so such a request is not
  refused here but by the authorizer (403, except what ``system:public-info-viewer`` grants
  everyone: GET ``/healthz``, ``/livez``, ``/readyz``, ``/version``). On a server without TLS
  (``Authenticator(insecure=True)``) it is the administrator instead, as on kube-apiserver's
  former insecure port, which checked no one: kubectl and client-go send no bearer token over
  plain HTTP, and memop's plain-HTTP servers are for tools that talk to them that way.
- A token that names nobody (unknown, badly signed, expired, its ServiceAccount gone) is 401
  ``Unauthorized``, anonymous auth or not.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memop.testing.apiserver.errors import ApiError

ADMIN_TOKEN = "memop-test-token"
ADMIN_USER = "memop-test"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
MASTERS_GROUP = "system:masters"
SERVICE_ACCOUNTS = "system:serviceaccounts"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
# What a TokenRequest without audiences is for: the API server's own (--api-audiences defaults
# to the issuer, which kubeadm sets to this).
DEFAULT_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
ISSUER = DEFAULT_AUDIENCE


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user (``user.Info``)."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """As ``UserInfo`` in a review (``username``, ``uid``, ``groups``, ``extra``; empty
        ones left out, as Go's omitempty does)."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {key: list(values) for key, values in self.extra.items()}
        return out


ADMIN = UserInfo(ADMIN_USER, (MASTERS_GROUP, AUTHENTICATED))
ANONYMOUS_USER = UserInfo(ANONYMOUS, (UNAUTHENTICATED,))


def service_account_username(namespace: str, name: str) -> str:
    """``system:serviceaccount:NS:NAME``."""
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}", AUTHENTICATED)


def unauthorized() -> ApiError:
    """401 as kube-apiserver answers a credential it cannot authenticate."""
    return ApiError(401, "Unauthorized", "Unauthorized")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Minted:
    """A ServiceAccount token and its expiry (seconds since the epoch)."""

    token: str
    expires: float
    audiences: tuple[str, ...]


class Authenticator:
    """Bearer token → :class:`UserInfo` (see the module docstring).

    ``service_account_uid(namespace, name)`` says the uid of a ServiceAccount that exists (None
    when it does not); ``now`` is the server's clock; ``insecure``: the server speaks plain
    HTTP, where a request without a credential is the administrator's."""

    def __init__(
        self,
        service_account_uid: Callable[[str, str], str | None],
        now: Callable[[], float],
        *,
        insecure: bool = False,
    ) -> None:
        self._service_account_uid = service_account_uid
        # Who a request without a credential is (module docstring).
        self.anonymous = ADMIN if insecure else ANONYMOUS_USER
        self._now = now
        self._key = secrets.token_bytes(32)
        # Static tokens: token -> user (the admin's always among them).
        self.tokens: dict[str, UserInfo] = {ADMIN_TOKEN: ADMIN}

    def add_token(self, token: str, username: str, groups: tuple[str, ...] = (), uid: str = "") -> None:
        """Make ``token`` name ``username`` in ``groups`` and ``system:authenticated``."""
        self.tokens[token] = UserInfo(username, (*groups, AUTHENTICATED), uid)

    def mint(
        self, namespace: str, name: str, uid: str, *, audiences: tuple[str, ...] = (), expiration: int = 3600
    ) -> Minted:
        """A token of the ServiceAccount ``namespace/name`` (whose uid is ``uid``), valid for
        ``expiration`` seconds."""
        now = int(self._now())
        audience = tuple(audiences or (DEFAULT_AUDIENCE,))
        claims = {
            "aud": list(audience),
            "exp": now + expiration,
            "iat": now,
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
            "nbf": now,
            "sub": service_account_username(namespace, name),
        }
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = _b64(hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256).digest())
        return Minted(f"{header}.{payload}.{signature}", float(now + expiration), audience)

    def authenticate(self, token: str | None) -> UserInfo:
        """The user ``token`` names; anonymous for None (no credential); ApiError 401 when it
        names nobody ("" included: a credential this server cannot check)."""
        if token is None:
            return self.anonymous
        user = self.tokens.get(token) or self._service_account(token)
        if user is None:
            raise unauthorized()
        return user

    def review(self, token: str) -> UserInfo | None:
        """The user a TokenReview's token names, None when it names nobody."""
        return self.tokens.get(token) or self._service_account(token) if token else None

    def _service_account(self, token: str) -> UserInfo | None:
        parts = token.split(".")
        if len(parts) != 3:
            return None
        expected = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        try:
            if not hmac.compare_digest(expected, _unb64(parts[2])):
                return None
            claims = json.loads(_unb64(parts[1]))
            account = claims["kubernetes.io"]
            namespace, name = str(account["namespace"]), str(account["serviceaccount"]["name"])
            uid = str(account["serviceaccount"]["uid"])
            expires = float(claims["exp"])
            jti = str(claims["jti"])
        except (ValueError, KeyError, TypeError):
            return None
        if expires <= self._now() or self._service_account_uid(namespace, name) != uid:
            return None
        return UserInfo(
            service_account_username(namespace, name),
            service_account_groups(namespace),
            uid,
            {CREDENTIAL_ID: (f"JTI={jti}",)},
        )


def bearer_token(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None without one. A header of
    another scheme is a credential this server cannot check: "" (never anonymous)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""
