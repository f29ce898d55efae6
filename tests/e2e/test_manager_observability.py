"""What operators of memop look at: probes, /metrics and logs, from the real process.

Metrics are parsed with prometheus_client's own parsers (text and OpenMetrics), so a
malformed exposition fails here before it fails in Prometheus.
"""

from __future__ import annotations

import json
import re
import uuid

import aiohttp
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families

from memop import __version__
from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.testing.apiserver.server import TOKEN
from memop.testing.envtest import Kube
from memop.testing.memcached import available, memcached_manifest
from memop.testing.process import MemopProcess, MemopProcesses, free_port, sample_value
from memop.testing.wait import wait_for

TIMEOUT = 30
CONTROLLER = "memcached"


async def gone(client: Client, namespace: str, name: str) -> bool:
    try:
        await client.get(MEMCACHEDS, name, namespace)
    except NotFound:
        return True
    return False


async def status_of(process: MemopProcess, path: str) -> int:
    status, _ = await process.get(path)
    return status


async def test_healthz_always_and_readyz_once_the_cache_has_synced(
    kube: Kube, client: Client, memops: MemopProcesses
) -> None:
    server = kube.fake
    # Hold memop's LISTs of Memcacheds (its start-up check, then its informer's) so that it
    # is alive but not synced for 3 s, a window the first poll cannot miss.
    server.faults.delay(1.5, verb="list", resource="memcacheds", user_agent="memop/")
    memop = await memops.start()
    await wait_for(lambda: status_of(memop, "/healthz"), timeout=TIMEOUT)
    status, body = await memop.get("/readyz")
    assert status == 500, body
    assert body.startswith("informers: "), body
    status, body = await memop.get("/healthz")
    assert (status, body) == (200, "ok")
    server.faults.clear()
    await memop.wait_ready(TIMEOUT)
    status, body = await memop.get("/readyz", Accept="text/plain")
    assert (status, body) == (200, "ok")
    status, body = await memop.get("/readyz?verbose")
    assert (status, body) == (200, "[+]informers ok\nok\n")


async def test_metrics_are_all_there_and_move_when_work_happens(
    kube: Kube, client: Client, namespace: str, memops: MemopProcesses
) -> None:
    memop = await memops.start("--max-concurrent-reconciles", "3")
    await memop.wait_ready(TIMEOUT)
    before = await memop.samples()
    c = {"controller": CONTROLLER}
    q = {"name": CONTROLLER, "controller": CONTROLLER}
    for result in ("success", "error", "requeue", "requeue_after"):
        assert sample_value(before, "controller_runtime_reconcile_total", **c, result=result) is not None, (
            result
        )
    present = [
        ("controller_runtime_reconcile_errors_total", c),
        ("controller_runtime_terminal_reconcile_errors_total", c),
        ("controller_runtime_reconcile_panics_total", c),
        ("controller_runtime_reconcile_time_seconds_count", c),
        ("controller_runtime_active_workers", c),
        ("workqueue_depth", q),
        ("workqueue_adds_total", q),
        ("workqueue_retries_total", q),
        ("workqueue_queue_duration_seconds_count", q),
        ("workqueue_work_duration_seconds_count", q),
        ("workqueue_unfinished_work_seconds", q),
        ("workqueue_longest_running_processor_seconds", q),
        ("rest_client_requests_total", {}),
        ("rest_client_request_duration_seconds_count", {}),
        ("process_cpu_seconds_total", {}),
        ("process_resident_memory_bytes", {}),
        ("process_start_time_seconds", {}),
        ("process_open_fds", {}),
    ]
    for name, labels in present:
        assert sample_value(before, name, **labels) is not None, (name, labels)
    assert sample_value(before, "controller_runtime_max_concurrent_reconciles", **c) == 3
    assert sample_value(before, "memop_build_info", version=__version__) == 1
    assert sample_value(before, "rest_client_requests_total", method="GET", code="200")

    await client.create(MEMCACHEDS, memcached_manifest("counted", size=2), namespace)
    await wait_for(lambda: available(client, namespace, "counted"), timeout=TIMEOUT)
    after = await memop.samples()

    def moved(metric: str, /, **labels: str) -> float:
        old = sample_value(before, metric, **labels) or 0.0
        new = sample_value(after, metric, **labels)
        assert new is not None, metric
        return new - old

    assert moved("controller_runtime_reconcile_total", **c, result="success") >= 1
    assert moved("controller_runtime_reconcile_time_seconds_count", **c) >= 1
    assert moved("workqueue_adds_total", **q) >= 1
    assert moved("workqueue_queue_duration_seconds_count", **q) >= 1
    assert moved("workqueue_work_duration_seconds_count", **q) >= 1
    assert moved("rest_client_requests_total", method="POST", code="201") >= 1  # the Deployment
    assert moved("rest_client_requests_total", method="PATCH", code="200") >= 2  # finalizer, status
    assert sample_value(after, "workqueue_depth", **q) == 0
    assert sample_value(after, "controller_runtime_active_workers", **c) == 0


