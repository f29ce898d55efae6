"""The in-memory server's test controls: injected failures and latency, watch disruption,
compaction, restart, and the request log. They need the fake, so they skip on a real cluster."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import aiohttp
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.rest import ApiException

from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

pytestmark = pytest.mark.fake_only


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


async def test_fail_the_next_requests(http: Http, cluster: ClusterHandle) -> None:
    server = cluster.fake
    rule = server.faults.fail(500, times=2, verb="create", resource="configmaps")
    statuses = [(await http.post(cm_path("default"), {"metadata": {"generateName": "a-"}})) for _ in range(3)]
    assert [r.status for r in statuses] == [500, 500, 201]
    assert statuses[0].body["reason"] == "InternalError"
    assert statuses[0].body["message"] == "Internal error occurred: injected fault"
    assert rule.hits == 2
    # Only matching requests are failed.
    server.faults.fail(503, times=1, verb="create", resource="configmaps", namespace="kube-system")
    assert (await http.post(cm_path("default"), {"metadata": {"generateName": "a-"}})).status == 201
    unavailable = await http.post(cm_path("kube-system"), {"metadata": {"generateName": "a-"}})
    assert unavailable.status == 503
    assert unavailable.body["reason"] == "ServiceUnavailable"


async def test_forbidden_carries_the_rbac_message(http: Http, cluster: ClusterHandle) -> None:
    faults = cluster.fake.faults
    faults.forbid(verb="create", resource="deployments", user="system:serviceaccount:ops:memop")
    reply = await http.post("/apis/apps/v1/namespaces/default/deployments", {"metadata": {"name": "x"}})
    assert reply.status == 403
    assert reply.body["reason"] == "Forbidden"
    assert reply.body["message"] == (
        'deployments.apps is forbidden: User "system:serviceaccount:ops:memop" cannot create resource '
        '"deployments" in API group "apps" in the namespace "default"'
    )
    assert reply.body["details"] == {"group": "apps", "kind": "deployments"}
    faults.forbid(verb="get", resource="deployments", user="u")
    named = await http.get("/apis/apps/v1/namespaces/default/deployments/web")
    assert named.body["message"] == (
        'deployments.apps "web" is forbidden: User "u" cannot get resource "deployments" in API group '
        '"apps" in the namespace "default"'
    )
    faults.forbid(verb="list", resource="namespaces", user="u")
    cluster_scope = await http.get("/api/v1/namespaces")
    assert cluster_scope.body["message"] == (
        'namespaces is forbidden: User "u" cannot list resource "namespaces" in API group "" at the '
        "cluster scope"
    )
    faults.forbid(verb="update", resource="deployments", subresource="status", user="u")
    status = await http.put("/apis/apps/v1/namespaces/default/deployments/web/status", {"metadata": {}})
    assert 'cannot update resource "deployments/status"' in status.body["message"]


async def test_throttling_and_conflicts(http: Http, cluster: ClusterHandle) -> None:
    faults = cluster.fake.faults
    faults.fail(429, verb="list", resource="configmaps", retry_after=3)
    throttled = await http.get(cm_path("default"))
    assert throttled.status == 429
    assert throttled.headers["Retry-After"] == "3"
    assert throttled.body["reason"] == "TooManyRequests"
    assert throttled.body["details"] == {"retryAfterSeconds": 3}
    await http.post(cm_path("default"), {"metadata": {"name": "a"}})
    faults.fail(409, verb="update", resource="configmaps", name="a")
    conflict = await http.put(cm_path("default", "a"), {"metadata": {"name": "a"}})
    assert conflict.status == 409
    assert conflict.body["reason"] == "Conflict"
    assert conflict.body["message"].startswith('Operation cannot be fulfilled on configmaps "a"')
    assert (await http.put(cm_path("default", "a"), {"metadata": {"name": "a"}})).status == 200


async def test_chaos_is_reproducible() -> None:
    async def outcomes(seed: int) -> list[int]:
        async with ApiServer() as server:
            server.faults.chaos(0.5, statuses=(500, 503), seed=seed, resource="configmaps")
            api = client.ApiClient(server.client_configuration())
            try:
                from tests.conftest import Http  # noqa: PLC0415

                http = Http(api)
                return [(await http.get(cm_path("default"))).status for _ in range(20)]
            finally:
                await api.close()

    first, second, other = await outcomes(7), await outcomes(7), await outcomes(8)
    assert first == second
    assert first != other
    assert {200, 500, 503} >= set(first)
    assert 200 in first
    assert set(first) & {500, 503}


async def test_chaos_counts_each_status_it_answered(http: Http, cluster: ClusterHandle) -> None:
    # One rule, one draw per request: the statuses share the rate by how often they are listed.
    rule = cluster.fake.faults.chaos(1.0, statuses=(500, 500, 429), seed=3, resource="configmaps")
    answered = [(await http.get(cm_path("default"))).status for _ in range(30)]
    assert rule.hits == 30
    assert rule.hits_by_status == {500: answered.count(500), 429: answered.count(429)}
    assert answered.count(500) > answered.count(429) > 0


async def test_latency(http: Http, cluster: ClusterHandle) -> None:
    rule = cluster.fake.faults.delay(0.2, times=1, verb="list", resource="configmaps")
    started = time.monotonic()
    assert (await http.get(cm_path("default"))).status == 200
    assert time.monotonic() - started >= 0.2
    assert rule.hits == 1
    started = time.monotonic()
    await http.get(cm_path("default"))
    assert time.monotonic() - started < 0.2


async def test_faults_never_touch_discovery(http: Http, cluster: ClusterHandle) -> None:
    cluster.fake.faults.fail(500, times=None)
    assert (await http.get("/api/v1")).status == 200
    assert (await http.get("/healthz")).status == 200
    assert (await http.get(cm_path("default"))).status == 500
    cluster.fake.faults.clear()
    assert (await http.get(cm_path("default"))).status == 200


async def test_drop_watches_breaks_the_stream(cluster: ClusterHandle) -> None:
    server = cluster.fake
    core = client.CoreV1Api(cluster.api_client())
    rv = (await core.list_namespaced_config_map("default")).metadata.resource_version

    async def consume() -> None:
        async with watch.Watch() as w:
            async for _ in w.stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=rv,
                timeout_seconds=30,
                _request_timeout=60,
            ):
                pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    await wait_for(lambda: len(server.watches.watchers()) == 1, timeout=5)
    assert await server.drop_watches() == 1
    with pytest.raises(aiohttp.ClientPayloadError):
        await asyncio.wait_for(task, 5)


async def test_silenced_watches_get_nothing_until_released(http: Http, cluster: ClusterHandle) -> None:
    server = cluster.fake
    rv = (await http.get(cm_path("default"))).body["metadata"]["resourceVersion"]
    # A fractional timeoutSeconds (the fake accepts it) keeps the test short.
    async with http.watch(cm_path("default"), {"resourceVersion": rv, "timeoutSeconds": 0.3}) as early:
        server.silence_watches(True)
        await http.post(cm_path("default"), {"metadata": {"name": "a"}})
        async with http.watch(cm_path("default"), {"resourceVersion": rv}) as late:
            await http.post(cm_path("default"), {"metadata": {"name": "b"}})
            with pytest.raises(TimeoutError):
                await early.next(timeout=0.3)
            with pytest.raises(TimeoutError):
                await late.next(timeout=0.3)
            # Silence outlasts the early watch's timeout: no bytes at all, not even the end.
            await asyncio.sleep(0.5)
            with pytest.raises(TimeoutError):
                await early.next(timeout=0.1)
            server.silence_watches(False)
            assert [e["object"]["metadata"]["name"] for e in await early.take(2)] == ["a", "b"]
            assert [e["object"]["metadata"]["name"] for e in await late.take(2)] == ["a", "b"]
            assert await early.next() is None


async def test_expire_watches_sends_410_and_ends(http: Http, cluster: ClusterHandle) -> None:
    rv = (await http.get(cm_path("default"))).body["metadata"]["resourceVersion"]
    async with http.watch(cm_path("default"), {"resourceVersion": rv}) as stream:
        await wait_for(lambda: len(cluster.fake.watches.watchers()) == 1, timeout=5)
        assert await cluster.fake.expire_watches() == 1
        event = await stream.next()
        assert event is not None
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410
        assert event["object"]["reason"] == "Expired"
        assert await stream.next() is None


async def test_compaction_makes_the_client_relist(cluster: ClusterHandle) -> None:
    core = client.CoreV1Api(cluster.api_client())
    rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    cluster.fake.compact()

    async def consume() -> None:
        async with watch.Watch() as w:
            async for _ in w.stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=rv,
                timeout_seconds=5,
                _request_timeout=10,
            ):
                pass

    with pytest.raises(ApiException) as raised:
        await consume()
    assert raised.value.status == 410


async def test_restart_keeps_state_and_port(http: Http, cluster: ClusterHandle) -> None:
    server = cluster.fake
    port = server.port
    created = (await http.post(cm_path("default"), {"metadata": {"name": "a"}})).body
    rv = created["metadata"]["resourceVersion"]
    async with http.watch(cm_path("default"), {"resourceVersion": rv}) as stream:
        await wait_for(lambda: len(server.watches.watchers()) == 1, timeout=5)
        await server.restart()
        with pytest.raises((aiohttp.ClientPayloadError, aiohttp.ClientConnectionError)):
            await stream.next()
    assert server.port == port
    again = await http.get(cm_path("default", "a"))
    assert again.status == 200
    assert again.body["metadata"]["resourceVersion"] == rv
    later = (await http.post(cm_path("default"), {"metadata": {"name": "b"}})).body
    assert int(later["metadata"]["resourceVersion"]) > int(rv)


async def test_the_request_log(http: Http, cluster: ClusterHandle) -> None:
    log = cluster.fake.log
    log.clear()
    base = "/apis/apps/v1/namespaces/default/deployments"
    body = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "x:1"}]},
            },
        },
    }
    await http.post(base, body)
    current = (await http.get(f"{base}/web")).body
    await http.get(base)
    await http.put(f"{base}/web", current)
    await http.patch(f"{base}/web/status", {"status": {"replicas": 1}})
    async with http.watch(
        base, {"resourceVersion": current["metadata"]["resourceVersion"], "timeoutSeconds": 0.2}
    ) as s:
        while await s.next() is not None:
            pass
    await http.delete(f"{base}/web")
    await http.delete(base)
    await http.get("/version")
    records = log.filter()
    assert [(r.verb, r.resource, r.subresource, r.name, r.status) for r in records] == [
        ("create", "deployments", "", "", 201),
        ("get", "deployments", "", "web", 200),
        ("list", "deployments", "", "", 200),
        ("update", "deployments", "", "web", 200),
        ("patch", "deployments", "status", "web", 200),
        ("watch", "deployments", "", "", 200),
        ("delete", "deployments", "", "web", 200),
        ("deletecollection", "deployments", "", "", 200),
    ]
    assert all(r.group == "apps" and r.version == "v1" and r.namespace == "default" for r in records)
    assert all(r.user_agent.startswith("OpenAPI-Generator/") for r in records)
    assert log.count(verb="get", resource="deployments") == 1
    assert log.count(user_agent="kubectl") == 0
    assert log.counts_by_verb()["create"] == 1
    assert [r.path for r in log.filter(resources_only=False) if not r.resource_request] == ["/version"]
    log.clear()
    assert len(log) == 0


async def test_the_request_log_counts_by_verb_resource_and_client(cluster: ClusterHandle) -> None:
    log = cluster.fake.log
    operator = cluster.api_client()
    operator.user_agent = "memop/0.1.0 (linux/amd64)"
    tool = cluster.api_client()
    tool.user_agent = "kubectl/v1.32.4 (linux/amd64) kubernetes/abc"
    ops_core, tool_core = client.CoreV1Api(operator), client.CoreV1Api(tool)
    ops_apps = client.AppsV1Api(operator)
    log.clear()
    await ops_core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    await ops_core.read_namespaced_config_map("a", "default")
    await ops_core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    await ops_apps.list_namespaced_deployment("default")
    await tool_core.list_namespaced_config_map("default")
    await tool_core.list_namespaced_config_map("default")
    await tool_core.delete_namespaced_config_map("a", "default")
    await client.VersionApi(tool).get_code()  # not an API resource request: never counted

    assert log.counts_by_user_agent() == {
        "memop/0.1.0 (linux/amd64)": 4,
        "kubectl/v1.32.4 (linux/amd64) kubernetes/abc": 3,
    }
    assert log.counts_by_user_agent(verb="list") == {
        "memop/0.1.0 (linux/amd64)": 1,
        "kubectl/v1.32.4 (linux/amd64) kubernetes/abc": 2,
    }
    assert log.counts_by_user_agent(resource="deployments") == {"memop/0.1.0 (linux/amd64)": 1}
    assert log.counts_by_verb(user_agent="memop/") == {"create": 1, "get": 1, "patch": 1, "list": 1}
    assert log.counts_by_verb(resource="configmaps", user_agent="kubectl/") == {"list": 2, "delete": 1}
    assert log.counts_by_resource() == {"configmaps": 6, "deployments": 1}
    assert log.counts_by_resource(verb="list", user_agent="kubectl/") == {"configmaps": 2}
    assert log.counts(user_agent="memop/") == {
        ("create", "configmaps"): 1,
        ("get", "configmaps"): 1,
        ("patch", "configmaps"): 1,
        ("list", "deployments"): 1,
    }
    assert log.counts()[("list", "configmaps")] == 2
    assert log.count(verb="delete", resource="configmaps", user_agent="kubectl/", status=200) == 1


async def test_a_client_gone_before_its_body_is_one_log_line_not_a_traceback(
    cluster: ClusterHandle, caplog: pytest.LogCaptureFixture
) -> None:
    # An operator stopped mid-request (the benches stop theirs while they write Events): the
    # server reads a body that never comes. That is the client's doing, not a server error.
    caplog.set_level(logging.INFO)
    server = cluster.fake
    delay = server.faults.delay(0.2, times=1, verb="create", resource="configmaps", namespace="gone")
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(
        b"POST /api/v1/namespaces/gone/configmaps HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    )
    await writer.drain()
    await wait_for(lambda: delay.hits == 1, timeout=10)
    writer.close()
    await wait_for(
        lambda: any(r.path == "/api/v1/namespaces/gone/configmaps" for r in server.log.records),
        timeout=10,
    )
    lines = [r for r in caplog.records if "/api/v1/namespaces/gone/configmaps" in r.getMessage()]
    assert [(r.levelname, r.getMessage()) for r in lines] == [
        ("INFO", "request POST /api/v1/namespaces/gone/configmaps: the client closed the connection first")
    ]
    assert all(r.exc_info is None for r in lines)
    del reader
