"""Flags and environment variables of ``python -m memop``, validated into one RunConfig.

The process runs one project (:mod:`memop.project`): the one ``--controller-module`` or
``--project`` selects, else the only installed one besides memop's, else memop's own; or the
one a program passes to :func:`memop.run`, which then offers neither flag. The project sets
the defaults that name it (``--leader-election-id``) and what ``--controllers`` accepts.

Every flag has an environment variable (its name upper-cased, dashes to underscores, e.g.
``--watch-namespace`` / ``WATCH_NAMESPACE``) so a Deployment can set it; a flag given on the
command line wins over the environment. Names follow Kubebuilder / controller-runtime, and
as with Go's flag package a flag is never abbreviated.
Anything invalid raises :class:`UsageError` with one line saying what and why (naming the
variable too when the value came from the environment); the CLI turns it into exit code 2.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from memop import __version__
from memop.cli import eventloop
from memop.cli.controllers import parse_controllers
from memop.project import BUILTIN, Project, ProjectError, select_project
from memop.runtime.api.validation import is_dns1123_label, is_dns1123_subdomain
from memop.runtime.cache.cache import DEFAULT_WATCH_BATCH_WINDOW
from memop.runtime.manager.server import Address
from memop.runtime.manager.uninstall import UninstallGuardConfig
from memop.runtime.webhook.server import DEFAULT_PORT, default_cert_dir

_HOSTNAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_LOG_LEVELS = ("debug", "info", "warning", "error")
LEASE = "lease"
LEADER_FOR_LIFE = "leader-for-life"
MAX_SHARDS = 256
MAX_GROUP = 40
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LEADER_ELECTION_MODES = (LEASE, LEADER_FOR_LIFE)


class UsageError(Exception):
    """A flag or environment value is invalid; the message is the one line to print."""


WEBHOOK_CERT_MODES = ("files", "self-managed")
# A Service, Secret or namespace name (RFC 1123 label).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _builtin_project() -> Project:
    from memop.builtin import PROJECT  # noqa: PLC0415 - memop's controllers, only when asked for

    return PROJECT


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (``15s``, ``1m30s``, ``500ms``, ``10h``) or a plain number."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise ValueError(f"invalid duration {text!r} (examples: 15s, 1m30s, 500ms, 10h)")
        return seconds
    position, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(text) or not text:
        raise ValueError(f"invalid duration {text!r} (examples: 15s, 1m30s, 500ms, 10h)")
    return total


def parse_namespaces(text: str) -> tuple[str, ...]:
    """A comma-separated namespace list: blanks dropped, duplicates folded, each a DNS-1123 label."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        if not is_dns1123_label(name):
            raise ValueError(
                f"invalid namespace {name!r}: must be a DNS-1123 label (lower-case letters, digits and "
                "'-', starting and ending with a letter or digit, at most 63 characters)"
            )
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class RunConfig:
    """One run of the operator, validated: what :func:`memop.cli.app.run` needs."""

    kubeconfig: str | None
    namespaces: tuple[str, ...]
    max_concurrent_reconciles: int
    leader_elect: bool
    leader_election_id: str
    leader_election_namespace: str | None
    lease_duration: float
    renew_deadline: float
    retry_period: float
    release_on_cancel: bool
    metrics_address: Address | None
    probe_address: Address | None
    log_format: str | None
    log_level: str
    sync_period: float | None
    kube_api_qps: float | None
    kube_api_burst: int | None
    event_qps: float | None
    event_burst: int
    graceful_shutdown_timeout: float
    watch_batch_window: float = DEFAULT_WATCH_BATCH_WINDOW
    metrics_secure: bool = False
    metrics_cert_dir: str | None = None
    # Where the kubeconfig path came from, for error messages: the flag or its variable.
    kubeconfig_origin: str = "--kubeconfig"
    # The controllers to run: names of project's controllers, in its order; empty means all.
    controllers: tuple[str, ...] = ()
    # With leader_elect: "lease" (coordination.k8s.io Lease) or "leader-for-life" (a ConfigMap
    # lock owned by the replica's Pod, memop.runtime.leaderelection.leaderforlife).
    leader_election_mode: str = "lease"
    # This replica's Pod (POD_NAME, from the downward API): owns the leader-for-life lock.
    pod_name: str | None = None
    leader_for_life_max_backoff: float = 16.0
    # Leader for life outside a cluster (no POD_NAME, no service account): run without
    # election instead of refusing to start.
    leader_for_life_outside_cluster: bool = False
    # The operator this process runs (memop's own by default), and the command as the user
    # types it (``memop``, ``python -m mypkg``), for error lines and hints.
    project: Project = field(default_factory=_builtin_project)
    prog: str = "memop"
    # The resolved event loop, "uvloop" or "asyncio" (memop.cli.eventloop).
    event_loop: str = eventloop.ASYNCIO
    # --sharding: replicas split the shards of a ring (memop.runtime.sharding) instead of
    # electing a leader; the Leases of the group live in the leader election namespace.
    sharding: bool = False
    shards: int = 16
    sharding_group: str = "memop"
    # The webhook server (memop.runtime.webhook.server), run only when a controller declares
    # webhooks or conversions: every interface by default, port 9443 (0: a free one), the
    # certificate directory controller-runtime reads by default.
    # Kubebuilder's ENABLE_WEBHOOKS=false: run the controllers without serving their webhooks
    # (locally, where the API server cannot call them anyway).
    enable_webhooks: bool = True
    webhook_host: str = ""
    webhook_port: int = DEFAULT_PORT
    webhook_cert_dir: str = field(default_factory=lambda: str(default_cert_dir()))
    # --webhook-certs: "files" (the certificate is mounted into the cert dir: cert-manager, OLM)
    # or "self-managed" (memop makes a CA and serving certificate, keeps them in a Secret and
    # sets the caBundles: memop.runtime.webhook.selfmanaged). Empty names mean the project's
    # defaults (its name prefix and Kubebuilder's base names, as `memop manifests` writes them).
    webhook_certs: str = "files"
    # --uninstall-guard: SERVICEACCOUNT,CLUSTERROLE,CLUSTERROLEBINDING of the operator's own
    # install, kept until it has released its finalizers when the install is deleted at once
    # (memop.runtime.manager.uninstall); empty: not guarded.
    uninstall_guard: str = ""
    webhook_service: str = ""
    webhook_secret: str = ""
    webhook_namespace: str = ""
    webhook_cert_extra_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.controllers:
            object.__setattr__(self, "controllers", self.project.controller_names)
        unknown = [name for name in self.controllers if name not in self.project.controller_names]
        if unknown:
            raise ValueError(f"project {self.project.name} has no controller {unknown[0]!r}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def env_name(flag: str) -> str:
    """The environment variable of a flag: ``--watch-namespace`` → ``WATCH_NAMESPACE``."""
    return flag.lstrip("-").upper().replace("-", "_")


PROJECT_FLAG = "--project"
MODULE_FLAG = "--controller-module"


def version_line(project: Project) -> str:
    """What ``--version`` prints: ``memop 0.1.0``, or ``NAME VERSION (memop 0.1.0)``."""
    if project.name == BUILTIN:
        return f"memop {__version__}"
    return f"{project.name} {project.version} (memop {__version__})"


def _description(project: Project, selectable: bool) -> str:
    controllers = "; ".join(f"{d.name}: {d.description}" for d in project.controllers)
    if project.name == BUILTIN:
        what = f"memop's operators: {controllers}."
    else:
        about = f" ({project.description})" if project.description else ""
        what = f"The {project.name} operator{about}, on memop: {controllers}."
    text = f"{what} Every flag can also be set by the environment variable shown in brackets."
    if selectable:
        text += (
            f" {PROJECT_FLAG} and {MODULE_FLAG} choose another project's controllers. Subcommands: "
            "'memop manifests' writes the project's manifests, 'memop init', 'memop create api' and "
            "'memop create webhook' scaffold a project of one's own, 'memop demo' runs memop on an "
            "in-memory API server."
        )
    return text


def build_parser(
    project: Project | None = None, *, prog: str = "memop", selectable: bool = True
) -> argparse.ArgumentParser:
    """The parser of a run of ``project`` (memop's own by default). ``selectable``: offer
    ``--project`` and ``--controller-module`` (the ``memop`` command does; a program that
    passes its project to :func:`memop.run` does not)."""
    project = _builtin_project() if project is None else project
    parser = _Parser(
        prog=prog,
        # Go's flag package has no abbreviations: "--watch" must not silently mean
        # "--watch-namespace" (nor an unknown flag be taken for a known one).
        allow_abbrev=False,
        description=_description(project, selectable),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=version_line(project))

    def flag(name: str, help_text: str, **kwargs: object) -> None:
        parser.add_argument(name, help=f"{help_text} [{env_name(name)}]", **kwargs)  # type: ignore[arg-type]

    if selectable:
        flag(
            PROJECT_FLAG,
            "run this installed project (entry-point group memop.controllers); default: the only one "
            "installed besides memop's own, else memop",
            default=None,
            metavar="NAME",
        )
        flag(
            MODULE_FLAG,
            "run the project in MODULE, installed or not (from the current directory or PYTHONPATH): "
            "its ATTRIBUTE, else its PROJECT, DEFINITION or DEFINITIONS",
            default=None,
            metavar="MODULE[:ATTRIBUTE]",
        )
    names = project.controller_names
    flag(
        "--controllers",
        f"controllers to run: '*' for all, or a list such as {','.join(names[:2])}; '-name' leaves one out"
        f" (known: {', '.join(names)})",
        default="*",
    )
    flag("--kubeconfig", "kubeconfig file; default: in-cluster config, else ~/.kube/config", default=None)
    flag("--watch-namespace", "comma-separated namespaces to watch; empty means all namespaces", default="")
    flag("--max-concurrent-reconciles", "reconcile workers", default="1")
    flag("--leader-elect", "elect a leader so only one replica reconciles", action="store_true")
    flag(
        "--leader-election-mode",
        "with --leader-elect: 'lease' (a renewed Lease) or 'leader-for-life' (a ConfigMap lock owned "
        "by this replica's Pod until the Pod is deleted)",
        default="lease",
    )
    flag(
        "--leader-election-id",
        "name of the Lease (or of the leader-for-life ConfigMap)",
        default=project.leader_election_id,
    )
    flag(
        "--leader-election-namespace",
        "namespace of the Lease (or ConfigMap); default: the pod's namespace",
        default=None,
    )
    flag("--leader-elect-lease-duration", "how long a lease is valid without renewal", default="15s")
    flag("--leader-elect-renew-deadline", "how long the leader keeps trying to renew", default="10s")
    flag("--leader-elect-retry-period", "how often to try to acquire or renew", default="2s")
    flag(
        "--leader-elect-release-on-cancel",
        "hand the lease back on shutdown",
        action=argparse.BooleanOptionalAction,
        default=None,
    )
    flag(
        "--pod-name",
        "this replica's Pod (downward API metadata.name): owns the leader-for-life lock",
        default=None,
    )
    flag(
        "--leader-for-life-max-backoff",
        "longest wait of a standby between leader-for-life attempts",
        default="16s",
    )
    flag(
        "--leader-for-life-outside-cluster",
        "leader for life outside a cluster (no --pod-name, no service account): run without election "
        "instead of refusing to start",
        action="store_true",
    )
    flag(
        "--sharding",
        "split the work between replicas instead of electing a leader: each reconciles the objects of "
        "the shards Leases give it (in --leader-election-namespace, with the --leader-elect-* timings)",
        action="store_true",
    )
    flag("--shards", "with --sharding: parts of the ring, a power of two up to 256", default="16")
    flag(
        "--sharding-group",
        "with --sharding: the name of the replicas' Leases (label sharding.memop.dev/group)",
        default=project.name,
    )
    flag("--metrics-bind-address", "address of /metrics; 0 disables", default=":8080")
    flag("--health-probe-bind-address", "address of /healthz and /readyz; 0 disables", default=":8081")
    flag("--log-format", "json or console; default: json unless stderr is a terminal", default=None)
    flag("--log-level", "debug, info, warning or error", default="info")
    flag("--sync-period", "replay every cached object this often; 0 disables", default="10h")
    flag("--kube-api-qps", "client-side request rate limit; 0 means none (rely on the server)", default="0")
    flag("--kube-api-burst", "client-side burst above the QPS", default="0")
    flag("--event-qps", "most Kubernetes Events sent per second; 0 means no limit", default="20")
    flag("--event-burst", "most Events sent at once, before --event-qps applies", default="100")
    flag("--graceful-shutdown-timeout", "time in-flight reconciles get on SIGTERM", default="30s")
    flag(
        "--watch-batch-window",
        "when a watch's events come faster than one per this time, read it once per this time and "
        "handle its events together (less CPU, up to this much delay in a burst); 0 reads each at once",
        default=f"{round(DEFAULT_WATCH_BATCH_WINDOW * 1000)}ms",
    )
    flag(
        "--metrics-secure",
        "serve /metrics over HTTPS to callers a TokenReview and SubjectAccessReview allow",
        action="store_true",
    )
    flag("--metrics-cert-dir", "directory with tls.crt and tls.key; default: a self-signed one", default=None)
    flag(
        "--enable-webhooks",
        "serve the controllers' admission and conversion webhooks (Kubebuilder's ENABLE_WEBHOOKS)",
        action=argparse.BooleanOptionalAction,
        default=True,
    )
    flag(
        "--webhook-port",
        "port of the webhook server (HTTPS), run when a controller declares webhooks or conversions; "
        "0 picks a free one",
        default=str(DEFAULT_PORT),
    )
    flag("--webhook-host", "address the webhook server listens on; empty means every interface", default="")
    flag(
        "--webhook-cert-dir",
        "directory with the webhook server's tls.crt and tls.key, re-read when they change",
        default=str(default_cert_dir()),
    )
    flag(
        "--uninstall-guard",
        "SERVICEACCOUNT,CLUSTERROLE,CLUSTERROLEBINDING (a namespaced install: SERVICEACCOUNT,"
        "Role/ROLE,RoleBinding/ROLEBINDING) of this install: kept (a finalizer) until the "
        "operator has released its own finalizers when the whole install is deleted at once, as "
        "kubectl delete -k does; empty: not kept",
        default="",
    )
    flag(
        "--webhook-certs",
        "where the webhook's certificate comes from: 'files' (mounted into --webhook-cert-dir by "
        "cert-manager or OLM) or 'self-managed' (memop makes a CA and certificate, keeps them in a "
        "Secret and sets the caBundle of its webhook configurations and CRDs)",
        default="files",
    )
    flag(
        "--webhook-service",
        "with --webhook-certs=self-managed: the webhook Service the certificate is for "
        "(default: <project>-webhook-service)",
        default="",
    )
    flag(
        "--webhook-secret",
        "with --webhook-certs=self-managed: the Secret holding the CA and certificate "
        "(default: <project>-webhook-server-cert)",
        default="",
    )
    flag(
        "--webhook-namespace",
        "with --webhook-certs=self-managed: the namespace of the Service and Secret (default: the pod's)",
        default="",
    )
    flag(
        "--webhook-cert-extra-names",
        "with --webhook-certs=self-managed: more DNS names or IP addresses for the certificate, "
        "comma-separated (127.0.0.1 for an API server calling on loopback)",
        default="",
    )
    flag(
        "--event-loop",
        "auto (uvloop when installed, else asyncio's), uvloop or asyncio",
        default=eventloop.AUTO,
    )
    return parser


def _with_env(
    argv: Sequence[str], env: Mapping[str, str], parser: argparse.ArgumentParser
) -> tuple[list[str], dict[str, str]]:
    """argv with each flag that is not on the command line taken from its environment variable,
    and which flags (by their ``dest``) came from which variable, for error messages."""
    given = {arg.split("=", 1)[0] for arg in argv if arg.startswith("--")}
    extra: list[str] = []
    from_env: dict[str, str] = {}
    for action in parser._actions:
        names = [o for o in action.option_strings if o.startswith("--")]
        if not names or names[0] in ("--help", "--version"):
            continue
        name = names[0]
        if any(n in given or f"--no-{n[2:]}" in given for n in names):
            continue
        variable = env_name(name)
        value = env.get(variable)
        if value is None:
            continue
        from_env[action.dest] = variable
        if isinstance(action, argparse._StoreTrueAction | argparse.BooleanOptionalAction):
            truth = value.strip().lower()
            if truth in ("1", "true", "yes", "on"):
                extra.append(name)
            elif truth in ("0", "false", "no", "off", ""):
                if isinstance(action, argparse.BooleanOptionalAction):
                    extra.append(f"--no-{name[2:]}")
            else:
                raise UsageError(f"{variable}={value!r}: expected true or false")
        else:
            extra.append(f"{name}={value}")
    return [*extra, *argv], from_env


def _check_host(host: str) -> None:
    """Raise ValueError unless ``host`` is empty, an IP address or a host name."""
    if not host:
        return
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if len(host) > 253 or not _HOSTNAME.match(host):
            raise ValueError(f"invalid host {host!r}: expected an IP address or a host name") from None


def select(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Project:
    """The project ``--project`` / ``--controller-module`` (or PROJECT / CONTROLLER_MODULE)
    select (see :func:`memop.project.select_project`), or UsageError saying why there is none."""
    env = os.environ if env is None else env
    chooser = _Parser(add_help=False, allow_abbrev=False)
    chooser.add_argument(PROJECT_FLAG, dest="project", default=None)
    chooser.add_argument(MODULE_FLAG, dest="controller_module", default=None)
    given, _ = chooser.parse_known_args(list(argv))

    def setting(flag_name: str, value: str | None) -> tuple[str | None, str]:
        """The value (flag first, then its variable) and how messages name where it came from."""
        if value is None:
            variable = env_name(flag_name)
            value = env.get(variable)
            if value is not None and value.strip():
                return value.strip(), f"{flag_name} (from {variable})"
            return None, flag_name
        return value.strip() or None, flag_name

    name, name_label = setting(PROJECT_FLAG, given.project)
    module, module_label = setting(MODULE_FLAG, given.controller_module)
    if name and module:
        raise UsageError(f"{name_label} and {module_label} exclude each other: give one")
    module_origin = f"{MODULE_FLAG} {module}" + module_label.removeprefix(MODULE_FLAG)
    try:
        return select_project(name, module, name_origin=name_label, module_origin=module_origin)
    except ProjectError as error:
        raise UsageError(str(error)) from None


def parse_run_args(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    project: Project | None = None,
    prog: str = "memop",
) -> RunConfig:
    """Validate flags (and environment) into a RunConfig, or raise UsageError.

    ``env`` defaults to ``os.environ``. An error about a value that came from the environment
    names the variable as well as the flag. Without ``project``, the flags and environment
    select it (:func:`select`); with it, ``--project`` and ``--controller-module`` are unknown
    flags. ``prog`` is the command as the user types it, for ``--help`` and messages.
    """
    env = os.environ if env is None else env
    selectable = project is None
    if project is None:
        project = select(argv, env)
    parser = build_parser(project, prog=prog, selectable=selectable)
    full_argv, from_env = _with_env(list(argv), env, parser)
    args = parser.parse_args(full_argv)

    def label(flag_name: str) -> str:
        """How an error names the setting: the flag, and the variable when it came from there."""
        variable = from_env.get(flag_name.replace("-", "_"))
        return f"--{flag_name}" if variable is None else f"--{flag_name} (from {variable})"

    def number(flag_name: str, text: str, kind: type[int] | type[float], minimum: float) -> float:
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise UsageError(f"{label(flag_name)}: {text!r} is not {what}") from None
        if not math.isfinite(value):
            raise UsageError(f"{label(flag_name)}: must be a finite number, got {text!r}")
        if value < minimum:
            raise UsageError(f"{label(flag_name)}: must be at least {minimum:g}, got {text}")
        return value

    def duration(flag_name: str, text: str, allow_zero: bool = False) -> float:
        try:
            value = parse_duration(text)
        except ValueError as error:
            raise UsageError(f"{label(flag_name)}: {error}") from None
        if value < 0 or (value == 0 and not allow_zero):
            # Said as the setting allows it: "positive" for one where 0 is allowed misleads.
            need = "must not be negative" if allow_zero else "must be positive"
            raise UsageError(f"{label(flag_name)}: {need}, got {text!r}")
        return value

    def address(flag_name: str, text: str) -> Address | None:
        try:
            parsed = Address.parse(text)
            if parsed is not None:
                _check_host(text.strip().rpartition(":")[0].strip("[]"))
        except ValueError as error:
            raise UsageError(f"{label(flag_name)}: {error}") from None
        return parsed

    try:
        controllers = parse_controllers(args.controllers, project)
    except ValueError as error:
        raise UsageError(f"{label('controllers')}: {str(error).removeprefix('--controllers: ')}") from None
    try:
        namespaces = parse_namespaces(args.watch_namespace)
    except ValueError as error:
        raise UsageError(f"{label('watch-namespace')}: {error}") from None
    lease = duration("leader-elect-lease-duration", args.leader_elect_lease_duration)
    renew = duration("leader-elect-renew-deadline", args.leader_elect_renew_deadline)
    retry = duration("leader-elect-retry-period", args.leader_elect_retry_period)
    if lease < 1:
        # A Lease stores whole seconds: a shorter duration would be written as 1 s anyway.
        raise UsageError(
            f"{label('leader-elect-lease-duration')}: must be at least 1s, got "
            f"{args.leader_elect_lease_duration!r}"
        )
    if renew >= lease:
        raise UsageError(
            f"{label('leader-elect-renew-deadline')} ({args.leader_elect_renew_deadline}) must be "
            f"shorter than {label('leader-elect-lease-duration')} ({args.leader_elect_lease_duration})"
        )
    if retry * 1.2 >= renew:
        raise UsageError(
            f"{label('leader-elect-retry-period')} ({args.leader_elect_retry_period}) times 1.2 "
            f"(jitter) must be shorter than {label('leader-elect-renew-deadline')} "
            f"({args.leader_elect_renew_deadline})"
        )
    if args.log_format not in (None, "json", "console"):
        raise UsageError(f"{label('log-format')}: expected json or console, got {args.log_format!r}")
    if args.log_level.lower() not in _LOG_LEVELS:
        raise UsageError(
            f"{label('log-level')}: expected one of {', '.join(_LOG_LEVELS)}, got {args.log_level!r}"
        )
    election_namespace = args.leader_election_namespace or None
    if election_namespace is not None:
        try:
            election_namespaces = parse_namespaces(election_namespace)
            election_namespace = election_namespace.strip()
        except ValueError as error:
            raise UsageError(f"{label('leader-election-namespace')}: {error}") from None
        if len(election_namespaces) != 1 or "," in election_namespace:
            raise UsageError(
                f"{label('leader-election-namespace')}: expected one namespace, got {election_namespace!r}"
            )
    mode = args.leader_election_mode.strip()
    if mode not in LEADER_ELECTION_MODES:
        raise UsageError(
            f"{label('leader-election-mode')}: expected {' or '.join(LEADER_ELECTION_MODES)}, got {mode!r}"
        )
    if args.sharding and args.leader_elect:
        raise UsageError("--sharding replaces --leader-elect: give one of them")
    shards = int(number("shards", args.shards, int, 1))
    if shards > MAX_SHARDS or shards & (shards - 1):
        raise UsageError(
            f"{label('shards')}: expected a power of two from 1 to {MAX_SHARDS}, got {args.shards!r}"
        )
    group = args.sharding_group.strip()
    if not _DNS_LABEL.fullmatch(group) or len(group) > MAX_GROUP:
        raise UsageError(
            f"{label('sharding-group')}: invalid group {group!r}: must be a DNS label of at most "
            f"{MAX_GROUP} characters (lower-case letters, digits and '-')"
        )
    if mode == LEADER_FOR_LIFE and not args.leader_elect:
        raise UsageError(f"{label('leader-election-mode')}={mode} needs --leader-elect")
    if args.leader_for_life_outside_cluster and mode != LEADER_FOR_LIFE:
        raise UsageError(
            f"{label('leader-for-life-outside-cluster')} is only used with "
            f"--leader-election-mode={LEADER_FOR_LIFE}"
        )
    pod_name = (args.pod_name or "").strip() or None
    if pod_name is not None and not is_dns1123_subdomain(pod_name):
        raise UsageError(
            f"{label('pod-name')}: invalid Pod name {pod_name!r}: must be a DNS-1123 subdomain (lower-case "
            "letters, digits, '-' and '.', at most 253 characters)"
        )
    max_backoff = duration("leader-for-life-max-backoff", args.leader_for_life_max_backoff)
    election_id = args.leader_election_id.strip()
    if not is_dns1123_subdomain(election_id):
        raise UsageError(
            f"{label('leader-election-id')}: invalid Lease name {election_id!r}: must be a DNS-1123 "
            "subdomain (lower-case letters, digits, '-' and '.', at most 253 characters)"
        )
    qps = number("kube-api-qps", args.kube_api_qps, float, 0)
    burst = int(number("kube-api-burst", args.kube_api_burst, int, 0))
    event_qps = number("event-qps", args.event_qps, float, 0)
    event_burst = int(number("event-burst", args.event_burst, int, 1))
    sync_period = duration("sync-period", args.sync_period, allow_zero=True)
    metrics_address = address("metrics-bind-address", args.metrics_bind_address)
    probe_address = address("health-probe-bind-address", args.health_probe_bind_address)
    shared = metrics_address is not None and metrics_address == probe_address and metrics_address.port != 0
    if args.metrics_secure and shared:
        raise UsageError(
            "--metrics-secure needs --metrics-bind-address apart from --health-probe-bind-address "
            "(probes stay plain HTTP for the kubelet)"
        )
    if args.metrics_cert_dir and not args.metrics_secure:
        raise UsageError("--metrics-cert-dir is only used with --metrics-secure")
    webhook_port = int(number("webhook-port", args.webhook_port, int, 0))
    if webhook_port > 65535:
        raise UsageError(f"{label('webhook-port')}: must be at most 65535, got {args.webhook_port}")
    webhook_host = args.webhook_host.strip().strip("[]")
    try:
        _check_host(webhook_host)
    except ValueError as error:
        raise UsageError(f"{label('webhook-host')}: {error}") from None
    webhook_cert_dir = args.webhook_cert_dir.strip()
    if not webhook_cert_dir:
        raise UsageError(f"{label('webhook-cert-dir')}: must name a directory")
    uninstall_guard = args.uninstall_guard.strip()
    if uninstall_guard:
        try:
            UninstallGuardConfig.parse(uninstall_guard, namespace="")  # the pod's, known at run time
        except ValueError as error:
            raise UsageError(
                f"{label('uninstall-guard')}: {str(error).removeprefix('--uninstall-guard: ')}"
            ) from None
    webhook_certs = args.webhook_certs.strip().lower()
    if webhook_certs not in WEBHOOK_CERT_MODES:
        raise UsageError(
            f"{label('webhook-certs')}: expected {' or '.join(WEBHOOK_CERT_MODES)}, "
            f"got {args.webhook_certs!r}"
        )
    extra_names = tuple(n.strip() for n in args.webhook_cert_extra_names.split(",") if n.strip())
    self_managed_only = {
        "webhook-service": args.webhook_service,
        "webhook-secret": args.webhook_secret,
        "webhook-namespace": args.webhook_namespace,
        "webhook-cert-extra-names": args.webhook_cert_extra_names,
    }
    if webhook_certs != "self-managed":
        for name, value in self_managed_only.items():
            if value.strip():
                raise UsageError(f"{label(name)} is only used with --webhook-certs=self-managed")
    for name in ("webhook-service", "webhook-secret", "webhook-namespace"):
        value = self_managed_only[name].strip()
        if value and not _DNS_LABEL.fullmatch(value):
            raise UsageError(f"{label(name)}: {value!r} is not a valid name (lower-case DNS label)")
    try:
        event_loop = eventloop.resolve(args.event_loop.strip().lower())
    except ValueError as error:
        raise UsageError(f"{label('event-loop')}: {error}") from None
    return RunConfig(
        kubeconfig=args.kubeconfig or None,
        namespaces=namespaces,
        max_concurrent_reconciles=int(
            number("max-concurrent-reconciles", args.max_concurrent_reconciles, int, 1)
        ),
        leader_elect=bool(args.leader_elect),
        sharding=bool(args.sharding),
        shards=shards,
        sharding_group=group,
        leader_election_id=election_id,
        leader_election_namespace=election_namespace,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
        release_on_cancel=args.leader_elect_release_on_cancel is not False,
        metrics_address=metrics_address,
        probe_address=probe_address,
        log_format=args.log_format,
        log_level=args.log_level.lower(),
        sync_period=sync_period or None,
        kube_api_qps=qps or None,
        kube_api_burst=(burst or max(1, int(qps * 1.5))) if qps else None,
        event_qps=event_qps or None,
        event_burst=event_burst,
        graceful_shutdown_timeout=duration(
            "graceful-shutdown-timeout", args.graceful_shutdown_timeout, allow_zero=True
        ),
        watch_batch_window=duration("watch-batch-window", args.watch_batch_window, allow_zero=True),
        metrics_secure=bool(args.metrics_secure),
        metrics_cert_dir=args.metrics_cert_dir or None,
        kubeconfig_origin=from_env.get("kubeconfig", "--kubeconfig"),
        controllers=controllers,
        leader_election_mode=mode,
        pod_name=pod_name,
        leader_for_life_max_backoff=max_backoff,
        leader_for_life_outside_cluster=bool(args.leader_for_life_outside_cluster),
        project=project,
        prog=prog,
        event_loop=event_loop,
        enable_webhooks=args.enable_webhooks is not False,
        webhook_host=webhook_host,
        webhook_port=webhook_port,
        webhook_cert_dir=webhook_cert_dir,
        webhook_certs=webhook_certs,
        uninstall_guard=uninstall_guard,
        webhook_service=args.webhook_service.strip(),
        webhook_secret=args.webhook_secret.strip(),
        webhook_namespace=args.webhook_namespace.strip(),
        webhook_cert_extra_names=extra_names,
    )
