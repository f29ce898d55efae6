"""The WebApp example (examples/webapp): four children, readiness, drift repair, its webhook."""

from __future__ import annotations

from typing import Any

import pytest
import webapp
from waiting import ready

from memop.runtime import (
    DEPLOYMENTS,
    INGRESSES,
    POD_DISRUPTION_BUDGETS,
    SERVICES,
    Client,
    Invalid,
    InvalidObject,
)
from memop.testing import wait_for
from memop.testing.plugin import InstallCrds, RunOperator

WEBAPPS = webapp.WebApp.resource()


def sample(name: str = "hello", **spec: Any) -> dict[str, Any]:
    return {**webapp.SAMPLE, "metadata": {"name": name}, "spec": {**webapp.SAMPLE["spec"], **spec}}


def test_the_spec_is_typed_and_validated_by_its_one_definition() -> None:
    app = webapp.WebApp.parse({**sample(memory="0.5Gi"), "metadata": {"name": "a", "namespace": "n"}})
    assert app.spec.memory == webapp.Quantity("512Mi")
    assert (app.spec.replicas, app.spec.port) == (2, 8080)
    with pytest.raises(InvalidObject, match=r"spec.replicas: Invalid value: 0"):
        webapp.WebApp.parse(sample(replicas=0))
    schema = webapp.WebApp.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert schema["properties"]["replicas"] == {
        "default": 2, "description": "How many pods serve it.", "format": "int64",
        "maximum": 100, "minimum": 1, "type": "integer",
    }  # fmt: skip
    assert schema["required"] == ["image"]


def test_the_validator_refuses_a_budget_that_blocks_every_drain_and_warns_of_a_moving_tag() -> None:
    with pytest.raises(ValueError, match="no pod could ever be evicted"):
        webapp.validate(webapp.WebApp.parse(sample(minAvailable=2)), None)
    assert webapp.validate(webapp.WebApp.parse(sample(image="nginx")), None) == [
        "spec.image 'nginx' has no fixed tag: pods may run different versions"
    ]


async def test_a_webapp_gets_its_children_becomes_ready_and_is_repaired(
    client: Client, namespace: str, install_crds: InstallCrds, run_operator: RunOperator
) -> None:
    await install_crds(webapp.DEFINITION)
    async with run_operator(webapp.DEFINITION, namespaces=(namespace,), rbac=True):
        await client.create(WEBAPPS, sample(), namespace)
        app = await ready(client, WEBAPPS, "hello", namespace)
        assert app["status"]["availableReplicas"] == 2
        for resource in (DEPLOYMENTS, SERVICES, INGRESSES, POD_DISRUPTION_BUDGETS):
            child = await client.get(resource, "hello", namespace)
            [owner] = child["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["uid"], owner["controller"]) == (
                "WebApp",
                app["metadata"]["uid"],
                True,
            )
        ingress = await client.get(INGRESSES, "hello", namespace)
        assert ingress["spec"]["rules"][0]["host"] == "hello.example.com"

        # Scaled behind the operator's back: put back.
        await client.patch(DEPLOYMENTS, "hello", {"spec": {"replicas": 5}}, namespace)

        async def replicas_back() -> bool:
            return (await client.get(DEPLOYMENTS, "hello", namespace))["spec"]["replicas"] == 2

        await wait_for(replicas_back, timeout=60, message="the Deployment's replicas are not back at 2")

        # The host dropped from the spec: the Ingress routes every host.
        await client.patch(WEBAPPS, "hello", {"spec": {"host": None}}, namespace)

        async def no_host() -> bool:
            return "host" not in (await client.get(INGRESSES, "hello", namespace))["spec"]["rules"][0]

        await wait_for(no_host, timeout=60, message="the Ingress still names a host")
        await ready(client, WEBAPPS, "hello", namespace)


async def test_the_api_server_calls_the_webhook_to_refuse_and_to_warn(
    client: Client, namespace: str, install_crds: InstallCrds, run_operator: RunOperator
) -> None:
    await install_crds(webapp.DEFINITION)
    async with run_operator(webapp.DEFINITION, namespaces=(namespace,), webhooks=True):
        with pytest.raises(Invalid, match="no pod could ever be evicted") as refused:
            await client.create(WEBAPPS, sample("blocked", minAvailable=2), namespace)
        assert 'admission webhook "vwebapp-v1.apps.example.com" denied the request' in str(refused.value)
        created = await client.create(WEBAPPS, sample("moving", image="nginx"), namespace)
        assert created["metadata"]["name"] == "moving"
        # The schema itself refuses what the type refuses: the webhook never sees it.
        with pytest.raises(Invalid, match=r"spec\.replicas"):
            await client.create(WEBAPPS, sample("none", replicas=0), namespace)
