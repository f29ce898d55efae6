"""The deployment controller, simulated: Deployments own ReplicaSets, one per pod template.

For each Deployment the controller keeps (``syncDeployment``):

* a *new* ReplicaSet whose template equals the Deployment's (ignoring the hash label), named
  ``<deployment>-<pod-template-hash>``, labelled and selected by ``pod-template-hash``, with a
  controller ownerReference that blocks foreground deletion and the revision annotations;
* the rollout: with ``RollingUpdate`` the new ReplicaSet takes ``spec.replicas`` at once and
  the old ones keep only as many pods as the new one lacks available ones (a 100 % surge, so
  availability never dips); with ``Recreate`` the old ones go to zero first and the new one is
  created once their pods are gone. Paused Deployments are only scaled;
* at most ``revisionHistoryLimit`` (default 10) old, empty ReplicaSets;
* ``status`` (counts, Available, Progressing with upstream reasons and timestamps), written
  through the status subresource only when it differs from what is stored, together with the
  Deployment's ``deployment.kubernetes.io/revision`` annotation as upstream does — when the
  API server keeps metadata changes made through the status subresource (kube-apiserver
  does for Deployments; a server that drops them is detected, and the annotation skipped).

Invariant: every write is made against the object read in the same sync (resourceVersion
precondition), so a concurrent change causes a conflict and a retry, never a lost update.
"""

from __future__ import annotations

import copy
from typing import Any

from memop.runtime.util.clock import Clock
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.store import Store, StoreEvent
from memop.testing.controllers.cache import ObjectCache
from memop.testing.controllers.common import (
    Obj,
    WorkLoop,
    being_deleted,
    controller_ref,
    is_controlled_by,
    meta,
    metadata_for_write,
    new_controller_ref,
    status_body,
)
from memop.testing.controllers.rollout import (
    DEFAULT_REVISION_HISTORY,
    DESIRED_REPLICAS,
    HASH_LABEL,
    MAX_REPLICAS,
    NEW_RS_CREATED,
    PROGRESSING,
    REVISION,
    count,
    deployment_status,
    desired_replicas,
    fenceposts,
    is_rolling,
    new_condition,
    paused_conditions,
    pod_template_hash,
    progress_deadline,
    revision,
    set_condition,
    with_hash_label,
    without_hash,
)

Key = tuple[str, str]  # (namespace, name)

# Annotations of a Deployment never copied to its ReplicaSets (upstream skipCopyAnnotation).
_SKIP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def _copyable(annotation: str) -> bool:
    return annotation not in _SKIP_ANNOTATIONS and not annotation.startswith("deployment.kubernetes.io/")


def _by_age(rs: Obj) -> tuple[str, str]:
    m = meta(rs)
    return (m.get("creationTimestamp") or "", m.get("name") or "")


