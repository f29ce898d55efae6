"""CustomResourceDefinitions built from code, so the CRD a controller serves is never edited by hand.

A controller declares its names (:class:`CrdNames`), its whole-object OpenAPI schema and its
printer columns; :func:`custom_resource_definition` builds the ``apiextensions.k8s.io/v1``
object in the layout controller-gen writes (one served, stored version with the status
subresource), and :func:`crd_yaml` the deterministic YAML committed under ``manifests/crd``.

A kind with several versions gives one :class:`CrdVersion` each (its own schema and columns,
whether it is served, which one is stored) as ``versions=``. The CRD built here never has a
``spec.conversion``: the API server's default (``None``) only rewrites ``apiVersion``, and
a conversion webhook is added by the manifests of the install (its Service and CA bundle
belong to the install, not to the kind).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

# The command that writes memop's own CRD files (memop.manifests), named in each file's header
# unless crd_yaml is given another (a project's: ``memop manifests --project NAME``).
GENERATE_COMMAND = "memop manifests --project memop"


@dataclass(frozen=True)
class CrdNames:
    """The names of a custom resource kind, as ``spec.names`` states them, and its scope
    (namespaced unless ``namespaced=False``)."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    namespaced: bool = True

    @property
    def name(self) -> str:
        """The CRD's own name: ``<plural>.<group>``."""
        return f"{self.plural}.{self.group}"


def printer_column(
    name: str, json_path: str, column_type: str, description: str = "", *, priority: int = 0
) -> dict[str, Any]:
    """One ``additionalPrinterColumns`` entry (keys sorted, as the committed YAML has them).
    A ``priority`` above 0 shows the column in ``kubectl get -o wide`` only."""
    column: dict[str, Any] = {}
    if description:
        column["description"] = description
    column["jsonPath"] = json_path
    column["name"] = name
    if priority:
        column["priority"] = priority
    column["type"] = column_type
    return column


AGE_COLUMN = printer_column("Age", ".metadata.creationTimestamp", "date")


def object_schema(
    description: str, spec: Mapping[str, Any], status: Mapping[str, Any], **extra: Any
) -> dict[str, Any]:
    """The whole-object schema: apiVersion, kind, metadata, and the given spec and status
    schemas (``extra`` adds keys such as ``x-kubernetes-validations``)."""
    schema: dict[str, Any] = {
        "description": description,
        "properties": {
            "apiVersion": {
                "description": (
                    "APIVersion defines the versioned schema of this representation of an object."
                ),
                "type": "string",
            },
            "kind": {
                "description": (
                    "Kind is a string value representing the REST resource this object represents."
                ),
                "type": "string",
            },
            "metadata": {"type": "object"},
            "spec": dict(spec),
            "status": dict(status),
        },
        "type": "object",
    }
    schema.update(extra)
    return schema


@dataclass(frozen=True)
class CrdVersion:
    """One version of a kind: its name, whole-object schema (:func:`object_schema`) and printer
    columns, whether the API server serves it, and whether objects are stored at it (exactly
    one version of a CRD is). ``subresources`` defaults to the status subresource alone; an
    empty mapping gives none."""

    name: str
    schema: Mapping[str, Any]
    printer_columns: Sequence[Mapping[str, Any]] = ()
    served: bool = True
    storage: bool = False
    subresources: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``spec.versions`` entry (a fresh dict; the schema is copied deeply)."""
        version = {
            "additionalPrinterColumns": [dict(c) for c in self.printer_columns],
            "name": self.name,
            "schema": {"openAPIV3Schema": copy.deepcopy(dict(self.schema))},
            "served": self.served,
            "storage": self.storage,
        }
        subresources = {"status": {}} if self.subresources is None else copy.deepcopy(dict(self.subresources))
        if subresources:
            version["subresources"] = subresources
        return version


def custom_resource_definition(
    names: CrdNames,
    schema: Mapping[str, Any] | None = None,
    printer_columns: Sequence[Mapping[str, Any]] = (),
    *,
    versions: Sequence[CrdVersion] = (),
) -> dict[str, Any]:
    """The CRD (a fresh dict), in the scope ``names`` gives; with ``schema``, the version has
    the status subresource.

    With ``schema`` (and ``printer_columns``): one version, ``names.version``, served and stored.
    With ``versions`` instead: those, in that order; exactly one is stored, and it must be
    ``names.version`` (the version the controller reads, as :class:`CrdNames` says). Raises
    ValueError when both or neither are given, or the versions are inconsistent.
    """
    if (schema is None) == (not versions):
        raise ValueError(f"{names.name}: give either a schema or versions, not both or neither")
    if schema is not None:
        versions = [CrdVersion(names.version, schema, printer_columns, served=True, storage=True)]
    elif printer_columns:
        raise ValueError(f"{names.name}: printer columns belong to each of the versions")
    _check_versions(names, versions)
    spec_names: dict[str, Any] = {"categories": list(names.categories)} if names.categories else {}
    spec_names.update(kind=names.kind, listKind=f"{names.kind}List", plural=names.plural)
    if names.short_names:
        spec_names["shortNames"] = list(names.short_names)
    spec_names["singular"] = names.singular
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": names.name},
        "spec": {
            "group": names.group,
            "names": spec_names,
            "scope": "Namespaced" if names.namespaced else "Cluster",
            "versions": [v.to_dict() for v in versions],
        },
    }


def _check_versions(names: CrdNames, versions: Sequence[CrdVersion]) -> None:
    seen = [v.name for v in versions]
    if len(set(seen)) != len(seen):
        raise ValueError(f"{names.name}: a version is listed twice: {seen}")
    stored = [v.name for v in versions if v.storage]
    if stored != [names.version]:
        raise ValueError(
            f"{names.name}: exactly one version must be stored, {names.version} (CrdNames.version),"
            f" not {stored or 'none'}"
        )
    if not any(v.served for v in versions):
        raise ValueError(f"{names.name}: no version is served")


def crd_yaml(crd: Mapping[str, Any], source: str, command: str = GENERATE_COMMAND) -> str:
    """The CRD as the YAML document committed under manifests/crd (deterministic). ``source``
    names the module the schema is declared in and ``command`` the one that writes the file,
    for the header.

    The header's comments are followed by the object itself, with no ``---`` between them: a
    reader that takes only the first YAML document of a file (operator-registry, for an OLM
    bundle) would otherwise get an empty one."""
    header = (
        f"# Generated by `{command}` from {source}. Do not edit by hand:\n"
        "# change the API declaration and regenerate.\n"
    )
    return header + yaml.safe_dump(dict(crd), sort_keys=False, default_flow_style=False, width=100)
