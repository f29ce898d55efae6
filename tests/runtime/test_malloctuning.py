"""glibc's mmap threshold held for the operator process (memop.runtime.manager.malloctuning).

Each case runs in a fresh interpreter: the threshold is process-wide, and glibc reads its
environment once, at start."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from memop.runtime.manager.malloctuning import tune_malloc

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

# Frees a 4 MiB mapped block (which raises glibc's own threshold to 4 MiB), then prints whether
# a 512 KiB block is mapped on its own (1) or cut from the heap (0), as mallinfo2 counts them.
_PROBE = """
import ctypes
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
large = bytearray(4 << 20)
del large
before = libc.mallinfo2().hblks
block = bytearray(512 << 10)
print("mapped", libc.mallinfo2().hblks - before)
"""


def _run(script: str, env: dict[str, str] | None = None) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return out.stdout.split()


@glibc
def test_the_operator_command_holds_the_threshold(tmp_path: Path) -> None:
    # The operator's run path (not --help or the tools); a missing kubeconfig ends the run at
    # once, after the tuning.
    tuned = _run(
        "from memop.cli.main import main\n"
        f"print('exit', main(['--kubeconfig', {str(tmp_path / 'missing')!r}]))\n" + _PROBE
    )
    assert tuned[-2:] == ["mapped", "1"]
    assert tuned[:2] != ["exit", "0"]
    # Without it glibc raised its threshold past the block: the probe tells the two apart.
    assert _run(_PROBE) == ["mapped", "0"]


@glibc
@pytest.mark.parametrize(
    "env",
    [{"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=8388608"}, {"MALLOC_MMAP_THRESHOLD_": "8388608"}],
    ids=["GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_"],
)
def test_glibcs_own_setting_is_left_alone(env: dict[str, str]) -> None:
    script = "from memop.runtime.manager.malloctuning import tune_malloc\nprint('tuned', tune_malloc())\n"
    # 8 MiB chosen: the 512 KiB block stays in the heap.
    assert _run(script + _PROBE, env) == ["tuned", "False", "mapped", "0"]


def test_nothing_is_done_off_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "libc_ver", lambda: ("musl", "1.2.5"))
    assert tune_malloc({}) is False
