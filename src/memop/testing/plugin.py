"""memop's pytest plugin: a cluster, a client, a namespace, CRDs and an operator, for any project's tests.

Installed with memop (the ``pytest11`` entry point ``memop``), so a project's tests just ask
for the fixtures; ``-p no:memop`` switches the plugin off. Fixtures (all function-scoped):

- ``kube`` (:class:`~memop.testing.envtest.Kube`): the cluster. A fresh in-memory
  :class:`~memop.testing.apiserver.server.ApiServer` on 127.0.0.1 (a free port, HTTPS with a CA of its
  own, kube-controller-manager's controllers and kubelets simulated), stopped after the test;
  or, with ``USE_EXISTING_CLUSTER=true`` and ``KUBECONFIG``, the real cluster that names, as
  envtest does. ``USE_EXISTING_CLUSTER=true`` without ``KUBECONFIG`` is a usage error (pytest
  exits 4 with one line) when a collected test needs ``kube``: memop never picks a cluster
  by itself. ``kube.server`` is None on a real cluster; ``kube.fake`` skips the test there.
  Override the fixture ``apiserver_options`` (keyword arguments of ``ApiServer``) to start
  the in-memory server otherwise, e.g. with kube-apiserver's feature gates it implements:
  ``feature_gates={"ShardedListAndWatch": True}`` (``shardSelector`` on lists and watches).
  Override ``extra_kinds`` (a list of :class:`memop.testing.Kind`, empty by default) to serve
  kinds the in-memory server lacks, such as an aggregated API (see :mod:`memop.testing.kinds`);
  a real cluster serves what it serves.
- ``client`` (:class:`memop.runtime.Client`): a client of that cluster, user agent
  ``pytest/memop``.
- ``namespace`` (str): a fresh namespace ``test-<10 hex digits>``. After the test the
  finalizers of the objects of the CRDs ``install_crds`` installed are dropped in it (the
  operator that owns them has stopped: nothing else would remove them), it is deleted, and
  the fixture waits until it is gone (as long as the ini option ``memop_namespace_timeout``
  says, 120 s by default, 0 not to wait; not on an in-memory server started without
  ``simulate_controllers``, which has no namespace controller to empty it). Other objects
  with finalizers nobody removes hold it: remove them before the test ends, else the
  teardown fails naming them.
- ``install_crds``: ``await install_crds(DEFINITION_or_PROJECT_or_CRD, ...)`` creates each CRD
  (updates it when the cluster has it already) and waits until it is Established. CRDs are
  never deleted: on a real cluster they stay installed, as envtest's existing-cluster mode
  leaves them.
- ``run_operator``: ``async with run_operator(DEFINITION_or_PROJECT, namespaces=(ns,)) as
  operator:`` runs a manager with those controllers in the test's event loop (leader
  election off unless ``leader_election=`` is given; ``max_concurrent_reconciles=2``), cache
  synced on entry, stopped on exit. If the manager exits on its own (exit 1 on a missing CRD,
  say) the test fails at once with the exit code and the manager's last log lines
  (:class:`~memop.testing.operator.OperatorExited`): from the ``async with`` line when it
  happens while starting, else the block is interrupted where it waits. Operators started
  otherwise are stopped after the test, which fails then if one had exited. With
  ``rbac=True`` the manager runs as the project's ServiceAccount with the RBAC its manifests
  grant (applied first, on either cluster), so a permission they lack fails the test with the
  API server's 403 message; without it, it runs as the test's administrator.

Also, in every test, "nothing edits a cached object": the plugin sets ``MEMOP_CHECK_CACHE=1``
(unless the environment sets it), so every memop cache fingerprints what it stores, and a test
fails when a reader changed a cached object in place. Turn that off with ``memop_check_cache =
false`` in the pytest configuration (or ``MEMOP_CHECK_CACHE=0``).

The async fixtures are declared with ``pytest_asyncio.fixture``, so they work in pytest-asyncio's
``auto`` and ``strict`` modes alike (in strict mode tests are marked ``@pytest.mark.asyncio``).
They run in the event loop ``asyncio_default_fixture_loop_scope`` names (the function's by
default), which must be the loop the tests run in.

Loading the plugin imports the ``memop`` package alone (pytest loads it in every session); the
runtime and the in-memory server are imported when a fixture first runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from memop.runtime.client.client import Client
    from memop.runtime.leaderelection.lease import LeaderElectionConfig
    from memop.runtime.sharding.membership import ShardingConfig
    from memop.runtime.webhook.server import WebhookServerOptions
    from memop.testing.envtest import Kube
    from memop.testing.operator import Controllers, CrdSource, RunningOperator

# memop.runtime.cache.store.CHECK_ENV, named here so that loading the plugin imports nothing of memop.
CHECK_CACHE_ENV = "MEMOP_CHECK_CACHE"
STORE_MODULE = "memop.runtime.cache.store"
CHECK_CACHE_INI = "memop_check_cache"
NAMESPACE_TIMEOUT_INI = "memop_namespace_timeout"
CLIENT_USER_AGENT = "pytest/memop"
NAMESPACE_PREFIX = "test-"

try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - memop[test] installs it; without it say so, once per test
    pytest_asyncio = None  # type: ignore[assignment]


def _async_fixture(function: Callable[..., Any]) -> Any:
    """``pytest_asyncio.fixture``; without pytest-asyncio, a fixture failing with what to install."""
    if pytest_asyncio is not None:
        return pytest_asyncio.fixture(function)

    def missing() -> None:
        pytest.fail("memop's async fixtures need pytest-asyncio: pip install pytest-asyncio", pytrace=False)

    missing.__name__ = function.__name__
    missing.__doc__ = function.__doc__
    return pytest.fixture(name=function.__name__)(missing)


class InstallCrds(Protocol):
    """The ``install_crds`` fixture: install CRDs, wait until Established, return them."""

    async def __call__(self, *sources: CrdSource, timeout: float = 30.0) -> list[dict[str, Any]]: ...


class RunOperator(Protocol):
    """The ``run_operator`` fixture: a RunningOperator on the test's cluster, not yet started."""

    def __call__(
        self,
        controllers: Controllers,
        *,
        namespaces: Sequence[str] = (),
        max_concurrent_reconciles: int = 2,
        leader_election: LeaderElectionConfig | None = None,
        sharding: ShardingConfig | None = None,
        identity: str = "memop-test",
        graceful_shutdown_timeout: float = 5.0,
        webhooks: WebhookServerOptions | bool | None = None,
        rbac: bool = False,
    ) -> RunningOperator: ...


