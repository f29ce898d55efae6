"""memop.project in-process: what a Project accepts, how --controller-module and the
``memop.controllers`` entry points load one, which project a process runs, and how the run's
options follow the selected project (its controllers, its Lease, its --help).

Modules and installed distributions are real files under ``tmp_path`` (a distribution as pip
lays one out: ``NAME-VERSION.dist-info`` with ``METADATA`` and ``entry_points.txt``), found by
importlib as any other. The real-process checks are in tests/e2e/test_manager_cli.py and
tests/e2e/test_user_project.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memop import builtin
from memop.cli.controllers import leave_out_hint, parse_controllers
from memop.cli.options import UsageError, build_parser, parse_run_args
from memop.project import (
    ENTRY_POINT_GROUP,
    Project,
    ProjectError,
    installed_projects,
    load_module,
    project_name,
    select_project,
)
from memop.runtime import Controller, ControllerDefinition, SetupContext

# What each test module starts with: controller definitions that are never set up here.
PRELUDE = """\
from memop import Project
from memop.runtime import ControllerDefinition

def _setup(context):
    raise AssertionError("not set up in these tests")

def definition(name):
    return ControllerDefinition(
        name=name, description=f"the {name} controller", setup=_setup, crds=lambda: [], rules=(),
        samples=lambda: {},
    )
"""


def _setup(context: SetupContext) -> Controller:
    raise AssertionError("not set up in these tests")


def definition(name: str) -> ControllerDefinition:
    return ControllerDefinition(
        name=name, description=f"the {name} controller", setup=_setup, crds=lambda: [], rules=(),
        samples=lambda: {},
    )  # fmt: skip


_COUNTER = itertools.count()


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Write a module (PRELUDE + source) under a fresh name importable from tmp_path; its name."""
    root = tmp_path / "modules"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.chdir(root)
    written: list[str] = []

    def write(source: str) -> str:
        name = f"userop{next(_COUNTER)}"
        (root / f"{name}.py").write_text(PRELUDE + textwrap.dedent(source))
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


