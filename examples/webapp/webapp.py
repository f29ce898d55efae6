"""WebApp: a Deployment behind a Service and an Ingress, with a PodDisruptionBudget; Ready when
the Deployment is available. Run it: ``memop --controller-module webapp`` (from this folder)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memop.runtime import (
    CustomResource,
    DNS1123Subdomain,
    Model,
    ObservedChildren,
    PrinterColumn,
    Quantity,
    Status,
    declarative_controller,
)


class WebAppSpec(Model):
    """The desired state of a WebApp."""

    image: str = Field(min_length=1)
    """The container image that serves the application."""
    replicas: int = Field(default=2, ge=1, le=100)
    """How many pods serve it."""
    port: int = Field(default=8080, ge=1, le=65535)
    """The port the container listens on."""
    host: DNS1123Subdomain | None = None
    """The host name the Ingress routes to the application; none: every host."""
    memory: Quantity = Quantity("128Mi")
    """The memory each pod requests, and its limit."""
    min_available: int = Field(default=1, ge=0)
    """How many pods a voluntary disruption (a node drain) must leave running."""


class WebAppStatus(Status):
    """The observed state of a WebApp."""

    available_replicas: int = 0
    """How many pods are available."""


class WebApp(
    CustomResource,
    group="apps.example.com",
    version="v1",
    short_names=("wa",),
    printer_columns=(
        PrinterColumn("Image", ".spec.image"),
        PrinterColumn("Available", ".status.availableReplicas", "integer"),
        PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
    ),
):
    """A web application: a Deployment behind a Service and an Ingress."""

    spec: WebAppSpec
    status: WebAppStatus = WebAppStatus()


def children(app: WebApp) -> list[dict[str, Any]]:
    """The Deployment, Service, Ingress and PodDisruptionBudget a WebApp should have."""
    name, spec = app.name, app.spec
    labels = {"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": name}
    meta = {"name": name, "labels": labels}
    container = {
        "name": "web",
        "image": spec.image,
        "ports": [{"name": "http", "containerPort": spec.port}],
        "resources": {"requests": {"memory": str(spec.memory)}, "limits": {"memory": str(spec.memory)}},
    }
    backend = {"service": {"name": name, "port": {"name": "http"}}}
    rule = {"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}
    pod = {"metadata": {"labels": labels}, "spec": {"containers": [container]}}
    deployment = {"replicas": spec.replicas, "selector": {"matchLabels": labels}, "template": pod}
    service = {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
    ingress = {"rules": [{"host": spec.host, **rule} if spec.host else rule]}
    budget = {"minAvailable": spec.min_available, "selector": {"matchLabels": labels}}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": deployment},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": service},
        {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": ingress},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta, "spec": budget},
    ]


def status(app: WebApp, observed: ObservedChildren) -> dict[str, Any]:
    """What the status reports besides the conditions: the Deployment's available pods."""
    deployment = observed.get("Deployment") or {}
    return {"availableReplicas": (deployment.get("status") or {}).get("availableReplicas", 0)}


def validate(new: WebApp, old: WebApp | None) -> list[str]:
    """What the schema cannot say: a budget that would block every drain; a moving image tag."""
    if new.spec.min_available >= new.spec.replicas:
        raise ValueError(
            f"spec.minAvailable ({new.spec.min_available}) must be less than spec.replicas "
            f"({new.spec.replicas}): no pod could ever be evicted"
        )
    if ":" not in new.spec.image.rsplit("/", 1)[-1] or new.spec.image.endswith(":latest"):
        return [f"spec.image {new.spec.image!r} has no fixed tag: pods may run different versions"]
    return []


SAMPLE = {
    "apiVersion": "apps.example.com/v1",
    "kind": "WebApp",
    "metadata": {"name": "hello"},
    "spec": {"image": "nginx:1.27", "replicas": 2, "host": "hello.example.com"},
}

DEFINITION = declarative_controller(
    WebApp, children, status=status, validate=validate, samples={"webapp.yaml": SAMPLE}
)
