"""The Deployment a Memcached should have, and the smallest write that gets the live one there.

``desired_deployment`` is a pure function of the Memcached and its parsed spec. ``deployment_patch``
compares a live Deployment with it and returns a JSON merge patch (RFC 7386, to be sent as
``application/merge-patch+json``) or None when nothing memop owns differs.

What memop owns, and how it is compared (everything else on the Deployment is left alone, so the
server's defaults and other actors' additions never cause a write):
- metadata.labels and spec.template.metadata.labels: only the keys memop sets; other labels stay.
- metadata.ownerReferences: that the controller reference to the Memcached is present (other
  references stay).
- spec.replicas (an absent value is the server default, 1).
- spec.selector: must equal ours; it is immutable, so a difference raises SelectorMismatch.
- spec.template.spec.securityContext: the keys memop sets; keys the server or others add stay.
- spec.template.spec.containers: memop owns the list: exactly one container, ``memcached``. In
  it, image, command, ports (as a list, each port compared on the keys memop sets) and the
  securityContext keys memop sets are compared as values; resources are compared as quantities
  ("1000m" equals "1", "64Mi" equals "67108864"; an absent request counts as its limit, as the
  API does for pods). Fields memop does not set (imagePullPolicy, terminationMessagePath,
  terminationMessagePolicy, args, env...) are not compared and are kept when the container is
  rewritten.
Not compared at all: strategy, revisionHistoryLimit, progressDeadlineSeconds, the pod's
dnsPolicy, restartPolicy, schedulerName, terminationGracePeriodSeconds, annotations, status.

Invariant (tested): for any live Deployment, applying the returned patch as a JSON merge patch
gives a Deployment for which ``deployment_patch`` returns None.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from memop.memcached.api import (
    API_VERSION,
    DEFAULT_CONTAINER_PORT,
    KIND,
    MemcachedSpec,
    container_port,
    quantities_equal,
)
from memop.runtime.cache.store import dig

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
APP_NAME = "memcached"
MANAGER = "memop"
CONTAINER_NAME = "memcached"
PORT_NAME = "memcached"
RUN_AS_USER = 1001


class SelectorMismatch(Exception):
    """The live Deployment's selector is not ours. The selector of a Deployment is immutable, so
    no patch can fix it: the caller deletes the Deployment and creates it again."""

    def __init__(self, current: Any, desired: Any) -> None:
        super().__init__(f"deployment selector is {current!r}, want {desired!r}")
        self.current = current
        self.desired = desired


def selector_labels(name: str) -> dict[str, str]:
    """The labels that select one Memcached's pods: per instance, so two Memcacheds in a
    namespace never select each other's pods. managed-by is left out: it is not identity."""
    return {NAME_LABEL: APP_NAME, INSTANCE_LABEL: name}


def labels(name: str) -> dict[str, str]:
    """The labels memop puts on a Memcached's Deployment and pods."""
    return {**selector_labels(name), MANAGED_BY_LABEL: MANAGER}


