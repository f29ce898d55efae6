"""The Grafana dashboard and the PrometheusRule (memop.manifests.monitoring): the documentation's rules,
the names a project gives them, promtool's parse of every expression, and a ``promtool test
rules`` unit test (manifests/ holding the generated files is tests/test_manifests.py's).

That every metric they name is one a running memop exports is checked against a real scrape in
tests/e2e/test_manager_dashboards.py; :func:`metric_names` is the extraction both use.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from memop.builtin import PROJECT
from memop.manifests import monitoring, rbac
from memop.manifests.target import Target
from memop.memcached import DEFINITION as MEMCACHED
from memop.project import Project
from tests.test_manifests import MANIFESTS, MEMOP, REPO, needs_kubectl, one, render

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not on PATH (Debian package 'prometheus')"
)

# Grafana's variables, replaced as Grafana would before the query reaches Prometheus.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$job": ".*", "$controller": ".*"}
PROMQL_WORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "offset", "inf", "nan",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not functions,
    aggregation modifiers, keywords, label names or values, or durations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group()
        if word.lower() in PROMQL_WORDS or text[match.end() :].lstrip().startswith("("):
            continue
        if match.start() > 0 and (text[match.start() - 1].isdigit() or text[match.start() - 1] == "."):
            continue  # the unit of a duration or a number's exponent
        names.add(word)
    return names


def grafana_to_promql(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def every_expression() -> list[str]:
    """The dashboard's panels and variable queries, and the alert rules, as Prometheus gets them."""
    variables = [
        re.fullmatch(r"label_values\((.+), \w+\)", v["definition"])
        for v in monitoring.dashboard(MEMOP)["templating"]["list"]
        if v["type"] == "query"
    ]
    queries = [m.group(1) for m in variables if m is not None]
    return [grafana_to_promql(e) for e in [*monitoring.expressions(MEMOP), *queries]] + [
        rule["expr"] for rule in monitoring.alert_rules(MEMOP)
    ]


# --- the files' contents ---------------------------------------------------------------------------


def test_the_docs_example_alert_rules_are_the_manifests() -> None:
    page = (REPO / "docs/how-to/monitoring.md").read_text()
    block = page.split("Example alert rules", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block) == {"groups": monitoring.rule_groups(MEMOP)}
    committed = list(yaml.safe_load_all((MANIFESTS / "prometheus/rules.yaml").read_text()))
    assert committed == [monitoring.prometheus_rule(MEMOP)]


def test_the_dashboard_has_the_panels_users_look_for() -> None:
    dashboard = json.loads((MANIFESTS / "grafana/memop-dashboard.json").read_text())
    assert dashboard == monitoring.dashboard(MEMOP)
    assert (dashboard["title"], dashboard["uid"]) == ("memop", "memop-controller-runtime")
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    titles = {p["title"] for p in panels}
    assert {
        "Reconciles per second",
        "Errors and panics",
        "Reconcile time",
        "Queue depth",
        "Queue latency",
        "Retries and adds per second",
        "Longest-running reconcile",
        "API requests by code",
        "API latency",
        "Leader",
        "CPU",
        "Memory (RSS)",
        "Open file descriptors",
        "Shards owned",
        "Live members",
        "Ring changes",
        "Hand-over time",
        "Objects filtered client-side",
        "Filtering mode",
    } <= titles
    exprs = " ".join(monitoring.expressions(MEMOP))
    for quantile in ("0.5", "0.9", "0.99"):
        assert (
            f"histogram_quantile({quantile}, sum by (controller, le) (rate(controller_runtime_reconcile_time"
            in exprs
        )
    # Grafana's layout: unique ids, every panel inside the 24-column grid, none overlapping.
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    cells = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0
        assert grid["x"] + grid["w"] <= 24
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, panel["title"]
        cells |= area
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert [t["refId"] for t in panel["targets"]] == [
            chr(ord("A") + i) for i in range(len(panel["targets"]))
        ]


