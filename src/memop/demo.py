"""``memop demo``: memop with no cluster, in one command.

Starts the in-memory API server with simulated controllers and kubelets (the one the tests
use), installs the Memcached CRD and a sample Memcached, runs the operator against it, prints
the kubeconfig and the kubectl commands to watch it work, and runs until Ctrl-C. It is never
a fallback: plain ``memop`` without a reachable cluster is an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from memop import app
from memop.memcached.api import MEMCACHEDS
from memop.options import parse_run_args
from memop.runtime.client import Client
from memop.runtime.errors import ApiError, TransportError
from memop.testing.operator import install_crd
from memop.testing.server import ApiServer

# The same object as manifests/samples/cache_v1alpha1_memcached.yaml (a test keeps them equal).
SAMPLE: dict[str, Any] = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Memcached",
    "metadata": {"name": "memcached-sample"},
    "spec": {
        "size": 3,
        "image": "memcached:1.6.26-alpine3.19",
        "memoryLimitMiB": 64,
        "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "96Mi"}},
    },
}
READY_LINE = "demo: memcached-sample is Available"


def _say(text: str) -> None:
    print(text, flush=True)


async def _report_progress(client: Client) -> None:
    """Print when the sample becomes Available, so a person (or CI) sees memop work."""
    while True:
        try:
            cr = await client.get(MEMCACHEDS, "memcached-sample", "default")
        except (ApiError, TransportError):
            cr = {}
        status = cr.get("status") or {}
        available = any(
            c.get("type") == "Available" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        if available:
            _say(f"{READY_LINE} with pods {', '.join(status.get('nodes') or [])}")
            return
        await asyncio.sleep(0.5)


async def run_demo(kubeconfig: Path | None = None, pod_ready_delay: float = 2.0) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    path = kubeconfig or Path(tempfile.mkdtemp(prefix="memop-demo-")) / "kubeconfig"
    async with ApiServer(simulate_controllers=True, pod_ready_delay=pod_ready_delay) as server:
        server.write_kubeconfig(path)
        async with ApiClient(server.client_configuration()) as api:
            client = Client(api, user_agent="memop-demo")
            await install_crd(client)
            await client.create(MEMCACHEDS, SAMPLE, "default")
            k = f"kubectl --kubeconfig {path}"
            _say(
                f"demo: an in-memory Kubernetes API server listens on {server.url}\n"
                f"demo: kubeconfig: {path}\n"
                f"demo: the Memcached CRD and the sample default/memcached-sample (size 3) are installed\n"
                f"demo: watch memop work from another terminal:\n"
                f"    {k} get memcached -w\n"
                f"    {k} get deployments,pods\n"
                f'    {k} patch memcached memcached-sample --type=merge -p \'{{"spec":{{"size":5}}}}\'\n'
                f"    {k} get events\n"
                f"    {k} delete memcached memcached-sample\n"
                f"demo: press Ctrl-C to stop"
            )
            progress = asyncio.create_task(_report_progress(client))
            config = parse_run_args(
                [
                    "--kubeconfig",
                    str(path),
                    "--metrics-bind-address",
                    "127.0.0.1:0",
                    "--health-probe-bind-address",
                    "127.0.0.1:0",
                    "--log-format",
                    "console",
                ],
                env={},
            )
            try:
                code = await app.run(config, stop)
            finally:
                progress.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await progress
    _say("demo: stopped")
    return code


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="memop demo", description=__doc__.splitlines()[0] if __doc__ else ""
    )
    parser.add_argument("--kubeconfig", type=Path, help="where to write the kubeconfig (default: a temp dir)")
    parser.add_argument(
        "--pod-ready-delay", type=float, default=2.0, help="seconds until simulated pods are Ready"
    )
    args = parser.parse_args(argv)
    return asyncio.run(run_demo(args.kubeconfig, args.pod_ready_delay))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
