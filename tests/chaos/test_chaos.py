"""Chaos: memop keeps every Memcached right while the cluster misbehaves in every way we can make it.

Two memop replicas (real ``python -m memop`` processes) with leader election on short
durations run against the in-memory API server with simulated controllers, and a supervisor
restarts any replica that exits, as the kubelet would. While the Memcacheds are created:

- every watch connection is dropped every ``DROP_EVERY`` seconds;
- 5% of memop's requests fail with 500 and 2% with 429 + Retry-After (one draw per request;
  leases included, so a renewal can fail too);
- once, the history is compacted and every watch gets 410 Expired (reflectors must relist);
- once, the API server restarts: it refuses connections for ``RESTART_DOWNTIME`` seconds and
  comes back with its watch cache rebuilt at the current resourceVersion, so every watch
  resuming from before the restart gets 410 (as kube-apiserver's does);
- once, the leader is SIGKILLed (the standby must take over when the lease runs out).

The drops and random failures go on while every Memcached is then scaled, and then deleted.
After each stage: every Memcached converged (Deployment at its size, status for its
generation, Available with ready pods), exactly one Deployment per Memcached, controlled by
it; after the deletion no Memcached is left (so every finalizer was removed), no Deployment
is left without its owner, and memop created no Deployment while the deletions ran. After
each stage too: no traceback in any replica's output, JSON or not (memop logs JSON; a
traceback there is an ``error`` field), ``controller_runtime_reconcile_panics_total`` is 0 on
every live replica, and every replica that exited did so for a reason it logged (our SIGKILL,
or leadership lost to the faults). At the end: every fault fired, the reflectors relisted
after each 410, the standby (not the killed replica) took the lease, and no memop request
followed a 429 on the same path sooner than its Retry-After.

Size: ``--chaos-crs N`` (or ``MEMOP_CHAOS_CRS``) Memcacheds, default 300 (30 to 60 s on 2
cores), over 5 namespaces. The figures (faults injected, time per stage, failover, retries)
are printed in the run's "figures" section. ``MEMOP_CHAOS_LOG=FILE`` writes every replica's
log records there (JSON lines), to see what happened in a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client.parser import text_string_to_metric_families

from memop.memcached.api import FINALIZER, MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import AlreadyExists, TransportError
from memop.runtime.client.resources import DEPLOYMENTS, LEASES, NAMESPACES, Resource
from memop.testing.apiserver.errors import ApiError as ServerError
from memop.testing.apiserver.faults import ChaosRule
from memop.testing.apiserver.requestlog import RequestRecord
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import install_crd
from memop.testing.process import MemopProcess
from memop.testing.wait import wait_for
from tests.conftest import FIGURES

pytestmark = pytest.mark.fake_only

DEFAULT_CRS = 300
NAMESPACES_USED = [f"chaos-{i}" for i in range(5)]
REPLICAS = 2
LEASE_NAME = "memop-leader.cache.example.com"
LEASE_NAMESPACE = "default"
DROP_EVERY = 2.0
RESTART_DOWNTIME = 1.0
# The random failures: one draw per request, 7% fail, 5 in 7 of them with 500, 2 in 7 with 429.
FAILURE_RATE = 0.07
FAILURE_STATUSES = (500,) * 5 + (429,) * 2
RETRY_AFTER = 1.0  # seconds: what the in-memory server's 429 asks for
Step = Callable[[], Awaitable[Any]]
MEMOP_ARGS = [
    # The Memcached controller alone: the scenario and its checks are about Memcacheds, and the
    # Retry-After check keys a collection's watches by path, which the other controllers' pod
    # informers (other label selectors) share.
    "--controllers",
    "memcached",
    "--leader-elect",
    "--leader-election-namespace",
    LEASE_NAMESPACE,
    "--leader-elect-lease-duration",
    "4s",
    "--leader-elect-renew-deadline",
    "3s",
    "--leader-elect-retry-period",
    "500ms",
    "--max-concurrent-reconciles",
    "4",
    "--watch-namespace",
    ",".join(NAMESPACES_USED),
]
# Why a replica may exit 1 (its last error line says which): it lost the lease to the faults,
# or could not reach the API server while starting (the restart's downtime). Anything else,
# an uncaught exception above all, fails the test.
EXPECTED_EXIT_REASONS = (
    "leader election lost",
    "leader election ended before this replica led",
    "cannot reach the API server",
    "sharding membership lost",
)
TRACEBACK_MARK = "Traceback (most recent call last)"


@pytest.fixture
def crs(request: pytest.FixtureRequest) -> int:
    flag = request.config.getoption("--chaos-crs")
    return int(flag if flag is not None else os.environ.get("MEMOP_CHAOS_CRS", DEFAULT_CRS))


def stage_timeout(crs: int) -> float:
    # Generous: every stage normally takes seconds, but a failover waits out the lease, and a
    # loaded CI machine is slow.
    return 60.0 + crs * 0.5


# -- the replicas -----------------------------------------------------------------------------------


@dataclass
class Replicas:
    """``count`` memop processes kept running: one that exits is replaced, as a Deployment's
    pod would be restarted. Every process ever started stays in ``history`` for the log checks."""

    kubeconfig: Path
    args: list[str] = field(default_factory=lambda: list(MEMOP_ARGS))
    count: int = REPLICAS
    running: list[MemopProcess] = field(default_factory=list)
    history: list[MemopProcess] = field(default_factory=list)
    exits: Counter[int] = field(default_factory=Counter)
    # Each exited process with its exit code.
    exited: list[tuple[MemopProcess, int]] = field(default_factory=list)
    _watchers: set[asyncio.Task[None]] = field(default_factory=set)
    _stopping: bool = False

    async def start(self) -> None:
        for _ in range(self.count):
            await self._spawn()

    async def _spawn(self) -> None:
        process = MemopProcess(self.kubeconfig, self.args)
        await process.start()
        self.running.append(process)
        self.history.append(process)
        task = asyncio.create_task(self._supervise(process), name=f"supervise memop {process.pid}")
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def _supervise(self, process: MemopProcess) -> None:
        assert process.process is not None
        code = await process.process.wait()
        if self._stopping:
            return
        await process.stop()  # collects the rest of its output
        self.exits[code] += 1
        self.exited.append((process, code))
        self.running.remove(process)
        await self._spawn()

    def holder(self, server: ApiServer) -> str | None:
        lease = get(server, LEASES, LEASE_NAMESPACE, LEASE_NAME)
        holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
        return str(holder) if holder else None

    def leader(self, server: ApiServer) -> MemopProcess | None:
        """The replica holding the lease, if it is one of ours and alive."""
        holder = self.holder(server)
        return next((p for p in self.running if holder and p.identity() == holder), None)

    async def stop(self) -> None:
        self._stopping = True
        for task in list(self._watchers):
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        await asyncio.gather(*(p.stop() for p in self.running))

    async def panics(self) -> float:
        """controller_runtime_reconcile_panics_total summed over the live replicas."""
        total = 0.0
        for process in list(self.running):
            try:
                status, text = await process.get("/metrics")
            except aiohttp.ClientError:
                # Only a replica on its way out (it lost its lease) may not answer; the
                # supervisor replaces it.
                await _exited(process)
                continue
            assert status == 200
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if sample.name == "controller_runtime_reconcile_panics_total":
                        total += sample.value
        return total

    def output_problems(self) -> list[str]:
        """Tracebacks in any replica's output (a JSON record's ``error`` field, or raw lines
        such as an uncaught exception's), and exits without an expected reason."""
        problems = [
            f"pid {p.pid}: {r.get('msg')}\n{r['error']}"
            for p in self.history
            for r in p.records
            if "error" in r
        ]
        problems += [
            f"pid {p.pid}: raw traceback in the output:\n" + "\n".join(p.lines[i : i + 20])
            for p in self.history
            for i, line in enumerate(p.lines)
            if TRACEBACK_MARK in line and not line.lstrip().startswith("{")
        ]
        for process, code in self.exited:
            if code == -signal.SIGKILL:
                continue  # ours (checked to be exactly one)
            reasons = [str(r.get("msg", "")) for r in process.records if r.get("level") == "error"]
            if code != 1 or not any(m.startswith(EXPECTED_EXIT_REASONS) for m in reasons):
                problems.append(
                    f"pid {process.pid} exited with {code}; its errors: {reasons[-3:]}; "
                    f"last output: {process.lines[-5:]}"
                )
        return problems

    def describe(self) -> str:
        """For failure messages: who runs, and each live replica's last warnings and errors."""
        lines = [f"exits so far: {dict(self.exits)}"]
        for process in self.running:
            lines.append(f"-- replica {process.identity()} (pid {process.pid}):")
            lines += [
                f"   {r.get('ts')} {r.get('level')} {r.get('logger')}: {r.get('msg')}"
                for r in process.records
                if r.get("level") in ("warning", "error")
            ][-15:]
        return "\n".join(lines)

    def count_logs(self, predicate: Callable[[dict[str, Any]], bool]) -> int:
        return sum(1 for p in self.history for r in p.records if predicate(r))


