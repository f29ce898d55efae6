"""Every file of a project's ``manifests/``, as ``memop manifests`` writes them.

::

    crd/                    the CRDs, one file each, and their kustomization
    rbac/                   ServiceAccount, ClusterRole + binding, leader-election Role + binding
    manager/                Namespace, Deployment (the project's image), PodDisruptionBudget
    default/                the cluster-wide install: kubectl apply -k manifests/default
    namespaced/ (+ multi/)  the install watching its own namespace (or several), with Roles
    leader-for-life/        the cluster-wide install electing its leader for life
    secure-metrics/         the cluster-wide install with /metrics over HTTPS, authorised
    sharded/                the cluster-wide install with 3 replicas splitting the work (--sharding):
                            kubectl apply -k manifests/sharded; with the API server's
                            ShardedListAndWatch gate each replica receives only its share, without
                            it every replica receives every object and filters it itself
    webhook/                (webhooks declared) a Component: Validating/MutatingWebhookConfiguration,
                            the webhook Service, the manager's webhook port, the CRDs' conversion
    certmanager/            (webhooks declared) a Component: the webhook certificate from cert-manager
    webhook-self-managed/   (webhooks declared) the cluster-wide install whose operator makes its own
                            webhook certificate, for clusters without cert-manager
    prometheus/ (-secure/)  metrics Service, ServiceMonitor and alert rules
    grafana/                the dashboard, as a ConfigMap for Grafana's sidecar
    samples/                each controller's sample objects

Webhooks: a project whose controllers declare admission webhooks or conversions serves them from
every install, as a platform team expects of an operator with webhooks: admission that one
install enforces and another skips, or a CRD whose versions convert in one install and not in
another, would be a trap. The certificate comes from cert-manager by default (Kubebuilder's
default, and what most clusters that run operators have): every install built on ``crd``,
``rbac`` and ``manager`` (default, namespaced, leader-for-life, sharded) lists the Components
``webhook`` and ``certmanager``, and those built on ``default`` inherit them.
``webhook-self-managed`` is the one install without cert-manager; to run another install
without it, put ``webhook-self-managed``'s role, flags and emptyDir in place of ``../certmanager``.
The OLM bundle needs neither: OLM makes and mounts the certificate itself. A project that
declares no webhook gets none of these files, and its installs are unchanged.

memop's own ``manifests/`` is this output for memop's project (a test keeps them equal).
"""

from __future__ import annotations

from memop.manifests import certmanager, crds, manager, monitoring, overlays, rbac, webhooks
from memop.manifests.target import Target

DEFAULT_DIR = "manifests"


def manifest_files(target: Target) -> dict[str, str]:
    """Path under ``manifests/`` -> text, for every file of the project's manifests."""
    files = {f"crd/{name}": text for name, text in crds.crd_files(target).items()}
    files.update(rbac.rbac_files(target))
    files.update(manager.manager_files(target))
    files.update(monitoring.monitoring_files(target))
    files.update(overlays.overlay_files(target))
    files.update(webhooks.webhook_files(target))
    files.update(certmanager.certmanager_files(target))
    files.update({f"samples/{name}": text for name, text in crds.sample_files(target).items()})
    return dict(sorted(files.items()))
