"""RBAC as kube-apiserver v1.36 decides it: allow/deny, the 403 messages, escalation and bind.

Every decision below is what kube-apiserver's RBAC authorizer (plugin/pkg/auth/authorizer/rbac)
and its role and binding storage (pkg/registry/rbac/*/policybased) decide for the same objects:
the comment on each row says why. The subjects are ServiceAccounts, acting with tokens from their
``token`` subresource, so the tests also run against a real cluster with USE_EXISTING_CLUSTER=true
(cluster-scoped objects carry the test namespace in their names and are deleted afterwards).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
)
from memop.testing.envtest import Kube
from memop.testing.operatorrbac import service_account_configuration
from memop.testing.wait import wait_for
from tests.conftest import Http

if TYPE_CHECKING:
    from tests.conftest import Reply

RBAC = "rbac.authorization.k8s.io"
RBAC_PATH = f"/apis/{RBAC}/v1"
ALLOWED = "allowed"  # any answer but 401 and 403: the authorizer let the request through


def rule(
    groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        out["resourceNames"] = names
    return out


def account(name: str, namespace: str | None = None) -> dict[str, Any]:
    subject = {"kind": "ServiceAccount", "name": name}
    if namespace:
        subject["namespace"] = namespace
    return subject


def ref(kind: str, name: str) -> dict[str, str]:
    return {"apiGroup": RBAC, "kind": kind, "name": name}


async def bind(
    client: Client, name: str, role: dict[str, str], subject: dict[str, Any], namespace: str | None = None
) -> None:
    """A RoleBinding in ``namespace`` (a ClusterRoleBinding without one) of ``role`` to ``subject``."""
    body = {"metadata": {"name": name}, "roleRef": role, "subjects": [subject]}
    if namespace is None:
        await client.create(CLUSTER_ROLE_BINDINGS, body)
    else:
        await client.create(ROLE_BINDINGS, body, namespace)


@dataclass
class World:
    """The test namespace's subjects and how to act as them."""

    ns: str
    admin: Client
    alice: Http
    bob: Http

    def user(self, name: str) -> str:
        return f"system:serviceaccount:{self.ns}:{name}"

    def groups(self) -> str:
        return f'["system:serviceaccounts" "system:serviceaccounts:{self.ns}" "system:authenticated"]'

    def cluster_name(self, name: str) -> str:
        return f"memop-rbac-{self.ns}-{name}"


