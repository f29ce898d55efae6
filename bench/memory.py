"""Memory of memop's cache: resident bytes per cached Memcached, Deployment and Pod.

Run from the repository root as ``python bench/memory.py [--objects N]``; prints one JSON
object. Default: 10,000 of each kind.

The objects are what a cluster running memop holds, made by the same code paths:

1. the in-memory API server runs in its own process (``python -m memop.testing serve
   --simulate-controllers``);
2. this process installs memop's CRD and creates N Memcacheds (``size: 1``) across 10
   namespaces, then does what memop's reconciler does for each, with memop's User-Agent (so
   the server records memop as the field manager): adds the finalizer (conditional merge
   patch), creates ``desired_deployment``, waits until the simulated controllers have made
   the Deployment's ReplicaSet and pod and the simulated kubelet has made the pod Running and
   ready and the Deployment's status says so, then writes the Memcached's status computed by
   ``compute_status`` from that Deployment and pod. Every object therefore carries the
   server's defaults and managedFields;
3. a fresh measuring process per variant (this script with ``--role measure``) imports memop,
   builds its :class:`Cache` over the real :class:`Client` (all namespaces, as memop runs by
   default) and starts it with no informer: the ``baseline`` RSS. It then adds the informer
   of Memcacheds, waits for its LIST to be stored, collects garbage and reads RSS; then
   Deployments; then Pods.

Figures (KiB = 1024 bytes), for ``with_transforms`` (what memop installs:
``memop.memcached.controller.CACHE_TRANSFORMS``, ``memcached_transform``, ``pod_transform``
and ``deployment_transform``, and the shared subtrees of ``CACHE_SHARED``) and
``without_transforms`` (what the store always does: drop managedFields and compact, see
:mod:`memop.runtime.cache.store`):

- ``baseline_mib``: RSS of the process with memop imported and an empty cache started;
- ``<kind>.kib_per_object``: the RSS increase while that kind's N objects were listed and
  stored, divided by N. Targets (with transforms): Deployment at most 8 KiB, Pod at most 6 KiB;
- ``<kind>.rss_mib``: RSS after that kind was stored;
- ``peak_rss_mib``: the highest RSS the process reached (VmHWM), LISTs' transients included;
- ``<kind>.json_bytes``: mean size of one object as the server sends it (managedFields
  included), for scale.

RSS is read from ``/proc/self/statm`` after ``gc.collect()``, so it includes memory the
allocator keeps after the LIST's temporary objects were freed, as the process would. The
figures are for the cache as its first LISTs leave it; objects that arrive later in watch
events go through the same preparation (``ObjectStore.prepare``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

# memop first, as in the operator process: it imports only the parts of kubernetes_asyncio it
# uses (memop.runtime.client.k8simport), which the baseline must reflect.
import memop  # noqa: F401

# isort: split
from kubernetes_asyncio.client import ApiClient

from memop.memcached.api import API_VERSION, FINALIZER, KIND, MEMCACHEDS, parse_spec
from memop.memcached.controller import CACHE_SHARED, CACHE_TRANSFORMS
from memop.memcached.crd import crd
from memop.memcached.desired import INSTANCE_LABEL, desired_deployment
from memop.memcached.status import compute_status
from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import Obj
from memop.runtime.client.client import Client
from memop.runtime.client.kubeconfig import load_configuration
from memop.runtime.client.resources import (
    CUSTOM_RESOURCE_DEFINITIONS,
    DEPLOYMENTS,
    NAMESPACES,
    PODS,
    Resource,
)

NAMESPACES_USED = 10
CONCURRENCY = 32
SERVER_START_TIMEOUT = 30.0
SEED_TIMEOUT = 600.0
MEMOP_USER_AGENT = "memop/0.1.0 (bench-memory)"
KINDS: tuple[tuple[str, Resource], ...] = (
    ("memcacheds", MEMCACHEDS),
    ("deployments", DEPLOYMENTS),
    ("pods", PODS),
)
MIB = 1024 * 1024


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """The process's highest RSS so far (VmHWM: unlike ru_maxrss, not inherited from the
    parent across fork and exec)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


# -- the measuring process ----------------------------------------------------------------------


async def run_measure(args: argparse.Namespace) -> dict[str, Any]:
    configuration = await load_configuration(args.kubeconfig)
    async with ApiClient(configuration) as api:
        client = Client(api, user_agent="memop-bench-measure/1")
        cache = Cache(client)
        await cache.start()
        try:
            gc.collect()
            before = baseline = rss_bytes()
            result: dict[str, Any] = {"baseline_mib": round(baseline / MIB, 1)}
            for name, res in KINDS:
                transform = CACHE_TRANSFORMS.get(res) if args.transforms == "on" else None
                shared = CACHE_SHARED[res] if args.transforms == "on" else ()
                informer = cache.informer(res, transform=transform, shared=shared)
                if not await cache.wait_for_sync(timeout=300):
                    raise RuntimeError(f"the {name} informer did not sync")
                if len(informer.store) != args.objects:
                    raise RuntimeError(f"{len(informer.store)} {name} cached, expected {args.objects}")
                gc.collect()
                after = rss_bytes()
                result[name] = {
                    "kib_per_object": round((after - before) / args.objects / 1024, 2),
                    "rss_mib": round(after / MIB, 1),
                    "transform": getattr(transform, "__name__", None),
                    "shared": ["/".join(path) for path in shared],
                }
                before = after
        finally:
            await cache.stop()
    result["peak_rss_mib"] = round(peak_rss_bytes() / MIB, 1)
    return result


# -- the seeding process ------------------------------------------------------------------------


