"""LIST over HTTP: selectors, pagination, list metadata and the shape of items."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


async def make_configmaps(http: Http, namespace: str, count: int) -> None:
    for i in range(count):
        labels = {"index": str(i), "parity": "even" if i % 2 == 0 else "odd"}
        reply = await http.post(cm_path(namespace), {"metadata": {"name": f"cm-{i:02d}", "labels": labels}})
        assert reply.status == 201


def mine(items: list[dict[str, Any]]) -> list[str]:
    """The names of the listed ConfigMaps the tests create (``cm-NN``, ``plain``, ``later``...),
    in list order. A namespace is never empty: kube-controller-manager puts its
    ``kube-root-ca.crt`` there (and a distribution may add more), so the tests filter."""
    return [i["metadata"]["name"] for i in items if not i["metadata"]["name"].endswith(".crt")]


async def test_list_metadata_and_items(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 3)
    reply = await http.get(cm_path(namespace))
    assert reply.status == 200
    body = reply.body
    assert body["kind"] == "ConfigMapList"
    assert body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"].isdigit()
    assert mine(body["items"]) == ["cm-00", "cm-01", "cm-02"]
    # Items of built-in lists carry no type fields.
    assert all("kind" not in i and "apiVersion" not in i for i in body["items"])
    newest = max(int(i["metadata"]["resourceVersion"]) for i in body["items"])
    assert int(body["metadata"]["resourceVersion"]) >= newest


async def test_label_selectors(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 5)

    async def names(selector: str) -> list[str]:
        reply = await http.get(cm_path(namespace), query={"labelSelector": selector})
        assert reply.status == 200, reply.body
        return mine(reply.body["items"])

    unlabelled = await http.post(cm_path(namespace), {"metadata": {"name": "plain"}})
    assert unlabelled.status == 201

    assert await names("parity=even") == ["cm-00", "cm-02", "cm-04"]
    assert await names("parity==odd") == ["cm-01", "cm-03"]
    # != and notin also match objects without the label, as on kube-apiserver.
    assert await names("parity!=even") == ["cm-01", "cm-03", "plain"]
    assert await names("index in (1,4)") == ["cm-01", "cm-04"]
    assert await names("index notin (0,1,2)") == ["cm-03", "cm-04", "plain"]
    assert await names("parity=odd,index notin (1)") == ["cm-03"]
    assert await names("parity") == ["cm-00", "cm-01", "cm-02", "cm-03", "cm-04"]
    assert await names("!parity") == ["plain"]
    assert await names("parity,!index") == []
    bad = await http.get(cm_path(namespace), query={"labelSelector": "a=(b"})
    assert bad.status == 400
    assert bad.body["reason"] == "BadRequest"


async def test_field_selectors(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 3)
    reply = await http.get(cm_path(namespace), query={"fieldSelector": "metadata.name=cm-01"})
    assert [i["metadata"]["name"] for i in reply.body["items"]] == ["cm-01"]
    reply = await http.get(cm_path(namespace), query={"fieldSelector": "metadata.name!=cm-01"})
    assert mine(reply.body["items"]) == ["cm-00", "cm-02"]
    across = await http.get("/api/v1/configmaps", query={"fieldSelector": f"metadata.namespace=={namespace}"})
    assert mine(across.body["items"]) == ["cm-00", "cm-01", "cm-02"]
    assert {i["metadata"]["namespace"] for i in across.body["items"]} == {namespace}


async def test_unknown_field_selectors_are_400(http: Http, namespace: str) -> None:
    apps = await http.get(
        f"/apis/apps/v1/namespaces/{namespace}/deployments", query={"fieldSelector": "spec.x=1"}
    )
    assert apps.status == 400
    assert apps.body["reason"] == "BadRequest"
    assert (
        apps.body["message"]
        == '"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )
    pods = await http.get(f"/api/v1/namespaces/{namespace}/pods", query={"fieldSelector": "spec.x=1"})
    assert pods.status == 400
    assert pods.body["message"] == "field label not supported: spec.x"


async def test_pod_field_selectors(http: Http, namespace: str) -> None:
    for name, node in (("a", "n1"), ("b", "")):
        spec = {"containers": [{"name": "c", "image": "busybox:1.36"}], "restartPolicy": "Never"}
        if node:
            spec["nodeName"] = node
        else:
            # No scheduler binds it (a real cluster's would set spec.nodeName at once).
            spec["schedulerName"] = "memop-test-no-such-scheduler"
        await http.post(f"/api/v1/namespaces/{namespace}/pods", {"metadata": {"name": name}, "spec": spec})
    reply = await http.get(
        f"/api/v1/namespaces/{namespace}/pods", query={"fieldSelector": "spec.nodeName=n1"}
    )
    assert [i["metadata"]["name"] for i in reply.body["items"]] == ["a"]
    unscheduled = await http.get(
        f"/api/v1/namespaces/{namespace}/pods", query={"fieldSelector": "spec.nodeName="}
    )
    assert [i["metadata"]["name"] for i in unscheduled.body["items"]] == ["b"]


async def test_pagination(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 5)
    first = await http.get(cm_path(namespace), query={"limit": 2})
    # The test's names sort before whatever the cluster publishes in every namespace.
    assert [i["metadata"]["name"] for i in first.body["items"]] == ["cm-00", "cm-01"]
    snapshot = first.body["metadata"]["resourceVersion"]
    whole = await http.get(
        cm_path(namespace), query={"resourceVersion": snapshot, "resourceVersionMatch": "Exact"}
    )
    assert first.body["metadata"]["remainingItemCount"] == len(whole.body["items"]) - 2
    # A change after the first page does not show in the later pages: one consistent snapshot.
    await http.post(cm_path(namespace), {"metadata": {"name": "cm-99"}})
    await http.delete(cm_path(namespace, "cm-03"))
    pages = [first.body]
    while "continue" in pages[-1]["metadata"]:
        page = await http.get(
            cm_path(namespace), query={"limit": 2, "continue": pages[-1]["metadata"]["continue"]}
        )
        assert page.status == 200, page.body
        assert page.body["metadata"]["resourceVersion"] == snapshot
        assert len(page.body["items"]) <= 2
        pages.append(page.body)
    assert [len(p["items"]) for p in pages[:-1]] == [2] * (len(pages) - 1)
    assert mine(pages[1]["items"]) == ["cm-02", "cm-03"]
    paged = [i["metadata"]["name"] for p in pages for i in p["items"]]
    assert paged == [i["metadata"]["name"] for i in whole.body["items"]]
    assert mine([i for p in pages for i in p["items"]]) == ["cm-00", "cm-01", "cm-02", "cm-03", "cm-04"]


async def test_pagination_with_a_selector(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 6)
    first = await http.get(cm_path(namespace), query={"limit": 2, "labelSelector": "parity=odd"})
    assert [i["metadata"]["name"] for i in first.body["items"]] == ["cm-01", "cm-03"]
    assert "remainingItemCount" not in first.body["metadata"]
    rest = await http.get(
        cm_path(namespace),
        query={"limit": 2, "labelSelector": "parity=odd", "continue": first.body["metadata"]["continue"]},
    )
    assert [i["metadata"]["name"] for i in rest.body["items"]] == ["cm-05"]


async def test_invalid_continue_is_400(http: Http, namespace: str) -> None:
    reply = await http.get(cm_path(namespace), query={"limit": 1, "continue": "not-a-token"})
    assert reply.status == 400
    assert reply.body["reason"] == "BadRequest"


@pytest.mark.fake_only
async def test_expired_continue_is_410(http: Http, namespace: str, cluster: ClusterHandle) -> None:
    await make_configmaps(http, namespace, 3)
    first = await http.get(cm_path(namespace), query={"limit": 1})
    await http.post(cm_path(namespace), {"metadata": {"name": "newer"}})
    cluster.fake.compact()  # the first page's resourceVersion is now older than the oldest kept
    reply = await http.get(
        cm_path(namespace), query={"limit": 1, "continue": first.body["metadata"]["continue"]}
    )
    assert reply.status == 410
    assert reply.body["reason"] == "Expired"
    assert reply.body["message"].startswith("The provided continue parameter is too old")


async def test_exact_resource_version_lists_the_past(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 2)
    before = (await http.get(cm_path(namespace))).body["metadata"]["resourceVersion"]
    await http.post(cm_path(namespace), {"metadata": {"name": "later"}})
    await http.put(cm_path(namespace, "cm-00"), {"metadata": {"name": "cm-00"}, "data": {"changed": "yes"}})
    then = await http.get(
        cm_path(namespace), query={"resourceVersion": before, "resourceVersionMatch": "Exact"}
    )
    assert then.status == 200
    assert mine(then.body["items"]) == ["cm-00", "cm-01"]
    assert "data" not in then.body["items"][0]
    assert then.body["metadata"]["resourceVersion"] == before


async def test_list_options_are_validated(http: Http, namespace: str) -> None:
    """resourceVersionMatch needs a resourceVersion, no continue, a known value, and Exact not "0":
    422 Invalid ListOptions (ValidateListOptions), every error listed."""
    alone = await http.get(cm_path(namespace), query={"resourceVersionMatch": "Exact"})
    assert alone.status == 422, alone.body
    assert alone.body["reason"] == "Invalid"
    assert alone.body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided"
    )
    assert alone.body["details"] == {
        "group": "meta.k8s.io",
        "kind": "ListOptions",
        "causes": [
            {
                "reason": "FieldValueForbidden",
                "message": "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                "field": "resourceVersionMatch",
            }
        ],
    }
    unknown = await http.get(
        cm_path(namespace), query={"resourceVersion": "1", "resourceVersionMatch": "Newest"}
    )
    assert unknown.status == 422
    assert unknown.body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: "Newest": '
        'supported values: "Exact", "NotOlderThan", ""'
    )
    zero = await http.get(cm_path(namespace), query={"resourceVersion": "0", "resourceVersionMatch": "Exact"})
    assert zero.status == 422
    assert zero.body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
    )


async def test_resource_version_zero_is_accepted(http: Http, namespace: str) -> None:
    await make_configmaps(http, namespace, 3)

    async def listed() -> list[str]:
        # "0" is any version: a real server answers from its watch cache, which may not have
        # the newest write yet (kube-apiserver v1.36.2 once listed cm-00 and cm-01 only).
        reply = await http.get(cm_path(namespace), query={"resourceVersion": "0"})
        assert reply.status == 200
        names = mine(reply.body["items"])
        return names if len(names) == 3 else []

    assert await wait_for(listed, timeout=30) == ["cm-00", "cm-01", "cm-02"]
    newer = await http.get(
        cm_path(namespace), query={"resourceVersion": "1", "resourceVersionMatch": "NotOlderThan"}
    )
    assert newer.status == 200
