"""The package as installed: its console script, and the dependencies and extras it declares."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import memop
from memop.project import installed_projects

ROOT = Path(__file__).resolve().parents[1]


def test_the_memop_console_script_runs_the_cli() -> None:
    [entry] = [e for e in metadata.entry_points(group="console_scripts") if e.name == "memop"]
    assert entry.value == "memop.cli.main:main"
    script = shutil.which("memop", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("memop is not installed into this interpreter's environment (pip install -e .)")
    out = subprocess.run([script, "--version"], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == f"memop {memop.__version__}"
    helped = subprocess.run([script, "--help"], capture_output=True, text=True, check=True, timeout=60)
    assert "Memcached" in helped.stdout


def test_memops_own_controllers_are_registered_as_any_projects_are() -> None:
    # The path a user's project takes: the memop.controllers entry-point group, found by the CLI
    # (memop.project.installed_projects) in the installed distribution's metadata.
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["options.entry_points"]["memop.controllers"].split() == ["memop", "=", "memop.builtin:PROJECT"]
    group = metadata.entry_points(group="memop.controllers")
    [entry] = [e for e in group if e.dist is not None and e.dist.name == "memop"]
    assert (entry.name, entry.value) == ("memop", "memop.builtin:PROJECT")
    from memop.builtin import PROJECT  # noqa: PLC0415

    assert entry.load() is PROJECT
    assert installed_projects()["memop"] is PROJECT


def requirement_names(text: str) -> set[str]:
    names = set()
    for line in text.strip().splitlines():
        match = re.match(r"\s*([A-Za-z0-9_.-]+)", line)
        if match:
            names.add(match[1].lower().replace("_", "-"))
    return names


def test_setup_cfg_declares_the_dependencies_and_extras() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["options"]["package_dir"].split() == ["=", "src"]
    install = requirement_names(cfg["options"]["install_requires"])
    assert {"kubernetes-asyncio", "aiohttp", "prometheus-client", "tenacity"} <= install
    extras = cfg["options.extras_require"]
    assert {"pytest", "pytest-asyncio", "pytest-xdist", "hypothesis"} <= requirement_names(extras["test"])
    assert {"ruff", "mypy"} <= requirement_names(extras["dev"])
    assert cfg["options.entry_points"]["console_scripts"].strip() == "memop = memop.cli.main:main"
    # The installed distribution says the same (an editable install reads setup.cfg too).
    requires = {re.split(r"[\s;<>=!~\[]", r, maxsplit=1)[0].lower() for r in metadata.requires("memop") or ()}
    assert {"kubernetes-asyncio", "aiohttp", "prometheus-client", "tenacity"} <= {
        r.replace("_", "-") for r in requires
    }


def test_tox_envs() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "tox.ini")
    assert [e.strip() for e in cfg["tox"]["envlist"].split(",")] == ["py311", "lint", "type"]
    assert cfg["testenv"]["commands"].strip().startswith("pytest")
    assert cfg["testenv:lint"]["commands"].strip().startswith("ruff check")
    assert cfg["testenv:type"]["commands"].strip() == "mypy --strict src"
