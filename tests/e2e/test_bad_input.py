"""Bad input: whatever a Memcached, a watched object or a watch stream holds, memop survives it.

- Generated Memcached specs (Hypothesis) sent through the API with the CRD's validation off:
  memop never panics, keeps its workers and logs no traceback (nor a reflector relisting
  after a failure it did not expect); for the specs ``parse_spec`` rejects it reports
  Degraded/InvalidSpec with exactly ``parse_spec``'s message and creates nothing; the others
  converge to a Deployment that says what the spec says.
- Objects with unexpected shapes that a real API server stores: a Memcached whose status is a
  list, pods without labels.
- Objects no conforming server stores (a Deployment whose ``spec.replicas`` is a string or
  whose spec, status or ownerReferences are of the wrong type, labels that are a list or hold
  numbers, a pod whose status is a list, a Memcached whose finalizers are a string...) written
  into memop's open watches on the in-memory server: they go through memop's real informers
  (transforms, indexes, the controller's event mapping) and reconciler, are stored or logged,
  and cost no relist, no broken watch, no traceback, no worker; real changes after them apply.
- A hand-written watch stream (a tiny raw aiohttp server) with malformed lines, truncated JSON
  and objects of the wrong types, ending in a broken connection: the reflector logs and skips
  every bad line, stores the good events, never relists because of them, and resumes the
  broken stream at once from the last resourceVersion it saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient, Configuration
from prometheus_client import REGISTRY

from memop import memcached
from memop.memcached.api import FINALIZER, MEMCACHEDS, InvalidSpec, MemcachedSpec, parse_spec
from memop.memcached.crd import crd
from memop.memcached.desired import APP_NAME, INSTANCE_LABEL, NAME_LABEL
from memop.runtime.cache.reflector import Reflector
from memop.runtime.cache.store import ObjectStore
from memop.runtime.client.client import Client
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, DEPLOYMENTS, PODS, Resource
from memop.runtime.util.backoff import Backoff
from memop.testing.apiserver.watch import Watcher, event_line
from memop.testing.envtest import Kube
from memop.testing.memcached import converged
from memop.testing.operator import RunningOperator
from memop.testing.plugin import RunOperator
from memop.testing.wait import wait_for

TIMEOUT = 30
CONTROLLER = "memcached"


# -- generated specs ----------------------------------------------------------------------------------

_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
_NOT_NUMBERS = st.one_of(st.text(max_size=6), st.none(), st.booleans(), st.lists(_JSON_SCALARS, max_size=2))

# Valid sizes stay small: each one becomes pods in the simulated cluster.
SIZES = st.one_of(
    st.integers(-3, 3),
    st.integers(min_value=2**31, max_value=2**70),
    st.integers(min_value=-(2**70), max_value=-(2**31)),
    st.sampled_from([0.0, 2.0, 0.5, -1.0, 1e300, 2.5, 1e-9]),
    st.floats(-1e6, 1e6).filter(lambda f: not f.is_integer()),
    _NOT_NUMBERS,
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
MEMORY = st.one_of(
    st.integers(-3, 3 * 2**20),
    st.integers(min_value=2**31),
    st.floats(allow_nan=False, allow_infinity=False),
    _NOT_NUMBERS,
)
IMAGES = st.one_of(
    st.text(max_size=24),
    st.from_regex(r"[a-z0-9][a-z0-9./:@_-]{0,40}", fullmatch=True),
    st.sampled_from(["", " ", "memcached:1.6 ", "memcached\n", "\tmemcached", "mem cached", "🙂:1"]),
    st.none(),
    st.integers(),
    st.lists(st.text(max_size=3), max_size=2),
)
_RESOURCE_NAMES = st.sampled_from(
    ["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "example.com/gpu", "bad name", "pods", "", "CPU"]
)
_QUANTITIES = st.one_of(
    st.from_regex(
        r"[+-]?[0-9]{1,4}(\.[0-9]{0,3})?([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,2})?", fullmatch=True
    ),
    st.sampled_from(["1e999", "0.0000000001", "-1", "1Mi ", "lots", "1.5.5", ".5", "5.", "1e3e3"]),
    st.integers(-5, 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
    st.lists(st.integers(), max_size=1),
)
_QUANTITY_MAPS = st.one_of(
    st.dictionaries(_RESOURCE_NAMES, _QUANTITIES, max_size=3), _NOT_NUMBERS, st.integers()
)
RESOURCES = st.one_of(
    st.fixed_dictionaries({}, optional={"limits": _QUANTITY_MAPS, "requests": _QUANTITY_MAPS}),
    st.dictionaries(st.sampled_from(["limits", "requests", "claims", "extra"]), _QUANTITY_MAPS, max_size=3),
    _NOT_NUMBERS,
)
_KNOWN = {"size", "image", "memoryLimitMiB", "resources"}
# Specs that are mostly valid, with resources: the server rewrites quantities in canonical
# form ("1000m" is stored as "1"), which memop must not take for drift.
_VALID_QUANTITIES = st.from_regex(r"[1-9][0-9]{0,2}(\.[0-9]{1,2})?(Ki|Mi|Gi|m|k|M|G|e[0-3])?", fullmatch=True)
PLAUSIBLE = st.fixed_dictionaries(
    {"size": st.integers(0, 2)},
    optional={
        "image": st.from_regex(r"[a-z0-9][a-z0-9./:_-]{0,30}", fullmatch=True),
        "memoryLimitMiB": st.integers(1, 4096) | st.sampled_from([1.0, 64.0]),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "limits": st.dictionaries(st.sampled_from(["cpu", "memory"]), _VALID_QUANTITIES, max_size=2),
                "requests": st.dictionaries(
                    st.sampled_from(["cpu", "memory"]), _VALID_QUANTITIES, max_size=2
                ),
            },
        ),
    },
)
SPECS = st.one_of(
    PLAUSIBLE,
    st.fixed_dictionaries(
        {},
        optional={"size": SIZES, "image": IMAGES, "memoryLimitMiB": MEMORY, "resources": RESOURCES},
    ).flatmap(
        lambda spec: st.dictionaries(
            st.text(min_size=1, max_size=10).filter(lambda k: k not in _KNOWN), _JSON, max_size=2
        ).map(lambda extra: {**extra, **spec})
    ),
    _JSON,  # a spec that is not an object at all (or an object of anything)
)

_names = itertools.count()


def memcached_body(name: str, spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": MEMCACHEDS.api_version,
        "kind": MEMCACHEDS.kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    status = obj.get("status")
    for c in (status.get("conditions") if isinstance(status, dict) else None) or ():
        if isinstance(c, dict) and c.get("type") == kind:
            return c
    return {}


def panics() -> float:
    """controller_runtime_reconcile_panics_total of the in-process operators (shared registry)."""
    value = REGISTRY.get_sample_value("controller_runtime_reconcile_panics_total", {"controller": CONTROLLER})
    return value or 0.0


def tracebacks(records: list[logging.LogRecord]) -> list[str]:
    """memop's log records that tell of a failure it did not expect: any record carrying an
    exception (a reflector, a handler or a worker caught something it has no case for) and the
    reflector's "failed unexpectedly" line, which makes it relist."""
    return [
        f"{r.name} {r.levelname}: {r.getMessage()}"
        + (f"\n{logging.Formatter().formatException(r.exc_info)}" if r.exc_info else "")
        for r in records
        if r.name.startswith("memop")
        and (r.exc_info or r.exc_text or r.stack_info or "failed unexpectedly" in r.getMessage())
    ]


