"""memop create webhook: the files it writes, how it wires them into the kind's DEFINITION, the
manifests it then writes, the generated tests passing as generated, and what it refuses.

(mypy on a scaffolded project is tests/e2e/test_scaffold_e2e.py's: slow, run once.)
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from memop.scaffold import main, names
from memop.scaffold.newwebhook import wire
from tests.test_scaffold import GENERATED_CODE_IMPORTS, refused, run, tree

PACKAGE = "shop"
BIN = Path(sys.executable).parent


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``memop init`` and two kinds with hand-written reconcilers (``--imperative``: memop create
    webhook writes webhooks for those): Widget (namespaced, v1alpha1), Gadget (cluster-scoped, v1)."""
    root = tmp_path / PACKAGE
    root.mkdir()
    assert run(root, "init") == 0
    api = ("create", "api", "--no-manifests", "--imperative")
    assert run(root, *api, "--group", "cache", "--version", "v1alpha1", "--kind", "Widget") == 0
    assert run(root, *api, "--group", "infra", "--version", "v1", "--kind", "Gadget", "--cluster-scoped") == 0
    return root


def create_webhook(root: Path, *args: str, kind: str = "Widget") -> int:
    return main(["create", "webhook", "--kind", kind, *args], root=root)


def environment(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MEMOP_"))}
    env["PYTHONPATH"] = str(root / "src")
    return env


def check(root: Path, *command: str | Path) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=root,
        env=environment(root),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, f"{' '.join(map(str, command))}:\n{done.stdout}{done.stderr}"
    return done.stdout


def test_a_webhook_and_a_conversion_are_written_wired_and_their_tests_pass(project: Path) -> None:
    before = tree(project)
    every = ("--defaulting", "--validation", "--conversion", "--spoke-version", "v1beta1")
    assert create_webhook(project, *every, "--no-manifests") == 0
    # This one writes the manifests of both.
    assert create_webhook(project, "--validation", "--version", "v1", kind="Gadget") == 0
    after = tree(project)
    added = {name for name in set(after) - set(before) if not name.startswith("manifests/")}
    assert added == {
        "src/shop/widget/webhooks.py",
        "src/shop/widget/conversion.py",
        "tests/test_widget_webhooks.py",
        "tests/test_widget_conversion.py",
        "src/shop/gadget/webhooks.py",
        "tests/test_gadget_webhooks.py",
    }
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"src/shop/widget/__init__.py", "src/shop/gadget/__init__.py"}
    for name, text in after.items():
        if name.endswith(".py"):
            ast.parse(text, name)
            assert "{{" not in text, name
    widget = after["src/shop/widget/__init__.py"]
    assert "from shop.widget import controller, conversion, webhooks\n" in widget
    assert "from shop.widget.api import API_VERSION, GROUP, KIND, PLURAL\n" in widget
    assert "    crds=lambda: [conversion.crd()],\n" in widget
    assert "    webhooks=(webhooks.WEBHOOK,),\n    conversions=(conversion.CONVERSION,),\n)\n" in widget
    gadget = after["src/shop/gadget/webhooks.py"]
    assert "    namespaced=False,\n" in gadget
    assert "defaulter=" not in gadget

    # memop manifests ran: the webhooks, their certificates, the conversion patch.
    configurations = list(yaml.safe_load_all(after["manifests/webhook/manifests.yaml"]))
    assert [(c["kind"], [w["name"] for w in c["webhooks"]]) for c in configurations] == [
        ("MutatingWebhookConfiguration", ["mwidget-v1alpha1.cache.example.com"]),
        (
            "ValidatingWebhookConfiguration",
            ["vwidget-v1alpha1.cache.example.com", "vgadget-v1.infra.example.com"],
        ),
    ]
    assert "manifests/webhook/webhook_in_widgets.yaml" in after
    assert "manifests/certmanager/certificate.yaml" in after
    crd = yaml.safe_load(after["manifests/crd/cache.example.com_widgets.yaml"])
    assert [(v["name"], v["storage"]) for v in crd["spec"]["versions"]] == [
        ("v1alpha1", True),
        ("v1beta1", False),
    ]

    check(project, BIN / "ruff", "check", "--no-cache", "src", "tests")
    out = check(
        project,
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_widget_webhooks.py",
        "tests/test_widget_conversion.py",
        "tests/test_gadget_webhooks.py",
        "tests/test_project.py",
    )
    assert " passed" in out
    assert "failed" not in out


