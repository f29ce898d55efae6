"""memop init and memop create api: the names they refuse, the files they write, and the code
they generate (it parses, its pyproject loads, its imports are sorted as ruff sorts them).

The generated project's own tests, mypy and ruff, and its operator against the in-memory API
server, are run by tests/e2e/test_scaffold_e2e.py.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from memop import __version__
from memop.cli.main import main as memop_main
from memop.scaffold import main
from memop.scaffold.names import ScaffoldError, constant_name, default_plural
from memop.scaffold.newapi import CONTROLLERS_MARKER, IMPORTS_MARKER, register
from memop.scaffold.origin import index_requirement, memop_origin
from memop.scaffold.render import TemplateError, from_import, render, tidy_python

REPO = Path(__file__).resolve().parents[1]
# The memop modules generated code may import: the public ones.
GENERATED_CODE_IMPORTS = frozenset(
    {"memop", "memop.runtime", "memop.testing.plugin", "memop.testing.cluster_e2e"}
)


def run(root: Path, *argv: str) -> int:
    return main(list(argv), root=root)


def tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "widget-operator"
    root.mkdir()
    assert run(root, "init") == 0
    return root


def create_api(root: Path, *extra: str, kind: str = "Widget") -> int:
    return run(
        root,
        "create",
        "api",
        "--group",
        "cache",
        "--version",
        "v1alpha1",
        "--kind",
        kind,
        "--no-manifests",
        *extra,
    )


def refused(capsys: pytest.CaptureFixture[str], code: int, *words: str) -> str:
    """The one line a refusal printed (exit 2), which must hold ``words``."""
    captured = capsys.readouterr()
    assert code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    for word in words:
        assert word in lines[0]
    return lines[0]


# --- memop init ---------------------------------------------------------------------------------


def test_init_writes_a_project_named_after_its_folder(project: Path) -> None:
    files = tree(project)
    assert set(files) == {
        ".ci/run",
        ".dockerignore",
        ".gitignore",
        "Dockerfile",
        "README.md",
        "pyproject.toml",
        "src/widget_operator/__init__.py",
        "src/widget_operator/__main__.py",
        "src/widget_operator/project.py",
        "src/widget_operator/py.typed",
        "tests/test_project.py",
        "tests/cluster_e2e/test_in_cluster.py",
        # memop from a clone or a wheel (this repository's venv: editable): its wheel for the image.
        *(() if memop_origin().from_index else ("wheels/README.md",)),
    }
    pyproject = tomllib.loads(files["pyproject.toml"])
    assert pyproject["project"]["name"] == "widget-operator"
    assert pyproject["project"]["dependencies"] == [memop_origin().requirement]
    assert pyproject["project"]["entry-points"]["memop.controllers"] == {
        "widget-operator": "widget_operator.project:PROJECT"
    }
    assert pyproject["tool"]["memop"] == {
        "project": "widget-operator",
        "domain": "example.com",
        "package": "widget_operator",
    }
    assert pyproject["tool"]["pytest"]["ini_options"]["asyncio_mode"] == "auto"
    assert {"pytest>=8", "pytest-asyncio>=1.0", "mypy>=1.10", "ruff>=0.6"} <= set(
        pyproject["project"]["optional-dependencies"]["test"]
    )
    assert "sys.exit(main())" in files["src/widget_operator/__main__.py"]
    assert "memop.run(PROJECT)" in files["src/widget_operator/__main__.py"]
    assert 'ENTRYPOINT ["python", "-m", "widget_operator"]' in files["Dockerfile"]
    assert "USER 65532:65532" in files["Dockerfile"]
    assert "FROM ${PYTHON_IMAGE}" in files["Dockerfile"]
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in files["Dockerfile"]
    assert (project / ".ci/run").stat().st_mode & 0o111
    for name, text in files.items():
        if name.endswith(".py"):
            ast.parse(text, name)
        assert "{{" not in text, name


def test_before_its_first_kind_the_operator_says_so_in_one_line(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "widget_operator"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(project / "src")},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "python -m widget_operator: error: project widget-operator has no controllers"
    ]


def test_init_takes_the_names_it_is_given(tmp_path: Path) -> None:
    assert run(tmp_path, "init", "--project", "shop", "--domain", "acme.io", "--package", "shop_ops") == 0
    pyproject = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert pyproject["tool"]["memop"] == {"project": "shop", "domain": "acme.io", "package": "shop_ops"}
    project_py = (tmp_path / "src/shop_ops/project.py").read_text()
    assert 'name="shop"' in project_py
    assert 'domain="acme.io"' in project_py


def test_the_owner_is_quoted_for_toml(tmp_path: Path) -> None:
    owner = 'Zoë "Z" O\'Brien \\ Acme'
    assert run(tmp_path, "init", "--project", "shop", "--owner", owner) == 0
    pyproject = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert pyproject["project"]["authors"] == [{"name": owner}]


def test_the_ruff_rules_of_a_project_are_memops(project: Path) -> None:
    ours = tomllib.loads((REPO / "ruff.toml").read_text())
    theirs = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["ruff"]
    assert theirs["line-length"] == ours["line-length"]
    assert theirs["target-version"] == ours["target-version"]
    assert sorted(theirs["lint"]["select"]) == sorted(ours["lint"]["select"])
    assert sorted(theirs["lint"]["ignore"]) == sorted(ours["lint"]["ignore"])


def test_init_never_overwrites_a_file_and_writes_nothing_then(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "README.md").write_text("mine\n")
    refused(capsys, run(tmp_path, "init", "--project", "shop"), "README.md exists already")
    assert tree(tmp_path) == {"README.md": "mine\n"}


def test_init_leaves_other_files_alone(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "LICENSE").write_text("license\n")
    assert run(tmp_path, "init", "--project", "shop") == 0
    assert (tmp_path / "LICENSE").read_text() == "license\n"


def test_init_refuses_a_folder_that_is_a_python_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "setup.py").write_text("")
    refused(capsys, run(tmp_path, "init", "--project", "shop"), "setup.py")
    assert tree(tmp_path) == {"setup.py": ""}


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--project", "Shop"], ["--project 'Shop'", "DNS-1123"]),
        (["--project", "shop_ops"], ["--project 'shop_ops'"]),
        (["--project=-shop"], ["--project '-shop'"]),
        (["--project", "s" * 57], ["at most 56"]),
        (["--project", "shop", "--domain", "Example.com"], ["--domain 'Example.com'"]),
        (["--project", "shop", "--domain", "example..com"], ["--domain"]),
        (["--project", "shop", "--package", "class"], ["--package 'class'"]),
        (["--project", "shop", "--package", "Shop"], ["--package 'Shop'"]),
        (["--project", "shop", "--package", "json"], ["standard-library"]),
        (["--project", "shop", "--package", "memop"], ["--package 'memop'"]),
        (["--project", "shop", "--owner", "two\nlines"], ["--owner"]),
        (["--project", "shop", "--domain", "a" * 250 + ".io"], ["--domain"]),
        (["--project", "shop", "--bogus"], ["unrecognized arguments: --bogus"]),
    ],
)
def test_init_refuses_names_kubernetes_or_python_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], words: list[str]
) -> None:
    refused(capsys, run(tmp_path, "init", *flags), *words)
    assert tree(tmp_path) == {}


def test_a_folder_name_that_makes_no_project_name_asks_for_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "___"
    root.mkdir()
    refused(capsys, run(root, "init"), "give --project")


def test_the_memop_requirement_allows_this_version_up_to_the_next_that_may_break() -> None:
    assert index_requirement("0.1.0") == "memop>=0.1.0,<0.2"
    assert index_requirement("0.3.2") == "memop>=0.3.2,<0.4"
    assert index_requirement("1.4.0") == "memop>=1.4.0,<2"
    assert index_requirement("2.0") == "memop>=2.0.0,<3"
    assert index_requirement().startswith(f"memop>={__version__}")


# --- memop create api ---------------------------------------------------------------------------


WIDGET_PACKAGE = "src/widget_operator/widget"


def created_widget(project: Path, *flags: str, modules: tuple[str, ...]) -> dict[str, str]:
    """``memop create api`` of the Widget with ``flags``: the files it added (the package's
    ``modules``, a unit and an e2e test) and registered, every one parsing, no placeholder left;
    the project's files after it."""
    before = tree(project)
    assert create_api(project, *flags) == 0
    after = tree(project)
    expected = {f"{WIDGET_PACKAGE}/{module}.py" for module in modules}
    assert set(after) - set(before) == expected | {"tests/test_widget.py", "tests/test_widget_e2e.py"}
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"src/widget_operator/project.py"}
    project_py = after["src/widget_operator/project.py"]
    assert "import widget_operator.widget\n" in project_py
    assert "    widget_operator.widget.DEFINITION,\n    # +memop:scaffold:controllers\n" in project_py
    for name, text in after.items():
        if name.endswith(".py"):
            ast.parse(text, name)
        assert "{{" not in text, name
    return after


