"""The rows of kube-apiserver's Tables for the built-in kinds the in-memory server serves.

Each function is the print function of ``pkg/printers/internalversion/printers.go`` (v1.36)
for one kind, applied to the stored (v1) object as the real one is applied to the internal
object converted from it; the server always prints the wide form (every column, the
priority-1 ones too), and kubectl hides priority > 0 columns unless ``-o wide``. Kinds
without a printer (Role, ClusterRole, LimitRange, CustomResourceDefinition) get
``rest.NewDefaultTableConvertor``'s Name and Created At.

A row is ``{"cells": [...]}`` (plus ``conditions`` for a pod that completed), in the order of
its kind's columns in :mod:`memop.testing.apiserver.columns`. ``now`` is the wall time ages are taken at.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memop.runtime.cache.labels import InvalidSelectorError, Selector
from memop.testing.apiserver import columns
from memop.testing.apiserver.times import human_duration, nanoseconds_since, parse_or_zero, since

Row = dict[str, Any]


@dataclass(frozen=True)
class Printer:
    """A kind's columns and the function making one object's row."""

    columns: tuple[columns.Column, ...]
    row: Callable[[Mapping[str, Any], float], Row]


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _name(obj: Mapping[str, Any]) -> str:
    return _str(_map(obj.get("metadata")).get("name"))


def _age(obj: Mapping[str, Any], now: float) -> str:
    return since(_map(obj.get("metadata")).get("creationTimestamp"), now)


def _containers(template_spec: Mapping[str, Any]) -> list[str]:
    """``layoutContainerCells``: the containers' names and images, comma-separated."""
    containers = [_map(c) for c in _list(template_spec.get("containers"))]
    return [
        ",".join(_str(c.get("name")) for c in containers),
        ",".join(_str(c.get("image")) for c in containers),
    ]


def _selector(selector: Any) -> str | None:
    """``LabelSelectorAsSelector(s).String()``; None where it fails."""
    try:
        return str(Selector.from_label_selector(selector if isinstance(selector, Mapping) else None))
    except InvalidSelectorError:
        return None


def _labels(labels: Any) -> str:
    """``labels.FormatLabels``: ``k=v`` sorted by key, ``<none>`` when empty."""
    pairs = sorted(_map(labels).items())
    return ",".join(f"{k}={v}" for k, v in pairs) or "<none>"


# --- pods ------------------------------------------------------------------------------------------

_POD_COMPLETED = {
    "Succeeded": [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ],
    "Failed": [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}],
}


def _later(current: datetime.datetime | None, status: Mapping[str, Any]) -> datetime.datetime | None:
    """The later of ``current`` and when the container's last termination finished."""
    terminated = _map(status.get("lastState")).get("terminated")
    if not isinstance(terminated, Mapping):
        return current
    finished = parse_or_zero(terminated.get("finishedAt"))
    if finished is not None and (current is None or current < finished):
        return finished
    return current


def _terminated_reason(terminated: Mapping[str, Any]) -> str:
    if terminated.get("reason"):
        return _str(terminated.get("reason"))
    if _int(terminated.get("signal")):
        return f"Signal:{_int(terminated.get('signal'))}"
    return f"ExitCode:{_int(terminated.get('exitCode'))}"


def _condition_true(status: Mapping[str, Any], kind: str) -> bool:
    for condition in _list(status.get("conditions")):
        if _map(condition).get("type") == kind:
            return _map(condition).get("status") == "True"
    return False


def _restartable(container: Any) -> bool:
    return _map(container).get("restartPolicy") == "Always"


