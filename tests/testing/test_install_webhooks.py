"""memop.testing.install_webhooks: a project's webhooks registered as the installs register
them, but called on a loopback URL; uninstall takes them back."""

from __future__ import annotations

import base64

import pytest

from memop.builtin import PROJECT
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, Resource
from memop.testing import install_crds, install_webhooks
from memop.testing.tls import ServingCertificates

VALIDATING = Resource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration", namespaced=False,
)  # fmt: skip
MEMCACHED_CRD = "memcacheds.cache.example.com"


async def test_the_installs_webhooks_are_registered_on_loopback_and_taken_back(client: Client) -> None:
    await install_crds(client, PROJECT)
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


async def test_without_a_bundle_the_operator_is_left_to_set_it(client: Client) -> None:
    await install_crds(client, PROJECT)
    installed = await install_webhooks(client, PROJECT, "https://127.0.0.1:9999", controllers=["memcached"])
    configuration = await client.get(VALIDATING, "memop-validating-webhook-configuration")
    assert "caBundle" not in configuration["webhooks"][0]["clientConfig"]
    await installed.uninstall()
