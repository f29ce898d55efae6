"""``--leader-election-mode``: what memop.cli.app builds from the options, and when leader for life
may be skipped (outside a cluster, asked for explicitly) or must refuse to start."""

from __future__ import annotations

from pathlib import Path

import pytest

from memop.cli.app import leader_election_config, skips_election
from memop.cli.options import RunConfig, parse_run_args
from memop.runtime.client.kubeconfig import running_in_cluster
from memop.runtime.leaderelection.leaderforlife import LeaderForLifeConfig
from memop.runtime.leaderelection.lease import LeaderElectionConfig

LFL = ("--leader-elect", "--leader-election-mode", "leader-for-life", "--leader-election-namespace", "ops")


def config(*argv: str, **env: str) -> RunConfig:
    return parse_run_args(list(argv), env=env)


def test_lease_mode_is_the_default_and_builds_a_lease_config() -> None:
    election = leader_election_config(
        config("--leader-elect", "--leader-election-namespace", "ops"), "me", in_cluster=False
    )
    assert isinstance(election, LeaderElectionConfig)
    assert (election.lease_name, election.namespace) == ("memop-leader.cache.example.com", "ops")


def test_leader_for_life_builds_a_lock_for_this_pod() -> None:
    election = leader_election_config(
        config(*LFL, "--leader-for-life-max-backoff", "4s", POD_NAME="memop-abc"), "me", in_cluster=True
    )
    assert election == LeaderForLifeConfig(
        lock_name="memop-leader.cache.example.com",
        namespace="ops",
        pod_name="memop-abc",
        initial_backoff=1.0,
        max_backoff=4.0,
    )
    short = leader_election_config(
        config(*LFL, "--leader-for-life-max-backoff", "200ms", POD_NAME="p"), "me", in_cluster=False
    )
    assert isinstance(short, LeaderForLifeConfig)
    assert (short.initial_backoff, short.max_backoff) == (0.2, 0.2)


def test_outside_a_cluster_without_a_pod_it_is_skipped_only_when_asked() -> None:
    asked = config(*LFL, "--leader-for-life-outside-cluster")
    assert skips_election(asked, in_cluster=False)
    assert leader_election_config(asked, "me", in_cluster=False) is None
    with pytest.raises(ValueError, match="outside a cluster, --leader-for-life-outside-cluster runs without"):
        leader_election_config(config(*LFL), "me", in_cluster=False)


def test_in_a_cluster_a_missing_pod_name_is_an_error_even_when_skipping_was_asked() -> None:
    for argv in (LFL, (*LFL, "--leader-for-life-outside-cluster")):
        with pytest.raises(ValueError, match=r"needs this replica's Pod name in POD_NAME \(--pod-name\)"):
            leader_election_config(config(*argv), "me", in_cluster=True)


def test_with_a_pod_name_election_is_never_skipped() -> None:
    assert not skips_election(
        config(*LFL, "--leader-for-life-outside-cluster", POD_NAME="p"), in_cluster=False
    )
    assert not skips_election(config("--leader-elect"), in_cluster=False)
    assert not skips_election(config(), in_cluster=False)


def test_running_in_cluster(tmp_path: Path) -> None:
    assert not running_in_cluster({}, tmp_path)
    assert running_in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, tmp_path)
    (tmp_path / "namespace").write_text("memop-system\n")
    assert running_in_cluster({}, tmp_path)