class DeploymentController:
    """Drives Deployments through ReplicaSets (see the module docstring)."""

    def __init__(self, store: Store, cache: ObjectCache, *, clock: Clock) -> None:
        self._store = store
        self._cache = cache
        self._clock = clock
        self._deployments = store.resource("apps", "v1", "deployments")
        self._replicasets = store.resource("apps", "v1", "replicasets")
        # Whether the revision annotation can be written with the status, as upstream does
        # (kube-apiserver's Deployment status strategy keeps metadata changes other than
        # labels). Cleared the first time the server drops it: then it is not written at all,
        # since a metadata write would bump the Deployment's generation.
        self._annotate_with_status = True
        self.loop: WorkLoop[Key] = WorkLoop("deployment", self._sync, clock=clock, workers=1)

    def on_event(self, event: StoreEvent) -> None:
        """Queue the Deployment a change concerns (itself, or the owner of a ReplicaSet)."""
        kind = event.rtype.kind
        if event.rtype.group != "apps":
            return
        if kind == "Deployment":
            if event.type != "DELETED":
                m = meta(event.obj)
                self.loop.add((m.get("namespace", ""), m.get("name", "")))
        elif kind == "ReplicaSet":
            ns = meta(event.obj).get("namespace", "")
            for obj in (event.obj, event.old):
                ref = controller_ref(obj) if obj is not None else None
                if ref is not None and ref.get("kind") == "Deployment":
                    self.loop.add((ns, ref.get("name", "")))

    # -- the sync ---------------------------------------------------------------------------

    def _sync(self, key: Key) -> float | None:
        ns, name = key
        d = self._cache.get(self._deployments, ns, name)
        if d is None:
            return None
        now = self._clock.time()
        all_rs = self._owned(d)
        new_rs = self._find_new(d, all_rs)
        if being_deleted(d):
            self._write_status(d, deployment_status(d, all_rs, new_rs, now=now, check_progress=False)[0])
            return None

        conditions = paused_conditions(d, now)
        old_rs = [rs for rs in all_rs if rs is not new_rs]
        if (d.get("spec") or {}).get("paused"):
            all_rs = self._scale_paused(d, all_rs)
            new_rs = self._find_new(d, all_rs)
            status, _ = deployment_status(
                d, all_rs, new_rs, now=now, conditions=conditions, check_progress=False
            )
            self._write_status(d, status)
            return None

        if new_rs is None and self._may_create(d, old_rs):
            created = self._create_new(d, old_rs)
            if created is None:
                return 0.0  # hash collision recorded in status: sync again with the new count
            new_rs, was_created = created
            if was_created and progress_deadline(d) is not None:
                conditions = set_condition(
                    conditions,
                    new_condition(
                        PROGRESSING,
                        "True",
                        NEW_RS_CREATED,
                        f'Created new replica set "{meta(new_rs)["name"]}"',
                        now,
                    ),
                )
        elif new_rs is not None:
            new_rs = self._ensure_newest_revision(d, new_rs, old_rs)

        new_rs, old_rs = self._rollout(d, new_rs, old_rs)
        old_rs = self._cleanup(d, old_rs)
        all_rs = ([new_rs] if new_rs is not None else []) + old_rs
        status, requeue = deployment_status(d, all_rs, new_rs, now=now, conditions=conditions)
        self._write_status(d, status, self._revision_annotations(d, new_rs))
        return requeue

    # -- reading ----------------------------------------------------------------------------

    def _owned(self, d: Obj) -> list[Obj]:
        uid = meta(d)["uid"]
        return [
            obj
            for rtype, obj in self._cache.dependents(uid)
            if rtype.group == "apps" and rtype.kind == "ReplicaSet" and is_controlled_by(obj, uid)
        ]

    @staticmethod
    def _find_new(d: Obj, all_rs: list[Obj]) -> Obj | None:
        """The oldest owned ReplicaSet whose template is the Deployment's (``FindNewReplicaSet``)."""
        wanted = without_hash((d.get("spec") or {}).get("template") or {})
        for rs in sorted(all_rs, key=_by_age):
            if without_hash((rs.get("spec") or {}).get("template") or {}) == wanted:
                return rs
        return None

    # -- writing ReplicaSets ----------------------------------------------------------------

    @staticmethod
    def _may_create(d: Obj, old_rs: list[Obj]) -> bool:
        if is_rolling(d):
            return True
        # Recreate: the new ReplicaSet only once every old pod is gone.
        return all(desired_replicas(rs) == 0 and count(rs, "replicas") == 0 for rs in old_rs)

    def _create_new(self, d: Obj, old_rs: list[Obj]) -> tuple[Obj, bool] | None:
        """Create the new ReplicaSet: (it, True); or find it already there: (it, False); or
        record a hash collision in the Deployment's status: None."""
        dmeta, spec = meta(d), d.get("spec") or {}
        collisions = (d.get("status") or {}).get("collisionCount")
        template = spec.get("template") or {}
        hash_ = pod_template_hash(template, collisions)
        name = f"{dmeta['name']}-{hash_}"
        desired = desired_replicas(d)
        surge, _ = fenceposts(d)
        selector: dict[str, Any] = copy.deepcopy(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: hash_}
        new_template = with_hash_label(template, hash_)
        annotations = {k: v for k, v in (dmeta.get("annotations") or {}).items() if _copyable(k)}
        annotations.update(
            {
                REVISION: str(max((revision(rs) for rs in old_rs), default=0) + 1),
                DESIRED_REPLICAS: str(desired),
                MAX_REPLICAS: str(desired + surge),
            }
        )
        rs_spec: dict[str, Any] = {"replicas": desired, "selector": selector, "template": new_template}
        if spec.get("minReadySeconds"):
            rs_spec["minReadySeconds"] = spec["minReadySeconds"]
        body = {
            "apiVersion": self._replicasets.api_version,
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": dmeta["namespace"],
                "labels": dict(new_template["metadata"]["labels"]),
                "annotations": annotations,
                "ownerReferences": [new_controller_ref(d)],
            },
            "spec": rs_spec,
        }
        existing = self._cache.get(self._replicasets, dmeta["namespace"], name)
        if existing is None:
            created = self._store.create(self._replicasets, dmeta["namespace"], body)
            if desired > 0:
                self.loop.record_event()  # ScalingReplicaSet: "Scaled up replica set ... from 0"
            return created, True
        if is_controlled_by(existing, dmeta["uid"]) and without_hash(
            (existing.get("spec") or {}).get("template") or {}
        ) == without_hash(template):
            return existing, False
        # Someone else's object has our name: count the collision so the next hash differs.
        status = {**(d.get("status") or {}), "collisionCount": int(collisions or 0) + 1}
        self._store.update(
            self._deployments, dmeta["namespace"], dmeta["name"], status_body(d, status), subresource="status"
        )
        return None

    def _ensure_newest_revision(self, d: Obj, new_rs: Obj, old_rs: list[Obj]) -> Obj:
        # Rolling back to an old template re-uses its ReplicaSet, which becomes the newest revision.
        newest_old = max((revision(rs) for rs in old_rs), default=0)
        if revision(new_rs) > newest_old:
            return new_rs
        annotations = {**(meta(new_rs).get("annotations") or {}), REVISION: str(newest_old + 1)}
        return self._update_rs({**new_rs, "metadata": metadata_for_write(new_rs, annotations=annotations)})

    def _rollout(self, d: Obj, new_rs: Obj | None, old_rs: list[Obj]) -> tuple[Obj | None, list[Obj]]:
        desired = desired_replicas(d)
        if new_rs is not None:
            new_rs = self._scale(d, new_rs, desired)
        # Old pods that may keep running: as many as the new ReplicaSet lacks available ones
        # (all of them under Recreate, which must empty the old ReplicaSets first).
        budget = max(0, desired - count(new_rs, "availableReplicas")) if is_rolling(d) else 0
        scaled: list[Obj] = []
        for rs in sorted(old_rs, key=revision, reverse=True):
            keep = min(desired_replicas(rs), budget)
            budget -= keep
            scaled.append(self._scale(d, rs, keep))
        return new_rs, scaled

    def _scale_paused(self, d: Obj, all_rs: list[Obj]) -> list[Obj]:
        # A paused Deployment is only scaled, and only when one ReplicaSet is active (or, with
        # none active, the newest): upstream's proportional scaling of a paused rollout is not
        # simulated.
        active = [rs for rs in all_rs if desired_replicas(rs) > 0]
        if len(active) > 1 or not all_rs:
            return all_rs
        target = active[0] if active else max(all_rs, key=revision)
        return [self._scale(d, rs, desired_replicas(d)) if rs is target else rs for rs in all_rs]

    def _scale(self, d: Obj, rs: Obj, replicas: int) -> Obj:
        surge, _ = fenceposts(d)
        want = {DESIRED_REPLICAS: str(desired_replicas(d)), MAX_REPLICAS: str(desired_replicas(d) + surge)}
        annotations = meta(rs).get("annotations") or {}
        if desired_replicas(rs) == replicas and all(annotations.get(k) == v for k, v in want.items()):
            return rs
        if desired_replicas(rs) != replicas:
            self.loop.record_event()  # ScalingReplicaSet
        return self._update_rs(
            {
                **rs,
                "metadata": metadata_for_write(rs, annotations={**annotations, **want}),
                "spec": {**(rs.get("spec") or {}), "replicas": replicas},
            }
        )

    def _cleanup(self, d: Obj, old_rs: list[Obj]) -> list[Obj]:
        limit = (d.get("spec") or {}).get("revisionHistoryLimit")
        limit = DEFAULT_REVISION_HISTORY if limit is None else int(limit)
        idle = sorted(
            (
                rs
                for rs in old_rs
                if desired_replicas(rs) == 0 and count(rs, "replicas") == 0 and not being_deleted(rs)
            ),
            key=revision,
        )
        doomed = idle[: max(0, len(idle) - limit)]
        for rs in doomed:
            m = meta(rs)
            try:
                self._store.delete(
                    self._replicasets, m["namespace"], m["name"], preconditions={"uid": m["uid"]}
                )
            except ApiError as err:
                if err.code not in (404, 409):
                    raise
        gone = {id(rs) for rs in doomed}
        return [rs for rs in old_rs if id(rs) not in gone]

    def _update_rs(self, body: Obj) -> Obj:
        m = meta(body)
        return self._store.update(self._replicasets, m["namespace"], m["name"], body)

    # -- writing the Deployment -------------------------------------------------------------

    def _revision_annotations(self, d: Obj, new_rs: Obj | None) -> dict[str, str] | None:
        """The Deployment's annotations with the new ReplicaSet's revision (None: unchanged).

        Upstream writes them with the status, through the status subresource, where a
        Deployment's annotations may change without bumping its generation."""
        annotations = meta(d).get("annotations") or {}
        if (
            not self._annotate_with_status
            or new_rs is None
            or annotations.get(REVISION) == str(revision(new_rs))
        ):
            return None
        return {**annotations, REVISION: str(revision(new_rs))}

    def _write_status(self, d: Obj, status: Obj, annotations: dict[str, str] | None = None) -> None:
        if status == (d.get("status") or {}) and annotations is None:
            return  # no write storms: an unchanged status is never written
        body = status_body(d, status, annotations=annotations) if annotations else status_body(d, status)
        m = meta(d)
        written = self._store.update(self._deployments, m["namespace"], m["name"], body, subresource="status")
        if annotations and (meta(written).get("annotations") or {}).get(REVISION) != annotations[REVISION]:
            self._annotate_with_status = False
