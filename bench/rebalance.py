"""Rebalancing: memop replicas with ``--sharding`` scaled 2 -> 4 -> 3 while Memcacheds are created,
scaled and deleted without pause, checked from what the API server saw.

Run from the repository root as ``python bench/rebalance.py`` (the in-memory server) or
``python bench/rebalance.py --kubeconfig K --audit-log /path/to/kube-apiserver/audit.log`` (a
real one); prints one JSON object. The cluster, the replicas and most options are
bench/sharding.py's (whose pieces this bench imports).

- The churn: every ``--churn-interval`` seconds the bench creates a Memcached (size 1, round-robin
  over ``--namespaces`` namespaces), scales the one created two steps before to 2, and every third
  step deletes the one created four steps before. It starts with the first replica count of
  ``--plan`` (default 2,4,3) running and the shards split, and goes on throughout.
- The ring: after ``--phase-seconds`` of churn the bench moves to the next count of ``--plan``:
  more replicas are started (and waited for until ready), fewer are stopped with SIGTERM (the
  oldest first, which hold shards), and it waits until the shards are split among those running
  (sums to ``--shards``, none more than one above another). After the last count it churns
  ``--phase-seconds`` more, then stops.
- The end: every Memcached not deleted must converge at its last size (its Deployment at
  ``spec.replicas == size`` and a status for its generation) and every deleted one must be gone
  (memop removed its finalizer), within ``--timeout``. ``changes_lost`` counts those that did
  not.
- The check: who held which shard when, and every write memop sent for a Memcached (to the
  Memcached, its status, or its Deployment), come from the API server's audit log
  (:mod:`memop.testing.apiserver.requestlog`; the in-memory server writes one with ``--audit-log``, a real
  kube-apiserver with ``--audit-log-path`` and ``--audit-log-format=json`` and a policy logging
  those writes and Lease updates at level Metadata).
  :func:`memop.testing.apiserver.shardholding.writes_outside_holdings` counts the writes that arrived
  while their sender did not hold the Memcached's shard: ``writes_outside_holdings`` must be 0
  (no object reconciled by two replicas at once). The figures also say how many writes were
  checked, how many shard hand-overs the Leases show, and each replica's ring changes.

The bench deletes what it created after the run, as bench/sharding.py does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from converge import Key, Metrics, OthersCpu, Tracker, create_namespaces, machine, metric_sum
from sharding import (
    GROUP,
    MANAGED,
    ReplicaCounts,
    Replicas,
    Where,
    build_parser,
    check,
    describe_server,
    gate_as_reported,
    metrics_of,
    mode_line,
    remove,
    replica_args,
    report_setup,
    round_names,
    server_pids,
    shard_holders,
    sharding_cluster,
    wait_split,
)

from memop.memcached.api import MEMCACHEDS
from memop.runtime.sharding.ring import Ring
from memop.testing.apiserver.requestlog import RequestRecord, read_audit_log
from memop.testing.apiserver.shardholding import holdings, writes_outside_holdings
from memop.testing.memcached import memcached_manifest
from memop.testing.process import MemopProcess
from memop.testing.wait import wait_for


class Churn:
    """The bench's changes: creates, scales and deletes, one step every ``interval`` seconds."""

    def __init__(self, where: Where, namespaces: Sequence[str], interval: float) -> None:
        self.where = where
        self.namespaces = list(namespaces)
        self.interval = interval
        self.uids: dict[Key, str] = {}
        self.sizes: dict[Key, int] = {}
        self.deleted: set[Key] = set()
        self.scaled = 0
        self.steps = 0
        self._running = True
        self._task: asyncio.Task[None] | None = None

    def key(self, index: int) -> Key:
        return (self.namespaces[index % len(self.namespaces)], f"rb-{index}")

    async def _step(self, index: int) -> None:
        client = self.where.client
        namespace, name = self.key(index)
        created = await client.create(MEMCACHEDS, memcached_manifest(name), namespace)
        self.uids[(namespace, name)] = str(created["metadata"]["uid"])
        self.sizes[(namespace, name)] = 1
        if index >= 2:
            scaled = self.key(index - 2)
            if scaled not in self.deleted:
                await client.patch(MEMCACHEDS, scaled[1], {"spec": {"size": 2}}, scaled[0])
                self.sizes[scaled] = 2
                self.scaled += 1
        if index >= 4 and index % 3 == 0:
            gone = self.key(index - 4)
            await client.delete(MEMCACHEDS, gone[1], gone[0])
            self.deleted.add(gone)

    async def _run(self) -> None:
        next_at = time.monotonic()
        while self._running:
            await self._step(self.steps)
            self.steps += 1
            next_at += self.interval
            # Paced, not waiting for any state: the churn is the load.
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    def check(self) -> None:
        """Raise what stopped the churn, if it stopped on an error."""
        if self._task is not None and self._task.done() and self._task.exception() is not None:
            raise RuntimeError(f"the churn failed: {self._task.exception()!r}")

    async def stop(self) -> None:
        self._running = False
        if self._task is not None:
            await self._task


