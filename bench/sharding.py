"""What sharding buys: R memop replicas with ``--sharding`` against one, and a replica's failover.

Run from the repository root as ``python bench/sharding.py --crs 10000 --replicas 1,4`` (or
``--failover``); prints one JSON object.

Processes, as in bench/converge.py (whose pieces this bench imports):

- the cluster: the in-memory API server with simulated controllers in its own process, converge.py's
  (``python bench/converge.py serve``) with ``--feature-gates ShardedListAndWatch=true``
  (``--no-gate``: false, the server ignores ``shardSelector``), paced and loaded as converge.py's
  (``--controller-qps``, ``--write-latency``, ``--control-plane-cpu``; pods stay Pending unless
  ``--nodes``), plus its control channel through which the bench reads the server's request log
  (the writes to Memcacheds and Deployments, with each sender's user agent). ``--kubeconfig`` uses
  that cluster instead; ``--server-pid`` (repeatable) names its control plane's processes on this
  machine;
- the replicas: ``python -m memop --sharding --shards 16 --leader-election-namespace <ns>
  --leader-elect-lease-duration ... --max-concurrent-reconciles W``, cluster-wide watches, metrics
  on a free port (:class:`memop.testing.process.MemopProcess`). Their Leases live in a namespace
  the bench creates for each round;
- the bench: creates the namespaces and the Memcacheds (size 1, round-robin over ``--namespaces``
  namespaces), watches memcacheds and deployments to see convergence (converge.py's ``Tracker``:
  every Memcached's Deployment at ``spec.replicas == size`` and a status for its generation),
  polls the replicas' ``/metrics`` and the shard Leases.

``--replicas 1,4`` (the default): one round per replica count, in order, on the same cluster, each
on fresh namespaces. A round starts its replicas, waits until they are ready and the shards are
split (the replicas' ``memop_sharding_shards_owned`` sum to ``--shards`` and differ by at most
one), then creates ``--crs`` Memcacheds and waits until all converged. Per replica, from the first
create to convergence unless said otherwise:

- ``shards_owned``, ``ring_changes`` (``memop_sharding_ring_changes_total``: non-zero when shards
  moved while converging, and traffic with them), and ``server_side``
  (``memop_sharding_server_side``: 1 when the server filters by ``shardSelector``, 0 when memop
  fell back to filtering what it receives);
- ``received``: per resource, the objects its reflectors received from lists and from watch
  events (``memop_reflector_objects_received_total``), its watch bytes
  (``memop_watch_received_bytes_total``) and the objects it dropped as not its own
  (``memop_sharding_objects_filtered_total``), and their sums ``objects_received``,
  ``watch_events``, ``watch_bytes``, ``objects_filtered``;
- ``objects_held``: ``memop_sharding_objects_owned`` per resource when memop exports it (null when
  it does not), and ``memcacheds_in_its_shards``: the round's Memcacheds whose uid falls in a shard
  whose Lease names it at convergence (the bench's view of what its cache holds);
- ``cpu_seconds``: ``from_start`` (the process's user + system time at convergence) and
  ``to_converge``; ``peak_rss_mb`` (``VmHWM``); ``reconciles`` (``controller_runtime_reconcile_total``);
  on the in-memory server ``writes`` (its writes to memcacheds, their status and deployments, from
  the server's log, which keeps the newest 200,000 requests).

Each round also has ``totals`` (sums over its replicas), ``wall_seconds`` (first create to the last
convergence), ``start_to_split_seconds`` (from starting the replicas until the shards are split)
and ``while_converging`` (the API server's and the bench's CPU). ``ratios`` compares each round
with the first one with the fewest replicas (the single replica, by default), as the issue states
its targets: each replica's share of that one's watch bytes, watch events, objects received and
Memcacheds held (every replica's, and the largest), the replicas' summed CPU over its CPU, and the
wall time over its wall time. ``server`` says where the figures come from: the in-memory server and
the gate it was given, or the kubeconfig's server and its ``/version``; and
``sharded_list_and_watch``, whether the gate was on as memop reported it
(``memop_sharding_server_side``), with memop's own log line about it.

``--failover``: one round of ``--replicas`` replicas (default 4). Once about half the Memcacheds
converged, the replica listed first is SIGKILLed. Figures: ``leases_moved_after_s``, per shard it
held, the time from the kill until the shard's Lease names another replica (the Leases polled
every 50 ms); ``converged_after_kill_s`` and ``all_converged`` (every Memcached still converged,
or how many did by ``--timeout``); ``replicas_exits`` (the survivors should still run); and
``reconciled_again``, for the Memcacheds of its shards still to converge when their shard's Lease
moved (its last writes can land, and converge a few, just after the kill): how many a survivor
wrote, whether all converged, and per shard the time from the kill to the first such write. On
the in-memory server the writes come from its request log (to memcacheds, memcacheds/status or
deployments, with a survivor's user agent); on a real server from the bench's watch (a
Memcached's status or finalizers changed, or its Deployment created, from the moment its shard's
Lease named a survivor: memop alone makes those changes, and only the holder of a shard writes
to it). ``within_lease_duration_plus_3s`` holds the last shard's figure against the issue's bound.

The bench deletes what it created (its namespaces, with the Memcacheds' finalizers stripped after
the replicas stopped, and the Leases' namespace) after every round and waits until they are gone;
on a real cluster it never deletes anything else. Short lease timings (``--lease-duration 3
--renew-deadline 2.5 --retry-period 0.5``) make small runs quick; the defaults are memop's. With
a renew deadline of 1.5 s, four replicas, the server and the bench on two cores, a survivor
taking over shards sometimes missed it and dropped out (``replicas_exits`` says so).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from controlplanemodel import DEFAULT_CONTROL_PLANE_CPU, DEFAULT_WRITE_LATENCY
from converge import (
    Cluster,
    Key,
    Metrics,
    OneLineParser,
    OthersCpu,
    ProcStats,
    Tracker,
    Write,
    cluster,
    create_and_converge,
    create_memcacheds,
    create_namespaces,
    machine,
    metric_by,
    metric_sum,
    plan,
    proc_stats,
    run_bounded,
    scrape,
    setup_report,
)
from kubernetes_asyncio.client import VersionApi
from kubernetes_asyncio.client.exceptions import ApiException

from memop.memcached.api import MEMCACHEDS
from memop.runtime.cache.store import ADDED, DELETED, Obj
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, TransportError
from memop.runtime.client.resources import DEPLOYMENTS, EVENTS, LEASES, NAMESPACES, PODS, REPLICASETS
from memop.runtime.sharding.membership import GROUP_LABEL
from memop.runtime.sharding.ring import Ring
from memop.testing.apiserver.featuregates import SHARDED_LIST_AND_WATCH
from memop.testing.apiserver.requestlog import read_audit_log
from memop.testing.apiserver.shardholding import WRITE_VERBS
from memop.testing.process import MemopProcess
from memop.testing.wait import WaitTimeout, wait_for

GROUP = "memop"  # memop's default --sharding-group
BENCH_AGENT = "memop-bench-sharding"
# What memop writes for a Memcached: the Memcached (finalizer), its status, its Deployment
# (named as the Memcached).
MANAGED = (("memcacheds", ""), ("memcacheds", "status"), ("deployments", ""))
LEASE_POLL = 0.05
# The bound on reconciling a killed replica's objects again: the lease duration plus this.
FAILOVER_SLACK = 3.0


# The cluster a sharding bench runs on: converge.py's.
Where = Cluster


def sharding_cluster(
    args: argparse.Namespace, workdir: Path, *, audit_log: Path | None = None
) -> contextlib.AbstractAsyncContextManager[Where]:
    """converge.py's ``cluster()``, with the ShardedListAndWatch gate set as ``--gate`` says;
    the in-memory server writes an audit log to ``audit_log`` if given."""
    return cluster(args, workdir, feature_gates={SHARDED_LIST_AND_WATCH: args.gate}, audit_log=audit_log)


async def describe_server(args: argparse.Namespace, where: Where) -> dict[str, Any]:
    """Which server produced the figures."""
    if where.server is not None:
        return {
            "kind": "in-memory API server with simulated controllers (own process)",
            "feature_gates": {"ShardedListAndWatch": args.gate},
        }
    out: dict[str, Any] = {"kind": "kubeconfig", "kubeconfig": args.kubeconfig, "url": where.client.base_url}
    try:
        version = await VersionApi(where.api).get_code()
        out["version"] = version.git_version
    except (ApiException, aiohttp.ClientError, OSError) as error:  # a figure the report can do without
        out["version"] = None
        out["version_error"] = str(error)
    return out


async def remove(client: Client, namespaces: Sequence[str], concurrency: int, timeout: float) -> None:
    """Delete the bench's namespaces and wait until they are gone; a clean-up that fails or does
    not finish in ``timeout`` is one line on stderr, never an exception: the round's figures
    are taken by then, and must not be lost to it.

    The replicas are stopped by then, so the bench strips the Memcacheds' finalizers itself,
    ``concurrency`` at a time (converge.py's ``remove_namespaces`` does it one by one: minutes
    for 10,000 Memcacheds), and deletes what the round made in them, a collection at a time,
    before the namespaces: the in-memory server's namespace controller and garbage collector
    delete one object at a time at their client rate limit (20 a second), 40 minutes for the
    50,000 objects of 10,000 Memcacheds."""
    try:
        await _remove(client, namespaces, concurrency, timeout)
    except (ApiError, TransportError, WaitTimeout) as error:
        print(
            f"bench: clean-up of {', '.join(namespaces)} did not finish ({error}); the figures stand, "
            "delete those namespaces by hand",
            file=sys.stderr,
        )


async def _remove(client: Client, namespaces: Sequence[str], concurrency: int, timeout: float) -> None:
    stuck: list[Key] = []
    for namespace in namespaces:
        items, _ = await client.list_all(MEMCACHEDS, namespace)
        stuck += [(namespace, i["metadata"]["name"]) for i in items if i["metadata"].get("finalizers")]

    async def strip(key: Key) -> None:
        with contextlib.suppress(ApiError):
            await client.patch(MEMCACHEDS, key[1], {"metadata": {"finalizers": None}}, key[0])

    await run_bounded(concurrency, stuck, strip)
    for namespace in namespaces:
        for res in (MEMCACHEDS, DEPLOYMENTS, REPLICASETS, PODS, EVENTS):
            # A collection of thousands can outlast the client's timeout on a busy server: it is
            # deleted all the same, and the namespace's deletion takes what is left.
            with contextlib.suppress(ApiError, TransportError):
                await client.delete_collection(res, namespace)
        with contextlib.suppress(ApiError):  # gone already, or going
            await client.delete(NAMESPACES, namespace)

    async def gone() -> bool:
        remaining, _ = await client.list_all(NAMESPACES)
        return not {n["metadata"]["name"] for n in remaining} & set(namespaces)

    await wait_for(gone, timeout=timeout, interval=0.2, max_interval=1.0)


# -- the replicas -----------------------------------------------------------------------------------


def replica_args(args: argparse.Namespace, lease_namespace: str) -> list[str]:
    return [
        "--sharding",
        "--shards", str(args.shards),
        "--leader-election-namespace", lease_namespace,
        "--leader-elect-lease-duration", f"{args.lease_duration:g}s",
        "--leader-elect-renew-deadline", f"{args.renew_deadline:g}s",
        "--leader-elect-retry-period", f"{args.retry_period:g}s",
        "--max-concurrent-reconciles", str(args.workers),
        *args.memop_arg,
    ]  # fmt: skip


async def shards_owned(replica: MemopProcess) -> int:
    """The shards ``replica`` owns (see :func:`metrics_of`)."""
    return int(metric_sum(await metrics_of(replica), "memop_sharding_shards_owned", group=GROUP))


async def metrics_of(replica: MemopProcess) -> Metrics:
    """What ``replica`` serves on /metrics; RuntimeError with its last error if it has exited."""
    try:
        return await scrape(replica)
    except aiohttp.ClientError:
        with contextlib.suppress(TimeoutError):
            await replica.wait(timeout=1)
        if replica.returncode is None:
            raise
    raise RuntimeError(f"a memop replica exited with {replica.returncode}: {last_error(replica)}")


def last_error(replica: MemopProcess) -> str | None:
    """The last error memop logged, if any."""
    errors = [r for r in replica.records if r.get("level") == "error"]
    return str(errors[-1].get("msg")) if errors else None


async def wait_split(replicas: Sequence[MemopProcess], shards: int, timeout: float) -> None:
    """Until the replicas own every shard between them, none more than one above another."""

    async def split() -> bool:
        counts = [await shards_owned(r) for r in replicas]
        return sum(counts) == shards and max(counts) - min(counts) <= 1

    await wait_for(split, timeout=timeout, interval=0.1, max_interval=0.1)


async def shard_holders(client: Client, namespace: str, shards: int) -> dict[int, str]:
    """Shard → the identity its Lease names ("" for nobody)."""
    listed = await client.list(LEASES, namespace, label_selector=f"{GROUP_LABEL}={GROUP}")
    prefix, suffix = f"{GROUP}-shard-", f"-of-{shards}"
    holders: dict[int, str] = {}
    for lease in listed.get("items") or ():
        name = str(lease["metadata"]["name"])
        if name.startswith(prefix) and name.endswith(suffix):
            spec = lease.get("spec") or {}
            holders[int(name[len(prefix) : -len(suffix)])] = str(spec.get("holderIdentity") or "")
    return holders


@dataclass
class Replicas:
    """A round's memop processes, started and stopped together."""

    processes: list[MemopProcess]

    @classmethod
    async def start(
        cls, where: Where, args: argparse.Namespace, lease_namespace: str, count: int
    ) -> Replicas:
        replicas = cls(
            [MemopProcess(where.kubeconfig, replica_args(args, lease_namespace)) for _ in range(count)]
        )
        try:
            await asyncio.gather(*(p.start() for p in replicas.processes))
            await asyncio.gather(*(p.wait_ready(timeout=args.timeout) for p in replicas.processes))
            await wait_split(replicas.processes, args.shards, args.timeout)
        except BaseException:
            await replicas.stop()
            raise
        return replicas

    def identities(self) -> list[str]:
        return [p.identity() or "" for p in self.processes]

    def exits(self) -> list[dict[str, Any]]:
        """Each replica's exit status so far (None: running) and its last logged error."""
        return [{"exit_status": p.returncode, "last_error": last_error(p)} for p in self.processes]

    async def stop(self, logs: str | None = None) -> None:
        """Stop every replica; with ``logs``, write each one's output there (``<identity>.log``)."""
        await asyncio.gather(*(p.stop() for p in self.processes), return_exceptions=True)
        if logs:
            Path(logs).mkdir(parents=True, exist_ok=True)
            for p in self.processes:
                (Path(logs) / f"{p.identity() or p.pid}.log").write_text("\n".join(p.lines) + "\n")


