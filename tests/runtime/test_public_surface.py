"""memop.runtime's public surface: what its ``__init__`` exports exists and says what it is."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from memop import runtime


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
    from memop.cli.controllers import ALL  # noqa: PLC0415

    src = Path(runtime.__file__).parents[1]
    for name in ALL:
        others = {f"memop.{other}" for other in ALL if other != name}
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
