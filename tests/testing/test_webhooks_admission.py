"""Admission webhooks called by the in-memory API server as kube-apiserver v1.36 calls them.

Every status, message and review field pinned here was measured on a real v1.36.2 control plane
(a webhook like this module's on 127.0.0.1, configurations applied, ConfigMaps created); where a
test pins what comes from the source only, it says so. Each test scopes its configurations to
its own namespace (namespaceSelector), so they run on a real cluster too
(USE_EXISTING_CLUSTER=true) when it can reach 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from aiohttp import web

from memop.testing.tls import ServingCertificates
from memop.testing.wait import wait_for
from tests.testing.webhooks import MARKER_LABEL, Webhook, allowed, json_patch

if TYPE_CHECKING:
    from tests.conftest import Http

ARV1 = "/apis/admissionregistration.k8s.io/v1"


@pytest.fixture(scope="module")
def certificates() -> ServingCertificates:
    return ServingCertificates.generate("memop-test-webhook")


@pytest.fixture
async def webhook(certificates: ServingCertificates) -> AsyncIterator[Webhook]:
    hook = Webhook(certificates)
    await hook.start()
    try:
        yield hook
    finally:
        await hook.stop()


def _hook(name: str, namespace: str, client_config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": client_config,
        "rules": [
            {"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
        ],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **extra,
    }


def _marker_hook(name: str, hooks: list[dict[str, Any]]) -> dict[str, Any]:
    """A webhook of configuration ``name`` that judges only ConfigMaps labelled as its markers,
    at the first hook's server (the test webhook refuses markers without recording them)."""
    client_config = dict(hooks[0]["clientConfig"])
    if "url" in client_config:
        client_config["url"] = client_config["url"].rsplit("/", 1)[0] + "/memop-marker"
    return {
        "name": "marker.memop.test",
        "clientConfig": client_config,
        "rules": [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
        ],
        "objectSelector": {"matchLabels": {MARKER_LABEL: name}},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail",
        "timeoutSeconds": 5,
    }


async def _configure(http: Http, kind: str, hooks: list[dict[str, Any]]) -> str:
    """Create a configuration of ``hooks`` and return its path once it is in effect: a real
    kube-apiserver calls a new configuration's webhooks only once its informer has it, so a
    marker webhook of the configuration is probed with dry-run creates until it answers."""
    plural = "mutatingwebhookconfigurations" if kind == "Mutating" else "validatingwebhookconfigurations"
    name = f"memop-test-{uuid.uuid4().hex[:8]}"
    body = {"metadata": {"name": name}, "webhooks": [*hooks, _marker_hook(name, hooks)] if hooks else []}
    reply = await http.post(f"{ARV1}/{plural}", body)
    assert reply.status == 201, reply.body
    marker = {"metadata": {"generateName": "memop-marker-", "labels": {MARKER_LABEL: name}}}

    async def in_effect() -> bool:  # refused (by the marker or failing to call it): in effect
        probe = await http.post("/api/v1/namespaces/default/configmaps", marker, query={"dryRun": "All"})
        return probe.status != 201

    if hooks:
        await wait_for(in_effect, timeout=30, message=f"webhook configuration {name} never took effect")
    return f"{ARV1}/{plural}/{name}"


async def _configure_one(http: Http, kind: str, name: str, namespace: str, webhook: Webhook) -> str:
    """One webhook, ``<name>.memop.test`` called at ``/<name>``, for ``namespace``'s ConfigMaps."""
    return await _configure(
        http, kind, [_hook(f"{name}.memop.test", namespace, webhook.client_config(f"/{name}"))]
    )


def _case_hooks(namespace: str, webhook: Webhook, cases: tuple[str, ...]) -> list[dict[str, Any]]:
    """A webhook per case, ``<case>.memop.test`` at ``/<case>``, judging the ConfigMaps labelled
    ``case: <case>`` only."""
    return [
        _hook(
            f"{case}.memop.test",
            namespace,
            webhook.client_config(f"/{case}"),
            objectSelector={"matchLabels": {"case": case}},
        )
        for case in cases
    ]


@pytest.fixture
async def configured(http: Http) -> AsyncIterator[list[str]]:
    paths: list[str] = []
    yield paths
    for path in paths:
        await http.delete(path)


def _cm(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"a": "b"}}