def watch_memop_logs(caplog: pytest.LogCaptureFixture) -> None:
    # Warnings and up: every log.exception (ERROR) and the reflector's relist line, whatever
    # level another test or the environment left the memop loggers at.
    caplog.set_level(logging.WARNING, logger="memop")


def workers_alive(operator: RunningOperator) -> bool:
    # A worker task that ended would be a worker lost for good: none may have.
    workers = operator.controller._workers
    return operator.running and bool(workers) and not any(w.done() for w in workers)


@pytest.fixture
async def schemaless(kube: Kube, client: Client) -> None:
    """The Memcached CRD without its schema: the API server accepts any spec (and status)."""
    kube.fake  # noqa: B018 - a schemaless CRD would break a shared real cluster's validation
    current = await client.get(CUSTOM_RESOURCE_DEFINITIONS, crd()["metadata"]["name"])
    for version in current["spec"]["versions"]:
        version["schema"] = {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        }
    await client.update(CUSTOM_RESOURCE_DEFINITIONS, current)


@pytest.fixture
async def operator(
    run_operator: RunOperator, client: Client, namespace: str, schemaless: None
) -> AsyncIterator[RunningOperator]:
    async with run_operator(
        memcached.DEFINITION, namespaces=[namespace], max_concurrent_reconciles=4
    ) as running:
        yield running


