"""``manifests/webhook``: the webhook configurations, the Service and the CRD conversion
stanzas, made from the controllers' declarations (:attr:`ControllerDefinition.webhooks
<memop.runtime.controller.definition.ControllerDefinition>` and ``.conversions``).

One webhook per declaration and side, named and served at the paths of
:mod:`memop.runtime.webhook.declarations` (Kubebuilder's): a defaulter goes into the
``MutatingWebhookConfiguration`` (CREATE and UPDATE of the declared operations: a DELETE has no
object to default), a validator into the ``ValidatingWebhookConfiguration`` (every declared
operation). A configuration with no webhook is not written; a project that declares nothing gets
no ``webhook/`` at all (:func:`serves_webhooks`).

``webhook/`` is a kustomize Component, not an install: the installs that serve webhooks list it
(and :mod:`memop.manifests.certmanager`'s certificates) under ``components``, so its objects get
the install's namePrefix and namespace, and its patches reach the base objects:

- ``manifests.yaml``: the two configurations, each webhook's ``clientConfig.service`` the Service
  below in the install's namespace (kustomize rewrites the name and namespace);
- ``service.yaml``: port 443 to the manager pods' ``webhook-server`` port (9443);
- ``manager_webhook_patch.yaml``: that container port on the manager;
- ``webhook_in_<plural>.yaml``: ``spec.conversion`` (strategy Webhook, ``/convert`` on the
  Service, ConversionReview v1) for each CRD a Conversion declares, as Kubebuilder's
  ``config/crd/patches``: the base CRD of ``manifests/crd`` keeps no conversion stanza, so it
  installs alone and the OLM bundle (whose conversion OLM writes itself) carries it unchanged;
- ``kustomizeconfig.yaml``: teaches kustomize that the conversion stanza names the Service (it
  knows the webhook configurations' references already).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memop.manifests.manager import manager_container_patch, pod_selector
from memop.manifests.target import Target, header, to_yaml
from memop.runtime.webhook.declarations import CONVERSION_PATH, AdmissionWebhook, Conversion

ADMISSION_API_VERSION = "admissionregistration.k8s.io/v1"
# The base names (before the installs' namePrefix), Kubebuilder's.
SERVICE = "webhook-service"
VALIDATING_CONFIGURATION = "validating-webhook-configuration"
MUTATING_CONFIGURATION = "mutating-webhook-configuration"
# The manager's webhook server (--webhook-port) and the Service's port in front of it.
WEBHOOK_PORT = 9443
WEBHOOK_PORT_NAME = "webhook-server"
SERVICE_PORT = 443
# Where the server reads tls.crt and tls.key (--webhook-cert-dir's default, controller-runtime's,
# and where OLM mounts the certificates it makes).
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
REVIEW_VERSIONS = ("v1",)
# A mutating webhook's operations among the declared ones.
_MUTATING_OPERATIONS = ("CREATE", "UPDATE")


def admission_webhooks(target: Target) -> list[AdmissionWebhook]:
    """Every controller's admission webhook declarations, in controller order."""
    return [hook for definition in target.project.controllers for hook in definition.webhooks]


def conversions(target: Target) -> list[Conversion]:
    """Every controller's conversion declarations, in controller order."""
    return [conversion for definition in target.project.controllers for conversion in definition.conversions]


def serves_webhooks(target: Target) -> bool:
    """Whether the project's manager serves webhooks: any admission or conversion declared."""
    return bool(admission_webhooks(target) or conversions(target))


def crd_name(conversion: Conversion) -> str:
    """The name of the CRD a Conversion converts: ``<plural>.<group>``."""
    return f"{conversion.plural}.{conversion.group}"


def mutating_operations(hook: AdmissionWebhook) -> list[str]:
    """The operations the defaulter of ``hook`` is called for: the declared CREATE and UPDATE."""
    return [operation for operation in hook.operations if operation in _MUTATING_OPERATIONS]


def rules(hook: AdmissionWebhook, operations: Iterable[str]) -> list[dict[str, Any]]:
    """The admission rules of one webhook: its kind's plural, group, version and scope."""
    return [
        {
            "apiGroups": [hook.group],
            "apiVersions": [hook.version],
            "operations": list(operations),
            "resources": [hook.plural],
            "scope": "Namespaced" if hook.namespaced else "Cluster",
        }
    ]


