"""What the examples' end-to-end tests wait for."""

from __future__ import annotations

from typing import Any

from memop.runtime import Client, NotFound, Resource
from memop.testing import wait_for


def condition(obj: dict[str, Any], kind: str) -> str | None:
    """The status of the condition ``kind`` when the status is of the object's generation."""
    status = obj.get("status") or {}
    if status.get("observedGeneration") != obj["metadata"]["generation"]:
        return None
    return next((c["status"] for c in status.get("conditions") or [] if c["type"] == kind), None)


async def ready(
    client: Client, resource: Resource, name: str, namespace: str | None = None
) -> dict[str, Any]:
    """The object once its Ready condition is True for its generation."""
    found: dict[str, Any] = {}

    async def is_ready() -> bool:
        found.update(await client.get(resource, name, namespace))
        return condition(found, "Ready") == "True"

    await wait_for(is_ready, timeout=60, message=lambda: f"{resource.kind} {name} is not Ready: {found}")
    return found


async def gone(client: Client, resource: Resource, name: str, namespace: str | None = None) -> None:
    """Return once the object does not exist."""

    async def is_gone() -> bool:
        try:
            await client.get(resource, name, namespace)
        except NotFound:
            return True
        return False

    await wait_for(is_gone, timeout=60, message=f"{resource.kind} {name} still exists")
