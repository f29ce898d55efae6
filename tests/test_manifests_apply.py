"""Every install overlay under manifests/ applies cleanly with kubectl to the in-memory API
server, which proves its objects parse as their kinds and pass the server's validation (the
schemas and defaulting of memop.testing.kinds.builtins, the CRD's structural schema): a second
apply changes nothing, the objects read back, and ``kubectl delete -k`` removes them.

Overlays share objects (default, namespaced and secure-metrics are all the same install), so
each scenario runs in a fresh server; the Prometheus overlays go on top of the install they
are for, as the READMEs of the overlays say to apply them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from memop.builtin import PROJECT
from memop.manifests.target import Target
from memop.manifests.webhooks import serves_webhooks
from memop.testing.apiserver.server import ApiServer
from tests.test_manifests import MANIFESTS, REPO

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(
        shutil.which("kubectl") is None,
        reason="kubectl is not on PATH: cannot apply the manifests to the in-memory API server",
    ),
]

# The Prometheus Operator's CRD, reduced to what the API server needs to store ServiceMonitors:
# a real cluster needs the Prometheus Operator (kube-prometheus) installed for
# manifests/prometheus and manifests/prometheus-secure to apply.
SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {
            "plural": "servicemonitors",
            "singular": "servicemonitor",
            "kind": "ServiceMonitor",
            "listKind": "ServiceMonitorList",
            "shortNames": ["smon"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                        },
                    }
                },
            }
        ],
    },
}
# The same for PrometheusRules (manifests/prometheus ships memop's alert rules).
PROMETHEUS_RULE_CRD = {
    **SERVICE_MONITOR_CRD,
    "metadata": {"name": "prometheusrules.monitoring.coreos.com"},
    "spec": {
        **SERVICE_MONITOR_CRD["spec"],
        "names": {
            "plural": "prometheusrules",
            "singular": "prometheusrule",
            "kind": "PrometheusRule",
            "listKind": "PrometheusRuleList",
            "shortNames": ["promrule"],
        },
    },
}
# cert-manager's Issuer and Certificate, as stored kinds only: the installs of a project that
# declares webhooks take their certificate from cert-manager (manifests/certmanager), which a real
# cluster must run for the webhooks to be called.
CERT_MANAGER_CRDS = [
    {
        **SERVICE_MONITOR_CRD,
        "metadata": {"name": f"{plural}.cert-manager.io"},
        "spec": {
            **SERVICE_MONITOR_CRD["spec"],
            "group": "cert-manager.io",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
        },
    }
    for kind, plural in (("Issuer", "issuers"), ("Certificate", "certificates"))
]
# manifests/namespaced/multi watches these; they must exist before it is applied.
WATCHED_NAMESPACES = ("team-a", "team-b")

# Each scenario: overlays applied in order to one fresh server (deleted in reverse order).
SCENARIOS = {
    "default+prometheus": ("default", "prometheus"),
    "secure-metrics+prometheus-secure": ("secure-metrics", "prometheus-secure"),
    "namespaced": ("namespaced",),
    "namespaced-multi": ("namespaced/multi",),
    # The Grafana dashboard goes in the install's namespace.
    "leader-for-life+grafana": ("leader-for-life", "grafana"),
    "sharded": ("sharded",),
    **({"webhook-self-managed": ("webhook-self-managed",)} if serves_webhooks(Target(PROJECT)) else {}),
}
# kubectl's client-side apply always sends PodDisruptionBudget.spec.selector again (its patch
# strategy is "replace", so the computed patch is never empty) and reports "configured" on a
# real cluster too; the test checks nothing changed on the server instead.
ALWAYS_PATCHED = frozenset({"poddisruptionbudget.policy"})
KUBECTL_TIMEOUT = 30.0


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Kubectl:
    kubeconfig: Path
    cache_dir: Path

    async def __call__(self, *args: str, stdin: str | None = None) -> Result:
        proc = await asyncio.create_subprocess_exec(
            "kubectl",
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.cache_dir}",
            *args,
            cwd=REPO,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
        )
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), KUBECTL_TIMEOUT
        )
        assert proc.returncode is not None
        return Result(proc.returncode, out.decode(), err.decode())

    async def ok(self, *args: str, stdin: str | None = None) -> str:
        """Run kubectl; it must succeed without printing anything on stderr."""
        result = await self(*args, stdin=stdin)
        assert result.returncode == 0, f"kubectl {' '.join(args)} failed:\n{result.stderr}{result.stdout}"
        assert result.stderr == "", f"kubectl {' '.join(args)} complained:\n{result.stderr}"
        return result.stdout


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    """kubectl against a fresh in-memory server with simulated controllers (namespace deletion
    and garbage collection complete, so ``kubectl delete`` can wait for them)."""
    server = ApiServer(simulate_controllers=True)
    await server.start()
    try:
        kubeconfig = tmp_path / "kubeconfig"
        server.write_kubeconfig(kubeconfig)
        yield Kubectl(kubeconfig, tmp_path / "kube-cache")
    finally:
        await server.stop()


async def render(overlay: str) -> list[dict[str, Any]]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "kustomize",
        str(MANIFESTS / overlay),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), KUBECTL_TIMEOUT)
    assert proc.returncode == 0, err.decode()
    return [doc for doc in yaml.safe_load_all(out) if doc]


def resource_name(obj: dict[str, Any]) -> str:
    """How ``kubectl apply`` names an object in its output: ``deployment.apps/x``, ``service/x``."""
    group = obj["apiVersion"].rpartition("/")[0]
    kind = obj["kind"].lower() + (f".{group}" if group else "")
    return f"{kind}/{obj['metadata']['name']}"


def identities(objs: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted((o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]) for o in objs)


def outcomes(stdout: str) -> list[tuple[str, str]]:
    """``kubectl apply`` lines as (resource, outcome)."""
    pairs = []
    for line in stdout.splitlines():
        resource, _, outcome = line.rpartition(" ")
        pairs.append((resource, outcome))
    return sorted(pairs)


async def prepare(kubectl: Kubectl) -> None:
    """What the overlays expect to exist: the ServiceMonitor and PrometheusRule CRDs and the
    watched namespaces."""
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in WATCHED_NAMESPACES
    ]
    docs = yaml.safe_dump_all([SERVICE_MONITOR_CRD, PROMETHEUS_RULE_CRD, *CERT_MANAGER_CRDS, *namespaces])
    await kubectl.ok("apply", "-f", "-", stdin=docs)
    for crd in (SERVICE_MONITOR_CRD, PROMETHEUS_RULE_CRD, *CERT_MANAGER_CRDS):
        await kubectl.ok(
            "wait", "--for=condition=Established", "--timeout=10s", f"crd/{crd['metadata']['name']}"
        )


async def apply_overlay(kubectl: Kubectl, overlay: str) -> None:
    rendered = await render(overlay)
    assert rendered, f"{overlay} renders nothing"
    path = f"manifests/{overlay}"
    names = sorted(resource_name(obj) for obj in rendered)

    first = outcomes(await kubectl.ok("apply", "-k", path))
    # Everything is new, except what an earlier overlay of the scenario already installed.
    assert [resource for resource, _ in first] == names
    assert {outcome for _, outcome in first} <= {"created", "unchanged"}, first

    before = _items(json.loads(await kubectl.ok("get", "-k", path, "-o", "json")))
    assert identities(before) == identities(rendered)

    second = outcomes(await kubectl.ok("apply", "-k", path))
    for resource, outcome in second:
        expected = {"unchanged", "configured"} if resource.split("/")[0] in ALWAYS_PATCHED else {"unchanged"}
        assert outcome in expected, f"re-applying {path} changed {resource}: {outcome}"
    after = _items(json.loads(await kubectl.ok("get", "-k", path, "-o", "json")))
    versions = {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in before}
    assert {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in after} == versions


def _items(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of ``kubectl get -o json``: a List, or the one object when there is one."""
    items: list[dict[str, Any]] = answer.get("items", [answer])
    return items


