"""The simulated cluster's node: the kubelet registers a Node as a v1.36 kubelet does (and again
when it is deleted), the scheduler binds pods to it through the ``binding`` subresource's code,
and the kubelet runs only the pods bound to it. Without nodes there is no Node at all."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from memop.testing.apiserver.server import ApiServer
from memop.testing.controllers.node import HOST_IP, NODE_NAME
from memop.testing.controllers.scheduler import NO_NODES
from memop.testing.wait import wait_for
from tests.conftest import Http
from tests.testing.test_apiserver_tables import get_table, header, rows

NS = "default"


pytestmark = pytest.mark.fake_only  # the simulated cluster's own node


@pytest.fixture
def apiserver_options() -> dict[str, Any]:
    """The ``kube`` fixture's server with the simulated control plane and its node."""
    return {"simulate_controllers": True}


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec},
    }


async def the_node(http: Http) -> dict[str, Any]:
    async def listed() -> dict[str, Any] | None:
        items = (await http.get("/api/v1/nodes")).body["items"]
        return items[0] if items else None

    return await wait_for(listed, timeout=30, message="the node registered")


async def running(http: Http, name: str) -> dict[str, Any]:
    async def read() -> dict[str, Any] | None:
        body: dict[str, Any] = (await http.get(f"/api/v1/namespaces/{NS}/pods/{name}")).body
        return body if body["status"].get("phase") == "Running" else None

    return await wait_for(read, timeout=30, message=f"pod {name} running")


async def test_the_kubelet_registers_its_node(http: Http) -> None:
    node = await the_node(http)
    assert node["metadata"]["name"] == NODE_NAME
    assert [m["manager"] for m in node["metadata"]["managedFields"]] == ["kubelet"]
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == NODE_NAME
    assert labels["kubernetes.io/os"] == labels["beta.kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/arch"] == labels["beta.kubernetes.io/arch"] == "amd64"
    assert labels["node-role.kubernetes.io/control-plane"] == ""
    assert node["spec"]["podCIDRs"] == [node["spec"]["podCIDR"]] == ["10.244.0.0/16"]
    status = node["status"]
    assert status["capacity"]["pods"] == status["allocatable"]["pods"] == "110"
    for resource in ("cpu", "memory", "ephemeral-storage", "hugepages-1Gi", "hugepages-2Mi"):
        assert resource in status["capacity"]
        assert resource in status["allocatable"]
    conditions = {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}
    assert conditions == {
        "MemoryPressure": ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
    }
    assert status["addresses"] == [
        {"type": "InternalIP", "address": HOST_IP},
        {"type": "Hostname", "address": NODE_NAME},
    ]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    info = status["nodeInfo"]
    assert info["kubeletVersion"] == "v1.36.2"
    assert info["kubeProxyVersion"] == ""  # DisableNodeKubeProxyVersion, on since v1.33
    assert info["containerRuntimeVersion"].startswith("containerd://")
    assert (info["operatingSystem"], info["architecture"]) == ("linux", "amd64")
    assert all(info[key] for key in ("osImage", "kernelVersion", "machineID", "systemUUID", "bootID"))


async def test_a_deleted_node_is_registered_again(http: Http) -> None:
    first = await the_node(http)
    assert (await http.delete(f"/api/v1/nodes/{NODE_NAME}")).status == 200

    async def again() -> dict[str, Any] | None:
        reply = await http.get(f"/api/v1/nodes/{NODE_NAME}")
        return (
            reply.body
            if reply.status == 200 and reply.body["metadata"]["uid"] != first["metadata"]["uid"]
            else None
        )

    await wait_for(again, timeout=30, message="the node registered again")


async def test_a_control_plane_without_nodes_has_no_node() -> None:
    async with (
        ApiServer(simulate_controllers=True, nodes=False) as server,
        client.ApiClient(server.client_configuration()) as api,
    ):
        http = Http(api)
        await http.post(f"/api/v1/namespaces/{NS}/pods", pod("lonely"))

        async def unschedulable() -> dict[str, Any] | None:
            body: dict[str, Any] = (await http.get(f"/api/v1/namespaces/{NS}/pods/lonely")).body
            return body if body["status"].get("conditions") else None

        (condition,) = (await wait_for(unschedulable, timeout=30))["status"]["conditions"]
        assert (condition["reason"], condition["message"]) == ("Unschedulable", NO_NODES)
        # By now the kubelet would have registered a node, had there been one.
        assert (await http.get("/api/v1/nodes")).body["items"] == []


async def test_a_deployment_s_pods_are_bound_to_the_node_and_run(http: Http) -> None:
    labels = {"app": "web"}
    body = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod("")["spec"]},
        },
    }
    assert (await http.post(f"/apis/apps/v1/namespaces/{NS}/deployments", body)).status == 201

    async def all_running() -> list[dict[str, Any]] | None:
        items = (await http.get(f"/api/v1/namespaces/{NS}/pods", query={"labelSelector": "app=web"})).body[
            "items"
        ]
        done = len(items) == 2 and all(p["status"].get("phase") == "Running" for p in items)
        return items if done else None

    for item in await wait_for(all_running, timeout=30, message="the Deployment's pods running"):
        assert item["spec"]["nodeName"] == NODE_NAME
        assert item["status"]["hostIP"] == HOST_IP
        scheduled = next(c for c in item["status"]["conditions"] if c["type"] == "PodScheduled")
        assert scheduled["status"] == "True"