async def _exited(process: MemopProcess) -> None:
    await wait_for(lambda: process.returncode is not None, timeout=5)


# -- reading the cluster (straight from the server's store: no faults, no lag) ---------------------


def get(server: ApiServer, res: Resource, namespace: str, name: str) -> dict[str, Any] | None:
    rtype = server.store.resource(res.group, res.version, res.plural)
    try:
        return server.store.get(rtype, namespace, name)
    except ServerError as error:
        if error.code == 404:
            return None
        raise


def items(server: ApiServer, res: Resource) -> list[dict[str, Any]]:
    rtype = server.store.resource(res.group, res.version, res.plural)
    return [o for ns in NAMESPACES_USED for o in server.store.list(rtype, ns)[0]]


def controller_uid(obj: dict[str, Any]) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref["uid"])
    return None


def convergence_problems(server: ApiServer, crs: int, size: int) -> list[str]:
    """Why the cluster is not converged at ``size`` (empty: it is)."""
    problems: list[str] = []
    memcacheds = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in items(server, MEMCACHEDS)}
    deployments = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in items(server, DEPLOYMENTS)}
    if len(memcacheds) != crs:
        problems.append(f"{len(memcacheds)} Memcacheds, {crs} expected")
    for key, cr in sorted(memcacheds.items()):
        status = cr.get("status") or {}
        available: dict[str, Any] = next(
            (c for c in status.get("conditions") or () if c.get("type") == "Available"), {}
        )
        deployment = deployments.get(key)
        if deployment is None:
            problems.append(f"{key}: no Deployment")
        elif controller_uid(deployment) != cr["metadata"]["uid"]:
            problems.append(f"{key}: Deployment controlled by {controller_uid(deployment)}")
        elif deployment["spec"].get("replicas") != size:
            problems.append(f"{key}: Deployment has {deployment['spec'].get('replicas')} replicas")
        if FINALIZER not in (cr["metadata"].get("finalizers") or ()):
            problems.append(f"{key}: no finalizer")
        if status.get("observedGeneration") != cr["metadata"]["generation"]:
            problems.append(f"{key}: status for generation {status.get('observedGeneration')}")
        elif available.get("status") != "True" or status.get("readyReplicas") != size:
            problems.append(f"{key}: Available={available.get('status')} ready={status.get('readyReplicas')}")
    for key in sorted(set(deployments) - set(memcacheds)):
        problems.append(f"{key}: a Deployment without a Memcached")
    return problems