def owner_reference(memcached: Mapping[str, Any]) -> dict[str, Any]:
    """The controller reference from an object to ``memcached``: garbage collection deletes the
    object when the Memcached goes, and the object's events map back to it."""
    meta = memcached.get("metadata") or {}
    return {
        "apiVersion": memcached.get("apiVersion") or API_VERSION,
        "kind": memcached.get("kind") or KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def desired_deployment(
    memcached: Mapping[str, Any], spec: MemcachedSpec, shard_labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The Deployment for ``memcached`` (a v1alpha1 Memcached as read from the API: metadata.name,
    namespace and uid are required, KeyError otherwise) with its parsed ``spec``
    (``parse_spec(memcached)``, which also vouches for the container port it keeps in an
    annotation: :func:`memop.memcached.api.container_port`).
    ``shard_labels`` (``Cache.shard_labels``) go on the Deployment and its pods, so both reach
    the replica that owns the Memcached when memop shards; not in the selector.

    A fresh dict on every call; the caller may mutate it.
    """
    meta = memcached["metadata"]
    name = meta["name"]
    resources = spec.resources.to_dict() if spec.resources is not None else {}
    port = container_port(memcached)
    # memcached listens on 11211 unless told; the flag only for another port, so the
    # Deployments of every Memcached made before v1beta1 keep their command (and their pods).
    port_flag = [] if port == DEFAULT_CONTAINER_PORT else [f"--port={port}"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {**labels(name), **(shard_labels or {})},
            "ownerReferences": [owner_reference(memcached)],
        },
        "spec": {
            "replicas": spec.size,
            "selector": {"matchLabels": selector_labels(name)},
            "template": {
                "metadata": {"labels": {**labels(name), **(shard_labels or {})}},
                "spec": {
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS_USER,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": CONTAINER_NAME,
                            "image": spec.image,
                            "command": [
                                "memcached",
                                f"--memory-limit={spec.memory_limit_mib}",
                                *port_flag,
                                "-o",
                                "modern",
                                "-v",
                            ],
                            "ports": [
                                {
                                    "containerPort": port,
                                    "name": PORT_NAME,
                                    "protocol": "TCP",
                                }
                            ],
                            "resources": resources,
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                                "runAsNonRoot": True,
                                "runAsUser": RUN_AS_USER,
                            },
                        }
                    ],
                },
            },
        },
    }


# --- comparison ---------------------------------------------------------------------------------


def _covers(current: Any, desired: Any) -> bool:
    """Whether ``current`` holds everything ``desired`` sets: maps may have more keys, lists
    must have the same length with each item covered, other values must be equal."""
    if isinstance(desired, Mapping):
        return isinstance(current, Mapping) and all(_covers(current.get(k), v) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(current, list)
            and len(current) == len(desired)
            and all(_covers(c, d) for c, d in zip(current, desired, strict=True))
        )
    return bool(current == desired) and type(current) is type(desired)


def _quantity_map(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _quantity_maps_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.keys() == b.keys() and all(quantities_equal(a[k], b[k]) for k in a)


def _resources_equal(current: Any, desired: Any) -> bool:
    current = current if isinstance(current, Mapping) else {}
    desired = desired if isinstance(desired, Mapping) else {}
    current_limits = _quantity_map(current.get("limits"))
    desired_limits = _quantity_map(desired.get("limits"))
    # A request left out is the limit (the API defaults pods that way), so both spellings match.
    current_requests = {**current_limits, **_quantity_map(current.get("requests"))}
    desired_requests = {**desired_limits, **_quantity_map(desired.get("requests"))}
    return _quantity_maps_equal(current_limits, desired_limits) and _quantity_maps_equal(
        current_requests, desired_requests
    )


def _container_matches(current: Any, desired: Mapping[str, Any]) -> bool:
    if not isinstance(current, Mapping):
        return False
    rest = {k: v for k, v in desired.items() if k != "resources"}
    return _covers(current, rest) and _resources_equal(current.get("resources"), desired.get("resources"))


def _subset_patch(current: Any, desired: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch after which ``current`` covers ``desired``, touching nothing else."""
    current = current if isinstance(current, Mapping) else {}
    patch: dict[str, Any] = {}
    for key, value in desired.items():
        if _covers(current.get(key), value):
            continue
        if isinstance(value, Mapping) and isinstance(current.get(key), Mapping):
            patch[key] = _subset_patch(current[key], value)
        else:
            patch[key] = copy.deepcopy(value)
    return patch


def _merge_onto(current: Any, desired: Any) -> Any:
    """``desired`` laid over ``current``: maps merge key by key, anything else is desired's."""
    if isinstance(desired, Mapping) and isinstance(current, Mapping):
        merged = copy.deepcopy(dict(current))
        for key, value in desired.items():
            merged[key] = _merge_onto(current.get(key), value)
        return merged
    return copy.deepcopy(desired)


def _owner_references_patch(current: Any, desired_ref: Mapping[str, Any]) -> list[Any] | None:
    refs = list(current) if isinstance(current, list) else []
    for i, ref in enumerate(refs):
        if isinstance(ref, Mapping) and ref.get("uid") == desired_ref["uid"]:
            if _covers(ref, desired_ref):
                return None
            refs[i] = _merge_onto(ref, desired_ref)
            return refs
    return [*refs, dict(desired_ref)]


def _selector_matches(current: Any, desired: Mapping[str, Any]) -> bool:
    if not isinstance(current, Mapping):
        return False
    if current.get("matchExpressions"):
        return False
    return bool(current.get("matchLabels") == desired.get("matchLabels"))


def deployment_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON merge patch that brings what memop owns in ``current`` (the live Deployment) to
    ``desired`` (from :func:`desired_deployment`), or None when nothing it owns differs.

    Send it as ``application/merge-patch+json``. The containers list is replaced whole (a merge
    patch cannot merge list items): the patch carries the desired container laid over the live
    one, so fields the server defaulted (imagePullPolicy, terminationMessagePath, ...) are
    written back unchanged and never cause another update. Do not send it as a strategic merge
    patch: that would merge ``resources`` instead of replacing them, and keep extra containers.

    Precondition: ``current`` has no controller reference other than the Memcached's (the caller
    checks, since adding a second controller is refused by the server).

    Raises SelectorMismatch when the selector differs: the selector is immutable, so the caller
    must delete the Deployment and create it again.
    """
    desired_selector = dig(desired, "spec", "selector")
    if not _selector_matches(dig(current, "spec", "selector"), desired_selector):
        raise SelectorMismatch(dig(current, "spec", "selector"), desired_selector)

    patch: dict[str, Any] = {}

    meta_patch: dict[str, Any] = {}
    label_patch = _subset_patch(dig(current, "metadata", "labels"), desired["metadata"]["labels"])
    if label_patch:
        meta_patch["labels"] = label_patch
    refs = _owner_references_patch(
        dig(current, "metadata", "ownerReferences"), desired["metadata"]["ownerReferences"][0]
    )
    if refs is not None:
        meta_patch["ownerReferences"] = refs
    if meta_patch:
        patch["metadata"] = meta_patch

    spec_patch: dict[str, Any] = {}
    current_replicas = dig(current, "spec", "replicas")
    if (1 if current_replicas is None else current_replicas) != desired["spec"]["replicas"]:
        spec_patch["replicas"] = desired["spec"]["replicas"]

    template = desired["spec"]["template"]
    template_patch: dict[str, Any] = {}
    label_patch = _subset_patch(
        dig(current, "spec", "template", "metadata", "labels"), template["metadata"]["labels"]
    )
    if label_patch:
        template_patch["metadata"] = {"labels": label_patch}

    pod_patch: dict[str, Any] = {}
    current_pod = dig(current, "spec", "template", "spec")
    current_context = dig(current_pod, "securityContext")
    context_patch = _subset_patch(current_context, template["spec"]["securityContext"])
    if "seccompProfile" in context_patch:
        # Owned whole: a localhostProfile left beside type RuntimeDefault is refused by the server.
        stale = dig(current_context, "seccompProfile")
        for key in stale if isinstance(stale, Mapping) else ():
            if key != "type":
                context_patch["seccompProfile"][key] = None
    if context_patch:
        pod_patch["securityContext"] = context_patch
    (desired_container,) = template["spec"]["containers"]
    current_containers = dig(current_pod, "containers")
    if not (
        isinstance(current_containers, list)
        and len(current_containers) == 1
        and _container_matches(current_containers[0], desired_container)
    ):
        live = next(
            (
                c
                for c in current_containers or ()
                if isinstance(c, Mapping) and c.get("name") == desired_container["name"]
            ),
            {},
        )
        merged = _merge_onto(live, desired_container)
        # resources are owned whole: a limit the user removed must go, not linger from `live`.
        merged["resources"] = copy.deepcopy(desired_container["resources"])
        pod_patch["containers"] = [merged]
    if pod_patch:
        template_patch["spec"] = pod_patch
    if template_patch:
        spec_patch["template"] = template_patch
    if spec_patch:
        patch["spec"] = spec_patch
    return patch or None
