#!/usr/bin/env python3
"""Prometheus scraping memop's Pods on the local cluster, as manifests/prometheus implies.

    hack/local-cluster/check_prometheus.py [--overlay secure-metrics] [--interval 5s] [--keep]

Issue 38 item 5. With memop not installed, the script:

1. installs the overlay (``secure-metrics`` by default: /metrics over HTTPS behind a token) and
   its monitoring kustomization (``prometheus-secure`` for secure-metrics, else ``prometheus``)
   with ``kubectl apply -k``, the Prometheus Operator's ServiceMonitor and PrometheusRule kinds
   stood in for by schema-less CRDs (``prometheus/crds.yaml``), as certmanager.sh does for
   cert-manager;
2. gives Prometheus the identity the monitoring kustomization binds to memop's metrics-reader
   role (ServiceAccount ``prometheus-k8s`` in ``monitoring``) and the discovery rights the
   Prometheus Operator's own install gives it (get/list/watch on services, endpoints, endpoint
   slices and pods), and a token for it (``kubectl create token``);
3. reads the ServiceMonitor and PrometheusRule back from the cluster and writes the Prometheus
   configuration the Prometheus Operator would generate from them: one job per endpoint,
   ``kubernetes_sd_configs`` of role ``endpoints`` in the monitor's namespace, the Service
   selected by the monitor's labels and the port by its name, the monitor's scheme, path,
   bearer token file and TLS settings, ``job`` set to the Service's name; the rule groups as a
   rule file;
4. runs Debian's ``prometheus`` on 127.0.0.1 (a free port, a temporary data directory) with
   that configuration, the scrape interval shortened to ``--interval`` (the monitor says 30s) so
   that rates have samples within a minute;
5. creates the sample Memcached so that the controllers have work, waits until every memop Pod
   is an active target and up, and then checks through the HTTP API:
   - every query of the Grafana dashboard (manifests/grafana, its ``$job`` and ``$controller``
     variables at All, ``$__rate_interval`` at four scrape intervals) returns series; the
     sharding row only for the sharded overlay and the leader row only where a leader is
     elected (there they return nothing, which is reported and expected);
   - the dashboard's variable queries (``label_values``) list memop's job and controllers;
   - every rule of the PrometheusRule is loaded and evaluated without error, none fires, and
     every metric its expression reads has series from memop's job.

Prints one line per check (PASS, FAIL) and, with --results FILE, appends them as a table.
Then deletes what it made (the sample first, so that memop finalizes it), unless --keep.
Needs the local cluster (KUBECONFIG), kubectl, and ``prometheus`` (Debian: prometheus).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import http.server
import json
import platform
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from check_overlays import (
    REPO,
    SAMPLES,
    SYSTEM,
    CheckFailed,
    get,
    kubectl,
    leftovers,
    memcached_available,
    operator_pods,
    ready,
    wait_until,
)

HERE = Path(__file__).resolve().parent
MONITORING = "monitoring"
PROMETHEUS_ACCOUNT = "prometheus-k8s"  # the subject of manifests/prometheus-secure's binding
# The Prometheus Operator's ClusterRole for its Prometheus servers (kube-prometheus' one).
DISCOVERY_RULES = [
    {"apiGroups": [""], "resources": ["services", "endpoints", "pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
]
# Metrics that only some installs have: sharding's without a leader, the leader's with one.
SHARDING_METRICS = ("memop_sharding_",)
LEADER_METRICS = ("leader_election_master_status",)
# The metric names memop exports, as PromQL reads them (functions and labels are not these).
METRIC = r"\b(?:controller_runtime|workqueue|leader_election|memop|rest_client|process)_[a-z0-9_]+\b"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def apply(objects: list[dict[str, Any]]) -> None:
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def prometheus_identity(workdir: Path) -> Path:
    """The ServiceAccount, its discovery rights and a token file; returns the token's path."""
    apply(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MONITORING}},
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": PROMETHEUS_ACCOUNT, "namespace": MONITORING},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "local-cluster-prometheus"},
                "rules": DISCOVERY_RULES,
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "local-cluster-prometheus"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "local-cluster-prometheus",
                },
                "subjects": [{"kind": "ServiceAccount", "name": PROMETHEUS_ACCOUNT, "namespace": MONITORING}],
            },
        ]
    )
    token = kubectl("create", "token", PROMETHEUS_ACCOUNT, "-n", MONITORING, "--duration=2h").stdout.strip()
    path = workdir / "token"
    path.write_text(token)
    return path


