"""The simulated StatefulSet, Job, volume and quota controllers through the API
server's HTTP API, as an operator waiting for its children sees them: typed clients of
kubernetes_asyncio read each child Ready (or Complete, or Bound)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

NS = "default"
TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
async def api() -> AsyncIterator[client.ApiClient]:
    async with (
        ApiServer(simulate_controllers=True) as server,
        client.ApiClient(server.client_configuration()) as api,
    ):
        yield api


async def test_an_operator_sees_its_children_become_ready(api: client.ApiClient) -> None:
    apps, batch, core = client.AppsV1Api(api), client.BatchV1Api(api), client.CoreV1Api(api)
    sts: dict[str, Any] = {
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 2,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "x"}},
            "template": TEMPLATE,
        },
    }
    await apps.create_namespaced_stateful_set(NS, sts)
    job_template = {**TEMPLATE, "spec": {**TEMPLATE["spec"], "restartPolicy": "Never"}}
    await batch.create_namespaced_job(NS, {"metadata": {"name": "once"}, "spec": {"template": job_template}})
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    await core.create_namespaced_persistent_volume_claim(NS, claim)
    await core.create_namespaced_resource_quota(
        NS, {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10"}}}
    )

    async def ready() -> bool:
        sts_status = (await apps.read_namespaced_stateful_set("db", NS)).status
        job = (await batch.read_namespaced_job("once", NS)).status
        pvc = (await core.read_namespaced_persistent_volume_claim("data", NS)).status
        quota = (await core.read_namespaced_resource_quota("q", NS)).status
        complete = any(c.type == "Complete" and c.status == "True" for c in job.conditions or ())
        return (
            sts_status.ready_replicas == 2
            and complete
            and pvc.phase == "Bound"
            and (quota.used or {}).get("pods") == "2"  # the Job's pod succeeded: it no longer counts
        )

    await wait_for(ready, timeout=30, message="the children to be ready")
