"""The manager: one process's client, cache, controllers, leader election and probe server.

Start order, as controller-runtime: probe/metrics server → webhook server (when a controller
declares webhooks or conversions; every replica, leader or not, sharded or not: the API server
calls any of them, and a conversion webhook must answer before the cache can list its kind)
→ cache (every replica, so a standby is warm and ready) → leader election → controllers
(leader only) → until stopped. Stop order is the reverse: controllers finish in-flight
reconciles within the graceful timeout, the lease is released (so a standby takes over within
one retry period), event recorders flush, the cache stops, then the webhook server (last to
go, as controller-runtime's, so conversions are answered while anything still reads) and the
probe server.

Sharded (``ManagerOptions.sharding``), there is no leader: every replica runs its controllers
and a :class:`~memop.runtime.sharding.membership.ShardMembership` hands it shards of the ring;
the cache watches only those shards and each controller's gate reconciles only their objects.
Losing membership is handled as losing the lease. On shutdown the replica leaves the group
once its controllers have stopped, so the others take its shards over at once. The sharded
parts live in :mod:`memop.runtime.manager.shards`.

Losing the lease is different from being asked to stop: reconciling stops at once (in-flight
reconciles are cancelled, never finished, since another replica may already lead) and
:meth:`Manager.run` returns a non-zero exit code so the container restarts as a standby. That
holds during a graceful shutdown too: in-flight reconciles get the graceful timeout only for
as long as the lease is still ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memop.runtime.cache.cache import DEFAULT_WATCH_BATCH_WINDOW, Cache
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, Forbidden, NotFound, TransportError
from memop.runtime.client.resources import Resource, is_builtin_group
from memop.runtime.controller.controller import Controller
from memop.runtime.leaderelection.leaderforlife import LeaderForLife, LeaderForLifeConfig
from memop.runtime.leaderelection.lease import LeaderElectionConfig, LeaderElector
from memop.runtime.manager.authn import MetricsAuthorizer
from memop.runtime.manager.events import EventRecorder
from memop.runtime.manager.server import Address, ProbeServer
from memop.runtime.manager.shards import ShardWork, choose_shard_filtering, follow_shard_filtering
from memop.runtime.manager.uninstall import GUARD, POLL_SECONDS, UninstallGuard, UninstallGuardConfig
from memop.runtime.sharding.membership import ShardingConfig, ShardMembership
from memop.runtime.sharding.ring import Ring
from memop.runtime.util.clock import Clock, RealClock
from memop.runtime.util.tasks import cancel_and_wait
from memop.runtime.webhook.declarations import AdmissionWebhook, Conversion
from memop.runtime.webhook.server import CertificateError, WebhookServer, WebhookServerOptions
from memop.runtime.workqueue.workqueue import AllQueues

log = logging.getLogger("memop.manager")

EXIT_OK = 0
EXIT_FAILED = 1
# The uninstall guard's release, after the graceful timeout's budget (30 s by default): within
# the 45 s termination grace period of memop's manifests.
RELEASE_SECONDS = 10.0
# How long an uninstalling replica that was not leading waits for its cache before reconciling.
UNINSTALL_SYNC_SECONDS = 5.0
# How long a replica stopped outside an uninstall still watches for one to begin.
UNINSTALL_SETTLE_SECONDS = 5.0


@dataclass
class ManagerOptions:
    """Everything a manager is configured with; the CLI fills it from flags and environment.

    namespaces: the namespaces to watch; empty means all (cluster-wide watches).
    leader_election: a Lease config, a leader-for-life config (a ConfigMap lock owned by the
        replica's Pod), or None to reconcile without electing a leader (one replica only!).
    sharding: split the controllers' objects between the replicas that share this config's
        group (memop.runtime.sharding) instead of electing a leader; not with leader_election.
    probe_address / metrics_address: where /healthz+/readyz and /metrics listen; None
        disables. Equal addresses share one server.
    metrics_tls: serve /metrics over HTTPS with this context (``--metrics-secure``).
    metrics_auth: let only callers a TokenReview + SubjectAccessReview allow read /metrics.
    graceful_shutdown_timeout: seconds in-flight reconciles get to finish on SIGTERM (30 s,
        controller-runtime's default), shorter than the pod's terminationGracePeriodSeconds. On
        an uninstall (``uninstall_guard``) the wait for finalization comes out of it too.
    sync_period: seconds between replays of every cached object to the controllers (10 h,
        controller-runtime's default); None disables.
    cache_sync_timeout: seconds to wait for the first LIST of every watch before the
        controllers start anyway (reflectors keep retrying); 120 s like controller-runtime.
    watch_batch_window: seconds; when a watch's events come faster than one per window (a
        burst), the watch is read once per window, its events handled together: less CPU
        per event, at the cost of up to one window's delay for the burst's later events. An
        event after a quiet spell is read at once. 0 reads every event as it arrives.
    event_qps / event_burst: the most Events its recorders send per second, and at once
        (None: no limit), once an Event has waited a minute for the controllers' queues to be
        idle; while they are idle Events go at once. See :mod:`memop.runtime.manager.events`.
    webhook: where the webhook server listens and finds its certificate (port 9443, the
        certificate in /tmp/k8s-webhook-server/serving-certs, as controller-runtime); it runs
        only when webhooks are added (:meth:`Manager.add_webhooks`).
    webhook_certificates: None (default) when the certificate is put in the cert dir from
        outside (a mounted Secret: cert-manager, OLM); else what makes it (memop's self-managed
        mode), run from before the webhook server starts until the manager stops. The webhook
        server starts once its first certificate is written.
    """

    namespaces: tuple[str, ...] = ()
    leader_election: LeaderElectionConfig | LeaderForLifeConfig | None = None
    sharding: ShardingConfig | None = None
    probe_address: Address | None = None
    metrics_address: Address | None = None
    metrics_tls: ssl.SSLContext | None = None
    metrics_auth: bool = False
    graceful_shutdown_timeout: float = 30.0
    sync_period: float | None = 10 * 3600.0
    event_qps: float | None = 20.0
    event_burst: int = 100
    cache_sync_timeout: float = 120.0
    watch_read_timeout: float = 150.0
    watch_batch_window: float = DEFAULT_WATCH_BATCH_WINDOW
    webhook: WebhookServerOptions = field(default_factory=WebhookServerOptions)
    webhook_certificates: CertificateSource | None = None
    uninstall_guard: UninstallGuardConfig | None = None
    extra: dict[str, object] = field(default_factory=dict)
    # How to run without a controller (the CLI's flag), named when its resources are not
    # served: controller name -> advice, appended to the start-up error.
    leave_out_hint: Callable[[str], str] | None = None


class CertificateSource(Protocol):
    """Makes the webhook server's certificate itself, on every replica (for example
    :class:`~memop.runtime.webhook.selfmanaged.SelfManagedCertificates`): ``run`` keeps it
    current until cancelled, ``wait_ready`` returns once the certificate is in the cert dir."""

    async def run(self) -> None: ...

    async def wait_ready(self) -> None: ...


class StartupError(Exception):
    """The manager cannot start; the message says why in one line."""


class Manager:
    """Owns the shared machinery and runs controllers added with :meth:`add`.

    ``clock``: the time every part of the manager waits on and reads (the cache's resyncs and
    reflectors' backoff, leader election or sharding membership, the Event recorders, the
    periodic shard-filtering check); tests pass a ``FakeClock``. The controllers take their
    own (``Controller(..., clock=)``)."""

    def __init__(self, client: Client, options: ManagerOptions, *, clock: Clock | None = None) -> None:
        if options.sharding is not None and options.leader_election is not None:
            raise ValueError("sharding replaces leader election: configure one of them, not both")
        if options.sharding is not None:
            options.sharding.validate()
        self.client = client
        self.options = options
        self.clock: Clock = clock or RealClock()
        self.cache = Cache(
            client,
            clock=self.clock,
            namespaces=options.namespaces,
            resync_period=options.sync_period,
            watch_read_timeout=options.watch_read_timeout,
            watch_batch_window=options.watch_batch_window,
        )
        self.membership: ShardMembership | None = None
        self._shard_work: ShardWork | None = None
        if options.sharding is not None:
            # Before any controller is built: their informers and gates are sharded from the start.
            self.cache.enable_sharding(Ring(options.sharding.shards), server_side=False)
        self.server = ProbeServer(
            probe_address=options.probe_address,
            metrics_address=options.metrics_address,
            metrics_tls=options.metrics_tls,
            metrics_authorizer=MetricsAuthorizer(client) if options.metrics_auth else None,
        )
        self.webhook_server = WebhookServer(options.webhook)
        self.controllers: list[Controller] = []
        self.recorders: list[EventRecorder] = []
        self.elector: LeaderElector | LeaderForLife | None = None
        self._elector_task: asyncio.Task[None] | None = None
        self._certificates_task: asyncio.Task[None] | None = None
        self._guard: UninstallGuard | None = None
        self._guard_task: asyncio.Task[None] | None = None
        self.leading = asyncio.Event()
        self.server.add_liveness_check("ping", lambda: None)
        self.server.add_readiness_check("informers", self._informers_synced)

    def add(self, controller: Controller) -> None:
        self.controllers.append(controller)

    def add_webhooks(
        self, webhooks: Sequence[AdmissionWebhook], conversions: Sequence[Conversion] = ()
    ) -> None:
        """Serve a controller's admission webhooks and conversions (its definition's
        ``webhooks`` and ``conversions``). ValueError when a path or kind is already served."""
        self.webhook_server.add(webhooks, conversions)

    def event_recorder(self, component: str, host: str = "") -> EventRecorder:
        recorder = EventRecorder(
            self.client,
            component,
            host=host,
            qps=self.options.event_qps,
            burst=self.options.event_burst,
            clock=self.clock,
            # Events wait while any controller has reconcile work: they must not delay the
            # writes they describe (memop.runtime.manager.events).
            workload=AllQueues(lambda: [controller.queue for controller in self.controllers]),
        )
        self.recorders.append(recorder)
        return recorder

    def _informers_synced(self) -> str | None:
        if self.cache.has_synced:
            return None
        waiting = self.cache.unsynced()
        return "waiting for the first list of " + ", ".join(waiting) if waiting else "cache not started"

    async def check_resources_served(self) -> None:
        """Fail fast, with a clear line, when a watched resource is not served (CRD missing).

        One LIST with limit=1 per resource, in a watched namespace when scoped, so the check
        needs no permission beyond what the watches need anyway. The line names the
        controller that needs the resource and, with ``leave_out_hint``, how to run without it.
        """
        namespace = self.options.namespaces[0] if self.options.namespaces else None
        checked: set[Resource] = set()
        for controller in self.controllers:
            for spec in controller.watches:
                res = spec.resource
                if res in checked:
                    continue
                try:
                    await self.client.list(res, namespace if res.namespaced else None, limit=1)
                except NotFound as error:
                    raise StartupError(self._not_served(controller.name, res, error.message)) from error
                except Forbidden as error:
                    raise StartupError(
                        f"not allowed to list {res}: {error.message}. Check the operator's RBAC "
                        "(manifests/rbac)."
                    ) from error
                checked.add(res)

    def _not_served(self, controller: str, res: Resource, detail: str) -> str:
        served = f"{res.plural}.{res.group}/{res.version}" if res.group else f"{res.plural}/{res.version}"
        message = (
            f"the {controller} controller needs {served} ({res.kind}), which the API server does not serve"
        )
        if not is_builtin_group(res.group):
            message += f": install the CustomResourceDefinition {res.plural}.{res.group} (manifests/crd)"
            if self.options.leave_out_hint is not None:
                message += f", {self.options.leave_out_hint(controller)}"
        return f"{message} ({detail})"

    async def run(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (exit 0) or leadership is lost (exit 1).

        ``stop`` is honoured at every stage, also while the API server is still being
        checked or the cache is still syncing, so a SIGTERM never waits for a slow start.
        A startup failure (listen address taken, API server unreachable, resource not
        served) is logged as one line and returns exit 1. Leadership lost while in-flight
        reconciles are finishing after ``stop`` cuts them short at once, and exits 1 too.
        """
        webhooks = self.webhook_server.has_handlers
        if webhooks:
            self.server.add_readiness_check("webhook", self.webhook_server.ready)
        try:
            await self.server.start()
        except OSError as error:
            log.error("cannot listen for probes and metrics: %s", error)
            await self.server.stop()
            return EXIT_FAILED
        if webhooks and not await self._start_webhooks(stop):
            await self._stop_certificates()
            await self.server.stop()
            return EXIT_OK if stop.is_set() else EXIT_FAILED
        stop_task = asyncio.create_task(stop.wait(), name="manager-stop")
        try:
            exit_code = await self._run(stop_task)
        finally:
            lost = await self._shutdown(stop_task)
        return EXIT_FAILED if lost else exit_code

    async def _start_webhooks(self, stop: asyncio.Event) -> bool:
        """Start the webhook server, once its certificate is made when memop makes it; False,
        with one error line, when it cannot (or when stopped while waiting for the certificate)."""
        options = self.options.webhook
        source = self.options.webhook_certificates
        if source is not None:
            self._certificates_task = asyncio.create_task(source.run(), name="webhook-certificates")
            stopping = asyncio.create_task(stop.wait(), name="manager-stop-before-webhooks")
            try:
                made = await _unless(source.wait_ready(), stopping, self._certificates_task)
            finally:
                stopping.cancel()
            if not made:
                task = self._certificates_task
                if task.done() and not task.cancelled() and task.exception() is not None:
                    log.error("cannot make the webhook's certificate: %s", task.exception())
                return False
        try:
            await self.webhook_server.start()
        except CertificateError as error:
            log.error(
                "cannot serve webhooks: %s (the webhook certificate directory must hold %s and %s: "
                "mount the serving certificate's Secret there, or let memop make it with "
                "--webhook-certs=self-managed, or run without webhooks: --no-enable-webhooks)",
                error, options.cert_name, options.key_name,
            )  # fmt: skip
            return False
        except OSError as error:
            log.error("cannot listen for webhooks on %s:%d: %s", options.host or "*", options.port, error)
            return False
        return True

    async def _run(self, stop_task: asyncio.Task[bool]) -> int:
        try:
            if not await _unless(self.check_resources_served(), stop_task):
                return EXIT_OK
        except StartupError as error:
            log.error("%s", error)
            return EXIT_FAILED
        except (ApiError, TransportError) as error:
            log.error("cannot reach the API server: %s", error)
            return EXIT_FAILED
        if self.options.sharding is not None:
            await choose_shard_filtering(self.client, self.cache, self.options.sharding)
        await self.cache.start()
        for recorder in self.recorders:
            recorder.start()
        self._arm_uninstall_guard()
        interrupts: list[asyncio.Task[Any]] = [stop_task]
        elector_task: asyncio.Task[None] | None = None
        election = self.options.leader_election
        if self.options.sharding is not None:
            return await self._run_sharded(self.options.sharding, stop_task)
        if election is not None:
            self.elector = (
                LeaderForLife(self.client, election, clock=self.clock)
                if isinstance(election, LeaderForLifeConfig)
                else LeaderElector(self.client, election, clock=self.clock)
            )
            elector_task = asyncio.create_task(self.elector.run(), name="leader-election")
            self._elector_task = elector_task
            interrupts.append(elector_task)
            if not await _unless(self.elector.leader_elected.wait(), *interrupts):
                if stop_task.done():
                    return EXIT_OK
                log.error("leader election ended before this replica led: %s", _task_error(elector_task))
                return EXIT_FAILED
        # Raced against the interrupts too: workers must not start after leadership ended
        # while the cache was still syncing.
        if await _unless(self._start_controllers(), *interrupts):
            await asyncio.wait(interrupts, return_when=asyncio.FIRST_COMPLETED)
        if elector_task is not None and elector_task.done() and not stop_task.done():
            log.error("leader election lost, stopping at once: %s", _task_error(elector_task) or "lease lost")
            await self._stop_controllers(timeout=0)
            return EXIT_FAILED
        return EXIT_OK

    async def _run_sharded(self, config: ShardingConfig, stop_task: asyncio.Task[bool]) -> int:
        """Every replica reconciles the shards the membership hands it (see the module docstring)."""
        self._shard_work = ShardWork(self)
        self.membership = ShardMembership(self.client, config, self._shard_work, clock=self.clock)
        if not await _unless(self._start_controllers(), stop_task):
            return EXIT_OK
        member_task = asyncio.create_task(self.membership.run(), name="sharding-membership")
        self._elector_task = member_task
        following = asyncio.create_task(
            follow_shard_filtering(self.client, self.cache, self.clock, config), name="sharding-filtering"
        )
        try:
            await asyncio.wait({stop_task, member_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait([following])
        if member_task.done() and not stop_task.done():
            if await self._uninstalling():
                # The group's Leases went with the namespace; the Pod's SIGTERM follows.
                log.warning(
                    "sharding membership lost while the install is being deleted: finalizing "
                    "every shard's objects until stopped"
                )
                await self._take_every_shard()
                await stop_task
                return EXIT_OK
            log.error("sharding membership lost, stopping at once: %s", _task_error(member_task) or "lost")
            await self._stop_controllers(timeout=0)
            return EXIT_FAILED
        return EXIT_OK

    async def _start_controllers(self) -> None:
        self.leading.set()
        for controller in self.controllers:
            await controller.start(self.options.cache_sync_timeout)

    async def _stop_controllers(self, timeout: float) -> None:
        try:
            await asyncio.gather(*(c.stop(timeout) for c in self.controllers))
        finally:
            self.leading.clear()

    async def _shutdown(self, stop_task: asyncio.Task[bool]) -> bool:
        """Stop everything in order; True when leadership was lost while in-flight reconciles
        were still finishing (they are then cancelled at once, not given the graceful timeout:
        another replica may lead as soon as our lease expires)."""
        log.info("shutting down")
        began = self.clock.monotonic()
        uninstalling = await self._finalize_if_uninstalling(stop_task)
        # Not yet an uninstall: one that deletes the Deployment before the namespace (kubectl
        # delete -f in reverse order, a test's tear-down) stops us a moment before it begins.
        late = (
            asyncio.create_task(self._uninstall_begins_within(UNINSTALL_SETTLE_SECONDS))
            if self._guard is not None and not uninstalling and stop_task.done()
            else None
        )
        # Read after: an uninstalling sharded replica has ended its membership on purpose.
        elector_task = self._elector_task
        # Leadership may have ended between the stop request and now, workers still running.
        lost = elector_task is not None and elector_task.done() and self.leading.is_set()
        if lost and elector_task is not None:
            _log_lost_while_stopping(elector_task)
        # One graceful budget for finalizing an uninstall and the in-flight reconciles together:
        # the release after them must still fit in the Pod's termination grace period.
        spent = self.clock.monotonic() - began
        timeout = 0 if lost else max(0.0, self.options.graceful_shutdown_timeout - spent)
        stopping = asyncio.create_task(self._stop_controllers(timeout), name="stop-controllers")
        try:
            if not lost and elector_task is not None and not elector_task.done():
                await asyncio.wait({stopping, elector_task}, return_when=asyncio.FIRST_COMPLETED)
                if not stopping.done():
                    _log_lost_while_stopping(elector_task)
                    lost = True
                    stopping.cancel()
            await asyncio.gather(stopping, return_exceptions=True)
        except asyncio.CancelledError:
            stopping.cancel()  # this shutdown is itself cancelled: no reconcile may outlive it
            if late is not None:
                late.cancel()
            await asyncio.gather(stopping, return_exceptions=True)
            raise
        if not stopping.cancelled() and (error := stopping.exception()) is not None:
            if late is not None:
                late.cancel()
            raise error
        if elector_task is not None and not elector_task.done():
            elector_task.cancel()  # releases the lease when configured to
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await elector_task
        if self._shard_work is not None:
            await self._shard_work.stop()  # no labelling outlives the controllers
        if self.membership is not None and not lost and not uninstalling:
            await self.membership.leave()  # the controllers have stopped: hand every shard over
        stop_task.cancel()
        for recorder in self.recorders:
            await recorder.stop()
        if late is not None and await late:
            # Other replicas may still be finalizing (this one was stopped by a rollout just
            # before the deletion): releasing now would take their RBAC and token with it.
            await self._wait_finalized(
                self.options.graceful_shutdown_timeout - (self.clock.monotonic() - began),
                until_crds_deleted=True,
            )
            uninstalling = True
        if uninstalling:
            await self._release_uninstall_guard()
        await self.cache.stop()
        await self.webhook_server.stop()
        await self._stop_certificates()
        await self.server.stop()
        return lost

    def _arm_uninstall_guard(self) -> None:
        config = self.options.uninstall_guard
        if config is None:
            return
        kinds = [watch.resource for c in self.controllers for watch in c.watches]
        self._guard = UninstallGuard(self.client, config, kinds, clock=self.clock)
        self._guard_task = asyncio.create_task(self._arm_until_done(self._guard), name="uninstall-guard")

    async def _arm_until_done(self, guard: UninstallGuard) -> None:
        """Arm the guard, retrying with backoff while the API server fails: an operator
        without it still works, it only cannot survive its whole install being deleted at
        once. A 403 or 404 (RBAC without the guard's rules, objects of other names) is said
        once: retrying would not change it."""
        delay = 1.0
        while True:
            try:
                await guard.arm()
                return
            except (Forbidden, NotFound) as error:
                log.warning(
                    "uninstall guard off: %s (re-apply the install's manifests, or run without "
                    "--uninstall-guard)", error,
                )  # fmt: skip
                return
            except (ApiError, TransportError) as error:
                log.warning(
                    "uninstall guard not armed yet, retrying in %.0fs: %s", delay, error,
                    extra={"retry_seconds": delay},
                )  # fmt: skip
            await self.clock.sleep(delay)
            delay = min(delay * 2, 300.0)

    async def _finalize_if_uninstalling(self, stop_task: asyncio.Task[bool]) -> bool:
        """On a stop request, when the operator's namespace is being deleted: keep reconciling
        until the objects of the terminating CRDs are gone (within the graceful timeout).
        Returns whether this is an uninstall."""
        if self._guard_task is not None:
            self._guard_task.cancel()  # arming ends with the replica, armed or not
        guard = self._guard
        if guard is None or not stop_task.done() or stop_task.cancelled():
            return False
        if not await self._uninstalling():
            return False
        log.info("uninstalling: releasing finalizers before stopping")
        await self._take_every_shard()
        await self._work_without_leading()
        await self._wait_finalized(self.options.graceful_shutdown_timeout)
        return True

    async def _wait_finalized(self, timeout: float, *, until_crds_deleted: bool = False) -> None:
        """Wait, at most ``timeout`` seconds, until the objects of the deleted CRDs are gone
        (see :meth:`UninstallGuard.wait_finalized`)."""
        assert self._guard is not None
        timeout = max(0.0, timeout)
        log.info("uninstalling: waiting up to %.0fs for the objects of the deleted CRDs to go", timeout)
        try:
            left = await self._guard.wait_finalized(timeout, until_crds_deleted=until_crds_deleted)
        except (ApiError, TransportError) as error:
            # Most often another replica has released the guard already: its RBAC is gone.
            log.warning("uninstalling: cannot tell what is left of the deleted CRDs: %s", error)
            return
        if left:
            log.warning(
                "uninstalling: %d objects of the deleted CRDs are still there (a finalizer holds"
                " them); releasing the operator's RBAC all the same",
                left,
                extra={"left": left},
            )

    async def _uninstalling(self, *, quiet: bool = False) -> bool:
        """Whether the install is being deleted (its namespace is terminating); False without
        an uninstall guard, or when the API server cannot say (said unless ``quiet``)."""
        guard = self._guard
        if guard is None:
            return False
        try:
            return await asyncio.wait_for(guard.uninstalling(), timeout=10)
        except (ApiError, TransportError, TimeoutError) as error:
            if not quiet:
                log.warning("uninstall guard: cannot tell whether the install is being deleted: %s", error)
            return False

    async def _uninstall_begins_within(self, seconds: float) -> bool:
        """Whether the install starts being deleted within ``seconds`` of now (polled while the
        replica stops; leadership is handed over meanwhile, only the exit waits). Then its
        guard must still be released: no replica is left to do it. What the deleted CRDs hold
        is not finalized by this replica, whose controllers have stopped."""
        log.info("stopping: the install is not being deleted; watching %.0fs for it to be", seconds)
        deadline = self.clock.monotonic() + seconds
        while self.clock.monotonic() < deadline:
            await self.clock.sleep(POLL_SECONDS)
            if await self._uninstalling(quiet=True):
                log.warning(
                    "uninstalling began after this replica stopped reconciling: releasing its "
                    "guard once the objects of the deleted CRDs are gone (other replicas may be "
                    "finalizing them) or the graceful timeout has passed"
                )
                return True
        return False

    async def _take_every_shard(self) -> None:
        """Uninstalling, sharded: end the membership and work on every shard. A shard whose
        holder was stopping (a rollout) or whose Lease is gone would otherwise keep its objects'
        finalizers, and their CRD and the namespace with them, for ever."""
        membership, task = self.membership, self._elector_task
        if membership is None or task is None:
            return  # not sharded, or done already
        self._elector_task = None
        await cancel_and_wait([task])
        await membership.abandon()
        log.info("uninstalling: working on every shard to finalize what is being deleted")
        assert self._shard_work is not None
        # Replicas doing this together reconcile the same objects: their writes conflict and
        # are retried, as any two writers' are.
        await self._shard_work.acquired(range(membership.config.shards), label=False)

    async def _work_without_leading(self) -> None:
        """Uninstalling, not leading: run the controllers all the same. The election's Lease and
        Role go with the namespace, so a replica a rollout started may never lead, while the
        leader it replaced has stopped; the objects being deleted would keep their finalizers.
        Replicas doing this together reconcile the same objects: their writes conflict and are
        retried. The cache synced at start; a kind whose CRD is gone never syncs again, so the
        workers start after a short wait whatever is left unsynced."""
        if self.leading.is_set() or self.options.sharding is not None:
            return
        log.info("uninstalling: not leading; reconciling all the same, to finalize what is being deleted")
        self.leading.set()
        for controller in self.controllers:
            await controller.start(UNINSTALL_SYNC_SECONDS)

    async def _release_uninstall_guard(self) -> None:
        guard = self._guard
        if guard is None:
            return
        try:
            await asyncio.wait_for(guard.release(), timeout=RELEASE_SECONDS)
        except (ApiError, TransportError, TimeoutError) as error:
            log.warning(
                "uninstall guard not released: %s (another replica may have released it; if the "
                "ServiceAccount, role or binding stays, remove the finalizer %s by hand)", error, GUARD,
            )  # fmt: skip

    async def _stop_certificates(self) -> None:
        task, self._certificates_task = self._certificates_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _unless(work: Coroutine[Any, Any, object], *interrupts: asyncio.Future[Any]) -> bool:
    """Run ``work`` until it finishes (True) or one of ``interrupts`` is done first (False:
    ``work`` is cancelled and awaited). Exceptions from ``work`` propagate."""
    task = asyncio.create_task(work)
    try:
        await asyncio.wait({task, *interrupts}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            await cancel_and_wait([task])
    if task.cancelled():
        return False
    task.result()
    return True


def _log_lost_while_stopping(elector_task: asyncio.Task[None]) -> None:
    log.error(
        "leader election lost while shutting down, cancelling in-flight reconciles: %s",
        _task_error(elector_task) or "lease lost",
    )


def _task_error(task: asyncio.Task[None]) -> str:
    if task.cancelled():
        return "cancelled"
    error = task.exception()
    return f"{type(error).__name__}: {error}" if error else ""
