"""memop.cli.options in-process: every flag, its environment variable, precedence and every usage error.

The real-process checks (exit code 2, the one stderr line) are in tests/e2e/test_manager_cli.py.
"""

from __future__ import annotations

import argparse
import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memop.cli import eventloop
from memop.cli import main as cli
from memop.cli.options import (
    RunConfig,
    UsageError,
    build_parser,
    env_name,
    parse_duration,
    parse_namespaces,
    parse_run_args,
)
from memop.runtime.manager.server import Address
from memop.testing.process import _flag_variables


def parse(*argv: str, **env: str) -> RunConfig:
    return parse_run_args(list(argv), env=env)


def usage_error(*argv: str, **env: str) -> str:
    """The message of the UsageError the arguments raise (asserting it is one line)."""
    with pytest.raises(UsageError) as caught:
        parse(*argv, **env)
    message = str(caught.value)
    assert message, "an empty usage error"
    assert "\n" not in message, message
    return message


def long_flags() -> list[str]:
    return [
        action.option_strings[0]
        for action in build_parser()._actions
        if action.option_strings and action.option_strings[0] not in ("-h", "--version")
    ]


def test_defaults_are_controller_runtimes() -> None:
    config = parse()
    assert config == RunConfig(
        kubeconfig=None,
        namespaces=(),
        max_concurrent_reconciles=1,
        leader_elect=False,
        leader_election_id="memop-leader.cache.example.com",
        leader_election_namespace=None,
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=2.0,
        release_on_cancel=True,
        metrics_address=Address("0.0.0.0", 8080),
        probe_address=Address("0.0.0.0", 8081),
        log_format=None,
        log_level="info",
        sync_period=36000.0,
        kube_api_qps=None,
        kube_api_burst=None,
        event_qps=20.0,
        event_burst=100,
        graceful_shutdown_timeout=30.0,
        event_loop="uvloop" if eventloop.uvloop_available() else "asyncio",
    )


# (flag, value, RunConfig field, expected value): one row per flag taking a value.
VALUES = [
    ("--kubeconfig", "/tmp/kc", "kubeconfig", "/tmp/kc"),
    ("--watch-namespace", "a,b", "namespaces", ("a", "b")),
    ("--max-concurrent-reconciles", "4", "max_concurrent_reconciles", 4),
    ("--leader-election-id", "my-lease.example.com", "leader_election_id", "my-lease.example.com"),
    ("--leader-election-namespace", "ops", "leader_election_namespace", "ops"),
    ("--leader-elect-lease-duration", "1m", "lease_duration", 60.0),
    ("--leader-elect-renew-deadline", "4.5s", "renew_deadline", 4.5),
    ("--leader-elect-retry-period", "500ms", "retry_period", 0.5),
    ("--metrics-bind-address", "127.0.0.1:9090", "metrics_address", Address("127.0.0.1", 9090)),
    ("--health-probe-bind-address", "0", "probe_address", None),
    ("--log-format", "console", "log_format", "console"),
    ("--log-level", "DEBUG", "log_level", "debug"),
    ("--sync-period", "1h30m", "sync_period", 5400.0),
    ("--kube-api-qps", "20", "kube_api_qps", 20.0),
    ("--event-qps", "5.5", "event_qps", 5.5),
    ("--event-burst", "7", "event_burst", 7),
    ("--graceful-shutdown-timeout", "0", "graceful_shutdown_timeout", 0.0),
    ("--watch-batch-window", "0", "watch_batch_window", 0.0),
    ("--watch-batch-window", "250ms", "watch_batch_window", 0.25),
    ("--uninstall-guard", " op, op-role, op-binding ", "uninstall_guard", "op, op-role, op-binding"),
    ("--controllers", " mypod, memcached ", "controllers", ("memcached", "mypod")),
    (
        "--pod-name",
        "memop-controller-manager-6f7d9-x2x4z",
        "pod_name",
        "memop-controller-manager-6f7d9-x2x4z",
    ),
    ("--leader-for-life-max-backoff", "2s", "leader_for_life_max_backoff", 2.0),
    ("--shards", "64", "shards", 64),
    ("--sharding-group", " cache-ops ", "sharding_group", "cache-ops"),
    ("--webhook-port", "10443", "webhook_port", 10443),
    ("--webhook-host", "10.0.0.7", "webhook_host", "10.0.0.7"),
    ("--webhook-cert-dir", "/certs", "webhook_cert_dir", "/certs"),
]


