"""``python -m memop.testing serve``: the in-memory API server as a standalone process.

Point kubectl (or memop, or any client) at the kubeconfig it writes. The kubeconfig appears
only once the server listens, written atomically, so waiting for the file is a readiness
check. SIGINT or SIGTERM stop the server cleanly and the process exits 0.

``--extra-kinds module:attribute`` (repeatable) serves kinds the server lacks besides the
built-in ones: the attribute is a :class:`memop.testing.Kind` or a list of them (see
:mod:`memop.testing.kinds`); one that cannot be loaded, or names a resource already served, is a
usage error (exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import yaml
from kubernetes_asyncio.client import ApiClient

from memop.runtime.client.client import Client
from memop.runtime.manager.gctuning import tune_gc
from memop.testing.apiserver import featuregates
from memop.testing.apiserver.server import ApiServer
from memop.testing.apply import ApplyError, SourcedObject, create_objects, load_objects
from memop.testing.controllers.common import ControllerLimits
from memop.testing.kinds.registry import check_extra_kinds, load_kinds


def build_parser() -> argparse.ArgumentParser:
    """The command line: one ``serve`` command and its options."""
    parser = argparse.ArgumentParser(
        prog="python -m memop.testing",
        description="memop's in-memory Kubernetes API server, for tests and local experiments.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the API server on 127.0.0.1 until SIGINT/SIGTERM",
        description="Run the in-memory API server on 127.0.0.1 and write a kubeconfig for it.",
    )
    serve.add_argument(
        "--kubeconfig",
        required=True,
        type=Path,
        metavar="PATH",
        help="where to write the kubeconfig (once the server listens)",
    )
    serve.add_argument(
        "--port", type=int, default=0, metavar="N", help="port to listen on (default: 0, a free port)"
    )
    serve.add_argument(
        "--simulate-controllers",
        action="store_true",
        help="run simulated kube-controller-manager controllers and kubelets "
        "(Deployments get ReplicaSets and running pods, StatefulSets ordinal pods, DaemonSets a pod "
        "per node, Jobs pods that succeed, CronJobs Jobs on schedule, claims bound volumes, quotas "
        "their usage, namespaces a default ServiceAccount; garbage collection, namespace deletion)",
    )
    serve.add_argument(
        "--pod-ready-delay",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds a simulated pod stays Pending before it is Running and ready (default: 0)",
    )
    serve.add_argument(
        "--controller-qps",
        type=float,
        default=0.0,
        metavar="Q",
        help="each simulated kube-controller-manager controller writes at most Q requests a second, "
        "as its client rate limit (--kube-api-qps, 20 in kube-controller-manager) makes it; the "
        "scheduler or kubelet then at most 50 (default: 0, no limit)",
    )
    serve.add_argument(
        "--controller-burst",
        type=int,
        default=30,
        metavar="N",
        help="the burst of that rate limit (--kube-api-burst; default: 30)",
    )
    serve.add_argument(
        "--nodes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="simulate a node whose kubelet runs the pods (default); --no-nodes: a control plane "
        "without nodes, whose pods stay Pending, unschedulable",
    )
    serve.add_argument(
        "--bookmark-interval",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds between watch bookmarks (default: 60)",
    )
    serve.add_argument(
        "--history-size",
        type=int,
        default=10_000,
        metavar="N",
        help="watch events kept for resuming watches; older resourceVersions get 410 Gone (default: 10000)",
    )
    serve.add_argument(
        "--tls",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="serve HTTPS with a CA of its own, written into the kubeconfig, as a cluster does "
        "(default: plain HTTP)",
    )
    serve.add_argument(
        "--apply",
        action="append",
        type=Path,
        default=[],
        metavar="PATH",
        help="create the objects of a YAML file, or of a folder's YAML files, before writing the "
        "kubeconfig: CRDs first, waited for until Established (repeatable; see memop.testing.apply)",
    )
    serve.add_argument(
        "--feature-gates",
        type=feature_gates,
        default={},
        metavar="NAME=BOOL,...",
        help="kube-apiserver's --feature-gates, for the gates this server implements: "
        "ShardedListAndWatch (default: false; shardSelector on LIST and WATCH)",
    )
    serve.add_argument(
        "--audit-log",
        type=Path,
        metavar="PATH",
        help="append every request to PATH as kube-apiserver's JSON audit log does (level "
        "Metadata), a line per request answered; read it with memop.testing.apiserver.requestlog",
    )
    serve.add_argument(
        "--extra-kinds",
        action="append",
        default=[],
        metavar="MODULE:ATTRIBUTE",
        help="also serve the kinds MODULE.ATTRIBUTE holds (a memop.testing.Kind or a list of them); "
        "repeatable",
    )
    serve.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="logging level (default: WARNING)",
    )
    return parser


def feature_gates(text: str) -> dict[str, bool]:
    """``--feature-gates``: an unknown gate or a bad value is a usage error (exit 2)."""
    try:
        return featuregates.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def write_kubeconfig_atomically(server: ApiServer, path: Path) -> None:
    """Write the server's kubeconfig so that a reader sees either no file or all of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            yaml.safe_dump(server.kubeconfig(), out, sort_keys=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def limits_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the simulation options, in one line, or None."""
    if args.controller_qps < 0:
        return "--controller-qps must not be negative"
    if args.controller_burst < 1:
        return "--controller-burst must be at least 1"
    if not args.simulate_controllers and (args.controller_qps or not args.nodes):
        return "--controller-qps and --no-nodes need --simulate-controllers"
    return None


