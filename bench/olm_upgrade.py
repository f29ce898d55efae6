"""An OLM-style upgrade on the in-memory API server: Memcacheds created at ``v1alpha1`` by the old
bundle are served at both versions after the upgrade, and converge.

Run from the repository root as ``python bench/olm_upgrade.py`` (``--crs 1000 --namespaces 4``);
prints one JSON object.

Processes: the in-memory API server (:class:`memop.testing.apiserver.server.ApiServer`, HTTPS) runs in the
bench's own process, so the bench reads every webhook call it made
(:attr:`~memop.testing.apiserver.server.ApiServer.webhook_calls`) and every request it answered (its
request log); it runs no simulated kube-controller-manager (no ReplicaSets or pods: convergence
is memop's part, as in bench/converge.py). The old and the new operator are ``python -m memop
--controllers memcached --leader-elect`` processes watching all namespaces (OLM installs an
operator with a conversion webhook in AllNamespaces mode only), one replica each.

The phases, each timed (``seconds``):

1. ``old_converge``: the old bundle. The Memcached CRD as it was before ``v1beta1`` (only the
   ``v1alpha1`` version of :func:`memop.memcached.crd.crd`, no conversion) and memop with
   ``--no-enable-webhooks`` (the old operator had none). The bench creates ``--crs`` Memcacheds
   of size 1 at ``v1alpha1`` over ``--namespaces`` namespaces; the phase ends when every one has
   its Deployment at ``spec.size`` and a status for its generation (bench/converge.py's
   Tracker), and the old operator has nothing queued.
2. ``upgrade``: what OLM does for a CSV that ``replaces`` the old one, in OLM's order. The
   InstallPlan applies the bundle's CRD (both versions, ``v1alpha1`` still the stored one, no
   conversion stanza: OLM writes it); then the CSV's install strategy updates the operator's
   Deployment and, without waiting for it, writes the webhooks of its ``webhookdefinitions``:
   the ValidatingWebhookConfiguration (as ``memop manifests`` generates it, with a ``url``
   clientConfig on loopback instead of the Service) and the CRD's ``spec.conversion``
   (``strategy: Webhook``, ``/convert``, the CA in ``caBundle``). The Deployment's rolling update
   (maxSurge 1, maxUnavailable 0) starts the new operator beside the old, waits until it is
   ready, then stops the old one (SIGTERM: it releases the Lease). The new operator serves
   webhooks (``--webhook-certs=files``: certificates for 127.0.0.1 written into
   ``--webhook-cert-dir`` before it starts, as OLM mounts the ones it makes) on a port chosen
   before the CSV is written, as the Service's is. Until it is ready no one answers ``/convert``:
   ``conversion_unserved`` is that window, in which a request at ``v1beta1`` fails (a real
   cluster has the same one); requests at ``v1alpha1``, the stored version, need no conversion,
   so the old operator works on through it. The phase ends when the old operator has exited.
3. ``converge_after``: until the new operator has taken the Lease (the old one released it; the
   new one tries again every ``--leader-elect-retry-period``, 2 s) and reconciled every
   Memcached with nothing left queued, every one still converged. Then every object must be
   served at both versions: a list at ``v1alpha1`` and one at ``v1beta1`` (``list_seconds``
   each), each object the same in both (uid, resourceVersion, generation, labels, finalizers,
   owners, status, spec) but for ``containerPort``, which ``v1beta1`` has where ``v1alpha1`` has
   the annotation ``cache.example.com/v1beta1-container-port`` (absent both: port 11211);
   ``served.after_upgrade.mismatches`` must be 0.
4. ``changes_converged``: ``--change-fraction`` of them (a tenth) get a new size (2) and
   ``containerPort`` through ``v1beta1`` (merge patches); the phase ends when each has its
   Deployment at the new size with the new port, and a status for its generation. Then the two
   lists again (``served.after_changes``), and each change read back at ``v1beta1``;
   ``lost_changes`` (changes not served as made, or whose Deployment never followed) must be 0.

Figures besides: ``webhook_calls`` per phase as the API server made them (conversion calls,
the objects they carried, failures; admission calls, denials, failures), and those of the
bench's own reads apart (``bench_checks``). The in-memory server keeps the conversions it got
in a cache keyed by the object's content (:mod:`memop.testing.apiserver.conversionwebhooks`), where
kube-apiserver calls the webhook on every read in the other version: its counts are a lower
bound of a real server's (a second list of unchanged objects at ``v1beta1`` costs it no call).
memop's CPU seconds (``/proc/<pid>/stat``) per phase and its resident memory at the end of
the last (``rss_mb``; the old operator's last figure is taken just before its SIGTERM); the new
operator's requests (``new_operator_requests``, from the server's log) to take over and for the
changes; its warning and error log lines (``error_log_lines`` must be 0); ``stored_versions``
(must stay ``["v1alpha1"]``); the machine (``platform``, ``cpus``) and the server.

Anything that does not hold (a mismatch, a lost change, a conversion failure, an error logged
by the new operator, a phase not done within ``--timeout``) ends the run with exit status 1 and
one line on stderr (the figures, when there are any, still on stdout); bad options exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from converge import (
    Key,
    OneLineParser,
    ProcStats,
    Tracker,
    create_memcacheds,
    create_namespaces,
    log_summary,
    plan,
    proc_stats,
    run_bounded,
    wait_idle,
)
from kubernetes_asyncio.client import ApiClient

from memop.builtin import PROJECT
from memop.memcached import api
from memop.memcached.crd import crd as memcached_crd
from memop.runtime.client.client import Client
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS
from memop.testing.apiserver.server import ApiServer
from memop.testing.apiserver.webhookclient import WebhookCall
from memop.testing.operator import install_crd
from memop.testing.process import MemopProcess, free_port
from memop.testing.tls import ServingCertificates
from memop.testing.wait import wait_for
from memop.testing.webhooks import install_webhooks

CRD_NAME = f"{api.PLURAL}.{api.GROUP}"
BENCH_AGENT = "memop-olm-bench/1"
LEASE_NAMESPACE = "default"
CHANGED_SIZE = 2
FIRST_CHANGED_PORT = 12000
PHASES = ("old_converge", "upgrade", "converge_after", "changes_converged")


class Failed(Exception):
    """Something the bench checks did not hold (one line, for stderr)."""


# --- the two bundles ----------------------------------------------------------------------------


def old_crd() -> dict[str, Any]:
    """The Memcached CRD of the old bundle: v1alpha1 alone, no conversion."""
    crd = memcached_crd()
    crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] == api.VERSION]
    crd["spec"].pop("conversion", None)
    return crd


def new_crd() -> dict[str, Any]:
    """The new bundle's CRD as the InstallPlan applies it: both versions, no conversion stanza
    (OLM writes that from the CSV's webhookdefinitions)."""
    crd = memcached_crd()
    crd["spec"].pop("conversion", None)
    return crd


def write_serving_certificates(cert_dir: Path) -> bytes:
    """tls.crt and tls.key for 127.0.0.1 in ``cert_dir`` (as OLM mounts its own); the CA (PEM)
    for the clientConfigs."""
    certificates = ServingCertificates.generate("memop-olm-webhook")
    cert_dir.mkdir(parents=True, exist_ok=True)
    (cert_dir / "tls.crt").write_bytes(certificates.cert_pem)
    key = cert_dir / "tls.key"
    key.write_bytes(certificates.key_pem)
    key.chmod(0o600)
    return certificates.ca_pem


def operator_args(workers: int, extra: Sequence[str]) -> list[str]:
    return [
        "--controllers=memcached",
        f"--max-concurrent-reconciles={workers}",
        "--leader-elect",
        f"--leader-election-namespace={LEASE_NAMESPACE}",
        *extra,
    ]


# --- what the bench checks ----------------------------------------------------------------------


def expected_port(hub: dict[str, Any]) -> int | None:
    """The v1beta1 containerPort a v1alpha1 object converts to (None: absent, 11211 is meant)."""
    annotations = (hub.get("metadata") or {}).get("annotations") or {}
    return api.integer_from_annotation(annotations.get(api.CONTAINER_PORT_ANNOTATION))


def mismatch(hub: dict[str, Any], spoke: dict[str, Any]) -> str | None:
    """Why the v1beta1 ``spoke`` is not the v1alpha1 ``hub`` served at the other version (None:
    it is)."""
    if hub.get("apiVersion") != api.API_VERSION or spoke.get("apiVersion") != api.API_VERSION_V1BETA1:
        return f"apiVersions {hub.get('apiVersion')} and {spoke.get('apiVersion')}"
    hub_meta, spoke_meta = hub.get("metadata") or {}, spoke.get("metadata") or {}
    for field in ("uid", "resourceVersion", "generation", "labels", "finalizers", "ownerReferences"):
        if hub_meta.get(field) != spoke_meta.get(field):
            return f"metadata.{field}: {hub_meta.get(field)!r} != {spoke_meta.get(field)!r}"
    hub_annotations = dict(hub_meta.get("annotations") or {})
    hub_annotations.pop(api.CONTAINER_PORT_ANNOTATION, None)
    if hub_annotations != (spoke_meta.get("annotations") or {}):
        return f"metadata.annotations: {hub_annotations!r} != {spoke_meta.get('annotations')!r}"
    spoke_spec = dict(spoke.get("spec") or {})
    port = spoke_spec.pop("containerPort", None)
    if spoke_spec != hub.get("spec"):
        return f"spec: {hub.get('spec')!r} != {spoke_spec!r}"
    want = expected_port(hub)
    if port != want and not (want is None and port == api.DEFAULT_CONTAINER_PORT):
        return f"spec.containerPort {port!r}, annotation says {want!r}"
    if hub.get("status") != spoke.get("status"):
        return "status differs"
    return None


def by_key(items: Iterable[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    return {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in items}


async def served_at_both(client: Client, keys: Sequence[Key]) -> dict[str, Any]:
    """List every Memcached at v1alpha1 and at v1beta1 and compare them object by object."""
    started = time.monotonic()
    hubs = by_key((await client.list(api.MEMCACHEDS))["items"])
    listed = time.monotonic()
    spokes = by_key((await client.list(api.MEMCACHEDS_V1BETA1))["items"])
    seconds = {api.VERSION: round(listed - started, 3), api.V1BETA1: round(time.monotonic() - listed, 3)}
    problems: list[str] = []
    for key in keys:
        hub, spoke = hubs.get(key), spokes.get(key)
        if hub is None or spoke is None:
            problems.append(f"{key[0]}/{key[1]}: not listed at {api.VERSION if hub is None else api.V1BETA1}")
            continue
        why = mismatch(hub, spoke)
        if why is not None:
            problems.append(f"{key[0]}/{key[1]}: {why}")
    return {
        api.VERSION: len(hubs),
        api.V1BETA1: len(spokes),
        "with_port_annotation": sum(1 for hub in hubs.values() if expected_port(hub) is not None),
        "mismatches": len(problems),
        "first_mismatches": problems[:3],
        "list_seconds": seconds,
    }


def deployment_port(deployment: dict[str, Any]) -> int | None:
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")
    ports = (containers or [{}])[0].get("ports") or []
    return int(ports[0]["containerPort"]) if ports else None


def ports_not_followed(tracker: Tracker, wanted: dict[Key, int]) -> list[Key]:
    """The keys whose Deployment (as the bench's watch shows it) lacks the wanted port."""
    late = []
    for key, port in wanted.items():
        deployment = tracker.deployments.get(key[1], key[0])
        if deployment is None or deployment_port(deployment) != port:
            late.append(key)
    return late


# --- what the server saw ------------------------------------------------------------------------


def call_failed(call: WebhookCall) -> bool:
    """No answer, or a conversion whose result is not Success (a denial is an answer)."""
    if call.error is not None:
        return True
    response = (call.response or {}).get("response") or {}
    return call.kind == "conversion" and (response.get("result") or {}).get("status") != "Success"


def webhook_figures(server: ApiServer, start: int, end: int) -> dict[str, int]:
    """The API server's webhook calls ``start..end``: conversion calls, the objects they carried
    and their failures; admission calls, denials and failures (see :func:`call_failed`)."""
    out: Counter[str] = Counter(
        conversion_calls=0, conversion_objects=0, conversion_failures=0,
        admission_calls=0, admission_denied=0, admission_failures=0,
    )  # fmt: skip
    for call in server.webhook_calls.calls[start:end]:
        if call.kind == "conversion":
            out["conversion_calls"] += 1
            out["conversion_objects"] += len((call.request.get("request") or {}).get("objects") or [])
            out["conversion_failures"] += call_failed(call)
        else:
            out["admission_calls"] += 1
            out["admission_failures"] += call_failed(call)
            response = (call.response or {}).get("response") or {}
            out["admission_denied"] += not call_failed(call) and response.get("allowed") is not True
    return dict(out)


def requests_of(server: ApiServer, user_agent: str | None, start: int, end: int) -> dict[str, int]:
    """``verb resource[/subresource]`` -> count, for the requests ``start..end`` of one client."""
    counts: Counter[str] = Counter()
    for record in server.log.records[start:end]:
        if record.resource_request and record.user_agent == user_agent:
            sub = f"/{record.subresource}" if record.subresource else ""
            counts[f"{record.verb} {record.resource}{sub}"] += 1
    return dict(sorted(counts.items()))


@dataclasses.dataclass
class Marks:
    """Where each phase ends: the time, and the lengths of the server's call and request logs."""

    server: ApiServer
    times: dict[str, float] = dataclasses.field(default_factory=dict)
    calls: dict[str, int] = dataclasses.field(default_factory=dict)
    requests: dict[str, int] = dataclasses.field(default_factory=dict)

    def mark(self, name: str) -> None:
        self.times[name] = time.monotonic()
        self.calls[name] = len(self.server.webhook_calls.calls)
        self.requests[name] = len(self.server.log.records)


def cpu_and_rss(stats: Sequence[ProcStats]) -> tuple[list[float], float]:
    """CPU seconds between successive samples, and the resident memory at the last."""
    return [round(b.cpu_seconds - a.cpu_seconds, 2) for a, b in itertools.pairwise(stats)], stats[-1].rss_mb


# --- the run ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], list[str]]:
    """The figures, and what did not hold (empty: everything did)."""
    namespaces = [f"olm-{i}" for i in range(args.namespaces)]
    keys = plan(args.crs, namespaces)
    changed = keys[:: max(1, round(1 / args.change_fraction))]
    ports = {key: FIRST_CHANGED_PORT + i for i, key in enumerate(changed)}
    server = ApiServer(tls=True, history_size=max(100_000, 20 * args.crs))
    await server.start()
    kubeconfig = workdir / "kubeconfig"
    server.write_kubeconfig(kubeconfig)
    processes: list[MemopProcess] = []
    tracker: Tracker | None = None
    try:
        async with ApiClient(server.client_configuration()) as api_client:
            client = Client(api_client, user_agent=BENCH_AGENT)
            marks = Marks(server)

            # 1. The old bundle.
            await install_crd(client, old_crd())
            await create_namespaces(client, namespaces)
            tracker = Tracker(client)
            await tracker.start()
            old = MemopProcess(kubeconfig, operator_args(args.workers, ["--no-enable-webhooks"]))
            processes.append(old)
            await old.start()
            await stage("the old operator getting ready", old.wait_ready(timeout=args.timeout), args.timeout)
            old_stats = [proc_stats(old.pid)]
            tracker.expect(dict.fromkeys(keys, 1))
            marks.mark("start")
            await create_memcacheds(client, keys, 1, args.create_concurrency)
            await stage("the old operator converging", tracker.all_converged.wait(), args.timeout)
            await stage("the old operator going idle", wait_idle(old, args.crs, args.timeout), args.timeout)
            marks.mark("old_converge")
            old_stats.append(proc_stats(old.pid))

            # 2. The upgrade, in OLM's order: CRD (InstallPlan), then the CSV: Deployment
            # updated, webhooks and conversion written, the rolling update.
            await install_crd(client, new_crd())
            port = free_port()  # known before it starts, as a Service's port is when OLM writes the webhooks
            base_url = f"https://127.0.0.1:{port}"
            ca_pem = write_serving_certificates(workdir / "serving-certs")
            new = MemopProcess(
                kubeconfig,
                operator_args(
                    args.workers,
                    [
                        "--enable-webhooks",
                        "--webhook-certs=files",
                        "--webhook-host=127.0.0.1",
                        f"--webhook-port={port}",
                        f"--webhook-cert-dir={workdir / 'serving-certs'}",
                    ],
                ),
                webhooks=True,
            )
            processes.append(new)
            await new.start()
            # What the CSV's webhookdefinitions make OLM write, on a loopback URL.
            await install_webhooks(client, PROJECT, base_url, ca_pem, controllers=["memcached"])
            conversion_written = time.monotonic()
            new_stats = [proc_stats(new.pid)]
            await stage("the new operator getting ready", new.wait_ready(timeout=args.timeout), args.timeout)
            await stage(
                "the new operator serving webhooks",
                new.wait_log(lambda r: str(r.get("msg", "")).startswith("serving webhooks"), args.timeout),
                args.timeout,
            )
            conversion_served = time.monotonic()
            old_stats.append(proc_stats(old.pid))
            old_exit = await old.terminate(timeout=args.timeout)
            marks.mark("upgrade")
            new_stats.append(proc_stats(new.pid))

            # 3. The new operator takes over.
            await stage("the new operator reconciling", wait_idle(new, args.crs, args.timeout), args.timeout)
            tracker.expect(dict.fromkeys(keys, 1))
            await stage("every Memcached converged", tracker.all_converged.wait(), args.timeout)
            marks.mark("converge_after")
            new_stats.append(proc_stats(new.pid))
            after_upgrade = await served_at_both(client, keys)
            marks.mark("checked")

            # 4. Changes through v1beta1.
            tracker.expect({key: CHANGED_SIZE if key in ports else 1 for key in keys})

            async def change(key: Key) -> None:
                patch = {"spec": {"size": CHANGED_SIZE, "containerPort": ports[key]}}
                await client.patch(api.MEMCACHEDS_V1BETA1, key[1], patch, key[0])

            await run_bounded(args.create_concurrency, changed, change)
            lost: list[Key] = []
            try:
                await stage("the changes converging", tracker.all_converged.wait(), args.timeout)
                await stage(
                    "the Deployments' ports following",
                    wait_for(
                        lambda: not ports_not_followed(tracker, ports), timeout=args.timeout, interval=0.05
                    ),
                    args.timeout,
                )
            except Failed:
                lost = sorted(
                    set(ports_not_followed(tracker, ports)) | (set(changed) - set(tracker.converged_at))
                )
                if not lost:
                    raise
            marks.mark("changes_converged")
            new_stats.append(proc_stats(new.pid))
            after_changes = await served_at_both(client, keys)
            for key in changed:
                spoke = await client.get(api.MEMCACHEDS_V1BETA1, key[1], key[0])
                if (spoke["spec"].get("size"), spoke["spec"].get("containerPort")) != (
                    CHANGED_SIZE,
                    ports[key],
                ):
                    lost.append(key)
            marks.mark("checked_again")
            crd = await client.get(CUSTOM_RESOURCE_DEFINITIONS, CRD_NAME)
            new_exited = new.returncode
    finally:
        if tracker is not None:
            await tracker.stop()
        for process in reversed(processes):
            await process.stop()
        await server.stop()

    seconds = {
        "old_converge": marks.times["old_converge"] - marks.times["start"],
        "upgrade": marks.times["upgrade"] - marks.times["old_converge"],
        "conversion_unserved": conversion_served - conversion_written,
        "converge_after": marks.times["converge_after"] - marks.times["upgrade"],
        "changes_converged": marks.times["changes_converged"] - marks.times["checked"],
    }
    boundaries = [("old_converge", "start"), ("upgrade", "old_converge"),
                  ("converge_after", "upgrade"), ("changes_converged", "checked")]  # fmt: skip
    calls: dict[str, Any] = {
        phase: webhook_figures(server, marks.calls[begin], marks.calls[phase]) for phase, begin in boundaries
    }
    # The bench's own reads: the lists at both versions after the upgrade, and after the
    # changes the lists and a get at v1beta1 of each changed object.
    calls["bench_checks"] = {
        "after_upgrade": webhook_figures(server, marks.calls["converge_after"], marks.calls["checked"]),
        "after_changes": webhook_figures(
            server, marks.calls["changes_converged"], marks.calls["checked_again"]
        ),
    }
    old_cpu, old_rss = cpu_and_rss(old_stats)
    new_cpu, new_rss = cpu_and_rss(new_stats)
    new_agent = new.user_agent()
    new_errors = sum(1 for r in new.records if r.get("level") == "error")
    stored = (crd.get("status") or {}).get("storedVersions")
    lost_names = sorted({f"{ns}/{name}" for ns, name in lost})
    report: dict[str, Any] = {
        "benchmark": "olm_upgrade",
        "crs": args.crs,
        "namespaces": args.namespaces,
        "changed": len(changed),
        "server": "in-memory API server (memop.testing, HTTPS, in the bench's process; "
        "no simulated kube-controller-manager)",
        "order": "InstallPlan: CRD with both versions; CSV: webhook configuration and CRD conversion "
        "written, new operator started beside the old, old stopped once the new is ready",
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "served": {"after_upgrade": after_upgrade, "after_changes": after_changes},
        "lost_changes": len(lost_names),
        "stored_versions": stored,
        "webhook_calls": calls,
        "old_operator": {
            "cpu_seconds": dict(zip(("old_converge", "upgrade"), old_cpu, strict=True)),
            "rss_mb": old_rss,
            "exit_code": old_exit,
            "warnings_and_errors": log_summary(old),
        },
        "new_operator": {
            "cpu_seconds": dict(
                zip(("upgrade", "converge_after", "changes_converged"), new_cpu, strict=True)
            ),
            "rss_mb": new_rss,
            "peak_rss_mb": new_stats[-1].peak_rss_mb,
            "error_log_lines": new_errors,
            "warnings_and_errors": log_summary(new),
        },
        "new_operator_requests": {
            "converge_after": requests_of(
                server, new_agent, marks.requests["upgrade"], marks.requests["converge_after"]
            ),
            "changes_converged": requests_of(
                server, new_agent, marks.requests["checked"], marks.requests["changes_converged"]
            ),
        },
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
    }
    problems = []
    for when, figures in report["served"].items():
        if figures["mismatches"]:
            problems.append(
                f"{figures['mismatches']} object(s) not served alike {when}: {figures['first_mismatches'][0]}"
            )
    if lost_names:
        problems.append(f"{len(lost_names)} change(s) lost: {', '.join(lost_names[:3])}")
    failures = sum(1 for call in server.webhook_calls.calls if call_failed(call))
    if failures:
        problems.append(f"{failures} webhook call(s) failed")
    if new_errors:
        problems.append(f"the new operator logged {new_errors} error line(s): {log_summary(new)}")
    if new_exited is not None:
        problems.append(f"the new operator exited with {new_exited}")
    if old_exit != 0:
        problems.append(f"the old operator exited with {old_exit} on SIGTERM")
    if stored != [api.VERSION]:
        problems.append(f"storedVersions is {stored}, not [{api.VERSION}]")
    return report, problems


async def stage(what: str, waiting: Any, timeout: float) -> Any:
    """Await ``waiting`` for at most ``timeout`` seconds; Failed naming ``what`` (and the first
    line of the error) when it does not finish, or fails as a wait does."""
    try:
        return await asyncio.wait_for(waiting, timeout)
    except TimeoutError:
        raise Failed(f"{what}: not done within {timeout:g} s") from None
    except AssertionError as error:  # a WaitTimeout, or a memop process that exited
        raise Failed(
            f"{what}: {str(error).strip().splitlines()[0] if str(error).strip() else 'failed'}"
        ) from None


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--crs", type=int, default=1000, help="Memcacheds the old bundle creates (default 1000)"
    )
    parser.add_argument("--namespaces", type=int, default=4, help="namespaces they spread over (default 4)")
    parser.add_argument(
        "--change-fraction",
        type=float,
        default=0.1,
        help="the share of them changed through v1beta1 after the upgrade (default 0.1)",
    )
    parser.add_argument(
        "--workers", type=int, default=4, help="memop's --max-concurrent-reconciles (default 4)"
    )
    parser.add_argument(
        "--create-concurrency", type=int, default=16, help="the bench's concurrent writes (default 16)"
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds each phase may take (default 300)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.crs < 1 or args.namespaces < 1 or args.workers < 1 or args.create_concurrency < 1:
        parser.error("--crs, --namespaces, --workers and --create-concurrency must be at least 1")
    if not 0 < args.change_fraction <= 1:
        parser.error(f"--change-fraction must be more than 0 and at most 1, got {args.change_fraction:g}")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    with tempfile.TemporaryDirectory(prefix="memop-olm-upgrade-") as tmp:
        try:
            report, problems = asyncio.run(run(args, Path(tmp)))
        except Failed as failed:
            print(f"olm_upgrade: {failed}", file=sys.stderr)
            return 1
    print(json.dumps(report))
    if problems:
        print(f"olm_upgrade: {'; '.join(problems)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
