"""JSON decoding and encoding of what memop reads and writes: the standard library against
memop.runtime.util.jsoncodec (orjson).

Run from the repository root as ``python bench/jsoncodec.py``; prints one JSON object. The
samples are what memop handles per Memcached: the watch event of its Deployment (built by
memop's own ``desired_deployment`` and given a status and managedFields as a real API server
adds them), of the Memcached itself and of one of its pods, and the bodies memop sends (the
Deployment it creates, the status patch). Each figure is the best of 5 timings, in
microseconds per call, on this process alone: no I/O.
"""

from __future__ import annotations

import json
import platform
import timeit
from collections.abc import Callable
from typing import Any

from memop.memcached.api import parse_spec
from memop.memcached.desired import desired_deployment
from memop.runtime.util import jsoncodec

_MANAGED = [
    {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "apps/v1",
        "time": "2026-11-26T10:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:replicas": {}, "f:conditions": {".": {}, 'k:{"type":"Available"}': {}}}},
        "subresource": "status",
    }
]


def _memcached() -> dict[str, Any]:
    return {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {
            "name": "mc-1",
            "namespace": "bench-0",
            "uid": "0f1c7d6e-5a4b-4c3d-9e2f-1a2b3c4d5e6f",
            "resourceVersion": "123456",
            "generation": 1,
            "creationTimestamp": "2026-11-26T10:00:00Z",
            "finalizers": ["cache.example.com/finalizer"],
            "managedFields": _MANAGED,
        },
        "spec": {"size": 1},
        "status": {
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "Reconciled",
                    "message": "Deployment mc-1 has 1/1 ready replicas",
                    "lastTransitionTime": "2026-11-26T10:00:01Z",
                    "observedGeneration": 1,
                }
            ]
        },
    }


def _deployment(memcached: dict[str, Any]) -> dict[str, Any]:
    deployment = desired_deployment(memcached, parse_spec(memcached))
    deployment["metadata"].update(
        uid="1f1c7d6e-5a4b-4c3d-9e2f-1a2b3c4d5e6f",
        resourceVersion="123457",
        generation=1,
        creationTimestamp="2026-11-26T10:00:00Z",
        managedFields=_MANAGED * 2,
    )
    deployment["status"] = {
        "observedGeneration": 1,
        "replicas": 1,
        "updatedReplicas": 1,
        "unavailableReplicas": 1,
        "conditions": [
            {
                "type": "Progressing",
                "status": "True",
                "lastUpdateTime": "2026-11-26T10:00:00Z",
                "lastTransitionTime": "2026-11-26T10:00:00Z",
                "reason": "NewReplicaSetCreated",
                "message": 'Created new replica set "mc-1-5d8f7b9c4d"',
            }
        ],
    }
    return deployment


def _best_microseconds(call: Callable[[], object], number: int = 5000) -> float:
    return round(min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6, 2)


def main() -> None:
    memcached = _memcached()
    deployment = _deployment(memcached)
    samples = {
        "deployment_watch_event": {"type": "MODIFIED", "object": deployment},
        "memcached_watch_event": {"type": "MODIFIED", "object": memcached},
    }
    bodies = {
        "deployment_create_body": desired_deployment(memcached, parse_spec(memcached)),
        "status_patch_body": {"status": memcached["status"]},
    }
    report: dict[str, Any] = {"benchmark": "jsoncodec", "unit": "microseconds per call"}
    for name, value in samples.items():
        line = json.dumps(value, separators=(",", ":")).encode()
        stdlib = _best_microseconds(lambda line=line: json.loads(line))
        ours = _best_microseconds(lambda line=line: jsoncodec.loads(line))
        report[name] = {
            "bytes": len(line),
            "json_loads": stdlib,
            "jsoncodec_loads": ours,
            "speed-up": round(stdlib / ours, 2),
        }
    for name, value in bodies.items():
        stdlib = _best_microseconds(lambda value=value: json.dumps(value, separators=(",", ":")).encode())
        ours = _best_microseconds(lambda value=value: jsoncodec.dumps(value))
        report[name] = {"json_dumps": stdlib, "jsoncodec_dumps": ours, "speed-up": round(stdlib / ours, 2)}
    template = deployment["spec"]["template"]["spec"]
    stdlib = _best_microseconds(lambda: json.dumps(template, sort_keys=True, separators=(",", ":")))
    ours = _best_microseconds(lambda: jsoncodec.canonical(template))
    report["pod_template_canonical_key"] = {
        "json_dumps_sorted": stdlib,
        "jsoncodec_canonical": ours,
        "speed-up": round(stdlib / ours, 2),
    }
    report["python"] = platform.python_version()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
