"""The Memcached operator end to end: CRs in, Deployments, status, Events and cleanup out."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from memop import memcached
from memop.memcached.api import FINALIZER, MEMCACHEDS
from memop.memcached.crd import crd
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, DEPLOYMENTS, NAMESPACES, PODS
from memop.runtime.controller.reconcile import Request
from memop.testing.envtest import Kube
from memop.testing.memcached import converged, memcached_manifest, release_memcacheds
from memop.testing.operator import RunningOperator, event_recorded
from memop.testing.plugin import RunOperator
from memop.testing.wait import wait_for

TIMEOUT = 30


async def delete_namespaces(client: Client, names: list[str]) -> None:
    """Delete namespaces a test made beside its own, on a real cluster, their Memcacheds'
    finalizers dropped first (memop is stopped: they would hold the namespaces for ever)."""
    for name in names:
        await release_memcacheds(client, name)
        with contextlib.suppress(NotFound):
            await client.delete(NAMESPACES, name)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return {}


async def test_create_makes_a_deployment_and_reports_status(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(MEMCACHEDS, memcached_manifest("cache", size=2), namespace)
    cr = await wait_for(lambda: converged(client, namespace, "cache", 2), timeout=TIMEOUT)
    assert FINALIZER in cr["metadata"]["finalizers"]
    assert condition(cr, "Degraded")["status"] == "False"
    assert condition(cr, "Progressing")["status"] == "False"
    pods, _ = await client.list_all(PODS, namespace, label_selector="app.kubernetes.io/instance=cache")
    assert sorted(p["metadata"]["name"] for p in pods) == cr["status"]["nodes"]
    deployment = await client.get(DEPLOYMENTS, "cache", namespace)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["memcached", "--memory-limit=64", "-o", "modern", "-v"]
    assert container["ports"][0]["containerPort"] == 11211
    owner = deployment["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (
        "Memcached", cr["metadata"]["uid"], True, True
    )  # fmt: skip
    await event_recorded(
        client,
        namespace,
        lambda e: e["reason"] == "Created" and e["involvedObject"]["name"] == "cache",
        TIMEOUT,
    )


async def test_scale_up_down_and_to_zero(client: Client, namespace: str, operator: RunningOperator) -> None:
    await client.create(MEMCACHEDS, memcached_manifest("c", size=1), namespace)
    await wait_for(lambda: converged(client, namespace, "c", 1), timeout=TIMEOUT)
    for size in (3, 1, 0, 2):
        await client.patch(MEMCACHEDS, "c", {"spec": {"size": size}}, namespace)
        await wait_for(lambda size=size: converged(client, namespace, "c", size), timeout=TIMEOUT)  # type: ignore[misc]
    await event_recorded(client, namespace, lambda e: e["reason"] == "Scaled", TIMEOUT)


async def test_image_change_rolls_the_deployment(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(MEMCACHEDS, memcached_manifest("img", size=1), namespace)
    await wait_for(lambda: converged(client, namespace, "img", 1), timeout=TIMEOUT)
    await client.patch(MEMCACHEDS, "img", {"spec": {"image": "memcached:1.6.29"}}, namespace)

    async def rolled() -> bool:
        deployment = await client.get(DEPLOYMENTS, "img", namespace)
        image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        return image == "memcached:1.6.29" and bool(await converged(client, namespace, "img", 1))

    await wait_for(rolled, timeout=TIMEOUT)


async def test_drift_in_the_deployment_is_put_back(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(MEMCACHEDS, memcached_manifest("d", size=2), namespace)
    await wait_for(lambda: converged(client, namespace, "d", 2), timeout=TIMEOUT)
    await client.patch(DEPLOYMENTS, "d", {"spec": {"replicas": 5}}, namespace)
    await wait_for(lambda: converged(client, namespace, "d", 2), timeout=TIMEOUT)
    old_uid = (await client.get(DEPLOYMENTS, "d", namespace))["metadata"]["uid"]
    await client.delete(DEPLOYMENTS, "d", namespace)

    async def recreated() -> bool:
        try:
            deployment = await client.get(DEPLOYMENTS, "d", namespace)
        except NotFound:
            return False
        return deployment["metadata"]["uid"] != old_uid and bool(await converged(client, namespace, "d", 2))

    await wait_for(recreated, timeout=TIMEOUT)


async def test_two_memcacheds_in_one_namespace_stay_apart(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(MEMCACHEDS, memcached_manifest("one", size=1), namespace)
    await client.create(MEMCACHEDS, memcached_manifest("two", size=2), namespace)
    one = await wait_for(lambda: converged(client, namespace, "one", 1), timeout=TIMEOUT)
    two = await wait_for(lambda: converged(client, namespace, "two", 2), timeout=TIMEOUT)
    assert not set(one["status"]["nodes"]) & set(two["status"]["nodes"])
    d1 = await client.get(DEPLOYMENTS, "one", namespace)
    d2 = await client.get(DEPLOYMENTS, "two", namespace)
    assert d1["spec"]["selector"] != d2["spec"]["selector"]


async def test_delete_runs_the_finalizer_and_the_deployment_is_collected(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(MEMCACHEDS, memcached_manifest("gone", size=1), namespace)
    await wait_for(lambda: converged(client, namespace, "gone", 1), timeout=TIMEOUT)
    await client.delete(MEMCACHEDS, "gone", namespace)

    async def all_gone() -> bool:
        for res in (MEMCACHEDS, DEPLOYMENTS):
            try:
                await client.get(res, "gone", namespace)
                return False
            except NotFound:
                pass
        return True

    await wait_for(all_gone, timeout=TIMEOUT)
    await event_recorded(
        client, namespace, lambda e: (e["reason"], e["type"]) == ("Finalizing", "Warning"), TIMEOUT
    )


async def test_another_finalizer_is_left_alone(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    cr = memcached_manifest("shared", finalizers=["example.com/other"], size=1)
    await client.create(MEMCACHEDS, cr, namespace)
    await wait_for(lambda: converged(client, namespace, "shared", 1), timeout=TIMEOUT)
    await client.delete(MEMCACHEDS, "shared", namespace)

    async def only_other_left() -> bool:
        current = await client.get(MEMCACHEDS, "shared", namespace)
        return current["metadata"].get("finalizers") == ["example.com/other"]

    await wait_for(only_other_left, timeout=TIMEOUT)
    await client.patch(MEMCACHEDS, "shared", {"metadata": {"finalizers": None}}, namespace)


async def test_a_conflicting_writer_does_not_lose_updates(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(MEMCACHEDS, memcached_manifest("busy", size=1), namespace)
    for i in range(10):  # metadata edits racing memop's finalizer and status writes
        await client.patch(MEMCACHEDS, "busy", {"metadata": {"labels": {"edit": str(i)}}}, namespace)
    await client.patch(MEMCACHEDS, "busy", {"spec": {"size": 2}}, namespace)
    cr = await wait_for(lambda: converged(client, namespace, "busy", 2), timeout=TIMEOUT)
    assert cr["metadata"]["labels"] == {"edit": "9"}


async def test_many_memcacheds_across_namespaces(
    kube: Kube, client: Client, run_operator: RunOperator
) -> None:
    namespaces = [f"many-{i}-{id(client) % 10000}" for i in range(3)]
    for ns in namespaces:
        await client.create(NAMESPACES, {"metadata": {"name": ns}})
    try:
        async with run_operator(memcached.DEFINITION, namespaces=namespaces, max_concurrent_reconciles=4):
            for ns in namespaces:
                for i in range(5):
                    await client.create(MEMCACHEDS, memcached_manifest(f"m{i}", size=1), ns)
            for ns in namespaces:
                for i in range(5):
                    await wait_for(lambda ns=ns, i=i: converged(client, ns, f"m{i}", 1), timeout=TIMEOUT)  # type: ignore[misc]
    finally:
        if kube.server is None:
            await delete_namespaces(client, namespaces)


async def test_namespaces_outside_the_scope_are_never_touched(
    kube: Kube, client: Client, namespace: str, run_operator: RunOperator
) -> None:
    outside = f"{namespace}-out"
    await client.create(NAMESPACES, {"metadata": {"name": outside}})
    try:
        await client.create(MEMCACHEDS, memcached_manifest("ignored", size=1), outside)
        async with run_operator(memcached.DEFINITION, namespaces=[namespace]):
            await client.create(MEMCACHEDS, memcached_manifest("watched", size=1), namespace)
            await wait_for(lambda: converged(client, namespace, "watched", 1), timeout=TIMEOUT)
            ignored = await client.get(MEMCACHEDS, "ignored", outside)
            assert not ignored["metadata"].get("finalizers")
            assert "status" not in ignored or not ignored["status"]
            with pytest.raises(NotFound):
                await client.get(DEPLOYMENTS, "ignored", outside)
    finally:
        if kube.server is None:
            await delete_namespaces(client, [outside])


async def test_delete_while_memop_is_down_waits_for_memop(
    client: Client, namespace: str, run_operator: RunOperator
) -> None:
    async with run_operator(memcached.DEFINITION, namespaces=[namespace]):
        await client.create(MEMCACHEDS, memcached_manifest("later", size=1), namespace)
        await wait_for(lambda: converged(client, namespace, "later", 1), timeout=TIMEOUT)
    await client.delete(MEMCACHEDS, "later", namespace)
    held = await client.get(MEMCACHEDS, "later", namespace)
    assert held["metadata"]["deletionTimestamp"]
    assert FINALIZER in held["metadata"]["finalizers"]
    async with run_operator(memcached.DEFINITION, namespaces=[namespace]):

        async def finalized() -> bool:
            try:
                await client.get(MEMCACHEDS, "later", namespace)
                return False
            except NotFound:
                return True

        await wait_for(finalized, timeout=TIMEOUT)


# -- the in-memory server only: fault injection and exact request accounting ------------------


async def test_converged_reconcile_makes_no_request_and_creation_takes_three_writes(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    server = kube.fake
    await client.create(MEMCACHEDS, memcached_manifest("lean", size=1), namespace)
    await wait_for(lambda: converged(client, namespace, "lean", 1), timeout=TIMEOUT)
    writes = [
        r for r in server.log.filter(user_agent=operator.user_agent)
        if r.verb in ("create", "update", "patch", "delete") and r.resource != "events"
    ]  # fmt: skip
    kinds = [(r.verb, r.resource, r.subresource) for r in writes]
    assert kinds[:3] == [
        ("patch", "memcacheds", ""),
        ("create", "deployments", ""),
        ("patch", "memcacheds", "status"),
    ]
    # Later writes are status patches that pod and Deployment status changes required.
    assert all(k == ("patch", "memcacheds", "status") for k in kinds[3:]), kinds
    assert len(kinds) <= 5, kinds
    before = len(server.log.filter(user_agent=operator.user_agent))
    reconciles = operator.controller.stats.reconciles
    for _ in range(3):
        operator.controller.queue.add(Request(namespace, "lean"))
        await wait_for(
            lambda: not operator.controller.stats.in_flight and len(operator.controller.queue) == 0
        )
    await wait_for(lambda: operator.controller.stats.reconciles >= reconciles + 1)
    assert len(server.log.filter(user_agent=operator.user_agent)) == before


async def test_injected_500s_are_retried_until_converged(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    server = kube.fake
    server.faults.fail(500, times=3, verb="create", resource="deployments")
    server.faults.fail(500, times=2, verb="patch", resource="memcacheds", subresource="status")
    await client.create(MEMCACHEDS, memcached_manifest("flaky", size=1), namespace)
    await wait_for(lambda: converged(client, namespace, "flaky", 1), timeout=TIMEOUT)


async def test_forbidden_is_reported_in_status_event_and_log(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator, caplog: pytest.LogCaptureFixture
) -> None:
    server = kube.fake
    rule = server.faults.fail(403, times=None, verb="create", resource="deployments")
    await client.create(MEMCACHEDS, memcached_manifest("denied", size=1), namespace)

    async def degraded() -> dict[str, Any] | None:
        cr = await client.get(MEMCACHEDS, "denied", namespace)
        c = condition(cr, "Degraded")
        return c if c.get("status") == "True" else None

    c = await wait_for(degraded, timeout=TIMEOUT)
    assert 'cannot create resource "deployments"' in c["message"]
    await event_recorded(
        client, namespace, lambda e: e["reason"] == "Forbidden" and "deployments" in e["message"], TIMEOUT
    )
    assert any('cannot create resource "deployments"' in r.getMessage() for r in caplog.records)
    server.faults.clear()
    del rule
    await wait_for(lambda: converged(client, namespace, "denied", 1), timeout=TIMEOUT)


async def test_invalid_spec_sets_degraded_and_is_not_retried_hot(
    kube: Kube, client: Client, namespace: str, run_operator: RunOperator
) -> None:
    kube.fake  # noqa: B018 - a schemaless CRD would break a shared real cluster's validation
    # The CRD applied without its schema: the API server accepts anything.
    current = await client.get(CUSTOM_RESOURCE_DEFINITIONS, crd()["metadata"]["name"])
    for version in current["spec"]["versions"]:
        version["schema"] = {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        }
    await client.update(CUSTOM_RESOURCE_DEFINITIONS, current)
    async with run_operator(memcached.DEFINITION, namespaces=[namespace]) as running:
        await client.create(MEMCACHEDS, memcached_manifest("bad", size=-3, memoryLimitMiB="lots"), namespace)

        async def degraded() -> dict[str, Any] | None:
            cr = await client.get(MEMCACHEDS, "bad", namespace)
            c = condition(cr, "Degraded")
            return c if c.get("reason") == "InvalidSpec" else None

        c = await wait_for(degraded, timeout=TIMEOUT)
        assert "spec.size" in c["message"]
        assert "spec.memoryLimitMiB" in c["message"]
        reconciles = running.controller.stats.reconciles
        await client.create(MEMCACHEDS, memcached_manifest("good", size=1), namespace)
        await wait_for(lambda: converged(client, namespace, "good", 1), timeout=TIMEOUT)
        assert running.controller.stats.reconciles - reconciles < 10  # no hot loop on "bad"
        with pytest.raises(NotFound):
            await client.get(DEPLOYMENTS, "bad", namespace)
