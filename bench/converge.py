"""How fast memop brings new Memcacheds to their Deployments, against the floor a bare script sets.

Run from the repository root as ``python bench/converge.py --crs 1000 --namespaces 10 --workers 4``;
prints one JSON object. ``--floor`` measures the floor instead of memop; ``--compare`` runs both,
each on a fresh cluster, and reports their ratio.

Processes (so that no party's CPU is charged to another):

- the cluster: the in-memory API server with simulated controllers (Deployments get
  ReplicaSets and running pods, the garbage collector works), started as
  ``python bench/converge.py serve``. Its controllers are paced as kube-controller-manager's
  default client rate limits pace a real one (``--controller-qps 20 --controller-burst 30``,
  0 disables it): with thousands of Memcacheds its deployment and replicaset controllers lag
  behind, and memop gets the watch events a real server sends it. With ``--skip-settle`` it
  has no nodes (``--no-nodes``; ``--nodes`` to override), as the real control plane it is
  compared with: pods stay Pending, marked unschedulable once. What the rest of a real control
  plane on the same machine adds, each write's latency and CPU spent beside the server, is
  modelled too (``--write-latency``, ``--control-plane-cpu``: bench/controlplanemodel.py). That is
  ``python -m memop.testing serve`` plus a control channel on stdin/stdout through which the
  bench reads the server's request log, so every request memop makes is counted exactly, by
  verb, resource and subresource, as the server saw it (memop's own
  ``rest_client_requests_total`` only knows the HTTP method);
- memop, ``python -m memop --max-concurrent-reconciles W --watch-namespace <the K namespaces>``
  (``--all-namespaces``: cluster-wide watches), through :class:`memop.testing.process.MemopProcess`;
- or the floor, ``python bench/converge.py floor``: the same writes per Memcached (finalizer
  merge patch, Deployment create with the same body, status merge patch) with the same ``W``
  concurrent workers, driven by a watch on memcacheds and nothing else: no cache of
  Deployments or pods, no workqueue, no Events. It uses memop's HTTP client, so the
  difference measures memop's machinery, not its client. The API server is the bottleneck
  on a small machine, so what memop makes the *server* do counts too: ``--floor-watches``
  makes the floor also hold memop's watches on deployments and pods, ``--floor-events`` also
  record memop's Event per Memcached as memop does (deferred while the floor has work, then
  at memop's default rate limit);
- the bench itself: creates the Memcacheds (size 1, round-robin over the namespaces,
  ``--create-concurrency`` at a time) and watches memcacheds and deployments to see progress.

Figures:

- ``wall_seconds``: from the first create sent to the moment the bench's watch shows every
  Memcached with its Deployment at ``spec.replicas == size`` and ``status.observedGeneration ==
  metadata.generation``;
- ``cr_to_deployment_ms``: per Memcached, the arrival of its Deployment's ADDED event on the
  bench's watch minus the arrival of its own ADDED event (creationTimestamps only have 1 s
  resolution);
- ``requests_per_cr``: memop's requests in the server's log (user agent ``memop/...``), by
  ``verb resource[/subresource]``, divided by the number of Memcacheds, up to convergence and
  up to "settled" (every Memcached Available with its pod ready and memop quiet for two
  seconds, its Events sent);
  ``writes_per_cr`` sums the writes (create, update, patch, delete) to memcacheds,
  memcacheds/status and deployments, with Events counted apart;
- ``reconciles_per_cr`` from memop's ``controller_runtime_reconcile_total``;
- ``watch_events_per_cr_to_converge``: the events of the run's Memcacheds and Deployments the
  bench's own watches received until convergence, the same memop's watches receive; pods'
  too with ``--count-pod-events`` (a watch of the bench's own, held in the floor's runs too);
- ``memop_gc``: the CPU seconds memop's garbage collector spent, and its collections per
  generation, to converge (``memop_gc_collection_seconds_total``, ``python_gc_collections_total``);
- ``idle``: after settling, the bench adds a label of its own to every Deployment (nothing
  memop owns changes, so nothing needs doing) and counts memop's requests per resulting
  reconcile. A label, not an annotation: an annotation bumps a Deployment's generation (as in
  kube-apiserver), and until its controller observes it memop rightly reports Progressing;
- memop's CPU seconds (``/proc/<pid>/stat`` utime+stime) from the first create to convergence
  and to settling, and its peak RSS (``VmHWM``);
- ``while_converging``: the API server's and the bench's CPU meanwhile (a server utilisation
  near 1.0 means the server, not memop, set the pace).

``--repeat N`` runs every mode N times (alternating) and reports the median run, with every
run's wall time. Each run's whole report is also written to stderr as one JSON line
(``{"run_done": MODE, "crs": N, "round": K, "of": R, "report": {...}}``) as the run ends, so
a bench stopped early keeps what it measured; a failing ``--fresh-cmd`` stops it with one line
(exit status 1). With ``--compare``, ``memop_over_floor`` is the median memop run's wall time
over the median floor run's; ``memop_over_floor_each_pair`` has each memop run over the floor
run after it, and ``memop_cpu_over_floor_cpu`` memop's CPU to converge over the floor
script's (both steadier than absolute figures on a machine whose speed drifts); the floor's
``floor_cpu_seconds_from_start`` counts its start-up too, as memop's ``from_start_to_converge``.
``--sizes 1000,3000,10000`` shows how cost grows with work: at each size in turn, ``--repeat``
rounds of memop and the floor alternately (as ``--compare``), and one report with, per size,
memop's wall time over the floor's (median, and each round's pair), its CPU seconds to
converge and from its start to convergence, peak RSS, GC seconds, writes, reconciles and watch
events per CR.
``--profile FILE`` samples memop with py-spy from the first create until settled,
``--profile-server FILE`` the API server until converged (as in the floor's run, so the two
compare); both write collapsed stacks.
``--memop-arg ARG`` (repeatable) passes a flag to memop, e.g. ``--memop-arg=--event-qps=0``.

With ``--kubeconfig`` the bench uses that cluster instead of starting one (it must serve
apps/v1 Deployments with a working controller, and memop's CRD is installed if missing);
request counts then come from memop's ``rest_client_requests_total`` and are by HTTP method
only, Events and Leases included; ``--server-pid`` (repeatable) names that control plane's
processes when they run on this machine, whose CPU is then reported as the in-memory server's
is. Each run then uses fresh namespaces
(``bench-<random>-<i>``), which it deletes (and waits for) before the next run; or, with
``--fresh-cmd COMMAND``, the command gives every run a fresh control plane (etcd wiped) and
nothing is deleted: deleting 10,000 converged Memcacheds keeps kube-apiserver and its garbage
collector busy for minutes, and a run started meanwhile is slowed by it. ``--server-pid-file
GLOB`` then names the control plane's processes by their pid files, read again before each run.
The floor runs on memop's event loop (``--floor-event-loop``, uvloop where installed); each
size's summary gives memop's CPU from its start over the floor process's
(``memop_cpu_from_start_over_floor``: the ratio of the medians, and round by round) and memop's
CPU per 1,000 CRs; ``--profile-floor FILE`` samples the floor as ``--profile`` samples memop.
``--skip-settle`` stops each run at convergence (on a real cluster, readying a thousand pods
measures its kubelets more than memop).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import json
import os
import platform
import resource
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from controlplanemodel import DEFAULT_CONTROL_PLANE_CPU, DEFAULT_WRITE_LATENCY, ControlPlaneModel
from kubernetes_asyncio.client import ApiClient
from otheroperator import OperatorProcess, parse_operator
from prometheus_client.parser import text_string_to_metric_families

from memop.cli import eventloop
from memop.memcached.api import FINALIZER, MEMCACHEDS, parse_spec
from memop.memcached.desired import desired_deployment
from memop.memcached.status import compute_status
from memop.runtime.cache.reflector import Reflector
from memop.runtime.cache.store import DELETED, Obj, ObjectStore
from memop.runtime.client.client import Client
from memop.runtime.client.errors import AlreadyExists, ApiError, NotFound, TransportError
from memop.runtime.client.kubeconfig import load_configuration
from memop.runtime.client.resources import DEPLOYMENTS, NAMESPACES, PODS, SERVICE_ACCOUNTS, Resource
from memop.runtime.manager.events import NORMAL, EventRecorder
from memop.testing.apiserver import featuregates
from memop.testing.process import MemopProcess
from memop.testing.wait import wait_for

Key = tuple[str, str]
# Prometheus samples: (sample name, labels) → value.
Metrics = dict[tuple[str, frozenset[tuple[str, str]]], float]
WRITE_VERBS = ("create", "update", "patch", "delete")
BENCH_AGENT = "memop-bench"
FLOOR_AGENT = "memop-floor"


# -- the cluster's process --------------------------------------------------------------------------


def _agent(user_agent: str) -> str:
    """The product token of a User-Agent (``memop/0.1.0 (host_uuid)`` → ``memop``)."""
    return user_agent.split("/", 1)[0].split(" ", 1)[0] or "-"


async def serve(args: argparse.Namespace) -> int:
    """The API server plus a control channel: one JSON command per stdin line, one JSON answer
    per stdout line; EOF on stdin stops the server.

    Commands: ``{"op": "log", "start": i}`` → ``{"end": n, "counts": [[agent, verb, resource,
    subresource, status, count], ...]}`` over the request-log records ``i..n``;
    ``{"op": "watches", "start": i, "agent": a}`` → ``{"watches": [[time, status, path], ...]}``,
    the watch requests of agent ``a`` from record ``i`` on (wall-clock arrival times);
    ``{"op": "restart", "downtime": s}`` → ``{"listening_at": t}``: the server restarts as a
    kube-apiserver does (connections refused for ``s`` seconds, watch cache rebuilt) and answers
    once it listens again (wall-clock ``t``);
    ``{"op": "writes", "since": t, "resources": [[resource, subresource], ...]}`` → ``{"writes":
    [[time, user_agent, namespace, name, status], ...]}``, the writes (create, update, patch,
    delete) to those resources that arrived at wall-clock ``t`` or later.

    ``--feature-gates`` sets the server's feature gates (kube-apiserver's syntax; none by default);
    ``--audit-log PATH`` has it write an audit log there, as kube-apiserver's
    (memop.testing.apiserver.requestlog).
    """
    # Imported here: the bench's other roles do not need the server.
    from memop.runtime.manager.gctuning import tune_gc  # noqa: PLC0415
    from memop.testing.__main__ import controller_limits, write_kubeconfig_atomically  # noqa: PLC0415
    from memop.testing.apiserver.server import ApiServer  # noqa: PLC0415

    tune_gc()
    server = ApiServer(
        simulate_controllers=True,
        pod_ready_delay=args.pod_ready_delay,
        history_size=args.history_size,
        tls=args.tls,
        controller_limits=controller_limits(args.controller_qps, args.controller_burst),
        nodes=args.nodes,
        feature_gates=args.feature_gates,
        audit_log=args.audit_log,
    )
    model = ControlPlaneModel(args.write_latency, args.control_plane_cpu)
    await server.start()
    await model.start(server)
    try:
        write_kubeconfig_atomically(server, Path(args.kubeconfig))
        print(json.dumps({"url": server.url, "pid": os.getpid(), "load_pids": model.pids}), flush=True)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            command = json.loads(line)
            if command.get("op") == "log":
                records = server.log.records
                counts = Counter(
                    (_agent(r.user_agent), r.verb, r.resource, r.subresource, r.status)
                    for r in records[int(command.get("start", 0)) :]
                    if r.resource_request
                )
                answer: dict[str, Any] = {
                    "end": len(records),
                    "counts": [[*k, n] for k, n in sorted(counts.items())],
                }
            elif command.get("op") == "watches":
                agent = command.get("agent")
                answer = {
                    "watches": [
                        [r.time, r.status, r.path]
                        for r in server.log.records[int(command.get("start", 0)) :]
                        if r.verb == "watch" and _agent(r.user_agent) == agent
                    ]
                }
            elif command.get("op") == "restart":
                await server.restart(downtime=float(command.get("downtime", 0)), rebuild_watch_cache=True)
                answer = {"listening_at": time.time()}
            elif command.get("op") == "writes":
                since = float(command.get("since", 0))
                wanted = {(str(res), str(sub)) for res, sub in command.get("resources", [])}
                answer = {
                    "writes": [
                        [r.time, r.user_agent, r.namespace, r.name, r.status]
                        for r in server.log.records
                        if r.time >= since and r.verb in WRITE_VERBS and (r.resource, r.subresource) in wanted
                    ]
                }
            else:
                answer = {"error": f"unknown command {command!r}"}
            print(json.dumps(answer), flush=True)
    finally:
        await model.stop()
        await server.stop()
    return 0


@dataclass
class RequestCounts:
    """Requests from the server's log: (agent, verb, resource, subresource, status) → count."""

    counts: Counter[tuple[str, str, str, str, int]] = field(default_factory=Counter)

    @classmethod
    def parse(cls, rows: Iterable[Sequence[Any]]) -> RequestCounts:
        return cls(Counter({(r[0], r[1], r[2], r[3], int(r[4])): int(r[5]) for r in rows}))

    def by_call(self, agent: str) -> Counter[str]:
        """``"verb resource[/subresource]"`` → count, for one agent."""
        out: Counter[str] = Counter()
        for (who, verb, res, sub, _status), n in self.counts.items():
            if who == agent:
                out[f"{verb} {res}/{sub}" if sub else f"{verb} {res}"] += n
        return out

    def total(self, agent: str, *, ignore: tuple[str, ...] = ()) -> int:
        """Requests by ``agent``, except those to the resources in ``ignore``."""
        return sum(n for (who, _v, res, *_r), n in self.counts.items() if who == agent and res not in ignore)

    def failed(self, agent: str) -> int:
        return sum(n for (who, *_r, status), n in self.counts.items() if who == agent and status >= 400)


