"""The bench scripts under ``bench/``, imported in-process for the checks that need no process of
their own: their option checks. Run as a process each such check took about 1.5 s, nearly all
of it imports; one check per script still runs as a process (exit status, nothing on stdout)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench_module(script: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench/<script>`` imported as a module, as when it runs: it imports its siblings by name."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module(Path(script).stem)


def usage_error(
    script: str, args: Sequence[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    """``bench/<script>``'s ``main(args)``, which must refuse them: exit status 2, one line on
    stderr (returned), nothing on stdout."""
    module = bench_module(script, monkeypatch)
    with pytest.raises(SystemExit) as exited:
        module.main(list(args))
    out, err = capsys.readouterr()
    assert exited.value.code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    return err
