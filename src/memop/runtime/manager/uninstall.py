"""Keeping the operator able to release its finalizers while its whole install is deleted.

``kubectl delete -k`` of an install deletes, in one sweep, the CRDs (so the API server deletes
every custom resource, each waiting on the operator's finalizer), the operator's Namespace (so
its Pods get SIGTERM and its ServiceAccount goes) and its ClusterRole and binding. Without more,
the operator's finalizer removals are refused (403, or 401 once its ServiceAccount is gone) and
the custom resources, their CRDs and the Namespace stay stuck.

An :class:`UninstallGuard` prevents that, with only what Kubernetes does (each step measured on
kube-apiserver and kube-controller-manager v1.36.2):

- **Armed at start**: the finalizer :data:`GUARD` on the operator's ClusterRole, its
  ClusterRoleBinding and its ServiceAccount. Deleted, they stay (terminating), and RBAC still
  authorises through a terminating role and binding; a bound token stays valid for 60 s after
  its ServiceAccount's deletionTimestamp.
- **On SIGTERM**, :meth:`UninstallGuard.uninstalling` asks whether the operator's Namespace is
  terminating: only then is this an uninstall (a rollout or a drain leaves it alone). The
  manager keeps its controllers running while :meth:`UninstallGuard.wait_finalized` waits until
  no object is left of the operator's kinds whose CRD is terminating (the controllers remove
  their finalizers as they do for any deletion), within the graceful timeout.
- **Then** :meth:`UninstallGuard.release` hands the three objects to the garbage collector, in
  an order that never leaves the operator without the permission its next request needs:
  ownerReferences ServiceAccount -> binding -> role (``blockOwnerDeletion``), a Foreground
  DELETE of the role and the binding (which adds ``foregroundDeletion`` to an object already
  terminating), then the guard removed from the role, the binding and, last, the
  ServiceAccount. The garbage collector deletes the binding once the ServiceAccount is gone and
  the role once the binding is, so nothing of the install is left.

Release happens whether or not every object was finalized in time (the install then goes, and
the objects left say which finalizer holds them, as without the guard). A replica killed before
it releases leaves the three objects terminating with :data:`GUARD`: ``kubectl patch ... -p
'{"metadata":{"finalizers":null}}'`` frees them. A namespaced install guards its Role and
RoleBinding instead (``Role/`` and ``RoleBinding/`` in the flag's value).

A sharded replica that finds it is being uninstalled works on every shard, not only its own
(the manager ends its membership): the group's Leases go with the namespace, and a shard being
handed over (a rollout) has no holder, so its objects would otherwise keep their finalizers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from memop.runtime.api.permissions import Rule, Scope
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, Conflict, NotFound
from memop.runtime.client.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CUSTOM_RESOURCE_DEFINITIONS,
    NAMESPACES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    Resource,
    is_builtin_group,
)
from memop.runtime.controller.finalizers import add_finalizer, remove_finalizer
from memop.runtime.util.clock import Clock, RealClock

log = logging.getLogger("memop.uninstall")

GUARD = "memop.dev/uninstall-guard"
# How often wait_finalized lists what is left.
POLL_SECONDS = 0.5


@dataclass(frozen=True)
class UninstallGuardConfig:
    """The objects an uninstall must keep until the operator has released its finalizers."""

    namespace: str  # the operator's own, whose deletion says "uninstall"
    service_account: str
    role: str
    role_binding: str
    # A Role and RoleBinding in ``namespace`` (a namespaced install, which watches its own
    # namespace: its custom resources go with it) instead of a ClusterRole and its binding.
    namespaced: bool = False

    @classmethod
    def parse(cls, text: str, namespace: str) -> UninstallGuardConfig:
        """``SERVICEACCOUNT,CLUSTERROLE,CLUSTERROLEBINDING`` or, for a namespaced install,
        ``SERVICEACCOUNT,Role/ROLE,RoleBinding/ROLEBINDING`` (the ``--uninstall-guard`` value);
        ValueError saying what is wrong."""
        names = [part.strip() for part in text.split(",")]
        if len(names) != 3 or not all(names):
            raise ValueError(
                "--uninstall-guard: expected SERVICEACCOUNT,CLUSTERROLE,CLUSTERROLEBINDING or "
                f"SERVICEACCOUNT,Role/ROLE,RoleBinding/ROLEBINDING, got {text!r}"
            )
        account, role, binding = names
        kinds = (role.startswith("Role/"), binding.startswith("RoleBinding/"))
        if kinds[0] != kinds[1]:
            raise ValueError(f"--uninstall-guard: a Role goes with a RoleBinding, got {text!r}")
        if kinds[0]:
            return cls(
                namespace, account, role.removeprefix("Role/"), binding.removeprefix("RoleBinding/"), True
            )
        return cls(namespace, account, role, binding)

    @property
    def role_resources(self) -> tuple[Resource, Resource]:
        """The resources of the role and its binding."""
        return (ROLES, ROLE_BINDINGS) if self.namespaced else (CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS)

    @property
    def role_namespace(self) -> str | None:
        return self.namespace if self.namespaced else None


def uninstall_guard_rules(config: UninstallGuardConfig, crds: Iterable[str]) -> tuple[Rule, ...]:
    """What :class:`UninstallGuard` sends, each on the objects it names only. In the role it
    guards (the manager's ClusterRole, or a namespaced install's Role): the rules must live as
    long as that role. A namespaced install reads no CRD (its custom resources are in its own
    namespace, which goes with them); ``crds`` is then ignored."""
    why = "uninstall guard"
    w = Scope.WATCHED
    rules = [
        Rule(
            "",
            "namespaces",
            "get",
            w,
            f"{why}: is the operator's namespace terminating",
            resource_names=(config.namespace,),
        ),
        Rule(
            "",
            "serviceaccounts",
            "get",
            w,
            f"{why}: the operator's own, to guard it",
            resource_names=(config.service_account,),
        ),
        Rule(
            "",
            "serviceaccounts",
            "patch",
            w,
            f"{why}: its finalizer and owner",
            resource_names=(config.service_account,),
        ),
    ]
    for res, name in zip(config.role_resources, (config.role, config.role_binding), strict=True):
        rules += [
            Rule(
                res.group,
                res.plural,
                "get",
                w,
                f"{why}: the operator's own, to guard it",
                resource_names=(name,),
            ),
            Rule(
                res.group, res.plural, "patch", w, f"{why}: its finalizer and owner", resource_names=(name,)
            ),
            Rule(
                res.group,
                res.plural,
                "delete",
                w,
                f"{why}: Foreground, for the garbage collector",
                resource_names=(name,),
            ),
            Rule(
                res.group,
                f"{res.plural}/finalizers",
                "update",
                w,
                f"{why}: blockOwnerDeletion on a reference to it",
                sent=False,
                resource_names=(name,),
            ),
        ]
    names = () if config.namespaced else tuple(sorted(crds))
    if names:
        crd = CUSTOM_RESOURCE_DEFINITIONS
        rules.append(
            Rule(crd.group, crd.plural, "get", w, f"{why}: is a kind's CRD terminating", resource_names=names)
        )
    return tuple(rules)


def _deleting(obj: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    return obj is not None and bool(obj["metadata"].get("deletionTimestamp"))


def crd_name(res: Resource) -> str | None:
    """The CRD serving ``res``, None for a built-in kind."""
    if is_builtin_group(res.group):
        return None
    return f"{res.plural}.{res.group}"


class UninstallGuard:
    """The guard of one replica (see the module's docstring)."""

    def __init__(
        self,
        client: Client,
        config: UninstallGuardConfig,
        kinds: Sequence[Resource],
        *,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.kinds = [k for k in kinds if crd_name(k) is not None]
        self.clock = clock or RealClock()

    def _guarded(self) -> list[tuple[Resource, str, str | None]]:
        c = self.config
        return [
            (c.role_resources[0], c.role, c.role_namespace),
            (c.role_resources[1], c.role_binding, c.role_namespace),
            (SERVICE_ACCOUNTS, c.service_account, c.namespace),
        ]

    async def arm(self) -> None:
        """Put :data:`GUARD` on the three objects (those that have it already are left)."""
        for res, name, namespace in self._guarded():
            for _ in range(5):  # a conflict is someone else's write in between: read again
                obj = await self.client.get(res, name, namespace)
                if obj["metadata"].get("deletionTimestamp"):
                    break  # being deleted already: no finalizer may be added any more
                try:
                    await add_finalizer(self.client, res, obj, GUARD)
                    break
                except Conflict:
                    continue
        log.info("uninstall guard armed", extra={"guarded": [n for _, n, _ in self._guarded()]})

    async def uninstalling(self) -> bool:
        """Whether the operator's namespace is being deleted (its install is going)."""
        try:
            namespace = await self.client.get(NAMESPACES, self.config.namespace)
        except NotFound:
            return True
        return bool(namespace["metadata"].get("deletionTimestamp"))

    async def wait_finalized(self, timeout: float, *, until_crds_deleted: bool = False) -> int:
        """Wait, at most ``timeout`` seconds, until no object is left of the kinds whose CRD is
        terminating; returns how many are left (0: all finalized). ``until_crds_deleted``: and
        until every kind's CRD is terminating or gone (for a replica that saw the uninstall
        begin after it stopped: the CRDs' deletion may not have been sent yet)."""
        deadline = self.clock.monotonic() + timeout
        while True:
            left, crds_deleted = await self._left()
            done = left == 0 and (crds_deleted or not until_crds_deleted)
            if done or self.clock.monotonic() >= deadline:
                return left
            await self.clock.sleep(POLL_SECONDS)

    async def _left(self) -> tuple[int, bool]:
        """How many objects of the terminating CRDs are left, and whether every kind's CRD is
        terminating or gone."""
        if self.config.namespaced:
            return await self._left_in_namespace(), True
        left = 0
        crds_deleted = True
        for res in self.kinds:
            try:
                crd = await self.client.get(CUSTOM_RESOURCE_DEFINITIONS, str(crd_name(res)))
            except NotFound:
                continue
            if not crd["metadata"].get("deletionTimestamp"):
                crds_deleted = False
                continue  # the kind stays: its objects are not being deleted
            left += await self._count(res)
        return left, crds_deleted

    async def _left_in_namespace(self) -> int:
        """A namespaced install's custom resources are in its namespace, which is being
        deleted: every one of them goes (its CRD is not the operator's to read)."""
        return sum([await self._count(res, self.config.namespace) for res in self.kinds])

    async def _count(self, res: Resource, namespace: str | None = None) -> int:
        """How many objects of ``res`` there are (in ``namespace``); 0 when it is not served."""
        try:
            listed = await self.client.list(res, namespace)
        except NotFound:
            return 0
        return len(listed.get("items") or [])

    async def release(self) -> None:
        """Hand the guarded objects to the garbage collector (see the module's docstring).

        Only what is being deleted is deleted: a role or binding someone deleted gets the
        Foreground DELETE and its dependent; one nobody deleted only loses the guard (an
        operator whose namespace alone was deleted leaves its cluster RBAC in place)."""
        (role_res, role, role_ns), (binding_res, binding, _), (sa_res, sa, ns) = self._guarded()
        role_obj = await self._get(role_res, role, role_ns)
        binding_obj = await self._get(binding_res, binding, role_ns)
        if binding_obj is not None and _deleting(role_obj):
            await self._own(binding_res, binding, role_ns, role_obj)
        if _deleting(binding_obj):
            # The ServiceAccount goes with the namespace; until it has, the binding must stay:
            # the request that releases the ServiceAccount is authorised by it.
            await self._own(sa_res, sa, ns, binding_obj)
        for res, name, obj in ((role_res, role, role_obj), (binding_res, binding, binding_obj)):
            if _deleting(obj):
                await self._ignore_missing(
                    self.client.delete(res, name, role_ns, propagation_policy="Foreground")
                )
        for res, name, namespace in self._guarded():  # the ServiceAccount last
            obj = await self._get(res, name, namespace)
            if obj is not None:
                await self._ignore_missing(remove_finalizer(self.client, res, obj, GUARD))
        log.info("uninstall guard released", extra={"guarded": [n for _, n, _ in self._guarded()]})

    async def _get(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        try:
            return await self.client.get(res, name, namespace)
        except NotFound:
            return None

    async def _own(self, res: Resource, name: str, namespace: str | None, owner: dict[str, Any]) -> None:
        """Make ``owner`` an owner of the object that blocks its deletion."""
        reference = {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "blockOwnerDeletion": True,
        }
        await self._ignore_missing(
            self.client.patch(res, name, {"metadata": {"ownerReferences": [reference]}}, namespace)
        )

    @staticmethod
    async def _ignore_missing(request: Any) -> None:
        try:
            await request
        except NotFound:
            pass
        except ApiError as error:
            log.warning(
                "uninstall guard: a release step was refused",
                extra={"code": error.code, "error": error.message},
            )