@dataclass(frozen=True)
class Write:
    """One write from the server's log (see :meth:`ServerProcess.writes`)."""

    time: float  # wall clock
    user_agent: str
    namespace: str
    name: str
    status: int


class ServerProcess:
    """The cluster's process (see :func:`serve`), driven from the bench."""

    def __init__(
        self,
        kubeconfig: Path,
        *,
        pod_ready_delay: float,
        history_size: int,
        tls: bool,
        controller_qps: float = 0.0,
        controller_burst: int = 30,
        nodes: bool = True,
        write_latency: float = 0.0,
        control_plane_cpu: float = 0.0,
        feature_gates: Mapping[str, bool] | None = None,
        audit_log: Path | None = None,
    ) -> None:
        """``controller_qps``: the simulated controllers' client rate limit (0: none, the
        default here; the converge bench passes kube-controller-manager's 20), ``nodes``: pods
        run (or, False, stay Pending, unschedulable, as on a control plane without nodes),
        ``feature_gates``: the server's (e.g. ``{"ShardedListAndWatch": True}``; None: its
        defaults); ``audit_log``: where it writes its audit log (None: none)."""
        self.kubeconfig = kubeconfig
        self.pod_ready_delay = pod_ready_delay
        self.history_size = history_size
        self.tls = tls
        self.controller_qps = controller_qps
        self.controller_burst = controller_burst
        self.nodes = nodes
        # What a real control plane adds (bench/controlplanemodel.py): 0, 0 is the server alone.
        self.write_latency = write_latency
        self.control_plane_cpu = control_plane_cpu
        self.feature_gates = dict(feature_gates or {})
        self.audit_log = audit_log
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""
        self.load_pids: list[int] = []
        self._lock = asyncio.Lock()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> ServerProcess:
        gates = ",".join(f"{name}={'true' if on else 'false'}" for name, on in self.feature_gates.items())
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            os.path.abspath(__file__),
            "serve",
            "--kubeconfig",
            str(self.kubeconfig),
            "--pod-ready-delay",
            str(self.pod_ready_delay),
            "--history-size",
            str(self.history_size),
            "--tls" if self.tls else "--no-tls",
            "--controller-qps",
            str(self.controller_qps),
            "--controller-burst",
            str(self.controller_burst),
            "--nodes" if self.nodes else "--no-nodes",
            "--write-latency",
            str(self.write_latency),
            "--control-plane-cpu",
            str(self.control_plane_cpu),
            *(("--feature-gates", gates) if gates else ()),
            *(("--audit-log", str(self.audit_log)) if self.audit_log is not None else ()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )
        assert self.process.stdout is not None
        first = await asyncio.wait_for(self.process.stdout.readline(), 60)
        if not first:
            raise RuntimeError(f"the API server process exited with {await self.process.wait()}")
        hello = json.loads(first)
        self.url = hello["url"]
        self.load_pids = hello["load_pids"]
        return self

    async def call(self, op: str, *, timeout: float = 60.0, **args: Any) -> dict[str, Any]:
        assert self.process is not None
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        async with self._lock:
            self.process.stdin.write(json.dumps({"op": op, **args}).encode() + b"\n")
            await self.process.stdin.drain()
            line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        if not line:
            raise RuntimeError("the API server process is gone")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    async def log_end(self) -> int:
        return int((await self.call("log", start=1 << 62))["end"])

    async def requests(self, start: int) -> RequestCounts:
        """Requests logged from index ``start`` on."""
        answer = await self.call("log", start=start)
        return RequestCounts.parse(answer["counts"])

    async def writes(self, since: float, resources: Iterable[tuple[str, str]]) -> list[Write]:
        """Writes to ``resources`` (``(resource, subresource)`` pairs, ``""`` for none) since
        wall-clock ``since``."""
        rows = (await self.call("writes", since=since, resources=[list(r) for r in resources]))["writes"]
        return [Write(float(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4])) for r in rows]

    async def stop(self) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 30)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


# -- what a process costs --------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcStats:
    cpu_seconds: float
    rss_mb: float
    peak_rss_mb: float
    # How many times the process has slept waiting (voluntary_ctxt_switches).
    voluntary_switches: int = 0


def proc_stats(pid: int) -> ProcStats:
    """CPU seconds (user + system) so far, current and peak resident memory, and voluntary
    context switches of a live process."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # Fields after the command (which may contain spaces) in parentheses: utime and stime are
    # fields 14 and 15 of the whole line, 12 and 13 after ")".
    fields = stat.rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    status: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            status[name] = int(value.split()[0]) / 1024
        elif name == "voluntary_ctxt_switches":
            status[name] = int(value)
    return ProcStats(
        round(cpu, 2),
        round(status["VmRSS"], 1),
        round(status["VmHWM"], 1),
        int(status.get("voluntary_ctxt_switches", 0)),
    )


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class OthersCpu:
    """CPU seconds of the API server's process and of the bench itself, between two marks:
    whether they, rather than memop, were the bottleneck."""

    server_pids: Sequence[int]
    start: tuple[float, float] = (0.0, 0.0)
    end: tuple[float, float] = (0.0, 0.0)

    def _now(self) -> tuple[float, float]:
        server = sum(proc_stats(pid).cpu_seconds for pid in self.server_pids)
        return server, own_cpu_seconds()

    def mark_start(self) -> None:
        self.start = self._now()

    def mark_end(self) -> None:
        self.end = self._now()

    def report(self, wall: float) -> dict[str, Any]:
        server = self.end[0] - self.start[0]
        out: dict[str, Any] = {"bench_cpu_seconds": round(self.end[1] - self.start[1], 2)}
        if self.server_pids:
            out["server_cpu_seconds"] = round(server, 2)
            out["server_cpu_utilisation"] = round(server / wall, 2) if wall > 0 else None
        return out


# -- memop's metrics --------------------------------------------------------------------------------


def parse_metrics(text: str) -> Metrics:
    """Prometheus text → (sample name, labels) → value."""
    out: Metrics = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def metric_sum(metrics: Metrics, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in metrics.items() if n == name and want <= ls)


def metric_by(metrics: Metrics, name: str, label: str) -> dict[str, float]:
    """``name``'s samples summed by the value of one label."""
    out: dict[str, float] = {}
    for (n, ls), v in metrics.items():
        if n == name:
            key = dict(ls).get(label, "")
            out[key] = out.get(key, 0.0) + v
    return out


def watched_per_cr(before: Metrics, after: Metrics, crs: int) -> dict[str, float]:
    """What memop's own reflectors received by watch between two scrapes, per resource and per
    CR (its echoes skipped undecoded included): the work memop's watches did that the floor's
    single watch of Memcacheds does not."""

    name = "memop_reflector_objects_received_total"
    return {
        resource: round(
            (
                metric_sum(after, name, resource=resource, source="watch")
                - metric_sum(before, name, resource=resource, source="watch")
            )
            / crs,
            3,
        )
        for resource in metric_by(after, name, "resource")
    }


