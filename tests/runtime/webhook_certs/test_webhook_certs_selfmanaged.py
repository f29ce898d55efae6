"""SelfManagedCertificates against the in-memory API server: the Secret, the files, the caBundles,
replicas racing, renewals on a FakeClock, and what goes wrong (garbage, RBAC, missing objects)."""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from webhook_certs_support import (
    CHECK_INTERVAL,
    CRD_NAME,
    DAY,
    MUTATING,
    NAMESPACE,
    SECRET,
    SERVICE,
    VALIDATING,
    Make,
    crd,
    serves_webhook_configurations,
    webhook_configuration,
)

from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, SECRETS
from memop.runtime.util.clock import FakeClock
from memop.runtime.webhook.certs import CA_BUNDLE, TLS_CERT, TLS_KEY, issued_by, parse_secret_data
from memop.runtime.webhook.selfmanaged import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    SelfManagedCertificates,
    self_managed_certificate_rules,
)
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for

LOGGER = "memop.webhook.certs"


@pytest.fixture
async def api(connect: Callable[[], Client]) -> Client:
    """The test's own client, with the operator's namespace created."""
    client = connect()
    await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    return client


@pytest.fixture
async def running() -> AsyncIterator[Callable[[SelfManagedCertificates], asyncio.Task[None]]]:
    """``running(instance)``: its run() in a task, cancelled and awaited after the test."""
    tasks: list[asyncio.Task[None]] = []

    def start(instance: SelfManagedCertificates) -> asyncio.Task[None]:
        task = asyncio.create_task(instance.run())
        tasks.append(task)
        return task

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def secret_data(api: Client) -> dict[str, bytes]:
    secret = await api.get(SECRETS, SECRET, NAMESPACE)
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


async def crd_bundle(api: Client) -> bytes | None:
    found = await api.get(CUSTOM_RESOURCE_DEFINITIONS, CRD_NAME)
    value = found["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle")
    return base64.b64decode(value) if value else None


async def step(clock: FakeClock, certs: SelfManagedCertificates, seconds: float = CHECK_INTERVAL) -> None:
    """Once run() sleeps, advance the clock ``seconds`` (at least its longest pause) and wait for
    the pass that wakes."""
    assert seconds >= CHECK_INTERVAL
    await wait_for(lambda: clock.pending_timers() > 0, message="run() sleeps")
    done = certs.passes
    clock.advance(seconds)
    await wait_for(lambda: certs.passes > done, message="a pass ran")


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == LOGGER]


async def test_first_start_creates_the_secret_the_files_and_the_crd_bundle(api: Client, make: Make) -> None:
    await api.create(CUSTOM_RESOURCE_DEFINITIONS, crd())
    certs = make()
    assert not certs.ready
    result = await certs.sync()
    assert certs.ready
    assert result.complete
    secret = await api.get(SECRETS, SECRET, NAMESPACE)
    assert secret["type"] == "kubernetes.io/tls"
    data = await secret_data(api)
    assert certs.cert_file.read_bytes() == data[TLS_CERT]
    assert certs.key_file.read_bytes() == data[TLS_KEY]
    assert certs.key_file.stat().st_mode & 0o777 == 0o600
    assert certs.ca_bundle == data[CA_BUNDLE]
    assert await crd_bundle(api) == data[CA_BUNDLE]
    # Nothing left behind by the atomic writes.
    assert sorted(path.name for path in certs.cert_dir.iterdir()) == ["tls.crt", "tls.key"]
    # A second pass changes nothing: same resourceVersion, same files.
    mtime = certs.cert_file.stat().st_mtime_ns
    await certs.sync()
    assert (await api.get(SECRETS, SECRET, NAMESPACE))["metadata"]["resourceVersion"] == secret["metadata"][
        "resourceVersion"
    ]
    assert certs.cert_file.stat().st_mtime_ns == mtime


async def test_five_replicas_starting_at_once_agree_on_one_ca_and_certificate(
    api: Client, make: Make, apiserver: ApiServer
) -> None:
    replicas = [make(f"replica-{index}") for index in range(5)]
    await asyncio.gather(*(replica.sync() for replica in replicas))
    data = await secret_data(api)
    for replica in replicas:
        assert replica.cert_file.read_bytes() == data[TLS_CERT]
        assert replica.key_file.read_bytes() == data[TLS_KEY]
        assert replica.ca_bundle == data[CA_BUNDLE]
    creates = [entry for entry in apiserver.log if entry.verb == "create" and entry.resource == "secrets"]
    assert len(creates) == 5
    assert sorted(entry.status for entry in creates) == [201, 409, 409, 409, 409]


