"""Project: a team's own namespace, closed to traffic from other namespaces, with a
ServiceAccount for its deployments. A Project is cluster-scoped; it owns its Namespace (and the
Namespace's content goes with it).

Run it: ``memop --controller-module project`` (from this folder), test it: ``pytest``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from memop.runtime import (
    Cel,
    CustomResource,
    DNS1123Label,
    LabelKey,
    LabelValue,
    Model,
    ObservedChildren,
    PrinterColumn,
    Status,
    declarative_controller,
)

RESERVED = ("default", "kube-system", "kube-public", "kube-node-lease")


class ProjectSpec(Model):
    """The desired state of a Project."""

    namespace: Annotated[DNS1123Label, Cel("self == oldSelf", message="namespace is immutable")]
    """The Project's namespace."""
    labels: dict[LabelKey, LabelValue] = {}
    """Labels for the namespace (a cost centre, a team)."""
    allow_from: list[DNS1123Label] = Field(default=[], max_length=20)
    """Other namespaces allowed to reach the Project's pods."""
    service_account: DNS1123Label = "deployer"
    """The ServiceAccount the team's deployments run as."""


class ProjectStatus(Status):
    """The observed state of a Project."""

    phase: str = ""
    """The namespace's phase (Active, Terminating)."""


class Project(
    CustomResource,
    group="tenancy.example.com",
    version="v1",
    namespaced=False,
    short_names=("proj",),
    printer_columns=(
        PrinterColumn("Namespace", ".spec.namespace"),
        PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
    ),
):
    """A team's project: a namespace of its own and what it needs to be used safely."""

    spec: ProjectSpec
    status: ProjectStatus = ProjectStatus()


def children(project: Project) -> list[dict[str, Any]]:
    """The Namespace, its NetworkPolicy and its ServiceAccount."""
    spec = project.spec
    allowed: list[dict[str, Any]] = [{"podSelector": {}}]  # the namespace's own pods
    allowed += [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}
        for name in spec.allow_from
    ]
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": spec.namespace, "labels": spec.labels},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "deny-from-other-namespaces", "namespace": spec.namespace},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": allowed}]},
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": spec.service_account, "namespace": spec.namespace},
        },
    ]


def status(project: Project, observed: ObservedChildren) -> dict[str, Any]:
    """The namespace's phase."""
    return {"phase": ((observed.get("Namespace") or {}).get("status") or {}).get("phase", "")}


def validate(new: Project, old: Project | None) -> list[str]:
    """What the schema cannot say: the system's namespaces are nobody's project."""
    if new.spec.namespace in RESERVED or new.spec.namespace.startswith("kube-"):
        raise ValueError(f"spec.namespace: {new.spec.namespace!r} is reserved for the system")
    return [] if new.spec.labels else ["spec.labels is empty: cost reports will not find this project"]


SAMPLE = {
    "apiVersion": "tenancy.example.com/v1",
    "kind": "Project",
    "metadata": {"name": "shop"},
    "spec": {"namespace": "shop", "labels": {"team": "shop"}, "allowFrom": ["ingress-nginx"]},
}

DEFINITION = declarative_controller(Project, children, status=status, validate=validate, samples=[SAMPLE])
