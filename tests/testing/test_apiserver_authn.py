"""Authentication and the review APIs of the in-memory server, as kube-apiserver answers them.

What each test pins: a kubeadm cluster (``--anonymous-auth=true``) takes a request without a
token for ``system:anonymous`` and lets RBAC refuse it, except the public-info paths; a token that
names nobody is 401 ``Unauthorized``; a ServiceAccount's token (from its ``token`` subresource)
names ``system:serviceaccount:NS:NAME`` with its three groups until it expires or the
ServiceAccount goes; the reviews answer from the same authentication and RBAC.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.server import TOKEN, ApiServer
from memop.testing.wait import wait_for

AUTHN = "/apis/authentication.k8s.io/v1"
AUTHZ = "/apis/authorization.k8s.io/v1"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()  # time() starts at 1_700_000_000: 2023-11-14T22:13:20Z


@pytest.fixture
async def server(clock: FakeClock) -> AsyncIterator[ApiServer]:
    async with ApiServer(tls=True, clock=clock) as srv:
        yield srv


async def call(
    server: ApiServer, method: str, path: str, token: str | None = None, body: Any = None
) -> tuple[int, Any]:
    assert server.certificates is not None
    trust = ssl.create_default_context(cadata=server.certificates.ca_pem.decode())
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, server.url + path, json=body, headers=headers, ssl=trust) as response,
    ):
        text = await response.text()
        try:
            return response.status, await response.json(content_type=None)
        except ValueError:
            return response.status, text


async def service_account(
    server: ApiServer, namespace: str, name: str, expires: str = "2023-11-14T22:23:20Z"
) -> str:
    """A new ServiceAccount's token, valid 600 s (until ``expires``)."""
    status, _ = await call(
        server, "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", TOKEN, {"metadata": {"name": name}}
    )
    assert status == 201
    status, answer = await call(
        server,
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        TOKEN,
        {"spec": {"expirationSeconds": 600}},
    )
    assert status == 201, answer
    assert answer["kind"] == "TokenRequest"
    assert answer["spec"]["expirationSeconds"] == 600
    assert answer["status"]["expirationTimestamp"] == expires
    return str(answer["status"]["token"])


async def test_without_a_token_rbac_refuses_system_anonymous_but_the_public_paths(server: ApiServer) -> None:
    status, body = await call(server, "GET", "/api/v1/namespaces/default/pods")
    assert status == 403
    assert body["message"] == (
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the '
        'namespace "default"'
    )
    assert body["details"] == {"kind": "pods"}
    # system:discovery is for system:authenticated only, since v1.14.
    status, body = await call(server, "GET", "/apis")
    assert (status, body["message"]) == (403, 'forbidden: User "system:anonymous" cannot get path "/apis"')
    assert body["details"] == {}
    for path in ("/version", "/healthz", "/livez", "/readyz"):  # system:public-info-viewer
        assert (await call(server, "GET", path))[0] == 200


async def test_a_token_that_names_nobody_is_401(server: ApiServer) -> None:
    status, body = await call(server, "GET", "/version", "not-a-token")
    assert status == 401
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


