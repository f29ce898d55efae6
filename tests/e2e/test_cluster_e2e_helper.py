"""memop.testing.cluster_e2e's install against the in-memory API server with kubectl: what a
cluster without real nodes can show. The simulated controllers and kubelet roll the manager
Deployment out (its pods run nothing), so the samples are reconciled by memop's controllers
running in-process beside it; the tear-down deletes all and names what a finalizer keeps.

The metrics probe's script runs here as a process against memop's real metrics server, plain
and ``--metrics-secure``, with the in-memory server's TokenReviews and SubjectAccessReviews;
only its pod needs a node (tests/cluster_e2e/ on a real cluster).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from memop.builtin import PROJECT
from memop.testing.apiserver.server import ApiServer
from memop.testing.cluster_e2e import ClusterE2EError, Install, Kubectl, Settings, deployed
from memop.testing.cluster_e2e.metrics import PROBE_SCRIPT
from memop.testing.envtest import Kube
from memop.testing.operator import RunningOperator
from memop.testing.process import MemopProcesses
from memop.testing.wait import wait_for

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH"),
]

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "manifests/samples"
# The in-memory server runs no cert-manager: the install that makes its own certificate.
OVERLAY = "manifests/webhook-self-managed"
IMAGE = "registry.local/memop:e2e"


@pytest.fixture
def kubeconfig(kube: Kube, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    kube.fake.write_kubeconfig(path)
    return path


def settings(kubeconfig: Path, overlay: str = OVERLAY, timeout: float = 60) -> Settings:
    return Settings(IMAGE, kubeconfig, overlay=overlay, timeout=timeout)


def kubectl_for(kubeconfig: Path) -> Kubectl:
    return Kubectl(kubeconfig, kubeconfig.parent / "kube-cache")


async def test_an_overlay_whose_kinds_the_cluster_lacks_is_refused_before_applying(kubeconfig: Path) -> None:
    kubectl = kubectl_for(kubeconfig)
    with pytest.raises(ClusterE2EError) as refused:
        async with deployed(REPO, settings(kubeconfig, "manifests/default"), kubectl=kubectl):
            pytest.fail("deployed an overlay whose Certificate no cluster kind serves")
    message = str(refused.value)
    assert "Certificate (cert-manager.io/v1)" in message
    assert "E2E_OVERLAY=manifests/webhook-self-managed" in message
    assert await kubectl.get("namespaces", "memop-system") is None


async def test_an_install_already_there_is_left_alone(kubeconfig: Path) -> None:
    kubectl = kubectl_for(kubeconfig)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "memop-system"}}
    await kubectl.apply([namespace])
    with pytest.raises(ClusterE2EError) as refused:
        async with deployed(REPO, settings(kubeconfig), kubectl=kubectl):
            pytest.fail("deployed over an install, which the tear-down would delete")
    assert str(refused.value) == (
        "manifests/webhook-self-managed is installed already (1 of its objects exist), and the test would "
        "delete it after: namespace/memop-system. Run it on a cluster without this operator installed"
    )
    assert await kubectl.get("namespaces", "memop-system") is not None
    assert await kubectl.get("deployments.apps", "memop-controller-manager", "memop-system") is None


async def test_deploy_roll_out_converge_the_samples_and_tear_down(kube: Kube, kubeconfig: Path) -> None:
    kubectl = kubectl_for(kubeconfig)
    async with deployed(REPO, settings(kubeconfig), kubectl=kubectl) as install:
        pods = await install.wait_for_rollout()
        assert len(pods) == 2
        for pod in pods:
            (container,) = pod["spec"]["containers"]
            assert container["image"] == IMAGE
            assert container["imagePullPolicy"] == "IfNotPresent"
        # No pod runs here: memop's PodSet and MyPod controllers run in-process instead.
        controllers = [d for d in PROJECT.controllers if d.name in ("podset", "mypod")]
        async with RunningOperator(kube.configuration, controllers=controllers):
            podset = await install.converge(SAMPLES / "batch_v1_podset.yaml", "Available")
            assert podset["metadata"]["namespace"] == install.sample_namespace
            mypod = await install.converge(SAMPLES / "harryyann.github.io_v1_mypod.yaml", "Ready")
            assert mypod["metadata"]["namespace"] == "test-mypod"  # the sample's own
            await install.delete_samples()
    await assert_all_gone(kubectl, install)


async def assert_all_gone(kubectl: Kubectl, install: Install) -> None:
    for obj in install.objects:
        group = obj["apiVersion"].rpartition("/")[0]
        kind = obj["kind"].lower() + (f".{group}" if group else "")
        assert await kubectl.get(kind, obj["metadata"]["name"], obj["metadata"].get("namespace")) is None
    for namespace in ("test-mypod", install.sample_namespace, "memop-system"):
        assert await kubectl.get("namespaces", namespace) is None


async def test_a_finalizer_left_on_an_object_fails_the_tear_down_naming_it(kubeconfig: Path) -> None:
    kubectl = kubectl_for(kubeconfig)
    held = ["serviceaccount", "memop-controller-manager", "-n", "memop-system"]

    async def deploy_and_hold() -> None:
        async with deployed(REPO, settings(kubeconfig, timeout=5), kubectl=kubectl) as install:
            await install.wait_for_rollout()
            await kubectl.ok(
                "patch", *held, "--type=merge", "-p", '{"metadata":{"finalizers":["e2e.test/hold"]}}'
            )

    with pytest.raises(ClusterE2EError) as stuck:
        await deploy_and_hold()
    message = str(stuck.value)
    assert message.startswith("the install: still there after 5s: ")
    assert "serviceaccount/memop-controller-manager in memop-system (deleting since" in message
    assert "finalizers ['e2e.test/hold']" in message
    await kubectl.ok("patch", *held, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')


async def test_a_rollout_that_does_not_happen_fails_with_the_pods_state(tmp_path: Path) -> None:
    # A control plane without nodes: the pods stay Pending, unschedulable.
    async with ApiServer(simulate_controllers=True, nodes=False) as server:
        kubeconfig = tmp_path / "kubeconfig"
        server.write_kubeconfig(kubeconfig)
        async with deployed(
            REPO, settings(kubeconfig, timeout=3), kubectl=kubectl_for(kubeconfig)
        ) as install:
            with pytest.raises(ClusterE2EError) as late:
                await install.wait_for_rollout()
    message = str(late.value)
    deployment = "deployment memop-controller-manager in memop-system"
    assert message.startswith(f"{deployment} did not roll out 2 ready replicas of {IMAGE} within 3s: ")
    assert message.count("pod memop-controller-manager-") == 2
    assert "Pending; PodScheduled: " in message


# --- the probe's script -------------------------------------------------------------------------


async def probe(token: Path, expected: int, url: str, report: Path) -> tuple[int, list[dict[str, Any]]]:
    """The probe's exit code and report; run without blocking the loop, where the in-memory
    server answers memop's TokenReviews."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROBE_SCRIPT,
        str(token),
        str(expected),
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PROBE_REPORT": str(report)},
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert err == b""
    results: list[dict[str, Any]] = json.loads(out)
    assert json.loads(report.read_text()) == results
    assert process.returncode is not None
    return process.returncode, results