def leftovers(server: ApiServer) -> list[str]:
    """What is left once every Memcached is deleted (empty: nothing)."""
    out = [
        f"Memcached {o['metadata']['namespace']}/{o['metadata']['name']}" for o in items(server, MEMCACHEDS)
    ]
    for deployment in items(server, DEPLOYMENTS):
        meta = deployment["metadata"]
        out.append(f"Deployment {meta['namespace']}/{meta['name']} (owner {controller_uid(deployment)})")
    return out


def memop_requests(server: ApiServer, since: float = 0.0) -> list[RequestRecord]:
    return [r for r in server.log.filter(user_agent="memop/") if r.time >= since]


def retry_after_violations(requests: list[RequestRecord]) -> list[str]:
    """Requests that followed a 429 on the same path, from the same replica, sooner than the
    429's Retry-After. Only paths one replica uses for one thing at a time are judged: an
    object's (its reconcile, or the lease's elector, owns it) and a collection's LIST or
    WATCH (its reflector's); creates share their collection's path with other workers."""
    last_429: dict[tuple[str, str], float] = {}
    violations: list[str] = []
    for record in sorted(requests, key=lambda r: r.time):
        if record.name:
            path_key = (record.user_agent, record.path)
        elif record.verb in ("list", "watch"):
            path_key = (record.user_agent, f"{record.path} (list/watch)")
        else:
            continue
        throttled_at = last_429.pop(path_key, None)
        if throttled_at is not None and record.time - throttled_at < RETRY_AFTER - 0.05:
            violations.append(
                f"{record.verb} {record.path} {record.time - throttled_at:.3f}s after its 429 "
                f"({record.user_agent})"
            )
        if record.status == 429:
            last_429[path_key] = record.time
    return violations


