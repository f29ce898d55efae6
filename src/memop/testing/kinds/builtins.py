"""The built-in kinds the in-memory API server serves, with kube-apiserver's write behaviour:
defaulting (``SetDefaults_*`` of the v1 APIs), the strategies' create/update preparation,
the validation controllers run into, selectable fields, and the core/v1 <-> events.k8s.io/v1
Event conversion (both versions share one storage, as in Kubernetes).

Defaulting functions mutate the object they are given; the store only hands them objects it
owns exclusively (decoded request bodies or fresh copies).
"""

from __future__ import annotations

import ipaddress
import re
import zlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from memop.runtime.cache.labels import InvalidSelectorError, Selector
from memop.testing.apiserver.errors import DecodeError
from memop.testing.apiserver.objects import (
    JsonDict,
    dns1123_subdomain_errors,
    forbidden,
    invalid,
    not_supported,
    required,
    validate_name,
)
from memop.testing.apiserver.quantity import QuantityError
from memop.testing.apiserver.quantity import canonical as canonical_quantity
from memop.testing.apiserver.quantity import parse as parse_quantity
from memop.testing.apiserver.resources import NAMESPACES, ResourceType
from memop.testing.apiserver.schema import FieldError, go_json, go_quote
from memop.testing.apiserver.strategy import Kind, Strategy
from memop.testing.apiserver.times import TimeFormatError

if TYPE_CHECKING:
    from memop.testing.apiserver.store import Store


class BuiltinStrategy(Strategy):
    """A kind compiled into kube-apiserver (typed: list items carry no kind/apiVersion)."""

    builtin = True


def _decoding(rtype: ResourceType, default: Callable[[], None]) -> None:
    """Run typed defaulting; a malformed quantity, time or number fails decoding with 400, as in
    Kubernetes."""
    try:
        default()
    except (QuantityError, TimeFormatError, FieldTypeError) as error:
        converter = error.converter_detail if isinstance(error, FieldTypeError) else None
        raise DecodeError(rtype.kind, rtype.version, str(error), converter) from None


class FieldTypeError(ValueError):
    """A typed field holds JSON of another type. The message is encoding/json's error; a
    strategic merge patch meets the unstructured converter, which words it differently."""

    def __init__(self, message: str, converter_detail: str) -> None:
        super().__init__(message)
        self.converter_detail = converter_detail


_INT_RANGES = {"int32": 2**31, "int64": 2**63}


_DEPLOYMENT_INTEGERS = (
    (
        "DeploymentSpec",
        "spec",
        ("replicas", "minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds"),
        "int32",
    ),
    ("DeploymentStatus", "status", ("observedGeneration",), "int64"),
    (
        "DeploymentStatus",
        "status",
        ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"),
        "int32",
    ),
    ("DeploymentStatus", "status", ("terminatingReplicas", "collisionCount"), "int32"),
)
_REPLICASET_INTEGERS = (
    ("ReplicaSetSpec", "spec", ("replicas", "minReadySeconds"), "int32"),
    (
        "ReplicaSetStatus",
        "status",
        ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas"),
        "int32",
    ),
    ("ReplicaSetStatus", "status", ("observedGeneration",), "int64"),
)


def check_integers(obj: Mapping[str, Any], fields: tuple[tuple[str, str, tuple[str, ...], str], ...]) -> None:
    """Raise FieldTypeError for the first of ``fields`` (Go struct, JSON object key, its integer
    fields, Go type) that holds anything but an integer of the type's range, or null."""
    for struct, key, names, go_type in fields:
        section = obj.get(key)
        if not isinstance(section, dict):
            continue
        for name in names:
            value = section.get(name)
            if value is None or (
                isinstance(value, int)
                and not isinstance(value, bool)
                and -_INT_RANGES[go_type] <= value < _INT_RANGES[go_type]
            ):
                continue
            if isinstance(value, bool):
                shown = "bool"
            elif isinstance(value, int | float):
                shown = f"number {value}"
            else:
                shown = (
                    "string" if isinstance(value, str) else "array" if isinstance(value, list) else "object"
                )
            fraction = isinstance(value, float) and not value.is_integer()
            raise FieldTypeError(
                f"json: cannot unmarshal {shown} into Go struct field {struct}.{key}.{name} of type "
                f"{go_type}",
                f"cannot convert float64 to {go_type}" if fraction else f"unrecognized type: {go_type}",
            )


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