def mode_line(process: MemopProcess) -> str | None:
    """memop's log line saying whether the server filters by shardSelector or memop does."""
    record = process.find(
        lambda r: "shardSelector" in r.get("msg", "") and "sharding group" in r.get("msg", "")
    )
    return None if record is None else str(record["msg"])


# -- one replica's figures --------------------------------------------------------------------------


def by_resource(metrics: Metrics, name: str, **labels: str) -> Counter[str]:
    """``name``'s samples whose labels include ``labels``, summed by resource (as integers)."""
    want = set(labels.items())
    out: Counter[str] = Counter()
    for (sample, ls), value in metrics.items():
        if sample == name and want <= ls:
            out[dict(ls).get("resource", "")] += int(value)
    return out


def received(before: Metrics, after: Metrics) -> dict[str, dict[str, int]]:
    """Per resource, what the replica received between two scrapes."""

    def delta(name: str, **labels: str) -> Counter[str]:
        grown = by_resource(after, name, **labels)
        grown.subtract(by_resource(before, name, **labels))
        return grown

    figures = {
        "list": delta("memop_reflector_objects_received_total", source="list"),
        "watch_events": delta("memop_reflector_objects_received_total", source="watch"),
        "watch_bytes": delta("memop_watch_received_bytes_total"),
        "filtered": delta("memop_sharding_objects_filtered_total"),
    }
    resources = sorted({r for counts in figures.values() for r in counts})
    return {r: {k: int(counts[r]) for k, counts in figures.items()} for r in resources}


