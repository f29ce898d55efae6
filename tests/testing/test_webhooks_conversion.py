"""Conversion webhooks of custom resources, called by the in-memory API server as the
apiextensions-apiserver of v1.36 calls them (conversion/webhook_converter.go; the checks and
their messages come from that source, the status of a failed conversion was measured on v1.36.2).

A Gadget is stored in v1 (``spec.size``) and served in v2 too (``spec.replicas``); this module's
webhook converts between them.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from aiohttp import web

from memop.testing.tls import ServingCertificates
from memop.testing.wait import wait_for
from tests.testing.webhooks import Webhook

if TYPE_CHECKING:
    from tests.conftest import Http

GROUP = "convert.memop.test"


@pytest.fixture(scope="module")
def certificates() -> ServingCertificates:
    return ServingCertificates.generate("memop-test-conversion")


@pytest.fixture
async def webhook(certificates: ServingCertificates) -> AsyncIterator[Webhook]:
    hook = Webhook(certificates)
    hook.handlers["/convert"] = convert
    await hook.start()
    try:
        yield hook
    finally:
        await hook.stop()


def _to(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    out = {**obj, "apiVersion": api_version, "spec": dict(obj.get("spec") or {})}
    spec = out["spec"]
    if not api_version.endswith("/v1") and "size" in spec:
        spec["replicas"] = spec.pop("size")
    if api_version.endswith("/v1") and "replicas" in spec:
        spec["size"] = spec.pop("replicas")
    return out


def convert(review: dict[str, Any], **changes: Any) -> dict[str, Any]:
    request = review["request"]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {
            "uid": request["uid"],
            "result": {"status": "Success"},
            "convertedObjects": [_to(o, request["desiredAPIVersion"]) for o in request["objects"]],
            **changes,
        },
    }


def _crd(plural: str, webhook: Webhook, versions: tuple[str, ...] = ("v1", "v2")) -> dict[str, Any]:
    def version(name: str, field: str) -> dict[str, Any]:
        spec = {"type": "object", "properties": {field: {"type": "integer"}}}
        schema = {"type": "object", "properties": {"spec": spec}}
        return {"name": name, "served": True, "storage": name == "v1", "schema": {"openAPIV3Schema": schema}}

    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"plural": plural, "singular": plural[:-1], "kind": "Gadget", "listKind": "GadgetList"},
            "scope": "Namespaced",
            "versions": [version(name, "size" if name == "v1" else "replicas") for name in versions],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": webhook.client_config("/convert"),
                    "conversionReviewVersions": ["v1"],
                },
            },
        },
    }


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


async def _established(http: Http, plural: str, versions: tuple[str, ...] = ("v1", "v2")) -> None:
    """Wait until the CRD is Established and its versions are served (a real server takes a
    moment: its resources answer 404 until then)."""

    async def ready() -> bool:
        crd = (await http.get(f"{CRDS}/{plural}.{GROUP}")).body
        conditions = (crd.get("status") or {}).get("conditions") or []
        if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return False
        for version in versions:
            if (await http.get(f"/apis/{GROUP}/{version}/{plural}")).status != 200:
                return False
        return True

    await wait_for(ready, timeout=30, message=f"CRD {plural}.{GROUP} not served")


async def _delete_crd(http: Http, name: str) -> None:
    """Delete the CRD and wait until it is gone: the next test's Gadget CRD in the same group can
    only have its names accepted (and be served) once no other CRD there claims kind Gadget."""
    await http.delete(f"{CRDS}/{name}")

    async def gone() -> bool:
        return (await http.get(f"{CRDS}/{name}")).status == 404

    await wait_for(gone, timeout=60, message=f"CRD {name} still there")


@pytest.fixture
async def gadgets(http: Http, webhook: Webhook) -> AsyncIterator[str]:
    """A fresh Gadget CRD (its plural) converting through ``webhook``, served, deleted after the
    test."""
    plural = f"g{uuid.uuid4().hex[:8]}s"
    reply = await http.post(CRDS, _crd(plural, webhook))
    assert reply.status == 201, reply.body
    try:
        await _established(http, plural)
        yield plural
    finally:
        await _delete_crd(http, f"{plural}.{GROUP}")


def _path(version: str, namespace: str, plural: str, name: str = "") -> str:
    return f"/apis/{GROUP}/{version}/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")


async def test_objects_change_version_through_the_webhook(
    http: Http, namespace: str, gadgets: str, webhook: Webhook
) -> None:
    body = {"apiVersion": f"{GROUP}/v2", "kind": "Gadget", "metadata": {"name": "a"}, "spec": {"replicas": 3}}
    reply = await http.post(_path("v2", namespace, gadgets), body)
    assert reply.status == 201, reply.body
    assert (reply.body["apiVersion"], reply.body["spec"]) == (f"{GROUP}/v2", {"replicas": 3})
    stored = (await http.get(_path("v1", namespace, gadgets, "a"))).body
    assert (stored["apiVersion"], stored["spec"]) == (f"{GROUP}/v1", {"size": 3})
    assert stored["metadata"]["uid"] == reply.body["metadata"]["uid"]
    reviews = webhook.reviews("/convert")
    assert reviews
    assert {r["request"]["desiredAPIVersion"] for r in reviews} == {f"{GROUP}/v1", f"{GROUP}/v2"}
    got = (await http.get(_path("v2", namespace, gadgets, "a"))).body
    assert (got["apiVersion"], got["spec"]) == (f"{GROUP}/v2", {"replicas": 3})
    # An update in v2 of the object stored in v1.
    got["spec"]["replicas"] = 4
    reply = await http.put(_path("v2", namespace, gadgets, "a"), got)
    assert reply.status == 200, reply.body
    assert (await http.get(_path("v1", namespace, gadgets, "a"))).body["spec"] == {"size": 4}


def _gadget(version: str, name: str, **spec: int) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}


async def _create_v1_gadgets(http: Http, namespace: str, gadgets: str, prefix: str, count: int) -> None:
    """``count`` Gadgets created in v1, named ``prefix0``, ``prefix1``..., each of size its number."""
    for i in range(count):
        reply = await http.post(_path("v1", namespace, gadgets), _gadget("v1", f"{prefix}{i}", size=i))
        assert reply.status == 201, reply.body


async def _reviews(webhook: Webhook, count: int) -> list[dict[str, Any]]:
    """The ConversionReviews received, once there are ``count`` (the watch caches' come in the
    background)."""
    await wait_for(lambda: len(webhook.reviews("/convert")) == count, message=f"{count} reviews")
    return webhook.reviews("/convert")


def _desired(reviews: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Each review's desired version and the versions of the objects it sends."""
    return [
        (
            r["request"]["desiredAPIVersion"].rpartition("/")[2],
            [o["apiVersion"].rpartition("/")[2] for o in r["request"]["objects"]],
        )
        for r in reviews
    ]


