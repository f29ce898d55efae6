"""The webhook server's certificates, both ways a cluster gives them: ``manifests/certmanager``
(cert-manager, what the installs use) and ``manifests/webhook-self-managed`` (memop makes its
own, for clusters without cert-manager).

``certmanager/`` is a kustomize Component, listed with ``../webhook`` by every install of a
project that serves webhooks (Kubebuilder's ``config/certmanager`` and the CA-injection
replacements of its ``config/default``):

- a self-signed ``Issuer`` and a ``Certificate`` for the webhook Service's DNS names
  (``<service>.<namespace>.svc`` and ``.svc.cluster.local``), stored in the Secret
  ``<project>-webhook-server-cert``;
- ``cert-manager.io/inject-ca-from: <namespace>/<project>-serving-cert`` on the webhook
  configurations and the converted CRDs, so cert-manager's CA injector writes their caBundle;
- the Secret mounted read-only at the webhook server's certificate directory
  (:data:`~memop.manifests.webhooks.CERT_DIR`), where the server reloads it when cert-manager
  renews it.

The DNS names and the annotations hold final names (after the install's namePrefix, in its
namespace), computed here rather than by kustomize replacements: a Component's replacements run
before the install's namePrefix, so they would see the base names. ``memop manifests`` writes them
again when the project's name or namespace changes.

``webhook-self-managed/`` is the cluster-wide install (as ``default``) whose operator runs with
``--webhook-certs=self-managed``: it makes a CA and a serving certificate in the Secret itself,
writes the caBundle of its webhook configurations and CRDs, and renews them; its certificate
directory is an emptyDir. It needs what :func:`webhook_certs_rules` grants (the rules of
:mod:`memop.runtime.webhook.selfmanaged`, which sends the requests): the Secret in its namespace,
and its own webhook configurations and converted CRDs, by name.
"""

from __future__ import annotations

from typing import Any

from memop.manifests import rbac, webhooks
from memop.manifests.manager import manager_container_patch, scalar
from memop.manifests.target import DEPLOYMENT, Target, header, to_yaml
from memop.manifests.webhooks import CERT_DIR, SERVICE
from memop.runtime.api.permissions import Rule, Scope
from memop.runtime.webhook.selfmanaged import self_managed_certificate_rules

CERT_MANAGER_API_VERSION = "cert-manager.io/v1"
# Base names (Kubebuilder's), before the installs' namePrefix.
ISSUER = "selfsigned-issuer"
CERTIFICATE = "serving-cert"
SECRET = "webhook-server-cert"
CERTS_VOLUME = "webhook-certs"
INJECT_CA_FROM = "cert-manager.io/inject-ca-from"
SELF_MANAGED = "webhook-self-managed"
WEBHOOK_CERTS_ROLE = "webhook-certs-role"
WEBHOOK_CERTS_ROLE_BINDING = "webhook-certs-rolebinding"


def service_name(target: Target) -> str:
    """The webhook Service's final name."""
    return target.prefix + SERVICE


def secret_name(target: Target) -> str:
    """The Secret holding the serving certificate (``tls.crt``, ``tls.key``, ``ca.crt``): its
    final name, the same with cert-manager and self-managed."""
    return target.prefix + SECRET


def dns_names(target: Target) -> list[str]:
    """The names the API server calls the webhook Service by."""
    service = f"{service_name(target)}.{target.namespace}.svc"
    return [service, f"{service}.cluster.local"]


def inject_ca_from(target: Target) -> str:
    """The annotation value naming the Certificate whose CA cert-manager injects."""
    return f"{target.namespace}/{target.prefix}{CERTIFICATE}"


def issuer(target: Target) -> dict[str, Any]:
    return {
        "apiVersion": CERT_MANAGER_API_VERSION,
        "kind": "Issuer",
        "metadata": {"name": ISSUER, "namespace": target.namespace, "labels": target.labels},
        "spec": {"selfSigned": {}},
    }


def certificate(target: Target) -> dict[str, Any]:
    return {
        "apiVersion": CERT_MANAGER_API_VERSION,
        "kind": "Certificate",
        "metadata": {"name": CERTIFICATE, "namespace": target.namespace, "labels": target.labels},
        "spec": {
            "dnsNames": dns_names(target),
            "issuerRef": {"kind": "Issuer", "name": ISSUER},
            "secretName": secret_name(target),
        },
    }


def ca_injection_patches(target: Target) -> list[dict[str, Any]]:
    """Strategic-merge patches annotating each webhook configuration and converted CRD."""
    annotations = {INJECT_CA_FROM: inject_ca_from(target)}
    patches = [
        {
            "apiVersion": configuration["apiVersion"],
            "kind": configuration["kind"],
            "metadata": {"name": configuration["metadata"]["name"], "annotations": annotations},
        }
        for configuration in webhooks.configurations(target)
    ]
    patches.extend(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": webhooks.crd_name(conversion), "annotations": annotations},
        }
        for conversion in webhooks.conversions(target)
    )
    return patches


