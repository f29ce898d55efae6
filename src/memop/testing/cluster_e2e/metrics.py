"""Asking a deployed operator's ``/metrics`` from inside the cluster, for
:meth:`memop.testing.cluster_e2e.Install.check_metrics`.

Kubebuilder's e2e suite runs a curl pod with a ServiceAccount token bound to the
metrics-reader ClusterRole. memop's images have no curl, but they have ``python``: the probe is
a pod running the operator's own image with :data:`PROBE_SCRIPT`, which asks each URL with its
account's token (plain HTTP ignores it; ``--metrics-secure`` checks it with a TokenReview and a
SubjectAccessReview) and exits 0 when every answer has the status expected (200 with memop's
metrics; 403 for an account bound to nothing). The API server's service proxy would not do: it
does not pass the caller's token on, so secure metrics could only refuse it.

Everything here is pure: the endpoint read from the Deployment's flags, the probe's objects
(restricted-Pod-Security compliant, as the operator's namespace is labelled), the verdict read
from the finished pod.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memop.testing.cluster_e2e.objects import manager_flags

# The one metric every memop manager serves from its start (initialised to 0).
METRIC = "controller_runtime_reconcile_total"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# A probe that cannot connect gives up well before the wait for it does.
PROBE_DEADLINE_SECONDS = 120
DEFAULT_METRICS_ADDRESS = ":8080"  # memop run's default --metrics-bind-address

# Run as ``python -c PROBE_SCRIPT TOKEN_FILE EXPECTED_STATUS URL...``; standard library only. Its
# report (JSON, one entry per URL) goes to stdout and to the container's termination message
# ($PROBE_REPORT elsewhere), where the verdict reads it.
PROBE_SCRIPT = """\
import json, os, ssl, sys, urllib.error, urllib.request
token_file, expected, *urls = sys.argv[1:]
with open(token_file) as source:
    token = source.read().strip()
# The operator's serving certificate is its own (self-signed unless --metrics-cert-dir): what is
# checked here is who may read the metrics, not who signed the certificate.
context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
results = []
for url in urls:
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            status, body = response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        status, body = error.code, ""
    except OSError as error:
        status, body = 0, str(error)
    found = "METRIC" in body
    ok = status == int(expected) and (found or status != 200)
    result = {"url": url, "status": status, "metrics": found, "ok": ok}
    if not ok and status in (0, 200):
        result["said"] = body[:200]
    results.append(result)
report = json.dumps(results)
print(report)
try:
    with open(os.environ.get("PROBE_REPORT", "/dev/termination-log"), "w") as out:
        out.write(report)
except OSError:
    pass
sys.exit(0 if all(result["ok"] for result in results) else 1)
""".replace("METRIC", METRIC)


@dataclass(frozen=True)
class MetricsEndpoint:
    """Where the manager serves ``/metrics``: its port, and whether over HTTPS with
    authentication (``--metrics-secure``)."""

    port: int
    secure: bool

    def url(self, pod_ip: str) -> str:
        """The metrics URL of the pod at ``pod_ip`` (an IPv6 address in brackets)."""
        host = f"[{pod_ip}]" if ":" in pod_ip else pod_ip
        return f"{'https' if self.secure else 'http'}://{host}:{self.port}/metrics"

    def describe(self) -> str:
        return f"port {self.port} ({'HTTPS, --metrics-secure' if self.secure else 'HTTP'})"


def metrics_endpoint(deployment: Mapping[str, Any]) -> MetricsEndpoint | None:
    """The metrics endpoint of the Deployment's ``manager`` container; None when its metrics
    are off (``--metrics-bind-address=0``)."""
    values = manager_flags(deployment)
    address = values.get("--metrics-bind-address", DEFAULT_METRICS_ADDRESS)
    if address == "0":
        return None
    secure = values.get("--metrics-secure", "false").strip().lower() in ("1", "true", "yes", "on")
    return MetricsEndpoint(int(address.rpartition(":")[2]), secure)


def metrics_reader_role(objects: Iterable[Mapping[str, Any]]) -> str | None:
    """The name of the ClusterRole among ``objects`` that grants get on ``/metrics`` (the
    metrics-reader role of the secure-metrics installs), None when there is none."""
    for obj in objects:
        if obj.get("kind") != "ClusterRole":
            continue
        for rule in obj.get("rules") or []:
            if "/metrics" in (rule.get("nonResourceURLs") or []) and "get" in (rule.get("verbs") or []):
                return str(obj["metadata"]["name"])
    return None


def probe_objects(
    name: str, namespace: str, *, image: str, role: str | None, urls: list[str], expected: int
) -> list[dict[str, Any]]:
    """A ServiceAccount ``name`` (bound to the ClusterRole ``role`` when given, by a
    ClusterRoleBinding of the same name) and a pod ``name`` running :data:`PROBE_SCRIPT` in
    ``image`` as that account, expecting ``expected`` from each of ``urls``. The pod runs once
    (``restartPolicy: Never``), within :data:`PROBE_DEADLINE_SECONDS`, as the restricted Pod
    Security level requires (non-root, no privilege escalation, no capabilities, RuntimeDefault
    seccomp), on a read-only root."""
    labels = {"app.kubernetes.io/name": "memop-e2e-metrics-probe"}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
        }
    ]
    if role is not None:
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{namespace}-{name}", "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            }
        )
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "serviceAccountName": name,
                "automountServiceAccountToken": True,
                "restartPolicy": "Never",
                "activeDeadlineSeconds": PROBE_DEADLINE_SECONDS,
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 65532,
                    "runAsGroup": 65532,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "probe",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["python", "-c", PROBE_SCRIPT, TOKEN_PATH, str(expected), *urls],
                        "terminationMessagePolicy": "FallbackToLogsOnError",
                        "resources": {
                            "requests": {"cpu": "10m", "memory": "32Mi"},
                            "limits": {"memory": "64Mi"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
            },
        }
    )
    return objects


def probe_verdict(pod: Mapping[str, Any]) -> str:
    """'' when the finished probe ``pod`` found every answer it expected; else why not, from
    its report (its termination message): each URL's status and what it said."""
    status = pod.get("status") or {}
    if status.get("phase") == "Succeeded":
        return ""
    terminated: dict[str, Any] = {}
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or terminated
    message = str(terminated.get("message") or status.get("message") or status.get("reason") or "no report")
    try:
        results = json.loads(message)
    except ValueError:
        return f"the probe {pod['metadata']['name']} failed: {message.strip()}"
    expected = pod["spec"]["containers"][0]["command"][4]
    why = "; ".join(
        f"{r['url']} answered {r['status'] or 'nothing'} (expected {expected}"
        + (" with the metrics" if expected == "200" else "")
        + ")"
        + (f": {r['said']}" if r.get("said") else "")
        for r in results
        if not r.get("ok")
    )
    # Every answer as expected, yet the pod failed: it was stopped (its deadline, say).
    return why or f"the probe {pod['metadata']['name']} failed: {status.get('reason') or message}"
