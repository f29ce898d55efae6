"""Garbage-collector thresholds for a process whose heap is a large cache of long-lived JSON, and
the collector's time as a metric.

An informer cache (and the in-memory API server's store) is mostly dicts and lists decoded
from JSON: acyclic, so reference counting frees them, and long-lived. CPython's default
thresholds (700, 10, 10) consider a full collection every 70,000 net allocations, and run one
whenever the long-lived heap has grown by a quarter: while a cache fills, the collector rescans
all of it again and again. That was more than half of the CPU of listing 20,000 pods
(``bench/reflector.py``) and 15% of the in-memory server's CPU while 1,000 Memcacheds converged
(``bench/converge.py``). With young collections every 10,000 net allocations, a full one is
considered every million: the cyclic garbage an asyncio program makes (futures, tracebacks)
is still found within a few milliseconds of work, and the cache is rescanned far less often.

``memop_gc_collection_seconds_total{generation}`` counts the CPU seconds the collector spent
(prometheus-client's ``python_gc_collections_total`` counts the collections), so that what it
costs at scale is measured, not guessed (``bench/converge.py`` reports both).
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Counter

GC_THRESHOLDS = (10_000, 10, 10)

GC_SECONDS = Counter(
    "memop_gc_collection_seconds_total",
    "CPU seconds CPython's cyclic garbage collector spent collecting, per generation",
    ["generation"],
)
# The children, made once: the callback runs at every collection and must stay cheap.
_BY_GENERATION = tuple(GC_SECONDS.labels(str(generation)) for generation in range(3))


class _Timer:
    """The ``gc.callbacks`` entry: two clock reads per collection.

    The clock is the collecting thread's CPU time, so a busy machine's preemption in the middle
    of a collection does not count. Collections do not nest (the collector holds the GIL and
    guards against re-entry), so one start time suffices."""

    def __init__(self) -> None:
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            generation = info.get("generation", 0)
            if 0 <= generation < len(_BY_GENERATION):
                _BY_GENERATION[generation].inc(time.thread_time() - self._started)


_TIMER = _Timer()


def track_gc_time() -> None:
    """Count the collector's time in ``memop_gc_collection_seconds_total`` (idempotent)."""
    if _TIMER not in gc.callbacks:
        gc.callbacks.append(_TIMER)


def tune_gc() -> None:
    """Set :data:`GC_THRESHOLDS` for this process and count the collector's time (call it once,
    at start-up)."""
    gc.set_threshold(*GC_THRESHOLDS)
    track_gc_time()