async def change_ring(
    where: Where, args: argparse.Namespace, lease_namespace: str, replicas: Replicas, count: int
) -> dict[str, Any]:
    """Start or SIGTERM replicas until ``count`` run, then wait until the shards are split."""
    started = time.monotonic()
    running = [p for p in replicas.processes if p.returncode is None]
    stopped: list[dict[str, Any]] = []
    if count > len(running):
        joining = [
            MemopProcess(where.kubeconfig, replica_args(args, lease_namespace))
            for _ in range(count - len(running))
        ]
        replicas.processes += joining
        await asyncio.gather(*(p.start() for p in joining))
        await asyncio.gather(*(p.wait_ready(timeout=args.timeout) for p in joining))
        running += joining
    while len(running) > count:
        leaving = running.pop(0)
        status = await leaving.terminate(timeout=args.timeout)
        stopped.append({"identity": leaving.identity(), "exit_status": status})
    await wait_split(running, args.shards, args.timeout)
    return {
        "replicas": count,
        "stopped": stopped,
        "split_after_s": round(time.monotonic() - started, 2),
    }


async def churn_for(churn: Churn, seconds: float) -> None:
    """Let the churn run ``seconds`` (a load's duration, not a wait for any state)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        churn.check()
        await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    churn.check()


def group_sum(metrics: Metrics, name: str) -> float:
    return float(metric_sum(metrics, name, group=GROUP))


def all_gone(keys: Sequence[Key], tracker: Tracker) -> bool:
    return all(tracker.memcacheds.get(name, namespace) is None for namespace, name in keys)


def audit_records(path: Path, since: float) -> list[RequestRecord]:
    return [r for r in read_audit_log(path) if r.time >= since]


def check_holdings(
    records: Sequence[RequestRecord], lease_namespace: str, uids: dict[Key, str], shards: int
) -> dict[str, Any]:
    """Writes memop sent for the churn's Memcacheds, against its holdings of their shards."""
    ring = Ring(shards)
    managed = set(MANAGED)

    def shard_of(record: RequestRecord) -> int | None:
        uid = uids.get((record.namespace, record.name))
        if uid is None or (record.resource, record.subresource) not in managed:
            return None
        return ring.shard_of_value(uid)

    held = holdings(records, lease_namespace, GROUP)
    problems, checked = writes_outside_holdings(records, held, shard_of, agent_prefix="memop/")
    return {
        "writes_checked": checked,
        "writes_outside_holdings": len(problems),
        "first_problems": problems[:5],
        "shard_hand_overs": sum(max(0, len(h) - 1) for h in held.values()),
        "holders_seen": len({h.agent for hs in held.values() for h in hs}),
    }


