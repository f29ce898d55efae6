"""memop.runtime's public surface: what its ``__init__`` exports exists and says what it is."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import memop
from memop import runtime
from memop.runtime import logs


def test_every_exported_name_exists_and_is_documented() -> None:
    assert len(set(runtime.__all__)) == len(runtime.__all__)
    for name in runtime.__all__:
        value = getattr(runtime, name)
        if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismodule(value):
            assert inspect.getdoc(value), f"memop.runtime.{name} has no docstring"


def test_the_package_docstring_names_every_class_it_exports() -> None:
    doc = runtime.__doc__ or ""
    for name in runtime.__all__:
        if inspect.isclass(getattr(runtime, name)):
            assert name in doc, f"memop.runtime's docstring does not mention {name}"


@pytest.mark.parametrize("package", ["memop.podset", "memop.mypod"])
def test_the_new_controllers_use_only_the_public_surface(package: str) -> None:
    # PodSet is the README's example of a controller: what the two newest controllers import
    # from memop.runtime is exported, or lives in a module that is (conditions, crdgen...).
    public_modules = {n for n in runtime.__all__ if inspect.ismodule(getattr(runtime, n))}
    imported = [
        (module, name)
        for path in sorted((Path(runtime.__file__).parents[1] / package.split(".")[1]).glob("*.py"))
        for module, name in _runtime_imports(path.read_text())
    ]
    assert imported
    for module, name in imported:
        assert name in runtime.__all__ or module in public_modules or name in _DETAILS, f"{module}.{name}"


# Label-selector building blocks PodSet uses to build a selector without parsing a string.
_DETAILS = {"Requirement", "EQUALS"}


def _runtime_imports(source: str) -> list[tuple[str, str]]:
    """(module, name) of each ``from memop.runtime.<module> import name``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memop.runtime."):
            found += [(node.module.rsplit(".", 1)[1], alias.name) for alias in node.names]  # type: ignore[union-attr]
    return found


def test_no_controller_package_imports_another() -> None:
    from memop.builtin import PROJECT  # noqa: PLC0415

    src = Path(runtime.__file__).parents[1]
    names = PROJECT.controller_names
    for name in names:
        others = {f"memop.{other}" for other in names if other != name}
        for path in sorted((src / name).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom | ast.Import):
                    modules = (
                        [node.module or ""]
                        if isinstance(node, ast.ImportFrom)
                        else [a.name for a in node.names]
                    )
                    for module in modules:
                        assert not any(module == o or module.startswith(o + ".") for o in others), (
                            f"{path.name} of {name} imports {module}"
                        )


def test_what_a_program_needs_to_run_a_manager_itself_is_exported() -> None:
    # Every type a ManagerOptions field takes, and what the command line uses to fill them.
    needed = {
        "Manager", "ManagerOptions", "Address", "LeaderElectionConfig", "LeaderForLifeConfig",
        "default_identity", "load_configuration", "KubeConfigError", "running_in_cluster",
        "in_cluster_namespace", "tls_context", "configure_logging", "Client", "SetupContext",
    }  # fmt: skip
    assert needed <= set(runtime.__all__)
    hints = typing.get_type_hints(runtime.ManagerOptions)
    for field in dataclasses.fields(runtime.ManagerOptions):
        for kind in _classes(hints[field.name]):
            if kind.__module__.startswith("memop."):
                assert getattr(runtime, kind.__name__, None) is kind, f"ManagerOptions.{field.name}: {kind}"
    assert runtime.configure_logging is logs.configure


def _classes(hint: object) -> list[type]:
    """The classes a type hint names (through unions and generics)."""
    if isinstance(hint, type):
        return [hint]
    return [kind for argument in typing.get_args(hint) for kind in _classes(argument)]


def test_the_command_line_builds_its_manager_from_public_names() -> None:
    # memop's own command line is a program like a user's: what it imports from the runtime to
    # build and run a manager is exported (its own options and project modules aside).
    app = Path(runtime.__file__).parents[1] / "cli" / "app.py"
    private = set()
    for node in ast.walk(ast.parse(app.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memop.runtime."):
            private |= {alias.name for alias in node.names if alias.name not in runtime.__all__}
    assert private <= {"logs", "metrics", "EXIT_FAILED"}, private


def test_the_memop_package_exports_run_and_project_lazily() -> None:
    code = (
        "import json, sys; import memop; before = sorted(m for m in ('memop.cli.main', 'memop.project') "
        "if m in sys.modules); from memop import Project, ProjectError, run; "
        "print(json.dumps([before, Project.__module__, ProjectError.__module__, run.__module__]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == [[], "memop.project", "memop.project", "memop.cli.main"]
    for name in memop.__all__:
        assert getattr(memop, name) is not None
        if name != "__version__":
            assert inspect.getdoc(getattr(memop, name)), name
    with pytest.raises(AttributeError):
        memop.nothing_here  # noqa: B018


def test_memop_testing_exports_exist_and_are_documented() -> None:
    from memop import testing  # noqa: PLC0415

    doc = testing.__doc__ or ""
    for name in testing.__all__:
        value = getattr(testing, name)
        assert inspect.getdoc(value), f"memop.testing.{name} has no docstring"
        assert name in doc, f"memop.testing's docstring does not mention {name}"


def test_webhooks_are_declared_and_served_from_public_names() -> None:
    # What a controller package declares (its definition's webhooks= and conversions=, and what
    # their fields take) and what a program runs them with are exported.
    needed = {
        "AdmissionWebhook", "AdmissionRequest", "Defaulter", "Validator", "FieldError", "ValidationError",
        "Conversion", "Spoke", "CONVERSION_PATH", "WebhookServer", "WebhookServerOptions",
    }  # fmt: skip
    assert needed <= set(runtime.__all__)
    from memop.runtime.webhook import declarations, server  # noqa: PLC0415

    for name in needed - {"WebhookServer", "WebhookServerOptions"}:
        assert getattr(runtime, name) is getattr(declarations, name)
    assert runtime.WebhookServer is server.WebhookServer
    types = [
        typing.get_type_hints(runtime.ControllerDefinition)["webhooks"],
        typing.get_type_hints(runtime.ControllerDefinition)["conversions"],
        *typing.get_type_hints(runtime.AdmissionWebhook).values(),
        *typing.get_type_hints(runtime.Conversion).values(),
        *typing.get_type_hints(runtime.Manager.add_webhooks).values(),
    ]
    for hint in types:
        for kind in _classes(hint):
            if kind.__module__.startswith("memop."):
                assert getattr(runtime, kind.__name__, None) is kind, kind
