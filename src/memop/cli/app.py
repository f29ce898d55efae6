"""``python -m memop``: configuration → Kubernetes client → manager with the chosen controllers.

Everything that names the process comes from its project (``RunConfig.project``), never from
memop: the start line ``starting NAME VERSION``, the logger ``NAME``, the user agent
``NAME/VERSION (identity)``, the default Lease, ``memop_build_info{name, version}``; each
controller's Events come from ``<controller>-controller`` and its metrics carry
``controller=<controller>``.

Signals: the first SIGTERM/SIGINT starts a graceful shutdown (in-flight reconciles finish
within the graceful timeout, the lease is released); a second one exits at once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import signal
import socket
import ssl
import sys
from pathlib import Path

from kubernetes_asyncio.client import ApiClient

from memop import __version__
from memop.cli.controllers import leave_out_hint
from memop.cli.options import LEADER_FOR_LIFE, RunConfig
from memop.runtime import logs, metrics
from memop.runtime.client.client import Client
from memop.runtime.client.kubeconfig import (
    KubeConfigError,
    in_cluster_namespace,
    load_configuration,
    running_in_cluster,
)
from memop.runtime.controller.definition import SetupContext
from memop.runtime.leaderelection.leaderforlife import LeaderForLifeConfig
from memop.runtime.leaderelection.lease import LeaderElectionConfig, default_identity
from memop.runtime.manager.authn import tls_context
from memop.runtime.manager.manager import EXIT_FAILED, CertificateSource, Manager, ManagerOptions
from memop.runtime.manager.uninstall import UninstallGuardConfig
from memop.runtime.sharding.membership import ShardingConfig
from memop.runtime.webhook.server import WebhookServerOptions

EXIT_USAGE = 2
# Informers per controller at most (its own kind and two it owns or watches): each holds a
# pooled connection per watched namespace for its watch.
WATCHES_PER_CONTROLLER = 3


def leader_election_config(
    config: RunConfig, identity: str, *, in_cluster: bool | None = None
) -> LeaderElectionConfig | LeaderForLifeConfig | None:
    """The Lease or leader-for-life settings, or None when leader election is off (or skipped
    outside a cluster, as --leader-for-life-outside-cluster asks: see :func:`skips_election`).
    Raises ValueError when incomplete. ``in_cluster`` defaults to :func:`running_in_cluster`."""
    if not config.leader_elect or skips_election(config, in_cluster):
        return None
    namespace = _lease_namespace(config, "--leader-elect")
    if config.leader_election_mode == LEADER_FOR_LIFE:
        return _leader_for_life_config(config, namespace)
    election = LeaderElectionConfig(
        lease_name=config.leader_election_id,
        namespace=namespace,
        identity=identity,
        lease_duration=config.lease_duration,
        renew_deadline=config.renew_deadline,
        retry_period=config.retry_period,
        release_on_cancel=config.release_on_cancel,
    )
    # Here rather than in the elector, which the manager builds after connecting: a bad
    # setting is a usage error, reported before anything starts.
    election.validate()
    return election


def _lease_namespace(config: RunConfig, flag: str, what: str | None = None) -> str:
    """The namespace of the Leases ``flag`` asks for: --leader-election-namespace, else the
    pod's own. Raises ValueError naming ``flag`` (and saying ``what`` it is) when neither is
    known."""
    namespace = config.leader_election_namespace or in_cluster_namespace()
    if not namespace:
        raise ValueError(
            f"--leader-election-namespace is required with {flag} when not running in a cluster"
            + (f" ({what})" if what else "")
        )
    return namespace


def uninstall_guard_config(config: RunConfig, log: logging.Logger) -> UninstallGuardConfig | None:
    """--uninstall-guard's objects, in the pod's namespace; None without the flag, or (with one
    log line) outside a cluster, where there is no install to guard."""
    if not config.uninstall_guard:
        return None
    namespace = in_cluster_namespace()
    if namespace is None:
        log.info("--uninstall-guard ignored: not running in a cluster (no service account namespace)")
        return None
    return UninstallGuardConfig.parse(config.uninstall_guard, namespace)


def sharding_config(config: RunConfig, identity: str) -> ShardingConfig | None:
    """The sharding settings with --sharding, else None. Raises ValueError when incomplete."""
    if not config.sharding:
        return None
    namespace = _lease_namespace(config, "--sharding", "the namespace of the replicas' Leases")
    sharding = ShardingConfig(
        group=config.sharding_group,
        namespace=namespace,
        identity=identity,
        shards=config.shards,
        lease_duration=config.lease_duration,
        renew_deadline=config.renew_deadline,
        retry_period=config.retry_period,
        # One round: replicas started together see each other before any takes a shard.
        initial_join_delay=config.retry_period,
    )
    sharding.validate()
    return sharding


def skips_election(config: RunConfig, in_cluster: bool | None = None) -> bool:
    """Whether leader for life is skipped: no Pod to own the lock, outside a cluster, and
    --leader-for-life-outside-cluster given (as operator-lib's Become skips it outside a
    cluster). Raises ValueError when there is no Pod and skipping is not allowed: never
    without the flag, never in a cluster."""
    if not config.leader_elect or config.leader_election_mode != LEADER_FOR_LIFE or config.pod_name:
        return False
    if running_in_cluster() if in_cluster is None else in_cluster:
        raise ValueError(
            "leader-for-life election needs this replica's Pod name in POD_NAME (--pod-name): set it from "
            "the downward API (fieldRef metadata.name), as manifests/leader-for-life does"
        )
    if not config.leader_for_life_outside_cluster:
        raise ValueError(
            "leader-for-life election needs POD_NAME (--pod-name), the Pod that owns the lock; outside a "
            "cluster, --leader-for-life-outside-cluster runs without election"
        )
    return True


def _leader_for_life_config(config: RunConfig, namespace: str) -> LeaderForLifeConfig:
    assert config.pod_name is not None, "skips_election() returned False"
    election = LeaderForLifeConfig(
        lock_name=config.leader_election_id,
        namespace=namespace,
        pod_name=config.pod_name,
        initial_backoff=min(1.0, config.leader_for_life_max_backoff),
        max_backoff=config.leader_for_life_max_backoff,
    )
    election.validate()
    return election


def _install_signal_handlers(stop: asyncio.Event, log: logging.Logger) -> None:
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            log.warning("second signal %s, exiting at once", signal.Signals(signum).name)
            os._exit(1)
        log.info("received %s, shutting down gracefully", signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)


def webhook_namespace(config: RunConfig) -> str | None:
    """The namespace of the webhook's Service and Secret in self-managed mode (None otherwise):
    --webhook-namespace, else the pod's own. Raises ValueError when neither is known."""
    if config.webhook_certs != "self-managed" or not config.enable_webhooks:
        return None
    namespace = config.webhook_namespace or in_cluster_namespace()
    if not namespace:
        raise ValueError(
            "--webhook-namespace is required with --webhook-certs=self-managed when not running in a "
            "cluster (the namespace of the webhook's Service and Secret)"
        )
    return namespace


