"""memop.testing.cluster_e2e's settings and pure steps: the environment read, the image set on
the manager, the metrics endpoint and reader role read from the overlay, the probe pod and its
verdict, the convergence condition. Its install against the in-memory API server is in
tests/e2e/test_cluster_e2e_helper.py; on a real cluster, tests/cluster_e2e/.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from memop.builtin import PROJECT
from memop.testing.cluster_e2e import (
    SKIP_REASON,
    ClusterE2EError,
    Settings,
    has_condition,
    load_command,
    prepare_image,
    read_settings,
    with_image,
)
from memop.testing.cluster_e2e.metrics import (
    MetricsEndpoint,
    metrics_endpoint,
    metrics_reader_role,
    probe_objects,
    probe_verdict,
)
from memop.testing.cluster_e2e.objects import describe_pod, manager_flags, pod_is_ready, watched_namespaces
from tests.cluster_e2e.test_memop_in_cluster import CONVERGED, SAMPLES

REPO = Path(__file__).resolve().parents[2]
needs_kubectl = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH"),
]

# --- settings -----------------------------------------------------------------------------------


def test_without_an_image_nothing_runs_and_the_reason_says_what_to_set() -> None:
    assert read_settings({"KUBECONFIG": "/etc/hosts"}) is None
    for variable in ("E2E_IMAGE", "E2E_KUBECONFIG", "E2E_BUILD", "E2E_LOAD"):
        assert variable in SKIP_REASON


def test_settings_read_the_environment(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    environ = {"E2E_IMAGE": "shop:e2e", "KUBECONFIG": f"{kubeconfig}:/nowhere"}
    assert read_settings(environ) == Settings("shop:e2e", kubeconfig)
    settings = read_settings(
        {
            **environ,
            "E2E_KUBECONFIG": str(kubeconfig),
            "KUBECONFIG": "/nowhere",
            "E2E_BUILD": "podman",
            "E2E_LOAD": "kind load docker-image",
            "E2E_OVERLAY": "manifests/webhook-self-managed",
            "E2E_TIMEOUT": "90",
        }
    )
    assert settings == Settings(
        "shop:e2e", kubeconfig, "podman", "kind load docker-image", "manifests/webhook-self-managed", 90.0
    )


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({"E2E_IMAGE": "x"}, "no cluster is: set E2E_KUBECONFIG"),
        ({"E2E_IMAGE": "x", "E2E_KUBECONFIG": "/nowhere"}, "/nowhere is not a file"),
        ({"E2E_IMAGE": "x", "E2E_KUBECONFIG": "KC", "E2E_BUILD": "kaniko"}, "E2E_BUILD='kaniko'"),
        ({"E2E_IMAGE": "x", "E2E_KUBECONFIG": "KC", "E2E_TIMEOUT": "soon"}, "E2E_TIMEOUT='soon'"),
        ({"E2E_IMAGE": "x", "E2E_KUBECONFIG": "KC", "E2E_TIMEOUT": "-1"}, "E2E_TIMEOUT='-1'"),
    ],
)
def test_settings_that_cannot_be_used_are_refused_naming_the_variable(
    tmp_path: Path, environ: dict[str, str], words: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    environ = {k: v.replace("KC", str(kubeconfig)) for k, v in environ.items()}
    with pytest.raises(ClusterE2EError, match=words.replace("(", r"\(")):
        read_settings(environ)


def test_the_load_command_places_the_quoted_image() -> None:
    assert load_command("kind load docker-image", "shop:e2e") == "kind load docker-image shop:e2e"
    assert (
        load_command("podman save {image} | ctr -n k8s.io images import -", "a b")
        == "podman save 'a b' | ctr -n k8s.io images import -"
    )


# --- pure steps ---------------------------------------------------------------------------------


def rendered(overlay: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["kubectl", "kustomize", str(REPO / "manifests" / overlay)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_the_image_is_set_on_the_manager_container_only() -> None:
    objects = rendered("default")
    changed = with_image(objects, "registry.local/memop:e2e")
    assert objects != changed
    deployments = [obj for obj in changed if obj["kind"] == "Deployment"]
    (manager,) = deployments[0]["spec"]["template"]["spec"]["containers"]
    assert manager["image"] == "registry.local/memop:e2e"
    assert manager["imagePullPolicy"] == "IfNotPresent"
    # Nothing else changed, and the objects given are left as they were.
    for before, after in zip(objects, changed, strict=True):
        if after["kind"] != "Deployment":
            assert before == after
    assert rendered("default") == objects


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_the_metrics_endpoint_and_reader_come_from_the_overlay() -> None:
    plain = rendered("default")
    secure = rendered("secure-metrics")
    deployment = next(obj for obj in plain if obj["kind"] == "Deployment")
    assert metrics_endpoint(deployment) == MetricsEndpoint(8080, secure=False)
    assert metrics_endpoint(next(obj for obj in secure if obj["kind"] == "Deployment")) == MetricsEndpoint(
        8080, secure=True
    )
    assert metrics_reader_role(plain) is None
    assert metrics_reader_role(secure) == "memop-metrics-reader"


def manager(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "manager", "args": list(args)}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"spec": {"template": {"spec": {"containers": [container]}}}}


def test_the_metrics_flags_are_read_as_memop_reads_them() -> None:
    assert metrics_endpoint(manager()) == MetricsEndpoint(8080, secure=False)
    assert metrics_endpoint(
        manager("--metrics-bind-address", ":8443", "--metrics-secure")
    ) == MetricsEndpoint(8443, secure=True)
    environment = {"METRICS_BIND_ADDRESS": "0.0.0.0:9000", "METRICS_SECURE": "true"}
    assert metrics_endpoint(manager(env=environment)) == MetricsEndpoint(9000, secure=True)
    # The command line wins over the environment, as in memop run.
    assert metrics_endpoint(manager("--metrics-bind-address=:7000", env=environment)) == MetricsEndpoint(
        7000, secure=True
    )
    assert metrics_endpoint(manager("--metrics-bind-address=0")) is None
    assert MetricsEndpoint(8443, secure=True).url("fd00::5") == "https://[fd00::5]:8443/metrics"
    assert MetricsEndpoint(8080, secure=False).url("10.0.0.5") == "http://10.0.0.5:8080/metrics"


def test_the_probe_meets_the_restricted_pod_security_level() -> None:
    account, binding, pod = probe_objects(
        "probe", "shop-system", image="shop:e2e", role="shop-metrics-reader", urls=["u"], expected=200
    )
    assert account["kind"] == "ServiceAccount"
    assert binding["roleRef"]["name"] == "shop-metrics-reader"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "probe", "namespace": "shop-system"}]
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "probe"
    assert spec["restartPolicy"] == "Never"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["image"] == "shop:e2e"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert [obj["kind"] for obj in probe_objects("p", "ns", image="i", role=None, urls=[], expected=403)] == [
        "ServiceAccount",
        "Pod",
    ]


def finished(phase: str, message: str, reason: str = "") -> dict[str, Any]:
    (_, pod) = probe_objects("probe", "ns", image="i", role=None, urls=["http://a/metrics"], expected=200)
    terminated = {"exitCode": 0 if phase == "Succeeded" else 1, "message": message}
    pod["status"] = {
        "phase": phase,
        "containerStatuses": [{"name": "probe", "state": {"terminated": terminated}}],
    }
    if reason:
        pod["status"]["reason"] = reason
    return pod


def test_the_probe_verdict_names_each_answer_that_was_not_expected() -> None:
    assert probe_verdict(finished("Succeeded", "")) == ""
    report = '[{"url": "http://a/metrics", "status": 401, "metrics": false, "ok": false}]'
    assert (
        probe_verdict(finished("Failed", report))
        == "http://a/metrics answered 401 (expected 200 with the metrics)"
    )
    refused = '[{"url": "http://a/metrics", "status": 0, "metrics": false, "ok": false, "said": "timed out"}]'
    assert probe_verdict(finished("Failed", refused)).endswith(
        "answered nothing (expected 200 with the metrics): timed out"
    )
    assert probe_verdict(finished("Failed", "Traceback: boom\n")) == "the probe probe failed: Traceback: boom"
    stopped = finished("Failed", '[{"url": "u", "status": 200, "ok": true}]', reason="DeadlineExceeded")
    assert probe_verdict(stopped) == "the probe probe failed: DeadlineExceeded"


def test_a_condition_counts_only_for_the_current_generation() -> None:
    def obj(status: str, observed: int, generation: int = 2) -> dict[str, Any]:
        condition = {"type": "Ready", "status": status, "observedGeneration": observed}
        return {"metadata": {"generation": generation}, "status": {"conditions": [condition]}}

    assert has_condition(obj("True", 2), "Ready")
    assert not has_condition(obj("True", 1), "Ready")
    assert not has_condition(obj("False", 2), "Ready")
    assert not has_condition(obj("True", 2), "Available")
    stale = {**obj("True", 2), "status": {**obj("True", 2)["status"], "observedGeneration": 1}}
    assert not has_condition(stale, "Ready")
    assert not has_condition({"metadata": {"generation": 1}}, "Ready")


def test_memops_own_suite_converges_a_sample_of_each_operator() -> None:
    samples = [yaml.safe_load((SAMPLES / name).read_text()) for name in CONVERGED]
    assert {sample["kind"] for sample in samples} == {"Memcached", "PodSet", "MyPod"}
    assert {s["apiVersion"] for s in samples if s["kind"] == "Memcached"} == {
        "cache.example.com/v1alpha1",
        "cache.example.com/v1beta1",
    }
    assert {definition.name for definition in PROJECT.controllers} == {"memcached", "podset", "mypod"}


def test_a_pod_is_described_by_what_keeps_it_from_running() -> None:
    crashing = {
        "metadata": {"name": "shop-controller-manager-1"},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "False", "message": "containers with unready status: [manager]"}
            ],
            "containerStatuses": [
                {
                    "name": "manager",
                    "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                    "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
                }
            ],
        },
    }
    assert describe_pod(crashing) == (
        "pod shop-controller-manager-1: Running; Ready: containers with unready status: [manager]; "
        "manager waiting: CrashLoopBackOff back-off 40s; manager last terminated: Error exitCode 1"
    )
    assert not pod_is_ready(crashing)
    assert describe_pod({"metadata": {"name": "p"}}) == "pod p: no phase"


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_the_watched_namespaces_come_from_the_overlay() -> None:
    def deployment(overlay: str) -> dict[str, Any]:
        return next(obj for obj in rendered(overlay) if obj["kind"] == "Deployment")

    assert watched_namespaces(deployment("default")) == []
    # WATCH_NAMESPACE from the downward API: the operator's own namespace.
    assert watched_namespaces(deployment("namespaced")) == ["memop-system"]
    assert watched_namespaces(deployment("namespaced/multi")) == ["team-a", "team-b"]
    flags = manager_flags(deployment("sharded"))
    assert flags["--sharding"] == "true"
    assert flags["--project"] == "memop"  # the command: memop --project memop
    assert "--leader-elect" not in flags  # sharded replicas elect no leader


async def test_the_load_command_runs_in_a_shell_with_the_image(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    seen = tmp_path / "seen"
    loaded = Settings("registry.local/shop:e2e", kubeconfig, load=f"printf '%s|' {{image}} > {seen}")
    await prepare_image(loaded, tmp_path)
    assert seen.read_text() == "registry.local/shop:e2e|"
    failing = Settings("shop:e2e", kubeconfig, load="echo no node for {image} >&2; exit 3")
    message = r"E2E_LOAD \(echo no node for shop:e2e >&2; exit 3\) exited 3: no node for shop:e2e"
    with pytest.raises(ClusterE2EError, match=message):
        await prepare_image(failing, tmp_path)
