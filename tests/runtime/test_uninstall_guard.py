"""memop.runtime.manager.uninstall against an API server: the guard keeps the operator's
ServiceAccount, ClusterRole and binding through their deletion, and its release hands them to
the garbage collector so that nothing is left; ``wait_finalized`` counts only the objects of
CRDs being deleted.

Runs on the ``cluster`` fixture: the in-memory server, or a real cluster with
USE_EXISTING_CLUSTER=true (the cluster-scoped objects are named after the test's namespace and
deleted at the end whatever happens).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from memop import memcached
from memop.builtin import PROJECT
from memop.manifests import rbac
from memop.manifests.target import SERVICE_ACCOUNT
from memop.memcached.api import FINALIZER, MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import AlreadyExists, Forbidden, NotFound
from memop.runtime.client.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CUSTOM_RESOURCE_DEFINITIONS,
    LEASES,
    NAMESPACES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    Resource,
)
from memop.runtime.controller.finalizers import has_finalizer
from memop.runtime.leaderelection.lease import LeaderElectionConfig, micro_time
from memop.runtime.manager.uninstall import (
    GUARD,
    UninstallGuard,
    UninstallGuardConfig,
    crd_name,
    uninstall_guard_rules,
)
from memop.runtime.sharding.membership import (
    GROUP_LABEL,
    MEMBER,
    ROLE_LABEL,
    SHARDS_ANNOTATION,
    ShardingConfig,
    member_lease_name,
)
from memop.runtime.sharding.ring import Ring
from memop.testing.envtest import Kube
from memop.testing.wait import wait_for

HOLD = "example.com/hold"


@pytest.fixture
def apiserver_options() -> dict[str, Any]:
    """The garbage collector, the namespace controller and the CRD finalizer at work, as in a
    cluster (memop's server tests run without kube-controller-manager's controllers)."""
    return {"publish_root_ca": True, "simulate_controllers": True}


# The garbage collector of a real kube-controller-manager retries a foreground deletion with
# backoff: the binding and the role went 20-30 s after the ServiceAccount there.
GC_SECONDS = 120.0


async def _gone(client: Client, res: Resource, name: str, namespace: str | None = None) -> bool:
    try:
        await client.get(res, name, namespace)
    except NotFound:
        return True
    return False


@pytest.fixture
async def guarded(client: Client, namespace: str) -> AsyncIterator[UninstallGuardConfig]:
    """An operator's ServiceAccount in ``namespace``, its ClusterRole and binding; whatever is
    left at the end loses its finalizers and goes."""
    config = UninstallGuardConfig(namespace, "operator", f"{namespace}-role", f"{namespace}-binding")
    await client.create(SERVICE_ACCOUNTS, {"metadata": {"name": config.service_account}}, namespace)
    await client.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": config.role},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        },
    )
    await client.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": config.role_binding},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": config.role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": config.service_account, "namespace": namespace}],
        },
    )
    yield config
    for res, name, ns in (
        (SERVICE_ACCOUNTS, config.service_account, namespace),
        (CLUSTER_ROLE_BINDINGS, config.role_binding, None),
        (CLUSTER_ROLES, config.role, None),
    ):
        with contextlib.suppress(NotFound):
            await client.patch(res, name, {"metadata": {"finalizers": None}}, ns)
        with contextlib.suppress(NotFound):
            await client.delete(res, name, ns)


async def test_the_guarded_objects_outlive_their_deletion_until_released(
    client: Client, namespace: str, guarded: UninstallGuardConfig
) -> None:
    guard = UninstallGuard(client, guarded, kinds=[])
    await guard.arm()
    await guard.arm()  # again, as a second replica: nothing more
    objects = [
        (SERVICE_ACCOUNTS, guarded.service_account, namespace),
        (CLUSTER_ROLES, guarded.role, None),
        (CLUSTER_ROLE_BINDINGS, guarded.role_binding, None),
    ]
    for res, name, ns in objects:
        obj = await client.get(res, name, ns)
        assert obj["metadata"]["finalizers"].count(GUARD) == 1, name
    assert not await guard.uninstalling()

    # What `kubectl delete -k` does to them: every one deleted, in the background.
    await client.delete(NAMESPACES, namespace, propagation_policy="Background")
    for res, name, ns in objects[1:]:
        await client.delete(res, name, ns, propagation_policy="Background")
    assert await guard.uninstalling()
    for res, name, ns in objects[1:]:
        held = await client.get(res, name, ns)
        assert held["metadata"].get("deletionTimestamp"), name
        assert has_finalizer(held, GUARD), name
    assert await guard.wait_finalized(timeout=0) == 0  # no kind of its own: nothing to wait for

    await guard.release()

    async def all_gone() -> bool:
        return all([await _gone(client, res, name, ns) for res, name, ns in objects])

    async def left() -> str:
        states = []
        for res, name, ns in objects:
            with contextlib.suppress(NotFound):
                meta = (await client.get(res, name, ns))["metadata"]
                states.append(f"{name}: {meta.get('finalizers')} del={meta.get('deletionTimestamp')}")
        with contextlib.suppress(NotFound):
            states.append(str((await client.get(NAMESPACES, namespace)).get("status")))
        return "; ".join(states)

    last: list[str] = []

    async def all_gone_noting() -> bool:
        last[:] = [await left()]
        return await all_gone()

    await wait_for(
        all_gone_noting,
        timeout=GC_SECONDS,
        message=lambda: f"the guarded objects are released and go: {last}",
    )
    await wait_for(
        lambda: _gone(client, NAMESPACES, namespace), timeout=GC_SECONDS, message="the namespace goes"
    )


async def test_release_of_what_is_gone_already_is_no_error(
    client: Client, namespace: str, guarded: UninstallGuardConfig
) -> None:
    guard = UninstallGuard(client, guarded, kinds=[])
    await client.delete(CLUSTER_ROLE_BINDINGS, guarded.role_binding)
    await guard.release()  # the role and the ServiceAccount were never guarded: nothing to do
    assert not await _gone(client, CLUSTER_ROLES, guarded.role)  # not deleted by release alone


@pytest.fixture
async def kind(client: Client, namespace: str, install_crds: Any) -> AsyncIterator[Resource]:
    """A namespaced kind of a CRD of the test's own."""
    group = f"{namespace}.uninstall.memop.dev"
    res = Resource(group, "v1", "widgets", "Widget")
    crd: dict[str, Any] = {
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    await install_crds(crd)  # created and Established
    yield res
    for item in (await client.list(res)).get("items", []) if not await _gone_kind(client, res) else []:
        with contextlib.suppress(NotFound):
            await client.patch(res, item["metadata"]["name"], {"metadata": {"finalizers": None}}, namespace)
    with contextlib.suppress(NotFound):
        await client.delete(CUSTOM_RESOURCE_DEFINITIONS, f"widgets.{group}")


async def _gone_kind(client: Client, res: Resource) -> bool:
    try:
        await client.list(res)
    except NotFound:
        return True
    return False


async def test_wait_finalized_counts_the_objects_of_crds_being_deleted_only(
    client: Client, namespace: str, kind: Resource
) -> None:
    for name in ("a", "b"):
        await client.create(kind, {"metadata": {"name": name, "finalizers": [HOLD]}}, namespace)
    config = UninstallGuardConfig(namespace, "operator", "role", "binding")
    guard = UninstallGuard(client, config, kinds=[kind])
    assert await guard.wait_finalized(timeout=0) == 0  # the kind stays: its objects are not going

    await client.delete(CUSTOM_RESOURCE_DEFINITIONS, str(crd_name(kind)))

    async def both_held() -> bool:
        return await guard.wait_finalized(timeout=0) == 2

    await wait_for(both_held, timeout=30, message="the CRD's deletion deletes its objects, held by HOLD")
    for name in ("a", "b"):  # what the operator's controller does for each
        await client.patch(kind, name, {"metadata": {"finalizers": None}}, namespace)

    async def none_left() -> bool:
        return await guard.wait_finalized(timeout=0) == 0

    await wait_for(none_left, timeout=GC_SECONDS, message="the objects and their CRD go")


def test_the_rules_name_the_guarded_objects_and_the_crds_only() -> None:
    config = UninstallGuardConfig("ops", "operator", "operator-role", "operator-binding")
    rules = uninstall_guard_rules(config, ["widgets.example.com"])
    assert all(rule.resource_names for rule in rules)
    named = {(r.resource, r.verb): r.resource_names for r in rules}
    assert named[("namespaces", "get")] == ("ops",)
    assert named[("serviceaccounts", "patch")] == ("operator",)
    assert named[("clusterroles", "delete")] == ("operator-role",)
    assert named[("clusterrolebindings/finalizers", "update")] == ("operator-binding",)
    assert named[("customresourcedefinitions", "get")] == ("widgets.example.com",)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a,b", "SERVICEACCOUNT,CLUSTERROLE,CLUSTERROLEBINDING"),
        ("a,,c", "got 'a,,c'"),
        ("a,b,RoleBinding/c", "a Role goes"),
    ],
)
def test_a_bad_guard_value_says_what_it_takes(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        UninstallGuardConfig.parse(text, "ops")


def test_builtin_kinds_have_no_crd() -> None:
    assert crd_name(Resource("apps", "v1", "deployments", "Deployment")) is None
    assert crd_name(Resource("networking.k8s.io", "v1", "ingresses", "Ingress")) is None
    assert (
        crd_name(Resource("cache.example.com", "v1", "memcacheds", "Memcached"))
        == "memcacheds.cache.example.com"
    )


async def test_kubectl_delete_k_with_a_memcached_left_leaves_nothing(
    kube: Kube, client: Client, namespace: str, install_crds: Any, run_operator: Any
) -> None:
    """The whole install deleted in one sweep, as ``kubectl delete -k manifests/default`` does,
    while a Memcached with memop's finalizer is there and memop runs as its ServiceAccount with
    the RBAC its manifests grant: memop finalizes the Memcached, then releases its RBAC, and
    nothing is left."""
    kube.fake  # noqa: B018 - deletes the install's namespace, CRD and ClusterRole: in-memory only
    config = install_guard()
    await install_crds(memcached.DEFINITION)
    operator = run_operator(memcached.DEFINITION, rbac=True, uninstall_guard=config)
    await operator.start()
    sample = {"metadata": {"name": "cache"}, "spec": {"size": 1}}
    await client.create(MEMCACHEDS, sample, namespace)

    async def finalized_and_guarded() -> bool:
        cache = await client.get(MEMCACHEDS, "cache", namespace)
        account = await client.get(SERVICE_ACCOUNTS, config.service_account, config.namespace)
        return has_finalizer(cache, FINALIZER) and has_finalizer(account, GUARD)

    await wait_for(finalized_and_guarded, timeout=30, message="memop reconciled and armed its guard")

    await delete_the_install(client, config)
    await operator.stop()  # the kubelet's SIGTERM, once the namespace controller deletes the Pod
    # Without the guard the Memcached's finalizer would have been refused (403) and it, its CRD
    # and the namespace would stay; without its release, the ServiceAccount and the namespace.
    await wait_nothing_left(client, config)


def install_guard() -> UninstallGuardConfig:
    """The guard of memop's own install, as manifests/manager sets it."""
    return UninstallGuardConfig(
        rbac.NAMESPACE,
        rbac.PREFIX + SERVICE_ACCOUNT,
        rbac.PREFIX + rbac.MANAGER_ROLE,
        rbac.PREFIX + rbac.MANAGER_ROLE_BINDING,
    )


MEMCACHED_CRD = (str(crd_name(MEMCACHEDS)),)


async def delete_the_install(
    client: Client, config: UninstallGuardConfig, crd_names: Sequence[str] = MEMCACHED_CRD
) -> None:
    """What ``kubectl delete -k`` deletes of an install (with its CRDs), in one sweep."""
    crds = [(CUSTOM_RESOURCE_DEFINITIONS, name, None) for name in crd_names]
    for res, name, ns in (
        (NAMESPACES, config.namespace, None),
        *crds,
        (CLUSTER_ROLES, config.role, None),
        (CLUSTER_ROLE_BINDINGS, config.role_binding, None),
    ):
        await client.delete(res, name, ns, propagation_policy="Background")


async def wait_nothing_left(
    client: Client, config: UninstallGuardConfig, crd_names: Sequence[str] = MEMCACHED_CRD
) -> None:
    objects = [
        *((CUSTOM_RESOURCE_DEFINITIONS, name, None) for name in crd_names),
        (CLUSTER_ROLES, config.role, None),
        (CLUSTER_ROLE_BINDINGS, config.role_binding, None),
        (SERVICE_ACCOUNTS, config.service_account, config.namespace),
        (NAMESPACES, config.namespace, None),
    ]

    async def nothing_left() -> bool:
        return all([await _gone(client, res, name, ns) for res, name, ns in objects])

    await wait_for(nothing_left, timeout=GC_SECONDS, message="the install is gone, nothing stuck")


async def install_the_project(client: Client, install_crds: Any, config: UninstallGuardConfig) -> list[str]:
    """memop's three CRDs and its namespace, as an install has them; the CRDs' names."""
    await install_crds(*PROJECT.controllers)
    with contextlib.suppress(AlreadyExists):
        await client.create(NAMESPACES, {"metadata": {"name": config.namespace}})
    return [crd["metadata"]["name"] for c in PROJECT.controllers for crd in c.crds()]


async def wait_armed(client: Client, config: UninstallGuardConfig) -> None:
    async def armed() -> bool:
        account = await client.get(SERVICE_ACCOUNTS, config.service_account, config.namespace)
        return has_finalizer(account, GUARD)

    await wait_for(armed, timeout=30, message="memop armed its guard")


GHOST = "replica-being-replaced"
CRDS = CUSTOM_RESOURCE_DEFINITIONS.plural


def member_lease(
    client: Client, sharding: ShardingConfig, identity: str
) -> AbstractAsyncContextManager[None]:
    """A live member of the group that works on no shard (a replica that a rollout is
    replacing): its shards have no holder."""
    metadata = {
        "name": member_lease_name(sharding.group, identity),
        "labels": {GROUP_LABEL: sharding.group, ROLE_LABEL: MEMBER},
        "annotations": {SHARDS_ANNOTATION: str(sharding.shards)},
    }
    return held_lease(client, sharding.namespace, metadata, identity, sharding.lease_duration)


@contextlib.asynccontextmanager
async def held_lease(
    client: Client, namespace: str, metadata: dict[str, Any], identity: str, duration: float
) -> AsyncIterator[None]:
    """A Lease held by ``identity``, made before the block and renewed during it until it goes
    with its namespace."""
    lease = {
        "metadata": metadata,
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": int(duration),
            "renewTime": micro_time(time.time()),
        },
    }
    renewing = asyncio.create_task(_renew(client, await client.create(LEASES, lease, namespace), duration))
    try:
        yield
    finally:
        renewing.cancel()
        await asyncio.gather(renewing, return_exceptions=True)