# --- configuration ------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        CHECK_CACHE_INI,
        type="bool",
        default=True,
        help="memop: fail a test whose code changed an object of a memop cache in place (default: true)",
    )
    parser.addini(
        NAMESPACE_TIMEOUT_INI,
        default="120",
        help="memop: seconds the namespace fixture waits for its namespace to be deleted (0: do not wait)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getini(CHECK_CACHE_INI):
        # Before any cache is made; memop processes the tests start inherit it.
        os.environ.setdefault(CHECK_CACHE_ENV, "1")


def pytest_report_header(config: pytest.Config) -> str:
    from memop.testing import envtest  # noqa: PLC0415 - light: pytest and the standard library

    if envtest.existing_cluster_requested():
        kubeconfig = os.environ.get("KUBECONFIG", "")
        return f"memop: existing cluster (USE_EXISTING_CLUSTER=true, KUBECONFIG={kubeconfig})"
    return "memop: in-memory API server (USE_EXISTING_CLUSTER=true and KUBECONFIG for a real cluster)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from memop.testing import envtest  # noqa: PLC0415

    error = envtest.existing_cluster_error()
    if error is not None and any("kube" in getattr(item, "fixturenames", ()) for item in items):
        raise pytest.UsageError(error)


# --- nothing edits a cached object ---------------------------------------------------------------


@pytest.fixture(autouse=True)
def _memop_cached_objects_stay_unchanged(request: pytest.FixtureRequest) -> Iterator[None]:
    if not request.config.getini(CHECK_CACHE_INI):
        yield
        return
    # The store module is looked up, not imported: a test that never made a cache pays nothing.
    store = sys.modules.get(STORE_MODULE)
    before = len(store.MUTATIONS_DETECTED) if store is not None else 0
    yield
    store = sys.modules.get(STORE_MODULE)
    changed = store.MUTATIONS_DETECTED[before:] if store is not None else []
    if changed:
        pytest.fail(
            "a cached object was changed in place (cached objects are read-only; copy before editing): "
            + ", ".join(f"{resource} {'/'.join(p for p in key if p)}" for resource, key in changed),
            pytrace=False,
        )


# --- the cluster -------------------------------------------------------------------------------


@pytest.fixture
def apiserver_options() -> dict[str, Any]:
    """Keyword arguments of the in-memory ApiServer ``kube`` starts (ignored on a real cluster).

    Override this fixture in a conftest.py to change them, e.g. ``pod_ready_delay``.
    """
    return {"tls": True, "simulate_controllers": True}


@pytest.fixture
def extra_kinds() -> list[Any]:
    """Kinds the in-memory server ``kube`` starts serves besides its built-in ones
    (:class:`memop.testing.Kind` values; ignored on a real cluster).

    Override this fixture in a conftest.py (or a test module) to add an aggregated API or a
    kind the server lacks; ``apiserver_options`` may also name ``extra_kinds`` itself.
    """
    return []


@_async_fixture
async def kube(apiserver_options: dict[str, Any], extra_kinds: list[Any]) -> AsyncIterator[Kube]:
    """The test's cluster: in-memory, or real with USE_EXISTING_CLUSTER=true (module docstring)."""
    from memop.testing import envtest  # noqa: PLC0415

    options = dict(apiserver_options)
    if extra_kinds:
        options["extra_kinds"] = [*options.get("extra_kinds", ()), *extra_kinds]
    async with contextlib.AsyncExitStack() as stack:
        try:
            cluster = await stack.enter_async_context(envtest.cluster(**options))
        except ValueError as error:
            pytest.fail(str(error), pytrace=False)
        yield cluster


@_async_fixture
async def client(kube: Kube) -> AsyncIterator[Client]:
    """A memop client of the test's cluster (user agent ``pytest/memop``)."""
    from kubernetes_asyncio.client import ApiClient  # noqa: PLC0415

    from memop.runtime.client.client import Client  # noqa: PLC0415

    async with ApiClient(kube.configuration) as api:
        yield Client(api, user_agent=CLIENT_USER_AGENT)


@pytest.fixture
def _memop_installed_crds() -> list[dict[str, Any]]:
    """The CRDs install_crds installed during this test (the namespace fixture's cleanup reads them)."""
    return []


@_async_fixture
async def install_crds(kube: Kube, _memop_installed_crds: list[dict[str, Any]]) -> AsyncIterator[InstallCrds]:
    """``await install_crds(*sources)``: see :func:`memop.testing.operator.install_crds`.

    It has a client of its own, so that a project's conftest can override ``client`` with one
    that installs its CRDs first.
    """
    from kubernetes_asyncio.client import ApiClient  # noqa: PLC0415

    from memop.runtime.client.client import Client  # noqa: PLC0415
    from memop.testing import operator  # noqa: PLC0415

    async with ApiClient(kube.configuration) as api:
        own = Client(api, user_agent=CLIENT_USER_AGENT)

        async def install(*sources: CrdSource, timeout: float = 30.0) -> list[dict[str, Any]]:
            crds = await operator.install_crds(own, *sources, timeout=timeout)
            _memop_installed_crds.extend(crds)
            return crds

        yield install


@_async_fixture
async def namespace(
    kube: Kube, client: Client, _memop_installed_crds: list[dict[str, Any]], request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    """A fresh namespace, deleted after the test (see the module docstring)."""
    from memop.runtime.client.resources import NAMESPACES  # noqa: PLC0415

    name = f"{NAMESPACE_PREFIX}{uuid.uuid4().hex[:10]}"
    await client.create(NAMESPACES, {"metadata": {"name": name}})
    yield name
    timeout = float(request.config.getini(NAMESPACE_TIMEOUT_INI))
    await _delete_namespace(kube, client, name, _memop_installed_crds, timeout)


async def _delete_namespace(
    kube: Kube, client: Client, name: str, crds: list[dict[str, Any]], timeout: float
) -> None:
    from memop.runtime.client.errors import NotFound  # noqa: PLC0415
    from memop.runtime.client.resources import NAMESPACES  # noqa: PLC0415
    from memop.testing.operator import crd_resource, release_finalizers  # noqa: PLC0415
    from memop.testing.wait import WaitTimeout, wait_for  # noqa: PLC0415

    for crd in crds:
        resource = crd_resource(crd)
        if resource.namespaced:
            with contextlib.suppress(NotFound):  # the test deleted the CRD
                await release_finalizers(client, resource, name)
    with contextlib.suppress(NotFound):
        await client.delete(NAMESPACES, name)
    # Only a namespace controller empties and removes a deleted namespace: every real cluster
    # runs one, the in-memory server only when it simulates kube-controller-manager.
    if timeout <= 0 or (kube.server is not None and kube.server.controllers is None):
        return

    async def gone() -> bool:
        try:
            await client.get(NAMESPACES, name)
        except NotFound:
            return True
        return False

    try:
        await wait_for(gone, timeout=timeout, interval=0.5 if kube.server is None else 0.02)
    except WaitTimeout:
        try:
            current = await client.get(NAMESPACES, name)
        except NotFound:
            return
        conditions = [
            f"{c.get('type')}: {c.get('message')}"
            for c in (current.get("status") or {}).get("conditions") or []
            if c.get("status") == "True"
        ]
        why = "; ".join(conditions) or "no condition"
        pytest.fail(
            f"namespace {name} still there {timeout:g}s after its deletion ({why}): remove the "
            "finalizers nobody will remove (their operator is stopped) before the test ends",
            pytrace=False,
        )


# --- the operator ------------------------------------------------------------------------------


@_async_fixture
async def run_operator(kube: Kube) -> AsyncIterator[RunOperator]:
    """A factory of RunningOperators on the test's cluster; each is stopped after the test."""
    from memop.testing.operator import RunningOperator  # noqa: PLC0415

    made: list[RunningOperator] = []

    def factory(controllers: Controllers, **options: Any) -> RunningOperator:
        # The options and their defaults are RunningOperator's (RunOperator states them).
        operator = RunningOperator(kube.configuration, controllers=controllers, **options)
        made.append(operator)
        return operator

    yield factory
    unreported = []
    for operator in made:
        await operator.stop()
        failure = operator.failure()
        if failure is not None and not operator.reported:
            unreported.append(str(failure))
    if unreported:
        pytest.fail("\n".join(unreported), pytrace=False)