@settings(
    max_examples=int(os.environ.get("MEMOP_BAD_INPUT_EXAMPLES", "6")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(specs=st.lists(SPECS, min_size=10, max_size=10))
async def test_generated_specs_are_reported_or_converged(
    client: Client,
    namespace: str,
    operator: RunningOperator,
    caplog: pytest.LogCaptureFixture,
    specs: list[Any],
) -> None:
    watch_memop_logs(caplog)
    panics_before = panics()
    # What the server stored is what memop reads; parse_spec's verdict on it is the expectation.
    verdicts: dict[str, MemcachedSpec | str] = {}
    for spec in specs:
        name = f"gen-{next(_names):04d}"
        stored = await client.create(MEMCACHEDS, memcached_body(name, spec), namespace)
        try:
            verdicts[name] = parse_spec(stored)
        except InvalidSpec as invalid:
            verdicts[name] = str(invalid)

    async def problems() -> list[str]:
        crs = {o["metadata"]["name"]: o for o in (await client.list_all(MEMCACHEDS, namespace))[0]}
        deployments = {o["metadata"]["name"]: o for o in (await client.list_all(DEPLOYMENTS, namespace))[0]}
        out = []
        for name, verdict in verdicts.items():
            cr = crs[name]
            status: dict[str, Any] = cr["status"] if isinstance(cr.get("status"), dict) else {}
            degraded = condition(cr, "Degraded")
            deployment = deployments.get(name)
            if status.get("observedGeneration") != cr["metadata"]["generation"]:
                out.append(f"{name}: no status for generation {cr['metadata']['generation']}")
            elif isinstance(verdict, str):
                if (degraded.get("status"), degraded.get("reason"), degraded.get("message")) != (
                    "True", "InvalidSpec", verdict
                ):  # fmt: skip
                    out.append(f"{name}: Degraded is {degraded}, expected InvalidSpec: {verdict}")
                if deployment is not None:
                    out.append(f"{name}: invalid spec {cr.get('spec')!r} has a Deployment")
            elif degraded.get("status") != "False":
                out.append(f"{name}: valid spec {cr.get('spec')!r} is Degraded: {degraded}")
            elif deployment is None:
                out.append(f"{name}: valid spec {cr.get('spec')!r} has no Deployment")
            elif condition(cr, "Available").get("status") != "True":
                out.append(f"{name}: valid spec {cr.get('spec')!r} is not Available yet")
            else:
                out += deployment_mismatches(name, verdict, deployment)
        return out

    async def settled() -> bool:
        assert workers_alive(operator), "memop's controller or one of its workers died"
        # Checked while waiting: a reflector that raises on an object relists and fails again
        # forever, which would otherwise only show as a timeout.
        assert not tracebacks(caplog.records), "\n".join(tracebacks(caplog.records))
        return not await problems()

    async def describe() -> str:
        return "\n".join(await problems())

    try:
        await wait_for(settled, timeout=TIMEOUT, interval=0.1)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{await describe()}") from None
    assert panics() == panics_before
    assert workers_alive(operator)
    assert not tracebacks(caplog.records), "\n".join(tracebacks(caplog.records))


def deployment_mismatches(name: str, spec: MemcachedSpec, deployment: dict[str, Any]) -> list[str]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    out = []
    if deployment["spec"]["replicas"] != spec.size:
        out.append(f"{name}: {deployment['spec']['replicas']} replicas, {spec.size} wanted")
    if container["image"] != spec.image:
        out.append(f"{name}: image {container['image']!r}, {spec.image!r} wanted")
    if f"--memory-limit={spec.memory_limit_mib}" not in container["command"]:
        out.append(f"{name}: command {container['command']}, memory limit {spec.memory_limit_mib} wanted")
    if deployment["metadata"]["generation"] != 1:
        # Created as wanted, so any later write was memop fighting the server's own rewriting.
        out.append(f"{name}: Deployment written again after its creation (generation "
                   f"{deployment['metadata']['generation']}): {container.get('resources')}")  # fmt: skip
    return out


# -- odd shapes a real server stores ---------------------------------------------------------------


async def test_a_status_that_is_a_list_is_replaced(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    panics_before = panics()
    await client.create(MEMCACHEDS, memcached_body("listy", {"size": 1}), namespace)

    async def available() -> dict[str, Any] | None:
        cr = await client.get(MEMCACHEDS, "listy", namespace)
        return cr if condition(cr, "Available").get("status") == "True" else None

    await wait_for(available, timeout=TIMEOUT)
    # Anyone allowed to write the status subresource can store this: the schema is off.
    await client.patch_status(MEMCACHEDS, "listy", {"status": [1, "two", {"three": 3}]}, namespace)

    def cached_status() -> Any:
        cached = operator.manager.cache.get(MEMCACHEDS, "listy", namespace)
        return None if cached is None else cached.get("status")

    await wait_for(lambda: isinstance(cached_status(), list), timeout=TIMEOUT)
    # A status write does not trigger memop (only generation changes do); a change of the
    # Deployment does, and that reconcile must cope with the list.
    await client.patch(DEPLOYMENTS, "listy", {"metadata": {"labels": {"poke": "1"}}}, namespace)
    cr = await wait_for(available, timeout=TIMEOUT)
    assert isinstance(cr["status"], dict)
    assert cr["status"]["readyReplicas"] == 1
    assert panics() == panics_before
    assert workers_alive(operator)


async def test_pods_without_labels_are_ignored(
    client: Client, namespace: str, operator: RunningOperator
) -> None:
    panics_before = panics()
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    await client.create(PODS, pod, namespace)
    await client.create(
        PODS, {**pod, "metadata": {"name": "labelled-elsewhere", "labels": {"app": "x"}}}, namespace
    )
    await client.create(MEMCACHEDS, memcached_body("after-bare-pods", {"size": 1}), namespace)

    async def available() -> bool:
        cr = await client.get(MEMCACHEDS, "after-bare-pods", namespace)
        return condition(cr, "Available").get("status") == "True" and cr["status"]["nodes"] != []

    await wait_for(available, timeout=TIMEOUT)
    cr = await client.get(MEMCACHEDS, "after-bare-pods", namespace)
    assert "bare" not in cr["status"]["nodes"]
    assert "labelled-elsewhere" not in cr["status"]["nodes"]
    assert panics() == panics_before
    assert workers_alive(operator)


# -- a watch stream written by hand ------------------------------------------------------------------


def _obj(name: str, rv: int, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}, **extra}


def _event(kind: str, obj: Any) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


FIRST_STREAM = [
    _event("ADDED", _obj("a", 11)),
    b'{"type":"ADDED","object":{"metadata":\n',  # truncated JSON
    b"not json at all\n",
    b"[1, 2, 3]\n",
    b"\n",
    _event("ADDED", "a string where the object should be"),
    _event("WHATEVER", _obj("x", 12)),
    _event("MODIFIED", {"metadata": {"name": 7, "resourceVersion": "12"}}),  # name of the wrong type
    _event("ADDED", {"metadata": "not a mapping"}),
    _event("ADDED", {"spec": {"size": 1}}),  # no metadata at all
    # Well-formed enough to store, whatever else they hold.
    _event("MODIFIED", _obj("b", 13, spec={"size": "3"}, status=[1])),
    _event("ADDED", _obj("c", 14, spec=None, status="weird")),
    _event(
        "ADDED", {"metadata": {"name": "d", "namespace": "ns", "resourceVersion": "15", "labels": {"a": 1}}}
    ),
    _event("BOOKMARK", {"metadata": {"resourceVersion": "20"}}),
]
# The stream then breaks mid-line: the chunked body is never terminated.
BROKEN_TAIL = b'{"type":"ADDED","object":{"meta'
SECOND_STREAM = [_event("ADDED", _obj("e", 21))]


class HandWrittenServer:
    """Answers the LIST of memcacheds in ``ns`` with nothing at resourceVersion 10, the first
    WATCH with FIRST_STREAM and a broken connection, later WATCHes with SECOND_STREAM (then it
    holds them open). Records the resourceVersion of every watch and counts the lists."""

    def __init__(self) -> None:
        self.lists = 0
        self.watch_versions: list[str] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> HandWrittenServer:
        app = web.Application()
        app.router.add_get("/apis/cache.example.com/v1alpha1/namespaces/ns/memcacheds", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") not in ("true", "1"):
            self.lists += 1
            return web.json_response(
                {"kind": "MemcachedList", "apiVersion": MEMCACHEDS.api_version,
                 "metadata": {"resourceVersion": "10"}, "items": []}
            )  # fmt: skip
        self.watch_versions.append(request.query.get("resourceVersion", ""))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if len(self.watch_versions) == 1:
            for line in FIRST_STREAM:
                await response.write(line)
            await response.write(BROKEN_TAIL)
            assert request.transport is not None
            request.transport.abort()  # no terminating chunk: the client sees a broken stream
            return response
        for line in SECOND_STREAM:
            await response.write(line)
        await asyncio.Event().wait()  # hold the watch open until the test ends
        return response


async def test_reflector_skips_malformed_watch_lines_and_resumes_a_broken_stream() -> None:
    async with HandWrittenServer() as server:
        configuration = Configuration()
        configuration.host = server.url
        async with ApiClient(configuration) as api:
            store = ObjectStore(MEMCACHEDS)
            seen: list[tuple[str, str]] = []
            reflector = Reflector(
                Client(api, user_agent="bad-input-test"),
                MEMCACHEDS,
                store,
                lambda kind, obj, old: seen.append((kind, obj["metadata"]["name"])),
                namespace="ns",
                # A reflector that backed off here would wait an hour: the test would time out.
                backoff=Backoff(initial=3600, maximum=3600),
            )
            task = asyncio.create_task(reflector.run())
            try:
                await wait_for(
                    lambda: store.get("e", "ns") is not None, timeout=10, message=lambda: repr(seen)
                )
                assert not task.done()
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    assert sorted(name for _, name in store.keys("ns")) == ["a", "b", "c", "d", "e"]
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c"), ("ADDED", "d"), ("ADDED", "e")]
    b = store.get("b", "ns")
    assert b is not None
    assert b["status"] == [1]
    # One LIST only: bad lines are skipped, a broken stream is resumed from the bookmark.
    assert server.lists == 1
    assert server.watch_versions == ["10", "20"]
    assert reflector.relists == 1


# -- odd shapes through memop's own informers ----------------------------------------------------------

# Objects no conforming API server stores (it refuses them on create: labels must be a map of
# strings, ownerReferences a list of objects...) but a proxy, an aggregated API or a bug can
# send. They are written straight into the open watches of the in-memory server (as it writes
# its own events), so they reach memop over HTTP and go through its real informers: the
# transforms, the shared subtrees, the indexes, the predicates and the event mappers of the
# memcached controller, and then the reconciler.

_MEMCACHED_GROUP_VERSION = MEMCACHEDS.api_version


def _odd_deployment(name: str, namespace: str, owner_uid: str, **changes: Any) -> dict[str, Any]:
    labels = {NAME_LABEL: APP_NAME, INSTANCE_LABEL: "owner"}
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "generation": 1,
            "labels": labels,
            # Controlled by the test's real Memcached: the owner mapping enqueues it.
            "ownerReferences": [
                {
                    "apiVersion": _MEMCACHED_GROUP_VERSION,
                    "kind": MEMCACHEDS.kind,
                    "name": "owner",
                    "uid": owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]},
            },
        },
        "status": {"observedGeneration": 1, "replicas": 1, "readyReplicas": 1},
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = deployment
        for key in parents:
            target = target[key]
        target[last] = value
    return deployment


def _odd_pod(name: str, namespace: str, labels: Any, status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels},
        "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]},
        "status": status,
    }