async def _renew(client: Client, lease: dict[str, Any], duration: float) -> None:
    while True:
        await asyncio.sleep(duration / 10)
        lease["spec"]["renewTime"] = micro_time(time.time())
        try:
            lease = await client.update(LEASES, lease)
        except (NotFound, Forbidden):  # gone, and not to be made again in a terminating namespace
            return


@pytest.mark.parametrize("membership_lost_first", [False, True], ids=["stopped-first", "leases-gone-first"])
async def test_a_sharded_replica_finalizes_every_shard_when_uninstalled(
    kube: Kube,
    client: Client,
    namespace: str,
    *,
    install_crds: Any,
    run_operator: Any,
    membership_lost_first: bool,
) -> None:
    """``delete -k`` of the sharded install during a rollout: half the shards belong to a
    member that works on none of them, and the group's Leases go with the namespace. The
    replica left finalizes every Memcached being deleted, in any shard, then releases its RBAC.
    Either SIGTERM comes first, or the loss of its member Lease (deleted with the namespace)."""
    kube.fake  # noqa: B018 - deletes the install's namespace, CRD and ClusterRole: in-memory only
    config = install_guard()
    sharding = ShardingConfig(
        "memop",
        config.namespace,
        identity="replica",
        shards=4,
        lease_duration=10.0,
        renew_deadline=8.0,
        retry_period=0.5,
        initial_join_delay=0,
    )
    crds = await install_the_project(client, install_crds, config)
    async with member_lease(client, sharding, GHOST):
        operator = run_operator(
            PROJECT,
            rbac=True,
            sharding=sharding,
            uninstall_guard=config,
            graceful_shutdown_timeout=60.0,
        )
        await operator.start()

        async def holders() -> dict[int, str]:
            leases = (await client.list(LEASES, config.namespace, label_selector=f"{ROLE_LABEL}=shard"))[
                "items"
            ]
            return {
                int(lease["metadata"]["name"].split("-shard-")[1].split("-")[0]): lease["spec"].get(
                    "holderIdentity", ""
                )
                for lease in leases
            }

        async def split() -> bool:
            return list((await holders()).values()).count("replica") == 2

        await wait_for(split, timeout=30, message="the replica holds its half of the shards")
        ours = {s for s, holder in (await holders()).items() if holder == "replica"}
        ring = Ring(sharding.shards)
        in_shards: dict[bool, list[str]] = {True: [], False: []}
        for i in range(64):  # until both halves have one; with finalizers, as made by a replica
            name = f"cache-{i}"
            made = await client.create(
                MEMCACHEDS,
                {"metadata": {"name": name, "finalizers": [FINALIZER]}, "spec": {"size": 1}},
                namespace,
            )
            in_shards[ring.shard_of_value(made["metadata"]["uid"]) in ours].append(name)
            if in_shards[True] and in_shards[False]:
                break
        await wait_armed(client, config)
        # Every CRD of the project: a kind whose CRD is gone can no longer be listed, and the
        # shards taken must not wait for its cache.
        await delete_the_install(client, config, crds)
        if membership_lost_first:

            def lost() -> list[str]:
                return [line for line in operator.logs.lines if "membership lost while the install" in line]

            await wait_for(lost, timeout=60, message="the replica's member Lease went with the namespace")
        await operator.stop()
        # Without taking every shard, the Memcacheds of the other member's shards kept memop's
        # finalizer, and the CRD and the namespace stayed.
        await wait_nothing_left(client, config, crds)