def controller_limits(qps: float, burst: int) -> ControllerLimits | None:
    """The simulated controllers' rate limits for ``--controller-qps``/``--controller-burst``
    (None, no limit, for a qps of 0)."""
    return ControllerLimits(qps=qps, burst=burst) if qps > 0 else None


async def _create(server: ApiServer, objects: list[SourcedObject]) -> None:
    """Create ``objects`` in ``server`` (--apply), before anyone is told where it listens."""
    async with ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="memop-testing-serve")
        try:
            await create_objects(client, objects)
        finally:
            await client.close()


async def serve(args: argparse.Namespace) -> int:
    """Run the server until SIGINT/SIGTERM; return the exit status."""
    if args.pod_ready_delay < 0:
        print("--pod-ready-delay must not be negative", file=sys.stderr)
        return 2
    problem = limits_problem(args)
    if problem:
        print(f"python -m memop.testing serve: error: {problem}", file=sys.stderr)
        return 2
    if args.audit_log is not None:
        try:
            args.audit_log.open("a").close()
        except OSError as error:
            print(f"python -m memop.testing serve: error: --audit-log: {error}", file=sys.stderr)
            return 2
    try:
        objects = load_objects(args.apply)
        extra = [kind for spec in args.extra_kinds for kind in load_kinds(spec)]
        check_extra_kinds(extra)
    except (ApplyError, ValueError) as error:
        print(f"python -m memop.testing serve: error: {error}", file=sys.stderr)
        return 2
    server = ApiServer(
        port=args.port,
        history_size=args.history_size,
        bookmark_interval=args.bookmark_interval,
        simulate_controllers=args.simulate_controllers,
        pod_ready_delay=args.pod_ready_delay,
        tls=args.tls,
        controller_limits=controller_limits(args.controller_qps, args.controller_burst),
        nodes=args.nodes,
        feature_gates=args.feature_gates,
        audit_log=args.audit_log,
        extra_kinds=extra,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await server.start()
        try:
            if objects:
                try:
                    await _create(server, objects)
                except ApplyError as error:
                    print(f"python -m memop.testing serve: error: {error}", file=sys.stderr)
                    return 2
            write_kubeconfig_atomically(server, args.kubeconfig)
            print(
                f"memop test API server listening on {server.url}, kubeconfig {args.kubeconfig}", flush=True
            )
            await stop.wait()
        finally:
            await server.stop()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m memop.testing``."""
    args = build_parser().parse_args(argv)
    tune_gc()
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
