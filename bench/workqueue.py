"""Workqueue throughput: add + get + done cycles per second over distinct keys.

Run from the repository root as ``python bench/workqueue.py [--keys N] [--rounds R]
[--repeats P]``; prints one JSON object. Defaults: 10,000 keys, 5 rounds per run, 7 runs.

Each round adds every key, then takes and finishes each one, on one event loop pinned to one
CPU. Measured with metrics on (what production runs) and off, for ``Request`` keys (the
controller's item type, a NamedTuple, so its hash runs in C) and for plain strings.
``workers_*`` runs the same cycles through 8 worker tasks that block in ``get()`` while a
producer adds the keys in batches, so it includes the suspend/wake path. Every run checks that
each added key was taken and finished exactly once and that the queue ends empty.
"""

from __future__ import annotations

import argparse
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

from memop.runtime.controller.reconcile import Request
from memop.runtime.workqueue.workqueue import WorkQueue

WORKERS = 8
BATCH = 100

_names = itertools.count()


def _queue(metrics: bool) -> WorkQueue[Hashable]:
    return WorkQueue(f"bench-{next(_names)}", controller="bench", metrics=metrics)


async def _sequential(keys: Sequence[Hashable], rounds: int, metrics: bool) -> float:
    queue = _queue(metrics)
    get, done, add = queue.get, queue.done, queue.add
    started = time.perf_counter()
    for _ in range(rounds):
        for key in keys:
            add(key)
        for _ in range(len(keys)):
            done(await get())
    elapsed = time.perf_counter() - started
    assert len(queue) == 0
    return rounds * len(keys) / elapsed


async def _workers(keys: Sequence[Hashable], rounds: int, metrics: bool) -> float:
    queue = _queue(metrics)
    total = rounds * len(keys)
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
    for _ in range(rounds):
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
    assert finished == total
    assert len(queue) == 0
    return total / elapsed


async def _measure(
    kind: str, keys: Sequence[Hashable], args: argparse.Namespace, metrics: bool
) -> dict[str, float]:
    run = _sequential if kind == "sequential" else _workers
    await run(keys[:1000], args.rounds, metrics)  # warm-up
    rates = []
    for _ in range(args.repeats):
        gc.collect()
        rates.append(await run(keys, args.rounds, metrics))
    return {"median": round(statistics.median(rates)), "best": round(max(rates))}


async def _main(args: argparse.Namespace) -> dict[str, object]:
    request_keys: list[Hashable] = [Request("default", f"memcached-{i}") for i in range(args.keys)]
    string_keys: list[Hashable] = [f"default/memcached-{i}" for i in range(args.keys)]
    result: dict[str, object] = {
        "benchmark": "workqueue add+get+done cycles per second",
        "keys": args.keys,
        "rounds_per_run": args.rounds,
        "runs": args.repeats,
        "python": platform.python_version(),
    }
    for kind in ("sequential", "workers"):
        for key_name, keys in (("request", request_keys), ("string", string_keys)):
            for metrics in (True, False):
                label = f"{kind}_{key_name}_metrics_{'on' if metrics else 'off'}"
                result[label] = await _measure(kind, keys, args, metrics)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys (default 10000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every key per run (default 5)")
    parser.add_argument("--repeats", type=int, default=7, help="measured runs of each (default 7)")
    args = parser.parse_args()
    if args.keys < 1 or args.rounds < 1 or args.repeats < 1:
        parser.error("--keys, --rounds and --repeats must be at least 1")
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[0]})
    result = asyncio.run(_main(args))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
