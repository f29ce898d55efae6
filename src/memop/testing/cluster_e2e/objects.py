"""What the cluster e2e steps read in objects, as pure functions: the manager Deployment of a
rendered overlay and its image, whether an object has converged, and one-line descriptions of
a pod, of conditions and of an object a finalizer keeps (what a failed wait reports)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memop.testing.cluster_e2e.errors import ClusterE2EError

# The label memop's manifests put on the manager Deployment, and the container that runs memop.
CONTROLLER_LABEL = ("control-plane", "controller-manager")
MANAGER_CONTAINER = "manager"
# memop's flags that take no value (the others take the next word when it is not a flag).
SWITCHES = frozenset({"--metrics-secure", "--leader-elect", "--sharding", "--enable-webhooks"})


def controller_deployment(objects: Iterable[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The manager Deployment among ``objects`` (labelled ``control-plane: controller-manager``,
    with a ``manager`` container); :class:`ClusterE2EError` unless there is exactly one."""
    key, value = CONTROLLER_LABEL
    found = [
        obj
        for obj in objects
        if obj.get("kind") == "Deployment" and (obj["metadata"].get("labels") or {}).get(key) == value
    ]
    if len(found) != 1:
        raise ClusterE2EError(
            f"expected one Deployment labelled {key}={value} in the overlay, found {len(found)}"
        )
    return found[0]


def with_image(objects: Sequence[Mapping[str, Any]], image: str) -> list[dict[str, Any]]:
    """``objects`` with the manager container of the controller Deployment running ``image``,
    ``imagePullPolicy: IfNotPresent`` (as kustomize's ``images:`` would set the reference; the
    pull policy so that an image loaded onto the nodes is used as it is, whatever its tag)."""
    copies: list[dict[str, Any]] = json.loads(json.dumps(list(objects)))
    deployment = controller_deployment(copies)
    containers = deployment["spec"]["template"]["spec"]["containers"]
    managers = [c for c in containers if c.get("name") == MANAGER_CONTAINER]
    if not managers:
        raise ClusterE2EError(f"the controller Deployment has no container named {MANAGER_CONTAINER!r}")
    for container in managers:
        container["image"] = image
        container["imagePullPolicy"] = "IfNotPresent"
    return copies


def manager_flags(deployment: Mapping[str, Any]) -> dict[str, str]:
    """The settings of the Deployment's manager container as memop reads them: each flag's
    environment variable (a literal value, or the pod's namespace from the downward API),
    overridden by the command line (``--flag=value``, ``--flag value``, ``--flag``, ``--no-flag``)."""
    containers = deployment["spec"]["template"]["spec"]["containers"]
    manager = next((c for c in containers if c.get("name") == MANAGER_CONTAINER), containers[0])
    values: dict[str, str] = {}
    for env in manager.get("env") or []:
        field_path = ((env.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        value = env.get("value") if field_path is None else None
        if field_path == "metadata.namespace":
            value = deployment["metadata"].get("namespace")
        if value is not None:
            values["--" + str(env["name"]).lower().replace("_", "-")] = str(value)
    words = [str(word) for word in [*(manager.get("command") or []), *(manager.get("args") or [])]]
    for index, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, equals, value = word.partition("=")
        if equals:
            values[name] = value
        elif name.startswith("--no-"):
            values["--" + name[5:]] = "false"
        elif name in SWITCHES:
            values[name] = "true"
        elif index + 1 < len(words) and not words[index + 1].startswith("--"):
            values[name] = words[index + 1]
        else:
            values[name] = "true"  # a switch: --metrics-secure, --leader-elect
    return values


def watched_namespaces(deployment: Mapping[str, Any]) -> list[str]:
    """The namespaces the manager watches (``--watch-namespace``), [] for every namespace."""
    value = manager_flags(deployment).get("--watch-namespace", "")
    return [name.strip() for name in value.split(",") if name.strip()]


def group_version(api_version: str) -> str:
    """The discovery path of ``api_version``: ``/api/v1`` for the core group, else ``/apis/GV``."""
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def has_condition(obj: Mapping[str, Any], condition_type: str) -> bool:
    """Whether ``obj``'s status has ``condition_type`` True for its current generation (the
    condition's and the status's ``observedGeneration``, where set, equal to the object's)."""
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation")
    if "observedGeneration" in status and status["observedGeneration"] != generation:
        return False
    for condition in status.get("conditions") or []:
        if condition.get("type") == condition_type:
            observed = condition.get("observedGeneration", generation)
            return bool(condition.get("status") == "True" and observed == generation)
    return False


def pod_is_ready(pod: Mapping[str, Any]) -> bool:
    """Whether the pod is Running with its Ready condition True, and not being deleted."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def describe_pod(pod: Mapping[str, Any]) -> str:
    """One line on a pod: its phase, its conditions that are not True, and each container's state
    and last termination with their reason, message and exit code (ImagePullBackOff,
    CrashLoopBackOff after an exit 1, and their words)."""
    status = pod.get("status") or {}
    parts = [f"pod {pod['metadata']['name']}: {status.get('phase', 'no phase')}"]
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True" and condition.get("message"):
            parts.append(f"{condition['type']}: {condition['message']}")
    for container in [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]:
        for field, label in (("state", ""), ("lastState", "last ")):
            for state, detail in (container.get(field) or {}).items():
                words = " ".join(
                    f"{k} {detail[k]}" if k == "exitCode" else str(detail[k])
                    for k in ("reason", "message", "exitCode")
                    if k in detail
                )
                parts.append(f"{container.get('name')} {label}{state}{': ' + words if words else ''}")
    return "; ".join(parts)


def describe_conditions(obj: Mapping[str, Any] | None) -> str:
    """The object's conditions, one ``Type=Status (reason: message)`` each."""
    if obj is None:
        return "it does not exist"
    conditions = (obj.get("status") or {}).get("conditions") or []
    if not conditions:
        return "no conditions yet"
    return "; ".join(
        f"{c.get('type')}={c.get('status')} ({c.get('reason', '')}: {c.get('message', '')})"
        for c in conditions
    )


def object_ref(obj: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """How kubectl names ``obj``: ``kind.group``, its name and its namespace (None when cluster-scoped)."""
    group = obj["apiVersion"].rpartition("/")[0]
    kind = obj["kind"].lower() + (f".{group}" if group else "")
    return kind, obj["metadata"]["name"], obj["metadata"].get("namespace")


def describe_stuck(obj: Mapping[str, Any]) -> str:
    """``kind/name`` (and namespace), and when it is being deleted, since when and its finalizers."""
    kind, name, namespace = object_ref(obj)
    where = f" in {namespace}" if namespace else ""
    meta = obj["metadata"]
    if meta.get("deletionTimestamp") is None:
        return f"{kind}/{name}{where}"
    finalizers = meta.get("finalizers") or (obj.get("spec") or {}).get("finalizers") or []
    return f"{kind}/{name}{where} (deleting since {meta['deletionTimestamp']}, finalizers {finalizers})"
