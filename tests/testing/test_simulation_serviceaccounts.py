"""Every Active namespace holds a ``default`` ServiceAccount, as kube-controller-manager's
serviceaccounts controller keeps it: in the namespaces there from the start and in new ones,
made again when it is deleted, never in a namespace being deleted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(simulate_controllers=True) as served:
        yield served


@pytest.fixture
async def core(server: ApiServer) -> AsyncIterator[client.CoreV1Api]:
    api = client.ApiClient(server.client_configuration())
    try:
        yield client.CoreV1Api(api)
    finally:
        await api.close()


async def default_account(core: client.CoreV1Api, namespace: str) -> Any:
    """The namespace's ``default`` ServiceAccount, once the controller made it (a moment after
    the namespace appeared, as on a cluster)."""

    async def read() -> Any:
        try:
            return await core.read_namespaced_service_account("default", namespace)
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    return await wait_for(read, timeout=30, message=f"the default ServiceAccount of {namespace}")


async def test_every_namespace_old_and_new_gets_a_default_service_account(core: client.CoreV1Api) -> None:
    for namespace in ("default", "kube-system", "kube-public"):
        assert (await default_account(core, namespace)).metadata.name == "default"
    await core.create_namespace({"metadata": {"name": "fresh"}})
    account = await default_account(core, "fresh")
    # As on a real v1.36.2 control plane (measured): a name alone, so no token Secret (none
    # since v1.24) and no managedFields (the controller's create set no field).
    assert account.secrets is None
    assert account.metadata.managed_fields is None


async def test_a_deleted_default_service_account_comes_back(core: client.CoreV1Api) -> None:
    await core.create_namespace({"metadata": {"name": "again"}})
    first = await default_account(core, "again")
    await core.delete_namespaced_service_account("default", "again")

    async def remade() -> Any:
        account = await default_account(core, "again")
        return account if account.metadata.uid != first.metadata.uid else None

    await wait_for(remade, timeout=30, message="the default ServiceAccount made again")


async def test_a_namespace_being_deleted_gets_none_back(server: ApiServer, core: client.CoreV1Api) -> None:
    await core.create_namespace({"metadata": {"name": "going", "finalizers": ["example.com/hold"]}})
    await default_account(core, "going")
    await core.delete_namespace("going")  # held Terminating by the foreign finalizer

    async def emptied() -> bool:
        accounts = await core.list_namespaced_service_account("going")
        return not accounts.items

    await wait_for(emptied, timeout=30, message="the Terminating namespace emptied")
    namespace = await core.read_namespace("going")
    assert namespace.status.phase == "Terminating"
    # The namespace controller deleted the account, which queued the namespace for the
    # serviceaccounts controller: once every simulated controller is idle, none was made again.
    controllers = server.controllers
    assert controllers is not None
    await wait_for(lambda: controllers.pending() == 0, timeout=30, message="the controllers idle")
    accounts = await core.list_namespaced_service_account("going")
    assert accounts.items == []
