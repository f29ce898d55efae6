"""bench/rebalance.py: replicas scaled 2 -> 4 -> 3 under churn on the in-memory API server, checked
from its audit log; its check itself; and its usage errors.

One short run (2 s phases, short lease timings, plain HTTP, no simulated control-plane load), as
a user would run it; the figures checked are those that hold at any size.
"""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from memop.testing.apiserver.requestlog import RequestRecord
from tests.benchscripts import bench_module, usage_error
from tests.test_bench_sharding import FAST, run_bench


@pytest.fixture
def rebalance(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/rebalance.py as a module (it imports its siblings by name, as when run)."""
    return bench_module("rebalance.py", monkeypatch)


def test_replicas_scaled_under_churn_lose_nothing_and_never_write_outside_their_shards() -> None:
    result = run_bench(
        *FAST, "--phase-seconds=2", "--shards=8", "--plan=2,3,2", timeout=150, script="rebalance.py"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["benchmark"] == "rebalance"
    assert report["server"]["audit_log"] == "the in-memory server's"
    figures = report["rebalance"]
    assert figures["changes"]["created"] > 10
    assert figures["changes"]["deleted"] > 0
    assert figures["changes_lost"] == 0
    assert figures["writes_outside_holdings"] == 0, figures["first_problems"]
    # Every Memcached's finalizer, status and Deployment writes at least.
    assert figures["writes_checked"] >= figures["changes"]["created"]
    assert [phase["replicas"] for phase in figures["ring"]] == [3, 2]
    assert figures["ring"][1]["stopped"][0]["exit_status"] == 0
    assert figures["shard_hand_overs"] > 0
    assert figures["holders_seen"] == 3
    assert len(figures["holders_at_end"]) == 2


def _record(time: float, agent: str, verb: str, resource: str, name: str) -> RequestRecord:
    namespace = "leases" if resource == "leases" else "ns"
    return RequestRecord(
        time=time, verb=verb, group="", version="v1", resource=resource, subresource="",
        namespace=namespace, name=name, user_agent=agent, status=200, path="", resource_request=True,
    )  # fmt: skip


def test_the_check_counts_a_write_sent_without_the_shard(rebalance: ModuleType) -> None:
    from memop.runtime.sharding.ring import Ring  # noqa: PLC0415

    uid = "2b5d7e94-0000-4000-8000-000000000000"
    shard = Ring(2).shard_of_value(uid)
    lease = f"memop-shard-{shard}-of-2"
    records = [
        _record(1.0, "memop/a", "update", "leases", lease),  # a takes the shard
        _record(2.0, "memop/a", "patch", "memcacheds", "mc"),
        _record(3.0, "memop/b", "patch", "deployments", "mc"),  # b never held it
        _record(4.0, "memop/a", "update", "leases", lease),  # a clears it
        _record(5.0, "memop/a", "patch", "memcacheds", "mc"),  # after giving it up
    ]
    checked = rebalance.check_holdings(records, "leases", {("ns", "mc"): uid}, 2)
    assert checked["writes_checked"] == 3
    assert checked["writes_outside_holdings"] == 2
    assert len(checked["first_problems"]) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--plan=3"], "--plan: at least 2 counts, counts must be positive"),
        (["--kubeconfig=/nonexistent"], "--kubeconfig needs --audit-log"),
        (["--audit-log=/nonexistent"], "--audit-log is a real server's"),
        (["--failover"], "--failover is bench/sharding.py's"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in usage_error("rebalance.py", args, monkeypatch, capsys)