def test_create_api_writes_the_declared_kind_and_registers_it(project: Path) -> None:
    after = created_widget(project, modules=("__init__", "api", "controller"))
    api = after[f"{WIDGET_PACKAGE}/api.py"]
    assert "class WidgetSpec(Model):" in api
    assert 'group="cache.example.com",\n    version="v1alpha1",\n    plural="widgets",' in api
    assert "WIDGETS = Widget.resource()" in api
    assert "namespaced=False" not in api
    controller = after[f"{WIDGET_PACKAGE}/controller.py"]
    assert "def children(owner: Widget) -> list[dict[str, Any]]:" in controller
    assert "DEFINITION = declarative_controller(" in controller


def test_create_api_imperative_writes_the_reconciler_package_and_registers_it(project: Path) -> None:
    modules = ("__init__", "api", "controller", "desired", "status")
    api = created_widget(project, "--imperative", modules=modules)[f"{WIDGET_PACKAGE}/api.py"]
    assert 'GROUP = "cache.example.com"' in api
    assert 'VERSION = "v1alpha1"' in api
    assert 'PLURAL = "widgets"' in api
    assert "WIDGETS = Resource(GROUP, VERSION, PLURAL, KIND)" in api


def test_the_generated_code_imports_only_memops_public_names(project: Path) -> None:
    assert create_api(project) == 0
    assert create_api(project, "--cluster-scoped", kind="Gizmo") == 0
    assert create_api(project, "--imperative", kind="Cart") == 0
    assert create_api(project, "--imperative", "--cluster-scoped", kind="Gadget") == 0
    allowed = GENERATED_CODE_IMPORTS
    for path in [*project.joinpath("src").rglob("*.py"), *project.joinpath("tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            modules = []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            for module in modules:
                if module.split(".")[0] == "memop":
                    assert module in allowed, f"{path}: imports {module}"


def test_a_cluster_scoped_declared_kind(project: Path) -> None:
    assert create_api(project, "--cluster-scoped", "--plural", "gizmos", kind="Gizmo") == 0
    api = (project / "src/widget_operator/gizmo/api.py").read_text()
    assert 'plural="gizmos",\n    namespaced=False,' in api
    assert "target_namespace: DNS1123Label" in api
    controller = (project / "src/widget_operator/gizmo/controller.py").read_text()
    assert '"namespace": owner.spec.target_namespace' in controller


def test_a_cluster_scoped_imperative_kind(project: Path) -> None:
    assert create_api(project, "--imperative", "--cluster-scoped", "--plural", "gizmos", kind="Gizmo") == 0
    api = (project / "src/widget_operator/gizmo/api.py").read_text()
    assert "GIZMOS = Resource(GROUP, VERSION, PLURAL, KIND, namespaced=False)" in api
    assert 'definition["spec"]["scope"] = "Cluster"' in api
    controller = (project / "src/widget_operator/gizmo/controller.py").read_text()
    # owns() maps a ConfigMap to its cluster-scoped owner: no map function of the project's own.
    assert ".owns(CONFIGMAPS)" in controller
    assert "owner_of" not in controller


def test_long_names_still_make_ruff_clean_code(tmp_path: Path) -> None:
    # Kubernetes' own kinds reach 32 characters (ValidatingAdmissionPolicyBinding): 40 here.
    package = "p" * 40
    assert run(tmp_path, "init", "--project", package) == 0
    kinds = (("K" + "x" * 39, "--namespaced"), ("C" + "x" * 39, "--cluster-scoped"))
    for kind, scope in kinds:
        assert create_api(tmp_path, scope, kind=kind) == 0
        assert create_api(tmp_path, scope, "--imperative", kind=kind.replace("x", "y")) == 0
    done = subprocess.run(
        [Path(sys.executable).parent / "ruff", "check", "--no-cache", "src", "tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_two_kinds_are_both_registered_in_order_with_sorted_imports(project: Path) -> None:
    assert create_api(project, kind="Widget") == 0
    assert create_api(project, kind="Gadget") == 0
    project_py = (project / "src/widget_operator/project.py").read_text()
    assert (
        "import widget_operator.gadget\nimport widget_operator.widget\n\n# +memop:scaffold:imports"
        in project_py
    )
    assert "widget_operator.widget.DEFINITION,\n    widget_operator.gadget.DEFINITION,\n" in project_py


def test_create_api_works_from_a_folder_inside_the_project(project: Path) -> None:
    assert create_api(project / "src/widget_operator") == 0
    assert (project / "src/widget_operator/widget/api.py").exists()


def test_create_api_refuses_a_kind_that_exists(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert create_api(project) == 0
    capsys.readouterr()
    before = tree(project)
    refused(capsys, create_api(project), "src/widget_operator/widget exists already")
    assert tree(project) == before


def test_create_api_refuses_without_the_markers(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = project / "src/widget_operator/project.py"
    path.write_text(path.read_text().replace(IMPORTS_MARKER, "# (gone)"))
    before = tree(project)
    line = refused(capsys, create_api(project), IMPORTS_MARKER, "put it back")
    assert "src/widget_operator/project.py" in line
    assert tree(project) == before


def test_create_api_refuses_outside_a_memop_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused(capsys, create_api(tmp_path), "no pyproject.toml", "memop init")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    refused(capsys, create_api(tmp_path), "[tool.memop]")


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--group", "Cache", "--version", "v1", "--kind", "Widget"], ["--group 'Cache'", "DNS-1123"]),
        (["--group", "cache_x", "--version", "v1", "--kind", "Widget"], ["--group 'cache_x'"]),
        (["--group", "", "--version", "v1", "--kind", "Widget"], ["--group must not be empty"]),
        (["--group", "c" * 250, "--version", "v1", "--kind", "Widget"], ["253"]),
        (["--group", "cache", "--version", "1", "--kind", "Widget"], ["--version '1'"]),
        (["--group", "cache", "--version", "v0", "--kind", "Widget"], ["--version 'v0'"]),
        (["--group", "cache", "--version", "v01", "--kind", "Widget"], ["--version 'v01'"]),
        (["--group", "cache", "--version", "v1alpha", "--kind", "Widget"], ["--version 'v1alpha'"]),
        (["--group", "cache", "--version", "V1", "--kind", "Widget"], ["--version 'V1'"]),
        (["--group", "cache", "--version", "v1gamma1", "--kind", "Widget"], ["--version 'v1gamma1'"]),
        (["--group", "cache", "--version", "v1", "--kind", "widget"], ["--kind 'widget'", "UpperCamelCase"]),
        (["--group", "cache", "--version", "v1", "--kind", "Wid-get"], ["--kind 'Wid-get'"]),
        (["--group", "cache", "--version", "v1", "--kind", "W" + "x" * 63], ["at most 63"]),
        (["--group", "cache", "--version", "v1", "--kind", "Import"], ["'import'", "reserves"]),
        (["--group", "cache", "--version", "v1", "--kind", "Project"], ["'project'", "reserves"]),
        (
            ["--group", "cache", "--version", "v1", "--kind", "Widget", "--plural", "Widgets"],
            ["--plural 'Widgets'"],
        ),
        (["--group", "cache", "--version", "v1", "--kind", "Widget", "--plural", "widget"], ["singular"]),
        (["--group", "cache", "--version", "v1", "--kind", "Widget", "--plural", "1widgets"], ["DNS-1035"]),
        (
            ["--group", "cache", "--version", "v1", "--kind", "Widget", "--namespaced", "--cluster-scoped"],
            ["not allowed"],
        ),
        (["--group", "cache", "--version", "v1"], ["--kind"]),
    ],
)
def test_create_api_refuses_what_kubernetes_would(
    project: Path, capsys: pytest.CaptureFixture[str], flags: list[str], words: list[str]
) -> None:
    before = tree(project)
    refused(capsys, run(project, "create", "api", "--no-manifests", *flags), *words)
    assert tree(project) == before


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Widget", "widgets"),
        ("Memcached", "memcacheds"),
        ("Bus", "buses"),
        ("Box", "boxes"),
        ("Quiz", "quizes"),
        ("Match", "matches"),
        ("Wish", "wishes"),
        ("Policy", "policies"),
        ("Day", "days"),
        ("PodSet", "podsets"),
    ],
)
def test_the_default_plural_is_kubebuilders(kind: str, plural: str) -> None:
    assert default_plural(kind) == plural


def test_a_resource_constant_never_takes_a_name_the_code_uses() -> None:
    assert constant_name("widgets") == "WIDGETS"
    assert constant_name("my-things") == "MY_THINGS"
    assert constant_name("configmaps") == "CONFIGMAPS_RESOURCE"


# --- project.py's markers -----------------------------------------------------------------------

PROJECT_PY = f"""import memop
from memop.runtime import ControllerDefinition

{IMPORTS_MARKER}
from pkg import __version__

CONTROLLERS: tuple[ControllerDefinition, ...] = (
    {CONTROLLERS_MARKER}
)
"""


def test_register_keeps_the_imports_sorted_as_isort_does() -> None:
    text = PROJECT_PY
    for module in ("widget10", "gadget", "widget2"):
        text = register(text, "pkg", module)
    assert "\nimport pkg.gadget\nimport pkg.widget2\nimport pkg.widget10\n\n" + IMPORTS_MARKER in text
    assert "    pkg.widget10.DEFINITION,\n    pkg.gadget.DEFINITION,\n    pkg.widget2.DEFINITION,\n" in text


def test_register_works_whichever_marker_comes_first() -> None:
    swapped = f"CONTROLLERS = (\n    {CONTROLLERS_MARKER}\n)\n\n{IMPORTS_MARKER}\n"
    text = register(swapped, "pkg", "widget")
    controllers = f"CONTROLLERS = (\n    pkg.widget.DEFINITION,\n    {CONTROLLERS_MARKER}\n)\n"
    assert text == f"{controllers}\nimport pkg.widget\n\n{IMPORTS_MARKER}\n"


def test_register_refuses_a_kind_registered_already_or_a_marker_twice() -> None:
    text = register(PROJECT_PY, "pkg", "widget")
    with pytest.raises(ScaffoldError, match=r"imports pkg\.widget already"):
        register(text, "pkg", "widget")
    with pytest.raises(ScaffoldError, match="more than one line"):
        register(PROJECT_PY + CONTROLLERS_MARKER + "\n", "pkg", "gadget")


# --- templates ----------------------------------------------------------------------------------


def test_render_fills_values_and_sections() -> None:
    text = (
        "a {{x}}\n{{#on}}\nkept\n{{/on}}\n{{^on}}\ndropped\n{{/on}}\nb{{^on}} not{{/on}}{{#on}} yes{{/on}}\n"
    )
    assert render(text, {"x": "1"}, {"on": True}) == "a 1\nkept\nb yes\n"
    assert render(text, {"x": "1"}, {"on": False}) == "a 1\ndropped\nb not\n"
    nested = "{{#a}}\n{{#b}}\nab\n{{/b}}\na\n{{/a}}\n"
    assert render(nested, {}, {"a": True, "b": False}) == "a\n"
    assert render("{{x}}", {"x": "{{y}}"}, {}) == "{{y}}"  # values are not templates


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{{nope}}", "no value"),
        ("{{#nope}}\nx\n{{/nope}}\n", "no flag"),
        ("{{#on}}\nx\n", "never closed"),
        ("x\n{{/on}}\n", "closes no open section"),
        ("a {{#on}} b\n", "not closed"),
    ],
)
def test_render_refuses_a_broken_template(text: str, error: str) -> None:
    with pytest.raises(TemplateError, match=error):
        render(text, {}, {"on": True})


