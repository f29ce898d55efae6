"""Declarative children end to end: a typed owner, ``desired`` and memop's reconciler, on the
in-memory API server (which runs the Deployment controller and garbage collection).

A WebApp (namespaced) has a Deployment, a Service and a ConfigMap, and a second ConfigMap while
``spec.extra``; a Project (cluster-scoped) has a Namespace and a ConfigMap in it.
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from memop.manifests.rbac import MANAGER_RULES
from memop.runtime.api.model import CustomResource, Model, Status
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import CONFIGMAPS, DEPLOYMENTS, EVENTS, NAMESPACES, SERVICES, Resource
from memop.runtime.client.restmapper import RestMapper, UnknownKind
from memop.runtime.controller.declarative import CONTROLLER_LABEL, ObservedChildren, declarative_controller
from memop.runtime.controller.reconcile import Request
from memop.runtime.sharding.membership import ShardingConfig
from memop.runtime.sharding.ring import BUCKET_LABEL, bucket_label_value
from memop.testing.envtest import Kube
from memop.testing.operator import RunningOperator, event_recorded
from memop.testing.plugin import InstallCrds, RunOperator
from memop.testing.wait import wait_for

TIMEOUT = 30


class WebAppSpec(Model):
    image: str
    replicas: int = 1
    greeting: str = "hello"
    extra: bool = False


class WebAppStatus(Status):
    available_replicas: int = 0


class WebApp(CustomResource, group="declarative.memop.test", version="v1"):
    """A web application: a Deployment, a Service, its ConfigMap."""

    spec: WebAppSpec
    status: WebAppStatus = WebAppStatus()


def web_children(app: WebApp) -> list[dict[str, Any]]:
    labels = {"app": app.name}
    children: list[dict[str, Any]] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": app.name},
            "spec": {
                "replicas": app.spec.replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "web", "image": app.spec.image}]},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": app.name},
            "spec": {"selector": labels, "ports": [{"name": "http", "port": 80}]},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": app.name},
            "data": {"greeting": app.spec.greeting},
        },
    ]
    if app.spec.greeting == "boom":
        raise KeyError("a bug in desired()")
    if app.spec.greeting == "shared":  # every such WebApp wants the same ConfigMap
        children[2]["metadata"]["name"] = "shared"
    if app.spec.greeting == "elsewhere":  # a child its namespaced owner cannot own
        children[2]["metadata"]["namespace"] = "default"
    if app.spec.extra:
        children.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{app.name}-extra"},
                "data": {"x": "1"},
            }
        )
    return children


def web_status(app: WebApp, children: ObservedChildren) -> WebAppStatus:
    deployment = children.get("apps/Deployment") or {}
    return WebAppStatus(available_replicas=(deployment.get("status") or {}).get("availableReplicas", 0))


WEBAPPS = WebApp.resource()
DEFINITION = declarative_controller(
    WebApp,
    web_children,
    children=(DEPLOYMENTS, SERVICES, CONFIGMAPS),
    status=web_status,
    name="webapp",
)


class ProjectSpec(Model):
    team: str


class Project(CustomResource, group="declarative.memop.test", version="v1", namespaced=False):
    """A team's project: a Namespace and, in it, a ConfigMap."""

    spec: ProjectSpec
    status: Status = Status()


def project_children(project: Project) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": project.name}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "team", "namespace": project.name},
            "data": {"team": project.spec.team},
        },
    ]


PROJECTS = Project.resource()


def webapp(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": WEBAPPS.api_version,
        "kind": "WebApp",
        "metadata": {"name": name},
        "spec": {"image": "registry.k8s.io/pause:3.10", **spec},
    }


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind]
    return found[0] if found else {}


async def get_or_none(
    client: Client, resource: Resource, name: str, namespace: str | None
) -> dict[str, Any] | None:
    try:
        return await client.get(resource, name, namespace)
    except NotFound:
        return None


def ready_for(client: Client, name: str, namespace: str) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    async def ready() -> dict[str, Any] | None:
        app = await client.get(WEBAPPS, name, namespace)
        status = app.get("status") or {}
        ok = (
            status.get("observedGeneration") == app["metadata"]["generation"]
            and condition(app, "Ready").get("status") == "True"
            and condition(app, "Degraded").get("status") == "False"
        )
        return app if ok else None

    return ready


async def wait_ready(client: Client, name: str, namespace: str) -> dict[str, Any]:
    app = await wait_for(ready_for(client, name, namespace), timeout=TIMEOUT)
    assert app is not None
    return app


