"""The webhook server over real HTTPS on loopback (memop.runtime.webhook.server): TLS settings,
certificate reloads driven by a fake clock, readiness and metrics.

A ``Thing`` kind of ``example.memop.dev`` is declared here, with a defaulter and a validator,
and a ``Thing`` conversion between ``v1`` (hub) and ``v2``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import REGISTRY

from memop.runtime.util.clock import FakeClock
from memop.runtime.webhook.declarations import (
    CONVERSION_PATH,
    AdmissionRequest,
    AdmissionWebhook,
    Conversion,
    Obj,
    Spoke,
)
from memop.runtime.webhook.server import CertificateError, WebhookServer, WebhookServerOptions
from memop.testing.tls import ServingCertificates
from memop.testing.wait import wait_for

GROUP = "example.memop.dev"


class ThingDefaulter:
    async def default(self, obj: Obj, request: AdmissionRequest) -> None:
        obj.setdefault("spec", {}).setdefault("size", 1)


class ThingValidator:
    async def validate_create(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]:
        return ["fine"]

    async def validate_update(self, old: Obj, new: Obj, request: AdmissionRequest) -> Sequence[str]:
        return []

    async def validate_delete(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]:
        return []


THINGS = AdmissionWebhook(
    GROUP,
    "v1",
    "Thing",
    "things",
    defaulter=ThingDefaulter(),
    validator=ThingValidator(),
    operations=("CREATE",),
)
THING_VERSIONS = Conversion(
    group=GROUP,
    kind="Thing",
    plural="things",
    hub="v1",
    spokes={"v2": Spoke(to_hub=dict, from_hub=dict)},
)


@pytest.fixture(scope="module")
def pairs() -> tuple[ServingCertificates, ServingCertificates]:
    """Two serving pairs for 127.0.0.1, each signed by its own CA."""
    return ServingCertificates.generate("first"), ServingCertificates.generate("second")


def write_pair(directory: Path, pair: ServingCertificates) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)


def trusting(pair: ServingCertificates) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=pair.ca_pem.decode())
    context.set_alpn_protocols(["h2", "http/1.1"])
    return context


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def server(
    tmp_path: Path, pairs: tuple[ServingCertificates, ServingCertificates], clock: FakeClock
) -> AsyncIterator[WebhookServer]:
    write_pair(tmp_path / "certs", pairs[0])
    server = WebhookServer(
        WebhookServerOptions(host="127.0.0.1", port=0, cert_dir=tmp_path / "certs"), clock=clock
    )
    server.add([THINGS], [THING_VERSIONS])
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def admission_review(uid: str = "uid-1") -> dict[str, Any]:
    obj = {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": "t", "namespace": "ns"}}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": GROUP, "version": "v1", "kind": "Thing"},
            "resource": {"group": GROUP, "version": "v1", "resource": "things"},
            "namespace": "ns",
            "name": "t",
            "operation": "CREATE",
            "userInfo": {"username": "u"},
            "object": obj,
        },
    }


async def post(server: WebhookServer, path: str, body: Any, trust: ssl.SSLContext) -> tuple[int, Any]:
    url = f"https://127.0.0.1:{server.port}{path}"
    async with aiohttp.ClientSession() as http, http.post(url, json=body, ssl=trust) as response:
        return response.status, await response.json(content_type=None)


async def peer_certificate(server: WebhookServer, trust: ssl.SSLContext) -> tuple[str | None, str]:
    """A new connection's ALPN protocol and its certificate's subject common name."""
    _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=trust)
    try:
        tls = writer.get_extra_info("ssl_object")
        subject = dict(item[0] for item in tls.getpeercert()["subject"])
        return tls.selected_alpn_protocol(), subject["commonName"]
    finally:
        writer.close()
        await writer.wait_closed()


async def test_admission_and_conversion_are_served_over_https_with_http1_only(
    server: WebhookServer, pairs: tuple[ServingCertificates, ServingCertificates]
) -> None:
    trust = trusting(pairs[0])
    assert set(server.paths) == {THINGS.mutating_path, THINGS.validating_path, CONVERSION_PATH}
    status, reply = await post(server, THINGS.mutating_path, admission_review(), trust)
    assert status == 200
    assert reply["response"]["uid"] == "uid-1"
    patch = json.loads(base64.b64decode(reply["response"]["patch"]))
    assert patch == [{"op": "add", "path": "/spec", "value": {"size": 1}}]
    status, reply = await post(server, THINGS.validating_path, admission_review(), trust)
    assert (status, reply["response"]["allowed"], reply["response"]["warnings"]) == (200, True, ["fine"])
    conversion = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "c1",
            "desiredAPIVersion": f"{GROUP}/v2",
            "objects": [admission_review()["request"]["object"]],
        },
    }
    status, reply = await post(server, CONVERSION_PATH, conversion, trust)
    assert status == 200
    assert reply["response"]["convertedObjects"][0]["apiVersion"] == f"{GROUP}/v2"
    status, reply = await post(server, THINGS.validating_path, {"kind": "AdmissionReview"}, trust)
    assert status == 400
    assert "expected a AdmissionReview" in reply["message"]
    assert await peer_certificate(server, trust) == ("http/1.1", "first")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
async def test_tls_older_than_1_2_is_refused(
    server: WebhookServer, pairs: tuple[ServingCertificates, ServingCertificates]
) -> None:
    old = trusting(pairs[0])
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await peer_certificate(server, old)
    # Not only the system's OpenSSL policy: the server's own floor.
    assert server.certificates is not None
    assert server.certificates.context.minimum_version == ssl.TLSVersion.TLSv1_2


async def test_a_changed_pair_is_served_after_the_next_poll_and_a_broken_one_keeps_the_old(
    server: WebhookServer,
    pairs: tuple[ServingCertificates, ServingCertificates],
    clock: FakeClock,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = pairs
    watcher = server.certificates
    assert watcher is not None
    await wait_for(lambda: clock.pending_timers() == 1, message="the poll is not waiting on the clock")
    write_pair(tmp_path / "certs", second)
    # Not before the poll: the files changed, the served pair did not.
    assert (await peer_certificate(server, trusting(first)))[1] == "first"
    clock.advance(10)
    await wait_for(lambda: watcher.reloads == 1)
    assert (await peer_certificate(server, trusting(second)))[1] == "second"

    # A key that does not match its certificate: the previous pair keeps serving, said once.
    (tmp_path / "certs" / "tls.crt").write_bytes(first.cert_pem)
    with caplog.at_level(logging.ERROR, logger="memop.webhook"):
        for _ in range(3):
            await wait_for(lambda: clock.pending_timers() == 1)
            clock.advance(10)
            await asyncio.sleep(0)
        await wait_for(lambda: clock.pending_timers() == 1)
    assert watcher.reloads == 1
    assert (await peer_certificate(server, trusting(second)))[1] == "second"
    failures = [r for r in caplog.records if r.name == "memop.webhook"]
    assert len(failures) == 1
    assert "still serving the previous one" in failures[0].getMessage()
    # Mended: served at the next poll.
    write_pair(tmp_path / "certs", first)
    clock.advance(10)
    await wait_for(lambda: watcher.reloads == 2)
    assert (await peer_certificate(server, trusting(first)))[1] == "first"


async def test_ready_once_listening_and_not_after_stop(
    tmp_path: Path, pairs: tuple[ServingCertificates, ServingCertificates]
) -> None:
    write_pair(tmp_path, pairs[0])
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, cert_dir=tmp_path))
    assert server.ready() == "no webhook registered"
    server.add([THINGS])
    assert server.ready() == "the webhook server is not serving"
    await server.start()
    try:
        assert server.ready() is None
        with pytest.raises(RuntimeError, match="before the server starts"):
            server.add(conversions=[THING_VERSIONS])
    finally:
        await server.stop()
    assert server.ready() == "the webhook server is not serving"


async def test_requests_are_counted_and_timed_per_path(
    server: WebhookServer, pairs: tuple[ServingCertificates, ServingCertificates]
) -> None:
    path = THINGS.validating_path

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, {"webhook": path, **labels}) or 0.0

    before = {code: sample("controller_runtime_webhook_requests_total", code=code) for code in ("200", "400")}
    observed = sample("controller_runtime_webhook_latency_seconds_count")
    trust = trusting(pairs[0])
    for uid in ("a", "b", "c"):
        await post(server, path, admission_review(uid), trust)
    await post(server, path, {"apiVersion": "admission.k8s.io/v1"}, trust)
    assert sample("controller_runtime_webhook_requests_total", code="200") == before["200"] + 3
    assert sample("controller_runtime_webhook_requests_total", code="400") == before["400"] + 1
    assert sample("controller_runtime_webhook_latency_seconds_count") == observed + 4
    # controller-runtime's buckets: ExponentialBuckets(10e-9, 10, 12), 10 ns to 1000 s.
    assert (
        REGISTRY.get_sample_value(
            "controller_runtime_webhook_latency_seconds_bucket", {"webhook": path, "le": "1000.0"}
        )
        == observed + 4
    )
    assert (
        REGISTRY.get_sample_value(
            "controller_runtime_webhook_latency_seconds_bucket", {"webhook": path, "le": "1e-08"}
        )
        is not None
    )
    assert sample("controller_runtime_webhook_requests_in_flight") == 0
    # Registered paths start at 0 for 200 and 500, as controller-runtime initialises them.
    assert (
        REGISTRY.get_sample_value(
            "controller_runtime_webhook_requests_total", {"webhook": CONVERSION_PATH, "code": "500"}
        )
        is not None
    )


async def test_a_missing_or_bad_pair_at_start_is_one_clear_error(
    tmp_path: Path, pairs: tuple[ServingCertificates, ServingCertificates]
) -> None:
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, cert_dir=tmp_path / "absent"))
    server.add([THINGS])
    with pytest.raises(
        CertificateError, match=r"cannot read the webhook certificate .*absent/tls.crt: No such file"
    ):
        await server.start()
    write_pair(tmp_path / "mismatched", pairs[0])
    (tmp_path / "mismatched" / "tls.key").write_bytes(pairs[1].key_pem)
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, cert_dir=tmp_path / "mismatched"))
    server.add([THINGS])
    with pytest.raises(CertificateError, match="are not a valid certificate and key pair") as caught:
        await server.start()
    assert "\n" not in str(caught.value)
    assert server.ready() == "the webhook server is not serving"


def test_a_path_declared_twice_is_refused() -> None:
    server = WebhookServer()
    server.add([THINGS])
    with pytest.raises(ValueError, match="two webhooks are declared at /mutate-example-memop-dev-v1-thing"):
        server.add([THINGS])
