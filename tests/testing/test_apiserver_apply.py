"""Server-side apply (``application/apply-patch+yaml``) as a v1.36 kube-apiserver answers it:
creating, ownership in managedFields, conflicts between managers (409 naming each field),
``force`` taking ownership, shared fields, and removing a field one stops applying.

Every test runs on the in-memory server and, with USE_EXISTING_CLUSTER=true, on a real cluster:
the expected answers are the real server's (structured-merge-diff's wording and FieldsV1).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

APPLY = "application/apply-patch+yaml"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


def deploy_path(ns: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{ns}/deployments" + (f"/{name}" if name else "")


def cm(name: str, data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}}
    if data is not None:
        body["data"] = data
    return body


async def apply(http: Http, path: str, body: Any, manager: str | None, *, force: bool = False) -> Any:
    query: dict[str, Any] = {}
    if manager is not None:
        query["fieldManager"] = manager
    if force:
        query["force"] = "true"
    # Sent as JSON (which is YAML), as controller-runtime and memop's Client send it.
    return await http.request("PATCH", path, body=body, content_type=APPLY, query=query)


def entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """managedFields by (manager, operation): each entry's fieldsV1."""
    out = {}
    for entry in obj["metadata"].get("managedFields") or []:
        assert entry["fieldsType"] == "FieldsV1"
        out[(entry["manager"], entry["operation"])] = entry["fieldsV1"]
    return out


async def test_apply_creates_the_object_and_owns_exactly_what_it_applied(http: Http, namespace: str) -> None:
    created = await apply(http, cm_path(namespace, "a"), cm("a", {"k": "v"}, labels={"x": "1"}), "alpha")
    assert created.status == 201, created.body
    assert created.body["data"] == {"k": "v"}
    assert created.body["metadata"]["labels"] == {"x": "1"}
    [entry] = created.body["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("alpha", "Apply", "v1")
    assert entry["time"]
    # An apply owns leaves, not the maps holding them (no "." there), and no server metadata.
    assert entry["fieldsV1"] == {"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:x": {}}}}
    # The same configuration again changes nothing: no new resourceVersion.
    again = await apply(http, cm_path(namespace, "a"), cm("a", {"k": "v"}, labels={"x": "1"}), "alpha")
    assert again.status == 200
    assert again.body["metadata"]["resourceVersion"] == created.body["metadata"]["resourceVersion"]
    assert again.body["metadata"]["managedFields"] == created.body["metadata"]["managedFields"]


async def test_changing_another_managers_field_is_a_conflict_that_writes_nothing(
    http: Http, namespace: str
) -> None:
    await apply(http, cm_path(namespace, "c"), cm("c", {"k": "v", "j": "1"}), "alpha")
    before = (await http.get(cm_path(namespace, "c"))).body
    reply = await apply(http, cm_path(namespace, "c"), cm("c", {"k": "other"}), "beta")
    assert reply.status == 409
    assert reply.body["reason"] == "Conflict"
    assert reply.body["message"] == 'Apply failed with 1 conflict: conflict with "alpha": .data.k'
    assert reply.body["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alpha"', "field": ".data.k"}
    ]
    after = (await http.get(cm_path(namespace, "c"))).body
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["data"] == {"k": "v", "j": "1"}


async def test_a_conflict_with_an_update_names_its_api_version_and_lists_every_field(
    http: Http, namespace: str
) -> None:
    created = await http.post(
        cm_path(namespace),
        {"metadata": {"name": "u"}, "data": {"a": "1", "b": "2"}},
        query={"fieldManager": "editor"},
    )
    assert created.status == 201
    reply = await apply(http, cm_path(namespace, "u"), cm("u", {"a": "9", "b": "9", "c": "new"}), "alpha")
    assert reply.status == 409
    assert reply.body["message"] == (
        'Apply failed with 2 conflicts: conflicts with "editor" using v1:\n- .data.a\n- .data.b'
    )
    assert sorted(c["field"] for c in reply.body["details"]["causes"]) == [".data.a", ".data.b"]
    assert {c["message"] for c in reply.body["details"]["causes"]} == {'conflict with "editor" using v1'}