def _default_host_network_ports(spec: dict[str, Any]) -> None:
    """``SetDefaults_Pod``'s ``defaultHostNetworkPorts`` (pods only, not templates): with host
    networking every container port without a hostPort gets its containerPort as one, which
    Pod Security's hostPorts check then reports (seen on kube-apiserver v1.36.2)."""
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            for port in (container.get("ports") or ()) if isinstance(container, dict) else ():
                if isinstance(port, dict) and not port.get("hostPort") and "containerPort" in port:
                    port["hostPort"] = port["containerPort"]


def default_pod_template(template: Any) -> None:
    if not isinstance(template, dict):
        return
    # An empty ObjectMeta, as v1.36 serialises it (its creationTimestamp is omitzero; 1.32 wrote
    # null).
    template.setdefault("metadata", {})
    default_pod_spec(template.setdefault("spec", {}))


def pod_condition(type_: str, status: str, stamp: str, reason: str = "", message: str = "") -> JsonDict:
    """A PodCondition as kube-apiserver, kube-scheduler and the kubelet write it: no probe time,
    reason and message only when given."""
    cond: JsonDict = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": stamp}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


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
    for key in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(key) or ()):
            if isinstance(container, dict):
                errs.extend(validate_resource_requirements(container.get("resources"), f"{path}.{key}[{i}]"))
    return errs


def _overcommit_allowed(name: str) -> bool:
    """``IsOvercommitAllowed``: a native resource (no domain, or a kubernetes.io one) that is not
    hugepages may request less than its limit; an extended resource must request its limit."""
    native = "/" not in name or name.split("/", 1)[0].endswith("kubernetes.io")
    return native and not name.startswith("hugepages-")


def validate_resource_requirements(resources: Any, container_path: str) -> list[FieldError]:
    """The request-against-limit checks of ``validateResourceRequirements``: a request may not
    exceed its limit (nor differ from it, for an extended resource). Quantities are canonical
    here (typed decoding made them so), as in the server's messages."""
    if not isinstance(resources, dict):
        return []
    requests, limits = resources.get("requests"), resources.get("limits")
    if not isinstance(requests, dict) or not isinstance(limits, dict):
        return []
    path = f"{container_path}.resources.requests"
    errs: list[FieldError] = []
    for name, quantity in requests.items():
        if name not in limits:
            if not _overcommit_allowed(name):
                errs.append(
                    required(
                        f"{container_path}.resources.limits",
                        "Limit must be set for non overcommitable resources",
                    )
                )
            continue
        try:
            requested, limit = parse_quantity(str(quantity))[0], parse_quantity(str(limits[name]))[0]
        except QuantityError:
            continue
        if requested != limit and not _overcommit_allowed(name):
            errs.append(invalid(path, str(quantity), f"must be equal to {name} limit of {limits[name]}"))
        elif requested > limit:
            errs.append(
                invalid(path, str(quantity), f"must be less than or equal to {name} limit of {limits[name]}")
            )
    return errs


# Go's unicode.IsSpace, which strings.TrimSpace strips (Python's str.strip also strips \x1c-\x1f).
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


def validate_pod_only_containers(spec: Any) -> list[FieldError]:
    """The container checks of a Pod that pod templates skip (validateContainerOnlyForPod).

    Pod templates (Deployments, ReplicaSets, ...) keep accepting an image with leading or
    trailing whitespace for backward compatibility (``" "`` is a placeholder some tools use);
    a Pod refuses it, in ``containers`` and ``initContainers``.
    """
    errs: list[FieldError] = []
    if not isinstance(spec, dict):
        return errs
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if not isinstance(containers, list):
            continue
        for i, container in enumerate(containers):
            image = container.get("image") if isinstance(container, dict) else None
            if isinstance(image, str) and image.strip(_GO_SPACE) != image:
                errs.append(
                    invalid(f"spec.{key}[{i}].image", image, "must not have leading or trailing whitespace")
                )
    return errs


def _label_selector_json(selector: Any) -> Any:
    """A metav1.LabelSelector as it marshals: its fields in declaration order, empty ones left
    out (``omitempty``), the matchLabels map sorted."""
    if not isinstance(selector, Mapping):
        return selector
    out: dict[str, Any] = {}
    labels = selector.get("matchLabels")
    if labels:
        out["matchLabels"] = dict(sorted(labels.items())) if isinstance(labels, Mapping) else labels
    exprs = selector.get("matchExpressions")
    if exprs:
        out["matchExpressions"] = [
            {
                "key": expr.get("key", ""),
                "operator": expr.get("operator", ""),
                **({"values": expr["values"]} if expr.get("values") else {}),
            }
            if isinstance(expr, Mapping)
            else expr
            for expr in exprs
        ]
    return out