async def scrape(memop: MemopProcess) -> Metrics:
    status, text = await memop.get("/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    return parse_metrics(text)


# -- the bench's view of the cluster ---------------------------------------------------------------


def _condition(obj: Obj, kind: str) -> dict[str, Any]:
    status = obj.get("status")
    for c in (status.get("conditions") if isinstance(status, dict) else None) or ():
        if isinstance(c, dict) and c.get("type") == kind:
            return c
    return {}


class WatchCounter:
    """Watches what memop watches (memcacheds, deployments, and pods with memop's label selector,
    per namespace) and counts the events and bytes a watcher receives, per resource: how much
    watch traffic a server sends memop for the same work (a real server's controllers write
    status more often than the in-memory one's, and its objects carry more)."""

    def __init__(self, client: Client, namespaces: Sequence[str]) -> None:
        self.client = client
        self.namespaces = list(namespaces)
        self.events: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        from memop.memcached.controller import POD_SELECTOR  # noqa: PLC0415

        for res, selector in ((MEMCACHEDS, None), (DEPLOYMENTS, None), (PODS, str(POD_SELECTOR))):
            for namespace in self.namespaces:
                listed = await self.client.list(res, namespace, label_selector=selector, limit=1)
                rv = str(listed["metadata"]["resourceVersion"])
                self._tasks.append(asyncio.create_task(self._count(res, namespace, selector, rv)))

    async def _count(self, res: Resource, namespace: str, selector: str | None, rv: str) -> None:
        stream = self.client.watch_batches(
            res, namespace, resource_version=rv, timeout_seconds=3600, read_timeout=3600,
            label_selector=selector, allow_bookmarks=False,
        )  # fmt: skip
        async for batch in stream:
            for event in batch:
                self.events[res.plural] += 1
                self.bytes[res.plural] += len(json.dumps(event["object"], separators=(",", ":")))

    def snapshot(self, crs: int) -> dict[str, Any]:
        return {
            "events_per_cr": {k: round(v / crs, 2) for k, v in sorted(self.events.items())},
            "kib_per_cr": {k: round(v / crs / 1024, 2) for k, v in sorted(self.bytes.items())},
        }

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class Tracker:
    """The bench's own watches on memcacheds and deployments (cluster-wide), and what they show.

    For each expected Memcached: when its ADDED event arrived, when its Deployment's did, when it
    first converged (Deployment at the wanted replicas, status for the current generation) and
    when it first settled (also Available with ``readyReplicas == size``).

    It also counts the watch events of the expected Memcacheds' namespaces, per resource, up to
    convergence (:attr:`events_to_converge`): the events memop's own watches receive for the
    same work, at no extra cost to the server. ``count_pods`` adds a watch of the pods memop
    watches (its label selector), the only one the bench holds for counting alone; it then
    loads the server equally in memop's runs and the floor's.
    """

    def __init__(self, client: Client, *, count_pods: bool = False) -> None:
        self.client = client
        self.wanted: dict[Key, int] = {}
        self.cr_seen: dict[Key, float] = {}
        self.deployment_seen: dict[Key, float] = {}
        self.converged_at: dict[Key, float] = {}
        self.settled_at: dict[Key, float] = {}
        self.all_converged = asyncio.Event()
        self.all_settled = asyncio.Event()
        self.events: Counter[str] = Counter()
        self.events_to_converge: Counter[str] = Counter()
        self._namespaces: set[str] = set()
        self.memcacheds = ObjectStore(MEMCACHEDS)
        self.deployments = ObjectStore(DEPLOYMENTS)
        # The client's reachability: after an outage (bench/outage.py) the bench sees the
        # server back as soon as memop does, not after a backoff of its own.
        self._reflectors = [
            Reflector(
                client, MEMCACHEDS, self.memcacheds, self._on_memcached, reachability=client.reachability
            ),
            Reflector(
                client, DEPLOYMENTS, self.deployments, self._on_deployment, reachability=client.reachability
            ),
        ]
        if count_pods:
            from memop.memcached.controller import POD_SELECTOR  # noqa: PLC0415

            self._reflectors.append(
                Reflector(
                    client,
                    PODS,
                    ObjectStore(PODS),
                    self._on_pod,
                    label_selector=POD_SELECTOR,
                    reachability=client.reachability,
                )
            )
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(r.run()) for r in self._reflectors]
        await asyncio.gather(*(r.synced.wait() for r in self._reflectors))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def expect(self, wanted: dict[Key, int]) -> None:
        """From now on, wait for exactly these Memcacheds at these sizes."""
        self.wanted = dict(wanted)
        self._namespaces = {namespace for namespace, _ in self.wanted}
        self.events.clear()
        self.events_to_converge.clear()
        self.converged_at.clear()
        self.settled_at.clear()
        self.all_converged.clear()
        self.all_settled.clear()
        for key in self.wanted:
            self._check(key)

    def _count(self, plural: str, key: Key) -> None:
        if key[0] in self._namespaces:
            self.events[plural] += 1

    def _on_pod(self, kind: str, obj: Obj, old: Obj | None) -> None:
        self._count(PODS.plural, _key(obj))

    def _on_memcached(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = _key(obj)
        self._count(MEMCACHEDS.plural, key)
        if kind != DELETED:
            self.cr_seen.setdefault(key, time.monotonic())
        self._check(key)

    def _on_deployment(self, kind: str, obj: Obj, old: Obj | None) -> None:
        key = _key(obj)
        self._count(DEPLOYMENTS.plural, key)
        if kind != DELETED:
            self.deployment_seen.setdefault(key, time.monotonic())
        self._check(key)

    def _check(self, key: Key) -> None:
        size = self.wanted.get(key)
        if size is None or key in self.settled_at:
            return
        cr = self.memcacheds.get(key[1], key[0])
        deployment = self.deployments.get(key[1], key[0])
        if cr is None or deployment is None:
            return
        status = _mapping(cr.get("status"))
        generation = cr["metadata"].get("generation")
        # An operator that writes no status.observedGeneration (controller-runtime's tutorial
        # writes conditions only) has converged at its first status, as the issue defines it.
        if not (
            _mapping(cr.get("spec")).get("size") == size
            and _mapping(deployment.get("spec")).get("replicas") == size
            and status
            and status.get("observedGeneration", generation) == generation
        ):
            return
        now = time.monotonic()
        self.converged_at.setdefault(key, now)
        if len(self.converged_at) == len(self.wanted) and not self.all_converged.is_set():
            self.events_to_converge = Counter(self.events)
            self.all_converged.set()
        if _condition(cr, "Available").get("status") == "True" and status.get("readyReplicas") == size:
            self.settled_at[key] = now
            if len(self.settled_at) == len(self.wanted):
                self.all_settled.set()

    def events_per_cr(self) -> dict[str, float]:
        """Watch events per expected Memcached up to convergence, per resource."""
        crs = max(1, len(self.wanted))
        return {k: round(v / crs, 2) for k, v in sorted(self.events_to_converge.items())}

    def latencies_ms(self) -> list[float]:
        """Per expected Memcached: its Deployment's arrival minus its own, in ms, sorted."""
        return sorted(
            1000 * (self.deployment_seen[k] - self.cr_seen[k])
            for k in self.wanted
            if k in self.cr_seen and k in self.deployment_seen
        )


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return round(sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))], 1)


# -- the cluster's content --------------------------------------------------------------------------


def memcached(name: str, namespace: str, size: int) -> Obj:
    return {
        "apiVersion": MEMCACHEDS.api_version,
        "kind": MEMCACHEDS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": size},
    }


def plan(crs: int, namespaces: Sequence[str], prefix: str = "mc") -> list[Key]:
    """CR keys, round-robin over ``namespaces``."""
    return [(namespaces[i % len(namespaces)], f"{prefix}-{i:05d}") for i in range(crs)]


async def run_bounded(concurrency: int, jobs: Iterable[Any], work: Any) -> None:
    """Await ``work(job)`` for every job, at most ``concurrency`` at a time."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)

    async def worker() -> None:
        while not queue.empty():
            await work(queue.get_nowait())

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def create_namespaces(client: Client, names: Sequence[str]) -> None:
    for name in names:
        with contextlib.suppress(AlreadyExists):
            await client.create(NAMESPACES, {"metadata": {"name": name}})


async def create_memcacheds(client: Client, keys: Sequence[Key], size: int, concurrency: int) -> None:
    async def create(key: Key) -> None:
        await client.create(MEMCACHEDS, memcached(key[1], key[0], size), key[0])

    await run_bounded(concurrency, keys, create)


# memop's default Event rate limit (ManagerOptions.event_qps and event_burst; a test checks
# they agree), which the floor's Events keep: not imported, so the floor loads no more of
# memop than it did.
MEMOP_EVENT_QPS = 20.0
MEMOP_EVENT_BURST = 100

# -- the floor's process ----------------------------------------------------------------------------


async def floor(args: argparse.Namespace) -> int:
    """Issue memop's three writes per new Memcached with ``workers`` workers fed by a watch.

    Prints ``{"ready": true}`` once its watches are open, then, when stdin closes, a JSON
    object with what it did and its own CPU seconds.
    """
    configuration = await load_configuration(args.kubeconfig)
    namespaces: list[str | None] = list(args.namespace) or [None]
    owned = frozenset(args.owned_namespace)
    done = errors = 0
    seen: set[Key] = set()
    queue: asyncio.Queue[Obj] = asyncio.Queue()
    async with ApiClient(configuration) as api:
        client = Client(api, user_agent=f"{FLOOR_AGENT}/1")
        # With --floor-events the floor also records memop's Event per Memcached through memop's
        # recorder, as memop's manager makes it: deferred while the floor has work (memop's wait
        # for its queues), then at memop's default --event-qps and --event-burst. Without it the
        # floor keeps no count of its work: nothing reads it.
        work = FloorWork() if args.floor_events else None
        recorder = (
            EventRecorder(client, "memop-floor", qps=MEMOP_EVENT_QPS, burst=MEMOP_EVENT_BURST, workload=work)
            if work is not None
            else None
        )
        if recorder is not None:
            recorder.start()

        async def watch(res: Resource, namespace: str | None, rv: str) -> None:
            while True:
                try:
                    async for event in client.watch(
                        res, namespace, resource_version=rv, timeout_seconds=3600, read_timeout=300
                    ):
                        obj = event["object"]
                        rv = str(obj["metadata"].get("resourceVersion") or rv)
                        key = _key(obj)
                        if (
                            res is MEMCACHEDS
                            and event["type"] == "ADDED"
                            and key not in seen
                            # Watching all namespaces of a shared cluster, it must not touch
                            # other runs' or other tests' Memcacheds.
                            and (not owned or key[0] in owned)
                        ):
                            seen.add(key)
                            if work is not None:
                                work.add()
                            queue.put_nowait(obj)
                except TransportError:
                    continue

        async def converge(obj: Obj) -> None:
            meta = obj["metadata"]
            name, namespace = meta["name"], meta["namespace"]
            # Beside the finalizers it has (as memop adds its own), under the resourceVersion read.
            finalizers = [*(meta.get("finalizers") or []), FINALIZER]
            patched = await client.patch(
                MEMCACHEDS,
                name,
                {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}},
                namespace,
            )
            spec = parse_spec(patched)
            created = await client.create(DEPLOYMENTS, desired_deployment(patched, spec), namespace)
            if recorder is not None:
                recorder.record(patched, NORMAL, "Created", f"Created Deployment {name}")
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            status = compute_status(patched, spec, created, [], now)
            await client.patch_status(MEMCACHEDS, name, {"status": status}, namespace)

        async def worker() -> None:
            nonlocal done, errors
            while True:
                obj = await queue.get()
                try:
                    await converge(obj)
                    done += 1
                except (ApiError, TransportError) as error:
                    # Never expected on a healthy server; re-read and try again.
                    errors += 1
                    print(json.dumps({"error": str(error)}), file=sys.stderr, flush=True)
                    meta = obj["metadata"]
                    with contextlib.suppress(ApiError, TransportError):
                        again = await client.get(MEMCACHEDS, meta["name"], meta["namespace"])
                        if work is not None:
                            work.add()
                        queue.put_nowait(again)
                finally:
                    if work is not None:
                        work.done()

        # With --floor-watches the floor also holds memop's other watches (their events are
        # decoded and dropped): the API server then does the same fan-out work for both.
        watched = [MEMCACHEDS, DEPLOYMENTS, PODS] if args.floor_watches else [MEMCACHEDS]
        starts = []
        for res in watched:
            for namespace in namespaces:
                listed = await client.list(res, namespace)
                starts.append((res, namespace, str(listed["metadata"]["resourceVersion"])))
        tasks = [asyncio.create_task(watch(res, ns, rv)) for res, ns, rv in starts]
        tasks += [asyncio.create_task(worker()) for _ in range(args.workers)]
        # The watches are open once the server has logged them; the bench checks that.
        print(json.dumps({"ready": True}), flush=True)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        await reader.read()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if recorder is not None:
            await recorder.stop()
    loop_name = "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
    print(json.dumps({"done": done, "errors": errors, "event_loop": loop_name}), flush=True)
    return 0


class FloorWork:
    """The floor's work as memop's EventRecorder sees a manager's work queues
    (:class:`memop.runtime.manager.events.Workload`): busy from the moment a Memcached is
    queued until its three writes are done, so the floor's Events wait while it works, as
    memop's wait while its queues do."""

    def __init__(self) -> None:
        self.adds = 0
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def idle(self) -> bool:
        return self._busy == 0

    def add(self) -> None:
        """A Memcached was queued."""
        self.adds += 1
        self._busy += 1
        self._idle.clear()

    def done(self) -> None:
        """A queued Memcached was handled (converged or given up)."""
        self._busy -= 1
        if self._busy == 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()


