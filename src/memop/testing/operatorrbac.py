"""Run an operator as its ServiceAccount, with the RBAC its manifests grant (``run_operator(...,
rbac=True)``), so a permission the manifests lack fails the test with the API server's 403.

:func:`install_operator_rbac` applies, as the test's administrator, what ``memop manifests``
installs for the project (the objects of :mod:`memop.manifests.rbac`, with the install's name
prefix applied as its kustomize overlay does): the operator's namespace and ServiceAccount;
the ClusterRole and its binding, or with ``namespaces`` a Role and RoleBinding in each watched
namespace (``manifests/namespaced``); the leader-election Role in the operator's namespace, or
with ``sharding`` the ``--sharding`` roles instead (``manifests/sharded``). It returns a
Configuration of the same cluster that authenticates with a token of that ServiceAccount,
requested through the ``serviceaccounts/<name>/token`` subresource, on the in-memory server as
on a real cluster.

Server-side apply (field manager ``memop-test``, forced) creates what is missing and puts back
what an earlier run changed; nothing is deleted afterwards (on a real cluster the install stays,
as CRDs do).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Sequence
from typing import Any

from kubernetes_asyncio.client import ApiClient, Configuration, CoreV1Api

from memop.manifests import rbac
from memop.manifests.target import Target
from memop.project import Project
from memop.runtime.api.permissions import Scope
from memop.runtime.client.client import Client
from memop.runtime.client.errors import AlreadyExists
from memop.runtime.client.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    NAMESPACES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    Resource,
)

FIELD_MANAGER = "memop-test"
TOKEN_SECONDS = 3600  # a test is over long before
_RESOURCES: dict[str, Resource] = {
    "ServiceAccount": SERVICE_ACCOUNTS,
    "Role": ROLES,
    "RoleBinding": ROLE_BINDINGS,
    "ClusterRole": CLUSTER_ROLES,
    "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS,
}


def _prefixed(obj: dict[str, Any], prefix: str) -> dict[str, Any]:
    """``obj`` as the install's ``namePrefix`` leaves it: its name, its role reference and its
    ServiceAccount subjects prefixed (names that carry the prefix already are left alone)."""

    def name(value: str) -> str:
        return value if value.startswith(prefix) else prefix + value

    out = copy.deepcopy(obj)
    out["metadata"]["name"] = name(out["metadata"]["name"])
    if "roleRef" in out:
        out["roleRef"]["name"] = name(out["roleRef"]["name"])
    for subject in out.get("subjects") or ():
        if subject.get("kind") == "ServiceAccount":
            subject["name"] = name(subject["name"])
    return out


def operator_rbac_objects(
    project: Project, *, namespaces: Sequence[str] = (), sharding: bool = False
) -> list[dict[str, Any]]:
    """The ServiceAccount, roles and bindings an install of ``project`` holds (module docstring)."""
    target = Target(project)
    base = [_prefixed(obj, target.prefix) for obj in rbac.base_objects(target)]
    objects = [obj for obj in base if obj["kind"] == "ServiceAccount"]
    if namespaces:
        objects.extend(rbac.watched_namespace_rbac(target, namespaces))
    else:
        objects.extend(obj for obj in base if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"))
    ns = target.namespace
    if sharding:
        children = rbac.sharding_children_rules(target.rules)
        extra = [
            rbac.role(target, rbac.SHARDING_ROLE, rbac.policy_rules(Scope.OPERATOR, rbac.SHARDING_RULES), ns),
            rbac.binding(target, rbac.SHARDING_ROLE_BINDING, ns, ("Role", rbac.SHARDING_ROLE)),
            rbac.role(target, rbac.SHARDING_CHILDREN_ROLE, rbac.policy_rules(Scope.WATCHED, children)),
            rbac.binding(
                target,
                rbac.SHARDING_CHILDREN_ROLE_BINDING,
                None,
                ("ClusterRole", rbac.SHARDING_CHILDREN_ROLE),
            ),
        ]
        objects.extend(_prefixed(obj, target.prefix) for obj in extra)
    else:
        objects.extend(obj for obj in base if obj["kind"] in ("Role", "RoleBinding"))
    return objects


async def install_operator_rbac(
    client: Client, project: Project, *, namespaces: Sequence[str] = (), sharding: bool = False
) -> tuple[str, str]:
    """Apply :func:`operator_rbac_objects` with ``client`` (an administrator's); the operator's
    ServiceAccount as (namespace, name)."""
    target = Target(project)
    with contextlib.suppress(AlreadyExists):
        await client.create(NAMESPACES, {"metadata": {"name": target.namespace}})
    for obj in operator_rbac_objects(project, namespaces=namespaces, sharding=sharding):
        await client.apply(_RESOURCES[obj["kind"]], obj, field_manager=FIELD_MANAGER, force=True)
    return target.namespace, target.service_account


async def service_account_configuration(
    configuration: Configuration, namespace: str, name: str
) -> Configuration:
    """A copy of ``configuration`` (an administrator's) that authenticates as the ServiceAccount
    ``namespace/name`` with a token the cluster issues for it (client certificates dropped)."""
    async with ApiClient(configuration) as api:
        body: Any = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": TOKEN_SECONDS},
        }
        answer = await CoreV1Api(api).create_namespaced_service_account_token(name, namespace, body)
    token = answer.status.token
    account = copy.copy(configuration)
    account.api_key = {"BearerToken": f"Bearer {token}"}
    account.api_key_prefix = {}
    account.cert_file = None
    account.key_file = None
    account.username = None
    account.password = None
    return account
