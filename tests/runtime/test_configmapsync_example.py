"""The README's ConfigMapSync: a controller of one's own on memop.runtime's public surface only,
run end to end by the pytest plugin's fixtures.

A ConfigMapSync copies a source ConfigMap (in its own namespace) into a list of target
namespaces, keeps the copies in sync, deletes the copies of namespaces dropped from the list,
and reports the namespaces it synced. It uses each helper a controller-runtime user reaches for:

- a custom cache index (ConfigMapSyncs by the ConfigMap they read), so a source ConfigMap's
  event finds its syncs without scanning them all;
- owner annotations: a copy lives in another namespace, where no ownerReference can point to
  its sync, so it carries operator-lib's annotations and its events map back through them;
- server-side apply for the copies (the controller owns what it applies, and takes it back
  with ``force`` after a hand edit);
- a finalizer, because no garbage collector deletes children without an ownerReference;
- ``own_kind(..., finalizers=True)`` and no ``owner_references``: exactly what the code sends.

Runs on the in-memory server and, with USE_EXISTING_CLUSTER=true, on a real cluster.
"""

from __future__ import annotations

import contextlib
from typing import Any

from memop.runtime import (
    CONFIGMAPS,
    Cache,
    Client,
    Controller,
    ControllerBuilder,
    ControllerDefinition,
    CrdNames,
    NotFound,
    Obj,
    Request,
    Resource,
    Result,
    SetupContext,
    add_finalizer,
    crdgen,
    dig,
    has_finalizer,
    map_to_annotated_owner,
    own_kind,
    owner_annotations,
    predicates,
    remove_finalizer,
    update_status,
    watched,
)
from memop.runtime.client.resources import NAMESPACES
from memop.testing.envtest import Kube
from memop.testing.plugin import InstallCrds, RunOperator
from memop.testing.wait import wait_for

GROUP = "sync.example.com"
CONFIGMAPSYNCS = Resource(GROUP, "v1alpha1", "configmapsyncs", "ConfigMapSync")
FINALIZER = f"{GROUP}/copies"
FIELD_MANAGER = "configmapsync"
BY_SOURCE = "source"  # ConfigMapSyncs by "namespace/name" of the ConfigMap they copy
BY_OWNER = "owner"  # ConfigMaps by "namespace/name" of the ConfigMapSync that made them

# -- the API ------------------------------------------------------------------------------------


def crd() -> dict[str, Any]:
    names = CrdNames(GROUP, "v1alpha1", "ConfigMapSync", "configmapsyncs", "configmapsync")
    spec = {
        "type": "object",
        "required": ["source"],
        "properties": {
            "source": {"type": "string", "description": "The ConfigMap to copy, in this namespace."},
            "targetNamespaces": {"type": "array", "items": {"type": "string"}},
        },
    }
    status = {"type": "object", "properties": {"synced": {"type": "array", "items": {"type": "string"}}}}
    schema = crdgen.object_schema("Copies a ConfigMap into other namespaces.", spec, status)
    return crdgen.custom_resource_definition(names, schema, [])


def key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or ''}/{meta['name']}"


def sync_source(sync: Obj) -> list[str]:
    """The index function: the ConfigMap a sync reads."""
    source = dig(sync, "spec", "source")
    return [f"{sync['metadata']['namespace']}/{source}"] if isinstance(source, str) else []


def copy_owner(configmap: Obj) -> list[str]:
    """The index function: the sync a copy's annotations name."""
    return [f"{r.namespace}/{r.name}" for r in map_to_annotated_owner(CONFIGMAPSYNCS)(configmap)]


# -- the reconciler -----------------------------------------------------------------------------