async def test_configurations_are_validated_as_v1_36_does(http: Http) -> None:
    def config(**hook: Any) -> dict[str, Any]:
        base = {"name": "a.b.c", "clientConfig": {"url": "https://127.0.0.1/x"}, "sideEffects": "None"}
        return {
            "metadata": {"name": "memop-invalid"},
            "webhooks": [{**base, "admissionReviewVersions": ["v1"], **hook}],
        }

    w0, pods = "webhooks[0]", ["pods"]
    cases = [
        (config(name="a.b"), f'{w0}.name: Invalid value: "a.b": should be a domain with at least three '
         "segments separated by dots"),
        (config(sideEffects="Some"),
         f'{w0}.sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"'),
        (config(admissionReviewVersions=[]),
         f"{w0}.admissionReviewVersions: Required value: must specify one of v1, v1beta1"),
        (config(admissionReviewVersions=["v2"]),
         f'{w0}.admissionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1'),
        (config(clientConfig={"url": "https://x/y", "service": {"name": "s", "namespace": "n"}}),
         f"{w0}.clientConfig: Required value: exactly one of url or service is required"),
        (config(clientConfig={"url": "http://127.0.0.1/x"}),
         f"{w0}.clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; "
         "desired format: https://host[/path]"),
        (config(timeoutSeconds=31),
         f"{w0}.timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"),
        (config(failurePolicy="Never"),
         f'{w0}.failurePolicy: Unsupported value: "Never": supported values: "Fail", "Ignore"'),
        (config(rules=[{"operations": ["GET"], "apiGroups": [""], "apiVersions": ["v1"], "resources": pods}]),
         f'{w0}.rules[0].operations[0]: Unsupported value: "GET": supported values: "*", "CONNECT", '
         '"CREATE", "DELETE", "UPDATE"'),
    ]  # fmt: skip
    for body, detail in cases:
        reply = await http.post(f"{ARV1}/mutatingwebhookconfigurations", body, query={"dryRun": "All"})
        assert reply.status == 422, reply.body
        assert reply.body["message"] == (
            f'MutatingWebhookConfiguration.admissionregistration.k8s.io "memop-invalid" is invalid: {detail}'
        )
    no_side_effects = config()
    del no_side_effects["webhooks"][0]["sideEffects"]
    twice = config()
    twice["webhooks"].append(twice["webhooks"][0])
    for body, detail in (
        (no_side_effects, "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"),
        (twice, 'webhooks[1].name: Duplicate value: "a.b.c"'),
    ):
        reply = await http.post(f"{ARV1}/validatingwebhookconfigurations", body, query={"dryRun": "All"})
        assert reply.status == 422, reply.body
        assert reply.body["message"].endswith(f'"memop-invalid" is invalid: {detail}')


