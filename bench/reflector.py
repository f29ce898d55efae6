"""Reflector ingest: watch events and listed objects per second applied to memop's cache.

Run from the repository root as ``python bench/reflector.py [--kind pods|configmaps]
[--objects N] [--repeats R]``; prints one JSON object. Defaults: 20,000 pods, 3 repeats.

Three processes, so that the measured one only ingests:

1. the in-memory API server, ``python -m memop.testing serve`` (with ``--simulate-controllers``
   for pods), with a watch history large enough to replay every event of the run;
2. this process, which seeds the server. It first LISTs the empty ``bench`` namespace (the
   LIST a reflector started before the objects existed would make; its answer is no items at
   resourceVersion ``R0``), then creates the objects: for ``configmaps``, N ConfigMaps of
   about 1.5 KiB (labels, an annotation, a config file) over HTTP; for ``pods``, Deployments
   with memop's pod template (``desired_deployment``) whose pods the simulated ReplicaSet
   controller creates and the simulated kubelet makes Running, so each pod is the server's
   (defaults, managedFields of two managers, a Running status with five conditions) and
   arrives as two watch events, ADDED (Pending) and MODIFIED (Running);
3. a fresh ingest process (this script with ``--role ingest``), which does no writing.

Watch ingest (``watch``). The ingest process builds memop's :class:`Cache` with one informer
(with the transform memop installs for the kind: ``pod_transform`` for pods) and one counting
handler, and starts it. The cache's client is the real :class:`Client` over HTTP, except that
the first LIST answer is the one recorded in step 2 (no items at ``R0``): the reflector runs
its normal path — store that LIST, then WATCH from ``R0`` — and so receives every create and
update of the run as watch events, through the same HTTP streaming, ``json.loads``,
reflector, store and handler dispatch as a live cluster's events, at the rate the process can
take them rather than the rate the server wrote them. The window runs from the first event
the handler sees to the last (the object with the highest resourceVersion): the server
encodes the whole backlog before it sends a byte, and that wait is the server's, not ingest.
The store is then checked to hold exactly the N objects. Repeated ``--repeats`` times, each
with a fresh cache.

- ``events_per_second``: watch events applied (stored and dispatched) per wall second;
  median and best over the repeats. The target is at least 10,000/s.
- ``cpu_seconds``: CPU (user + system) of the ingest process in the window (median);
  ``cpu_utilisation`` is that per wall second (near 1.0: ingest was CPU-bound);
  ``cpu_microseconds_each``: CPU per event;
- ``gc_seconds``: of that CPU, the time spent in the cyclic garbage collector (with the
  thresholds the operator process sets, ``memop.runtime.manager.gctuning``).

LIST ingest (``list``). A fresh cache on the plain :class:`Client`, from start until the
informer is synced: the reflector's paginated LIST (500 objects a page, each page prepared —
managedFields stripped, transformed, compacted — as it arrives), ``ObjectStore.replace`` and
dispatch. Same fields as ``watch``, per object, plus:

- ``objects_per_second``: objects per wall second (this includes waiting for the server to
  encode each page: pagination's round trips are sequential);
- ``fetch_seconds``: ``Client.list_all`` of the same objects alone (HTTP and ``json.loads``).

``object_bytes`` is the mean size of one object as the server sends it (managedFields
included). ``seed_seconds`` is how long step 2 took (not a measured figure).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from memop.memcached.api import parse_spec
from memop.memcached.controller import CACHE_TRANSFORMS
from memop.memcached.desired import desired_deployment
from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import Obj, resource_version
from memop.runtime.client.client import Client
from memop.runtime.client.kubeconfig import load_configuration
from memop.runtime.client.reachability import Reachability
from memop.runtime.client.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES, PODS, Resource
from memop.runtime.manager.gctuning import tune_gc
from memop.testing.process import serving_async

NAMESPACE = "bench"
PODS_PER_DEPLOYMENT = 10
SEED_CONCURRENCY = 32
SERVER_START_TIMEOUT = 30.0
RESOURCES = {"pods": PODS, "configmaps": CONFIGMAPS}

CONFIG_FILE = "".join(
    f"setting_{i:02d} = value-{i:02d}  # a comment long enough to look like a real config\n"
    for i in range(18)
)


def configmap(i: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"config-{i:06d}",
            "labels": {"app.kubernetes.io/name": "bench", "app.kubernetes.io/instance": f"i{i % 100}"},
            "annotations": {"bench.memop.dev/source": "bench/reflector.py"},
        },
        "data": {"app.conf": CONFIG_FILE, "replicas": str(i % 7)},
    }


def deployment(i: int, replicas: int) -> Obj:
    """memop's Deployment for a Memcached of ``replicas``, without the owner reference (there
    is no Memcached: the simulated garbage collector would delete an orphan)."""
    memcached = {
        "metadata": {"name": f"cache-{i}", "namespace": NAMESPACE, "uid": f"bench-{i}"},
        "spec": {"size": replicas},
    }
    body = desired_deployment(memcached, parse_spec(memcached))
    del body["metadata"]["ownerReferences"]
    return body


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


# -- the ingest process -------------------------------------------------------------------------


class ListedEarlier:
    """The Client, except that its first LIST answer is one taken earlier (``snapshot``: no
    items, at that resourceVersion).

    A reflector given this lists "before" the objects were created and so receives them all
    as watch events. Later LISTs (a relist after 410) go to the server.
    """

    def __init__(self, client: Client, snapshot_rv: str) -> None:
        self._client = client
        self._snapshot_rv: str | None = snapshot_rv

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        shard_selector: str | None = None,
    ) -> dict[str, Any]:
        if self._snapshot_rv is not None:
            snapshot, self._snapshot_rv = self._snapshot_rv, None
            return {"items": [], "metadata": {"resourceVersion": snapshot}}
        return await self._client.list(
            res,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
            resource_version=resource_version,
            shard_selector=shard_selector,
        )

    def watch_batches(self, *args: Any, **kwargs: Any) -> AsyncIterator[list[dict[str, Any]]]:
        return self._client.watch_batches(*args, **kwargs)

    @property
    def reachability(self) -> Reachability:
        return self._client.reachability


class GcTimer:
    """Seconds spent in the cyclic garbage collector since ``reset`` (through gc.callbacks)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def reset(self) -> None:
        self.seconds = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


