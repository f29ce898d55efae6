"""Binding a pod to a node, as kube-apiserver v1.36's ``BindingREST``
(``pkg/registry/core/pod/storage/storage.go``) does it.

Two routes reach it: ``POST /api/v1/namespaces/{ns}/pods/{name}/binding`` (RBAC: ``create`` on
``pods/binding``) and the legacy collection ``POST /api/v1/namespaces/{ns}/bindings`` (``create``
on ``bindings``), which takes the pod's name from the body. The body is a v1 Binding:

- a name that is not the URL's is 400 (``name in URL does not match name in Binding object``);
- ``ValidatePodBinding`` (``target.kind`` Node or empty, ``target.name`` required) fails as
  upstream's aggregate error does: a 500 with no reason (the registry returns the field errors'
  aggregate, not an Invalid status);
- the binding's ``uid`` and ``resourceVersion``, when set, are preconditions on the pod;
- :func:`assign` then writes the pod once, past the pod strategy (``GuaranteedUpdate``): it sets
  ``spec.nodeName``, merges the binding's annotations and labels into the pod's (labels:
  ``PodTopologyLabelsAdmission``, on by default since v1.35), clears
  ``status.nominatedNodeName`` (``ClearingNominatedNodeNameAfterBinding``) and sets
  ``PodScheduled`` True (``UpdatePodCondition``: reason and message gone, the transition time
  kept when it was True already). Generation and managedFields stay as they were.

A pod being deleted, already bound or with ``spec.schedulingGates`` is refused with 409 Conflict
on ``pods/binding``; a missing pod is 404. Success is 201 with a Success Status, as the create
handler fills in a Status's code. The simulated scheduler binds through :func:`assign`.

Not modelled: admission webhooks on the Binding (the binding is not offered to them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from memop.testing.apiserver import typeddecode
from memop.testing.apiserver.errors import ApiError, DecodeError, bad_request, conflict, not_found
from memop.testing.apiserver.objects import JsonDict, not_supported, required
from memop.testing.apiserver.quantity import QuantityError
from memop.testing.apiserver.requestlog import RequestInfo
from memop.testing.apiserver.store import Entry, Store
from memop.testing.apiserver.times import TimeFormatError
from memop.testing.kinds.builtins import pod_condition


class _GroupResource(NamedTuple):
    group: str
    plural: str


PODS = _GroupResource("", "pods")
_BINDING = _GroupResource("", "pods/binding")
_TYPE_FIELDS = frozenset(("apiVersion", "kind", "metadata"))


def is_binding(info: RequestInfo) -> bool:
    """Whether the request creates a Binding (either route), in a namespace."""
    if info.verb != "create" or info.group != "" or info.version != "v1" or not info.namespaced_path:
        return False
    pod_route = info.resource == "pods" and bool(info.name) and info.subresource == "binding"
    legacy_route = info.resource == "bindings" and not info.name
    return pod_route or legacy_route


def _decoded(body: Any) -> JsonDict:
    if not isinstance(body, dict):
        raise bad_request("the body of the request is not a Binding object")
    for key, want in (("apiVersion", "v1"), ("kind", "Binding")):
        if body.get(key) and body[key] != want:
            what = "API version" if key == "apiVersion" else "kind"
            raise bad_request(
                f"the {what} in the data ({body[key]}) does not match the expected {what} ({want})"
            )
    meta = body.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise DecodeError("Binding", "v1", "metadata must be an object")
    try:
        decoded, _ = typeddecode.decode(
            typeddecode.structural("io.k8s.api.core.v1.Binding"), body, _TYPE_FIELDS
        )
    except (typeddecode.TypedDecodeError, QuantityError, TimeFormatError) as error:
        raise DecodeError("Binding", "v1", str(error)) from None
    decoded["metadata"] = dict(meta or {})
    return decoded


def _validation_failure(target: Mapping[str, Any]) -> ApiError | None:
    """``ValidatePodBinding``'s errors as the registry returns them: their aggregate, which the
    handler answers as a 500 with no reason."""
    errors = []
    kind = target.get("kind") or ""
    if kind and kind != "Node":
        errors.append(not_supported("target.kind", kind, ["Node", "<empty>"]))
    if not target.get("name"):
        errors.append(required("target.name"))
    if not errors:
        return None
    messages = [e.message for e in errors]
    return ApiError(500, "", messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]")


def create(store: Store, info: RequestInfo, body: Any, *, dry_run: bool = False) -> JsonDict:
    """Answer a Binding create on either route: the Success Status, or raise the failure."""
    binding = _decoded(body)
    meta = binding["metadata"]
    body_ns = meta.get("namespace")
    if body_ns and body_ns != info.namespace:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    name = str(meta.get("name") or "")
    if info.resource == "pods" and name != info.name:
        raise bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    failure = _validation_failure(target)
    if failure is not None:
        raise failure
    if not name:
        raise bad_request("Name parameter required.")
    assign(
        store,
        info.namespace,
        name,
        str(target["name"]),
        annotations=meta.get("annotations") or {},
        labels=meta.get("labels") or {},
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        dry_run=dry_run,
    )
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _check_preconditions(namespace: str, name: str, pod: Mapping[str, Any], uid: str, rv: str) -> None:
    """``storage.Preconditions.Check``, its StorageError made a Conflict on pods
    (``InterpretUpdateError``)."""
    meta = pod["metadata"]
    for wanted, key, label in ((uid, "uid", "UID"), (rv, "resourceVersion", "ResourceVersion")):
        if wanted and wanted != meta.get(key):
            raise conflict(
                PODS,
                name,
                f"StorageError: invalid object, Code: 4, Key: /registry/pods/{namespace}/{name}, "
                f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {label} in precondition: "
                f"{wanted}, {label} in object meta: {meta.get(key)}",
            )


def _refusal(pod: Mapping[str, Any]) -> str | None:
    """Why ``setPodNodeAndMetadata`` will not bind the pod, or None."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    if pod["metadata"].get("deletionTimestamp"):
        return f"pod {name} is being deleted, cannot be assigned to a host"
    if spec.get("nodeName"):
        return f'pod {name} is already assigned to node "{spec["nodeName"]}"'
    if spec.get("schedulingGates"):
        return f"pod {name} has non-empty .spec.schedulingGates"
    return None