async def delete_and_see_recreated(
    client: Client, resource: Resource, name: str, namespace: str | None
) -> None:
    """Delete a child behind the operator's back; return once another object of that name is there."""
    old = await client.get(resource, name, namespace)
    await client.delete(resource, name, namespace)

    async def recreated() -> bool:
        found = await get_or_none(client, resource, name, namespace)
        return found is not None and found["metadata"]["uid"] != old["metadata"]["uid"]

    await wait_for(recreated, timeout=TIMEOUT)


async def wait_degraded(client: Client, name: str, namespace: str, reason: str) -> dict[str, Any]:
    """The WebApp once its Degraded condition is True for ``reason``."""

    async def degraded() -> dict[str, Any] | None:
        app = await client.get(WEBAPPS, name, namespace)
        found = condition(app, "Degraded")
        return app if found.get("status") == "True" and found.get("reason") == reason else None

    app = await wait_for(degraded, timeout=TIMEOUT)
    assert app is not None
    return app


@pytest.fixture
def apiserver_options() -> dict[str, Any]:
    return {"simulate_controllers": True, "pod_ready_delay": 0.05}


@pytest.fixture
async def crds(install_crds: InstallCrds) -> None:
    await install_crds(WebApp.crd(), Project.crd())


@pytest.fixture
async def operator(
    run_operator: RunOperator, client: Client, namespace: str, crds: None
) -> AsyncIterator[RunningOperator]:
    async with run_operator(DEFINITION, namespaces=[namespace]) as running:
        yield running


