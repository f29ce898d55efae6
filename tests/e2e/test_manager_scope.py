"""Namespace scope of the real process: --watch-namespace / WATCH_NAMESPACE, and all namespaces.

memop runs as a subprocess against the in-memory API server; the server's request log shows
exactly where it looked and what it wrote.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import DEPLOYMENTS, NAMESPACES
from memop.testing.apiserver.server import ApiServer
from memop.testing.envtest import Kube
from memop.testing.memcached import available, memcached_manifest
from memop.testing.process import MemopProcess, MemopProcesses
from memop.testing.wait import wait_for

TIMEOUT = 30
WRITES = ("create", "update", "patch", "delete", "deletecollection")


async def new_namespaces(client: Client, count: int) -> list[str]:
    prefix = f"scope-{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        await client.create(NAMESPACES, {"metadata": {"name": name}})
    return names


async def assert_untouched(client: Client, namespace: str, name: str) -> None:
    cr = await client.get(MEMCACHEDS, name, namespace)
    assert not cr["metadata"].get("finalizers"), cr["metadata"]
    assert not cr.get("status"), cr["status"]
    with pytest.raises(NotFound):
        await client.get(DEPLOYMENTS, name, namespace)


async def assert_scoped_to(
    server: ApiServer, client: Client, memop: MemopProcess, watched: Sequence[str], outside: str
) -> None:
    """CRs in ``watched`` converge, including one created while running; ``outside`` is never
    read, watched or written, by any request of memop's."""
    await memop.wait_ready(TIMEOUT)
    for namespace in watched:
        await wait_for(lambda ns=namespace: available(client, ns, "cache"), timeout=TIMEOUT)  # type: ignore[misc]
    # Created while memop runs: the one outside must stay untouched while the one inside,
    # created after it, is reconciled.
    await client.create(MEMCACHEDS, memcached_manifest("later"), outside)
    await client.create(MEMCACHEDS, memcached_manifest("later"), watched[0])
    await wait_for(lambda: available(client, watched[0], "later"), timeout=TIMEOUT)
    for name in ("cache", "later"):
        await assert_untouched(client, outside, name)
    agent = memop.user_agent()
    assert agent is not None
    requests = server.log.filter(user_agent=agent)
    assert requests
    elsewhere = [(r.verb, r.resource, r.namespace) for r in requests if r.namespace not in watched]
    assert not elsewhere, f"requests outside {watched}: {elsewhere}"
    writes = {(r.namespace, r.resource) for r in requests if r.verb in WRITES}
    assert {ns for ns, _ in writes} == set(watched)
    # Watched namespace by namespace: a list and a watch of each resource in each one.
    for namespace in watched:
        for resource in ("memcacheds", "deployments", "pods"):
            assert server.log.count(verb="watch", resource=resource, namespace=namespace, user_agent=agent)


async def test_watch_namespace_flag_reconciles_only_those_namespaces(
    kube: Kube, client: Client, memops: MemopProcesses
) -> None:
    ns1, ns2, ns3 = await new_namespaces(client, 3)
    for namespace in (ns1, ns2, ns3):
        await client.create(MEMCACHEDS, memcached_manifest("cache"), namespace)
    memop = await memops.start("--watch-namespace", f"{ns1},{ns2},{ns1}")
    await assert_scoped_to(kube.fake, client, memop, [ns1, ns2], ns3)
    starting = await memop.wait_log(lambda r: r.get("msg", "").startswith("starting memop"))
    assert starting["namespaces"] == f"{ns1},{ns2}"  # the duplicate folded


async def test_watch_namespace_variable_reconciles_only_those_namespaces(
    kube: Kube, client: Client, memops: MemopProcesses
) -> None:
    ns1, ns2, ns3 = await new_namespaces(client, 3)
    for namespace in (ns1, ns2, ns3):
        await client.create(MEMCACHEDS, memcached_manifest("cache"), namespace)
    memop = await memops.start(env={"WATCH_NAMESPACE": f" {ns2} ,{ns1},"})
    await assert_scoped_to(kube.fake, client, memop, [ns2, ns1], ns3)


async def test_the_flag_wins_over_the_variable(kube: Kube, client: Client, memops: MemopProcesses) -> None:
    ns1, ns2 = await new_namespaces(client, 2)
    for namespace in (ns1, ns2):
        await client.create(MEMCACHEDS, memcached_manifest("cache"), namespace)
    memop = await memops.start("--watch-namespace", ns1, env={"WATCH_NAMESPACE": ns2})
    await assert_scoped_to(kube.fake, client, memop, [ns1], ns2)


@pytest.mark.parametrize(
    ("args", "env"),
    [((), {}), ((), {"WATCH_NAMESPACE": ""}), (("--watch-namespace=",), {"WATCH_NAMESPACE": "x"})],
)
async def test_an_empty_scope_means_every_namespace(
    kube: Kube, client: Client, memops: MemopProcesses, args: tuple[str, ...], env: dict[str, str]
) -> None:
    server = kube.fake
    namespaces = await new_namespaces(client, 3)
    for namespace in namespaces:
        await client.create(MEMCACHEDS, memcached_manifest("cache"), namespace)
    memop = await memops.start(*args, env=env)
    await memop.wait_ready(TIMEOUT)
    late = (await new_namespaces(client, 1))[0]  # a namespace created after memop started
    await client.create(MEMCACHEDS, memcached_manifest("cache"), late)
    for namespace in [*namespaces, late]:
        await wait_for(lambda ns=namespace: available(client, ns, "cache"), timeout=TIMEOUT)  # type: ignore[misc]
    agent = memop.user_agent()
    assert agent is not None
    # One cluster-wide watch per resource, none per namespace.
    for resource in ("memcacheds", "deployments", "pods"):
        watches = server.log.filter(verb="watch", resource=resource, user_agent=agent)
        assert watches
        assert {w.namespace for w in watches} == {""}
    starting = await memop.wait_log(lambda r: r.get("msg", "").startswith("starting memop"))
    assert starting["namespaces"] == "<all>"