def test_the_table_covers_every_flag() -> None:
    covered = {row[0] for row in VALUES} | {
        "--leader-elect",
        "--leader-elect-release-on-cancel",
        "--kube-api-burst",
        "--metrics-secure",
        "--metrics-cert-dir",
        "--leader-election-mode",  # test_leader_for_life_flags: they need --leader-elect
        "--leader-for-life-outside-cluster",
        "--project",  # tests/test_project.py: they select the project
        "--controller-module",
        "--event-loop",  # test_event_loop_flag: what auto means depends on what is installed
        "--sharding",  # test_sharding_flags
        "--enable-webhooks",  # test_webhook_flags
        "--webhook-certs",  # test_webhook_certificate_flags: the others need self-managed
        "--webhook-service",
        "--webhook-secret",
        "--webhook-namespace",
        "--webhook-cert-extra-names",
    }
    assert covered == set(long_flags())


def test_event_loop_flag() -> None:
    assert parse("--event-loop", "asyncio").event_loop == "asyncio"
    assert parse(EVENT_LOOP="Asyncio").event_loop == "asyncio"
    auto = parse("--event-loop", "auto").event_loop
    assert auto == ("uvloop" if eventloop.uvloop_available() else "asyncio")
    if eventloop.uvloop_available():
        assert parse("--event-loop", "uvloop").event_loop == "uvloop"
    else:
        assert "uvloop is not installed" in usage_error("--event-loop", "uvloop")
    message = usage_error(EVENT_LOOP="trio")
    assert message == "--event-loop (from EVENT_LOOP): expected auto, uvloop, asyncio, got 'trio'"


def test_the_event_loop_runs_a_coroutine_on_the_loop_chosen() -> None:
    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert eventloop.run(loop_module(), "asyncio").startswith("asyncio")
    if eventloop.uvloop_available():
        assert eventloop.run(loop_module(), "uvloop").startswith("uvloop")


def test_secure_metrics_flags() -> None:
    assert not parse().metrics_secure
    assert parse("--metrics-secure").metrics_secure
    assert parse(METRICS_SECURE="true").metrics_secure
    config = parse("--metrics-secure", "--metrics-cert-dir", "/certs")
    assert config.metrics_cert_dir == "/certs"
    assert "only used with --metrics-secure" in usage_error("--metrics-cert-dir", "/certs")
    shared = ("--metrics-bind-address", ":8443", "--health-probe-bind-address", ":8443")
    assert "apart from --health-probe-bind-address" in usage_error("--metrics-secure", *shared)


def test_webhook_flags() -> None:
    # controller-runtime's defaults: every interface, 9443, <temp dir>/k8s-webhook-server/serving-certs.
    config = parse()
    assert (config.enable_webhooks, config.webhook_host, config.webhook_port) == (True, "", 9443)
    assert config.webhook_cert_dir == "/tmp/k8s-webhook-server/serving-certs"
    assert parse("--webhook-port", "0").webhook_port == 0  # a free port
    assert parse("--webhook-host", "[::1]").webhook_host == "::1"
    # Kubebuilder's ENABLE_WEBHOOKS=false, and the flag.
    assert parse(ENABLE_WEBHOOKS="false").enable_webhooks is False
    assert parse("--no-enable-webhooks").enable_webhooks is False
    assert parse("--enable-webhooks", ENABLE_WEBHOOKS="false").enable_webhooks is True
    assert "--webhook-port (from WEBHOOK_PORT): 'x' is not a whole number" in usage_error(WEBHOOK_PORT="x")