# -- faults -------------------------------------------------------------------------------------------


@dataclass
class Chaos:
    """The background faults: periodic watch drops and random 500/429 answers to memop."""

    server: ApiServer
    drops: int = 0
    watches_dropped: int = 0
    rule: ChaosRule | None = None
    _task: asyncio.Task[None] | None = None
    # Held while a one-off fault must reach memop intact: a drop between the server queueing a
    # watch's 410 and writing it would end the stream without it, and the reflector would
    # resume from its (still valid, newest) resourceVersion with no reason to relist.
    drops_held: asyncio.Lock = field(default_factory=asyncio.Lock)

    def start(self) -> None:
        self.rule = self.server.faults.chaos(
            FAILURE_RATE, statuses=FAILURE_STATUSES, seed=1, user_agent="memop/"
        )
        self._task = asyncio.create_task(self._drop_loop(), name="chaos-drops")

    async def _drop_loop(self) -> None:
        while True:
            await asyncio.sleep(DROP_EVERY)
            async with self.drops_held:
                self.watches_dropped += await self.server.drop_watches()
            self.drops += 1

    async def stop(self) -> None:
        self.server.faults.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def figures(self) -> dict[str, int]:
        hits = self.rule.hits_by_status if self.rule is not None else Counter[int]()
        return {
            "watch_drops": self.drops,
            "watches_dropped": self.watches_dropped,
            "injected_500": hits[500],
            "injected_429": hits[429],
        }


# -- the test -------------------------------------------------------------------------------------


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(simulate_controllers=True, pod_ready_delay=0.05) as running:
        yield running


@pytest.fixture
async def client(server: ApiServer) -> AsyncIterator[Client]:
    async with ApiClient(server.client_configuration()) as api:
        yield Client(api, user_agent="chaos-test")


Key = tuple[str, str]


