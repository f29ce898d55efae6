"""``python -m memop`` as users run it: usage errors, --version/--help, and failures at start.

Every case runs the real process and checks its exit code and what it printed: a usage error
is exit 2 and one ``memop: error:`` line on stderr; a failure to start (no Kubernetes config,
the CRD missing, the API server unreachable, a bind address taken) is exit 1 and one log line
saying what is wrong, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from memop import __version__
from memop.cli.options import build_parser, env_name
from memop.runtime.client.kubeconfig import SERVICE_ACCOUNT_DIR
from memop.testing.apiserver.server import ApiServer
from memop.testing.process import _flag_variables

TIMEOUT = 30


async def run_memop(*args: str, env: Mapping[str, str] | None = None, home: Path) -> tuple[int, str, str]:
    """Run memop to its end: (exit code, stdout, stderr). Outside any cluster, HOME=``home``,
    and none of memop's variables inherited: only ``env`` sets them (ENABLE_WEBHOOKS is false
    unless ``env`` says otherwise)."""
    inherited = _flag_variables() | {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}
    environment = {k: v for k, v in os.environ.items() if k not in inherited}
    # No webhooks unless a test asks (it needs a serving certificate), as MemopProcess runs memop.
    environment.update(HOME=str(home), ENABLE_WEBHOOKS="false", **(env or {}))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memop",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def one_log_line(stderr: str) -> dict[str, object]:
    """The single JSON log record on stderr (asserting there is exactly one line)."""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    record = json.loads(lines[0])
    assert isinstance(record, dict)
    return record


@pytest.fixture
async def bare_server(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Path]]:
    """An API server without the Memcached CRD, and a kubeconfig for it."""
    async with ApiServer() as server:
        path = tmp_path / "kubeconfig"
        server.write_kubeconfig(path)
        yield server, path


# One of each kind; tests/test_options.py has every case, in-process.
USAGE_ERRORS: list[tuple[list[str], dict[str, str], str]] = [
    (["--bogus"], {}, "memop: error: unrecognized arguments: --bogus"),
    (["--max-concurrent-reconciles", "-3"], {}, "--max-concurrent-reconciles: must be at least 1, got -3"),
    (["--sync-period", "forever"], {}, "--sync-period: invalid duration 'forever'"),
    (
        ["--leader-elect-renew-deadline", "20s"],
        {},
        "--leader-elect-renew-deadline (20s) must be shorter than --leader-elect-lease-duration (15s)",
    ),
    (
        ["--leader-elect-renew-deadline", "5s", "--leader-elect-retry-period", "5s"],
        {},
        "--leader-elect-retry-period (5s) times 1.2 (jitter) must be shorter than",
    ),
    (["--watch-namespace", "ns1,Not_A_Label"], {}, "--watch-namespace: invalid namespace 'Not_A_Label'"),
    (["--log-level", "verbose"], {}, "--log-level: expected one of debug, info, warning, error"),
    (["--metrics-bind-address", "nowhere"], {}, "--metrics-bind-address: invalid bind address 'nowhere'"),
    ([], {"WATCH_NAMESPACE": "BAD"}, "--watch-namespace (from WATCH_NAMESPACE): invalid namespace 'BAD'"),
    ([], {"LEADER_ELECT": "sometimes"}, "LEADER_ELECT='sometimes': expected true or false"),
]


async def test_usage_errors_exit_2_with_one_line_on_stderr(tmp_path: Path) -> None:
    results = await asyncio.gather(
        *(run_memop(*argv, env=env, home=tmp_path) for argv, env, _ in USAGE_ERRORS)
    )
    for (argv, env, expected), (code, out, err) in zip(USAGE_ERRORS, results, strict=True):
        case = f"{argv} {env}"
        assert code == 2, f"{case}: exit {code}\n{err}"
        assert out == "", case
        lines = err.splitlines()
        assert len(lines) == 1, f"{case}: {err}"
        assert lines[0].startswith("memop: error: "), f"{case}: {err}"
        assert expected in lines[0], f"{case}: {err}"


# Modules a user might name with --controller-module, each wrong in one way: (file -> source).
_DEFINITION = """\
from memop.runtime import ControllerDefinition

def definition(name):
    def setup(context):
        raise AssertionError("never set up: the process stops at the bad input")

    return ControllerDefinition(
        name=name, description="a controller", setup=setup, crds=lambda: [], rules=(), samples=lambda: {}
    )
