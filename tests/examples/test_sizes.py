"""The examples stay what the README says they are: operators of at most 120 lines."""

from __future__ import annotations

from pathlib import Path

import pytest

# Not imported from this folder's conftest: with tests/e2e collected in the same run, the
# module named conftest may be e2e's (pytest's rootdir-relative imports).
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

LIMIT = 120


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*/*.py")), ids=lambda path: path.parent.name)
def test_an_example_operator_is_at_most_120_lines(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= LIMIT, f"{path} has {len(lines)} lines"
