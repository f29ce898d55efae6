"""A scaffolded project, as its author gets it: ``memop init`` and three ``memop create api`` (a
namespaced kind and a cluster-scoped one with declared children, and a namespaced one with a
hand-written reconciler, ``--imperative``) in a fresh folder, then what the author runs.

- The project's own checks pass as generated: ``ruff check``, ``mypy`` (strict, its
  pyproject's settings) and its tests (``pytest``: unit tests, and end-to-end tests on memop's
  pytest plugin that run its controllers in-process against the in-memory API server, or,
  with ``USE_EXISTING_CLUSTER=true``, against that cluster, unchanged).
- Its README's run command, as written there: ``.venv/bin/python -m memop.testing serve --apply
  ...`` with the generated CRDs and samples, and ``.venv/bin/python -m PKG``, which reconciles
  the samples; the README's step 1 installs the project into that venv first.

The project is not installed: its tests import it from ``src/`` (its pytest settings say so)
and the operator runs with ``PYTHONPATH=src``, so nothing is left in the environment.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration

from memop.runtime import CONFIGMAPS, Client, NotFound, Resource
from memop.testing.cluster_e2e import SKIP_REASON
from memop.testing.wait import wait_for

PROJECT = "shop"
PACKAGE = "shop"
WIDGETS = Resource("cache.example.com", "v1alpha1", "widgets", "Widget")
GADGETS = Resource("infra.example.com", "v1", "gadgets", "Gadget", namespaced=False)
TIMEOUT = 60
BIN = Path(sys.executable).parent


def memop(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "memop", *args],
        check=False,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, f"memop {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project scaffolded as the README says, shared by the tests here (none changes it)."""
    root = tmp_path_factory.mktemp("scaffold") / PROJECT
    root.mkdir()
    memop(root, "init")
    memop(root, "create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Widget")
    memop(
        root, "create", "api", "--group", "infra", "--version", "v1", "--kind", "Gadget", "--cluster-scoped"
    )
    memop(root, "create", "api", "--group", "cache", "--version", "v1", "--kind", "Cart", "--imperative")
    return root


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MEMOP_"))}
    env.update(extra)
    return env


def check(root: Path, *command: str | Path, timeout: float = 120) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        check=False,
        cwd=root,
        capture_output=True,
        text=True,
        env=environment(MYPY_CACHE_DIR=str(root.parent / "mypy-cache")),
        timeout=timeout,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(map(str, command))} exited {done.returncode}:\n{output}"
    return output


def test_the_scaffold_writes_the_manifests_of_both_kinds(project: Path) -> None:
    crds = {path.name for path in (project / "manifests/crd").iterdir()}
    assert {"cache.example.com_widgets.yaml", "infra.example.com_gadgets.yaml"} <= crds
    samples = {path.name for path in (project / "manifests/samples").iterdir()}
    assert {"cache_v1alpha1_widget.yaml", "infra_v1_gadget.yaml"} <= samples
    check(project, "bash", "-n", ".ci/run")


def test_the_project_is_ruff_and_mypy_strict_clean(project: Path) -> None:
    check(project, BIN / "ruff", "check", "--no-cache", "src", "tests")
    output = check(project, sys.executable, "-m", "mypy")
    assert "Success: no issues found" in output