class FloorProcess:
    def __init__(
        self,
        kubeconfig: str,
        namespaces: Sequence[str],
        workers: int,
        *,
        owned: Sequence[str],
        watches: bool,
        events: bool,
        event_loop: str = eventloop.AUTO,
    ) -> None:
        """``namespaces``: what it watches (none: all); ``owned``: the run's namespaces, the only
        ones whose Memcacheds it writes to; ``event_loop``: one of memop's --event-loop choices."""
        self.args = [
            "floor",
            "--kubeconfig",
            kubeconfig,
            "--workers",
            str(workers),
            "--event-loop",
            event_loop,
        ]
        if watches:
            self.args.append("--floor-watches")
        if events:
            self.args.append("--floor-events")
        for namespace in namespaces:
            self.args += ["--namespace", namespace]
        for namespace in owned:
            self.args += ["--owned-namespace", namespace]
        self.process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> FloorProcess:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            os.path.abspath(__file__),
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 60)
        if not line:
            raise RuntimeError(f"the floor process exited with {await self.process.wait()}")
        return self

    async def finish(self) -> dict[str, Any]:
        assert self.process is not None
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        line = await asyncio.wait_for(self.process.stdout.readline(), 30)
        await self.process.wait()
        return json.loads(line) if line else {}


# -- the benchmark ----------------------------------------------------------------------------------


def memop_args(workers: int, namespaces: Sequence[str], extra: Sequence[str] = ()) -> list[str]:
    args = ["--max-concurrent-reconciles", str(workers), *extra]
    if namespaces:
        args += ["--watch-namespace", ",".join(namespaces)]
    return args


def per_cr(counter: Counter[str], crs: int) -> dict[str, float]:
    return {k: round(v / crs, 3) for k, v in sorted(counter.items())}


def writes_per_cr(calls: Counter[str], crs: int) -> dict[str, float]:
    """Writes to memcacheds, memcacheds/status and deployments (and Events apart), per CR."""
    out: Counter[str] = Counter()
    for call, n in calls.items():
        verb, target = call.split(" ", 1)
        if verb not in WRITE_VERBS:
            continue
        if target in ("memcacheds", "memcacheds/status", "deployments"):
            out[target] += n
            out["total"] += n
        elif target == "events":
            out["events (apart)"] += n
        else:
            out[f"{target} (apart)"] += n
    return per_cr(out, crs)


async def wait_quiet(server: ServerProcess, start: int, agent: str, quiet: float, timeout: float) -> None:
    """Until ``agent`` has sent no request for ``quiet`` seconds (or ``timeout`` passes).
    Lease renewals do not count: a leader renews every few seconds, busy or not."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        total = (await server.requests(start)).total(agent, ignore=("leases",))
        if total != last:
            last, since = total, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        await asyncio.sleep(0.2)


async def start_profiler(output: str, pid: int) -> asyncio.subprocess.Process:
    """py-spy sampling ``pid`` into ``output`` (collapsed stacks), without pausing it."""
    process = await asyncio.create_subprocess_exec(
        "py-spy", "record", "--pid", str(pid), "--output", output, "--format", "raw",
        "--rate", "250", "--nonblocking",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    await asyncio.sleep(1)  # py-spy attaches asynchronously; give it a moment before the load
    if process.returncode is not None:
        raise SystemExit(
            f"converge.py: py-spy exited at once (code {process.returncode}): run "
            f"'py-spy record --pid {pid}' by hand to see why (ptrace permission, say)"
        )
    return process


async def stop_profiler(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:  # a profiler that died meanwhile has written what it could
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
    await asyncio.wait_for(process.wait(), 60)


async def wait_watching(server: ServerProcess, agent: str, watches: int) -> None:
    """Until the server has logged ``watches`` watch requests from ``agent``: a process that is
    ready has listed, but its watches may still be on their way."""

    async def watching() -> bool:
        calls = (await server.requests(0)).by_call(agent)
        return sum(n for call, n in calls.items() if call.startswith("watch ")) >= watches

    await wait_for(watching, timeout=30, interval=0.05)


async def wait_idle(memop: MemopProcess, reconciles_at_least: float, timeout: float) -> None:
    """Until memop has done ``reconciles_at_least`` reconciles in all and has nothing queued."""

    async def idle() -> bool:
        metrics = await scrape(memop)
        return (
            metric_sum(metrics, "controller_runtime_reconcile_total") >= reconciles_at_least
            and metric_sum(metrics, "workqueue_depth") == 0
            and metric_sum(metrics, "controller_runtime_active_workers") == 0
        )

    await wait_for(idle, timeout=timeout, interval=0.25)


@dataclass
class Cluster:
    """Where the bench runs: its kubeconfig, its client (and its ApiClient), and the server
    process if it is ours."""

    kubeconfig: str
    client: Client
    server: ServerProcess | None
    api: ApiClient


@contextlib.asynccontextmanager
async def cluster(
    args: argparse.Namespace,
    workdir: Path,
    *,
    feature_gates: Mapping[str, bool] | None = None,
    audit_log: Path | None = None,
    user_agent: str = f"{BENCH_AGENT}/1",
) -> Any:
    """The cluster ``--kubeconfig`` names, or our in-memory server as the options say (with
    ``feature_gates`` and an ``audit_log`` if given); memop's CRD installed."""
    server: ServerProcess | None = None
    if args.kubeconfig:
        kubeconfig = args.kubeconfig
    else:
        kubeconfig = str(workdir / "kubeconfig")
        server = await ServerProcess(
            Path(kubeconfig),
            pod_ready_delay=getattr(args, "pod_ready_delay", 0.0),
            history_size=getattr(args, "history_size", 200_000),
            tls=args.tls,
            controller_qps=args.controller_qps,
            controller_burst=args.controller_burst,
            nodes=simulated_nodes(args),
            write_latency=args.write_latency,
            control_plane_cpu=args.control_plane_cpu,
            feature_gates=feature_gates,
            audit_log=audit_log,
        ).start()
    try:
        configuration = await load_configuration(kubeconfig)
        async with ApiClient(configuration) as api:
            client = Client(api, user_agent=user_agent)
            # Imported here: memop.testing.operator pulls in the whole runtime's manager.
            from memop.testing.operator import install_crd  # noqa: PLC0415

            await install_crd(client)
            yield Cluster(kubeconfig, client, server, api)
    finally:
        if server is not None:
            await server.stop()


@dataclass(frozen=True)
class Convergence:
    """One run's measured stretch: from the first create until every Memcached converged."""

    started: float
    created: float
    converged: float
    # The wall clock at ``started``, sampled beside it: the server's request log is in wall time.
    started_wall: float
    cpu_before: ProcStats
    cpu_after: ProcStats
    others: OthersCpu

    def wall(self, monotonic: float) -> float:
        """The wall-clock time of a ``time.monotonic()`` reading taken during the run."""
        return self.started_wall + (monotonic - self.started)


async def create_and_converge(
    args: argparse.Namespace,
    client: Client,
    tracker: Tracker,
    keys: Sequence[Key],
    *,
    pid: int,
    server: ServerProcess | None,
) -> Convergence:
    """Create the run's Memcacheds and wait until the operator ``pid`` converged them all,
    with its CPU and the server's and bench's around it (the same for memop, the floor and
    any ``--operator``)."""
    cpu_before = proc_stats(pid)
    tracker.expect(dict.fromkeys(keys, 1))
    # With --kubeconfig, the control plane's processes when they run here (--server-pid).
    others = OthersCpu([server.pid, *server.load_pids] if server else args.server_pid)
    others.mark_start()
    started, started_wall = time.monotonic(), time.time()
    await create_memcacheds(client, keys, 1, args.create_concurrency)
    created = time.monotonic()
    await asyncio.wait_for(tracker.all_converged.wait(), args.timeout)
    converged = max(tracker.converged_at.values())
    cpu_after = proc_stats(pid)
    others.mark_end()
    return Convergence(started, created, converged, started_wall, cpu_before, cpu_after, others)


def latency_figures(tracker: Tracker) -> dict[str, float | None]:
    """``cr_to_deployment_ms``: percentiles of each Memcached's Deployment's arrival after its own."""
    latencies = tracker.latencies_ms()
    return {
        "p50": percentile(latencies, 0.5),
        "p99": percentile(latencies, 0.99),
        "max": round(latencies[-1], 1) if latencies else None,
    }


