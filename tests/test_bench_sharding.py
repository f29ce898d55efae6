"""bench/sharding.py runs on the in-memory API server and reports sane figures.

Each run is its own process at a tiny size, as a user would run it; the figures are checked for
what holds at any size (every Memcached converged, the shards all owned, with the gate a replica
receives part of what a single one does), not for the issue's targets. Short lease timings, plain
HTTP and no simulated control-plane load keep each run well under a minute on two cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memop.testing.process import serving
from tests.benchscripts import usage_error

BENCH = Path(__file__).resolve().parent.parent / "bench" / "sharding.py"
# A renew deadline of 1.5 s (the e2e tests') is too short here: four replicas, the server and the
# bench on two cores, a survivor taking shards sometimes misses it and drops out.
LEASE = 3.0
RETRY = 0.5
FAST = (
    f"--lease-duration={LEASE}",
    "--renew-deadline=2.5",
    f"--retry-period={RETRY}",
    "--no-tls",
    "--controller-qps=0",
    "--control-plane-cpu=0",
    "--write-latency=0",
    "--timeout=45",
)


def run_bench(*args: str, timeout: float = 100, script: str = BENCH.name) -> subprocess.CompletedProcess[str]:
    """A bench (this one by default) in its own process group, killed with its server and
    replicas on a timeout."""
    with subprocess.Popen(
        [sys.executable, str(BENCH.parent / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as bench:
        try:
            stdout, stderr = bench.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.communicate()
            raise
    return subprocess.CompletedProcess(bench.args, bench.returncode, stdout, stderr)


def report(*args: str) -> dict[str, Any]:
    result = run_bench(*args, *FAST)
    assert result.returncode == 0, result.stderr[-3000:]
    figures: dict[str, Any] = json.loads(result.stdout)
    return figures


def assert_round_converged(round_: dict[str, Any], replicas: int, crs: int) -> None:
    assert round_["replicas"] == replicas
    assert round_["converged"] == crs
    assert round_["wall_seconds"] > 0
    per_replica = round_["per_replica"]
    assert len(per_replica) == replicas
    owned = [r["shards_owned"] for r in per_replica]
    assert sum(owned) == 16
    assert max(owned) - min(owned) <= 1
    totals = round_["totals"]
    assert totals["shards_owned"] == 16
    assert totals["memcacheds_in_its_shards"] == crs
    # At least a finalizer, a Deployment and a status per Memcached, from the server's log.
    assert totals["writes"] >= 3 * crs
    assert totals["reconciles"] >= crs
    for replica in per_replica:
        assert replica["identity"]
        assert replica["cpu_seconds"]["from_start"] >= replica["cpu_seconds"]["to_converge"] >= 0
        assert replica["peak_rss_mb"] > 0
        assert replica["watch_bytes"] > 0
        assert replica["objects_received"] >= replica["watch_events"] > 0
        assert "memcacheds.cache.example.com" in replica["received"]


def test_replicas_with_the_gate_each_receive_part_of_what_one_does() -> None:
    result = report("--crs=60", "--replicas=1,2")
    assert result["benchmark"] == "sharding"
    assert result["mode"] == "replicas"
    assert result["cpus"] >= 1
    server = result["server"]
    assert server["feature_gates"] == {"ShardedListAndWatch": True}
    gate = server["sharded_list_and_watch"]
    assert gate["on_as_memop_reported"] is True
    assert gate["fell_back_to_client_side"] is False
    assert "server-side" in gate["memop_said"]

    one, two = result["rounds"]
    assert_round_converged(one, 1, 60)
    assert_round_converged(two, 2, 60)
    single = one["per_replica"][0]
    for replica in two["per_replica"]:
        assert replica["server_side"] == 1
        assert replica["objects_filtered"] == 0  # the server sent only its shards' objects
        # Half the Memcacheds each, give or take the uids' spread (and any shard that moved).
        assert replica["objects_received"] < 0.85 * single["objects_received"], two
        assert replica["watch_bytes"] < 0.85 * single["watch_bytes"], two
    assert one["while_converging"]["server_cpu_seconds"] > 0

    ratios = result["ratios"]
    assert ratios["baseline_replicas"] == 1
    (versus_one,) = ratios["rounds"]
    assert versus_one["replicas"] == 2
    assert len(versus_one["watch_bytes_share"]["each"]) == 2
    assert versus_one["watch_bytes_share"]["max"] < 0.85
    assert versus_one["watch_events_share"]["max"] < 0.85
    assert versus_one["memcacheds_in_its_shards_share"]["max"] < 0.85
    assert versus_one["summed_cpu_over_baseline"]["to_converge"] > 0
    assert versus_one["wall_seconds_over_baseline"] == round(two["wall_seconds"] / one["wall_seconds"], 3)


def test_without_the_gate_replicas_converge_and_say_they_fell_back() -> None:
    result = report("--crs=20", "--replicas=2", "--no-gate")
    assert result["server"]["feature_gates"] == {"ShardedListAndWatch": False}
    gate = result["server"]["sharded_list_and_watch"]
    assert gate["on_as_memop_reported"] is False
    assert gate["fell_back_to_client_side"] is True
    assert "client-side" in gate["memop_said"]
    (round_,) = result["rounds"]
    assert_round_converged(round_, 2, 20)
    for replica in round_["per_replica"]:
        assert replica["server_side"] == 0
        # Every Memcached reaches both replicas; each drops those of the other's shards.
        assert replica["received"]["memcacheds.cache.example.com"]["filtered"] > 0


def assert_failover(failover: dict[str, Any], crs: int) -> None:
    assert failover["replicas"] == 4
    assert failover["all_converged"] is True
    assert failover["converged"] == crs
    assert failover["converged_after_kill_s"] >= 0
    killed = failover["killed"]
    assert len(killed["shards"]) == 4  # 16 shards split between 4
    assert 0 < killed["converged_before_kill"] < crs
    moved = failover["leases_moved_after_s"]
    assert sorted(int(s) for s in moved) == killed["shards"]
    for seconds in moved.values():
        # Taken once the killed replica's member Lease expired in the survivors' eyes: at the
        # earliest a lease duration after its last renewal, up to a retry period (and its
        # jitter) before the kill.
        assert LEASE - 1.2 * RETRY - 0.1 <= seconds < LEASE + 10
    assert failover["all_leases_moved_after_s"] == max(moved.values())
    assert sorted(failover["survivors_shards_owned"].values()) == [5, 5, 6]
    exits = [e["exit_status"] for e in failover["replicas_exits"]]
    assert exits == [-signal.SIGKILL, None, None, None]

    again = failover["reconciled_again"]
    assert (
        again["memcacheds_in_killed_shards"] >= again["pending_at_kill"] >= again["pending_when_lease_moved"]
    )
    assert again["pending_all_converged"] is True
    # Every Memcached of the killed replica's shards still to converge was written by a survivor.
    assert again["written_by_survivors"] == again["pending_when_lease_moved"]
    per_shard = again["per_shard_first_write_after_kill_s"]
    assert sorted(int(s) for s in per_shard) == killed["shards"]
    for shard, seconds in per_shard.items():
        if seconds is not None:  # not before its Lease moved
            assert seconds >= moved[shard] - 0.1
    if again["written_by_survivors"]:
        assert again["last_shard_resumed_after_kill_s"] == max(v for v in per_shard.values() if v is not None)
        assert isinstance(again["within_lease_duration_plus_3s"], bool)


def test_failover_moves_a_killed_replicas_shards_and_everything_converges() -> None:
    result = report("--failover", "--crs=40")
    assert result["mode"] == "failover"
    assert result["server"]["sharded_list_and_watch"]["on_as_memop_reported"] is True
    assert_failover(result["failover"], 40)
    assert "request log" in result["failover"]["reconciled_again"]["observed_from"]


def test_a_cluster_given_by_kubeconfig_is_described_and_watched(tmp_path: Path) -> None:
    # The in-memory server as a cluster of its own: what a real one gets (its /version, its
    # processes' CPU, survivors' writes seen on the bench's watch instead of a request log).
    kubeconfig = tmp_path / "kubeconfig"
    options = ("--simulate-controllers", "--feature-gates=ShardedListAndWatch=true")
    with serving(kubeconfig, *options) as server:
        assert server.process is not None
        result = report(
            "--failover", "--crs=40", f"--kubeconfig={kubeconfig}", f"--server-pid={server.process.pid}"
        )
    described = result["server"]
    assert described["kind"] == "kubeconfig"
    assert described["url"] == server.url
    assert described["version"].startswith("v1.")
    assert described["sharded_list_and_watch"]["on_as_memop_reported"] is True
    assert result["server_pids"] == [server.process.pid]
    failover = result["failover"]
    assert failover["while_converging"]["server_cpu_seconds"] > 0
    assert_failover(failover, 40)
    assert "watch" in failover["reconciled_again"]["observed_from"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--replicas=0"], "--replicas: counts must be positive"),
        (["--failover", "--replicas=1,4"], "--failover: --replicas must be one count of at least 2"),
        (["--shards=12"], "--shards: expected a power of two"),
        (["--lease-duration=2", "--renew-deadline=3"], "--renew-deadline must be positive and shorter"),
        (["--server-pid=1"], "--server-pid is for a control plane given by --kubeconfig"),
        (["--kubeconfig=/nonexistent", "--no-gate"], "--no-gate is for the in-memory server"),
        (["--no-such-option"], "unrecognized arguments: --no-such-option"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in usage_error(BENCH.name, args, monkeypatch, capsys)


def test_bad_options_are_one_line_and_exit_2_as_a_process() -> None:
    result = run_bench("--replicas=0", timeout=30)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "--replicas: counts must be positive" in result.stderr


async def test_a_clean_up_that_fails_is_one_line_and_the_round_goes_on(
    apiserver: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bench's clean-up runs after a round's figures are taken: on a busy real server it
    once outlasted the client's timeout and took the figures of a 10,000-Memcached failover with
    it. Here the namespace is never deleted (every DELETE fails): one line, no exception."""
    from kubernetes_asyncio.client import ApiClient  # noqa: PLC0415

    from memop.memcached.crd import crd  # noqa: PLC0415
    from memop.runtime.client.client import Client  # noqa: PLC0415
    from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES  # noqa: PLC0415

    monkeypatch.syspath_prepend(str(BENCH.parent))
    import sharding  # noqa: PLC0415

    apiserver.faults.fail(500, times=None, verb="delete")
    async with ApiClient(apiserver.client_configuration()) as api:
        client = Client(api, user_agent="bench-test", max_retries=0)
        await client.create(CUSTOM_RESOURCE_DEFINITIONS, crd())
        await client.create(NAMESPACES, {"metadata": {"name": "bench-ns"}})
        await sharding.remove(client, ["bench-ns"], concurrency=2, timeout=0.5)
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("bench: clean-up of bench-ns did not finish (condition")
    assert "still false after 0.5s" in line
    assert line.endswith("the figures stand, delete those namespaces by hand")
