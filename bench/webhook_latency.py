"""Admission latency at memop's webhook server: p50/p99 of sequential and concurrent requests.

Run from the repository root as ``python bench/webhook_latency.py`` (``--requests 1000
--concurrency 50 --controllers memcached``); prints one JSON object.

Two processes, as in a cluster, where the API server is the client:

- the webhook: ``python bench/webhook_latency.py serve`` runs memop's
  :class:`~memop.runtime.webhook.server.WebhookServer` on a free loopback port with the admission
  webhooks and conversions the named controllers of memop's project declare, and a serving
  certificate for 127.0.0.1 made for the run (``memop.testing.tls``);
- the bench: one aiohttp session over HTTPS, keeping its connections open as kube-apiserver does
  (``--concurrency`` connections at most), sends AdmissionReviews for a CREATE of each
  controller's first sample object (v1, a fresh uid each) to every admission path, and
  ConversionReviews of that sample to every other version at ``/convert``.

Per path, ``sequential``: ``--requests`` requests one after the other; ``concurrent``:
``--requests`` requests with ``--concurrency`` in flight. Latency is the round trip the client
sees, from sending the request to having read the whole answer (so it includes TLS and HTTP on
loopback; the handler alone is less), in milliseconds: ``p50``, ``p90``, ``p99``, ``max``, and
``per_second``. ``--warmup`` requests per path come first and are not counted. Each answer is
checked (HTTP 200, the review's uid, ``allowed`` or ``Success``); a wrong one ends the run with one
line on stderr and exit 1. ``webhook_cpu_seconds`` is the webhook process's user+system time
over the measured requests. The figures name the machine (``platform``, ``cpus``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import json
import os
import platform
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from memop.builtin import PROJECT
from memop.runtime.controller.definition import ControllerDefinition
from memop.runtime.webhook.admission import AdmissionHandler
from memop.runtime.webhook.conversion import ConversionHandler
from memop.runtime.webhook.declarations import CONVERSION_PATH
from memop.runtime.webhook.metrics import Handler
from memop.runtime.webhook.server import WebhookServer, WebhookServerOptions
from memop.testing.tls import ServingCertificates


def definitions(names: Sequence[str]) -> list[ControllerDefinition]:
    known = {d.name: d for d in PROJECT.controllers}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown controller(s) {', '.join(unknown)}: choose from {', '.join(known)}")
    return [known[n] for n in names]


# --- the webhook process ---------------------------------------------------------------------


class Timings:
    """How long each handler took (seconds), per path: the span controller-runtime's
    ``controller_runtime_webhook_latency_seconds`` measures, from the body read to the answer."""

    def __init__(self) -> None:
        self.by_path: dict[str, list[float]] = {}

    def timed(self, path: str, handler: Handler) -> Handler:
        durations = self.by_path.setdefault(path, [])

        async def run(body: bytes, content_type: str) -> tuple[int, bytes]:
            started = time.perf_counter()
            try:
                return await handler(body, content_type)
            finally:
                durations.append(time.perf_counter() - started)

        return run


async def serve(cert_dir: Path, names: Sequence[str]) -> None:
    """Serve until stdin closes; on each line ``report`` print the handler times since the
    last report (one JSON line: path -> seconds), and forget them."""
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, cert_dir=cert_dir))
    timings = Timings()
    conversions = ConversionHandler()
    for definition in definitions(names):
        for webhook in definition.webhooks:
            handler = AdmissionHandler(webhook)
            if webhook.defaulter is not None:
                server.register(webhook.mutating_path, timings.timed(webhook.mutating_path, handler.mutate))
            if webhook.validator is not None:
                server.register(
                    webhook.validating_path, timings.timed(webhook.validating_path, handler.validate)
                )
        for conversion in definition.conversions:
            conversions.add(conversion)
    if any(d.conversions for d in definitions(names)):
        server.register(CONVERSION_PATH, timings.timed(CONVERSION_PATH, conversions.handle))
    if not server.has_handlers:
        raise SystemExit(f"the controllers {', '.join(names)} declare no webhook")
    await server.start()
    print(json.dumps({"port": server.port, "paths": list(server.paths), "pid": os.getpid()}), flush=True)
    loop = asyncio.get_running_loop()
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            if line.strip() == "report":
                print(json.dumps(timings.by_path), flush=True)
                for durations in timings.by_path.values():
                    durations.clear()
    finally:
        await server.stop()


# --- the bench ---------------------------------------------------------------------------------


def admission_review(obj: dict[str, Any], plural: str) -> dict[str, Any]:
    group, _, version = obj["apiVersion"].rpartition("/")
    metadata = obj.get("metadata") or {}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "",
            "kind": {"group": group, "version": version, "kind": obj["kind"]},
            "resource": {"group": group, "version": version, "resource": plural},
            "requestKind": {"group": group, "version": version, "kind": obj["kind"]},
            "requestResource": {"group": group, "version": version, "resource": plural},
            "name": metadata.get("name", ""),
            "namespace": "bench",
            "operation": "CREATE",
            "userInfo": {"username": "bench", "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def conversion_review(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "", "desiredAPIVersion": desired, "objects": [obj]},
    }


def reviews(names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Path -> the review it is sent (its uid set per request)."""
    out: dict[str, dict[str, Any]] = {}
    for definition in definitions(names):
        samples = list(definition.samples().values())
        for webhook in definition.webhooks:
            sample = next(
                (
                    s
                    for s in samples
                    if s.get("kind") == webhook.kind and s["apiVersion"].startswith(webhook.group)
                ),
                None,
            )
            if sample is None:
                raise ValueError(f"{definition.name} has no sample {webhook.kind} to send")
            obj = copy.deepcopy(sample)
            obj["apiVersion"] = f"{webhook.group}/{webhook.version}"
            obj.setdefault("metadata", {}).update({"namespace": "bench", "uid": str(uuid.uuid4())})
            review = admission_review(obj, webhook.plural)
            if webhook.defaulter is not None:
                out[webhook.mutating_path] = review
            if webhook.validator is not None:
                out[webhook.validating_path] = review
        for conversion in definition.conversions:
            sample = next((s for s in samples if s.get("kind") == conversion.kind), None)
            if sample is None:
                raise ValueError(f"{definition.name} has no sample {conversion.kind} to convert")
            obj = copy.deepcopy(sample)
            obj["apiVersion"] = f"{conversion.group}/{conversion.hub}"
            spoke = next(iter(conversion.spokes))
            out[f"{CONVERSION_PATH} {conversion.kind} {conversion.hub}->{spoke}"] = conversion_review(
                obj, f"{conversion.group}/{spoke}"
            )
    return out