def test_the_sharding_row_shows_the_ring() -> None:
    panels = monitoring.dashboard(MEMOP)["panels"]
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == "Sharding")
    row = list(itertools.takewhile(lambda p: p["type"] != "row", panels[start + 1 :]))
    by_title = {p["title"]: p for p in row}
    assert list(by_title) == [
        "Shards owned",
        "Live members",
        "Ring changes",
        "Hand-over time",
        "Objects filtered client-side",
        "Filtering mode",
    ]

    def exprs(title: str) -> list[str]:
        return [t["expr"] for t in by_title[title]["targets"]]

    # Each replica's shards stacked: the bands are the ring.
    owned = by_title["Shards owned"]
    assert exprs("Shards owned") == ['sum by (instance, group) (memop_sharding_shards_owned{job=~"$job"})']
    assert owned["targets"][0]["legendFormat"] == "{{instance}} {{group}}"
    assert owned["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"
    assert all("stacking" not in p["fieldConfig"]["defaults"].get("custom", {}) for p in row[1:])
    assert exprs("Live members") == ['max by (instance, group) (memop_sharding_members{job=~"$job"})']
    assert exprs("Ring changes") == [
        'sum by (instance, group) (rate(memop_sharding_ring_changes_total{job=~"$job"}[$__rate_interval]))'
    ]
    assert exprs("Hand-over time") == [
        f"histogram_quantile({q}, sum by (group, le) "
        f'(rate(memop_sharding_handover_seconds_bucket{{job=~"$job"}}[$__rate_interval])))'
        for q in ("0.5", "0.99")
    ]
    assert [t["legendFormat"] for t in by_title["Hand-over time"]["targets"]] == [
        "p50 {{group}}",
        "p99 {{group}}",
    ]
    filtered = by_title["Objects filtered client-side"]
    assert exprs("Objects filtered client-side") == [
        'sum by (resource) (rate(memop_sharding_objects_filtered_total{job=~"$job"}[$__rate_interval]))'
    ]
    assert "Non-zero means the server ignores shardSelector" in filtered["description"]
    mode = by_title["Filtering mode"]
    assert mode["type"] == "state-timeline"
    assert exprs("Filtering mode") == ['max by (instance, group) (memop_sharding_server_side{job=~"$job"})']
    [mapping] = mode["fieldConfig"]["defaults"]["mappings"]
    assert {value: state["text"] for value, state in mapping["options"].items()} == {
        "0": "client-side",
        "1": "server-side",
    }
    # The leader panel keeps its states.
    [leader] = [p for p in panels if p["title"] == "Leader"]
    [mapping] = leader["fieldConfig"]["defaults"]["mappings"]
    assert {value: state["text"] for value, state in mapping["options"].items()} == {
        "0": "standby",
        "1": "leader",
    }
    # Declared but not necessarily set yet: no panel reads it.
    assert not any("memop_sharding_objects_owned" in e for e in monitoring.expressions(MEMOP))
    # Every panel reads the scrape jobs chosen in $job.
    assert all('job=~"$job"' in e for p in row for e in exprs(p["title"]))


@needs_kubectl
def test_the_grafana_configmap_carries_the_dashboard_for_the_sidecar() -> None:
    config_map = one(render("grafana"), "ConfigMap")
    assert config_map["metadata"]["name"] == rbac.PREFIX + "grafana-dashboard"
    assert config_map["metadata"]["namespace"] == rbac.NAMESPACE
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["data"] == {
        "memop-dashboard.json": (MANIFESTS / "grafana/memop-dashboard.json").read_text()
    }


@needs_kubectl
def test_the_prometheus_overlay_ships_the_rules() -> None:
    rule = one(render("prometheus"), "PrometheusRule")
    assert rule["metadata"]["name"] == rbac.PREFIX + "controller-manager-rules"
    assert rule["spec"] == monitoring.prometheus_rule(MEMOP)["spec"]


def test_a_projects_alerts_and_dashboard_carry_its_names() -> None:
    project = Project(
        name="config-sync",
        domain="example.org",
        controllers=(MEMCACHED,),
        leader_election_id="config-sync-lock.example.org",
    )
    target = Target(project)
    rules = monitoring.alert_rules(target)
    assert [rule["alert"] for rule in rules] == [
        "ConfigSyncReconcileErrors",
        "ConfigSyncReconcilePanics",
        "ConfigSyncNoLeader",
        "ConfigSyncShardsUnowned",
        "ConfigSyncWorkqueueBacklog",
        "ConfigSyncStuckWorker",
    ]
    # Only the names change: the same expressions, but for the project's Lease.
    memops = {rule["alert"].removeprefix("Memop"): rule["expr"] for rule in monitoring.alert_rules(MEMOP)}
    theirs = {rule["alert"].removeprefix("ConfigSync"): rule["expr"] for rule in rules}
    assert (
        theirs.pop("NoLeader")
        == 'max(leader_election_master_status{name="config-sync-lock.example.org"}) < 1'
    )
    assert (
        memops.pop("NoLeader")
        == f'max(leader_election_master_status{{name="{PROJECT.leader_election_id}"}}) < 1'
    )
    assert theirs == memops
    assert all("memop" not in str(rule["annotations"]).lower() for rule in rules)
    assert monitoring.rule_groups(target)[0]["name"] == "config-sync"
    rule = monitoring.prometheus_rule(target)
    assert rule["metadata"]["namespace"] == "config-sync-system"
    assert rule["metadata"]["labels"] == {"app.kubernetes.io/name": "config-sync"}
    dashboard = monitoring.dashboard(target)
    assert (dashboard["title"], dashboard["uid"]) == ("config-sync", "config-sync-controller-runtime")
    # memop's own metric names (the same in every project's dashboard) aside.
    assert "memop" not in re.sub(r"memop_sharding_\w+", "", json.dumps(dashboard)).lower()
    assert monitoring.expressions(target) == monitoring.expressions(MEMOP)


def test_a_long_project_name_makes_a_dashboard_uid_grafana_accepts() -> None:
    name = "a" * 20 + "-" + "b" * 40
    project = Project(name=name, domain="example.org", controllers=(MEMCACHED,), namespace="operators")
    uid = monitoring.dashboard_uid(Target(project))
    assert len(uid) <= 40
    assert uid == "a" * 20 + "-controller-runtime"


def test_metric_names() -> None:
    assert metric_names(
        'histogram_quantile(0.9, sum by (controller, le) (rate(a_bucket{job=~"x(y)", le!="1e3"}[5m])))'
    ) == {"a_bucket"}
    assert metric_names("sum by (c) (x) > 100 and sum by (c) (deriv(y[10m])) > 0") == {"x", "y"}
    assert metric_names("increase(z_total[10m]) > 1e-3 or on(job) absent(w)") == {"z_total", "w"}


# --- promtool ----------------------------------------------------------------------------------------


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, cwd=cwd, check=False, timeout=60)


