"""How fast memop recovers from an API server outage, and what it sends while the server is down.

Run from the repository root as ``python bench/outage.py --downtime 3``; prints one JSON object.

The scenario (the one measured on a real control plane in the issue tracker): ``--crs`` (50)
Memcacheds over ``--namespaces`` (4) converge; the API server goes down for ``--downtime``
seconds and comes back with its data; the moment it answers again, the bench scales those
Memcacheds to size 2 and creates as many new ones, and waits until all of them have converged.

- On the in-memory server (the default; HTTPS and simulated controllers, as in
  bench/converge.py) the outage is its restart: connections refused for the downtime, then
  a rebuilt watch cache (watches from before get 410 and relist), as a restarted
  kube-apiserver has. "Answers again" is the moment it listens.
- With ``--kubeconfig`` the bench uses that cluster: ``--down-command`` stops it (the whole
  control plane, say) and ``--up-command`` starts it again with its data; "answers again" is
  the first ``/readyz`` 200 the bench sees, polling every 50 ms.

Figures:

- ``converged_after_answer_s``: from the server answering again to every change converged;
- ``memop_requests_while_down``: memop's requests (``rest_client_requests_total``, all codes)
  from the stop to the answer: in all, and per second after the first second (in which every
  open stream and call finds the server gone, once each): one probe for the whole process,
  not a stream of retries per reflector;
- ``memop_resumed_after_answer_s``: from the answer to memop's "the API server answers again"
  line, when its reflectors and waiting calls are released (negative when memop's probe saw
  the answer before the bench's poll did);
- ``watches_back_after_s`` (in-memory server only, from its request log): from the answer to
  the moment memop's last watch was accepted again, one per reflector.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import json
import os
import platform
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from converge import (
    Cluster,
    Tracker,
    add_bench_options,
    bench_namespaces,
    cluster,
    create_memcacheds,
    create_namespaces,
    log_summary,
    memop_args,
    metric_sum,
    plan,
    proc_stats,
    remove_namespaces,
    scrape,
    wait_watching,
)

from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.kubeconfig import load_configuration
from memop.testing.process import MemopProcess

# Each reflector's resource: memcacheds, deployments, pods, per watched namespace.
WATCHED_RESOURCES = 3


async def wait_answering(kubeconfig: str, timeout: float) -> float:
    """Poll ``/readyz`` every 50 ms until it answers 200; the wall-clock time it did."""
    configuration = await load_configuration(kubeconfig)
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    headers = {"Authorization": str(configuration.api_key.get("BearerToken", ""))}
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            try:
                async with http.get(
                    f"{configuration.host}/readyz",
                    ssl=context,
                    headers=headers,
                    timeout=aiohttp.ClientTimeout(1),
                ) as response:
                    if response.status == 200:
                        return time.time()
            except (aiohttp.ClientError, TimeoutError, OSError):
                pass
            await asyncio.sleep(0.05)
    raise TimeoutError(f"the API server did not answer within {timeout}s")


async def outage(args: argparse.Namespace, where: Cluster, memop: MemopProcess) -> Outage:
    """Take the server down for ``args.downtime`` seconds and wait until it answers again."""
    if where.server is None and not (args.down_command and args.up_command):
        raise SystemExit("with --kubeconfig, give --down-command and --up-command")
    before = await scrape(memop)
    starting: asyncio.subprocess.Process | None = None
    down_at = time.time()
    if where.server is not None:
        restart = asyncio.create_task(
            where.server.call("restart", downtime=args.downtime, timeout=args.downtime + 60)
        )
    else:
        await asyncio.to_thread(subprocess.run, args.down_command, shell=True, check=True)
    # memop's first second of the outage: each stream and call that was open finds it closed.
    settle = min(1.0, args.downtime / 2)
    await asyncio.sleep(settle)
    settled = await scrape(memop)
    if where.server is not None:
        answered_at = float((await restart)["listening_at"])
    else:
        await asyncio.sleep(args.downtime - settle)  # the rest of the outage
        # Not waited for: a start script may go on (nodes, add-ons) after the API server
        # answers, and the clock runs from the first answer.
        starting = await asyncio.create_subprocess_shell(args.up_command)
        answered_at = await wait_answering(where.kubeconfig, timeout=300)
    at_answer = await scrape(memop)
    return Outage(
        starting=starting,
        down_at=down_at,
        answered_at=answered_at,
        requests_total=requests_sent(at_answer) - requests_sent(before),
        requests_after_first_second=requests_sent(at_answer) - requests_sent(settled),
        seconds_after_first_second=answered_at - down_at - settle,
    )


@dataclass(frozen=True)
class Outage:
    starting: asyncio.subprocess.Process | None  # --up-command, maybe still running
    down_at: float  # wall clock
    answered_at: float  # wall clock
    requests_total: float  # memop's, from the stop to the answer
    requests_after_first_second: float
    seconds_after_first_second: float


def requests_sent(metrics: dict[Any, float]) -> float:
    return metric_sum(metrics, "rest_client_requests_total")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    namespaces = bench_namespaces(args)
    existing = plan(args.crs, namespaces)
    new = plan(args.crs, namespaces, prefix="new")
    with tempfile.TemporaryDirectory(prefix="memop-outage-") as tmp:
        async with cluster(args, Path(tmp)) as where:
            client, server = where.client, where.server
            await create_namespaces(client, namespaces)
            tracker = Tracker(client)
            await tracker.start()
            memop = MemopProcess(where.kubeconfig, memop_args(args.workers, namespaces, args.memop_arg))
            await memop.start()
            try:
                await memop.wait_ready(timeout=120)
                watches = WATCHED_RESOURCES * len(namespaces)
                if server:
                    await wait_watching(server, "memop", watches)
                tracker.expect(dict.fromkeys(existing, 1))
                await create_memcacheds(client, existing, 1, args.create_concurrency)
                await asyncio.wait_for(tracker.all_converged.wait(), args.timeout)

                log_start = await server.log_end() if server else 0
                down = await outage(args, where, memop)
                t_answer = time.monotonic()

                # The changes, made the moment the server answers.
                tracker.expect({**dict.fromkeys(existing, 2), **dict.fromkeys(new, 1)})
                for namespace, name in existing:
                    await client.patch(MEMCACHEDS, name, {"spec": {"size": 2}}, namespace)
                await create_memcacheds(client, new, 1, args.create_concurrency)
                await asyncio.wait_for(tracker.all_converged.wait(), args.timeout)
                converged_after = time.monotonic() - t_answer
                if down.starting is not None and await down.starting.wait() != 0:
                    raise SystemExit(f"--up-command exited with {down.starting.returncode}")

                watches_back = None
                if server:
                    accepted = [
                        t
                        for t, status, _path in (
                            await server.call("watches", start=log_start, agent="memop")
                        )["watches"]
                        if status == 200 and t >= down.answered_at
                    ]
                    if len(accepted) >= watches:
                        watches_back = round(sorted(accepted)[watches - 1] - down.answered_at, 3)
                stats = proc_stats(memop.pid)
            finally:
                await memop.stop()
                await tracker.stop()
                if args.kubeconfig:
                    await remove_namespaces(client, namespaces, args.timeout)

    down_for = down.answered_at - down.down_at
    resumed = [
        calendar.timegm(time.strptime(r["ts"][:19], "%Y-%m-%dT%H:%M:%S")) + float(r["ts"][19:-1] or 0)
        for r in memop.records
        if str(r.get("msg", "")).startswith("the API server answers again")
    ]
    return {
        "benchmark": "outage",
        "cluster": "in-memory API server (own process, HTTPS, simulated controllers)"
        if args.kubeconfig is None
        else f"the cluster of {args.kubeconfig}",
        "crs": args.crs,
        "namespaces": len(namespaces),
        "downtime_s": args.downtime,
        "down_until_answering_s": round(down_for, 2),
        "converged_after_answer_s": round(converged_after, 2),
        "changes": 2 * args.crs,
        "memop_resumed_after_answer_s": round(resumed[-1] - down.answered_at, 2) if resumed else None,
        "watches_back_after_s": watches_back,
        "memop_requests_while_down": {
            "total": down.requests_total,
            "after_the_first_second": down.requests_after_first_second,
            "per_second_after_the_first": round(
                down.requests_after_first_second / down.seconds_after_first_second, 2
            )
            if down.seconds_after_first_second > 0
            else None,
        },
        "memop_rss_mb": stats.rss_mb,
        "memop_warnings_and_errors": log_summary(memop),
        "cpus": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_bench_options(parser)
    parser.set_defaults(crs=50, namespaces=4)
    parser.add_argument("--downtime", type=float, default=3.0, help="seconds the server is down (default 3)")
    parser.add_argument("--down-command", help="with --kubeconfig: a shell command that stops the cluster")
    parser.add_argument("--up-command", help="with --kubeconfig: a shell command that starts it again")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
