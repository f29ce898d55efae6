"""A namespace closed to new content (being deleted, or gone) is no error and no RBAC problem.

The classification of the API server's answers (``NamespaceTerminating``, ``NamespaceGone``),
the one-line-per-namespace registry, and what a controller and the Event recorder do with such
an answer: the controller forgets the request (no retry, no error metric, no error line), the
recorder drops the namespace's Events without sending them. The tests on a server run on the
in-memory one (its namespace controller simulated) and unchanged on a real cluster
(USE_EXISTING_CLUSTER=true): a namespace is held Terminating by a ConfigMap with a finalizer
of the test's.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from memop.runtime.cache.cache import Cache
from memop.runtime.cache.store import Obj
from memop.runtime.client.client import Client
from memop.runtime.client.closednamespaces import ClosedNamespaces
from memop.runtime.client.errors import (
    AlreadyExists,
    Forbidden,
    NamespaceClosed,
    NamespaceGone,
    NamespaceTerminating,
    NotFound,
    error_from_status,
)
from memop.runtime.client.resources import CONFIGMAPS, EVENTS, NAMESPACES
from memop.runtime.controller.controller import Controller, ControllerBuilder
from memop.runtime.controller.reconcile import Request
from memop.runtime.manager.events import NORMAL, EventRecorder
from memop.runtime.util.clock import FakeClock
from memop.testing.envtest import Kube
from memop.testing.operator import release_finalizers
from memop.testing.plugin import NAMESPACE_PREFIX
from memop.testing.wait import wait_for

HOLD = "memop.test/hold"
TIMEOUT = 60.0


def terminating_body(namespace: str, name: str = "web") -> dict[str, Any]:
    """What a v1.36 kube-apiserver answers to a create in a namespace being deleted."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f'deployments.apps "{name}" is forbidden: unable to create new content in namespace '
        f"{namespace} because it is being terminated",
        "reason": "Forbidden",
        "details": {
            "name": name,
            "group": "apps",
            "kind": "deployments",
            "causes": [
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        },
        "code": 403,
    }