def _webhook(
    target: Target, hook: AdmissionWebhook, name: str, path: str, operations: list[str]
) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": list(REVIEW_VERSIONS),
        "clientConfig": {"service": {"name": SERVICE, "namespace": target.namespace, "path": path}},
        "rules": rules(hook, operations),
        "failurePolicy": hook.failure_policy,
        "matchPolicy": hook.match_policy,
        "sideEffects": hook.side_effects,
        "timeoutSeconds": hook.timeout_seconds,
    }


def mutating_webhooks(target: Target) -> list[dict[str, Any]]:
    """The MutatingWebhookConfiguration's webhooks: one per declared defaulter."""
    return [
        _webhook(target, hook, hook.mutating_name, hook.mutating_path, mutating_operations(hook))
        for hook in admission_webhooks(target)
        if hook.defaulter is not None and mutating_operations(hook)
    ]


def validating_webhooks(target: Target) -> list[dict[str, Any]]:
    """The ValidatingWebhookConfiguration's webhooks: one per declared validator."""
    return [
        _webhook(target, hook, hook.validating_name, hook.validating_path, list(hook.operations))
        for hook in admission_webhooks(target)
        if hook.validator is not None
    ]


def configurations(target: Target) -> list[dict[str, Any]]:
    """The Mutating and ValidatingWebhookConfiguration (base names), each only when it has a
    webhook."""
    found = []
    for kind, name, webhooks in (
        ("MutatingWebhookConfiguration", MUTATING_CONFIGURATION, mutating_webhooks(target)),
        ("ValidatingWebhookConfiguration", VALIDATING_CONFIGURATION, validating_webhooks(target)),
    ):
        if webhooks:
            found.append(
                {
                    "apiVersion": ADMISSION_API_VERSION,
                    "kind": kind,
                    "metadata": {"name": name, "labels": target.labels},
                    "webhooks": webhooks,
                }
            )
    return found


# The label every namespace carries with its own name (kube-apiserver sets it, v1.22+).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def namespace_selector_patches(
    target: Target, namespaces: Iterable[str], prefix: str = ""
) -> list[dict[str, Any]]:
    """Strategic-merge patches giving each admission webhook a ``namespaceSelector`` of the
    watched ``namespaces``, for the namespaced installs: without it the webhooks are called for
    every namespace's objects, and with ``failurePolicy: Fail`` an operator that is down blocks
    writes in namespaces it was never given. ``prefix`` is the configurations' namePrefix where
    the patch applies after it (an overlay of an install). The webhooks merge by name."""
    selector = {
        "matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(namespaces)}]
    }
    return [
        {
            "apiVersion": configuration["apiVersion"],
            "kind": configuration["kind"],
            "metadata": {"name": prefix + configuration["metadata"]["name"]},
            "webhooks": [
                {"name": hook["name"], "namespaceSelector": selector} for hook in configuration["webhooks"]
            ],
        }
        for configuration in configurations(target)
    ]


def webhook_service(target: Target) -> dict[str, Any]:
    """The Service the API server calls: 443 to every manager replica's webhook port."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": SERVICE,
            "namespace": target.namespace,
            "labels": {**target.labels, "app.kubernetes.io/component": "webhook"},
        },
        "spec": {
            "selector": pod_selector(target),
            "ports": [{"name": "https", "port": SERVICE_PORT, "targetPort": WEBHOOK_PORT, "protocol": "TCP"}],
        },
    }


def conversion_stanza(namespace: str, service: str = SERVICE) -> dict[str, Any]:
    """A CRD's ``spec.conversion`` calling ``/convert`` on ``service`` in ``namespace``."""
    return {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {"service": {"name": service, "namespace": namespace, "path": CONVERSION_PATH}},
            "conversionReviewVersions": list(REVIEW_VERSIONS),
        },
    }