def _pod(pod: Mapping[str, Any], now: float) -> Row:
    spec, status, meta = _map(pod.get("spec")), _map(pod.get("status")), _map(pod.get("metadata"))
    init_list = _list(spec.get("initContainers"))
    init_containers = {_map(c).get("name"): c for c in init_list}
    total = len(_list(spec.get("containers"))) + sum(map(_restartable, init_list))
    ready = restarts = restartable_restarts = 0
    last_restart: datetime.datetime | None = None
    last_restartable_restart: datetime.datetime | None = None
    phase = _str(status.get("phase"))
    reason = _str(status.get("reason")) or phase
    for condition in map(_map, _list(status.get("conditions"))):
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    row: Row = {"cells": []}
    if phase in _POD_COMPLETED:
        row["conditions"] = _POD_COMPLETED[phase]

    initializing = False
    for i, container in enumerate(map(_map, _list(status.get("initContainerStatuses")))):
        restarts += _int(container.get("restartCount"))
        last_restart = _later(last_restart, container)
        restartable = _restartable(init_containers.get(container.get("name")))
        if restartable:
            restartable_restarts += _int(container.get("restartCount"))
            last_restartable_restart = _later(last_restartable_restart, container)
        state = _map(container.get("state"))
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if isinstance(terminated, Mapping) and _int(terminated.get("exitCode")) == 0:
            continue
        if restartable and container.get("started") is True:
            ready += container.get("ready") is True
            continue
        if isinstance(terminated, Mapping):
            reason = "Init:" + _terminated_reason(terminated)
        elif (
            isinstance(waiting, Mapping)
            and waiting.get("reason")
            and waiting.get("reason") != "PodInitializing"
        ):
            reason = "Init:" + _str(waiting.get("reason"))
        else:
            reason = f"Init:{i}/{len(init_list)}"
        initializing = True
        break

    if not initializing or _condition_true(status, "Initialized"):
        restarts, last_restart = restartable_restarts, last_restartable_restart
        has_running = False
        error_reason = ""
        for container in map(_map, reversed(_list(status.get("containerStatuses")))):
            restarts += _int(container.get("restartCount"))
            last_restart = _later(last_restart, container)
            state = _map(container.get("state"))
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if isinstance(waiting, Mapping) and waiting.get("reason"):
                reason = _str(waiting.get("reason"))
            elif isinstance(terminated, Mapping):
                reason = _terminated_reason(terminated)
                if _int(terminated.get("exitCode")) != 0:
                    error_reason = reason
            elif container.get("ready") is True and isinstance(state.get("running"), Mapping):
                has_running = True
                ready += 1
        if reason == "Completed":
            if has_running and _condition_true(status, "Ready"):
                reason = "Running"
            elif error_reason:
                reason = error_reason
            elif has_running:
                reason = "NotReady"

    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration(nanoseconds_since(last_restart, now))} ago)"
    ips = [_str(_map(ip).get("ip")) for ip in _list(status.get("podIPs"))]
    ip = _str(status.get("podIP")) or (ips[0] if ips else "")
    gates = [_map(g).get("conditionType") for g in _list(spec.get("readinessGates"))]
    if gates:
        # The first condition of each gate's type decides it.
        first: dict[Any, Any] = {}
        for condition in map(_map, _list(status.get("conditions"))):
            first.setdefault(condition.get("type"), condition.get("status"))
        gates_text = f"{sum(first.get(g) == 'True' for g in gates)}/{len(gates)}"
    else:
        gates_text = "<none>"
    row["cells"] = [
        _name(pod),
        f"{ready}/{total}",
        reason,
        restarts_text,
        _age(pod, now),
        ip or "<none>",
        _str(spec.get("nodeName")) or "<none>",
        _str(status.get("nominatedNodeName")) or "<none>",
        gates_text,
    ]
    return row


# --- workloads -------------------------------------------------------------------------------------


def _deployment(obj: Mapping[str, Any], now: float) -> Row:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    selector = _selector(spec.get("selector"))
    ready = f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}"
    updated, available = _int(status.get("updatedReplicas")), _int(status.get("availableReplicas"))
    return {
        "cells": [
            _name(obj),
            ready,
            updated,
            available,
            _age(obj, now),
            *_containers(_map(_map(spec.get("template")).get("spec"))),
            "<invalid>" if selector is None else selector,
        ]
    }


def _replicaset(obj: Mapping[str, Any], now: float) -> Row:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    selector = _selector(spec.get("selector"))
    return {
        "cells": [
            _name(obj),
            _int(spec.get("replicas")),
            _int(status.get("replicas")),
            _int(status.get("readyReplicas")),
            _age(obj, now),
            *_containers(_map(_map(spec.get("template")).get("spec"))),
            "<error>" if selector is None else selector or "<none>",  # metav1.FormatLabelSelector
        ]
    }