async def test_replicas_renewing_at_once_end_with_the_same_certificate_and_ca(
    api: Client, make: Make, clock: FakeClock
) -> None:
    replicas = [make(f"replica-{index}") for index in range(3)]
    await replicas[0].sync()
    before = await secret_data(api)
    await asyncio.gather(*(replica.sync() for replica in replicas[1:]))
    clock.advance(2.5 * DAY)  # past 2/3 of the serving certificate's 3 days
    await asyncio.gather(*(replica.sync() for replica in replicas))
    after = await secret_data(api)
    assert after[TLS_CERT] != before[TLS_CERT]
    assert after[CA_BUNDLE] == before[CA_BUNDLE]
    for replica in replicas:
        assert replica.cert_file.read_bytes() == after[TLS_CERT]


async def test_run_renews_the_serving_certificate_then_rotates_the_ca(
    api: Client, make: Make, clock: FakeClock, running: Callable[..., asyncio.Task[None]]
) -> None:
    await api.create(CUSTOM_RESOURCE_DEFINITIONS, crd())
    certs = make()
    running(certs)
    await asyncio.wait_for(certs.wait_ready(), 10)
    first = parse_secret_data((await api.get(SECRETS, SECRET, NAMESPACE))["data"])
    # The serving certificate's renewal (2 days in).
    await step(clock, certs, 2 * DAY)
    serving = parse_secret_data((await api.get(SECRETS, SECRET, NAMESPACE))["data"])
    assert serving.cert_pem != first.cert_pem
    assert certs.cert_file.read_bytes() == serving.cert_pem
    assert serving.cas == first.cas
    # The CA's rotation, 20 days in: the bundle holds both CAs, in the Secret and the CRD.
    for _ in range(18):
        await step(clock, certs, DAY)
    assert certs.certificates is not None
    rotated = certs.certificates
    assert rotated.cas[1:] == first.cas
    assert parse_secret_data((await api.get(SECRETS, SECRET, NAMESPACE))["data"]).cas == rotated.cas
    assert await crd_bundle(api) == rotated.ca_bundle
    # Serving moves to the new CA at its next renewal (after the propagation hour at least).
    for _ in range(3):
        await step(clock, certs, DAY)
    assert issued_by(certs.certificates.serving, rotated.cas[0])
    assert certs.cert_file.read_bytes() == certs.certificates.cert_pem


