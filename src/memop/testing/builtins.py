"""The built-in kinds the in-memory API server serves, with kube-apiserver's write behaviour:
defaulting (``SetDefaults_*`` of the v1 APIs), the strategies' create/update preparation,
the validation controllers run into, selectable fields, and the core/v1 <-> events.k8s.io/v1
Event conversion (both versions share one storage, as in Kubernetes).

Defaulting functions mutate the object they are given; the store only hands them objects it
owns exclusively (decoded request bodies or fresh copies).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from typing import Any

from memop.runtime.labels import InvalidSelectorError, Selector
from memop.testing.errors import bad_request
from memop.testing.objects import (
    JsonDict,
    go_quote,
    go_repr,
    invalid,
    not_supported,
    required,
    validate_name,
)
from memop.testing.quantity import QuantityError
from memop.testing.quantity import canonical as canonical_quantity
from memop.testing.resources import ResourceType
from memop.testing.schema import FieldError
from memop.testing.strategy import Strategy


class BuiltinStrategy(Strategy):
    """A kind compiled into kube-apiserver (typed: list items carry no kind/apiVersion)."""

    builtin = True


def _decoding(rtype: ResourceType, default: Callable[[], None]) -> None:
    """Run typed defaulting; a malformed quantity or time fails decoding with 400, as in Kubernetes."""
    try:
        default()
    except (QuantityError, TimeFormatError) as error:
        kind, version = rtype.kind, rtype.version
        raise bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {error}') from None


class TimeFormatError(ValueError):
    """A metav1.Time/MicroTime field that is not RFC 3339; the message is Go's parse error."""


_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def canonical_time(value: Any, *, micro: bool) -> Any:
    """A timestamp as the typed field serialises it: UTC, whole seconds (metav1.Time) or six
    fractional digits (metav1.MicroTime). None stays None."""
    if value is None:
        return None
    match = _RFC3339.match(value) if isinstance(value, str) else None
    if match is None:
        raise TimeFormatError(
            f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse "{value}" as "2006"'
        )
    base, fraction, zone = match.groups()
    stamp = datetime.datetime.fromisoformat(base + (zone if zone != "Z" else "+00:00"))
    micros = int(((fraction or ".0")[1:] + "000000")[:6])
    stamp = stamp.astimezone(datetime.UTC).replace(microsecond=micros)
    if micro:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def _normalize_times(obj: JsonDict, paths: tuple[tuple[str, ...], ...], *, micro: bool) -> None:
    for path in paths:
        parent: Any = obj
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and path[-1] in parent:
            parent[path[-1]] = canonical_time(parent[path[-1]], micro=micro)


NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", False, "namespace", ("ns",), has_status=True)
PODS = ResourceType("", "v1", "pods", "Pod", True, "pod", ("po",), has_status=True, categories=("all",))
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap", True, "configmap", ("cm",))
EVENTS = ResourceType("", "v1", "events", "Event", True, "event", ("ev",))
EVENTS_V1 = ResourceType("events.k8s.io", "v1", "events", "Event", True, "event", ("ev",))
DEPLOYMENTS = ResourceType(
    "apps",
    "v1",
    "deployments",
    "Deployment",
    True,
    "deployment",
    ("deploy",),
    has_status=True,
    categories=("all",),
)
REPLICASETS = ResourceType(
    "apps",
    "v1",
    "replicasets",
    "ReplicaSet",
    True,
    "replicaset",
    ("rs",),
    has_status=True,
    categories=("all",),
)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, "lease")

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UNDELETABLE_NAMESPACES = frozenset(("default", "kube-system", "kube-public"))

# --- pod template defaulting (k8s.io/kubernetes/pkg/apis/core/v1/defaults.go) -------------------


def image_pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or an untagged image without digest, else ``IfNotPresent``."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    _default_handler(probe)


def _default_handler(handler: Any) -> None:
    http_get = handler.get("httpGet") if isinstance(handler, dict) else None
    if isinstance(http_get, dict):
        http_get.setdefault("path", "/")
        http_get.setdefault("scheme", "HTTP")