async def test_a_watcher_sees_the_binding_then_the_kubelet(http: Http) -> None:
    async with http.watch(
        f"/api/v1/namespaces/{NS}/pods", {"fieldSelector": "metadata.name=watched"}
    ) as events:
        await http.post(f"/api/v1/namespaces/{NS}/pods", pod("watched"))
        added, bound, ran = [await events.next_not_bookmark() for _ in range(3)]
    assert added is not None
    assert bound is not None
    assert ran is not None
    assert [e["type"] for e in (added, bound, ran)] == ["ADDED", "MODIFIED", "MODIFIED"]
    assert "nodeName" not in added["object"]["spec"]
    assert bound["object"]["spec"]["nodeName"] == NODE_NAME
    assert bound["object"]["status"]["phase"] == "Pending"
    assert [c["type"] for c in bound["object"]["status"]["conditions"]] == ["PodScheduled"]
    assert ran["object"]["status"]["phase"] == "Running"


async def test_the_wide_pod_table_shows_the_node(http: Http) -> None:
    await http.post(f"/api/v1/namespaces/{NS}/pods", pod("shown"))
    await running(http, "shown")
    cells = _cells_by_column(await get_table(http, f"/api/v1/namespaces/{NS}/pods/shown"))
    assert cells["Node"] == NODE_NAME
    assert cells["IP"].startswith("10.244.")


async def test_the_node_table_shows_a_ready_control_plane_node(http: Http) -> None:
    await the_node(http)
    cells = _cells_by_column(await get_table(http, f"/api/v1/nodes/{NODE_NAME}"))
    assert {k: cells[k] for k in ("Name", "Status", "Roles", "Version", "Internal-IP", "External-IP")} == {
        "Name": NODE_NAME,
        "Status": "Ready",
        "Roles": "control-plane",
        "Version": "v1.36.2",
        "Internal-IP": HOST_IP,
        "External-IP": "<none>",
    }


def _cells_by_column(table: dict[str, Any]) -> dict[str, Any]:
    """The one row's cells, by their column's name."""
    (cells,) = rows(table).values()
    return dict(zip(header(table), cells, strict=True))


async def test_a_pod_for_a_node_that_does_not_exist_stays_pending_untouched(http: Http) -> None:
    created = (await http.post(f"/api/v1/namespaces/{NS}/pods", pod("stray", nodeName="elsewhere"))).body
    placed = (await http.post(f"/api/v1/namespaces/{NS}/pods", pod("placed", nodeName=NODE_NAME))).body
    # Each controller takes pods in the order they came: once the later pod runs, the scheduler
    # and the kubelet have seen the stray one and left it alone.
    ran = await running(http, "placed")
    assert ran["metadata"]["resourceVersion"] != placed["metadata"]["resourceVersion"]
    stray = (await http.get(f"/api/v1/namespaces/{NS}/pods/stray")).body
    assert stray["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert stray["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


async def test_a_gated_pod_waits_for_its_gates(http: Http) -> None:
    await http.post(
        f"/api/v1/namespaces/{NS}/pods", pod("gated", schedulingGates=[{"name": "example.com/hold"}])
    )
    await http.post(f"/api/v1/namespaces/{NS}/pods", pod("ungated"))
    await running(http, "ungated")  # the scheduler has been through both by now
    gated = (await http.get(f"/api/v1/namespaces/{NS}/pods/gated")).body
    assert "nodeName" not in gated["spec"]
    (condition,) = gated["status"]["conditions"]
    assert condition["reason"] == "SchedulingGated"
    await http.patch(f"/api/v1/namespaces/{NS}/pods/gated", {"spec": {"schedulingGates": None}})
    assert (await running(http, "gated"))["spec"]["nodeName"] == NODE_NAME


async def test_a_daemon_set_s_pod_is_bound_by_the_scheduler(http: Http) -> None:
    labels = {"app": "agent"}
    body = {
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod("")["spec"]},
        },
    }
    assert (await http.post(f"/apis/apps/v1/namespaces/{NS}/daemonsets", body)).status == 201

    async def placed() -> dict[str, Any] | None:
        items = (await http.get(f"/api/v1/namespaces/{NS}/pods", query={"labelSelector": "app=agent"})).body[
            "items"
        ]
        return items[0] if items and items[0]["status"].get("phase") == "Running" else None

    agent = await wait_for(placed, timeout=30, message="the DaemonSet's pod running")
    # The controller pins it with node affinity and leaves spec.nodeName to the scheduler.
    terms = agent["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [NODE_NAME]
    assert agent["spec"]["nodeName"] == NODE_NAME
