"""kube-controller-manager's ClusterRole aggregation controller, simulated.

Upstream (``pkg/controller/clusterroleaggregation``): a ClusterRole with an ``aggregationRule``
gets as ``rules`` the rules of every other ClusterRole one of its ``clusterRoleSelectors``
selects, selectors in order, the selected roles by name, each rule once (an equal rule is not
repeated); it is written only when that changes, with field manager
``clusterrole-aggregation-controller``. Any ClusterRole's change syncs every aggregated one.

Every real cluster runs it, and RBAC depends on it (``admin``, ``edit`` and ``view`` are
aggregated), so the in-memory server always runs it, simulated controllers or not:
:meth:`AggregationController.start` aggregates what exists before it returns, and later changes
are aggregated by its work loop a moment after the write, as upstream, asynchronously.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memop.runtime.cache.labels import InvalidSelectorError, Selector
from memop.runtime.util.clock import Clock
from memop.testing.auth.rbac import RBAC_GROUP
from memop.testing.controllers.common import WorkLoop
from memop.testing.errors import ApiError
from memop.testing.store import Change, Store

MANAGER = "clusterrole-aggregation-controller"


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
        self._unsubscribe = self._store.add_listener(self._on_change)
        for name in self._aggregated():
            self._sync(name)
        self.loop.start()

    async def stop(self) -> None:
        """Stop following the store and stop the worker; idempotent."""
        if self._unsubscribe is None:
            return
        self._unsubscribe()
        self._unsubscribe = None
        await self.loop.stop()

    def _aggregated(self) -> list[str]:
        roles, _ = self._store.list(self._roles)
        return [
            r["metadata"]["name"]
            for r in roles
            if (r.get("aggregationRule") or {}).get("clusterRoleSelectors")
        ]

    def _on_change(self, change: Change) -> None:
        # The store's callback: only queue keys, never write from here.
        if change.storage.rtype.group == RBAC_GROUP and change.storage.rtype.plural == "clusterroles":
            for name in self._aggregated():
                self.loop.add(name)

    def _sync(self, name: str) -> None:
        try:
            role = self._store.get(self._roles, None, name)
        except ApiError as err:
            if err.code == 404:
                return
            raise
        selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        if not selectors:
            return
        rules: list[Any] = []
        roles, _ = self._store.list(self._roles)
        roles.sort(key=lambda r: str(r["metadata"]["name"]))
        for selector in selectors:
            try:
                matches = Selector.from_label_selector(selector).matches
            except InvalidSelectorError:
                continue  # validation refuses such a selector; an old object may still hold one
            for other in roles:
                if other["metadata"]["name"] == name or not matches(other["metadata"].get("labels") or {}):
                    continue
                rules.extend(rule for rule in other.get("rules") or () if rule not in rules)
        if rules == (role.get("rules") or []):
            return
        metadata = {k: v for k, v in role["metadata"].items() if k != "managedFields"}
        self._store.update(
            self._roles, None, name, {**role, "metadata": metadata, "rules": rules}, manager=MANAGER
        )
