"""Memcached-specific test helpers: memop's own e2e tests and benchmarks of its Memcached controller.

``memcached_manifest`` builds a Memcached; ``reconciled``, ``available`` and ``converged`` tell
when memop has reconciled one (its pods aside; Available; every pod ready); ``release_memcacheds``
drops their finalizers so a namespace can go. A project of its own writes helpers like these for
its kinds; the generic machinery is in :mod:`memop.testing.operator`.
"""

from __future__ import annotations

import contextlib
from typing import Any

from memop.memcached.api import MEMCACHEDS
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import DEPLOYMENTS
from memop.testing.operator import release_finalizers


async def release_memcacheds(client: Client, namespace: str) -> None:
    """Drop the finalizers of the Memcacheds in ``namespace`` (memop's, and any a test put
    there). For tests on a real cluster, before deleting a namespace once memop is stopped:
    the finalizers would hold the namespace in Terminating for ever, and the CRD with it."""
    with contextlib.suppress(NotFound):  # the CRD itself may be gone
        await release_finalizers(client, MEMCACHEDS, namespace)


def memcached_manifest(
    name: str, *, namespace: str | None = None, finalizers: list[str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A Memcached named ``name`` with ``spec`` (``{"size": 1}`` when no spec key is given).

    ``metadata.namespace`` is set only when ``namespace`` is given, and ``metadata.finalizers``
    only when ``finalizers`` is non-empty, so the body is exactly what a test means to send.
    """
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    return {
        "apiVersion": MEMCACHEDS.api_version,
        "kind": MEMCACHEDS.kind,
        "metadata": metadata,
        "spec": spec or {"size": 1},
    }


async def reconciled(
    client: Client, namespace: str, name: str, *, size: int | None = None
) -> dict[str, Any] | None:
    """The Memcached once memop has reconciled its current generation, whether or not its pods run.

    That is: the Memcached and its Deployment exist, ``status.observedGeneration`` is
    ``metadata.generation`` and, when ``size`` is given, the Deployment's ``spec.replicas`` is
    ``size``. None otherwise (also when either is not found). On a control plane without nodes
    (pods stay Pending) this is as far as a Memcached gets; :func:`available` also wants the pods.
    """
    try:
        cr = await client.get(MEMCACHEDS, name, namespace)
        deployment = await client.get(DEPLOYMENTS, name, namespace)
    except NotFound:
        return None
    status = cr.get("status") or {}
    generation = cr["metadata"].get("generation")
    ok = (
        generation is not None
        and status.get("observedGeneration") == generation
        and (size is None or (deployment.get("spec") or {}).get("replicas") == size)
    )
    return cr if ok else None


async def available(
    client: Client, namespace: str, name: str, *, size: int | None = None
) -> dict[str, Any] | None:
    """The Memcached once memop has reconciled its current generation and reports it Available.

    That is: :func:`reconciled` (at ``size`` when given) and condition Available is ``"True"``.
    None otherwise, so it can be polled with :func:`~memop.testing.wait.wait_for`.
    """
    cr = await reconciled(client, namespace, name, size=size)
    if cr is None:
        return None
    conditions = {c.get("type"): c.get("status") for c in (cr.get("status") or {}).get("conditions") or []}
    return cr if conditions.get("Available") == "True" else None


async def converged(client: Client, namespace: str, name: str, size: int) -> dict[str, Any] | None:
    """The Memcached once :func:`available` at ``size`` and its status counts ``size`` ready
    replicas and ``size`` nodes (Available alone allows more pods, e.g. while scaling down)."""
    cr = await available(client, namespace, name, size=size)
    if cr is None:
        return None
    status = cr.get("status") or {}
    ready = status.get("readyReplicas", 0) == size and len(status.get("nodes") or []) == size
    return cr if ready else None
