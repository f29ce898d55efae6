"""An operator that is not memop's, run as its author would: a small package written here, outside
memop's tree, on memop's public surface alone.

The package ``cmsync`` (written into ``tmp_path``) has a ``copier`` controller (a ConfigMap
labelled ``cmsync.example.org/source`` gets a copy, ``NAME-copy``, with the same data, owned by
it) and a ``widget`` controller of a custom resource whose CRD is not installed. It runs:

- (a) with ``python -m memop --controller-module cmsync.project`` (the package on PYTHONPATH);
- (b) as ``python -m cmsync``, whose ``__main__`` is ``sys.exit(memop.run(PROJECT))``;
- (c) as a program that builds ``Manager`` and ``ManagerOptions`` itself, importing from memop
  only ``memop.runtime``'s exports (checked on its source);
- (d) installed (a distribution with its ``memop.controllers`` entry point, laid out as pip
  installs one): plain ``memop`` runs it, and memop's three only with ``--project memop``.

Each time the copier reconciles, and the process names itself after the project, never after
memop: its start line and logger, its Lease, its user agent (the API server's managedFields
name the copy's manager after it), its Events' source, its metrics. Runs unchanged against a
real cluster (``USE_EXISTING_CLUSTER=true``): everything lives in the test's namespace.
"""

from __future__ import annotations

import ast
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from memop import __version__, runtime
from memop.runtime import CONFIGMAPS, EVENTS, LEASES, Client, NotFound
from memop.testing.envtest import Kube
from memop.testing.process import MemopProcess, sample_value
from memop.testing.wait import wait_for

TIMEOUT = 60
SOURCE_LABEL = "cmsync.example.org/source"

PACKAGE: dict[str, str] = {
    "cmsync/__init__.py": '"""cmsync: copies ConfigMaps, on memop."""\n',
    "cmsync/controller.py": '''
        """The copier: a ConfigMap labelled cmsync.example.org/source gets a copy, NAME-copy, with
        its data, owned by it; and the widget controller, of a kind whose CRD is not installed."""

        from __future__ import annotations

        import logging

        from memop.runtime import (
            CONFIGMAPS,
            NORMAL,
            AlreadyExists,
            Cache,
            Client,
            Controller,
            ControllerBuilder,
            ControllerDefinition,
            EventRecorder,
            Request,
            Resource,
            Result,
            SetupContext,
            controller_reference,
            dig,
            watched,
        )

        SOURCE = "cmsync.example.org/source"
        WIDGETS = Resource("cmsync.example.org", "v1alpha1", "widgets", "Widget")
        log = logging.getLogger("cmsync.copier")


        class Copier:
            def __init__(self, client: Client, cache: Cache, recorder: EventRecorder) -> None:
                self.client, self.cache, self.recorder = client, cache, recorder

            async def reconcile(self, request: Request) -> Result | None:
                source = self.cache.get(CONFIGMAPS, request.name, request.namespace)
                if source is None or SOURCE not in (dig(source, "metadata", "labels") or {}):
                    return None
                name, data = f"{request.name}-copy", dict(source.get("data") or {})
                copy = self.cache.get(CONFIGMAPS, name, request.namespace)
                if copy is None:
                    desired = {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {
                            "name": name,
                            "namespace": request.namespace,
                            "ownerReferences": [controller_reference(source, CONFIGMAPS)],
                        },
                        "data": data,
                    }
                    try:
                        written = await self.client.create(CONFIGMAPS, desired)
                    except AlreadyExists:
                        return Result(requeue=True)  # the cache has not seen it yet
                elif (copy.get("data") or {}) != data:
                    gone = {key: None for key in copy.get("data") or {} if key not in data}
                    patch = {"data": {**gone, **data}}
                    written = await self.client.patch(CONFIGMAPS, name, patch, request.namespace)
                else:
                    return None
                self.cache.record_write(CONFIGMAPS, written)
                log.info("copied %s into %s", request.name, name)
                self.recorder.record(source, NORMAL, "Copied", f"copied into {name}")
                return None


        def setup_copier(context: SetupContext) -> Controller:
            return (
                ControllerBuilder(context.cache, "copier")
                .for_(CONFIGMAPS)
                .owns(CONFIGMAPS)
                .build(Copier(context.client, context.cache, context.recorder))
            )


        class Nothing:
            async def reconcile(self, request: Request) -> Result | None:
                return None


        def setup_widget(context: SetupContext) -> Controller:
            return ControllerBuilder(context.cache, "widget").for_(WIDGETS).build(Nothing())


        COPIER = ControllerDefinition(
            name="copier",
            description="copies a labelled ConfigMap's data into NAME-copy",
            setup=setup_copier,
            crds=lambda: [],
            rules=(
                *watched("", "configmaps", "cache; start-up check", "list", "watch"),
                *watched("", "configmaps", "the copies", "create", "patch"),
            ),
            samples=lambda: {},
        )
        WIDGET = ControllerDefinition(
            name="widget",
            description="a kind whose CRD is not installed",
            setup=setup_widget,
            crds=lambda: [],
            rules=(),
            samples=lambda: {},
        )
    ''',
    "cmsync/project.py": """
        import memop
        from cmsync.controller import COPIER, WIDGET

        PROJECT = memop.Project(
            name="cmsync",
            domain="example.org",
            controllers=(COPIER, WIDGET),
            version="0.3.0",
            description="copies ConfigMaps",
        )
    """,
    "cmsync/__main__.py": """
        import sys

        import memop
        from cmsync.project import PROJECT

        sys.exit(memop.run(PROJECT))
    """,
    "cmsync/program.py": '''
        """The copier run by a program of its own: a Manager built from memop.runtime's exports."""

        from __future__ import annotations

        import asyncio
        import signal
        import sys

        from memop.runtime import (
            Address,
            Client,
            KubeConfigError,
            LeaderElectionConfig,
            Manager,
            ManagerOptions,
            SetupContext,
            configure_logging,
            default_identity,
            load_configuration,
        )

        from kubernetes_asyncio.client import ApiClient  # after memop: it loads only what it uses

        from cmsync.controller import COPIER


        async def main(kubeconfig: str, namespace: str) -> int:
            configure_logging("info", "json")
            try:
                configuration = await load_configuration(kubeconfig)
            except KubeConfigError as error:
                print(f"cmsync-program: {error}", file=sys.stderr)
                return 1
            identity = default_identity()
            stop = asyncio.Event()
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            async with ApiClient(configuration) as api:
                client = Client(api, user_agent=f"cmsync-program/0.3.0 ({identity})")
                options = ManagerOptions(
                    namespaces=(namespace,),
                    leader_election=LeaderElectionConfig(
                        lease_name="cmsync-program.example.org", namespace=namespace, identity=identity
                    ),
                    probe_address=Address("127.0.0.1", 0),
                    metrics_address=Address("127.0.0.1", 0),
                )
                manager = Manager(client, options)
                recorder = manager.event_recorder("copier-controller")
                manager.add(COPIER.setup(SetupContext(manager.cache, client, recorder)))
                try:
                    return await manager.run(stop)
                finally:
                    await client.close()


        if __name__ == "__main__":
            sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
    ''',
}


