"""memop's webhooks end to end: the API server calls a memop process's admission and conversion
webhooks, and the Memcached controller acts on what they let through.

The path is the one a cluster takes: memop serves HTTPS on 127.0.0.1 with a certificate made for
the test; the test registers a ValidatingWebhookConfiguration for Memcached (scoped to its own
namespace by ``namespaceSelector``, so a real cluster's other objects are never judged by it) and
points the Memcached CRD's conversion at memop's ``/convert`` (``clientConfig.url``, as kube-apiserver
on the same host reaches it), and takes both back afterwards. The same tests run unchanged with
USE_EXISTING_CLUSTER=true on a cluster whose API server runs on this machine (it must reach
127.0.0.1); there convergence is memop's part: a cluster without nodes starts no pod.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memop.builtin import PROJECT
from memop.memcached import api
from memop.memcached.webhooks import WEBHOOK as WEBHOOK_DECLARATION
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, Invalid, NotFound
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, DEPLOYMENTS, SECRETS
from memop.runtime.webhook.selfmanaged import VALIDATING_WEBHOOK_CONFIGURATIONS
from memop.testing import install_webhooks
from memop.testing.envtest import Kube
from memop.testing.process import MemopProcess, MemopProcesses, free_port
from memop.testing.tls import ServingCertificates
from memop.testing.wait import wait_for

CRD_NAME = f"{api.PLURAL}.{api.GROUP}"
WEBHOOK = WEBHOOK_DECLARATION
SERVING = re.compile(r"^serving webhooks .* on (?P<host>[^ ]+):(?P<port>\d+) over HTTPS")


@dataclass
class Served:
    process: MemopProcess
    base_url: str
    ca_pem: bytes


@pytest.fixture
async def memops(kube: Kube) -> AsyncIterator[MemopProcesses]:
    assert kube.kubeconfig is not None  # the plugin's kube always has one
    group = MemopProcesses(kube.kubeconfig)
    yield group
    await group.stop()


@pytest.fixture
async def served(memops: MemopProcesses, namespace: str, tmp_path: Path) -> Served:
    """A memop process running the Memcached controller on the test's namespace, serving its
    webhooks on a free loopback port with a certificate for 127.0.0.1."""
    certificates = ServingCertificates.generate("memop-e2e-webhook")
    cert_dir = tmp_path / "serving-certs"
    cert_dir.mkdir()
    (cert_dir / "tls.crt").write_bytes(certificates.cert_pem)
    (cert_dir / "tls.key").write_bytes(certificates.key_pem)
    process = await memops.start(
        "--controllers=memcached",
        f"--watch-namespace={namespace}",
        "--webhook-host=127.0.0.1",
        "--webhook-port=0",
        f"--webhook-cert-dir={cert_dir}",
        webhooks=True,
    )
    await process.wait_ready()
    record = await process.wait_log(lambda r: SERVING.match(str(r.get("msg", ""))) is not None)
    match = SERVING.match(str(record["msg"]))
    assert match is not None
    return Served(
        process,
        f"https://{match['host']}:{match['port']}",
        certificates.ca_pem,
    )


@pytest.fixture
async def registered(client: Client, served: Served, namespace: str) -> AsyncIterator[None]:
    """Memcached's webhooks registered as the installs register them (install_webhooks), called
    on ``served``: the validating one for the test's namespace only, under a name of the test's
    own (a real cluster's install keeps its own); the CRD's conversion put back after."""
    installed = await install_webhooks(
        client,
        PROJECT,
        served.base_url,
        served.ca_pem,
        namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        controllers=["memcached"],
        name_prefix=f"memop-e2e-{namespace}-",
    )
    try:
        await conversion_in_effect(client)
        yield
    finally:
        await installed.uninstall()


async def conversion_in_effect(client: Client) -> None:
    """Wait until the CRD's conversion webhook converts: a real API server applies a CRD change
    asynchronously (a create at v1beta1 right after the patch was stored without its port). The
    probe is stored at v1alpha1 with the port annotation, outside the test's namespace (no
    webhook judges it, no memop watches it), and read at v1beta1 until the port comes out."""
    name = f"conversion-probe-{uuid.uuid4().hex[:8]}"
    probe = memcached_at(api.VERSION, name, "default")
    probe["metadata"]["annotations"] = {api.CONTAINER_PORT_ANNOTATION: "11311"}
    await client.create(api.MEMCACHEDS, probe)

    async def converted() -> bool:
        try:
            got = await client.get(api.MEMCACHEDS_V1BETA1, name, "default")
        except ApiError:  # the webhook not called yet, or not reachable yet
            return False
        return bool(got["spec"].get("containerPort") == 11311)

    try:
        await wait_for(converted, timeout=30)
    finally:
        await client.delete(api.MEMCACHEDS, name, "default")


def memcached_at(version: str, name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{api.GROUP}/{version}",
        "kind": api.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": 1, **spec},
    }


def greedy(namespace: str) -> dict[str, Any]:
    """Requests above limits: valid to the schema, refused by memop's validator."""
    return memcached_at(
        api.VERSION, "too-greedy", namespace,
        resources={"requests": {"memory": "128Mi"}, "limits": {"memory": "64Mi"}},
    )  # fmt: skip


