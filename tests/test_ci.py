"""``.ci/run``: it runs the README's two set-up commands, read from the README, and fails on any
failure, "no tests collected" included.

The real commands (a fresh venv, an install, the whole suite) are what CI runs; here the script
runs in a scratch copy whose README holds stand-ins for them, so its own logic is checked: the
commands it reads, waiting for the demo, stopping it with Ctrl-C, and the exit status.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci" / "run"

DEMO_OK = (
    "import signal, sys, time; "
    "signal.signal(signal.SIGINT, lambda *_: sys.exit(0)); "
    "print('demo: memcached-sample is Available', flush=True); "
    "time.sleep(300)"
)
DEMO_BAD_EXIT = (
    "import signal, sys, time; "
    "signal.signal(signal.SIGINT, lambda *_: sys.exit(3)); "
    "print('demo: memcached-sample is Available', flush=True); "
    "time.sleep(300)"
)
DEMO_NEVER_READY = "import sys; print('demo: something went wrong', flush=True); sys.exit(1)"


def readme_commands(readme: Path) -> list[str]:
    """The two commands, extracted by .ci/run's own function."""
    function = subprocess.run(
        ["sed", "-n", "/^readme_command()/,/^}/p", str(CI)], capture_output=True, text=True, check=True
    ).stdout
    assert function.strip(), "readme_command() not found in .ci/run"
    script = f"{function}\nreadme_command 1\nreadme_command 2\n"
    out = subprocess.run(
        ["bash", "-c", script], cwd=readme.parent, capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_ci_reads_the_readme_set_up_commands() -> None:
    run, tests = readme_commands(ROOT / "README.md")
    assert run.startswith("python3 -m venv .venv && .venv/bin/pip install . && ")
    assert run.endswith(".venv/bin/python -m memop demo")
    assert tests.startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && ")
    # pytest-xdist, one worker per core: the suite is mostly waiting on servers and processes.
    assert tests.endswith(".venv/bin/python -m pytest -n auto")
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    block = setup.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert commands == [run, tests]  # exactly two commands, and those are the ones CI runs


def scratch_ci(tmp_path: Path, run: str, tests: str) -> Path:
    """A copy of .ci/run beside a README with the given commands."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(CI, tmp_path / ".ci" / "run")
    (tmp_path / "README.md").write_text(
        "# x\n\n## Set-up\n\n```sh\n# 1. run it\n" + run + "\n\n# 2. test it\n" + tests + "\n```\n"
    )
    # Stand-ins so the script never tries to install Prometheus from here.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("prometheus", "promtool"):
        path = bin_dir / tool
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def run_ci(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", str(root / ".ci" / "run")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def py(code: str) -> str:
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def test_ci_passes_when_both_commands_pass(tmp_path: Path) -> None:
    root = scratch_ci(tmp_path, py(DEMO_OK), py("print('tests ran')"))
    result = run_ci(root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tests ran" in result.stdout


def test_ci_fails_when_pytest_collects_no_tests(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    pytest_cmd = f"cd {shlex.quote(str(empty))} && {shlex.quote(sys.executable)} -m pytest"
    ci_root = tmp_path / "ci"
    ci_root.mkdir()
    root = scratch_ci(ci_root, py(DEMO_OK), pytest_cmd)
    result = run_ci(root)
    assert "no tests ran" in result.stdout
    assert result.returncode == 5, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("demo", "message"),
    [
        (DEMO_NEVER_READY, "memop demo never reported the sample Available"),
        (DEMO_BAD_EXIT, "memop demo exited with 3 after Ctrl-C"),
    ],
)
def test_ci_fails_when_the_demo_fails(tmp_path: Path, demo: str, message: str) -> None:
    root = scratch_ci(tmp_path, py(demo), py("raise SystemExit('the tests must not run')"))
    result = run_ci(root)
    assert result.returncode != 0
    assert message in result.stdout
    assert "the tests must not run" not in result.stdout + result.stderr


def test_ci_fails_when_a_test_fails(tmp_path: Path) -> None:
    root = scratch_ci(tmp_path, py(DEMO_OK), py("raise SystemExit(1)"))
    assert run_ci(root).returncode == 1
