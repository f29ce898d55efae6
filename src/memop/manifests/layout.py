"""Every file of a project's ``manifests/``, as ``memop manifests`` writes them.

::

    crd/                    the CRDs, one file each, and their kustomization
    rbac/                   ServiceAccount, ClusterRole + binding, leader-election Role + binding
    manager/                Namespace, Deployment (the project's image), PodDisruptionBudget
    default/                the cluster-wide install: kubectl apply -k manifests/default
    namespaced/ (+ multi/)  the install watching its own namespace (or several), with Roles
    leader-for-life/        the cluster-wide install electing its leader for life
    secure-metrics/         the cluster-wide install with /metrics over HTTPS, authorised
    sharded/                the cluster-wide install with 4 replicas splitting the work (--sharding):
                            kubectl apply -k manifests/sharded; with the API server's
                            ShardedListAndWatch gate each replica receives only its share, without
                            it every replica receives every object and filters it itself
    prometheus/ (-secure/)  metrics Service, ServiceMonitor and alert rules
    grafana/                the dashboard, as a ConfigMap for Grafana's sidecar
    samples/                each controller's sample objects

memop's own ``manifests/`` is this output for memop's project (a test keeps them equal).
"""

from __future__ import annotations

from memop.manifests import crds, manager, monitoring, overlays, rbac
from memop.manifests.target import Target

DEFAULT_DIR = "manifests"


def manifest_files(target: Target) -> dict[str, str]:
    """Path under ``manifests/`` -> text, for every file of the project's manifests."""
    files = {f"crd/{name}": text for name, text in crds.crd_files(target).items()}
    files.update(rbac.rbac_files(target))
    files.update(manager.manager_files(target))
    files.update(monitoring.monitoring_files(target))
    files.update(overlays.overlay_files(target))
    files.update({f"samples/{name}": text for name, text in crds.sample_files(target).items()})
    return dict(sorted(files.items()))