def test_webhook_certificate_flags() -> None:
    config = parse()
    assert (config.webhook_certs, config.webhook_service, config.webhook_secret) == ("files", "", "")
    config = parse(
        "--webhook-certs", "self-managed", "--webhook-service", "svc", "--webhook-secret", "sec",
        "--webhook-namespace", "ops", "--webhook-cert-extra-names", "127.0.0.1, localhost,",
    )  # fmt: skip
    assert config.webhook_certs == "self-managed"
    assert (config.webhook_service, config.webhook_secret) == ("svc", "sec")
    assert config.webhook_namespace == "ops"
    assert config.webhook_cert_extra_names == ("127.0.0.1", "localhost")
    assert parse(WEBHOOK_CERTS="Self-Managed").webhook_certs == "self-managed"


def test_leader_for_life_flags() -> None:
    assert parse().leader_election_mode == "lease"
    config = parse(
        "--leader-elect", "--leader-election-mode", "leader-for-life", "--leader-for-life-outside-cluster"
    )
    assert (config.leader_election_mode, config.leader_for_life_outside_cluster) == ("leader-for-life", True)
    config = parse(
        LEADER_ELECT="true",
        LEADER_ELECTION_MODE="leader-for-life",
        POD_NAME="memop-abc",
        LEADER_FOR_LIFE_OUTSIDE_CLUSTER="true",
    )
    assert (config.leader_election_mode, config.pod_name, config.leader_for_life_outside_cluster) == (
        "leader-for-life",
        "memop-abc",
        True,
    )
    assert parse("--leader-elect", "--leader-election-mode=lease").leader_election_mode == "lease"
    # A POD_NAME set for other reasons is no error with Leases.
    assert parse(POD_NAME="memop-abc").pod_name == "memop-abc"


@pytest.mark.parametrize(("flag", "value", "field", "expected"), VALUES)
def test_each_flag_sets_its_setting(flag: str, value: str, field: str, expected: object) -> None:
    assert getattr(parse(flag, value), field) == expected
    assert getattr(parse(f"{flag}={value}"), field) == expected


@pytest.mark.parametrize(("flag", "value", "field", "expected"), VALUES)
def test_each_environment_variable_sets_its_setting(
    flag: str, value: str, field: str, expected: object
) -> None:
    assert getattr(parse(**{env_name(flag): value}), field) == expected


@pytest.mark.parametrize(("flag", "value", "field", "expected"), VALUES)
def test_a_flag_wins_over_its_environment_variable(
    flag: str, value: str, field: str, expected: object
) -> None:
    default = getattr(parse(), field)
    other = {
        "--kubeconfig": "/elsewhere",
        "--uninstall-guard": "a,b,c",
        "--watch-namespace": "zzz",
        "--leader-election-namespace": "zzz",
        "--leader-election-id": "zzz",
        "--metrics-bind-address": "127.0.0.1:1",
        "--health-probe-bind-address": "127.0.0.1:1",
        "--log-format": "json",
        "--log-level": "error",
        "--kube-api-qps": "3",
        "--event-qps": "3",
        "--event-burst": "9",
        "--max-concurrent-reconciles": "7",
        "--leader-elect-lease-duration": "59s",
        "--leader-elect-renew-deadline": "4s",
        "--leader-elect-retry-period": "1s",
        "--sync-period": "2h",
        "--graceful-shutdown-timeout": "3s",
        "--watch-batch-window": "2s",
        "--pod-name": "zzz",
        "--leader-for-life-max-backoff": "9s",
        "--controllers": "*,-mypod",
        "--shards": "2",
        "--sharding-group": "zzz",
        "--webhook-port": "1",
        "--webhook-host": "127.0.0.1",
        "--webhook-cert-dir": "/zzz",
    }[flag]
    config = parse(flag, value, **{env_name(flag): other})
    assert getattr(config, field) == expected
    assert getattr(parse(**{env_name(flag): other}), field) not in (expected, default)


