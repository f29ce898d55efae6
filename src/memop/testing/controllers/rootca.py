"""kube-controller-manager's root CA publisher, simulated: every namespace holds a
``kube-root-ca.crt`` ConfigMap.

Upstream (``pkg/controller/certificates/rootcacertpublisher``) syncs a namespace when it is
added or updated while Active, and when its ``kube-root-ca.crt`` is updated or deleted: it
creates the ConfigMap if missing (``data: {ca.crt: <PEM>}``, the ``kubernetes.io/description``
annotation, field manager ``kube-controller-manager``), puts the data and the annotation back
if they were changed, and gives up quietly when the namespace is gone or Terminating. This does
the same on the store.

Every real cluster runs it. The in-memory server runs it with the simulated controllers, and
alone with ``ApiServer(publish_root_ca=True)``: the ``cluster`` fixture of the tests asks for
it, so that a test assuming a new namespace holds no ConfigMap fails on the fake as it would on
a cluster. :meth:`RootCAPublisher.start` publishes into the namespaces that already exist
before it returns; later ones get theirs from the work loop, a moment after the write that
created the namespace (as upstream, asynchronously).
"""

from __future__ import annotations

from collections.abc import Callable

from memop.runtime.util.clock import Clock
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.store import Change, Store
from memop.testing.controllers.common import WorkLoop, meta

NAME = "kube-root-ca.crt"
KEY = "ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
    "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
    "distributions of Kubernetes clusters."
)
MANAGER = "kube-controller-manager"

# What a server that speaks plain HTTP publishes: a self-signed CA certificate (EC P-256, valid
# 2024-2123) that signed nothing; there is no server certificate to verify.
PLACEHOLDER_CA = """-----BEGIN CERTIFICATE-----
MIIBSDCB7qADAgECAgEBMAoGCCqGSM49BAMCMCIxIDAeBgNVBAMMF21lbW9wLXRl
c3QtYXBpc2VydmVyLWNhMCAXDTI0MDEwMTAwMDAwMFoYDzIxMjMxMjA4MDAwMDAw
WjAiMSAwHgYDVQQDDBdtZW1vcC10ZXN0LWFwaXNlcnZlci1jYTBZMBMGByqGSM49
AgEGCCqGSM49AwEHA0IABI3z3g+tysyxncA/ubcHgLWtjedC6gBYbgE6QXlRo/9Y
ESSmMRwHrA1EB6GdjZVYEV2RmH5J2h8/N9mzKAOO8UijEzARMA8GA1UdEwEB/wQF
MAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAMkxYN4+0VAoA+bHtHfWo4GxSZGJWAW/
zrO5oUB/Y44MAiEA2cH/NQjlFwCqypDeNPy8O0V93D/Iw7lOhubBi6Izh8k=
-----END CERTIFICATE-----
"""


class RootCAPublisher:
    """Keeps a ``kube-root-ca.crt`` ConfigMap holding ``ca_pem`` in every namespace (see the
    module docstring)."""

    def __init__(self, store: Store, ca_pem: str, *, clock: Clock) -> None:
        self._store = store
        self._data = {KEY: ca_pem}
        self._namespaces = store.resource("", "v1", "namespaces")
        self._configmaps = store.resource("", "v1", "configmaps")
        self.loop: WorkLoop[str] = WorkLoop("root-ca-cert-publisher", self._sync, clock=clock)
        self._unsubscribe: Callable[[], None] | None = None

    async def start(self) -> None:
        """Publish into every existing namespace, then follow the store (once)."""
        if self._unsubscribe is not None:
            raise RuntimeError("the root CA publisher is already running")
        self._unsubscribe = self._store.add_listener(self._on_change)
        namespaces, _ = self._store.list(self._namespaces)
        for namespace in namespaces:
            try:
                self._sync(meta(namespace)["name"])
            except ApiError:
                self.loop.add(meta(namespace)["name"])  # retried by the loop
        self.loop.start()

    async def stop(self) -> None:
        """Stop following the store and stop the worker; idempotent."""
        if self._unsubscribe is None:
            return
        self._unsubscribe()
        self._unsubscribe = None
        await self.loop.stop()

    def _on_change(self, change: Change) -> None:
        # The store's callback: only queue keys, never write from here.
        rtype = change.storage.rtype
        if rtype.group != "":
            return
        m = meta(change.entry.obj)
        if rtype.kind == "Namespace":
            active = (change.entry.obj.get("status") or {}).get("phase") == "Active"
            if change.type == "ADDED" or (change.type == "MODIFIED" and active):
                self.loop.add(m.get("name", ""))
        elif rtype.kind == "ConfigMap" and m.get("name") == NAME and change.type in ("MODIFIED", "DELETED"):
            self.loop.add(m.get("namespace", ""))

    def _sync(self, namespace: str) -> None:
        try:
            current = self._store.get(self._configmaps, namespace, NAME)
        except ApiError as err:
            if err.code != 404:
                raise
            self._create(namespace)
            return
        annotations = meta(current).get("annotations") or {}
        if current.get("data") == self._data and annotations.get(DESCRIPTION_ANNOTATION):
            return
        metadata = {k: v for k, v in meta(current).items() if k != "managedFields"}
        metadata["annotations"] = {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION}
        body = {**current, "metadata": metadata, "data": dict(self._data)}
        self._store.update(self._configmaps, namespace, NAME, body, manager=MANAGER)

    def _create(self, namespace: str) -> None:
        body = {
            "metadata": {"name": NAME, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
            "data": dict(self._data),
        }
        try:
            self._store.create(self._configmaps, namespace, body, manager=MANAGER)
        except ApiError as err:
            # The namespace is gone, or Terminating (403 with the NamespaceTerminating cause):
            # nothing to publish into, as upstream.
            if err.code in (404, 403):
                return
            raise
