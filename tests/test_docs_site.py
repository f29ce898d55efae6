"""The documentation site (mkdocs.yml, docs/) builds with ``mkdocs build --strict``, so a broken
link, an anchor that is gone, a page missing from the navigation or a generated reference page
that no longer generates fails the suite; and the pages stay the size a reader can take in.

The build needs the ``docs`` extra (mkdocs, mkdocs-material, mkdocstrings-python), which the
``test`` extra includes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGE_LIMIT = 400  # lines: a page over it is split (issue 39)
README_LIMIT = 300


# What each generated page must show: names its generator reads from the code (the run flags,
# a manifests option, a scaffold subcommand, the in-memory server's and the demo's options, a
# registered metric, exports of memop.runtime and memop.testing).
GENERATED = {
    "reference/cli": ["--watch-namespace", "--replaces", "memop create api", "--simulate-controllers",
                      "--pod-ready-delay"],
    "reference/metrics": ["memop_sharding_shards_owned", "controller_runtime_reconcile_total"],
    "reference/api-runtime": ["declarative_controller", "ControllerBuilder"],
    "reference/api-testing": ["run_operator", "ApiServer"],
}  # fmt: skip


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml")]
    done = subprocess.run(
        [*command, "--site-dir", str(site)],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"
    for page, names in GENERATED.items():
        html = (site / page / "index.html").read_text()
        missing = [name for name in names if name not in html]
        assert not missing, f"{page} lacks {missing}"
    for page in site.rglob("*.html"):
        assert "<!-- generated:" not in page.read_text(), page


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda page: str(page.relative_to(DOCS)))
def test_no_page_is_too_long_to_read(page: Path) -> None:
    lines = len(page.read_text(encoding="utf-8").splitlines())
    assert lines <= PAGE_LIMIT, f"{page.relative_to(REPO)} has {lines} lines: split it"


def test_the_readme_is_a_landing_page() -> None:
    lines = len((REPO / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_LIMIT, f"README.md has {lines} lines (at most {README_LIMIT}): move the rest"


def test_the_configuration_table_has_every_run_flag_and_its_variable() -> None:
    """docs/reference/configuration.md is written by hand (defaults explained, links); the
    parser is the truth, so each flag it accepts is in the table with its environment variable,
    and the table names no flag it does not accept."""
    from memop.cli.options import build_parser, env_name  # noqa: PLC0415

    rows = [
        line
        for line in (DOCS / "reference/configuration.md").read_text().splitlines()
        if line.startswith("| `--")
    ]
    documented: dict[str, str] = {}
    for row in rows:
        flags, variables = row.split("|")[1:3]
        names = [name.replace("[no-]", "") for name in re.findall(r"`(--[^`]+)`", flags)]
        for name, variable in zip(names, re.findall(r"`([A-Z_]+)`", variables), strict=True):
            documented[name] = variable
    accepted = {
        action.option_strings[0]
        for action in build_parser()._actions
        if action.option_strings and action.option_strings[0] not in ("-h", "--version")
    }
    assert set(documented) == accepted
    assert all(documented[flag] == env_name(flag) for flag in accepted)


def test_the_memcached_tutorial_shows_the_example_as_it_is() -> None:
    """The tutorial builds examples/memcached/memcached.py step by step: each block that writes
    part of the module (an import, a class, a function, the definition) is in the file verbatim,
    so the tutorial cannot teach code the tested example no longer has."""
    from snippets_markdown import snippets  # noqa: PLC0415

    example = (REPO / "examples/memcached/memcached.py").read_text()
    parts = [
        snippet.text
        for snippet in snippets(DOCS / "tutorials/memcached.md")
        if snippet.session == "tutorial" and snippet.text.startswith(("from ", "class ", "def ", "SAMPLE"))
    ]
    assert len(parts) == 6
    for part in parts:
        code = "\n".join(line for line in part.splitlines() if not line.startswith("assert "))
        assert code in example, f"the tutorial's block is not in the example:\n{code}"
