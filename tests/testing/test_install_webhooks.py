"""memop.testing.install_webhooks: a project's webhooks registered as the installs register
them, but called on a loopback URL; uninstall takes them back."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from memop import memcached
from memop.builtin import PROJECT
from memop.memcached import api
from memop.runtime.client.client import Client
from memop.runtime.client.errors import Invalid, NotFound
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, Resource
from memop.runtime.webhook.server import WebhookServerOptions
from memop.testing import InstallCrds, RunOperator, install_webhooks
from memop.testing.tls import ServingCertificates

VALIDATING = Resource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration", namespaced=False,
)  # fmt: skip
MEMCACHED_CRD = "memcacheds.cache.example.com"


async def test_the_installs_webhooks_are_registered_on_loopback_and_taken_back(
    client: Client, install_crds: InstallCrds
) -> None:
    await install_crds(PROJECT)
    ca = ServingCertificates.generate("memop-test-install-webhooks").ca_pem
    installed = await install_webhooks(
        client, PROJECT, "https://127.0.0.1:9999", ca, namespace_selector={"matchLabels": {"a": "b"}}
    )
    bundle = base64.b64encode(ca).decode()
    # The install's name: what --webhook-certs=self-managed keeps the caBundle of.
    configuration = await client.get(VALIDATING, "memop-validating-webhook-configuration")
    [webhook] = configuration["webhooks"]
    assert webhook["name"] == "vmemcached-v1alpha1.cache.example.com"
    assert webhook["clientConfig"] == {
        "url": "https://127.0.0.1:9999/validate-cache-example-com-v1alpha1-memcached",
        "caBundle": bundle,
    }
    assert webhook["namespaceSelector"] == {"matchLabels": {"a": "b"}}
    assert webhook["failurePolicy"] == "Fail"
    conversion = (await client.get(CUSTOM_RESOURCE_DEFINITIONS, MEMCACHED_CRD))["spec"]["conversion"]
    assert conversion == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {"url": "https://127.0.0.1:9999/convert", "caBundle": bundle},
            "conversionReviewVersions": ["v1"],
        },
    }
    # No mutating configuration: memop's controllers declare no defaulter.
    assert [resource.kind for resource, _ in installed.configurations] == ["ValidatingWebhookConfiguration"]

    await installed.uninstall()
    with pytest.raises(NotFound):
        await client.get(VALIDATING, "memop-validating-webhook-configuration")
    conversion = (await client.get(CUSTOM_RESOURCE_DEFINITIONS, MEMCACHED_CRD))["spec"]["conversion"]
    assert conversion == {"strategy": "None"}


async def test_without_a_bundle_the_operator_is_left_to_set_it(
    client: Client, install_crds: InstallCrds
) -> None:
    await install_crds(PROJECT)
    installed = await install_webhooks(client, PROJECT, "https://127.0.0.1:9999", controllers=["memcached"])
    configuration = await client.get(VALIDATING, "memop-validating-webhook-configuration")
    assert "caBundle" not in configuration["webhooks"][0]["clientConfig"]
    await installed.uninstall()
    # A name of the test's own, beside an install's.
    installed = await install_webhooks(client, PROJECT, "https://127.0.0.1:9999", name_prefix="t-")
    assert [name for _, name in installed.configurations] == ["t-validating-webhook-configuration"]
    await client.get(VALIDATING, "t-validating-webhook-configuration")
    await installed.uninstall()


async def test_an_operator_run_in_process_serves_its_webhooks_to_the_cluster(
    client: Client, namespace: str, install_crds: InstallCrds, run_operator: RunOperator, tmp_path: Path
) -> None:
    """run_operator(..., webhooks=...) and install_webhooks: a user's test of its validator and
    conversion through the API server, without a process or a real certificate authority."""
    certificates = ServingCertificates.generate("memop-test-in-process-webhooks")
    (tmp_path / "tls.crt").write_bytes(certificates.cert_pem)
    (tmp_path / "tls.key").write_bytes(certificates.key_pem)
    await install_crds(PROJECT)
    options = WebhookServerOptions(host="127.0.0.1", port=0, cert_dir=tmp_path)
    async with run_operator(memcached.DEFINITION, namespaces=[namespace], webhooks=options) as operator:
        installed = await install_webhooks(
            client,
            PROJECT,
            operator.webhook_url,
            certificates.ca_pem,
            namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            controllers=["memcached"],
        )
        try:
            greedy = {
                "apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": "greedy"},
                "spec": {"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}},
            }  # fmt: skip
            with pytest.raises(Invalid, match="denied the request"):
                await client.create(api.MEMCACHEDS, greedy, namespace)
            ported = {
                "apiVersion": api.API_VERSION_V1BETA1, "kind": api.KIND, "metadata": {"name": "ported"},
                "spec": {"containerPort": 11311},
            }  # fmt: skip
            await client.create(api.MEMCACHEDS_V1BETA1, ported, namespace)
            stored = await client.get(api.MEMCACHEDS, "ported", namespace)
            assert stored["metadata"]["annotations"][api.CONTAINER_PORT_ANNOTATION] == "11311"
        finally:
            await installed.uninstall()


async def test_run_operator_with_webhooks_true_registers_its_own_and_takes_them_back(
    client: Client, namespace: str, install_crds: InstallCrds, run_operator: RunOperator
) -> None:
    """webhooks=True: a certificate, a loopback port and registrations of the test's own,
    judging the test's namespaces only, gone once the operator stops."""
    await install_crds(PROJECT)

    async def ours() -> list[dict[str, Any]]:
        listed = await client.list(VALIDATING)
        return [c for c in listed["items"] if c["metadata"]["name"].startswith("memop-test-")]

    async with run_operator(memcached.DEFINITION, namespaces=[namespace], webhooks=True) as operator:
        [configuration] = await ours()
        [webhook] = configuration["webhooks"]
        assert webhook["clientConfig"]["url"].startswith(operator.webhook_url)
        within = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}
        assert webhook["namespaceSelector"] == {"matchExpressions": [within]}
        greedy = {
            "apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": "greedy"},
            "spec": {"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}},
        }  # fmt: skip
        with pytest.raises(Invalid, match="denied the request"):
            await client.create(api.MEMCACHEDS, greedy, namespace)
    assert await ours() == []
    conversion = (await client.get(CUSTOM_RESOURCE_DEFINITIONS, MEMCACHED_CRD))["spec"]["conversion"]
    assert conversion == {"strategy": "None"}