def self_managed_certificates(config: RunConfig, client: Client, namespace: str) -> CertificateSource:
    """memop's own webhook certificate for the running controllers' webhooks: for the project's
    webhook Service, kept in its Secret, set into the caBundle of the webhook configurations and
    converted CRDs `memop manifests` writes for them (the install's name prefix included)."""
    from memop.manifests.certmanager import SECRET  # noqa: PLC0415
    from memop.manifests.webhooks import (  # noqa: PLC0415  (the SDK's names, only when asked)
        MUTATING_CONFIGURATION,
        SERVICE,
        VALIDATING_CONFIGURATION,
    )
    from memop.runtime.webhook.selfmanaged import SelfManagedCertificates  # noqa: PLC0415  (cryptography)

    prefix = f"{config.project.name}-"
    definitions = [config.project.controller(name) for name in config.controllers]
    hooks = [hook for definition in definitions for hook in definition.webhooks]
    conversions = [c for definition in definitions for c in definition.conversions]
    ips, names = [], []
    for name in config.webhook_cert_extra_names:
        try:
            ipaddress.ip_address(name)
        except ValueError:
            names.append(name)
        else:
            ips.append(name)
    return SelfManagedCertificates(
        client,
        namespace=namespace,
        service=config.webhook_service or prefix + SERVICE,
        secret=config.webhook_secret or prefix + SECRET,
        cert_dir=config.webhook_cert_dir,
        validating_webhook_configurations=(
            [prefix + VALIDATING_CONFIGURATION] if any(h.validator for h in hooks) else []
        ),
        mutating_webhook_configurations=[prefix + MUTATING_CONFIGURATION]
        if any(h.defaulter for h in hooks)
        else [],
        crds=[f"{c.plural}.{c.group}" for c in conversions],
        extra_dns_names=names,
        extra_ips=ips,
    )


