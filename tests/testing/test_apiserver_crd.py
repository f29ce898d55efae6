"""CustomResourceDefinitions over HTTP: serving, schema enforcement (prune, default, validate),
subresources, versions, schema updates and deletion."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http, Reply

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "minimum": 0, "default": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "replicas": {"type": "integer"},
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def crd_body(
    group: str, *, scope: str = "Namespaced", schema: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "shortNames": ["wg"],
                "categories": ["memop-test"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema or SCHEMA},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                },
                {
                    "name": "v1beta1",
                    "served": True,
                    "storage": False,
                    "schema": {"openAPIV3Schema": schema or SCHEMA},
                },
            ],
        },
    }


@dataclass
class Widgets:
    group: str
    namespace: str

    @property
    def crd(self) -> str:
        return f"{CRDS}/widgets.{self.group}"

    def path(self, name: str = "", version: str = "v1") -> str:
        base = f"/apis/{self.group}/{version}/namespaces/{self.namespace}/widgets"
        return f"{base}/{name}" if name else base


async def established(http: Http, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        crd = (await http.get(f"{CRDS}/{name}")).body
        conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or ()}
        return crd if conditions.get("Established") == "True" else None

    return await wait_for(check, timeout=30)


@pytest.fixture
async def widgets(http: Http, namespace: str, cluster: ClusterHandle) -> AsyncIterator[Widgets]:
    """A Widget CRD with a group of its own, Established."""
    group = f"t{uuid.uuid4().hex[:8]}.memop.test"
    created = await http.post(CRDS, crd_body(group))
    assert created.status == 201, created.body
    await established(http, f"widgets.{group}")
    # A real server may take a moment to serve a new CRD.
    await wait_for(lambda: _served(http, group), timeout=30)
    try:
        yield Widgets(group, namespace)
    finally:
        if cluster.real:
            await http.delete(f"{CRDS}/widgets.{group}")


async def _served(http: Http, group: str) -> bool:
    return (await http.get(f"/apis/{group}/v1")).status == 200


@pytest.mark.fake_only
async def test_a_custom_resource_watch_cache_begins_at_its_first_request(
    http: Http, cluster: ClusterHandle
) -> None:
    """kube-apiserver creates a CRD's storage, and its watch cache, at the first request for the
    custom resource: a watch from a version older than that is 410 Expired, even one after the
    CRD was created. (On a real cluster the controller-manager's informers make that first
    request within seconds, so when exactly is not something a test can pin there.)"""
    store = cluster.fake.store
    group = f"t{uuid.uuid4().hex[:8]}.memop.test"
    crds = store.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    store.create(crds, None, crd_body(group))
    configmaps = store.resource("", "v1", "configmaps")
    between = store.create(configmaps, "default", {"metadata": {"name": f"between-{group}"}})
    after_crd = int(between["metadata"]["resourceVersion"]) - 1
    listed = await http.get(f"/apis/{group}/v1/widgets")  # the first request: the cache begins
    assert listed.status == 200, listed.body
    begun = int(listed.body["metadata"]["resourceVersion"])
    assert begun > after_crd
    async with http.watch(f"/apis/{group}/v1/widgets", {"resourceVersion": str(after_crd)}) as stream:
        event = await stream.next()
        assert event is not None
        assert event["object"]["message"] == f"too old resource version: {after_crd} ({begun})"
    async with http.watch(
        f"/apis/{group}/v1/namespaces/default/widgets", {"resourceVersion": str(begun)}
    ) as s:
        widget = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 1},
        }
        assert (await http.post(f"/apis/{group}/v1/namespaces/default/widgets", widget)).status == 201
        event = await s.next_not_bookmark()
        assert event is not None
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "w")


async def test_a_crd_becomes_established_and_served(http: Http, widgets: Widgets) -> None:
    crd = await established(http, f"widgets.{widgets.group}")
    status = crd["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["NamesAccepted"]["status"] == "True"
    assert conditions["Established"]["status"] == "True"
    assert status["acceptedNames"]["kind"] == "Widget"
    assert status["acceptedNames"]["listKind"] == "WidgetList"
    assert status["storedVersions"] == ["v1"]
    assert crd["spec"]["names"]["listKind"] == "WidgetList"
    groups = (await http.get("/apis")).body["groups"]
    [group] = [g for g in groups if g["name"] == widgets.group]
    assert group["preferredVersion"]["version"] == "v1"
    resources = {r["name"]: r for r in (await http.get(f"/apis/{widgets.group}/v1")).body["resources"]}
    assert resources["widgets"]["namespaced"] is True
    assert resources["widgets"]["kind"] == "Widget"
    assert resources["widgets"]["shortNames"] == ["wg"]
    assert resources["widgets"]["categories"] == ["memop-test"]
    assert "watch" in resources["widgets"]["verbs"]
    assert resources["widgets/status"]["verbs"] == ["get", "patch", "update"]
    assert "widgets/scale" in resources


async def test_custom_resource_lifecycle(http: Http, widgets: Widgets) -> None:
    created = await http.post(
        widgets.path(),
        {
            "apiVersion": f"{widgets.group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 2},
        },
    )
    assert created.status == 201, created.body
    assert created.body["metadata"]["generation"] == 1
    listed = (await http.get(widgets.path())).body
    assert listed["kind"] == "WidgetList"
    [item] = listed["items"]
    assert item["kind"] == "Widget"  # custom resource list items keep their type fields
    assert item["apiVersion"] == f"{widgets.group}/v1"
    unconditional = await http.put(
        widgets.path("w"),
        {
            "apiVersion": f"{widgets.group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 3},
        },
    )
    assert unconditional.status == 422
    assert unconditional.body["message"] == (
        f'widgets.{widgets.group} "w" is invalid: metadata.resourceVersion: Invalid value: 0: must be '
        "specified for an update"
    )
    deleted = await http.delete(widgets.path("w"))
    assert deleted.status == 200
    assert deleted.body["kind"] == "Status"
    assert deleted.body["details"] == {
        "name": "w",
        "group": widgets.group,
        "kind": "widgets",
        "uid": created.body["metadata"]["uid"],
    }


async def test_schema_validation_rejects_with_422(http: Http, widgets: Widgets) -> None:
    body = {
        "apiVersion": f"{widgets.group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": -1, "mode": "c"},
    }
    reply = await http.post(widgets.path(), body)
    assert reply.status == 422
    assert reply.body["reason"] == "Invalid"
    assert reply.body["details"]["kind"] == "Widget"
    assert reply.body["details"]["group"] == widgets.group
    assert reply.body["message"].startswith(f'Widget.{widgets.group} "w" is invalid: ')
    causes = {c["field"]: c for c in reply.body["details"]["causes"]}
    assert causes["spec.size"]["reason"] == "FieldValueInvalid"
    assert (
        causes["spec.size"]["message"]
        == "Invalid value: -1: spec.size in body should be greater than or equal to 0"
    )
    assert causes["spec.mode"]["reason"] == "FieldValueNotSupported"
    assert causes["spec.mode"]["message"] == 'Unsupported value: "c": supported values: "a", "b"'


async def test_unknown_fields_are_pruned_and_defaults_filled(http: Http, widgets: Widgets) -> None:
    body = {
        "apiVersion": f"{widgets.group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"mode": "a", "bogus": True},
    }
    reply = await http.post(widgets.path(), body)
    assert reply.status == 201
    assert reply.body["spec"] == {"mode": "a", "size": 1}
    assert 'unknown field \\"spec.bogus\\"' in reply.headers.get("Warning", "")
    strict = await http.post(
        widgets.path(), {**body, "metadata": {"name": "w2"}}, query={"fieldValidation": "Strict"}
    )
    assert strict.status == 400
    assert strict.body["reason"] == "BadRequest"
    assert strict.body["message"].endswith('strict decoding error: unknown field "spec.bogus"')


async def test_status_subresource_of_a_custom_resource(http: Http, widgets: Widgets) -> None:
    body = {
        "apiVersion": f"{widgets.group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 1},
        "status": {"ready": True},
    }
    created = (await http.post(widgets.path(), body)).body
    assert "status" not in created
    status = await http.patch(widgets.path("w") + "/status", {"status": {"ready": True}, "spec": {"size": 5}})
    assert status.status == 200
    assert status.body["status"] == {"ready": True}
    assert status.body["spec"] == {"size": 1}
    assert status.body["metadata"]["generation"] == 1
    main = await http.patch(widgets.path("w"), {"spec": {"size": 2}, "status": {"ready": False}})
    assert main.body["status"] == {"ready": True}
    assert main.body["metadata"]["generation"] == 2


async def test_versions_share_one_storage(http: Http, widgets: Widgets) -> None:
    await http.post(
        widgets.path(),
        {
            "apiVersion": f"{widgets.group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 2},
        },
    )
    beta = (await http.get(widgets.path("w", version="v1beta1"))).body
    assert beta["apiVersion"] == f"{widgets.group}/v1beta1"
    assert beta["spec"] == {"size": 2}
    # v1beta1 has no status subresource: status is part of the main resource and counts for generation.
    updated = await http.patch(widgets.path("w", version="v1beta1"), {"status": {"phase": "x"}})
    assert updated.body["status"] == {"phase": "x"}
    assert updated.body["metadata"]["generation"] == 2
    v1 = (await http.get(widgets.path("w"))).body
    assert v1["apiVersion"] == f"{widgets.group}/v1"
    assert v1["status"] == {"phase": "x"}


async def test_strategic_merge_patch_is_415_for_custom_resources(http: Http, widgets: Widgets) -> None:
    await http.post(
        widgets.path(),
        {"apiVersion": f"{widgets.group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}},
    )
    reply = await http.patch(
        widgets.path("w"), {"spec": {"size": 2}}, content_type="application/strategic-merge-patch+json"
    )
    assert reply.status == 415
    assert reply.body["reason"] == "UnsupportedMediaType"
    assert reply.body["message"].startswith(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json"
    )
    assert "strategic" not in reply.body["message"]


async def test_scale_subresource_of_a_custom_resource(http: Http, widgets: Widgets) -> None:
    await http.post(
        widgets.path(),
        {
            "apiVersion": f"{widgets.group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"replicas": 1},
        },
    )
    await http.patch(widgets.path("w") + "/status", {"status": {"replicas": 1, "selector": "app=w"}})
    scale = (await http.get(widgets.path("w") + "/scale")).body
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 1}
    assert scale["status"] == {"replicas": 1, "selector": "app=w"}
    scaled = await http.patch(widgets.path("w") + "/scale", {"spec": {"replicas": 4}})
    assert scaled.status == 200
    assert scaled.body["spec"] == {"replicas": 4}
    assert (await http.get(widgets.path("w"))).body["spec"]["replicas"] == 4


async def test_a_crd_update_changes_the_schema(http: Http, widgets: Widgets) -> None:
    crd = (await http.get(widgets.crd)).body
    tighter = {
        **SCHEMA,
        "properties": {
            **SCHEMA["properties"],
            "spec": {
                "type": "object",
                "properties": {"size": {"type": "integer", "minimum": 0, "maximum": 3}},
            },
        },
    }
    for version in crd["spec"]["versions"]:
        version["schema"] = {"openAPIV3Schema": tighter}
    updated = await http.put(widgets.crd, crd)
    assert updated.status == 200, updated.body
    assert updated.body["metadata"]["generation"] == 2

    async def rejects() -> bool:
        reply = await http.post(
            widgets.path(),
            {
                "apiVersion": f"{widgets.group}/v1",
                "kind": "Widget",
                "metadata": {"generateName": "w-"},
                "spec": {"size": 5},
            },
        )
        if reply.status == 201:
            await http.delete(widgets.path(reply.body["metadata"]["name"]))
        return reply.status == 422

    await wait_for(rejects, timeout=30)


async def test_deleting_a_crd_deletes_its_objects_and_stops_serving(http: Http, widgets: Widgets) -> None:
    for name in ("a", "b"):
        await http.post(
            widgets.path(),
            {"apiVersion": f"{widgets.group}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {}},
        )
    async with http.watch(widgets.path(), {"resourceVersion": "0"}) as stream:
        assert len(await stream.take(2)) == 2
        reply = await http.delete(widgets.crd)
        assert reply.status == 200

        async def gone() -> bool:
            return (await http.get(widgets.crd)).status == 404

        await wait_for(gone, timeout=60)
        events = []
        while (event := await stream.next(timeout=30)) is not None:
            events.append(event)
        assert {(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] == "DELETED"} == {
            ("DELETED", "a"),
            ("DELETED", "b"),
        }

    async def not_served() -> bool:
        return (await http.get(widgets.path())).status == 404

    await wait_for(not_served, timeout=30)


async def test_a_custom_resource_metadata_is_typed(http: Http, widgets: Widgets) -> None:
    """A custom resource's metadata decodes into ObjectMeta as a built-in's does: a time that
    does not parse fails decoding (400), even one the server then replaces."""
    widget = {
        "apiVersion": f"{widgets.group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "creationTimestamp": "yesterday"},
        "spec": {},
    }
    bad = await http.post(widgets.path(), widget)
    assert bad.status == 400, bad.body
    assert bad.body["message"] == (
        'Widget in version "v1" cannot be handled as a Widget: parsing time "yesterday" as '
        '"2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"'
    )
    widget["metadata"]["creationTimestamp"] = "2024-01-01T01:00:00.5+01:00"
    created = await http.post(widgets.path(), widget)
    assert created.status == 201, created.body
    assert created.body["metadata"]["creationTimestamp"] != "2024-01-01T00:00:00Z"  # the server's own


async def test_a_finalizer_on_a_custom_resource_holds_its_crd(http: Http, widgets: Widgets) -> None:
    await http.post(
        widgets.path(),
        {
            "apiVersion": f"{widgets.group}/v1",
            "kind": "Widget",
            "metadata": {"name": "held", "finalizers": ["memop.test/hold"]},
            "spec": {},
        },
    )
    await http.delete(widgets.crd)

    async def terminating() -> bool:
        crd = (await http.get(widgets.crd)).body
        held = (await http.get(widgets.path("held"))).body
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        return conditions.get("Terminating") == "True" and bool(held["metadata"].get("deletionTimestamp"))

    try:
        await wait_for(terminating, timeout=30)
        create = await http.post(
            widgets.path(),
            {"apiVersion": f"{widgets.group}/v1", "kind": "Widget", "metadata": {"name": "late"}, "spec": {}},
        )
        assert create.status in (403, 405)
    finally:
        # Released whatever happened: on a real cluster the CRD would stay Terminating for ever.
        await http.patch(widgets.path("held"), {"metadata": {"finalizers": None}})

    async def gone() -> bool:
        return (await http.get(widgets.crd)).status == 404

    await wait_for(gone, timeout=60)


async def test_cluster_scoped_custom_resources(http: Http, cluster: ClusterHandle) -> None:
    group = f"t{uuid.uuid4().hex[:8]}.memop.test"
    reply = await http.post(CRDS, crd_body(group, scope="Cluster"))
    assert reply.status == 201
    try:
        await established(http, f"widgets.{group}")
        await wait_for(lambda: _served(http, group), timeout=30)
        created = await http.post(
            f"/apis/{group}/v1/widgets",
            {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}},
        )
        assert created.status == 201
        assert "namespace" not in created.body["metadata"]
        resources = {r["name"]: r for r in (await http.get(f"/apis/{group}/v1")).body["resources"]}
        assert resources["widgets"]["namespaced"] is False
    finally:
        if cluster.real:
            await http.delete(f"{CRDS}/widgets.{group}")


async def test_an_invalid_crd_is_rejected(http: Http) -> None:
    body = crd_body("memop.test")
    body["metadata"]["name"] = "wrong.memop.test"
    reply = await http.post(CRDS, body)
    assert reply.status == 422
    assert reply.body["details"]["kind"] == "CustomResourceDefinition"
    assert reply.body["details"]["group"] == "apiextensions.k8s.io"
    assert {
        "field": "metadata.name",
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "wrong.memop.test": must be spec.names.plural+"."+spec.group',
    } in (reply.body["details"]["causes"])


STRICT_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["image"],
            "properties": {
                "image": {"type": "string"},
                "size": {"type": "integer", "minimum": 0, "maximum": 5},
                "mode": {"type": "string", "enum": ["a", "b"]},
            },
        },
    },
}


async def test_the_schema_is_enforced_on_create_and_on_every_kind_of_update(
    http: Http, cluster: ClusterHandle, namespace: str
) -> None:
    group = f"t{uuid.uuid4().hex[:8]}.memop.test"
    reply = await http.post(CRDS, crd_body(group, schema=STRICT_SCHEMA))
    assert reply.status == 201, reply.body
    widgets = Widgets(group, namespace)
    try:
        await established(http, f"widgets.{group}")
        await wait_for(lambda: _served(http, group), timeout=30)

        def widget(spec: dict[str, Any]) -> dict[str, Any]:
            return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}

        def causes(reply: Reply) -> set[tuple[str, str]]:
            assert reply.status == 422, reply.body
            assert reply.body["kind"] == "Status"
            assert reply.body["reason"] == "Invalid"
            assert reply.body["code"] == 422
            assert reply.body["message"].startswith(f'Widget.{group} "w" is invalid: ')
            return {(c["field"], c["reason"]) for c in reply.body["details"]["causes"]}

        # create
        assert causes(await http.post(widgets.path(), widget({"size": 1}))) == {
            ("spec.image", "FieldValueRequired")
        }
        assert causes(await http.post(widgets.path(), widget({"image": 7, "size": "3"}))) == {
            ("spec.image", "FieldValueTypeInvalid"),
            ("spec.size", "FieldValueTypeInvalid"),
        }
        too_big = await http.post(widgets.path(), widget({"image": "x", "size": 6}))
        assert causes(too_big) == {("spec.size", "FieldValueInvalid")}
        assert too_big.body["details"]["causes"][0]["message"] == (
            "Invalid value: 6: spec.size in body should be less than or equal to 5"
        )
        assert causes(await http.post(widgets.path(), widget({"image": "x", "size": -1}))) == {
            ("spec.size", "FieldValueInvalid")
        }
        assert causes(await http.post(widgets.path(), widget({"image": "x", "mode": "c"}))) == {
            ("spec.mode", "FieldValueNotSupported")
        }
        created = await http.post(widgets.path(), widget({"image": "x", "size": 2, "mode": "a"}))
        assert created.status == 201, created.body
        stored = created.body

        # update (PUT), merge patch and JSON patch are held to the same schema
        put = {**stored, "spec": {"image": "x", "size": 9}}
        assert causes(await http.put(widgets.path("w"), put)) == {("spec.size", "FieldValueInvalid")}
        assert causes(await http.put(widgets.path("w"), {**stored, "spec": {"size": 1}})) == {
            ("spec.image", "FieldValueRequired")
        }
        assert causes(await http.patch(widgets.path("w"), {"spec": {"size": -1}})) == {
            ("spec.size", "FieldValueInvalid")
        }
        assert causes(await http.patch(widgets.path("w"), {"spec": {"size": "big"}})) == {
            ("spec.size", "FieldValueTypeInvalid")
        }
        assert causes(await http.patch(widgets.path("w"), {"spec": {"image": None}})) == {
            ("spec.image", "FieldValueRequired")
        }
        json_patch = [{"op": "replace", "path": "/spec/mode", "value": "c"}]
        assert causes(
            await http.patch(widgets.path("w"), json_patch, content_type="application/json-patch+json")
        ) == {("spec.mode", "FieldValueNotSupported")}

        # nothing was written by the rejected updates; a valid one still goes through
        unchanged = (await http.get(widgets.path("w"))).body
        assert unchanged["spec"] == {"image": "x", "size": 2, "mode": "a"}
        assert unchanged["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        ok = await http.patch(widgets.path("w"), {"spec": {"size": 5, "mode": "b"}})
        assert ok.status == 200, ok.body
        assert ok.body["spec"] == {"image": "x", "size": 5, "mode": "b"}
    finally:
        if cluster.real:
            await http.delete(f"{CRDS}/widgets.{group}")


async def test_custom_resource_paths_must_fit_the_crd_scope(
    http: Http, widgets: Widgets, cluster: ClusterHandle
) -> None:
    """The apiextensions server hands a request whose scope does not fit the CRD on (404)."""
    body = {"apiVersion": f"{widgets.group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    assert (await http.post(widgets.path(), body)).status == 201
    across = f"/apis/{widgets.group}/v1/widgets"
    assert (await http.get(across)).status == 200  # a list across namespaces is served
    for reply in (
        await http.get(f"{across}/w"),
        await http.patch(f"{across}/w", {"spec": {"size": 2}}),
        await http.delete(f"{across}/w"),
        await http.post(across, body),
        await http.delete(across),
    ):
        assert reply.status == 404, reply.body
    assert (await http.get(widgets.path("w"))).body["spec"] == {"size": 1}

    group = f"t{uuid.uuid4().hex[:8]}.memop.test"
    assert (await http.post(CRDS, crd_body(group, scope="Cluster"))).status == 201
    try:
        await established(http, f"widgets.{group}")
        await wait_for(lambda: _served(http, group), timeout=30)
        cluster_body = {**body, "apiVersion": f"{group}/v1"}
        assert (await http.post(f"/apis/{group}/v1/widgets", cluster_body)).status == 201
        under = f"/apis/{group}/v1/namespaces/{widgets.namespace}/widgets"
        for reply in (
            await http.get(under),
            await http.get(f"{under}/w"),
            await http.post(under, {**cluster_body, "metadata": {"name": "x"}}),
            await http.delete(f"{under}/w"),
        ):
            assert reply.status == 404, reply.body
        names = [
            item["metadata"]["name"] for item in (await http.get(f"/apis/{group}/v1/widgets")).body["items"]
        ]
        assert names == ["w"]
    finally:
        if cluster.real:
            await http.delete(f"{CRDS}/widgets.{group}")


PATTERNS = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "image": {"type": "string", "pattern": "^[a-z0-9./-]+(:[a-z0-9.]+)?$"},
                "price": {"type": "string", "pattern": "^\\$[0-9]+$"},
                "symbols": {"type": "string", "pattern": "^[$a-z]+$"},
            },
        },
    },
}


async def test_schema_patterns_follow_go_regexp(http: Http, namespace: str, cluster: ClusterHandle) -> None:
    """``$`` ends the text (a trailing newline does not match it); ``\\$`` and ``[$]`` are dollars."""
    group = f"t{uuid.uuid4().hex[:8]}.memop.test"
    assert (await http.post(CRDS, crd_body(group, schema=PATTERNS))).status == 201
    try:
        await established(http, f"widgets.{group}")
        await wait_for(lambda: _served(http, group), timeout=30)
        path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"

        def widget(name: str, **spec: str) -> dict[str, Any]:
            return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}

        good = await http.post(path, widget("good", image="memcached:1.6", price="$12", symbols="$a$"))
        assert good.status == 201, good.body
        for field, value in (("image", "memcached\n"), ("price", "$12\n"), ("symbols", "$ab\n")):
            reply = await http.post(path, widget("bad", **{field: value}))
            assert reply.status == 422, (field, reply.body)
            [cause] = reply.body["details"]["causes"]
            pattern = PATTERNS["properties"]["spec"]["properties"][field]["pattern"]  # type: ignore[index]
            assert cause == {
                "reason": "FieldValueInvalid",
                "message": f"Invalid value: {json.dumps(value)}: spec.{field} in body should match "
                f"'{pattern}'",
                "field": f"spec.{field}",
            }
    finally:
        if cluster.real:
            await http.delete(f"{CRDS}/widgets.{group}")


async def test_without_conversion_a_field_only_the_request_version_has_is_not_stored(
    http: Http, namespace: str, cluster: ClusterHandle
) -> None:
    """Validated in the request's version, stored pruned by the storage version's schema (as
    v1.36.2 does: measured with memop's Memcached, whose v1beta1 alone has containerPort)."""
    group = f"t{uuid.uuid4().hex[:8]}.memop.test"
    body = crd_body(group)
    beta = body["spec"]["versions"][1]["schema"] = copy.deepcopy(body["spec"]["versions"][1]["schema"])
    beta["openAPIV3Schema"]["properties"]["spec"]["properties"]["port"] = {
        "type": "integer",
        "maximum": 65535,
    }
    assert (await http.post(CRDS, body)).status == 201
    await established(http, f"widgets.{group}")
    await wait_for(lambda: _served(http, group), timeout=30)
    widgets = Widgets(group, namespace)
    try:
        # The request's version validates the field...
        refused = await http.post(
            widgets.path(version="v1beta1"),
            {
                "apiVersion": f"{group}/v1beta1",
                "kind": "Widget",
                "metadata": {"name": "w"},
                "spec": {"port": 70000},
            },
        )
        assert refused.status == 422, refused.body
        # ...and the storage version drops it, from the answer on.
        created = await http.post(
            widgets.path(version="v1beta1"),
            {
                "apiVersion": f"{group}/v1beta1",
                "kind": "Widget",
                "metadata": {"name": "w"},
                "spec": {"port": 80},
            },
        )
        assert created.status == 201, created.body
        assert created.body["spec"] == {"size": 1}
        assert (await http.get(widgets.path("w"))).body["spec"] == {"size": 1}
        assert (await http.get(widgets.path("w", version="v1beta1"))).body["spec"] == {"size": 1}
        # An update that sets it leaves the stored spec as it was.
        patched = await http.patch(widgets.path("w", version="v1beta1"), {"spec": {"port": 81}})
        assert patched.status == 200, patched.body
        assert patched.body["spec"] == {"size": 1}
    finally:
        if cluster.real:
            await http.delete(f"{CRDS}/widgets.{group}")