async def test_a_replica_that_does_not_lead_finalizes_when_uninstalled(
    kube: Kube, client: Client, namespace: str, install_crds: Any, run_operator: Any
) -> None:
    """``delete -k`` during a rollout of a leader-elected install: the old leader has stopped,
    the new replica cannot take the Lease (held, then gone with the namespace and its Role).
    The replica finalizes what is being deleted all the same."""
    kube.fake  # noqa: B018 - deletes the install's namespace, CRD and ClusterRole: in-memory only
    config = install_guard()
    election = LeaderElectionConfig(
        str(PROJECT.leader_election_id),
        config.namespace,
        identity="replica",
        lease_duration=10.0,
        renew_deadline=8.0,
        retry_period=0.5,
    )
    crds = await install_the_project(client, install_crds, config)
    leader = "leader-being-replaced"
    async with held_lease(
        client, config.namespace, {"name": election.lease_name}, leader, election.lease_duration
    ):
        operator = run_operator(
            PROJECT,
            rbac=True,
            leader_election=election,
            uninstall_guard=config,
            graceful_shutdown_timeout=60.0,
        )
        await operator.start()
        made = {"metadata": {"name": "cache", "finalizers": [FINALIZER]}, "spec": {"size": 1}}
        await client.create(MEMCACHEDS, made, namespace)
        await wait_armed(client, config)
        assert not operator.manager.leading.is_set()
        await delete_the_install(client, config, crds)
        await operator.stop()
        # Without reconciling unelected, the Memcached kept memop's finalizer, and its CRD and
        # the namespace stayed.
        await wait_nothing_left(client, config, crds)