@pytest.fixture
async def world(kube: Kube, client: Client, namespace: str) -> AsyncIterator[World]:
    """ServiceAccounts alice and bob in the test namespace, with these grants:

    - Role ``reader`` (pods get/list; the configmap ``allowed`` only, get/list/watch;
      ``deployments/scale`` get; ``*/status`` get) to alice, named without a namespace (the
      binding's is meant);
    - the ClusterRole ``...-secrets`` (secrets, every verb) to the group of the namespace's
      ServiceAccounts, by a RoleBinding: in this namespace only;
    - the ClusterRole ``...-paths`` (GET ``/logs/*``) to alice, by a ClusterRoleBinding;
    - the aggregated ClusterRole ``...-agg`` (services list, from a labelled ClusterRole) to
      alice in the namespace;
    - a RoleBinding of a Role that does not exist to bob.
    """
    ns = namespace
    names = {
        k: f"memop-rbac-{ns}-{k}" for k in ("secrets", "paths", "agg", "agg-part", "writer", "aggregator")
    }
    label = {f"memop.dev/rbac-test-{ns}": "true"}
    for sa in ("alice", "bob"):
        await client.create(SERVICE_ACCOUNTS, {"metadata": {"name": sa}}, ns)
    reader = [
        rule([""], ["pods"], ["get", "list"]),
        rule([""], ["configmaps"], ["get", "list", "watch"], ["allowed"]),
        rule(["apps"], ["deployments/scale"], ["get"]),
        rule(["apps"], ["*/status"], ["get"]),
    ]
    await client.create(ROLES, {"metadata": {"name": "reader"}, "rules": reader}, ns)
    await bind(client, "alice-reader", ref("Role", "reader"), account("alice"), ns)
    await client.create(
        CLUSTER_ROLES, {"metadata": {"name": names["secrets"]}, "rules": [rule([""], ["secrets"], ["*"])]}
    )
    group = {"apiGroup": RBAC, "kind": "Group", "name": f"system:serviceaccounts:{ns}"}
    await bind(client, "sa-secrets", ref("ClusterRole", names["secrets"]), group, ns)
    paths = [{"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}]
    await client.create(CLUSTER_ROLES, {"metadata": {"name": names["paths"]}, "rules": paths})
    await bind(client, names["paths"], ref("ClusterRole", names["paths"]), account("alice", ns))
    aggregated = {"clusterRoleSelectors": [{"matchLabels": label}]}
    await client.create(CLUSTER_ROLES, {"metadata": {"name": names["agg"]}, "aggregationRule": aggregated})
    part = {
        "metadata": {"name": names["agg-part"], "labels": label},
        "rules": [rule([""], ["services"], ["list"])],
    }
    await client.create(CLUSTER_ROLES, part)
    await bind(client, "alice-agg", ref("ClusterRole", names["agg"]), account("alice"), ns)
    await bind(client, "dangling", ref("Role", "missing"), account("bob"), ns)

    async def aggregated_rules() -> bool:
        return bool((await client.get(CLUSTER_ROLES, names["agg"])).get("rules"))

    await wait_for(aggregated_rules, timeout=30)
    async with contextlib.AsyncExitStack() as stack:
        apis = [
            await stack.enter_async_context(
                ApiClient(await service_account_configuration(kube.configuration, ns, sa))
            )
            for sa in ("alice", "bob")
        ]
        yield World(ns, client, Http(apis[0]), Http(apis[1]))
    for name in names.values():
        with contextlib.suppress(NotFound):
            await client.delete(CLUSTER_ROLES, name)
        with contextlib.suppress(NotFound):
            await client.delete(CLUSTER_ROLE_BINDINGS, name)


def check(reply: Reply, expected: str) -> None:
    if expected == ALLOWED:
        assert reply.status not in (401, 403), reply.body
        return
    assert reply.status == 403, reply.body
    assert reply.body["reason"] == "Forbidden"
    assert reply.body["message"] == expected


# (who, method, path, expected) with {ns} and {user} filled in; the comment is kube-apiserver's reason.
DECISIONS = [
    # Role reader grants get on pods in the namespace: allowed (then 404, no such pod).
    ("alice", "GET", "/api/v1/namespaces/{ns}/pods/p", ALLOWED),
    ("alice", "GET", "/api/v1/namespaces/{ns}/pods", ALLOWED),
    # A RoleBinding grants nothing in another namespace.
    ("alice", "GET", "/api/v1/namespaces/default/pods/p",
     'pods "p" is forbidden: User "{user}" cannot get resource "pods" in API group "" in the namespace '
     '"default"'),
    # Nor across namespaces: a list of every namespace is a cluster-scope request.
    ("alice", "GET", "/api/v1/pods",
     'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" at the cluster scope'),
    # The verb must be listed.
    ("alice", "DELETE", "/api/v1/namespaces/{ns}/pods/p",
     'pods "p" is forbidden: User "{user}" cannot delete resource "pods" in API group "" in the namespace '
     '"{ns}"'),
    # resourceNames: that name only, and never a list (a list names nothing).
    ("alice", "GET", "/api/v1/namespaces/{ns}/configmaps/allowed", ALLOWED),
    ("alice", "GET", "/api/v1/namespaces/{ns}/configmaps/other",
     'configmaps "other" is forbidden: User "{user}" cannot get resource "configmaps" in API group "" in the '
     'namespace "{ns}"'),
    ("alice", "GET", "/api/v1/namespaces/{ns}/configmaps",
     'configmaps is forbidden: User "{user}" cannot list resource "configmaps" in API group "" in the '
     'namespace "{ns}"'),
    # A subresource is granted apart from its resource, and */status matches any resource's status.
    ("alice", "GET", "/apis/apps/v1/namespaces/{ns}/deployments/d/scale", ALLOWED),
    ("alice", "GET", "/apis/apps/v1/namespaces/{ns}/deployments/d/status", ALLOWED),
    ("alice", "GET", "/apis/apps/v1/namespaces/{ns}/deployments/d",
     'deployments.apps "d" is forbidden: User "{user}" cannot get resource "deployments" in API group '
     '"apps" in the namespace "{ns}"'),
    ("alice", "PUT", "/apis/apps/v1/namespaces/{ns}/deployments/d/scale",
     'deployments.apps "d" is forbidden: User "{user}" cannot update resource "deployments/scale" in API '
     'group "apps" in the namespace "{ns}"'),
    # A Group subject: every ServiceAccount of the namespace; "*" verbs.
    ("alice", "DELETE", "/api/v1/namespaces/{ns}/secrets/s", ALLOWED),
    ("bob", "GET", "/api/v1/namespaces/{ns}/secrets/s", ALLOWED),
    # The aggregated ClusterRole holds the labelled role's rules.
    ("alice", "GET", "/api/v1/namespaces/{ns}/services", ALLOWED),
    ("alice", "GET", "/api/v1/namespaces/default/services",
     'services is forbidden: User "{user}" cannot list resource "services" in API group "" in the namespace '
     '"default"'),
    # nonResourceURLs with a trailing *, and system:discovery (every authenticated user).
    ("alice", "GET", "/logs/kube.log", ALLOWED),
    ("alice", "GET", "/version", ALLOWED),
    ("alice", "GET", "/apis", ALLOWED),
    ("bob", "GET", "/logs/kube.log", 'forbidden: User "{bob}" cannot get path "/logs/kube.log"'),
    ("alice", "GET", "/healthz/etcd", 'forbidden: User "{user}" cannot get path "/healthz/etcd"'),
    # A binding whose role is missing: its error is the denial's reason.
    ("bob", "GET", "/api/v1/namespaces/{ns}/pods",
     'pods is forbidden: User "{bob}" cannot list resource "pods" in API group "" in the namespace "{ns}": '
     'RBAC: role.rbac.authorization.k8s.io "missing" not found'),
]  # fmt: skip


async def test_allow_and_deny_decisions_and_their_messages(world: World) -> None:
    for who, method, path, expected in DECISIONS:
        http = world.alice if who == "alice" else world.bob
        fill = {"ns": world.ns, "user": world.user("alice"), "bob": world.user("bob")}
        reply = await http.request(method, path.format(**fill), body={} if method == "PUT" else None)
        check(reply, expected.format(**fill) if expected != ALLOWED else ALLOWED)


async def test_escalation_and_bind_refusals(world: World) -> None:
    ns, alice, admin = world.ns, world.alice, world.admin
    roles, bindings = f"{RBAC_PATH}/namespaces/{ns}/roles", f"{RBAC_PATH}/namespaces/{ns}/rolebindings"
    writer = [rule([RBAC], ["roles", "rolebindings"], ["create", "update", "get"])]
    await admin.create(ROLES, {"metadata": {"name": "writer"}, "rules": writer}, ns)
    await bind(admin, "alice-writer", ref("Role", "writer"), account("alice"), ns)
    held = {"metadata": {"name": "held"}, "rules": [rule([""], ["pods"], ["get"])]}
    # alice holds get on pods here: she may grant it.
    assert (await alice.post(roles, held)).status == 201
    too_much = {"metadata": {"name": "too-much"}, "rules": [rule([""], ["pods"], ["get", "delete"])]}
    # She lacks delete: ConfirmNoEscalation names the missing sub-rule.
    check(
        await alice.post(roles, too_much),
        f'roles.rbac.authorization.k8s.io "too-much" is forbidden: user "{world.user("alice")}" '
        f"(groups={world.groups()}) is attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}',
    )
    # An update is checked the same way.
    raise_held = {**held, "rules": too_much["rules"]}
    reply = await alice.put(f"{roles}/held", raise_held)
    assert reply.status == 403, reply.body
    assert "is attempting to grant RBAC permissions not currently held" in reply.body["message"]
    # Binding a role she holds every permission of: allowed without bind.
    binding = {"metadata": {"name": "bob-held"}, "roleRef": ref("Role", "held"), "subjects": [account("bob")]}
    assert (await alice.post(bindings, binding)).status == 201
    # Binding view, whose permissions she lacks: refused, listing them.
    view = {
        "metadata": {"name": "bob-view"},
        "roleRef": ref("ClusterRole", "view"),
        "subjects": [account("bob")],
    }
    reply = await alice.post(bindings, view)
    assert reply.status == 403, reply.body
    assert reply.body["message"].startswith(
        f'rolebindings.rbac.authorization.k8s.io "bob-view" is forbidden: user "{world.user("alice")}" '
        f"(groups={world.groups()}) is attempting to grant RBAC permissions not currently held:\n"
    )
    assert (
        '{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list" "watch"]}'
        in reply.body["message"]
    )
    # A role that does not exist: 404 naming the binding's resource and the role's name, as
    # kube-apiserver v1.36.2 answers (measured; no bind permission to skip the lookup).
    missing = {
        **view,
        "metadata": {"name": "bob-missing"},
        "roleRef": ref("ClusterRole", world.cluster_name("nope")),
    }
    reply = await alice.post(bindings, missing)
    assert reply.status == 404, reply.body
    assert (
        reply.body["message"]
        == f'rolebindings.rbac.authorization.k8s.io "{world.cluster_name("nope")}" not found'
    )
    # bind on that ClusterRole by name, in this namespace: the binding passes without the permissions.
    binder = [rule([RBAC], ["clusterroles"], ["bind"], ["view"]), rule([RBAC], ["roles"], ["escalate"])]
    await admin.create(ROLES, {"metadata": {"name": "binder"}, "rules": binder}, ns)
    await bind(admin, "alice-binder", ref("Role", "binder"), account("alice"), ns)
    assert (await alice.post(bindings, view)).status == 201
    # escalate on roles: the role passes without the permissions.
    assert (await alice.post(roles, too_much)).status == 201


async def test_an_aggregation_rule_needs_every_permission(world: World) -> None:
    name = world.cluster_name("aggregator")
    writer = [rule([RBAC], ["clusterroles"], ["create"])]
    await world.admin.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": writer})
    await bind(world.admin, name, ref("ClusterRole", name), account("alice", world.ns))
    role = {
        "metadata": {"name": world.cluster_name("agg2")},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"memop.dev/none": "true"}}]},
    }
    try:
        check(
            await world.alice.post(f"{RBAC_PATH}/clusterroles", role),
            f'clusterroles.rbac.authorization.k8s.io "{world.cluster_name("agg2")}" is forbidden: must have '
            "cluster-admin privileges to use the aggregationRule",
        )
    finally:
        with contextlib.suppress(NotFound):
            await world.admin.delete(CLUSTER_ROLES, world.cluster_name("agg2"))


