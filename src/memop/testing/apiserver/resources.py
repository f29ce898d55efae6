"""What the in-memory API server serves: one :class:`ResourceType` per group/version/resource.

A ResourceType is a value: two of them are equal when they name the same group, version,
resource, kind and scope, whatever their schema (a CRD update replaces the schema, not the
identity), so they can key dictionaries across CRD updates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memop.runtime.client.resources import rest_path


@dataclass(frozen=True)
class ResourceType:
    """A served group/version/resource with its kind, scope and discovery names."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str
    short_names: tuple[str, ...] = ()
    has_status: bool = False
    categories: tuple[str, ...] = ()
    # The openAPIV3Schema of this version (custom resources only); not part of the identity.
    schema: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def api_version(self) -> str:
        """``apps/v1``, or ``v1`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def group_resource(self) -> str:
        """``deployments.apps`` / ``pods``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self) -> str:
        """``Deployment.apps`` / ``Pod``, as Invalid errors name objects."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path of the collection, or of one object (and its subresource) when named."""
        return rest_path(
            self.group,
            self.version,
            self.plural,
            self.namespaced,
            namespace=namespace,
            name=name,
            subresource=subresource,
        )

    def __str__(self) -> str:
        return f"{self.group_resource}/{self.version}"


# The resources the machinery itself acts on, whichever kind's module serves them: Namespaces
# (their lifecycle in the store), CustomResourceDefinitions (the tables of custom resources)
# and webhook configurations (admission). Defined here so that the machinery does not import
# the kinds (memop.testing.kinds); the kinds' modules re-export them.
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", False, "namespace", ("ns",), has_status=True)
CRDS = ResourceType(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    False,
    "customresourcedefinition",
    ("crd", "crds"),
    has_status=True,
    categories=("api-extensions",),
)
ADMISSION_GROUP = "admissionregistration.k8s.io"
MUTATING = ResourceType(
    ADMISSION_GROUP,
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
    "mutatingwebhookconfiguration",
    categories=("api-extensions",),
)
VALIDATING = ResourceType(
    ADMISSION_GROUP,
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
    "validatingwebhookconfiguration",
    categories=("api-extensions",),
)
