"""``memop demo``: memop with no cluster, in one command.

Starts the in-memory API server with simulated controllers and kubelets (the one the tests
use), installs the CRD of every controller and memop's webhooks (called on loopback, their
certificate made by memop itself), runs the operator against it, then installs the samples (a
Memcached at each version, PodSets, a MyPod), prints the kubeconfig and the kubectl commands to
watch it work, says when each sample is ready, and runs until Ctrl-C. It is never a fallback: plain ``memop``
without a reachable cluster is an error.
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

from memop import memcached
from memop.builtin import PROJECT
from memop.cli import app
from memop.cli.options import parse_run_args
from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import AlreadyExists, ApiError, TransportError
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, Resource
from memop.runtime.controller.definition import ControllerDefinition
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import install_crd
from memop.testing.process import free_port
from memop.testing.webhooks import install_webhooks

# manifests/samples/cache_v1alpha1_memcached.yaml (a test keeps them equal).
SAMPLE: dict[str, Any] = memcached.SAMPLE
READY_LINE = "demo: memcached-sample is Available"


def _say(text: str) -> None:
    print(text, flush=True)


def _ready(obj: dict[str, Any]) -> bool:
    """Whether memop reports the sample's current generation Available (or Ready, for a MyPod)."""
    status = obj.get("status") or {}
    return status.get("observedGeneration") == obj["metadata"].get("generation") and any(
        c.get("type") in ("Available", "Ready") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


async def _report_progress(client: Client, samples: list[tuple[Resource, dict[str, Any]]]) -> None:
    """Print when each sample becomes ready, so a person (or CI) sees memop work."""
    waiting = list(samples)
    while waiting:
        for resource, sample in list(waiting):
            meta = sample["metadata"]
            try:
                obj = await client.get(resource, meta["name"], meta["namespace"])
            except (ApiError, TransportError):
                continue
            if not _ready(obj):
                continue
            waiting.remove((resource, sample))
            status = obj.get("status") or {}
            if resource == MEMCACHEDS:
                _say(f"{READY_LINE} with pods {', '.join(status.get('nodes') or [])}")
            elif resource.kind == MEMCACHEDS.kind:
                _say(
                    f"demo: Memcached {meta['namespace']}/{meta['name']} ({resource.version}) is Available "
                    f"with pods {', '.join(status.get('nodes') or [])}"
                )
            else:
                pods = ", ".join(status.get("podNames") or [meta["name"]])
                _say(f"demo: {resource.kind} {meta['namespace']}/{meta['name']} is ready with pods {pods}")
        await asyncio.sleep(0.5)


def _served(definition: ControllerDefinition) -> dict[tuple[str, str], Resource]:
    """(apiVersion, kind) -> Resource for each CRD of ``definition``."""
    served = {}
    for crd in definition.crds():
        spec, names = crd["spec"], crd["spec"]["names"]
        for version in spec["versions"]:
            resource = Resource(spec["group"], version["name"], names["plural"], names["kind"])
            served[(resource.api_version, resource.kind)] = resource
    return served


async def _create_samples(client: Client) -> list[tuple[Resource, dict[str, Any]]]:
    """Every controller's samples, each in its own namespace (default when it names none)."""
    created: list[tuple[Resource, dict[str, Any]]] = []
    for definition in PROJECT.controllers:
        served = _served(definition)
        for sample in definition.samples().values():
            resource = served[(sample["apiVersion"], sample["kind"])]
            namespace = sample["metadata"].setdefault("namespace", "default")
            with contextlib.suppress(AlreadyExists):
                await client.create(NAMESPACES, {"metadata": {"name": namespace}})
            await client.create(resource, sample, namespace)
            created.append((resource, sample))
    return created


async def _webhooks_answer(client: Client, port: int, operator: asyncio.Task[int]) -> bool:
    """Wait until memop serves its webhooks with a certificate the API server trusts (it set
    the caBundles itself); False if memop ended first."""
    while not operator.done():
        crd = await client.get(CUSTOM_RESOURCE_DEFINITIONS, f"{MEMCACHEDS.plural}.{MEMCACHEDS.group}")
        trusted = (
            ((crd["spec"].get("conversion") or {}).get("webhook") or {}).get("clientConfig") or {}
        ).get("caBundle")
        if trusted:
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                await writer.wait_closed()
                return True
        await asyncio.wait({operator}, timeout=0.2)
    return False


async def run_demo(kubeconfig: Path | None = None, pod_ready_delay: float = 2.0) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    path = kubeconfig or Path(tempfile.mkdtemp(prefix="memop-demo-")) / "kubeconfig"
    cert_dir = Path(tempfile.mkdtemp(prefix="memop-demo-webhook-"))
    port = free_port()  # the webhook configurations name it before memop starts
    async with ApiServer(simulate_controllers=True, pod_ready_delay=pod_ready_delay) as server:
        server.write_kubeconfig(path)
        async with ApiClient(server.client_configuration()) as api:
            client = Client(api, user_agent="memop-demo")
            await install_crd(client)
            # memop's webhooks as the installs register them, called on loopback; memop makes
            # their certificate and sets the caBundles itself (--webhook-certs=self-managed).
            await install_webhooks(client, PROJECT, f"https://127.0.0.1:{port}")
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
                    "--webhook-host=127.0.0.1",
                    f"--webhook-port={port}",
                    f"--webhook-cert-dir={cert_dir}",
                    "--webhook-certs=self-managed",
                    "--webhook-namespace=default",
                    "--webhook-cert-extra-names=127.0.0.1",
                ],
                env={},
                # memop's own controllers, whatever other project is installed: the samples are theirs.
                project=PROJECT,
            )
            operator = asyncio.create_task(app.run(config, stop), name="memop")
            progress: asyncio.Task[None] | None = None
            try:
                # The validating webhook fails closed: the samples go in once memop answers.
                if await _webhooks_answer(client, port, operator):
                    samples = await _create_samples(client)
                    _say(_instructions(server.url, path, samples))
                    progress = asyncio.create_task(_report_progress(client, samples))
                code = await operator
            finally:
                if progress is not None:
                    progress.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await progress
                if not operator.done():
                    stop.set()
                    await operator
    _say("demo: stopped")
    return code


def _instructions(url: str, path: Path, samples: list[tuple[Resource, dict[str, Any]]]) -> str:
    k = f"kubectl --kubeconfig {path}"
    installed = ", ".join(
        f"{s['kind']} {s['metadata']['namespace']}/{s['metadata']['name']} ({s['apiVersion']})"
        for _, s in samples
    )
    return (
        f"demo: an in-memory Kubernetes API server listens on {url}\n"
        f"demo: kubeconfig: {path}\n"
        f"demo: the CRDs of memop's controllers, its webhooks and their samples are installed: {installed}\n"
        f"demo: watch memop work from another terminal:\n"
        f"    {k} get memcached -w\n"
        f"    {k} get deployments,pods\n"
        f"    {k} get podsets,mypods,pods -A\n"
        f'    {k} patch podset podset-web --type=merge -p \'{{"spec":{{"replicas":1}}}}\'\n'
        f'    {k} patch memcached memcached-sample --type=merge -p \'{{"spec":{{"size":5}}}}\'\n'
        f"    {k} get memcached.v1beta1.cache.example.com -o yaml   # the same objects at v1beta1\n"
        f"    {k} get events\n"
        f"    {k} delete memcached memcached-sample\n"
        f"demo: press Ctrl-C to stop"
    )


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
