"""Prometheus metrics with controller-runtime's names and labels, so existing dashboards work.

All series live in prometheus-client's default registry, which ``/metrics`` serves. Label sets
for a controller or queue are created (at 0) when it starts, like controller-runtime does, so a
rate() over a fresh process is defined from the first scrape.

Gauges that describe work in flight right now (``workqueue_unfinished_work_seconds``,
``workqueue_longest_running_processor_seconds``) are computed at scrape time by a collector
that asks each live queue, instead of a background task refreshing them (client-go uses a
500 ms ticker): nothing runs when nobody scrapes, and the value is never stale.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sized
from typing import Protocol, TypeVar

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

# controller-runtime pkg/internal/controller/metrics
RECONCILE_TIME_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    1.25,
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5,
    6,
    7,
    8,
    9,
    10,
    15,
    20,
    25,
    30,
    40,
    50,
    60,
)
# controller-runtime pkg/metrics/workqueue.go: ExponentialBuckets(10e-9, 10, 12)
WORKQUEUE_DURATION_BUCKETS = tuple(10e-9 * 10**i for i in range(12))

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
)
TERMINAL_RECONCILE_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"],
)
RECONCILE_PANICS = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics (unexpected exceptions) per controller",
    ["controller"],
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=RECONCILE_TIME_BUCKETS,
)
MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
)

WORKQUEUE_DEPTH = Gauge("workqueue_depth", "Current depth of workqueue", ["name", "controller"])
WORKQUEUE_ADDS = Counter(
    "workqueue_adds_total", "Total number of adds handled by workqueue", ["name", "controller"]
)
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"],
    buckets=WORKQUEUE_DURATION_BUCKETS,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes",
    ["name", "controller"],
    buckets=WORKQUEUE_DURATION_BUCKETS,
)
WORKQUEUE_RETRIES = Counter(
    "workqueue_retries_total", "Total number of retries handled by workqueue", ["name", "controller"]
)

REST_CLIENT_REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host",
    ["code", "method", "host"],
)
REST_CLIENT_REQUEST_DURATION = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds, broken down by verb and host",
    ["verb", "host"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
)

LEADER_ELECTION_MASTER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease.",
    ["name"],
)


# Sharding (memop.runtime.sharding): memop's own, no controller-runtime counterpart.
SHARDS_OWNED = Gauge("memop_sharding_shards_owned", "Shards of the ring this replica works on", ["group"])
SHARDS = Gauge(
    "memop_sharding_shards", "Shards of the ring (--shards): what the replicas should own together", ["group"]
)
SHARDING_MEMBERS = Gauge(
    "memop_sharding_members", "Live members of the sharding group, as this replica sees them", ["group"]
)
SHARD_RING_CHANGES = Counter(
    "memop_sharding_ring_changes_total",
    "Times the assignment of shards to members changed, as this replica computed it",
    ["group"],
)
SHARD_HANDOVER_SECONDS = Histogram(
    "memop_sharding_handover_seconds",
    "Seconds from a shard being assigned to this replica until it took the shard's Lease",
    ["group"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 21, 34, 55),
)
SHARDING_SERVER_SIDE = Gauge(
    "memop_sharding_server_side",
    "1 while the API server filters lists and watches by shardSelector, 0 while memop filters "
    "them itself (the server ignores the selector)",
    ["group"],
)
SHARDING_OBJECTS_FILTERED = Counter(
    "memop_sharding_objects_filtered_total",
    "Objects the API server sent that belong to no shard of this replica, dropped by memop "
    "(non-zero: the server ignored the shardSelector)",
    ["resource"],
)
WATCH_RECEIVED_BYTES = Counter(
    "memop_watch_received_bytes_total",
    "Bytes of watch streams received from the API server, per resource",
    ["resource"],
)
REFLECTOR_OBJECTS_RECEIVED = Counter(
    "memop_reflector_objects_received_total",
    "Objects received by the cache's reflectors, per resource, from LISTs and from watch events "
    "(bookmarks excluded)",
    ["resource", "source"],
)
SHARDING_OBJECTS_OWNED = Gauge(
    "memop_sharding_objects_owned",
    "Objects of the resource in this replica's shards, held in its cache",
    ["resource"],
)


class InFlightWork(Protocol):
    """What a workqueue reports about the items its workers hold right now."""

    name: str
    controller: str

    def unfinished_work_seconds(self) -> float: ...

    def longest_running_processor_seconds(self) -> float: ...


class _InFlightCollector(Collector):
    def __init__(self) -> None:
        self.queues: weakref.WeakSet[InFlightWork] = weakref.WeakSet()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed "
            "by work_duration. Large values indicate stuck threads.",
            labels=["name", "controller"],
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels=["name", "controller"],
        )
        for queue in list(self.queues):
            labels = [queue.name, queue.controller]
            unfinished.add_metric(labels, queue.unfinished_work_seconds())
            longest.add_metric(labels, queue.longest_running_processor_seconds())
        yield unfinished
        yield longest


_IN_FLIGHT = _InFlightCollector()
REGISTRY.register(_IN_FLIGHT)


_Owner = TypeVar("_Owner")


def gauge_reads_size(child: Gauge, owner: _Owner, sized: Callable[[_Owner], Sized]) -> None:
    """Make the gauge ``child`` read ``len(sized(owner))`` at scrape time (0 once ``owner`` is
    gone), for a count the owner keeps anyway: no locked inc and dec on every change. The weak
    reference lets the owner be collected; a newer owner with the same labels takes the series
    over."""
    this = weakref.ref(owner)

    def size() -> float:
        live = this()
        return float(len(sized(live))) if live is not None else 0.0

    child.set_function(size)


def track_in_flight(queue: InFlightWork) -> None:
    """Report ``queue``'s in-flight gauges at every scrape for as long as it is alive."""
    _IN_FLIGHT.queues.add(queue)


def init_workqueue_series(name: str, controller: str) -> None:
    """Create a queue's series at 0 so they exist before the first add."""
    WORKQUEUE_DEPTH.labels(name, controller).set(0)
    WORKQUEUE_ADDS.labels(name, controller)
    WORKQUEUE_QUEUE_DURATION.labels(name, controller)
    WORKQUEUE_WORK_DURATION.labels(name, controller)
    WORKQUEUE_RETRIES.labels(name, controller)


def init_controller_series(controller: str, max_concurrent_reconciles: int) -> None:
    """Create a controller's series at 0, as controller-runtime does in initMetrics."""
    for result in ("success", "error", "requeue", "requeue_after"):
        RECONCILE_TOTAL.labels(controller, result)
    RECONCILE_ERRORS.labels(controller)
    TERMINAL_RECONCILE_ERRORS.labels(controller)
    RECONCILE_PANICS.labels(controller)
    RECONCILE_TIME.labels(controller)
    ACTIVE_WORKERS.labels(controller).set(0)
    MAX_CONCURRENT_RECONCILES.labels(controller).set(max_concurrent_reconciles)


BUILD_INFO = Gauge(
    "memop_build_info",
    "A metric with a constant '1' value labeled by the operator running on memop and its version.",
    ["name", "version"],
)


def set_build_info(version: str, name: str = "memop") -> None:
    """Publish ``memop_build_info{name, version}`` = 1, for joins in queries and dashboards:
    ``name`` is the operator's project (``memop`` for memop's own), ``version`` its version."""
    BUILD_INFO.labels(name, version).set(1)