def _canonical_resources(resources: Any) -> None:
    """Quantities in requests/limits come back in canonical form (``1000m`` -> ``1``)."""
    if not isinstance(resources, dict):
        return
    for key in ("requests", "limits"):
        amounts = resources.get(key)
        if isinstance(amounts, dict):
            resources[key] = {name: canonical_quantity(str(value)) for name, value in amounts.items()}


def default_container(container: Any) -> None:
    """``SetDefaults_Container`` and friends; raises QuantityError for a malformed quantity."""
    if not isinstance(container, dict):
        return
    container.setdefault("resources", {})
    _canonical_resources(container["resources"])
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if "imagePullPolicy" not in container:
        container["imagePullPolicy"] = image_pull_policy(str(container.get("image") or ""))
    for port in container.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(container.get(key))
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in lifecycle.values():
            _default_handler(hook)
    for env in container.get("env") or ():
        value_from = env.get("valueFrom") if isinstance(env, dict) else None
        field_ref = value_from.get("fieldRef") if isinstance(value_from, dict) else None
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")


def default_pod_spec(spec: Any) -> None:
    """``SetDefaults_PodSpec`` plus the per-container and per-volume defaults."""
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or ():
            default_container(container)
    for volume in spec.get("volumes") or ():
        if not isinstance(volume, dict):
            continue
        for source in ("configMap", "secret"):
            if isinstance(volume.get(source), dict):
                volume[source].setdefault("defaultMode", 420)


def default_pod_template(template: Any) -> None:
    if not isinstance(template, dict):
        return
    metadata = template.setdefault("metadata", {})
    if isinstance(metadata, dict):
        # The typed ObjectMeta of 1.32 serialises an unset creationTimestamp as null.
        metadata.setdefault("creationTimestamp", None)
    default_pod_spec(template.setdefault("spec", {}))