async def in_batches(
    keys: list[Key], batches: int, work: Callable[[Key], Awaitable[Any]], between: list[Step]
) -> None:
    """``work`` on every key, in ``batches`` concurrent batches, with ``between[i]`` after batch i."""
    size = -(-len(keys) // batches)
    for i in range(batches):
        await asyncio.gather(*(work(k) for k in keys[i * size : (i + 1) * size]))
        if i < len(between):
            await between[i]()


async def create_memcached(client: Client, key: Key) -> None:
    """Create the Memcached ``key`` (namespace, name) with size 1. The test's own requests are not
    failed on purpose, but a server restart may close its connection under a request: then the
    create may or may not have happened, so it is sent again (up to five times in all)."""
    body = {
        "apiVersion": MEMCACHEDS.api_version,
        "kind": MEMCACHEDS.kind,
        "metadata": {"name": key[1]},
        "spec": {"size": 1},
    }
    for _ in range(5):
        try:
            await client.create(MEMCACHEDS, body, key[0])
        except AlreadyExists:
            return
        except TransportError:
            continue
        return


async def test_memop_converges_through_chaos(
    server: ApiServer,
    client: Client,
    tmp_path: Path,
    crs: int,
    record_property: Callable[[str, object], None],
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    server.write_kubeconfig(kubeconfig)
    await install_crd(client)
    for namespace in NAMESPACES_USED:
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
    keys = [(NAMESPACES_USED[i % len(NAMESPACES_USED)], f"mc-{i:03d}") for i in range(crs)]
    replicas = Replicas(kubeconfig)
    chaos = Chaos(server)
    figures: dict[str, Any] = {"crs": crs}
    stage_seconds: dict[str, float] = {}
    one_offs: list[str] = []
    # When each one-off fault happened (server clock), to find the relists it caused.
    fault_times: dict[str, float] = {}
    # The User-Agents of the replicas running when each one-off fault happened.
    agents_before: dict[str, set[str | None]] = {}
    failover: dict[str, Any] = {}
    try:
        await replicas.start()
        await wait_for(lambda: replicas.leader(server), timeout=30)
        chaos.start()

        async def expire_history() -> None:
            # The chaos drops every watch every few seconds: the 410 goes out once a replica has
            # watches open again (right after a drop it may reach none of memop's, and a watch
            # resumed from a fresh resourceVersion has no reason to relist).
            running = {p.user_agent() for p in replicas.running}
            async with chaos.drops_held:
                await wait_for(
                    lambda: any(not w.closing and w.user_agent in running for w in server.watches.watchers()),
                    timeout=30,
                )
                since = fault_times["410"] = time.time()
                agents = agents_before["410"] = {p.user_agent() for p in replicas.running}
                server.compact()
                expired = await server.expire_watches()
                one_offs.append(f"410 to {expired} watches")
                figures["watches_expired"] = expired
                # No drop until a reflector has answered its 410 with a LIST (one answered by
                # an injected 500 counts: it was sent): a drop could cut the 410 off.
                await wait_for(
                    lambda: any(
                        r.verb == "list" and r.user_agent in agents for r in memop_requests(server, since)
                    ),
                    timeout=30,
                    interval=0.25,
                    message=lambda: f"no reflector of {sorted(map(str, agents))} relisted after the 410",
                )

        async def restart_server() -> None:
            fault_times["restart"] = time.time()
            agents_before["restart"] = {p.user_agent() for p in replicas.running}
            await server.restart(downtime=RESTART_DOWNTIME, rebuild_watch_cache=True)
            one_offs.append(f"API server restarted ({RESTART_DOWNTIME}s down, watch cache rebuilt)")

        async def kill_leader() -> None:
            leader = await wait_for(lambda: replicas.leader(server), timeout=30)
            assert leader is not None
            lease = get(server, LEASES, LEASE_NAMESPACE, LEASE_NAME) or {}
            failover["transitions_before"] = (lease.get("spec") or {}).get("leaseTransitions") or 0
            failover["killed"] = leader.identity()
            failover["killed_at"] = time.monotonic()
            leader.send(signal.SIGKILL)
            one_offs.append(f"leader {leader.identity()} killed")

        def check_output() -> None:
            problems = replicas.output_problems()
            assert not problems, "\n\n".join(problems[:5])

        async def stage(name: str, problems: Callable[[], list[str]]) -> None:
            """Wait until ``problems()`` is empty; record how long the stage took; check the
            replicas' health and output."""
            await wait_for(
                lambda: not problems(),
                timeout=stage_timeout(crs),
                # Each check copies every object out of the store, on the server's event loop.
                interval=0.25,
                message=lambda: "\n".join(problems()[:20]) + "\n" + replicas.describe(),
            )
            stage_seconds[name] = round(time.monotonic() - started, 1)
            assert await replicas.panics() == 0
            check_output()

        # Stage 1: create, with the one-off faults between batches, while memop converges.
        started = time.monotonic()
        await in_batches(
            keys, 4, lambda key: create_memcached(client, key), [expire_history, restart_server, kill_leader]
        )
        assert len(one_offs) == 3, one_offs
        # The standby, not the killed replica (nor its replacement's predecessor), took over.
        await wait_for(
            lambda: replicas.leader(server) is not None and replicas.holder(server) != failover["killed"],
            timeout=stage_timeout(crs),
            message=replicas.describe,
        )
        failover["seconds"] = round(time.monotonic() - failover["killed_at"], 2)
        await stage("create", lambda: convergence_problems(server, crs, 1))

        # Stage 2: scale every Memcached to 2.
        started = time.monotonic()
        await asyncio.gather(*(client.patch(MEMCACHEDS, n, {"spec": {"size": 2}}, ns) for ns, n in keys))
        await stage("scale", lambda: convergence_problems(server, crs, 2))

        # Stage 3: delete them all; memop's finalizer must come off every one.
        started = time.monotonic()
        deleting_since = time.time()
        await asyncio.gather(*(client.delete(MEMCACHEDS, n, ns) for ns, n in keys))
        await stage("delete", lambda: leftovers(server))
        # The garbage collector would hide a Deployment made for a Memcached being deleted.
        late_creates = [
            r
            for r in memop_requests(server, deleting_since)
            if r.verb == "create" and r.resource == "deployments"
        ]
        assert not late_creates, late_creates[:5]
    finally:
        await chaos.stop()
        await replicas.stop()
        requests = memop_requests(server)
        lease = get(server, LEASES, LEASE_NAMESPACE, LEASE_NAME) or {}
        figures.update(chaos.figures())
        figures.update(
            {
                "one_off_faults": one_offs,
                "stage_seconds": stage_seconds,
                "failover_seconds": failover.get("seconds"),
                "memop_processes_started": len(replicas.history),
                "memop_exits": dict(replicas.exits),
                "lease_transitions": (lease.get("spec") or {}).get("leaseTransitions"),
                "memop_requests": len(requests),
                "memop_requests_failed": sum(1 for r in requests if r.status >= 400),
                "memop_relists": sum(1 for r in requests if r.verb == "list"),
                "relists_after_410": sum(
                    1 for r in requests if r.verb == "list" and r.time >= fault_times.get("410", float("inf"))
                ),
                "reconcile_retries_logged": replicas.count_logs(
                    lambda r: str(r.get("msg", "")).startswith(("reconcile failed", "conflict, will retry"))
                ),
                # Client retries of single requests, and reflectors' retries of lists and watches.
                "retries_logged": replicas.count_logs(lambda r: "retrying" in str(r.get("msg", ""))),
            }
        )
        record_property(FIGURES, figures)
        print(f"\nchaos figures: {json.dumps(figures)}")
        if os.environ.get("MEMOP_CHAOS_LOG"):
            Path(os.environ["MEMOP_CHAOS_LOG"]).write_text(
                "".join(json.dumps({"pid": p.pid, **r}) + "\n" for p in replicas.history for r in p.records)
            )

    check_output()
    assert replicas.exits[-signal.SIGKILL] == 1, replicas.exits
    # The standby took over from the killed leader (and maybe more often, after lost renewals).
    assert (figures["lease_transitions"] or 0) > failover["transitions_before"], (figures, failover)
    # Every fault fired, and did what it is for.
    for fault in ("watch_drops", "watches_dropped", "injected_500", "injected_429"):
        assert figures[fault] > 0, figures
    assert figures["watches_expired"] > 0, figures
    # The replicas running before the 410 and the restart relisted after each (a replica
    # started later lists anyway, so its lists prove nothing).
    for fault in ("410", "restart"):
        relists = [
            r
            for r in requests
            if r.verb == "list" and r.time >= fault_times[fault] and r.user_agent in agents_before[fault]
        ]
        assert relists, f"no reflector relisted after the {fault}"
    violations = retry_after_violations(requests)
    assert not violations, violations[:10]
