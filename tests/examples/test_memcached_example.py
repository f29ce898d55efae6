"""The Memcached operator in the declarative style (examples/memcached)."""

from __future__ import annotations

import memcached
from waiting import ready

from memop.runtime import DEPLOYMENTS, Client
from memop.testing.plugin import InstallCrds, RunOperator

MEMCACHEDS = memcached.Memcached.resource()


async def test_a_memcached_gets_a_deployment_at_its_size(
    client: Client, namespace: str, install_crds: InstallCrds, run_operator: RunOperator
) -> None:
    await install_crds(memcached.DEFINITION)
    async with run_operator(memcached.DEFINITION, namespaces=(namespace,), rbac=True):
        await client.create(MEMCACHEDS, memcached.SAMPLE, namespace)
        obj = await ready(client, MEMCACHEDS, "sample", namespace)
        assert obj["status"]["readyReplicas"] == 3
        deployment = await client.get(DEPLOYMENTS, "sample", namespace)
        assert deployment["spec"]["replicas"] == 3