async def test_configurations_get_v1_36s_defaults(http: Http) -> None:
    body = {
        "metadata": {"name": "memop-defaults"},
        "webhooks": [
            {
                "name": "a.b.c",
                "clientConfig": {"url": "https://127.0.0.1/x"},
                "rules": [
                    {"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
                ],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }
    reply = await http.post(f"{ARV1}/mutatingwebhookconfigurations", body, query={"dryRun": "All"})
    assert reply.status == 201, reply.body
    hook = reply.body["webhooks"][0]
    assert reply.body["metadata"]["generation"] == 1
    assert {k: v for k, v in hook.items() if k not in ("clientConfig", "name")} == {
        "rules": [
            {
                "operations": ["*"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "scope": "*",
            }
        ],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {},
        "objectSelector": {},
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "admissionReviewVersions": ["v1"],
        "reinvocationPolicy": "Never",
    }


async def test_a_mutating_patch_is_applied_and_the_review_is_v1_36s(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    webhook.handlers["/patch"] = lambda review: (
        json_patch(review, [{"op": "add", "path": "/metadata/labels/patched", "value": "yes"}])
        if review["request"]["operation"] == "CREATE"
        else allowed(review)
    )
    webhook.handlers["/allow"] = allowed
    configured.append(await _configure_one(http, "Mutating", "patch", namespace, webhook))
    configured.append(await _configure_one(http, "Validating", "allow", namespace, webhook))
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    reply = await http.post(path, _cm("m", case="patch"), query={"fieldManager": "fm"})
    assert reply.status == 201, reply.body
    assert reply.body["metadata"]["labels"] == {"case": "patch", "patched": "yes"}
    assert (await http.get(f"{path}/m")).body["metadata"]["labels"]["patched"] == "yes"
    (mutating,) = webhook.reviews("/patch")
    assert mutating["apiVersion"] == "admission.k8s.io/v1"
    request = mutating["request"]
    # Measured: the mutating webhook sees the object before uid and creationTimestamp are set.
    assert "uid" not in request["object"]["metadata"]
    assert "creationTimestamp" not in request["object"]["metadata"]
    assert {k: request[k] for k in ("kind", "resource", "requestKind", "requestResource")} == {
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
    }
    assert (request["name"], request["namespace"], request["operation"]) == ("m", namespace, "CREATE")
    assert request["oldObject"] is None
    # kube-apiserver v1.36.2 (measured): the object carries the request's managedFields entry,
    # [(manager, "Update")]: create.go records the write before admission.
    owned = {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:case": {}}}}
    (entry,) = request["object"]["metadata"]["managedFields"]
    assert entry["time"]
    assert {k: v for k, v in entry.items() if k != "time"} == {
        "manager": "fm",
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": owned,
    }
    # From the source: nothing records the webhook's change afterwards, so its label is nobody's.
    assert [e["fieldsV1"] for e in reply.body["metadata"]["managedFields"]] == [owned]
    assert request["dryRun"] is False
    assert request["options"] == {
        "kind": "CreateOptions",
        "apiVersion": "meta.k8s.io/v1",
        "fieldManager": "fm",
    }
    assert request["userInfo"]["username"]
    (validating,) = webhook.reviews("/allow")
    # Measured: the validating webhook sees the object as it will be stored, mutated.
    obj = validating["request"]["object"]
    assert obj["metadata"]["uid"] == reply.body["metadata"]["uid"]
    assert obj["metadata"]["labels"]["patched"] == "yes"

    webhook.received.clear()
    reply = await http.patch(f"{path}/m", {"data": {"a": "c"}}, query={"dryRun": "All"})
    assert reply.status == 200, reply.body
    (review,) = webhook.reviews("/allow")
    request = review["request"]
    assert request["operation"] == "UPDATE"
    assert request["dryRun"] is True
    assert request["options"] == {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]}
    assert request["oldObject"]["data"] == {"a": "b"}
    assert request["object"]["data"] == {"a": "c"}

    webhook.received.clear()
    reply = await http.delete(f"{path}/m", {"propagationPolicy": "Background"})
    assert reply.status == 200, reply.body
    (review,) = webhook.reviews("/allow")
    request = review["request"]
    assert (request["operation"], request["object"]) == ("DELETE", None)
    assert request["oldObject"]["metadata"]["name"] == "m"
    assert request["options"] == {
        "kind": "DeleteOptions",
        "apiVersion": "meta.k8s.io/v1",
        "propagationPolicy": "Background",
    }


async def test_denials_keep_the_webhooks_status_with_the_real_servers_message(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    webhook.handlers["/deny"] = lambda review: allowed(
        review, allowed=False, status={"code": 403, "reason": "Forbidden", "message": "no way"}
    )
    webhook.handlers["/bare"] = lambda review: allowed(review, allowed=False)
    webhook.handlers["/reason"] = lambda review: allowed(
        review, allowed=False, status={"code": 200, "reason": "NotAcceptable"}
    )
    hooks = _case_hooks(namespace, webhook, ("deny", "bare", "reason"))
    configured.append(await _configure(http, "Validating", hooks))
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    reply = await http.post(path, _cm("d", case="deny"))
    assert (reply.status, reply.body["reason"]) == (403, "Forbidden")
    assert reply.body["message"] == 'admission webhook "deny.memop.test" denied the request: no way'
    reply = await http.post(path, _cm("b", case="bare"))
    assert reply.status == 400
    assert "reason" not in reply.body
    assert (
        reply.body["message"] == 'admission webhook "bare.memop.test" denied the request without explanation'
    )
    reply = await http.post(path, _cm("r", case="reason"))
    assert (reply.status, reply.body["reason"]) == (400, "NotAcceptable")
    assert reply.body["message"] == 'admission webhook "reason.memop.test" denied the request: NotAcceptable'
    assert (await http.get(f"{path}/d")).status == 404


async def test_warnings_reach_the_client_as_warning_headers(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    webhook.handlers["/warn"] = lambda review: allowed(review, warnings=["be careful", 'quote " here'])
    configured.append(await _configure_one(http, "Mutating", "warn", namespace, webhook))
    response = await http._send("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=_cm("w"))
    try:
        assert response.status == 201
        assert response.headers.getall("Warning") == ['299 - "be careful"', '299 - "quote \\" here"']
    finally:
        response.release()


async def _warnings_of(
    http: Http, path: str, body: dict[str, Any] | None, method: str = "POST"
) -> tuple[int, list[str]]:
    """The status and every Warning header of the answer to ``method path`` with ``body``."""
    response = await http._send(method, path, body=body)
    try:
        await response.read()
        return response.status, response.headers.getall("Warning", [])
    finally:
        response.release()


async def test_a_warning_with_a_newline_is_dropped_and_the_request_answered(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    # kube-apiserver v1.36.2 (measured): the warning is dropped (NewWarningHeader refuses control
    # characters), the others are sent and the create answers 201; the in-memory server used to
    # store the object and close the connection without an answer.
    webhook.handlers["/warn"] = lambda review: allowed(
        review, warnings=["first\nsecond", "tab\there", "kept"]
    )
    configured.append(await _configure_one(http, "Mutating", "warn", namespace, webhook))
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    assert await _warnings_of(http, path, _cm("newline")) == (201, ['299 - "kept"'])
    assert (await http.get(f"{path}/newline")).status == 200
    # A delete's answer carries its webhooks' warnings too (one recorder per request).
    assert await _warnings_of(http, f"{path}/newline", None, "DELETE") == (200, ['299 - "kept"'])


async def test_warnings_are_escaped_sent_once_and_cut_as_kube_apiserver_does(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    long = "x" * 5000
    webhook.handlers["/one"] = lambda review: allowed(review, warnings=['says "quoted" \\ back', "same"])
    webhook.handlers["/two"] = lambda review: allowed(review, warnings=["same"])
    webhook.handlers["/long"] = lambda review: allowed(review, warnings=[long])
    hooks = [
        _hook(f"{name}.memop.test", namespace, webhook.client_config(f"/{name}"), objectSelector=selector)
        for name, selector in (
            ("one", {"matchLabels": {"case": "short"}}),
            ("two", {"matchLabels": {"case": "short"}}),
            ("long", {"matchLabels": {"case": "long"}}),
        )
    ]
    configured.append(await _configure(http, "Validating", hooks))
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    status, warnings = await _warnings_of(http, path, _cm("short", case="short"))
    assert status == 201
    # kube-apiserver v1.36.2 (measured): `"` and `\` escaped; the same text from two webhooks
    # is one header.
    assert sorted(warnings) == ['299 - "same"', '299 - "says \\"quoted\\" \\\\ back"']
    # kube-apiserver v1.36.2 (measured): a 5,000-character warning is cut to 256 characters
    # (warning.go: past 4,096 runes in all, each text is cut to its first 256 runes, no ellipsis).
    assert await _warnings_of(http, path, _cm("long", case="long")) == (201, [f'299 - "{"x" * 256}"'])


async def test_warnings_are_sent_with_a_denial(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    webhook.handlers["/warn"] = lambda review: allowed(review, warnings=["from the mutating one"])
    webhook.handlers["/deny"] = lambda review: allowed(
        review, allowed=False, warnings=["from the denying one"], status={"message": "no"}
    )
    configured.append(await _configure_one(http, "Mutating", "warn", namespace, webhook))
    configured.append(await _configure_one(http, "Validating", "deny", namespace, webhook))
    # kube-apiserver v1.36.2 (measured): the 400 carries the warnings as Warning headers.
    status, warnings = await _warnings_of(http, f"/api/v1/namespaces/{namespace}/configmaps", _cm("d"))
    assert (status, warnings) == (400, ['299 - "from the mutating one"', '299 - "from the denying one"'])


async def test_a_namespace_is_its_own_request_namespace(
    http: Http, webhook: Webhook, configured: list[str]
) -> None:
    name = f"memop-ns-{uuid.uuid4().hex[:8]}"
    webhook.handlers["/allow"] = allowed
    hook = _hook("ns.memop.test", name, webhook.client_config("/allow"))
    hook["rules"][0]["resources"] = ["namespaces"]
    configured.append(await _configure(http, "Validating", [hook]))
    reply = await http.post("/api/v1/namespaces", {"metadata": {"name": name}})
    assert reply.status == 201, reply.body
    labelled = {"metadata": {"labels": {"a": "b"}}}
    assert (await http.patch(f"/api/v1/namespaces/{name}", labelled)).status == 200
    assert (await http.delete(f"/api/v1/namespaces/{name}")).status == 200
    reviews = [review["request"] for review in webhook.reviews("/allow")]
    # kube-apiserver v1.36.2 (measured for the create): request.namespace is the Namespace's own
    # name (create.go sets it; for an update or delete, RequestInfo reads /namespaces/NAME so).
    assert [(r["operation"], r["name"], r["namespace"]) for r in reviews] == [
        ("CREATE", name, name),
        ("UPDATE", name, name),
        ("DELETE", name, name),
    ]


async def test_a_deletecollections_reviews_name_no_object(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    webhook.handlers["/allow"] = lambda review: allowed(review, warnings=["deleting"])
    hook = _hook(
        "dc.memop.test",
        namespace,
        webhook.client_config("/allow"),
        objectSelector={"matchLabels": {"case": "dc"}},
    )
    hook["rules"][0]["operations"] = ["DELETE"]
    configured.append(await _configure(http, "Validating", [hook]))
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for name in ("dc1", "dc2"):
        assert (await http.post(path, _cm(name, case="dc"))).status == 201
    response = await http._send("DELETE", path, query={"labelSelector": "case=dc"})
    try:
        assert response.status == 200, await response.text()
        # One warning recorder for the request: the same text of two deletes is one header.
        assert response.headers.getall("Warning", []) == ['299 - "deleting"']
    finally:
        response.release()
    reviews = [review["request"] for review in webhook.reviews("/allow")]
    # kube-apiserver v1.36.2 (measured): each object's DELETE review has no request.name (the
    # request's attributes, delete.go's DeleteCollection), the request's namespace, the object.
    assert sorted((r["oldObject"]["metadata"]["name"], r["namespace"], "name" in r) for r in reviews) == [
        ("dc1", namespace, False),
        ("dc2", namespace, False),
    ]


async def test_a_denied_delete_ends_a_deletecollection(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    webhook.handlers["/deny"] = lambda review: allowed(
        review, allowed=review["request"]["oldObject"]["metadata"]["name"] != "dc2", status={"message": "no"}
    )
    hook = _hook("deny.memop.test", namespace, webhook.client_config("/deny"))
    hook["rules"][0]["operations"] = ["DELETE"]
    configured.append(await _configure(http, "Validating", [hook]))
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for name in ("dc1", "dc2", "dc3"):
        assert (await http.post(path, _cm(name, case="dc"))).status == 201
    reply = await http.delete(path, query={"labelSelector": "case=dc"})
    # From the source (registry Store.DeleteCollection with kube-apiserver's one worker): the
    # objects are deleted in list order until one fails; that failure is the answer, and the
    # objects after it stay.
    assert (reply.status, reply.body["message"]) == (
        400,
        'admission webhook "deny.memop.test" denied the request: no',
    )
    remaining = (await http.get(path, query={"labelSelector": "case=dc"})).body["items"]
    assert [item["metadata"]["name"] for item in remaining] == ["dc2", "dc3"]


async def test_failed_calls_fail_the_request_or_are_ignored_by_failure_policy(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    never = asyncio.Event()

    async def slow(review: dict[str, Any]) -> Any:
        await never.wait()  # answers after the webhook's deadline, never

    webhook.handlers["/slow"] = slow  # type: ignore[assignment]
    webhook.handlers["/uid"] = lambda review: {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "x", "allowed": True},
    }
    webhook.handlers["/patching"] = lambda review: json_patch(
        review, [{"op": "add", "path": "/data/x", "value": "y"}]
    )

    def case(name: str, config: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return _hook(
            f"{name}.memop.test", namespace, config, objectSelector={"matchLabels": {"case": name}}, **extra
        )

    refused = {"url": "https://127.0.0.1:1/x", "caBundle": webhook.ca_bundle}
    configured.append(
        await _configure(
            http,
            "Mutating",
            [
                case("refused", refused),
                case("ignored", refused, failurePolicy="Ignore"),
                case("slow", webhook.client_config("/slow"), timeoutSeconds=1),
                case("status", webhook.client_config("/missing")),
                case("uid", webhook.client_config("/uid")),
                case("untrusted", {"url": webhook.url("/uid")}),
                case("service", {"service": {"namespace": namespace, "name": "nosuch", "path": "/x"}}),
            ],
        )
    )
    configured.append(
        await _configure(http, "Validating", [case("vpatch", webhook.client_config("/patching"))])
    )
    path = f"/api/v1/namespaces/{namespace}/configmaps"

    async def failure(name: str) -> str:
        reply = await http.post(path, _cm(name, case=name))
        assert (reply.status, reply.body["reason"]) == (500, "InternalError"), reply.body
        return str(reply.body["message"])

    prefix = "Internal error occurred: failed calling webhook"
    assert await failure("refused") == (
        f'{prefix} "refused.memop.test": failed to call webhook: Post "https://127.0.0.1:1/x?timeout=10s": '
        "dial tcp 127.0.0.1:1: connect: connection refused"
    )
    assert (await http.post(path, _cm("ignored", case="ignored"))).status == 201
    assert await failure("slow") == (
        f'{prefix} "slow.memop.test": failed to call webhook: Post "{webhook.url("/slow")}?timeout=1s": '
        "context deadline exceeded"
    )
    # A 404 answer (source: client-go's generic error for the status code).
    assert await failure("status") == (
        f'{prefix} "status.memop.test": failed to call webhook: '
        "the server could not find the requested resource"
    )
    assert (await failure("uid")).startswith(
        f'{prefix} "uid.memop.test": received invalid webhook response: expected response.uid="'
    )
    assert await failure("untrusted") == (
        f'{prefix} "untrusted.memop.test": failed to call webhook: Post "{webhook.url("/uid")}?timeout=10s": '
        "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    )
    assert await failure("service") == (
        f'{prefix} "service.memop.test": failed to call webhook: Post "https://nosuch.{namespace}.svc:443/x'
        f'?timeout=10s": service "nosuch" not found'
    )
    assert await failure("vpatch") == (
        f'{prefix} "vpatch.memop.test": received invalid webhook response: validating webhook may not return '
        "response.patch"
    )


async def test_a_failed_answer_and_a_bad_patch_are_worded_as_kube_apiserver_words_them(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    async def answer(status: int, body: str, content_type: str) -> web.Response:
        return web.Response(status=status, body=body.encode(), headers={"Content-Type": content_type})

    failed_status = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "m"})
    webhook.handlers["/json500"] = lambda review: answer(500, '{"error": "boom"}', "application/json")
    webhook.handlers["/text500"] = lambda review: answer(500, 'it "broke"\n', "text/plain")
    webhook.handlers["/status500"] = lambda review: answer(500, failed_status, "application/json")
    webhook.handlers["/text403"] = lambda review: answer(403, "go away", "text/plain")
    webhook.handlers["/base64"] = lambda review: allowed(review, patchType="JSONPatch", patch="not base64")
    webhook.handlers["/notlist"] = lambda review: allowed(
        review, patchType="JSONPatch", patch=base64.b64encode(b'{"op": "add"}').decode()
    )
    cases = ("json500", "text500", "status500", "text403", "base64", "notlist")
    hooks = _case_hooks(namespace, webhook, cases)
    configured.append(await _configure(http, "Mutating", hooks))
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    messages = {}
    for case in cases:
        reply = await http.post(path, _cm(case, case=case))
        assert (reply.status, reply.body["reason"]) == (500, "InternalError"), reply.body
        prefix = f'Internal error occurred: failed calling webhook "{case}.memop.test": '
        assert reply.body["message"].startswith(prefix)
        messages[case] = reply.body["message"].removeprefix(prefix)
    # kube-apiserver v1.36.2 (measured): a 500 with a JSON body that is no Status is "unknown"
    # (client-go quotes the body only of a textual answer, %q).
    assert messages["json500"] == (
        'failed to call webhook: an error on the server ("unknown") has prevented the request from succeeding'
    )
    assert messages["text500"] == (
        "failed to call webhook: an error on the server "
        '("it \\"broke\\"") has prevented the request from succeeding'
    )
    # From client-go's source: a failed Status is its message; a 403 keeps the server's text.
    assert messages["status500"] == "failed to call webhook: m"
    assert messages["text403"] == "failed to call webhook: go away"
    # kube-apiserver v1.36.2 (measured): the patch is a []byte of the review, base64-decoded as
    # the answer is (Go's error, at Go's byte offset), so the call fails.
    assert messages["base64"] == "failed to call webhook: illegal base64 data at input byte 3"
    # From the source: jsonpatch.DecodePatch's json.Unmarshal error.
    assert messages["notlist"] == (
        "received undecodable patch in webhook response: "
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    )


async def test_managed_fields_a_webhook_breaks_are_put_back_with_a_warning(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    webhook.handlers["/break"] = lambda review: json_patch(
        review,
        [
            {"op": "replace", "path": "/metadata/managedFields/0/operation", "value": "Bogus"},
            {"op": "add", "path": "/metadata/labels", "value": {"added": "yes"}},
        ],
    )
    configured.append(await _configure_one(http, "Mutating", "break", namespace, webhook))
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    response = await http._send("POST", path, body=_cm("broken"), query={"fieldManager": "fm"})
    try:
        body = await response.json()
        assert response.status == 201, body
        warnings = response.headers.getall("Warning", [])
    finally:
        response.release()
    # From the source (managedFieldsValidatingAdmissionController): the entries before admission
    # come back, and the request is warned with DecodeManagedFields' error.
    assert [(e["manager"], e["operation"]) for e in body["metadata"]["managedFields"]] == [("fm", "Update")]
    assert body["metadata"]["labels"] == {"added": "yes"}
    assert warnings == [
        '299 - ".metadata.managedFields was in an invalid state after admission; this could be caused by '
        "an outdated mutating admission controller; please fix your requests: operation must be `Apply` or "
        '`Update`"'
    ]


async def test_mutating_webhooks_run_in_order_and_if_needed_ones_again(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    def add(label: str) -> Any:
        return lambda review: json_patch(
            review, [{"op": "add", "path": f"/metadata/labels/{label}", "value": "x"}]
        )

    webhook.handlers["/first"] = add("first")
    webhook.handlers["/second"] = add("second")
    configured.append(
        await _configure(
            http,
            "Mutating",
            [
                _hook(
                    "first.memop.test",
                    namespace,
                    webhook.client_config("/first"),
                    reinvocationPolicy="IfNeeded",
                ),
                _hook("second.memop.test", namespace, webhook.client_config("/second")),
            ],
        )
    )
    # (A JSON patch adds a label only where there are labels: an empty map is no map once decoded.)
    reply = await http.post(f"/api/v1/namespaces/{namespace}/configmaps", _cm("o", app="o"))
    assert reply.status == 201, reply.body
    assert [path for path, _ in webhook.received] == ["/first", "/second", "/first"]
    # The second call of the first webhook sees what the second one added.
    assert webhook.received[2][1]["request"]["object"]["metadata"]["labels"] == {
        "app": "o",
        "first": "x",
        "second": "x",
    }
    # Without labels (an empty map is none), kube-apiserver v1.36.2 answers the failed patch with
    # a 500 naming the path.
    webhook.received.clear()
    reply = await http.post(f"/api/v1/namespaces/{namespace}/configmaps", _cm("p"))
    assert reply.status == 500, reply.body
    assert (
        'add operation does not apply: doc is missing path: "/metadata/labels/first"' in reply.body["message"]
    )


async def test_selectors_decide_which_requests_a_webhook_sees(
    http: Http, namespace: str, webhook: Webhook, configured: list[str]
) -> None:
    webhook.handlers["/allow"] = allowed
    configured.append(
        await _configure(
            http,
            "Validating",
            [
                _hook(
                    "labelled.memop.test",
                    namespace,
                    webhook.client_config("/allow"),
                    objectSelector={"matchLabels": {"watch": "me"}},
                )
            ],
        )
    )
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    assert (await http.post(path, _cm("plain"))).status == 201
    assert webhook.received == []
    assert (await http.post(path, _cm("labelled", watch="me"))).status == 201
    assert len(webhook.received) == 1
    # An update that removes the label still matches: the old object has it.
    reply = await http.patch(f"{path}/labelled", {"metadata": {"labels": None}})
    assert reply.status == 200, reply.body
    assert len(webhook.received) == 2
    # Another namespace: not matched by the namespaceSelector.
    assert (
        await http.post(
            "/api/v1/namespaces/default/configmaps", _cm(f"memop-{uuid.uuid4().hex[:6]}", watch="me")
        )
    ).status == 201
    assert len(webhook.received) == 2
