"""kube-controller-manager's ClusterRole aggregation controller, simulated.

Upstream (``pkg/controller/clusterroleaggregation``): a ClusterRole with an ``aggregationRule``
gets as ``rules`` the rules of every other ClusterRole one of its ``clusterRoleSelectors``
selects, selectors in order, the selected roles by name, each rule once (an equal rule is not
repeated); it is written only when that changes, with field manager
``clusterrole-aggregation-controller``. Any ClusterRole's change syncs every aggregated one.

Every real cluster runs it, and RBAC depends on it (``admin``, ``edit`` and ``view`` are
aggregated), so the in-memory server always runs it, simulated controllers or not:
:meth:`AggregationController.start` aggregates what exists before it returns, and later changes
are aggregated by its work loop a moment after the write, as upstream, asynchronously. One sync
settles every aggregated role at once (:func:`aggregate`: roles that select aggregated roles
take their final rules), where upstream's per-role syncs converge over a few rounds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memop.runtime.cache.labels import InvalidSelectorError, Selector
from memop.runtime.util.clock import Clock
from memop.testing.apiserver.objects import copy_json
from memop.testing.apiserver.store import Change, Store
from memop.testing.auth.rbac import RBAC_GROUP
from memop.testing.controllers.common import WorkLoop

MANAGER = "clusterrole-aggregation-controller"


def _selectors(role: Mapping[str, Any]) -> list[Any]:
    rule = role.get("aggregationRule")
    selectors = rule.get("clusterRoleSelectors") if isinstance(rule, dict) else None
    return selectors if isinstance(selectors, list) else []


def aggregate(roles: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """The rules each aggregated ClusterRole among ``roles`` should hold, once every aggregated
    role has been synced until nothing changes (an aggregated role may select another: ``view``
    is in ``edit``, ``edit`` in ``admin``). Only the aggregated roles are in the answer."""
    by_name = {str(r["metadata"]["name"]): r for r in roles}
    rules = {name: list(r.get("rules") or ()) for name, r in by_name.items()}
    aggregated = sorted(name for name, r in by_name.items() if _selectors(r))
    names = sorted(by_name)
    for _ in range(len(aggregated) + 1):  # each pass settles at least one more level
        changed = False
        for name in aggregated:
            new: list[Any] = []
            seen: set[str] = set()  # the rules in new, as JSON: "an equal rule is not repeated"
            for selector in _selectors(by_name[name]):
                try:
                    matches = Selector.from_label_selector(selector).matches
                except InvalidSelectorError:
                    continue  # validation refuses such a selector; an old object may still hold one
                for other in names:
                    labels = by_name[other]["metadata"].get("labels") or {}
                    if other == name or not matches(labels):
                        continue
                    for rule in rules[other]:
                        key = json.dumps(rule, sort_keys=True)
                        if key not in seen:
                            seen.add(key)
                            new.append(rule)
            if new != rules[name]:
                rules[name], changed = new, True
        if not changed:
            break
    return {name: rules[name] for name in aggregated}


class AggregationController:
    """Keeps every aggregated ClusterRole's rules (see the module docstring)."""

    def __init__(self, store: Store, *, clock: Clock) -> None:
        self._store = store
        self._roles = store.resource(RBAC_GROUP, "v1", "clusterroles")
        self.loop: WorkLoop[str] = WorkLoop("clusterrole-aggregation", self._sync, clock=clock)
        self._unsubscribe: Callable[[], None] | None = None

    async def start(self) -> None:
        """Aggregate every aggregated ClusterRole now, then follow the store."""
        if self._unsubscribe is not None:
            raise RuntimeError("the aggregation controller is already running")
        self._sync("")
        self._unsubscribe = self._store.add_listener(self._on_change)
        self.loop.start()

    async def stop(self) -> None:
        """Stop following the store and stop the worker; idempotent."""
        if self._unsubscribe is None:
            return
        self._unsubscribe()
        self._unsubscribe = None
        await self.loop.stop()

    def _on_change(self, change: Change) -> None:
        # The store's callback: only queue a key, never write from here. Any ClusterRole's
        # change may change any aggregated one: one key syncs them all.
        rtype = change.storage.rtype
        if rtype.group == RBAC_GROUP and rtype.plural == "clusterroles":
            self.loop.add("")

    def _sync(self, _: str) -> None:
        storage = self._store.storage_for(RBAC_GROUP, "clusterroles")
        if storage is None:
            return
        # The stored objects themselves (read only): a copy of every role per sync is what
        # made a server's start slow.
        current = {name: entry.obj for name, entry in (storage.objects.get("") or {}).items()}
        for name, rules in aggregate(current.values()).items():
            role = current[name]
            if rules == (role.get("rules") or []):
                continue
            metadata = {k: v for k, v in role["metadata"].items() if k != "managedFields"}
            body = copy_json({**role, "metadata": metadata, "rules": rules})
            self._store.update(self._roles, None, name, body, manager=MANAGER)
