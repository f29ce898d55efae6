"""The MyPod operator: one pod per MyPod, replaced when its podSpec changes, its phase and IPs
in status. From the tutorial "使用Kubebuilder编写Operator" (harryyann/mypod-operator).

:data:`DEFINITION` is what the manager, the manifests and the demo know of it.
"""

from __future__ import annotations

import copy
from typing import Any

from memop.mypod import controller
from memop.mypod.api import GROUP, PLURAL
from memop.mypod.crd import crd
from memop.runtime.api.permissions import Rule, own_kind, watched
from memop.runtime.controller.definition import ControllerDefinition

__all__ = ["DEFINITION", "SAMPLE"]

# The tutorial's own sample (config/samples/_v1_mypod.yaml of harryyann/mypod-operator),
# unchanged; manifests/samples/harryyann.github.io_v1_mypod.yaml (a test keeps them equal).
SAMPLE: dict[str, Any] = {
    "apiVersion": "harryyann.github.io/v1",
    "kind": "MyPod",
    "metadata": {"name": "mypod-sample", "namespace": "test-mypod"},
    "spec": {
        "podAnnotations": {
            "v2-subnet": "5ca060b7-0763-40fc-accb-05c2387835a1",
            "v2-tenant": "20a28f78a1a646379db70759a3975e02",
            "v2-vpc": "6af350be-c456-44bc-909d-4b92c48b3b54",
        },
        "podLabels": {"sym-app": "mypod"},
        "podSpec": {
            "containers": [
                {
                    "image": "ncr.nie.netease.com/gcr.io/google-containers/pause:3.1",
                    "imagePullPolicy": "IfNotPresent",
                    "name": "main",
                    "resources": {"limits": {"cpu": "50m", "memory": "50Mi"}},
                }
            ],
            "nodeSelector": {"project": "test"},
        },
    },
}

RULES: tuple[Rule, ...] = (
    *own_kind(GROUP, PLURAL, owner_references=True),
    *watched("", "pods", "cache (pods labelled harryyann.github.io/mypod); start-up check", "list"),
    *watched("", "pods", "cache", "watch"),
    *watched("", "pods", "reconciler: the MyPod's pod", "create"),
    *watched("", "pods", "reconciler: replace the pod when its spec changed (uid precondition)", "delete"),
)


DEFINITION = ControllerDefinition(
    name=controller.CONTROLLER_NAME,
    description="a MyPod keeps one owned pod of its podSpec, replaced when the podSpec changes",
    setup=controller.setup,
    crds=lambda: [crd()],
    rules=RULES,
    samples=lambda: {"harryyann.github.io_v1_mypod.yaml": copy.deepcopy(SAMPLE)},
)
