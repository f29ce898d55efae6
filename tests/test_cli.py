import subprocess
import sys

import memop


def test_version_flag_prints_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memop", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"memop {memop.__version__}"


def test_help_flag_describes_the_operator() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memop", "--help"], capture_output=True, text=True, check=True
    )
    assert "Memcached" in out.stdout
