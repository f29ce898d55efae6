"""Every metric the Grafana dashboard and the alert rules name is one a running memop exports.

A memop process with leader election reconciles a Memcached (so the histograms and labelled
series exist), then its ``/metrics`` is scraped in the Prometheus text format; then one with
``--sharding`` (whose metrics fill the dashboard's Sharding row) takes every shard and reconciles
it, and is scraped too. Every metric name (and grouping or matching label) of every expression is
looked up in those scrapes: the Sharding row's in the sharded one's.
"""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from memop.builtin import PROJECT
from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.testing.memcached import available, memcached_manifest
from memop.testing.process import MemopProcess, MemopProcesses, sample_value
from memop.testing.wait import wait_for
from tests.e2e.test_manager_leader_for_life import install_every_crd
from tests.test_monitoring import every_expression, metric_names

TIMEOUT = 30
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance"}


async def scrape(memop: MemopProcess) -> dict[str, set[str]]:
    """Metric name -> the label names of its samples, from one scrape of ``/metrics``."""
    status, text = await memop.get("/metrics", Accept="text/plain")
    assert status == 200
    exported: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            exported.setdefault(sample.name, set()).update(sample.labels)
    return exported


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
    controllers = f"--controllers={','.join(PROJECT.controller_names)}"
    memop = await memops.start("--leader-elect", "--leader-election-namespace", "default", controllers)
    await memop.wait_ready(TIMEOUT)
    await client.create(MEMCACHEDS, memcached_manifest("scraped"), namespace)
    await wait_for(lambda: available(client, namespace, "scraped"), timeout=TIMEOUT)
    elected = await scrape(memop)
    await memop.terminate()

    sharded = await memops.start("--sharding", "--leader-election-namespace", "default", controllers)
    await sharded.wait_ready(TIMEOUT)

    async def working() -> bool:
        samples = await sharded.samples()
        return sample_value(samples, "memop_sharding_shards_owned", group="memop") == 16 and any(
            s.name == "memop_sharding_objects_filtered_total" for s in samples
        )

    await wait_for(working, timeout=TIMEOUT)
    await client.create(MEMCACHEDS, memcached_manifest("sharded"), namespace)
    await wait_for(lambda: available(client, namespace, "sharded"), timeout=TIMEOUT)
    sharding = await scrape(sharded)

    expressions = every_expression()
    assert len(expressions) > 20
    assert any("memop_sharding_" in expr for expr in expressions)
    for expr in expressions:
        names = metric_names(expr)
        assert names, expr
        exported = sharding if any(name.startswith("memop_sharding_") for name in names) else elected
        missing = names - set(exported)
        assert not missing, f"{expr}: memop does not export {sorted(missing)}"
        labels = set().union(*(exported[name] for name in names)) | TARGET_LABELS
        assert labels_named(expr) <= labels, f"{expr}: no series has {sorted(labels_named(expr) - labels)}"
