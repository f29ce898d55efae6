"""Writing a scaffold: every file new, or none written at all.

:func:`check_new` refuses (before anything is written) when a file to write exists already;
:func:`write_new` then creates each with an exclusive open, so a file that appeared meanwhile is
never overwritten either. Files are written as UTF-8 with ``\\n`` line ends.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from memop.scaffold.names import ScaffoldError


@dataclass(frozen=True)
class NewFile:
    """A file to create: its path relative to the project's root (``/``-separated), its text,
    and whether it is executable (a script)."""

    path: str
    text: str
    executable: bool = False

    def __post_init__(self) -> None:
        pure = PurePosixPath(self.path)
        if pure.is_absolute() or ".." in pure.parts:
            raise ValueError(f"{self.path!r} is not a path inside the project")


def check_new(root: Path, files: Sequence[NewFile]) -> None:
    """Raise ScaffoldError naming the first of ``files`` that exists under ``root`` (or whose
    folder is a file)."""
    for new in files:
        target = root / new.path
        if target.exists() or target.is_symlink():
            raise ScaffoldError(
                f"{new.path} exists already: memop never overwrites a file (move it away first)"
            )
        for parent in PurePosixPath(new.path).parents:
            folder = root / parent
            if str(parent) != "." and folder.exists() and not folder.is_dir():
                raise ScaffoldError(f"{parent} is a file, where a folder is needed for {new.path}")


def write_new(root: Path, files: Sequence[NewFile]) -> None:
    """Create every one of ``files`` under ``root`` (call :func:`check_new` first)."""
    for new in files:
        target = root / new.path
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(target, "x", encoding="utf-8", newline="\n") as out:
                out.write(new.text)
        except FileExistsError:
            raise ScaffoldError(f"{new.path} appeared while writing: memop never overwrites a file") from None
        if new.executable:
            os.chmod(target, target.stat().st_mode | 0o111)
