#!/usr/bin/env python3
"""Installs each of memop's overlays on the local cluster and checks what issue 38 item 2 lists.

    hack/local-cluster/check_overlays.py [OVERLAY...] [--results FILE]

With no OVERLAY: webhook-self-managed, default, secure-metrics, namespaced, leader-for-life,
sharded (those using cert-manager need hack/local-cluster/certmanager.sh first). For each,
from a cluster without memop:

1. ``kubectl apply -k manifests/<overlay>``; every replica Running and Ready, in a namespace
   enforcing the restricted Pod Security level (namespaced: baseline enforced, as its namespace
   runs the samples' pods, and restricted warned), and the apply printed no Pod Security warning.
2. The samples applied (Memcached at v1alpha1 and v1beta1, a PodSet, a MyPod; in the watched
   namespace): the Memcacheds Available, the PodSet's and MyPod's pods Running, in time.
3. A Memcached the schema accepts but memop's validating webhook refuses (requests above
   limits) is refused, by the webhook, called by the API server through its Service.
4. The conversion webhook: the v1beta1 sample read back at v1beta1 keeps its containerPort,
   the v1alpha1 sample reads at v1beta1.
5. /metrics: 200 over HTTP; with --metrics-secure (secure-metrics), over HTTPS 200 for a
   ServiceAccount bound to the metrics-reader ClusterRole, 403 for one that is not, 401
   without a token.
6. Hand-over: the leader's Pod deleted, another replica leads (Lease, or leader-for-life's
   ConfigMap lock) within the lease; sharded: a rollout restart while Memcacheds are created
   loses and repeats no work, counted from the API server's audit log. 6b: a replica's
   container SIGKILLed through containerd (the leader's): restarted by the kubelet and Ready
   again, and (Lease overlays) a new Lease holder once the unreleased Lease expires.
7. ``kubectl delete -k`` with the samples still there: everything memop installed is gone and
   no object is left stuck on a finalizer. ``LOCAL_CLUSTER_DELETE_IN_ROLLOUT=1``: in the middle
   of a rollout restart; ``LOCAL_CLUSTER_CRS_FIRST=1``: the custom resources deleted first;
   ``LOCAL_CLUSTER_LOGS=DIR``: the operator Pods' logs through it kept in DIR.

Prints one line per check (PASS, FAIL, SKIP: the figure or the reason) and appends them as a
Markdown table to --results. Needs kubectl (KUBECTL, else $K8S_BIN/kubectl, else PATH),
KUBECONFIG of the local cluster, and its audit log ($LOCAL_CLUSTER_DIR/logs/audit.log).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "manifests" / "samples"
SYSTEM = "memop-system"
DEPLOYMENT = "memop-controller-manager"
SERVICE_ACCOUNT = f"system:serviceaccount:{SYSTEM}:memop-controller-manager"
LEADER_LOCK = "memop-leader.cache.example.com"
# Memcacheds at v1alpha1, their stored version: reading them at v1beta1 needs the conversion
# webhook, which goes with memop.
MEMOP_KINDS = (
    "memcacheds.v1alpha1.cache.example.com",
    "podsets.batch.tutorial.kubebuilder.io",
    "mypods.harryyann.github.io",
)
MEMOP_GROUPS = {"cache.example.com", "batch.tutorial.kubebuilder.io", "harryyann.github.io"}
ALL_OVERLAYS = [
    "webhook-self-managed",
    "default",
    "secure-metrics",
    "namespaced",
    "leader-for-life",
    "sharded",
]
BAD_MEMCACHED = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Memcached",
    "metadata": {"name": "bad-memcached"},
    "spec": {"size": 1, "resources": {"requests": {"memory": "200Mi"}, "limits": {"memory": "100Mi"}}},
}


def kubectl_path() -> str:
    for candidate in (os.environ.get("KUBECTL"), os.path.join(os.environ.get("K8S_BIN", ""), "kubectl")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("kubectl")
    if not found:
        sys.exit("check_overlays: missing kubectl (set KUBECTL or K8S_BIN)")
    return found


KUBECTL = kubectl_path()


class CheckFailed(Exception):
    """A check's one-line failure."""


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [KUBECTL, *args], input=stdin, capture_output=True, text=True, check=False, timeout=300
    )
    if check and done.returncode != 0:
        raise CheckFailed(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done


def get(*args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def wait_until(what: str, seconds: float, probe: Callable[[], Any]) -> tuple[Any, float]:
    """Calls probe until it returns something true; returns it and the seconds it took."""
    started = time.monotonic()
    last = None
    while True:
        try:
            last = probe()
        except CheckFailed as error:
            last = None
            reason = str(error)
        else:
            reason = ""
        if last:
            return last, time.monotonic() - started
        if time.monotonic() - started > seconds:
            raise CheckFailed(f"{what} not within {seconds:.0f}s {reason}".strip())
        time.sleep(0.5)


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return pod.get("status", {}).get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def operator_pods() -> list[dict[str, Any]]:
    selector = "app.kubernetes.io/name=memop,control-plane=controller-manager"
    return [
        p
        for p in get("pods", "-n", SYSTEM, "-l", selector)["items"]
        if not p["metadata"].get("deletionTimestamp")
    ]


class Run:
    """One overlay's checks; results are (overlay, check, outcome, detail) rows."""

    def __init__(self, overlay: str, results: list[tuple[str, str, str, str]]) -> None:
        self.overlay = overlay
        self.results = results
        self.namespaced = overlay == "namespaced"
        self.samples_namespace = SYSTEM if self.namespaced else "default"
        self.replicas = 0  # the Deployment's, once applied (2; sharded: 3)
        self.applied_at = 0.0

    def record(self, check: str, outcome: str, detail: str) -> None:
        self.results.append((self.overlay, check, outcome, detail))
        print(f"{self.overlay:22} {check:28} {outcome:4} {detail}", flush=True)

    def check(self, name: str, body: Callable[[], str]) -> bool:
        try:
            detail = body()
        except CheckFailed as error:
            self.record(name, "FAIL", str(error))
            return False
        except subprocess.TimeoutExpired as error:
            self.record(name, "FAIL", f"timed out: {error}")
            return False
        self.record(name, "SKIP" if detail.startswith("skipped") else "PASS", detail)
        return True

    # --- 1 ---
    def install(self) -> str:
        self.applied_at = time.monotonic()
        done = kubectl("apply", "-k", str(REPO / "manifests" / self.overlay))
        warnings = [line for line in done.stderr.splitlines() if "PodSecurity" in line]
        if warnings:
            raise CheckFailed(warnings[0])
        labels = get("namespace", SYSTEM)["metadata"].get("labels", {})
        # The namespaced install's namespace runs the samples' pods too: it enforces baseline and
        # warns restricted, so an operator pod that missed restricted would have warned above.
        level = "restricted" if self.overlay != "namespaced" else "baseline"
        if labels.get("pod-security.kubernetes.io/enforce") != level or (
            level != "restricted" and labels.get("pod-security.kubernetes.io/warn") != "restricted"
        ):
            raise CheckFailed(f"namespace {SYSTEM} does not enforce {level} and warn restricted: {labels}")
        meets = "restricted enforced" if level == "restricted" else "baseline enforced, restricted met"

        self.replicas = get("deployment", "-n", SYSTEM, DEPLOYMENT)["spec"]["replicas"]

        def all_ready() -> list[dict[str, Any]] | None:
            pods = operator_pods()
            return pods if len(pods) == self.replicas and all(ready(p) for p in pods) else None

        pods, seconds = wait_until(f"{self.replicas} Ready operator pods", 180, all_ready)
        restarts = sum(
            c.get("restartCount", 0) for p in pods for c in p["status"].get("containerStatuses", [])
        )
        return f"{len(pods)} pods Ready {seconds:.1f}s after apply -k, {meets}, {restarts} restarts"

    # --- 2 ---
    def samples(self) -> str:
        namespace = self.samples_namespace
        if not self.namespaced:
            kubectl("create", "namespace", "test-mypod", check=False)
        kubectl("label", "node", "--all", "project=test", "--overwrite")
        for sample in (
            "cache_v1alpha1_memcached.yaml",
            "cache_v1beta1_memcached.yaml",
            "batch_v1_podset_template.yaml",
        ):
            kubectl("apply", "-n", namespace, "-f", str(SAMPLES / sample))
        mypod_namespace = namespace if self.namespaced else "test-mypod"
        kubectl("apply", "-n", mypod_namespace, "-f", "-", stdin=mypod_sample(mypod_namespace))
        started = time.monotonic()

        def available(name: str) -> Callable[[], bool]:
            def probe() -> bool:
                status = get("memcacheds.v1alpha1.cache.example.com", "-n", namespace, name).get("status", {})
                return any(
                    c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions", [])
                )

            return probe

        _, first = wait_until("memcached-sample Available", 180, available("memcached-sample"))
        since_apply = time.monotonic() - self.applied_at
        wait_until("memcached-sample-v1beta1 Available", 180, available("memcached-sample-v1beta1"))
        problems = []
        try:
            wait_until(
                "PodSet podset-web 3 pods Running",
                120,
                lambda: running_pods(namespace, "podset-web-pod") >= 3,
            )
        except CheckFailed as error:
            problems.append(
                f"{error}; PodSet status {get('podsets', '-n', namespace, 'podset-web').get('status')}"
            )
        try:
            wait_until(
                "MyPod mypod-sample Running", 120, lambda: running_pods(mypod_namespace, "mypod-sample") >= 1
            )
        except CheckFailed as error:
            problems.append(
                f"{error}; MyPod status {get('mypods', '-n', mypod_namespace, 'mypod-sample').get('status')}"
            )
        memcached_pods = running_pods(namespace, "memcached-sample")
        detail = (
            f"Memcached Available {first:.1f}s after its apply ({since_apply:.1f}s after apply -k), "
            f"{memcached_pods} memcached pods Running"
        )
        if problems:
            raise CheckFailed(f"{detail}; " + "; ".join(problems))
        return f"{detail}, PodSet 3 and MyPod 1 pods Running ({time.monotonic() - started:.1f}s)"

    # --- 3 ---
    def webhook_refuses(self) -> str:
        bad = dict(BAD_MEMCACHED, metadata={"name": "bad-memcached", "namespace": self.samples_namespace})
        done = kubectl("create", "-f", "-", stdin=json.dumps(bad), check=False)
        if done.returncode == 0:
            kubectl("delete", "-f", "-", stdin=json.dumps(bad), check=False)
            raise CheckFailed("the bad Memcached was accepted")
        # The schema has no rule comparing requests with limits: these are memop's words (its
        # webhook returns a Status with one cause per field, which kubectl prints as "is invalid").
        if "must be less than or equal to memory limit of 100Mi" not in done.stderr:
            raise CheckFailed(f"refused, but not in memop's words: {done.stderr.strip()}")
        return done.stderr.strip().splitlines()[0][:160]

    # --- 4 ---
    def conversion(self) -> str:
        namespace = self.samples_namespace
        beta = get("memcacheds.v1beta1.cache.example.com", "-n", namespace, "memcached-sample-v1beta1")
        if beta["apiVersion"] != "cache.example.com/v1beta1" or beta["spec"].get("containerPort") != 11311:
            raise CheckFailed(f"v1beta1 read back as {beta['apiVersion']} spec {beta['spec']}")
        alpha_at_beta = get("memcacheds.v1beta1.cache.example.com", "-n", namespace, "memcached-sample")
        if alpha_at_beta["apiVersion"] != "cache.example.com/v1beta1":
            raise CheckFailed(f"v1alpha1 sample read at v1beta1 as {alpha_at_beta['apiVersion']}")
        ports = {
            c["ports"][0]["containerPort"]
            for p in get(
                "pods", "-n", namespace, "-l", "app.kubernetes.io/instance=memcached-sample-v1beta1"
            )["items"]
            for c in p["spec"]["containers"]
        }
        return (
            f"v1beta1 containerPort 11311 kept (pods' port {sorted(ports)}); v1alpha1 sample read at v1beta1"
        )

    # --- 5 ---
    def metrics(self) -> str:
        pod = operator_pods()[0]
        ip = pod["status"]["podIP"]
        args = pod["spec"]["containers"][0]["args"]
        if "--metrics-secure" not in args:
            code, body = http_get(f"http://{ip}:8080/metrics", None)
            if code != 200 or "memop" not in body:
                raise CheckFailed(f"GET http://{ip}:8080/metrics: {code}")
            lines = len(body.splitlines())
            return f"HTTP 200 from {pod['metadata']['name']} ({lines} lines); not --metrics-secure"
        kubectl("create", "namespace", "metrics-check", check=False)
        for account in ("reader", "stranger"):
            kubectl("create", "serviceaccount", "-n", "metrics-check", account, check=False)
        kubectl(
            "create",
            "clusterrolebinding",
            "metrics-check-reader",
            "--clusterrole=memop-metrics-reader",
            "--serviceaccount=metrics-check:reader",
            check=False,
        )
        codes = {}
        for account in ("reader", "stranger"):
            token = kubectl("create", "token", "-n", "metrics-check", account).stdout.strip()
            codes[account] = http_get(f"https://{ip}:8080/metrics", token)[0]
        codes["no token"] = http_get(f"https://{ip}:8080/metrics", None)[0]
        kubectl("delete", "namespace", "metrics-check", "--wait=false", check=False)
        kubectl("delete", "clusterrolebinding", "metrics-check-reader", check=False)
        if codes != {"reader": 200, "stranger": 403, "no token": 401}:
            raise CheckFailed(f"HTTPS codes {codes}")
        return "HTTPS: 200 with metrics-reader, 403 without it, 401 without a token"

    # --- 6 ---
    def handover(self) -> str:
        if self.overlay == "sharded":
            return self.rollout_restart()
        limit = lease_seconds() + 5.0 if self.overlay != "leader-for-life" else 90.0
        holder = for_life_holder if self.overlay == "leader-for-life" else lease_holder
        leader, _ = wait_until("a leader", 60, holder)
        kubectl("delete", "pod", "-n", SYSTEM, leader, "--wait=false")
        deleted = time.monotonic()

        def new_leader() -> str | None:
            try:
                name = holder()
            except (CheckFailed, KeyError, IndexError):
                return None
            return name if name != leader else None

        successor, seconds = wait_until("a new leader", limit + 60, new_leader)
        seconds = time.monotonic() - deleted
        if seconds > limit:
            raise CheckFailed(
                f"{successor} leads {seconds:.1f}s after {leader} was deleted (limit {limit:.0f}s)"
            )
        wait_until(
            f"{self.replicas} Ready operator pods",
            180,
            lambda: len([p for p in operator_pods() if ready(p)]) == self.replicas,
        )
        return f"{leader} deleted, {successor} leads {seconds:.1f}s later (limit {limit:.0f}s)"

    def container_killed(self) -> str:
        """SIGKILL to a replica's container through containerd (the leader's; sharded: any
        replica's), as an OOM kill would: no Lease is released. The kubelet restarts it in its
        Pod, which is Ready again, and there is a leader (a standby after the Lease expires,
        or, leader-for-life, the same Pod, whose ConfigMap lock outlives the container)."""
        ctr = shutil.which(
            "ctr", path=os.pathsep.join([os.environ.get("CONTAINERD_BIN", ""), os.environ["PATH"]])
        )
        socket = Path(os.environ.get("LOCAL_CLUSTER_DIR", "")) / "containerd" / "containerd.sock"
        if not ctr or not socket.is_socket():
            return f"skipped: needs ctr and the local cluster's containerd socket ({socket})"
        leases = self.overlay not in ("leader-for-life", "sharded")
        before = lease_identity() if leases else ""
        victim = before.split("_")[0] if leases else operator_pods()[0]["metadata"]["name"]
        if self.overlay == "leader-for-life":
            victim = for_life_holder()
        status = get("pod", "-n", SYSTEM, victim)["status"]["containerStatuses"][0]
        restarts, container = status["restartCount"], status["containerID"].split("://", 1)[1]
        subprocess.run(
            [ctr, "--address", str(socket), "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", container],
            check=True,
            capture_output=True,
        )
        killed = time.monotonic()

        def restarted_and_ready() -> bool:
            pod = get("pod", "-n", SYSTEM, victim)
            return bool(pod["status"]["containerStatuses"][0]["restartCount"] > restarts and ready(pod))

        detail = f"{victim}'s container killed"
        if leases:
            # The killed process never released the Lease: a new holder (another Pod, or the
            # restarted process with a new identity) once it expires.
            limit = lease_seconds() + 10.0

            def new_holder() -> str | None:
                identity = lease_identity()
                return identity if identity and identity != before else None

            after, _ = wait_until("a new Lease holder", limit + 60, new_holder)
            led = time.monotonic() - killed
            if led > limit:
                raise CheckFailed(
                    f"{detail}: {after.split('_')[0]} leads only {led:.1f}s later (limit {limit:.0f}s)"
                )
            detail += f"; {after.split('_')[0]} leads {led:.1f}s later (Lease {lease_seconds():.0f}s)"
        wait_until(f"{victim} restarted and Ready", 180, restarted_and_ready)
        return f"{detail}; restarted by the kubelet and Ready {time.monotonic() - killed:.1f}s after the kill"

    def rollout_restart(self) -> str:
        namespace = self.samples_namespace
        audit = Path(os.environ.get("LOCAL_CLUSTER_DIR", "")) / "logs" / "audit.log"
        if not audit.is_file():
            raise CheckFailed(f"no audit log at {audit} (set LOCAL_CLUSTER_DIR)")
        before = [f"shard-before-{i}" for i in range(6)]
        during = [f"shard-during-{i}" for i in range(6)]
        for name in before:
            kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(small_memcached(name)))
        for name in before:
            wait_until(f"{name} Available", 180, functools.partial(memcached_available, namespace, name))
        time.sleep(5)  # let status writes settle before the window opens
        offset = audit.stat().st_size
        started = time.monotonic()
        kubectl("rollout", "restart", "-n", SYSTEM, f"deployment/{DEPLOYMENT}")
        for name in during:
            kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(small_memcached(name)))
            time.sleep(1)
        kubectl("rollout", "status", "-n", SYSTEM, f"deployment/{DEPLOYMENT}", "--timeout=240s")
        for name in before + during:
            wait_until(f"{name} Available", 180, functools.partial(memcached_available, namespace, name))
        handover = time.monotonic() - started
        time.sleep(5)
        writes = [
            e
            for e in map(json.loads, audit.read_bytes()[offset:].decode().splitlines())
            if e.get("user", {}).get("username") == SERVICE_ACCOUNT
            and e.get("objectRef", {}).get("resource") == "deployments"
            and e.get("objectRef", {}).get("namespace") == namespace
            and e.get("objectRef", {}).get("name", "").startswith("shard-")
            and e["verb"] in ("create", "update", "patch", "delete")
        ]
        problems = []
        repeated = [e["objectRef"]["name"] for e in writes if e["objectRef"]["name"] in before]
        if repeated:
            problems.append(f"converged Memcacheds' Deployments written again: {sorted(set(repeated))}")
        for name in during:
            creates = [e for e in writes if e["objectRef"]["name"] == name and e["verb"] == "create"]
            ok = [e for e in creates if e.get("responseStatus", {}).get("code") == 201]
            if len(ok) != 1:
                problems.append(
                    f"{name}: {len(ok)} successful creates of its Deployment ({len(creates)} tries)"
                )
        for name in before + during:
            kubectl(
                "delete", "memcacheds.cache.example.com", "-n", namespace, name, "--wait=false", check=False
            )
        if problems:
            raise CheckFailed("; ".join(problems))
        return (
            "rollout restart with 6 Memcacheds created during it: "
            f"all 12 Available {handover:.1f}s after it began; "
            f"audit log: 0 writes to the 6 converged ones' Deployments, each new Deployment created once "
            f"({len(writes)} Deployment writes in all)"
        )

    # --- 7 ---
    def uninstall(self) -> str:
        """``kubectl delete -k`` with the samples still there: every install keeps memop's
        ServiceAccount and its role and binding (a ClusterRole, or the namespaced install's Role)
        until memop has released its finalizers (``--uninstall-guard``), so nothing may be left.
        ``LOCAL_CLUSTER_CRS_FIRST=1``: the custom resources first, while memop runs, then
        ``delete -k``. ``LOCAL_CLUSTER_DELETE_IN_ROLLOUT=1``: ``delete -k`` alone in the middle
        of a rollout restart, once a new replica is Ready beside the old ones (with sharding, its
        shards are then being handed over)."""
        started = time.monotonic()
        crs_first = os.environ.get("LOCAL_CLUSTER_CRS_FIRST") == "1"
        in_rollout = os.environ.get("LOCAL_CLUSTER_DELETE_IN_ROLLOUT") == "1"
        if in_rollout:
            old = {p["metadata"]["name"] for p in operator_pods()}
            kubectl("rollout", "restart", "-n", SYSTEM, f"deployment/{DEPLOYMENT}")
            wait_until(
                "a new replica Ready",
                180,
                lambda: [p for p in operator_pods() if ready(p) and p["metadata"]["name"] not in old],
            )
            started = time.monotonic()
        if crs_first:
            kubectl("delete", ",".join(MEMOP_KINDS), "--all", "--all-namespaces", "--wait=false")
            wait_until("memop's custom resources finalized", 90, lambda: not custom_resources())
        left_in = len(custom_resources())
        followers = follow_operator_logs(os.environ.get("LOCAL_CLUSTER_LOGS"))
        done = kubectl("delete", "-k", str(REPO / "manifests" / self.overlay), "--wait=false", check=False)
        try:
            wait_until("everything removed", 90, lambda: not leftovers())
        except CheckFailed:
            left = leftovers()
            force_clean()
            raise CheckFailed(f"delete -k rc={done.returncode}; 90s later still there: {left}") from None
        finally:
            for follower in followers:
                follower.terminate()
                follower.wait()
        seconds = time.monotonic() - started
        how = (
            "custom resources, then delete -k"
            if crs_first
            else f"delete -k alone, {left_in} custom resources in"
            + (", in the middle of a rollout restart" if in_rollout else "")
        )
        return f"{how}: everything removed in {seconds:.1f}s, no finalizer stuck"


