"""Every metric the Grafana dashboard and the alert rules name is one a running memop exports.

A memop process with leader election reconciles a Memcached (so the histograms and labelled
series exist), then its ``/metrics`` is scraped in the Prometheus text format and every metric
name (and grouping or matching label) of every expression is looked up in that scrape.
"""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from memop.builtin import PROJECT
from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.testing.memcached import available, memcached_manifest
from memop.testing.process import MemopProcesses
from memop.testing.wait import wait_for
from tests.e2e.test_manager_leader_for_life import install_every_crd
from tests.test_monitoring import every_expression, metric_names

TIMEOUT = 30
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance"}


def labels_named(expr: str) -> set[str]:
    """Label names the expression groups by, or matches on."""
    named: set[str] = set()
    for group in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        named |= {label.strip() for label in group.split(",") if label.strip()}
    for matchers in re.findall(r"\{([^}]*)\}", expr):
        named |= set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", matchers))
    return named


async def test_every_metric_and_label_the_dashboard_and_rules_name_is_exported(
    client: Client, namespace: str, memops: MemopProcesses
) -> None:
    await install_every_crd(client)
    # Exactly the controllers whose CRDs were installed, whatever the tree holds by the time
    # the process imports it.
    memop = await memops.start(
        "--leader-elect",
        "--leader-election-namespace",
        "default",
        f"--controllers={','.join(PROJECT.controller_names)}",
    )
    await memop.wait_ready(TIMEOUT)
    await client.create(MEMCACHEDS, memcached_manifest("scraped"), namespace)
    await wait_for(lambda: available(client, namespace, "scraped"), timeout=TIMEOUT)
    status, text = await memop.get("/metrics", Accept="text/plain")
    assert status == 200
    exported: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            exported.setdefault(sample.name, set()).update(sample.labels)

    expressions = every_expression()
    assert len(expressions) > 20
    for expr in expressions:
        names = metric_names(expr)
        assert names, expr
        missing = names - set(exported)
        assert not missing, f"{expr}: memop does not export {sorted(missing)}"
        labels = set().union(*(exported[name] for name in names)) | TARGET_LABELS
        assert labels_named(expr) <= labels, f"{expr}: no series has {sorted(labels_named(expr) - labels)}"
