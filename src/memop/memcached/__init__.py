"""The Memcached operator: API types, desired state and reconciler, built on ``memop.runtime``.

:data:`DEFINITION` is what the manager, the manifests and the demo know of it: the controller,
its CRD (v1alpha1 stored and read, v1beta1 served too), the conversion between the two
(``conversion``), the admission webhook (``webhooks``), permissions and samples.
"""

from __future__ import annotations

import copy
from typing import Any

from memop.memcached import controller
from memop.memcached.api import GROUP, PLURAL
from memop.memcached.conversion import CONVERSION
from memop.memcached.crd import crd
from memop.memcached.webhooks import WEBHOOK
from memop.runtime.api.permissions import Rule, own_kind, watched
from memop.runtime.controller.controller import Controller
from memop.runtime.controller.definition import ControllerDefinition, SetupContext

__all__ = ["DEFINITION", "SAMPLE", "SAMPLE_V1BETA1"]

# manifests/samples/cache_v1alpha1_memcached.yaml (a test keeps them equal).
SAMPLE: dict[str, Any] = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Memcached",
    "metadata": {"name": "memcached-sample"},
    "spec": {
        "size": 3,
        "image": "memcached:1.6.26-alpine3.19",
        "memoryLimitMiB": 64,
        "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "96Mi"}},
    },
}

# manifests/samples/cache_v1beta1_memcached.yaml: the same cache at v1beta1, on another port.
# Its own name, so both samples can be applied to one namespace (the demo does).
SAMPLE_V1BETA1: dict[str, Any] = {
    "apiVersion": "cache.example.com/v1beta1",
    "kind": "Memcached",
    "metadata": {"name": "memcached-sample-v1beta1"},
    "spec": {
        "size": 3,
        "image": "memcached:1.6.26-alpine3.19",
        "memoryLimitMiB": 64,
        "containerPort": 11311,
        "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "96Mi"}},
    },
}

RULES: tuple[Rule, ...] = (
    *own_kind(GROUP, PLURAL, finalizers=True, owner_references=True),
    *watched("apps", "deployments", "cache; start-up check", "list"),
    *watched("apps", "deployments", "cache", "watch"),
    *watched("apps", "deployments", "reconciler: the Memcached's Deployment", "create"),
    *watched("apps", "deployments", "reconciler: drift and scaling (merge patch)", "patch"),
    *watched("apps", "deployments", "reconciler: recreate when the immutable selector drifted", "delete"),
    *watched("", "pods", "cache (status.nodes); start-up check", "list"),
    *watched("", "pods", "cache", "watch"),
)


def _setup(context: SetupContext) -> Controller:
    return controller.setup(
        context.cache,
        context.client,
        context.recorder,
        max_concurrent_reconciles=context.max_concurrent_reconciles,
    )


DEFINITION = ControllerDefinition(
    name=controller.CONTROLLER_NAME,
    description="a Memcached keeps an owned Deployment of memcached pods at spec.size",
    setup=_setup,
    crds=lambda: [crd()],
    rules=RULES,
    samples=lambda: {
        "cache_v1alpha1_memcached.yaml": copy.deepcopy(SAMPLE),
        "cache_v1beta1_memcached.yaml": copy.deepcopy(SAMPLE_V1BETA1),
    },
    webhooks=(WEBHOOK,),
    conversions=(CONVERSION,),
)