async def _ingest(
    source: Client | ListedEarlier, kind: str, objects: int, last_rv: int | None, gc_timer: GcTimer
) -> dict[str, float]:
    """Run a fresh cache on ``source`` until its handler saw the object at ``last_rv`` (None:
    until its LIST is stored); time it and check the cache holds every object.

    ``first`` is when the first event was dispatched (watch only)."""
    resource = RESOURCES[kind]
    cache = Cache(source, namespaces=[NAMESPACE])
    informer = cache.informer(resource, transform=CACHE_TRANSFORMS.get(resource))
    events = 0
    first: tuple[float, float] | None = None
    finished = asyncio.get_running_loop().create_future()

    def count(event_type: str, obj: Obj, old: Obj | None) -> None:
        nonlocal events, first
        events += 1
        if first is None:
            first = (time.perf_counter(), cpu_seconds())
        if last_rv is not None and int(resource_version(obj) or 0) >= last_rv and not finished.done():
            finished.set_result(None)

    informer.add_handler(count)
    gc.collect()
    gc_timer.reset()
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    await cache.start()
    try:
        done = finished if last_rv is not None else informer.reflectors[0].synced.wait()
        await asyncio.wait_for(done, 120)
        wall1, cpu1 = time.perf_counter(), cpu_seconds()
        gc_seconds = gc_timer.seconds
    finally:
        await cache.stop()
    stored = len(informer.store)
    if stored != objects:
        raise RuntimeError(f"the cache holds {stored} {kind}, expected {objects}")
    reflector = informer.reflectors[0]
    if last_rv is not None and reflector.relists != 1:
        raise RuntimeError("the reflector relisted: the watch did not replay the whole history")
    assert first is not None
    if last_rv is not None:
        # From the first event on: the rate at which the process applies a stream that is there.
        # (The server encodes the whole backlog before it sends the first byte.)
        wall0, cpu0 = first
    return {"events": events, "wall": wall1 - wall0, "cpu": cpu1 - cpu0, "gc": gc_seconds}


def _summary(runs: list[dict[str, float]], items: int) -> dict[str, Any]:
    rates = [items / r["wall"] for r in runs]
    cpu = statistics.median(r["cpu"] for r in runs)
    wall = statistics.median(r["wall"] for r in runs)
    return {
        "per_second": {"median": round(statistics.median(rates)), "best": round(max(rates))},
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "cpu_utilisation": round(cpu / wall, 2),
        "gc_seconds": round(statistics.median(r["gc"] for r in runs), 3),
        "cpu_microseconds_each": round(1e6 * cpu / items, 1),
    }


async def run_ingest(args: argparse.Namespace) -> dict[str, Any]:
    configuration = await load_configuration(args.kubeconfig)
    resource = RESOURCES[args.kind]
    gc_timer = GcTimer()
    async with ApiClient(configuration) as api:
        client = Client(api, user_agent="memop-bench-ingest/1")
        watch_runs = []
        for _ in range(args.repeats):
            listed = ListedEarlier(client, args.since)
            watch_runs.append(await _ingest(listed, args.kind, args.objects, args.until, gc_timer))
        list_runs = []
        fetches = []
        for _ in range(args.repeats):
            list_runs.append(await _ingest(client, args.kind, args.objects, None, gc_timer))
            gc.collect()
            started = time.perf_counter()
            items, _ = await client.list_all(resource, NAMESPACE)
            fetches.append(time.perf_counter() - started)
            del items
    events = int(watch_runs[0]["events"])
    watch = _summary(watch_runs, events)
    listing = _summary(list_runs, args.objects)
    return {
        "watch": {
            "events": events,
            "events_per_second": watch.pop("per_second"),
            **watch,
        },
        "list": {
            "objects_per_second": listing.pop("per_second"),
            **listing,
            "fetch_seconds": round(statistics.median(fetches), 3),
        },
    }