def pod_qos_class(pod: Mapping[str, Any]) -> str:
    """``GetPodQOS``: Guaranteed, Burstable or BestEffort from the containers' resources."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or ()) + list(spec.get("initContainers") or ())
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {} if isinstance(container, dict) else {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        if requests or limits:
            any_set = True
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits.get(name)) != limits.get(name):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


# --- validation ----------------------------------------------------------------------------------


def validate_containers(spec: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not containers:
        return [required(f"{path}.containers")]
    seen: set[str] = set()
    for i, container in enumerate(containers):
        cpath = f"{path}.containers[{i}]"
        if not isinstance(container, dict):
            errs.append(invalid(cpath, container, "must be an object"))
            continue
        name = container.get("name")
        if not name:
            errs.append(required(f"{cpath}.name"))
        elif isinstance(name, str):
            errs.extend(validate_name(f"{cpath}.name", name, label=True))
            if name in seen:
                errs.append(
                    FieldError(
                        field=f"{cpath}.name",
                        type="FieldValueDuplicate",
                        message=f"{cpath}.name: Duplicate value: {go_quote(name)}",
                    )
                )
            seen.add(name)
        if not container.get("image"):
            errs.append(required(f"{cpath}.image"))
    return errs


def _label_selector_repr(selector: Mapping[str, Any]) -> str:
    labels = selector.get("matchLabels")
    exprs = selector.get("matchExpressions")
    shown_labels = go_repr(labels) if labels else "map[string]string(nil)"
    shown_exprs = "[]v1.LabelSelectorRequirement(nil)"
    if exprs:
        parts = []
        for expr in exprs:
            values = expr.get("values")
            shown_values = go_repr(values) if values else "[]string(nil)"
            parts.append(
                f"v1.LabelSelectorRequirement{{Key:{go_quote(str(expr.get('key', '')))}, "
                f"Operator:{go_quote(str(expr.get('operator', '')))}, Values:{shown_values}}}"
            )
        shown_exprs = "[]v1.LabelSelectorRequirement{" + ", ".join(parts) + "}"
    return f"v1.LabelSelector{{MatchLabels:{shown_labels}, MatchExpressions:{shown_exprs}}}"


def validate_workload(obj: Mapping[str, Any], kind: str) -> list[FieldError]:
    """Deployment/ReplicaSet spec validation (selector, template labels, replicas, containers)."""
    errs: list[FieldError] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec.selector"), required("spec.template.spec.containers")]
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas < 0:
        errs.append(invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    selector_obj = spec.get("selector")
    template: dict[str, Any] = spec["template"] if isinstance(spec.get("template"), dict) else {}
    template_labels = (template.get("metadata") or {}).get("labels") or {}
    if not isinstance(selector_obj, dict):
        errs.append(required("spec.selector"))
    else:
        try:
            selector = Selector.from_label_selector(selector_obj)
        except InvalidSelectorError as error:
            errs.append(
                invalid(
                    "spec.selector", selector_obj, str(error), raw_value=_label_selector_repr(selector_obj)
                )
            )
        else:
            if selector.is_empty():
                errs.append(
                    invalid(
                        "spec.selector",
                        selector_obj,
                        f"empty selector is invalid for {kind}",
                        raw_value=_label_selector_repr(selector_obj),
                    )
                )
            elif not selector.matches(template_labels):
                errs.append(
                    invalid(
                        "spec.template.metadata.labels",
                        template_labels,
                        "`selector` does not match template `labels`",
                    )
                )
    pod_spec = template.get("spec")
    errs.extend(validate_containers(pod_spec, "spec.template.spec"))
    restart = pod_spec.get("restartPolicy") if isinstance(pod_spec, dict) else None
    if restart is not None and restart != "Always":
        errs.append(not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
    return errs


# --- strategies ------------------------------------------------------------------------------------


class NamespaceStrategy(BuiltinStrategy):
    generation = False
    unconditional_update = True
    return_deleted_object = True
    strategic_merge = True
    label_names = True
    core_field_labels = True

    def field_labels(self) -> Mapping[str, str]:
        return {"status.phase": "status.phase"}

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        name = (obj.get("metadata") or {}).get("name")
        if isinstance(name, str) and name:
            labels = obj["metadata"].setdefault("labels", {})
            if isinstance(labels, dict):
                labels["kubernetes.io/metadata.name"] = name
        obj.setdefault("spec", {})
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {"phase": "Active"}

    def prepare_create(self, obj: JsonDict, rtype: ResourceType) -> None:
        spec = obj.setdefault("spec", {})
        finalizers = spec.get("finalizers") or []
        if "kubernetes" not in finalizers:
            spec["finalizers"] = [*finalizers, "kubernetes"]

    def prepare_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> None:
        # spec.finalizers only changes through the /finalize subresource.
        old_finalizers = (old.get("spec") or {}).get("finalizers")
        spec = new.setdefault("spec", {})
        if old_finalizers is None:
            spec.pop("finalizers", None)
        else:
            spec["finalizers"] = old_finalizers


class PodStrategy(BuiltinStrategy):
    # Pods have no metadata.generation before Kubernetes 1.33.
    generation = False
    unconditional_update = True
    return_deleted_object = True
    strategic_merge = True
    core_field_labels = True

    def field_labels(self) -> Mapping[str, str]:
        return {
            "spec.nodeName": "spec.nodeName",
            "spec.restartPolicy": "spec.restartPolicy",
            "spec.schedulerName": "spec.schedulerName",
            "spec.serviceAccountName": "spec.serviceAccountName",
            "spec.hostNetwork": "spec.hostNetwork",
            "status.phase": "status.phase",
            "status.podIP": "status.podIP",
            "status.nominatedNodeName": "status.nominatedNodeName",
        }

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        spec = obj.setdefault("spec", {})
        _decoding(rtype, lambda: default_pod_spec(spec))
        if isinstance(spec, dict):
            # Pods only (not templates): limits without requests default the requests.
            for key in ("initContainers", "containers"):
                for container in spec.get(key) or ():
                    resources = container.get("resources") if isinstance(container, dict) else None
                    limits = resources.get("limits") if isinstance(resources, dict) else None
                    if isinstance(limits, dict) and limits:
                        assert isinstance(resources, dict)
                        resources["requests"] = {**limits, **(resources.get("requests") or {})}
            spec.setdefault("enableServiceLinks", True)
            # What the ServiceAccount, Priority and DefaultTolerationSeconds admission plugins add.
            spec.setdefault("serviceAccountName", "default")
            spec.setdefault("serviceAccount", spec["serviceAccountName"])
            spec.setdefault("priority", 0)
            spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
            spec.setdefault(
                "tolerations",
                [
                    {
                        "key": "node.kubernetes.io/not-ready",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    },
                    {
                        "key": "node.kubernetes.io/unreachable",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    },
                ],
            )
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {"phase": "Pending", "qosClass": pod_qos_class(obj)}

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return validate_containers(obj.get("spec"), "spec")


class ConfigMapStrategy(BuiltinStrategy):
    generation = False
    unconditional_update = True
    strategic_merge = True


class LeaseStrategy(BuiltinStrategy):
    generation = False
    unconditional_update = False
    strategic_merge = True

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(
            rtype, lambda: _normalize_times(obj, (("spec", "acquireTime"), ("spec", "renewTime")), micro=True)
        )
        return obj


class DeploymentStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True

    def scale_paths(self, rtype: ResourceType) -> tuple[str, str, str | None] | None:
        return ("spec.replicas", "status.replicas", None)

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return obj
        spec.setdefault("replicas", 1)
        strategy = spec.setdefault("strategy", {})
        if isinstance(strategy, dict):
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                rolling = strategy.setdefault("rollingUpdate", {})
                if isinstance(rolling, dict):
                    rolling.setdefault("maxUnavailable", "25%")
                    rolling.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        template = spec.setdefault("template", {})
        _decoding(rtype, lambda: default_pod_template(template))
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {}

    def bumps_generation(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> bool:
        # Annotation changes bump it too: they are copied to the ReplicaSets.
        return new.get("spec") != old.get("spec") or (
            (new.get("metadata") or {}).get("annotations") != (old.get("metadata") or {}).get("annotations")
        )

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return validate_workload(obj, "Deployment")

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs = validate_workload(new, "Deployment")
        errs.extend(_immutable_selector(new, old))
        return errs


class ReplicaSetStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True

    def scale_paths(self, rtype: ResourceType) -> tuple[str, str, str | None] | None:
        return ("spec.replicas", "status.replicas", None)

    def field_labels(self) -> Mapping[str, str]:
        return {"status.replicas": "status.replicas"}

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            template = spec.setdefault("template", {})
            _decoding(rtype, lambda: default_pod_template(template))
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {"replicas": 0}

    def bumps_generation(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> bool:
        return new.get("spec") != old.get("spec")

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return validate_workload(obj, "ReplicaSet")

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs = validate_workload(new, "ReplicaSet")
        errs.extend(_immutable_selector(new, old))
        return errs


def _immutable_selector(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    new_sel = (new.get("spec") or {}).get("selector")
    old_sel = (old.get("spec") or {}).get("selector")
    if isinstance(new_sel, dict) and new_sel != old_sel:
        return [
            invalid("spec.selector", new_sel, "field is immutable", raw_value=_label_selector_repr(new_sel))
        ]
    return []


# --- events: one storage (core/v1), two served versions ------------------------------------------

# (core/v1 field, events.k8s.io/v1 field)
_EVENT_FIELDS = (
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
    ("action", "action"),
    ("reason", "reason"),
    ("involvedObject", "regarding"),
    ("related", "related"),
    ("message", "note"),
    ("type", "type"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
)


def event_to_events_v1(obj: Mapping[str, Any]) -> JsonDict:
    """A stored core/v1 Event as events.k8s.io/v1 serves it."""
    out: JsonDict = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": obj.get("metadata", {})}
    for core, new in _EVENT_FIELDS:
        value = obj.get(core)
        if core == "eventTime" or value not in (None, "", {}, 0):
            out[new] = value
    return out


def event_from_events_v1(obj: Mapping[str, Any]) -> JsonDict:
    """An events.k8s.io/v1 Event converted to the core/v1 storage form."""
    out: JsonDict = {"kind": "Event", "apiVersion": "v1", "metadata": obj.get("metadata", {})}
    for core, new in _EVENT_FIELDS:
        if new in obj:
            out[core] = obj[new]
    return out


class EventStrategy(BuiltinStrategy):
    generation = False
    unconditional_update = True
    strategic_merge = True
    core_field_labels = True

    def field_labels(self) -> Mapping[str, str]:
        labels = {
            "reason": "reason",
            "reportingComponent": "reportingComponent",
            "reportingController": "reportingComponent",
            "source": "source.component",
            "type": "type",
        }
        for sub in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"):
            labels[f"involvedObject.{sub}"] = f"involvedObject.{sub}"
            labels[f"regarding.{sub}"] = f"involvedObject.{sub}"
        return labels

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        def times() -> None:
            _normalize_times(obj, (("eventTime",), ("series", "lastObservedTime")), micro=True)
            _normalize_times(obj, (("firstTimestamp",), ("lastTimestamp",)), micro=False)

        _decoding(rtype, times)
        # Non-omitempty fields of the typed core/v1 Event.
        obj.setdefault("involvedObject", {})
        obj.setdefault("source", {})
        obj.setdefault("firstTimestamp", None)
        obj.setdefault("lastTimestamp", None)
        obj.setdefault("eventTime", None)
        obj.setdefault("reportingComponent", "")
        obj.setdefault("reportingInstance", "")
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs: list[FieldError] = []
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        involved_ns = (obj.get("involvedObject") or {}).get("namespace") or ""
        new_api = rtype.group == "events.k8s.io"
        reporting_field = "reportingController" if new_api else "reportingComponent"
        if not obj.get("eventTime"):
            if involved_ns:
                if namespace != involved_ns:
                    errs.append(
                        invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
                    )
            elif namespace not in ("", "default"):
                errs.append(
                    invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
                )
        else:
            if not involved_ns and namespace not in ("default", "kube-system"):
                errs.append(
                    invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
                )
            if not obj.get("reportingComponent"):
                errs.append(required(reporting_field))
            if not obj.get("reportingInstance"):
                errs.append(required("reportingInstance"))
            elif len(str(obj["reportingInstance"])) > 128:
                errs.append(invalid("reportingInstance", "", "can have at most 128 characters"))
            if not obj.get("action"):
                errs.append(required("action"))
            if not obj.get("reason"):
                errs.append(required("reason"))
            elif len(str(obj["reason"])) > 128:
                errs.append(invalid("reason", "", "can have at most 128 characters"))
            if len(str(obj.get("message") or "")) > 1024:
                errs.append(invalid("note" if new_api else "message", "", "can have at most 1024 characters"))
        if new_api:
            if not obj.get("eventTime"):
                errs.append(required("eventTime"))
            if obj.get("type") not in ("Normal", "Warning"):
                errs.append(invalid("type", "", f"has invalid value: {obj.get('type') or ''}"))
        return errs

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return []


# (rtype, strategy, to_served, from_served); the first entry of a group-resource is its storage.
Conversion = Callable[[Mapping[str, Any]], JsonDict]
BUILTINS: tuple[tuple[ResourceType, Strategy, Conversion | None, Conversion | None], ...] = (
    (NAMESPACES, NamespaceStrategy(), None, None),
    (PODS, PodStrategy(), None, None),
    (CONFIGMAPS, ConfigMapStrategy(), None, None),
    (EVENTS, EventStrategy(), None, None),
    (EVENTS_V1, EventStrategy(), event_to_events_v1, event_from_events_v1),
    (DEPLOYMENTS, DeploymentStrategy(), None, None),
    (REPLICASETS, ReplicaSetStrategy(), None, None),
    (LEASES, LeaseStrategy(), None, None),
)
