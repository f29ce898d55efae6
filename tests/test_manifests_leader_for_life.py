"""manifests/leader-for-life: the default install electing its leader for life.

Rendered offline by ``kubectl kustomize`` and checked against memop's own code: the parser and
memop.cli.app turn the Deployment's environment (POD_NAME from the downward API) into a
leader-for-life config, and the RBAC is the default install's with the Lease role replaced by
exactly :data:`memop.manifests.rbac.LEADER_FOR_LIFE_RULES`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from memop.cli.app import leader_election_config
from memop.cli.options import parse_run_args
from memop.manifests import rbac
from memop.runtime.leaderelection.leaderforlife import LeaderForLifeConfig
from tests.test_manifests import (
    OPERATOR_NAMESPACE,
    PREFIX,
    SERVICE_ACCOUNT,
    container,
    needs_kubectl,
    one,
    render,
)

OVERLAY = "leader-for-life"


def pod_env(deployment: dict[str, Any], pod_name: str) -> dict[str, str]:
    """The container's environment as the kubelet resolves it for a Pod called ``pod_name``."""
    fields = {"metadata.name": pod_name, "metadata.namespace": deployment["metadata"]["namespace"]}
    env = {}
    for var in container(deployment)["env"]:
        env[var["name"]] = (
            var["value"] if "value" in var else fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
        )
    return env


@needs_kubectl
def test_the_deployment_runs_leader_for_life_with_its_pod_name_from_the_downward_api() -> None:
    deployment = one(render(OVERLAY), "Deployment")
    env = {var["name"]: var for var in container(deployment)["env"]}
    assert env["POD_NAME"] == {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    config = parse_run_args(container(deployment)["args"], env=pod_env(deployment, "memop-7c9-x2x4z"))
    assert config.leader_elect
    assert config.leader_election_mode == "leader-for-life"
    # In the pod the lock's namespace is the service account's: the Pod's own, as an
    # ownerReference needs.
    assert config.leader_election_namespace is None
    in_pod = dataclasses.replace(config, leader_election_namespace=OPERATOR_NAMESPACE)
    election = leader_election_config(in_pod, "me", in_cluster=True)
    assert isinstance(election, LeaderForLifeConfig)
    assert (election.pod_name, election.namespace) == ("memop-7c9-x2x4z", OPERATOR_NAMESPACE)


@needs_kubectl
def test_only_the_lease_role_is_replaced_by_the_lock_role() -> None:
    objects = render(OVERLAY)
    default = render("default")
    role = one(objects, "Role", PREFIX + rbac.LEADER_FOR_LIFE_ROLE, OPERATOR_NAMESPACE)
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
    ]
    assert role["rules"] == rbac.policy_rules(rbac.Scope.OPERATOR, rbac.LEADER_FOR_LIFE_RULES)
    binding = one(objects, "RoleBinding", PREFIX + rbac.LEADER_FOR_LIFE_ROLE_BINDING, OPERATOR_NAMESPACE)
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert [(s["namespace"], s["name"]) for s in binding["subjects"]] == [SERVICE_ACCOUNT]
    lease_role = {PREFIX + rbac.LEADER_ELECTION_ROLE, PREFIX + rbac.LEADER_ELECTION_ROLE_BINDING}
    lock_role = {role["metadata"]["name"], binding["metadata"]["name"]}

    def rest(objs: list[dict[str, Any]], left_out: set[str]) -> list[dict[str, Any]]:
        return [o for o in objs if o["metadata"]["name"] not in left_out and o["kind"] != "Deployment"]

    assert rest(objects, lock_role) == rest(default, lease_role)
    deployment, plain = one(objects, "Deployment"), one(default, "Deployment")
    env = container(deployment).pop("env")
    assert {"name": "LEADER_ELECTION_MODE", "value": "leader-for-life"} in env
    assert [v for v in env if v["name"] == "UNINSTALL_GUARD"] == container(plain).pop("env")
    assert deployment == plain
