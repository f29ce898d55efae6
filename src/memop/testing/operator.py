"""Run controllers in-process against a cluster, for tests and benchmarks (like envtest + a manager).

:class:`RunningOperator` starts a :class:`~memop.runtime.manager.manager.Manager` running the
controllers it is given (definitions or a :class:`~memop.project.Project`; there is no
default) as a task of the current event loop, exposes its client, cache and controllers, and
stops it cleanly. The manager is expected to run until :meth:`RunningOperator.stop`: if it
exits before (a CRD not installed, an API server it cannot reach, leadership lost), that is
:class:`OperatorExited`, carrying the exit code and the last lines the manager logged, raised
by :meth:`~RunningOperator.start` when it happens while starting, and by the ``async with``
block (at once: the block's task is interrupted) when it happens inside it.

:func:`install_crds` creates (or updates) the CRDs of definitions or a project and waits
until they are Established; :func:`release_finalizers` and :func:`event_recorded` are the
other helpers every operator's tests need. Memcached-specific helpers are in
:mod:`memop.testing.memcached`; the pytest fixtures in :mod:`memop.testing.plugin`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from kubernetes_asyncio.client import ApiClient, Configuration

from memop.project import Project
from memop.runtime.client.client import Client
from memop.runtime.client.errors import AlreadyExists, Conflict, NotFound
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, EVENTS, Resource
from memop.runtime.controller.controller import Controller
from memop.runtime.controller.definition import ControllerDefinition, SetupContext
from memop.runtime.leaderelection.lease import LeaderElectionConfig
from memop.runtime.manager.manager import Manager, ManagerOptions
from memop.runtime.manager.uninstall import UninstallGuardConfig
from memop.runtime.sharding.membership import ShardingConfig
from memop.runtime.webhook.server import WebhookServerOptions
from memop.testing.loopbackwebhooks import LoopbackWebhooks
from memop.testing.wait import WaitTimeout, wait_for

# What install_crds and RunningOperator take: a project, one definition, or several.
Controllers = Project | ControllerDefinition | Sequence[ControllerDefinition]
CrdSource = Project | ControllerDefinition | Mapping[str, Any]

LOG_LINES = 30  # how many of the manager's last log lines an OperatorExited shows


def controller_definitions(controllers: Controllers) -> tuple[ControllerDefinition, ...]:
    """The definitions of a project, of one definition, or of a sequence of them.

    TypeError names what is not a ControllerDefinition; ValueError when there is none.
    """
    if isinstance(controllers, Project):
        return controllers.controllers
    if isinstance(controllers, ControllerDefinition):
        return (controllers,)
    if isinstance(controllers, str | bytes | Mapping) or not isinstance(controllers, Iterable):
        raise TypeError(
            f"expected a memop.Project, a ControllerDefinition or a sequence of them, not "
            f"{type(controllers).__name__}"
        )
    definitions = tuple(controllers)
    for definition in definitions:
        if not isinstance(definition, ControllerDefinition):
            raise TypeError(f"{definition!r} is not a memop.runtime.ControllerDefinition")
    if not definitions:
        raise ValueError("no controllers given: name the ControllerDefinitions (or the Project) to run")
    return definitions


def crds_of(*sources: CrdSource) -> list[dict[str, Any]]:
    """The CRDs of each source, in order: a project's or a definition's (``crds()``), or a CRD
    dict as it is. A CRD two sources share is listed once."""
    crds: list[dict[str, Any]] = []
    seen: set[str] = set()
    for source in sources:
        if isinstance(source, Project | ControllerDefinition):
            found = [crd for definition in controller_definitions(source) for crd in definition.crds()]
        elif isinstance(source, Mapping):
            found = [dict(source)]
        else:
            raise TypeError(
                f"expected a memop.Project, a ControllerDefinition or a CRD dict, not {type(source).__name__}"
            )
        for crd in found:
            name = crd["metadata"]["name"]
            if name not in seen:
                seen.add(name)
                crds.append(crd)
    return crds


def crd_resource(crd: Mapping[str, Any]) -> Resource:
    """The resource a CRD serves, at its storage version (the first served one without)."""
    spec = crd["spec"]
    versions = spec.get("versions") or []
    version = next((v for v in versions if v.get("storage")), None) or next(
        (v for v in versions if v.get("served")), versions[0]
    )
    names = spec["names"]
    return Resource(
        spec["group"],
        version["name"],
        names["plural"],
        names["kind"],
        namespaced=spec["scope"] == "Namespaced",
    )


async def install_crds(client: Client, *sources: CrdSource, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Install the CRDs of ``sources`` (see :func:`crds_of`) and wait until each is Established.

    A CRD the cluster does not have is created; one it has is updated to this definition (as
    envtest does, so a real cluster's copy from an earlier run never hides a schema change).
    Nothing is ever deleted. Returns the CRDs, as given.
    """
    crds = crds_of(*sources)
    for crd in crds:
        await _create_or_update(client, crd)
    for crd in crds:
        await _established(client, crd["metadata"]["name"], timeout)
    return crds