def gone_body(namespace: str) -> dict[str, Any]:
    """What a v1.36 kube-apiserver answers to a create in a namespace that no longer exists."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f'namespaces "{namespace}" not found',
        "reason": "NotFound",
        "details": {"name": namespace, "kind": "namespaces"},
        "code": 404,
    }


# --- classification -------------------------------------------------------------------------


def test_a_create_in_a_terminating_namespace_is_namespace_terminating_a_forbidden() -> None:
    error = error_from_status(403, terminating_body("team-a"), method="POST", path="/apis/apps/v1/x")
    assert type(error) is NamespaceTerminating
    assert isinstance(error, NamespaceClosed)
    assert isinstance(error, Forbidden)
    assert error.namespace == "team-a"
    assert error.code == 403
    assert "because it is being terminated" in str(error)


def test_the_namespace_comes_from_the_path_when_the_cause_does_not_name_it() -> None:
    body = terminating_body("team-a")
    body["details"]["causes"][0]["message"] = "terminating"
    error = error_from_status(403, body, method="POST", path="/api/v1/namespaces/team-b/configmaps")
    assert isinstance(error, NamespaceTerminating)
    assert error.namespace == "team-b"


def test_a_create_in_a_vanished_namespace_is_namespace_gone_a_not_found() -> None:
    error = error_from_status(404, gone_body("team-a"))
    assert type(error) is NamespaceGone
    assert isinstance(error, NamespaceClosed)
    assert isinstance(error, NotFound)
    assert error.namespace == "team-a"


@pytest.mark.parametrize(
    ("code", "body", "expected"),
    [
        # RBAC: a permission problem, for the hint.
        (
            403,
            {
                "reason": "Forbidden",
                "message": 'deployments.apps is forbidden: User "memop" cannot create resource '
                '"deployments" in API group "apps" in the namespace "team-a"',
                "details": {"group": "apps", "kind": "deployments"},
            },
            Forbidden,
        ),
        # Another admission plugin's refusal with causes of its own.
        (403, {"reason": "Forbidden", "details": {"causes": [{"reason": "Quota"}]}}, Forbidden),
        (403, {"reason": "Forbidden", "details": {"causes": "NamespaceTerminating"}}, Forbidden),
        # The object is missing, not its namespace.
        (
            404,
            {"reason": "NotFound", "details": {"name": "web", "group": "apps", "kind": "deployments"}},
            NotFound,
        ),
        # A resource of another group that happens to be called namespaces.
        (
            404,
            {"reason": "NotFound", "details": {"name": "x", "group": "example.com", "kind": "namespaces"}},
            NotFound,
        ),
        (404, {"reason": "NotFound"}, NotFound),
    ],
)
def test_other_refusals_are_not_namespace_closed(code: int, body: dict[str, Any], expected: type) -> None:
    error = error_from_status(code, body)
    assert type(error) is expected
    assert not isinstance(error, NamespaceClosed)


# --- the registry -----------------------------------------------------------------------------


def closed_lines(caplog: pytest.LogCaptureFixture, namespace: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "memop.namespaces"
        and r.levelno >= logging.INFO
        and r.__dict__.get("closedNamespace") == namespace
    ]


def test_a_namespace_is_said_closed_once_until_it_opens_again(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memop.namespaces")
    closed = ClosedNamespaces(clock=FakeClock())
    terminating = error_from_status(403, terminating_body("team-a"))
    gone = error_from_status(404, gone_body("team-a"))
    assert isinstance(terminating, NamespaceClosed)
    assert isinstance(gone, NamespaceClosed)
    assert "team-a" not in closed
    assert closed.close(terminating)
    assert not closed.close(terminating)
    assert not closed.close(gone)  # gone after being deleted: the same story, told already
    assert "team-a" in closed
    assert closed_lines(caplog, "team-a") == [
        "namespace team-a is being deleted: not creating anything there (no retries, no Events)"
    ]
    closed.reopen("team-a")
    assert "team-a" not in closed
    assert closed.close(gone)
    assert closed_lines(caplog, "team-a")[1] == (
        "namespace team-a is gone: not creating anything there (no retries, no Events)"
    )


def test_the_namespace_of_the_request_names_an_error_that_does_not() -> None:
    closed = ClosedNamespaces(clock=FakeClock())
    body = terminating_body("x")
    body["details"]["causes"][0]["message"] = "terminating"
    anonymous = error_from_status(403, body)
    assert isinstance(anonymous, NamespaceClosed)
    assert anonymous.namespace == ""
    assert not closed.close(anonymous)  # named by nothing: not remembered
    assert len(closed) == 0
    assert closed.close(anonymous, "team-c")
    assert "team-c" in closed


def test_a_namespace_is_forgotten_after_a_quiet_while_and_memory_is_bounded() -> None:
    clock = FakeClock()
    closed = ClosedNamespaces(capacity=2, forget_after=600.0, clock=clock)
    for name in ("a", "b"):
        error = error_from_status(404, gone_body(name))
        assert isinstance(error, NamespaceClosed)
        closed.close(error)
    clock.advance(599)
    assert "a" in closed
    refused_again = error_from_status(404, gone_body("a"))
    assert isinstance(refused_again, NamespaceClosed)
    assert not closed.close(refused_again)  # refreshes a's time
    clock.advance(1)
    assert "b" not in closed  # 600 s since its last refusal
    assert "a" in closed
    for name in ("c", "d"):
        error = error_from_status(404, gone_body(name))
        assert isinstance(error, NamespaceClosed)
        closed.close(error)
    assert len(closed) == 2
    assert "a" not in closed  # the least recently refused, dropped for capacity
    assert "c" in closed
    assert "d" in closed
    with pytest.raises(ValueError, match="capacity"):
        ClosedNamespaces(capacity=0)


# --- on a server ------------------------------------------------------------------------------


@pytest.fixture
def apiserver_options() -> dict[str, Any]:
    # The namespace controller and garbage collector, as every cluster runs them.
    return {"simulate_controllers": True}


@contextlib.asynccontextmanager
async def held_namespace(client: Client) -> AsyncIterator[str]:
    """A namespace whose deletion the test holds (a ConfigMap with the test's finalizer) until
    it lets go; deleted and waited for until gone, whatever happens."""
    name = f"{NAMESPACE_PREFIX}closed-{uuid.uuid4().hex[:8]}"
    await client.create(NAMESPACES, {"metadata": {"name": name}})
    try:
        await client.create(CONFIGMAPS, {"metadata": {"name": "hold", "finalizers": [HOLD]}}, name)
        yield name
    finally:
        await release_finalizers(client, CONFIGMAPS, name)
        with contextlib.suppress(NotFound):
            await client.delete(NAMESPACES, name)
        await wait_for(lambda: namespace_gone(client, name), timeout=TIMEOUT)


async def namespace_gone(client: Client, name: str) -> bool:
    try:
        await client.get(NAMESPACES, name)
    except NotFound:
        return True
    return False


async def delete_namespace(client: Client, name: str) -> None:
    deleted = await client.delete(NAMESPACES, name)
    assert deleted is not None
    assert (deleted.get("metadata") or {}).get("deletionTimestamp")


async def let_go(client: Client, name: str) -> None:
    """Drop the holds and wait until the namespace is gone."""
    await release_finalizers(client, CONFIGMAPS, name)
    await wait_for(lambda: namespace_gone(client, name), timeout=TIMEOUT)


async def test_the_api_server_answers_a_closed_namespace_as_memop_classifies_it(client: Client) -> None:
    async with held_namespace(client) as ns:
        await client.create(CONFIGMAPS, {"metadata": {"name": "before"}}, ns)
        await delete_namespace(client, ns)
        with pytest.raises(NamespaceTerminating) as terminating:
            await client.create(CONFIGMAPS, {"metadata": {"name": "late"}}, ns)
        assert terminating.value.namespace == ns
        assert terminating.value.body["details"]["causes"] == [
            {
                "reason": "NamespaceTerminating",
                "message": f"namespace {ns} is being terminated",
                "field": "metadata.namespace",
            }
        ]
        # Updates still work there (finalizers must be removable): only creates are refused.
        await client.patch(CONFIGMAPS, "hold", {"metadata": {"labels": {"still": "writable"}}}, ns)
        await let_go(client, ns)
        with pytest.raises(NamespaceGone) as gone:
            await client.create(CONFIGMAPS, {"metadata": {"name": "later"}}, ns)
        assert gone.value.namespace == ns
        assert gone.value.body["details"] == {"name": ns, "kind": "namespaces"}


class ChildMaker:
    """A naive reconciler: the ConfigMap ``<name>-child`` for every request it is given, in
    ``target`` (default the request's namespace), whatever state its parent is in."""

    def __init__(self, client: Client, target: str | None = None) -> None:
        self.client = client
        self.target = target
        self.refusals: list[NamespaceClosed] = []
        self.refused: set[Request] = set()
        self.calls: list[Request] = []

    async def reconcile(self, request: Request) -> None:
        self.calls.append(request)
        try:
            await self.client.create(
                CONFIGMAPS, {"metadata": {"name": f"{request.name}-child"}}, self.target or request.namespace
            )
        except AlreadyExists:
            pass
        except NamespaceClosed as error:
            self.refusals.append(error)
            self.refused.add(request)
            raise


def child_to_parent(obj: Obj) -> list[Request]:
    meta = obj["metadata"]
    name = meta["name"]
    return [Request(meta["namespace"], name.removesuffix("-child"))] if name.endswith("-child") else []


def parents_only(event_type: str, obj: Obj, old: Obj | None) -> bool:
    return obj["metadata"]["name"] in PARENTS


PARENTS = ("a", "b", "c")


def metric(name: str, controller: Controller, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"controller": controller.name, **labels}) or 0.0


def operator_lines(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name.startswith("memop.") and not r.name.startswith("memop.testing") and r.levelno >= level
    ]


def reconciled(reconciler: ChildMaker, controller: Controller, count: int) -> bool:
    return len(reconciler.calls) == count and controller.queue.idle


@contextlib.asynccontextmanager
async def running(cache: Cache, controller: Controller) -> AsyncIterator[Controller]:
    await cache.start()
    await controller.start(sync_timeout=TIMEOUT)
    try:
        yield controller
    finally:
        await controller.stop(timeout=5)
        await cache.stop()


async def test_a_reconcile_refused_by_a_namespace_being_deleted_is_not_retried_nor_an_error(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memop")
    async with held_namespace(client) as ns:
        for parent in PARENTS:
            # Held too, so that they outlive their children: their reconciles try to put the
            # children back while the namespace is being deleted.
            await client.create(CONFIGMAPS, {"metadata": {"name": parent, "finalizers": [HOLD]}}, ns)
        reconciler = ChildMaker(client)
        cache = Cache(client, namespaces=[ns])
        name = f"closed-{uuid.uuid4().hex[:6]}"
        controller = (
            ControllerBuilder(cache, name)
            .for_(CONFIGMAPS, parents_only)
            .watches(CONFIGMAPS, child_to_parent)
            .build(reconciler)
        )
        async with running(cache, controller):

            async def children() -> bool:
                items, _ = await client.list_all(CONFIGMAPS, ns)
                return {f"{p}-child" for p in PARENTS} <= {i["metadata"]["name"] for i in items}

            await wait_for(children, timeout=TIMEOUT)
            successes = metric("controller_runtime_reconcile_total", controller, result="success")
            await delete_namespace(client, ns)
            # Every parent is reconciled again when its child is deleted, and refused.
            await wait_for(
                lambda: reconciler.refused == {Request(ns, p) for p in PARENTS} and controller.queue.idle,
                timeout=TIMEOUT,
            )
            assert all(isinstance(e, NamespaceTerminating) and e.namespace == ns for e in reconciler.refusals)
            refused = len(reconciler.refusals)
            for parent in PARENTS:
                assert controller.queue.num_requeues(Request(ns, parent)) == 0  # forgotten
            assert metric("controller_runtime_reconcile_errors_total", controller) == 0
            assert metric("controller_runtime_reconcile_total", controller, result="error") == 0
            assert metric("controller_runtime_reconcile_total", controller, result="requeue") == 0
            # Each refused reconcile counts as done (a parent whose child was still there on
            # a real cluster's progressive deletion may have succeeded too).
            assert (
                metric("controller_runtime_reconcile_total", controller, result="success")
                >= successes + refused
            )
            await let_go(client, ns)
    assert closed_lines(caplog, ns) == [
        f"namespace {ns} is being deleted: not creating anything there (no retries, no Events)"
    ]
    assert operator_lines(caplog, logging.WARNING) == []


async def test_a_request_whose_namespace_is_gone_is_forgotten(
    client: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memop")
    gone = f"{NAMESPACE_PREFIX}never-{uuid.uuid4().hex[:8]}"
    reconciler = ChildMaker(client)
    cache = Cache(client, namespaces=[namespace])
    controller = (
        ControllerBuilder(cache, f"gone-{uuid.uuid4().hex[:6]}")
        .for_(CONFIGMAPS, parents_only)
        .build(reconciler)
    )
    async with running(cache, controller):
        for count in range(1, 4):
            controller.queue.add(Request(gone, "a"))
            await wait_for(functools.partial(reconciled, reconciler, controller, count), timeout=TIMEOUT)
        assert len(reconciler.refusals) == 3
        assert all(isinstance(e, NamespaceGone) and e.namespace == gone for e in reconciler.refusals)
        assert controller.queue.num_requeues(Request(gone, "a")) == 0
        assert metric("controller_runtime_reconcile_errors_total", controller) == 0
        assert metric("controller_runtime_reconcile_total", controller, result="success") == 3
    assert closed_lines(caplog, gone) == [
        f"namespace {gone} is gone: not creating anything there (no retries, no Events)"
    ]
    assert operator_lines(caplog, logging.WARNING) == []


async def test_a_child_refused_in_another_closed_namespace_is_retried_with_backoff_without_an_error(
    client: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The request's own namespace is open; the other may be recreated: retried, quietly.
    caplog.set_level(logging.INFO, logger="memop")
    gone = f"{NAMESPACE_PREFIX}never-{uuid.uuid4().hex[:8]}"
    reconciler = ChildMaker(client, target=gone)
    cache = Cache(client, namespaces=[namespace])
    controller = (
        ControllerBuilder(cache, f"cross-{uuid.uuid4().hex[:6]}")
        .for_(CONFIGMAPS, parents_only)
        .build(reconciler)
    )
    async with running(cache, controller):
        await client.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
        await wait_for(lambda: controller.queue.num_requeues(Request(namespace, "a")) >= 2, timeout=TIMEOUT)
        assert metric("controller_runtime_reconcile_errors_total", controller) == 0
        assert metric("controller_runtime_reconcile_total", controller, result="requeue") >= 2
    assert all(isinstance(e, NamespaceGone) and e.namespace == gone for e in reconciler.refusals)
    assert len(closed_lines(caplog, gone)) == 1
    assert operator_lines(caplog, logging.WARNING) == []


def subject(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
    }


async def test_events_for_a_namespace_being_deleted_are_dropped_after_one_refusal(
    client: Client, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memop")
    closed = ClosedNamespaces()
    async with held_namespace(client) as ns:
        recorder = EventRecorder(client, "closed-test", closed_namespaces=closed)
        await delete_namespace(client, ns)
        for i in range(5):
            recorder.record(subject(f"o{i}", ns), NORMAL, "Created", f"created {i}")
        recorder.start()
        await recorder.flush()
        assert ns in closed
        assert recorder.dropped == 5
        recorder.record(subject("late", ns), NORMAL, "Created", "after the namespace closed")
        assert recorder.dropped == 6  # dropped at once, never queued
        await recorder.stop()
        if kube.server is not None:
            # One request learnt it; the others were not sent to collect the same refusal.
            posts = kube.server.log.filter(verb="create", resource="events", namespace=ns)
            assert [r.status for r in posts] == [403]
        events, _ = await client.list_all(EVENTS, ns)
        assert [e for e in events if (e.get("source") or {}).get("component") == "closed-test"] == []
    assert closed_lines(caplog, ns) == [
        f"namespace {ns} is being deleted: not creating anything there (no retries, no Events)"
    ]
    assert operator_lines(caplog, logging.WARNING) == []


async def test_an_event_for_a_namespace_that_opened_again_is_sent(client: Client, namespace: str) -> None:
    closed = ClosedNamespaces()
    error = error_from_status(404, gone_body(namespace))
    assert isinstance(error, NamespaceClosed)
    closed.close(error)
    recorder = EventRecorder(client, "reopened-test", closed_namespaces=closed)
    recorder.start()
    recorder.record(subject("early", namespace), NORMAL, "Created", "while it was closed")
    closed.reopen(namespace)  # what a controller's informer does when something is added there
    recorder.record(subject("later", namespace), NORMAL, "Created", "once it is open")
    await recorder.stop()
    events, _ = await client.list_all(EVENTS, namespace)
    mine = [e for e in events if (e.get("source") or {}).get("component") == "reopened-test"]
    assert [e["involvedObject"]["name"] for e in mine] == ["later"]
    assert recorder.dropped == 1


@pytest.mark.fake_only
async def test_a_real_forbidden_on_events_keeps_its_rbac_hint(
    client: Client, kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memop")
    closed = ClosedNamespaces()
    kube.fake.faults.forbid(verb="create", resource="events", namespace=namespace)
    recorder = EventRecorder(client, "rbac-test", closed_namespaces=closed)
    recorder.start()
    recorder.record(subject("denied", namespace), NORMAL, "Created", "no permission")
    await recorder.stop()
    errors = [r.getMessage() for r in operator_lines(caplog, logging.ERROR)]
    assert len(errors) == 1
    assert errors[0].startswith("cannot record events: ")
    assert errors[0].endswith(f"(memop needs create and patch on events in {namespace})")
    assert namespace not in closed