async def _equals(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


async def test_garbage_in_the_secret_is_replaced_by_an_update(
    api: Client, make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    created = await api.create(
        SECRETS,
        {
            "metadata": {"name": SECRET, "namespace": NAMESPACE},
            "type": "kubernetes.io/tls",
            "data": {
                "tls.crt": base64.b64encode(b"junk").decode(),
                "tls.key": base64.b64encode(b"junk").decode(),
            },
        },
    )
    caplog.set_level(logging.INFO, LOGGER)
    certs = make()
    await certs.sync()
    secret = await api.get(SECRETS, SECRET, NAMESPACE)
    assert secret["metadata"]["uid"] == created["metadata"]["uid"]  # updated, not re-created
    assert parse_secret_data(secret["data"]).cert_pem == certs.cert_file.read_bytes()
    [line] = [message for message in messages(caplog) if "could not be used" in message]
    assert line == (
        f"Secret {NAMESPACE}/{SECRET} could not be used (it has no ca.crt, ca.key): "
        "replaced its content (it has no ca.crt, ca.key)"
    )


async def test_a_certificate_from_a_clock_ahead_is_used_with_one_warning(
    api: Client, make: Make, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    ahead = make("ahead", clock=FakeClock(wall_start=clock.time() + 7200))
    await ahead.sync()
    written = (await api.get(SECRETS, SECRET, NAMESPACE))["metadata"]["resourceVersion"]
    caplog.set_level(logging.INFO, LOGGER)
    certs = make()
    for _ in range(3):
        await certs.sync()
        clock.advance(CHECK_INTERVAL)
    assert certs.cert_file.read_bytes() == ahead.cert_file.read_bytes()
    assert (await api.get(SECRETS, SECRET, NAMESPACE))["metadata"]["resourceVersion"] == written
    [warning] = [message for message in messages(caplog) if "skewed" in message]
    assert warning.startswith(f"Secret {NAMESPACE}/{SECRET}: the CA is not valid before ")


async def test_a_crd_bundle_someone_reset_is_set_again_at_the_next_check(
    api: Client, make: Make, clock: FakeClock, running: Callable[..., asyncio.Task[None]]
) -> None:
    await api.create(CUSTOM_RESOURCE_DEFINITIONS, crd())
    certs = make()
    running(certs)
    await wait_for(lambda: certs.passes >= 1)
    bundle = certs.ca_bundle
    assert await crd_bundle(api) == bundle
    # kubectl apply of the manifests, which carry no caBundle.
    found = await api.get(CUSTOM_RESOURCE_DEFINITIONS, CRD_NAME)
    del found["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]
    await api.update(CUSTOM_RESOURCE_DEFINITIONS, found)
    assert await crd_bundle(api) is None
    await step(clock, certs)
    assert await crd_bundle(api) == bundle


async def test_a_missing_crd_is_logged_once_and_patched_when_it_appears(
    api: Client,
    make: Make,
    clock: FakeClock,
    running: Callable[..., asyncio.Task[None]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    certs = make()
    result = await certs.sync()
    assert not result.complete
    assert certs.ready  # the webhook server need not wait for the CRD
    running(certs)
    for _ in range(5):
        await step(clock, certs)
    missing = [message for message in messages(caplog) if "does not exist" in message]
    assert missing == [
        f"CustomResourceDefinition {CRD_NAME} does not exist (yet): its caBundle is set once it does"
    ]
    await api.create(CUSTOM_RESOURCE_DEFINITIONS, crd())
    await step(clock, certs)
    assert await crd_bundle(api) == certs.ca_bundle


async def test_a_crd_without_a_conversion_webhook_is_left_alone(
    api: Client, make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    await api.create(CUSTOM_RESOURCE_DEFINITIONS, crd(strategy="None"))
    caplog.set_level(logging.INFO, LOGGER)
    certs = make()
    assert (await certs.sync()).complete
    found = await api.get(CUSTOM_RESOURCE_DEFINITIONS, CRD_NAME)
    assert found["spec"]["conversion"] == {"strategy": "None"}
    assert any("has no conversion webhook" in message for message in messages(caplog))


async def test_forbidden_names_the_missing_rule_once_and_retries(
    api: Client,
    make: Make,
    *,
    apiserver: ApiServer,
    clock: FakeClock,
    running: Callable[..., asyncio.Task[None]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    rule = apiserver.faults.forbid(verb="create", resource="secrets")
    certs = make()
    task = running(certs)
    for _ in range(4):
        await step(clock, certs)
    forbidden = [message for message in messages(caplog) if "cannot create" in message]
    assert forbidden == [
        f"cannot create Secret {NAMESPACE}/{SECRET}: the operator's Role in {NAMESPACE} needs the rule "
        'apiGroups [""] resources [secrets] verbs [create] (webhook certificates); retrying'
    ]
    assert not certs.ready
    assert not task.done()
    apiserver.faults.clear()
    assert rule.hits == 5
    await step(clock, certs)
    assert certs.ready


async def test_the_certificate_serves_tls_for_the_service_names_and_the_extra_ip(
    api: Client, make: Make
) -> None:
    certs = make()
    await certs.sync()
    assert certs.ca_bundle is not None
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(certs.cert_file, certs.key_file)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    client_context = ssl.create_default_context(cadata=certs.ca_bundle.decode())
    try:
        for name in (f"{SERVICE}.{NAMESPACE}.svc", f"{SERVICE}.{NAMESPACE}.svc.cluster.local", "127.0.0.1"):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client_context, server_hostname=name
            )
            assert await reader.read() == b"ok"
            writer.close()
        with pytest.raises(ssl.SSLCertVerificationError):
            await asyncio.open_connection("127.0.0.1", port, ssl=client_context, server_hostname="other.svc")
    finally:
        server.close()
        await server.wait_closed()


async def test_webhook_configurations_get_the_bundle_in_every_webhook(
    api: Client,
    make: Make,
    apiserver: ApiServer,
    clock: FakeClock,
    running: Callable[..., asyncio.Task[None]],
) -> None:
    if not await serves_webhook_configurations(apiserver):
        pytest.skip(
            "the in-memory API server does not serve admissionregistration.k8s.io/v1 webhook "
            "configurations yet (discovery)"
        )
    await api.create(
        VALIDATING_WEBHOOK_CONFIGURATIONS, webhook_configuration("ValidatingWebhookConfiguration", VALIDATING)
    )
    await api.create(
        MUTATING_WEBHOOK_CONFIGURATIONS, webhook_configuration("MutatingWebhookConfiguration", MUTATING, 1)
    )
    certs = make(
        validating_webhook_configurations=(VALIDATING,), mutating_webhook_configurations=(MUTATING,), crds=()
    )
    assert (await certs.sync()).complete
    encoded = base64.b64encode(certs.ca_bundle or b"").decode()

    async def bundles() -> list[str | None]:
        found = []
        for res, name in (
            (VALIDATING_WEBHOOK_CONFIGURATIONS, VALIDATING),
            (MUTATING_WEBHOOK_CONFIGURATIONS, MUTATING),
        ):
            obj = await api.get(res, name)
            found += [hook["clientConfig"].get("caBundle") for hook in obj["webhooks"]]
        return found

    assert await bundles() == [encoded] * 3
    # Someone resets one webhook's caBundle (and the other fields stay as they were).
    validating = await api.get(VALIDATING_WEBHOOK_CONFIGURATIONS, VALIDATING)
    del validating["webhooks"][1]["clientConfig"]["caBundle"]
    validating["webhooks"][0]["failurePolicy"] = "Fail"
    await api.update(VALIDATING_WEBHOOK_CONFIGURATIONS, validating)
    running(certs)
    await step(clock, certs)
    assert await bundles() == [encoded] * 3
    validating = await api.get(VALIDATING_WEBHOOK_CONFIGURATIONS, VALIDATING)
    assert validating["webhooks"][0]["failurePolicy"] == "Fail"
    assert [hook["clientConfig"]["service"]["path"] for hook in validating["webhooks"]] == [
        "/hook0",
        "/hook1",
    ]


async def test_a_missing_webhook_configuration_is_not_an_error(api: Client, make: Make) -> None:
    certs = make(validating_webhook_configurations=("absent",), crds=())
    result = await certs.sync()
    assert not result.complete
    assert certs.ready
    with pytest.raises(NotFound):
        await api.get(VALIDATING_WEBHOOK_CONFIGURATIONS, "absent")


async def test_the_rules_cover_every_request_it_sends(
    api: Client, make: Make, apiserver: ApiServer, clock: FakeClock
) -> None:
    """Every request of a life (creation, a renewal, a bundle set again) is a rule, and every
    rule is a request it sends (webhook configurations when the server serves them)."""
    await api.create(CUSTOM_RESOURCE_DEFINITIONS, crd())
    targets: dict[str, Any] = {"crds": (CRD_NAME,)}
    if await serves_webhook_configurations(apiserver):
        await api.create(
            VALIDATING_WEBHOOK_CONFIGURATIONS,
            webhook_configuration("ValidatingWebhookConfiguration", VALIDATING),
        )
        await api.create(
            MUTATING_WEBHOOK_CONFIGURATIONS, webhook_configuration("MutatingWebhookConfiguration", MUTATING)
        )
        targets |= {
            "validating_webhook_configurations": (VALIDATING,),
            "mutating_webhook_configurations": (MUTATING,),
        }
    certs = make(**targets)
    await certs.sync()
    clock.advance(2.5 * DAY)
    await certs.sync()
    sent = {
        (record.group, record.resource, record.verb)
        for record in apiserver.log
        if record.user_agent.startswith("webhook-certs-test") and record.resource_request
    }
    # The test's own requests (namespace, objects) use the same client type: keep ours only.
    sent -= {("", "namespaces", "create")}
    sent -= {(group, resource, "create") for group, resource, _ in sent if resource != "secrets"}
    rules = self_managed_certificate_rules(
        validating="validating_webhook_configurations" in targets,
        mutating="mutating_webhook_configurations" in targets,
    )
    assert sent == {rule.triple for rule in rules}
    assert {rule.triple[1] for rule in self_managed_certificate_rules(mutating=False, conversion=False)} == {
        "secrets",
        "validatingwebhookconfigurations",
    }


async def test_a_single_string_where_names_are_expected_is_refused(make: Make) -> None:
    with pytest.raises(TypeError, match=r"crds takes names, not one string: \('widgets.example.com',\)"):
        make(crds=CRD_NAME)
    with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6 address"):
        make(extra_ips=("localhost",))