def cluster_access() -> tuple[str, str]:
    """The API server's address and CA (PEM) from the current kubeconfig."""
    config = json.loads(kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    cluster = config["clusters"][0]["cluster"]
    if "certificate-authority-data" in cluster:
        return cluster["server"], base64.b64decode(cluster["certificate-authority-data"]).decode()
    return cluster["server"], Path(cluster["certificate-authority"]).read_text()


class EndpointsDiscovery:
    """Prometheus' ``kubernetes_sd_configs`` of role ``endpoints``, served over ``http_sd_configs``.

    Debian's prometheus (2.42) is built without Kubernetes service discovery. This plays it: on
    each of Prometheus' polls it lists the namespace's Endpoints, Services and Pods from the API
    server with Prometheus' own token (so its discovery rights are what is tested) and answers
    one target per endpoint address and port, labelled with the ``__meta_kubernetes_*`` names
    Prometheus' own discovery gives, so the relabelling below is the Operator's as it is.
    """

    def __init__(self, server: str, ca: Path, token: Path, namespace: str) -> None:
        self.server = server
        self.context = ssl.create_default_context(cafile=str(ca))
        self.token = token
        self.namespace = namespace
        self.polls = 0

    def _list(self, resource: str) -> list[dict[str, Any]]:
        request = urllib.request.Request(
            f"{self.server}/api/v1/namespaces/{self.namespace}/{resource}",
            headers={"Authorization": f"Bearer {self.token.read_text().strip()}"},
        )
        with urllib.request.urlopen(request, context=self.context, timeout=10) as answer:
            return list(json.load(answer)["items"])

    def target_groups(self) -> list[dict[str, Any]]:
        self.polls += 1
        services = {s["metadata"]["name"]: s for s in self._list("services")}
        pods = {p["metadata"]["name"]: p for p in self._list("pods")}
        groups = []
        for endpoints in self._list("endpoints"):
            name = endpoints["metadata"]["name"]
            service = services.get(name, {"metadata": {}})
            common = {
                "__meta_kubernetes_namespace": self.namespace,
                "__meta_kubernetes_endpoints_name": name,
                "__meta_kubernetes_service_name": name,
                **{
                    "__meta_kubernetes_service_label_" + _label_name(k): v
                    for k, v in service["metadata"].get("labels", {}).items()
                },
            }
            for subset in endpoints.get("subsets", []):
                for address, is_ready in [(a, "true") for a in subset.get("addresses", [])] + [
                    (a, "false") for a in subset.get("notReadyAddresses", [])
                ]:
                    pod = pods.get(address.get("targetRef", {}).get("name", ""), {})
                    for port in subset.get("ports", []):
                        labels = {
                            **common,
                            "__meta_kubernetes_endpoint_ready": is_ready,
                            "__meta_kubernetes_endpoint_port_name": port.get("name", ""),
                            "__meta_kubernetes_pod_name": pod.get("metadata", {}).get("name", ""),
                            "__meta_kubernetes_pod_container_name": _container_of(pod, port["port"]),
                        }
                        groups.append({"targets": [f"{address['ip']}:{port['port']}"], "labels": labels})
        return groups

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        discovery = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                try:
                    body = json.dumps(discovery.target_groups()).encode()
                    status = 200
                except OSError as error:  # the API server's refusal, shown in Prometheus' log
                    body, status = str(error).encode(), 502
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/sd"
        finally:
            server.shutdown()
            server.server_close()


def _label_name(key: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def _container_of(pod: dict[str, Any], port: int) -> str:
    for container in pod.get("spec", {}).get("containers", []):
        if any(p.get("containerPort") == port for p in container.get("ports", [])):
            return str(container["name"])
    return ""


def scrape_job(
    monitor: dict[str, Any], index: int, endpoint: dict[str, Any], *, sd_url: str, token: Path, interval: str
) -> dict[str, Any]:
    """One ServiceMonitor endpoint as the Prometheus Operator turns it into a scrape job (its
    discovery through :class:`EndpointsDiscovery` at ``sd_url``)."""
    meta = monitor["metadata"]
    relabel: list[dict[str, Any]] = []
    for key, value in monitor["spec"]["selector"].get("matchLabels", {}).items():
        label = "__meta_kubernetes_service_label_" + _label_name(key)
        relabel.append({"action": "keep", "source_labels": [label], "regex": re.escape(value)})
    relabel += [
        {
            "action": "keep",
            "source_labels": ["__meta_kubernetes_endpoint_port_name"],
            "regex": endpoint["port"],
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job"},
        {"target_label": "endpoint", "replacement": endpoint["port"]},
    ]
    job: dict[str, Any] = {
        "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{index}",
        "honor_labels": False,
        "http_sd_configs": [{"url": sd_url, "refresh_interval": interval}],
        "scrape_interval": interval,
        "metrics_path": endpoint.get("path", "/metrics"),
        "scheme": endpoint.get("scheme", "http"),
        "relabel_configs": relabel,
    }
    if "bearerTokenFile" in endpoint:
        # The Pod's mounted token in the Operator's Prometheus; here a token of the same account.
        job["authorization"] = {"credentials_file": str(token)}
    tls = endpoint.get("tlsConfig", {})
    if tls:
        job["tls_config"] = {"insecure_skip_verify": bool(tls.get("insecureSkipVerify"))}
    return job


def prometheus_config(workdir: Path, token: Path, interval: str, sd_url: str) -> tuple[Path, int]:
    """prometheus.yml and rules.yml from the cluster's ServiceMonitors and PrometheusRules."""
    monitors = get("servicemonitors.monitoring.coreos.com", "-n", SYSTEM)["items"]
    rules = get("prometheusrules.monitoring.coreos.com", "-n", SYSTEM)["items"]
    if not monitors or not rules:
        raise CheckFailed(f"no ServiceMonitor ({len(monitors)}) or PrometheusRule ({len(rules)}) in {SYSTEM}")
    jobs = [
        scrape_job(m, i, endpoint, sd_url=sd_url, token=token, interval=interval)
        for m in monitors
        for i, endpoint in enumerate(m["spec"]["endpoints"])
    ]
    groups = [group for rule in rules for group in rule["spec"]["groups"]]
    (workdir / "rules.yml").write_text(yaml.safe_dump({"groups": groups}))
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(workdir / "rules.yml")],
        "scrape_configs": jobs,
    }
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path, sum(len(g["rules"]) for g in groups)


@contextlib.contextmanager
def prometheus(config: Path, workdir: Path) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if not binary:
        sys.exit("check_prometheus: missing 'prometheus' (Debian: apt install prometheus)")
    promtool = shutil.which("promtool")
    if promtool:
        checked = subprocess.run(
            [promtool, "check", "config", str(config)], check=False, capture_output=True, text=True
        )
        if checked.returncode != 0:
            raise CheckFailed(f"promtool check config: {checked.stdout.strip()} {checked.stderr.strip()}")
    port = free_port()
    log = (workdir / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until("Prometheus ready", 60, lambda: _status(f"{url}/-/ready") == 200)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status)
    except OSError:
        return 0


def api(url: str, path: str, **params: str) -> Any:
    query = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}/api/v1/{path}?{query}", timeout=30) as answer:
        body = json.load(answer)
    if body.get("status") != "success":
        raise CheckFailed(f"{path}: {body}")
    return body["data"]


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads((REPO / "manifests" / "grafana" / "memop-dashboard.json").read_text())
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]


