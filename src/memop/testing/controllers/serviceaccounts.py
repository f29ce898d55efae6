"""kube-controller-manager's serviceaccounts controller, simulated: every Active namespace
holds a ``default`` ServiceAccount.

Upstream (``pkg/controller/serviceaccount/serviceaccounts_controller.go``) syncs a namespace
when it is added or updated, and when a ServiceAccount in it is deleted: while the namespace
is Active it creates each ServiceAccount to ensure (only ``default``) that is missing, with a
body of its name alone (field manager ``kube-controller-manager``), and ignores AlreadyExists
and a namespace being deleted. This does the same on the store, so that a new namespace holds
what it holds on a cluster (the bench's fresh-control-plane runs wait for it, as pods need it).
"""

from __future__ import annotations

from memop.runtime.util.clock import Clock
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.store import Store, StoreEvent
from memop.testing.controllers.cache import ObjectCache
from memop.testing.controllers.common import WorkLoop, meta

NAME = "default"
MANAGER = "kube-controller-manager"


class ServiceAccountsController:
    """Keeps a ``default`` ServiceAccount in every Active namespace (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock) -> None:
        self._store = store
        self._cache = cache
        self._namespaces = store.resource("", "v1", "namespaces")
        self._service_accounts = store.resource("", "v1", "serviceaccounts")
        self.loop: WorkLoop[str] = WorkLoop("serviceaccounts", self._sync, clock=clock)

    def on_event(self, event: StoreEvent) -> None:
        """Queue a namespace added or updated, or one whose ``default`` ServiceAccount went."""
        if event.rtype.group != "":
            return
        m = meta(event.obj)
        if event.rtype.kind == "Namespace" and event.type in ("ADDED", "MODIFIED"):
            self.loop.add(m.get("name", ""))
        elif event.rtype.kind == "ServiceAccount" and event.type == "DELETED" and m.get("name") == NAME:
            self.loop.add(m.get("namespace", ""))

    def _sync(self, namespace: str) -> None:
        ns = self._cache.get(self._namespaces, None, namespace)
        if ns is None or (ns.get("status") or {}).get("phase") != "Active":
            return  # gone, or Terminating: nothing to ensure, as upstream
        if self._cache.get(self._service_accounts, namespace, NAME) is not None:
            return  # read as the namespace is, from the cache (upstream: its lister)
        try:
            self._store.create(
                self._service_accounts, namespace, {"metadata": {"name": NAME}}, manager=MANAGER
            )
        except ApiError as err:
            # 409: made meanwhile; 404 or 403 (NamespaceTerminating): the namespace went or is
            # going, nothing to ensure there.
            if err.code not in (409, 404, 403):
                raise
