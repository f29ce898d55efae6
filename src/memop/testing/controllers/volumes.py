"""The volume controllers, simulated: a provisioner binding every claim, and the protection
controllers.

A claim that is Pending and names no volume gets one at once (as a provisioner with an
Immediate binding mode would make it, whatever the class): a PersistentVolume ``pvc-<claim uid>``
with the claim's requested storage, access modes, volume mode and class, a hostPath source,
reclaim policy Delete and a ``claimRef`` to the claim; then both are Bound, the claim with
``volumeName``, the binder's annotations and ``status.capacity``/``accessModes``.

The pvc-protection controller takes ``kubernetes.io/pvc-protection`` off a claim being deleted
once no pod uses it; a volume whose claim is gone is Released and, with reclaim policy Delete,
deleted; the pv-protection controller takes ``kubernetes.io/pv-protection`` off a volume being
deleted once it is not Bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memop.runtime.util.clock import Clock
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.store import Store, StoreEvent
from memop.testing.controllers.cache import ObjectCache
from memop.testing.controllers.common import (
    Obj,
    WorkLoop,
    being_deleted,
    meta,
    metadata_for_write,
    status_body,
)
from memop.testing.kinds.volumes import CLAIM_PROTECTION, VOLUME_PROTECTION

Key = tuple[str, str, str]  # ("pvc" or "pv", namespace, name)
PROVISIONER = "memop.testing/simulated-provisioner"


def _uses_claim(pod: Mapping[str, Any], claim: str) -> bool:
    return any(
        (volume.get("persistentVolumeClaim") or {}).get("claimName") == claim
        for volume in (pod.get("spec") or {}).get("volumes") or ()
    )


class VolumeController:
    """Provisions, binds and unprotects claims and volumes (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock) -> None:
        self._store = store
        self._cache = cache
        self._claims = store.resource("", "v1", "persistentvolumeclaims")
        self._volumes = store.resource("", "v1", "persistentvolumes")
        self._pods = store.resource("", "v1", "pods")
        self.loop: WorkLoop[Key] = WorkLoop("volumes", self._sync, clock=clock, workers=1)

    def on_event(self, event: StoreEvent) -> None:
        rtype, m = event.rtype, meta(event.obj)
        if rtype.group != "":
            return
        if rtype.kind == "PersistentVolumeClaim":
            if event.type != "DELETED":
                self.loop.add(("pvc", m.get("namespace", ""), m.get("name", "")))
            else:  # its volume is released
                volume = (event.obj.get("spec") or {}).get("volumeName")
                if volume:
                    self.loop.add(("pv", "", volume))
        elif rtype.kind == "PersistentVolume" and event.type != "DELETED":
            self.loop.add(("pv", "", m.get("name", "")))
        elif rtype.kind == "Pod" and event.type == "DELETED":
            for volume in (event.obj.get("spec") or {}).get("volumes") or ():
                claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:
                    self.loop.add(("pvc", m.get("namespace", ""), claim))

    def _sync(self, key: Key) -> float | None:
        kind, ns, name = key
        if kind == "pvc":
            claim = self._cache.get(self._claims, ns, name)
            if claim is not None:
                self._sync_claim(claim)
        else:
            volume = self._cache.get(self._volumes, None, name)
            if volume is not None:
                self._sync_volume(volume)
        return None

    def _sync_claim(self, claim: Obj) -> None:
        m = meta(claim)
        if being_deleted(claim):
            pods = self._cache.items("", "pods", m["namespace"])
            if CLAIM_PROTECTION in (m.get("finalizers") or []) and not any(
                _uses_claim(p, m["name"]) for p in pods
            ):
                self._drop_finalizer(self._claims, claim, CLAIM_PROTECTION)
            return
        spec = claim.get("spec") or {}
        if (claim.get("status") or {}).get("phase") == "Bound" or spec.get("volumeName"):
            return
        volume = self._provision(claim)
        bound_meta = metadata_for_write(
            claim,
            annotations={
                **(m.get("annotations") or {}),
                "pv.kubernetes.io/bind-completed": "yes",
                "pv.kubernetes.io/bound-by-controller": "yes",
                "volume.beta.kubernetes.io/storage-provisioner": PROVISIONER,
                "volume.kubernetes.io/storage-provisioner": PROVISIONER,
            },
        )
        updated = self._store.update(
            self._claims,
            m["namespace"],
            m["name"],
            {**claim, "metadata": bound_meta, "spec": {**spec, "volumeName": meta(volume)["name"]}},
        )
        status = {
            "phase": "Bound",
            "accessModes": list(spec.get("accessModes") or []),
            "capacity": {"storage": (volume.get("spec") or {}).get("capacity", {}).get("storage")},
        }
        self._store.update(
            self._claims, m["namespace"], m["name"], status_body(updated, status), subresource="status"
        )

    def _provision(self, claim: Obj) -> Obj:
        m, spec = meta(claim), claim.get("spec") or {}
        name = f"pvc-{m['uid']}"
        existing = self._cache.get(self._volumes, None, name)
        if existing is not None:
            return existing
        volume_spec: Obj = {
            "capacity": {
                "storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
            },
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "hostPath": {"path": f"/var/local-path-provisioner/{name}_{m['namespace']}_{m['name']}"},
            "persistentVolumeReclaimPolicy": "Delete",
            "volumeMode": spec.get("volumeMode", "Filesystem"),
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "namespace": m["namespace"],
                "name": m["name"],
                "uid": m["uid"],
                "apiVersion": "v1",
                "resourceVersion": m.get("resourceVersion", ""),
            },
        }
        if spec.get("storageClassName"):
            volume_spec["storageClassName"] = spec["storageClassName"]
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
            "spec": volume_spec,
        }
        created = self._store.create(self._volumes, None, body)
        return self._store.update(
            self._volumes, None, name, status_body(created, {"phase": "Bound"}), subresource="status"
        )

    def _sync_volume(self, volume: Obj) -> None:
        m, spec = meta(volume), volume.get("spec") or {}
        phase = (volume.get("status") or {}).get("phase")
        if being_deleted(volume):
            if VOLUME_PROTECTION in (m.get("finalizers") or []) and phase != "Bound":
                self._drop_finalizer(self._volumes, volume, VOLUME_PROTECTION)
            return
        ref = spec.get("claimRef") or {}
        if not ref or phase != "Bound":
            return
        claim = self._cache.get(self._claims, ref.get("namespace"), ref.get("name", ""))
        if claim is not None and meta(claim).get("uid") == ref.get("uid"):
            return
        self._store.update(
            self._volumes, None, m["name"], status_body(volume, {"phase": "Released"}), subresource="status"
        )
        if spec.get("persistentVolumeReclaimPolicy") == "Delete":
            try:
                self._store.delete(self._volumes, None, m["name"])
            except ApiError as err:
                if err.code != 404:
                    raise

    def _drop_finalizer(self, rtype: Any, obj: Obj, finalizer: str) -> None:
        m = meta(obj)
        rest = [f for f in m.get("finalizers") or [] if f != finalizer]
        body = {**obj, "metadata": metadata_for_write(obj, finalizers=rest or None)}
        try:
            self._store.update(rtype, m.get("namespace"), m["name"], body)
        except ApiError as err:
            if err.code != 404:
                raise