def replica_figures(
    process: MemopProcess,
    *,
    before: Metrics,
    after: Metrics,
    cpu: tuple[ProcStats, ProcStats],
    memcacheds_held: int,
    writes: int | None,
) -> dict[str, Any]:
    traffic = received(before, after)
    held = by_resource(after, "memop_sharding_objects_owned")
    reconciles = metric_by(after, "controller_runtime_reconcile_total", "controller")
    reconciles_before = metric_by(before, "controller_runtime_reconcile_total", "controller")
    return {
        "identity": process.identity(),
        "shards_owned": int(metric_sum(after, "memop_sharding_shards_owned", group=GROUP)),
        # Non-zero: shards moved while converging (a member seen gone, say), and its traffic with them.
        "ring_changes": int(
            metric_sum(after, "memop_sharding_ring_changes_total", group=GROUP)
            - metric_sum(before, "memop_sharding_ring_changes_total", group=GROUP)
        ),
        "server_side": int(metric_sum(after, "memop_sharding_server_side", group=GROUP)),
        "received": traffic,
        "objects_received": sum(t["list"] + t["watch_events"] for t in traffic.values()),
        "watch_events": sum(t["watch_events"] for t in traffic.values()),
        "watch_bytes": sum(t["watch_bytes"] for t in traffic.values()),
        "objects_filtered": sum(t["filtered"] for t in traffic.values()),
        "objects_held": {r: int(n) for r, n in sorted(held.items())} if held else None,
        "memcacheds_in_its_shards": memcacheds_held,
        "cpu_seconds": {
            "from_start": cpu[1].cpu_seconds,
            "to_converge": round(cpu[1].cpu_seconds - cpu[0].cpu_seconds, 2),
        },
        "peak_rss_mb": cpu[1].peak_rss_mb,
        "reconciles": int(sum(reconciles.values()) - sum(reconciles_before.values())),
        "writes": writes,
    }