@needs_promtool
def test_every_expression_parses(tmp_path: Path) -> None:
    """The rules as they are, the dashboard's queries as recording rules (promtool parses both)."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": monitoring.rule_groups(MEMOP)}))
    records = [{"record": f"memop:dashboard_query_{i}", "expr": e} for i, e in enumerate(every_expression())]
    (tmp_path / "dashboard.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]})
    )
    out = promtool("check", "rules", "rules.yaml", "dashboard.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(monitoring.alert_rules(MEMOP))} rules found" in out.stdout
    assert f"SUCCESS: {len(records)} rules found" in out.stdout


def series(selector: str, values: str) -> dict[str, str]:
    return {"series": selector, "values": values}


def fires(eval_time: str, alert: str, **labels: str) -> dict[str, Any]:
    """A promtool alert test: ``alert`` fires at ``eval_time`` with ``labels`` (and its severity)."""
    [rule] = [rule for rule in monitoring.alert_rules(MEMOP) if rule["alert"] == alert]
    expected = {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": rule["annotations"]}
    return {"eval_time": eval_time, "alertname": alert, "exp_alerts": [expected]}


ALERT_TEST: dict[str, Any] = {
    "rule_files": ["rules.yaml"],
    "evaluation_interval": "1m",
    "tests": [
        {
            "interval": "1m",
            # memcached fails 0.5 reconciles a second from the start; podset 0.05 (below 0.1).
            "input_series": [
                series('controller_runtime_reconcile_errors_total{controller="memcached"}', "0+30x40"),
                series('controller_runtime_reconcile_errors_total{controller="podset"}', "0+3x40"),
            ],
            "alert_rule_test": [
                # Firing needs 15 minutes above the threshold ("for: 15m").
                {"eval_time": "10m", "alertname": "MemopReconcileErrors", "exp_alerts": []},
                fires("25m", "MemopReconcileErrors", controller="memcached"),
            ],
        },
        {
            "interval": "1m",
            # A backlog over 100 that keeps growing, on two pods of one queue (name, instance),
            # and no replica leading.
            "input_series": [
                series('workqueue_depth{controller="memcached", name="memcached", instance="a"}', "100+5x40"),
                series('workqueue_depth{controller="memcached", name="memcached", instance="b"}', "0x40"),
                series(f'leader_election_master_status{{name="{PROJECT.leader_election_id}"}}', "0x40"),
            ],
            "alert_rule_test": [
                fires("30m", "MemopWorkqueueBacklog", controller="memcached"),
                fires("30m", "MemopNoLeader"),
            ],
        },
        {
            "interval": "1m",
            # A sharded install of 16 shards on two replicas: one dies at 10m; the other takes
            # its shards at 12m (a hand-over: no alert). A second ring loses a shard for good.
            "input_series": [
                series('memop_sharding_shards{group="memop", instance="a"}', "16x40"),
                series('memop_sharding_shards{group="memop", instance="b"}', "16x10"),
                series('memop_sharding_shards_owned{group="memop", instance="a"}', "8x11 16x28"),
                series('memop_sharding_shards_owned{group="memop", instance="b"}', "8x10"),
                series('memop_sharding_shards{group="other", instance="c"}', "4x40"),
                series('memop_sharding_shards_owned{group="other", instance="c"}', "4x10 3x30"),
            ],
            "alert_rule_test": [
                {"eval_time": "9m", "alertname": "MemopShardsUnowned", "exp_alerts": []},
                fires("30m", "MemopShardsUnowned", group="other"),
            ],
        },
    ],
}


@needs_promtool
def test_promtool_unit_test_fires_the_alerts_on_synthetic_series(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": monitoring.rule_groups(MEMOP)}))
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(ALERT_TEST))
    out = promtool("test", "rules", "test.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
