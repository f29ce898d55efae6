"""The simulated controllers of StatefulSets, DaemonSets, Jobs, CronJobs, claims and quotas, on a
Store in-process with a fake clock: what an operator waiting for any of them to be ready sees."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from memop.runtime.util.clock import FakeClock
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.store import Store
from memop.testing.controllers import SimulatedControllers
from memop.testing.wait import wait_for

NS = "default"


def template(restart: str = "Always", **resources: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.9"}
    if resources:
        container["resources"] = resources
    return {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"restartPolicy": restart, "containers": [container]},
    }


async def idle(sim: SimulatedControllers) -> None:
    async def no_work() -> bool:
        for _ in range(3):
            await asyncio.sleep(0)
        return sim.pending() == 0

    await wait_for(no_work, message="the simulation to run out of ready work")


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", "")) for c in obj.get("status", {}).get("conditions", [])
    }


@pytest.fixture
def clock() -> FakeClock:
    # 2023-11-14T22:13:20Z: an activation of "*/5 * * * *" is 100 s away.
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> Store:
    return Store(clock=clock)


@pytest.fixture
async def sim(store: Store, clock: FakeClock) -> AsyncIterator[SimulatedControllers]:
    controllers = SimulatedControllers(store, clock=clock)
    await controllers.start()
    try:
        yield controllers
    finally:
        await controllers.stop()


async def test_a_stateful_set_gets_ordinal_pods_with_bound_claims(
    store: Store, sim: SimulatedControllers
) -> None:
    sets, pods = store.resource("apps", "v1", "statefulsets"), store.resource("", "v1", "pods")
    claims = store.resource("", "v1", "persistentvolumeclaims")
    body = {
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 3,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "x"}},
            "template": template(),
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
            ],
        },
    }
    store.create(sets, NS, body)
    await wait_for(lambda: store.get(sets, NS, "db").get("status", {}).get("readyReplicas") == 3)
    await idle(sim)
    listed = {p["metadata"]["name"]: p for p in store.list(pods, NS)[0]}
    assert sorted(listed) == ["db-0", "db-1", "db-2"]
    pod = listed["db-1"]
    assert pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "1"
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("db-1", "db")
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}} in pod["spec"]["volumes"]
    status = store.get(sets, NS, "db")["status"]
    assert status["replicas"] == status["availableReplicas"] == status["currentReplicas"] == 3
    assert status["currentRevision"] == status["updateRevision"]
    bound = {c["metadata"]["name"]: c["status"]["phase"] for c in store.list(claims, NS)[0]}
    assert bound == {"data-db-0": "Bound", "data-db-1": "Bound", "data-db-2": "Bound"}
    store.patch(sets, NS, "db", {"spec": {"replicas": 1}}, "application/merge-patch+json")
    await wait_for(lambda: [p["metadata"]["name"] for p in store.list(pods, NS)[0]] == ["db-0"])
    await wait_for(lambda: store.get(sets, NS, "db")["status"]["replicas"] == 1)


async def test_a_job_runs_its_pod_to_completion(store: Store, sim: SimulatedControllers) -> None:
    jobs, pods = store.resource("batch", "v1", "jobs"), store.resource("", "v1", "pods")
    store.create(
        jobs, NS, {"metadata": {"name": "once"}, "spec": {"completions": 2, "template": template("Never")}}
    )
    await wait_for(lambda: "Complete" in conditions(store.get(jobs, NS, "once")))
    job = store.get(jobs, NS, "once")
    assert conditions(job) == {
        "SuccessCriteriaMet": ("True", "CompletionsReached"),
        "Complete": ("True", "CompletionsReached"),
    }
    status = job["status"]
    assert status["succeeded"] == 2
    assert "active" not in status
    assert status["completionTime"]
    assert status["startTime"]
    assert (status["ready"], status["terminating"], status["uncountedTerminatedPods"]) == (0, 0, {})
    listed = store.list(pods, NS)[0]
    assert [p["status"]["phase"] for p in listed] == ["Succeeded", "Succeeded"]
    assert listed[0]["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert listed[0]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "once"


async def test_a_daemon_set_puts_a_pod_on_the_node(store: Store, sim: SimulatedControllers) -> None:
    sets, pods = store.resource("apps", "v1", "daemonsets"), store.resource("", "v1", "pods")
    store.create(
        sets,
        NS,
        {
            "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template()},
        },
    )
    await wait_for(lambda: store.get(sets, NS, "agent")["status"].get("numberReady") == 1)
    status = store.get(sets, NS, "agent")["status"]
    assert (
        status["desiredNumberScheduled"],
        status["currentNumberScheduled"],
        status["numberAvailable"],
    ) == (1, 1, 1)
    [pod] = store.list(pods, NS)[0]
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["memop-control-plane"]}]}
    ]
    assert pod["metadata"]["labels"]["pod-template-generation"] == "1"


async def test_a_daemon_set_without_nodes_wants_no_pod(store: Store, clock: FakeClock) -> None:
    sim = SimulatedControllers(store, clock=clock, nodes=False)
    await sim.start()
    try:
        sets = store.resource("apps", "v1", "daemonsets")
        body = {
            "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template()},
        }
        store.create(sets, NS, body)
        await idle(sim)
        status = store.get(sets, NS, "agent")["status"]
        assert (status["desiredNumberScheduled"], status["currentNumberScheduled"]) == (0, 0)
    finally:
        await sim.stop()


async def test_a_cron_job_starts_jobs_on_its_schedule(
    store: Store, clock: FakeClock, sim: SimulatedControllers
) -> None:
    cron_jobs, jobs = store.resource("batch", "v1", "cronjobs"), store.resource("batch", "v1", "jobs")
    body = {
        "metadata": {"name": "tick"},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template("OnFailure")}}},
    }
    store.create(cron_jobs, NS, body)
    await idle(sim)
    assert store.list(jobs, NS)[0] == []
    clock.advance(99)
    await idle(sim)
    assert store.list(jobs, NS)[0] == []  # the activation is at 22:15:00, one second away
    clock.advance(1)
    await wait_for(lambda: len(store.list(jobs, NS)[0]) == 1)
    [job] = store.list(jobs, NS)[0]
    assert job["metadata"]["name"] == f"tick-{(1_700_000_000 + 100) // 60}"
    assert (
        job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
        == "2023-11-14T22:15:00+00:00"
    )
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    await wait_for(lambda: store.get(cron_jobs, NS, "tick")["status"].get("lastSuccessfulTime") is not None)
    status = store.get(cron_jobs, NS, "tick")["status"]
    assert status["lastScheduleTime"] == "2023-11-14T22:15:00Z"
    assert "active" not in status
    clock.advance(300)
    await wait_for(lambda: len(store.list(jobs, NS)[0]) == 2)


async def test_a_claim_is_bound_to_a_provisioned_volume_and_released(
    store: Store, sim: SimulatedControllers
) -> None:
    claims, volumes = (
        store.resource("", "v1", "persistentvolumeclaims"),
        store.resource("", "v1", "persistentvolumes"),
    )
    body = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}},
    }
    created = store.create(claims, NS, body)
    await wait_for(lambda: store.get(claims, NS, "data")["status"]["phase"] == "Bound")
    claim = store.get(claims, NS, "data")
    volume_name = f"pvc-{created['metadata']['uid']}"
    assert claim["spec"]["volumeName"] == volume_name
    assert claim["status"] == {
        "phase": "Bound",
        "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "2Gi"},
    }
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    volume = store.get(volumes, None, volume_name)
    assert volume["status"]["phase"] == "Bound"
    assert volume["spec"]["claimRef"]["name"] == "data"
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    store.delete(claims, NS, "data")

    def gone(rtype: Any, namespace: str | None, name: str) -> bool:
        try:
            store.get(rtype, namespace, name)
        except ApiError as err:
            return err.code == 404
        return False

    await wait_for(lambda: gone(claims, NS, "data"), message="the claim to be unprotected and removed")
    await wait_for(lambda: gone(volumes, None, volume_name), message="the released volume to be deleted")


async def test_a_resource_quota_reports_what_the_namespace_uses(
    store: Store, sim: SimulatedControllers
) -> None:
    quotas, pods = store.resource("", "v1", "resourcequotas"), store.resource("", "v1", "pods")
    hard = {
        "pods": "10",
        "requests.cpu": "2",
        "requests.memory": "1Gi",
        "configmaps": "5",
        "count/deployments.apps": "3",
    }
    store.create(quotas, NS, {"metadata": {"name": "q"}, "spec": {"hard": hard}})
    for name in ("a", "b"):
        pod = {
            "metadata": {"name": name},
            "spec": template(requests={"cpu": "250m", "memory": "64Mi"})["spec"],
        }
        store.create(pods, NS, pod)
    await wait_for(lambda: store.get(quotas, NS, "q")["status"].get("used", {}).get("pods") == "2")
    await idle(sim)
    status = store.get(quotas, NS, "q")["status"]
    assert status["hard"] == hard
    assert status["used"] == {
        "pods": "2",
        "requests.cpu": "500m",
        "requests.memory": "128Mi",
        "configmaps": "0",
        "count/deployments.apps": "0",
    }


async def test_a_stateful_set_template_change_replaces_its_pods(
    store: Store, sim: SimulatedControllers
) -> None:
    sets, pods = store.resource("apps", "v1", "statefulsets"), store.resource("", "v1", "pods")
    body = {
        "metadata": {"name": "db"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": template()},
    }
    store.create(sets, NS, body)
    await wait_for(lambda: store.get(sets, NS, "db").get("status", {}).get("readyReplicas") == 2)
    before = {p["metadata"]["labels"]["controller-revision-hash"] for p in store.list(pods, NS)[0]}
    image = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    store.patch(sets, NS, "db", image, "application/strategic-merge-patch+json")

    def rolled() -> bool:
        listed = store.list(pods, NS)[0]
        images = {p["spec"]["containers"][0]["image"] for p in listed}
        return (
            len(listed) == 2
            and images == {"busybox"}
            and all(p["status"].get("phase") == "Running" for p in listed)
        )

    await wait_for(rolled, message="the pods to be replaced by the new template's")
    status = store.get(sets, NS, "db")["status"]
    assert status["updateRevision"] not in before
    await wait_for(lambda: store.get(sets, NS, "db")["status"].get("updatedReplicas") == 2)