def _pod_disruption_budget(obj: Mapping[str, Any], now: float) -> Row:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))

    def int_or_string(value: Any) -> str:
        return "N/A" if value is None else str(value)

    return {
        "cells": [
            _name(obj),
            int_or_string(spec.get("minAvailable")),
            int_or_string(spec.get("maxUnavailable")),
            _int(status.get("disruptionsAllowed")),
            _age(obj, now),
        ]
    }


# --- networking ------------------------------------------------------------------------------------


def _ingress(obj: Mapping[str, Any], now: float) -> Row:
    """``printIngress``: at most three hosts (``*`` for none), the load balancer's addresses."""
    spec = _map(obj.get("spec"))
    rules = [_map(rule) for rule in _list(spec.get("rules"))]
    hosts: list[str] = []
    more = False
    for rule in rules:
        if len(hosts) == 3:
            more = True
        if not more and _str(rule.get("host")):
            hosts.append(_str(rule.get("host")))
    shown = ",".join(hosts) or "*"
    if hosts and more:
        shown = f"{shown} + {len(rules) - 3} more..."
    balancer = _list(_map(_map(obj.get("status")).get("loadBalancer")).get("ingress"))
    addresses = sorted({_str(_map(i).get("ip")) or _str(_map(i).get("hostname")) for i in balancer} - {""})
    class_name = spec.get("ingressClassName")
    return {
        "cells": [
            _name(obj),
            "<none>" if class_name is None else _str(class_name),
            shown,
            ",".join(addresses),
            "80, 443" if _list(spec.get("tls")) else "80",
            _age(obj, now),
        ]
    }


def _ingress_class(obj: Mapping[str, Any], now: float) -> Row:
    """``printIngressClass``: the parameters as ``Kind[.group]/name``."""
    spec = _map(obj.get("spec"))
    params = spec.get("parameters")
    shown = "<none>"
    if isinstance(params, Mapping):
        group = params.get("apiGroup")
        shown = (
            _str(params.get("kind"))
            + (f".{group}" if group is not None else "")
            + f"/{_str(params.get('name'))}"
        )
    return {"cells": [_name(obj), _str(spec.get("controller")), shown, _age(obj, now)]}


def _network_policy(obj: Mapping[str, Any], now: float) -> Row:
    """``printNetworkPolicy``: the pod selector as ``metav1.FormatLabelSelector`` shows it."""
    selector = _selector(_map(obj.get("spec")).get("podSelector") or {})
    return {"cells": [_name(obj), "<error>" if selector is None else selector or "<none>", _age(obj, now)]}


# --- statefulsets, daemonsets, jobs, cronjobs, autoscalers -------------------------------------------


def _template_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(_map(spec.get("template")).get("spec"))