def _label_selector_repr(selector: Any) -> str:
    """How ``field.Invalid`` prints a ``*metav1.LabelSelector`` (its JSON)."""
    return go_json(_label_selector_json(selector), sort_keys=False)


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
    times = (("status", "conditions", "*", "lastTransitionTime"),)

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


_CONTAINER_STATES = tuple(
    (*statuses, "*", state, phase, stamp)
    for statuses in (("status", "containerStatuses"), ("status", "initContainerStatuses"))
    for state in ("state", "lastState")
    for phase, stamp in (("running", "startedAt"), ("terminated", "startedAt"), ("terminated", "finishedAt"))
)


class PodStrategy(BuiltinStrategy):
    # Since Kubernetes 1.33 a pod's generation starts at 1 and counts spec changes (and the
    # deletion), as kube-apiserver v1.36.2 answers; a binding, labels or status leave it.
    times = (
        ("status", "startTime"),
        ("status", "conditions", "*", "lastProbeTime"),
        ("status", "conditions", "*", "lastTransitionTime"),
        *_CONTAINER_STATES,
    )
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
        if isinstance(spec, dict) and spec.get("hostNetwork") is True:
            _default_host_network_ports(spec)
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

    def record_times(self, new: JsonDict, old: JsonDict | None, now: str) -> None:
        # applySchedulingGatedCondition (PrepareForCreate): a new pod with scheduling gates says
        # why it waits; kube-scheduler writes nothing for it until the gates are gone.
        spec, status = new.get("spec"), new.get("status")
        if old is not None or not isinstance(spec, dict) or not spec.get("schedulingGates"):
            return
        if not isinstance(status, dict):
            return
        conditions = status.setdefault("conditions", [])
        if not any(isinstance(c, dict) and c.get("type") == "PodScheduled" for c in conditions):
            conditions.append(
                pod_condition(
                    "PodScheduled",
                    "False",
                    now,
                    "SchedulingGated",
                    "Scheduling is blocked due to non-empty scheduling gates",
                )
            )

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        spec = obj.get("spec")
        return validate_containers(spec, "spec") + validate_pod_only_containers(spec)

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        # ValidatePodUpdate runs the create checks, then ValidateContainerUpdates checks the
        # images again: a v1.36 server lists an image's whitespace error twice among the causes
        # (its message, an aggregate, shows it once).
        return self.validate_create(new, rtype) + validate_pod_only_containers(new.get("spec"))


class ConfigMapStrategy(BuiltinStrategy):
    generation = False
    unconditional_update = True
    strategic_merge = True


class LeaseStrategy(BuiltinStrategy):
    create_on_update = True  # a PUT to a missing name creates it (kube-apiserver v1.36.2: 201)
    generation = False
    unconditional_update = False
    strategic_merge = True

    micro_times = (("spec", "acquireTime"), ("spec", "renewTime"))


class DeploymentStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True
    times = (
        ("status", "conditions", "*", "lastUpdateTime"),
        ("status", "conditions", "*", "lastTransitionTime"),
    )

    def scale_paths(self, rtype: ResourceType) -> tuple[str, str, str | None] | None:
        return ("spec.replicas", "status.replicas", None)

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(rtype, lambda: check_integers(obj, _DEPLOYMENT_INTEGERS))
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
    times = (("status", "conditions", "*", "lastTransitionTime"),)

    def scale_paths(self, rtype: ResourceType) -> tuple[str, str, str | None] | None:
        return ("spec.replicas", "status.replicas", None)

    def field_labels(self) -> Mapping[str, str]:
        return {"status.replicas": "status.replicas"}

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(rtype, lambda: check_integers(obj, _REPLICASET_INTEGERS))
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
    create_on_update = True  # a PUT to a missing name creates it (kube-apiserver v1.36.2: 201)
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

    times = (("firstTimestamp",), ("lastTimestamp",))
    micro_times = (("eventTime",), ("series", "lastObservedTime"))

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
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
_WORKLOAD_KINDS = (
    Kind(NAMESPACES, NamespaceStrategy()),
    Kind(PODS, PodStrategy()),
    Kind(CONFIGMAPS, ConfigMapStrategy()),
    Kind(EVENTS, EventStrategy()),
    Kind(EVENTS_V1, EventStrategy(), event_to_events_v1, event_from_events_v1, stored_as=EVENTS),
    Kind(DEPLOYMENTS, DeploymentStrategy()),
    Kind(REPLICASETS, ReplicaSetStrategy()),
    Kind(LEASES, LeaseStrategy()),
)