def test_the_projects_tests_pass_as_generated(project: Path) -> None:
    # USE_EXISTING_CLUSTER and KUBECONFIG pass through: on a real cluster, so do its e2e tests.
    output = check(project, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", timeout=180)
    assert "passed" in output
    assert "failed" not in output
    # Only the cluster e2e suite, unless the environment names a cluster and an image.
    if not os.environ.get("E2E_IMAGE"):
        assert "1 skipped" in output
        assert "tests/cluster_e2e/test_in_cluster.py:" in output
    # Each kind's unit and e2e tests, and the project's own.
    for name in (
        "test_widget.py",
        "test_widget_e2e.py",
        "test_gadget.py",
        "test_gadget_e2e.py",
        "test_cart.py",
        "test_cart_e2e.py",
        "test_project.py",
        "cluster_e2e/test_in_cluster.py",
    ):
        assert (project / "tests" / name).exists()


def run_cluster_e2e(project: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The project's cluster e2e suite, with ``env`` as its only E2E_* settings."""
    clean = {k: v for k, v in environment().items() if not k.startswith("E2E_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/cluster_e2e"],
        check=False,
        cwd=project,
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=120,
    )


def test_the_cluster_e2e_suite_skips_with_its_reason_without_a_cluster(project: Path) -> None:
    done = run_cluster_e2e(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    # -ra: the reason, whole, on the test's line.
    line = next(line for line in done.stdout.splitlines() if line.startswith("SKIPPED [1]"))
    assert line.endswith(f": {SKIP_REASON}"), line
    assert "tests/cluster_e2e/test_in_cluster.py:" in line


def test_the_cluster_e2e_suite_fails_in_one_line_when_its_settings_cannot_be_used(project: Path) -> None:
    done = run_cluster_e2e(project, E2E_IMAGE="shop:e2e", E2E_KUBECONFIG=str(project / "no-such-kubeconfig"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout
    assert f"the kubeconfig {project / 'no-such-kubeconfig'} is not a file" in done.stdout
    assert "1 failed" in done.stdout


def readme_step(project: Path, step: int) -> list[str]:
    """The command lines of the README's set-up step ``step`` (after its ``# N.`` comment)."""
    lines = (project / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# {step}. "))
    commands = []
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith("```"):
            break
        if not line.startswith("#"):
            commands.append(line)
    return commands


def test_the_readme_installs_the_project_before_it_runs_it(project: Path) -> None:
    # `python -m PKG` finds nothing under src/ until the project is installed: step 1 installs
    # it (editable, in a venv of its own), and steps 2 and 3 use that venv's Python.
    assert readme_step(project, 1) == ["python3 -m venv .venv && .venv/bin/pip install -e '.[test]'"]
    for command in [*readme_step(project, 2), *readme_step(project, 3)]:
        assert command.startswith(".venv/bin/python -m "), command


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts, terminated (by their id) and awaited after it."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in reversed(started):
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def test_the_readme_runs_the_operator_against_the_in_memory_server(
    project: Path, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    serve, run = readme_step(project, 2)
    kubeconfig = tmp_path / "kubeconfig"
    readme_kubeconfig = f"/tmp/{PROJECT}.kubeconfig"
    assert readme_kubeconfig in serve
    assert readme_kubeconfig in run

    def start(command: str, log: Path, **env: str) -> subprocess.Popen[bytes]:
        argv = shlex.split(command.replace(readme_kubeconfig, str(kubeconfig)))
        assert argv[0] == ".venv/bin/python"  # step 1's venv: here, this Python
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, *argv[1:]],
                cwd=project,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=environment(**env),
            )
        processes.append(process)
        return process

    server = start(serve, tmp_path / "serve.log")

    def written() -> bool:
        # The kubeconfig is written once the CRDs and samples are in: the server's readiness.
        assert server.poll() is None, (tmp_path / "serve.log").read_text()
        return kubeconfig.exists()

    await wait_for(written, timeout=TIMEOUT, message="the server wrote no kubeconfig")
    # The README's command as it is, the project found in src/ as step 1's install would; the
    # probes' ports off (memop reads each flag from its environment variable), as CI shares them.
    operator = start(
        run,
        tmp_path / "operator.log",
        PYTHONPATH=str(project / "src"),
        METRICS_BIND_ADDRESS="0",
        HEALTH_PROBE_BIND_ADDRESS="0",
    )
    configuration = Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with ApiClient(configuration) as api:
        client = Client(api, user_agent="e2e-test")

        async def reconciled() -> bool:
            assert operator.poll() is None, (tmp_path / "operator.log").read_text()
            widget = await client.get(WIDGETS, "widget-sample", "default")
            gadget = await client.get(GADGETS, "gadget-sample")
            try:
                config_maps = [
                    await client.get(CONFIGMAPS, name, "default")
                    for name in ("widget-sample", "gadget-sample")
                ]
            except NotFound:
                return False
            ready = [
                any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in (obj.get("status") or {}).get("conditions", [])
                )
                for obj in (widget, gadget)
            ]
            return all(ready) and all(cm["data"]["message"].startswith("Hello from") for cm in config_maps)

        await wait_for(reconciled, timeout=TIMEOUT, message=(tmp_path / "operator.log").read_text)
        await client.close()
    log = (tmp_path / "operator.log").read_text()
    assert f"starting {PROJECT} 0.1.0" in log