def _format_selector(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: ``<error>``, ``<none>`` for an empty selector."""
    text = _selector(selector or {})
    return "<error>" if text is None else text or "<none>"


def _stateful_set(obj: Mapping[str, Any], now: float) -> Row:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    ready = f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}"
    return {"cells": [_name(obj), ready, _age(obj, now), *_containers(_template_spec(spec))]}


def _daemon_set(obj: Mapping[str, Any], now: float) -> Row:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    counts = [
        _int(status.get(key))
        for key in (
            "desiredNumberScheduled",
            "currentNumberScheduled",
            "numberReady",
            "updatedNumberScheduled",
            "numberAvailable",
        )
    ]
    node_selector = _template_spec(spec).get("nodeSelector")
    return {
        "cells": [
            _name(obj),
            *counts,
            _labels(node_selector),
            _age(obj, now),
            *_containers(_template_spec(spec)),
            _format_selector(spec.get("selector")),
        ]
    }


def _has_condition(status: Mapping[str, Any], kind: str) -> bool:
    return any(
        _map(c).get("type") == kind and _map(c).get("status") == "True"
        for c in _list(status.get("conditions"))
    )


def _job(obj: Mapping[str, Any], now: float) -> Row:
    """``printJob``: its state, completions as succeeded/wanted, how long it ran."""
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    succeeded = _int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_int(spec.get('completions'))}"
    elif _int(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {_int(spec.get('parallelism'))}"
    else:
        completions = f"{succeeded}/1"
    started = parse_or_zero(status.get("startTime"))
    finished = parse_or_zero(status.get("completionTime"))
    duration = ""
    if started is not None:
        end = finished.timestamp() if finished is not None else now
        duration = human_duration(nanoseconds_since(started, end))
    state = "Running"
    for kind, shown in (
        ("Complete", "Complete"),
        ("Failed", "Failed"),
        ("", "Terminating"),
        ("Suspended", "Suspended"),
        ("FailureTarget", "FailureTarget"),
        ("SuccessCriteriaMet", "SuccessCriteriaMet"),
    ):
        if (kind and _has_condition(status, kind)) or (
            not kind and _map(obj.get("metadata")).get("deletionTimestamp")
        ):
            state = shown
            break
    return {
        "cells": [
            _name(obj),
            state,
            completions,
            duration,
            _age(obj, now),
            *_containers(_template_spec(spec)),
            _format_selector(spec.get("selector")),
        ]
    }


def _cron_job(obj: Mapping[str, Any], now: float) -> Row:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    job_spec = _map(_map(spec.get("jobTemplate")).get("spec"))
    last = status.get("lastScheduleTime")
    suspend = spec.get("suspend")
    return {
        "cells": [
            _name(obj),
            _str(spec.get("schedule")),
            _str(spec.get("timeZone")) if spec.get("timeZone") is not None else "<none>",
            "<unset>" if suspend is None else ("True" if suspend else "False"),
            len(_list(status.get("active"))),
            since(last, now) if last else "<none>",
            _age(obj, now),
            *_containers(_template_spec(job_spec)),
            _format_selector(job_spec.get("selector")),
        ]
    }


def _hpa_target(metric: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """One metric of ``formatHPAMetrics``: ``cpu: 40%/80%``, ``<unknown>`` before a reading."""
    kind = _str(metric.get("type"))
    key = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods"}.get(kind, "")
    if not key:
        source = _map(metric.get(kind[:1].lower() + kind[1:]))
        value = _map(source.get("target")).get("value") or _map(source.get("target")).get("averageValue")
        return f"<unknown>/{value if value is not None else '<unset>'}"
    source, seen = _map(metric.get(key)), _map(_map(current.get(key)).get("current"))
    target = _map(source.get("target"))
    prefix = f"{_str(source.get('name'))}: " if kind != "Pods" else ""
    if target.get("averageValue") is not None or kind == "Pods":
        reading = seen.get("averageValue")
        return f"{prefix}{reading if reading is not None else '<unknown>'}/{target.get('averageValue')}"
    reading = seen.get("averageUtilization")
    shown = f"{reading}%" if reading is not None else "<unknown>"
    goal = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
    return f"{prefix}{shown}/{goal}"


def _autoscaler(obj: Mapping[str, Any], now: float) -> Row:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    ref = _map(spec.get("scaleTargetRef"))
    metrics, readings = _list(spec.get("metrics")), _list(status.get("currentMetrics"))
    shown = [
        _hpa_target(_map(m), _map(readings[i]) if i < len(readings) else {})
        for i, m in enumerate(metrics[:2])
    ]
    targets = ", ".join(shown) or "<none>"
    if len(metrics) > 2:
        targets = f"{targets} + {len(metrics) - 2} more..."
    min_pods = spec.get("minReplicas")
    return {
        "cells": [
            _name(obj),
            f"{_str(ref.get('kind'))}/{_str(ref.get('name'))}",
            targets,
            "<unset>" if min_pods is None else str(min_pods),
            _int(spec.get("maxReplicas")),
            _int(status.get("currentReplicas")),
            _age(obj, now),
        ]
    }


# --- claims, quotas, priority classes ----------------------------------------------------------------

_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)


def _volume_phase(obj: Mapping[str, Any]) -> str:
    if _map(obj.get("metadata")).get("deletionTimestamp"):
        return "Terminating"
    return _str(_map(obj.get("status")).get("phase"))


def _volume_classes(obj: Mapping[str, Any]) -> list[str]:
    """``GetPersistentVolume(Claim)Class`` (the field, else the beta annotation) and the
    volume attributes class (``<unset>``)."""
    spec = _map(obj.get("spec"))
    class_name = spec.get("storageClassName")
    if class_name is None:
        annotations = _map(_map(obj.get("metadata")).get("annotations"))
        class_name = annotations.get("volume.beta.kubernetes.io/storage-class", "")
    attributes = spec.get("volumeAttributesClassName")
    return [_str(class_name), _str(attributes) if attributes else "<unset>"]


def _claim(obj: Mapping[str, Any], now: float) -> Row:
    """``printPersistentVolumeClaim``: capacity and modes only once bound to a volume."""
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    phase = _volume_phase(obj)
    capacity = modes = ""
    if spec.get("volumeName"):
        held = set(_list(status.get("accessModes")))
        modes = ",".join(short for mode, short in _ACCESS_MODES if mode in held)
        capacity = _str(_map(status.get("capacity")).get("storage")) or "0"
    return {
        "cells": [
            _name(obj),
            phase,
            _str(spec.get("volumeName")),
            capacity,
            modes,
            *_volume_classes(obj),
            _age(obj, now),
            _str(spec.get("volumeMode")) or "<unset>",
        ]
    }


def _volume(obj: Mapping[str, Any], now: float) -> Row:
    """``printPersistentVolume``."""
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    ref = _map(spec.get("claimRef"))
    claim = (
        f"{_str(ref.get('namespace'))}/{_str(ref.get('name'))}" if spec.get("claimRef") is not None else ""
    )
    held = set(_list(spec.get("accessModes")))
    phase = _volume_phase(obj)
    return {
        "cells": [
            _name(obj),
            _str(_map(spec.get("capacity")).get("storage")) or "0",
            ",".join(short for mode, short in _ACCESS_MODES if mode in held),
            _str(spec.get("persistentVolumeReclaimPolicy")),
            phase,
            claim,
            *_volume_classes(obj),
            _str(status.get("reason")),
            _age(obj, now),
            _str(spec.get("volumeMode")) or "<unset>",
        ]
    }


def _resource_quota(obj: Mapping[str, Any], now: float) -> Row:
    """``printResourceQuota``: ``resource: used/hard`` of every hard resource, limits apart."""
    hard, status = _map(_map(obj.get("spec")).get("hard")), _map(obj.get("status"))
    requests: list[str] = []
    limits: list[str] = []
    for resource in sorted(hard):
        used = _str(_map(status.get("used")).get(resource)) or "0"
        limit = _str(_map(status.get("hard")).get(resource)) or "0"
        column_ = limits if resource.split(".")[0] == "limits" and "." in resource else requests
        column_.append(f"{resource}: {used}/{limit}")
    return {"cells": [_name(obj), ", ".join(requests), ", ".join(limits), _age(obj, now)]}


def _priority_class(obj: Mapping[str, Any], now: float) -> Row:
    policy = obj.get("preemptionPolicy")
    return {
        "cells": [
            _name(obj),
            _int(obj.get("value")),
            obj.get("globalDefault") is True,
            _age(obj, now),
            "<unset>" if policy is None else _str(policy),
        ]
    }


# --- events ----------------------------------------------------------------------------------------


def _event(event: Mapping[str, Any], now: float) -> Row:
    """``printEvent`` of a core/v1 Event (events.k8s.io/v1 ones are printed in that form)."""
    first_seen = since(event.get("firstTimestamp"), now)
    if parse_or_zero(event.get("firstTimestamp")) is None:
        first_seen = since(event.get("eventTime"), now, micro=True)
    last_seen = since(event.get("lastTimestamp"), now)
    if parse_or_zero(event.get("lastTimestamp")) is None:
        last_seen = first_seen
    count = _int(event.get("count"))
    series = event.get("series")
    if isinstance(series, Mapping):
        last_seen = since(series.get("lastObservedTime"), now, micro=True)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1  # singleton events of the new API have no count
    involved = _map(event.get("involvedObject"))
    kind, name = _str(involved.get("kind")).lower(), _str(involved.get("name"))
    source = _map(event.get("source"))
    component = _str(source.get("component")) or _str(event.get("reportingComponent"))
    instance = _str(source.get("host")) or _str(event.get("reportingInstance"))
    return {
        "cells": [
            last_seen,
            _str(event.get("type")),
            _str(event.get("reason")),
            f"{kind}/{name}" if name else kind,
            _str(involved.get("fieldPath")),
            f"{component}, {instance}" if instance else component,
            _str(event.get("message")).strip(),
            first_seen,
            count,
            _name(event),
        ]
    }


# --- the rest --------------------------------------------------------------------------------------


def _service(obj: Mapping[str, Any], now: float) -> Row:
    spec = _map(obj.get("spec"))
    kind = _str(spec.get("type"))
    cluster_ips = _list(spec.get("clusterIPs"))
    external = [_str(ip) for ip in _list(spec.get("externalIPs"))]
    if kind in ("ClusterIP", "NodePort"):
        external_ip = ",".join(external) or "<none>"
    elif kind == "LoadBalancer":
        ingress = [_map(i) for i in _list(_map(_map(obj.get("status")).get("loadBalancer")).get("ingress"))]
        balancers = sorted({_str(i.get("ip")) or _str(i.get("hostname")) for i in ingress} - {""})
        external_ip = ",".join(balancers + external) or "<pending>"
    elif kind == "ExternalName":
        external_ip = _str(spec.get("externalName"))
    else:
        external_ip = "<unknown>"
    ports = []
    for port in map(_map, _list(spec.get("ports"))):
        node_port = _int(port.get("nodePort"))
        number = f"{_int(port.get('port'))}:{node_port}" if node_port > 0 else str(_int(port.get("port")))
        ports.append(f"{number}/{_str(port.get('protocol'))}")
    return {
        "cells": [
            _name(obj),
            kind,
            _str(cluster_ips[0]) if cluster_ips else "<none>",
            external_ip,
            ",".join(ports) or "<none>",
            _age(obj, now),
            _labels(spec.get("selector")),
        ]
    }


def _binding(obj: Mapping[str, Any], now: float) -> Row:
    """``printRoleBinding`` and ``printClusterRoleBinding``."""
    ref = _map(obj.get("roleRef"))
    users, groups, accounts = [], [], []
    for subject in map(_map, _list(obj.get("subjects"))):
        kind, name = subject.get("kind"), _str(subject.get("name"))
        if kind == "ServiceAccount":
            accounts.append(f"{_str(subject.get('namespace'))}/{name}")
        elif kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
    return {
        "cells": [
            _name(obj),
            f"{_str(ref.get('kind'))}/{_str(ref.get('name'))}",
            _age(obj, now),
            ", ".join(users),
            ", ".join(groups),
            ", ".join(accounts),
        ]
    }


def _namespace(obj: Mapping[str, Any], now: float) -> Row:
    return {"cells": [_name(obj), _str(_map(obj.get("status")).get("phase")), _age(obj, now)]}


_NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
_NODE_ROLE_LABEL = "kubernetes.io/role"


def _node(obj: Mapping[str, Any], now: float) -> Row:
    """``printNode``: Ready or NotReady (Unknown without the condition), SchedulingDisabled when
    cordoned; the roles from the ``node-role.kubernetes.io/<role>`` labels and the
    ``kubernetes.io/role`` label's value, sorted; the first InternalIP and ExternalIP."""
    status, spec = _map(obj.get("status")), _map(obj.get("spec"))
    ready = None
    for condition in _list(status.get("conditions")):
        if _map(condition).get("type") == "Ready":
            ready = _map(condition)  # the last one, as printNode's map of them keeps
    states = ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in _map(_map(obj.get("metadata")).get("labels")).items():
        if key.startswith(_NODE_ROLE_PREFIX):
            if role := key.removeprefix(_NODE_ROLE_PREFIX):
                roles.add(role)
        elif key == _NODE_ROLE_LABEL and value:
            roles.add(_str(value))
    info = _map(status.get("nodeInfo"))

    def address(kind: str) -> str:
        found = (
            _map(a).get("address") for a in _list(status.get("addresses")) if _map(a).get("type") == kind
        )
        return _str(next(found, None)) or "<none>"

    kernel = _str(info.get("kernelVersion")) or "<unknown>"
    if info.get("architecture"):
        kernel += f" ({_str(info.get('architecture'))})"
    return {
        "cells": [
            _name(obj),
            ",".join(states),
            ",".join(sorted(roles)) or "<none>",
            _age(obj, now),
            _str(info.get("kubeletVersion")),
            address("InternalIP"),
            address("ExternalIP"),
            _str(info.get("osImage")) or "<unknown>",
            kernel,
            _str(info.get("containerRuntimeVersion")) or "<unknown>",
        ]
    }


def _config_map(obj: Mapping[str, Any], now: float) -> Row:
    count = len(_map(obj.get("data"))) + len(_map(obj.get("binaryData")))
    return {"cells": [_name(obj), count, _age(obj, now)]}


def _secret(obj: Mapping[str, Any], now: float) -> Row:
    return {"cells": [_name(obj), _str(obj.get("type")), len(_map(obj.get("data"))), _age(obj, now)]}


def _lease(obj: Mapping[str, Any], now: float) -> Row:
    return {"cells": [_name(obj), _str(_map(obj.get("spec")).get("holderIdentity")), _age(obj, now)]}


def _webhook_configuration(obj: Mapping[str, Any], now: float) -> Row:
    webhooks = obj.get("webhooks")
    return {"cells": [_name(obj), len(webhooks) if isinstance(webhooks, list) else 0, _age(obj, now)]}


def _name_and_age(obj: Mapping[str, Any], now: float) -> Row:
    return {"cells": [_name(obj), _age(obj, now)]}


def _name_and_creation(obj: Mapping[str, Any], now: float) -> Row:
    """``rest.NewDefaultTableConvertor``: the creation time in RFC 3339, not an age."""
    created = parse_or_zero(_map(obj.get("metadata")).get("creationTimestamp"))
    stamp = (
        created.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if created else "0001-01-01T00:00:00Z"
    )
    return {"cells": [_name(obj), stamp]}


# The printer of each built-in resource, by (group, resource).
PRINTERS: dict[tuple[str, str], Printer] = {
    ("", "namespaces"): Printer(columns.NAMESPACES, _namespace),
    ("", "nodes"): Printer(columns.NODES, _node),
    ("", "pods"): Printer(columns.PODS, _pod),
    ("", "configmaps"): Printer(columns.CONFIGMAPS, _config_map),
    ("", "secrets"): Printer(columns.SECRETS, _secret),
    ("", "events"): Printer(columns.EVENTS, _event),
    ("events.k8s.io", "events"): Printer(columns.EVENTS, _event),
    ("", "serviceaccounts"): Printer(columns.SERVICEACCOUNTS, _name_and_age),
    ("", "services"): Printer(columns.SERVICES, _service),
    ("apps", "deployments"): Printer(columns.DEPLOYMENTS, _deployment),
    ("apps", "replicasets"): Printer(columns.REPLICASETS, _replicaset),
    ("coordination.k8s.io", "leases"): Printer(columns.LEASES, _lease),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): Printer(
        columns.WEBHOOK_CONFIGURATIONS, _webhook_configuration
    ),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): Printer(
        columns.WEBHOOK_CONFIGURATIONS, _webhook_configuration
    ),
    ("policy", "poddisruptionbudgets"): Printer(columns.PODDISRUPTIONBUDGETS, _pod_disruption_budget),
    ("networking.k8s.io", "ingresses"): Printer(columns.INGRESSES, _ingress),
    ("networking.k8s.io", "networkpolicies"): Printer(columns.NETWORKPOLICIES, _network_policy),
    ("networking.k8s.io", "ingressclasses"): Printer(columns.INGRESSCLASSES, _ingress_class),
    ("apps", "statefulsets"): Printer(columns.STATEFULSETS, _stateful_set),
    ("apps", "daemonsets"): Printer(columns.DAEMONSETS, _daemon_set),
    ("batch", "jobs"): Printer(columns.JOBS, _job),
    ("batch", "cronjobs"): Printer(columns.CRONJOBS, _cron_job),
    ("autoscaling", "horizontalpodautoscalers"): Printer(columns.HORIZONTALPODAUTOSCALERS, _autoscaler),
    ("", "persistentvolumeclaims"): Printer(columns.PERSISTENTVOLUMECLAIMS, _claim),
    ("", "persistentvolumes"): Printer(columns.PERSISTENTVOLUMES, _volume),
    ("", "resourcequotas"): Printer(columns.RESOURCEQUOTAS, _resource_quota),
    ("scheduling.k8s.io", "priorityclasses"): Printer(columns.PRIORITYCLASSES, _priority_class),
    ("rbac.authorization.k8s.io", "rolebindings"): Printer(columns.ROLEBINDINGS, _binding),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): Printer(columns.CLUSTERROLEBINDINGS, _binding),
}
DEFAULT = Printer(columns.DEFAULT, _name_and_creation)