async def test_children_applied_owned_ready_and_a_converged_owner_costs_nothing(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(WEBAPPS, webapp("web", replicas=2), namespace)
    app = await wait_ready(client, "web", namespace)
    assert condition(app, "Progressing")["status"] == "False"
    assert not app["metadata"].get("finalizers"), "no on_delete, no finalizer"
    assert app["status"]["availableReplicas"] == 2
    for resource in (DEPLOYMENTS, SERVICES, CONFIGMAPS):
        child = await client.get(resource, "web", namespace)
        (reference,) = child["metadata"]["ownerReferences"]
        assert (reference["kind"], reference["uid"], reference["controller"]) == (
            "WebApp",
            app["metadata"]["uid"],
            True,
        )
        assert child["metadata"]["labels"][CONTROLLER_LABEL] == "webapp"
        managers = {entry["manager"] for entry in child["metadata"].get("managedFields") or []}
        assert "webapp" in managers, managers
    # An idle resync replays every cached object: each owner is reconciled, nothing is sent.
    server = kube.fake  # the request log: the rest is skipped on a real cluster
    await operator.controller.queue.wait_idle()
    agent = operator.user_agent
    assert server.log.filter(user_agent=agent, verb="patch"), "the applies are in the log"
    before, reconciles = len(server.log.filter(user_agent=agent)), operator.controller.stats.reconciles
    cache = operator.manager.cache
    for informer in [i for by_selector in cache._informers.values() for i in by_selector.values()]:
        informer.resync()
    await wait_for(lambda: operator.controller.stats.reconciles > reconciles, timeout=TIMEOUT)
    await operator.controller.queue.wait_idle()
    sent = [(r.verb, r.resource) for r in server.log.filter(user_agent=agent)[before:] if r.verb != "watch"]
    assert sent == []


async def test_drift_is_repaired_and_a_deleted_child_recreated(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(WEBAPPS, webapp("web"), namespace)
    await wait_ready(client, "web", namespace)
    await client.patch(CONFIGMAPS, "web", {"data": {"greeting": "tampered"}}, namespace)

    async def repaired() -> bool:
        config_map = await client.get(CONFIGMAPS, "web", namespace)
        return bool(config_map["data"]["greeting"] == "hello")

    await wait_for(repaired, timeout=TIMEOUT)
    await delete_and_see_recreated(client, SERVICES, "web", namespace)


async def test_a_child_no_longer_desired_is_pruned_with_only_the_derived_rbac(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(WEBAPPS, webapp("web", extra=True), namespace)
    await wait_for(lambda: get_or_none(client, CONFIGMAPS, "web-extra", namespace), timeout=TIMEOUT)
    await client.patch(WEBAPPS, "web", {"spec": {"extra": False, "greeting": "bye"}}, namespace)

    async def pruned() -> bool:
        config_map = await client.get(CONFIGMAPS, "web", namespace)
        gone = await get_or_none(client, CONFIGMAPS, "web-extra", namespace) is None
        return gone and config_map["data"] == {"greeting": "bye"}

    await wait_for(pruned, timeout=TIMEOUT)
    app = await wait_ready(client, "web", namespace)
    assert app["status"]["observedGeneration"] == 2
    # Every request sent (apply, prune, status, cache) is granted by the rules derived from the
    # code, with the manager's own (Events).
    server = kube.fake  # the request log: the rest is skipped on a real cluster
    sent = {
        (r.group, f"{r.resource}/{r.subresource}" if r.subresource else r.resource, r.verb)
        for r in server.log.filter(user_agent=operator.user_agent)
    }
    granted = {rule.triple for rule in (*DEFINITION.rules, *MANAGER_RULES)}
    assert sent - granted == set()
    for verb in ("list", "watch", "patch", "delete"):
        assert ("", "configmaps", verb) in sent


def with_open_spec(crd: dict[str, Any]) -> dict[str, Any]:
    """``crd`` as an older, looser version of it was: spec kept as it is, unchecked."""
    crd = copy.deepcopy(crd)
    for version in crd["spec"]["versions"]:
        properties = version["schema"]["openAPIV3Schema"]["properties"]
        properties["spec"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return crd


async def test_an_invalid_stored_owner_is_reported_once_and_left_alone(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator, install_crds: InstallCrds
) -> None:
    # Stored while the CRD's schema was looser (or the webhook off): the type refuses it.
    await install_crds(with_open_spec(WebApp.crd()))
    await client.create(WEBAPPS, webapp("bad", replicas="three"), namespace)

    app = await wait_degraded(client, "bad", namespace, "InvalidSpec")
    assert "spec.replicas" in condition(app, "Degraded")["message"]
    assert condition(app, "Ready")["status"] == "False"
    await event_recorded(client, namespace, lambda e: e.get("reason") == "InvalidSpec")
    # Another reconcile (a resync) neither acts nor reports again.
    await operator.controller.queue.wait_idle()
    operator.controller.queue.add(Request(namespace, "bad"))
    await operator.controller.queue.wait_idle()
    await operator.manager.recorders[0].flush()
    listed = await client.list(EVENTS, namespace)
    events = [e for e in listed["items"] if e.get("reason") == "InvalidSpec"]
    assert len(events) == 1, events
    assert events[0].get("count", 1) == 1, events
    assert await get_or_none(client, DEPLOYMENTS, "bad", namespace) is None


async def test_a_cross_namespace_child_is_reported_not_applied(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(WEBAPPS, webapp("web", greeting="elsewhere"), namespace)

    app = await wait_degraded(client, "web", namespace, "CrossNamespaceChild")
    assert "owner_annotations" in condition(app, "Degraded")["message"]
    await event_recorded(client, namespace, lambda e: e.get("reason") == "CrossNamespaceChild")
    assert await get_or_none(client, CONFIGMAPS, "web", "default") is None


async def test_on_delete_adds_a_finalizer_runs_once_then_removes_it(
    run_operator: RunOperator, client: Client, namespace: str, crds: None
) -> None:
    cleaned: list[str] = []

    async def cleanup(app: WebApp) -> None:
        cleaned.append(app.name)

    definition = declarative_controller(
        WebApp, web_children, children=(DEPLOYMENTS, SERVICES, CONFIGMAPS), on_delete=cleanup
    )
    assert ("declarative.memop.test", "webapps", "patch") in {r.triple for r in definition.rules}
    async with run_operator(definition, namespaces=[namespace]):
        await client.create(WEBAPPS, webapp("web"), namespace)
        app = await wait_ready(client, "web", namespace)
        assert app["metadata"]["finalizers"] == ["declarative.memop.test/webapp"]
        await client.delete(WEBAPPS, "web", namespace)
        await wait_for(lambda: _gone(client, namespace), timeout=TIMEOUT)
    assert cleaned == ["web"]


async def test_a_reconcile_that_reads_a_finalized_owner_again_does_not_clean_up_twice(
    run_operator: RunOperator, client: Client, namespace: str, crds: None, kube: Kube
) -> None:
    server = kube.fake  # its watches are silenced below: the cache never hears of the deletion
    cleaned: list[str] = []

    async def cleanup(app: WebApp) -> None:
        cleaned.append(app.name)
        server.silence_watches(True)

    definition = declarative_controller(
        WebApp, web_children, children=(DEPLOYMENTS, SERVICES, CONFIGMAPS), on_delete=cleanup
    )
    try:
        async with run_operator(definition, namespaces=[namespace]) as operator:
            await client.create(WEBAPPS, webapp("web"), namespace)
            await wait_ready(client, "web", namespace)
            await client.delete(WEBAPPS, "web", namespace)
            await wait_for(lambda: _gone(client, namespace), timeout=TIMEOUT)
            # The cache still holds the owner with its finalizer, as it would until a late
            # watch event arrives: another reconcile removes the finalizer (gone: NotFound)
            # without running the cleanup again.
            (controller,) = operator.manager.controllers
            done = controller.stats.reconciles
            controller.queue.add(Request(namespace, "web"))
            await wait_for(
                lambda: controller.stats.reconciles > done and not controller.stats.in_flight, timeout=TIMEOUT
            )
    finally:
        server.silence_watches(False)
    assert cleaned == ["web"]


def _with_left_finalizer(name: str) -> dict[str, Any]:
    """A WebApp as a version of the controller that had on_delete left it."""
    obj = webapp(name)
    obj["metadata"]["finalizers"] = ["declarative.memop.test/webapp"]
    return obj


async def test_a_finalizer_left_by_an_on_delete_version_is_removed_on_deletion(
    run_operator: RunOperator, client: Client, namespace: str, crds: None
) -> None:
    definition = declarative_controller(WebApp, web_children, children=(DEPLOYMENTS, SERVICES, CONFIGMAPS))
    async with run_operator(definition, namespaces=[namespace]):
        await client.create(WEBAPPS, _with_left_finalizer("web"), namespace)
        await wait_ready(client, "web", namespace)
        await client.delete(WEBAPPS, "web", namespace)
        await wait_for(lambda: _gone(client, namespace), timeout=TIMEOUT)


async def test_a_left_finalizer_it_may_not_remove_is_said_in_an_event(
    run_operator: RunOperator, client: Client, namespace: str, crds: None
) -> None:
    definition = declarative_controller(WebApp, web_children, children=(DEPLOYMENTS, SERVICES, CONFIGMAPS))
    assert ("declarative.memop.test", "webapps", "patch") not in {r.triple for r in definition.rules}
    async with run_operator(definition, namespaces=[namespace], rbac=True):
        await client.create(WEBAPPS, _with_left_finalizer("web"), namespace)
        await wait_ready(client, "web", namespace)
        await client.delete(WEBAPPS, "web", namespace)
        event = await event_recorded(client, namespace, lambda e: e.get("reason") == "FinalizerLeft")
        assert event["type"] == "Warning"
        assert "declarative.memop.test/webapp" in event["message"]
        assert await get_or_none(client, WEBAPPS, "web", namespace) is not None
        await client.patch(WEBAPPS, "web", {"metadata": {"finalizers": None}}, namespace)
        await wait_for(lambda: _gone(client, namespace), timeout=TIMEOUT)


async def _gone(client: Client, namespace: str) -> bool:
    return await get_or_none(client, WEBAPPS, "web", namespace) is None


async def test_a_cluster_scoped_owner_owns_a_namespace_and_a_child_in_it(
    run_operator: RunOperator, client: Client, crds: None
) -> None:
    definition = declarative_controller(
        Project, project_children, samples=[{"metadata": {"name": "sample"}, "spec": {"team": "a"}}]
    )
    # The child kinds were found by calling project_children on the sample.
    assert {rule.resource for rule in definition.rules if rule.verb == "patch"} >= {
        "namespaces",
        "configmaps",
    }
    name = f"project-{uuid.uuid4().hex[:8]}"
    async with run_operator(definition):
        await client.create(
            PROJECTS,
            {
                "apiVersion": PROJECTS.api_version,
                "kind": "Project",
                "metadata": {"name": name},
                "spec": {"team": "blue"},
            },
        )
        try:

            async def ready() -> dict[str, Any] | None:
                project = await client.get(PROJECTS, name)
                return project if condition(project, "Ready").get("status") == "True" else None

            project = await wait_for(ready, timeout=TIMEOUT)
            uid = project["metadata"]["uid"]
            for resource, namespace in ((NAMESPACES, None), (CONFIGMAPS, name)):
                child = await client.get(resource, "team" if namespace else name, namespace)
                (reference,) = child["metadata"]["ownerReferences"]
                assert (reference["kind"], reference["uid"]) == ("Project", uid)
            # The ConfigMap's events map back to its cluster-scoped owner: deleted, it is back.
            await delete_and_see_recreated(client, CONFIGMAPS, "team", name)
        finally:
            await client.delete(PROJECTS, name)
            with contextlib.suppress(NotFound):
                await client.delete(NAMESPACES, name)


async def test_a_child_kind_first_returned_at_run_time_is_watched_from_then_on(
    run_operator: RunOperator, client: Client, namespace: str, crds: None
) -> None:
    # Only Deployments are declared: the Service and the ConfigMap are met in the first reconcile.
    definition = declarative_controller(WebApp, web_children, children=(DEPLOYMENTS,), name="webapp")
    async with run_operator(definition, namespaces=[namespace]):
        await client.create(WEBAPPS, webapp("web"), namespace)
        await wait_ready(client, "web", namespace)
        await delete_and_see_recreated(client, SERVICES, "web", namespace)


async def test_the_rest_mapper_asks_discovery_for_kinds_it_does_not_know(client: Client, crds: None) -> None:
    mapper = RestMapper(client)
    assert await mapper.resource_for("declarative.memop.test/v1", "Project") == PROJECTS
    assert await mapper.resource_for("apps/v1", "Deployment") == DEPLOYMENTS
    with pytest.raises(UnknownKind, match="has no such kind"):
        await mapper.resource_for("declarative.memop.test/v1", "Nothing")
    with pytest.raises(UnknownKind, match=r"serves no declarative\.memop\.test/v9"):
        await mapper.resource_for("declarative.memop.test/v9", "Project")


async def test_an_apply_the_server_refuses_is_degraded_and_retried(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(WEBAPPS, webapp("web", replicas=-1), namespace)

    app = await wait_degraded(client, "web", namespace, "ApplyFailed")
    assert "spec.replicas" in condition(app, "Degraded")["message"]
    await event_recorded(client, namespace, lambda e: e.get("reason") == "ApplyFailed")
    # Retried with backoff: the fix is applied without a new reconcile being asked for.
    await client.patch(WEBAPPS, "web", {"spec": {"replicas": 1}}, namespace)
    await wait_ready(client, "web", namespace)


async def test_a_child_name_taken_by_another_owners_child_is_reported(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    # With greeting "shared" every WebApp's ConfigMap is named "shared": the second cannot have it.
    await client.create(WEBAPPS, webapp("first", greeting="shared"), namespace)
    first = await wait_ready(client, "first", namespace)
    await client.create(WEBAPPS, webapp("second", greeting="shared"), namespace)

    await wait_degraded(client, "second", namespace, "ChildNotOwned")
    await event_recorded(client, namespace, lambda e: e.get("reason") == "ChildNotOwned")
    config_map = await client.get(CONFIGMAPS, "shared", namespace)
    assert [r["uid"] for r in config_map["metadata"]["ownerReferences"]] == [first["metadata"]["uid"]]


async def test_an_apply_rbac_forbids_is_named_as_such_and_retried(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator
) -> None:
    server = kube.fake  # fault injection: skipped on a real cluster
    server.faults.forbid(verb="patch", resource="services", namespace=namespace)
    await client.create(WEBAPPS, webapp("web"), namespace)
    app = await wait_degraded(client, "web", namespace, "Forbidden")
    message = condition(app, "Degraded")["message"]
    assert "RBAC" in message
    assert "services" in message
    # Cleared at once: each failure doubles the backoff before the next try.
    server.faults.clear()
    await event_recorded(client, namespace, lambda e: e.get("reason") == "Forbidden")
    await wait_ready(client, "web", namespace)


async def test_a_bug_in_desired_is_said_on_the_owner_and_retried(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    await client.create(WEBAPPS, webapp("web", greeting="boom"), namespace)
    app = await wait_degraded(client, "web", namespace, "DesiredFailed")
    assert condition(app, "Degraded")["message"] == "desired() raised KeyError: 'a bug in desired()'"
    await client.patch(WEBAPPS, "web", {"spec": {"greeting": "hello"}}, namespace)
    await wait_ready(client, "web", namespace)


async def test_sharded_children_carry_their_owners_bucket_and_are_watched_by_it(
    run_operator: RunOperator, client: Client, namespace: str, crds: None
) -> None:
    # One replica takes every shard; its children informers follow the owners' bucket label.
    sharding = ShardingConfig(
        "declarative", namespace, identity="only", lease_duration=6.0, renew_deadline=5.0, retry_period=0.5
    )
    async with run_operator(DEFINITION, namespaces=[namespace], sharding=sharding):
        await client.create(WEBAPPS, webapp("web"), namespace)
        app = await wait_ready(client, "web", namespace)
        bucket = bucket_label_value(app["metadata"]["uid"])
        for resource in (DEPLOYMENTS, SERVICES, CONFIGMAPS):
            child = await client.get(resource, "web", namespace)
            assert child["metadata"]["labels"][BUCKET_LABEL] == bucket
        await delete_and_see_recreated(client, CONFIGMAPS, "web", namespace)
