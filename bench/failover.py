"""How long a standby takes to lead once the leader goes, with each leader election mode.

Run from the repository root as ``python bench/failover.py`` (leader for life, memop's
defaults) or ``python bench/failover.py --mode lease``; prints one JSON object.

The server is the in-memory API server of ``memop.testing``, in this process, with its
simulated controllers: its garbage collector deletes the leader-for-life lock once the leader's
Pod is gone, as kube-controller-manager's does. Each round starts two memop replicas
(``--leader-elect``, the mode asked for, every controller memop has, watching one namespace),
each playing a Pod object named to it by ``POD_NAME``, and waits until both are ready and one
leads. Then the standby waits ``--standby-wait`` seconds plus a random part of one maximal
backoff (the default lets its backoff reach ``--max-backoff`` first: the end of the leader falls
at a random point of a standby's steady wait), and the leader goes:

- ``leader-for-life``: as a Pod deletion goes in a cluster. The kubelet stops the container
  (SIGTERM; memop finishes its work and exits), then the Pod object is deleted, the garbage
  collector deletes the lock, and the standby creates the lock at its next attempt;
- ``lease`` with ``--signal kill``: the leader is SIGKILLed (a node lost): the standby takes the
  lease once it has expired in its eyes (``--leader-elect-lease-duration``, 15 s); with
  ``--signal term`` it is released on the way out and taken at the standby's next retry.

A Memcached is created at that moment, so the new leader has work. Figures, per round and as
median and max (seconds):

- ``stop_s``: from the signal to the leader's exit (leader for life: a cluster deletes the Pod
  object only then);
- ``gc_s`` (leader for life): from the Pod's deletion to the lock's;
- ``takeover_s``: from the Pod's deletion (leader for life) or the signal (lease) to the
  standby's successful create of the lock (or write of the Lease), from the server's log;
- ``first_write_s``: from the same moment to the standby's first write to a Memcached or a
  Deployment: when reconciling resumed;
- ``from_signal_s``: from the signal to the standby's first write: what users wait.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from memop.builtin import PROJECT
from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import CONFIGMAPS, LEASES, NAMESPACES, PODS
from memop.testing.apiserver.errors import ApiError as StoreError
from memop.testing.apiserver.server import ApiServer
from memop.testing.memcached import memcached_manifest
from memop.testing.operator import install_crd
from memop.testing.process import MemopProcess
from memop.testing.wait import wait_for

LOCK_NAMESPACE = "default"
WATCHED = "bench"
MANAGED = ("memcacheds", "deployments")
WRITES = ("create", "update", "patch", "delete")
POLL = 0.005


def summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}


async def wait_until(predicate: Any, timeout: float, what: str) -> Any:
    return await wait_for(
        predicate, timeout=timeout, interval=POLL, message=f"failover bench: waiting for {what}"
    )


class Round:
    """One failover: two replicas, the leader goes, the standby takes over."""

    def __init__(
        self, args: argparse.Namespace, server: ApiServer, client: Client, kubeconfig: str, n: int
    ) -> None:
        self.args = args
        self.server = server
        self.client = client
        self.kubeconfig = kubeconfig
        self.lock = f"bench-{args.mode}-{n}"
        self.n = n
        self.replicas: dict[str, MemopProcess] = {}

    def memop_args(self) -> list[str]:
        argv = [
            "--leader-elect",
            "--leader-election-mode", self.args.mode,
            "--leader-election-id", self.lock,
            "--leader-election-namespace", LOCK_NAMESPACE,
            "--watch-namespace", WATCHED,
            "--log-level", "info",
        ]  # fmt: skip
        if self.args.mode == "leader-for-life":
            argv += ["--leader-for-life-max-backoff", f"{self.args.max_backoff}s"]
        return argv

    async def start(self) -> None:
        for name in (f"memop-{self.n}-a", f"memop-{self.n}-b"):
            pod = {
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "manager", "image": "memop"}]},
            }
            await self.client.create(PODS, pod, LOCK_NAMESPACE)
            self.replicas[name] = await MemopProcess(
                self.kubeconfig, self.memop_args(), env={"POD_NAME": name}
            ).start()
        await asyncio.gather(*(p.wait_ready(60) for p in self.replicas.values()))

    async def holder(self) -> str:
        """The Pod name (leader for life) or identity (lease) holding the lock, "" for none."""
        try:
            if self.args.mode == "leader-for-life":
                refs = (await self.client.get(CONFIGMAPS, self.lock, LOCK_NAMESPACE))["metadata"].get(
                    "ownerReferences"
                )
                return str(refs[0]["name"]) if refs else ""
            lease = await self.client.get(LEASES, self.lock, LOCK_NAMESPACE)
        except NotFound:
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def replica_of(self, holder: str) -> tuple[str, MemopProcess]:
        for name, process in self.replicas.items():
            if holder in (name, process.identity()):
                return name, process
        raise SystemExit(f"failover bench: unknown holder {holder!r}")

    def first_after(
        self, agent: str, since: float, resources: tuple[str, ...], verbs: tuple[str, ...]
    ) -> float | None:
        times = [
            r.time
            for r in self.server.log.filter(user_agent=agent)
            if r.resource in resources and r.verb in verbs and r.status < 300 and r.time >= since
        ]
        return min(times) if times else None

    async def run(self) -> dict[str, float]:
        await self.start()
        holder = await wait_until(self.holder, 60, "a leader")
        leader_pod, leader = self.replica_of(holder)
        standby_pod, standby = next((n, p) for n, p in self.replicas.items() if n != leader_pod)
        # A random point of one maximal backoff (leader for life) or retry period (lease, 2 s).
        spread = self.args.max_backoff * 1.2 if self.args.mode == "leader-for-life" else 2.0
        waited = self.args.standby_wait + random.random() * spread
        await asyncio.sleep(waited)
        agent = standby.user_agent()
        assert agent is not None
        figures: dict[str, float] = {"standby_waited_s": round(waited, 3)}

        signalled = time.time()
        if self.args.mode == "leader-for-life" or self.args.signal == "term":
            code = await leader.terminate(timeout=60)
        else:
            code = await leader.kill()
        stopped = time.time()
        figures["stop_s"] = stopped - signalled
        if code not in (0, -9):
            raise SystemExit(f"failover bench: the leader exited {code}")
        if self.args.mode == "leader-for-life":
            start = time.time()
            await self.client.delete(PODS, leader_pod, LOCK_NAMESPACE)
            await self.client.create(MEMCACHEDS, memcached_manifest(f"after-{self.n}"), WATCHED)
            gone = await wait_until(self.lock_gone, 60, "the garbage collector")
            figures["gc_s"] = gone - start
            taken = await wait_until(
                lambda: self.first_after(agent, start, ("configmaps",), ("create",)),
                120,
                "a take-over",
            )
        else:
            start = signalled
            await self.client.create(MEMCACHEDS, memcached_manifest(f"after-{self.n}"), WATCHED)
            taken = await wait_until(
                lambda: self.first_after(agent, start, ("leases",), ("create", "update")),
                120,
                "a take-over",
            )
        figures["takeover_s"] = taken - start
        wrote = await wait_until(lambda: self.first_after(agent, start, MANAGED, WRITES), 60, "a write")
        figures["first_write_s"] = wrote - start
        figures["from_signal_s"] = wrote - signalled
        await standby.terminate(timeout=60)
        await self.client.delete(PODS, standby_pod, LOCK_NAMESPACE)
        return {k: round(v, 3) for k, v in figures.items()}

    def lock_gone(self) -> float | None:
        try:
            self.server.store.get(
                self.server.store.resource("", "v1", "configmaps"), LOCK_NAMESPACE, self.lock
            )
        except StoreError:  # not found
            return time.time()
        return None

    async def stop(self) -> None:
        for process in self.replicas.values():
            await process.stop()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rounds: list[dict[str, float]] = []
    async with ApiServer(simulate_controllers=True, pod_ready_delay=0.05) as server:
        with tempfile.TemporaryDirectory(prefix="memop-failover-") as tmp:
            kubeconfig = str(Path(tmp) / "kubeconfig")
            server.write_kubeconfig(Path(kubeconfig))
            async with ApiClient(server.client_configuration()) as api:
                client = Client(api, user_agent="failover-bench/1")
                for definition in PROJECT.controllers:
                    for crd in definition.crds():
                        await install_crd(client, crd)
                await client.create(NAMESPACES, {"metadata": {"name": WATCHED}})
                for n in range(args.rounds):
                    current = Round(args, server, client, kubeconfig, n)
                    try:
                        rounds.append(await current.run())
                    finally:
                        await current.stop()
    keys = [k for k in rounds[0] if k != "standby_waited_s"]
    return {
        "bench": "failover",
        "server": "in-memory (memop.testing.ApiServer in the bench's process, simulated controllers)",
        "mode": args.mode,
        "signal": "term" if args.mode == "leader-for-life" else args.signal,
        "max_backoff_s": args.max_backoff if args.mode == "leader-for-life" else None,
        "rounds": len(rounds),
        **{key: summary([r[key] for r in rounds]) for key in keys},
        "per_round": rounds,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mode", choices=("leader-for-life", "lease"), default="leader-for-life")
    parser.add_argument(
        "--signal", choices=("kill", "term"), default="kill", help="lease: how the leader goes"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--max-backoff", type=float, default=16.0, help="leader for life: --leader-for-life-max-backoff (s)"
    )
    parser.add_argument(
        "--standby-wait",
        type=float,
        default=None,
        help="seconds the standby waits before the leader goes, plus a random part of one maximal "
        "backoff (default: until its backoff has reached --max-backoff)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.standby_wait is None:
        # 1 + 2 + 4 + ... up to the first wait of max_backoff: the backoffs before it.
        waits, backoff = 0.0, min(1.0, args.max_backoff)
        while backoff < args.max_backoff:
            waits += backoff * 1.2
            backoff = min(backoff * 2, args.max_backoff)
        args.standby_wait = waits if args.mode == "leader-for-life" else 0.0
    print(json.dumps(asyncio.run(run(args)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