async def install_crd(client: Client, definition: dict[str, Any] | None = None) -> None:
    """Install one CRD (see :func:`install_crds`); without ``definition``, the CRDs of
    memop's own controllers (:data:`memop.builtin.PROJECT`)."""
    if definition is None:
        from memop.builtin import PROJECT  # noqa: PLC0415 - memop's operators, only when asked for

        await install_crds(client, PROJECT)
        return
    await install_crds(client, definition)


async def _create_or_update(client: Client, crd: dict[str, Any]) -> None:
    name = crd["metadata"]["name"]
    try:
        await client.create(CUSTOM_RESOURCE_DEFINITIONS, crd)
        return
    except AlreadyExists:
        pass
    for _ in range(10):  # another writer (an earlier test's cleanup, a CRD controller) may race
        current = await client.get(CUSTOM_RESOURCE_DEFINITIONS, name)
        body = {
            **crd,
            "metadata": {**crd["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
        }
        try:
            await client.update(CUSTOM_RESOURCE_DEFINITIONS, body)
            return
        except Conflict:
            continue
    raise RuntimeError(f"could not update the CustomResourceDefinition {name}: it kept changing")


async def _established(client: Client, name: str, timeout: float) -> None:
    async def established() -> bool:
        current = await client.get(CUSTOM_RESOURCE_DEFINITIONS, name)
        conditions = (current.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    await wait_for(established, timeout=timeout, message=f"CustomResourceDefinition {name} not Established")


async def release_finalizers(client: Client, resource: Resource, namespace: str | None = None) -> int:
    """Drop every finalizer of the ``resource`` objects in ``namespace`` (all namespaces when
    None); the number of objects changed.

    For a cleanup once the operator that owns the finalizers is stopped: nothing else would
    remove them, and they would hold the objects, their namespace and their CRD for ever.
    NotFound from the list (the CRD is gone) propagates.
    """
    items, _ = await client.list_all(resource, namespace if resource.namespaced else None)
    released = 0
    for item in items:
        if item["metadata"].get("finalizers"):
            with contextlib.suppress(NotFound):
                await client.patch(
                    resource,
                    item["metadata"]["name"],
                    {"metadata": {"finalizers": None}},
                    item["metadata"].get("namespace"),
                )
                released += 1
    return released


async def event_recorded(
    client: Client, namespace: str, matches: Callable[[dict[str, Any]], bool], timeout: float = 30.0
) -> dict[str, Any]:
    """The first Event in ``namespace`` that ``matches``, once it is there. memop writes its
    Events when its queues have been quiet for a while, so they can come after the state they
    describe: a test waits for them, with a deadline."""

    async def found() -> dict[str, Any] | None:
        events, _ = await client.list_all(EVENTS, namespace)
        first: dict[str, Any] | None = next((e for e in events if matches(e)), None)
        return first

    # wait_for returns what the predicate returned once it was truthy (its overloads meet Any).
    return cast("dict[str, Any]", await wait_for(found, timeout=timeout))


class OperatorExited(RuntimeError):
    """The manager exited while it was expected to run.

    ``exit_code`` is what :meth:`Manager.run` returned (None when it raised: ``__cause__`` is
    the exception); ``log_lines`` are the last lines logged while it ran. The message says
    both.
    """

    def __init__(self, exit_code: int | None, log_lines: Sequence[str], error: BaseException | None = None):
        self.exit_code = exit_code
        self.log_lines = tuple(log_lines)
        how = f"exited with code {exit_code}" if error is None else f"failed: {type(error).__name__}: {error}"
        text = f"the manager {how} while the test expected it to run"
        if self.log_lines:
            text += "; its last log lines:\n" + "\n".join(f"  {line}" for line in self.log_lines)
        else:
            text += " (it logged nothing at the levels the logging configuration lets through)"
        super().__init__(text)


class LogTail(logging.Handler):
    """The last ``size`` log records of the process, formatted, while attached to the root logger.

    The in-memory API server's own records (``memop.testing``) are left out: they are the
    cluster's, not the manager's. Records are those the logging configuration lets through
    (WARNING and above by default; pytest's ``log_level`` lowers that).
    """

    def __init__(self, size: int = LOG_LINES) -> None:
        super().__init__(logging.NOTSET)
        self.lines: deque[str] = deque(maxlen=size)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "memop.testing" or record.name.startswith("memop.testing."):
            return
        try:
            self.lines.append(self.format(record))
        except Exception:  # a record that cannot be formatted must not break the manager
            self.handleError(record)

    def attach(self) -> None:
        logging.getLogger().addHandler(self)

    def detach(self) -> None:
        logging.getLogger().removeHandler(self)


class RunningOperator:
    """A manager running ``controllers`` in this event loop until :meth:`stop`.

    ``controllers`` is required: a :class:`~memop.project.Project`, a
    :class:`ControllerDefinition` or a sequence of definitions. Leader election is off unless
    ``leader_election`` is given; ``sharding`` (a :class:`ShardingConfig`, instead) runs the
    controllers as one sharded replica, as ``--sharding`` does: alone it takes every shard, so a
    test sees what a sharded replica watches (children by their owner's bucket label).
    ``namespaces`` limits the watches (empty: all namespaces). ``webhooks`` (the webhook server's
    options: a cert dir, ``port=0`` for a free one) serves the controllers' admission webhooks and
    conversions, at :attr:`webhook_url` once started; register them with
    :func:`memop.testing.install_webhooks`. ``webhooks=True`` does both for the test
    (:mod:`memop.testing.loopbackwebhooks`): a certificate of its own, a free loopback port, and
    the project's webhook configurations and conversions registered once it serves (judging only
    ``namespaces``' objects when given), taken back when it stops.
    ``rbac`` runs the manager as the project's ServiceAccount with the RBAC its manifests grant
    (:mod:`memop.testing.operatorrbac`: applied by :meth:`start` with ``configuration``, an
    administrator's; the ClusterRole, or with ``namespaces`` a Role in each, and the
    leader-election or ``--sharding`` roles in the project's namespace, so a Lease elsewhere is
    refused), so a request the manifests do not grant fails with the API server's 403, as it
    would once installed. ``uninstall_guard`` is ``--uninstall-guard``'s objects
    (:mod:`memop.runtime.manager.uninstall`). Without a project, the definitions are installed as project
    ``memop``.
    The manager's user agent is ``<project>-test/<identity>`` (``memop-test`` without a project).

    Use it as ``async with RunningOperator(...) as operator:`` (started and cache synced on
    entry, stopped on exit), or :meth:`start` / :meth:`stop`. An exit of the manager before
    :meth:`stop` raises :class:`OperatorExited`: from :meth:`start` when it happens while
    starting; inside ``async with``, the block's task is cancelled at once and the block
    raises it; :meth:`check` and :meth:`wait_for` raise it for code that runs the operator
    otherwise (a fixture).
    """

    def __init__(
        self,
        configuration: Configuration,
        *,
        controllers: Controllers,
        namespaces: Sequence[str] = (),
        identity: str = "memop-test",
        max_concurrent_reconciles: int = 2,
        leader_election: LeaderElectionConfig | None = None,
        sharding: ShardingConfig | None = None,
        graceful_shutdown_timeout: float = 5.0,
        sync_timeout: float = 30.0,
        webhooks: WebhookServerOptions | bool | None = None,
        rbac: bool = False,
        uninstall_guard: UninstallGuardConfig | None = None,
    ) -> None:
        self.configuration = configuration
        # The administrator's, kept for registering webhooks once rbac switched configuration.
        self._admin_configuration = configuration
        self.definitions = controller_definitions(controllers)
        self.project = controllers if isinstance(controllers, Project) else None
        self.namespaces = tuple(namespaces)
        self.user_agent = f"{self.project.name if self.project else 'memop'}-test/{identity}"
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.leader_election = leader_election
        self.sharding = sharding
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.sync_timeout = sync_timeout
        self._loopback: LoopbackWebhooks | None = None
        if webhooks is True:
            self._loopback = LoopbackWebhooks()
            webhooks = self._loopback.options
        self.webhooks: WebhookServerOptions | None = webhooks or None
        self.rbac = rbac
        self.uninstall_guard = uninstall_guard
        # (namespace, name) of the ServiceAccount the manager runs as, once started with rbac.
        self.service_account: tuple[str, str] | None = None
        self.stop_event = asyncio.Event()
        self.exit_code: int | None = None
        self.logs = LogTail()
        self._api: ApiClient | None = None
        self._task: asyncio.Task[int] | None = None
        # Invariants: _exited is set only when the task ended before stop() was called, and
        # then stays set; _reported once an OperatorExited for it was raised to the caller.
        self._stop_requested = False
        self._exited = False
        self._reported = False
        # The task running the `async with` block, interrupted when the manager exits.
        self._interrupt: asyncio.Task[Any] | None = None
        self._interrupted = False
        self.manager: Manager
        self.controller: Controller  # the first one
        self.controllers: dict[str, Controller] = {}
        self.client: Client

    @property
    def webhook_url(self) -> str:
        """``https://host:port`` of the webhook server, once started with ``webhooks``."""
        options = self.webhooks
        port = self.manager.webhook_server.port if options is not None else None
        if options is None or port is None:
            raise RuntimeError("this RunningOperator serves no webhooks, or has not started yet")
        return f"https://{options.host or '127.0.0.1'}:{port}"

    async def start(self, *, wait_synced: bool = True) -> RunningOperator:
        """Set the controllers up on a new manager and run it; with ``wait_synced``, return
        once the cache has synced (WaitTimeout after ``sync_timeout``).

        Raises :class:`OperatorExited` when the manager has exited meanwhile, and whatever a
        definition's ``setup`` raises.
        """
        __tracebackhide__ = True  # pytest shows the test's line, not these frames
        if self._task is not None:
            raise RuntimeError("this RunningOperator was already started")
        if self.rbac and self.service_account is None:
            await self._run_as_service_account()
        self.logs.attach()
        self._api = ApiClient(self.configuration)
        try:
            self.client = Client(self._api, user_agent=self.user_agent)
            self.manager = Manager(
                self.client,
                ManagerOptions(
                    namespaces=self.namespaces,
                    leader_election=self.leader_election,
                    sharding=self.sharding,
                    graceful_shutdown_timeout=self.graceful_shutdown_timeout,
                    webhook=self.webhooks or WebhookServerOptions(),
                    uninstall_guard=self.uninstall_guard,
                ),
            )
            for definition in self.definitions:
                if self.webhooks is not None:
                    self.manager.add_webhooks(definition.webhooks, definition.conversions)
                recorder = self.manager.event_recorder(f"{definition.name}-controller", host=self.user_agent)
                controller = definition.setup(
                    SetupContext(
                        self.manager.cache,
                        self.client,
                        recorder,
                        self.max_concurrent_reconciles,
                        # The project's name, as memop run names the writer of what is applied.
                        field_manager=self.project.name if self.project is not None else "",
                    )
                )
                self.controllers[definition.name] = controller
                self.manager.add(controller)
        except BaseException:
            await self._release()
            raise
        self.controller = self.controllers[self.definitions[0].name]
        self._task = asyncio.create_task(
            self.manager.run(self.stop_event), name=f"operator {self.user_agent}"
        )
        self._task.add_done_callback(self._on_exit)
        if wait_synced:
            task = self._task
            try:
                await wait_for(
                    lambda: self.manager.cache.has_synced or task.done(),
                    timeout=self.sync_timeout,
                    message=lambda: "the cache did not sync; last log lines: " + " | ".join(self.logs.lines),
                )
            except WaitTimeout:
                await self.stop()
                raise
            if task.done():
                await self.stop()
                self.check()
        if self._loopback is not None:
            try:
                server = self.manager.webhook_server
                await wait_for(
                    lambda: server.port is not None or self._task is None or self._task.done(),
                    timeout=self.sync_timeout,
                    message="the webhook server did not start listening",
                )
                self.check()
                project = self.project or Project("memop", "memop.dev", self.definitions)
                url = self.webhook_url
                await self._loopback.register(self._admin_configuration, project, url, self.namespaces)
            except BaseException:
                await self.stop()
                raise
        return self

    def _on_exit(self, task: asyncio.Task[int]) -> None:
        if self._stop_requested:
            return
        self._exited = True
        interrupt, self._interrupt = self._interrupt, None
        if interrupt is not None and interrupt is not task and not interrupt.done():
            self._interrupted = interrupt.cancel("the manager exited")

    @property
    def running(self) -> bool:
        """Whether the manager task is running."""
        return self._task is not None and not self._task.done()

    @property
    def exited(self) -> bool:
        """Whether the manager exited before :meth:`stop` asked it to."""
        return self._exited or (self._task is not None and self._task.done() and not self._stop_requested)

    def failure(self) -> OperatorExited | None:
        """The :class:`OperatorExited` describing the manager's exit, or None while it runs
        (or when it stopped because it was asked to)."""
        if not self.exited or self._task is None:
            return None
        error = None if self._task.cancelled() else self._task.exception()
        code = None if error is not None or self._task.cancelled() else self._task.result()
        failure = OperatorExited(code, list(self.logs.lines), error)
        failure.__cause__ = error
        return failure

    def check(self) -> None:
        """Raise :class:`OperatorExited` if the manager exited before being asked to stop."""
        __tracebackhide__ = True  # pytest shows the test's line, not these frames
        failure = self.failure()
        if failure is not None:
            self._reported = True
            raise failure

    @property
    def reported(self) -> bool:
        """Whether an :class:`OperatorExited` for this manager's exit was raised already."""
        return self._reported

    async def wait_for(
        self, predicate: Callable[[], Any], timeout: float = 30.0, *, message: str | None = None
    ) -> Any:
        """:func:`memop.testing.wait.wait_for`, failing at once with :class:`OperatorExited`
        if the manager exits meanwhile."""

        async def guarded() -> Any:
            self.check()
            result = predicate()
            return await result if inspect.isawaitable(result) else result

        guarded.__qualname__ = getattr(predicate, "__qualname__", repr(predicate))
        return await wait_for(guarded, timeout=timeout, message=message)

    async def stop(self) -> int | None:
        """Ask the manager to stop, wait for it, release the client; its exit code.

        Safe to call more than once. An exception the manager raised propagates, unless its
        exit was unexpected (then :meth:`check` reports it).
        """
        if self._task is not None and self._task.done() and not self._stop_requested:
            self._exited = True
        self._stop_requested = True
        self._interrupt = None
        if self._loopback is not None:
            await self._loopback.close()  # before the server stops: nothing is sent to it after
        self.stop_event.set()
        try:
            if self._task is not None:
                try:
                    self.exit_code = await self._task
                except Exception:
                    if not self._exited:
                        raise
        finally:
            await self._release()
        return self.exit_code

    async def _run_as_service_account(self) -> None:
        """Install the project's RBAC (as the administrator ``configuration`` is) and switch to a
        token of its ServiceAccount (memop.testing.operatorrbac)."""
        # Imported here: the manifests are only needed by operators run with their RBAC.
        from memop.testing.operatorrbac import (  # noqa: PLC0415
            install_operator_rbac,
            service_account_configuration,
        )

        project = self.project or Project("memop", "memop.dev", self.definitions)
        async with ApiClient(self.configuration) as api:
            admin = Client(api, user_agent="memop-rbac-install")
            account = await install_operator_rbac(
                admin, project, namespaces=self.namespaces, sharding=self.sharding is not None
            )
        self.configuration = await service_account_configuration(self.configuration, *account)
        self.service_account = account

    async def _release(self) -> None:
        self.logs.detach()
        if self._api is not None:
            await self._api.close()
            self._api = None

    async def __aenter__(self) -> RunningOperator:
        __tracebackhide__ = True  # pytest shows the test's line, not these frames
        await self.start()
        self._interrupt = asyncio.current_task()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        __tracebackhide__ = True  # pytest shows the test's line, not these frames
        task = asyncio.current_task()
        if self._interrupted and task is not None:
            task.uncancel()  # the cancellation was ours: it becomes OperatorExited below
        await self.stop()
        failure = self.failure()
        if failure is None:
            return
        self._reported = True
        if self._interrupted:
            if exc is not None and exc.__traceback__ is not None:
                # The CancelledError's first frame is the block's, at the line it was waiting on.
                frame = exc.__traceback__
                failure.add_note(
                    f"the async with block was interrupted at {frame.tb_frame.f_code.co_filename}:"
                    f"{frame.tb_lineno}"
                )
            raise failure from failure.__cause__  # not the CancelledError that interrupted the block
        raise failure
