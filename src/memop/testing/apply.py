"""Objects from YAML files, created in an API server: ``python -m memop.testing serve --apply``.

So that a project's operator can be run against the in-memory server with its CRDs and samples
in place (``--apply manifests/crd --apply manifests/samples``), before the kubeconfig, the
server's readiness signal, is written.

- :func:`load_objects`: every object of the given YAML files, a folder standing for its
  ``.yaml``/``.yml`` files in name order (``kustomization.yaml`` excepted), documents in file
  order; empty documents are skipped.
- :func:`create_objects`: the CustomResourceDefinitions first, each waited for until
  Established, then the other objects in order (namespaced ones without a namespace go to
  ``default``; a namespace that does not exist is created). An object that exists already is
  left as it is. Kinds are the built-in ones :mod:`memop.runtime.client.resources` names and
  those of the CRDs created.

Every problem is an :class:`ApplyError` whose message is one line naming the file or object.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from memop.runtime.client import resources
from memop.runtime.client.client import Client
from memop.runtime.client.errors import AlreadyExists, ApiError
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, Resource

YAML_SUFFIXES = (".yaml", ".yml")
SKIPPED_FILES = ("kustomization.yaml", "kustomization.yml")
CRD_KEY = (CUSTOM_RESOURCE_DEFINITIONS.api_version, CUSTOM_RESOURCE_DEFINITIONS.kind)


class ApplyError(ValueError):
    """A file or object that cannot be created; the message is one line."""


@dataclass(frozen=True)
class SourcedObject:
    """An object and where it was read (``file`` or ``file#n`` for the n-th document)."""

    obj: dict[str, Any]
    source: str


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(
            p
            for p in path.iterdir()
            if p.suffix in YAML_SUFFIXES and p.name not in SKIPPED_FILES and p.is_file()
        )
    if path.is_file():
        return [path]
    raise ApplyError(f"{path}: no such file or folder")


def load_objects(paths: Sequence[Path]) -> list[SourcedObject]:
    """Every object of ``paths`` (see the module docstring); ApplyError on a file that cannot be
    read or an object without apiVersion, kind or metadata.name."""
    objects: list[SourcedObject] = []
    for path in paths:
        for file in _files(path):
            try:
                documents = list(yaml.safe_load_all(file.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
                detail = str(error).replace("\n", " ")
                raise ApplyError(f"{file}: cannot be read as YAML: {detail}") from None
            numbered = len(documents) > 1
            for index, document in enumerate(documents, 1):
                if document is None:
                    continue
                source = f"{file}#{index}" if numbered else str(file)
                if not isinstance(document, dict) or not all(
                    isinstance(document.get(key), str) for key in ("apiVersion", "kind")
                ):
                    raise ApplyError(f"{source}: not a Kubernetes object (apiVersion and kind are needed)")
                name = (document.get("metadata") or {}).get("name")
                if not isinstance(name, str) or not name:
                    raise ApplyError(f"{source}: the {document['kind']} has no metadata.name")
                objects.append(SourcedObject(document, source))
    return objects


def builtin_resources() -> dict[tuple[str, str], Resource]:
    """(apiVersion, kind) -> Resource of the built-in kinds memop's runtime names."""
    found = (value for value in vars(resources).values() if isinstance(value, Resource))
    return {(resource.api_version, resource.kind): resource for resource in found}


def crd_resources(crd: dict[str, Any]) -> dict[tuple[str, str], Resource]:
    """(apiVersion, kind) -> Resource of each version a CRD serves."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    served = {}
    for version in spec.get("versions") or ():
        resource = Resource(
            spec.get("group", ""),
            version.get("name", ""),
            names.get("plural", ""),
            names.get("kind", ""),
            namespaced,
        )
        served[(resource.api_version, resource.kind)] = resource
    return served


async def _established(client: Client, name: str, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while True:
            crd = await client.get(CUSTOM_RESOURCE_DEFINITIONS, name)
            conditions = (crd.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                return
            await asyncio.sleep(0.05)


async def create_objects(client: Client, objects: Sequence[SourcedObject], timeout: float = 30.0) -> int:
    """Create ``objects`` (see the module docstring); returns how many were created."""
    known = builtin_resources()
    created = 0
    crds = [item for item in objects if (item.obj["apiVersion"], item.obj["kind"]) == CRD_KEY]
    others = [item for item in objects if (item.obj["apiVersion"], item.obj["kind"]) != CRD_KEY]
    for item in crds:
        created += await _create(client, CUSTOM_RESOURCE_DEFINITIONS, item, None)
        try:
            await _established(client, item.obj["metadata"]["name"], timeout)
        except TimeoutError:
            raise ApplyError(f"{item.source}: the CRD was not Established within {timeout:g}s") from None
        known.update(crd_resources(item.obj))
    namespaces: set[str] = set()
    for item in others:
        resource = known.get((item.obj["apiVersion"], item.obj["kind"]))
        if resource is None:
            raise ApplyError(
                f"{item.source}: unknown kind {item.obj['kind']} ({item.obj['apiVersion']}): apply its CRD "
                "first, in the same command"
            )
        namespace = None
        if resource.namespaced:
            namespace = (item.obj.get("metadata") or {}).get("namespace") or "default"
            if namespace not in namespaces:
                with contextlib.suppress(AlreadyExists):
                    await client.create(NAMESPACES, {"metadata": {"name": namespace}})
                namespaces.add(namespace)
        created += await _create(client, resource, item, namespace)
    return created


async def _create(client: Client, resource: Resource, item: SourcedObject, namespace: str | None) -> int:
    try:
        await client.create(resource, item.obj, namespace)
    except AlreadyExists:
        return 0
    except ApiError as error:
        raise ApplyError(
            f"{item.source}: the API server refused the {item.obj['kind']}: {error.message}"
        ) from None
    return 1
