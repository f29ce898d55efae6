"""What memop costs when there is nothing to do: requests, CPU and memory with N converged CRs.

Run from the repository root as ``python bench/steady.py --crs 1000``; prints one JSON object.
``python bench/steady.py --crs 10000 --size 3`` is the memory figure with 10,000 Memcacheds,
their Deployments and 30,000 pods in memop's cache.

The cluster is the one of bench/converge.py (the in-memory API server with simulated
controllers in its own process, whose request log counts memop's requests exactly). The bench
creates ``--crs`` Memcacheds of ``--size`` over ``--namespaces`` namespaces, starts memop, waits
until every Memcached is Available with all its pods ready and memop has sent nothing for
``--quiet`` seconds, then measures a window of ``--seconds`` (60) in which nothing changes:

- ``requests_per_minute``: memop's requests in the window by ``verb resource``, per minute.
  Expected: none at all without leader election (watches end only after 5 to 10 minutes, and
  memop's reflectors resume them without a LIST); with ``--leader-elect``, the lease renewals
  (one update per retry period, 2 s by default: 30 a minute);
- ``cpu_seconds``: memop's CPU (``/proc/<pid>/stat``) in the window;
- ``rss_mb``: memop's resident memory at the end of the window, and its peak (``VmHWM``)
  since it started, which includes converging all the CRs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from converge import (
    Tracker,
    add_bench_options,
    bench_namespaces,
    cluster,
    create_memcacheds,
    create_namespaces,
    log_summary,
    memop_args,
    metric_sum,
    plan,
    proc_stats,
    scrape,
    wait_idle,
    wait_quiet,
    wait_watching,
)

from memop.testing.process import MemopProcess


async def run(args: argparse.Namespace) -> dict[str, Any]:
    namespaces = bench_namespaces(args)
    keys = plan(args.crs, namespaces)
    with tempfile.TemporaryDirectory(prefix="memop-steady-") as tmp:
        async with cluster(args, Path(tmp)) as where:
            client, server = where.client, where.server
            await create_namespaces(client, namespaces)
            tracker = Tracker(client)
            await tracker.start()
            extra = ["--leader-elect", "--leader-election-namespace", "default"] if args.leader_elect else []
            extra += args.memop_arg
            watched = [] if args.all_namespaces else namespaces
            memop = MemopProcess(where.kubeconfig, memop_args(args.workers, watched, extra))
            try:
                tracker.expect(dict.fromkeys(keys, args.size))
                t0 = time.monotonic()
                # The CRs exist before memop starts, as after a restart: its first LIST holds them all.
                await create_memcacheds(client, keys, args.size, args.create_concurrency)
                await memop.start()
                await memop.wait_ready(timeout=args.timeout)
                if server:
                    await wait_watching(server, "memop", 3 * (len(watched) or 1))
                await asyncio.wait_for(tracker.all_settled.wait(), args.timeout)
                t_settled = time.monotonic()
                if server:
                    await wait_quiet(server, 0, "memop", quiet=args.quiet, timeout=args.timeout)
                await wait_idle(memop, args.crs, timeout=args.timeout)

                before = proc_stats(memop.pid)
                metrics_before = await scrape(memop)
                log_start = await server.log_end() if server else 0
                window_start = time.monotonic()
                # The measurement itself: a fixed window in which nothing is supposed to happen.
                await asyncio.sleep(args.seconds)
                window = time.monotonic() - window_start
                after = proc_stats(memop.pid)
                metrics_after = await scrape(memop)
                requests = await server.requests(log_start) if server else None
                exited = memop.returncode
            finally:
                await memop.stop()
                await tracker.stop()

    minutes = window / 60
    report: dict[str, Any] = {
        "benchmark": "steady",
        "crs": args.crs,
        "size": args.size,
        "pods": args.crs * args.size,
        "namespaces": args.namespaces,
        "watch": "all namespaces" if args.all_namespaces else "each namespace",
        "leader_elect": args.leader_elect,
        "converge_seconds": round(t_settled - t0, 1),
        "window_seconds": round(window, 1),
        "cpu_seconds": round(after.cpu_seconds - before.cpu_seconds, 2),
        "rss_mb": {"end": after.rss_mb, "peak": after.peak_rss_mb},
        "reconciles_in_window": int(
            metric_sum(metrics_after, "controller_runtime_reconcile_total")
            - metric_sum(metrics_before, "controller_runtime_reconcile_total")
        ),
        "memop_exited": exited,
        "memop_warnings_and_errors": log_summary(memop),
    }
    if requests is not None:
        calls = requests.by_call("memop")
        report["requests_per_minute"] = {k: round(v / minutes, 1) for k, v in sorted(calls.items())}
        report["requests_per_minute_total"] = round(sum(calls.values()) / minutes, 1)
        report["requests_counted_from"] = "the API server's request log (user agent memop/...)"
    else:
        rest = metric_sum(metrics_after, "rest_client_requests_total") - metric_sum(
            metrics_before, "rest_client_requests_total"
        )
        report["requests_per_minute_total"] = round(rest / minutes, 1)
        report["requests_counted_from"] = "memop's rest_client_requests_total"
    report["cpus"] = os.cpu_count()
    report["python"] = platform.python_version()
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_bench_options(parser)
    parser.add_argument("--size", type=int, default=1, help="replicas per Memcached (default 1)")
    parser.add_argument("--seconds", type=float, default=60.0, help="the idle window (default 60)")
    parser.add_argument(
        "--quiet", type=float, default=2.0, help="seconds without a memop request before the window"
    )
    parser.add_argument("--leader-elect", action="store_true", help="run memop with leader election")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
