"""memop's pytest plugin as a project sees it: pytest run on a project of its own (pytester).

The project is ``echo`` (tests/testing/echo_operator.py, copied as it is) and test files using
only the plugin's fixtures, run in a pytest subprocess that finds the plugin through its
``pytest11`` entry point, in pytest-asyncio's auto and strict modes. The environment of each
run is set here (USE_EXISTING_CLUSTER, KUBECONFIG), whatever the outer run's is.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from memop.testing.plugin import CHECK_CACHE_ENV
from memop.testing.process import serving

pytest_plugins = ["pytester"]

ECHO_SOURCE = (Path(__file__).parent / "echo_operator.py").read_text()
PROMPT = 10.0  # seconds: "at once", far below the 30 s a wait for a dead operator would time out after

# A project's e2e test, as a user writes it. __MARK__ becomes "" in auto mode, the asyncio mark in
# strict mode; __REAL__ whether the cluster is a real one.
PROJECT_TESTS = """
import pytest
import pytest_asyncio
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import NAMESPACES

from echo import ECHOES, PROJECT, echo


@pytest_asyncio.fixture
async def namespace_gone_after(client):
    \"\"\"Asked for before ``namespace``, so torn down after it: by then the namespace is gone.\"\"\"
    names = []
    yield names
    for name in names:
        with pytest.raises(NotFound):
            await client.get(NAMESPACES, name)
        print(f"GONE {name}")


__MARK__
async def test_echo(namespace_gone_after, kube, client, namespace, install_crds, run_operator):
    namespace_gone_after.append(namespace)
    assert kube.real is __REAL__
    await install_crds(PROJECT)
    async with run_operator(PROJECT, namespaces=[namespace]) as operator:
        held = echo("held", "hello")
        held["metadata"]["finalizers"] = ["test.example.com/hold"]  # only the plugin removes it
        await client.create(ECHOES, held, namespace)

        async def echoed():
            current = await client.get(ECHOES, "held", namespace)
            return (current.get("status") or {}).get("echo") == "hello"

        await operator.wait_for(echoed, timeout=30)
    print(f"HOST {kube.configuration.host} NAMESPACE {namespace}")
"""


def project_tests(mark: str, *, real: bool) -> str:
    return PROJECT_TESTS.replace("__MARK__", mark).replace("__REAL__", str(real))


def write_project(pytester: pytest.Pytester, tests: str) -> None:
    pytester.makepyfile(echo=ECHO_SOURCE)
    pytester.makepyfile(test_project=tests)


def run(pytester: pytest.Pytester, mode: str, *args: str) -> pytest.RunResult:
    # Without hypothesis's plugin, which the project does not use: it is most of pytest's start-up.
    options = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-o", f"asyncio_mode={mode}")
    return pytester.runpytest_subprocess(
        *options, "-o", "asyncio_default_fixture_loop_scope=function", *args, timeout=300
    )


@pytest.fixture
def in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs use the in-memory server, whatever cluster the outer run uses."""
    monkeypatch.delenv("USE_EXISTING_CLUSTER", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)


def mark(mode: str) -> str:
    return "@pytest.mark.asyncio" if mode == "strict" else ""


def junit_times(path: Path) -> dict[str, float]:
    """Each test's time (setup, call and teardown) from a JUnit XML report."""
    return {case.attrib["name"]: float(case.attrib["time"]) for case in ET.parse(path).iter("testcase")}


@pytest.mark.parametrize("mode", ["auto", "strict"])
def test_a_projects_test_passes_on_the_in_memory_server(
    pytester: pytest.Pytester, in_memory: None, mode: str
) -> None:
    write_project(pytester, project_tests(mark(mode), real=False))
    result = run(pytester, mode, "-s")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "memop: in-memory API server" in out
    found = re.search(r"HOST (\S+) NAMESPACE (\S+)", out)
    assert found is not None, out
    assert found[1].startswith("https://127.0.0.1:")  # HTTPS, as every cluster
    assert f"GONE {found[2]}" in out  # checked after the namespace fixture's teardown


def test_with_use_existing_cluster_the_same_test_runs_on_that_cluster(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_project(pytester, project_tests("", real=True))
    # The "existing cluster": an API server in another process, reached through a kubeconfig
    # only, with a namespace controller that empties and removes deleted namespaces.
    with serving(tmp_path / "kubeconfig", "--simulate-controllers") as server:
        monkeypatch.setenv("USE_EXISTING_CLUSTER", "true")
        monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig))
        result = run(pytester, "auto", "-s")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert f"memop: existing cluster (USE_EXISTING_CLUSTER=true, KUBECONFIG={server.kubeconfig})" in out
    found = re.search(r"HOST (\S+) NAMESPACE (\S+)", out)
    assert found is not None, out
    assert found[1] == server.url
    assert f"GONE {found[2]}" in out


