"""What ``kubectl get`` shows of what memop made: the columns and cells of Memcacheds,
Deployments, Pods and Events (also ``-o wide`` and ``-w``), and the header of every other kind
the in-memory server serves. kubectl asks the server for Tables and prints their cells, so
this is the server's printing seen the way a user sees it. With USE_EXISTING_CLUSTER=true the
same tests hold against a real cluster.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from memop.builtin import PROJECT
from memop.memcached.api import MEMCACHEDS
from memop.runtime.cache.labels import Selector
from memop.runtime.client.client import Client
from memop.runtime.client.resources import DEPLOYMENTS, EVENTS, PODS
from memop.testing.apiserver.times import since
from memop.testing.envtest import Kube
from memop.testing.kinds.generic import GenericStrategy
from memop.testing.kinds.registry import BUILTIN_KINDS
from memop.testing.memcached import converged, memcached_manifest
from memop.testing.operator import RunningOperator, event_recorded
from memop.testing.wait import wait_for

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH"),
]
TIMEOUT = 30
EVENT_WIDE = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN"]
EVENT_WIDE += ["COUNT", "NAME"]


@pytest.fixture
def kubeconfig(kube: Kube, tmp_path: Path) -> Path:
    if kube.server is None:
        return Path(os.environ["KUBECONFIG"])
    path = tmp_path / "kubeconfig"
    kube.server.write_kubeconfig(path)
    return path


async def kubectl(kubeconfig: Path, *args: str) -> str:
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


def parse(text: str) -> tuple[list[str], list[list[str]]]:
    """kubectl's table: the header, and each row's cells cut where the header's columns start
    (tabwriter aligns them; a column header may hold a space, a cell may be empty)."""
    lines = [line for line in text.splitlines() if line.strip()]
    spans = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", lines[0])]
    starts = [start for start, _ in spans] + [None]
    body = [[line[a:b].strip() for a, b in itertools.pairwise(starts)] for line in lines[1:]]
    return [name for _, name in spans], body


class Clock:
    """Ages as the server printed them between two instants (a second may turn meanwhile)."""

    def __init__(self) -> None:
        self.start = time.time()
        self.end = self.start

    def stop(self) -> None:
        self.end = time.time()

    def age(self, stamp: str | None, *, micro: bool = False) -> set[str]:
        # Every age shown at some instant between the two (8 kubectl calls can span over a
        # second on a loaded machine: the printed age may then be neither end's).
        instants = [self.start + step * 0.1 for step in range(int((self.end - self.start) / 0.1) + 1)]
        return {since(stamp, now, micro=micro) for now in [*instants, self.end]}


def check(rows: list[list[str]], expected: list[list[Any]]) -> None:
    """Each expected row is in ``rows``, a set in a cell meaning any of its values."""

    def fits(row: list[str], want: list[Any]) -> bool:
        return len(row) == len(want) and all(
            cell in w if isinstance(w, set) else cell == w for cell, w in zip(row, want, strict=True)
        )

    for want in expected:
        assert any(fits(row, want) for row in rows), f"no row {want} in {rows}"


# --- what memop made ---------------------------------------------------------------------------------


async def test_memcached_deployment_pods_and_events(
    kube: Kube, client: Client, namespace: str, operator: RunningOperator, kubeconfig: Path
) -> None:
    await client.create(MEMCACHEDS, memcached_manifest("cache", size=2), namespace)
    await wait_for(lambda: converged(client, namespace, "cache", 2), timeout=TIMEOUT)
    await event_recorded(client, namespace, lambda e: e["reason"] == "Created", TIMEOUT)
    clock = Clock()
    out = {
        (kind, wide): await kubectl(
            kubeconfig, "get", kind, "-n", namespace, *(["-o", "wide"] if wide else [])
        )
        for kind in ("memcached", "deployments", "pods", "events")
        for wide in (False, True)
    }
    clock.stop()
    cr = await client.get(MEMCACHEDS, "cache", namespace)
    deployment = await client.get(DEPLOYMENTS, "cache", namespace)
    pods, _ = await client.list_all(PODS, namespace, label_selector="app.kubernetes.io/instance=cache")
    events, _ = await client.list_all(EVENTS, namespace)

    header, rows = parse(out["memcached", False])
    assert header == ["NAME", "SIZE", "READY", "AVAILABLE", "AGE"]
    check(rows, [["cache", "2", "2", "True", clock.age(cr["metadata"]["creationTimestamp"])]])
    # kubectl reads the preferred version, v1beta1: -o wide adds its priority-1 Port column,
    # empty for an object made at v1alpha1 (read in another version, it is not defaulted).
    wide_header, wide_rows = parse(out["memcached", True])
    assert wide_header == [*header, "PORT"]
    age = clock.age(cr["metadata"]["creationTimestamp"])
    check(wide_rows, [["cache", "2", "2", "True", age, ""]])  # as v1.36.2 prints it

    spec, status = deployment["spec"], deployment["status"]
    container = spec["template"]["spec"]["containers"][0]
    shown = [
        "cache",
        f"{status['readyReplicas']}/{spec['replicas']}",
        str(status["updatedReplicas"]),
        str(status["availableReplicas"]),
        clock.age(deployment["metadata"]["creationTimestamp"]),
    ]
    header, rows = parse(out["deployments", False])
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    check(rows, [shown])
    assert shown[1] == "2/2"
    header, rows = parse(out["deployments", True])
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    selector = str(Selector.from_label_selector(spec["selector"]))
    check(rows, [[*shown, container["name"], container["image"], selector]])

    assert len(pods) == 2
    header, rows = parse(out["pods", False])
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    age = {p["metadata"]["name"]: clock.age(p["metadata"]["creationTimestamp"]) for p in pods}
    check(rows, [[name, "1/1", "Running", "0", age[name]] for name in age])
    header, rows = parse(out["pods", True])
    assert header[5:] == ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    check(
        rows,
        [
            [p["metadata"]["name"], "1/1", "Running", "0", age[p["metadata"]["name"]], p["status"]["podIP"],
             p["spec"].get("nodeName") or "<none>", "<none>", "<none>"]
            for p in pods
        ],
    )  # fmt: skip

    created = next(e for e in events if e["reason"] == "Created" and e["involvedObject"]["name"] == "cache")
    last_seen = clock.age(created.get("lastTimestamp") or created["firstTimestamp"])
    header, rows = parse(out["events", False])
    assert header == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    check(rows, [[last_seen, "Normal", "Created", "memcached/cache", created["message"]]])
    header, rows = parse(out["events", True])
    assert header == EVENT_WIDE
    source = created["source"]["component"] + (
        f", {created['source']['host']}" if created["source"].get("host") else ""
    )
    wide = [
        last_seen, "Normal", "Created", "memcached/cache", "", source, created["message"],
        clock.age(created["firstTimestamp"]), str(created.get("count") or 1), created["metadata"]["name"],
    ]  # fmt: skip
    check(rows, [wide])


class Watching:
    """The lines ``kubectl get -w`` printed so far, cut at runs of two or more spaces."""

    def __init__(self) -> None:
        self.lines: list[list[str]] = []

    def saw(self, matches: Callable[[list[str]], bool]) -> bool:
        return any(matches(line) for line in self.lines[1:])


@asynccontextmanager
async def watching(kubeconfig: Path, *args: str) -> AsyncIterator[Watching]:
    """``kubectl get -w ARGS`` in the background while the block runs."""
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), "get", "-w", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    seen = Watching()

    async def read() -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            seen.lines.append(re.split(r"\s{2,}", line.decode().strip()))

    reader = asyncio.create_task(read())
    try:
        yield seen
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()
        await reader


async def test_kubectl_get_w_shows_the_columns(
    client: Client, namespace: str, operator: RunningOperator, kubeconfig: Path
) -> None:
    # kubectl lists, then watches from the list's resourceVersion: it misses no change made
    # after it starts, and prints the header with the first row it has.
    await client.create(MEMCACHEDS, memcached_manifest("w", size=2), namespace)
    async with (
        watching(kubeconfig, "memcached", "-n", namespace) as memcacheds,
        watching(kubeconfig, "pods", "-n", namespace, "-l", "app.kubernetes.io/instance=w") as pods,
    ):

        async def shown(size: int) -> None:
            expected = ["w", str(size), str(size), "True"]
            await wait_for(
                lambda: memcacheds.saw(lambda cells: cells[:4] == expected),
                timeout=TIMEOUT,
                message=lambda: f"kubectl get -w printed {memcacheds.lines}",
            )
            await wait_for(
                lambda: len({c[0] for c in pods.lines[1:] if c[1:3] == ["1/1", "Running"]}) == size,
                timeout=TIMEOUT,
                message=lambda: f"kubectl get -w printed {pods.lines}",
            )

        await shown(2)  # maybe as listed
        await client.patch(MEMCACHEDS, "w", {"spec": {"size": 3}}, namespace)
        await shown(3)  # through kubectl's watch
    assert memcacheds.lines[0] == ["NAME", "SIZE", "READY", "AVAILABLE", "AGE"]
    assert pods.lines[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert all(len(cells) == 5 for cells in memcacheds.lines + pods.lines)


# --- every other kind ------------------------------------------------------------------------------------

RBAC = "rbac.authorization.k8s.io"
BINDING = ["NAME", "ROLE", "AGE"]
SUBJECTS = ["USERS", "GROUPS", "SERVICEACCOUNTS"]
SERVICE = ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
REPLICASET = ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
PDB = ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"]
CREATED = ["NAME", "CREATED AT"]
# kubectl get RESOURCE: the header, and the header with -o wide.
ADMISSION = "admissionregistration.k8s.io"
WEBHOOKS = ["NAME", "WEBHOOKS", "AGE"]
WORKLOAD_WIDE = ["CONTAINERS", "IMAGES", "SELECTOR"]
DAEMONSET = ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"]
JOB = ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
CRONJOB = ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"]
CLAIM = [
    "NAME",
    "STATUS",
    "VOLUME",
    "CAPACITY",
    "ACCESS MODES",
    "STORAGECLASS",
    "VOLUMEATTRIBUTESCLASS",
    "AGE",
]
VOLUME = ["NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS"]
VOLUME += ["VOLUMEATTRIBUTESCLASS", "REASON", "AGE"]
HPA = ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
PRIORITY = ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
INGRESS = ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
INGRESS_CLASS = ["NAME", "CONTROLLER", "PARAMETERS", "AGE"]
HEADERS: dict[str, tuple[list[str], list[str]]] = {
    "configmaps": (["NAME", "DATA", "AGE"], ["NAME", "DATA", "AGE"]),
    "secrets": (["NAME", "TYPE", "DATA", "AGE"], ["NAME", "TYPE", "DATA", "AGE"]),
    "serviceaccounts": (["NAME", "AGE"], ["NAME", "AGE"]),
    "services": (SERVICE, [*SERVICE, "SELECTOR"]),
    "leases.coordination.k8s.io": (["NAME", "HOLDER", "AGE"], ["NAME", "HOLDER", "AGE"]),
    "replicasets.apps": (REPLICASET, [*REPLICASET, "CONTAINERS", "IMAGES", "SELECTOR"]),
    "poddisruptionbudgets.policy": (PDB, PDB),
    f"roles.{RBAC}": (CREATED, CREATED),
    f"rolebindings.{RBAC}": (BINDING, BINDING + SUBJECTS),
    "events.events.k8s.io": (["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], EVENT_WIDE),
    "namespaces": (["NAME", "STATUS", "AGE"], ["NAME", "STATUS", "AGE"]),
    f"clusterroles.{RBAC}": (CREATED, CREATED),
    f"clusterrolebindings.{RBAC}": (BINDING, BINDING + SUBJECTS),
    "customresourcedefinitions.apiextensions.k8s.io": (CREATED, CREATED),
    f"validatingwebhookconfigurations.{ADMISSION}": (WEBHOOKS, WEBHOOKS),
    f"mutatingwebhookconfigurations.{ADMISSION}": (WEBHOOKS, WEBHOOKS),
    # kube-apiserver v1.36's print handlers (pkg/printers/internalversion/printers.go).
    "statefulsets.apps": (["NAME", "READY", "AGE"], ["NAME", "READY", "AGE", *WORKLOAD_WIDE[:2]]),
    "daemonsets.apps": (DAEMONSET, [*DAEMONSET, *WORKLOAD_WIDE]),
    "jobs.batch": (JOB, [*JOB, *WORKLOAD_WIDE]),
    "cronjobs.batch": (CRONJOB, [*CRONJOB, *WORKLOAD_WIDE]),
    "persistentvolumeclaims": (CLAIM, [*CLAIM, "VOLUMEMODE"]),
    "persistentvolumes": (VOLUME, [*VOLUME, "VOLUMEMODE"]),
    "resourcequotas": (["NAME", "REQUEST", "LIMIT", "AGE"], ["NAME", "REQUEST", "LIMIT", "AGE"]),
    "limitranges": (CREATED, CREATED),
    "horizontalpodautoscalers.autoscaling": (HPA, HPA),
    "priorityclasses.scheduling.k8s.io": (PRIORITY, PRIORITY),
    "ingresses.networking.k8s.io": (INGRESS, INGRESS),
    "ingressclasses.networking.k8s.io": (INGRESS_CLASS, INGRESS_CLASS),
    "networkpolicies.networking.k8s.io": (["NAME", "POD-SELECTOR", "AGE"], ["NAME", "POD-SELECTOR", "AGE"]),
}
# Cluster-scoped kinds whose object a test names after itself (a real cluster is shared).
CLUSTER_SCOPED = (
    "persistentvolumes",
    "priorityclasses.scheduling.k8s.io",
    "ingressclasses.networking.k8s.io",
)


def manifests(namespace: str, cluster_name: str) -> list[dict[str, Any]]:
    """One object of each kind of HEADERS the namespace may not have yet."""
    meta = {"name": "one", "namespace": namespace}
    ref = {"apiGroup": RBAC, "kind": "ClusterRole", "name": cluster_name}
    subjects = [{"kind": "ServiceAccount", "name": "one", "namespace": namespace}]
    pod_spec = {
        "schedulerName": "memop-test-no-such-scheduler",
        "containers": [{"name": "c", "image": "busybox"}],
    }
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "1"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": {"a": "1"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": [{"port": 80}]}},
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {"holderIdentity": "me"},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": meta,
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "one"}},
                "template": {"metadata": {"labels": {"app": "one"}}, "spec": pod_spec},
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta,
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "one"}}},
        },
        {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": meta, "rules": []},
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": ref,
            "subjects": subjects,
        },
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": meta,
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "regarding": {"kind": "ConfigMap", "name": "one", "namespace": namespace},
            "reason": "Made",
            "note": "one of each",
            "type": "Normal",
            "action": "Make",
            "reportingController": "memop.test/kubectl",
            "reportingInstance": "test",
        },
        {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": cluster_name}, "rules": []},
        # No webhook in them: on a real cluster they must judge nothing.
        *(
            {
                "apiVersion": f"{ADMISSION}/v1",
                "kind": kind,
                "metadata": {"name": cluster_name},
                "webhooks": [],
            }
            for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        ),
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": cluster_name},
            "roleRef": ref,
            "subjects": subjects,
        },
        *workloads(meta, pod_spec),
        *storage_and_policy(meta, cluster_name),
    ]


def workloads(meta: dict[str, Any], pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """A StatefulSet of no pods, a DaemonSet for no node, a suspended Job and CronJob."""
    selector = {"matchLabels": {"app": "one"}}
    template = {"metadata": {"labels": {"app": "one"}}, "spec": pod_spec}
    nowhere = {**template, "spec": {**pod_spec, "nodeSelector": {"memop-test": "no-such-node"}}}
    job_template = {"spec": {**pod_spec, "restartPolicy": "Never"}}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": meta,
            "spec": {"replicas": 0, "serviceName": "one", "selector": selector, "template": template},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta,
            "spec": {"selector": selector, "template": nowhere},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta,
            "spec": {"suspend": True, "template": job_template},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": meta,
            "spec": {
                "schedule": "0 0 1 1 *",
                "suspend": True,
                "jobTemplate": {"spec": {"template": job_template}},
            },
        },
    ]


def storage_and_policy(meta: dict[str, Any], cluster_name: str) -> list[dict[str, Any]]:
    """A claim and a volume bound to nothing, a quota, a limit range, an autoscaler, a priority
    class, an Ingress and its class, a NetworkPolicy."""
    cluster_meta = {"name": cluster_name}
    size = {"storage": "1Gi"}
    modes = ["ReadWriteOnce"]
    backend = {"service": {"name": "one", "port": {"number": 80}}}
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "one"}
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": meta,
            "spec": {
                "accessModes": modes,
                "resources": {"requests": size},
                "storageClassName": "memop-test-none",
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": cluster_meta,
            "spec": {
                "capacity": size,
                "accessModes": modes,
                "storageClassName": "memop-test-none",
                "hostPath": {"path": f"/tmp/{cluster_name}"},
            },
        },
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta, "spec": {"hard": {"pods": "10"}}},
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": meta,
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "100m"}}]},
        },
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": meta,
            "spec": {"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": 2},
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": cluster_meta,
            "value": 1000,
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": meta,
            "spec": {"defaultBackend": backend},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": cluster_meta,
            "spec": {"controller": "example.com/memop-test-none"},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta,
            "spec": {"podSelector": {}},
        },
    ]


async def test_the_header_of_every_kind(
    kube: Kube, client: Client, namespace: str, kubeconfig: Path, tmp_path: Path
) -> None:
    if kube.server is not None:  # every kind the in-memory server serves is shown here or above
        shown_above = {"deployments.apps", "pods", "events", *CONTROLLER_KINDS}
        served = {rtype.group_resource for rtype in kube.server.store.resources()}
        # The kinds served generically print only Name and Created At (a known gap).
        generic = {k.rtype.group_resource for k in BUILTIN_KINDS if isinstance(k.strategy, GenericStrategy)}
        assert served - shown_above - generic == set(HEADERS)
    cluster_name = f"memop-test-{uuid.uuid4().hex[:8]}"
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump_all(manifests(namespace, cluster_name)))
    try:
        await kubectl(kubeconfig, "apply", "-f", str(objects))
        names = {"namespaces": namespace, f"clusterroles.{RBAC}": cluster_name}
        names[f"clusterrolebindings.{RBAC}"] = cluster_name
        names[f"validatingwebhookconfigurations.{ADMISSION}"] = cluster_name
        names[f"mutatingwebhookconfigurations.{ADMISSION}"] = cluster_name
        names["customresourcedefinitions.apiextensions.k8s.io"] = f"{MEMCACHEDS.plural}.{MEMCACHEDS.group}"
        names.update(dict.fromkeys(CLUSTER_SCOPED, cluster_name))
        for resource, (header, wide) in HEADERS.items():
            args = [resource, names.get(resource, "one"), "-n", namespace]
            shown, rows = parse(await kubectl(kubeconfig, "get", *args))
            assert shown == header, resource
            shown_wide, wide_rows = parse(await kubectl(kubeconfig, "get", *args, "-o", "wide"))
            assert shown_wide == wide, resource
            assert len(rows) == len(wide_rows) == 1, resource
            name_column = shown.index("NAME") if "NAME" in shown else None
            if name_column is not None:
                assert rows[0][name_column] == names.get(resource, "one"), resource
    finally:
        await kubectl(kubeconfig, "delete", "--ignore-not-found", "-f", str(objects))


# The kinds memop's controllers serve, and the header kubectl shows of each (their CRDs' columns).
CONTROLLER_KINDS = {
    f"{crd['spec']['names']['plural']}.{crd['spec']['group']}": ["NAME"]
    + [
        c["name"].upper()
        for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]
        if not c.get("priority")
    ]
    for definition in PROJECT.controllers
    for crd in definition.crds()
}


async def test_the_header_of_every_controllers_kind(
    client: Client, namespace: str, kubeconfig: Path, tmp_path: Path
) -> None:
    samples = [sample for definition in PROJECT.controllers for sample in definition.samples().values()]
    for sample in samples:
        sample["metadata"] = {"name": f"{sample['kind'].lower()}-one", "namespace": namespace}
    objects = tmp_path / "samples.yaml"
    objects.write_text(yaml.safe_dump_all(samples))
    await kubectl(kubeconfig, "apply", "-f", str(objects))
    try:
        for resource, header in CONTROLLER_KINDS.items():
            shown, rows = parse(await kubectl(kubeconfig, "get", resource, "-n", namespace))
            assert shown == header, resource
            assert len(rows) >= 1, resource
    finally:
        await kubectl(kubeconfig, "delete", "--ignore-not-found", "-f", str(objects))