async def deployment_port(client: Client, namespace: str, name: str) -> int | None:
    try:
        deployment = await client.get(DEPLOYMENTS, name, namespace)
    except NotFound:
        return None
    ports = deployment["spec"]["template"]["spec"]["containers"][0].get("ports") or []
    return int(ports[0]["containerPort"]) if ports else None


async def test_a_memcached_the_validator_refuses_is_never_stored(
    client: Client, namespace: str, registered: None
) -> None:
    with pytest.raises(Invalid) as refused:
        await client.create(api.MEMCACHEDS, greedy(namespace))
    message = refused.value.message
    assert f'admission webhook "{WEBHOOK.validating_name}" denied the request' in message, message
    assert "spec.resources" in message, message
    causes = (refused.value.body.get("details") or {}).get("causes") or []
    assert any(str(c.get("field", "")).startswith("spec.resources") for c in causes), refused.value.body
    with pytest.raises(NotFound):
        await client.get(api.MEMCACHEDS, "too-greedy", namespace)
    # A valid one goes through the same webhook.
    created = await client.create(api.MEMCACHEDS, memcached_at(api.VERSION, "fine", namespace))
    assert created["metadata"]["name"] == "fine"


async def test_v1beta1_objects_convert_losslessly_and_the_controller_uses_their_port(
    client: Client, namespace: str, registered: None, served: Served
) -> None:
    created = await client.create(
        api.MEMCACHEDS_V1BETA1, memcached_at(api.V1BETA1, "ported", namespace, containerPort=11311)
    )
    assert created["apiVersion"] == api.API_VERSION_V1BETA1
    assert created["spec"]["containerPort"] == 11311
    # Stored at v1alpha1, which keeps the port in an annotation.
    hub = await client.get(api.MEMCACHEDS, "ported", namespace)
    assert "containerPort" not in hub["spec"]
    assert hub["metadata"]["annotations"][api.CONTAINER_PORT_ANNOTATION] == "11311"
    spoke = await client.get(api.MEMCACHEDS_V1BETA1, "ported", namespace)
    assert spoke["spec"]["containerPort"] == 11311
    assert api.CONTAINER_PORT_ANNOTATION not in (spoke["metadata"].get("annotations") or {})
    # The controller reads v1alpha1 and gives the Deployment the v1beta1 port.
    await wait_for(lambda: deployment_port(client, namespace, "ported"), timeout=30)
    assert await deployment_port(client, namespace, "ported") == 11311
    # A change at v1beta1 reaches the Deployment.
    await client.patch(api.MEMCACHEDS_V1BETA1, "ported", {"spec": {"containerPort": 11411}}, namespace)

    async def moved() -> bool:
        return await deployment_port(client, namespace, "ported") == 11411

    await wait_for(moved, timeout=30)
    assert served.process.returncode is None


