"""The in-memory API server's sustained write rate while it feeds many watches.

Run from the repository root as ``python bench/apiserver.py``; prints one JSON object.

The server runs on this process's event loop. The load comes from two other processes, so
client CPU is not charged to the server: one holds ``--watches`` watches (by default 200:
configmaps and a custom resource in each of 100 namespaces, so every write reaches exactly
one watch) and counts the events they receive; the other runs ``--clients`` concurrent
writers (aiohttp, keep-alive), each creating an object and merge-patching it, alternately a
ConfigMap and a custom resource, across all namespaces. Writes are counted in a window that
starts after ``--warmup`` seconds; events are counted from the first write until every write
has been delivered (or delivery stalls).

``writes_per_second`` is (creates + merge patches) per second in the window;
``server_cpu_utilisation`` is the server process's CPU seconds per wall second in it (1.0
means its event loop was saturated). ``--profile FILE`` writes a cProfile of the server
during the window (slower: for finding where time goes, not for the figure).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import json
import os
import platform
import resource
import statistics
import sys
import time
from typing import Any

import aiohttp

from memop.testing.apiserver.server import ApiServer

GROUP = "bench.memop.dev"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer"}, "note": {"type": "string"}},
                            }
                        },
                    }
                },
            }
        ],
    },
}
MERGE = {"Content-Type": "application/merge-patch+json"}
JSON = {"Content-Type": "application/json"}


def collection(kind: str, namespace: str) -> str:
    if kind == "configmaps":
        return f"/api/v1/namespaces/{namespace}/configmaps"
    return f"/apis/{GROUP}/v1/namespaces/{namespace}/widgets"


def body(kind: str, name: str) -> dict[str, Any]:
    if kind == "configmaps":
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"bench": "1"}},
            "data": {"size": "1", "note": "created by bench/apiserver.py"},
        }
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, "labels": {"bench": "1"}},
        "spec": {"size": 1, "note": "created by bench/apiserver.py"},
    }


def patch(kind: str, n: int) -> dict[str, Any]:
    if kind == "configmaps":
        return {"metadata": {"labels": {"rev": str(n)}}, "data": {"size": str(n)}}
    return {"metadata": {"labels": {"rev": str(n)}}, "spec": {"size": n}}


KINDS = ("configmaps", "widgets")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round(usage.ru_utime + usage.ru_stime, 2)


# -- the watchers' process ----------------------------------------------------------------------


async def run_watchers(url: str, namespaces: int, watches: int) -> None:
    """Hold ``watches`` watches; print READY once all are open, then, on "REPORT" from stdin,
    wait for deliveries to stop and print the counts as JSON."""
    counts = [0] * watches
    established = 0
    failures: list[str] = []
    all_open = asyncio.Event()
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None, sock_connect=30)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(url, timeout=timeout, connector=connector) as session:

        async def watch(i: int) -> None:
            nonlocal established
            kind = KINDS[(i // namespaces) % len(KINDS)]
            path = collection(kind, f"bench-{i % namespaces}")
            params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "3600"}
            try:
                async with session.get(path, params=params) as resp:
                    if resp.status != 200:
                        failures.append(f"{path}: HTTP {resp.status}")
                        return
                    established += 1
                    if established + len(failures) >= watches:
                        all_open.set()
                    async for line in resp.content:
                        if b'"BOOKMARK"' not in line[:40]:
                            counts[i] += 1
            except aiohttp.ClientError as err:
                failures.append(f"{path}: {err!r}")
            finally:
                if established + len(failures) >= watches:
                    all_open.set()

        tasks = [asyncio.create_task(watch(i)) for i in range(watches)]
        try:
            await asyncio.wait_for(all_open.wait(), 60)
        except TimeoutError:
            failures.append("not every watch opened within 60 s")
        print("READY", flush=True)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        command = (await reader.readline()).decode().strip()
        expected = int(command.split()[1]) if command.startswith("REPORT ") else 0
        # Wait until every write has been delivered, or nothing arrived for 2 s.
        deadline_quiet = 2.0
        last_total, last_change = sum(counts), time.monotonic()
        while sum(counts) < expected and time.monotonic() - last_change < deadline_quiet:
            await asyncio.sleep(0.05)
            if sum(counts) != last_total:
                last_total, last_change = sum(counts), time.monotonic()
        held = sum(1 for t in tasks if not t.done())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    print(
        json.dumps(
            {
                "cpu_seconds": cpu_seconds(),
                "watches_open": established,
                "watches_held_to_end": held,
                "events": sum(counts),
                "watches_with_events": sum(1 for c in counts if c),
                "failures": failures[:5],
            }
        ),
        flush=True,
    )


# -- the writers' process -----------------------------------------------------------------------


async def run_writers(url: str, namespaces: int, clients: int, duration: float, warmup: float) -> None:
    """Run ``clients`` writers for ``warmup + duration`` seconds; print the counts as JSON."""
    creates = patches = errors = total_ok = 0
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=30)
    started = time.monotonic()
    window_start, window_end = started + warmup, started + warmup + duration

    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:

        async def send(method: str, path: str, payload: dict[str, Any], headers: dict[str, str]) -> bool:
            nonlocal errors, total_ok
            t0 = time.monotonic()
            async with session.request(method, path, data=json.dumps(payload), headers=headers) as resp:
                await resp.read()
                ok = resp.status < 300
            t1 = time.monotonic()
            if ok:
                total_ok += 1
            else:
                statuses[resp.status] = statuses.get(resp.status, 0) + 1
            in_window = window_start <= t1 <= window_end
            if in_window:
                latencies.append(t1 - t0)
                if not ok:
                    errors += 1
            return ok and in_window

        # One sequence for all writers: consecutive objects go to consecutive namespaces, and
        # each namespace gets both kinds, so every watch receives its share.
        sequence = itertools.count()

        async def writer() -> None:
            nonlocal creates, patches
            while time.monotonic() < window_end:
                n = next(sequence)
                kind = KINDS[(n // namespaces) % len(KINDS)]
                ns = f"bench-{n % namespaces}"
                name = f"o{n}"
                if await send("POST", collection(kind, ns), body(kind, name), JSON):
                    creates += 1
                if await send("PATCH", f"{collection(kind, ns)}/{name}", patch(kind, n), MERGE):
                    patches += 1

        await asyncio.gather(*(writer() for _ in range(clients)))
    latencies.sort()
    print(
        json.dumps(
            {
                "creates": creates,
                "patches": patches,
                "errors": errors,
                "statuses": statuses,
                "writes_total_ok": total_ok,
                "cpu_seconds": cpu_seconds(),
                "latency_ms_p50": round(1000 * statistics.median(latencies), 2) if latencies else None,
                "latency_ms_p99": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 2)
                if latencies
                else None,
            }
        ),
        flush=True,
    )


# -- the server's process -----------------------------------------------------------------------


async def setup(url: str, namespaces: int) -> None:
    async with aiohttp.ClientSession(url) as session:
        for i in range(namespaces):
            async with session.post("/api/v1/namespaces", json={"metadata": {"name": f"bench-{i}"}}) as resp:
                assert resp.status == 201, await resp.text()
        async with session.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CRD) as resp:
            assert resp.status == 201, await resp.text()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            async with session.get(f"/apis/{GROUP}/v1/widgets") as resp:
                if resp.status == 200:
                    return
            await asyncio.sleep(0.05)
        raise RuntimeError("the benchmark CRD was never served")


async def child(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        os.path.abspath(__file__),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


async def run_server(args: argparse.Namespace) -> dict[str, Any]:
    server = ApiServer(history_size=args.history_size)
    await server.start()
    try:
        url = server.url
        await setup(url, args.namespaces)
        watchers = await child(
            "--role",
            "watchers",
            "--url",
            url,
            "--namespaces",
            str(args.namespaces),
            "--watches",
            str(args.watches),
        )
        assert watchers.stdout is not None
        assert watchers.stdin is not None
        ready = await asyncio.wait_for(watchers.stdout.readline(), 90)
        if ready.strip() != b"READY":
            raise RuntimeError(f"the watchers' process failed: {ready!r}")

        writers = await child(
            "--role",
            "writers",
            "--url",
            url,
            "--namespaces",
            str(args.namespaces),
            "--clients",
            str(args.clients),
            "--duration",
            str(args.duration),
            "--warmup",
            str(args.warmup),
        )
        assert writers.stdout is not None
        # Measure the server over the writers' window only.
        await asyncio.sleep(args.warmup)
        profiler = cProfile.Profile() if args.profile else None
        cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        if profiler is not None:
            profiler.enable()
        written = json.loads((await writers.communicate())[0])
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        cpu1, wall1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()

        watchers.stdin.write(f"REPORT {written['writes_total_ok']}\n".encode())
        await watchers.stdin.drain()
        watched = json.loads(await asyncio.wait_for(watchers.stdout.readline(), 60))
        await watchers.wait()
    finally:
        await server.stop()

    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    wall = wall1 - wall0
    writes = written["creates"] + written["patches"]
    return {
        "benchmark": "apiserver",
        "writes_per_second": round(writes / args.duration, 1),
        "creates": written["creates"],
        "merge_patches": written["patches"],
        "write_errors": written["errors"],
        "error_statuses": written["statuses"],
        "latency_ms_p50": written["latency_ms_p50"],
        "latency_ms_p99": written["latency_ms_p99"],
        "clients": args.clients,
        "window_seconds": args.duration,
        "watches_requested": args.watches,
        "watches_held": watched["watches_held_to_end"],
        "watches_receiving_events": watched["watches_with_events"],
        "events_delivered": watched["events"],
        "events_expected": written["writes_total_ok"],
        "watch_failures": watched["failures"],
        "server_cpu_utilisation": round(cpu / wall, 2) if wall > 0 else None,
        "writers_cpu_seconds": written["cpu_seconds"],
        "watchers_cpu_seconds": watched["cpu_seconds"],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "profiled": bool(args.profile),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--role", choices=("server", "watchers", "writers"), default="server", help=argparse.SUPPRESS
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--clients", type=int, default=50, help="concurrent writers (default 50)")
    parser.add_argument("--watches", type=int, default=200, help="watches held (default 200)")
    parser.add_argument("--namespaces", type=int, default=100, help="namespaces written to (default 100)")
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds (default 10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds first (default 2)")
    parser.add_argument("--history-size", type=int, default=10_000, help="server's watch history")
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the server's window to FILE")
    args = parser.parse_args()
    if args.role == "watchers":
        asyncio.run(run_watchers(args.url, args.namespaces, args.watches))
    elif args.role == "writers":
        asyncio.run(run_writers(args.url, args.namespaces, args.clients, args.duration, args.warmup))
    else:
        print(json.dumps(asyncio.run(run_server(args))))


if __name__ == "__main__":
    main()