TOTALLED = ("shards_owned", "ring_changes", "objects_received", "watch_events", "watch_bytes",
            "objects_filtered", "memcacheds_in_its_shards", "reconciles")  # fmt: skip


def totals(replicas: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: sum(r[k] for r in replicas) for k in TOTALLED}
    out["cpu_seconds"] = {
        k: round(sum(r["cpu_seconds"][k] for r in replicas), 2) for k in ("from_start", "to_converge")
    }
    out["peak_rss_mb"] = round(sum(r["peak_rss_mb"] for r in replicas), 1)
    writes = [r["writes"] for r in replicas]
    out["writes"] = None if None in writes else sum(writes)
    return out


def memcacheds_by_holder(tracker: Tracker, holders: dict[int, str], shards: int) -> Counter[str]:
    """Identity → the expected Memcacheds whose uid falls in a shard its Lease names."""
    ring = Ring(shards)
    out: Counter[str] = Counter()
    for namespace, name in tracker.wanted:
        obj = tracker.memcacheds.get(name, namespace)
        uid = (obj or {}).get("metadata", {}).get("uid")
        if uid:
            out[holders.get(ring.shard_of_value(uid), "")] += 1
    return out


# -- a round ----------------------------------------------------------------------------------------


def round_names(args: argparse.Namespace) -> tuple[list[str], str]:
    """Fresh namespaces for a round's Memcacheds, and one for its Leases."""
    prefix = f"shard-bench-{secrets.token_hex(3)}"
    return [f"{prefix}-{i}" for i in range(args.namespaces)], f"{prefix}-leases"


def server_pids(args: argparse.Namespace, where: Where) -> list[int]:
    return [where.server.pid, *where.server.load_pids] if where.server else list(args.server_pid)