async def test_force_takes_ownership_from_the_other_manager(http: Http, namespace: str) -> None:
    await apply(http, cm_path(namespace, "f"), cm("f", {"k": "v", "j": "1"}), "alpha")
    forced = await apply(http, cm_path(namespace, "f"), cm("f", {"k": "mine"}), "beta", force=True)
    assert forced.status == 200, forced.body
    assert forced.body["data"] == {"k": "mine", "j": "1"}
    assert entries(forced.body) == {
        ("alpha", "Apply"): {"f:data": {"f:j": {}}},
        ("beta", "Apply"): {"f:data": {"f:k": {}}},
    }
    # alpha applying its old value again now conflicts with beta.
    reply = await apply(http, cm_path(namespace, "f"), cm("f", {"k": "v", "j": "1"}), "alpha")
    assert reply.status == 409
    assert reply.body["message"] == 'Apply failed with 1 conflict: conflict with "beta": .data.k'


async def test_a_field_applied_with_the_same_value_is_shared_and_survives_one_owner_leaving(
    http: Http, namespace: str
) -> None:
    await apply(http, cm_path(namespace, "s"), cm("s", {"k": "v", "own": "a"}), "alpha")
    shared = await apply(http, cm_path(namespace, "s"), cm("s", {"k": "v"}), "beta")
    assert shared.status == 200, shared.body
    assert entries(shared.body) == {
        ("alpha", "Apply"): {"f:data": {"f:k": {}, "f:own": {}}},
        ("beta", "Apply"): {"f:data": {"f:k": {}}},
    }
    # alpha stops applying k: beta still owns it, so it stays; "own" goes with alpha's opinion.
    left = await apply(http, cm_path(namespace, "s"), cm("s", {}), "alpha")
    assert left.status == 200, left.body
    assert left.body["data"] == {"k": "v"}
    # alpha still owns the (now empty in its opinion) map itself: measured on a real v1.36 server.
    assert entries(left.body) == {
        ("alpha", "Apply"): {"f:data": {}},
        ("beta", "Apply"): {"f:data": {"f:k": {}}},
    }


async def test_removing_a_field_from_the_configuration_removes_it_from_the_object(
    http: Http, namespace: str
) -> None:
    await apply(http, cm_path(namespace, "r"), cm("r", {"k": "v", "gone": "x"}, labels={"l": "1"}), "alpha")
    # Someone else's field beside ours: it is not alpha's to remove.
    await http.patch(cm_path(namespace, "r"), {"data": {"theirs": "y"}}, query={"fieldManager": "editor"})
    removed = await apply(http, cm_path(namespace, "r"), cm("r", {"k": "v"}), "alpha")
    assert removed.status == 200, removed.body
    assert removed.body["data"] == {"k": "v", "theirs": "y"}
    assert "labels" not in removed.body["metadata"]
    assert entries(removed.body)[("alpha", "Apply")] == {"f:data": {"f:k": {}}}
    assert entries(removed.body)[("editor", "Update")] == {"f:data": {"f:theirs": {}}}


async def test_keyed_list_items_merge_by_key_and_conflicts_name_the_item(http: Http, namespace: str) -> None:
    labels = {"app": "web"}
    config = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
            },
        },
    }
    created = await apply(http, deploy_path(namespace, "web"), config, "alpha")
    assert created.status == 201, created.body
    fields = entries(created.body)[("alpha", "Apply")]
    # A list item is owned with "." beside its fields; the atomic selector is one leaf.
    assert fields["f:spec"]["f:template"]["f:spec"]["f:containers"] == {
        'k:{"name":"main"}': {".": {}, "f:image": {}, "f:name": {}}
    }
    assert fields["f:spec"]["f:selector"] == {}
    assert created.body["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "busybox:1.37"}]}}},
    }
    merged = await apply(http, deploy_path(namespace, "web"), sidecar, "beta")
    assert merged.status == 200, merged.body
    containers = merged.body["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [
        ("main", "busybox:1.36"),
        ("sidecar", "busybox:1.37"),
    ]
    sidecar["spec"]["template"]["spec"]["containers"] = [{"name": "main", "image": "busybox:1.37"}]
    reply = await apply(http, deploy_path(namespace, "web"), sidecar, "beta")
    assert reply.status == 409
    image = '.spec.template.spec.containers[name="main"].image'
    assert reply.body["message"] == f'Apply failed with 1 conflict: conflict with "alpha": {image}'
    # beta stops applying its sidecar (the last configuration without it): the item goes.
    beta_gone = await apply(http, deploy_path(namespace, "web"), {**sidecar, "spec": {"replicas": 1}}, "beta")
    assert beta_gone.status == 200, beta_gone.body
    assert [c["name"] for c in beta_gone.body["spec"]["template"]["spec"]["containers"]] == ["main"]