def test_the_kubeconfig_origin_is_kept_for_error_messages() -> None:
    assert parse().kubeconfig_origin == "--kubeconfig"
    assert parse("--kubeconfig", "/a").kubeconfig_origin == "--kubeconfig"
    assert parse(KUBECONFIG="/a").kubeconfig_origin == "KUBECONFIG"
    assert parse("--kubeconfig", "/a", KUBECONFIG="/b").kubeconfig_origin == "--kubeconfig"


def test_event_rate_limit_defaults_and_zero_lifts_it() -> None:
    assert (parse().event_qps, parse().event_burst) == (20.0, 100)
    assert parse("--event-qps", "0").event_qps is None
    assert parse(EVENT_QPS="2", EVENT_BURST="3").event_qps == 2.0
    assert parse(EVENT_QPS="2", EVENT_BURST="3").event_burst == 3


def test_burst_defaults_from_qps_and_can_be_set() -> None:
    assert parse().kube_api_burst is None
    assert parse("--kube-api-qps", "20").kube_api_burst == 30
    assert parse("--kube-api-qps", "20", "--kube-api-burst", "50").kube_api_burst == 50
    assert parse(KUBE_API_QPS="20", KUBE_API_BURST="40").kube_api_burst == 40
    assert parse("--kube-api-burst", "50").kube_api_burst is None  # no client-side limit at all


@pytest.mark.parametrize("truth", ["true", "True", "1", "yes", "on", " TRUE "])
def test_boolean_variables_accept_the_usual_true_words(truth: str) -> None:
    assert parse(LEADER_ELECT=truth).leader_elect is True
    assert parse(LEADER_ELECT_RELEASE_ON_CANCEL=truth).release_on_cancel is True


@pytest.mark.parametrize("falsehood", ["false", "0", "no", "off", ""])
def test_boolean_variables_accept_the_usual_false_words(falsehood: str) -> None:
    assert parse(LEADER_ELECT=falsehood).leader_elect is False
    assert parse(LEADER_ELECT_RELEASE_ON_CANCEL=falsehood).release_on_cancel is False


def test_boolean_flags_win_over_their_variables() -> None:
    assert parse("--leader-elect", LEADER_ELECT="false").leader_elect is True
    assert parse("--leader-elect-release-on-cancel", LEADER_ELECT_RELEASE_ON_CANCEL="0").release_on_cancel
    config = parse("--no-leader-elect-release-on-cancel", LEADER_ELECT_RELEASE_ON_CANCEL="true")
    assert config.release_on_cancel is False


def test_a_boolean_variable_that_is_not_a_boolean_is_named() -> None:
    assert usage_error(LEADER_ELECT="maybe") == "LEADER_ELECT='maybe': expected true or false"


def test_namespaces_are_trimmed_and_duplicates_folded_in_order() -> None:
    assert parse("--watch-namespace", " b, a ,,b,a ").namespaces == ("b", "a")
    assert parse(WATCH_NAMESPACE="ns1,ns2,ns1").namespaces == ("ns1", "ns2")


def test_an_empty_namespace_list_means_all_namespaces() -> None:
    assert parse("--watch-namespace", "").namespaces == ()
    assert parse("--watch-namespace=").namespaces == ()
    assert parse(WATCH_NAMESPACE="").namespaces == ()
    assert parse(WATCH_NAMESPACE=" , ").namespaces == ()
    # An empty flag still wins over the variable: "all namespaces" on purpose.
    assert parse("--watch-namespace=", WATCH_NAMESPACE="ns1").namespaces == ()


