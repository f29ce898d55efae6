"""The code stays what the project promises: ruff clean and formatted, and mypy --strict clean on src/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' installs it)")
    return path


def _passes(tool: str, *args: str, timeout: float | None = None) -> None:
    """``tool args`` run from the repository's root exits 0 (its output is the failure's message)."""
    result = subprocess.run(
        [_tool(tool), *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=timeout
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean() -> None:
    _passes("ruff", "check", "src", "tests", "bench", "examples")


def test_ruff_format_leaves_every_file_as_it_is() -> None:
    # ruff is pinned to one minor version (setup.cfg): its formatting style changes between them.
    _passes("ruff", "format", "--check", "src", "tests", "bench", "examples")


def test_mypy_strict_is_clean_on_src() -> None:
    _passes("mypy", "--strict", "src", timeout=300)


def test_mypy_strict_is_clean_on_the_examples() -> None:
    # What a user writes on memop's public surface type-checks as strictly as memop itself.
    examples = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "examples").glob("*/*.py"))
    _passes("mypy", "--strict", *examples, timeout=300)
