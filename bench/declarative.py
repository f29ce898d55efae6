"""What the declarative path costs, beside the imperative Memcached controller, on the in-memory server.

Run from the repository root as ``python bench/declarative.py --owners 1000``; prints one JSON
object. For each controller in turn, on a fresh server:

- the server: ``python -m memop.testing serve --simulate-controllers --audit-log PATH`` in a
  process of its own (Deployments get ReplicaSets and ready pods), whose audit log counts every
  request the operator sends, by verb and resource, as the server saw it;
- the owners (``--owners``, size 1, one namespace) are created first, then the operator starts in
  this process (:class:`memop.testing.operator.RunningOperator`, 2 workers), so the process's CPU
  time from the operator's start to convergence is the operator's (the wait polls its cache);
- converged: every owner reports its Deployment available for its generation (the Memcached's
  ``Available``, the declarative owner's ``Ready``) and the operator's queue is idle;
- idle resync: every informer replays its objects (what the periodic resync does), each owner is
  reconciled once more, and the requests and CPU that costs are counted.

The declarative owner has the same Deployment as a Memcached (image, command, security context,
resources), built by a ``desired`` function; the Memcached controller also watches pods (its
status lists them) and writes a finalizer, which the declarative one does not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from memop import memcached
from memop.memcached.api import MEMCACHEDS
from memop.runtime.api.model import CustomResource, Model, Status
from memop.runtime.client.client import Client
from memop.runtime.client.kubeconfig import load_configuration
from memop.runtime.client.resources import DEPLOYMENTS, NAMESPACES, Resource
from memop.runtime.controller.declarative import declarative_controller
from memop.runtime.controller.definition import ControllerDefinition
from memop.testing.apiserver.requestlog import read_audit_log
from memop.testing.operator import RunningOperator, install_crds

NAMESPACE = "bench"
IMAGE = "memcached:1.6.26-alpine3.19"


class CacheSpec(Model):
    size: int = 1
    image: str = IMAGE
    memory_limit_mib: int = 64


class Cache(CustomResource, group="bench.memop.dev", version="v1"):
    """A memcached, declaratively: the Memcached operator's Deployment from a desired() function."""

    spec: CacheSpec
    status: Status = Status()


def cache_children(cache: Cache) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": cache.name}
    container = {
        "name": "memcached",
        "image": cache.spec.image,
        "command": ["memcached", f"--memory-limit={cache.spec.memory_limit_mib}", "-o", "modern", "-v"],
        "ports": [{"name": "memcached", "containerPort": 11211}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    pod_security = {"runAsNonRoot": True, "runAsUser": 1001, "seccompProfile": {"type": "RuntimeDefault"}}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": cache.name, "labels": labels},
            "spec": {
                "replicas": cache.spec.size,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"securityContext": pod_security, "containers": [container]},
                },
            },
        }
    ]


DECLARATIVE = declarative_controller(Cache, cache_children, children=(DEPLOYMENTS,), name="cache")
CACHES = Cache.resource()


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    status = obj.get("status") or {}
    if status.get("observedGeneration") != obj["metadata"].get("generation"):
        return False
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or ())


MODES: dict[str, tuple[ControllerDefinition, Resource, str, dict[str, Any]]] = {
    "imperative_memcached": (
        memcached.DEFINITION,
        MEMCACHEDS,
        "Available",
        {"size": 1, "image": IMAGE, "memoryLimitMiB": 64},
    ),
    "declarative": (DECLARATIVE, CACHES, "Ready", {"size": 1, "image": IMAGE, "memoryLimitMib": 64}),
}


async def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.2)


def by_request(records: list[Any], owners: int) -> dict[str, float]:
    counts = Counter(
        f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
        for r in records
        if r.verb != "watch"
    )
    return {key: round(count / owners, 3) for key, count in sorted(counts.items())}


