"""The resource quota controller, simulated: every ResourceQuota's ``status.hard`` and ``status.used``.

``status.hard`` is ``spec.hard``; ``status.used`` has, for each resource in it, what the namespace
uses now: object counts (``pods`` and ``count/pods`` count pods not Succeeded or Failed;
``services``, ``configmaps``, ``secrets``, ``persistentvolumeclaims``, ``resourcequotas``,
``replicationcontrollers``, ``services.loadbalancers``, ``services.nodeports`` and
``count/<resource>[.<group>]`` of any served resource), the requests and limits of those pods'
containers (``cpu``/``requests.cpu``, ``memory``/``requests.memory``, ``limits.cpu``,
``limits.memory``, ``ephemeral-storage`` alike; a pod counts the larger of its containers' sum
and any init container), and ``requests.storage`` of the claims. Quantities are written in the
form Kubernetes prints them. A change to anything in the namespace recomputes its quotas.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from memop.runtime.util.clock import Clock
from memop.testing.apiserver.quantity import canonical
from memop.testing.apiserver.store import Store, StoreEvent
from memop.testing.controllers.cache import ObjectCache
from memop.testing.controllers.common import Obj, WorkLoop, meta, status_body
from memop.testing.kinds.quotas import amount

Key = tuple[str, str]  # (namespace, name)
_COUNTED = {  # quota resource -> (group, plural)
    "pods": ("", "pods"),
    "services": ("", "services"),
    "configmaps": ("", "configmaps"),
    "secrets": ("", "secrets"),
    "persistentvolumeclaims": ("", "persistentvolumeclaims"),
    "resourcequotas": ("", "resourcequotas"),
    "replicationcontrollers": ("", "replicationcontrollers"),
}
_BINARY = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def quantity_text(value: Decimal, binary: bool) -> str:
    """``value`` as a Quantity prints it, in binary units (``128Mi``) when ``binary``."""
    if binary and value == value.to_integral_value() and value % 1024 == 0 and value != 0:
        return canonical(f"{int(value) // 1024}Ki")
    return canonical(format(value.normalize(), "f"))


def _pod_amount(pod: Mapping[str, Any], section: str, resource: str) -> tuple[Decimal, bool]:
    """A pod's request or limit of ``resource`` (and whether it was given in binary units)."""
    spec = pod.get("spec") or {}
    binary = False

    def of(container: Any) -> Decimal:
        nonlocal binary
        text = (((container or {}).get("resources") or {}).get(section) or {}).get(resource)
        if text is None:
            return Decimal(0)
        binary = binary or str(text).endswith(_BINARY)
        return amount(text)

    total = sum((of(c) for c in spec.get("containers") or ()), Decimal(0))
    for init in spec.get("initContainers") or ():
        total = max(total, of(init))
    return total, binary


def _active(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class QuotaController:
    """Keeps every ResourceQuota's status (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock) -> None:
        self._store = store
        self._cache = cache
        self._quotas = store.resource("", "v1", "resourcequotas")
        self.loop: WorkLoop[Key] = WorkLoop("resourcequota", self._sync, clock=clock, workers=1)

    def on_event(self, event: StoreEvent) -> None:
        m = meta(event.obj)
        namespace = m.get("namespace")
        if not namespace:
            return
        if event.rtype.group == "" and event.rtype.kind == "ResourceQuota":
            if event.type != "DELETED":
                self.loop.add((namespace, m.get("name", "")))
            return
        for quota in self._cache.items("", "resourcequotas", namespace):
            self.loop.add((namespace, meta(quota).get("name", "")))

    def _sync(self, key: Key) -> float | None:
        ns, name = key
        quota = self._cache.get(self._quotas, ns, name)
        if quota is None:
            return None
        hard = dict((quota.get("spec") or {}).get("hard") or {})
        used = {resource: self._usage(ns, resource) for resource in hard}
        status: Obj = {"hard": hard, "used": used} if hard else {}
        if status != (quota.get("status") or {}):
            self._store.update(self._quotas, ns, name, status_body(quota, status), subresource="status")
        return None

    def _usage(self, ns: str, resource: str) -> str:
        if resource.startswith("count/"):
            plural, _, group = resource[len("count/") :].partition(".")
            items = self._cache.items(group, plural, ns)
            if (group, plural) == ("", "pods"):
                items = [p for p in items if _active(p)]
            return str(len(items))
        if resource in _COUNTED:
            items = self._cache.items(*_COUNTED[resource], ns)
            return str(len([p for p in items if _active(p)] if resource == "pods" else items))
        if resource in ("services.loadbalancers", "services.nodeports"):
            services = [s.get("spec") or {} for s in self._cache.items("", "services", ns)]
            if resource == "services.loadbalancers":
                return str(sum(1 for s in services if s.get("type") == "LoadBalancer"))
            return str(sum(1 for s in services for p in s.get("ports") or () if p.get("nodePort")))
        if resource == "requests.storage":
            claims = self._cache.items("", "persistentvolumeclaims", ns)
            texts = [
                ((c.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage")
                for c in claims
            ]
            values = [t for t in texts if t is not None]
            total = sum((amount(t) for t in values), Decimal(0))
            return quantity_text(total, any(str(t).endswith(_BINARY) for t in values))
        section, _, name = resource.rpartition(".")
        section = {"": "requests", "requests": "requests", "limits": "limits"}.get(section, "")
        if not section:
            return "0"
        total, binary = Decimal(0), False
        for pod in self._cache.items("", "pods", ns):
            if _active(pod):
                value, is_binary = _pod_amount(pod, section, name)
                total += value
                binary = binary or is_binary
        return quantity_text(total, binary)