async def test_a_create_in_the_storage_version_is_converted_into_every_other_in_the_background(
    http: Http, namespace: str, webhook: Webhook
) -> None:
    plural = f"g{uuid.uuid4().hex[:8]}s"
    crd = _crd(plural, webhook, versions=("v1", "v2", "v3"))
    reply = await http.post(CRDS, crd)
    assert reply.status == 201, reply.body
    release = asyncio.Event()

    async def held(review: dict[str, Any]) -> web.Response:
        await release.wait()
        return web.json_response(convert(review))

    webhook.handlers["/convert"] = held  # type: ignore[assignment]
    try:
        await _established(http, plural, ("v1", "v2", "v3"))
        # Answered while the reviews wait for the webhook: they are the watch caches' business.
        assert (await http.post(_path("v1", namespace, plural), _gadget("v1", "s", size=1))).status == 201
        # kube-apiserver v1.36.2 (measured): one ConversionReview to every other served version,
        # at once, in the background (each version's watch cache decodes the new object).
        assert sorted(_desired(await _reviews(webhook, 2))) == [("v2", ["v1"]), ("v3", ["v1"])]
        release.set()
        # Served from the watch caches: no review of its own.
        for version in ("v2", "v3"):
            listed = await http.get(_path(version, namespace, plural))
            assert [item["spec"] for item in listed.body["items"]] == [{"replicas": 1}]
        assert len(webhook.reviews("/convert")) == 2
    finally:
        release.set()
        await _delete_crd(http, f"{plural}.{GROUP}")


