"""The webhook server's Prometheus metrics, with controller-runtime's names, labels and buckets
(``pkg/webhook/internal/metrics``), so its dashboards and alerts work unchanged.

The ``webhook`` label is the path a handler is served at (``/mutate-...``, ``/validate-...``,
``/convert``), as controller-runtime labels it. A handler's series exist from its registration:
codes ``200`` and ``500`` at 0, as controller-runtime initialises them.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from prometheus_client import Counter, Gauge, Histogram

# prometheus.ExponentialBuckets(10e-9, 10, 12): 10 ns .. 1000 s, as the workqueue's.
LATENCY_BUCKETS = tuple(10e-9 * 10**i for i in range(12))

REQUESTS_TOTAL = Counter(
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code.",
    ["webhook", "code"],
)
LATENCY = Histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
    buckets=LATENCY_BUCKETS,
)
IN_FLIGHT = Gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ["webhook"],
)

Handler = Callable[[bytes, str], Awaitable[tuple[int, bytes]]]


def instrumented(path: str, handler: Handler) -> Handler:
    """``handler`` (body and Content-Type in, HTTP status and body out) counted, timed and
    tracked in flight under ``webhook=path``. A handler that raises counts as a 500."""
    counts = {code: REQUESTS_TOTAL.labels(path, str(code)) for code in (200, 500)}
    latency = LATENCY.labels(path)
    in_flight = IN_FLIGHT.labels(path)

    async def serve(body: bytes, content_type: str) -> tuple[int, bytes]:
        in_flight.inc()
        start = time.perf_counter()
        status = 500
        try:
            status, reply = await handler(body, content_type)
            return status, reply
        finally:
            latency.observe(time.perf_counter() - start)
            count = counts.get(status)
            if count is None:
                count = counts[status] = REQUESTS_TOTAL.labels(path, str(status))
            count.inc()
            in_flight.dec()

    return serve