async def test_objects_stored_at_v1alpha1_are_served_at_v1beta1(
    client: Client, namespace: str, registered: None
) -> None:
    await client.create(api.MEMCACHEDS, memcached_at(api.VERSION, "older", namespace, size=2))
    spoke = await client.get(api.MEMCACHEDS_V1BETA1, "older", namespace)
    assert spoke["apiVersion"] == api.API_VERSION_V1BETA1
    assert spoke["spec"]["size"] == 2
    # Measured on v1.36.2: an object read in another version is defaulted in its stored version
    # only, before conversion, so v1beta1's default port is not filled in (absent means 11211).
    assert "containerPort" not in spoke["spec"]
    listed = await client.list(api.MEMCACHEDS_V1BETA1, namespace)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["older"]
    assert all(item["apiVersion"] == api.API_VERSION_V1BETA1 for item in listed["items"])


async def test_a_conversion_webhook_that_is_down_fails_requests_in_the_other_version_only(
    client: Client, namespace: str, registered: None, served: Served
) -> None:
    await client.create(api.MEMCACHEDS, memcached_at(api.VERSION, "kept", namespace))
    await served.process.terminate()
    # The stored version needs no conversion; the other one cannot be served without memop.
    assert (await client.get(api.MEMCACHEDS, "kept", namespace))["metadata"]["name"] == "kept"
    with pytest.raises(ApiError) as failed:
        await client.get(api.MEMCACHEDS_V1BETA1, "kept", namespace)
    assert failed.value.code == 500
    assert "conversion webhook for" in failed.value.message


async def test_self_managed_certificates_make_the_whole_path_work_without_cert_manager(
    client: Client, namespace: str, memops: MemopProcesses, tmp_path: Path
) -> None:
    """--webhook-certs=self-managed: memop makes its CA and certificate (a Secret in the test's
    namespace) and sets the caBundle of the install's webhook configuration and of the CRD's
    conversion, which the test registers without one, as `memop manifests` writes them."""
    name = "memop-validating-webhook-configuration"  # the project's prefix + Kubebuilder's name
    with contextlib.suppress(NotFound):
        await client.get(VALIDATING_WEBHOOK_CONFIGURATIONS, name)
        pytest.skip(f"this cluster has a {name} already (memop is installed): not touching it")
    # memop picks its port before it knows it, so the URLs need one: a free one, asked of the OS.
    port = free_port()
    # As the installs register them (no caBundle: memop sets it), on loopback, for this namespace.
    installed = await install_webhooks(
        client,
        PROJECT,
        f"https://127.0.0.1:{port}",
        namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        controllers=["memcached"],
    )
    try:
        process = await memops.start(
            "--controllers=memcached",
            f"--watch-namespace={namespace}",
            "--webhook-host=127.0.0.1",
            f"--webhook-port={port}",
            f"--webhook-cert-dir={tmp_path / 'certs'}",
            "--webhook-certs=self-managed",
            f"--webhook-namespace={namespace}",
            "--webhook-cert-extra-names=127.0.0.1",
            webhooks=True,
        )
        await process.wait_ready()
        secret = await client.get(SECRETS, "memop-webhook-server-cert", namespace)
        bundle = secret["data"]["ca.crt"]
        configuration = await client.get(VALIDATING_WEBHOOK_CONFIGURATIONS, name)
        assert configuration["webhooks"][0]["clientConfig"]["caBundle"] == bundle

        async def crd_trusts_memop() -> bool:
            current = await client.get(CUSTOM_RESOURCE_DEFINITIONS, CRD_NAME)
            client_config = current["spec"]["conversion"]["webhook"]["clientConfig"]
            return bool(client_config.get("caBundle") == bundle)

        await wait_for(crd_trusts_memop, timeout=30)
        await conversion_in_effect(client)
        # The API server now trusts memop's certificate on both paths.
        with pytest.raises(Invalid) as refused:
            await client.create(api.MEMCACHEDS, greedy(namespace))
        assert f'admission webhook "{WEBHOOK.validating_name}" denied the request' in refused.value.message
        await client.create(
            api.MEMCACHEDS_V1BETA1, memcached_at(api.V1BETA1, "good", namespace, containerPort=11311)
        )
        assert (await client.get(api.MEMCACHEDS_V1BETA1, "good", namespace))["spec"]["containerPort"] == 11311
        assert process.returncode is None
    finally:
        await memops.stop()
        await installed.uninstall()
