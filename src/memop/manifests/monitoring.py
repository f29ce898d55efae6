"""A project's Grafana dashboard and Prometheus alert rules, declared once and written as manifests.

- ``manifests/grafana/<project>-dashboard.json``: the dashboard (kustomize's configMapGenerator
  in ``manifests/grafana`` puts it in a ConfigMap labelled ``grafana_dashboard: "1"``, which the
  Grafana sidecar of kube-prometheus-stack loads);
- ``manifests/prometheus/rules.yaml``: a PrometheusRule with :func:`alert_rules` (memop's are
  the example alert rules of docs/how-to/monitoring.md: a test keeps that block equal to them).

Every expression names only metrics a running memop exports (a test scrapes one with leader
election and one with ``--sharding``), with controller-runtime's names (and memop's own
``memop_sharding_*`` for the Sharding row, empty unless the replicas run with ``--sharding``), so
the panels read the same for any controller memop runs: the ``controller`` variable lists them
from the metrics. Only the names differ from one project to
another: the dashboard's title, the alerts' prefix (``Memop...`` for memop) and the Lease
(:attr:`Project.leader_election_id <memop.project.Project>`). ``memop manifests`` writes the files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from memop.manifests.target import Target, header

DASHBOARD_UID_SUFFIX = "-controller-runtime"
UID_MAX = 40  # Grafana refuses longer dashboard uids

# Grafana's template variables, in every query: the scrape job(s) and the controllers shown.
JOB = 'job=~"$job"'
SELECTED = f'{JOB}, controller=~"$controller"'
RATE = "[$__rate_interval]"


def alert_prefix(target: Target) -> str:
    """The alerts' name prefix: the project's name in CamelCase (``config-sync`` -> ``ConfigSync``)."""
    return "".join(part[:1].upper() + part[1:] for part in target.name.split("-"))


def alert_rules(target: Target) -> list[dict[str, Any]]:
    """The alert rules on the project's metrics (memop's: docs/how-to/monitoring.md's example)."""
    name, prefix = target.name, alert_prefix(target)
    return [
        {
            "alert": f"{prefix}ReconcileErrors",
            "expr": "sum by (controller) (rate(controller_runtime_reconcile_errors_total[5m])) > 0.1",
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": (
                    f"{name} reconciles keep failing; see the status conditions and Events of the objects "
                    "reconciled"
                )
            },
        },
        {
            "alert": f"{prefix}ReconcilePanics",
            "expr": "increase(controller_runtime_reconcile_panics_total[10m]) > 0",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": (
                    "a reconcile raised an unexpected exception (a bug): look for tracebacks in the logs"
                )
            },
        },
        {
            "alert": f"{prefix}NoLeader",
            "expr": f'max(leader_election_master_status{{name="{target.project.leader_election_id}"}}) < 1',
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {"summary": f"no {name} replica holds the lease: nothing is reconciled"},
        },
        {
            # Sharded installs (--sharding): no leader, and every shard must have a replica. Fewer
            # owned than the ring has, for longer than any hand-over takes (a lease duration).
            "alert": f"{prefix}ShardsUnowned",
            "expr": "max by (group) (memop_sharding_shards) > sum by (group) (memop_sharding_shards_owned)",
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": (
                    f"some shards of the {name} ring have no replica working on them: their objects "
                    "are not reconciled; see the replicas' logs and their shard Leases"
                )
            },
        },
        {
            "alert": f"{prefix}WorkqueueBacklog",
            # Both sides summed by controller: `and` matches label sets, and a bare deriv() keeps
            # every label of the series (name, instance, job), which would never match.
            "expr": (
                "sum by (controller) (workqueue_depth) > 100 "
                "and sum by (controller) (deriv(workqueue_depth[10m])) > 0"
            ),
            "for": "15m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{name} falls behind: raise --max-concurrent-reconciles or look at API latency"
            },
        },
        {
            "alert": f"{prefix}StuckWorker",
            "expr": "max by (controller) (workqueue_longest_running_processor_seconds) > 300",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "a reconcile has run for over 5 minutes"},
        },
    ]


def rule_groups(target: Target) -> list[dict[str, Any]]:
    """The rule groups of a Prometheus rule file (one, named after the project)."""
    return [{"name": target.name, "rules": alert_rules(target)}]


