"""RunningOperator and the plugin's fixtures, in-process: controllers are required, a manager that
exits fails the test at once with its last log lines, CRDs are created or updated.

Runs on the plugin's ``kube`` (memop's root conftest: the in-memory server, or a real cluster with
USE_EXISTING_CLUSTER=true). The tests that make a manager exit through the fake's fault
injection skip on a real cluster.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import Configuration

from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, Resource
from memop.runtime.leaderelection.lease import LeaderElectionConfig
from memop.testing.envtest import Kube
from memop.testing.operator import (
    OperatorExited,
    RunningOperator,
    controller_definitions,
    crd_resource,
    crds_of,
    release_finalizers,
)
from memop.testing.plugin import InstallCrds, RunOperator
from memop.testing.wait import wait_for
from tests.testing.echo_operator import DEFINITION, ECHOES, PROJECT, crd, definition, echo

TIMEOUT = 30
PROMPT = 10.0  # "at once": far below the 30 s a wait would have taken to time out


WAITING_LINE = next(
    number
    for number, line in enumerate(Path(__file__).read_text().splitlines(), 1)
    if line.endswith("# WAITING_LINE")
)


def absent() -> Resource:
    """A kind of a group no cluster serves (unique, so a real cluster's leftovers cannot serve it)."""
    return Resource(f"absent-{uuid.uuid4().hex[:8]}.test.example.com", "v1", "things", "Thing")


def test_controllers_are_required_and_checked() -> None:
    configuration = Configuration()
    with pytest.raises(TypeError, match="controllers"):
        RunningOperator(configuration)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="no controllers"):
        RunningOperator(configuration, controllers=[])
    with pytest.raises(TypeError, match=r"not a memop\.runtime\.ControllerDefinition"):
        RunningOperator(configuration, controllers=[DEFINITION, "memcached"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not str"):
        RunningOperator(configuration, controllers="memcached")  # type: ignore[arg-type]
    assert controller_definitions(PROJECT) == (DEFINITION,)
    assert controller_definitions(DEFINITION) == (DEFINITION,)
    assert RunningOperator(configuration, controllers=PROJECT).user_agent == "echo-test/memop-test"
    assert RunningOperator(configuration, controllers=DEFINITION).user_agent == "memop-test/memop-test"


def test_crds_of_lists_each_crd_once_and_crd_resource_reads_it_back() -> None:
    assert [c["metadata"]["name"] for c in crds_of(PROJECT, DEFINITION, crd())] == ["echoes.test.example.com"]
    assert crd_resource(crd()) == ECHOES
    with pytest.raises(TypeError, match="CRD dict"):
        crds_of("echoes")  # type: ignore[arg-type]


async def test_a_project_runs_and_its_user_agent_names_it(
    kube: Kube, client: Client, namespace: str, install_crds: InstallCrds, run_operator: RunOperator
) -> None:
    installed = await install_crds(PROJECT)
    assert [c["metadata"]["name"] for c in installed] == ["echoes.test.example.com"]
    async with run_operator(PROJECT, namespaces=[namespace]) as operator:
        assert operator.running
        assert not operator.exited
        assert set(operator.controllers) == {"echo"}
        await client.create(ECHOES, echo("hi", "hello"), namespace)

        async def echoed() -> bool:
            current = await client.get(ECHOES, "hi", namespace)
            return (current.get("status") or {}).get("echo") == "hello"

        await operator.wait_for(echoed, timeout=TIMEOUT)
    assert not operator.running
    assert not operator.exited
    assert operator.exit_code == 0
    if kube.server is not None:
        assert kube.server.log.filter(
            resource="echoes", subresource="status", user_agent="echo-test/memop-test"
        )


async def test_start_fails_at_once_with_the_managers_log_line(
    namespace: str, run_operator: RunOperator
) -> None:
    missing = absent()
    started = time.monotonic()
    with pytest.raises(OperatorExited) as caught:
        async with run_operator(definition(missing), namespaces=[namespace]):
            pytest.fail("the block ran although the manager had exited")
    assert time.monotonic() - started < PROMPT
    failure = caught.value
    assert failure.exit_code == 1
    assert any(
        line.startswith("ERROR memop.manager: the thing controller needs") and missing.group in line
        for line in failure.log_lines
    ), failure.log_lines
    assert "exited with code 1" in str(failure)
    assert "which the API server does not serve" in str(failure)


async def test_a_manager_exit_inside_the_block_interrupts_it(
    kube: Kube, namespace: str, install_crds: InstallCrds, run_operator: RunOperator
) -> None:
    server = kube.fake
    await install_crds(DEFINITION)
    election = LeaderElectionConfig(
        lease_name="echo-leader", namespace=namespace, identity="one",
        lease_duration=2, renew_deadline=1.5, retry_period=0.2,
    )  # fmt: skip
    interrupted_after: list[float] = []
    operator = run_operator(DEFINITION, namespaces=[namespace], leader_election=election)

    async def block() -> None:
        async with operator:
            await wait_for(operator.manager.leading.is_set, timeout=TIMEOUT)
            server.faults.fail(500, times=None, verb="update", resource="leases")
            started = time.monotonic()
            try:
                # Nothing but the manager's exit ends this wait (the timeout only if that fails).
                async with asyncio.timeout(TIMEOUT):
                    await asyncio.Event().wait()  # WAITING_LINE
            finally:
                interrupted_after.append(time.monotonic() - started)

    with pytest.raises(OperatorExited) as caught:
        await block()
    assert interrupted_after[0] < PROMPT
    assert caught.value.exit_code == 1
    assert any("leader election lost" in line for line in caught.value.log_lines), caught.value.log_lines
    assert getattr(caught.value, "__notes__", []) == [
        f"the async with block was interrupted at {__file__}:{WAITING_LINE}"
    ]
    assert operator.exited
    assert operator.reported
    assert not operator.running
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0  # the interruption was taken back: the test goes on


async def test_wait_for_fails_at_once_when_the_manager_exits(
    kube: Kube, namespace: str, install_crds: InstallCrds, run_operator: RunOperator
) -> None:
    server = kube.fake
    await install_crds(DEFINITION)
    election = LeaderElectionConfig(
        lease_name="echo-leader", namespace=namespace, identity="one",
        lease_duration=2, renew_deadline=1.5, retry_period=0.2,
    )  # fmt: skip
    operator = await run_operator(DEFINITION, namespaces=[namespace], leader_election=election).start()
    await wait_for(operator.manager.leading.is_set, timeout=TIMEOUT)
    server.faults.fail(500, times=None, verb="update", resource="leases")
    started = time.monotonic()
    with pytest.raises(OperatorExited, match="exited with code 1"):
        await operator.wait_for(lambda: False, timeout=TIMEOUT)
    assert time.monotonic() - started < PROMPT
    assert operator.reported  # so the fixture's teardown does not report it twice


async def test_install_crds_updates_a_crd_the_cluster_has(client: Client, install_crds: InstallCrds) -> None:
    kind = absent()
    await install_crds(crd(kind))
    changed = crd(kind)
    schema = changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["properties"]["size"] = {"type": "integer"}
    await install_crds(changed)
    name = changed["metadata"]["name"]
    try:
        current = await client.get(CUSTOM_RESOURCE_DEFINITIONS, name)
        stored = current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert stored["properties"]["spec"]["properties"]["size"] == {"type": "integer"}
    finally:
        await client.delete(CUSTOM_RESOURCE_DEFINITIONS, name)  # a kind of this test's own


async def test_release_finalizers_drops_every_finalizer(
    client: Client, namespace: str, install_crds: InstallCrds
) -> None:
    await install_crds(DEFINITION)
    for name in ("a", "b"):
        body: dict[str, Any] = echo(name, "x")
        body["metadata"]["finalizers"] = ["test.example.com/hold"]
        await client.create(ECHOES, body, namespace)
    await client.create(ECHOES, echo("free", "x"), namespace)
    assert await release_finalizers(client, ECHOES, namespace) == 2
    await client.delete(ECHOES, "a", namespace)
    with pytest.raises(NotFound):
        await client.get(ECHOES, "a", namespace)
