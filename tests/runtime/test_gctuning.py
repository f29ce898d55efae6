import gc
import subprocess
import sys
from pathlib import Path

from prometheus_client import REGISTRY

from memop.runtime.manager.gctuning import GC_THRESHOLDS, track_gc_time, tune_gc


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


def _gc_seconds(generation: int) -> float:
    value = REGISTRY.get_sample_value("memop_gc_collection_seconds_total", {"generation": str(generation)})
    assert value is not None  # every generation's series exists from the start
    return value


def test_the_collectors_time_is_counted_per_generation_once_tracked() -> None:
    track_gc_time()
    track_gc_time()  # idempotent: one callback, each collection counted once
    assert sum(1 for cb in gc.callbacks if type(cb).__name__ == "_Timer") == 1
    # Garbage in cycles, so the full collection has work worth a measurable time.
    for _ in range(200_000):
        a: list[object] = []
        a.append(a)
    gc.disable()  # only the collections asked for below run meanwhile
    try:
        before = [_gc_seconds(g) for g in range(3)]
        gc.collect(2)
        after_full = [_gc_seconds(g) for g in range(3)]
        gc.collect(0)
        after_young = [_gc_seconds(g) for g in range(3)]
    finally:
        gc.enable()
    assert after_full[2] > before[2]
    assert after_full[:2] == before[:2]
    assert after_young[0] > after_full[0]
    assert after_young[1:] == after_full[1:]
