"""The Pod Security Standards' checks, as ``k8s.io/pod-security-admission/policy`` (v1.36) words
and versions them (``check_*.go``).

A check function reads a pod's (or pod template's) metadata and spec, JSON objects as the
server stores them, and returns None when the pod passes, or the :class:`Violation` (reason and
detail) that kube-apiserver prints. A Go pointer left nil is a key absent or ``null``; an empty
object is a set one. What the checks list (containers, hosts, capabilities) comes in the order
the Go code builds it: containers in spec order (init, regular, ephemeral), sets sorted.

:data:`CHECKS` registers every check with its level and its versions: a version's function
applies from its minimum policy version until the next one's; a restricted check may override
baseline checks (they are skipped where it applies).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from memop.testing.apiserver.schema import go_quote

from .policy import BASELINE, RESTRICTED

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Violation:
    """Why a pod fails a check: the short reason, and the detail shown in parentheses."""

    reason: str
    detail: str = ""


CheckFn = Callable[[Obj, Obj], Violation | None]


@dataclass(frozen=True, slots=True)
class VersionedCheck:
    minimum_minor: int  # the first policy version v1.<minimum_minor> it applies to
    check: CheckFn
    overrides: tuple[str, ...] = ()  # baseline check IDs it replaces (restricted checks only)


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    level: str
    versions: tuple[VersionedCheck, ...]  # by increasing minimum version


# --- reading the pod ----------------------------------------------------------------------------


def _map(value: Any) -> Obj | None:
    """A Go pointer to a struct: None when nil (absent, null)."""
    return value if isinstance(value, Mapping) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _containers(spec: Obj) -> Iterator[Obj]:
    """Every container of ``spec``: init containers, containers, ephemeral containers."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in _list(spec.get(key)):
            if isinstance(container, Mapping):
                yield container


def _name(container: Obj) -> str:
    return str(container.get("name") or "")


def _security_context(owner: Obj) -> Obj | None:
    return _map(owner.get("securityContext"))


def _annotations(meta: Obj) -> Obj:
    return _map(meta.get("annotations")) or {}


def _join_quote(items: list[str]) -> str:
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _containers_phrase(names: list[str]) -> str:
    return f"{_plural('container', 'containers', len(names))} {_join_quote(names)}"


def _setters(spec: Obj, sets: Callable[[Obj], bool]) -> str:
    """``pod and containers "a", "b"``: the pod (its securityContext) and the containers for
    which ``sets`` holds, as the checks name them; empty when none."""
    setters = ["pod"] if sets(spec) else []
    containers = [_name(c) for c in _containers(spec) if sets(c)]
    if containers:
        setters.append(_containers_phrase(containers))
    return " and ".join(setters)


def _windows(spec: Obj) -> bool:
    os = _map(spec.get("os"))
    return os is not None and os.get("name") == "windows"


def _user_namespace(spec: Obj) -> bool:
    """``hostUsers: false``: the pod runs in a user namespace, which relaxes some checks."""
    return spec.get("hostUsers") is False


def _not_windows(check: CheckFn) -> CheckFn:
    """From v1.25, a pod with ``spec.os.name: windows`` passes the check."""

    def checked(meta: Obj, spec: Obj) -> Violation | None:
        return None if _windows(spec) else check(meta, spec)

    return checked


def _not_user_namespace(check: CheckFn) -> CheckFn:
    """From v1.35, a pod in a user namespace passes the check."""

    def checked(meta: Obj, spec: Obj) -> Violation | None:
        return None if _user_namespace(spec) else check(meta, spec)

    return checked


# --- baseline -----------------------------------------------------------------------------------

_APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def _apparmor_type_allowed(profile: Obj) -> bool:
    return profile.get("type") in ("RuntimeDefault", "Localhost")


def app_armor_profile(meta: Obj, spec: Obj) -> Violation | None:
    setters: list[str] = []
    values: set[str] = set()
    pod_profile = _map((_security_context(spec) or {}).get("appArmorProfile"))
    if pod_profile is not None and not _apparmor_type_allowed(pod_profile):
        setters.append("pod")
        values.add(str(pod_profile.get("type") or ""))
    containers = []
    for container in _containers(spec):
        profile = _map((_security_context(container) or {}).get("appArmorProfile"))
        if profile is not None and not _apparmor_type_allowed(profile):
            containers.append(_name(container))
            values.add(str(profile.get("type") or ""))
    if containers:
        setters.append(_containers_phrase(containers))
    annotations = sorted(
        f"{key}={go_quote(str(value))}"
        for key, value in _annotations(meta).items()
        if key.startswith(_APPARMOR_ANNOTATION_PREFIX)
        and not (not value or value == "runtime/default" or str(value).startswith("localhost/"))
    )
    shown = sorted(values) + annotations
    if annotations:
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return Violation(
        _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(shown)),
        f"{' and '.join(setters)} must not set AppArmor profile type to {_join_quote(shown)}",
    )


