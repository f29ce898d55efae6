"""manifests/sharded: the default install whose replicas split the work with ``--sharding``.

Rendered offline by ``kubectl kustomize`` and checked against memop's own code: the parser and
memop.cli.app turn the Deployment's args into a sharding config (the Leases in the Pod's own
namespace, the project's name as the group), the RBAC is the default install's with the
leader-election Role replaced by exactly :data:`memop.manifests.rbac.SHARDING_RULES`, and that
Role grants every Lease request a sharded replica sends to the in-memory API server.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.cli.app import sharding_config
from memop.cli.options import MAX_GROUP, UsageError, parse_run_args
from memop.manifests import rbac
from memop.manifests.layout import manifest_files
from memop.manifests.overlays import SHARDED_REPLICAS, SHARDING_GROUP_MAX, sharding_group
from memop.manifests.target import Target, write_changed
from memop.memcached import DEFINITION as MEMCACHED
from memop.project import Project
from memop.runtime.client.client import Client
from memop.runtime.sharding.membership import ShardingConfig, ShardMembership
from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for
from tests.test_manifests import (
    MANIFESTS,
    MEMOP,
    OPERATOR_NAMESPACE,
    PREFIX,
    SERVICE_ACCOUNT,
    _grants,
    _render,
    container,
    needs_kubectl,
    one,
    render,
    run_config,
)

OVERLAY = "sharded"
LEASES = ("coordination.k8s.io", "leases")


def comments(path: Path) -> str:
    """The comments of a file, as one line of text (wherever the lines wrap)."""
    lines = path.read_text().splitlines()
    return " ".join(line.strip().removeprefix("#").strip() for line in lines if line.strip().startswith("#"))


@needs_kubectl
def test_the_deployment_runs_three_replicas_with_sharding_instead_of_leader_election() -> None:
    deployment = one(render(OVERLAY), "Deployment")
    plain = one(render("default"), "Deployment")
    assert deployment["spec"]["replicas"] == SHARDED_REPLICAS == 3
    args = container(deployment)["args"]
    assert "--leader-elect" not in args
    # --sharding in --leader-elect's place, the other args as the default install's.
    assert args == ["--sharding" if arg == "--leader-elect" else arg for arg in container(plain)["args"]]
    config = run_config(deployment)
    assert (config.sharding, config.leader_elect) == (True, False)
    assert config.sharding_group == "memop"  # the project's name, --sharding-group's default
    # In the pod the Leases' namespace is the service account's: the Pod's own.
    assert config.leader_election_namespace is None
    in_pod = dataclasses.replace(config, leader_election_namespace=OPERATOR_NAMESPACE)
    sharding = sharding_config(in_pod, "memop-7c9-x2x4z")
    assert sharding is not None
    assert (sharding.group, sharding.namespace, sharding.shards) == ("memop", OPERATOR_NAMESPACE, 16)
    # Replicas started together wait one round (the retry period) before taking a shard.
    assert sharding.initial_join_delay == sharding.retry_period == config.retry_period
    # Nothing else differs from the default install's Deployment.
    deployment["spec"]["replicas"] = plain["spec"]["replicas"]
    container(deployment)["args"] = container(plain)["args"]
    assert deployment == plain


@needs_kubectl
def test_the_lease_role_adds_list_watch_and_delete_to_leader_elections() -> None:
    objects = render(OVERLAY)
    default = render("default")
    role = one(objects, "Role", PREFIX + rbac.SHARDING_ROLE, OPERATOR_NAMESPACE)
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "watch", "create", "update", "delete"],
        }
    ]
    assert role["rules"] == rbac.policy_rules(rbac.Scope.OPERATOR, rbac.SHARDING_RULES)
    election = one(default, "Role", PREFIX + rbac.LEADER_ELECTION_ROLE, OPERATOR_NAMESPACE)
    [election_rule] = election["rules"]
    assert set(role["rules"][0]["verbs"]) == set(election_rule["verbs"]) | {"list", "watch", "delete"}
    binding = one(objects, "RoleBinding", PREFIX + rbac.SHARDING_ROLE_BINDING, OPERATOR_NAMESPACE)
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert [(s["namespace"], s["name"]) for s in binding["subjects"]] == [SERVICE_ACCOUNT]
    for verb in ("list", "watch", "delete"):
        assert _grants(objects, *LEASES, verb, OPERATOR_NAMESPACE)
        assert not _grants(objects, *LEASES, verb, "elsewhere")
        assert not _grants(default, *LEASES, verb, OPERATOR_NAMESPACE)
    # Only the Lease role is replaced, and the children's role added (the Deployment and budget,
    # and the children's role: the other tests).
    lease_role = {PREFIX + rbac.LEADER_ELECTION_ROLE, PREFIX + rbac.LEADER_ELECTION_ROLE_BINDING}
    children = {PREFIX + rbac.SHARDING_CHILDREN_ROLE, PREFIX + rbac.SHARDING_CHILDREN_ROLE_BINDING}
    sharding_role = {role["metadata"]["name"], binding["metadata"]["name"], *children}

    def rest(objs: list[dict[str, Any]], left_out: set[str]) -> list[dict[str, Any]]:
        return [
            o
            for o in objs
            if o["metadata"]["name"] not in left_out
            and o["kind"] not in ("Deployment", "PodDisruptionBudget")
        ]

    assert rest(objects, sharding_role) == rest(default, lease_role)


@needs_kubectl
def test_the_children_role_adds_patch_on_what_the_controllers_create_and_do_not_patch() -> None:
    """Labelling what an unsharded install made (sharding.adoption) patches its children: pods for
    the PodSet and MyPod controllers (which create and delete theirs, never patch them); the
    Memcached controller patches its Deployments already."""
    objects = render(OVERLAY)
    default = render("default")
    role = one(objects, "ClusterRole", PREFIX + rbac.SHARDING_CHILDREN_ROLE)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
    binding = one(objects, "ClusterRoleBinding", PREFIX + rbac.SHARDING_CHILDREN_ROLE_BINDING)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]
    }  # fmt: skip
    assert [(s["namespace"], s["name"]) for s in binding["subjects"]] == [SERVICE_ACCOUNT]
    for group, resource in (("", "pods"), ("apps", "deployments")):
        assert _grants(objects, group, resource, "patch", "anywhere")
    assert not _grants(default, "", "pods", "patch", "anywhere")
    assert rbac.allowed("", "pods", "patch", "anywhere", sharding=True)
    assert not rbac.allowed("", "pods", "patch", "anywhere")


@needs_kubectl
def test_a_drain_takes_one_replica_and_its_shards_at_a_time() -> None:
    objects = render(OVERLAY)
    deployment, budget = one(objects, "Deployment"), one(objects, "PodDisruptionBudget")
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert budget["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in budget["spec"]
    # A sharded install has no standby: the comment says why one at a time suits it instead.
    why = comments(MANIFESTS / OVERLAY / "pdb.yaml")
    assert "has no standby" in why
    assert "a drain moves one replica's shards (a third of the ring) at a time" in why


def test_the_kustomization_says_how_to_apply_it_and_what_the_feature_gate_changes() -> None:
    path = MANIFESTS / OVERLAY / "kustomization.yaml"
    assert "#   kubectl apply -k manifests/sharded\n" in path.read_text()
    comment = comments(path)
    assert "ShardedListAndWatch feature gate on" in comment
    assert "each replica receives only its share" in comment
    assert "every replica receives every object and drops those outside its shards itself" in comment
    assert "sharding.memop.dev/group=memop" in comment


class _Listener:
    """A replica's controllers, reduced to what the membership needs: nothing to drain."""

    async def acquired(self, shards: Sequence[int]) -> None:
        pass

    async def releasing(self, shard: int) -> None:
        pass

    def lost(self) -> None:
        pass