# (arguments, what the one-line message must contain)
INVALID = [
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--watch", "ns1"], "unrecognized arguments: --watch ns1"),  # no abbreviations
    (["positional"], "unrecognized arguments: positional"),
    (["--max-concurrent-reconciles", "many"], "--max-concurrent-reconciles: 'many' is not a whole number"),
    (["--max-concurrent-reconciles", "1.5"], "--max-concurrent-reconciles: '1.5' is not a whole number"),
    (["--max-concurrent-reconciles", "0"], "--max-concurrent-reconciles: must be at least 1, got 0"),
    (["--max-concurrent-reconciles", "-2"], "--max-concurrent-reconciles: must be at least 1, got -2"),
    (["--kube-api-qps", "fast"], "--kube-api-qps: 'fast' is not a number"),
    (["--kube-api-qps", "-1"], "--kube-api-qps: must be at least 0, got -1"),
    (["--kube-api-qps", "nan"], "--kube-api-qps: must be a finite number, got 'nan'"),
    (["--kube-api-qps", "inf"], "--kube-api-qps: must be a finite number, got 'inf'"),
    (["--kube-api-burst", "-5"], "--kube-api-burst: must be at least 0, got -5"),
    (["--event-qps", "-1"], "--event-qps: must be at least 0, got -1"),
    (["--event-burst", "0"], "--event-burst: must be at least 1, got 0"),
    (["--sync-period", "soon"], "--sync-period: invalid duration 'soon'"),
    (["--sync-period", "10x"], "--sync-period: invalid duration '10x'"),
    (["--sync-period=-1h"], "--sync-period: invalid duration '-1h'"),
    (["--sync-period", "-1h"], "argument --sync-period: expected one argument"),
    (["--sync-period", "nan"], "--sync-period: invalid duration 'nan'"),
    (["--graceful-shutdown-timeout", "-1"], "--graceful-shutdown-timeout: must not be negative, got '-1'"),
    (["--watch-batch-window=-1"], "--watch-batch-window: must not be negative, got '-1'"),
    (["--graceful-shutdown-timeout", "inf"], "--graceful-shutdown-timeout: invalid duration 'inf'"),
    (["--leader-elect-lease-duration", "0s"], "--leader-elect-lease-duration: must be positive"),
    (["--leader-elect-lease-duration", ""], "--leader-elect-lease-duration: invalid duration ''"),
    (
        [
            "--leader-elect-lease-duration",
            "900ms",
            "--leader-elect-renew-deadline",
            "500ms",
            "--leader-elect-retry-period",
            "100ms",
        ],
        "--leader-elect-lease-duration: must be at least 1s, got '900ms'",
    ),
    (
        ["--leader-elect-renew-deadline", "15s"],
        "--leader-elect-renew-deadline (15s) must be shorter than --leader-elect-lease-duration (15s)",
    ),
    (
        ["--leader-elect-lease-duration", "10s", "--leader-elect-renew-deadline", "20s"],
        "--leader-elect-renew-deadline (20s) must be shorter than --leader-elect-lease-duration (10s)",
    ),
    (
        ["--leader-elect-renew-deadline", "2.4s", "--leader-elect-retry-period", "2s"],
        "--leader-elect-retry-period (2s) times 1.2 (jitter) must be shorter than "
        "--leader-elect-renew-deadline (2.4s)",
    ),
    (["--watch-namespace", "Bad_NS"], "--watch-namespace: invalid namespace 'Bad_NS': must be a DNS-1123"),
    (["--watch-namespace", "ok,-no"], "--watch-namespace: invalid namespace '-no'"),
    (["--watch-namespace", "a" * 64], "--watch-namespace: invalid namespace"),
    (["--watch-namespace", "dotted.name"], "--watch-namespace: invalid namespace 'dotted.name'"),
    (["--leader-election-namespace", "Nope"], "--leader-election-namespace: invalid namespace 'Nope'"),
    (["--leader-election-namespace", "a,b"], "--leader-election-namespace: expected one namespace"),
    (["--leader-election-id", " "], "--leader-election-id: invalid Lease name ''"),
    (["--leader-election-id", "Upper"], "--leader-election-id: invalid Lease name 'Upper'"),
    (["--log-format", "xml"], "--log-format: expected json or console, got 'xml'"),
    (["--log-level", "loud"], "--log-level: expected one of debug, info, warning, error, got 'loud'"),
    (["--metrics-bind-address", "8080"], "--metrics-bind-address: invalid bind address '8080'"),
    (["--metrics-bind-address", "host:http"], "--metrics-bind-address: invalid bind address 'host:http'"),
    (["--metrics-bind-address", ":70000"], "--metrics-bind-address: invalid bind address ':70000'"),
    (["--metrics-bind-address", "a b:80"], "--metrics-bind-address: invalid host 'a b'"),
    (["--health-probe-bind-address", ""], "--health-probe-bind-address: invalid bind address ''"),
    (["--health-probe-bind-address", "x..y:1"], "--health-probe-bind-address: invalid host 'x..y'"),
    (["--leader-elect=yes"], "--leader-elect: ignored explicit argument 'yes'"),
    (["--kubeconfig"], "--kubeconfig: expected one argument"),
    (
        ["--controllers", "memcache"],
        "--controllers: unknown controller 'memcache' (known: memcached, podset, mypod;",
    ),
    (["--controllers", "*,-nope"], "--controllers: unknown controller 'nope'"),
    (["--controllers", "memcached,,"], "--controllers: empty entry in 'memcached,,'"),
    (["--controllers", ""], "--controllers: empty entry in ''"),
    (["--controllers=-podset"], "--controllers: '-podset' enables no controller"),
    (
        ["--leader-elect", "--leader-election-mode", "leases"],
        "--leader-election-mode: expected lease or leader-for-life, got 'leases'",
    ),
    (
        ["--leader-election-mode", "leader-for-life"],
        "--leader-election-mode=leader-for-life needs --leader-elect",
    ),
    (
        ["--leader-elect", "--leader-for-life-outside-cluster"],
        "--leader-for-life-outside-cluster is only used with --leader-election-mode=leader-for-life",
    ),
    (["--pod-name", "My_Pod"], "--pod-name: invalid Pod name 'My_Pod': must be a DNS-1123 subdomain"),
    (["--leader-for-life-max-backoff", "0s"], "--leader-for-life-max-backoff: must be positive, got '0s'"),
    (["--webhook-port", "https"], "--webhook-port: 'https' is not a whole number"),
    (["--webhook-port", "-1"], "--webhook-port: must be at least 0, got -1"),
    (["--webhook-port", "65536"], "--webhook-port: must be at most 65535, got 65536"),
    (["--webhook-host", "a b"], "--webhook-host: invalid host 'a b'"),
    (["--webhook-cert-dir", " "], "--webhook-cert-dir: must name a directory"),
    (["--webhook-certs", "x"], "--webhook-certs: expected files or self-managed, got 'x'"),
    (
        ["--uninstall-guard", "op,Role/r,b"],
        "--uninstall-guard: a Role goes with a RoleBinding, got 'op,Role/r,b'",
    ),
    (
        ["--uninstall-guard", "op,op-role"],
        "--uninstall-guard: expected SERVICEACCOUNT,CLUSTERROLE,CLUSTERROLEBINDING or "
        "SERVICEACCOUNT,Role/ROLE,RoleBinding/ROLEBINDING, got 'op,op-role'",
    ),
    (["--webhook-secret", "s"], "--webhook-secret is only used with --webhook-certs=self-managed"),
    (
        ["--webhook-certs", "self-managed", "--webhook-service", "My_Svc"],
        "--webhook-service: 'My_Svc' is not a valid name (lower-case DNS label)",
    ),
]


