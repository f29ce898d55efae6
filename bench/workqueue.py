"""Workqueue throughput: add + get + done cycles per second over 10,000 distinct keys.

Run from the repository root as ``python bench/workqueue.py``; prints one JSON object.

Each round adds every key, then takes and finishes each one, on one event loop pinned to one
CPU. Measured with metrics on (what production runs) and off, for ``Request`` keys (the
controller's item type, a frozen dataclass whose hash is computed in Python) and for plain
strings. ``workers_*`` runs the same cycles through 8 worker tasks that block in ``get()``
while a producer adds the keys in batches, so it includes the suspend/wake path.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Hashable, Sequence

from memop.runtime.reconcile import Request
from memop.runtime.workqueue import WorkQueue

KEYS = 10_000
ROUNDS = 5
REPEATS = 7
WORKERS = 8
BATCH = 100

_names = itertools.count()


def _queue(metrics: bool) -> WorkQueue[Hashable]:
    return WorkQueue(f"bench-{next(_names)}", controller="bench", metrics=metrics)


async def _sequential(keys: Sequence[Hashable], metrics: bool) -> float:
    queue = _queue(metrics)
    get, done, add = queue.get, queue.done, queue.add
    started = time.perf_counter()
    for _ in range(ROUNDS):
        for key in keys:
            add(key)
        for _ in range(len(keys)):
            done(await get())
    elapsed = time.perf_counter() - started
    assert len(queue) == 0
    return ROUNDS * len(keys) / elapsed


async def _workers(keys: Sequence[Hashable], metrics: bool) -> float:
    queue = _queue(metrics)
    total = ROUNDS * len(keys)
    finished = 0
    all_done = asyncio.get_running_loop().create_future()

    async def worker() -> None:
        nonlocal finished
        while True:
            item = await queue.get()
            queue.done(item)
            finished += 1
            if finished == total and not all_done.done():
                all_done.set_result(None)

    tasks = [asyncio.create_task(worker()) for _ in range(WORKERS)]
    await asyncio.sleep(0)  # let every worker block in get()
    started = time.perf_counter()
    for _ in range(ROUNDS):
        for offset in range(0, len(keys), BATCH):
            for key in keys[offset : offset + BATCH]:
                queue.add(key)
            await asyncio.sleep(0)  # hand the loop to the workers, as a watch stream would
    await all_done
    elapsed = time.perf_counter() - started
    queue.shutdown()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return total / elapsed


async def _measure(kind: str, keys: Sequence[Hashable], metrics: bool) -> dict[str, float]:
    run = _sequential if kind == "sequential" else _workers
    await run(keys[:1000], metrics)  # warm-up
    rates = []
    for _ in range(REPEATS):
        gc.collect()
        rates.append(await run(keys, metrics))
    return {"median": round(statistics.median(rates)), "best": round(max(rates))}


async def _main() -> dict[str, object]:
    request_keys: list[Hashable] = [Request("default", f"memcached-{i}") for i in range(KEYS)]
    string_keys: list[Hashable] = [f"default/memcached-{i}" for i in range(KEYS)]
    result: dict[str, object] = {
        "benchmark": "workqueue add+get+done cycles per second",
        "keys": KEYS,
        "rounds_per_run": ROUNDS,
        "runs": REPEATS,
        "python": platform.python_version(),
    }
    for kind in ("sequential", "workers"):
        for key_name, keys in (("request", request_keys), ("string", string_keys)):
            for metrics in (True, False):
                label = f"{kind}_{key_name}_metrics_{'on' if metrics else 'off'}"
                result[label] = await _measure(kind, keys, metrics)
    return result


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[0]})
    result = asyncio.run(_main())
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