_DEFAULT_CAPABILITIES = frozenset(
    (
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    )
)


def capabilities_baseline(meta: Obj, spec: Obj) -> Violation | None:
    containers: list[str] = []
    added: set[str] = set()
    for container in _containers(spec):
        capabilities = _map((_security_context(container) or {}).get("capabilities"))
        if capabilities is None:
            continue
        bad = {str(c) for c in _list(capabilities.get("add")) if c not in _DEFAULT_CAPABILITIES}
        if bad:
            containers.append(_name(container))
            added |= bad
    if not containers:
        return None
    return Violation(
        "non-default capabilities",
        f"{_containers_phrase(containers)} must not include {_join_quote(sorted(added))} "
        "in securityContext.capabilities.add",
    )


def host_namespaces(meta: Obj, spec: Obj) -> Violation | None:
    shared = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key) is True]
    return Violation("host namespaces", ", ".join(shared)) if shared else None


def host_path_volumes(meta: Obj, spec: Obj) -> Violation | None:
    volumes = [
        str(v.get("name") or "")
        for v in _list(spec.get("volumes"))
        if isinstance(v, Mapping) and v.get("hostPath") is not None
    ]
    if not volumes:
        return None
    return Violation(
        "hostPath volumes", f"{_plural('volume', 'volumes', len(volumes))} {_join_quote(volumes)}"
    )


def _port(value: Any) -> str:
    """``strconv.Itoa`` of an int32 port (a JSON number may arrive as a float)."""
    return str(int(value)) if isinstance(value, int | float) else str(value)


def host_ports(meta: Obj, spec: Obj) -> Violation | None:
    containers: list[str] = []
    ports: set[str] = set()
    for container in _containers(spec):
        used = {
            _port(p.get("hostPort"))
            for p in _list(container.get("ports"))
            if isinstance(p, Mapping) and p.get("hostPort")
        }
        if used:
            containers.append(_name(container))
            ports |= used
    if not containers:
        return None
    return Violation(
        "hostPort",
        f"{_containers_phrase(containers)} {_plural('uses', 'use', len(containers))} "
        f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}",
    )


def _handler_hosts(handler: Obj | None) -> list[str]:
    """The hosts an httpGet or tcpSocket of a probe or lifecycle handler names."""
    if handler is None:
        return []
    hosts = []
    for action in ("httpGet", "tcpSocket"):
        host = (_map(handler.get(action)) or {}).get("host")
        if host:
            hosts.append(str(host))
    return hosts