async def run_round(args: argparse.Namespace, where: Where, count: int) -> dict[str, Any]:
    """``count`` replicas converge a fresh set of ``--crs`` Memcacheds; their figures."""
    client = where.client
    namespaces, lease_namespace = round_names(args)
    await create_namespaces(client, [*namespaces, lease_namespace])
    tracker = Tracker(client)
    replicas: Replicas | None = None
    try:
        await tracker.start()
        ready = time.monotonic()
        replicas = await Replicas.start(where, args, lease_namespace, count)
        split = time.monotonic()
        processes = replicas.processes
        before = [await metrics_of(p) for p in processes]
        cpu0 = [proc_stats(p.pid) for p in processes]
        since_wall = time.time()
        # The first replica's CPU is the one create_and_converge measures; the others' here.
        run = await create_and_converge(
            args, client, tracker, plan(args.crs, namespaces), pid=processes[0].pid, server=where.server
        )
        cpu1 = [run.cpu_after, *(proc_stats(p.pid) for p in processes[1:])]
        after = [await metrics_of(p) for p in processes]
        holders = await shard_holders(client, lease_namespace, args.shards)
        # Sampled beside the run's monotonic start: a wall time taken before create_and_converge
        # made the last Memcached's status write fall after "converged" on a loaded machine.
        converged_wall = run.wall(run.converged)
        writes = await where.server.writes(since_wall, MANAGED) if where.server else None
        said = mode_line(processes[0])
    finally:
        if replicas is not None:
            await replicas.stop(args.logs)
        await tracker.stop()
        cleanup = time.monotonic()
        await remove(client, [*namespaces, lease_namespace], args.create_concurrency, args.timeout)
        cleanup = time.monotonic() - cleanup

    held = memcacheds_by_holder(tracker, holders, args.shards)
    figures = []
    for i, process in enumerate(processes):
        agent = process.user_agent()
        sent = (
            None
            if writes is None
            else sum(1 for w in writes if w.user_agent == agent and w.time <= converged_wall)
        )
        figures.append(
            replica_figures(
                process,
                before=before[i],
                after=after[i],
                cpu=(cpu0[i], cpu1[i]),
                memcacheds_held=held[process.identity() or ""],
                writes=sent,
            )
        )
    return {
        "replicas": count,
        "crs": args.crs,
        "wall_seconds": round(run.converged - run.started, 2),
        "creates_seconds": round(run.created - run.started, 2),
        "start_to_split_seconds": round(split - ready, 2),
        "cleanup_seconds": round(cleanup, 2),
        "converged": len(tracker.converged_at),
        "server_side": sorted({f["server_side"] for f in figures}),
        "memop_said": said,
        "per_replica": figures,
        "totals": totals(figures),
        "while_converging": run.others.report(run.converged - run.started),
    }


def share(value: float, whole: float) -> float | None:
    return round(value / whole, 3) if whole else None