async def test_a_service_account_token_names_it_until_it_expires_or_the_account_goes(
    server: ApiServer, clock: FakeClock
) -> None:
    token = await service_account(server, "default", "robot")
    status, review = await call(
        server,
        "POST",
        f"{AUTHN}/selfsubjectreviews",
        token,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert status == 201
    user = review["status"]["userInfo"]
    assert user["username"] == "system:serviceaccount:default:robot"
    assert user["groups"] == [
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        "system:authenticated",
    ]
    assert user["extra"]["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")
    # What a ServiceAccount may do with no binding: discovery, and nothing else.
    assert (await call(server, "GET", "/apis", token))[0] == 200
    status, body = await call(server, "GET", "/api/v1/namespaces/default/configmaps/x", token)
    assert (status, body["message"]) == (
        403,
        'configmaps "x" is forbidden: User "system:serviceaccount:default:robot" cannot get resource '
        '"configmaps" in API group "" in the namespace "default"',
    )
    # A TokenReview by the administrator names it too.
    status, review = await call(server, "POST", f"{AUTHN}/tokenreviews", TOKEN, {"spec": {"token": token}})
    assert review["status"]["authenticated"] is True
    assert review["status"]["user"]["username"] == "system:serviceaccount:default:robot"
    clock.advance(601)
    assert (await call(server, "GET", "/apis", token))[0] == 401
    fresh = await service_account(server, "default", "robot2", "2023-11-14T22:33:21Z")
    assert (await call(server, "DELETE", "/api/v1/namespaces/default/serviceaccounts/robot2", TOKEN))[
        0
    ] == 200
    assert (await call(server, "GET", "/apis", fresh))[0] == 401


async def test_a_token_request_for_under_ten_minutes_is_invalid(server: ApiServer) -> None:
    await service_account(server, "default", "brief")
    path = "/api/v1/namespaces/default/serviceaccounts/brief/token"
    status, body = await call(server, "POST", path, TOKEN, {"spec": {"expirationSeconds": 60}})
    assert (status, body["message"]) == (
        422,
        'TokenRequest.authentication.k8s.io "brief" is invalid: spec.expirationSeconds: Invalid value: 60: '
        "may not specify a duration less than 10 minutes",
    )


async def test_a_token_request_for_a_missing_account_is_404(server: ApiServer) -> None:
    status, body = await call(
        server, "POST", "/api/v1/namespaces/default/serviceaccounts/ghost/token", TOKEN, {"spec": {}}
    )
    assert (status, body["message"]) == (404, 'serviceaccounts "ghost" not found')


async def test_access_reviews_answer_from_rbac(server: ApiServer) -> None:
    token = await service_account(server, "default", "reader")
    role = {
        "metadata": {"name": "pods"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
    }
    assert (
        await call(server, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", TOKEN, role)
    )[0] == 201
    binding = {
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader"}],
    }
    status, _ = await call(
        server, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", TOKEN, binding
    )
    assert status == 201
    ask = {"spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}}}
    status, review = await call(server, "POST", f"{AUTHZ}/selfsubjectaccessreviews", token, ask)
    assert status == 201
    assert review["status"] == {
        "allowed": True,
        "reason": (
            'RBAC: allowed by RoleBinding "reader/default" of Role "pods" to ServiceAccount "reader/default"'
        ),
    }
    other = {"spec": {"resourceAttributes": {"namespace": "kube-system", "verb": "list", "resource": "pods"}}}
    status, review = await call(server, "POST", f"{AUTHZ}/selfsubjectaccessreviews", token, other)
    assert review["status"] == {"allowed": False}
    # A SubjectAccessReview needs create on subjectaccessreviews: the account has none.
    sar = {"spec": {**ask["spec"], "user": "system:serviceaccount:default:reader"}}
    status, body = await call(server, "POST", f"{AUTHZ}/subjectaccessreviews", token, sar)
    assert (status, body["message"]) == (
        403,
        'subjectaccessreviews.authorization.k8s.io is forbidden: User "system:serviceaccount:default:reader" '
        'cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster '
        "scope",
    )
    status, review = await call(server, "POST", f"{AUTHZ}/subjectaccessreviews", TOKEN, sar)
    assert (status, review["status"]["allowed"]) == (201, True)
    masters = {
        "spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}, "groups": ["system:masters"]}
    }
    status, review = await call(server, "POST", f"{AUTHZ}/subjectaccessreviews", TOKEN, masters)
    assert review["status"] == {"allowed": True}


async def test_an_aggregated_role_follows_its_parts(server: ApiServer) -> None:
    roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    part = {
        "metadata": {"name": "extra-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}],
    }
    assert (await call(server, "POST", roles, TOKEN, part))[0] == 201

    async def view_rules() -> list[Any]:
        return list((await call(server, "GET", f"{roles}/view", TOKEN))[1]["rules"])

    await wait_for(lambda: _has(view_rules, part["rules"][0]), timeout=10)
    # view is aggregated into edit, and edit into admin: the rule reaches admin too.
    await wait_for(lambda: _has(lambda: _rules(server, f"{roles}/admin"), part["rules"][0]), timeout=10)
    assert (await call(server, "DELETE", f"{roles}/extra-view", TOKEN))[0] == 200
    await wait_for(lambda: _lacks(view_rules, part["rules"][0]), timeout=10)


async def _rules(server: ApiServer, path: str) -> list[Any]:
    return list((await call(server, "GET", path, TOKEN))[1]["rules"])


async def _has(rules: Any, rule: Any) -> bool:
    return rule in await rules()


async def _lacks(rules: Any, rule: Any) -> bool:
    return rule not in await rules()


async def impersonating(server: ApiServer, token: str, headers: dict[str, str]) -> tuple[int, Any]:
    assert server.certificates is not None
    trust = ssl.create_default_context(cadata=server.certificates.ca_pem.decode())
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{server.url}{AUTHN}/selfsubjectreviews",
            json=review,
            headers={"Authorization": f"Bearer {token}", **headers},
            ssl=trust,
        ) as response,
    ):
        return response.status, await response.json(content_type=None)


async def test_impersonation_needs_impersonate_and_acts_as_the_user(server: ApiServer) -> None:
    # The administrator may impersonate anyone; a ServiceAccount's groups come with its name.
    status, review = await impersonating(
        server, TOKEN, {"Impersonate-User": "system:serviceaccount:team:bot"}
    )
    assert status == 201
    assert review["status"]["userInfo"] == {
        "username": "system:serviceaccount:team:bot",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"],
    }
    status, review = await impersonating(
        server, TOKEN, {"Impersonate-User": "bob", "Impersonate-Group": "devs"}
    )
    assert review["status"]["userInfo"] == {"username": "bob", "groups": ["devs", "system:authenticated"]}
    # Groups without a user: a bad request.
    assert (await impersonating(server, TOKEN, {"Impersonate-Group": "devs"}))[0] == 400
    # Anyone else needs impersonate on that user.
    token = await service_account(server, "default", "robot")
    status, body = await impersonating(server, token, {"Impersonate-User": "bob"})
    assert (status, body["message"]) == (
        403,
        'users "bob" is forbidden: User "system:serviceaccount:default:robot" cannot impersonate resource '
        '"users" in API group "" at the cluster scope',
    )
