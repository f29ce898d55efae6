"""A tiny operator written as a user would, on memop's public names only: an Echo's status echoes
its ``spec.message``.

The plugin's tests use it in-process and copy this file, as it is, into the projects pytester
makes (so it imports nothing from memop's tests). ``MUTATE_CACHE`` set to True makes the
reconciler change the cached object in place, which the plugin's check must catch.
"""

from __future__ import annotations

from typing import Any

from memop.project import Project
from memop.runtime import (
    Cache,
    Client,
    Controller,
    ControllerBuilder,
    ControllerDefinition,
    Request,
    Resource,
    Result,
    SetupContext,
    own_kind,
)

GROUP = "test.example.com"
ECHOES = Resource(GROUP, "v1", "echoes", "Echo")
MUTATE_CACHE = False


def crd(resource: Resource = ECHOES) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{resource.plural}.{resource.group}"},
        "spec": {
            "group": resource.group,
            "names": {
                "plural": resource.plural,
                "singular": resource.kind.lower(),
                "kind": resource.kind,
                "listKind": f"{resource.kind}List",
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": resource.version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"message": {"type": "string"}}},
                                "status": {"type": "object", "properties": {"echo": {"type": "string"}}},
                            },
                        }
                    },
                }
            ],
        },
    }


def echo(name: str, message: str, resource: Resource = ECHOES) -> dict[str, Any]:
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name},
        "spec": {"message": message},
    }


class EchoReconciler:
    def __init__(self, client: Client, cache: Cache, resource: Resource) -> None:
        self.client = client
        self.cache = cache
        self.resource = resource

    async def reconcile(self, request: Request) -> Result | None:
        current = self.cache.get(self.resource, request.name, request.namespace)
        if current is None:
            return None
        message = (current.get("spec") or {}).get("message", "")
        if MUTATE_CACHE:
            current["spec"]["seen"] = True  # the bug the plugin's check is there to catch
        if (current.get("status") or {}).get("echo") != message:
            await self.client.patch_status(
                self.resource, request.name, {"status": {"echo": message}}, request.namespace
            )
        return None


def definition(resource: Resource = ECHOES) -> ControllerDefinition:
    """The Echo controller of ``resource`` (an Echo-like kind: spec.message, status.echo)."""

    def setup(context: SetupContext) -> Controller:
        context.cache.informer(resource)
        reconciler = EchoReconciler(context.client, context.cache, resource)
        return ControllerBuilder(context.cache, resource.kind.lower()).for_(resource).build(reconciler)

    return ControllerDefinition(
        name=resource.kind.lower(),
        description=f"a {resource.kind}'s status echoes its spec.message",
        setup=setup,
        crds=lambda: [crd(resource)],
        rules=own_kind(resource.group, resource.plural),
        samples=lambda: {"sample.yaml": echo("sample", "hello", resource)},
    )


DEFINITION = definition()
PROJECT = Project(name="echo", domain="test.example.com", controllers=(DEFINITION,))
