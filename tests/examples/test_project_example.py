"""The Project example (examples/project): a cluster-scoped owner of a Namespace and of a
NetworkPolicy and a ServiceAccount in it."""

from __future__ import annotations

import uuid
from typing import Any

import project
import pytest
from waiting import gone, ready

from memop.runtime import NAMESPACES, NETWORK_POLICIES, SERVICE_ACCOUNTS, Client, Invalid
from memop.testing.plugin import InstallCrds, RunOperator

PROJECTS = project.Project.resource()


def sample(name: str, **spec: Any) -> dict[str, Any]:
    return {**project.SAMPLE, "metadata": {"name": name}, "spec": {"namespace": name, **spec}}


def test_the_validator_keeps_the_systems_namespaces_and_warns_of_missing_labels() -> None:
    with pytest.raises(ValueError, match="reserved for the system"):
        project.validate(project.Project.parse(sample("kube-system")), None)
    assert project.validate(project.Project.parse(sample("shop")), None) == [
        "spec.labels is empty: cost reports will not find this project"
    ]
    crd = project.Project.crd()
    assert crd["spec"]["scope"] == "Cluster"
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["namespace"]["x-kubernetes-validations"] == [
        {"message": "namespace is immutable", "rule": "self == oldSelf"}
    ]


async def test_a_project_gets_its_namespace_policy_and_service_account(
    client: Client, namespace: str, install_crds: InstallCrds, run_operator: RunOperator
) -> None:
    await install_crds(project.DEFINITION)
    name = f"{namespace}-project"  # cluster-scoped: named after the test's namespace, never shared
    async with run_operator(project.DEFINITION, rbac=True):
        await client.create(PROJECTS, sample(name, labels={"team": "a"}, allowFrom=[namespace]))
        try:
            got = await ready(client, PROJECTS, name)
            assert got["status"]["phase"] == "Active"
            assert (await client.get(NAMESPACES, name))["metadata"]["labels"]["team"] == "a"
            policy = await client.get(NETWORK_POLICIES, "deny-from-other-namespaces", name)
            assert policy["spec"]["policyTypes"] == ["Ingress"]
            assert policy["spec"]["ingress"] == [
                {
                    "from": [
                        {"podSelector": {}},
                        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}},
                    ]
                }
            ]
            account = await client.get(SERVICE_ACCOUNTS, "deployer", name)
            assert account["metadata"]["ownerReferences"][0]["uid"] == got["metadata"]["uid"]
        finally:
            await client.delete(PROJECTS, name)
        # The garbage collector deletes its Namespace with it, and the namespace's content.
        await gone(client, NAMESPACES, name)


async def test_the_api_server_calls_the_webhook_to_keep_the_systems_namespaces(
    client: Client, install_crds: InstallCrds, run_operator: RunOperator
) -> None:
    await install_crds(project.DEFINITION)
    async with run_operator(project.DEFINITION, webhooks=True):
        with pytest.raises(Invalid, match="'kube-system' is reserved for the system"):
            await client.create(
                PROJECTS, sample(f"memop-test-{uuid.uuid4().hex[:8]}", namespace="kube-system")
            )
