import gc
import subprocess
import sys
from pathlib import Path

from memop.runtime.manager.gctuning import GC_THRESHOLDS, tune_gc


def test_tune_gc_sets_the_thresholds() -> None:
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
    finally:
        gc.set_threshold(*before)


def test_operator_command_runs_with_the_thresholds(tmp_path: Path) -> None:
    # The operator's run path (not --help or the tools) tunes the collector before the event
    # loop starts; a missing kubeconfig ends that run at once, after the tuning.
    script = (
        "import gc, sys\n"
        "from memop.cli.main import main\n"
        f"code = main(['--kubeconfig', {str(tmp_path / 'missing')!r}])\n"
        "print(code, *gc.get_threshold())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    code, *thresholds = out.stdout.split()
    assert code != "0"
    assert tuple(int(t) for t in thresholds) == GC_THRESHOLDS