async def run_memop(args: argparse.Namespace, where: Cluster, namespaces: list[str]) -> dict[str, Any]:
    client, server = where.client, where.server
    keys = plan(args.crs, namespaces)
    tracker = Tracker(client, count_pods=args.count_pod_events)
    await tracker.start()
    counter = WatchCounter(client, namespaces) if args.count_watch_events else None
    if counter is not None:
        await counter.start()
    memop = MemopProcess(
        where.kubeconfig,
        memop_args(args.workers, [] if args.all_namespaces else namespaces, args.memop_arg),
    )
    await memop.start()
    share_core(args, server, memop.pid)
    try:
        await memop.wait_ready(timeout=120)
        if server:
            await wait_watching(server, "memop", 3 * (1 if args.all_namespaces else len(namespaces)))
        start_log = await server.log_end() if server else 0
        metrics0 = await scrape(memop)
        profiler = await start_profiler(args.profile, memop.pid) if args.profile else None
        server_profiler = (
            await start_profiler(args.profile_server, server.pid) if args.profile_server and server else None
        )
        run = await create_and_converge(args, client, tracker, keys, pid=memop.pid, server=server)
        cpu0, cpu_converged, others = run.cpu_before, run.cpu_after, run.others
        t0, t_created, t_converged = run.started, run.created, run.converged
        watch_traffic = counter.snapshot(args.crs) if counter is not None else None
        metrics_converged = await scrape(memop)
        # The server's profile covers convergence only, as in the floor's run, so the two compare.
        if server_profiler is not None:
            await stop_profiler(server_profiler)
        converge_requests = await server.requests(start_log) if server else None

        t_settled: float | None = None
        cpu_settled: ProcStats | None = None
        settle_requests: RequestCounts | None = None
        metrics_settled = metrics_converged
        idle: dict[str, Any] | None = None
        if not args.skip_settle:
            await asyncio.wait_for(tracker.all_settled.wait(), args.timeout)
            t_settled = max(tracker.settled_at.values())
            if server:
                # Longer than the quiet second memop's Events wait for: they are part of settling.
                await wait_quiet(server, start_log, "memop", quiet=2.0, timeout=60)
            await wait_idle(memop, 0, timeout=60)
            cpu_settled = proc_stats(memop.pid)
            if profiler is not None:
                await stop_profiler(profiler)
            settle_log = await server.log_end() if server else 0
            settle_requests = await server.requests(start_log) if server else None
            metrics_settled = await scrape(memop)

            idle = await idle_reconciles(
                args,
                client=client,
                server=server,
                memop=memop,
                keys=keys,
                metrics_before=metrics_settled,
                log_start=settle_log,
            )
        elif profiler is not None:
            await stop_profiler(profiler)
        final = proc_stats(memop.pid)
        metrics_end = await scrape(memop)
    finally:
        await memop.stop()
        await tracker.stop()
        if counter is not None:
            await counter.stop()

    crs = args.crs
    reconciles = {
        k: round((v - metric_by(metrics0, "controller_runtime_reconcile_total", "result").get(k, 0)) / crs, 3)
        for k, v in metric_by(metrics_settled, "controller_runtime_reconcile_total", "result").items()
    }
    report: dict[str, Any] = {
        "wall_seconds": round(t_converged - t0, 2),
        "creates_seconds": round(t_created - t0, 2),
        "settle_seconds": round(t_settled - t0, 2) if t_settled is not None else None,
        "watch_events_per_cr_to_converge": tracker.events_per_cr(),
        "memop_watched_per_cr_to_converge": watched_per_cr(metrics0, metrics_converged, args.crs),
        "cr_to_deployment_ms": latency_figures(tracker),
        "memop_cpu_seconds": {
            "to_converge": round(cpu_converged.cpu_seconds - cpu0.cpu_seconds, 2),
            "to_settle": round(cpu_settled.cpu_seconds - cpu0.cpu_seconds, 2) if cpu_settled else None,
            "startup": cpu0.cpu_seconds,
            "from_start_to_converge": round(cpu_converged.cpu_seconds, 2),
            "process_total": final.cpu_seconds,
        },
        "memop_gc": gc_figures(metrics0, metrics_converged, metrics_end),
        "memop_rss_mb": {"peak": final.peak_rss_mb, "end": final.rss_mb, "after_startup": cpu0.rss_mb},
        "while_converging": others.report(t_converged - t0),
        "reconciles_per_cr": reconciles,
        "reconcile_panics": metric_sum(metrics_end, "controller_runtime_reconcile_panics_total"),
        "memop_warnings_and_errors": log_summary(memop),
        "memop_args": memop.args,
        "idle": idle,
    }
    if watch_traffic is not None:
        report["watch_traffic_to_converge"] = watch_traffic
    if converge_requests is not None:
        # With --skip-settle the figures "to settle" are None.
        converge_calls = converge_requests.by_call("memop")
        settle_calls = settle_requests.by_call("memop") if settle_requests is not None else None
        report["writes_per_cr"] = {
            "to_converge": writes_per_cr(converge_calls, crs),
            "to_settle": writes_per_cr(settle_calls, crs) if settle_calls is not None else None,
        }
        report["requests_per_cr"] = {
            "to_converge": per_cr(converge_calls, crs),
            "to_settle": per_cr(settle_calls, crs) if settle_calls is not None else None,
        }
        report["failed_requests"] = (settle_requests or converge_requests).failed("memop")
        report["requests_counted_from"] = "the API server's request log (user agent memop/...)"
    else:

        def by_method(metrics: Metrics) -> dict[str, float]:
            before = metric_by(metrics0, "rest_client_requests_total", "method")
            return {
                k: round((v - before.get(k, 0)) / crs, 3)
                for k, v in metric_by(metrics, "rest_client_requests_total", "method").items()
            }

        report["requests_per_cr"] = {
            "to_converge_by_http_method": by_method(metrics_converged),
            "to_settle_by_http_method": by_method(metrics_settled),
        }
        report["requests_counted_from"] = (
            "memop's rest_client_requests_total (by HTTP method only; Events and Leases included)"
        )
    return report


def gc_figures(start: Metrics, converged: Metrics, end: Metrics) -> dict[str, Any]:
    """memop's garbage collector to converge (from ``start`` to ``converged``) and over its whole
    life (to ``end``): CPU seconds (memop_gc_collection_seconds_total) and collections
    (python_gc_collections_total), per generation."""

    def by_generation(metrics: Metrics, name: str, since: Metrics | None) -> dict[str, float]:
        before = metric_by(since, name, "generation") if since is not None else {}
        return {g: v - before.get(g, 0.0) for g, v in sorted(metric_by(metrics, name, "generation").items())}

    seconds = by_generation(converged, "memop_gc_collection_seconds_total", start)
    collections = by_generation(converged, "python_gc_collections_total", start)
    return {
        "seconds_to_converge": round(sum(seconds.values()), 3),
        "seconds_to_converge_by_generation": {g: round(v, 3) for g, v in seconds.items()},
        "collections_to_converge": {g: int(v) for g, v in collections.items()},
        "seconds_process_total": round(
            sum(by_generation(end, "memop_gc_collection_seconds_total", None).values()), 3
        ),
    }


def log_summary(memop: MemopProcess) -> dict[str, int]:
    """memop's warning and error log lines, counted by their first words (at most 10 kinds)."""
    counts: Counter[str] = Counter(
        " ".join(str(r.get("msg", "")).split()[:4])
        for r in memop.records
        if r.get("level") in ("warning", "error")
    )
    return dict(counts.most_common(10))


async def idle_reconciles(
    args: argparse.Namespace,
    *,
    client: Client,
    server: ServerProcess | None,
    memop: MemopProcess,
    keys: Sequence[Key],
    metrics_before: Metrics,
    log_start: int,
) -> dict[str, Any]:
    """Annotate every Deployment (nothing memop owns changes) and count memop's requests per
    reconcile that follows."""
    reconciles_before = metric_sum(metrics_before, "controller_runtime_reconcile_total")
    rest_before = metric_sum(metrics_before, "rest_client_requests_total")

    async def poke(key: Key) -> None:
        await client.patch(
            DEPLOYMENTS, key[1], {"metadata": {"labels": {"bench.memop.dev/poke": "1"}}}, key[0]
        )

    await run_bounded(args.create_concurrency, keys, poke)
    await wait_idle(memop, reconciles_before + len(keys), timeout=args.timeout)
    if server:
        await wait_quiet(server, log_start, "memop", quiet=1.0, timeout=30)
    metrics = await scrape(memop)
    reconciles = metric_sum(metrics, "controller_runtime_reconcile_total") - reconciles_before
    if server:
        requests = await server.requests(log_start)
        calls = requests.by_call("memop")
        # Watches re-established meanwhile are not work done for a reconcile.
        count = sum(n for call, n in calls.items() if not call.startswith("watch "))
        detail: dict[str, Any] = dict(calls)
    else:
        count = int(metric_sum(metrics, "rest_client_requests_total") - rest_before)
        detail = {}
    return {
        "reconciles": int(reconciles),
        "requests": count,
        "requests_per_idle_reconcile": round(count / reconciles, 4) if reconciles else None,
        "requests_detail": detail,
    }


async def run_floor(args: argparse.Namespace, where: Cluster, namespaces: list[str]) -> dict[str, Any]:
    client, server = where.client, where.server
    keys = plan(args.crs, namespaces)
    tracker = Tracker(client, count_pods=args.count_pod_events)
    await tracker.start()
    process = await FloorProcess(
        where.kubeconfig,
        [] if args.all_namespaces else namespaces,
        args.workers,
        owned=namespaces,
        watches=args.floor_watches,
        events=args.floor_events,
        event_loop=args.floor_event_loop,
    ).start()
    share_core(args, server, process.pid)
    try:
        if server:
            per_resource = 1 if args.all_namespaces else len(namespaces)
            await wait_watching(server, FLOOR_AGENT, per_resource * (3 if args.floor_watches else 1))
        start_log = await server.log_end() if server else 0
        server_profiler = (
            await start_profiler(args.profile_server, server.pid) if args.profile_server and server else None
        )
        profiler = await start_profiler(args.profile_floor, process.pid) if args.profile_floor else None
        run = await create_and_converge(args, client, tracker, keys, pid=process.pid, server=server)
        cpu0, stats, others = run.cpu_before, run.cpu_after, run.others
        t0, t_created, t_converged = run.started, run.created, run.converged
        if profiler is not None:
            await stop_profiler(profiler)
        if server_profiler is not None:
            await stop_profiler(server_profiler)
        requests = await server.requests(start_log) if server else None
    finally:
        outcome = await process.finish()
        await tracker.stop()
    report: dict[str, Any] = {
        "wall_seconds": round(t_converged - t0, 2),
        "creates_seconds": round(t_created - t0, 2),
        "watch_events_per_cr_to_converge": tracker.events_per_cr(),
        "cr_to_deployment_ms": latency_figures(tracker),
        "floor_also": {
            "watches_deployments_and_pods": args.floor_watches,
            "records_events": args.floor_events,
        },
        "floor_cpu_seconds": round(stats.cpu_seconds - cpu0.cpu_seconds, 2),
        # As memop's from_start_to_converge: the floor process's start-up (its imports, its
        # kubeconfig, its first LIST) included, the least any Python operator pays for it.
        "floor_cpu_seconds_from_start": round(stats.cpu_seconds, 2),
        "floor_rss_mb": {"peak": stats.peak_rss_mb},
        "while_converging": others.report(t_converged - t0),
        "floor_errors": outcome.get("errors"),
        "floor_event_loop": outcome.get("event_loop"),
    }
    if requests is not None:
        calls = requests.by_call(FLOOR_AGENT)
        report["writes_per_cr"] = writes_per_cr(calls, args.crs)
        report["requests_per_cr"] = per_cr(calls, args.crs)
    return report