# --- service accounts, services, RBAC and pod disruption budgets ---------------------------------
# What install manifests carry besides workloads. Listed in KINDS at the end of this module.

RBAC_GROUP = "rbac.authorization.k8s.io"
SERVICE_ACCOUNTS = ResourceType(
    "", "v1", "serviceaccounts", "ServiceAccount", True, "serviceaccount", ("sa",)
)
SERVICES = ResourceType(
    "", "v1", "services", "Service", True, "service", ("svc",), has_status=True, categories=("all",)
)
ROLES = ResourceType(RBAC_GROUP, "v1", "roles", "Role", True, "role")
ROLE_BINDINGS = ResourceType(RBAC_GROUP, "v1", "rolebindings", "RoleBinding", True, "rolebinding")
CLUSTER_ROLES = ResourceType(RBAC_GROUP, "v1", "clusterroles", "ClusterRole", False, "clusterrole")
CLUSTER_ROLE_BINDINGS = ResourceType(
    RBAC_GROUP, "v1", "clusterrolebindings", "ClusterRoleBinding", False, "clusterrolebinding"
)
POD_DISRUPTION_BUDGETS = ResourceType(
    "policy",
    "v1",
    "poddisruptionbudgets",
    "PodDisruptionBudget",
    True,
    "poddisruptionbudget",
    ("pdb",),
    has_status=True,
)

# kube-apiserver's defaults: --service-cluster-ip-range=10.96.0.0/12 (kubeadm's) and
# --service-node-port-range=30000-32767.
SERVICE_CIDR = ipaddress.IPv4Network("10.96.0.0/12")
NODE_PORTS = range(30000, 32768)
_SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
_PROTOCOLS = ["SCTP", "TCP", "UDP"]
_PORT_RANGE_MSG = "must be between 1 and 65535, inclusive"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def dns1035_label_errors(value: str) -> list[str]:
    """``IsDNS1035Label`` (Service names): empty when ``value`` is one."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not re.fullmatch(_DNS1035_LABEL_FMT, value):
        errs.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
            f"regex used for validation is '{_DNS1035_LABEL_FMT}')"
        )
    return errs


def path_segment_name_errors(name: str) -> list[str]:
    """``IsValidPathSegmentName`` (RBAC names such as ``system:auth-delegator``)."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


