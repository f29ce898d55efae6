"""The PodSet operator (the "k8s operator practice" kubebuilder tutorial's): ``spec.replicas``
pods, created and deleted directly, built on ``memop.runtime``.

:data:`DEFINITION` is what the manager, the manifests and the demo know of it.
"""

from __future__ import annotations

import copy
from typing import Any

from memop.podset import controller
from memop.podset.api import API_VERSION, GROUP, KIND, PLURAL
from memop.podset.crd import crd
from memop.runtime.api.permissions import Rule, own_kind, watched
from memop.runtime.controller.definition import ControllerDefinition

__all__ = ["DEFINITION", "SAMPLES"]

# manifests/samples/ (a test keeps them equal). The first is the tutorial's own sample
# (config/samples/batch_v1_podset.yaml): its spec is left to the user, so every field takes its
# default, one busybox pod.
SAMPLES: dict[str, dict[str, Any]] = {
    "batch_v1_podset.yaml": {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "labels": {
                "app.kubernetes.io/name": "podset",
                "app.kubernetes.io/instance": "podset-sample",
                "app.kubernetes.io/part-of": "operator-practice",
                "app.kubernetes.io/managed-by": "kustomize",
                "app.kubernetes.io/created-by": "operator-practice",
            },
            "name": "podset-sample",
        },
        "spec": {},
    },
    "batch_v1_podset_template.yaml": {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "podset-web"},
        "spec": {
            "replicas": 3,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "nginx",
                            "image": "nginx:1.27-alpine",
                            "ports": [{"containerPort": 80, "name": "http"}],
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "32Mi"},
                                "limits": {"memory": "64Mi"},
                            },
                        }
                    ]
                },
            },
        },
    },
}

RULES: tuple[Rule, ...] = (
    *own_kind(GROUP, PLURAL, owner_references=True),
    *watched("", "pods", "cache (the PodSets' pods); start-up check", "list"),
    *watched("", "pods", "cache", "watch"),
    *watched("", "pods", "reconciler: scale up, replace pods gone or finished", "create"),
    *watched("", "pods", "reconciler: scale down", "delete"),
)


DEFINITION = ControllerDefinition(
    name=controller.CONTROLLER_NAME,
    description="a PodSet keeps spec.replicas pods of its template running, managed directly",
    setup=controller.setup,
    crds=lambda: [crd()],
    rules=RULES,
    samples=lambda: copy.deepcopy(SAMPLES),
)
