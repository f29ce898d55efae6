"""``converge.py --side-by-side``: memop, the floor and any ``--operator`` converging at the same time.

In the runs of ``converge.py`` each process converges alone, one after the other, and on a
small machine shared with a real control plane a process's CPU for the same work follows how
long the server makes its run last (the floor alone took 8.6 to 14.3 CPU-s for the same 10,000
Memcacheds): a ratio of two runs carries both runs' spread. Here, in each round, on one control
plane (fresh with ``--fresh-cmd``), every process converges ``--crs`` Memcacheds of its own, in
namespaces of its own that it watches by name, the bench's creates alternating between them:
they meet the same server at the same moments, and their CPU for their own share of the work
compares within the round (two identical memops differed by 2-7%).

Per round and process: CPU from its start and from the first create to the moment its own
Memcacheds had all converged, the wall time to that moment, voluntary context switches per CR
(how often it slept waiting for the server), peak RSS; memop's also its watched events and
reconciles per CR (its metrics) and its warning and error lines. Per size: the medians, each
process's CPU over the floor's (the ratio of the medians, and round by round).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from converge import (
    FloorProcess,
    Key,
    ProcStats,
    Tracker,
    bench_namespaces,
    cluster,
    create_memcacheds,
    create_namespaces,
    log_summary,
    machine,
    median,
    memop_args,
    metric_sum,
    plan,
    proc_stats,
    refresh_control_plane,
    say_run_done,
    scrape,
    setup_report,
    wait_default_service_accounts,
    wait_operator_ready,
    watched_per_cr,
)
from otheroperator import OperatorProcess

from memop.testing.process import MemopProcess

MEMOP, FLOOR = "memop", "floor"


class Participant:
    """One process of the round, its namespaces, Memcacheds and tracker."""

    def __init__(self, mode: str, namespaces: list[str], crs: int, tracker: Tracker) -> None:
        self.mode = mode
        self.namespaces = namespaces
        self.keys: list[Key] = plan(crs, namespaces)
        self.tracker = tracker
        self.process: Any = None
        self.pid = 0
        self.before: ProcStats | None = None
        self.metrics_before: Any = None
        self.report: dict[str, Any] = {}

    async def start(self, args: argparse.Namespace, kubeconfig: str, client: Any, log_dir: Path) -> None:
        if self.mode == MEMOP:
            memop = MemopProcess(kubeconfig, memop_args(args.workers, self.namespaces, args.memop_arg))
            await memop.start()
            await memop.wait_ready(timeout=120)
            self.process = memop
        elif self.mode == FLOOR:
            self.process = await FloorProcess(
                kubeconfig, self.namespaces, args.workers, owned=self.namespaces, watches=False, events=False,
                event_loop=args.floor_event_loop,
            ).start()  # fmt: skip
        else:
            template = dict(args.operator)[self.mode]
            operator = OperatorProcess(
                self.mode, template, kubeconfig=kubeconfig, workers=args.workers,
                namespaces=self.namespaces, log_path=log_dir / f"{self.mode}.log",
            )  # fmt: skip
            self.process = await operator.start()
            await wait_operator_ready(self.tracker, client, operator, self.namespaces[0], timeout=120)
        self.pid = self.process.pid
        self.tracker.expect(dict.fromkeys(self.keys, 1))

    async def mark_start(self) -> None:
        self.before = proc_stats(self.pid)
        if self.mode == MEMOP:
            self.metrics_before = await scrape(self.process)

    async def wait_converged(self, started: float, crs: int) -> None:
        await self.tracker.all_converged.wait()
        after = proc_stats(self.pid)
        assert self.before is not None
        self.report = {
            "namespaces": self.namespaces,
            "wall_seconds": round(max(self.tracker.converged_at.values()) - started, 2),
            "cpu_seconds_from_start": round(after.cpu_seconds, 2),
            "cpu_seconds_to_converge": round(after.cpu_seconds - self.before.cpu_seconds, 2),
            "voluntary_switches_per_cr": round(
                (after.voluntary_switches - self.before.voluntary_switches) / crs, 2
            ),
            "peak_rss_mb": after.peak_rss_mb,
        }
        if self.mode == MEMOP:
            metrics = await scrape(self.process)
            reconciles = metric_sum(metrics, "controller_runtime_reconcile_total") - metric_sum(
                self.metrics_before, "controller_runtime_reconcile_total"
            )
            self.report["watched_per_cr"] = watched_per_cr(self.metrics_before, metrics, crs)
            self.report["reconciles_per_cr"] = round(reconciles / crs, 3)

    async def stop(self) -> None:
        if self.process is None:
            return
        if self.mode == MEMOP:
            await self.process.stop()
            records = self.process.records
            self.report["error_lines"] = sum(1 for record in records if record.get("level") == "error")
            self.report["warnings_and_errors"] = log_summary(self.process)
        elif self.mode == FLOOR:
            outcome = await self.process.finish()
            self.report["errors"] = outcome.get("errors")
        else:
            self.report["exit_status_on_sigterm"] = await self.process.stop()
            self.report["log"] = self.process.log_summary()
        await self.tracker.stop()


async def one_round(args: argparse.Namespace, modes: list[str]) -> dict[str, dict[str, Any]]:
    """Every mode's process converging its own Memcacheds on one control plane, at once."""
    await refresh_control_plane(args)
    base = bench_namespaces(args)
    with tempfile.TemporaryDirectory(prefix="memop-bench-") as tmp:
        async with cluster(args, Path(tmp)) as where:
            everyone: list[Participant] = []
            try:
                for index, mode in enumerate(modes):
                    namespaces = [f"{name}-p{index}" for name in base]
                    await create_namespaces(where.client, namespaces)
                    if args.fresh_cmd:
                        await wait_default_service_accounts(where.client, namespaces, args.timeout)
                    tracker = Tracker(where.client)
                    await tracker.start()
                    participant = Participant(mode, namespaces, args.crs, tracker)
                    everyone.append(participant)
                    await participant.start(args, where.kubeconfig, where.client, Path(tmp))
                for participant in everyone:
                    await participant.mark_start()
                started = time.monotonic()
                waiting = [asyncio.create_task(p.wait_converged(started, args.crs)) for p in everyone]
                # Alternating between the processes, so that each meets the server as the others do.
                keys = [key for group in zip(*(p.keys for p in everyone), strict=True) for key in group]
                await create_memcacheds(where.client, keys, 1, args.create_concurrency)
                await asyncio.wait_for(asyncio.gather(*waiting), args.timeout)
            finally:
                for participant in everyone:
                    await participant.stop()
    return {p.mode: p.report for p in everyone}


