"""PATCH over HTTP: merge, JSON and strategic merge patches, their failures and concurrency."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.conftest import Http

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


def deployment(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "main", "image": "memcached:1.6", "env": [{"name": "A", "value": "1"}]},
                        {"name": "side", "image": "busybox:1.36"},
                    ]
                },
            },
        },
    }


async def test_merge_patch_sets_and_removes(http: Http, namespace: str) -> None:
    await http.post(
        cm_path(namespace), {"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v", "j": "w"}}
    )
    reply = await http.patch(
        cm_path(namespace, "a"), {"metadata": {"labels": {"y": "2"}}, "data": {"j": None}}
    )
    assert reply.status == 200
    assert reply.body["metadata"]["labels"] == {"x": "1", "y": "2"}
    assert reply.body["data"] == {"k": "v"}


async def test_json_patch_and_its_failures(http: Http, namespace: str) -> None:
    await http.post(cm_path(namespace), {"metadata": {"name": "a"}, "data": {"k": "v"}})
    ok = await http.patch(
        cm_path(namespace, "a"),
        [{"op": "test", "path": "/data/k", "value": "v"}, {"op": "add", "path": "/data/n", "value": "1"}],
        content_type=JSON_PATCH,
    )
    assert ok.status == 200
    assert ok.body["data"] == {"k": "v", "n": "1"}
    failed_test = await http.patch(
        cm_path(namespace, "a"),
        [{"op": "test", "path": "/data/k", "value": "other"}],
        content_type=JSON_PATCH,
    )
    assert failed_test.status == 422
    assert failed_test.body["reason"] == "Invalid"
    assert failed_test.body["message"] == "the server rejected our request due to an error in our request"
    missing = await http.patch(
        cm_path(namespace, "a"), [{"op": "remove", "path": "/data/nope"}], content_type=JSON_PATCH
    )
    assert missing.status == 422
    malformed = await http.patch(cm_path(namespace, "a"), {"op": "add"}, content_type=JSON_PATCH)
    assert malformed.status == 400
    assert malformed.body["reason"] == "BadRequest"


async def test_strategic_merge_patch_merges_containers_by_name(http: Http, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    assert (await http.post(path, deployment("web"))).status == 201
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "memcached:1.6.22"}]}}}}
    reply = await http.patch(f"{path}/web", patch, content_type=STRATEGIC)
    assert reply.status == 200
    containers = reply.body["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["main", "side"]
    assert containers[0]["image"] == "memcached:1.6.22"
    assert containers[0]["env"] == [{"name": "A", "value": "1"}]
    merge = await http.patch(f"{path}/web", patch, content_type=MERGE)
    assert [c["name"] for c in merge.body["spec"]["template"]["spec"]["containers"]] == ["main"]


async def test_unsupported_patch_type_is_415(http: Http, namespace: str) -> None:
    await http.post(cm_path(namespace), {"metadata": {"name": "a"}})
    reply = await http.request("PATCH", cm_path(namespace, "a"), body=b"data: {}", content_type="text/plain")
    # A built-in resource's route refuses a media type no patch has before the patch handler
    # runs: go-restful's bare answer, as v1.36 gives it. (A custom resource's handler lists the
    # patch types it takes: test_apiserver_crd.)
    assert reply.status == 415
    assert reply.body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "415: Unsupported Media Type",
        "reason": "UnsupportedMediaType",
        "details": {},
        "code": 415,
    }


async def test_patch_carrying_a_resource_version_is_conditional(http: Http, namespace: str) -> None:
    created = (await http.post(cm_path(namespace), {"metadata": {"name": "a"}})).body
    rv = created["metadata"]["resourceVersion"]
    first = await http.patch(
        cm_path(namespace, "a"), {"metadata": {"resourceVersion": rv}, "data": {"x": "1"}}
    )
    assert first.status == 200
    stale = await http.patch(
        cm_path(namespace, "a"), {"metadata": {"resourceVersion": rv}, "data": {"x": "2"}}
    )
    assert stale.status == 409
    assert stale.body["reason"] == "Conflict"
    assert stale.body["message"].startswith(
        'Operation cannot be fulfilled on configmaps "a": the object has been'
    )


async def test_patch_of_a_missing_object_is_404(http: Http, namespace: str) -> None:
    reply = await http.patch(cm_path(namespace, "nope"), {"data": {"x": "1"}})
    assert reply.status == 404
    assert reply.body["message"] == 'configmaps "nope" not found'


async def test_no_op_patch_keeps_the_resource_version(http: Http, namespace: str) -> None:
    created = (await http.post(cm_path(namespace), {"metadata": {"name": "a"}, "data": {"x": "1"}})).body
    reply = await http.patch(cm_path(namespace, "a"), {"data": {"x": "1"}})
    assert reply.status == 200
    assert reply.body["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_status_patch_ignores_spec(http: Http, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    await http.post(path, deployment("web"))
    # A status no deployment controller would write (on a real cluster one writes status too).
    reply = await http.patch(f"{path}/web/status", {"spec": {"replicas": 5}, "status": {"replicas": 7}})
    assert reply.status == 200
    assert reply.body["spec"]["replicas"] == 1
    assert reply.body["status"]["replicas"] == 7
    assert reply.body["metadata"]["generation"] == 1


async def test_a_patch_whose_result_does_not_decode_is_422_on_the_field_patch(
    http: Http, namespace: str
) -> None:
    """A typed field of the wrong JSON type: a create or update does not decode (400); a patch
    that makes one is 422 Invalid on the field "patch", of no kind and no name, showing the
    patched object with encoding/json's error, or (strategic merge) the patch itself with the
    unstructured converter's error. Measured on v1.36."""
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    assert (await http.post(path, deployment("web"))).status == 201
    json_error = (
        "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
    )
    for content_type, patch in (
        (MERGE, {"spec": {"replicas": "x"}}),
        (JSON_PATCH, [{"op": "replace", "path": "/spec/replicas", "value": "x"}]),
    ):
        reply = await http.patch(f"{path}/web", patch, content_type=content_type)
        assert reply.status == 422, reply.body
        assert reply.body["reason"] == "Invalid"
        # The patched object, as the server encoded it, is not something to compare byte for byte.
        assert reply.body["message"].startswith(' "" is invalid: patch: Invalid value: "{\\"apiVersion\\":')
        assert reply.body["message"].endswith(f'": {json_error}')
        [cause] = reply.body["details"]["causes"]
        assert set(reply.body["details"]) == {"causes"}
        assert (cause["reason"], cause["field"]) == ("FieldValueInvalid", "patch")
        assert cause["message"].endswith(f'": {json_error}')
    strategic = (
        ({"spec": {"replicas": 2.5}}, '"map[spec:map[replicas:2.5]]": cannot convert float64 to int32'),
        (
            {"metadata": {"labels": {"a": "b"}}, "spec": {"replicas": "x", "paused": False}},
            '"map[metadata:map[labels:map[a:b]] spec:map[paused:false replicas:x]]": '
            "unrecognized type: int32",
        ),
    )
    for patch, why in strategic:
        reply = await http.patch(f"{path}/web", patch, content_type=STRATEGIC)
        assert reply.status == 422, reply.body
        assert reply.body["message"] == f' "" is invalid: patch: Invalid value: {why}'
    # Nothing was written.
    assert (await http.get(f"{path}/web")).body["spec"]["replicas"] == 1
    body = deployment("bad")
    body["spec"]["replicas"] = "x"
    created = await http.post(path, body)
    assert created.status == 400
    assert (
        created.body["message"]
        == f'Deployment in version "v1" cannot be handled as a Deployment: {json_error}'
    )