def check(path: str, uid: str, status: int, answer: dict[str, Any]) -> None:
    response = answer.get("response") or {}
    if path.startswith(CONVERSION_PATH):
        ok = (
            status == 200
            and response.get("uid") == uid
            and (response.get("result") or {}).get("status") == "Success"
        )
    else:
        ok = status == 200 and response.get("uid") == uid and response.get("allowed") is True
        if ok and response.get("patch"):
            json.loads(base64.b64decode(response["patch"]))
    if not ok:
        raise RuntimeError(f"{path}: unexpected answer (HTTP {status}): {json.dumps(answer)[:300]}")


def summary(latencies: list[float], seconds: float) -> dict[str, float]:
    if not latencies:
        raise RuntimeError("no request was timed")
    ordered = sorted(latencies)

    def quantile(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)

    return {
        "requests": len(ordered),
        "p50": quantile(0.50),
        "p90": quantile(0.90),
        "p99": quantile(0.99),
        "max": round(ordered[-1] * 1000, 3),
        "mean": round(statistics.fmean(ordered) * 1000, 3),
        "per_second": round(len(ordered) / seconds, 1),
    }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(
    send: Callable[[], Awaitable[None]], requests: int, concurrency: int
) -> tuple[list[float], float]:
    latencies: list[float] = []
    remaining = requests

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            await send()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - started