def size_summary(crs: int, rounds: list[dict[str, dict[str, Any]]], modes: list[str]) -> dict[str, Any]:
    """Medians over the rounds, and each process's CPU over the floor's."""
    summary: dict[str, Any] = {"crs": crs, "rounds": len(rounds)}
    floor_from_start = [r[FLOOR]["cpu_seconds_from_start"] for r in rounds]
    floor_to_converge = [r[FLOOR]["cpu_seconds_to_converge"] for r in rounds]
    for mode in modes:
        runs = [r[mode] for r in rounds]
        from_start = [run["cpu_seconds_from_start"] for run in runs]
        to_converge = [run["cpu_seconds_to_converge"] for run in runs]
        figures: dict[str, Any] = {
            "cpu_seconds_from_start": round(median(from_start), 2),
            "cpu_seconds_from_start_each_round": from_start,
            "cpu_seconds_to_converge": round(median(to_converge), 2),
            "wall_seconds_each_round": [run["wall_seconds"] for run in runs],
            "voluntary_switches_per_cr": round(median([run["voluntary_switches_per_cr"] for run in runs]), 2),
            "peak_rss_mb": round(median([run["peak_rss_mb"] for run in runs]), 1),
        }
        if mode != FLOOR:
            figures["cpu_from_start_over_floor"] = {
                "median": round(median(from_start) / median(floor_from_start), 3),
                "each_round": [round(m / f, 3) for m, f in zip(from_start, floor_from_start, strict=True)],
            }
            figures["cpu_to_converge_over_floor"] = {
                "median": round(median(to_converge) / median(floor_to_converge), 3),
                "each_round": [round(m / f, 3) for m, f in zip(to_converge, floor_to_converge, strict=True)],
            }
        summary[mode] = figures
    return summary


async def run_side_by_side(args: argparse.Namespace) -> dict[str, Any]:
    """``--side-by-side``: at each size (``--sizes``, else ``--crs``), ``--repeat`` rounds."""
    modes = [MEMOP, FLOOR, *(name for name, _ in args.operator)]
    report: dict[str, Any] = {**setup_report(args), "side_by_side": True, "sizes": []}
    for crs in args.sizes or [args.crs]:
        sized = argparse.Namespace(**{**vars(args), "crs": crs})
        rounds = []
        for round_number in range(1, args.repeat + 1):
            rounds.append(await one_round(sized, modes))
            say_run_done(sized, "side-by-side", round_number, rounds[-1])
        report["sizes"].append(size_summary(crs, rounds, modes))
    report.update(machine())
    return report
