"""Garbage-collector thresholds for a process whose heap is a large cache of long-lived JSON.

An informer cache (and the in-memory API server's store) is mostly dicts and lists decoded
from JSON: acyclic, so reference counting frees them, and long-lived. CPython's default
thresholds (700, 10, 10) consider a full collection every 70,000 net allocations, and run one
whenever the long-lived heap has grown by a quarter: while a cache fills, the collector rescans
all of it again and again. That was more than half of the CPU of listing 20,000 pods
(``bench/reflector.py``) and 15% of the in-memory server's CPU while 1,000 Memcacheds converged
(``bench/converge.py``). With young collections every 10,000 net allocations, a full one is
considered every million: the cyclic garbage an asyncio program makes (futures, tracebacks)
is still found within a few milliseconds of work, and the cache is rescanned far less often.
"""

from __future__ import annotations

import gc

GC_THRESHOLDS = (10_000, 10, 10)


def tune_gc() -> None:
    """Set :data:`GC_THRESHOLDS` for this process (call it once, at start-up)."""
    gc.set_threshold(*GC_THRESHOLDS)