async def run_rebalance(args: argparse.Namespace, where: Where, audit_log: Path) -> dict[str, Any]:
    client = where.client
    namespaces, lease_namespace = round_names(args)
    await create_namespaces(client, [*namespaces, lease_namespace])
    tracker = Tracker(client)
    churn = Churn(where, namespaces, args.churn_interval)
    replicas: Replicas | None = None
    since = time.time()
    phases: list[dict[str, Any]] = []
    try:
        await tracker.start()
        replicas = await Replicas.start(where, args, lease_namespace, args.plan[0])
        said = mode_line(replicas.processes[0])
        others = OthersCpu(server_pids(args, where))
        others.mark_start()
        started = time.monotonic()
        churn.start()
        for count in [*args.plan[1:], None]:
            await churn_for(churn, args.phase_seconds)
            if count is not None:
                phases.append(await change_ring(where, args, lease_namespace, replicas, count))
        await churn.stop()
        churned = time.monotonic()
        running = [p for p in replicas.processes if p.returncode is None]
        scraped = {p.identity() or "": await metrics_of(p) for p in running}
        server_side = [int(group_sum(m, "memop_sharding_server_side")) for m in scraped.values()]
        ring_changes = {i: int(group_sum(m, "memop_sharding_ring_changes_total")) for i, m in scraped.items()}
        wanted = {k: s for k, s in churn.sizes.items() if k not in churn.deleted}
        tracker.expect(wanted)
        lost_converge = 0
        try:
            await asyncio.wait_for(tracker.all_converged.wait(), args.timeout)
        except TimeoutError:
            lost_converge = len(wanted) - len(tracker.converged_at)
        deleted = sorted(churn.deleted)
        try:
            await wait_for(lambda: all_gone(deleted, tracker), timeout=args.timeout, interval=0.2)
            lost_delete = 0
        except TimeoutError:
            lost_delete = sum(1 for ns, n in deleted if tracker.memcacheds.get(n, ns) is not None)
        done = time.monotonic()
        others.mark_end()
        holders = await shard_holders(client, lease_namespace, args.shards)
        exits = replicas.exits()
        records = audit_records(audit_log, since)
    finally:
        with contextlib.suppress(Exception):
            await churn.stop()
        if replicas is not None:
            await replicas.stop(args.logs)
        await tracker.stop()
        await remove(client, [*namespaces, lease_namespace], args.create_concurrency, args.timeout)
    checked = check_holdings(records, lease_namespace, churn.uids, args.shards)
    return {
        "plan": args.plan,
        "server_side": sorted(set(server_side)),
        "memop_said": said,
        "changes": {
            "steps": churn.steps,
            "created": len(churn.sizes),
            "scaled": churn.scaled,
            "deleted": len(churn.deleted),
        },
        "ring": phases,
        "ring_changes_per_replica": ring_changes,
        "holders_at_end": sorted(set(holders.values())),
        "replicas_exits": exits,
        "changes_lost": lost_converge + lost_delete,
        "not_converged": lost_converge,
        "not_deleted": lost_delete,
        "churn_seconds": round(churned - started, 2),
        "converged_after_churn_s": round(done - churned, 2),
        "audit_records": len(records),
        **checked,
        "while_churning": others.report(done - started),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    report = report_setup(args)
    report.update(
        benchmark="rebalance",
        mode="rebalance",
        plan=args.plan,
        churn_interval_s=args.churn_interval,
        phase_seconds=args.phase_seconds,
    )
    del report["crs"]
    with tempfile.TemporaryDirectory(prefix="memop-bench-") as tmp:
        ours = None if args.kubeconfig else Path(tmp) / "audit.jsonl"
        audit_log = ours or Path(args.audit_log)
        async with sharding_cluster(args, Path(tmp), audit_log=ours) as where:
            report["server"] = await describe_server(args, where)
            report["server"]["audit_log"] = str(audit_log) if args.kubeconfig else "the in-memory server's"
            result = await run_rebalance(args, where, audit_log)
            report["rebalance"] = result
            report["server"]["sharded_list_and_watch"] = gate_as_reported(
                result["server_side"], result["memop_said"]
            )
    report.update(machine())
    return report


class Plan(ReplicaCounts):
    """``--plan``: replica counts in turn, at least two."""

    at_least = 2


def parser_and_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = build_parser()
    parser.description = (__doc__ or "").split("\n\n")[0]
    parser.add_argument(
        "--plan", action=Plan, default=[2, 4, 3], metavar="R,R,...",
        help="replica counts in turn (default 2,4,3)",
    )  # fmt: skip
    parser.add_argument(
        "--phase-seconds", type=float, default=20.0, metavar="S",
        help="churn this long before each change of the ring and after the last (default 20)",
    )  # fmt: skip
    parser.add_argument(
        "--churn-interval", type=float, default=0.1, metavar="S",
        help="seconds between the churn's steps (default 0.1: 10 creates a second)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    check(parser, args)
    if args.failover:
        parser.error("--failover is bench/sharding.py's; this bench rebalances")
    if args.phase_seconds <= 0 or args.churn_interval <= 0:
        parser.error("--phase-seconds and --churn-interval must be positive")
    if args.kubeconfig and not args.audit_log:
        parser.error("--kubeconfig needs --audit-log: the check reads what the API server saw")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parser_and_args(argv)
    print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