async def test_an_uninstall_that_begins_just_after_the_replica_stopped_still_releases_the_guard(
    kube: Kube,
    client: Client,
    install_crds: Any,
    run_operator: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The Deployment deleted before the namespace (``kubectl delete -f`` in reverse order, a
    tear-down): the replica is stopped before its install is being deleted. It watches a few
    seconds more, and releases its guard once the deletion begins; nothing is left."""
    kube.fake  # noqa: B018 - deletes the install's namespace, CRD and ClusterRole: in-memory only
    caplog.set_level(logging.INFO, logger="memop.manager")
    config = install_guard()
    await install_crds(memcached.DEFINITION)
    operator = run_operator(memcached.DEFINITION, rbac=True, uninstall_guard=config)
    await operator.start()
    await wait_armed(client, config)
    stopping = asyncio.create_task(operator.stop())

    def watching() -> bool:
        return any("watching" in r.getMessage() for r in caplog.records if r.name == "memop.manager")

    await wait_for(watching, timeout=30, message="the replica stopped outside an uninstall")
    await delete_the_install(client, config)
    await stopping
    # Without the watch, the ServiceAccount, role and binding kept the guard for ever.
    await wait_nothing_left(client, config)


async def test_a_replica_stopped_just_before_the_uninstall_leaves_the_rbac_to_the_others(
    kube: Kube,
    client: Client,
    namespace: str,
    *,
    install_crds: Any,
    run_operator: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A rollout stops the leader a moment before ``delete -k``: it sees the deletion begin, but
    another replica is still there to finalize the Memcached. The stopped one must not release
    the guard (and with it the ServiceAccount and RBAC the other runs as) before that is done."""
    server = kube.fake  # deletes the install's namespace, CRD and ClusterRole: in-memory only
    caplog.set_level(logging.INFO, logger="memop.manager")
    caplog.set_level(logging.INFO, logger="memop.uninstall")
    config = install_guard()
    await install_crds(memcached.DEFINITION)

    def replica(identity: str) -> Any:
        election = LeaderElectionConfig(
            "memop-test-leader", config.namespace, identity=identity, lease_duration=10.0, renew_deadline=8.0,
            retry_period=0.5,
        )  # fmt: skip
        return run_operator(
            memcached.DEFINITION,
            rbac=True,
            leader_election=election,
            uninstall_guard=config,
            identity=identity,
        )

    old, new = replica("old"), replica("new")
    await old.start()
    await wait_for(old.manager.leading.is_set, timeout=30, message="the old replica leads")
    await new.start()
    await client.create(MEMCACHEDS, {"metadata": {"name": "cache"}, "spec": {"size": 1}}, namespace)

    async def finalized() -> bool:
        return has_finalizer(await client.get(MEMCACHEDS, "cache", namespace), FINALIZER)

    await wait_for(finalized, timeout=30, message="the leader put its finalizer on")
    await wait_armed(client, config)
    stopping = asyncio.create_task(old.stop())  # the rollout's SIGTERM

    def said(text: str) -> bool:
        return any(text in r.getMessage() for r in caplog.records if r.name.startswith("memop."))

    await wait_for(lambda: said("watching"), timeout=30, message="the old replica stopped")
    # delete -k deletes the namespace first and the CRD a moment later.
    await client.delete(NAMESPACES, config.namespace, propagation_policy="Background")
    await wait_for(lambda: said("uninstalling began"), timeout=30, message="it saw the deletion")
    # Its next step: waiting for the finalization, or (a defect) releasing the guard at once.
    await wait_for(
        lambda: said("waiting up to") or said("guard released"), timeout=30, message="its next step"
    )

    def crd_reads() -> int:
        agent = old.user_agent
        return sum(1 for r in server.log.records if r.matches(verb="get", resource=CRDS, user_agent=agent))

    # With no object left but the CRD not deleted yet, it must look again, not release (a
    # defect: the ServiceAccount went, and the other replica's token with it).
    seen = crd_reads()
    await wait_for(
        lambda: said("guard released") or crd_reads() >= seen + 2, timeout=30, message="it looked again"
    )
    for res, name in (
        (CUSTOM_RESOURCE_DEFINITIONS, MEMCACHED_CRD[0]),
        (CLUSTER_ROLES, config.role),
        (CLUSTER_ROLE_BINDINGS, config.role_binding),
    ):
        await client.delete(res, name, propagation_policy="Background")
    await new.stop()  # its SIGTERM, from the namespace's deletion
    await stopping
    await wait_nothing_left(client, config)


async def test_a_guard_that_cannot_arm_says_so_once_and_memop_runs_on(
    client: Client, namespace: str, install_crds: Any, run_operator: Any
) -> None:
    config = UninstallGuardConfig(namespace, "no-such-account", f"{namespace}-none", f"{namespace}-none")
    await install_crds(memcached.DEFINITION)
    async with run_operator(
        memcached.DEFINITION, namespaces=(namespace,), uninstall_guard=config
    ) as operator:

        def said() -> list[str]:
            return [line for line in operator.logs.lines if "uninstall guard off" in line]

        await wait_for(said, timeout=30, message="the guard says why it is off")
        await client.create(MEMCACHEDS, {"metadata": {"name": "cache"}, "spec": {"size": 1}}, namespace)

        async def reconciled() -> bool:
            return has_finalizer(await client.get(MEMCACHEDS, "cache", namespace), FINALIZER)

        await wait_for(reconciled, timeout=30, message="memop reconciles all the same")
        assert len(said()) == 1, said()


async def test_a_namespaced_install_guards_its_role_and_binding(client: Client, namespace: str) -> None:
    """A namespaced install (a Role and RoleBinding in its own namespace, where its custom
    resources are too): the namespace's deletion alone is the uninstall; the namespace
    controller deletes the three, the guard keeps them, its release lets them and the namespace go."""
    config = UninstallGuardConfig(namespace, "operator", "operator-role", "operator-binding", namespaced=True)
    await client.create(SERVICE_ACCOUNTS, {"metadata": {"name": config.service_account}}, namespace)
    await client.create(
        ROLES,
        {
            "metadata": {"name": config.role},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        },
        namespace,
    )
    await client.create(
        ROLE_BINDINGS,
        {
            "metadata": {"name": config.role_binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": config.role},
            "subjects": [{"kind": "ServiceAccount", "name": config.service_account, "namespace": namespace}],
        },
        namespace,
    )
    objects = [
        (ROLES, config.role, namespace),
        (ROLE_BINDINGS, config.role_binding, namespace),
        (SERVICE_ACCOUNTS, config.service_account, namespace),
    ]
    guard = UninstallGuard(client, config, kinds=[])
    await guard.arm()
    await client.delete(NAMESPACES, namespace, propagation_policy="Background")

    async def all_held() -> bool:
        held = [await client.get(res, name, ns) for res, name, ns in objects]
        return all(o["metadata"].get("deletionTimestamp") and has_finalizer(o, GUARD) for o in held)

    await wait_for(
        all_held, timeout=GC_SECONDS, message="the namespace controller deletes them, the guard holds them"
    )
    assert await guard.uninstalling()
    await guard.release()

    async def all_gone() -> bool:
        return all([await _gone(client, res, name, ns) for res, name, ns in objects]) and await _gone(
            client, NAMESPACES, namespace
        )

    await wait_for(all_gone, timeout=GC_SECONDS, message="released, they and the namespace go")


def test_a_namespaced_guard_reads_no_crd() -> None:
    config = UninstallGuardConfig("ops", "operator", "operator-role", "operator-binding", namespaced=True)
    rules = uninstall_guard_rules(config, ["widgets.example.com"])
    assert {r.resource for r in rules} == {
        "namespaces",
        "serviceaccounts",
        "roles",
        "roles/finalizers",
        "rolebindings",
        "rolebindings/finalizers",
    }
    assert (
        UninstallGuardConfig.parse("operator,Role/operator-role,RoleBinding/operator-binding", "ops")
        == config
    )
