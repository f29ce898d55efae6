"""The Memcached operator: API types, desired state and reconciler, built on ``memop.runtime``.

:data:`DEFINITION` is what the manager, the manifests and the demo know of it.
"""

from __future__ import annotations

import copy
from typing import Any

from memop.memcached import controller
from memop.memcached.api import GROUP, PLURAL
from memop.memcached.crd import crd
from memop.runtime.api.permissions import Rule, own_kind, watched
from memop.runtime.controller.controller import Controller
from memop.runtime.controller.definition import ControllerDefinition, SetupContext

__all__ = ["DEFINITION", "SAMPLE"]

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
    samples=lambda: {"cache_v1alpha1_memcached.yaml": copy.deepcopy(SAMPLE)},
)