def _deployment_patch(target: Target, comment: str, volume: str) -> str:
    """A strategic-merge patch mounting the volume ``volume`` (indented YAML of its source) at
    the certificate directory of the manager."""
    return (
        header(target, comment)
        + manager_container_patch(target)
        + (
            "        volumeMounts:\n"
            f"        - name: {CERTS_VOLUME}\n"
            f"          mountPath: {CERT_DIR}\n"
            + ("          readOnly: true\n" if "secret" in volume else "")
            + "      volumes:\n"
            f"      - name: {CERTS_VOLUME}\n" + volume
        )
    )


def _certmanager_kustomization(target: Target) -> str:
    return (
        header(
            target,
            "The webhook server's certificate from cert-manager, a kustomize Component that the installs"
            " list after ../webhook (Kubebuilder's config/certmanager). Needs cert-manager in the cluster"
            " (https://cert-manager.io): a self-signed Issuer, a Certificate for the webhook Service stored"
            f" in the Secret {secret_name(target)}, cert-manager.io/inject-ca-from on the webhook"
            " configurations and converted CRDs (cert-manager's CA injector writes their caBundle), and"
            f" the Secret mounted at {CERT_DIR}, where the server reloads it when renewed.",
            "Without cert-manager, install manifests/webhook-self-managed instead: the operator makes and"
            " renews its certificate itself.",
        )
        + "apiVersion: kustomize.config.k8s.io/v1alpha1\n"
        "kind: Component\n"
        "resources:\n- issuer.yaml\n- certificate.yaml\n"
        "patches:\n"
        "- path: ca_injection_patch.yaml\n"
        "- path: manager_certs_patch.yaml\n"
        "configurations:\n"
        "# The Issuer's name in the Certificate, for kustomize's namePrefix.\n"
        "- kustomizeconfig.yaml\n"
    )


def certmanager_files(target: Target) -> dict[str, str]:
    """``manifests/certmanager/``: path under ``manifests/`` -> text (nothing without webhooks)."""
    if not webhooks.serves_webhooks(target):
        return {}
    return {
        "certmanager/kustomization.yaml": _certmanager_kustomization(target),
        "certmanager/issuer.yaml": to_yaml(
            [issuer(target)],
            header(
                target, "A self-signed Issuer: the webhook's certificate is trusted through caBundle only."
            ),
        ),
        "certmanager/certificate.yaml": to_yaml(
            [certificate(target)],
            header(
                target,
                "The webhook server's certificate, for the names the API server calls the Service by;"
                " cert-manager renews it before it expires.",
            ),
        ),
        "certmanager/ca_injection_patch.yaml": to_yaml(
            ca_injection_patches(target),
            header(
                target,
                "cert-manager's CA injector writes the caBundle of what carries this annotation: the"
                " webhook configurations and the converted CRDs.",
            ),
        ),
        "certmanager/manager_certs_patch.yaml": _deployment_patch(
            target,
            f"The certificate's Secret at the webhook server's certificate directory ({CERT_DIR},"
            " --webhook-cert-dir's default). The pods start once cert-manager has made it.",
            f"        secret:\n          secretName: {scalar(secret_name(target))}\n",
        ),
        "certmanager/kustomizeconfig.yaml": header(
            target, "The Issuer a Certificate names, for kustomize's namePrefix (Kubebuilder's)."
        )
        + (
            "nameReference:\n"
            "- kind: Issuer\n"
            "  group: cert-manager.io\n"
            "  fieldSpecs:\n"
            "  - kind: Certificate\n"
            "    group: cert-manager.io\n"
            "    path: spec/issuerRef/name\n"
        ),
    }


# --- manifests/webhook-self-managed ----------------------------------------------------------------


def self_managed_args(target: Target) -> list[str]:
    """The manager's flags when it makes its own certificates."""
    return [
        "--webhook-certs=self-managed",
        f"--webhook-service={service_name(target)}",
        f"--webhook-secret={secret_name(target)}",
    ]


def webhook_certs_rules(target: Target) -> tuple[Rule, ...]:
    """What ``--webhook-certs=self-managed`` sends for this project: the Secret, and the kinds of
    webhook configuration and the CRDs the project has (the runtime's rules, declared once)."""
    kinds = {configuration["kind"] for configuration in webhooks.configurations(target)}
    return self_managed_certificate_rules(
        validating="ValidatingWebhookConfiguration" in kinds,
        mutating="MutatingWebhookConfiguration" in kinds,
        conversion=bool(webhooks.conversions(target)),
    )