def conversion_patch(target: Target, conversion: Conversion) -> dict[str, Any]:
    """The strategic-merge patch giving the CRD of ``conversion`` its conversion stanza."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name(conversion)},
        "spec": {"conversion": conversion_stanza(target.namespace)},
    }


def conversion_patch_file(conversion: Conversion) -> str:
    """Kubebuilder's name for a CRD's conversion patch: ``webhook_in_<plural>.yaml``."""
    return f"webhook_in_{conversion.plural}.yaml"


def _declared(target: Target) -> list[str]:
    """Who declares what, one line each (for the headers)."""
    lines = []
    for definition in target.project.controllers:
        for hook in definition.webhooks:
            sides = [
                side
                for side, present in (("defaulter", hook.defaulter), ("validator", hook.validator))
                if present is not None
            ]
            lines.append(
                f"  {definition.name}: {' and '.join(sides)} of {hook.kind} {hook.group}/{hook.version}"
                f" ({', '.join(hook.operations)})"
            )
        for conversion in definition.conversions:
            lines.append(
                f"  {definition.name}: conversion of {conversion.kind} {conversion.group}, hub"
                f" {conversion.hub}, spokes {', '.join(conversion.spokes)}"
            )
    return lines


def _kustomization(target: Target) -> str:
    patches = "".join(f"- path: {conversion_patch_file(c)}\n" for c in conversions(target))
    return (
        header(
            target,
            f"{target.name}'s webhooks, a kustomize Component that the installs list under components"
            " (with ../certmanager, or the self-managed certificates of manifests/webhook-self-managed):"
            " the webhook configurations, the Service in front of every manager replica's webhook server"
            f" (port {SERVICE_PORT} to {WEBHOOK_PORT}), that container port, and the conversion stanza of"
            " each converted CRD. Made from the controllers' declarations:",
            *_declared(target),
        )
        + "apiVersion: kustomize.config.k8s.io/v1alpha1\n"
        "kind: Component\n"
        "resources:\n" + ("- manifests.yaml\n" if configurations(target) else "") + "- service.yaml\n"
        "patches:\n"
        "- path: manager_webhook_patch.yaml\n"
        + (
            ("# spec.conversion of each CRD whose versions convert through the webhook.\n" + patches)
            if patches
            else ""
        )
        + "configurations:\n"
        "# kustomize renames the Service in the webhook configurations itself; this, in the CRDs.\n"
        "- kustomizeconfig.yaml\n"
    )


def _kustomizeconfig(target: Target) -> str:
    return header(
        target,
        "The Service's name in a CRD's conversion stanza, for kustomize's namePrefix (Kubebuilder's"
        " config/crd/kustomizeconfig.yaml).",
    ) + (
        "nameReference:\n"
        "- kind: Service\n"
        "  version: v1\n"
        "  fieldSpecs:\n"
        "  - kind: CustomResourceDefinition\n"
        "    version: v1\n"
        "    group: apiextensions.k8s.io\n"
        "    path: spec/conversion/webhook/clientConfig/service/name\n"
    )


def _manager_patch(target: Target) -> str:
    return (
        header(
            target,
            f"Every manager replica serves the webhooks on {WEBHOOK_PORT} (--webhook-port), leader or not:"
            " the Service sends each call to any ready replica.",
        )
        + manager_container_patch(target)
        + (
            "        ports:\n"
            f"        - name: {WEBHOOK_PORT_NAME}\n"
            f"          containerPort: {WEBHOOK_PORT}\n"
            "          protocol: TCP\n"
        )
    )


def webhook_files(target: Target) -> dict[str, str]:
    """``manifests/webhook/``: path under ``manifests/`` -> text; nothing when the project
    declares no webhook."""
    if not serves_webhooks(target):
        return {}
    files: dict[str, str] = {"webhook/kustomization.yaml": _kustomization(target)}
    if configurations(target):
        files["webhook/manifests.yaml"] = to_yaml(
            configurations(target),
            header(
                target,
                "The webhook configurations: one webhook per declared defaulter (mutating) and validator"
                " (validating), called through the webhook Service. Their caBundle is written by"
                " cert-manager (../certmanager) or by the operator itself (--webhook-certs self-managed).",
                *_declared(target),
            ),
        )
    files["webhook/service.yaml"] = to_yaml(
        [webhook_service(target)],
        header(
            target,
            f"The webhook Service: the API server calls {SERVICE_PORT}, which reaches the webhook server"
            f" ({WEBHOOK_PORT}) of every ready manager replica.",
        ),
    )
    files["webhook/manager_webhook_patch.yaml"] = _manager_patch(target)
    files["webhook/kustomizeconfig.yaml"] = _kustomizeconfig(target)
    for conversion in conversions(target):
        files[f"webhook/{conversion_patch_file(conversion)}"] = to_yaml(
            [conversion_patch(target, conversion)],
            header(
                target,
                f"{conversion.kind}'s versions ({', '.join(conversion.versions)}) convert through the"
                f" webhook ({CONVERSION_PATH}), hub {conversion.hub}: the base CRD in ../crd keeps no"
                " conversion stanza, as Kubebuilder's config/crd/patches.",
            ),
        )
    return files
