"""Run memop in-process against a cluster, for tests and benchmarks (like envtest + manager).

``RunningOperator`` starts a :class:`~memop.runtime.manager.manager.Manager` with the given controllers
(the memcached one by default) as a task, exposes its client, cache and controllers, and stops
it cleanly.
``memcached_manifest``, ``available`` and ``converged`` build Memcacheds and tell when memop
has reconciled one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any, cast

from kubernetes_asyncio.client import ApiClient, Configuration

from memop import memcached
from memop.cli.controllers import ALL
from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import AlreadyExists, NotFound
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, DEPLOYMENTS, EVENTS
from memop.runtime.controller.controller import Controller
from memop.runtime.controller.definition import ControllerDefinition, SetupContext
from memop.runtime.leaderelection.lease import LeaderElectionConfig
from memop.runtime.manager.manager import Manager, ManagerOptions
from memop.testing.wait import wait_for


async def install_crd(client: Client, definition: dict[str, Any] | None = None) -> None:
    """Create (or keep) a CRD and wait until it is Established; without ``definition``, the
    CRD of every controller memop can run (memop runs them all by default)."""
    if definition is None:
        for controller in ALL.values():
            for crd in controller.crds():
                await install_crd(client, crd)
        return
    name = definition["metadata"]["name"]
    with contextlib.suppress(AlreadyExists):
        await client.create(CUSTOM_RESOURCE_DEFINITIONS, definition)

    async def established() -> bool:
        current = await client.get(CUSTOM_RESOURCE_DEFINITIONS, name)
        conditions = (current.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    await wait_for(established, timeout=30)


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


async def release_memcacheds(client: Client, namespace: str) -> None:
    """Drop the finalizers of the Memcacheds in ``namespace`` (memop's, and any a test put
    there). For tests on a real cluster, before deleting a namespace once memop is stopped:
    the finalizers would hold the namespace in Terminating for ever, and the CRD with it."""
    items, _ = await client.list_all(MEMCACHEDS, namespace)
    for item in items:
        if item["metadata"].get("finalizers"):
            with contextlib.suppress(NotFound):
                await client.patch(
                    MEMCACHEDS, item["metadata"]["name"], {"metadata": {"finalizers": None}}, namespace
                )


def memcached_manifest(
    name: str, *, namespace: str | None = None, finalizers: list[str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A Memcached named ``name`` with ``spec`` (``{"size": 1}`` when no spec key is given).

    ``metadata.namespace`` is set only when ``namespace`` is given, and ``metadata.finalizers``
    only when ``finalizers`` is non-empty, so the body is exactly what a test means to send.
    """
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    return {
        "apiVersion": MEMCACHEDS.api_version,
        "kind": MEMCACHEDS.kind,
        "metadata": metadata,
        "spec": spec or {"size": 1},
    }


async def available(
    client: Client, namespace: str, name: str, *, size: int | None = None
) -> dict[str, Any] | None:
    """The Memcached once memop has reconciled its current generation and reports it Available.

    That is: the Memcached and its Deployment exist, ``status.observedGeneration`` is
    ``metadata.generation``, condition Available is ``"True"`` and, when ``size`` is given,
    the Deployment's ``spec.replicas`` is ``size``. None otherwise (also when either is not
    found), so it can be polled with :func:`~memop.testing.wait.wait_for`.
    """
    try:
        cr = await client.get(MEMCACHEDS, name, namespace)
        deployment = await client.get(DEPLOYMENTS, name, namespace)
    except NotFound:
        return None
    status = cr.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    generation = cr["metadata"].get("generation")
    ok = (
        generation is not None
        and status.get("observedGeneration") == generation
        and conditions.get("Available") == "True"
        and (size is None or (deployment.get("spec") or {}).get("replicas") == size)
    )
    return cr if ok else None


async def converged(client: Client, namespace: str, name: str, size: int) -> dict[str, Any] | None:
    """The Memcached once :func:`available` at ``size`` and its status counts ``size`` ready
    replicas and ``size`` nodes (Available alone allows more pods, e.g. while scaling down)."""
    cr = await available(client, namespace, name, size=size)
    if cr is None:
        return None
    status = cr.get("status") or {}
    ready = status.get("readyReplicas", 0) == size and len(status.get("nodes") or []) == size
    return cr if ready else None


class RunningOperator:
    """memop's manager running in this event loop until :meth:`stop`."""

    def __init__(
        self,
        configuration: Configuration,
        *,
        namespaces: Sequence[str] = (),
        identity: str = "memop-test",
        max_concurrent_reconciles: int = 2,
        leader_election: LeaderElectionConfig | None = None,
        graceful_shutdown_timeout: float = 5.0,
        controllers: Sequence[ControllerDefinition] = (memcached.DEFINITION,),
    ) -> None:
        self.configuration = configuration
        self.definitions = tuple(controllers)
        self.namespaces = tuple(namespaces)
        self.user_agent = f"memop-test/{identity}"
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.leader_election = leader_election
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.stop_event = asyncio.Event()
        self.exit_code: int | None = None
        self._api: ApiClient | None = None
        self._task: asyncio.Task[int] | None = None
        self.manager: Manager
        self.controller: Controller  # the first one
        self.controllers: dict[str, Controller] = {}
        self.client: Client

    async def start(self, *, wait_synced: bool = True) -> RunningOperator:
        self._api = ApiClient(self.configuration)
        self.client = Client(self._api, user_agent=self.user_agent)
        self.manager = Manager(
            self.client,
            ManagerOptions(
                namespaces=self.namespaces,
                leader_election=self.leader_election,
                graceful_shutdown_timeout=self.graceful_shutdown_timeout,
            ),
        )
        for definition in self.definitions:
            recorder = self.manager.event_recorder(f"{definition.name}-controller", host=self.user_agent)
            controller = definition.setup(
                SetupContext(self.manager.cache, self.client, recorder, self.max_concurrent_reconciles)
            )
            self.controllers[definition.name] = controller
            self.manager.add(controller)
        self.controller = self.controllers[self.definitions[0].name]
        self._task = asyncio.create_task(self._run(), name=f"operator {self.user_agent}")
        if wait_synced:
            await wait_for(lambda: self.manager.cache.has_synced or self._task_done(), timeout=30)
        return self

    async def _run(self) -> int:
        self.exit_code = await self.manager.run(self.stop_event)
        return self.exit_code

    def _task_done(self) -> bool:
        return self._task is not None and self._task.done()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> int | None:
        self.stop_event.set()
        if self._task is not None:
            self.exit_code = await self._task
        if self._api is not None:
            await self._api.close()
            self._api = None
        return self.exit_code

    async def __aenter__(self) -> RunningOperator:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