class ConfigMapSyncReconciler:
    def __init__(self, client: Client, cache: Cache) -> None:
        self.client = client
        self.cache = cache

    async def reconcile(self, request: Request) -> Result | None:
        sync = self.cache.get(CONFIGMAPSYNCS, request.name, request.namespace)
        if sync is None:
            return None
        copies = self.cache.list(CONFIGMAPS, index=(BY_OWNER, key(sync)))
        if sync["metadata"].get("deletionTimestamp"):
            if has_finalizer(sync, FINALIZER):
                await self._delete(copies)
                await remove_finalizer(self.client, CONFIGMAPSYNCS, sync, FINALIZER)
            return None
        sync = await add_finalizer(self.client, CONFIGMAPSYNCS, sync, FINALIZER, cache=self.cache)
        source = self.cache.get(CONFIGMAPS, sync["spec"]["source"], request.namespace)
        targets = [] if source is None else sorted(set(sync["spec"].get("targetNamespaces") or ()))
        for namespace in targets:
            await self._copy(sync, source or {}, namespace)
        await self._delete([c for c in copies if c["metadata"]["namespace"] not in targets])
        await update_status(self.client, self.cache, CONFIGMAPSYNCS, sync, {"synced": targets})
        return None

    async def _copy(self, sync: Obj, source: Obj, namespace: str) -> None:
        name = source["metadata"]["name"]
        desired = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "annotations": owner_annotations(sync, CONFIGMAPSYNCS),
            },
            "data": dict(source.get("data") or {}),
        }
        current = self.cache.get(CONFIGMAPS, name, namespace)
        if (
            current is not None
            and current.get("data") == desired["data"]
            and copy_owner(current) == [key(sync)]
        ):
            return  # converged: no request
        # force: a hand edit of a copy made its editor the owner of the fields; the sync takes
        # them back rather than stopping at the conflict.
        applied = await self.client.apply(CONFIGMAPS, desired, field_manager=FIELD_MANAGER, force=True)
        self.cache.record_write(CONFIGMAPS, applied)

    async def _delete(self, copies: list[Obj]) -> None:
        for copy in copies:
            meta = copy["metadata"]
            with contextlib.suppress(NotFound):
                await self.client.delete(
                    CONFIGMAPS, meta["name"], meta["namespace"], preconditions={"uid": meta["uid"]}
                )


# -- the wiring ---------------------------------------------------------------------------------


def setup(context: SetupContext) -> Controller:
    cache = context.cache
    cache.add_index(CONFIGMAPSYNCS, BY_SOURCE, sync_source)
    cache.add_index(CONFIGMAPS, BY_OWNER, copy_owner)

    def syncs_reading(configmap: Obj) -> list[Request]:
        syncs = cache.by_index(CONFIGMAPSYNCS, BY_SOURCE, key(configmap))
        return [Request(s["metadata"]["namespace"], s["metadata"]["name"]) for s in syncs]

    return (
        ControllerBuilder(cache, "configmapsync")
        .for_(CONFIGMAPSYNCS, predicates.generation_changed)
        .watches(CONFIGMAPS, syncs_reading)  # a source changed
        .watches(CONFIGMAPS, map_to_annotated_owner(CONFIGMAPSYNCS))  # a copy changed
        .with_options(max_concurrent_reconciles=context.max_concurrent_reconciles)
        .build(ConfigMapSyncReconciler(context.client, cache))
    )


DEFINITION = ControllerDefinition(
    name="configmapsync",
    description="a ConfigMapSync copies a ConfigMap into other namespaces",
    setup=setup,
    crds=lambda: [crd()],
    rules=(
        *own_kind(GROUP, "configmapsyncs", finalizers=True),
        *watched("", "configmaps", "cache; start-up check", "list"),
        *watched("", "configmaps", "cache", "watch"),
        *watched("", "configmaps", "reconciler: the copies (server-side apply)", "patch"),
        *watched("", "configmaps", "reconciler: copies of dropped namespaces", "delete"),
    ),
    samples=dict,
)


# -- the test -----------------------------------------------------------------------------------