@pytest.mark.parametrize(("argv", "expected"), INVALID, ids=[" ".join(a) or "''" for a, _ in INVALID])
def test_invalid_arguments_are_one_clear_line(argv: list[str], expected: str) -> None:
    assert expected in usage_error(*argv)


@pytest.mark.parametrize(("argv", "expected"), INVALID, ids=[" ".join(a) or "''" for a, _ in INVALID])
def test_the_command_exits_2_with_that_line_for_every_invalid_case(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in _flag_variables():
        monkeypatch.delenv(variable, raising=False)
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"memop: error: {usage_error(*argv)}\n"
    assert expected in err


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"MAX_CONCURRENT_RECONCILES": "x"},
            "--max-concurrent-reconciles (from MAX_CONCURRENT_RECONCILES): 'x'",
        ),
        ({"SYNC_PERIOD": "often"}, "--sync-period (from SYNC_PERIOD): invalid duration 'often'"),
        ({"WATCH_NAMESPACE": "UPPER"}, "--watch-namespace (from WATCH_NAMESPACE): invalid namespace 'UPPER'"),
        ({"METRICS_BIND_ADDRESS": ""}, "--metrics-bind-address (from METRICS_BIND_ADDRESS): invalid bind"),
        ({"LOG_LEVEL": "trace"}, "--log-level (from LOG_LEVEL): expected one of"),
        (
            {"LEADER_ELECTION_MODE": "leader-for-life"},
            "--leader-election-mode (from LEADER_ELECTION_MODE)=leader-for-life needs --leader-elect",
        ),
        (
            {"LEADER_ELECT_RENEW_DEADLINE": "20s"},
            "--leader-elect-renew-deadline (from LEADER_ELECT_RENEW_DEADLINE) (20s) must be shorter than "
            "--leader-elect-lease-duration (15s)",
        ),
    ],
)
def test_an_invalid_environment_value_names_the_variable(env: dict[str, str], expected: str) -> None:
    assert expected in usage_error(**env)


