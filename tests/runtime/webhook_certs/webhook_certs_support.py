"""What the self-managed webhook certificate tests share: names, the policy, objects to install."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client import AdmissionregistrationV1Api, ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from memop.runtime.webhook.certs import CertificatePolicy
from memop.runtime.webhook.selfmanaged import SelfManagedCertificates
from memop.testing.apiserver.server import ApiServer

NAMESPACE = "memop-system"
SERVICE = "memop-webhook-service"
SECRET = "webhook-server-cert"
CRD_NAME = "widgets.example.com"
VALIDATING = "memop-validating-webhook-configuration"
MUTATING = "memop-mutating-webhook-configuration"
# Cheap to reason about: a 30-day CA, a 3-day serving certificate renewed with a day left, a
# new CA used for serving an hour after it entered the bundle.
DAY = 24 * 3600.0
POLICY = CertificatePolicy(ca_validity=30 * DAY, serving_validity=3 * DAY, backdate=600, ca_propagation=3600)
CHECK_INTERVAL = 30.0

# make(name, **overrides): an instance with its own client and cert dir (the conftest's fixture).
Make = Callable[..., SelfManagedCertificates]


def crd(ca_bundle: str | None = None, strategy: str = "Webhook") -> dict[str, Any]:
    """A CRD converting through the webhook Service (as the manifests generate it)."""
    conversion: dict[str, Any] = {"strategy": strategy}
    if strategy == "Webhook":
        client_config: dict[str, Any] = {
            "service": {"namespace": NAMESPACE, "name": SERVICE, "path": "/convert", "port": 443}
        }
        if ca_bundle is not None:
            client_config["caBundle"] = ca_bundle
        conversion["webhook"] = {"clientConfig": client_config, "conversionReviewVersions": ["v1"]}
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": schema},
                {"name": "v2", "served": True, "storage": False, "schema": schema},
            ],
            "conversion": conversion,
        },
    }


def webhook_configuration(kind: str, name: str, hooks: int = 2) -> dict[str, Any]:
    """A webhook configuration with ``hooks`` webhooks on the webhook Service, no caBundle."""
    webhooks = []
    for index in range(hooks):
        hook: dict[str, Any] = {
            "name": f"hook{index}.widgets.example.com",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "clientConfig": {"service": {"namespace": NAMESPACE, "name": SERVICE, "path": f"/hook{index}"}},
            "rules": [
                {
                    "apiGroups": ["example.com"],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["widgets"],
                }
            ],
        }
        webhooks.append(hook)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": webhooks,
    }


async def serves_webhook_configurations(apiserver: ApiServer) -> bool:
    """Whether the server's discovery lists admissionregistration.k8s.io/v1's webhook configurations."""
    async with ApiClient(apiserver.client_configuration()) as api:
        try:
            resources = await AdmissionregistrationV1Api(api).get_api_resources()
        except ApiException as error:
            if error.status == 404:
                return False
            raise
    names = {resource.name for resource in resources.resources or ()}
    return {"validatingwebhookconfigurations", "mutatingwebhookconfigurations"} <= names
