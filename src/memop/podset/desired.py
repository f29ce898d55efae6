"""The pods a PodSet should have: the pod to create, which pods count, which to delete first.

Pure functions of the PodSet, its parsed spec and its pods as cached.

A PodSet's pods are those it controls (an ownerReference with ``controller: true`` and its
uid) that carry its instance label, :data:`INSTANCE_LABEL` = the PodSet's name. The tutorial
found its pods by ``app=<name>, version=v0.1`` alone, which also selects another PodSet's pods
of the same name elsewhere and any other app's pods labelled so; here ``version: v0.1`` is an
ordinary label of the default template. Pods with the label that another owner controls, or
none (orphans), are left alone: a PodSet does not adopt.

A pod counts (is *active*, as a ReplicaSet says) while it is Pending or Running and not
terminating; one with no phase yet is Pending. A Failed or Succeeded pod does not count and is
replaced, but not deleted: the ReplicaSet controller does the same (its FilterActivePods), and
leaves finished pods to the pod garbage collector, or to the PodSet's deletion (they keep
their ownerReference), so what became of them stays visible.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from memop.podset.api import PODSETS, PodSetSpec
from memop.runtime.cache.store import controller_reference

INSTANCE_LABEL = "batch.tutorial.kubebuilder.io/podset"

# The tutorial's pod (newPodForCR), with its version label: the template when the spec has none.
DEFAULT_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"version": "v0.1"}},
    "spec": {"containers": [{"name": "busybox", "image": "busybox", "command": ["sleep", "3600"]}]},
}

_ACTIVE_PHASES = ("Pending", "Running")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def desired_pod(
    podset: Mapping[str, Any], spec: PodSetSpec, shard_labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A new pod for ``podset`` (metadata name, namespace and uid required), named by the
    server from ``<name>-pod-``. The template's labels and annotations are kept; the instance
    label and ``shard_labels`` (``Cache.shard_labels``) are set over them. A fresh dict on every
    call."""
    meta = podset["metadata"]
    template = spec.template if spec.template is not None else DEFAULT_TEMPLATE
    template_meta = template.get("metadata") or {}
    pod_meta: dict[str, Any] = {
        "generateName": f"{meta['name']}-pod-",
        "namespace": meta["namespace"],
        "labels": {
            **(template_meta.get("labels") or {}),
            INSTANCE_LABEL: meta["name"],
            **(shard_labels or {}),
        },
    }
    if template_meta.get("annotations"):
        pod_meta["annotations"] = dict(template_meta["annotations"])
    pod_meta["ownerReferences"] = [controller_reference(podset, PODSETS)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


def is_active(pod: Mapping[str, Any]) -> bool:
    """Pending (or no phase yet) or Running, and not terminating."""
    if _meta(pod).get("deletionTimestamp"):
        return False
    return (_status(pod).get("phase") or "Pending") in _ACTIVE_PHASES


def is_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    conditions = _status(pod).get("conditions")
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in (conditions if isinstance(conditions, list) else ())
    )


def pods_to_delete(pods: Sequence[Mapping[str, Any]], count: int) -> list[Mapping[str, Any]]:
    """The ``count`` pods to delete first when scaling down: those least far along, Pending
    before Running, then the newest first (the name breaks ties, for a stable choice)."""

    def newest_first(pod: Mapping[str, Any]) -> tuple[str, str]:
        return (str(_meta(pod).get("creationTimestamp") or ""), str(_meta(pod).get("name")))

    ordered = sorted(pods, key=newest_first, reverse=True)
    ordered.sort(key=lambda pod: _status(pod).get("phase") == "Running")  # stable: keeps the age order
    return ordered[: max(count, 0)]
