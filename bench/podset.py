"""How fast memop's PodSet controller brings new PodSets to their pods, against a floor script.

Run from the repository root as ``python bench/podset.py --compare --podsets 300 --replicas 3``;
prints one JSON object.

- The cluster: the in-memory API server with simulated kubelets, in its own process (the one
  ``bench/converge.py`` starts: request counts come from its log), over HTTPS.
- memop: ``python -m memop --controllers podset --max-concurrent-reconciles W`` watching the
  run's namespaces (``--all-namespaces``: cluster-wide).
- The floor (``--floor``; ``--compare`` runs both, each on a fresh cluster, and gives the
  ratio): ``python bench/podset.py floor``, the minimum writes per PodSet with the same ``W``
  workers fed by a watch on podsets and nothing else: ``replicas`` pod creates with memop's
  pod body, then one status patch naming them. No cache, no pod watch, no workqueue, no
  expectations, no Events: the difference is what memop's machinery costs.

A PodSet is converged when the bench's watch shows ``status.observedGeneration ==
metadata.generation`` and ``replicas`` names in ``status.podNames``. Figures: ``wall_seconds``
(first create to the last PodSet converged), the operator's CPU seconds meanwhile, its writes
per PodSet from the server's log, and ``pods_per_podset`` counted at the end (memop must never
create more than asked: anything but ``replicas`` is reported in ``extra_pods``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from converge import (  # the cluster process and the measuring tools are shared
    ServerProcess,
    create_namespaces,
    metric_sum,
    per_cr,
    proc_stats,
    run_bounded,
    scrape,
    wait_watching,
)
from kubernetes_asyncio.client import ApiClient

from memop.podset import DEFINITION
from memop.podset.api import PODSETS, parse_spec
from memop.podset.desired import INSTANCE_LABEL, desired_pod
from memop.podset.status import compute_status
from memop.runtime.cache.store import Obj
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, TransportError
from memop.runtime.client.kubeconfig import load_configuration
from memop.runtime.client.resources import PODS
from memop.testing.operator import install_crd
from memop.testing.process import MemopProcess

BENCH_AGENT = "memop-bench"
FLOOR_AGENT = "memop-floor"
Key = tuple[str, str]


def podset(name: str, replicas: int) -> Obj:
    return {
        "apiVersion": PODSETS.api_version,
        "kind": PODSETS.kind,
        "metadata": {"name": name},
        "spec": {"replicas": replicas},
    }


def converged(obj: Obj) -> bool:
    status = obj.get("status") or {}
    wanted = (obj.get("spec") or {}).get("replicas")
    return (
        status.get("observedGeneration") == obj["metadata"].get("generation")
        and isinstance(status.get("podNames"), list)
        and len(status["podNames"]) == wanted
    )


class Tracker:
    """Watches the run's PodSets and notes when each converged."""

    def __init__(self, client: Client, expected: set[Key]) -> None:
        self.client = client
        self.expected = expected
        self.converged_at: dict[Key, float] = {}
        self.done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        listed = await self.client.list(PODSETS, None)
        self._task = asyncio.create_task(self._watch(str(listed["metadata"]["resourceVersion"])))

    async def _watch(self, rv: str) -> None:
        while True:
            with contextlib.suppress(TransportError):
                async for event in self.client.watch(
                    PODSETS, None, resource_version=rv, timeout_seconds=3600, read_timeout=300
                ):
                    obj = event["object"]
                    rv = str(obj["metadata"].get("resourceVersion") or rv)
                    if event["type"] == "BOOKMARK":
                        continue
                    key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                    if key in self.expected and key not in self.converged_at and converged(obj):
                        self.converged_at[key] = time.monotonic()
                        if len(self.converged_at) == len(self.expected):
                            self.done.set()

    async def wait(self, timeout: float) -> None:
        """Until every PodSet converged; the watch's failure, if it failed, is raised."""
        assert self._task is not None
        done = asyncio.create_task(self.done.wait())
        await asyncio.wait({done, self._task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        done.cancel()
        if self._task.done():
            self._task.result()
        if not self.done.is_set():
            missing = len(self.expected) - len(self.converged_at)
            raise TimeoutError(f"{missing} of {len(self.expected)} PodSets not converged after {timeout}s")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


async def floor(args: argparse.Namespace) -> int:
    """The floor's process: prints ``{"ready": true}`` once watching, then, when stdin closes,
    what it did."""
    configuration = await load_configuration(args.kubeconfig)
    done = errors = 0
    queue: asyncio.Queue[Obj] = asyncio.Queue()
    async with ApiClient(configuration) as api:
        client = Client(api, user_agent=f"{FLOOR_AGENT}/1")
        owned = set(args.namespace)

        async def watch(rv: str) -> None:
            seen: set[Key] = set()
            while True:
                with contextlib.suppress(TransportError):
                    async for event in client.watch(
                        PODSETS, None, resource_version=rv, timeout_seconds=3600, read_timeout=300
                    ):
                        obj = event["object"]
                        rv = str(obj["metadata"].get("resourceVersion") or rv)
                        if event["type"] == "BOOKMARK":
                            continue
                        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                        if event["type"] == "ADDED" and key[0] in owned and key not in seen:
                            seen.add(key)
                            queue.put_nowait(obj)

        async def converge(obj: Obj) -> None:
            spec = parse_spec(obj)
            pods = [
                await client.create(PODS, desired_pod(obj, spec), obj["metadata"]["namespace"])
                for _ in range(spec.replicas)
            ]
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            status = compute_status(obj, spec.replicas, pods, now)
            meta = obj["metadata"]
            await client.patch_status(PODSETS, meta["name"], {"status": status}, meta["namespace"])

        async def worker() -> None:
            nonlocal done, errors
            while True:
                obj = await queue.get()
                try:
                    await converge(obj)
                    done += 1
                except (ApiError, TransportError) as error:
                    errors += 1
                    print(json.dumps({"error": str(error)}), file=sys.stderr, flush=True)

        listed = await client.list(PODSETS, None)
        tasks = [asyncio.create_task(watch(str(listed["metadata"]["resourceVersion"])))]
        tasks += [asyncio.create_task(worker()) for _ in range(args.workers)]
        print(json.dumps({"ready": True}), flush=True)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        await reader.read()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps({"done": done, "errors": errors}), flush=True)
    return 0


async def start_floor(kubeconfig: str, namespaces: Sequence[str], workers: int) -> asyncio.subprocess.Process:
    command = [sys.executable, os.path.abspath(__file__), "floor", "--kubeconfig", kubeconfig]
    command += ["--workers", str(workers), *(a for ns in namespaces for a in ("--namespace", ns))]
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    if not await asyncio.wait_for(process.stdout.readline(), 60):
        raise RuntimeError(f"the floor process exited with {await process.wait()}")
    return process


async def finish_floor(process: asyncio.subprocess.Process) -> dict[str, Any]:
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.close()
    line = await asyncio.wait_for(process.stdout.readline(), 30)
    await process.wait()
    return json.loads(line) if line else {}


async def run_once(args: argparse.Namespace, mode: str, workdir: Path) -> dict[str, Any]:
    kubeconfig = workdir / "kubeconfig"
    server = await ServerProcess(
        kubeconfig, pod_ready_delay=args.pod_ready_delay, history_size=200_000, tls=True
    ).start()
    namespaces = [f"ps-{secrets.token_hex(3)}-{i}" for i in range(args.namespaces)]
    keys = [(namespaces[i % len(namespaces)], f"ps-{i}") for i in range(args.podsets)]
    try:
        configuration = await load_configuration(str(kubeconfig))
        async with ApiClient(configuration) as api:
            client = Client(api, user_agent=f"{BENCH_AGENT}/1")
            for crd in DEFINITION.crds():
                await install_crd(client, crd)
            await create_namespaces(client, namespaces)
            tracker = Tracker(client, set(keys))
            await tracker.start()
            memop: MemopProcess | None = None
            floor_process: asyncio.subprocess.Process | None = None
            agent = "memop" if mode == "memop" else FLOOR_AGENT
            try:
                if mode == "memop":
                    watch = [] if args.all_namespaces else ["--watch-namespace", ",".join(namespaces)]
                    memop = await MemopProcess(
                        str(kubeconfig),
                        ["--controllers", "podset", "--max-concurrent-reconciles", str(args.workers), *watch],
                    ).start()
                    await memop.wait_ready(timeout=120)
                    pid = memop.pid
                    scopes = 1 if args.all_namespaces else len(namespaces)
                    await wait_watching(server, "memop", 2 * scopes)  # podsets and pods
                else:
                    floor_process = await start_floor(str(kubeconfig), namespaces, args.workers)
                    pid = floor_process.pid
                    await wait_watching(server, FLOOR_AGENT, 1)
                start_log = await server.log_end()
                cpu0 = proc_stats(pid)
                t0 = time.monotonic()
                await run_bounded(
                    args.create_concurrency,
                    keys,
                    lambda key: client.create(PODSETS, podset(key[1], args.replicas), key[0]),
                )
                await tracker.wait(args.timeout)
                wall = max(tracker.converged_at.values()) - t0
                cpu = proc_stats(pid).cpu_seconds - cpu0.cpu_seconds
                requests = await server.requests(start_log)
                reconciles = (
                    metric_sum(await scrape(memop), "controller_runtime_reconcile_total") if memop else None
                )
            finally:
                if memop is not None:
                    await memop.stop()
                if floor_process is not None:
                    await finish_floor(floor_process)
                await tracker.stop()
            pods: Counter[str] = Counter()
            for namespace in namespaces:
                listed, _ = await client.list_all(PODS, namespace, label_selector=INSTANCE_LABEL)
                for pod in listed:
                    if not pod["metadata"].get("deletionTimestamp"):
                        pods[f"{namespace}/{pod['metadata']['labels'][INSTANCE_LABEL]}"] += 1
    finally:
        await server.stop()
    calls = requests.by_call(agent)
    writes = Counter(
        {
            call: n
            for call, n in calls.items()
            if call.split(" ", 1)[0] in ("create", "patch", "update", "delete")
        }
    )
    return {
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "writes_per_podset": per_cr(writes, args.podsets),
        "requests_per_podset": per_cr(calls, args.podsets),
        "reconciles_per_podset": round(reconciles / args.podsets, 3) if reconciles is not None else None,
        "failed_requests": requests.failed(agent),
        "pods_per_podset": round(sum(pods.values()) / args.podsets, 3),
        "extra_pods": sum(max(0, n - args.replicas) for n in pods.values()),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    modes = ["memop", "floor"] if args.compare else ["floor" if args.floor else "memop"]
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for _ in range(args.repeat):
        for mode in modes:  # alternating, so that a slow spell of the machine hits both
            with tempfile.TemporaryDirectory(prefix="memop-podset-bench-") as tmp:
                runs[mode].append(await run_once(args, mode, Path(tmp)))
    report: dict[str, Any] = {
        "benchmark": "podset",
        "server": "in-memory API server with simulated kubelets (own process, HTTPS)",
        "podsets": args.podsets,
        "replicas": args.replicas,
        "namespaces": args.namespaces,
        "workers": args.workers,
        "watch": "all namespaces" if args.all_namespaces else "each namespace",
        "repeat": args.repeat,
    }
    medians = {
        mode: sorted(mode_runs, key=lambda r: r["wall_seconds"])[(len(mode_runs) - 1) // 2]
        for mode, mode_runs in runs.items()
    }
    for mode, median in medians.items():
        report[mode] = {**median, "wall_seconds_all_runs": [r["wall_seconds"] for r in runs[mode]]}
    if args.compare:
        report["memop_over_floor"] = round(
            medians["memop"]["wall_seconds"] / medians["floor"]["wall_seconds"], 3
        )
        report["memop_over_floor_each_pair"] = [
            round(m["wall_seconds"] / f["wall_seconds"], 3)
            for m, f in zip(runs["memop"], runs["floor"], strict=True)
        ]
    report["cpus"] = os.cpu_count()
    report["python"] = platform.python_version()
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    roles = parser.add_subparsers(dest="role")
    floored = roles.add_parser("floor", help=argparse.SUPPRESS)
    floored.add_argument("--kubeconfig", required=True)
    floored.add_argument("--workers", type=int, required=True)
    floored.add_argument("--namespace", action="append", default=[])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--floor", action="store_true", help="measure the floor instead of memop")
    mode.add_argument("--compare", action="store_true", help="measure memop, then the floor, and compare")
    parser.add_argument("--podsets", type=int, default=300, help="PodSets to create (default 300)")
    parser.add_argument("--replicas", type=int, default=3, help="spec.replicas of each (default 3)")
    parser.add_argument("--namespaces", type=int, default=4, help="namespaces they spread over (default 4)")
    parser.add_argument("--workers", type=int, default=4, help="--max-concurrent-reconciles (default 4)")
    parser.add_argument("--all-namespaces", action="store_true", help="memop watches all namespaces")
    parser.add_argument("--create-concurrency", type=int, default=16, help="concurrent creates (default 16)")
    parser.add_argument(
        "--pod-ready-delay", type=float, default=0.0, help="seconds a simulated pod stays Pending (default 0)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per mode; the median run is reported")
    parser.add_argument("--timeout", type=float, default=600.0, help="give up after this many seconds")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.role == "floor":
        return asyncio.run(floor(args))
    print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