def host_probes_and_host_lifecycle(meta: Obj, spec: Obj) -> Violation | None:
    containers: set[str] = set()
    hosts: set[str] = set()
    for container in _containers(spec):
        lifecycle = _map(container.get("lifecycle")) or {}
        handlers = [_map(container.get(k)) for k in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [_map(lifecycle.get(k)) for k in ("postStart", "preStop")]
        for handler in handlers:
            found = _handler_hosts(handler)
            if found:
                containers.add(_name(container))
                hosts.update(found)
    if not containers:
        return None
    return Violation(
        "probe or lifecycle host",
        f"{_plural('container', 'containers', len(containers))} {_join_quote(sorted(containers))} "
        f"{_plural('uses', 'use', len(containers))} "
        f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
        f"{_join_quote(sorted(hosts))}",
    )


def privileged(meta: Obj, spec: Obj) -> Violation | None:
    containers = [
        _name(c) for c in _containers(spec) if (_security_context(c) or {}).get("privileged") is True
    ]
    if not containers:
        return None
    return Violation(
        "privileged", f"{_containers_phrase(containers)} must not set securityContext.privileged=true"
    )


def proc_mount(meta: Obj, spec: Obj) -> Violation | None:
    containers: list[str] = []
    types: set[str] = set()
    for container in _containers(spec):
        mount = (_security_context(container) or {}).get("procMount")
        if mount is not None and mount != "Default":
            containers.append(_name(container))
            types.add(str(mount))
    if not containers:
        return None
    return Violation(
        "procMount",
        f"{_containers_phrase(containers)} must not set securityContext.procMount to "
        f"{_join_quote(sorted(types))}",
    )


_SELINUX_TYPES_1_0 = frozenset(("", "container_t", "container_init_t", "container_kvm_t"))
_SELINUX_TYPES_1_31 = _SELINUX_TYPES_1_0 | {"container_engine_t"}


def _selinux_options(allowed_types: frozenset[str]) -> CheckFn:
    def check(meta: Obj, spec: Obj) -> Violation | None:
        bad_types: set[str] = set()
        user = role = False

        def valid(options: Obj) -> bool:
            nonlocal user, role
            ok = True
            kind = str(options.get("type") or "")
            if kind not in allowed_types:
                ok = False
                bad_types.add(kind)
            if options.get("user"):
                user = True
                ok = False
            if options.get("role"):
                role = True
                ok = False
            return ok

        setters: list[str] = []
        pod_options = _map((_security_context(spec) or {}).get("seLinuxOptions"))
        if pod_options is not None and not valid(pod_options):
            setters.append("pod")
        containers = []
        for container in _containers(spec):
            options = _map((_security_context(container) or {}).get("seLinuxOptions"))
            if options is not None and not valid(options):
                containers.append(_name(container))
        if containers:
            setters.append(_containers_phrase(containers))
        if not setters:
            return None
        data = []
        if bad_types:
            data.append(f"{_plural('type', 'types', len(bad_types))} {_join_quote(sorted(bad_types))}")
        if user:
            data.append("user may not be set")
        if role:
            data.append("role may not be set")
        return Violation(
            "seLinuxOptions",
            f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}",
        )

    return check


_SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER_ANNOTATION_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"


def _seccomp_annotation_allowed(value: str) -> bool:
    return value in ("runtime/default", "docker/default") or value.startswith("localhost/")


def _seccomp_type_allowed(profile: Obj) -> bool:
    return profile.get("type") in ("Localhost", "RuntimeDefault")


def seccomp_profile_baseline_1_0(meta: Obj, spec: Obj) -> Violation | None:
    """Before v1.19 the seccomp profile lived in the alpha annotations."""
    annotations = _annotations(meta)
    keys = [_SECCOMP_POD_ANNOTATION] + [
        _SECCOMP_CONTAINER_ANNOTATION_PREFIX + _name(c) for c in _containers(spec)
    ]
    forbidden = sorted(
        {
            f"{key}={go_quote(str(annotations[key]))}"
            for key in keys
            if key in annotations and not _seccomp_annotation_allowed(str(annotations[key] or ""))
        }
    )
    if not forbidden:
        return None
    return Violation(
        "seccompProfile",
        f"forbidden {_plural('annotation', 'annotations', len(forbidden))} {', '.join(forbidden)}",
    )


def _seccomp_explicitly_bad(spec: Obj) -> tuple[list[str], set[str], bool]:
    """The setters of a seccomp profile type other than RuntimeDefault and Localhost, the
    types they set, and whether the pod sets an allowed one."""
    setters: list[str] = []
    values: set[str] = set()
    pod_allowed = False
    pod_profile = _map((_security_context(spec) or {}).get("seccompProfile"))
    if pod_profile is not None:
        if _seccomp_type_allowed(pod_profile):
            pod_allowed = True
        else:
            setters.append("pod")
            values.add(str(pod_profile.get("type") or ""))
    containers = []
    for container in _containers(spec):
        profile = _map((_security_context(container) or {}).get("seccompProfile"))
        if profile is not None and not _seccomp_type_allowed(profile):
            containers.append(_name(container))
            values.add(str(profile.get("type") or ""))
    if containers:
        setters.append(_containers_phrase(containers))
    return setters, values, pod_allowed


def _seccomp_type_violation(setters: list[str], values: set[str]) -> Violation:
    return Violation(
        "seccompProfile",
        f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
        f"{_join_quote(sorted(values))}",
    )


def seccomp_profile_baseline_1_19(meta: Obj, spec: Obj) -> Violation | None:
    setters, values, _ = _seccomp_explicitly_bad(spec)
    return _seccomp_type_violation(setters, values) if setters else None


