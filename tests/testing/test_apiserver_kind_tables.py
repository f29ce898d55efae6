"""``kubectl get`` Tables of StatefulSets, DaemonSets, Jobs, CronJobs, claims, quotas, autoscalers and
priority classes: kube-apiserver v1.36's columns and the cells its print functions make."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.apiserver import columns

if TYPE_CHECKING:
    from tests.conftest import Http

pytestmark = pytest.mark.fake_only
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "c", "image": "nginx:1.27"}]},
}


async def table(http: Http, path: str) -> dict[str, Any]:
    reply = await http.get(path, accept=TABLE)
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


async def created(http: Http, path: str, body: dict[str, Any], status: dict[str, Any] | None = None) -> None:
    reply = await http.post(path, body)
    assert reply.status == 201, reply.body
    if status is not None:
        name = body["metadata"]["name"]
        patched = await http.patch(f"{path}/{name}/status", {"status": status})
        assert patched.status == 200, patched.body


async def test_workload_tables(http: Http, namespace: str) -> None:
    apps = f"/apis/apps/v1/namespaces/{namespace}"
    selector = {"matchLabels": {"app": "web"}}
    sts = {"metadata": {"name": "db"}, "spec": {"replicas": 3, "selector": selector, "template": TEMPLATE}}
    await created(
        http, f"{apps}/statefulsets", sts, {"replicas": 3, "readyReplicas": 2, "availableReplicas": 2}
    )
    got = await table(http, f"{apps}/statefulsets/db")
    assert got["columnDefinitions"] == list(columns.STATEFULSETS)
    cells = got["rows"][0]["cells"]
    assert [cells[0], cells[1], cells[3], cells[4]] == ["db", "2/3", "c", "nginx:1.27"]
    ds = {"metadata": {"name": "agent"}, "spec": {"selector": selector, "template": TEMPLATE}}
    status = {
        "desiredNumberScheduled": 3,
        "currentNumberScheduled": 3,
        "numberReady": 2,
        "numberMisscheduled": 0,
    }
    await created(
        http, f"{apps}/daemonsets", ds, {**status, "updatedNumberScheduled": 3, "numberAvailable": 1}
    )
    got = await table(http, f"{apps}/daemonsets/agent")
    assert got["columnDefinitions"] == list(columns.DAEMONSETS)
    cells = got["rows"][0]["cells"]
    assert cells[:7] == ["agent", 3, 3, 2, 3, 1, "disk=ssd"]
    assert cells[-1] == "app=web"


async def test_job_and_cron_job_tables(http: Http, namespace: str) -> None:
    batch = f"/apis/batch/v1/namespaces/{namespace}"
    template = {**TEMPLATE, "spec": {**TEMPLATE["spec"], "restartPolicy": "Never"}}
    job = {"metadata": {"name": "once"}, "spec": {"completions": 2, "template": template}}
    stamp = "2026-01-01T00:00:00Z"
    done = {
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": stamp},
            {"type": "Complete", "status": "True", "lastTransitionTime": stamp},
        ],
        "startTime": stamp,
        "completionTime": "2026-01-01T00:01:30Z",
        "succeeded": 2,
    }
    await created(http, f"{batch}/jobs", job, done)
    got = await table(http, f"{batch}/jobs/once")
    assert got["columnDefinitions"] == list(columns.JOBS)
    cells = got["rows"][0]["cells"]
    assert cells[:4] == ["once", "Complete", "2/2", "90s"]
    assert cells[-1].startswith("batch.kubernetes.io/controller-uid=")
    parallel = {"metadata": {"name": "many"}, "spec": {"parallelism": 3, "template": template}}
    await created(http, f"{batch}/jobs", parallel)
    assert (await table(http, f"{batch}/jobs/many"))["rows"][0]["cells"][1:4] == ["Running", "0/1 of 3", ""]
    cron = {
        "metadata": {"name": "tick"},
        "spec": {
            "schedule": "*/5 * * * *",
            "timeZone": "Etc/UTC",
            "jobTemplate": {"spec": {"template": template}},
        },
    }
    await created(http, f"{batch}/cronjobs", cron)
    got = await table(http, f"{batch}/cronjobs/tick")
    assert got["columnDefinitions"] == list(columns.CRONJOBS)
    assert got["rows"][0]["cells"][:6] == ["tick", "*/5 * * * *", "Etc/UTC", "False", 0, "<none>"]


async def test_claim_quota_autoscaler_and_priority_class_tables(http: Http, namespace: str) -> None:
    core = f"/api/v1/namespaces/{namespace}"
    claim = {
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "fast",
        },
    }
    await created(http, f"{core}/persistentvolumeclaims", claim)
    got = await table(http, f"{core}/persistentvolumeclaims/data")
    assert got["columnDefinitions"] == list(columns.PERSISTENTVOLUMECLAIMS)
    cells = got["rows"][0]["cells"]
    assert cells[:7] == ["data", "Pending", "", "", "", "fast", "<unset>"]
    assert cells[-1] == "Filesystem"
    quota = {
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "10", "limits.cpu": "4", "requests.cpu": "2"}},
    }
    used = {
        "hard": quota["spec"]["hard"],
        "used": {"pods": "1", "limits.cpu": "500m", "requests.cpu": "250m"},
    }
    await created(http, f"{core}/resourcequotas", quota, used)
    got = await table(http, f"{core}/resourcequotas/q")
    assert got["columnDefinitions"] == list(columns.RESOURCEQUOTAS)
    assert got["rows"][0]["cells"][:3] == ["q", "pods: 1/10, requests.cpu: 250m/2", "limits.cpu: 500m/4"]
    hpa = {
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 5,
        },
    }
    await created(http, f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers", hpa)
    got = await table(http, f"/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers/web")
    assert got["columnDefinitions"] == list(columns.HORIZONTALPODAUTOSCALERS)
    assert got["rows"][0]["cells"][:6] == ["web", "Deployment/web", "cpu: <unknown>/80%", "1", 5, 0]
    got = await table(http, "/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical")
    assert got["columnDefinitions"] == list(columns.PRIORITYCLASSES)
    cells = got["rows"][0]["cells"]
    assert [cells[0], cells[1], cells[2], cells[4]] == [
        "system-node-critical",
        2000001000,
        False,
        "PreemptLowerPriority",
    ]