def ratios(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each round against the first with the fewest replicas, as the issue states its targets."""
    base = min(rounds, key=lambda r: r["replicas"])
    whole = base["totals"]
    out: dict[str, Any] = {"baseline_replicas": base["replicas"], "rounds": []}
    for round_ in rounds:
        if round_ is base:
            continue
        entry: dict[str, Any] = {"replicas": round_["replicas"]}
        for figure in ("watch_bytes", "watch_events", "objects_received", "memcacheds_in_its_shards"):
            each = [share(r[figure], whole[figure]) for r in round_["per_replica"]]
            entry[f"{figure}_share"] = {
                "each": each,
                "max": max((v for v in each if v is not None), default=None),
            }
        entry["summed_cpu_over_baseline"] = {
            k: share(round_["totals"]["cpu_seconds"][k], whole["cpu_seconds"][k])
            for k in ("to_converge", "from_start")
        }
        entry["wall_seconds_over_baseline"] = share(round_["wall_seconds"], base["wall_seconds"])
        out["rounds"].append(entry)
    return out


def gate_as_reported(server_side: Sequence[int], said: str | None) -> dict[str, Any]:
    """Whether the server filtered by shardSelector, as the replicas' metric says."""
    values = set(server_side)
    on = None if len(values) != 1 else values == {1}
    return {
        "on_as_memop_reported": on,
        "fell_back_to_client_side": None if on is None else not on,
        "memop_said": said,
    }


# -- failover ---------------------------------------------------------------------------------------


class FailoverTracker(Tracker):
    """converge.py's Tracker, which also notes, after :meth:`mark`, when the bench's watch sees
    memop change a Memcached: its status or finalizers changed, or its Deployment created (on a
    real server, whose request log is out of the bench's reach)."""

    def __init__(self, client: Client) -> None:
        super().__init__(client)
        self.marked = math.inf
        self.changes: dict[Key, list[float]] = {}

    def mark(self, at: float) -> None:
        self.marked = at

    def _note(self, obj: Obj) -> None:
        now = time.monotonic()
        if now >= self.marked:
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            self.changes.setdefault(key, []).append(now)

    def _on_memcached(self, kind: str, obj: Obj, old: Obj | None) -> None:
        super()._on_memcached(kind, obj, old)
        if kind != DELETED and old is not None:
            finalizers = (obj.get("metadata") or {}).get("finalizers")
            if obj.get("status") != old.get("status") or finalizers != (old.get("metadata") or {}).get(
                "finalizers"
            ):
                self._note(obj)

    def _on_deployment(self, kind: str, obj: Obj, old: Obj | None) -> None:
        super()._on_deployment(kind, obj, old)
        if kind == ADDED:
            self._note(obj)


def audit_writes(path: Path, since: float) -> list[Write]:
    """memop's writes to what it manages for a Memcached (``MANAGED``) from ``since`` (wall
    clock) on, as a real kube-apiserver's audit log (``--audit-log``) saw them."""
    managed = set(MANAGED)
    return [
        Write(r.time, r.user_agent, r.namespace, r.name, r.status)
        for r in read_audit_log(path)
        if r.time >= since and r.verb in WRITE_VERBS and (r.resource, r.subresource) in managed
    ]


def reconciled_again(
    in_shards: dict[Key, int],
    converged_at: dict[Key, float],
    *,
    killed: float,
    moved: dict[int, float | None],
    writes: dict[Key, list[float]],
    lease_duration: float,
) -> dict[str, Any]:
    """Whether survivors finished the killed replica's Memcacheds, and when they started.

    ``in_shards``: the Memcacheds of its shards (key → shard); ``converged_at``: when each
    converged (monotonic); ``moved``: seconds from the kill (monotonic ``killed``) until each
    shard's Lease named a survivor; ``writes``: per Memcached, the seconds from the kill of the
    changes seen. Only what was still to converge when its shard moved counts (the killed
    replica's last writes can land, and converge a few, just after the kill), and only changes
    from then on (less a poll of the Leases): a survivor writes to a shard only once it holds it.
    """
    since = {shard: (after if after is not None else 0.0) - LEASE_POLL for shard, after in moved.items()}
    pending = {
        key: shard
        for key, shard in in_shards.items()
        if converged_at.get(key, math.inf) > killed + since.get(shard, 0.0)
    }
    first = {
        key: min(times)
        for key, shard in pending.items()
        if (times := [t for t in writes.get(key, ()) if t >= since.get(shard, 0.0)])
    }
    per_shard: dict[str, float | None] = {}
    for shard in sorted(moved):
        times = [first[key] for key, s in pending.items() if s == shard and key in first]
        per_shard[str(shard)] = round(min(times), 3) if times else None
    resumed = [v for v in per_shard.values() if v is not None]
    last = max(resumed) if resumed else None
    return {
        "memcacheds_in_killed_shards": len(in_shards),
        "pending_at_kill": sum(1 for key in in_shards if converged_at.get(key, math.inf) > killed),
        "pending_when_lease_moved": len(pending),
        "written_by_survivors": len(first),
        "pending_all_converged": all(key in converged_at for key in pending),
        "first_write_after_kill_s": round(min(first.values()), 3) if first else None,
        "per_shard_first_write_after_kill_s": per_shard,
        "last_shard_resumed_after_kill_s": last,
        "within_lease_duration_plus_3s": None if last is None else last <= lease_duration + FAILOVER_SLACK,
    }


async def leases_moved(
    client: Client,
    namespace: str,
    shards: int,
    *,
    moving: Sequence[int],
    gone: str,
    since: float,
    timeout: float,
) -> dict[int, float | None]:
    """Shard → seconds from ``since`` (monotonic) until its Lease named a holder other than
    ``gone`` (None: not by ``timeout``)."""
    moved: dict[int, float | None] = dict.fromkeys(moving)
    deadline = since + timeout
    while any(v is None for v in moved.values()) and time.monotonic() < deadline:
        holders = await shard_holders(client, namespace, shards)
        now = time.monotonic()
        for shard in moving:
            if moved[shard] is None and holders.get(shard) not in ("", gone, None):
                moved[shard] = round(now - since, 3)
        await asyncio.sleep(LEASE_POLL)
    return moved


async def run_failover(args: argparse.Namespace, where: Where) -> dict[str, Any]:
    """``--failover``: SIGKILL one of the replicas while the Memcacheds converge."""
    client, server = where.client, where.server
    count = args.replicas[0]
    namespaces, lease_namespace = round_names(args)
    keys = plan(args.crs, namespaces)
    await create_namespaces(client, [*namespaces, lease_namespace])
    tracker = FailoverTracker(client)
    replicas: Replicas | None = None
    creating: asyncio.Task[None] | None = None
    try:
        await tracker.start()
        replicas = await Replicas.start(where, args, lease_namespace, count)
        victim, survivors = replicas.processes[0], replicas.processes[1:]
        victim_id, victim_agent = victim.identity() or "", victim.user_agent()
        server_side = [
            int(metric_sum(await metrics_of(p), "memop_sharding_server_side", group=GROUP))
            for p in replicas.processes
        ]
        said = mode_line(victim)
        tracker.expect(dict.fromkeys(keys, 1))
        others = OthersCpu(server_pids(args, where))
        others.mark_start()
        started = time.monotonic()
        creating = asyncio.create_task(create_memcacheds(client, keys, 1, args.create_concurrency))

        def half_converged() -> bool:
            if creating is not None and creating.done() and creating.exception() is not None:
                raise RuntimeError(f"creating the Memcacheds failed: {creating.exception()}")
            return 2 * len(tracker.converged_at) >= int(args.crs)

        await wait_for(half_converged, timeout=args.timeout, interval=0.01, max_interval=0.01)
        holders = await shard_holders(client, lease_namespace, args.shards)
        victim_shards = sorted(s for s, h in holders.items() if h == victim_id)
        converged_at_kill = len(tracker.converged_at)
        killed_wall, killed = time.time(), time.monotonic()
        tracker.mark(killed)
        await victim.kill()
        moved = await leases_moved(
            client,
            lease_namespace,
            args.shards,
            moving=victim_shards,
            gone=victim_id,
            since=killed,
            timeout=args.timeout,
        )
        await creating
        all_converged = True
        try:
            await asyncio.wait_for(
                tracker.all_converged.wait(), max(1.0, args.timeout - (time.monotonic() - killed))
            )
        except TimeoutError:
            all_converged = False
        done = time.monotonic()
        others.mark_end()
        if server is not None:
            writes: list[Write] | None = await server.writes(killed_wall, MANAGED)
        elif args.audit_log:
            writes = audit_writes(Path(args.audit_log), killed_wall)
        else:
            writes = None
        owned_after: dict[str, int | None] = {}
        for p in survivors:
            try:
                owned_after[p.identity() or ""] = await shards_owned(p)
            except RuntimeError:  # it exited too: its exit is in the report
                owned_after[p.identity() or ""] = None
        exits = replicas.exits()
    finally:
        if creating is not None and not creating.done():
            creating.cancel()
            await asyncio.gather(creating, return_exceptions=True)
        if replicas is not None:
            await replicas.stop(args.logs)
        await tracker.stop()
        await remove(client, [*namespaces, lease_namespace], args.create_concurrency, args.timeout)

    ring = Ring(args.shards)
    in_shards: dict[Key, int] = {}
    for key in keys:
        uid = ((tracker.memcacheds.get(key[1], key[0]) or {}).get("metadata") or {}).get("uid")
        if uid and ring.shard_of_value(uid) in victim_shards:
            in_shards[key] = ring.shard_of_value(uid)
    seen: dict[Key, list[float]] = {}
    if writes is not None:
        for w in writes:
            if w.user_agent != victim_agent and w.user_agent.startswith("memop/") and w.status < 400:
                seen.setdefault((w.namespace, w.name), []).append(w.time - killed_wall)
        observed_from = (
            "the kube-apiserver's audit log (writes with a survivor's user agent)"
            if server is None
            else "the in-memory server's request log (writes with a survivor's user agent)"
        )
    else:
        seen = {key: [t - killed for t in times] for key, times in tracker.changes.items()}
        observed_from = (
            "the bench's watch (a Memcached's status or finalizers changed, or its Deployment created, "
            "once its shard's Lease named a survivor; the sender is not known)"
        )
    again = reconciled_again(
        in_shards,
        tracker.converged_at,
        killed=killed,
        moved=moved,
        writes=seen,
        lease_duration=args.lease_duration,
    )
    moved_times = [v for v in moved.values() if v is not None]
    return {
        "replicas": count,
        "crs": args.crs,
        "server_side": sorted(set(server_side)),
        "memop_said": said,
        "lease_duration_s": args.lease_duration,
        "killed": {
            "identity": victim_id,
            "shards": victim_shards,
            "converged_before_kill": converged_at_kill,
            "after_first_create_s": round(killed - started, 2),
        },
        "leases_moved_after_s": {str(s): v for s, v in moved.items()},
        "all_leases_moved_after_s": max(moved_times) if len(moved_times) == len(moved) and moved else None,
        "survivors_shards_owned": owned_after,
        "replicas_exits": exits,
        "all_converged": all_converged,
        "converged": len(tracker.converged_at),
        "wall_seconds": round(max(tracker.converged_at.values(), default=done) - started, 2),
        "converged_after_kill_s": round(max(tracker.converged_at.values(), default=done) - killed, 2)
        if all_converged
        else None,
        "reconciled_again": {"observed_from": observed_from, **again},
        "while_converging": others.report(done - started),
    }


# -- the benchmark ----------------------------------------------------------------------------------


def report_setup(args: argparse.Namespace) -> dict[str, Any]:
    """converge.py's ``setup_report`` (what it knows of this bench's options), then this bench's."""
    known = argparse.Namespace(
        **vars(args), all_namespaces=True, pod_ready_delay=0.0, repeat=1, skip_settle=True
    )
    report = setup_report(known)
    del report["repeat"], report["pod_ready_delay"]
    report.update(
        benchmark="sharding",
        mode="failover" if args.failover else "replicas",
        crs=args.crs,
        shards=args.shards,
        lease_timings_s={
            "duration": args.lease_duration,
            "renew_deadline": args.renew_deadline,
            "retry_period": args.retry_period,
        },
        memop_args=args.memop_arg or None,
    )
    return report


async def run(args: argparse.Namespace) -> dict[str, Any]:
    report = report_setup(args)
    with tempfile.TemporaryDirectory(prefix="memop-bench-") as tmp:
        async with sharding_cluster(args, Path(tmp)) as where:
            report["server"] = await describe_server(args, where)
            if args.failover:
                report["replicas"] = args.replicas[0]
                failover = await run_failover(args, where)
                report["failover"] = failover
                report["server"]["sharded_list_and_watch"] = gate_as_reported(
                    failover["server_side"], failover["memop_said"]
                )
            else:
                report["replicas"] = args.replicas
                rounds = [await run_round(args, where, count) for count in args.replicas]
                report["rounds"] = rounds
                report["ratios"] = ratios(rounds)
                report["server"]["sharded_list_and_watch"] = gate_as_reported(
                    [v for r in rounds for v in r["server_side"]], rounds[0]["memop_said"]
                )
    report.update(machine())
    return report


class ReplicaCounts(argparse.Action):
    """``--replicas``: positive numbers separated by commas (at least ``at_least`` of them)."""

    at_least = 1

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        try:
            counts = [int(part) for part in str(values).split(",")]
        except ValueError:
            parser.error(f"{option_string}: not a list of numbers: {values!r}")
        if len(counts) < self.at_least or min(counts) < 1:
            many = f"at least {self.at_least} counts, " if self.at_least > 1 else ""
            parser.error(f"{option_string}: {many}counts must be positive: {values!r}")
        setattr(namespace, self.dest, counts)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--crs", type=int, default=1000, help="Memcacheds to create per round (default 1000)")
    parser.add_argument("--namespaces", type=int, default=4, help="namespaces they spread over (default 4)")
    parser.add_argument(
        "--workers",
        "--max-concurrent-reconciles",
        dest="workers",
        type=int,
        default=4,
        help="each replica's --max-concurrent-reconciles (default 4)",
    )
    parser.add_argument(
        "--replicas",
        action=ReplicaCounts,
        metavar="R,R,...",
        help="replica counts, one round each, compared with the first with the fewest (default 1,4); "
        "with --failover one count of at least 2 (default 4)",
    )
    parser.add_argument(
        "--failover",
        action="store_true",
        help="SIGKILL one replica once about half the Memcacheds converged; report the take-over",
    )
    parser.add_argument("--shards", type=int, default=16, help="memop's --shards (default 16)")
    parser.add_argument(
        "--lease-duration", type=float, default=15.0, metavar="S",
        help="the replicas' --leader-elect-lease-duration in seconds (default 15, memop's)",
    )  # fmt: skip
    parser.add_argument(
        "--renew-deadline", type=float, default=10.0, metavar="S",
        help="their --leader-elect-renew-deadline (default 10)",
    )  # fmt: skip
    parser.add_argument(
        "--retry-period", type=float, default=2.0, metavar="S",
        help="their --leader-elect-retry-period (default 2)",
    )  # fmt: skip
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting the in-memory one")
    parser.add_argument(
        "--server-pid",
        type=int,
        action="append",
        default=[],
        metavar="PID",
        help="with --kubeconfig, a process of that control plane on this machine (repeatable): its CPU "
        "during each round is reported, as the in-memory server's is",
    )
    parser.add_argument(
        "--gate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the in-memory server's ShardedListAndWatch feature gate (default: on; --no-gate: the "
        "server ignores shardSelector and every replica filters what it receives)",
    )
    parser.add_argument(
        "--create-concurrency", type=int, default=16, help="the bench's concurrent creates (default 16)"
    )
    parser.add_argument(
        "--tls", action=argparse.BooleanOptionalAction, default=True,
        help="the in-memory server serves HTTPS (default: on)",
    )  # fmt: skip
    parser.add_argument(
        "--controller-qps", type=float, default=20.0, metavar="Q",
        help="the in-memory server's simulated controllers' client rate limit, as kube-controller-"
        "manager's (default 20; 0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--controller-burst", type=int, default=30, metavar="N", help="that limit's burst (default 30)"
    )
    parser.add_argument(
        "--write-latency", type=float, default=DEFAULT_WRITE_LATENCY, metavar="S",
        help=f"seconds the in-memory server adds to each write (default {DEFAULT_WRITE_LATENCY:g}; "
        "bench/controlplanemodel.py)",
    )  # fmt: skip
    parser.add_argument(
        "--control-plane-cpu", type=float, default=DEFAULT_CONTROL_PLANE_CPU, metavar="S",
        help="CPU seconds spent beside the in-memory server per write (default "
        f"{DEFAULT_CONTROL_PLANE_CPU:g}; bench/controlplanemodel.py)",
    )  # fmt: skip
    parser.add_argument(
        "--nodes", action=argparse.BooleanOptionalAction, default=False,
        help="the in-memory server runs the pods (default: off, pods stay Pending, as on a control "
        "plane without nodes; convergence does not wait for pods)",
    )  # fmt: skip
    parser.add_argument(
        "--memop-arg", action="append", default=[], metavar="ARG",
        help="pass ARG to every replica (repeatable), e.g. --memop-arg=--event-qps=0",
    )  # fmt: skip
    parser.add_argument(
        "--audit-log", metavar="PATH",
        help="with --kubeconfig: the kube-apiserver's JSON audit log (--audit-log-path), logging "
        "Lease, Memcached and Deployment writes at level Metadata; --failover then reads the "
        "survivors' writes from it instead of from the bench's watch",
    )  # fmt: skip
    parser.add_argument("--logs", metavar="DIR", help="write each replica's log to DIR/<identity>.log")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="give up after this many seconds per stage (default 600)"
    )
    return parser


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Options that parse but do not make a run: one line and exit status 2."""
    if args.replicas is None:
        args.replicas = [4] if args.failover else [1, 4]
    if args.failover and (len(args.replicas) != 1 or args.replicas[0] < 2):
        parser.error("--failover: --replicas must be one count of at least 2")
    for name in ("crs", "namespaces", "workers", "create_concurrency", "controller_burst"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.shards > 256 or args.shards < 1 or args.shards & (args.shards - 1):
        parser.error(f"--shards: expected a power of two from 1 to 256, got {args.shards}")
    if args.lease_duration < 1:
        parser.error("--lease-duration must be at least 1 (second)")
    if not 0 < args.renew_deadline < args.lease_duration:
        parser.error("--renew-deadline must be positive and shorter than --lease-duration")
    if not 0 < args.retry_period * 1.2 < args.renew_deadline:
        parser.error("--retry-period times 1.2 (jitter) must be positive and shorter than --renew-deadline")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    if min(args.controller_qps, args.write_latency, args.control_plane_cpu) < 0:
        parser.error("--controller-qps, --write-latency and --control-plane-cpu must not be negative")
    if args.kubeconfig and not args.gate:
        parser.error("--no-gate is for the in-memory server: a real server's gate is its own")
    if args.server_pid and not args.kubeconfig:
        parser.error("--server-pid is for a control plane given by --kubeconfig")
    if args.audit_log and not args.kubeconfig:
        parser.error("--audit-log is a real server's; the in-memory server's log is read directly")
    if args.audit_log and not Path(args.audit_log).is_file():
        parser.error(f"--audit-log {args.audit_log}: no such file")
    for pid in args.server_pid:
        if not Path(f"/proc/{pid}/stat").exists():
            parser.error(f"--server-pid {pid}: no such process on this machine")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check(parser, args)
    print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