def prometheus_rule(target: Target) -> dict[str, Any]:
    """The PrometheusRule of manifests/prometheus (named and placed by its kustomization)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "controller-manager-rules",
            "namespace": target.namespace,
            "labels": target.labels,
        },
        "spec": {"groups": rule_groups(target)},
    }


# --- the dashboard -----------------------------------------------------------------------------------


def _target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "expr": expr,
        "legendFormat": legend,
        "range": True,
        "refId": ref,
    }


def _panel(
    title: str,
    description: str,
    targets: Sequence[tuple[str, str]],
    *,
    unit: str = "short",
    kind: str = "timeseries",
    width: int = 12,
    stacked: bool = False,
    states: Sequence[tuple[str, str]] = (("standby", "blue"), ("leader", "green")),
) -> dict[str, Any]:
    """A panel of ``targets`` (expr, legend); placed by :func:`dashboard`. A timeseries is
    ``stacked`` or not; a state-timeline shows value i as ``states[i]`` (text, color)."""
    defaults: dict[str, Any] = {"unit": unit}
    options: dict[str, Any] = {
        "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    if kind == "timeseries":
        defaults["custom"] = {"fillOpacity": 10, "lineWidth": 1, "showPoints": "never"}
        if stacked:
            defaults["custom"].update(fillOpacity=60, stacking={"mode": "normal", "group": "A"})
        defaults["min"] = 0
    else:  # state-timeline
        defaults["mappings"] = [
            {
                "type": "value",
                "options": {
                    str(value): {"text": text, "color": color, "index": value}
                    for value, (text, color) in enumerate(states)
                },
            }
        ]
        options = {"showValue": "never", "legend": {"showLegend": False}, "tooltip": {"mode": "single"}}
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": width, "x": 0, "y": 0},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options,
        "targets": [_target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)],
    }


def _rate(metric: str, by: str = "controller", selector: str = SELECTED) -> str:
    """Per-second rate of a counter, summed ``by`` labels."""
    return f"sum by ({by}) (rate({metric}{{{selector}}}{RATE}))"


def _gauge(op: str, metric: str, by: str = "controller", selector: str = SELECTED) -> str:
    """A gauge aggregated with ``op`` (sum, max) ``by`` labels."""
    return f"{op} by ({by}) ({metric}{{{selector}}})"


def _quantiles(
    metric: str, by: str, selector: str, quantiles: Sequence[float] = (0.5, 0.9, 0.99)
) -> list[tuple[str, str]]:
    return [
        (
            f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{selector}}}{RATE})))",
            f"p{round(q * 100)} {{{{{by}}}}}",
        )
        for q in quantiles
    ]


def _rows(target: Target) -> list[tuple[str, list[dict[str, Any]]]]:
    return [
        (
            "Reconciles",
            [
                _panel(
                    "Reconciles per second",
                    "controller_runtime_reconcile_total by controller and result (success, error, "
                    "requeue, requeue_after).",
                    [
                        (
                            _rate("controller_runtime_reconcile_total", "controller, result"),
                            "{{controller}} {{result}}",
                        )
                    ],
                    unit="ops",
                ),
                _panel(
                    "Errors and panics",
                    "Failed reconciles (retried with backoff), terminal errors (not retried) and panics "
                    "(unexpected exceptions: a bug, logged with a traceback).",
                    [
                        (
                            _rate("controller_runtime_reconcile_errors_total"),
                            "errors {{controller}}",
                        ),
                        (
                            _rate("controller_runtime_terminal_reconcile_errors_total"),
                            "terminal {{controller}}",
                        ),
                        (
                            _rate("controller_runtime_reconcile_panics_total"),
                            "panics {{controller}}",
                        ),
                    ],
                    unit="ops",
                ),
                _panel(
                    "Reconcile time",
                    "p50, p90 and p99 of controller_runtime_reconcile_time_seconds.",
                    _quantiles("controller_runtime_reconcile_time_seconds", "controller", SELECTED),
                    unit="s",
                ),
                _panel(
                    "Workers",
                    "Workers reconciling now, and --max-concurrent-reconciles.",
                    [
                        (
                            _gauge("sum", "controller_runtime_active_workers"),
                            "active {{controller}}",
                        ),
                        (
                            _gauge("max", "controller_runtime_max_concurrent_reconciles"),
                            "max {{controller}}",
                        ),
                    ],
                ),
            ],
        ),
        (
            "Work queues",
            [
                _panel(
                    "Queue depth",
                    "Requests waiting for a worker.",
                    [(_gauge("sum", "workqueue_depth"), "{{controller}}")],
                ),
                _panel(
                    "Queue latency",
                    "Time from a request's add to a worker taking it: p50, p90, p99.",
                    _quantiles("workqueue_queue_duration_seconds", "controller", SELECTED),
                    unit="s",
                ),
                _panel(
                    "Retries and adds per second",
                    "Rate-limited and delayed re-adds (workqueue_retries_total), and all adds.",
                    [
                        (
                            _rate("workqueue_retries_total"),
                            "retries {{controller}}",
                        ),
                        (
                            _rate("workqueue_adds_total"),
                            "adds {{controller}}",
                        ),
                    ],
                    unit="ops",
                ),
                _panel(
                    "Longest-running reconcile",
                    "The reconcile running longest right now, and all work in progress not yet "
                    f"observed (a stuck worker shows here first; {alert_prefix(target)}StuckWorker "
                    "fires past 300 s).",
                    [
                        (
                            _gauge("max", "workqueue_longest_running_processor_seconds"),
                            "longest {{controller}}",
                        ),
                        (
                            _gauge("sum", "workqueue_unfinished_work_seconds"),
                            "unfinished {{controller}}",
                        ),
                    ],
                    unit="s",
                ),
            ],
        ),
        (
            "API server",
            [
                _panel(
                    "API requests by code",
                    f"{target.name}'s requests to the API server per second, by HTTP status and method "
                    "(<error> when no answer came).",
                    [
                        (
                            _rate("rest_client_requests_total", "code, method", JOB),
                            "{{code}} {{method}}",
                        )
                    ],
                    unit="reqps",
                ),
                _panel(
                    "API latency",
                    "p50, p90 and p99 of rest_client_request_duration_seconds by verb.",
                    _quantiles("rest_client_request_duration_seconds", "verb", JOB),
                    unit="s",
                ),
            ],
        ),
        (
            "Replicas",
            [
                _panel(
                    "Leader",
                    "Which replica leads (leader_election_master_status 1) and which stand by, per "
                    "lease (or leader-for-life lock).",
                    [
                        (
                            _gauge("max", "leader_election_master_status", "instance, name", JOB),
                            "{{instance}} {{name}}",
                        )
                    ],
                    kind="state-timeline",
                    width=24,
                ),
                _panel(
                    "CPU",
                    "CPU seconds per second of each replica.",
                    [(f"rate(process_cpu_seconds_total{{{JOB}}}{RATE})", "{{instance}}")],
                    unit="percentunit",
                    width=8,
                ),
                _panel(
                    "Memory (RSS)",
                    "Resident memory of each replica.",
                    [(f"process_resident_memory_bytes{{{JOB}}}", "{{instance}}")],
                    unit="bytes",
                    width=8,
                ),
                _panel(
                    "Open file descriptors",
                    "Open file descriptors of each replica, and its limit.",
                    [
                        (f"process_open_fds{{{JOB}}}", "open {{instance}}"),
                        (f"process_max_fds{{{JOB}}}", "max {{instance}}"),
                    ],
                    width=8,
                ),
            ],
        ),
        (
            "Sharding",
            [
                _panel(
                    "Shards owned",
                    "The shards of the ring each replica works on (memop_sharding_shards_owned), stacked:"
                    " each band is a replica's share, the stack's height the shards worked on (the whole"
                    " ring but during a hand-over or after a replica is lost). Empty unless the replicas"
                    " run with --sharding (manifests/sharded).",
                    [
                        (
                            _gauge("sum", "memop_sharding_shards_owned", "instance, group", JOB),
                            "{{instance}} {{group}}",
                        )
                    ],
                    stacked=True,
                ),
                _panel(
                    "Live members",
                    "Members of the group each replica sees alive (their member Lease renewed within the"
                    " lease duration): the lines agree in a steady ring; fewer than the replicas running"
                    " means one is gone or cannot renew.",
                    [
                        (
                            _gauge("max", "memop_sharding_members", "instance, group", JOB),
                            "{{instance}} {{group}}",
                        )
                    ],
                ),
                _panel(
                    "Ring changes",
                    "How often the assignment of shards to members changed, as each replica computed it"
                    " (a member joined, left or was lost).",
                    [
                        (
                            _rate("memop_sharding_ring_changes_total", "instance, group", JOB),
                            "{{instance}} {{group}}",
                        )
                    ],
                    unit="ops",
                    width=8,
                ),
                _panel(
                    "Hand-over time",
                    "From a shard being assigned to a replica until it took the shard's Lease (once the"
                    " previous holder had drained and released it, or its lease had expired): p50 and p99"
                    " of memop_sharding_handover_seconds.",
                    _quantiles("memop_sharding_handover_seconds", "group", JOB, (0.5, 0.99)),
                    unit="s",
                    width=8,
                ),
                _panel(
                    "Objects filtered client-side",
                    f"Objects the API server sent that belong to no shard of the replica, dropped by"
                    f" {target.name} itself, per second by resource. Non-zero means the server ignores"
                    " shardSelector (the ShardedListAndWatch feature gate is off): every replica receives"
                    " every object.",
                    [
                        (
                            _rate("memop_sharding_objects_filtered_total", "resource", JOB),
                            "{{resource}}",
                        )
                    ],
                    unit="ops",
                    width=8,
                ),
                _panel(
                    "Filtering mode",
                    "Whether the API server filters each replica's lists and watches by shardSelector"
                    " (server-side, memop_sharding_server_side 1) or the replica filters what it receives"
                    " (client-side, 0), as probed at start.",
                    [
                        (
                            _gauge("max", "memop_sharding_server_side", "instance, group", JOB),
                            "{{instance}} {{group}}",
                        )
                    ],
                    kind="state-timeline",
                    width=24,
                    states=(("client-side", "orange"), ("server-side", "green")),
                ),
            ],
        ),
    ]


def _variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": name},
        "definition": query,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "refresh": 2,
        "sort": 1,
    }


def dashboard_uid(target: Target) -> str:
    """The dashboard's uid: ``<project>-controller-runtime``, the name cut to fit Grafana's limit."""
    return target.name[: UID_MAX - len(DASHBOARD_UID_SUFFIX)].rstrip("-") + DASHBOARD_UID_SUFFIX


def dashboard_file(target: Target) -> str:
    """The dashboard's file name in manifests/grafana (and key in its ConfigMap)."""
    return f"{target.name}-dashboard.json"