async def run(config: RunConfig, stop: asyncio.Event | None = None) -> int:
    """Run the operator until stopped; returns the process exit code."""
    project = config.project
    log = logging.getLogger(project.name)
    identity = default_identity()
    try:
        election = leader_election_config(config, identity)
        sharding = sharding_config(config, identity)
        certificates_namespace = webhook_namespace(config)
    except ValueError as error:
        # A usage error like those of memop.cli.options: one plain line, whatever the log format.
        print(f"{config.prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    logs.configure(config.log_level, config.log_format)
    metrics.set_build_info(project.version, name=project.name)
    if config.leader_elect and election is None:
        log.info(
            "not running in a cluster and no POD_NAME: leader-for-life election skipped "
            "(--leader-for-life-outside-cluster), this process reconciles alone"
        )
    try:
        configuration = await load_configuration(config.kubeconfig, origin=config.kubeconfig_origin)
    except KubeConfigError as error:
        log.error("%s", error)
        return EXIT_FAILED
    controllers = config.controllers
    # Every watch holds a pooled connection for its lifetime: size the pool so watches never
    # starve the reconcilers' requests.
    watches = WATCHES_PER_CONTROLLER * len(controllers) * max(1, len(config.namespaces))
    if sharding is not None:
        watches *= sharding.shards  # a reflector per shard owned: all of them, alone
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, watches + 64)
    if stop is None:
        stop = asyncio.Event()
        _install_signal_handlers(stop, log)
    log.info(
        "starting %s %s",
        project.name,
        project.version,
        extra={
            "memop": __version__,
            "identity": identity,
            "namespaces": ",".join(config.namespaces) or "<all>",
            "controllers": ",".join(controllers),
            "leaderElection": config.leader_election_mode if election else False,
            "sharding": f"{sharding.group} ({sharding.shards} shards)" if sharding else False,
            "maxConcurrentReconciles": config.max_concurrent_reconciles,
            "eventLoop": config.event_loop,
        },
    )
    metrics_tls = None
    if config.metrics_secure and config.metrics_address is not None:
        try:
            metrics_tls = tls_context(Path(config.metrics_cert_dir) if config.metrics_cert_dir else None)
        except (OSError, ssl.SSLError) as error:
            log.error("cannot serve metrics over HTTPS: %s", error)
            return EXIT_FAILED
    async with ApiClient(configuration) as api_client:
        client = Client(
            api_client,
            user_agent=f"{project.name}/{project.version} ({identity})",
            qps=config.kube_api_qps,
            burst=config.kube_api_burst,
        )
        manager = Manager(
            client,
            ManagerOptions(
                namespaces=config.namespaces,
                leader_election=election,
                sharding=sharding,
                probe_address=config.probe_address,
                metrics_address=config.metrics_address,
                metrics_tls=metrics_tls,
                metrics_auth=config.metrics_secure,
                graceful_shutdown_timeout=config.graceful_shutdown_timeout,
                sync_period=config.sync_period,
                event_qps=config.event_qps,
                event_burst=config.event_burst,
                watch_batch_window=config.watch_batch_window,
                webhook=WebhookServerOptions(
                    host=config.webhook_host, port=config.webhook_port, cert_dir=Path(config.webhook_cert_dir)
                ),
                webhook_certificates=(
                    self_managed_certificates(config, client, certificates_namespace)
                    if certificates_namespace is not None
                    else None
                ),
                uninstall_guard=uninstall_guard_config(config, log),
                # A project of one controller cannot leave it out: installing its CRD is the advice.
                leave_out_hint=(
                    (lambda name: leave_out_hint(config.prog, controllers, name))
                    if len(project.controllers) > 1
                    else None
                ),
            ),
        )
        for name in controllers:
            definition = project.controller(name)
            context = SetupContext(
                manager.cache,
                client,
                manager.event_recorder(f"{name}-controller", host=socket.gethostname()),
                config.max_concurrent_reconciles,
                field_manager=project.name,
            )
            manager.add(definition.setup(context))
        try:
            for name in controllers if config.enable_webhooks else ():
                definition = project.controller(name)
                manager.add_webhooks(definition.webhooks, definition.conversions)
        except ValueError as error:  # two controllers declare the same webhook path or kind
            log.error("cannot serve the %s controller's webhooks: %s", name, error)
            await client.close()
            return EXIT_FAILED
        try:
            return await manager.run(stop)
        finally:
            await client.close()