@needs_kubectl
async def test_the_role_grants_every_lease_request_a_sharded_replica_sends(apiserver: ApiServer) -> None:
    """A replica joins (creates its member Lease and the shards'), takes every shard, renews,
    then leaves (clears its shards, deletes its member Lease): each request is granted, and
    only get (to read back a member Lease whose create's answer was lost) goes unused here."""
    clock = FakeClock(wall_start=1_700_000_000.0)
    agent = "sharded-replica"
    async with ApiClient(apiserver.client_configuration()) as api:
        client = Client(api, user_agent=agent, max_retries=0, clock=clock)
        # Alone: it takes its shards at its first round, with no wait for others joining.
        config = ShardingConfig(
            sharding_group(MEMOP), "default", identity="replica-0", shards=4, initial_join_delay=0
        )
        membership = ShardMembership(client, config, _Listener(), clock=clock, rand=lambda: 0.0)
        task = asyncio.create_task(membership.run(), name="membership")
        try:
            await wait_for(lambda: membership.rounds >= 1, timeout=5)
            assert membership.owned == {0, 1, 2, 3}
            clock.advance(config.retry_period)
            await wait_for(lambda: membership.rounds >= 2, timeout=5)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await membership.leave()
    sent = {record.verb for record in apiserver.log.filter(resource="leases", user_agent=agent)}
    assert sent == {"list", "watch", "create", "update", "delete"}
    objects = render(OVERLAY)
    for verb in sent | {"get"}:
        assert _grants(objects, *LEASES, verb, OPERATOR_NAMESPACE), verb
        assert rbac.allowed(*LEASES, verb, OPERATOR_NAMESPACE, sharding=True), verb


def test_the_group_is_the_project_name_cut_to_what_a_group_may_be() -> None:
    assert SHARDING_GROUP_MAX == MAX_GROUP
    assert sharding_group(MEMOP) == "memop"
    project = Project(
        name="a" * 39 + "-" + "b" * 20, domain="example.org", controllers=(MEMCACHED,), namespace="ops"
    )
    assert sharding_group(Target(project)) == "a" * 39
    # memop's own name is the default group: no flag repeats it.
    assert "--sharding-group" not in (MANIFESTS / OVERLAY / "kustomization.yaml").read_text()


@needs_kubectl
def test_a_project_name_too_long_for_a_group_runs_with_one_it_may_use(tmp_path: Path) -> None:
    name = "a" * 39 + "-" + "b" * 20
    project = Project(name=name, domain="example.org", controllers=(MEMCACHED,), namespace="operators")
    write_changed(tmp_path, manifest_files(Target(project)))
    deployment = one(_render(str(tmp_path / OVERLAY)), "Deployment")
    args = container(deployment)["args"]
    assert args[0] == "--sharding"
    assert args[-1] == f"--sharding-group={'a' * 39}"
    config = parse_run_args(args)
    assert config.sharding_group == "a" * 39
    ShardingConfig(config.sharding_group, "operators").validate()
    # The project's own name is refused: the install would not start without the flag.
    with pytest.raises(UsageError, match="sharding-group"):
        parse_run_args(["--sharding", f"--sharding-group={name}"])