async def test_a_create_in_another_version_is_converted_to_storage_then_twice_back(
    http: Http, namespace: str, gadgets: str, webhook: Webhook
) -> None:
    assert (await http.post(_path("v2", namespace, gadgets), _gadget("v2", "b", replicas=2))).status == 201
    # kube-apiserver v1.36.2 (measured): to the storage version, then two back to the request's
    # (the answer decoded from storage, and v2's watch cache).
    reviews = await _reviews(webhook, 3)
    assert (await http.get(_path("v2", namespace, gadgets))).status == 200  # waits for the cache
    assert _desired(reviews) == [("v1", ["v2"]), ("v2", ["v1"]), ("v2", ["v1"])]
    assert len(webhook.reviews("/convert")) == 3


async def test_a_list_in_another_version_is_served_from_its_watch_cache(
    http: Http, namespace: str, gadgets: str, webhook: Webhook
) -> None:
    await _create_v1_gadgets(http, namespace, gadgets, "g", 3)
    # Each change is converted into v2's watch cache as it is committed: one review each.
    assert _desired(await _reviews(webhook, 3)) == [("v2", ["v1"])] * 3
    reply = await http.get(_path("v2", namespace, gadgets))
    assert reply.status == 200, reply.body
    assert [item["spec"] for item in reply.body["items"]] == [
        {"replicas": 0},
        {"replicas": 1},
        {"replicas": 2},
    ]
    assert [item["apiVersion"] for item in reply.body["items"]] == [f"{GROUP}/v2"] * 3
    # kube-apiserver v1.36.2 (measured): the list itself sends no ConversionReview.
    assert len(webhook.reviews("/convert")) == 3


async def test_a_table_in_another_version_prints_the_objects_in_that_version(
    http: Http, namespace: str, gadgets: str, webhook: Webhook
) -> None:
    # What `kubectl get` asks for. The CRD's columns are the served version's, read from the
    # objects in that version: nothing is converted back to storage for a row (that loop never
    # settled: "admission did not settle", 500, for every `kubectl get memcached` of the demo).
    await _create_v1_gadgets(http, namespace, gadgets, "t", 2)
    await _reviews(webhook, 2)  # v2's watch cache
    for path in (_path("v2", namespace, gadgets), _path("v2", namespace, gadgets, "t1")):
        reply = await http.get(path, accept="application/json;as=Table;v=v1;g=meta.k8s.io")
        assert reply.status == 200, reply.body
        assert reply.body["kind"] == "Table"
        names = [row["cells"][0] for row in reply.body["rows"]]
        assert names == (["t0", "t1"] if path.endswith(gadgets) else ["t1"])


async def test_a_get_in_another_version_asks_the_webhook_each_time(
    http: Http, namespace: str, gadgets: str, webhook: Webhook
) -> None:
    assert (await http.post(_path("v1", namespace, gadgets), _gadget("v1", "r", size=5))).status == 201
    await _reviews(webhook, 1)  # the watch cache's
    for _ in range(2):
        got = await http.get(_path("v2", namespace, gadgets, "r"))
        assert (got.status, got.body["spec"]) == (200, {"replicas": 5})
    # From the source (CacheDelegator.Get): without a resourceVersion a get reads storage, past
    # the watch cache, and decoding it into v2 asks the webhook: one review per get.
    assert len(webhook.reviews("/convert")) == 3
    # With one, it is served from v2's watch cache: no review.
    got = await http.get(_path("v2", namespace, gadgets, "r"), query={"resourceVersion": "0"})
    assert (got.status, got.body["spec"]) == (200, {"replicas": 5})
    assert len(webhook.reviews("/convert")) == 3


