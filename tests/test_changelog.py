"""CHANGELOG.md keeps Keep a Changelog's form, and its newest released version is the one
``memop --version`` reports: a release that bumps one without the other fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_VERSION = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?$", re.M)


def versions() -> list[tuple[str, str | None]]:
    """(version, date) of each ``## [VERSION] - DATE`` heading, newest first."""
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    return [(found["version"], found["date"]) for found in _VERSION.finditer(text)]


def test_the_changelog_starts_with_unreleased_then_dated_versions() -> None:
    found = versions()
    assert found[0] == ("Unreleased", None)
    released = found[1:]
    assert released, "no released version in CHANGELOG.md"
    assert all(date is not None for _, date in released), released
    assert released[-1][0] == "0.1.0"
    dates = [date for _, date in released]
    assert dates == sorted(dates, reverse=True), "newest first"


def test_memop_version_is_the_newest_release() -> None:
    newest = versions()[1][0]
    done = subprocess.run(
        [sys.executable, "-m", "memop", "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == f"memop {newest}"


def test_every_release_says_what_upgrading_takes() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    sections = _VERSION.split(text)
    # split() gives [preamble, version, date, body, version, date, body, ...]
    bodies = {sections[i]: sections[i + 2] for i in range(1, len(sections), 3)}
    for version, body in bodies.items():
        assert "### Upgrading" in body or "Nothing to upgrade from" in body, version