def test_a_valid_flag_overrides_an_invalid_variable() -> None:
    assert parse("--log-level", "debug", LOG_LEVEL="trace").log_level == "debug"


@pytest.mark.parametrize(
    ("text", "host"),
    [(":8080", "0.0.0.0"), ("127.0.0.1:0", "127.0.0.1"), ("[::1]:9", "::1"), ("localhost:9", "localhost")],
)
def test_bind_addresses(text: str, host: str) -> None:
    assert parse("--metrics-bind-address", text).metrics_address.host == host  # type: ignore[union-attr]


def test_help_lists_every_flag_with_its_environment_variable() -> None:
    text = build_parser().format_help()
    for action in build_parser()._actions:
        flag = action.option_strings[0] if action.option_strings else None
        if flag in (None, "-h", "--version"):
            continue
        assert flag in text
        assert isinstance(action, argparse.Action)
        assert action.help is not None
        assert action.help.endswith(f"[{env_name(flag)}]"), action.help
        assert f"[{env_name(flag)}]" in " ".join(text.split())


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("10h", 36000.0),
        ("1h2m3s4ms", 3723.004),
        ("1.5m", 90.0),
        (".5s", 0.5),
        ("250us", 0.00025),
        ("250µs", 0.00025),
        ("100ns", 1e-7),
        ("0", 0.0),
        ("2.5", 2.5),
        (" 3s ", 3.0),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "1d", "1 s", "1s2", "s1", "--1s", "1.2.3s", "inf", "NaN", "1e400"])
def test_invalid_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@settings(max_examples=50, deadline=None)
@given(
    parts=st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(["h", "m", "s", "ms", "us", "ns"])),
        min_size=1,
        max_size=6,
    )
)
def test_a_duration_is_the_sum_of_its_parts(parts: list[tuple[int, str]]) -> None:
    unit = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    text = "".join(f"{n}{u}" for n, u in parts)
    assert math.isclose(parse_duration(text), sum(n * unit[u] for n, u in parts), rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True), max_size=8))
def test_namespace_lists_keep_first_occurrences_in_order(names: list[str]) -> None:
    assert parse_namespaces(" , ".join(names)) == tuple(dict.fromkeys(names))


def test_sharding_flags() -> None:
    config = parse("--sharding")
    assert config.sharding
    assert (config.shards, config.sharding_group) == (16, "memop")
    assert not parse().sharding
    assert parse(SHARDING="true", SHARDS="4").shards == 4
    both = usage_error("--sharding", "--leader-elect")
    assert both == "--sharding replaces --leader-elect: give one of them"
    assert "--shards: expected a power of two from 1 to 256, got '12'" in usage_error("--shards", "12")
    assert "got '512'" in usage_error("--shards", "512")
    assert "--sharding-group: invalid group 'Cache_Ops'" in usage_error("--sharding-group", "Cache_Ops")