def resolve(expr: str, rate_interval: str) -> str:
    return expr.replace("$job", ".*").replace("$controller", ".*").replace("$__rate_interval", rate_interval)


def expected_empty(expr: str, sharded: bool) -> bool:
    """Queries that have nothing to show on this install: sharding without sharding, the leader
    with no election."""
    if any(m in expr for m in SHARDING_METRICS):
        return not sharded
    if any(m in expr for m in LEADER_METRICS):
        return sharded
    return False


class Checks:
    def __init__(self, overlay: str, url: str, job: str, interval_seconds: float) -> None:
        self.overlay = overlay
        self.url = url
        self.job = job
        self.sharded = overlay == "sharded"
        self.rate_interval = f"{int(4 * interval_seconds)}s"
        self.rows: list[tuple[str, str, str, str]] = []

    def record(self, check: str, outcome: str, detail: str) -> None:
        self.rows.append((self.overlay, check, outcome, detail))
        print(f"{self.overlay:<16} {check:<34} {outcome} {detail}", flush=True)

    def run(self, name: str, check: Any) -> bool:
        try:
            detail = check()
        except (CheckFailed, OSError) as error:
            self.record(name, "FAIL", str(error))
            return False
        self.record(name, "PASS", detail)
        return True

    def rates_have_samples(self) -> bool:
        query = f"rate(controller_runtime_reconcile_total[{self.rate_interval}])"
        return bool(api(self.url, "query", query=query)["result"])

    def targets_up(self) -> str:
        pods = {p["metadata"]["name"] for p in operator_pods()}

        def all_up() -> list[dict[str, Any]] | None:
            active = api(self.url, "targets", state="active")["activeTargets"]
            up = [t for t in active if t["labels"].get("pod") in pods and t["health"] == "up"]
            return up if len(up) == len(pods) else None

        up, seconds = wait_until(f"{len(pods)} memop targets up", 120, all_up)
        scheme = {t["scrapeUrl"].split(":")[0] for t in up}
        return (
            f"{len(up)} Pods scraped ({', '.join(sorted(scheme))}, job {self.job}) {seconds:.1f}s after start"
        )

    def dashboard(self) -> str:
        queries = dashboard_queries()
        missing, empty_as_expected = [], []
        for title, expr in queries:
            result = api(self.url, "query", query=resolve(expr, self.rate_interval))["result"]
            if expected_empty(expr, self.sharded):
                if result:
                    missing.append(f"{title}: data where none was expected")
                empty_as_expected.append(title)
            elif not result:
                missing.append(f"{title}: {expr}")
        if missing:
            raise CheckFailed(f"{len(missing)} of {len(queries)} queries return nothing: {missing[:4]}")
        jobs = api(self.url, "label/job/values", **{"match[]": "controller_runtime_reconcile_total"})
        controllers = api(
            self.url,
            "label/controller/values",
            **{"match[]": 'controller_runtime_reconcile_total{job=~".*"}'},
        )
        if self.job not in jobs or not controllers:
            raise CheckFailed(f"the $job variable lists {jobs}, $controller {controllers}")
        return (
            f"{len(queries) - len(empty_as_expected)} of {len(queries)} queries return series"
            f" (empty as expected: {len(empty_as_expected)}, the {self._absent_row()} row);"
            f" $job {jobs}, $controller {controllers}"
        )

    def _absent_row(self) -> str:
        return "leader" if self.sharded else "sharding"

    def rules(self, expected: int) -> str:
        def evaluated() -> list[dict[str, Any]] | None:
            groups = api(self.url, "rules")["groups"]
            rules = [r for g in groups for r in g["rules"]]
            done = [
                r
                for r in rules
                if r.get("lastEvaluation", "").startswith("20") and r.get("evaluationTime", 0) > 0
            ]
            return rules if len(rules) == expected and len(done) == expected else None

        rules, _ = wait_until(f"{expected} rules evaluated", 60, evaluated)
        bad = [f"{r['name']}: {r.get('lastError')}" for r in rules if r.get("health") != "ok"]
        firing = [r["name"] for r in rules if r.get("state") == "firing"]
        unread, absent_as_expected = [], []
        for rule in rules:
            metrics = set(re.findall(METRIC, rule["query"]))
            read = [
                m
                for m in metrics
                if api(self.url, "query", query=f'count({m}{{job="{self.job}"}})')["result"]
            ]
            if expected_empty(rule["query"], self.sharded):
                absent_as_expected.append(rule["name"])
                if read:
                    unread.append(f"{rule['name']} has series where none was expected: {sorted(read)}")
            elif not metrics or len(read) != len(metrics):
                unread.append(f"{rule['name']} reads {sorted(metrics)}, with series {sorted(read)}")
        problems = bad + [f"{n} firing" for n in firing] + unread
        if problems:
            raise CheckFailed("; ".join(problems))
        return (
            f"{len(rules)} rules evaluated, health ok, none firing; every metric that"
            f" {len(rules) - len(absent_as_expected)} of them read has series from {self.job}"
            f" ({', '.join(absent_as_expected) or 'none'}: no series here, as expected)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overlay", default="secure-metrics")
    parser.add_argument(
        "--interval", default="5s", help="scrape and evaluation interval (the monitor's: 30s)"
    )
    parser.add_argument("--results", type=Path)
    parser.add_argument("--keep", action="store_true", help="leave memop and Prometheus' objects installed")
    args = parser.parse_args()
    if not re.fullmatch(r"\d+s", args.interval):
        parser.error("--interval takes seconds, as 5s")
    interval_seconds = float(args.interval[:-1])
    monitoring = "prometheus-secure" if args.overlay in ("secure-metrics",) else "prometheus"
    if leftovers():
        sys.exit(f"check_prometheus: memop is installed already: {leftovers()[:3]}")
    kubectl("apply", "-f", str(HERE / "prometheus" / "crds.yaml"))
    kubectl(
        "wait",
        "--for=condition=Established",
        "crd/servicemonitors.monitoring.coreos.com",
        "crd/prometheusrules.monitoring.coreos.com",
    )
    workdir = Path(tempfile.mkdtemp(prefix="memop-prometheus-"))
    checks: Checks | None = None
    try:
        kubectl("apply", "-k", str(REPO / "manifests" / args.overlay))
        kubectl("apply", "-k", str(REPO / "manifests" / monitoring))
        replicas = get("deployment", "-n", SYSTEM, "memop-controller-manager")["spec"]["replicas"]
        wait_until(
            f"{replicas} Ready memop Pods",
            180,
            lambda: len([p for p in operator_pods() if ready(p)]) == replicas,
        )
        kubectl("apply", "-f", str(SAMPLES / "cache_v1alpha1_memcached.yaml"), "-n", "default")
        token = prometheus_identity(workdir)
        server, ca = cluster_access()
        (workdir / "ca.crt").write_text(ca)
        discovery = EndpointsDiscovery(server, workdir / "ca.crt", token, SYSTEM)
        service = get("services", "-n", SYSTEM, "-l", "app.kubernetes.io/component=metrics")["items"][0]
        with discovery.serving() as sd_url:
            config, rule_count = prometheus_config(workdir, token, args.interval, sd_url)
            with prometheus(config, workdir) as url:
                checks = Checks(args.overlay, url, service["metadata"]["name"], interval_seconds)
                if checks.run("1 every memop Pod scraped", checks.targets_up):
                    wait_until(
                        "the sample Memcached Available",
                        120,
                        lambda: memcached_available("default", "memcached-sample"),
                    )
                    # A rate needs two samples inside its window: wait until one has them.
                    wait_until(
                        "two samples in a rate window",
                        4 * interval_seconds + 60,
                        checks.rates_have_samples,
                    )
                    checks.run("2 dashboard queries", checks.dashboard)
                    checks.run("3 alert rules", lambda: checks.rules(rule_count))
    except CheckFailed as error:
        print(f"check_prometheus: {error}", file=sys.stderr)
        checks = None
    finally:
        if not args.keep:
            kubectl(
                "delete",
                "-f",
                str(SAMPLES / "cache_v1alpha1_memcached.yaml"),
                "-n",
                "default",
                "--ignore-not-found",
                "--wait=true",
                check=False,
            )
            kubectl("delete", "-k", str(REPO / "manifests" / monitoring), "--ignore-not-found", check=False)
            kubectl("delete", "-k", str(REPO / "manifests" / args.overlay), "--ignore-not-found", check=False)
            kubectl("delete", "namespace", MONITORING, "--ignore-not-found", check=False)
            kubectl(
                "delete",
                "clusterrole,clusterrolebinding",
                "local-cluster-prometheus",
                "--ignore-not-found",
                check=False,
            )
        shutil.rmtree(workdir, ignore_errors=True)
    if checks and args.results:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        lines = [
            f"\n### Prometheus, {stamp}, on {platform.node()} ({platform.machine()})\n",
            "| Overlay | Check | Outcome | Detail |",
            "|---|---|---|---|",
        ]
        lines += [f"| {o} | {c} | {r} | {d} |" for o, c, r, d in checks.rows]
        with args.results.open("a") as out:
            out.write("\n".join(lines) + "\n")
    if not checks or any(r[2] != "PASS" for r in checks.rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
