"""The operator's own objects: its Namespace, Deployment, PodDisruptionBudget, and the metrics
Service and ServiceMonitor in front of it (``manifests/manager``, ``manifests/prometheus``).

The Deployment runs the project's image (:attr:`Project.image <memop.project.Project>`) with
``memop`` and the flags that select the project (``--project NAME``), so it runs the same
operator whatever the image's entrypoint is. It is written from a commented template (the
comments say why each setting is what it is); :func:`manager_deployment` is the same object as
a dict, which the OLM bundle's install strategy takes (:mod:`memop.manifests.olm`), so the two
never disagree. Names are the base names (``controller-manager``): the overlays add the
project's prefix and namespace.
"""

from __future__ import annotations

from typing import Any

import yaml

from memop.manifests.rbac import uninstall_guard_names
from memop.manifests.target import DEPLOYMENT, SERVICE_ACCOUNT, Target, header, to_yaml

METRICS_PORT = 8080
PROBE_PORT = 8081
# The pods' label besides app.kubernetes.io/name, as Kubebuilder's: Service and PDB select it.
CONTROL_PLANE = {"control-plane": "controller-manager"}
METRICS_SERVICE = "controller-manager-metrics-service"
METRICS_MONITOR = "controller-manager-metrics-monitor"

# {placeholders} are filled by _deployment_yaml, each as a YAML scalar (or flow sequence).
_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {deployment}
  namespace: {namespace}
  labels:
    app.kubernetes.io/name: {name}
    control-plane: controller-manager
spec:
  # Two replicas, one leading (a Lease, --leader-elect), the other a warm standby whose cache
  # is synced so it takes over within seconds. Both are ready once their caches are synced
  # (/readyz), so a rolling update never removes the last ready replica.
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: {name}
      control-plane: controller-manager
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {name}
        control-plane: controller-manager
      annotations:
        kubectl.kubernetes.io/default-container: manager
    spec:
      serviceAccountName: {service_account}
      # The client reads its token and CA, and the Lease namespace, from the mounted account.
      automountServiceAccountToken: true
      # memop gives in-flight reconciles --graceful-shutdown-timeout (30s) on SIGTERM, then
      # releases the Lease (at most --leader-elect-retry-period, 2s) and flushes Events (2s):
      # the kubelet must not SIGKILL before that.
      terminationGracePeriodSeconds: 45
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      affinity:
        # The two replicas on different nodes when possible: a node failure leaves a standby.
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm:
              topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  app.kubernetes.io/name: {name}
                  control-plane: controller-manager
      containers:
      - name: manager
        image: {image}
        # memop, running this project's controllers whatever the image's entrypoint.
        command: {command}
        args:
        - --leader-elect
        - --health-probe-bind-address=:{probe_port}
        - --metrics-bind-address=:{metrics_port}
        env:
        # `kubectl delete -k` of the whole install: its ServiceAccount, ClusterRole and binding
        # stay until the operator has released its finalizers (memop.runtime.manager.uninstall).
        # The namespaced installs set it empty: they have no ClusterRole.
        - name: UNINSTALL_GUARD
          value: {uninstall_guard}
        ports:
        - name: metrics
          containerPort: {metrics_port}
          protocol: TCP
        - name: probes
          containerPort: {probe_port}
          protocol: TCP
        livenessProbe:
          httpGet:
            path: /healthz
            port: probes
          initialDelaySeconds: 15
          periodSeconds: 20
          timeoutSeconds: 2
          failureThreshold: 3
        readinessProbe:
          # Ready once every informer has done its first list (the cache is warm).
          httpGet:
            path: /readyz
            port: probes
          initialDelaySeconds: 5
          periodSeconds: 10
          timeoutSeconds: 2
          failureThreshold: 3
        resources:
          # memop keeps cached objects as plain dicts: about 150 MB for 10k custom resources and
          # their children. The limit leaves room for a relist (old and new lists are both in
          # memory for a moment); raise it for more objects.
          requests:
            cpu: 50m
            memory: 64Mi
          limits:
            cpu: 500m
            memory: 256Mi
        securityContext:
          runAsNonRoot: true
          runAsUser: 65532
          runAsGroup: 65532
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop:
            - ALL
          seccompProfile:
            type: RuntimeDefault
        volumeMounts:
        # The only writable path (HOME=/tmp in the image). memop itself writes nothing; this
        # is room for a reconciler or a library that wants a temporary file.
        - name: tmp
          mountPath: /tmp
      volumes:
      - name: tmp
        emptyDir:
          sizeLimit: 16Mi