def test_from_import_sorts_as_isort_and_wraps_long_lines() -> None:
    assert from_import("m", ["parse_spec", "KIND", "WIDGETS", "InvalidSpec", "API_VERSION"]) == (
        "from m import API_VERSION, KIND, WIDGETS, InvalidSpec, parse_spec"
    )
    assert from_import("m", ["A10", "A2", "Zeta", "alpha"]) == "from m import A2, A10, Zeta, alpha"
    wrapped = from_import("m" * 90, ["ALPHA", "beta", "Gamma"])
    assert wrapped == f"from {'m' * 90} import (\n    ALPHA,\n    Gamma,\n    beta,\n)"


def test_tidy_python_sorts_one_line_imports_and_wraps_prose_only() -> None:
    words = " ".join(f"word{i}" for i in range(40))
    source = (
        f'"""{words}\n\n- {words}\n"""\n\n'
        "from m import parse_spec, KIND, Widget\n"
        f"    # {words}\n"
        f"x = '{words}'\n"
    )
    tidied = tidy_python(source, limit=60)
    lines = tidied.splitlines()
    assert "from m import KIND, Widget, parse_spec" in lines
    assert f"x = '{words}'" in lines  # code is left as it is
    prose = [line for line in lines if not line.startswith(("from", "x ="))]
    assert all(len(line) <= 60 for line in prose)
    assert " ".join(tidied.replace("#", " ").split()).count("word39") == 4  # every word kept
    assert any(line.startswith("  word") for line in lines)  # a bullet's continuation, indented
    assert any(line.startswith("    # word") for line in lines)


# --- the command line ---------------------------------------------------------------------------


def test_memop_dispatches_init_and_create(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert memop_main(["init", "--project", "shop"]) == 0
    assert (
        memop_main(
            ["create", "api", "--group", "cache", "--version", "v1", "--kind", "Cart", "--no-manifests"]
        )
        == 0
    )
    assert (tmp_path / "src/shop/cart/controller.py").exists()


def test_help_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path, "create", "api", "--help") == 0
    assert "--cluster-scoped" in capsys.readouterr().out