def _scheduled(conditions: list[Any], now: str) -> list[Any]:
    """``UpdatePodCondition`` with PodScheduled True: replaces the old one (reason and message
    gone), keeping its transition time when it was True already."""
    old = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "PodScheduled"), None)
    kept = old.get("lastTransitionTime") if old is not None and old.get("status") == "True" else None
    new = pod_condition("PodScheduled", "True", kept or now)
    if old is None:
        return [*conditions, new]
    return [new if c is old else c for c in conditions]


def assign(
    store: Store,
    namespace: str,
    name: str,
    node: str,
    *,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    uid: str = "",
    resource_version: str = "",
    dry_run: bool = False,
) -> Entry:
    """Bind the pod ``namespace/name`` to ``node`` in one write (see the module docstring);
    returns the bound pod."""
    served = store.served("", "v1", "pods")
    existing = served.storage.get(namespace, name)
    if existing is None:
        raise not_found(PODS, name)
    pod = existing.obj
    _check_preconditions(namespace, name, pod, uid, resource_version)
    why = _refusal(pod)
    if why is not None:
        raise conflict(_BINDING, name, why)
    meta = dict(pod["metadata"])
    merged = {**(meta.get("annotations") or {}), **(annotations or {})}
    if merged:
        meta["annotations"] = merged
    if labels:
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
    status = {k: v for k, v in (pod.get("status") or {}).items() if k != "nominatedNodeName"}
    status["conditions"] = _scheduled(list(status.get("conditions") or ()), store.now())
    new = {**pod, "metadata": meta, "spec": {**(pod.get("spec") or {}), "nodeName": node}, "status": status}
    return store.write_through(served, existing, new, dry_run=dry_run)