async def delete_overlay(kubectl: Kubectl, overlay: str) -> None:
    path = f"manifests/{overlay}"
    # -o name: one kind/name per object deleted, worded alike by every kubectl version (v1.36's
    # default output says "... deleted from NS namespace", older ones "... deleted").
    out = await kubectl.ok("delete", "-k", path, "--ignore-not-found", "--timeout=20s", "-o", "name")
    assert out.strip(), f"kubectl deleted nothing of {path}"
    assert all(re.fullmatch(r"[\w.-]+/[\w.:-]+", line) for line in out.splitlines()), out
    left = await kubectl.ok("get", "-k", path, "--ignore-not-found", "-o", "name")
    assert left == "", f"still there after deleting {path}:\n{left}"


@pytest.mark.parametrize("overlays", list(SCENARIOS.values()), ids=list(SCENARIOS))
async def test_overlays_apply_cleanly_to_the_in_memory_server(
    kubectl: Kubectl, overlays: tuple[str, ...]
) -> None:
    await prepare(kubectl)
    for overlay in overlays:
        await apply_overlay(kubectl, overlay)
    for overlay in reversed(overlays):
        await delete_overlay(kubectl, overlay)


def test_every_install_overlay_is_applied() -> None:
    """A new overlay directory gets a scenario here (crd, rbac and manager are parts, webhook and
    certmanager Components of the installs)."""
    overlays = {str(path.parent.relative_to(MANIFESTS)) for path in MANIFESTS.glob("**/kustomization.yaml")}
    applied = {overlay for scenario in SCENARIOS.values() for overlay in scenario}
    assert overlays - {"crd", "rbac", "manager", "webhook", "certmanager"} == applied