"""


def deployment_patch(target: Target, deployment: str = DEPLOYMENT) -> str:
    """The head of a strategic-merge patch of the manager Deployment, down to its ``spec:``."""
    return (
        "apiVersion: apps/v1\n"
        "kind: Deployment\n"
        "metadata:\n"
        f"  name: {scalar(deployment)}\n"
        f"  namespace: {scalar(target.namespace)}\n"
        "spec:\n"
    )


def manager_container_patch(target: Target, deployment: str = DEPLOYMENT) -> str:
    """:func:`deployment_patch` down to the manager container's entry, for its fields to follow."""
    return deployment_patch(target, deployment) + (
        "  template:\n    spec:\n      containers:\n      - name: manager\n"
    )


def scalar(value: Any) -> str:
    """``value`` as it reads inline in YAML: quoted only when a plain scalar would not read back
    as the same string (``'true'``, ``'123'``), a list in flow style."""
    text = yaml.safe_dump(value, default_flow_style=True, width=2**16)
    return text.removesuffix("\n").removesuffix("\n...")


def _deployment_yaml(target: Target) -> str:
    return _DEPLOYMENT.format(
        deployment=DEPLOYMENT,
        namespace=scalar(target.namespace),
        name=scalar(target.name),
        service_account=SERVICE_ACCOUNT,
        image=scalar(target.project.image),
        command=scalar(target.run_command),
        metrics_port=METRICS_PORT,
        probe_port=PROBE_PORT,
        uninstall_guard=scalar(",".join(uninstall_guard_names(target))),
    )


def manager_deployment(target: Target) -> dict[str, Any]:
    """The manager Deployment of manifests/manager (base names, a fresh dict)."""
    deployment: dict[str, Any] = yaml.safe_load(_deployment_yaml(target))
    return deployment


def namespace(target: Target) -> dict[str, Any]:
    """The operator's namespace, enforcing the restricted Pod Security Standard."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": target.namespace,
            "labels": {
                **target.labels,
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
            },
        },
    }


def pod_selector(target: Target) -> dict[str, str]:
    """The labels that select the manager's pods."""
    return {**target.labels, **CONTROL_PLANE}


def disruption_budget(target: Target) -> dict[str, Any]:
    """At most one replica voluntarily disrupted at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": DEPLOYMENT, "namespace": target.namespace, "labels": target.labels},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": pod_selector(target)}},
    }


def metrics_service(target: Target) -> dict[str, Any]:
    """A Service in front of every replica's metrics port."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": METRICS_SERVICE,
            "namespace": target.namespace,
            "labels": {**target.labels, "app.kubernetes.io/component": "metrics"},
        },
        "spec": {
            "selector": pod_selector(target),
            "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}],
        },
    }


def service_monitor(target: Target) -> dict[str, Any]:
    """The Prometheus Operator's ServiceMonitor scraping :func:`metrics_service` over HTTP."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": METRICS_MONITOR, "namespace": target.namespace, "labels": target.labels},
        "spec": {
            "selector": {"matchLabels": {**target.labels, "app.kubernetes.io/component": "metrics"}},
            "endpoints": [{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "30s"}],
        },
    }


def manager_files(target: Target) -> dict[str, str]:
    """manifests/manager and the Service and ServiceMonitor of manifests/prometheus."""
    return {
        "manager/namespace.yaml": to_yaml(
            [namespace(target)],
            header(
                target,
                "The operator's namespace: its Deployment, ServiceAccount and leader-election Lease "
                "live here. The restricted Pod Security Standard is enforced: the operator's pods "
                "comply with it.",
            ),
        ),
        "manager/manager.yaml": header(
            target,
            f"The operator: {target.name}'s controllers run by memop in image {target.project.image}.",
        )
        + _deployment_yaml(target),
        "manager/pdb.yaml": to_yaml(
            [disruption_budget(target)],
            header(
                target,
                "Voluntary disruptions (node drains) take at most one replica at a time, so a standby "
                "is there to take the Lease over.",
            ),
        ),
        "prometheus/service.yaml": to_yaml(
            [metrics_service(target)],
            header(
                target,
                "/metrics of every operator replica (the leader and the standby: both serve their own "
                "metrics; leader_election_master_status tells them apart).",
            ),
        ),
        "prometheus/monitor.yaml": to_yaml(
            [service_monitor(target)],
            header(
                target,
                f"Prometheus Operator: scrape the metrics Service. Needs the monitoring.coreos.com CRDs, "
                f"and a Prometheus that selects ServiceMonitors in {target.namespace} "
                "(serviceMonitorNamespaceSelector) and with this label, if it filters on labels "
                "(serviceMonitorSelector).",
            ),
        ),
    }
