"""The benchmarks (everything under bench/) still run and report their figures.

Each runs as its own process at a tiny size, as a user would run it, so a change to the runtime
or the test server that breaks a benchmark fails here instead of the next time someone measures.
The figures themselves are not checked (they mean nothing at this size), only that they exist
and are sane.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memop.runtime import ManagerOptions
from tests.benchscripts import bench_module, usage_error

BENCH = Path(__file__).resolve().parent.parent / "bench"


def run_bench(script: str, *args: str, stderr_lines: list[str] | None = None) -> dict[str, Any]:
    """Run a benchmark in its own process group, so that on a timeout the API server and the
    measuring process it started are killed with it; its stderr's lines go to ``stderr_lines``."""
    with subprocess.Popen(
        [sys.executable, str(BENCH / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as bench:
        try:
            stdout, stderr = bench.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.communicate()
            raise
    assert bench.returncode == 0, stderr[-3000:]
    if stderr_lines is not None:
        stderr_lines.extend(stderr.splitlines())
    result: dict[str, Any] = json.loads(stdout)
    return result


def assert_rate(figures: dict[str, Any], rate: str) -> None:
    assert figures[rate]["median"] > 0
    assert figures[rate]["best"] >= figures[rate]["median"]
    assert figures["seconds"] > 0
    assert figures["cpu_seconds"] >= 0
    assert figures["gc_seconds"] >= 0


@pytest.mark.parametrize(("kind", "objects", "events"), [("configmaps", 40, 40), ("pods", 12, 24)])
def test_reflector_benchmark_reports_watch_and_list_ingest(kind: str, objects: int, events: int) -> None:
    result = run_bench("reflector.py", f"--kind={kind}", f"--objects={objects}", "--repeats=1")
    assert result["kind"] == kind
    assert result["objects"] == objects
    # Pods arrive twice: created Pending, then made Running by the simulated kubelet.
    assert result["watch"]["events"] == events
    assert_rate(result["watch"], "events_per_second")
    assert_rate(result["list"], "objects_per_second")
    assert result["list"]["fetch_seconds"] > 0
    assert result["transform"] == ("pod_transform" if kind == "pods" else None)


def test_memory_benchmark_reports_every_kind_with_and_without_transforms() -> None:
    result = run_bench("memory.py", "--objects=12")
    assert result["objects_per_kind"] == 12
    for variant in ("with_transforms", "without_transforms"):
        figures = result[variant]
        assert figures["baseline_mib"] > 0
        assert figures["peak_rss_mib"] >= figures["pods"]["rss_mib"]
        for kind in ("memcacheds", "deployments", "pods"):
            assert isinstance(figures[kind]["kib_per_object"], float)
            assert figures[kind]["rss_mib"] > 0
            assert figures[kind]["json_bytes"] > 500
    assert result["with_transforms"]["pods"]["transform"] == "pod_transform"
    assert result["with_transforms"]["deployments"]["transform"] == "deployment_transform"
    assert result["without_transforms"]["pods"]["transform"] is None


def test_workqueue_benchmark_reports_every_key_kind_with_and_without_metrics() -> None:
    # The benchmark itself asserts every added key was taken and finished exactly once.
    result = run_bench("workqueue.py", "--keys=200", "--rounds=2", "--repeats=2")
    assert result["keys"] == 200
    assert result["rounds_per_run"] == 2
    assert result["runs"] == 2
    labels = {
        f"{kind}_{key}_metrics_{metrics}"
        for kind in ("sequential", "workers")
        for key in ("request", "string")
        for metrics in ("on", "off")
    }
    assert labels <= result.keys()
    for label in labels:
        assert result[label]["median"] > 0
        assert result[label]["best"] >= result[label]["median"]


def test_converge_benchmark_compares_memop_with_the_floor_run_by_run() -> None:
    result = run_bench(
        "converge.py",
        "--compare",
        "--crs=20",
        "--namespaces=2",
        "--repeat=2",
        "--memop-arg=--event-qps=0.01",
        "--memop-arg=--event-burst=1",
        # The control plane's CPU beside the server would only slow the suite's other tests
        # (tests/test_bench_controlplanemodel.py checks it is spent).
        "--control-plane-cpu=0",
    )
    memop, floor = result["memop"], result["floor"]
    assert memop["wall_seconds"] > 0
    assert floor["wall_seconds"] > 0
    assert len(memop["wall_seconds_all_runs"]) == len(floor["wall_seconds_all_runs"]) == 2
    assert result["memop_over_floor"] == round(memop["wall_seconds"] / floor["wall_seconds"], 3)
    assert len(result["memop_over_floor_each_pair"]) == 2
    assert all(ratio > 0 for ratio in result["memop_over_floor_each_pair"])
    assert result["memop_cpu_over_floor_cpu"] > 0
    # Every CR was converged through the three writes the floor also makes, at least.
    assert floor["writes_per_cr"]["total"] == 3.0
    assert memop["writes_per_cr"]["to_settle"]["total"] >= 3.0
    assert memop["idle"]["requests"] == 0
    assert memop["reconcile_panics"] == 0
    # --memop-arg reached memop's command line; and every Created Event was sent once memop
    # was quiet, at full speed: the rate limit is only for Events deferred under busy queues.
    assert "--event-qps=0.01" in memop["memop_args"]
    assert memop["writes_per_cr"]["to_settle"]["events (apart)"] == 1.0


def test_the_floors_events_wait_for_its_work_as_memops_wait_for_their_queues(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    converge = bench_module("converge.py", monkeypatch)
    # The floor keeps memop's default rate limit without importing memop's manager.
    defaults = ManagerOptions()
    assert defaults.event_qps == converge.MEMOP_EVENT_QPS
    assert defaults.event_burst == converge.MEMOP_EVENT_BURST

    async def check() -> None:
        work = converge.FloorWork()
        assert work.idle
        assert work.adds == 0
        work.add()
        work.add()
        assert not work.idle
        assert work.adds == 2
        waiting = asyncio.create_task(work.wait_idle())
        work.done()
        await asyncio.sleep(0)
        assert not waiting.done()  # one Memcached still being handled
        work.done()
        await asyncio.wait_for(waiting, timeout=5)
        assert work.idle
        assert work.adds == 2

    asyncio.run(check())


def test_the_floor_with_memops_watches_and_events_converges() -> None:
    result = run_bench(
        "converge.py", "--floor", "--floor-watches", "--floor-events", "--crs=12", "--namespaces=2",
        "--control-plane-cpu=0",
    )  # fmt: skip
    assert result["mode"] == "floor"
    assert result["floor_also"] == {"watches_deployments_and_pods": True, "records_events": True}
    assert result["floor_errors"] == 0
    assert result["writes_per_cr"]["total"] == 3.0


def test_converge_benchmark_reports_cost_as_work_grows() -> None:
    # The model of a real control plane without nodes: kube-controller-manager's rate limits,
    # pods Pending. memop and the floor alternate at each size.
    # Another operator runs beside them in every round: memop itself, started from a template.
    other = (
        f"again={sys.executable} -m memop --max-concurrent-reconciles {{workers}} "
        "--metrics-bind-address 0 --health-probe-bind-address 0"
    )
    said: list[str] = []
    result = run_bench(
        "converge.py",
        "--sizes=6,12",
        "--namespaces=2",
        "--skip-settle",
        "--count-pod-events",
        f"--operator={other}",
        "--control-plane-cpu=0.001",
        stderr_lines=said,
    )
    # Each run's report on stderr as it ended, in order: what a bench stopped early keeps.
    finished = [json.loads(line) for line in said if line.startswith('{"run_done"')]
    assert [(run["run_done"], run["crs"], run["round"], run["of"]) for run in finished] == [
        (mode, crs, 1, 1) for crs in (6, 12) for mode in ("memop", "floor", "again")
    ]
    assert all(run["report"]["wall_seconds"] > 0 for run in finished)
    assert result["simulated_control_plane"] == {
        "controller_qps": 20.0,
        "controller_burst": 30,
        "nodes": False,
        "write_latency": 0.02,
        "control_plane_cpu_per_write": 0.001,
    }
    assert [size["crs"] for size in result["sizes"]] == [6, 12]
    # The floor runs on memop's event loop (uvloop where installed), as the floor does.
    assert result["floor_event_loop"] == ("uvloop" if importlib.util.find_spec("uvloop") else "asyncio")
    for size in result["sizes"]:
        assert size["rounds"] == 1
        [pair] = size["memop_over_floor"]["each_round"]
        assert pair > 0
        [memop_wall] = size["wall_seconds"]["memop_each_round"]
        [floor_wall] = size["wall_seconds"]["floor_each_round"]
        assert size["memop_over_floor"]["median"] == round(memop_wall / floor_wall, 3)
        cpu = size["memop_cpu_seconds"]
        assert cpu["from_start_to_converge"] > cpu["to_converge"] > 0
        # The floor's start-up counts in its figure from the start, as memop's does (its CPU to
        # converge a dozen CRs can round to 0.00).
        assert size["floor_cpu_seconds_from_start"] > size["floor_cpu_seconds"] >= 0
        # The measure: memop's CPU from its start over the floor process's, round by
        # round and as the ratio of the medians; and memop's CPU per 1,000 CRs.
        [floor_cpu] = size["floor_cpu_from_start_each_round"]
        [memop_cpu] = cpu["from_start_each_round"]
        assert size["memop_cpu_from_start_over_floor"]["each_round"] == [round(memop_cpu / floor_cpu, 3)]
        assert size["memop_cpu_from_start_over_floor"]["median"] == round(memop_cpu / floor_cpu, 3)
        assert size["memop_cpu_seconds_from_start_per_1000_crs"] == round(memop_cpu / size["crs"] * 1000, 3)
        assert size["floor_peak_rss_mb"] > 0
        assert size["memop_peak_rss_mb"]["max"] > 0
        # The modelled control plane's CPU: the server's and its load processes'.
        assert size["server_cpu_seconds_while_converging"] > 0
        assert size["memop_gc"]["seconds_to_converge"] >= 0
        assert set(size["memop_gc"]["collections_to_converge"]) == {"0", "1", "2"}
        # The three writes per CR at least, one reconcile each at least; memop's watches saw
        # each Memcached at least created, given its finalizer and its status.
        assert size["writes_per_cr"] >= 3.0
        assert size["reconciles_per_cr"] >= 1.0
        events = size["watch_events_per_cr"]
        assert events["memcacheds"] >= 3.0
        assert events["deployments"] >= 1.0
        assert "pods" in events
        again = size["operators"]["again"]
        [pair] = again["over_floor"]["each_round"]
        assert pair > 0
        assert again["cpu_seconds"]["from_start_to_converge"] > again["cpu_seconds"]["to_converge"] > 0
        assert again["peak_rss_mb"]["max"] > 0
        assert again["log_error_lines_each_round"] == [0]


def test_side_by_side_converges_every_process_at_once_and_compares_their_cpu() -> None:
    other = (
        f"again={sys.executable} -m memop --max-concurrent-reconciles {{workers}} "
        "--metrics-bind-address 0 --health-probe-bind-address 0"
    )
    said: list[str] = []
    result = run_bench(
        "converge.py", "--side-by-side", "--sizes=8", "--repeat=2", "--namespaces=2", "--skip-settle",
        f"--operator={other}", stderr_lines=said,
    )  # fmt: skip
    finished = [json.loads(line) for line in said if line.startswith('{"run_done"')]
    assert [(run["run_done"], run["round"], run["of"]) for run in finished] == [
        ("side-by-side", 1, 2),
        ("side-by-side", 2, 2),
    ]
    assert all(set(run["report"]) == {"memop", "floor", "again"} for run in finished)
    [size] = result["sizes"]
    assert (size["crs"], size["rounds"], result["side_by_side"]) == (8, 2, True)
    for mode in ("memop", "floor", "again"):
        figures = size[mode]
        assert len(figures["cpu_seconds_from_start_each_round"]) == 2
        assert figures["cpu_seconds_from_start"] > figures["cpu_seconds_to_converge"] >= 0
        assert all(wall > 0 for wall in figures["wall_seconds_each_round"])
        assert figures["voluntary_switches_per_cr"] > 0
        assert figures["peak_rss_mb"] > 0
    floor_cpu = size["floor"]["cpu_seconds_from_start_each_round"]
    for mode in ("memop", "again"):
        memop_cpu = size[mode]["cpu_seconds_from_start_each_round"]
        ratios = [round(m / f, 3) for m, f in zip(memop_cpu, floor_cpu, strict=True)]
        assert size[mode]["cpu_from_start_over_floor"]["each_round"] == ratios
    # Each process converged Memcacheds of its own, in namespaces of its own that it watched.
    for run in finished:
        namespaces = {mode: report["namespaces"] for mode, report in run["report"].items()}
        assert all(len(names) == 2 for names in namespaces.values())
        assert len(set().union(*namespaces.values())) == 6
        memop = run["report"]["memop"]
        assert memop["watched_per_cr"]["memcacheds.cache.example.com"] >= 1.0
        assert memop["reconciles_per_cr"] >= 1.0
        assert memop["error_lines"] == 0
        assert run["report"]["floor"]["errors"] == 0


def test_a_failed_fresh_control_plane_ends_the_converge_benchmark_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "converge.py"), "--kubeconfig=unused",
         "--fresh-cmd=echo 'etcd is already running' >&2; exit 3", "--sizes=4", "--skip-settle"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "converge.py: --fresh-cmd exited with 3: etcd is already running; "
        "the runs done so far are on stderr above\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sizes=0"], "sizes must be positive"),
        (["--sizes=3,x"], "not a list of numbers"),
        (["--no-nodes"], "--no-nodes needs --skip-settle"),
        (["--controller-qps=-1"], "--controller-qps must not be negative"),
        (["--write-latency=-0.1"], "--write-latency and --control-plane-cpu must not be negative"),
        (["--control-plane-cpu=-1"], "--write-latency and --control-plane-cpu must not be negative"),
        (["--server-pid=1"], "--server-pid is for a control plane given by --kubeconfig"),
        (
            ["--fresh-cmd=true"],
            "--fresh-cmd and --server-pid-file are for a control plane given by --kubeconfig",
        ),
        (["--server-pid-file=/x/*.pid"], "--fresh-cmd and --server-pid-file are for a control plane given"),
        (["--kubeconfig=k", "--server-pid=999999999"], "--server-pid 999999999: no such process"),
        (["--operator=cr"], "expected NAME=COMMAND"),
        (["--operator=cr=/nonexistent/manager"], "is not an executable"),
        (["--operator=floor=/bin/true"], "not memop or floor"),
        (["--operator=a=/bin/true", "--operator=a=/bin/true"], "each NAME once"),
        (["--side-by-side", "--floor"], "--side-by-side runs memop and the floor"),
        (["--side-by-side", "--all-namespaces"], "drop --floor and --all-namespaces"),
    ],
)
def test_converge_benchmark_refuses_bad_options_in_one_line(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in usage_error("converge.py", args, monkeypatch, capsys)


@pytest.mark.parametrize("option", ["--profile=memop.txt", "--profile-server=server.txt"])
def test_converge_benchmark_says_in_one_line_that_profiling_needs_py_spy(
    option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without py-spy
    assert "needs py-spy, which is not on PATH" in usage_error("converge.py", [option], monkeypatch, capsys)


@pytest.mark.parametrize("script", ["converge.py", "olm_upgrade.py"])
def test_a_bench_refuses_bad_options_in_one_line_as_a_process(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--crs=0" if script == "olm_upgrade.py" else "--sizes=0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "must be" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""


def test_steady_benchmark_reports_an_idle_memop() -> None:
    result = run_bench("steady.py", "--crs=10", "--namespaces=2", "--seconds=2")
    assert result["crs"] == 10
    assert result["converge_seconds"] > 0
    assert result["rss_mb"]["peak"] >= result["rss_mb"]["end"] > 0
    assert result["requests_per_minute_total"] == 0  # no leader election: nothing to renew
    assert result["memop_exited"] is None


@pytest.mark.fake_only
def test_the_apiserver_benchmark_reports_writes_and_watches() -> None:
    result = run_bench(
        "apiserver.py", "--clients=4", "--watches=6", "--namespaces=3", "--duration=1", "--warmup=0.2"
    )
    assert result["benchmark"] == "apiserver"
    assert result["clients"] == 4
    assert result["watches_requested"] == 6
    assert result["watches_held"] == 6
    assert result["watches_receiving_events"] == 6
    assert result["write_errors"] == 0
    assert result["error_statuses"] == {}
    assert result["creates"] > 0
    assert result["merge_patches"] > 0
    assert result["writes_per_second"] > 0
    assert result["events_expected"] >= result["creates"] + result["merge_patches"]
    assert result["events_delivered"] == result["events_expected"]
    assert result["watch_failures"] == []
    assert result["latency_ms_p99"] >= result["latency_ms_p50"] > 0
    assert result["server_cpu_utilisation"] > 0


def test_outage_benchmark_reports_recovery_and_requests_while_down() -> None:
    result = run_bench("outage.py", "--crs=4", "--namespaces=2", "--downtime=1")
    assert result["changes"] == 8
    assert result["down_until_answering_s"] >= 1.0
    assert result["converged_after_answer_s"] > 0
    # memop noticed the outage (a watch found the port closed) and logged the answer. (When
    # every watch came back is test_outage.py's to check, not a figure's at this size.)
    assert result["memop_resumed_after_answer_s"] is not None
    assert "watches_back_after_s" in result
    assert result["memop_requests_while_down"]["total"] >= 1


@pytest.mark.parametrize("mode", ["leader-for-life", "lease"])
def test_failover_benchmark_reports_the_take_over(mode: str) -> None:
    # The lease leader is SIGTERMed and releases the lease (a SIGKILL would wait it out, 15 s).
    result = run_bench(
        "failover.py",
        f"--mode={mode}",
        "--signal=term",
        "--rounds=1",
        "--max-backoff=0.2",
        "--standby-wait=0.2",
    )
    assert result["mode"] == mode
    assert result["rounds"] == 1
    [round_] = result["per_round"]
    assert round_["takeover_s"] > 0
    assert round_["from_signal_s"] >= round_["first_write_s"] >= round_["takeover_s"]
    assert ("gc_s" in round_) == (mode == "leader-for-life")
    assert "in-memory" in result["server"]


def test_podset_benchmark_compares_memop_with_the_floor_and_makes_no_extra_pod() -> None:
    result = run_bench("podset.py", "--compare", "--podsets=6", "--replicas=2", "--namespaces=2")
    assert result["podsets"] == 6
    for mode in ("memop", "floor"):
        figures = result[mode]
        assert figures["wall_seconds"] > 0
        assert figures["pods_per_podset"] == 2
        assert figures["extra_pods"] == 0
        assert figures["failed_requests"] == 0
        # Every PodSet got its pods created and its status written, at least.
        assert figures["writes_per_podset"]["create pods"] == 2
        assert figures["writes_per_podset"]["patch podsets/status"] >= 1
    assert result["floor"]["writes_per_podset"]["patch podsets/status"] == 1
    assert result["memop_over_floor"] > 0


def test_webhook_latency_benchmark_times_every_declared_webhook() -> None:
    result = run_bench("webhook_latency.py", "--requests=20", "--concurrency=4", "--warmup=4")
    paths = set(result["latency_ms"])
    # Memcached declares a validating webhook and a conversion; each answer was checked.
    assert "/validate-cache-example-com-v1alpha1-memcached" in paths
    assert any(path.startswith("/convert Memcached") for path in paths)
    for figures in result["latency_ms"].values():
        for mode, in_flight in (("sequential", 1), ("concurrent", 4)):
            assert figures[mode]["in_flight"] == in_flight
            for side in ("round_trip", "handler"):
                assert figures[mode][side]["requests"] == 20
                assert (
                    0 < figures[mode][side]["p50"] <= figures[mode][side]["p99"] <= figures[mode][side]["max"]
                )
            # The handler is a part of the round trip.
            assert figures[mode]["handler"]["p50"] < figures[mode]["round_trip"]["p50"]


def test_webhook_latency_benchmark_refuses_controllers_without_webhooks() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "webhook_latency.py"), "--controllers=podset"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "declare no webhook" in result.stderr
    assert "Traceback" not in result.stderr


def test_olm_upgrade_benchmark_serves_old_objects_at_both_versions_and_converges() -> None:
    result = run_bench("olm_upgrade.py", "--crs=20", "--namespaces=2")
    assert result["crs"] == 20
    assert result["changed"] == 2
    assert set(result["seconds"]) == {
        "old_converge", "upgrade", "conversion_unserved", "converge_after", "changes_converged"
    }  # fmt: skip
    assert all(seconds >= 0 for seconds in result["seconds"].values())
    for when, objects_with_port in (("after_upgrade", 0), ("after_changes", 2)):
        served = result["served"][when]
        assert served["v1alpha1"] == served["v1beta1"] == 20
        assert served["mismatches"] == 0
        assert served["with_port_annotation"] == objects_with_port
    assert result["lost_changes"] == 0
    assert result["stored_versions"] == ["v1alpha1"]
    calls = result["webhook_calls"]
    # The old operator needs no conversion (it reads the stored version), nor does the new one;
    # each change through v1beta1 is converted there and back, and validated.
    assert calls["old_converge"]["conversion_calls"] == calls["converge_after"]["conversion_calls"] == 0
    assert calls["changes_converged"]["conversion_calls"] >= 4
    assert calls["changes_converged"]["admission_calls"] == 2
    # The bench's own list at v1beta1 went through the webhook. The in-memory server converts
    # each distinct content once (its cache is keyed by content, identity aside: see
    # memop.testing.apiserver.conversionwebhooks), and Memcacheds converged alike in the same
    # second share it; kube-apiserver converts every object on every read.
    assert 1 <= calls["bench_checks"]["after_upgrade"]["conversion_objects"] <= 20
    assert all(calls[phase]["conversion_failures"] == 0 for phase in ("upgrade", "changes_converged"))
    assert result["new_operator"]["error_log_lines"] == 0
    assert result["old_operator"]["exit_code"] == 0
    # The new operator followed each change: a Deployment patch and a status each, at least.
    assert result["new_operator_requests"]["changes_converged"]["patch deployments"] >= 2
    assert result["machine"]["cpus"] >= 1
    assert "in-memory" in result["server"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--crs=0"], "must be at least 1"),
        (["--change-fraction=0"], "--change-fraction must be more than 0"),
    ],
)
def test_olm_upgrade_benchmark_refuses_bad_options_in_one_line(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in usage_error("olm_upgrade.py", args, monkeypatch, capsys)


def test_declarative_benchmark_reports_requests_and_cpu_per_owner_for_both_controllers() -> None:
    result = run_bench("declarative.py", "--owners=5")
    for mode in ("imperative_memcached", "declarative"):
        figures = result[mode]
        assert figures["requests_per_owner_to_converge"] > 0
        assert figures["cpu_ms_per_owner_to_converge"] > 0
        assert figures["idle_resync_reconciles_per_owner"] >= 1
    assert result["declarative"]["idle_resync_requests_per_owner"] == 0
    done = subprocess.run(
        [sys.executable, str(BENCH / "declarative.py"), "--owners=0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["declarative.py: error: --owners must be at least 1"]