async def test_finalizers_are_a_set_each_value_owned_by_its_applier(http: Http, namespace: str) -> None:
    await apply(http, cm_path(namespace, "fin"), cm("fin", finalizers=["example.com/a"]), "alpha")
    both = await apply(http, cm_path(namespace, "fin"), cm("fin", finalizers=["example.com/b"]), "beta")
    try:
        assert both.status == 200, both.body
        assert both.body["metadata"]["finalizers"] == ["example.com/a", "example.com/b"]
        assert entries(both.body)[("beta", "Apply")] == {
            "f:metadata": {"f:finalizers": {'v:"example.com/b"': {}}}
        }
        dropped = await apply(http, cm_path(namespace, "fin"), cm("fin"), "alpha")
        assert dropped.body["metadata"]["finalizers"] == ["example.com/b"]
    finally:
        await http.patch(cm_path(namespace, "fin"), {"metadata": {"finalizers": None}})


async def test_what_the_server_refuses_before_applying(http: Http, namespace: str) -> None:
    await apply(http, cm_path(namespace, "bad"), cm("bad", {"k": "v"}), "alpha")
    no_manager = await apply(http, cm_path(namespace, "bad"), cm("bad", {"k": "v"}), None)
    assert no_manager.status == 422
    assert no_manager.body["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )
    assert no_manager.body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: is required for apply patch",
            "field": "fieldManager",
        }
    ]
    forced_merge = await http.patch(cm_path(namespace, "bad"), {"data": {"k": "w"}}, query={"force": "true"})
    assert forced_merge.status == 422
    assert forced_merge.body["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch'
    )
    wrong_version = await apply(http, cm_path(namespace, "bad"), {**cm("bad"), "apiVersion": "v2"}, "alpha")
    assert wrong_version.status == 400
    assert wrong_version.body["message"] == "invalid object type: /v2, Kind=ConfigMap"
    managed = cm("bad", managedFields=[{"manager": "alpha", "operation": "Apply"}])
    with_managed_fields = await apply(http, cm_path(namespace, "bad"), managed, "alpha")
    assert with_managed_fields.status == 400
    assert with_managed_fields.body["message"] == "metadata.managedFields must be nil"
    assert (await http.get(cm_path(namespace, "bad"))).body["data"] == {"k": "v"}


GADGET_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


@pytest.fixture
async def gadgets(http: Http, cluster: ClusterHandle) -> AsyncIterator[str]:
    """A Gadget CRD (a group of its own, a status subresource), Established and served: its group."""
    group = f"t{uuid.uuid4().hex[:8]}.memop.test"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": GADGET_SCHEMA},
                    "subresources": {"status": {}},
                }
            ],
        },
    }
    created = await http.post(CRDS, crd)
    assert created.status == 201, created.body

    async def served() -> bool:
        return (await http.get(f"/apis/{group}/v1")).status == 200

    await wait_for(served, timeout=30)
    try:
        yield group
    finally:
        if cluster.real:
            await http.delete(f"{CRDS}/gadgets.{group}")


async def test_the_status_is_applied_through_its_subresource_only(
    http: Http, namespace: str, gadgets: str
) -> None:
    path = f"/apis/{gadgets}/v1/namespaces/{namespace}/gadgets/g"
    main = {"apiVersion": f"{gadgets}/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"size": 1}}
    created = await apply(http, path, {**main, "status": {"phase": "ignored"}}, "alpha")
    assert created.status == 201, created.body
    assert "status" not in created.body  # a main write leaves the status alone
    assert entries(created.body) == {("alpha", "Apply"): {"f:spec": {"f:size": {}}}}
    status = {"apiVersion": f"{gadgets}/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    reported = await apply(http, f"{path}/status", {**status, "status": {"phase": "Ready"}}, "reporter")
    assert reported.status == 200, reported.body
    assert reported.body["status"] == {"phase": "Ready"}
    [entry] = [e for e in reported.body["metadata"]["managedFields"] if e["manager"] == "reporter"]
    assert (entry["operation"], entry["subresource"]) == ("Apply", "status")
    assert entry["fieldsV1"] == {"f:status": {"f:phase": {}}}
    again = await apply(http, path, {**main, "status": {"phase": "overwritten?"}}, "alpha")
    assert again.body["status"] == {"phase": "Ready"}
    reply = await apply(http, f"{path}/status", {**status, "status": {"phase": "Other"}}, "other")
    assert reply.status == 409
    assert reply.body["message"] == (
        'Apply failed with 1 conflict: conflict with "reporter" with subresource "status": .status.phase'
    )
    missing = await apply(http, f"/apis/{gadgets}/v1/namespaces/{namespace}/gadgets/none/status", status, "x")
    assert missing.status == 404  # a subresource never creates