_SYSCTLS_1_0 = frozenset(
    (
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    )
)
_SYSCTLS_1_27 = _SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
_SYSCTLS_1_29 = _SYSCTLS_1_27 | {
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
_SYSCTLS_1_32 = _SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}


def _sysctls(allowed: frozenset[str]) -> CheckFn:
    def check(meta: Obj, spec: Obj) -> Violation | None:
        sysctls = _list((_security_context(spec) or {}).get("sysctls"))
        names = [str(s.get("name") or "") for s in sysctls if isinstance(s, Mapping)]
        forbidden = [name for name in names if name not in allowed]
        return Violation("forbidden sysctls", ", ".join(forbidden)) if forbidden else None

    return check


def _host_process(owner: Obj) -> bool:
    options = _map((_security_context(owner) or {}).get("windowsOptions")) or {}
    return options.get("hostProcess") is True


def windows_host_process(meta: Obj, spec: Obj) -> Violation | None:
    setters = _setters(spec, _host_process)
    if not setters:
        return None
    return Violation("hostProcess", f"{setters} must not set securityContext.windowsOptions.hostProcess=true")


# --- restricted ---------------------------------------------------------------------------------


def allow_privilege_escalation(meta: Obj, spec: Obj) -> Violation | None:
    containers = [
        _name(c)
        for c in _containers(spec)
        if (_security_context(c) or {}).get("allowPrivilegeEscalation") is not False
    ]
    if not containers:
        return None
    return Violation(
        "allowPrivilegeEscalation != false",
        f"{_containers_phrase(containers)} must set securityContext.allowPrivilegeEscalation=false",
    )


def capabilities_restricted(meta: Obj, spec: Obj) -> Violation | None:
    missing_drop_all: list[str] = []
    adding: list[str] = []
    added: set[str] = set()
    for container in _containers(spec):
        capabilities = _map((_security_context(container) or {}).get("capabilities"))
        if capabilities is None:
            missing_drop_all.append(_name(container))
            continue
        if "ALL" not in _list(capabilities.get("drop")):
            missing_drop_all.append(_name(container))
        bad = {str(c) for c in _list(capabilities.get("add")) if c != "NET_BIND_SERVICE"}
        if bad:
            adding.append(_name(container))
            added |= bad
    details = []
    if missing_drop_all:
        details.append(
            f'{_containers_phrase(missing_drop_all)} must set securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{_containers_phrase(adding)} must not include {_join_quote(sorted(added))} "
            "in securityContext.capabilities.add"
        )
    return Violation("unrestricted capabilities", "; ".join(details)) if details else None


# The inline volume sources the restricted level allows, and those it names when refusing (in
# the order the Go switch tries them).
_ALLOWED_VOLUME_SOURCES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
_RESTRICTED_VOLUME_SOURCES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)


def restricted_volumes(meta: Obj, spec: Obj) -> Violation | None:
    volumes: list[str] = []
    types: set[str] = set()
    for volume in _list(spec.get("volumes")):
        if not isinstance(volume, Mapping):
            continue
        if any(volume.get(source) is not None for source in _ALLOWED_VOLUME_SOURCES):
            continue
        volumes.append(str(volume.get("name") or ""))
        types.add(next((s for s in _RESTRICTED_VOLUME_SOURCES if volume.get(s) is not None), "unknown"))
    if not volumes:
        return None
    return Violation(
        "restricted volume types",
        f"{_plural('volume', 'volumes', len(volumes))} {_join_quote(volumes)} "
        f"{_plural('uses', 'use', len(volumes))} "
        f"{_plural('restricted volume type', 'restricted volume types', len(types))} "
        f"{_join_quote(sorted(types))}",
    )