# -- the seeding process ------------------------------------------------------------------------


async def _gather_bounded(jobs: list[Any]) -> None:
    for start in range(0, len(jobs), SEED_CONCURRENCY):
        await asyncio.gather(*jobs[start : start + SEED_CONCURRENCY])


async def seed(client: Client, kind: str, objects: int) -> int:
    """Create the objects; return the highest resourceVersion among them once all are final."""
    if kind == "configmaps":
        await _gather_bounded([client.create(CONFIGMAPS, configmap(i), NAMESPACE) for i in range(objects)])
    else:
        sizes = [PODS_PER_DEPLOYMENT] * (objects // PODS_PER_DEPLOYMENT)
        if objects % PODS_PER_DEPLOYMENT:
            sizes.append(objects % PODS_PER_DEPLOYMENT)
        for i, size in enumerate(sizes):
            await client.create(DEPLOYMENTS, deployment(i, size), NAMESPACE)
        deadline = time.monotonic() + 600
        while True:
            deployments, _ = await client.list_all(DEPLOYMENTS, NAMESPACE)
            ready = sum((d.get("status") or {}).get("readyReplicas") or 0 for d in deployments)
            if ready == objects and len(deployments) == len(sizes):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {ready} of {objects} pods became ready")
            await asyncio.sleep(0.2)
    items, _ = await client.list_all(RESOURCES[kind], NAMESPACE)
    if len(items) != objects:
        raise RuntimeError(f"{len(items)} {kind} exist, expected {objects}")
    return max(int(resource_version(item)) for item in items)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    events_per_object = 2 if args.kind == "pods" else 1
    # Every event of the run must still be in the history when the watch replays it (pods also
    # bring ReplicaSet and Deployment updates).
    history = 4 * args.objects * events_per_object + 10_000
    with tempfile.TemporaryDirectory(prefix="memop-bench-") as tmp:
        options = ["--history-size", str(history)]
        if args.kind == "pods":
            options.append("--simulate-controllers")
        # The server's log (it logs clients that hang up mid-request, as ours do when the
        # benchmark stops a cache) goes to server.log, shown if it fails to start.
        async with serving_async(
            Path(tmp) / "kubeconfig", *options, output=Path(tmp) / "server.log", timeout=SERVER_START_TIMEOUT
        ) as server:
            kubeconfig = server.kubeconfig
            configuration = await load_configuration(str(kubeconfig))
            async with ApiClient(configuration) as api:
                client = Client(api, user_agent="memop-bench-seed/1")
                await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
                # The LIST a reflector started now would make: nothing, as of resourceVersion since.
                _, since = await client.list_all(RESOURCES[args.kind], NAMESPACE)
                started = time.perf_counter()
                until = await seed(client, args.kind, args.objects)
                seed_seconds = time.perf_counter() - started
                page = await client.list(RESOURCES[args.kind], NAMESPACE, limit=100)
                sample = page["items"]
            ingest = await asyncio.create_subprocess_exec(
                sys.executable,
                os.path.abspath(__file__),
                "--role=ingest",
                f"--kubeconfig={kubeconfig}",
                f"--kind={args.kind}",
                f"--objects={args.objects}",
                f"--repeats={args.repeats}",
                f"--since={since}",
                f"--until={until}",
                stdout=subprocess.PIPE,
            )
            output, _ = await ingest.communicate()
            if ingest.returncode:
                raise RuntimeError(f"the ingest process failed with status {ingest.returncode}")
    measured = json.loads(output)
    object_bytes = statistics.mean(len(json.dumps(item, separators=(",", ":"))) for item in sample)
    return {
        "benchmark": "reflector ingest",
        "kind": args.kind,
        "objects": args.objects,
        "transform": getattr(CACHE_TRANSFORMS.get(RESOURCES[args.kind]), "__name__", None),
        "repeats": args.repeats,
        **measured,
        "object_bytes": round(object_bytes),
        "seed_seconds": round(seed_seconds, 1),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=sorted(RESOURCES), default="pods", help="default: pods")
    parser.add_argument("--objects", type=int, default=20_000, help="objects created (default 20000)")
    parser.add_argument("--repeats", type=int, default=3, help="measured runs of each (default 3)")
    parser.add_argument("--role", choices=("seed", "ingest"), default="seed", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--since", help=argparse.SUPPRESS)
    parser.add_argument("--until", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.objects < 1 or args.repeats < 1:
        parser.error("--objects and --repeats must be positive")
    if args.role == "ingest":
        tune_gc()  # as the operator process does (memop.cli.main)
    result = asyncio.run(run_ingest(args) if args.role == "ingest" else run(args))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