async def bounded(jobs: Sequence[Awaitable[Any]]) -> list[Any]:
    """Await ``jobs`` at most CONCURRENCY at a time; their results in order."""
    results: list[Any] = []
    for start in range(0, len(jobs), CONCURRENCY):
        results += await asyncio.gather(*jobs[start : start + CONCURRENCY])
    return results


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def _running_pods(client: Client) -> int:
    """How many pods exist, or 0 while any is not Running (cheap: two one-item pages)."""
    if (await client.list(PODS, field_selector="status.phase!=Running", limit=1))["items"]:
        return 0
    page = await client.list(PODS, limit=1)
    return len(page["items"]) + int(page["metadata"].get("remainingItemCount") or 0)


async def _served(client: Client) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            await client.list(MEMCACHEDS, limit=1)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def seed(client: Client, objects: int) -> None:
    """Create ``objects`` Memcacheds and bring each to what memop would leave (module doc)."""
    await client.create(CUSTOM_RESOURCE_DEFINITIONS, crd())
    namespaces = [f"bench-{i}" for i in range(NAMESPACES_USED)]
    for namespace in namespaces:
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
    await _served(client)

    async def create(i: int) -> Obj:
        namespace = namespaces[i % len(namespaces)]
        memcached = await client.create(
            MEMCACHEDS,
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "metadata": {"name": f"cache-{i:05d}", "namespace": namespace},
                "spec": {"size": 1},
            },
            namespace,
        )
        meta = memcached["metadata"]
        memcached = await client.patch(
            MEMCACHEDS,
            meta["name"],
            {"metadata": {"finalizers": [FINALIZER], "resourceVersion": meta["resourceVersion"]}},
            namespace,
        )
        await client.create(DEPLOYMENTS, desired_deployment(memcached, parse_spec(memcached)), namespace)
        return memcached

    memcacheds: list[Obj] = await bounded([create(i) for i in range(objects)])

    deadline = time.monotonic() + SEED_TIMEOUT
    while True:
        running = await _running_pods(client)
        if running >= objects:
            deployments, _ = await client.list_all(DEPLOYMENTS)
            available = [d for d in deployments if (d.get("status") or {}).get("availableReplicas") == 1]
            if len(available) == objects:
                break
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {running} of {objects} pods became ready")
        # Listing every Deployment is not free: poll less often the more there are.
        await asyncio.sleep(min(1.0, 0.05 + objects / 10_000))
    pods, _ = await client.list_all(PODS)
    if len(pods) != objects:
        raise RuntimeError(f"{len(pods)} pods exist, expected {objects}")
    by_instance: dict[tuple[str, str], list[Obj]] = {}
    for pod in pods:
        meta = pod["metadata"]
        by_instance.setdefault((meta["namespace"], meta["labels"][INSTANCE_LABEL]), []).append(pod)
    by_name = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in deployments}

    async def write_status(memcached: Obj) -> None:
        meta = memcached["metadata"]
        key = (meta["namespace"], meta["name"])
        status = compute_status(
            memcached, parse_spec(memcached), by_name[key], by_instance.get(key, []), _now()
        )
        await client.patch_status(MEMCACHEDS, meta["name"], {"status": status}, meta["namespace"])

    await bounded([write_status(m) for m in memcacheds])


async def json_sizes(client: Client) -> dict[str, int]:
    sizes = {}
    for name, res in KINDS:
        items = (await client.list(res, limit=100))["items"]
        sizes[name] = round(sum(len(json.dumps(i, separators=(",", ":"))) for i in items) / len(items))
    return sizes


async def measure(kubeconfig: Path, args: argparse.Namespace, transforms: str) -> dict[str, Any]:
    """Run a fresh measuring process; its figures."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        os.path.abspath(__file__),
        "--role=measure",
        f"--kubeconfig={kubeconfig}",
        f"--objects={args.objects}",
        f"--transforms={transforms}",
        stdout=subprocess.PIPE,
    )
    output, _ = await process.communicate()
    if process.returncode:
        raise RuntimeError(f"the measuring process failed with status {process.returncode}")
    figures: dict[str, Any] = json.loads(output)
    return figures


async def run(args: argparse.Namespace) -> dict[str, Any]:
    # Imported here, not by the measuring process: it would bring aiohttp.web into the baseline.
    from memop.testing.process import serving_async  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="memop-bench-") as tmp:
        # The server's log (it logs clients that hang up mid-request, as ours do when the
        # benchmark stops a cache) goes to server.log, shown if it fails to start.
        async with serving_async(
            Path(tmp) / "kubeconfig",
            "--simulate-controllers",
            output=Path(tmp) / "server.log",
            timeout=SERVER_START_TIMEOUT,
        ) as server:
            kubeconfig = server.kubeconfig
            configuration = await load_configuration(str(kubeconfig))
            async with ApiClient(configuration) as api:
                client = Client(api, user_agent=MEMOP_USER_AGENT)
                started = time.perf_counter()
                await seed(client, args.objects)
                seed_seconds = time.perf_counter() - started
                sizes = await json_sizes(client)
            without = await measure(kubeconfig, args, "off")
            with_transforms = await measure(kubeconfig, args, "on")
    for name, _ in KINDS:
        without[name]["json_bytes"] = with_transforms[name]["json_bytes"] = sizes[name]
    return {
        "benchmark": "cache memory per object",
        "objects_per_kind": args.objects,
        "with_transforms": with_transforms,
        "without_transforms": without,
        "targets_kib": {"deployments": 8, "pods": 6},
        "seed_seconds": round(seed_seconds, 1),
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000, help="objects of each kind (default 10000)")
    parser.add_argument("--role", choices=("seed", "measure"), default="seed", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--transforms", choices=("on", "off"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.objects < 1:
        parser.error("--objects must be positive")
    result = asyncio.run(run_measure(args) if args.role == "measure" else run(args))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