async def test_openmetrics_by_accept_header(client: Client, memops: MemopProcesses) -> None:
    memop = await memops.start()
    await memop.wait_ready(TIMEOUT)
    url = await memop.url("/metrics")
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        accept = "application/openmetrics-text; version=1.0.0; charset=utf-8"
        async with http.get(url, headers={"Accept": accept}) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
            text = await response.text()
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_families(text)}  # type: ignore[no-untyped-call]
    reconciles = families["controller_runtime_reconcile"]
    assert reconciles.type == "counter"
    assert {s.labels["result"] for s in reconciles.samples if s.name.endswith("_total")} == {
        "success", "error", "requeue", "requeue_after"
    }  # fmt: skip
    assert families["memop_build_info"].samples[0].labels == {"name": "memop", "version": __version__}


async def test_probes_and_metrics_share_one_server_when_the_addresses_are_equal(
    client: Client, memops: MemopProcesses
) -> None:
    address = f"127.0.0.1:{free_port()}"
    memop = await memops.start("--metrics-bind-address", address, "--health-probe-bind-address", address)
    await memop.wait_ready(TIMEOUT)
    serving = [r["msg"] for r in memop.records if r.get("msg", "").startswith("serving ")]
    assert serving == [f"serving /healthz, /readyz, /metrics on {address}"]
    async with aiohttp.ClientSession() as http:
        for path in ("/healthz", "/readyz", "/metrics"):
            async with http.get(f"http://{address}{path}") as response:
                assert response.status == 200, path


async def test_disabled_endpoints_are_not_served(client: Client, memops: MemopProcesses) -> None:
    memop = await memops.start(env={"METRICS_BIND_ADDRESS": "127.0.0.1:1"}, metrics=False)
    await memop.wait_ready(TIMEOUT)  # --metrics-bind-address 0 wins over the variable
    assert memop.address("/metrics") is None


JSON_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
CONSOLE_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} (DEBUG|INFO|WARNING|ERROR) +[.\w]+ \S")


async def exercise(client: Client, namespace: str) -> None:
    """Create, converge and delete a Memcached: reconcile logs at info include the finalizer's."""
    await client.create(MEMCACHEDS, memcached_manifest("logged"), namespace)
    await wait_for(lambda: available(client, namespace, "logged"), timeout=TIMEOUT)
    await client.delete(MEMCACHEDS, "logged", namespace)
    await wait_for(lambda: gone(client, namespace, "logged"), timeout=TIMEOUT)


async def test_json_logs_carry_the_fields_and_the_reconcile_context_and_no_token(
    kube: Kube, client: Client, namespace: str, memops: MemopProcesses
) -> None:
    memop = await memops.start("--log-level", "debug")
    await memop.wait_ready(TIMEOUT)
    await exercise(client, namespace)
    finalized = await memop.wait_log(lambda r: r.get("msg") == "finalizer removed", timeout=TIMEOUT)
    assert await memop.terminate() == 0
    assert finalized["controller"] == CONTROLLER
    assert finalized["namespace"] == namespace
    assert finalized["name"] == "logged"
    reconcile_id = uuid.UUID(finalized["reconcileID"])  # a random UUID, as controller-runtime's
    assert (str(reconcile_id), reconcile_id.version) == (finalized["reconcileID"], 4)
    assert memop.lines
    for line in memop.lines:
        record = json.loads(line)  # every line is one JSON object
        assert isinstance(record, dict), line
        assert JSON_TS.match(record["ts"]), line
        assert record["level"] in ("debug", "info", "warning", "error"), line
        assert record["logger"], line
        assert isinstance(record["msg"], str), line
    assert any(r["level"] == "debug" for r in memop.records)
    output = "\n".join(memop.lines)
    assert TOKEN not in output
    assert "Bearer" not in output


async def test_console_logs_are_one_readable_line_each_and_no_token(
    kube: Kube, client: Client, namespace: str, memops: MemopProcesses
) -> None:
    memop = await memops.start("--log-format", "console", "--log-level", "debug")

    def logged(text: str) -> bool:
        return any(text in line for line in memop.lines)

    await wait_for(lambda: logged("controller started"), timeout=TIMEOUT)
    await exercise(client, namespace)
    await wait_for(lambda: logged("finalizer removed"), timeout=TIMEOUT)
    assert await memop.terminate() == 0
    assert not memop.records, "console format printed JSON"
    for line in memop.lines:
        assert CONSOLE_LINE.match(line), line
    finalized = next(line for line in memop.lines if "finalizer removed" in line)
    assert f"controller={CONTROLLER} namespace={namespace} name=logged reconcileID=" in finalized
    output = "\n".join(memop.lines)
    assert TOKEN not in output
    assert "Bearer" not in output