def dashboard(target: Target) -> dict[str, Any]:
    """The Grafana dashboard (schema version 39), panels laid out row by row."""
    panels: list[dict[str, Any]] = []
    y = 0
    for title, row in _rows(target):
        panels.append(
            {
                "type": "row",
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        y += 1
        x = 0
        for panel in row:
            width = panel["gridPos"]["w"]
            if x + width > 24:
                x, y = 0, y + 8
            panel["gridPos"].update(x=x, y=y)
            x += width
            panels.append(panel)
        y += 8
    for number, panel in enumerate(panels, start=1):
        panel["id"] = number
    return {
        "title": target.name,
        "uid": dashboard_uid(target),
        "description": (
            f"{target.name}'s controllers, work queues, API requests, replicas (controller-runtime "
            "metrics) and sharding."
        ),
        "tags": [target.name, "controller-runtime", "operator"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-1h", "to": "now"},
        "annotations": {"list": []},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                },
                _variable("job", "Job", "label_values(controller_runtime_reconcile_total, job)"),
                _variable(
                    "controller",
                    "Controller",
                    'label_values(controller_runtime_reconcile_total{job=~"$job"}, controller)',
                ),
            ]
        },
        "panels": panels,
    }


def expressions(target: Target) -> list[str]:
    """Every PromQL expression of the dashboard's panels, in order."""
    return [query["expr"] for panel in dashboard(target)["panels"] for query in panel.get("targets", ())]


# --- the files -------------------------------------------------------------------------------------


def monitoring_files(target: Target) -> dict[str, str]:
    """The dashboard and the PrometheusRule: path under ``manifests/`` -> text."""
    head = header(
        target,
        f"{target.name}'s alert rules on controller-runtime's metrics, as a PrometheusRule.",
        source="memop.manifests.monitoring",
        notes=(
            "Prometheus (Operator) loads it when its ruleSelector matches these labels "
            "(kube-prometheus-stack selects its release label by default: add it, or set "
            "ruleSelectorNilUsesHelmValues=false).",
        ),
    )
    return {
        f"grafana/{dashboard_file(target)}": json.dumps(dashboard(target), indent=2) + "\n",
        "prometheus/rules.yaml": head + yaml.safe_dump(prometheus_rule(target), sort_keys=False, width=100),
    }
