"""The Memcached operator of the Operator SDK tutorial, in the declarative style: a memcached
Deployment at ``spec.size`` replicas, Ready when it is available.

memop's own ``memop.memcached`` package is the tutorial's imperative port (a finalizer, Events,
``status.nodes`` from the pods, two versions and a conversion webhook); this is what the same
core takes declared. Run it: ``memop --controller-module memcached`` (from this folder).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memop.runtime import (
    CustomResource,
    Model,
    ObservedChildren,
    PrinterColumn,
    Status,
    declarative_controller,
)


class MemcachedSpec(Model):
    """The desired state of a Memcached."""

    size: int = Field(default=1, ge=1, le=5)
    """How many memcached pods run."""
    container_port: int = Field(default=11211, ge=1, le=65535)
    """The port memcached listens on."""


class MemcachedStatus(Status):
    """The observed state of a Memcached."""

    ready_replicas: int = 0
    """How many memcached pods are ready."""


class Memcached(
    CustomResource,
    group="cache.example.com",
    version="v1alpha1",
    printer_columns=(
        PrinterColumn("Size", ".spec.size", "integer"),
        PrinterColumn("Ready", ".status.readyReplicas", "integer"),
    ),
):
    """Memcached is the Schema for the memcacheds API."""

    spec: MemcachedSpec = MemcachedSpec()
    status: MemcachedStatus = MemcachedStatus()


def children(memcached: Memcached) -> list[dict[str, Any]]:
    """The memcached Deployment."""
    labels = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": memcached.name}
    container = {
        "name": "memcached",
        "image": "memcached:1.6.26-alpine3.19",
        "command": ["memcached", "--memory-limit=64", "-o", "modern", "-v"],
        "ports": [{"containerPort": memcached.spec.container_port, "name": "memcached"}],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 1001,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": memcached.name},
            "spec": {
                "replicas": memcached.spec.size,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        }
    ]


def status(memcached: Memcached, observed: ObservedChildren) -> dict[str, Any]:
    """The ready pods, from the Deployment's status."""
    deployment = observed.get("Deployment") or {}
    return {"readyReplicas": (deployment.get("status") or {}).get("readyReplicas", 0)}


SAMPLE = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {"name": "sample"},
          "spec": {"size": 3}}  # fmt: skip
DEFINITION = declarative_controller(Memcached, children, status=status, samples=[SAMPLE])