async def wait_operator_ready(
    tracker: Tracker, client: Client, process: OperatorProcess, namespace: str, timeout: float
) -> None:
    """Another operator has no readiness memop's bench can read: it is ready once it has
    converged a probe Memcached of its own namespace (created before the run's, never counted:
    the run's figures start after it)."""
    probe: Key = (namespace, "bench-probe")
    tracker.expect({probe: 1})
    await create_memcacheds(client, [probe], 1, 1)
    assert process.process is not None
    converged = asyncio.create_task(tracker.all_converged.wait())
    exited = asyncio.create_task(process.process.wait())
    try:
        done, _ = await asyncio.wait(
            {converged, exited}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        converged.cancel()
        exited.cancel()
    if exited in done:
        raise RuntimeError(
            f"operator {process.name} exited with {process.exited()} before it was ready "
            f"(its log: {process.log_path})"
        )
    if converged not in done:
        raise RuntimeError(f"operator {process.name} did not converge a probe Memcached in {timeout:.0f} s")


async def run_operator(
    args: argparse.Namespace, where: Cluster, namespaces: list[str], name: str, template: str
) -> dict[str, Any]:
    """``--operator NAME=COMMAND``: another operator's run, measured as memop's is (wall time to
    converge, CPU from its start, peak RSS), without memop's metrics."""
    client, server = where.client, where.server
    keys = plan(args.crs, namespaces)
    tracker = Tracker(client, count_pods=args.count_pod_events)
    await tracker.start()
    fd, log_name = tempfile.mkstemp(prefix=f"memop-bench-{name}-", suffix=".log")
    os.close(fd)
    process = await OperatorProcess(
        name,
        template,
        kubeconfig=where.kubeconfig,
        workers=args.workers,
        namespaces=[] if args.all_namespaces else namespaces,
        log_path=Path(log_name),
    ).start()
    share_core(args, server, process.pid)
    try:
        await wait_operator_ready(tracker, client, process, namespaces[0], timeout=120)
        start_log = await server.log_end() if server else 0
        run = await create_and_converge(args, client, tracker, keys, pid=process.pid, server=server)
        cpu0, stats, others = run.cpu_before, run.cpu_after, run.others
        t0, t_created, t_converged = run.started, run.created, run.converged
        requests = await server.requests(start_log) if server else None
    finally:
        exit_status = await process.stop()
        await tracker.stop()
    report: dict[str, Any] = {
        "operator": name,
        "command": process.args,
        "wall_seconds": round(t_converged - t0, 2),
        "creates_seconds": round(t_created - t0, 2),
        "watch_events_per_cr_to_converge": tracker.events_per_cr(),
        "cr_to_deployment_ms": latency_figures(tracker),
        "cpu_seconds": {
            "to_converge": round(stats.cpu_seconds - cpu0.cpu_seconds, 2),
            "startup": cpu0.cpu_seconds,
            "from_start_to_converge": stats.cpu_seconds,
        },
        "rss_mb": {"peak": stats.peak_rss_mb, "after_startup": cpu0.rss_mb},
        "while_converging": others.report(t_converged - t0),
        "log": process.log_summary(),
        "exit_status_on_sigterm": exit_status,
    }
    if requests is not None:
        # Every agent but the bench's: the operator's own user agent is its business.
        calls: Counter[str] = Counter()
        for agent in {key[0] for key in requests.counts} - {BENCH_AGENT}:
            calls.update(requests.by_call(agent))
        report["writes_per_cr"] = writes_per_cr(calls, args.crs)
        report["requests_per_cr"] = per_cr(calls, args.crs)
    return report


async def run_rounds(args: argparse.Namespace, modes: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """``args.repeat`` rounds of every mode at ``args.crs``, each run's report by mode."""
    # With --repeat, modes alternate (memop, floor, memop, ...) so that a slow spell of the
    # machine hits both; every run has a fresh cluster.
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for round_number in range(1, args.repeat + 1):
        for mode in modes:
            await refresh_control_plane(args)
            namespaces = bench_namespaces(args)
            with tempfile.TemporaryDirectory(prefix="memop-bench-") as tmp:
                async with cluster(args, Path(tmp)) as where:
                    await create_namespaces(where.client, namespaces)
                    if args.fresh_cmd:
                        await wait_default_service_accounts(where.client, namespaces, args.timeout)
                    try:
                        if mode == "memop":
                            runs[mode].append(await run_memop(args, where, namespaces))
                        elif mode == "floor":
                            runs[mode].append(await run_floor(args, where, namespaces))
                        else:
                            template = dict(args.operator)[mode]
                            runs[mode].append(await run_operator(args, where, namespaces, mode, template))
                        say_run_done(args, mode, round_number, runs[mode][-1])
                    finally:
                        # A fresh control plane replaces this one before the next run.
                        if args.kubeconfig and not args.fresh_cmd:
                            await remove_namespaces(where.client, namespaces, args.timeout)
    return runs


class FreshControlPlaneFailed(Exception):
    """``--fresh-cmd`` exited non-zero: the bench stops (the runs done so far are on stderr)."""


def say_run_done(args: argparse.Namespace, mode: str, round_number: int, report: Mapping[str, Any]) -> None:
    """One JSON line on stderr per run as it ends: a bench of many minutes that stops early
    (a failed ``--fresh-cmd``, Ctrl-C) keeps what it measured."""
    line = {"run_done": mode, "crs": args.crs, "round": round_number, "of": args.repeat, "report": report}
    print(json.dumps(line), file=sys.stderr, flush=True)


async def refresh_control_plane(args: argparse.Namespace) -> None:
    """Before a run: ``--fresh-cmd`` (a fresh control plane), then the control plane's pids
    from ``--server-pid-file`` (into ``args.server_pid``, the processes whose CPU is reported)."""
    if args.fresh_cmd:
        process = await asyncio.create_subprocess_shell(
            args.fresh_cmd, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        _, stderr = await process.communicate()
        if process.returncode != 0:
            said = " ".join(stderr.decode(errors="replace").split())[-500:]
            raise FreshControlPlaneFailed(f"--fresh-cmd exited with {process.returncode}: {said}")
    if args.server_pid_file:
        args.server_pid = sorted(pids_from_files(args.server_pid_file))


def pids_from_files(patterns: Iterable[str]) -> set[int]:
    """The live processes named by the pid files matching ``patterns`` (globs)."""
    pids: set[int] = set()
    for pattern in patterns:
        for path in glob.glob(pattern):
            text = Path(path).read_text().strip()
            if text.isdigit() and Path(f"/proc/{text}/stat").exists():
                pids.add(int(text))
    return pids


async def wait_default_service_accounts(client: Client, namespaces: Sequence[str], timeout: float) -> None:
    """Until the controller-manager of a fresh control plane has given each namespace its
    ``default`` ServiceAccount: its controllers run, and pods can be admitted."""

    async def present() -> bool:
        for namespace in namespaces:
            try:
                await client.get(SERVICE_ACCOUNTS, "default", namespace)
            except NotFound:
                return False
        return True

    await wait_for(present, timeout=timeout, interval=0.5)


def setup_report(args: argparse.Namespace) -> dict[str, Any]:
    """What every report starts with: how the bench was run."""
    return {
        "benchmark": "converge",
        "namespaces": args.namespaces,
        "workers": args.workers,
        "watch": "all namespaces" if args.all_namespaces else "each namespace",
        "create_concurrency": args.create_concurrency,
        "pod_ready_delay": args.pod_ready_delay,
        "cluster": args.kubeconfig or "in-memory API server with simulated controllers (own process)",
        "simulated_control_plane": None
        if args.kubeconfig
        else {
            "controller_qps": args.controller_qps or None,
            "controller_burst": args.controller_burst if args.controller_qps else None,
            "nodes": simulated_nodes(args),
            "write_latency": args.write_latency,
            "control_plane_cpu_per_write": args.control_plane_cpu,
        },
        "server_pids": args.server_pid or None,
        # Options of this bench only (bench/sharding.py reports its setup through here too).
        "server_pid_files": getattr(args, "server_pid_file", None) or None,
        "fresh_control_plane_per_run": getattr(args, "fresh_cmd", None),
        "floor_event_loop": eventloop.resolve(getattr(args, "floor_event_loop", eventloop.AUTO)),
        "repeat": args.repeat,
    }


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version()}


def run_modes(args: argparse.Namespace) -> list[str]:
    """What runs in each round, in order: memop and/or the floor, then each ``--operator``."""
    modes = ["memop", "floor"] if args.compare or args.sizes else ["floor" if args.floor else "memop"]
    return modes + [name for name, _ in args.operator]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    modes = run_modes(args)
    runs = await run_rounds(args, modes)
    report = {"crs": args.crs, **setup_report(args)}
    results = {mode: median_run(mode_runs) for mode, mode_runs in runs.items()}
    if len(results) == 1:
        ((mode, figures),) = results.items()
        report["mode"] = mode
        report.update(figures)
    else:
        report.update(results)
        # The machine's speed drifts between runs (a shared VM): each run over the floor run of
        # its round, and memop's CPU over the floor script's, vary far less.
        for mode in modes:
            if mode == "floor" or "floor" not in runs:
                continue
            report[f"{mode}_over_floor"] = round(
                results[mode]["wall_seconds"] / results["floor"]["wall_seconds"], 3
            )
            report[f"{mode}_over_floor_each_pair"] = [
                round(m["wall_seconds"] / f["wall_seconds"], 3)
                for m, f in zip(runs[mode], runs["floor"], strict=True)
            ]
        floor_cpu = results["floor"].get("floor_cpu_seconds") if "memop" in runs and "floor" in runs else None
        if floor_cpu:
            report["memop_cpu_over_floor_cpu"] = round(
                results["memop"]["memop_cpu_seconds"]["to_converge"] / floor_cpu, 2
            )
    report.update(machine())
    return report


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def memop_writes_per_cr(run: dict[str, Any]) -> float:
    """memop's writes per CR to converge: Memcacheds, their status and Deployments as the server
    logged them; from a real cluster, every POST, PUT, PATCH and DELETE (Events and Leases
    included: memop's own metric has the HTTP method only)."""
    if "writes_per_cr" in run:
        return float(run["writes_per_cr"]["to_converge"].get("total", 0.0))
    by_method = run["requests_per_cr"]["to_converge_by_http_method"]
    return round(
        sum(float(v) for k, v in by_method.items() if k.upper() in ("POST", "PUT", "PATCH", "DELETE")), 3
    )


def server_cpu_seconds(runs: Iterable[dict[str, Any]]) -> list[float]:
    """The server's CPU while each run converged, where it was measured."""
    return [
        float(run["while_converging"]["server_cpu_seconds"])
        for run in runs
        if run.get("while_converging", {}).get("server_cpu_seconds") is not None
    ]


def size_summary(crs: int, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One size's figures over its rounds: medians, and every round's value where rounds spread."""
    memop, floor = runs["memop"], runs["floor"]
    pairs = [round(m["wall_seconds"] / f["wall_seconds"], 3) for m, f in zip(memop, floor, strict=True)]
    cpu = [m["memop_cpu_seconds"]["to_converge"] for m in memop]
    cpu_from_start = [m["memop_cpu_seconds"]["from_start_to_converge"] for m in memop]
    floor_from_start = [f["floor_cpu_seconds_from_start"] for f in floor]
    gc_seconds = [m["memop_gc"]["seconds_to_converge"] for m in memop]
    reconciles = [sum(m["reconciles_per_cr"].values()) for m in memop]
    writes = [memop_writes_per_cr(m) for m in memop]
    events = [m["watch_events_per_cr_to_converge"] for m in memop]
    watched = [m["memop_watched_per_cr_to_converge"] for m in memop]
    server_cpu = server_cpu_seconds(memop)
    floor_server_cpu = server_cpu_seconds(floor)
    return {
        "crs": crs,
        "rounds": len(memop),
        "memop_over_floor": {
            "median": round(
                median([m["wall_seconds"] for m in memop]) / median([f["wall_seconds"] for f in floor]), 3
            ),
            "median_of_pairs": round(median(pairs), 3),
            "each_round": pairs,
        },
        "wall_seconds": {
            "memop_each_round": [m["wall_seconds"] for m in memop],
            "floor_each_round": [f["wall_seconds"] for f in floor],
        },
        "memop_cpu_seconds": {
            "to_converge": round(median(cpu), 2),
            "from_start_to_converge": round(median(cpu_from_start), 2),
            "to_converge_each_round": cpu,
            "from_start_each_round": cpu_from_start,
        },
        "floor_cpu_seconds": round(median([f["floor_cpu_seconds"] for f in floor]), 2),
        "floor_cpu_seconds_from_start": round(median(floor_from_start), 2),
        "floor_cpu_from_start_each_round": floor_from_start,
        # The issue's measure: memop's CPU from its start to convergence over the floor
        # process's, the ratio of the medians, and each round's memop over its floor.
        "memop_cpu_from_start_over_floor": {
            "median": round(median(cpu_from_start) / median(floor_from_start), 3),
            "each_round": [round(m / f, 3) for m, f in zip(cpu_from_start, floor_from_start, strict=True)],
        },
        # Grows with the size if memop's cost per object does.
        "memop_cpu_seconds_from_start_per_1000_crs": round(median(cpu_from_start) / crs * 1000, 3),
        "floor_peak_rss_mb": round(median([f["floor_rss_mb"]["peak"] for f in floor]), 1),
        "memop_peak_rss_mb": {
            "median": round(median([m["memop_rss_mb"]["peak"] for m in memop]), 1),
            "max": max(m["memop_rss_mb"]["peak"] for m in memop),
        },
        "memop_gc": {
            "seconds_to_converge": round(median(gc_seconds), 3),
            "seconds_each_round": gc_seconds,
            "collections_to_converge": memop[len(memop) // 2]["memop_gc"]["collections_to_converge"],
        },
        "writes_per_cr": round(median(writes), 3),
        "reconciles_per_cr": round(median(reconciles), 3),
        "watch_events_per_cr": {
            k: round(median([e.get(k, 0.0) for e in events]), 2)
            for k in sorted({k for e in events for k in e})
        },
        "memop_watched_per_cr": {
            k: round(median([w.get(k, 0.0) for w in watched]), 2)
            for k in sorted({k for w in watched for k in w})
        },
        # The in-memory server's, or with --kubeconfig the --server-pid processes' (memop's runs).
        "server_cpu_seconds_while_converging": median(server_cpu) if server_cpu else None,
        "server_cpu_seconds_while_floor_converges": median(floor_server_cpu) if floor_server_cpu else None,
        "operators": {
            mode: operator_summary(mode_runs, floor)
            for mode, mode_runs in runs.items()
            if mode not in ("memop", "floor")
        },
    }


def operator_summary(runs: list[dict[str, Any]], floor: list[dict[str, Any]]) -> dict[str, Any]:
    """An ``--operator``'s figures at one size, as memop's are given."""
    pairs = [round(o["wall_seconds"] / f["wall_seconds"], 3) for o, f in zip(runs, floor, strict=True)]
    cpu_from_start = [o["cpu_seconds"]["from_start_to_converge"] for o in runs]
    return {
        "over_floor": {
            "median": round(
                median([o["wall_seconds"] for o in runs]) / median([f["wall_seconds"] for f in floor]), 3
            ),
            "median_of_pairs": round(median(pairs), 3),
            "each_round": pairs,
        },
        "wall_seconds_each_round": [o["wall_seconds"] for o in runs],
        "cpu_seconds": {
            "to_converge": round(median([o["cpu_seconds"]["to_converge"] for o in runs]), 2),
            "from_start_to_converge": round(median(cpu_from_start), 2),
            "from_start_each_round": cpu_from_start,
        },
        "peak_rss_mb": {
            "median": round(median([o["rss_mb"]["peak"] for o in runs]), 1),
            "max": max(o["rss_mb"]["peak"] for o in runs),
        },
        "log_error_lines_each_round": [o["log"]["error_lines"] for o in runs],
    }


async def run_sizes(args: argparse.Namespace) -> dict[str, Any]:
    """``--sizes``: memop and the floor, alternately, at each size in turn; one report."""
    report = setup_report(args)
    report["sizes"] = []
    for crs in args.sizes:
        sized = argparse.Namespace(**{**vars(args), "crs": crs})
        runs = await run_rounds(sized, run_modes(sized))
        report["sizes"].append(size_summary(crs, runs))
    report.update(machine())
    return report


# The cores this bench may use, read before share_core narrows its own affinity.
_MACHINE_CORES = sorted(os.sched_getaffinity(0))


def share_core(args: argparse.Namespace, server: ServerProcess | None, operator_pid: int) -> None:
    """With ``--share-core``, run the in-memory API server and the operator (memop or the
    floor) on one core and the bench on the others: the model of an API server busy on every
    core, from which whatever CPU the operator burns is taken. A quiet real control plane (a
    kube-apiserver and etcd on two cores) is not that busy: there memop converged at 1.02-1.06x
    the floor, as the in-memory server says without this option (1.07-1.08x), while with it
    the in-memory server said 1.22-1.24x. So it is off by default."""
    if server is None or not args.share_core:
        return
    cores = _MACHINE_CORES
    if len(cores) < 2:
        return
    shared, rest = {cores[0]}, set(cores[1:])
    os.sched_setaffinity(server.pid, shared)
    os.sched_setaffinity(operator_pid, shared)
    os.sched_setaffinity(0, rest)


async def remove_namespaces(client: Client, namespaces: Sequence[str], timeout: float) -> None:
    """Delete a run's namespaces from a real cluster and wait until they are gone, so the next
    run does not share the cluster with a thousand leftover Deployments and pods. memop is
    stopped by then: the bench removes the finalizers itself."""
    for namespace in namespaces:
        items, _ = await client.list_all(MEMCACHEDS, namespace)
        for item in items:
            with contextlib.suppress(ApiError):
                await client.patch(
                    MEMCACHEDS, item["metadata"]["name"], {"metadata": {"finalizers": None}}, namespace
                )
        with contextlib.suppress(ApiError):
            await client.delete(NAMESPACES, namespace)

    async def gone() -> bool:
        remaining, _ = await client.list_all(NAMESPACES)
        return not {n["metadata"]["name"] for n in remaining} & set(namespaces)

    await wait_for(gone, timeout=timeout, interval=1.0)


def simulated_nodes(args: argparse.Namespace) -> bool:
    """Whether the in-memory server runs pods (see ``--nodes``)."""
    if args.nodes is not None:
        return bool(args.nodes)
    return not getattr(args, "skip_settle", False)


def bench_namespaces(args: argparse.Namespace) -> list[str]:
    """The run's namespaces: fresh names on a cluster that outlives the run (``--kubeconfig``),
    removed after each run (:func:`remove_namespaces`)."""
    prefix = f"bench-{secrets.token_hex(3)}" if args.kubeconfig else "bench"
    return [f"{prefix}-{i}" for i in range(args.namespaces)]


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median wall time, plus every run's wall time when there were several."""
    ordered = sorted(runs, key=lambda r: float(r["wall_seconds"]))
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    if len(runs) > 1:
        chosen["wall_seconds_all_runs"] = [r["wall_seconds"] for r in runs]
    return chosen


class OneLineParser(argparse.ArgumentParser):
    """Bad input is one clear line and exit status 2, without the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=(__doc__ or "").split("\n\n")[0])
    roles = parser.add_subparsers(dest="role")
    served = roles.add_parser("serve", help=argparse.SUPPRESS)
    served.add_argument("--kubeconfig", required=True)
    served.add_argument("--pod-ready-delay", type=float, default=0.0)
    served.add_argument("--history-size", type=int, default=100_000)
    served.add_argument("--tls", action=argparse.BooleanOptionalAction, default=True)
    served.add_argument("--controller-qps", type=float, default=0.0)
    served.add_argument("--write-latency", type=float, default=0.0)
    served.add_argument("--control-plane-cpu", type=float, default=0.0)
    served.add_argument("--controller-burst", type=int, default=30)
    served.add_argument("--nodes", action=argparse.BooleanOptionalAction, default=True)
    served.add_argument("--feature-gates", type=featuregates.parse, default={})
    served.add_argument("--audit-log", type=Path, default=None)
    floored = roles.add_parser("floor", help=argparse.SUPPRESS)
    floored.add_argument("--kubeconfig", required=True)
    floored.add_argument("--workers", type=int, required=True)
    floored.add_argument("--namespace", action="append", default=[])
    floored.add_argument("--owned-namespace", action="append", default=[])
    floored.add_argument("--floor-watches", action="store_true")
    floored.add_argument("--floor-events", action="store_true")
    floored.add_argument("--event-loop", choices=eventloop.EVENT_LOOPS, default=eventloop.AUTO)
    add_bench_options(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--floor", action="store_true", help="measure the floor instead of memop")
    mode.add_argument("--compare", action="store_true", help="measure memop, then the floor, and compare")
    parser.add_argument(
        "--floor-watches",
        action="store_true",
        help="the floor also watches deployments and pods, as memop's cache does",
    )
    parser.add_argument(
        "--floor-events",
        action="store_true",
        help="the floor also records memop's Event per Memcached, deferred and rate-limited as memop's",
    )
    parser.add_argument(
        "--floor-event-loop",
        choices=eventloop.EVENT_LOOPS,
        default=eventloop.AUTO,
        help="the floor's event loop, as memop's --event-loop: auto (uvloop when installed, as memop "
        "runs; the default), uvloop or asyncio",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per mode; figures are the median run's (default 1)"
    )
    parser.add_argument(
        "--sizes",
        type=sizes_list,
        metavar="N,N,...",
        help="how cost grows with work: at each number of Memcacheds in turn, --repeat rounds of memop "
        "and the floor alternately (as --compare), one report with each size's ratio, CPU, peak RSS, "
        "writes, reconciles and watch events per CR (replaces --crs; on a real cluster each run's "
        "namespaces are deleted, and waited for, before the next)",
    )
    parser.add_argument(
        "--operator",
        type=operator_option,
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="also run another operator in every round, after memop and the floor, measured as memop "
        "is (its wall time over the floor's, CPU from its start, peak RSS); COMMAND's {kubeconfig}, "
        "{workers} and {namespaces} are replaced, and it gets KUBECONFIG and WATCH_NAMESPACE (unless "
        "--all-namespaces); ready once it converged a probe Memcached; repeatable",
    )
    parser.add_argument(
        "--side-by-side",
        action="store_true",
        help="in each round, memop, the floor and every --operator converge --crs Memcacheds each at the "
        "same time, on one control plane, each in namespaces of its own that it watches by name: their "
        "CPU for the same work compares within the round (bench/sidebyside.py)",
    )
    parser.add_argument(
        "--profile-floor",
        metavar="FILE",
        help="sample the floor process with py-spy from the first create until converged; collapsed stacks",
    )
    parser.add_argument(
        "--fresh-cmd",
        metavar="COMMAND",
        help="with --kubeconfig, a shell command run before every run that gives it a fresh control "
        "plane (e.g. '/opt/k8s-local/start.sh --clean': etcd wiped); the bench then waits for the "
        "controller-manager's default ServiceAccount in each of the run's namespaces and deletes "
        "nothing after a run (deleting 10,000 Memcacheds' namespaces keeps a real control plane "
        "busy for minutes, and a run started meanwhile is slowed by it)",
    )
    parser.add_argument(
        "--server-pid-file",
        action="append",
        default=[],
        metavar="GLOB",
        help="with --kubeconfig, pid files of that control plane's processes (e.g. "
        "'/opt/k8s-local/run/*.pid'; repeatable), read again before every run (a fresh control "
        "plane has new processes): their CPU while converging is reported, as --server-pid's",
    )
    return parser


def operator_option(text: str) -> tuple[str, str]:
    """``--operator``'s value, checked (see :func:`otheroperator.parse_operator`)."""
    try:
        return parse_operator(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def sizes_list(text: str) -> list[int]:
    """``--sizes``' value: positive numbers separated by commas."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be positive: {text!r}")
    return sizes


def add_bench_options(parser: argparse.ArgumentParser) -> None:
    """Options shared with bench/steady.py."""
    parser.add_argument("--crs", type=int, default=1000, help="Memcacheds to create (default 1000)")
    parser.add_argument("--namespaces", type=int, default=10, help="namespaces they spread over (default 10)")
    parser.add_argument(
        "--workers", type=int, default=4, help="memop's --max-concurrent-reconciles (default 4)"
    )
    parser.add_argument(
        "--all-namespaces", action="store_true", help="memop watches all namespaces instead of each one"
    )
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting the in-memory one")
    parser.add_argument(
        "--server-pid",
        type=int,
        action="append",
        default=[],
        metavar="PID",
        help="with --kubeconfig, a process of that control plane running on this machine (etcd, "
        "kube-apiserver, ...; repeatable): their CPU while converging is reported, as the "
        "in-memory server's is",
    )
    parser.add_argument(
        "--create-concurrency", type=int, default=16, help="the bench's concurrent creates (default 16)"
    )
    parser.add_argument(
        "--pod-ready-delay", type=float, default=0.0, help="seconds a simulated pod stays Pending (default 0)"
    )
    parser.add_argument(
        "--history-size", type=int, default=200_000, help="the server's watch history (default 200000)"
    )
    parser.add_argument(
        "--tls",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the in-memory server serves HTTPS, as every cluster does (default: on)",
    )
    parser.add_argument(
        "--controller-qps",
        type=float,
        default=20.0,
        metavar="Q",
        help="the in-memory server's simulated controllers write at most Q requests a second each, "
        "as kube-controller-manager's default client rate limit (--kube-api-qps 20) makes its "
        "controllers lag behind thousands of objects; 0: no limit (default 20)",
    )
    parser.add_argument(
        "--controller-burst",
        type=int,
        default=30,
        metavar="N",
        help="the burst of that limit (kube-controller-manager's --kube-api-burst; default 30)",
    )
    parser.add_argument(
        "--write-latency",
        type=float,
        default=DEFAULT_WRITE_LATENCY,
        metavar="S",
        help="seconds the in-memory server adds to each write, the latency a real control plane "
        "sharing this machine has beyond it (etcd's commit, admission, API Priority and Fairness; "
        f"default {DEFAULT_WRITE_LATENCY:g}, measured on a v1.36.2 control plane here: see "
        "bench/controlplanemodel.py); 0: none",
    )
    parser.add_argument(
        "--control-plane-cpu",
        type=float,
        default=DEFAULT_CONTROL_PLANE_CPU,
        metavar="S",
        help="CPU seconds spent per write beside the in-memory server, on every core and through "
        "memory, as the rest of a real control plane sharing the machine spends them (default "
        f"{DEFAULT_CONTROL_PLANE_CPU:g}, measured as --write-latency); 0: none",
    )
    parser.add_argument(
        "--nodes",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the in-memory server simulates a node whose kubelet runs the pods; --no-nodes: a "
        "control plane without nodes, pods Pending and unschedulable (default: --no-nodes with "
        "--skip-settle, as the control plane a --kubeconfig run is compared with; --nodes "
        "otherwise, since settling waits for ready pods)",
    )
    parser.add_argument(
        "--memop-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="pass ARG to memop (repeatable), e.g. --memop-arg=--event-qps=0",
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="give up after this many seconds per stage"
    )
    parser.add_argument(
        "--share-core",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="the in-memory server and the operator share one core, the bench has the rest: an "
        "API server busy on every core, from which the operator's CPU is taken (default: off; "
        "on a quiet real control plane it overstated memop's cost)",
    )
    parser.add_argument(
        "--skip-settle",
        action="store_true",
        help="stop at convergence: no wait for every pod to be ready, no idle figures (on a real "
        "cluster, readying a thousand pods can take minutes that measure its kubelets, not memop)",
    )
    parser.add_argument(
        "--count-watch-events",
        action="store_true",
        help="also watch what memop watches and report the events and bytes per CR to converge",
    )
    parser.add_argument(
        "--count-pod-events",
        action="store_true",
        help="the bench also watches the pods memop watches, in memop's runs and the floor's alike, "
        "to report pod watch events per CR (Memcacheds' and Deployments' are always counted)",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="sample memop with py-spy (on PATH) from the first create until settled; collapsed stacks",
    )
    parser.add_argument(
        "--profile-server",
        metavar="FILE",
        help="sample the API server's process (our own only) from the first create until converged",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.role is None and args.nodes is False and not args.skip_settle:
        parser.error("--no-nodes needs --skip-settle: without nodes no pod is ever ready")
    if args.role is None and (args.controller_qps < 0 or args.controller_burst < 1):
        parser.error("--controller-qps must not be negative and --controller-burst at least 1")
    if args.role is None and args.sizes and args.floor:
        parser.error("--sizes runs memop and the floor: drop --floor")
    if args.role is None and args.side_by_side and (args.floor or args.all_namespaces):
        parser.error(
            "--side-by-side runs memop and the floor, each watching its own namespaces: "
            "drop --floor and --all-namespaces"
        )
    if args.role is None and len({name for name, _ in args.operator}) != len(args.operator):
        parser.error("--operator: each NAME once")
    if args.role is None and (args.write_latency < 0 or args.control_plane_cpu < 0):
        parser.error("--write-latency and --control-plane-cpu must not be negative")
    profiling = {
        "--profile": args.profile,
        "--profile-floor": args.profile_floor,
        "--profile-server": args.profile_server,
    }
    if args.role is None and any(profiling.values()) and shutil.which("py-spy") is None:
        option = next(name for name, value in profiling.items() if value)
        parser.error(f"{option} needs py-spy, which is not on PATH (pip install py-spy)")
    if args.role is None and args.server_pid and not args.kubeconfig:
        parser.error("--server-pid is for a control plane given by --kubeconfig")
    if args.role is None and (args.fresh_cmd or args.server_pid_file) and not args.kubeconfig:
        parser.error("--fresh-cmd and --server-pid-file are for a control plane given by --kubeconfig")
    if args.role is None:
        for pid in args.server_pid:
            if not Path(f"/proc/{pid}/stat").exists():
                parser.error(f"--server-pid {pid}: no such process on this machine")
    if args.role == "serve":
        return asyncio.run(serve(args))
    if args.role == "floor":
        return eventloop.run(floor(args), eventloop.resolve(args.event_loop))
    try:
        if args.side_by_side:
            from sidebyside import run_side_by_side  # noqa: PLC0415 - it imports this module

            print(json.dumps(asyncio.run(run_side_by_side(args))))
            return 0
        print(json.dumps(asyncio.run(run_sizes(args) if args.sizes else run(args))))
    except FreshControlPlaneFailed as failed:
        print(f"converge.py: {failed}; the runs done so far are on stderr above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