def test_the_generated_code_imports_only_memops_public_names(project: Path) -> None:
    assert (
        create_webhook(
            project, "--defaulting", "--validation", "--conversion", "--spoke-version", "v2", "--no-manifests"
        )
        == 0
    )
    allowed = GENERATED_CODE_IMPORTS
    for path in [*project.joinpath("src").rglob("*.py"), *project.joinpath("tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "memop":
                assert node.module in allowed, f"{path}: imports {node.module}"


def test_a_conversion_can_follow_a_webhook(project: Path) -> None:
    assert create_webhook(project, "--validation", "--no-manifests") == 0
    # No --spoke-version: the version after the kind's v1alpha1.
    assert create_webhook(project, "--conversion", "--no-manifests") == 0
    assert '"v1beta1"' in (project / "src/shop/widget/conversion.py").read_text()
    widget = (project / "src/shop/widget/__init__.py").read_text()
    assert "from shop.widget import controller, conversion, webhooks\n" in widget
    assert widget.count("webhooks=(webhooks.WEBHOOK,)") == 1
    assert widget.count("conversions=(conversion.CONVERSION,)") == 1
    webhooks = (project / "src/shop/widget/webhooks.py").read_text()
    assert "class WidgetValidator" in webhooks
    assert "class WidgetDefaulter" not in webhooks


@pytest.mark.parametrize(
    ("args", "kind", "words"),
    [
        (["--validation"], "Gizmo", ["no such kind", "memop create api"]),
        (["--validation"], "not-a-kind", ["UpperCamelCase"]),
        ([], "Widget", ["nothing to scaffold", "--defaulting"]),
        (["--validation", "--version", "v2"], "Widget", ["served at v1alpha1"]),
        (["--validation", "--version", "V2"], "Widget", ["not a Kubernetes API version"]),
        (["--conversion", "--spoke-version", "v1alpha1"], "Widget", ["the kind's version already"]),
        (["--conversion", "--spoke-version", "2"], "Widget", ["not a Kubernetes API version"]),
        (["--validation", "--spoke-version", "v2"], "Widget", ["only used with --conversion"]),
    ],
)
def test_bad_usage_is_one_line_and_exit_2_with_nothing_written(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], kind: str, words: list[str]
) -> None:
    capsys.readouterr()
    before = tree(project)
    line = refused(capsys, create_webhook(project, *args, "--no-manifests", kind=kind), *words)
    assert line.startswith("memop create webhook: error: ")
    assert tree(project) == before


def test_a_webhook_or_conversion_scaffolded_already_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        create_webhook(project, "--defaulting", "--conversion", "--spoke-version", "v2", "--no-manifests")
        == 0
    )
    capsys.readouterr()
    before = tree(project)
    refused(capsys, create_webhook(project, "--validation", "--no-manifests"), "webhooks.py exists already")
    again = ("--conversion", "--spoke-version", "v3", "--no-manifests")
    refused(capsys, create_webhook(project, *again), "conversion.py exists already")
    assert tree(project) == before
    # The files moved away, the DEFINITION still lists them: refused all the same.
    (project / "src/shop/widget/webhooks.py").rename(project / "src/shop/widget/moved.py")
    (project / "tests/test_widget_webhooks.py").unlink()
    refused(capsys, create_webhook(project, "--validation", "--no-manifests"), "lists webhooks already")


def test_an_unknown_flag_and_outside_a_project_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused(capsys, create_webhook(tmp_path, "--validation"), "pyproject.toml")
    code = main(["create", "webhook", "--kind", "Widget", "--mutating"], root=tmp_path)
    refused(capsys, code, "unrecognized arguments: --mutating")


def test_wire_refuses_a_definition_it_cannot_find_its_lines_in() -> None:
    source = "from shop.widget import controller\n\nDEFINITION = make()\n"
    with pytest.raises(ValueError, match="no line 'DEFINITION = ControllerDefinition\\('"):
        wire(source, "x.py", "shop", "widget", webhook=True, conversion=False)
    custom = (
        "from shop.widget import controller\n"
        "DEFINITION = ControllerDefinition(\n    crds=lambda: [crd(), other()],\n)\n"
    )
    with pytest.raises(ValueError, match="no line 'crds=lambda: \\[crd\\(\\)\\],'"):
        wire(custom, "x.py", "shop", "widget", webhook=False, conversion=True)
    assert "webhooks=(webhooks.WEBHOOK,)" in wire(
        custom, "x.py", "shop", "widget", webhook=True, conversion=False
    )


@pytest.mark.parametrize(
    ("version", "following"),
    [("v1alpha1", "v1beta1"), ("v1alpha3", "v1beta1"), ("v2beta2", "v2"), ("v1", "v2"), ("v9", "v10")],
)
def test_without_spoke_version_the_next_version_is_served(version: str, following: str) -> None:
    assert names.next_version(version) == following


def test_a_declared_kind_is_refused_naming_where_its_webhook_is(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        run(
            project, "create", "api", "--no-manifests", "--group", "shop", "--version", "v1", "--kind", "Cart"
        )
        == 0
    )
    capsys.readouterr()
    before = sorted(str(path) for path in project.rglob("*"))
    assert create_webhook(project, "--validation", kind="Cart") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "its validate function in src/" in err
    assert "cart/controller.py" in err
    assert sorted(str(path) for path in project.rglob("*")) == before
