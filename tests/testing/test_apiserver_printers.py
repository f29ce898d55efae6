"""The Table columns and cells of every built-in kind the in-memory server serves, as
kube-apiserver v1.36 prints them (``pkg/printers/internalversion``).

Each test makes objects in the states whose printing differs and compares every cell (an age
cell of an object the test made only by its form). With USE_EXISTING_CLUSTER=true the same
tests run against a real cluster: that is where the expected cells come from. Pods name a
scheduler that does not exist, so no real scheduler or kubelet changes what the test wrote.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from memop.testing.apiserver import columns
from tests.testing.test_apiserver_tables import AGE, ago, get_table, header, rows

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

NO_SCHEDULER = "memop-test-no-such-scheduler"


async def create(
    http: Http, path: str, body: dict[str, Any], status: dict[str, Any] | None = None
) -> dict[str, Any]:
    created = await http.post(path, body)
    assert created.status == 201, created.body
    if status is not None:
        name = created.body["metadata"]["name"]
        updated = await http.patch(f"{path}/{name}/status", {"status": status})
        assert updated.status == 200, updated.body
        return dict(updated.body)
    return dict(created.body)


def without_age(cells: list[Any], index: int) -> list[Any]:
    assert AGE.match(cells[index]), cells
    return cells[:index] + cells[index + 1 :]


# --- pods ------------------------------------------------------------------------------------------------


def pod(name: str, *containers: str, init: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {
            "schedulerName": NO_SCHEDULER,
            "containers": [{"name": c, "image": "busybox"} for c in containers or ("app",)],
            **spec,
        },
    }
    if init:
        body["spec"]["initContainers"] = init
    return body


def container(
    name: str, state: dict[str, Any], *, ready: bool = False, restarts: int = 0, **more: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "state": state,
        "ready": ready,
        "restartCount": restarts,
        "image": "busybox",
        "imageID": "",
        **more,
    }


RUNNING = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}


def waiting(reason: str) -> dict[str, Any]:
    return {"waiting": {"reason": reason}}


def terminated(code: int, reason: str = "", signal: int = 0) -> dict[str, Any]:
    state: dict[str, Any] = {
        "exitCode": code,
        "startedAt": "2026-01-01T00:00:00Z",
        "finishedAt": "2026-01-01T00:01:00Z",
    }
    if reason:
        state["reason"] = reason
    if signal:
        state["signal"] = signal
    return {"terminated": state}


def condition(kind: str, status: str, reason: str = "") -> dict[str, Any]:
    cond = {"type": kind, "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    if reason:
        cond["reason"] = reason
    return cond


SIDECAR = {"name": "sidecar", "image": "busybox", "restartPolicy": "Always"}
SETUP = {"name": "setup", "image": "busybox"}


def pod_cases() -> list[tuple[dict[str, Any], dict[str, Any] | None, list[Any]]]:
    """(pod, status written, cells but the age) for each way a pod prints."""
    restarted = {
        "terminated": {**terminated(1, "Error")["terminated"], "finishedAt": ago(3 * 3600 + 30 * 60 + 20)}
    }
    crashed = {
        "terminated": {**terminated(1, "Error")["terminated"], "finishedAt": ago(3 * 86400 + 4 * 3600 + 60)}
    }
    n = "<none>"
    return [
        (pod("pending"), None, ["pending", "0/1", "Pending", "0", n, n, n, n]),
        (
            pod("creating"),
            {"phase": "Pending", "containerStatuses": [container("app", waiting("ContainerCreating"))]},
            ["creating", "0/1", "ContainerCreating", "0", n, n, n, n],
        ),
        (
            pod("running", "app", "side"),
            {
                "phase": "Running",
                "podIP": "10.1.2.3",
                "podIPs": [{"ip": "10.1.2.3"}],
                "nominatedNodeName": "node-x",
                "conditions": [condition("Ready", "True")],
                "containerStatuses": [
                    container("app", RUNNING, ready=True, restarts=2, lastState=restarted),
                    container("side", RUNNING, ready=True),
                ],
            },
            ["running", "2/2", "Running", "2 (3h30m ago)", "10.1.2.3", n, "node-x", n],
        ),
        (
            pod("crash"),
            {
                "phase": "Running",
                "containerStatuses": [
                    container("app", waiting("CrashLoopBackOff"), restarts=5, lastState=crashed)
                ],
            },
            ["crash", "0/1", "CrashLoopBackOff", "5 (3d4h ago)", n, n, n, n],
        ),
        (
            pod("done"),
            {"phase": "Succeeded", "containerStatuses": [container("app", terminated(0, "Completed"))]},
            ["done", "0/1", "Completed", "0", n, n, n, n],
        ),
        (
            pod("failed"),
            {"phase": "Failed", "containerStatuses": [container("app", terminated(2))]},
            ["failed", "0/1", "ExitCode:2", "0", n, n, n, n],
        ),
        (
            pod("signal"),
            {"phase": "Running", "containerStatuses": [container("app", terminated(143, signal=15))]},
            ["signal", "0/1", "Signal:15", "0", n, n, n, n],
        ),
        (
            pod("evicted"),
            {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."},
            ["evicted", "0/1", "Evicted", "0", n, n, n, n],
        ),
        (
            pod("not-ready", "a", "b"),
            {
                "phase": "Running",
                "conditions": [condition("Ready", "False")],
                "containerStatuses": [
                    container("a", RUNNING, ready=True),
                    container("b", terminated(0, "Completed")),
                ],
            },
            ["not-ready", "1/2", "NotReady", "0", n, n, n, n],
        ),
        (
            pod("init-waiting", init=[SETUP]),
            {
                "phase": "Pending",
                "initContainerStatuses": [container("setup", waiting("PodInitializing"))],
                "containerStatuses": [container("app", waiting("PodInitializing"))],
            },
            ["init-waiting", "0/1", "Init:0/1", "0", n, n, n, n],
        ),
        (
            pod("init-crash", init=[SETUP]),
            {
                "phase": "Pending",
                "initContainerStatuses": [container("setup", waiting("CrashLoopBackOff"), restarts=3)],
            },
            ["init-crash", "0/1", "Init:CrashLoopBackOff", "3", n, n, n, n],
        ),
        (
            pod("init-error", init=[SETUP]),
            {"phase": "Pending", "initContainerStatuses": [container("setup", terminated(1, "Error"))]},
            ["init-error", "0/1", "Init:Error", "0", n, n, n, n],
        ),
        (
            pod("init-signal", init=[SETUP]),
            {"phase": "Pending", "initContainerStatuses": [container("setup", terminated(137, signal=9))]},
            ["init-signal", "0/1", "Init:Signal:9", "0", n, n, n, n],
        ),
        (
            pod("sidecar", init=[SIDECAR]),
            {
                "phase": "Running",
                "conditions": [condition("Initialized", "True"), condition("Ready", "True")],
                "initContainerStatuses": [
                    container("sidecar", RUNNING, ready=True, restarts=1, started=True)
                ],
                "containerStatuses": [container("app", RUNNING, ready=True)],
            },
            ["sidecar", "2/2", "Running", "1", n, n, n, n],
        ),
        (
            pod(
                "gates", readinessGates=[{"conditionType": "memop.test/a"}, {"conditionType": "memop.test/b"}]
            ),
            {
                "phase": "Pending",
                "conditions": [condition("memop.test/a", "True"), condition("memop.test/b", "False")],
            },
            ["gates", "0/1", "Pending", "0", n, n, n, "1/2"],
        ),
        (
            pod("sched-gated"),
            {"phase": "Pending", "conditions": [condition("PodScheduled", "False", "SchedulingGated")]},
            ["sched-gated", "0/1", "SchedulingGated", "0", n, n, n, n],
        ),
    ]


async def test_pods(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    cases = pod_cases()
    for body, status, _ in cases:
        await create(http, path, body, status)
    table = await get_table(http, path)
    assert table["columnDefinitions"] == list(columns.PODS)
    got = {name: without_age(cells, 4) for name, cells in rows(table).items()}
    assert got == {body["metadata"]["name"]: cells for body, _, cells in cases}
    completed = {r["object"]["metadata"]["name"]: r.get("conditions") for r in table["rows"]}
    assert completed["done"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]
    assert completed["failed"] == [
        {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
    ]
    assert completed["running"] is None


async def test_a_terminating_pod(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    held = {"metadata": {"name": "held", "finalizers": ["memop.test/hold"]}, "spec": pod("held")["spec"]}
    await create(
        http, path, held, {"phase": "Running", "containerStatuses": [container("app", RUNNING, ready=True)]}
    )
    assert (await http.delete(f"{path}/held")).status == 200
    try:
        cells = rows(await get_table(http, f"{path}/held"))["held"]
        assert without_age(cells, 4) == [
            "held",
            "1/1",
            "Terminating",
            "0",
            "<none>",
            "<none>",
            "<none>",
            "<none>",
        ]
        lost = await http.patch(f"{path}/held/status", {"status": {"reason": "NodeLost"}})
        assert lost.status == 200, lost.body
        assert rows(await get_table(http, f"{path}/held"))["held"][2] == "Unknown"
    finally:
        await http.patch(f"{path}/held", {"metadata": {"finalizers": None}})


# --- workloads -------------------------------------------------------------------------------------------

SELECTOR = {
    "matchLabels": {"app": "web"},
    "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["b", "a"]},
        {"key": "env", "operator": "Exists"},
        {"key": "zone", "operator": "NotIn", "values": ["z"]},
        {"key": "old", "operator": "DoesNotExist"},
    ],
}
TEMPLATE = {
    "metadata": {"labels": {"app": "web", "tier": "a", "env": "x"}},
    "spec": {
        "schedulerName": NO_SCHEDULER,
        "containers": [{"name": "web", "image": "nginx:1"}, {"name": "log", "image": "busybox:2"}],
    },
}


async def test_deployments_and_replicasets(http: Http, namespace: str) -> None:
    """At zero replicas, so no controller changes the cells the test reads."""
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    spec = {"replicas": 0, "selector": SELECTOR, "template": TEMPLATE}
    await create(http, deployments, {"metadata": {"name": "web"}, "spec": spec})
    table = await get_table(http, deployments)
    assert table["columnDefinitions"] == list(columns.DEPLOYMENTS)
    selector = "app=web,env,!old,tier in (a,b),zone notin (z)"
    assert without_age(rows(table)["web"], 4) == [
        "web",
        "0/0",
        0,
        0,
        "web,log",
        "nginx:1,busybox:2",
        selector,
    ]
    replicasets = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
    await create(http, replicasets, {"metadata": {"name": "rs"}, "spec": {**spec, "replicas": 0}})
    table = await get_table(http, f"{replicasets}/rs")
    assert table["columnDefinitions"] == list(columns.REPLICASETS)
    assert without_age(rows(table)["rs"], 4) == ["rs", 0, 0, 0, "web,log", "nginx:1,busybox:2", selector]


async def test_pod_disruption_budgets(http: Http, namespace: str) -> None:
    path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    selector = {"matchLabels": {"app": "nothing-here"}}
    await create(http, path, {"metadata": {"name": "min"}, "spec": {"minAvailable": 2, "selector": selector}})
    await create(
        http, path, {"metadata": {"name": "max"}, "spec": {"maxUnavailable": "50%", "selector": selector}}
    )
    table = await get_table(http, path)
    assert table["columnDefinitions"] == list(columns.PODDISRUPTIONBUDGETS)
    got = {name: without_age(cells, 4) for name, cells in rows(table).items()}
    assert got == {"min": ["min", "2", "N/A", 0], "max": ["max", "N/A", "50%", 0]}


# --- events ----------------------------------------------------------------------------------------------


async def test_events(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/events"
    first, last = ago(3 * 86400 + 4 * 3600 + 60), ago(5 * 3600 + 600 + 20)
    involved = {"kind": "Pod", "name": "web-1", "namespace": namespace, "fieldPath": "spec.containers{web}"}
    await create(
        http,
        path,
        {
            "metadata": {"name": "counted"},
            "involvedObject": involved,
            "reason": "BackOff",
            "message": "  Back-off restarting failed container  \n",
            "type": "Warning",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": first,
            "lastTimestamp": last,
            "count": 7,
        },
    )
    await create(
        http,
        path,
        {
            "metadata": {"name": "new-api"},
            "involvedObject": {"kind": "Memcached", "name": "m", "namespace": namespace},
            "reason": "Created",
            "message": "created",
            "type": "Normal",
            "eventTime": ago(125 * 60 + 10, micro=True),
            "reportingComponent": "memop",
            "reportingInstance": "memop-0",
            "action": "Create",
        },
    )
    await create(
        http,
        path,
        {
            "metadata": {"name": "series"},
            "involvedObject": {"kind": "Node", "namespace": namespace},
            "reason": "Ping",
            "message": "ping",
            "type": "Normal",
            "eventTime": ago(3 * 86400 + 4 * 3600 + 60, micro=True),
            "series": {"count": 4, "lastObservedTime": ago(5 * 3600 + 600 + 20, micro=True)},
            "reportingComponent": "pinger",
            "reportingInstance": "p-1",
            "action": "Ping",
        },
    )
    table = await get_table(http, path)
    assert table["columnDefinitions"] == list(columns.EVENTS)
    expected = {
        "counted": [
            "5h10m", "Warning", "BackOff", "pod/web-1", "spec.containers{web}", "kubelet, node-1",
            "Back-off restarting failed container", "3d4h", 7, "counted",
        ],
        "new-api": [
            "125m", "Normal", "Created", "memcached/m", "", "memop, memop-0", "created", "125m", 1, "new-api",
        ],
        "series": ["5h10m", "Normal", "Ping", "node", "", "pinger, p-1", "ping", "3d4h", 4, "series"],
    }  # fmt: skip
    assert {name: cells for name, cells in rows(table).items() if name in expected} == expected
    # events.k8s.io/v1 shares the storage, and the printer of core Events.
    v1 = await get_table(http, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    assert v1["columnDefinitions"] == list(columns.EVENTS)
    assert {name: cells for name, cells in rows(v1).items() if name in expected} == expected


# --- the rest ----------------------------------------------------------------------------------------------


async def test_services(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/services"
    ports = [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]
    await create(
        http,
        path,
        {"metadata": {"name": "plain"}, "spec": {"ports": ports, "selector": {"b": "2", "a": "1"}}},
    )
    await create(
        http,
        path,
        {
            "metadata": {"name": "external"},
            "spec": {"ports": ports[:1], "externalIPs": ["192.0.2.1", "192.0.2.2"]},
        },
    )
    node_port = await create(
        http, path, {"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": ports[:1]}}
    )
    await create(
        http, path, {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": ports[:1]}}
    )
    await create(
        http,
        path,
        {
            "metadata": {"name": "lb-up"},
            "spec": {"type": "LoadBalancer", "ports": ports[:1], "externalIPs": ["192.0.2.9"]},
        },
        {
            "loadBalancer": {
                "ingress": [{"hostname": "lb.example.com"}, {"ip": "203.0.113.5"}, {"ip": "203.0.113.5"}]
            }
        },
    )
    await create(
        http,
        path,
        {"metadata": {"name": "name"}, "spec": {"type": "ExternalName", "externalName": "db.example.com"}},
    )
    await create(
        http, path, {"metadata": {"name": "headless"}, "spec": {"clusterIP": "None", "ports": ports[:1]}}
    )
    table = await get_table(http, path)
    assert table["columnDefinitions"] == list(columns.SERVICES)
    got = {name: without_age(cells, 5) for name, cells in rows(table).items()}
    ips = {name: cells.pop(2) for name, cells in got.items()}
    assert ips["headless"] == "None"
    assert ips["name"] == "<none>"
    allocated = node_port["spec"]["ports"][0]["nodePort"]
    assert got == {
        "plain": ["plain", "ClusterIP", "<none>", "80/TCP,53/UDP", "a=1,b=2"],
        "external": ["external", "ClusterIP", "192.0.2.1,192.0.2.2", "80/TCP", "<none>"],
        "np": ["np", "NodePort", "<none>", f"80:{allocated}/TCP", "<none>"],
        "lb": ["lb", "LoadBalancer", "<pending>", got["lb"][3], "<none>"],
        "lb-up": ["lb-up", "LoadBalancer", "203.0.113.5,lb.example.com,192.0.2.9", got["lb-up"][3], "<none>"],
        "name": ["name", "ExternalName", "db.example.com", "<none>", "<none>"],
        "headless": ["headless", "ClusterIP", "<none>", "80/TCP", "<none>"],
    }
    assert got["lb"][3].startswith("80:")


async def test_namespaces_config_maps_service_accounts_and_leases(http: Http, namespace: str) -> None:
    table = await get_table(http, f"/api/v1/namespaces/{namespace}")
    assert table["columnDefinitions"] == list(columns.NAMESPACES)
    assert rows(table)[namespace][:2] == [namespace, "Active"]

    maps = f"/api/v1/namespaces/{namespace}/configmaps"
    await create(
        http, maps, {"metadata": {"name": "both"}, "data": {"a": "1"}, "binaryData": {"b": "AAE=", "c": ""}}
    )
    table = await get_table(http, f"{maps}/both")
    assert table["columnDefinitions"] == list(columns.CONFIGMAPS)
    assert without_age(rows(table)["both"], 2) == ["both", 3]

    accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    await create(http, accounts, {"metadata": {"name": "robot"}})
    table = await get_table(http, f"{accounts}/robot")
    assert table["columnDefinitions"] == list(columns.SERVICEACCOUNTS)
    assert without_age(rows(table)["robot"], 1) == ["robot"]

    leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    await create(http, leases, {"metadata": {"name": "held"}, "spec": {"holderIdentity": "me"}})
    await create(http, leases, {"metadata": {"name": "free"}, "spec": {}})
    table = await get_table(http, leases)
    assert table["columnDefinitions"] == list(columns.LEASES)
    assert {n: without_age(c, 2) for n, c in rows(table).items()} == {
        "held": ["held", "me"],
        "free": ["free", ""],
    }


async def test_nodes(http: Http) -> None:
    # Nodes with no kubelet behind them, read at once: a real cluster's node lifecycle
    # controller marks them Unknown only after its grace period (40 s).
    suffix = uuid.uuid4().hex[:8]
    ready, cordoned, bare = (f"memop-test-{state}-{suffix}" for state in ("ready", "cordoned", "bare"))
    roles = {
        "node-role.kubernetes.io/worker": "",
        "node-role.kubernetes.io/control-plane": "",
        "kubernetes.io/role": "infra",
    }
    info = {
        "kubeletVersion": "v1.36.2",
        "osImage": "Debian GNU/Linux 12 (bookworm)",
        "kernelVersion": "6.1.0-28-amd64",
        "architecture": "amd64",
        "containerRuntimeVersion": "containerd://2.1.4",
    }
    addresses = [
        {"type": "Hostname", "address": ready},
        {"type": "ExternalIP", "address": "203.0.113.7"},
        {"type": "InternalIP", "address": "10.0.0.7"},
        {"type": "InternalIP", "address": "10.0.0.8"},
    ]
    nodes = {
        ready: {
            "metadata": {"name": ready, "labels": roles},
            "status": {"conditions": [_condition("Ready", "True")], "addresses": addresses, "nodeInfo": info},
        },
        cordoned: {
            "metadata": {
                "name": cordoned,
                "labels": {"kubernetes.io/role": ""},
            },
            "spec": {"unschedulable": True},
            "status": {"conditions": [_condition("MemoryPressure", "False"), _condition("Ready", "False")]},
        },
        bare: {"metadata": {"name": bare}, "spec": {"unschedulable": True}},
    }
    try:
        for body in nodes.values():
            await create(http, "/api/v1/nodes", body)
        cells = {}
        for name in nodes:
            table = await get_table(http, f"/api/v1/nodes/{name}")
            assert table["columnDefinitions"] == list(columns.NODES)
            cells[name] = without_age(rows(table)[name], 3)
    finally:
        for name in nodes:
            await http.delete(f"/api/v1/nodes/{name}")
    unknown = ["<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"]
    assert cells == {
        ready: [
            ready,
            "Ready",
            "control-plane,infra,worker",
            "v1.36.2",
            "10.0.0.7",
            "203.0.113.7",
            "Debian GNU/Linux 12 (bookworm)",
            "6.1.0-28-amd64 (amd64)",
            "containerd://2.1.4",
        ],
        cordoned: [cordoned, "NotReady,SchedulingDisabled", "<none>", "", *unknown],
        bare: [bare, "Unknown,SchedulingDisabled", "<none>", "", *unknown],
    }


def _condition(kind: str, status: str) -> dict[str, Any]:
    stamp = ago(0)
    return {"type": kind, "status": status, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}


SUBJECTS = [
    {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
    {"kind": "ServiceAccount", "name": "robot", "namespace": "ns-a"},
    {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"},
    {"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"},
    {"kind": "ServiceAccount", "name": "bot", "namespace": "ns-b"},
]
RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]


async def test_rbac(http: Http, namespace: str, cluster: ClusterHandle) -> None:
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    role = await create(
        http, f"{rbac}/namespaces/{namespace}/roles", {"metadata": {"name": "reader"}, "rules": RULES}
    )
    table = await get_table(http, f"{rbac}/namespaces/{namespace}/roles")
    assert table["columnDefinitions"] == list(columns.DEFAULT)
    assert rows(table) == {"reader": ["reader", role["metadata"]["creationTimestamp"]]}

    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    bindings = f"{rbac}/namespaces/{namespace}/rolebindings"
    await create(http, bindings, {"metadata": {"name": "all"}, "roleRef": ref, "subjects": SUBJECTS})
    await create(http, bindings, {"metadata": {"name": "none"}, "roleRef": ref})
    table = await get_table(http, bindings)
    assert table["columnDefinitions"] == list(columns.ROLEBINDINGS)
    assert {n: without_age(c, 2) for n, c in rows(table).items()} == {
        "all": ["all", "Role/reader", "alice, bob", "devs", "ns-a/robot, ns-b/bot"],
        "none": ["none", "Role/reader", "", "", ""],
    }

    name = f"memop-test-{uuid.uuid4().hex[:8]}"
    try:
        cluster_role = await create(
            http, f"{rbac}/clusterroles", {"metadata": {"name": name}, "rules": RULES}
        )
        table = await get_table(http, f"{rbac}/clusterroles/{name}")
        assert table["columnDefinitions"] == list(columns.DEFAULT)
        assert rows(table) == {name: [name, cluster_role["metadata"]["creationTimestamp"]]}
        cluster_ref = {**ref, "kind": "ClusterRole", "name": name}
        await create(
            http,
            f"{rbac}/clusterrolebindings",
            {"metadata": {"name": name}, "roleRef": cluster_ref, "subjects": SUBJECTS},
        )
        table = await get_table(http, f"{rbac}/clusterrolebindings/{name}")
        assert table["columnDefinitions"] == list(columns.CLUSTERROLEBINDINGS)
        cells = without_age(rows(table)[name], 2)
        assert cells == [name, f"ClusterRole/{name}", "alice, bob", "devs", "ns-a/robot, ns-b/bot"]
    finally:
        await http.delete(f"{rbac}/clusterrolebindings/{name}")
        await http.delete(f"{rbac}/clusterroles/{name}")


async def test_custom_resource_definitions(http: Http) -> None:
    table = await get_table(http, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", limit=1)
    assert header(table) == ["Name", "Created At"]
    assert table["columnDefinitions"] == list(columns.DEFAULT)