def write_package(root: Path) -> Path:
    """The cmsync package under ``root``; returns ``root`` (for PYTHONPATH)."""
    for name, text in PACKAGE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def install_distribution(site: Path) -> None:
    """cmsync as pip installs it into ``site``: its modules, and its metadata with the
    ``memop.controllers`` entry point (pip writes the same files; no build backend needed here)."""
    write_package(site)
    info = site / "cmsync-0.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cmsync\nVersion: 0.3.0\n")
    (info / "entry_points.txt").write_text("[memop.controllers]\ncmsync = cmsync.project:PROJECT\n")


class Process(MemopProcess):
    """A process started as ``python -m MODULE`` with memop's flags (or ``arguments`` alone)."""

    def __init__(
        self, module: str, kubeconfig: Path, args: list[str], env: dict[str, str], *, arguments: bool = False
    ) -> None:
        super().__init__(kubeconfig, args, env=env)
        self.module = module
        self.arguments = arguments

    @property
    def command(self) -> list[str]:
        if self.arguments:
            return [sys.executable, "-m", self.module, *self.args]
        return [sys.executable, "-m", self.module, *super().command[3:]]


@pytest.fixture
def kubeconfig(kube: Kube, tmp_path: Path) -> Path:
    """A kubeconfig for processes: the in-memory server's, or the real cluster's."""
    if kube.server is None:
        return Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
    path = tmp_path / "kubeconfig"
    kube.server.write_kubeconfig(path)
    return path