async def test_a_list_or_watch_narrowed_to_one_name_is_authorized_by_that_name(world: World) -> None:
    # RequestInfoFactory takes the name from a fieldSelector requiring metadata.name, so the
    # resourceNames rule on the configmap "allowed" covers this list, and not one of another name.
    base = f"/api/v1/namespaces/{world.ns}/configmaps"
    check(await world.alice.get(base, query={"fieldSelector": "metadata.name=allowed"}), ALLOWED)
    denied = await world.alice.get(base, query={"fieldSelector": "metadata.name=other"})
    check(
        denied,
        f'configmaps "other" is forbidden: User "{world.user("alice")}" cannot list resource "configmaps" in '
        f'API group "" in the namespace "{world.ns}"',
    )


async def test_an_apply_that_creates_the_object_also_needs_create(world: World) -> None:
    ns = world.ns
    await world.admin.create(
        ROLES, {"metadata": {"name": "patcher"}, "rules": [rule([""], ["configmaps"], ["patch"])]}, ns
    )
    await bind(world.admin, "alice-patcher", ref("Role", "patcher"), account("alice"), ns)
    path = f"/api/v1/namespaces/{ns}/configmaps/fresh"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fresh"}, "data": {"a": "1"}}
    apply = {"content_type": "application/apply-patch+yaml", "query": {"fieldManager": "alice"}}
    # The handler asks for create and answers the 403 of a refused create (measured on
    # kube-apiserver v1.36.2).
    refused = (
        f'configmaps "fresh" is forbidden: User "{world.user("alice")}" cannot create resource '
        f'"configmaps" in API group "" in the namespace "{ns}"'
    )
    check(await world.alice.patch(path, body, **apply), refused)
    await world.admin.create(
        ROLES, {"metadata": {"name": "creator"}, "rules": [rule([""], ["configmaps"], ["create"])]}, ns
    )
    await bind(world.admin, "alice-creator", ref("Role", "creator"), account("alice"), ns)
    assert (await world.alice.patch(path, body, **apply)).status == 201
    # Applying to it again changes it: patch alone is enough.
    changed = {**body, "data": {"a": "2"}}
    assert (await world.alice.patch(path, changed, **apply)).status == 200


async def test_a_rules_review_lists_the_rules_that_apply_in_a_namespace(world: World) -> None:
    # kubectl auth can-i --list: the cluster's bindings and the namespace's, split by kind.
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview"}
    path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
    reply = await world.alice.post(path, {**review, "spec": {"namespace": world.ns}})
    assert reply.status == 201, reply.body
    status = reply.body["status"]
    assert {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]} in status["resourceRules"]
    assert {"verbs": ["get"], "nonResourceURLs": ["/logs/*"]} in status["nonResourceRules"]
    assert status["incomplete"] is False
    assert "evaluationError" not in status
    # bob's binding of a missing Role: what RBAC could not read.
    reply = await world.bob.post(path, {**review, "spec": {"namespace": world.ns}})
    assert reply.body["status"]["evaluationError"] == 'role.rbac.authorization.k8s.io "missing" not found'
    assert (await world.alice.post(path, {**review, "spec": {}})).status == 400