@pytest.fixture
def distributions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str, str, dict[str, str]], None]:
    """Install a distribution into a directory on sys.path, as pip lays one out (metadata and
    entry points; its modules are written with ``modules``)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))

    def install(dist: str, version: str, entry_points: dict[str, str]) -> None:
        info = site / f"{dist}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")

    return install


def project(name: str = "cmsync", *controllers: str, **fields: str) -> Project:
    return Project(
        name=name,
        domain="example.org",
        controllers=tuple(definition(c) for c in controllers or ("copier",)),
        **fields,
    )


# --- Project ---------------------------------------------------------------------------------


def test_a_projects_names_default_from_its_name_and_domain() -> None:
    made = project("cmsync", "copier", "pruner", version="0.3.0")
    assert made.leader_election_id == "cmsync-leader.example.org"
    assert made.namespace == "cmsync-system"
    assert made.image == "cmsync:0.3.0"
    assert made.controller_names == ("copier", "pruner")
    assert made.controller("pruner").name == "pruner"
    with pytest.raises(KeyError):
        made.controller("nope")


def test_memops_own_project_keeps_its_lease_and_names() -> None:
    assert builtin.PROJECT.name == "memop"
    assert builtin.PROJECT.controller_names == ("memcached", "podset", "mypod")
    # A rolling upgrade from before projects must not elect a second leader.
    assert builtin.PROJECT.leader_election_id == "memop-leader.cache.example.com"


# (fields, what the one-line message says)
INVALID_PROJECTS: list[tuple[dict[str, object], str]] = [
    ({"name": "CMSync"}, "project name 'CMSync' is not a DNS-1123 label"),
    ({"name": "a" * 64}, "is not a DNS-1123 label"),
    ({"domain": "Example.org"}, "project cmsync: domain 'Example.org' is not a DNS-1123 subdomain"),
    ({"leader_election_id": "my_lease"}, "leader election id 'my_lease' is not a DNS-1123 subdomain"),
    ({"namespace": "cmsync.system"}, "namespace 'cmsync.system' is not a DNS-1123 label"),
    ({"controllers": ()}, "project cmsync has no controllers"),
    (
        {"controllers": (definition("copier"), "copier")},
        "'copier' is not a memop.runtime.ControllerDefinition",
    ),
    ({"controllers": (definition("Copier"),)}, "controller name 'Copier' is not a DNS-1123 label"),
    ({"controllers": (definition("copier"), definition("copier"))}, "two controllers are named 'copier'"),
]


@pytest.mark.parametrize(("fields", "expected"), INVALID_PROJECTS)
def test_a_project_kubernetes_or_memop_would_refuse_is_one_line(
    fields: dict[str, object], expected: str
) -> None:
    values: dict[str, object] = {
        "name": "cmsync",
        "domain": "example.org",
        "controllers": (definition("copier"),),
    }
    values.update(fields)
    with pytest.raises(ProjectError) as caught:
        Project(**values)  # type: ignore[arg-type]
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("ConfigMap_Sync", "configmap-sync"),
        ("cmsync", "cmsync"),
        ("my.operator", "my-operator"),
        ("__", "operator"),
    ],
)
def test_a_distribution_or_module_name_becomes_a_project_name(text: str, name: str) -> None:
    assert project_name(text) == name


# --- --controller-module ---------------------------------------------------------------------


def test_a_module_gives_its_project(modules: Callable[[str], str]) -> None:
    name = modules(
        """
        PROJECT = Project(name="cmsync", domain="example.org", controllers=(definition("copier"),),
                          version="0.3.0")
        DEFINITION = definition("ignored")
        """
    )
    loaded = load_module(name)
    assert (loaded.name, loaded.version, loaded.controller_names) == ("cmsync", "0.3.0", ("copier",))
    assert loaded.origin == f"--controller-module {name}"


def test_a_module_without_a_project_gives_its_definitions(modules: Callable[[str], str]) -> None:
    one = modules('DEFINITION = definition("copier")\n')
    assert load_module(one).controller_names == ("copier",)
    assert load_module(one).name == project_name(one)
    many = modules('DEFINITIONS = [definition("copier"), definition("pruner")]\n')
    assert load_module(many).controller_names == ("copier", "pruner")


def test_an_attribute_names_what_to_load(modules: Callable[[str], str]) -> None:
    name = modules('MINE = definition("copier")\nDEFINITION = definition("other")\n')
    assert load_module(f"{name}:MINE").controller_names == ("copier",)


def test_a_module_in_the_current_directory_is_found_without_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The memop console script does not put the current directory on sys.path; memop does.
    here = tmp_path / "here"
    here.mkdir()
    (here / "cwdoperator.py").write_text(PRELUDE + 'DEFINITION = definition("copier")\n')
    monkeypatch.chdir(here)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(here))])
    try:
        assert load_module("cwdoperator").controller_names == ("copier",)
    finally:
        sys.modules.pop("cwdoperator", None)


# (module source or None for no module, the spec's suffix, what the one-line message says)
BAD_MODULES: list[tuple[str | None, str, str]] = [
    (None, "", "no module named 'userop_absent' (not in the current directory nor on PYTHONPATH)"),
    ("X = 1\n", "", "has no PROJECT / DEFINITION / DEFINITIONS"),
    ("X = 1\n", ":Y", "has no Y"),
    ("X = 1\n", ":X", "int is neither a memop.Project nor a memop.runtime.ControllerDefinition"),
    ('DEFINITIONS = [definition("a"), "b"]\n', "", "str is not a memop.runtime.ControllerDefinition"),
    ("DEFINITIONS = []\n", "", "list is neither a memop.Project nor"),
    ('DEFINITIONS = [definition("a"), definition("a")]\n', "", "two controllers are named 'a'"),
    ('DEFINITION = definition("Copier")\n', "", "controller name 'Copier' is not a DNS-1123 label"),
    ("import not_installed_anywhere\n", "", "failed: No module named 'not_installed_anywhere'"),
    ("raise RuntimeError('boom')\n", "", "importing userop"),
    (
        'PROJECT = Project(name="p", domain="example.org", controllers=(definition("a"), definition("a")))\n',
        "",
        ": project p: two controllers are named 'a'",
    ),
]


@pytest.mark.parametrize(("source", "suffix", "expected"), BAD_MODULES)
def test_a_module_memop_cannot_run_is_one_line_naming_the_flag(
    modules: Callable[[str], str], source: str | None, suffix: str, expected: str
) -> None:
    name = "userop_absent" if source is None else modules(source)
    with pytest.raises(ProjectError) as caught:
        load_module(name + suffix)
    message = str(caught.value)
    assert f"--controller-module {name}{suffix}" in message
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize("spec", ["", ":PROJECT", "my-operator", "a..b", "1abc"])
def test_a_spec_that_is_not_module_colon_attribute_is_refused(spec: str) -> None:
    with pytest.raises(ProjectError, match=r"expected MODULE\[:ATTRIBUTE\]"):
        load_module(spec)


# --- installed projects: the memop.controllers entry points ----------------------------------


def test_memops_own_controllers_are_an_installed_project() -> None:
    assert installed_projects()["memop"] == builtin.PROJECT


def test_an_installed_project_is_found_through_its_entry_point(
    modules: Callable[[str], str], distributions: Callable[[str, str, dict[str, str]], None]
) -> None:
    name = modules(
        'PROJECT = Project(name="cmsync", domain="example.org", controllers=(definition("copier"),))\n'
    )
    distributions("cmsync", "0.3.0", {"cmsync": f"{name}:PROJECT"})
    found = installed_projects()
    assert set(found) == {"memop", "cmsync"}
    assert found["cmsync"].controller_names == ("copier",)
    assert "cmsync" in found["cmsync"].origin


def test_definitions_installed_without_a_project_make_one_named_after_the_distribution(
    modules: Callable[[str], str], distributions: Callable[[str, str, dict[str, str]], None]
) -> None:
    name = modules('COPIER = definition("copier")\nPRUNER = definition("pruner")\n')
    distributions("ConfigMap_Sync", "1.2.0", {"copier": f"{name}:COPIER", "pruner": f"{name}:PRUNER"})
    found = installed_projects()["configmap-sync"]
    assert (found.version, found.controller_names) == ("1.2.0", ("copier", "pruner"))


@pytest.mark.parametrize(
    ("source", "entry_points", "expected"),
    [
        ("X = 1\n", {"x": "{m}:X"}, "int is neither a memop.Project nor"),
        ("", {"x": "{m}:MISSING"}, "loading failed: AttributeError"),
        ("raise RuntimeError('boom')\n", {"x": "{m}:X"}, "loading failed: RuntimeError: boom"),
        (
            'PROJECT = Project(name="p", domain="example.org", controllers=(definition("a"),))\n'
            'DEFINITION = definition("b")\n',
            {"p": "{m}:PROJECT", "b": "{m}:DEFINITION"},
            "exposes a Project and other entry points in memop.controllers",
        ),
        (
            'PROJECT = Project(name="memop", domain="example.org", controllers=(definition("a"),))\n',
            {"p": "{m}:PROJECT"},
            "two installed projects are named 'memop'",
        ),
    ],
)
def test_a_broken_installed_project_is_one_line_naming_it(
    modules: Callable[[str], str],
    distributions: Callable[[str, str, dict[str, str]], None],
    source: str,
    entry_points: dict[str, str],
    expected: str,
) -> None:
    name = modules(source)
    distributions("broken", "0.1.0", {k: v.format(m=name) for k, v in entry_points.items()})
    with pytest.raises(ProjectError) as caught:
        installed_projects()
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


# --- which project runs ----------------------------------------------------------------------


def test_memops_own_project_runs_when_nothing_else_is_installed() -> None:
    assert select_project(installed={"memop": builtin.PROJECT}) is builtin.PROJECT
    assert select_project(installed={}) is builtin.PROJECT  # a tree that is not installed


def test_an_installed_project_runs_instead_of_memops_own_unless_memop_is_asked_for() -> None:
    mine = project("cmsync")
    installed = {"memop": builtin.PROJECT, "cmsync": mine}
    assert select_project(installed=installed) is mine
    assert select_project("memop", installed=installed) is builtin.PROJECT
    assert select_project("cmsync", installed=installed) is mine


def test_several_installed_projects_need_a_choice() -> None:
    installed = {"memop": builtin.PROJECT, "a": project("a"), "b": project("b")}
    with pytest.raises(
        ProjectError, match=r"several projects are installed \(a, b\): choose one with --project"
    ):
        select_project(installed=installed)
    assert select_project("b", installed=installed).name == "b"


def test_an_unknown_project_name_lists_the_installed_ones() -> None:
    with pytest.raises(ProjectError, match=r"--project: no installed project 'x' \(installed: a, memop\)"):
        select_project("x", installed={"memop": builtin.PROJECT, "a": project("a")})


def test_a_controller_module_wins_over_the_installed_projects(modules: Callable[[str], str]) -> None:
    name = modules('DEFINITION = definition("copier")\n')
    chosen = select_project(module=name, installed={"memop": builtin.PROJECT, "a": project("a")})
    assert chosen.controller_names == ("copier",)


# --- the run's options follow the project ----------------------------------------------------


def test_with_an_installed_project_memops_controllers_do_not_start_unless_asked_for(
    modules: Callable[[str], str], distributions: Callable[[str, str, dict[str, str]], None]
) -> None:
    name = modules(
        'PROJECT = Project(name="cmsync", domain="example.org", controllers=(definition("copier"),))\n'
    )
    distributions("cmsync", "0.3.0", {"cmsync": f"{name}:PROJECT"})
    config = parse_run_args([], env={})
    assert (config.project.name, config.controllers) == ("cmsync", ("copier",))
    assert config.leader_election_id == "cmsync-leader.example.org"
    for argv, env in ((["--project", "memop"], {}), ([], {"PROJECT": "memop"})):
        config = parse_run_args(argv, env=env)
        assert (config.project, config.controllers) == (builtin.PROJECT, ("memcached", "podset", "mypod"))
        assert config.leader_election_id == "memop-leader.cache.example.com"


def test_controllers_are_parsed_against_the_selected_project(modules: Callable[[str], str]) -> None:
    name = modules('DEFINITIONS = [definition("copier"), definition("pruner")]\n')
    assert parse_run_args(["--controller-module", name], env={}).controllers == ("copier", "pruner")
    config = parse_run_args(["--controllers", "*,-copier"], env={"CONTROLLER_MODULE": name})
    assert config.controllers == ("pruner",)
    with pytest.raises(UsageError) as caught:
        parse_run_args(["--controller-module", name, "--controllers", "memcached"], env={})
    assert str(caught.value) == (
        "--controllers: unknown controller 'memcached' (known: copier, pruner; '*' for all)"
    )


def test_a_flag_still_wins_over_the_projects_default(modules: Callable[[str], str]) -> None:
    name = modules('DEFINITION = definition("copier")\n')
    config = parse_run_args(["--controller-module", name, "--leader-election-id", "mine.example.org"], env={})
    assert config.leader_election_id == "mine.example.org"


# (argv, environment, the one line)
SELECTION_ERRORS: list[tuple[list[str], dict[str, str], str]] = [
    (["--project", "nope"], {}, "--project: no installed project 'nope' (installed: memop)"),
    ([], {"PROJECT": "nope"}, "--project (from PROJECT): no installed project 'nope'"),
    (
        [],
        {"CONTROLLER_MODULE": "userop_absent"},
        "--controller-module userop_absent (from CONTROLLER_MODULE): no module named 'userop_absent'",
    ),
    (["--controller-module", "bad-name"], {}, "--controller-module bad-name: expected MODULE[:ATTRIBUTE]"),
    (
        ["--project", "memop", "--controller-module", "x"],
        {},
        "--project and --controller-module exclude each other: give one",
    ),
    (
        ["--controller-module", "x"],
        {"PROJECT": "memop"},
        "--project (from PROJECT) and --controller-module exclude each other",
    ),
    (["--project"], {}, "argument --project: expected one argument"),
]


@pytest.mark.parametrize(("argv", "env", "expected"), SELECTION_ERRORS)
def test_a_project_that_cannot_be_selected_is_a_usage_error(
    modules: Callable[[str], str], argv: list[str], env: dict[str, str], expected: str
) -> None:
    with pytest.raises(UsageError) as caught:
        parse_run_args(argv, env=env)
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_program_that_passes_its_project_offers_no_project_flags() -> None:
    mine = project("cmsync", "copier", "pruner")
    config = parse_run_args([], env={"PROJECT": "memop", "CONTROLLER_MODULE": "x"}, project=mine)
    assert (config.project, config.controllers) == (mine, ("copier", "pruner"))
    for flag in ("--project", "--controller-module"):
        with pytest.raises(UsageError, match=f"unrecognized arguments: {flag}"):
            parse_run_args([flag, "x"], env={}, project=mine)


def test_help_describes_the_selected_project(capsys: pytest.CaptureFixture[str]) -> None:
    mine = dataclasses.replace(project("cmsync", "copier", "pruner"), description="copies ConfigMaps")
    text = " ".join(build_parser(mine, prog="python -m cmsync", selectable=False).format_help().split())
    assert text.startswith("usage: python -m cmsync")
    assert "The cmsync operator (copies ConfigMaps), on memop: copier: the copier controller;" in text
    assert "(known: copier, pruner)" in text
    assert build_parser(mine).get_default("leader_election_id") == "cmsync-leader.example.org"
    assert "--project" not in text
    assert "memcached" not in text
    with pytest.raises(SystemExit):
        build_parser(mine, selectable=False).parse_args(["--version"])
    assert capsys.readouterr().out.startswith("cmsync 0.1.0 (memop ")


def test_controllers_syntax_and_the_hint_when_a_crd_is_missing() -> None:
    mine = project("cmsync", "copier", "pruner", "reporter")
    assert parse_controllers("*", mine) == ("copier", "pruner", "reporter")
    assert parse_controllers("reporter,copier", mine) == ("copier", "reporter")
    with pytest.raises(ValueError, match="use '\\*' or names like copier,pruner"):
        parse_controllers("copier,,", mine)
    running = ("copier", "pruner")
    assert leave_out_hint("python -m cmsync", running, "copier") == (
        "or leave the copier controller out: --controllers=pruner"
    )
    assert leave_out_hint("python -m cmsync", ("copier",), "copier") == (
        "or run python -m cmsync with --controllers naming the controllers whose CRDs are installed"
    )


# --- memop.run in-process: the command line as a function ------------------------------------


def test_memop_run_returns_the_exit_code_of_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    import memop  # noqa: PLC0415

    mine = project("cmsync", "copier", version="0.3.0")
    assert memop.run(mine, ["--version"]) == 0
    assert capsys.readouterr().out == f"cmsync 0.3.0 (memop {memop.__version__})\n"
    assert memop.run(None, ["run", "--version"]) == 0  # 'memop run' is 'memop'
    assert capsys.readouterr().out == f"memop {memop.__version__}\n"
    assert memop.run(None, ["run", "--bogus"]) == 2
    assert capsys.readouterr().err == "memop: error: unrecognized arguments: --bogus\n"
    assert memop.run(mine, ["--controllers", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.endswith(": error: --controllers: unknown controller 'nope' (known: copier; '*' for all)\n")
    assert len(err.splitlines()) == 1


def test_a_run_config_runs_its_projects_controllers() -> None:
    mine = project("cmsync", "copier", "pruner")
    config = dataclasses.replace(parse_run_args([], env={}, project=mine), controllers=())
    assert config.controllers == ("copier", "pruner")  # empty means every one, in the project's order
    with pytest.raises(ValueError, match="project cmsync has no controller 'memcached'"):
        dataclasses.replace(config, controllers=("memcached",))
