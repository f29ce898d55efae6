"""memop's RBAC is exactly what it uses: every request it sends is granted, every grant is used.

A scenario drives every code path that talks to the API (create, scale, drift, selector
recreate, repeated Events, delete with the finalizer, leader election), and the in-memory
server's request log gives the (group, resource, verb) triples memop really sent.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import ApiClient

from memop.builtin import PROJECT
from memop.manifests import rbac
from memop.memcached.api import MEMCACHEDS
from memop.mypod.api import MYPODS
from memop.podset.api import PODSETS
from memop.podset.desired import INSTANCE_LABEL as PODSET_LABEL
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import DEPLOYMENTS, NAMESPACES, PODS
from memop.runtime.leaderelection.lease import LeaderElectionConfig
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import RunningOperator, install_crd
from memop.testing.wait import wait_for

OPERATOR_NAMESPACE = "memop-system"
TIMEOUT = 30


async def _scenario(server: ApiServer, watch: list[str]) -> set[tuple[str, str, str, str]]:
    """Run memop through everything it does; the (group, resource, verb, namespace) it sent."""
    async with ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="rbac-test")
        await install_crd(client)
        for ns in (OPERATOR_NAMESPACE, "apps-a"):
            await client.create(NAMESPACES, {"metadata": {"name": ns}})
        election = LeaderElectionConfig(
            lease_name="memop-leader", namespace=OPERATOR_NAMESPACE, identity="rbac-test",
            # Renewed every 0.2 s (a renewal's verbs are among what is counted); the deadline
            # is one a loaded 2-core machine keeps, since losing the lease would end the run.
            lease_duration=6, renew_deadline=5, retry_period=0.2,
        )  # fmt: skip
        running = RunningOperator(
            server.client_configuration(),
            namespaces=watch,
            leader_election=election,
            controllers=PROJECT,
        )
        await running.start()
        try:
            await wait_for(running.manager.leading.is_set, timeout=TIMEOUT)
            ns = "apps-a"
            # A Deployment of the CR's name with a foreign selector, controlled by the CR:
            # memop must delete and recreate it (the selector is immutable).
            await client.create(MEMCACHEDS, {"metadata": {"name": "m"}, "spec": {"size": 1}}, ns)

            async def ready(size: int) -> bool:
                current = await client.get(MEMCACHEDS, "m", ns)
                status = current.get("status") or {}
                return (
                    status.get("readyReplicas") == size
                    and status.get("observedGeneration") == current["metadata"]["generation"]
                )

            await wait_for(lambda: ready(1), timeout=TIMEOUT)
            deployment = await client.get(DEPLOYMENTS, "m", ns)
            await client.delete(DEPLOYMENTS, "m", ns)
            foreign = {
                "metadata": {"name": "m", "ownerReferences": deployment["metadata"]["ownerReferences"]},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"stale": "selector"}},
                    "template": {
                        "metadata": {"labels": {"stale": "selector"}},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                    },
                },
            }
            await client.create(DEPLOYMENTS, foreign, ns)

            async def recreated() -> bool:
                try:
                    current = await client.get(DEPLOYMENTS, "m", ns)
                except NotFound:
                    return False
                return "stale" not in current["spec"]["selector"].get("matchLabels", {})

            await wait_for(recreated, timeout=TIMEOUT)
            for size in (2, 1, 2):  # "Scaled from 1 to 2" twice: the repeat bumps the Event's count
                await client.patch(MEMCACHEDS, "m", {"spec": {"size": size}}, ns)
                await wait_for(lambda size=size: ready(size), timeout=TIMEOUT)  # type: ignore[misc]
            await wait_for(
                lambda: server.log.count(verb="patch", resource="events", user_agent=running.user_agent)
            )
            await client.delete(MEMCACHEDS, "m", ns)

            async def gone() -> bool:
                try:
                    await client.get(MEMCACHEDS, "m", ns)
                except NotFound:
                    return True
                return False

            await wait_for(gone, timeout=TIMEOUT)
            await _pod_controllers(client, ns)
        finally:
            await running.stop()
        return {
            (r.group, rbac.rbac_resource(r.resource, r.subresource), r.verb, r.namespace)
            for r in server.log.filter(user_agent=running.user_agent)
        }


async def _pod_controllers(client: Client, ns: str) -> None:
    """The PodSet and MyPod controllers' paths: create pods, scale down, replace a pod."""
    await client.create(PODSETS, {"metadata": {"name": "ps"}, "spec": {"replicas": 2}}, ns)

    async def pods(selector: str, count: int) -> bool:
        listed, _ = await client.list_all(PODS, ns, label_selector=selector)
        live = [p for p in listed if not p["metadata"].get("deletionTimestamp")]
        return len(live) == count

    await wait_for(lambda: pods(f"{PODSET_LABEL}=ps", 2), timeout=TIMEOUT)
    await client.patch(PODSETS, "ps", {"spec": {"replicas": 1}}, ns)
    await wait_for(lambda: pods(f"{PODSET_LABEL}=ps", 1), timeout=TIMEOUT)
    spec = {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    await client.create(MYPODS, {"metadata": {"name": "mp"}, "spec": {"podSpec": spec}}, ns)
    first = await wait_for(lambda: _mypod_pod(client, ns), timeout=TIMEOUT)
    spec = {"containers": [{"name": "main", "image": "busybox:1.37"}]}
    await client.patch(MYPODS, "mp", {"spec": {"podSpec": spec, "podLabels": {"tier": "x"}}}, ns)

    async def replaced() -> bool:
        pod = await _mypod_pod(client, ns)
        return pod is not None and pod["metadata"]["uid"] != first["metadata"]["uid"]

    await wait_for(replaced, timeout=TIMEOUT)


async def _mypod_pod(client: Client, ns: str) -> dict[str, Any] | None:
    try:
        pod = await client.get(PODS, "mp", ns)
    except NotFound:
        return None
    return None if pod["metadata"].get("deletionTimestamp") else pod


async def test_cluster_wide_install_grants_exactly_what_memop_uses() -> None:
    async with ApiServer(simulate_controllers=True, pod_ready_delay=0.02) as server:
        sent = await _scenario(server, watch=[])
    denied = {
        s for s in sent if not rbac.allowed(s[0], s[1], s[2], s[3], operator_namespace=OPERATOR_NAMESPACE)
    }
    assert not denied, f"memop sent requests its RBAC does not grant: {sorted(denied)}"
    used = {s[:3] for s in sent}
    unused = rbac.requested_triples() - used
    assert not unused, f"RBAC grants permissions memop never used: {sorted(unused)}"


async def test_namespaced_install_grants_what_memop_uses_in_its_namespaces() -> None:
    async with ApiServer(simulate_controllers=True, pod_ready_delay=0.02) as server:
        sent = await _scenario(server, watch=["apps-a"])
    denied = {
        s
        for s in sent
        if not rbac.allowed(
            s[0], s[1], s[2], s[3], operator_namespace=OPERATOR_NAMESPACE, watch_namespaces=["apps-a"]
        )
    }
    assert not denied, f"memop sent requests the namespaced RBAC does not grant: {sorted(denied)}"