def webhook_certs_cluster_rules(target: Target) -> list[dict[str, Any]]:
    """The ClusterRole's rules of the self-managed certificates: the cluster-scoped ones of
    :func:`webhook_certs_rules`, each limited to the install's own objects by name."""
    names: dict[str, list[str]] = {
        "customresourcedefinitions": [webhooks.crd_name(c) for c in webhooks.conversions(target)],
    }
    for configuration in webhooks.configurations(target):
        names[configuration["kind"].lower() + "s"] = [target.prefix + configuration["metadata"]["name"]]
    rules = []
    for rule in rbac.policy_rules(Scope.WATCHED, webhook_certs_rules(target)):
        (resource,) = rule["resources"]
        if names.get(resource):
            rules.append({**rule, "resourceNames": names[resource]})
    return rules


def _self_managed_role(target: Target) -> str:
    ns = target.namespace
    return to_yaml(
        [
            rbac.role(
                target, WEBHOOK_CERTS_ROLE, rbac.policy_rules(Scope.OPERATOR, webhook_certs_rules(target)), ns
            ),
            rbac.binding(target, WEBHOOK_CERTS_ROLE_BINDING, ns, ("Role", WEBHOOK_CERTS_ROLE)),
            rbac.role(target, WEBHOOK_CERTS_ROLE, webhook_certs_cluster_rules(target)),
            rbac.binding(target, WEBHOOK_CERTS_ROLE_BINDING, None, ("ClusterRole", WEBHOOK_CERTS_ROLE)),
        ],
        header(
            target,
            "--webhook-certs=self-managed: the certificate's Secret in the operator's namespace (a Role),"
            " and the caBundle of the install's own webhook configurations and converted CRDs, by name"
            " (a ClusterRole): writing any other webhook configuration would let the operator intercept"
            " any request in the cluster.",
            source="memop.runtime.webhook.selfmanaged.self_managed_certificate_rules",
            notes=[
                "Why each permission:",
                *(f"  {rule.describe()}: {rule.why}" for rule in webhook_certs_rules(target)),
            ],
        ),
    )


def _self_managed_kustomization(target: Target, labels: str, placed: str) -> str:
    args = "".join(
        f"    - op: add\n      path: /spec/template/spec/containers/0/args/-\n      value: {scalar(arg)}\n"
        for arg in self_managed_args(target)
    )
    return (
        header(
            target,
            "Cluster-wide install (as manifests/default) with the webhooks, for a cluster without"
            " cert-manager:",
            f"  kubectl apply -k manifests/{SELF_MANAGED}",
            "The operator makes its certificates itself (--webhook-certs=self-managed): the first replica"
            " to start writes a self-signed CA and a serving certificate into the Secret"
            f" {secret_name(target)},"
            " every replica serves it from its own emptyDir, the caBundle of the webhook configurations"
            " and converted CRDs is written and kept current, and the certificate is renewed before it"
            " expires. The operator then needs webhook_certs_role.yaml's permissions besides its own.",
            "manifests/default and the other installs take their certificate from cert-manager"
            " (../certmanager) instead, as Kubebuilder's do.",
        )
        + placed
        + labels
        + "resources:\n- ../crd\n- ../rbac\n- ../manager\n"
        "# The Secret in the operator's namespace; the caBundle of its webhook configurations and CRDs.\n"
        "- webhook_certs_role.yaml\n"
        "components:\n- ../webhook\n"
        "patches:\n"
        "- target:\n"
        "    group: apps\n"
        "    version: v1\n"
        "    kind: Deployment\n"
        f"    name: {scalar(DEPLOYMENT)}\n"
        "  patch: |-\n" + args + "- path: manager_certs_patch.yaml\n"
    )


def self_managed_files(target: Target, labels: str, placed: str) -> dict[str, str]:
    """``manifests/webhook-self-managed/``: path under ``manifests/`` -> text (nothing without
    webhooks). ``labels`` and ``placed`` are the installs' labels and placement stanzas."""
    if not webhooks.serves_webhooks(target):
        return {}
    return {
        f"{SELF_MANAGED}/kustomization.yaml": _self_managed_kustomization(target, labels, placed),
        f"{SELF_MANAGED}/webhook_certs_role.yaml": _self_managed_role(target),
        f"{SELF_MANAGED}/manager_certs_patch.yaml": _deployment_patch(
            target,
            f"The webhook server's certificate directory ({CERT_DIR}), written by the operator itself from"
            " the Secret it keeps: an emptyDir of each replica's own.",
            "        emptyDir:\n          sizeLimit: 1Mi\n",
        ),
    }