async def run_mode(mode: str, owners: int, timeout: float, workdir: Path) -> dict[str, Any]:
    definition, resource, ready_condition, spec = MODES[mode]
    kubeconfig, audit = workdir / f"{mode}.kubeconfig", workdir / f"{mode}.audit"
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "memop.testing", "serve", "--kubeconfig", str(kubeconfig),
        "--simulate-controllers", "--audit-log", str(audit),
        stdout=asyncio.subprocess.DEVNULL,  # its "listening" line is not the report
    )  # fmt: skip
    try:
        await wait_until(kubeconfig.exists, 60, "the API server")
        configuration = await load_configuration(str(kubeconfig))
        async with ApiClient(configuration) as api:
            client = Client(api, user_agent="bench")
            await install_crds(client, definition)
            await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            semaphore = asyncio.Semaphore(32)

            async def create(index: int) -> None:
                body = {"apiVersion": resource.api_version, "kind": resource.kind}
                body |= {"metadata": {"name": f"owner-{index:05d}"}, "spec": spec}
                async with semaphore:
                    await client.create(resource, body, NAMESPACE)

            await asyncio.gather(*(create(i) for i in range(owners)))
            operator = RunningOperator(
                configuration, controllers=definition, namespaces=[NAMESPACE], identity=mode
            )
            cpu_start, wall_start = time.process_time(), time.monotonic()
            await operator.start()
            try:
                cache = operator.manager.cache

                def converged() -> bool:
                    objects = cache.list(resource, NAMESPACE)
                    return len(objects) == owners and all(condition_true(o, ready_condition) for o in objects)

                await wait_until(converged, timeout, f"{owners} owners to converge")
                await operator.controller.queue.wait_idle()
                cpu_converge, wall_converge = time.process_time() - cpu_start, time.monotonic() - wall_start
                records = [r for r in read_audit_log(audit) if r.user_agent.startswith(operator.user_agent)]
                at_convergence = len(records)
                reconciles = operator.controller.stats.reconciles
                cpu_resync = time.process_time()
                informers = [i for by_selector in cache._informers.values() for i in by_selector.values()]
                for informer in informers:
                    informer.resync()
                await wait_until(
                    lambda: operator.controller.stats.reconciles >= reconciles + owners, timeout, "the resync"
                )
                await operator.controller.queue.wait_idle()
                cpu_resync = time.process_time() - cpu_resync
                records = [r for r in read_audit_log(audit) if r.user_agent.startswith(operator.user_agent)]
            finally:
                await operator.stop()
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), timeout=30)
    return {
        "wall_seconds_to_converge": round(wall_converge, 2),
        "cpu_ms_per_owner_to_converge": round(cpu_converge * 1000 / owners, 3),
        "requests_per_owner_to_converge": round(
            sum(1 for r in records[:at_convergence] if r.verb != "watch") / owners, 3
        ),
        "requests_per_owner_to_converge_by_kind": by_request(records[:at_convergence], owners),
        "idle_resync_reconciles_per_owner": round(
            (operator.controller.stats.reconciles - reconciles) / owners, 3
        ),
        "idle_resync_requests_per_owner": round(
            sum(1 for r in records[at_convergence:] if r.verb != "watch") / owners, 3
        ),
        "idle_resync_cpu_ms_per_owner": round(cpu_resync * 1000 / owners, 3),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--owners", type=int, default=1000, help="owners per controller (default: 1000)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to converge (default: 600)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    args = parser.parse_args()
    unknown = set(args.modes.split(",")) - set(MODES)
    if args.owners < 1 or unknown:
        problem = (
            "--owners must be at least 1" if args.owners < 1 else f"--modes must be of {', '.join(MODES)}"
        )
        print(f"{parser.prog}: error: {problem}", file=sys.stderr)
        raise SystemExit(2)
    report: dict[str, Any] = {
        "owners": args.owners,
        "server": "memop in-memory API server (python -m memop.testing serve --simulate-controllers)",
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with tempfile.TemporaryDirectory(prefix="memop-bench-declarative-") as workdir:
        for mode in args.modes.split(","):
            report[mode] = await run_mode(mode, args.owners, args.timeout, Path(workdir))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
