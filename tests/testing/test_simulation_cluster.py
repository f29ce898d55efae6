"""The simulated control plane seen through the API server's HTTP API, as an operator sees a
real cluster: Deployments roll out to running pods, owners take their dependents with them
(background, foreground, orphan), custom resources own Deployments, namespaces empty out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
NS = "default"


@dataclass
class Cluster:
    server: ApiServer
    api: client.ApiClient

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)


async def start_cluster(pod_ready_delay: float = 0.0) -> tuple[ApiServer, client.ApiClient]:
    server = ApiServer(simulate_controllers=True, pod_ready_delay=pod_ready_delay)
    await server.start()
    return server, client.ApiClient(server.client_configuration())


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    server, api = await start_cluster()
    try:
        yield Cluster(server, api)
    finally:
        await api.close()
        await server.stop()


async def gone(read: Callable[[], Awaitable[Any]], what: str, timeout: float = 10.0) -> None:
    async def probe() -> bool:
        try:
            await read()
        except ApiException as err:
            if err.status == 404:
                return True
            raise
        return False

    await wait_for(probe, timeout, message=f"{what} to be gone")


def deployment(
    name: str,
    replicas: int = 3,
    image: str = "memcached:1.6",
    owner: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"app": name}}
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "memcached", "image": image, "ports": [{"containerPort": 11211}]}]
                },
            },
            **spec,
        },
    }


def condition(obj: Any, type_: str) -> Any:
    for cond in (obj.status.conditions if obj.status else None) or []:
        if cond.type == type_:
            return cond
    return None


async def rollout_done(c: Cluster, name: str, replicas: int, ns: str = NS) -> client.V1Deployment:
    """Wait until the Deployment reports a complete rollout of ``replicas`` ready pods."""

    async def probe() -> client.V1Deployment | None:
        d = await c.apps.read_namespaced_deployment(name, ns)
        s = d.status
        progressing = condition(d, "Progressing")
        available = condition(d, "Available")
        done = (
            s.observed_generation == d.metadata.generation
            and (s.replicas or 0) == replicas
            and (s.updated_replicas or 0) == replicas
            and (s.ready_replicas or 0) == replicas
            and (s.available_replicas or 0) == replicas
            and available is not None
            and available.status == "True"
            and progressing is not None
            and progressing.reason == "NewReplicaSetAvailable"
        )
        return d if done else None

    return await wait_for(probe, message=f"deployment {name} to roll out {replicas} replicas")


async def replicasets_of(c: Cluster, name: str, ns: str = NS) -> list[client.V1ReplicaSet]:
    items = (await c.apps.list_namespaced_replica_set(ns, label_selector=f"app={name}")).items
    return sorted(items, key=lambda rs: rs.metadata.annotations.get("deployment.kubernetes.io/revision", ""))


async def pods_of(c: Cluster, name: str, ns: str = NS) -> list[client.V1Pod]:
    return list((await c.core.list_namespaced_pod(ns, label_selector=f"app={name}")).items)


async def settled(c: Cluster) -> None:
    """Wait until the simulated controllers have no work queued."""

    async def idle() -> bool:
        return c.server.controllers.pending() == 0

    await wait_for(idle, message="the simulated controllers to be idle")


# -- Deployments ----------------------------------------------------------------------------------


async def test_a_deployment_rolls_out_to_ready_pods(cluster: Cluster) -> None:
    await cluster.apps.create_namespaced_deployment(NS, deployment("web"))
    d = await rollout_done(cluster, "web", 3)

    available = condition(d, "Available")
    assert (available.reason, available.message) == (
        "MinimumReplicasAvailable",
        "Deployment has minimum availability.",
    )
    [rs] = await replicasets_of(cluster, "web")
    pod_hash = rs.metadata.labels["pod-template-hash"]
    assert rs.metadata.name == f"web-{pod_hash}"
    assert rs.spec.replicas == 3
    assert rs.spec.selector.match_labels == {"app": "web", "pod-template-hash": pod_hash}
    assert rs.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    [ref] = rs.metadata.owner_references
    assert (ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == (
        "Deployment",
        "web",
        d.metadata.uid,
        True,
        True,
    )
    assert (
        condition(d, "Progressing").message == f'ReplicaSet "{rs.metadata.name}" has successfully progressed.'
    )
    assert rs.status.ready_replicas == 3
    assert rs.status.available_replicas == 3
    assert rs.status.observed_generation == rs.metadata.generation

    pods = await pods_of(cluster, "web")
    assert len(pods) == 3
    assert len({p.status.pod_ip for p in pods}) == 3
    for pod in pods:
        assert pod.metadata.name.startswith(f"{rs.metadata.name}-")
        assert pod.metadata.labels == {"app": "web", "pod-template-hash": pod_hash}
        [pref] = pod.metadata.owner_references
        assert (pref.kind, pref.uid, pref.controller) == ("ReplicaSet", rs.metadata.uid, True)
        assert pod.status.phase == "Running"
        assert condition(pod, "Ready").status == "True"
        assert [cs.ready for cs in pod.status.container_statuses] == [True]

    # Once settled nothing keeps writing: statuses are only written when they change.
    await settled(cluster)
    before = (await cluster.apps.read_namespaced_deployment("web", NS)).metadata.resource_version
    for _ in range(5):
        await asyncio.sleep(0.02)
        await settled(cluster)
    after = (await cluster.apps.read_namespaced_deployment("web", NS)).metadata.resource_version
    assert before == after


async def test_scaling_up_and_down(cluster: Cluster) -> None:
    await cluster.apps.create_namespaced_deployment(NS, deployment("web", replicas=2))
    await rollout_done(cluster, "web", 2)
    await cluster.apps.patch_namespaced_deployment("web", NS, {"spec": {"replicas": 5}}, _content_type=MERGE)
    d = await rollout_done(cluster, "web", 5)
    assert d.metadata.generation == 2
    assert len(await pods_of(cluster, "web")) == 5

    await cluster.apps.patch_namespaced_deployment("web", NS, {"spec": {"replicas": 1}}, _content_type=MERGE)
    await rollout_done(cluster, "web", 1)
    assert len(await pods_of(cluster, "web")) == 1
    [rs] = await replicasets_of(cluster, "web")
    assert rs.spec.replicas == 1
    assert rs.metadata.annotations["deployment.kubernetes.io/desired-replicas"] == "1"

    await cluster.apps.patch_namespaced_deployment("web", NS, {"spec": {"replicas": 0}}, _content_type=MERGE)

    async def empty() -> bool:
        d = await cluster.apps.read_namespaced_deployment("web", NS)
        return (
            d.status.observed_generation == 4 and not d.status.replicas and not await pods_of(cluster, "web")
        )

    await wait_for(empty, message="the deployment to scale to zero")


async def test_a_deleted_pod_is_replaced(cluster: Cluster) -> None:
    await cluster.apps.create_namespaced_deployment(NS, deployment("web", replicas=3))
    await rollout_done(cluster, "web", 3)
    [rs] = await replicasets_of(cluster, "web")
    victim, *survivors = await pods_of(cluster, "web")
    await cluster.core.delete_namespaced_pod(victim.metadata.name, NS)

    async def replaced() -> list[client.V1Pod] | None:
        pods = await pods_of(cluster, "web")
        names = {p.metadata.name for p in pods}
        ready = all(p.status.phase == "Running" for p in pods)
        return pods if len(pods) == 3 and victim.metadata.name not in names and ready else None

    pods = await wait_for(replaced, message="the deleted pod to be replaced")
    assert {p.metadata.name for p in survivors} < {p.metadata.name for p in pods}
    assert all(p.metadata.owner_references[0].uid == rs.metadata.uid for p in pods)
    d = await rollout_done(cluster, "web", 3)
    assert d.status.ready_replicas == 3


async def test_a_template_change_rolls_to_a_new_replicaset(cluster: Cluster) -> None:
    await cluster.apps.create_namespaced_deployment(NS, deployment("web", replicas=2))
    await rollout_done(cluster, "web", 2)
    [first] = await replicasets_of(cluster, "web")
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "memcached", "image": "memcached:1.7"}]}}}
    }
    await cluster.apps.patch_namespaced_deployment("web", NS, patch, _content_type=STRATEGIC)
    d = await rollout_done(cluster, "web", 2)

    old, new = await replicasets_of(cluster, "web")
    assert old.metadata.uid == first.metadata.uid
    assert old.spec.replicas == 0
    assert new.spec.replicas == 2
    assert new.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    assert new.metadata.labels["pod-template-hash"] != old.metadata.labels["pod-template-hash"]
    assert (
        condition(d, "Progressing").message
        == f'ReplicaSet "{new.metadata.name}" has successfully progressed.'
    )
    pods = await pods_of(cluster, "web")
    assert sorted(p.spec.containers[0].image for p in pods) == ["memcached:1.7", "memcached:1.7"]
    assert all(p.metadata.name.startswith(new.metadata.name) for p in pods)

    # Back to the first template: its ReplicaSet is reused and becomes revision 3.
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]}}}
    }
    await cluster.apps.patch_namespaced_deployment("web", NS, patch, _content_type=STRATEGIC)
    await rollout_done(cluster, "web", 2)
    by_uid = {rs.metadata.uid: rs for rs in await replicasets_of(cluster, "web")}
    assert len(by_uid) == 2
    assert by_uid[first.metadata.uid].spec.replicas == 2
    assert by_uid[first.metadata.uid].metadata.annotations["deployment.kubernetes.io/revision"] == "3"


async def test_recreate_empties_the_old_replicaset_first(cluster: Cluster) -> None:
    body = deployment("web", replicas=2, strategy={"type": "Recreate"})
    await cluster.apps.create_namespaced_deployment(NS, body)
    await rollout_done(cluster, "web", 2)
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "memcached", "image": "memcached:1.7"}]}}}
    }
    await cluster.apps.patch_namespaced_deployment("web", NS, patch, _content_type=STRATEGIC)
    await rollout_done(cluster, "web", 2)
    old, new = await replicasets_of(cluster, "web")
    assert (old.spec.replicas, new.spec.replicas) == (0, 2)


# -- garbage collection ---------------------------------------------------------------------------


async def test_deleting_a_deployment_collects_its_replicasets_and_pods(cluster: Cluster) -> None:
    await cluster.apps.create_namespaced_deployment(NS, deployment("web"))
    await rollout_done(cluster, "web", 3)
    await cluster.apps.delete_namespaced_deployment("web", NS)

    async def collected() -> bool:
        return not await replicasets_of(cluster, "web") and not await pods_of(cluster, "web")

    await wait_for(collected, message="the replicasets and pods to be collected")


async def test_foreground_deletion_removes_dependents_before_the_owner(cluster: Cluster) -> None:
    await cluster.apps.create_namespaced_deployment(NS, deployment("web"))
    await rollout_done(cluster, "web", 3)
    await cluster.apps.delete_namespaced_deployment(
        "web", NS, body=client.V1DeleteOptions(propagation_policy="Foreground")
    )
    await gone(lambda: cluster.apps.read_namespaced_deployment("web", NS), "the deployment")
    # The owner only goes once its blocking dependents (the ReplicaSet, and through it the
    # pods) have gone.
    assert await replicasets_of(cluster, "web") == []
    assert await pods_of(cluster, "web") == []


async def test_orphan_deletion_keeps_dependents_and_drops_their_owner_references(cluster: Cluster) -> None:
    await cluster.apps.create_namespaced_deployment(NS, deployment("web", replicas=2))
    await rollout_done(cluster, "web", 2)
    await cluster.apps.delete_namespaced_deployment(
        "web", NS, body=client.V1DeleteOptions(propagation_policy="Orphan")
    )
    await gone(lambda: cluster.apps.read_namespaced_deployment("web", NS), "the deployment")
    [rs] = await replicasets_of(cluster, "web")
    assert not rs.metadata.owner_references
    pods = await pods_of(cluster, "web")
    assert len(pods) == 2
    assert all(p.metadata.owner_references[0].uid == rs.metadata.uid for p in pods)


async def test_a_dependent_with_another_live_owner_only_loses_the_dead_reference(cluster: Cluster) -> None:
    def configmap(name: str, owners: list[client.V1ConfigMap] | None = None) -> dict[str, Any]:
        refs = [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": o.metadata.name, "uid": o.metadata.uid}
            for o in owners or []
        ]
        return {"metadata": {"name": name, "ownerReferences": refs}, "data": {}}

    a = await cluster.core.create_namespaced_config_map(NS, configmap("a"))
    b = await cluster.core.create_namespaced_config_map(NS, configmap("b"))
    await cluster.core.create_namespaced_config_map(NS, configmap("shared", [a, b]))
    await cluster.core.create_namespaced_config_map(NS, configmap("only-a", [a]))
    await cluster.core.delete_namespaced_config_map("a", NS)

    await gone(lambda: cluster.core.read_namespaced_config_map("only-a", NS), "the dependent of a alone")

    async def trimmed() -> bool:
        shared = await cluster.core.read_namespaced_config_map("shared", NS)
        return [r.uid for r in shared.metadata.owner_references or []] == [b.metadata.uid]

    await wait_for(trimmed, message="the dead owner reference to be removed")


async def test_a_dependent_of_an_owner_that_never_existed_is_collected(cluster: Cluster) -> None:
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "ghost",
        "uid": "00000000-0000-4000-8000-000000000000",
    }
    await cluster.core.create_namespaced_config_map(
        NS, {"metadata": {"name": "haunted", "ownerReferences": [ref]}}
    )
    await gone(lambda: cluster.core.read_namespaced_config_map("haunted", NS), "the dangling dependent")


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
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


async def create_widget_crd(c: Cluster) -> None:
    await client.ApiextensionsV1Api(c.api).create_custom_resource_definition(CRD)

    async def established() -> bool:
        crd = await client.ApiextensionsV1Api(c.api).read_custom_resource_definition("widgets.example.com")
        return any(
            cond.type == "Established" and cond.status == "True" for cond in crd.status.conditions or []
        )

    await wait_for(established, message="the CRD to be established")


async def test_a_custom_resource_takes_its_deployment_with_it(cluster: Cluster) -> None:
    await create_widget_crd(cluster)
    widget = await cluster.custom.create_namespaced_custom_object(
        "example.com",
        "v1",
        NS,
        "widgets",
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2}},
    )
    owner = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "name": "w",
        "uid": widget["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    await cluster.apps.create_namespaced_deployment(NS, deployment("w", replicas=2, owner=owner))
    await rollout_done(cluster, "w", 2)

    await cluster.custom.delete_namespaced_custom_object("example.com", "v1", NS, "widgets", "w")
    await gone(lambda: cluster.apps.read_namespaced_deployment("w", NS), "the widget's deployment")

    async def collected() -> bool:
        return not await replicasets_of(cluster, "w") and not await pods_of(cluster, "w")

    await wait_for(collected, message="the widget's replicasets and pods to be collected")


# -- namespaces ------------------------------------------------------------------------------------


async def test_deleting_a_namespace_empties_it_then_removes_it(cluster: Cluster) -> None:
    await cluster.core.create_namespace({"metadata": {"name": "doomed"}})
    await cluster.apps.create_namespaced_deployment("doomed", deployment("web", replicas=2))
    await rollout_done(cluster, "web", 2, ns="doomed")
    await cluster.core.create_namespaced_config_map("doomed", {"metadata": {"name": "plain"}})
    await cluster.core.create_namespaced_config_map(
        "doomed", {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    )

    await cluster.core.delete_namespace("doomed")

    async def only_held_left() -> client.V1Namespace | None:
        ns = await cluster.core.read_namespace("doomed")
        remaining = condition(ns, "NamespaceFinalizersRemaining")
        if remaining is None or remaining.status != "True":
            return None
        return ns

    ns = await wait_for(only_held_left, message="the namespace to wait for the held configmap only")
    assert ns.status.phase == "Terminating"
    assert condition(ns, "NamespaceContentRemaining").message == (
        "Some resources are remaining: configmaps. has 1 resource instances"
    )
    assert condition(ns, "NamespaceFinalizersRemaining").message == (
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    )
    assert [c.metadata.name for c in (await cluster.core.list_namespaced_config_map("doomed")).items] == [
        "held"
    ]
    assert (await cluster.apps.list_namespaced_deployment("doomed")).items == []
    assert (await cluster.core.list_namespaced_pod("doomed")).items == []

    await cluster.core.patch_namespaced_config_map(
        "held", "doomed", {"metadata": {"finalizers": None}}, _content_type=MERGE
    )
    await gone(lambda: cluster.core.read_namespace("doomed"), "the namespace")


# -- pod readiness delay ---------------------------------------------------------------------------


async def test_pods_stay_pending_for_the_ready_delay() -> None:
    delay = 0.4
    server, api = await start_cluster(pod_ready_delay=delay)
    try:
        c = Cluster(server, api)
        started = time.monotonic()
        await c.apps.create_namespaced_deployment(NS, deployment("slow", replicas=1))

        async def acknowledged() -> client.V1Pod | None:
            pods = await pods_of(c, "slow")
            scheduled = condition(pods[0], "PodScheduled") if pods else None
            return pods[0] if scheduled is not None else None

        pod = await wait_for(acknowledged, message="the pod to be scheduled")
        assert pod.status.phase == "Pending"
        assert condition(pod, "Ready").status == "False"
        assert pod.status.pod_ip is None
        d = await c.apps.read_namespaced_deployment("slow", NS)
        assert not d.status.available_replicas
        assert condition(d, "Available").status == "False"

        await rollout_done(c, "slow", 1)
        assert time.monotonic() - started >= delay
        [pod] = await pods_of(c, "slow")
        assert pod.status.phase == "Running"
        assert pod.status.pod_ip
    finally:
        await api.close()
        await server.stop()