async def test_configmapsync_copies_keeps_in_sync_prunes_and_cleans_up(
    kube: Kube, client: Client, namespace: str, install_crds: InstallCrds, run_operator: RunOperator
) -> None:
    await install_crds(DEFINITION)
    targets = [f"{namespace}-t{i}" for i in (1, 2)]
    for target in targets:
        await client.create(NAMESPACES, {"metadata": {"name": target}})
    try:
        await client.create(CONFIGMAPS, {"metadata": {"name": "settings"}, "data": {"a": "1"}}, namespace)
        spec = {"source": "settings", "targetNamespaces": targets}
        await client.create(CONFIGMAPSYNCS, {"metadata": {"name": "sync"}, "spec": spec}, namespace)

        async def copies() -> dict[str, dict[str, str]]:
            found = {}
            for target in targets:
                with contextlib.suppress(NotFound):
                    copy = await client.get(CONFIGMAPS, "settings", target)
                    if not copy["metadata"].get("deletionTimestamp"):
                        found[target] = copy.get("data") or {}
            return found

        async with run_operator(DEFINITION) as operator:
            await wait_for(lambda: _equals(copies(), {t: {"a": "1"} for t in targets}), timeout=30)
            copy = await client.get(CONFIGMAPS, "settings", targets[0])
            assert "ownerReferences" not in copy["metadata"]  # another namespace: none can point
            assert copy["metadata"]["annotations"] == {
                "operator-sdk/primary-resource": f"{namespace}/sync",
                "operator-sdk/primary-resource-type": f"ConfigMapSync.{GROUP}",
            }
            sync = await client.get(CONFIGMAPSYNCS, "sync", namespace)
            assert sync["metadata"]["finalizers"] == [FINALIZER]
            await wait_for(lambda: _synced(client, namespace, targets), timeout=30)

            # The source changes: the index maps its event to the sync.
            await client.patch(CONFIGMAPS, "settings", {"data": {"a": "2"}}, namespace)
            await wait_for(lambda: _equals(copies(), {t: {"a": "2"} for t in targets}), timeout=30)

            # A copy edited by hand: its annotations map the event back, the sync restores it.
            await client.patch(CONFIGMAPS, "settings", {"data": {"a": "edited"}}, targets[0])
            await wait_for(lambda: _equals(copies(), {t: {"a": "2"} for t in targets}), timeout=30)

            # A namespace dropped from the list: its copy goes.
            await client.patch(CONFIGMAPSYNCS, "sync", {"spec": {"targetNamespaces": targets[:1]}}, namespace)
            await wait_for(lambda: _equals(copies(), {targets[0]: {"a": "2"}}), timeout=30)
            await wait_for(lambda: _synced(client, namespace, targets[:1]), timeout=30)

            # The sync deleted: the finalizer deletes the copies, then lets the sync go.
            await client.delete(CONFIGMAPSYNCS, "sync", namespace)

            async def sync_gone() -> bool:
                try:
                    await client.get(CONFIGMAPSYNCS, "sync", namespace)
                except NotFound:
                    return True
                return False

            await wait_for(sync_gone, timeout=30)
            assert await copies() == {}
        if kube.server is not None:
            # What the controller sent is exactly what its rules grant (the server's request log).
            sent = {
                (r.group, f"{r.resource}/{r.subresource}" if r.subresource else r.resource, r.verb)
                for r in kube.server.log.filter(user_agent=operator.user_agent)
                if r.resource_request
            }
            assert sent == {rule.triple for rule in DEFINITION.rules}
    finally:
        for target in targets:
            with contextlib.suppress(NotFound):
                await client.delete(NAMESPACES, target)


async def _equals(got: Any, expected: Any) -> bool:
    return bool(await got == expected)


async def _synced(client: Client, namespace: str, targets: list[str]) -> bool:
    sync = await client.get(CONFIGMAPSYNCS, "sync", namespace)
    return dig(sync, "status", "synced") == targets


def test_the_definition_grants_what_the_code_sends_and_nothing_for_owner_references() -> None:
    triples = {rule.triple for rule in DEFINITION.rules}
    assert (GROUP, "configmapsyncs", "patch") in triples  # the finalizer
    assert (GROUP, "configmapsyncs/finalizers", "update") not in triples  # no ownerReference