def port_name_errors(name: str) -> list[str]:
    """``IsValidPortName`` (a named targetPort)."""
    errs = []
    if len(name) > 15:
        errs.append("must be no more than 15 characters")
    if not re.fullmatch("[-a-z0-9]+", name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


# --- services ---


def _needs_node_ports(spec: Mapping[str, Any]) -> bool:
    kind = spec.get("type")
    return kind == "NodePort" or (
        kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False
    )


def default_service(obj: JsonDict) -> None:
    """``SetDefaults_Service``."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client_ip = config.get("clientIP") if isinstance(config, dict) else None
        if not isinstance(client_ip, dict) or client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    if not spec.get("type"):
        spec["type"] = "ClusterIP"
    for port in spec.get("ports") or ():
        if not isinstance(port, dict):
            continue
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port", 0)
    kind = spec["type"]
    if kind in ("NodePort", "LoadBalancer") or (kind == "ClusterIP" and spec.get("externalIPs")):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if kind in ("NodePort", "LoadBalancer", "ClusterIP"):
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)


def _allocated(store: Store, obj: Mapping[str, Any]) -> tuple[set[str], set[int]]:
    """Cluster IPs and node ports held by every Service but ``obj``."""
    meta = obj.get("metadata") or {}
    me = (meta.get("namespace") or "", meta.get("name") or "")
    ips: set[str] = set()
    node_ports: set[int] = set()
    storage = store.storage_for("", "services")
    for namespace, names in (storage.objects if storage is not None else {}).items():
        for name, entry in names.items():
            if (namespace, name) == me:
                continue
            spec = entry.obj.get("spec") or {}
            ips.update(ip for ip in spec.get("clusterIPs") or () if isinstance(ip, str))
            node_ports.update(p["nodePort"] for p in spec.get("ports") or () if _is_int(p.get("nodePort")))
    return ips, node_ports


def _start(obj: Mapping[str, Any], size: int) -> int:
    """Where the search for a free address starts: spread out, but reproducible for a name."""
    meta = obj.get("metadata") or {}
    return zlib.crc32(f"{meta.get('namespace')}/{meta.get('name')}".encode()) % size


def _free_cluster_ip(obj: Mapping[str, Any], used: set[str]) -> str | None:
    # Like the allocator with ServiceIPStaticSubrange: dynamic addresses come from the upper
    # part of the range first (the first 256 are for users who pick theirs, 10.96.0.1 for the
    # kubernetes Service).
    size = SERVICE_CIDR.num_addresses - 2
    static = min(max(16, size // 16), 256)
    first = SERVICE_CIDR.network_address + 1
    upper = size - static
    start = _start(obj, upper)
    for i in range(size):
        offset = static + (start + i) % upper if i < upper else i - upper
        ip = str(first + offset)
        if ip not in used:
            return ip
    return None


def _requested_ip_errors(ip: str, ips: list[Any], used: set[str]) -> list[FieldError]:
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return [
            invalid("spec.clusterIPs[0]", ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")
        ]
    reason = ""
    if address not in SERVICE_CIDR or address in (
        SERVICE_CIDR.network_address,
        SERVICE_CIDR.broadcast_address,
    ):
        reason = f"the provided IP ({ip}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
    elif ip in used:
        reason = "provided IP is already allocated"
    if reason:
        return [invalid("spec.clusterIPs", ips, f"failed to allocate IP {ip}: {reason}")]
    return []


def _same_port(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    return new.get("name", "") == old.get("name", "") and new.get("port") == old.get("port")


def _allocate_node_ports(
    obj: JsonDict, spec: JsonDict, old_spec: Mapping[str, Any] | None, used: set[int]
) -> list[FieldError]:
    errs: list[FieldError] = []
    ports = [p for p in spec.get("ports") or () if isinstance(p, dict)]
    old_ports = [p for p in (old_spec or {}).get("ports") or () if isinstance(p, dict)]
    held = {p["nodePort"] for p in old_ports if _is_int(p.get("nodePort"))}
    start = _start(obj, len(NODE_PORTS))
    for i, port in enumerate(spec.get("ports") or ()):
        if not isinstance(port, dict):
            continue
        if port.get("nodePort") in (None, 0):
            kept = next(
                (p["nodePort"] for p in old_ports if _same_port(port, p) and _is_int(p.get("nodePort"))), None
            )
            if kept is not None:
                port["nodePort"] = kept
                continue
            taken = used | {p.get("nodePort") for p in ports}
            free = (NODE_PORTS[(start + k) % len(NODE_PORTS)] for k in range(len(NODE_PORTS)))
            port["nodePort"] = next((n for n in free if n not in taken), 0)
        elif _is_int(port["nodePort"]) and port["nodePort"] not in held:
            number = port["nodePort"]
            if number not in NODE_PORTS:
                reason = (
                    "provided port is not in the valid range. The range of valid ports is "
                    f"{NODE_PORTS.start}-{NODE_PORTS.stop - 1}"
                )
                errs.append(invalid(f"spec.ports[{i}].nodePort", number, reason))
            elif number in used:
                errs.append(
                    invalid(f"spec.ports[{i}].nodePort", number, "provided port is already allocated")
                )
    return errs


def _service_port_repr(port: Mapping[str, Any]) -> str:
    """The (protocol, port) key ``ValidateService`` reports duplicates with: an internal
    ``core.ServicePort``, whose JSON has Go's field names (no json tags)."""
    key = {
        "Name": "",
        "Protocol": port.get("protocol", ""),
        "AppProtocol": None,
        "Port": port.get("port", 0),
        "TargetPort": 0,
        "NodePort": 0,
    }
    return go_json(key, sort_keys=False)


def validate_service(obj: Mapping[str, Any]) -> list[FieldError]:
    """The parts of ``ValidateService`` manifests run into: type, affinity, ports."""
    errs: list[FieldError] = []
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    kind = spec.get("type")
    headless = spec.get("clusterIP") == "None"
    ports = spec.get("ports") or []
    if not ports and not headless and kind != "ExternalName":
        errs.append(required("spec.ports"))
    if kind not in _SERVICE_TYPES:
        errs.append(not_supported("spec.type", kind, _SERVICE_TYPES))
    if kind == "ExternalName" and not spec.get("externalName"):
        errs.append(required("spec.externalName"))
    if spec.get("sessionAffinity") not in ("ClientIP", "None"):
        errs.append(not_supported("spec.sessionAffinity", spec.get("sessionAffinity"), ["ClientIP", "None"]))
    names: set[str] = set()
    for i, port in enumerate(ports):
        path = f"spec.ports[{i}]"
        if not isinstance(port, dict):
            errs.append(invalid(path, port, "must be an object"))
            continue
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            errs.append(required(f"{path}.name"))
        elif name:
            errs.extend(validate_name(f"{path}.name", str(name), label=True))
            if name in names:
                errs.append(
                    FieldError(
                        field=f"{path}.name",
                        type="FieldValueDuplicate",
                        message=f"{path}.name: Duplicate value: {go_quote(str(name))}",
                    )
                )
            names.add(str(name))
        number = port.get("port", 0)
        if not (_is_int(number) and 1 <= int(number) <= 65535):
            errs.append(invalid(f"{path}.port", number, _PORT_RANGE_MSG))
        protocol = port.get("protocol")
        if not protocol:
            errs.append(required(f"{path}.protocol"))
        elif protocol not in _PROTOCOLS:
            errs.append(not_supported(f"{path}.protocol", protocol, _PROTOCOLS))
        target = port.get("targetPort")
        if isinstance(target, str):
            errs.extend(invalid(f"{path}.targetPort", target, msg) for msg in port_name_errors(target))
        elif isinstance(target, bool) or not (isinstance(target, int) and 1 <= target <= 65535):
            errs.append(invalid(f"{path}.targetPort", target, _PORT_RANGE_MSG))
        if kind == "ClusterIP" and port.get("nodePort"):
            errs.append(forbidden(f"{path}.nodePort", "may not be used when `type` is 'ClusterIP'"))
    seen: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        if not isinstance(port, dict):
            continue
        key = (port.get("protocol"), port.get("port"))
        if key in seen:
            errs.append(
                FieldError(
                    field=f"spec.ports[{i}]",
                    type="FieldValueDuplicate",
                    message=f"spec.ports[{i}]: Duplicate value: {_service_port_repr(port)}",
                )
            )
        seen.add(key)
    return errs


class ServiceAccountStrategy(BuiltinStrategy):
    generation = False
    unconditional_update = True
    return_deleted_object = True
    strategic_merge = True


class ServiceStrategy(BuiltinStrategy):
    create_on_update = True  # a PUT to a missing name creates it (kube-apiserver v1.36.2: 201)
    generation = False
    unconditional_update = True
    return_deleted_object = True
    strategic_merge = True
    times = (("status", "conditions", "*", "lastTransitionTime"),)

    def name_errors(self, name: str) -> list[str]:
        return dns1035_label_errors(name)

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        default_service(obj)
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {"loadBalancer": {}}

    def allocate(self, store: Store, obj: JsonDict, old: JsonDict | None) -> list[FieldError]:
        """The cluster IP (and node ports) of the service REST storage, on create and when an
        update needs new ones; an update that leaves allocated values out keeps them."""
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("type") == "ExternalName":
            return []
        old_spec = (old.get("spec") or {}) if old is not None else None
        was_external = old_spec is not None and old_spec.get("type") == "ExternalName"
        if old_spec is not None and not was_external:
            # patchAllocatedValues, and a client that only changed clusterIP changes clusterIPs too.
            if not spec.get("clusterIP") and old_spec.get("clusterIP"):
                spec["clusterIP"] = old_spec["clusterIP"]
            if not spec.get("clusterIPs") and old_spec.get("clusterIPs"):
                spec["clusterIPs"] = list(old_spec["clusterIPs"])
            ips = spec.get("clusterIPs")
            if (
                spec.get("clusterIP")
                and ips == old_spec.get("clusterIPs")
                and ips
                and spec["clusterIP"] != ips[0]
            ):
                spec["clusterIPs"] = [spec["clusterIP"], *ips[1:]]
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("ipFamilies", ["IPv4"])
        ips = spec.get("clusterIPs")
        if not spec.get("clusterIP") and isinstance(ips, list) and ips:
            spec["clusterIP"] = ips[0]
        used_ips, used_ports = _allocated(store, obj)
        errs: list[FieldError] = []
        ip = spec.get("clusterIP")
        if not ip:
            free = _free_cluster_ip(obj, used_ips)
            if free is None:
                return [invalid("spec.clusterIPs", [], "failed to allocate IP: range is full")]
            spec["clusterIP"] = free
            spec["clusterIPs"] = [free]
        else:
            if not spec.get("clusterIPs"):
                spec["clusterIPs"] = [ip]
            if ip != "None" and isinstance(ip, str) and (old_spec is None or was_external):
                errs.extend(_requested_ip_errors(ip, spec["clusterIPs"], used_ips))
        if _needs_node_ports(spec):
            errs.extend(_allocate_node_ports(obj, spec, old_spec, used_ports))
        return errs

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return validate_service(obj)

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs = validate_service(new)
        new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        if "ExternalName" in (new_spec.get("type"), old_spec.get("type")):
            return errs
        if new_spec.get("clusterIP") == "None" and old_spec.get("clusterIP") == "None":
            return errs
        new_ips, old_ips = new_spec.get("clusterIPs") or [], old_spec.get("clusterIPs") or []
        if new_ips and old_ips and new_ips[0] != old_ips[0]:
            errs.append(invalid("spec.clusterIPs[0]", new_ips, "may not change once set"))
        return errs


# --- RBAC ---


def _validate_rules(obj: Mapping[str, Any], namespaced: bool) -> list[FieldError]:
    """``validatePolicyRule`` for each rule."""
    errs: list[FieldError] = []
    for i, rule in enumerate(obj.get("rules") or ()):
        path = f"rules[{i}]"
        if not isinstance(rule, dict):
            errs.append(invalid(path, rule, "must be an object"))
            continue
        if not rule.get("verbs"):
            errs.append(required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs")
        if urls:
            if namespaced:
                errs.append(
                    invalid(
                        f"{path}.nonResourceURLs", urls, "namespaced rules cannot apply to non-resource URLs"
                    )
                )
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                errs.append(
                    invalid(
                        f"{path}.nonResourceURLs",
                        urls,
                        "rules cannot apply to both regular resources and non-resource URLs",
                    )
                )
            continue
        if not rule.get("apiGroups"):
            errs.append(required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
        if not rule.get("resources"):
            errs.append(required(f"{path}.resources", "resource rules must supply at least one resource"))
        if rule.get("resourceNames") and len(rule.get("resources") or ()) > 1:
            errs.append(
                required(f"{path}.resourceNames", "resource names cannot apply to multiple resources")
            )
    return errs


def _role_ref_repr(ref: Mapping[str, Any]) -> str:
    """An internal ``rbac.RoleRef`` as ``field.Invalid`` prints it (JSON with Go's field names)."""
    key = {"APIGroup": ref.get("apiGroup", ""), "Kind": ref.get("kind", ""), "Name": ref.get("name", "")}
    return go_json(key, sort_keys=False)


def _validate_binding(obj: Mapping[str, Any], namespaced: bool) -> list[FieldError]:
    """``ValidateRoleBinding``/``ValidateClusterRoleBinding`` past ObjectMeta."""
    errs: list[FieldError] = []
    ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
    assert isinstance(ref, dict)
    if ref.get("apiGroup") != RBAC_GROUP:
        errs.append(not_supported("roleRef.apiGroup", ref.get("apiGroup", ""), [RBAC_GROUP]))
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if ref.get("kind") not in kinds:
        errs.append(not_supported("roleRef.kind", ref.get("kind", ""), kinds))
    name = ref.get("name")
    if not name:
        errs.append(required("roleRef.name"))
    else:
        errs.extend(invalid("roleRef.name", name, msg) for msg in path_segment_name_errors(str(name)))
    for i, subject in enumerate(obj.get("subjects") or ()):
        path = f"subjects[{i}]"
        if not isinstance(subject, dict):
            errs.append(invalid(path, subject, "must be an object"))
            continue
        sname = str(subject.get("name") or "")
        group = subject.get("apiGroup") or ""
        if not sname:
            errs.append(required(f"{path}.name"))
        kind = subject.get("kind")
        if kind == "ServiceAccount":
            errs.extend(
                invalid(f"{path}.name", sname, msg) for msg in dns1123_subdomain_errors(sname) if sname
            )
            if group:
                errs.append(not_supported(f"{path}.apiGroup", group, [""]))
            if not namespaced and not subject.get("namespace"):
                errs.append(required(f"{path}.namespace"))
        elif kind in ("User", "Group"):
            if not sname:
                errs.append(invalid(f"{path}.name", sname, f"{kind.lower()} name cannot be empty"))
            if group != RBAC_GROUP:
                errs.append(not_supported(f"{path}.apiGroup", group, [RBAC_GROUP]))
        else:
            errs.append(not_supported(f"{path}.kind", kind or "", ["ServiceAccount", "User", "Group"]))
    return errs


class _RbacStrategy(BuiltinStrategy):
    create_on_update = True  # a PUT to a missing name creates it (kube-apiserver v1.36.2: 201)
    generation = False
    unconditional_update = True
    strategic_merge = True

    def name_errors(self, name: str) -> list[str]:
        return path_segment_name_errors(name)


class RoleStrategy(_RbacStrategy):
    """Roles and ClusterRoles (``rtype.namespaced`` tells them apart)."""

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        obj.setdefault("rules", None)  # not omitempty in the typed object
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _validate_rules(obj, rtype.namespaced)


class RoleBindingStrategy(_RbacStrategy):
    """RoleBindings and ClusterRoleBindings: roleRef may not change."""

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        ref = obj.setdefault("roleRef", {})
        if isinstance(ref, dict):
            if not ref.get("apiGroup"):
                ref["apiGroup"] = RBAC_GROUP
            ref.setdefault("kind", "")
            ref.setdefault("name", "")
        for subject in obj.get("subjects") or ():
            if (
                isinstance(subject, dict)
                and not subject.get("apiGroup")
                and subject.get("kind") in ("User", "Group")
            ):
                subject["apiGroup"] = RBAC_GROUP
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _validate_binding(obj, rtype.namespaced)

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs = _validate_binding(new, rtype.namespaced)
        ref = new.get("roleRef") if isinstance(new.get("roleRef"), dict) else {}
        assert isinstance(ref, dict)
        if ref != old.get("roleRef"):
            errs.append(invalid("roleRef", ref, "cannot change roleRef", raw_value=_role_ref_repr(ref)))
        return errs


# --- pod disruption budgets ---


def _int_or_percent_errors(path: str, value: Any) -> list[FieldError]:
    """``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``."""
    if isinstance(value, str):
        match = re.fullmatch("([0-9]+)%", value)
        if match is None:
            return [
                invalid(
                    path,
                    value,
                    "a valid percent string must be a numeric string followed by an ending '%' "
                    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                )
            ]
        if int(match.group(1)) > 100:
            return [invalid(path, value, "must not be greater than 100%")]
        return []
    if _is_int(value) and value < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    return []


class PodDisruptionBudgetStrategy(BuiltinStrategy):
    # A PUT needs metadata.resourceVersion (kube-apiserver v1.36.2 answers 422 without one).
    unconditional_update = False
    strategic_merge = True
    times = (("status", "conditions", "*", "lastTransitionTime"),)

    def initial_status(self, obj: JsonDict) -> Any:
        return {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs: list[FieldError] = []
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
            # The internal PodDisruptionBudgetSpec: Go's field names, no json tags.
            internal = {
                "MinAvailable": spec.get("minAvailable"),
                "Selector": _label_selector_json(spec.get("selector")),
                "MaxUnavailable": spec.get("maxUnavailable"),
                "UnhealthyPodEvictionPolicy": spec.get("unhealthyPodEvictionPolicy"),
            }
            errs.append(
                invalid(
                    "spec",
                    spec,
                    "minAvailable and maxUnavailable cannot be both set",
                    raw_value=go_json(internal, sort_keys=False),
                )
            )
        for key in ("minAvailable", "maxUnavailable"):
            if spec.get(key) is not None:
                errs.extend(_int_or_percent_errors(f"spec.{key}", spec[key]))
        selector = spec.get("selector")
        if isinstance(selector, dict):
            try:
                Selector.from_label_selector(selector)
            except InvalidSelectorError as error:
                errs.append(
                    invalid("spec.selector", selector, str(error), raw_value=_label_selector_repr(selector))
                )
        return errs


# The kinds this module serves, for memop.testing.kinds.
KINDS: tuple[Kind, ...] = (
    *_WORKLOAD_KINDS,
    Kind(SERVICE_ACCOUNTS, ServiceAccountStrategy()),
    Kind(SERVICES, ServiceStrategy()),
    Kind(ROLES, RoleStrategy()),
    Kind(ROLE_BINDINGS, RoleBindingStrategy()),
    Kind(CLUSTER_ROLES, RoleStrategy()),
    Kind(CLUSTER_ROLE_BINDINGS, RoleBindingStrategy()),
    Kind(POD_DISRUPTION_BUDGETS, PodDisruptionBudgetStrategy()),
)