def start_webhook(cert_dir: Path, names: Sequence[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "serve", "--cert-dir", str(cert_dir), "--controllers", ",".join(names)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


UID_MARK = "00000000-0000-0000-0000-00000000b0d1"


async def bench(
    args: argparse.Namespace, names: Sequence[str], process: subprocess.Popen[str], ca_pem: bytes
) -> dict[str, Any]:
    by_path = reviews(names)
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    line = await asyncio.to_thread(stdout.readline)
    if not line:
        raise RuntimeError("the webhook process ended before serving")
    served = json.loads(line)

    async def handler_times(path: str) -> list[float]:
        stdin.write("report\n")
        stdin.flush()
        return list(json.loads(await asyncio.to_thread(stdout.readline)).get(path, []))

    context = ssl.create_default_context(cadata=ca_pem.decode())
    connector = aiohttp.TCPConnector(ssl=context, limit=args.concurrency)
    base = f"https://127.0.0.1:{served['port']}"
    results: dict[str, Any] = {}
    async with aiohttp.ClientSession(connector=connector) as session:
        for label, template in by_path.items():
            path = label.split(" ")[0]
            review = copy.deepcopy(template)
            review["request"]["uid"] = UID_MARK
            # Serialised once: the client's own JSON work would otherwise be in every figure.
            body_template = json.dumps(review)

            async def send(path: str = path, label: str = label, body_template: str = body_template) -> None:
                uid = str(uuid.uuid4())
                async with session.post(
                    base + path,
                    data=body_template.replace(UID_MARK, uid).encode(),
                    headers={"Content-Type": "application/json"},
                ) as response:
                    answer = await response.json(content_type=None)
                    check(label, uid, response.status, answer)

            figures: dict[str, Any] = {}
            for mode, concurrency in (("sequential", 1), ("concurrent", args.concurrency)):
                # Warm: every connection of the mode open (TLS handshakes are not admissions).
                await measure(send, max(args.warmup, concurrency), concurrency)
                await handler_times(path)
                cpu_before = cpu_seconds(process.pid)
                latencies, seconds = await measure(send, args.requests, concurrency)
                cpu = cpu_seconds(process.pid) - cpu_before
                figures[mode] = {
                    "in_flight": concurrency,
                    "round_trip": summary(latencies, seconds),
                    "handler": summary(await handler_times(path), seconds),
                    "webhook_cpu_ms_per_request": round(cpu * 1000 / args.requests, 3),
                }
            results[label] = figures
    return {
        "server": "memop's WebhookServer (uvloop where installed) in its own process, HTTPS on loopback, "
        "RSA 2048 test certificate",
        "client": "aiohttp in the bench process, keep-alive connections (as kube-apiserver keeps them)",
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "requests": args.requests,
        "concurrency": args.concurrency,
        "latency_ms": results,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    serve_parser = sub.add_parser("serve", help="run the webhook server (the bench starts it itself)")
    serve_parser.add_argument("--cert-dir", type=Path, required=True)
    serve_parser.add_argument("--controllers", default="memcached")
    parser.add_argument("--controllers", default="memcached", help="controllers whose webhooks to serve")
    parser.add_argument("--requests", type=int, default=1000, help="requests per path and mode")
    parser.add_argument(
        "--concurrency", type=int, default=50, help="requests in flight in the concurrent mode"
    )
    parser.add_argument("--warmup", type=int, default=50, help="requests per path before measuring")
    args = parser.parse_args(argv)
    if args.command == "serve":
        with contextlib.suppress(KeyboardInterrupt):
            from memop.cli.eventloop import resolve, run  # noqa: PLC0415

            # The loop memop runs on by default (uvloop where installed).
            run(serve(args.cert_dir, [n for n in args.controllers.split(",") if n]), resolve("auto"))
        return 0
    if args.requests < 1 or args.concurrency < 1 or args.warmup < 0:
        parser.error("--requests and --concurrency must be at least 1, --warmup at least 0")
    names = [n.strip() for n in args.controllers.split(",") if n.strip()]
    try:
        if not reviews(names):
            parser.error(f"the controllers {', '.join(names)} declare no webhook")
    except ValueError as error:
        parser.error(str(error))
    certificates = ServingCertificates.generate("memop-bench-webhook")
    with tempfile.TemporaryDirectory(prefix="memop-webhook-bench-") as directory:
        cert_dir = Path(directory)
        (cert_dir / "tls.crt").write_bytes(certificates.cert_pem)
        (cert_dir / "tls.key").write_bytes(certificates.key_pem)
        process = start_webhook(cert_dir, names)
        try:
            print(json.dumps(asyncio.run(bench(args, names, process, certificates.ca_pem)), indent=1))
        except RuntimeError as error:
            print(f"webhook_latency: {error}", file=sys.stderr)
            return 1
        finally:
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