def token_file(tmp_path: Path, token: str) -> Path:
    path = tmp_path / f"{token}.token"
    path.write_text(f"{token}\n")
    return path


@pytest.mark.usefixtures("client")  # memop's CRDs installed
async def test_the_probe_script_reads_plain_metrics(memops: MemopProcesses, tmp_path: Path) -> None:
    memop = await memops.start()
    await memop.wait_ready()
    address = await wait_for(lambda: memop.address("/metrics"), timeout=30)
    url = f"http://{address}/metrics"
    code, results = await probe(token_file(tmp_path, "any"), 200, url, tmp_path / "report")
    assert (code, results) == (0, [{"url": url, "status": 200, "metrics": True, "ok": True}])
    # Nothing listening: the probe fails, saying why.
    host, _, _ = str(address).rpartition(":")
    closed = f"http://{host}:1/metrics"
    code, results = await probe(token_file(tmp_path, "any"), 200, closed, tmp_path / "report")
    assert code == 1
    assert results[0]["status"] == 0
    assert "refused" in results[0]["said"].lower()


@pytest.mark.usefixtures("client")
async def test_the_probe_script_checks_who_may_read_secure_metrics(
    kube: Kube, memops: MemopProcesses, tmp_path: Path
) -> None:
    reader = "system:serviceaccount:memop-system:e2e-metrics-reader"
    kube.fake.reviews.add_token("reader-token", reader)
    kube.fake.reviews.add_token("stranger-token", "system:serviceaccount:memop-system:e2e-metrics-stranger")
    kube.fake.reviews.allow(reader, "get", "/metrics")
    memop = await memops.start("--metrics-secure")
    await memop.wait_ready()
    address = await wait_for(lambda: memop.address("/metrics"), timeout=30)
    url = f"https://{address}/metrics"
    report = tmp_path / "report"
    assert (await probe(token_file(tmp_path, "reader-token"), 200, url, report))[0] == 0
    assert (await probe(token_file(tmp_path, "stranger-token"), 403, url, report))[0] == 0
    code, results = await probe(token_file(tmp_path, "stranger-token"), 200, url, report)
    assert code == 1
    assert results == [{"url": url, "status": 403, "metrics": False, "ok": False}]


async def test_objects_of_a_kind_no_longer_served_count_as_gone(kubeconfig: Path) -> None:
    kubectl = kubectl_for(kubeconfig)
    default = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
    # What a sample is once its CRD is deleted: kubectl get -f cannot map it, so each is asked alone.
    orphan = {
        "apiVersion": "gone.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
    }
    missing = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nope", "namespace": "default"}}
    found = await kubectl.existing([orphan, default, missing])
    assert [(obj["kind"], obj["metadata"]["name"]) for obj in found] == [("Namespace", "default")]
    assert await kubectl.existing([missing]) == []