def run_as_non_root(meta: Obj, spec: Obj) -> Violation | None:
    setters: list[str] = []
    pod_non_root = False
    pod_value = (_security_context(spec) or {}).get("runAsNonRoot")
    if pod_value is not None:
        if pod_value is False:
            setters.append("pod")
        else:
            pod_non_root = True
    explicit: list[str] = []
    implicit: list[str] = []
    for container in _containers(spec):
        value = (_security_context(container) or {}).get("runAsNonRoot")
        if value is not None:
            if value is False:
                explicit.append(_name(container))
        elif not pod_non_root:
            implicit.append(_name(container))
    if explicit:
        setters.append(_containers_phrase(explicit))
    if setters:
        return Violation(
            "runAsNonRoot != true", f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
        )
    if implicit:
        return Violation(
            "runAsNonRoot != true",
            f"pod or {_containers_phrase(implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def _root_user(owner: Obj) -> bool:
    value = (_security_context(owner) or {}).get("runAsUser")
    return value is not None and not isinstance(value, bool) and value == 0


def run_as_user(meta: Obj, spec: Obj) -> Violation | None:
    setters = _setters(spec, _root_user)
    return Violation("runAsUser=0", f"{setters} must not set runAsUser=0") if setters else None


def seccomp_profile_restricted(meta: Obj, spec: Obj) -> Violation | None:
    setters, values, pod_allowed = _seccomp_explicitly_bad(spec)
    if setters:
        return _seccomp_type_violation(setters, values)
    if pod_allowed:
        return None
    implicit = [
        _name(c)
        for c in _containers(spec)
        if _map((_security_context(c) or {}).get("seccompProfile")) is None
    ]
    if not implicit:
        return None
    return Violation(
        "seccompProfile",
        f"pod or {_containers_phrase(implicit)} must set securityContext.seccompProfile.type to "
        '"RuntimeDefault" or "Localhost"',
    )


# --- the registry ---------------------------------------------------------------------------------


def _v(minor: int, check: CheckFn, *overrides: str) -> VersionedCheck:
    return VersionedCheck(minor, check, overrides)


CHECKS: tuple[Check, ...] = (
    Check("appArmorProfile", BASELINE, (_v(0, app_armor_profile),)),
    Check("capabilities_baseline", BASELINE, (_v(0, capabilities_baseline),)),
    Check("hostNamespaces", BASELINE, (_v(0, host_namespaces),)),
    Check("hostPathVolumes", BASELINE, (_v(0, host_path_volumes),)),
    Check("hostPorts", BASELINE, (_v(0, host_ports),)),
    Check("hostProbesAndHostLifecycle", BASELINE, (_v(34, host_probes_and_host_lifecycle),)),
    Check("privileged", BASELINE, (_v(0, privileged),)),
    Check("procMount", BASELINE, (_v(0, proc_mount), _v(35, _not_user_namespace(proc_mount)))),
    Check(
        "seLinuxOptions",
        BASELINE,
        (_v(0, _selinux_options(_SELINUX_TYPES_1_0)), _v(31, _selinux_options(_SELINUX_TYPES_1_31))),
    ),
    Check(
        "seccompProfile_baseline",
        BASELINE,
        (_v(0, seccomp_profile_baseline_1_0), _v(19, seccomp_profile_baseline_1_19)),
    ),
    Check(
        "sysctls",
        BASELINE,
        (
            _v(0, _sysctls(_SYSCTLS_1_0)),
            _v(27, _sysctls(_SYSCTLS_1_27)),
            _v(29, _sysctls(_SYSCTLS_1_29)),
            _v(32, _sysctls(_SYSCTLS_1_32)),
        ),
    ),
    Check("windowsHostProcess", BASELINE, (_v(0, windows_host_process),)),
    Check(
        "allowPrivilegeEscalation",
        RESTRICTED,
        (_v(8, allow_privilege_escalation), _v(25, _not_windows(allow_privilege_escalation))),
    ),
    Check(
        "capabilities_restricted",
        RESTRICTED,
        (
            _v(22, capabilities_restricted, "capabilities_baseline"),
            _v(25, _not_windows(capabilities_restricted), "capabilities_baseline"),
        ),
    ),
    # Unconditional in restricted once baseline's procMount relaxes for user namespaces.
    Check("procMount_restricted", RESTRICTED, (_v(35, proc_mount, "procMount"),)),
    Check("restrictedVolumes", RESTRICTED, (_v(0, restricted_volumes, "hostPathVolumes"),)),
    Check("runAsNonRoot", RESTRICTED, (_v(0, run_as_non_root), _v(35, _not_user_namespace(run_as_non_root)))),
    Check("runAsUser", RESTRICTED, (_v(23, run_as_user), _v(35, _not_user_namespace(run_as_user)))),
    Check(
        "seccompProfile_restricted",
        RESTRICTED,
        (
            _v(19, seccomp_profile_restricted, "seccompProfile_baseline"),
            _v(25, _not_windows(seccomp_profile_restricted), "seccompProfile_baseline"),
        ),
    ),
)
