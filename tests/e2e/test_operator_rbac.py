"""An operator run as its ServiceAccount (``run_operator(..., rbac=True)``) gets exactly what its
generated RBAC grants: a permission its rules lack fails with the API server's own 403, as it
would once installed, and memop's whole project runs with what its manifests grant."""

from __future__ import annotations

import dataclasses
from typing import Any

from memop import memcached
from memop.builtin import PROJECT
from memop.memcached.api import MEMCACHEDS
from memop.project import Project
from memop.runtime.client.client import Client
from memop.testing.memcached import converged, memcached_manifest
from memop.testing.plugin import RunOperator
from memop.testing.wait import wait_for

TIMEOUT = 30


def _degraded_message(cr: dict[str, Any]) -> str | None:
    for condition in (cr.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Degraded" and condition.get("status") == "True":
            return str(condition.get("message"))
    return None


async def test_a_permission_missing_from_the_rules_fails_with_the_api_servers_403(
    run_operator: RunOperator, client: Client, namespace: str
) -> None:
    rules = tuple(r for r in memcached.DEFINITION.rules if r.triple != ("apps", "deployments", "create"))
    # A project of its own: its ServiceAccount is granted these rules only. (memop's own account
    # may hold the cluster-wide grant of the test below, which stays installed on a real cluster.)
    lacking = Project("memop-lacking", "memop.dev", (dataclasses.replace(memcached.DEFINITION, rules=rules),))
    async with run_operator(lacking, namespaces=[namespace], rbac=True) as operator:
        assert operator.service_account == ("memop-lacking-system", "memop-lacking-controller-manager")
        await client.create(MEMCACHEDS, memcached_manifest("denied", size=1), namespace)

        async def degraded() -> str | None:
            return _degraded_message(await client.get(MEMCACHEDS, "denied", namespace))

        message = await wait_for(degraded, timeout=TIMEOUT)
    # kube-apiserver's message for this request, word for word (responsewriters.Forbidden): the
    # generated Role lacks create on deployments, so RBAC has no rule that allows it.
    assert message == (
        "memop is not allowed to manage Deployments here: deployments.apps is forbidden: User "
        '"system:serviceaccount:memop-lacking-system:memop-lacking-controller-manager" cannot create '
        'resource "deployments" '
        f'in API group "apps" in the namespace "{namespace}"'
    )


async def test_memops_project_runs_with_what_its_manifests_grant_cluster_wide(
    run_operator: RunOperator, client: Client, namespace: str
) -> None:
    # No namespaces: the ClusterRole and its binding, as manifests/default installs them.
    async with run_operator(PROJECT, rbac=True):
        await client.create(MEMCACHEDS, memcached_manifest("granted", size=1), namespace)
        await wait_for(lambda: converged(client, namespace, "granted", 1), timeout=TIMEOUT)