"""
USER_MODULES = {
    "notadefinition.py": "DEFINITION = {'name': 'copier'}\n",
    "twonames.py": _DEFINITION + "DEFINITIONS = [definition('copier'), definition('copier')]\n",
    "badname.py": _DEFINITION + "DEFINITION = definition('Copier_1')\n",
    "raising.py": "raise RuntimeError('no configuration for this environment')\n",
    "needsdep.py": "import a_dependency_nobody_installed\n",
    "badproject.py": _DEFINITION
    + "from memop import Project\nPROJECT = Project(name='My_Operator', domain='example.org', "
    "controllers=(definition('copier'),))\n",
    "alpha.py": _DEFINITION + "DEFINITION = definition('alpha')\n",
    "beta.py": _DEFINITION + "DEFINITION = definition('beta')\n",
}
# Two distributions installed besides memop, as pip lays them out: memop cannot guess which to run.
DISTRIBUTIONS = {"alpha-op": "alpha:DEFINITION", "beta-op": "beta:DEFINITION"}

# (argv, environment, what the one line says); PYTHONPATH holds USER_MODULES.
PROJECT_ERRORS: list[tuple[list[str], dict[str, str], str]] = [
    (
        ["--controller-module", "no_such_operator"],
        {},
        "--controller-module no_such_operator: no module named",
    ),
    (["--controller-module", "my-operator.project"], {}, "expected MODULE[:ATTRIBUTE]"),
    (
        ["--controller-module", "notadefinition"],
        {},
        "--controller-module notadefinition: dict is neither a memop.Project nor a "
        "memop.runtime.ControllerDefinition",
    ),
    (["--controller-module", "twonames"], {}, "two controllers are named 'copier'"),
    (["--controller-module", "badname"], {}, "controller name 'Copier_1' is not a DNS-1123 label"),
    (["--controller-module", "badproject"], {}, "project name 'My_Operator' is not a DNS-1123 label"),
    (
        ["--controller-module", "alpha:MISSING"],
        {},
        "--controller-module alpha:MISSING: module alpha has no MISSING",
    ),
    (
        ["--controller-module", "raising"],
        {},
        "importing raising failed: RuntimeError: no configuration for this environment",
    ),
    (["--controller-module", "needsdep"], {}, "No module named 'a_dependency_nobody_installed'"),
    ([], {"CONTROLLER_MODULE": "twonames"}, "--controller-module twonames (from CONTROLLER_MODULE): "),
    (
        ["--project", "gamma"],
        {},
        "--project: no installed project 'gamma' (installed: alpha-op, beta-op, memop)",
    ),
    ([], {}, "several projects are installed (alpha-op, beta-op): choose one with --project"),
    (["--project", "memop", "--controller-module", "alpha"], {}, "exclude each other"),
    (
        ["--controller-module", "alpha", "--controllers", "memcached"],
        {},
        "unknown controller 'memcached' (known: alpha;",
    ),
]


async def test_a_project_memop_cannot_run_is_one_line_and_exit_2(tmp_path: Path) -> None:
    modules = tmp_path / "modules"
    modules.mkdir()
    for name, source in USER_MODULES.items():
        (modules / name).write_text(source)
    for dist, value in DISTRIBUTIONS.items():
        info = modules / f"{dist.replace('-', '_')}-0.1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
        (info / "entry_points.txt").write_text(f"[memop.controllers]\n{dist} = {value}\n")
    results = await asyncio.gather(
        *(
            run_memop(*argv, env={"PYTHONPATH": str(modules), **env}, home=tmp_path)
            for argv, env, _ in PROJECT_ERRORS
        )
    )
    for (argv, env, expected), (code, out, err) in zip(PROJECT_ERRORS, results, strict=True):
        case = f"{argv} {env}"
        assert (code, out) == (2, ""), f"{case}: exit {code}\n{err}"
        lines = err.splitlines()
        assert len(lines) == 1, f"{case}: {err}"
        assert lines[0].startswith("memop: error: "), f"{case}: {err}"
        assert expected in lines[0], f"{case}: {err}"
    # With both installed, either one runs when named, and memop's own when asked for.
    code, out, _ = await run_memop(
        "--project", "beta-op", "--help", env={"PYTHONPATH": str(modules)}, home=tmp_path
    )
    assert code == 0
    assert "(known: beta)" in " ".join(out.split())
    code, out, _ = await run_memop(
        "--project", "memop", "--help", env={"PYTHONPATH": str(modules)}, home=tmp_path
    )
    assert "(known: memcached, podset, mypod)" in " ".join(out.split())


async def test_help_and_version_describe_the_selected_project(tmp_path: Path) -> None:
    (tmp_path / "cmsync.py").write_text(
        _DEFINITION + "from memop import Project\nPROJECT = Project(name='cmsync', domain='example.org', "
        "version='0.3.0', description='copies ConfigMaps', "
        "controllers=(definition('copier'), definition('pruner')))\n"
    )
    env = {"PYTHONPATH": str(tmp_path)}
    code, out, err = await run_memop("--controller-module", "cmsync", "--help", env=env, home=tmp_path)
    assert (code, err) == (0, "")
    text = " ".join(out.split())
    assert (
        "The cmsync operator (copies ConfigMaps), on memop: copier: a controller; pruner: a controller."
        in text
    )
    assert "(known: copier, pruner)" in text
    assert "[CONTROLLER_MODULE]" in text
    assert "[PROJECT]" in text
    assert await run_memop("--controller-module", "cmsync", "--version", env=env, home=tmp_path) == (
        0,
        f"cmsync 0.3.0 (memop {__version__})\n",
        "",
    )


@pytest.mark.skipif(
    (SERVICE_ACCOUNT_DIR / "namespace").exists(), reason="running in a cluster: the pod's namespace is used"
)
async def test_leader_election_outside_a_cluster_needs_a_namespace(
    tmp_path: Path, bare_server: tuple[ApiServer, Path]
) -> None:
    _, kubeconfig = bare_server
    code, out, err = await run_memop("--kubeconfig", str(kubeconfig), "--leader-elect", home=tmp_path)
    assert (code, out) == (2, "")
    assert err == (
        "memop: error: --leader-election-namespace is required with --leader-elect when not running "
        "in a cluster\n"
    )
    code, _, err = await run_memop(
        "--kubeconfig", str(kubeconfig), home=tmp_path, env={"LEADER_ELECT": "true"}
    )
    assert code == 2
    assert "--leader-election-namespace is required" in err


async def test_version(tmp_path: Path) -> None:
    assert await run_memop("--version", home=tmp_path) == (0, f"memop {__version__}\n", "")


async def test_help_lists_every_flag_with_its_environment_variable(tmp_path: Path) -> None:
    code, out, err = await run_memop("--help", home=tmp_path)
    assert (code, err) == (0, "")
    words = " ".join(out.split()).replace(",", " ").split()
    for action in build_parser()._actions:
        for flag in action.option_strings:
            assert flag in words, flag
        if action.option_strings[0] not in ("-h", "--version"):
            assert f"[{env_name(action.option_strings[0])}]" in words, action.option_strings


async def test_no_kubernetes_configuration_is_one_line_naming_what_was_tried(tmp_path: Path) -> None:
    code, out, err = await run_memop(home=tmp_path)
    assert (code, out) == (1, "")
    record = one_log_line(err)
    assert record["level"] == "error"
    assert record["msg"] == (
        "no Kubernetes configuration found; tried --kubeconfig/KUBECONFIG (not set), in-cluster config "
        "(KUBERNETES_SERVICE_HOST unset or no service-account token), "
        f"{tmp_path}/.kube/config (no such file)"
    )


async def test_a_kubeconfig_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    for args, env, origin in (
        ((), {"KUBECONFIG": str(missing)}, "KUBECONFIG"),
        (("--kubeconfig", str(missing)), {}, "--kubeconfig"),
    ):
        code, out, err = await run_memop(*args, env=env, home=tmp_path)
        assert (code, out) == (1, "")
        record = one_log_line(err)
        assert record["level"] == "error"
        assert record["msg"] == (
            f"no Kubernetes configuration found; tried {origin}: {missing} (no such file) (with an "
            "explicit kubeconfig, the in-cluster config and ~/.kube/config are not tried)"
        )


async def test_home_kube_config_is_the_fallback(tmp_path: Path, bare_server: tuple[ApiServer, Path]) -> None:
    """With ~/.kube/config (and nothing else) memop connects: here it then stops at the missing CRD."""
    server, kubeconfig = bare_server
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(kubeconfig.read_text())
    code, _, err = await run_memop(
        "--metrics-bind-address", "0", "--health-probe-bind-address", "0", home=tmp_path
    )
    assert code == 1
    assert "CustomResourceDefinition memcacheds.cache.example.com" in err
    assert server.log.count(resource="memcacheds", user_agent="memop/") >= 1


async def test_a_missing_crd_is_one_clear_error(tmp_path: Path, bare_server: tuple[ApiServer, Path]) -> None:
    _, kubeconfig = bare_server
    code, out, err = await run_memop(
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-bind-address",
        "127.0.0.1:0",
        "--health-probe-bind-address",
        "127.0.0.1:0",
        home=tmp_path,
    )
    assert (code, out) == (1, "")
    assert "Traceback" not in err
    records = [json.loads(line) for line in err.splitlines()]
    errors = [r for r in records if r["level"] == "error"]
    assert len(errors) == 1, err
    assert errors[0]["msg"].startswith(
        "the memcached controller needs memcacheds.cache.example.com/v1alpha1 (Memcached), which the "
        "API server does not serve: install the CustomResourceDefinition memcacheds.cache.example.com "
        "(manifests/crd), or "
    )
    assert "--controllers" in errors[0]["msg"]
    assert not [r for r in records if r["level"] == "warning"], err


async def test_a_missing_crd_of_a_one_controller_project_asks_for_the_crd_alone(
    tmp_path: Path, bare_server: tuple[ApiServer, Path]
) -> None:
    _, kubeconfig = bare_server
    (tmp_path / "widgets.py").write_text(
        "from memop.runtime import ControllerBuilder, ControllerDefinition, Resource\n"
        "WIDGETS = Resource('widgets.example.org', 'v1', 'widgets', 'Widget')\n"
        "class Nothing:\n"
        "    async def reconcile(self, request):\n"
        "        return None\n"
        "def setup(context):\n"
        "    return ControllerBuilder(context.cache, 'widget').for_(WIDGETS).build(Nothing())\n"
        "DEFINITION = ControllerDefinition(name='widget', description='widgets', setup=setup, "
        "crds=lambda: [], rules=(), samples=lambda: {})\n"
    )
    code, out, err = await run_memop(
        "--controller-module", "widgets", "--kubeconfig", str(kubeconfig), "--metrics-bind-address=0",
        "--health-probe-bind-address=0", env={"PYTHONPATH": str(tmp_path)}, home=tmp_path,
    )  # fmt: skip
    assert (code, out) == (1, "")
    errors = [r for r in map(json.loads, err.splitlines()) if r["level"] == "error"]
    assert len(errors) == 1, err
    assert errors[0]["logger"] == "memop.manager"
    # Its one controller cannot be left out: installing the CRD is the advice.
    assert errors[0]["msg"].startswith(
        "the widget controller needs widgets.widgets.example.org/v1 (Widget), which the API server does "
        "not serve: install the CustomResourceDefinition widgets.widgets.example.org (manifests/crd) ("
    ), errors[0]["msg"]
    assert "--controllers" not in errors[0]["msg"]


async def test_an_unreachable_api_server_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        code, _, err = await run_memop(
            "--kubeconfig", str(kubeconfig), "--metrics-bind-address=0", "--health-probe-bind-address=0",
            home=tmp_path,
        )  # fmt: skip
    assert code == 1
    assert "Traceback" not in err
    errors = [r for r in map(json.loads, err.splitlines()) if r["level"] == "error"]
    assert len(errors) == 1, err
    assert errors[0]["msg"].startswith("cannot reach the API server: "), err
    assert f"127.0.0.1:{port}" in errors[0]["msg"]


async def test_a_bind_address_in_use_is_one_clear_error(
    tmp_path: Path, bare_server: tuple[ApiServer, Path]
) -> None:
    _, kubeconfig = bare_server
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = await run_memop(
            "--kubeconfig", str(kubeconfig), "--metrics-bind-address", f"127.0.0.1:{port}",
            "--health-probe-bind-address", "0", home=tmp_path,
        )  # fmt: skip
    assert code == 1
    assert "Traceback" not in err
    errors = [r for r in map(json.loads, err.splitlines()) if r["level"] == "error"]
    assert len(errors) == 1, err
    assert errors[0]["msg"].startswith("cannot listen for probes and metrics: "), err
    assert str(port) in errors[0]["msg"]