async def test_a_watch_in_another_version_gets_converted_events(
    http: Http, namespace: str, gadgets: str, webhook: Webhook
) -> None:
    async with http.watch(_path("v2", namespace, gadgets)) as events:
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": "w"}, "spec": {"size": 7}}
        assert (await http.post(_path("v1", namespace, gadgets), body)).status == 201
        event = await events.next_not_bookmark()
    assert event is not None
    assert event["type"] == "ADDED"
    assert (event["object"]["apiVersion"], event["object"]["spec"]) == (f"{GROUP}/v2", {"replicas": 7})


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"uid": "x"}, 'failed: expected response.uid="{uid}", got "x"'),
        ({"result": {"status": "Failure", "message": "cannot"}}, "failed: cannot"),
        ({"convertedObjects": []}, "returned 0 objects, expected 1"),
        ("rename", "returned invalid object: must have the same name: c != other"),
    ],
)
async def test_bad_conversion_responses_fail_the_request(  # noqa: PLR0917 - fixtures and parameters
    http: Http, namespace: str, gadgets: str, webhook: Webhook, changes: Any, expected: str
) -> None:
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": "c"}, "spec": {"size": 1}}
    assert (await http.post(_path("v1", namespace, gadgets), body)).status == 201
    await _reviews(webhook, 1)  # the watch cache's, answered before the webhook turns bad

    def bad(review: dict[str, Any]) -> dict[str, Any]:
        if changes == "rename":
            answer = convert(review)
            answer["response"]["convertedObjects"][0]["metadata"]["name"] = "other"
            return answer
        extra = dict(changes)
        return convert(review, **extra)

    webhook.handlers["/convert"] = bad
    reply = await http.get(_path("v2", namespace, gadgets, "c"))
    # Measured on v1.36.2 (uid case): a bare 500, no reason, the converter's error as message.
    assert reply.status == 500, reply.body
    assert "reason" not in reply.body
    uid = webhook.reviews("/convert")[-1]["request"]["uid"]
    assert (
        reply.body["message"] == f"conversion webhook for {GROUP}/v1, Kind=Gadget {expected.format(uid=uid)}"
    )


@pytest.mark.parametrize(
    ("bundle", "problem"),
    [
        # Measured on v1.36.2 (a patch of an Established CRD's conversion with caBundle "PEM").
        (b"PEM", "unable to parse bytes as PEM block"),
        (b"-----BEGIN KEY-----\nAAAA\n-----END KEY-----\n", "no valid certificate authority data seen"),
    ],
)
async def test_a_conversion_ca_bundle_that_is_no_certificate_is_refused(
    http: Http, webhook: Webhook, bundle: bytes, problem: str
) -> None:
    encoded = base64.b64encode(bundle).decode()
    # On create, and until a CRD is Established, v1.36 takes any bundle (allowInvalidCABundle).
    early = _crd(f"g{uuid.uuid4().hex[:8]}s", webhook)
    early["spec"]["names"].update(kind="Early", listKind="EarlyList")  # beside the next one's Gadget
    early["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = encoded
    taken = await http.post(CRDS, early)
    assert taken.status == 201, taken.body
    plural = f"g{uuid.uuid4().hex[:8]}s"
    created = await http.post(CRDS, _crd(plural, webhook))
    assert created.status == 201, created.body
    try:
        await _established(http, plural)
        # An Established CRD whose bundle was valid (or absent) may not take an invalid one.
        reply = await http.patch(
            f"{CRDS}/{plural}.{GROUP}",
            {"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": encoded}}}}},
        )
        assert reply.status == 422, reply.body
        field = "spec.conversion.webhookClientConfig.caBundle"  # the internal type's name, as v1.36 says it
        assert reply.body["details"]["causes"] == [
            {
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{encoded}": unable to load root certificates: {problem}',
                "field": field,
            }
        ]
    finally:
        await _delete_crd(http, f"{plural}.{GROUP}")
        await _delete_crd(http, early["metadata"]["name"])


async def test_a_real_ca_bundle_is_taken(http: Http, gadgets: str) -> None:
    # The fixture's CRD carries the test CA: created (201) and served.
    reply = await http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{gadgets}.{GROUP}")
    assert reply.body["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]
