"""The pod a MyPod should have, and whether a live pod must be replaced by it.

The pod is named after the MyPod and controlled by it (garbage-collected with it). It carries
the user's ``podLabels`` and ``podAnnotations`` plus memop's own keys, which win over the
user's:
- label :data:`LABEL` = the MyPod's name: memop watches only pods with this label, and finds a
  MyPod's pod by it;
- annotation :data:`SPEC_HASH` = a hash of ``podSpec`` as the MyPod states it;
- annotation :data:`METADATA` = a hash of ``podLabels`` and ``podAnnotations``.

Change detection compares these hashes with the MyPod, never the live pod's spec or labels with
the desired ones: the API server defaults a pod's spec (and admission may add to it), and none
of that can look like a change. A different hash means the pod is replaced: most of a pod's
spec is immutable, and labels and annotations are replaced with it rather than patched in
place, so that memop needs no permission on pods beyond create, delete, list and watch (a
MyPod's labels change rarely; its pod is one pod). Edits others make to the pod itself are left
alone, as a ReplicaSet leaves its pods' edits alone.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from memop.mypod.api import GROUP, KIND, MYPODS, MyPodSpec
from memop.runtime.cache.store import controller_reference

LABEL = "harryyann.github.io/mypod"
SPEC_HASH = "harryyann.github.io/pod-spec-hash"
METADATA = "harryyann.github.io/pod-metadata"


def _hash(value: Any) -> str:
    """A digest of a JSON value, independent of key order."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def spec_hash(spec: MyPodSpec) -> str:
    """The :data:`SPEC_HASH` of the pod of ``spec``."""
    return _hash(spec.pod_spec)


def _user_labels(spec: MyPodSpec) -> dict[str, str]:
    return {k: v for k, v in spec.pod_labels.items() if k != LABEL}


def _user_annotations(spec: MyPodSpec) -> dict[str, str]:
    return {k: v for k, v in spec.pod_annotations.items() if k not in (SPEC_HASH, METADATA)}


def metadata_record(spec: MyPodSpec) -> str:
    """The :data:`METADATA` annotation of the pod of ``spec``."""
    return _hash([_user_labels(spec), _user_annotations(spec)])


def left_by_namesake(pod: Mapping[str, Any], mypod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` is controlled by an earlier MyPod of ``mypod``'s name (deleted, then
    created again): that one is gone, so the garbage collector deletes the pod."""
    meta = mypod["metadata"]
    refs = (pod.get("metadata") or {}).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            group = str(ref.get("apiVersion") or "").rpartition("/")[0]
            named = (group, ref.get("kind"), ref.get("name")) == (GROUP, KIND, meta["name"])
            return named and ref.get("uid") != meta["uid"]
    return False


def desired_pod(
    mypod: Mapping[str, Any], spec: MyPodSpec, shard_labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The pod ``mypod`` should have (to create it), with ``shard_labels``
    (``Cache.shard_labels``) so it reaches the replica that owns ``mypod`` when memop shards."""
    meta = mypod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {**_user_labels(spec), LABEL: meta["name"], **(shard_labels or {})},
            "annotations": {
                **_user_annotations(spec),
                SPEC_HASH: spec_hash(spec),
                METADATA: metadata_record(spec),
            },
            "ownerReferences": [controller_reference(mypod, MYPODS)],
        },
        "spec": copy.deepcopy(spec.pod_spec),
    }


def _annotation(pod: Mapping[str, Any], key: str) -> Any:
    annotations = (pod.get("metadata") or {}).get("annotations")
    return annotations.get(key) if isinstance(annotations, Mapping) else None


def replacement_reason(pod: Mapping[str, Any], spec: MyPodSpec) -> str | None:
    """What of ``spec`` changed since ``pod`` was made (or memop cannot tell), in words; None
    when ``pod`` is the pod of ``spec``."""
    if _annotation(pod, SPEC_HASH) != spec_hash(spec):
        return "podSpec changed"
    if _annotation(pod, METADATA) != metadata_record(spec):
        return "podLabels or podAnnotations changed"
    return None