EXITING_TESTS = """
import asyncio
import pytest
from memop.runtime import LeaderElectionConfig
from memop.testing.wait import wait_for

from echo import DEFINITION


__MARK__
async def test_forgot_the_crd(namespace, run_operator):
    async with run_operator(DEFINITION, namespaces=[namespace]):
        await asyncio.Event().wait()  # not reached: the manager exits at once


__MARK__
async def test_lost_the_lease_unnoticed(kube, namespace, install_crds, run_operator):
    await install_crds(DEFINITION)
    election = LeaderElectionConfig(
        lease_name="echo", namespace=namespace, identity="one",
        lease_duration=2, renew_deadline=1.5, retry_period=0.2,
    )
    operator = await run_operator(DEFINITION, namespaces=[namespace], leader_election=election).start()
    await wait_for(operator.manager.leading.is_set, timeout=30)
    kube.fake.faults.fail(500, times=None, verb="update", resource="leases")
    await wait_for(lambda: not operator.running, timeout=30)  # then the test ends as if all was well
"""


@pytest.mark.parametrize("mode", ["auto", "strict"])
def test_a_manager_that_exits_fails_the_test_at_once_with_its_log_lines(
    pytester: pytest.Pytester, in_memory: None, mode: str
) -> None:
    write_project(pytester, EXITING_TESTS.replace("__MARK__", mark(mode)))
    report = pytester.path / "report.xml"
    result = run(pytester, mode, f"--junitxml={report}")
    result.assert_outcomes(failed=1, passed=1, errors=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*OperatorExited: the manager exited with code 1 while the test expected it to run; its last "
            "log lines:",
            "*ERROR memop.manager: the echo controller needs echoes.test.example.com/v1 (Echo), which the "
            "API server does not serve*",
        ]
    )
    assert junit_times(report)["test_forgot_the_crd"] < PROMPT
    # The manager that exited while nobody looked fails the test at its teardown, with its lines.
    assert "ERROR at teardown of test_lost_the_lease_unnoticed" in out
    assert "ERROR memop.manager: leader election lost" in out


MUTATING_TESTS = """
import pytest
import echo


__MARK__
async def test_the_reconciler_changes_what_it_read(client, namespace, install_crds, run_operator):
    echo.MUTATE_CACHE = True
    await install_crds(echo.PROJECT)
    async with run_operator(echo.PROJECT, namespaces=[namespace]) as operator:
        await client.create(echo.ECHOES, echo.echo("e", "hello"), namespace)

        def cached_status():
            return (operator.manager.cache.get(echo.ECHOES, "e", namespace) or {}).get("status")

        # The status came back through the watch: the cache replaced the object it held.
        await operator.wait_for(cached_status, timeout=30)
"""


# (pytest options, MEMOP_CHECK_CACHE, whether the change in place fails the test)
CHECK_CASES = {
    "default": ((), None, True),
    "ini-off": (("-o", "memop_check_cache=false"), None, False),
    "env-off": ((), "0", False),
}


@pytest.mark.parametrize("case", list(CHECK_CASES))
def test_a_cached_object_changed_in_place_fails_the_test_unless_turned_off(
    pytester: pytest.Pytester, in_memory: None, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    option, environment, caught = CHECK_CASES[case]
    if environment is None:
        monkeypatch.delenv(CHECK_CACHE_ENV, raising=False)  # the inner plugin sets it by itself
    else:
        monkeypatch.setenv(CHECK_CACHE_ENV, environment)
    write_project(pytester, MUTATING_TESTS.replace("__MARK__", ""))
    result = run(pytester, "auto", *option)
    if caught:
        result.assert_outcomes(passed=1, errors=1)
        result.stdout.fnmatch_lines(["*a cached object was changed in place*: echoes test-*/e*"])
    else:
        result.assert_outcomes(passed=1)


def test_use_existing_cluster_without_a_kubeconfig_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_project(pytester, project_tests("", real=True))
    monkeypatch.setenv("USE_EXISTING_CLUSTER", "true")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    result = run(pytester, "auto")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.strip()] == [
        "ERROR: USE_EXISTING_CLUSTER=true needs KUBECONFIG naming the cluster's kubeconfig (memop does not "
        "fall back to ~/.kube/config); unset USE_EXISTING_CLUSTER to test on the in-memory API server"
    ]
    monkeypatch.setenv("KUBECONFIG", str(pytester.path / "missing"))
    result = run(pytester, "auto")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        result.stderr.lines[0]
        == f"ERROR: USE_EXISTING_CLUSTER=true: KUBECONFIG={pytester.path / 'missing'} names no file"
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    # Tests that need no cluster run as ever.
    pytester.makepyfile(test_project="def test_arithmetic():\n    assert 2 + 2 == 4\n")
    run(pytester, "auto").assert_outcomes(passed=1)
