"""A project scaffolded from a memop that is on no package index installs as it is: ``memop
init`` run from this repository's editable install makes ``memop @ file:///<repository>`` its
dependency, and ``pip install`` of the project into a fresh virtual environment gets memop
from there (and its other dependencies as pip is configured to). Installed, the project's
``memop manifests`` (the installed form, no flag) writes the files its ``--controller-module``
form writes, byte for byte.

(Installed otherwise, from a wheel or a VCS commit, the project depends on that and the test
checks the same; from a package index it is skipped: nothing here to install from.)

One test, marked ``install``: about 50 s on a loaded 2-core machine, most of it pip building
memop and installing its dependencies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from memop.scaffold import main as scaffold
from memop.scaffold.origin import memop_origin

PROJECT = "shop"
TIMEOUT = 300


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, (
        f"{' '.join(map(str, command))} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    )
    return done.stdout


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()
    }


@pytest.mark.install
def test_a_project_scaffolded_from_a_clone_installs_and_writes_its_manifests(tmp_path: Path) -> None:
    origin = memop_origin()
    if origin.from_index:
        pytest.skip("memop is installed from a package index: the project depends on it there")
    root = tmp_path / PROJECT
    root.mkdir()
    assert scaffold(["init"], root=root) == 0
    assert (
        scaffold(
            ["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Widget"], root=root
        )
        == 0
    )

    venv = tmp_path / "venv"
    # Without a pip of its own (ensurepip takes seconds): this one's pip installs into it.
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    pip = (sys.executable, "-m", "pip", "--python", venv / "bin/python")
    run(*pip, "install", "--quiet", "--no-compile", root, cwd=tmp_path, env=env)

    installed = json.loads(
        run(
            venv / "bin/python",
            "-c",
            "import importlib.metadata as m; print(m.distribution('memop').read_text('direct_url.json'))",
            cwd=tmp_path,
            env=env,
        )
    )
    # memop came from where this one did (this repository, when installed with pip install -e .).
    assert installed["url"] == str(Requirement(origin.requirement).url).split("#")[0]
    # The installed form, as a user of the installed project runs it, from anywhere.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run(venv / "bin/memop", "manifests", cwd=elsewhere, env=env)
    assert tree(elsewhere / "manifests") == tree(root / "manifests")  # what create api wrote
    assert "Widget" in run(venv / "bin/python", "-m", "shop", "--help", cwd=elsewhere, env=env)