def _odd_memcached(
    name: str, namespace: str, finalizers: Any, spec: Any = None, *, deleting: bool = False
) -> dict[str, Any]:
    memcached = {
        "apiVersion": _MEMCACHED_GROUP_VERSION,
        "kind": MEMCACHEDS.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "generation": 1,
            "finalizers": finalizers,
        },
        # Invalid by default, so its reconcile ends in a status write (404: it is on no server)
        # and creates nothing; the finalizers are handled before the spec is read.
        "spec": spec or {"size": "many"},
    }
    if deleting:
        memcached["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return memcached


def odd_objects(namespace: str, owner_uid: str) -> list[tuple[Resource, dict[str, Any], Any]]:
    """(resource, object, what memop's cache holds of it: the value at the path the check reads)."""
    other_owner = {
        "apiVersion": _MEMCACHED_GROUP_VERSION,
        "kind": MEMCACHEDS.kind,
        "name": "owner",
        "uid": owner_uid,
        "controller": True,
    }
    ns = namespace
    return [
        (DEPLOYMENTS, _odd_deployment("replicas-string", ns, owner_uid, spec__replicas="2"), "2"),
        (DEPLOYMENTS, _odd_deployment("spec-string", ns, owner_uid, spec="three"), "three"),
        (DEPLOYMENTS, _odd_deployment("spec-list", ns, owner_uid, spec=[1, "two"]), [1, "two"]),
        (DEPLOYMENTS, _odd_deployment("labels-list", ns, owner_uid, metadata__labels=["a", "b"]), ["a", "b"]),
        (
            DEPLOYMENTS,
            _odd_deployment("owners-dict", ns, owner_uid, metadata__ownerReferences=other_owner),
            other_owner,
        ),
        (DEPLOYMENTS, _odd_deployment("owners-number", ns, owner_uid, metadata__ownerReferences=7), 7),
        (DEPLOYMENTS, _odd_deployment("owners-true", ns, owner_uid, metadata__ownerReferences=True), True),
        (
            DEPLOYMENTS,
            _odd_deployment(
                "owners-items",
                ns,
                owner_uid,
                metadata__ownerReferences=[
                    1,
                    "x",
                    None,
                    ["controller"],
                    {**other_owner, "name": 5, "uid": 6},
                ],
            ),
            None,
        ),
        # A status the reconciler cannot read is dropped on the way in (and logged).
        (
            DEPLOYMENTS,
            _odd_deployment("status-list", ns, owner_uid, status=[1, "conditions", "replicas"]),
            {},
        ),
        (DEPLOYMENTS, _odd_deployment("status-string", ns, owner_uid, status="replicas"), {}),
        (
            DEPLOYMENTS,
            _odd_deployment(
                "conditions-not-a-list",
                ns,
                owner_uid,
                status={"conditions": {"type": "Progressing"}, "replicas": "two"},
            ),
            {"replicas": "two"},
        ),
        # Labelled as a pod of the real Memcached: it is mapped to it, then counted as a node.
        (
            PODS,
            _odd_pod("pod-status-list", ns, {NAME_LABEL: APP_NAME, INSTANCE_LABEL: "owner"}, [1, "phase"]),
            {},
        ),
        (
            PODS,
            _odd_pod("pod-status-string", ns, {NAME_LABEL: APP_NAME, INSTANCE_LABEL: "owner"}, "phase"),
            {},
        ),
        (
            PODS,
            _odd_pod(
                "pod-labels-numbers",
                ns,
                {NAME_LABEL: APP_NAME, INSTANCE_LABEL: 7, "x": None},
                {"phase": "Running"},
            ),
            {"phase": "Running"},
        ),
        (
            PODS,
            _odd_pod(
                "pod-labels-nested",
                ns,
                {NAME_LABEL: APP_NAME, INSTANCE_LABEL: ["owner"]},
                {"phase": "Running"},
            ),
            {"phase": "Running"},
        ),
        (
            PODS,
            _odd_pod("pod-labels-list", ns, [NAME_LABEL, APP_NAME], {"phase": "Running"}),
            {"phase": "Running"},
        ),
        (MEMCACHEDS, _odd_memcached("finalizers-string", ns, "example.com/keep"), "example.com/keep"),
        (MEMCACHEDS, _odd_memcached("finalizers-dict", ns, {FINALIZER: True}), {FINALIZER: True}),
        (
            MEMCACHEDS,
            _odd_memcached("deleting-finalizers-dict", ns, {FINALIZER: True}, deleting=True),
            {FINALIZER: True},
        ),
        # Valid, and its Deployment is the one whose ownerReferences is a number: the reconciler
        # reads that as a Deployment it does not control (and creates nothing).
        (MEMCACHEDS, _odd_memcached("owners-number", ns, [FINALIZER], {"size": 1}), [FINALIZER]),
    ]


def _checked_value(resource: Resource, obj: dict[str, Any]) -> Any:
    """The part of a cached object each case of :func:`odd_objects` is about."""
    meta = obj["metadata"]
    name = meta["name"]
    if resource is MEMCACHEDS:
        return meta.get("finalizers")
    if resource is PODS:
        return obj.get("status")
    if name.startswith("owners"):
        refs = meta.get("ownerReferences")
        return None if isinstance(refs, list) else refs
    if name.startswith("labels"):
        return meta.get("labels")
    if name.startswith(("status", "conditions")):
        return obj.get("status")
    spec = obj.get("spec")
    return spec.get("replicas") if isinstance(spec, dict) else spec


# Lines that are not events at all, for memop's watch decoding on the same streams.
_NOT_EVENTS = [b"not json at all\n", b'{"type":"ADDED","object":{"metadata":\n', b"[1, 2]\n"]


async def test_odd_shapes_go_through_memops_informers(
    kube: Kube,
    client: Client,
    namespace: str,
    operator: RunningOperator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = kube.fake
    watch_memop_logs(caplog)
    panics_before = panics()
    await client.create(MEMCACHEDS, memcached_body("owner", {"size": 1}), namespace)
    owner = await wait_for(lambda: converged(client, namespace, "owner", 1), timeout=TIMEOUT)
    cache = operator.manager.cache
    reflectors = [r for res in (MEMCACHEDS, DEPLOYMENTS, PODS) for r in cache.informer(res).reflectors]
    relists = [r.relists for r in reflectors]
    rewatches = [r.rewatches for r in reflectors]
    lists = server.log.count(verb="list", user_agent=operator.user_agent)
    reflector_tasks = list(cache._reflector_tasks.values())
    assert len(reflector_tasks) == len(reflectors) == 3

    def memops_watch(resource: Resource) -> Watcher:
        (watch,) = [
            w
            for w in server.watches.watchers()
            if w.served.rtype.plural == resource.plural and w.namespace == namespace
        ]
        return watch

    def inject(kind: str, resource: Resource, obj: dict[str, Any]) -> None:
        # The version the server is at: it does not move the reflector's resume point past a
        # real change, and the server takes it back when memop watches again.
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(server.store.resource_version)}}
        memops_watch(resource).push(event_line(kind, json.dumps(obj).encode()))

    cases = odd_objects(namespace, owner["metadata"]["uid"])

    def writes() -> dict[str, int]:
        """memop's writes but status and Events: finalizers and Deployments."""
        return {
            "memcacheds": server.log.count(
                verb="patch", resource="memcacheds", subresource="", user_agent=operator.user_agent
            ),
            **{
                verb: server.log.count(verb=verb, resource="deployments", user_agent=operator.user_agent)
                for verb in ("create", "update", "patch", "delete")
            },
        }

    writes_before = writes()

    def cached(resource: Resource, name: str) -> dict[str, Any] | None:
        return cache.get(resource, name, namespace)

    def not_as_sent(resources: tuple[Resource, ...]) -> list[str]:
        return [
            f"{res.plural}/{obj['metadata']['name']}: cached as {cached(res, obj['metadata']['name'])}"
            for res, obj, held in cases
            if res in resources
            if (c := cached(res, obj["metadata"]["name"])) is None or _checked_value(res, c) != held
        ]

    def healthy() -> None:
        assert not tracebacks(caplog.records), "\n".join(tracebacks(caplog.records))
        assert [r.relists for r in reflectors] == relists, "a reflector relisted"
        assert [r.rewatches for r in reflectors] == rewatches, "a watch broke"
        assert not any(t.done() for t in reflector_tasks), "a reflector's task ended"
        assert workers_alive(operator), "memop's controller or one of its workers died"

    for resource in (MEMCACHEDS, DEPLOYMENTS, PODS):
        for line in _NOT_EVENTS:
            memops_watch(resource).push(line)
    # Each resource comes on its own stream: the odd Memcacheds are sent once memop holds the
    # odd Deployments, or it would create the one it looks for (a race, not a finding).
    for phase in ((DEPLOYMENTS, PODS), (MEMCACHEDS,)):
        for resource, obj, _ in cases:
            if resource in phase:
                inject("ADDED", resource, obj)

        def stored(phase: tuple[Resource, ...] = phase) -> bool:
            healthy()
            return not not_as_sent(phase)

        await wait_for(stored, timeout=TIMEOUT, message=lambda phase=phase: "\n".join(not_as_sent(phase)))

    # The pod mapped to the real Memcached is judged by its reconciler: a pod without a phase
    # is Pending, so it is listed as a node.
    async def odd_pods_counted() -> bool:
        healthy()
        status = (await client.get(MEMCACHEDS, "owner", namespace)).get("status") or {}
        return sorted(n for n in status.get("nodes") or () if n.startswith("pod-")) == [
            "pod-status-list",
            "pod-status-string",
        ]

    await wait_for(odd_pods_counted, timeout=TIMEOUT)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("memop")]
    # Each of memop's three watches got the two lines that are not JSON and the one that is
    # not an event.
    assert sum("skipping a malformed watch line" in m for m in messages) == 6, messages
    assert sum("skipping a watch line that is not an event" in m for m in messages) == 3, messages
    for name in (
        "status-list",
        "status-string",
        "pod-status-list",
        "pod-status-string",
        "owners-number",
        "owners-true",
        "owners-dict",
        "finalizers-string",
        "finalizers-dict",
        "deleting-finalizers-dict",
    ):
        assert any(name in m for m in messages), f"nothing logged about {name}: {messages}"
    assert any(
        "Deployment owners-number exists and is not controlled by this Memcached" in m for m in messages
    ), messages

    # Each odd Memcached was reconciled to its end, a status write (404: it is on no server);
    # memop wrote no finalizers it could not read, and no Deployment for a Memcached whose
    # Deployment it does not control.
    def odd_memcacheds_reconciled() -> bool:
        assert writes() == writes_before
        return (
            server.log.count(verb="patch", subresource="status", status=404, user_agent=operator.user_agent)
            >= 3
        )

    await wait_for(odd_memcacheds_reconciled, timeout=TIMEOUT)

    # The odd objects go away as they came (Memcacheds first, for the reason above); real
    # changes are still applied after them.
    for phase in ((MEMCACHEDS,), (DEPLOYMENTS, PODS)):
        for resource, obj, _ in cases:
            if resource in phase:
                inject("DELETED", resource, obj)

        def deleted(phase: tuple[Resource, ...] = phase) -> bool:
            healthy()
            return all(cached(res, obj["metadata"]["name"]) is None for res, obj, _ in cases if res in phase)

        await wait_for(deleted, timeout=TIMEOUT)
    await client.patch(MEMCACHEDS, "owner", {"spec": {"size": 2}}, namespace)
    await client.create(MEMCACHEDS, memcached_body("after", {"size": 1}), namespace)

    async def real_changes_applied() -> bool:
        healthy()
        return (
            await converged(client, namespace, "owner", 2) is not None
            and await converged(client, namespace, "after", 1) is not None
        )

    await wait_for(real_changes_applied, timeout=TIMEOUT)
    healthy()
    assert server.log.count(verb="list", user_agent=operator.user_agent) == lists
    assert panics() == panics_before
