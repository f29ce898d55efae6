"""Authentication and authorization in the in-memory server's request path, as kube-apiserver's
``endpoints/filters`` run them: who sent the request (401 when its token names nobody), whom it
impersonates (:mod:`~memop.testing.auth.impersonation`), whether they may (403 with
kube-apiserver's message, :mod:`~memop.testing.auth.forbidden`), and the RBAC escalation check on
role and binding writes. :class:`Auth` is all the server holds; its parts are in this package's
other modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from memop.runtime.util.clock import Clock, RealClock
from memop.testing.apiserver.errors import bad_request, invalid, not_found
from memop.testing.apiserver.objects import invalid as field_invalid
from memop.testing.apiserver.objects import rfc3339
from memop.testing.apiserver.requestlog import RequestInfo
from memop.testing.apiserver.store import AdmissionHook, Served, Store
from memop.testing.auth import bootstrap
from memop.testing.auth.aggregation import AggregationController
from memop.testing.auth.authn import MASTERS_GROUP, Authenticator, UserInfo, bearer_token
from memop.testing.auth.escalation import BINDING_RESOURCES, ROLE_RESOURCES, EscalationCheck
from memop.testing.auth.forbidden import forbidden_request
from memop.testing.auth.impersonation import Headers, impersonated
from memop.testing.auth.rbac import (
    RBAC_GROUP,
    Attributes,
    Authorizer,
    GroupResource,
    RbacAuthorizer,
    RuleResolver,
)
from memop.testing.auth.writes import GuardedWrite

# Where the server keeps a request's UserInfo (aiohttp's request mapping).
USER_KEY = web.RequestKey("memop.user", UserInfo)
_SERVICE_ACCOUNTS = GroupResource("", "serviceaccounts")
# What ValidateTokenRequest accepts as spec.expirationSeconds.
_MIN_EXPIRATION, _MAX_EXPIRATION = 600, 2**32


def request_attributes(user: UserInfo, info: RequestInfo, query: Mapping[str, str]) -> Attributes:
    """What the authorizer is asked for a request (``GetAuthorizerAttributes``): a list or watch
    whose field selector requires ``metadata.name=x`` names ``x``, as kube-apiserver's
    RequestInfoFactory does (so a rule with ``resourceNames: [x]`` lets one watch one object)."""
    if not info.resource_request:
        return Attributes(user, info.verb, resource_request=False, path=info.path)
    name = info.name
    if not name and info.verb in ("list", "watch"):
        selector = query.get("fieldSelector") or ""
        for term in selector.split(","):
            key, sep, value = term.partition("=")
            if sep and key.strip() == "metadata.name":  # = or ==, RequiresExactMatch
                name = value.lstrip("=").strip()
    return Attributes(
        user,
        info.verb,
        group=info.group,
        resource=info.resource,
        subresource=info.subresource,
        namespace=info.namespace,
        name=name,
    )


class Auth:
    """The server's authentication and authorization (see the module docstring).

    The bootstrap policy (:mod:`memop.testing.auth.bootstrap`) is created in ``store`` when it is
    first needed: by the first RBAC decision (a request of anyone outside ``system:masters``, a
    review, an escalation check) or the first request to the RBAC API, or by
    :meth:`ensure_policy`. The administrator's requests never need it, and most tests make no
    other: seventeen writes at every server's start would cost them more than anything else
    the server does at start. Only code reading the store directly can tell the difference.
    :meth:`start` runs the ClusterRole aggregation controller, :meth:`stop` ends it.
    ``insecure``: the server speaks plain HTTP (see :mod:`memop.testing.auth.authn`).
    """

    def __init__(self, store: Store, clock: Clock, *, insecure: bool = False) -> None:
        self._store = store
        self._clock = clock
        self.authenticator = Authenticator(self._service_account_uid, clock.time, insecure=insecure)
        self._policy = False  # whether the bootstrap policy is in the store
        self.resolver = RuleResolver(store, self.ensure_policy)
        self.authorizer = Authorizer(RbacAuthorizer(self.resolver))
        self.escalation = EscalationCheck(self.authorizer, self.resolver)
        # Real time, as the root CA publisher: a controller's queue, not the server's notion of now.
        self.aggregation = AggregationController(store, clock=RealClock())

    def ensure_policy(self) -> None:
        """Create the bootstrap policy in the store, unless it is there already."""
        if not self._policy:
            self._policy = True
            bootstrap.install(self._store)

    async def start(self) -> None:
        await self.aggregation.start()

    async def stop(self) -> None:
        await self.aggregation.stop()

    def _service_account_uid(self, namespace: str, name: str) -> str | None:
        storage = self._store.storage_for("", "serviceaccounts")
        entry = storage.get(namespace, name) if storage is not None else None
        return None if entry is None else str(entry.obj["metadata"].get("uid") or "")

    def authenticate(self, headers: Headers) -> UserInfo:
        """The user a request acts as: who its ``Authorization`` header names (ApiError 401 when
        it names nobody), or whom it impersonates (403 when it may not)."""
        authorization = (headers.getall("Authorization", []) or [""])[0]
        user = self.authenticator.authenticate(bearer_token(authorization))
        return impersonated(self.authorizer, user, headers)

    def authorize(self, user: UserInfo, info: RequestInfo, query: Mapping[str, str]) -> None:
        """Raise the 403 kube-apiserver answers when ``user`` may not make this request."""
        if info.group == RBAC_GROUP:
            self.ensure_policy()
        attrs = request_attributes(user, info, query)
        decision = self.authorizer.authorize(attrs)
        if not decision.allowed:
            raise forbidden_request(attrs, decision.reason)

    def guard(
        self, user: UserInfo, info: RequestInfo, admission: AdmissionHook | None
    ) -> AdmissionHook | None:
        """The admission hook to give the store for this write (:mod:`memop.testing.auth.writes`):
        ``admission`` with the RBAC escalation check when it writes a role or a binding, and with
        the ``create`` authorization when a PATCH or PUT may create the object; ``admission``
        itself for ``system:masters``, who is never checked."""
        if MASTERS_GROUP in user.groups:
            return admission
        escalation = None
        if info.group == RBAC_GROUP and info.resource in ROLE_RESOURCES | BINDING_RESOURCES:

            def escalation(served: Served, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
                self.escalation.check(user, info, served.rtype, obj, old)

        on_create = None
        if info.verb in ("patch", "update"):
            create = Attributes(
                user,
                "create",
                group=info.group,
                resource=info.resource,
                subresource=info.subresource,
                namespace=info.namespace,
                name=info.name,
            )

            def on_create(served: Served, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
                decision = self.authorizer.authorize(create)
                if not decision.allowed:
                    raise forbidden_request(create, decision.reason)

        if escalation is None and on_create is None:
            return admission
        return GuardedWrite(admission, after_mutation=escalation, on_create=on_create)

    def token_request(self, info: RequestInfo, body: Any) -> dict[str, Any]:
        """The TokenRequest the ``serviceaccounts/<name>/token`` subresource answers with: a
        token of that ServiceAccount (404 when it does not exist), for ``spec.audiences``
        (default: the API server's) and ``spec.expirationSeconds`` (default 3600; less than 10
        minutes or more than 2^32 seconds is 422, as ``ValidateTokenRequest`` says)."""
        uid = self._service_account_uid(info.namespace, info.name)
        if uid is None:
            raise not_found(_SERVICE_ACCOUNTS, info.name)
        spec = dict(body.get("spec") or {}) if isinstance(body, dict) else {}
        audiences = tuple(str(a) for a in spec.get("audiences") or ())
        expiration = spec.get("expirationSeconds")
        if expiration is None:
            expiration = 3600
        if not isinstance(expiration, int) or isinstance(expiration, bool):
            raise bad_request(f"spec.expirationSeconds: expected an integer, not {expiration!r}")
        if expiration < _MIN_EXPIRATION or expiration > _MAX_EXPIRATION:
            which = "less than 10 minutes" if expiration < _MIN_EXPIRATION else "larger than 2^32 seconds"
            error = field_invalid("spec.expirationSeconds", expiration, f"may not specify a duration {which}")
            raise invalid("authentication.k8s.io", "TokenRequest", info.name, [error])
        minted = self.authenticator.mint(
            info.namespace, info.name, uid, audiences=audiences, expiration=expiration
        )
        spec["audiences"] = list(audiences or minted.audiences)
        spec["expirationSeconds"] = expiration
        spec.setdefault("boundObjectRef", None)
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {
                "name": info.name,
                "namespace": info.namespace,
                "creationTimestamp": rfc3339(self._clock.time()),
            },
            "spec": spec,
            "status": {"token": minted.token, "expirationTimestamp": rfc3339(minted.expires)},
        }