def follow_operator_logs(directory: str | None) -> list[subprocess.Popen[bytes]]:
    """``LOCAL_CLUSTER_LOGS=DIR``: each operator Pod's log, followed into DIR/<pod>.log (the
    kubelet removes a deleted Pod's logs, so an uninstall's are kept only this way)."""
    if not directory:
        return []
    Path(directory).mkdir(parents=True, exist_ok=True)
    followers = []
    for pod in operator_pods():
        name = pod["metadata"]["name"]
        with (Path(directory) / f"{name}.log").open("wb") as out:
            followers.append(
                subprocess.Popen(
                    [kubectl_path(), "logs", "-f", "--timestamps", "-n", SYSTEM, name],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    return followers


def lease_holder() -> str:
    """The pod holding the leader Lease (its holderIdentity is <pod>_<uuid>)."""
    return str(get("lease", "-n", SYSTEM, LEADER_LOCK)["spec"]["holderIdentity"]).split("_")[0]


def lease_identity() -> str:
    return str(get("lease", "-n", SYSTEM, LEADER_LOCK)["spec"].get("holderIdentity") or "")


def lease_seconds() -> float:
    return float(get("lease", "-n", SYSTEM, LEADER_LOCK)["spec"].get("leaseDurationSeconds", 15))


def for_life_holder() -> str:
    """The pod owning leader-for-life's ConfigMap lock."""
    return str(get("configmap", "-n", SYSTEM, LEADER_LOCK)["metadata"]["ownerReferences"][0]["name"])


def mypod_sample(namespace: str) -> str:
    text = (SAMPLES / "harryyann.github.io_v1_mypod.yaml").read_text()
    return text.replace("namespace: test-mypod", f"namespace: {namespace}")


def small_memcached(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name},
        "spec": {"size": 1},
    }


def memcached_available(namespace: str, name: str) -> bool:
    status = get("memcacheds.v1alpha1.cache.example.com", "-n", namespace, name).get("status", {})
    return any(c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions", []))


def running_pods(namespace: str, prefix: str) -> int:
    pods = get("pods", "-n", namespace)["items"]
    return sum(
        1 for p in pods if p["metadata"]["name"].startswith(prefix) and p["status"].get("phase") == "Running"
    )


def http_get(url: str, token: str | None) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = (
        ssl.CERT_NONE
    )  # memop's self-signed metrics certificate, as Prometheus' insecureSkipVerify
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError as error:
        raise CheckFailed(f"GET {url}: {error}") from error


def custom_resources() -> list[str]:
    """memop's kinds' objects left in the cluster, with their finalizers."""
    left = []
    for resource in MEMOP_KINDS:
        done = kubectl("get", resource, "-A", "-o", "json", check=False)
        if done.returncode == 0:
            left += [
                f"{resource.split('.')[0]}/{meta['name']} (finalizers {meta.get('finalizers')})"
                for meta in (o["metadata"] for o in json.loads(done.stdout)["items"])
            ]
    return left


def leftovers() -> list[str]:
    """What memop's install left: its kinds' objects (with their finalizers), its CRDs,
    namespace and labelled cluster objects."""
    left = custom_resources()
    crds = [c["metadata"]["name"] for c in get("crd")["items"]]
    left += [f"crd/{name}" for name in crds if name.split(".", 1)[1] in MEMOP_GROUPS]
    if kubectl("get", "namespace", SYSTEM, check=False).returncode == 0:
        phase = get("namespace", SYSTEM)["status"].get("phase")
        left.append(f"namespace/{SYSTEM} ({phase})")
    for kind in (
        "clusterroles",
        "clusterrolebindings",
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
    ):
        names = kubectl("get", kind, "-l", "app.kubernetes.io/part-of=memop", "-o", "name").stdout.split()
        left += names
    return left


def force_clean() -> None:
    """After a failed uninstall: drop finalizers of memop's kinds so the next overlay starts clean."""
    for resource in MEMOP_KINDS:
        done = kubectl("get", resource, "-A", "-o", "json", check=False)
        if done.returncode != 0:
            continue
        for obj in json.loads(done.stdout)["items"]:
            meta = obj["metadata"]
            kubectl(
                "patch",
                resource,
                "-n",
                meta["namespace"],
                meta["name"],
                "--type=merge",
                "-p",
                '{"metadata":{"finalizers":null}}',
                check=False,
            )
    kinds = ",".join(
        ("crd", "clusterrole", "clusterrolebinding", "validatingwebhookconfiguration", "namespace")
    )
    kubectl("delete", kinds, "-l", "app.kubernetes.io/part-of=memop", "--timeout=120s", check=False)
    wait_until("memop's install gone", 180, lambda: not leftovers())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overlays", nargs="*", default=ALL_OVERLAYS)
    parser.add_argument("--results", type=Path, help="append a Markdown table of the outcomes to this file")
    options = parser.parse_args()
    if kubectl("get", "--raw", "/readyz", check=False).returncode != 0:
        sys.exit("check_overlays: no cluster at KUBECONFIG (hack/local-cluster/up.sh)")
    results: list[tuple[str, str, str, str]] = []
    for overlay in options.overlays:
        if not (REPO / "manifests" / overlay / "kustomization.yaml").is_file():
            sys.exit(f"check_overlays: no overlay manifests/{overlay}")
        if leftovers():
            force_clean()
        run = Run(overlay, results)
        if run.check("1 pods Ready, restricted", run.install):
            run.check("2 samples converge", run.samples)
            run.check("3 webhook refuses bad", run.webhook_refuses)
            run.check("4 conversion v1beta1", run.conversion)
            run.check("5 metrics", run.metrics)
            run.check("6 hand-over", run.handover)
            run.check("6b container killed", run.container_killed)
        run.check("7 delete -k", run.uninstall)
    if options.results:
        when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        with options.results.open("a") as out:
            out.write(f"\n### {when}, {platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs)\n\n")
            out.write("| Overlay | Check | Outcome | Detail |\n|---|---|---|---|\n")
            for row in results:
                out.write("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |\n")
    sys.exit(1 if any(outcome == "FAIL" for _, _, outcome, _ in results) else 0)


if __name__ == "__main__":
    main()