async def get(client: Client, resource: runtime.Resource, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return await client.get(resource, name, namespace)
    except NotFound:
        return None


async def copies(client: Client, namespace: str, source: str, process: MemopProcess) -> dict[str, Any]:
    """Create the source ConfigMap, change its data; the copy follows each time. The copy."""
    await client.create(
        CONFIGMAPS,
        {"metadata": {"name": source, "labels": {SOURCE_LABEL: "true"}}, "data": {"a": "1", "b": "2"}},
        namespace,
    )

    async def copy_has(data: dict[str, str]) -> dict[str, Any] | None:
        if process.returncode is not None:
            raise AssertionError(f"the operator exited with {process.returncode}:\n{process._tail()}")
        copy = await get(client, CONFIGMAPS, f"{source}-copy", namespace)
        return copy if copy is not None and copy.get("data") == data else None

    await wait_for(lambda: copy_has({"a": "1", "b": "2"}), timeout=TIMEOUT, message=process._tail)
    await client.patch(CONFIGMAPS, source, {"data": {"a": "10", "b": None, "c": "3"}}, namespace)
    copy: dict[str, Any] | None = await wait_for(
        lambda: copy_has({"a": "10", "c": "3"}), timeout=TIMEOUT, message=process._tail
    )
    assert copy is not None
    assert copy["metadata"]["ownerReferences"][0]["name"] == source
    return copy


async def check_named_after_the_project(
    kube: Kube, client: Client, namespace: str, process: MemopProcess, copy: dict[str, Any]
) -> None:
    start = await process.wait_log(lambda r: str(r.get("msg", "")).startswith("starting "))
    assert (start["msg"], start["logger"], start["controllers"]) == (
        "starting cmsync 0.3.0",
        "cmsync",
        "copier",
    )
    assert start["memop"] == __version__
    lease = await wait_for(
        lambda: get(client, LEASES, "cmsync-leader.example.org", namespace), timeout=TIMEOUT
    )
    assert lease["spec"]["holderIdentity"] == start["identity"]
    assert process.identity() == start["identity"]
    assert process.user_agent() == f"cmsync/0.3.0 ({start['identity']})"
    # The API server names a write's manager after its user agent (up to the first '/').
    assert {entry["manager"] for entry in copy["metadata"].get("managedFields") or ()} == {"cmsync"}
    if kube.server is not None:
        agent = f"cmsync/0.3.0 ({start['identity']})"
        assert kube.server.log.count(user_agent=agent, resource="configmaps") > 0
        assert kube.server.log.count(user_agent="memop/") == 0

    async def copied_event() -> dict[str, Any] | None:
        events = (await client.list(EVENTS, namespace))["items"]
        return next((e for e in events if e.get("reason") == "Copied"), None)

    event = await wait_for(copied_event, timeout=TIMEOUT)
    assert event["source"]["component"] == "copier-controller"
    assert event["involvedObject"]["name"] == copy["metadata"]["ownerReferences"][0]["name"]
    samples = await process.samples()
    assert sample_value(samples, "memop_build_info", name="cmsync", version="0.3.0") == 1
    assert sample_value(samples, "controller_runtime_reconcile_total", controller="copier", result="success")
    assert sample_value(samples, "controller_runtime_reconcile_total", controller="memcached") is None


async def test_memop_runs_a_controller_module(
    kube: Kube, client: Client, namespace: str, kubeconfig: Path, tmp_path: Path
) -> None:
    root = write_package(tmp_path / "src")
    process = Process(
        "memop",
        kubeconfig,
        ["--controller-module", "cmsync.project", "--controllers=copier", "--watch-namespace", namespace,
         "--leader-elect", "--leader-election-namespace", namespace],
        env={"PYTHONPATH": str(root)},
    )  # fmt: skip
    await process.start()
    try:
        await process.wait_ready(TIMEOUT)
        copy = await copies(client, namespace, "settings", process)
        await check_named_after_the_project(kube, client, namespace, process, copy)
    finally:
        assert await process.terminate() == 0, process._tail()


async def test_a_package_runs_its_project_with_memop_run(
    kube: Kube, client: Client, namespace: str, kubeconfig: Path, tmp_path: Path
) -> None:
    root = write_package(tmp_path / "src")
    env = {"PYTHONPATH": str(root)}
    process = Process(
        "cmsync",
        kubeconfig,
        ["--watch-namespace", namespace, "--leader-elect"],
        # Every flag has its variable, for a program's own project too.
        env={**env, "CONTROLLERS": "copier", "LEADER_ELECTION_NAMESPACE": namespace},
    )
    await process.start()
    try:
        await process.wait_ready(TIMEOUT)
        copy = await copies(client, namespace, "settings", process)
        await check_named_after_the_project(kube, client, namespace, process, copy)
    finally:
        assert await process.terminate() == 0, process._tail()


async def test_memop_run_checks_flags_as_memop_does(kubeconfig: Path, namespace: str, tmp_path: Path) -> None:
    root = write_package(tmp_path / "src")
    env = {"PYTHONPATH": str(root)}

    async def finish(*args: str, arguments: bool = False) -> tuple[int, list[str]]:
        process = Process("cmsync", kubeconfig, list(args), env, arguments=arguments)
        await process.start()
        code = await process.wait(TIMEOUT)
        return code, process.lines

    # A program that chose its project offers no --project, and names itself in its errors.
    assert await finish("--project", "memop", arguments=True) == (
        2,
        ["python -m cmsync: error: unrecognized arguments: --project memop"],
    )
    assert await finish("--version", arguments=True) == (0, [f"cmsync 0.3.0 (memop {__version__})"])
    assert await finish("--controllers=memcached", arguments=True) == (
        2,
        ["python -m cmsync: error: --controllers: unknown controller 'memcached' (known: copier, widget; '*' "
         "for all)"],
    )  # fmt: skip
    # The widget's CRD is missing: one line, with the advice to leave it out.
    scoped = ("--watch-namespace", namespace, "--metrics-bind-address=0", "--health-probe-bind-address=0")
    code, lines = await finish(*scoped, "--kubeconfig", str(kubeconfig), arguments=True)
    assert code == 1
    [error] = [line for line in lines if '"level": "error"' in line]
    assert "the widget controller needs widgets.cmsync.example.org/v1alpha1 (Widget)" in error
    assert "install the CustomResourceDefinition widgets.cmsync.example.org" in error
    assert "or leave the widget controller out: --controllers=copier" in error
    code, lines = await finish(
        *scoped, "--kubeconfig", str(kubeconfig), "--controllers=widget", arguments=True
    )
    assert code == 1
    assert (
        "or run python -m cmsync with --controllers naming the controllers whose CRDs are installed"
        in "".join(lines)
    )


def test_the_program_imports_nothing_private_from_memop() -> None:
    tree = ast.parse(textwrap.dedent(PACKAGE["cmsync/program.py"]))
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "memop":
            assert node.module == "memop.runtime", node.module
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            assert not [a.name for a in node.names if a.name.split(".")[0] == "memop"]
    assert {"Manager", "ManagerOptions", "LeaderElectionConfig", "Address", "load_configuration"} <= set(
        imported
    )
    assert set(imported) <= set(runtime.__all__)
    # The controller module too: what a controller is written with is exported.
    tree = ast.parse(textwrap.dedent(PACKAGE["cmsync/controller.py"]))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memop"):
            assert node.module == "memop.runtime"
            assert {alias.name for alias in node.names} <= set(runtime.__all__)


async def test_a_program_builds_and_runs_its_own_manager(
    client: Client, namespace: str, kubeconfig: Path, tmp_path: Path
) -> None:
    root = write_package(tmp_path / "src")
    process = Process(
        "cmsync.program", kubeconfig, [str(kubeconfig), namespace], {"PYTHONPATH": str(root)}, arguments=True
    )
    await process.start()
    try:
        await process.wait_ready(TIMEOUT)
        copy = await copies(client, namespace, "settings", process)
        assert {entry["manager"] for entry in copy["metadata"].get("managedFields") or ()} == {
            "cmsync-program"
        }
        assert await wait_for(
            lambda: get(client, LEASES, "cmsync-program.example.org", namespace), timeout=TIMEOUT
        )
    finally:
        assert await process.terminate() == 0, process._tail()


async def test_an_installed_project_runs_instead_of_memops_own(
    client: Client, namespace: str, kubeconfig: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    install_distribution(site)
    env = {"PYTHONPATH": str(site)}
    scoped = ["--watch-namespace", namespace]
    mine = Process("memop", kubeconfig, [*scoped, "--controllers=copier"], env)
    memops = Process("memop", kubeconfig, [*scoped, "--project", "memop"], env)
    await mine.start()
    await memops.start()
    try:
        await mine.wait_ready(TIMEOUT)
        await copies(client, namespace, "installed", mine)
        started = await mine.wait_log(lambda r: str(r.get("msg", "")).startswith("starting "))
        assert (started["msg"], started["controllers"]) == ("starting cmsync 0.3.0", "copier")
        started = await memops.wait_log(lambda r: str(r.get("msg", "")).startswith("starting "))
        assert (started["msg"], started["controllers"]) == (
            f"starting memop {__version__}",
            "memcached,podset,mypod",
        )
    finally:
        assert await mine.terminate() == 0, mine._tail()
        await memops.stop()
