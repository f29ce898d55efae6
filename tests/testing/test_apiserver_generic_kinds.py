"""Built-in kinds served generically from kube-apiserver v1.36's OpenAPI v3 schemas
(memop.testing.kinds.generic): typed decoding, required fields, the status subresource, field
selectors and strategic merge patches, over HTTP.

The decoder's messages are encoding/json's (``json: cannot unmarshal <JSON type> into Go struct
field <Struct>.<path> of type <Go type>``), which is what kube-apiserver answers with a 400 for
every built-in kind, as the hand-written kinds' tests pin for theirs.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.apiserver import typeddecode
from memop.testing.apiserver.builtinapi import LISTED_ONLY_REASONS
from memop.testing.auth.reviews import REVIEW_RESOURCES
from memop.testing.kinds.generic import GenericStrategy
from memop.testing.kinds.registry import BUILTIN_KINDS, FAITHFUL_KINDS
from tests.testing.test_apiserver_discovery import _certificate_request

if TYPE_CHECKING:
    from tests.conftest import Http

STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


def _storage_class(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "memop.test/none",
        **fields,
    }


def _csr(name: str, signer: str = "memop.test/none", **fields: Any) -> dict[str, Any]:
    """A CertificateSigningRequest kube-apiserver v1.36.2 accepts: a PEM request and usages."""
    spec = {"request": _certificate_request(name), "signerName": signer, "usages": ["digital signature"]}
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": spec,
        **fields,
    }


def test_the_listed_only_reviews_are_the_ones_the_server_answers() -> None:
    review_groups = ("authentication.k8s.io", "authorization.k8s.io")
    assert {key for key in LISTED_ONLY_REASONS if key[0] in review_groups} == REVIEW_RESOURCES


def test_the_kinds_without_a_hand_written_strategy_are_generic() -> None:
    faithful = {kind.rtype for kind in FAITHFUL_KINDS}
    generic = [kind for kind in BUILTIN_KINDS if kind.rtype not in faithful]
    assert generic
    assert all(isinstance(kind.strategy, GenericStrategy) for kind in generic)
    assert all(not isinstance(kind.strategy, GenericStrategy) for kind in FAITHFUL_KINDS)


async def test_unknown_fields_are_dropped_with_a_warning(http: Http) -> None:
    body = _storage_class("gen-unknown", surprise=1, parameters={"a": "b"}, mountOptions=["ro"])
    body["allowedTopologies"] = [{"matchLabelExpressions": [{"key": "k", "values": ["v"], "extra": True}]}]
    reply = await http.post(STORAGE_CLASSES, body)
    assert reply.status == 201, reply.body
    assert "surprise" not in reply.body
    assert reply.body["allowedTopologies"] == [{"matchLabelExpressions": [{"key": "k", "values": ["v"]}]}]
    assert reply.body["parameters"] == {"a": "b"}
    warnings = reply.headers.get("Warning", "")
    assert 'unknown field \\"surprise\\"' in warnings or 'unknown field "surprise"' in warnings, warnings
    strict = await http.post(
        STORAGE_CLASSES, _storage_class("gen-strict", surprise=1), query={"fieldValidation": "Strict"}
    )
    assert strict.status == 400
    assert strict.body["message"] == (
        'StorageClass in version "v1" cannot be handled as a StorageClass: strict decoding error: '
        'unknown field "surprise"'
    )
    await http.delete(f"{STORAGE_CLASSES}/gen-unknown")


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        (
            {"allowVolumeExpansion": "yes"},
            "json: cannot unmarshal string into Go struct field StorageClass.allowVolumeExpansion "
            "of type bool",
        ),
        (
            {"mountOptions": "ro"},
            "json: cannot unmarshal string into Go struct field StorageClass.mountOptions of type []string",
        ),
        (
            {"parameters": {"a": 1}},
            "json: cannot unmarshal number into Go struct field StorageClass.parameters of type string",
        ),
        (
            {"allowedTopologies": [{"matchLabelExpressions": [{"key": 7}]}]},
            "json: cannot unmarshal number into Go struct field "
            "TopologySelectorLabelRequirement.allowedTopologies.matchLabelExpressions.key of type string",
        ),
        (
            {"allowedTopologies": ["zone"]},
            "json: cannot unmarshal string into Go struct field StorageClass.allowedTopologies "
            "of type v1.TopologySelectorTerm",
        ),
    ],
)
async def test_a_wrong_type_is_a_400_with_the_decoders_message(
    http: Http, fields: dict[str, Any], detail: str
) -> None:
    reply = await http.post(STORAGE_CLASSES, _storage_class("gen-wrong", **fields))
    assert reply.status == 400, reply.body
    assert reply.body["reason"] == "BadRequest"
    assert (
        reply.body["message"] == f'StorageClass in version "v1" cannot be handled as a StorageClass: {detail}'
    )


async def test_integers_are_checked_against_their_go_type(http: Http, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/controllerrevisions"
    body = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "r"},
        "revision": 1.5,
        "data": {"k": "v"},  # a real server refuses a revision without it ("data is mandatory")
    }
    reply = await http.post(path, body)
    assert reply.status == 400
    assert reply.body["message"].endswith(
        "json: cannot unmarshal number 1.5 into Go struct field ControllerRevision.revision of type int64"
    )
    # A required number left out is Go's zero value, as the typed object serialises it.
    del body["revision"]
    created = await http.post(path, body)
    assert created.status == 201, created.body
    assert created.body["revision"] == 0
    assert "generation" not in created.body["metadata"]  # no spec: no generation


async def test_a_missing_required_field_is_a_422(http: Http) -> None:
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": "gen-required"},
        "spec": {"nodeName": "n1", "source": {"persistentVolumeName": "pv1"}},
    }
    reply = await http.post("/apis/storage.k8s.io/v1/volumeattachments", body)
    assert reply.status == 422, reply.body
    assert (
        reply.body["message"]
        == 'VolumeAttachment.storage.k8s.io "gen-required" is invalid: spec.attacher: Required value'
    )
    assert reply.body["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.attacher"}
    ]


async def test_quantities_come_back_canonical(http: Http, namespace: str) -> None:
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": "cap"},
        "storageClassName": "standard",
        "capacity": "2048Ki",
        "maximumVolumeSize": 1.5,
    }
    reply = await http.post(f"/apis/storage.k8s.io/v1/namespaces/{namespace}/csistoragecapacities", body)
    assert reply.status == 201, reply.body
    assert (reply.body["capacity"], reply.body["maximumVolumeSize"]) == ("2Mi", "1500m")
    body["metadata"]["name"], body["capacity"] = "bad", "lots"
    bad = await http.post(f"/apis/storage.k8s.io/v1/namespaces/{namespace}/csistoragecapacities", body)
    assert bad.status == 400
    assert "quantities must match the regular expression" in bad.body["message"]


async def test_a_byte_field_must_be_base64(http: Http) -> None:
    body = _csr("gen-bytes")
    request = body["spec"]["request"]
    body["spec"]["request"] = "no!"
    reply = await http.post(CSRS, body)
    assert reply.status == 400
    assert reply.body["message"] == (
        'CertificateSigningRequest in version "v1" cannot be handled as a CertificateSigningRequest: '
        "illegal base64 data at input byte 2"
    )
    # encoding/json takes a []byte as a list of bytes too
    body["spec"]["request"] = list(base64.b64decode(request))
    created = await http.post(CSRS, body)
    assert created.status == 201, created.body
    assert created.body["spec"]["request"] == request
    await http.delete(f"{CSRS}/gen-bytes")


async def test_status_is_a_subresource_where_v1_36_has_one(http: Http) -> None:
    body = _csr("gen-status", status={"certificate": "Zm9v"})
    created = await http.post(CSRS, body)
    assert created.status == 201, created.body
    assert created.body["status"] == {}  # a client's status is dropped on create
    assert "generation" not in created.body["metadata"]  # its registry keeps none
    obj = created.body
    # (Approved and Denied go through /approval on a real server; Failed is a status condition.)
    obj["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "Test"}]}
    updated = await http.put(f"{CSRS}/gen-status/status", obj)
    assert updated.status == 200, updated.body
    assert updated.body["status"]["conditions"][0]["type"] == "Failed"
    main = dict(updated.body, status={})  # (a CSR's spec is immutable on a real server)
    main["metadata"] = dict(main["metadata"], labels={"memop.test/seen": "yes"})
    again = await http.put(f"{CSRS}/gen-status", main)
    assert again.status == 200, again.body
    assert again.body["status"]["conditions"][0]["type"] == "Failed"  # the main resource keeps status
    assert again.body["metadata"]["labels"] == {"memop.test/seen": "yes"}
    await http.delete(f"{CSRS}/gen-status")


async def test_an_update_without_a_resource_version_is_unconditional(http: Http) -> None:
    assert (await http.post(STORAGE_CLASSES, _storage_class("gen-put"))).status == 201
    try:
        reply = await http.put(f"{STORAGE_CLASSES}/gen-put", _storage_class("gen-put", mountOptions=["ro"]))
        assert reply.status == 200, reply.body
        assert reply.body["mountOptions"] == ["ro"]
    finally:
        await http.delete(f"{STORAGE_CLASSES}/gen-put")


async def test_generation_and_delete_answers_follow_the_kinds_registry(http: Http) -> None:
    """As pkg/registry of v1.36 has it: a DeviceClass counts generations and its DELETE answers
    with the object; a StorageClass answers with the object and keeps no generation; an
    IPAddress does neither."""
    classes = "/apis/resource.k8s.io/v1/deviceclasses"
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gen-dc"}}
    created = await http.post(classes, {**device_class, "spec": {}})
    assert created.body["metadata"]["generation"] == 1
    changed = await http.put(
        f"{classes}/gen-dc", {**created.body, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
    )
    assert changed.body["metadata"]["generation"] == 2
    deleted = await http.delete(f"{classes}/gen-dc")
    assert (deleted.status, deleted.body["kind"]) == (200, "DeviceClass")
    assert (await http.post(STORAGE_CLASSES, _storage_class("gen-del"))).body["metadata"].get(
        "generation"
    ) is None
    assert (await http.delete(f"{STORAGE_CLASSES}/gen-del")).body["kind"] == "StorageClass"
    addresses = "/apis/networking.k8s.io/v1/ipaddresses"
    address = {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "10.9.8.7"}}
    ref = {"group": "", "resource": "services", "name": "s", "namespace": "default"}
    assert (await http.post(addresses, {**address, "spec": {"parentRef": ref}})).status == 201
    gone = await http.delete(f"{addresses}/10.9.8.7")
    assert (gone.body["kind"], gone.body["status"]) == ("Status", "Success")


async def test_field_selectors_on_name_and_namespace(http: Http, namespace: str) -> None:
    for name in ("gen-a", "gen-b"):
        assert (await http.post(STORAGE_CLASSES, _storage_class(name))).status == 201
    try:
        listed = await http.get(STORAGE_CLASSES, query={"fieldSelector": "metadata.name=gen-b"})
        assert [item["metadata"]["name"] for item in listed.body["items"]] == ["gen-b"]
        assert listed.body["kind"] == "StorageClassList"
        other = await http.get(STORAGE_CLASSES, query={"fieldSelector": "metadata.name!=gen-b"})
        assert "gen-a" in [item["metadata"]["name"] for item in other.body["items"]]
        bad = await http.get(STORAGE_CLASSES, query={"fieldSelector": "provisioner=x"})
        assert bad.status == 400
        assert bad.body["message"] == (
            '"provisioner" is not a known field selector: only "metadata.name", "metadata.namespace"'
        )
    finally:
        for name in ("gen-a", "gen-b"):
            await http.delete(f"{STORAGE_CLASSES}/{name}")
    path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "s"}}
    assert (await http.post(path, dict(slice_, addressType="IPv4", endpoints=[]))).status == 201
    everywhere = await http.get(
        "/apis/discovery.k8s.io/v1/endpointslices", query={"fieldSelector": f"metadata.namespace={namespace}"}
    )
    assert [item["metadata"]["name"] for item in everywhere.body["items"]] == ["s"]


async def test_the_field_labels_of_a_kinds_conversion(http: Http) -> None:
    """A CSR selects on spec.signerName (certificates/v1's field-label conversion) and words an
    unknown label as core/v1 does; a ResourceSlice's conversion names its kind."""
    for name, signer in (("gen-sign-a", "memop.test/a"), ("gen-sign-b", "memop.test/b")):
        created = await http.post(CSRS, _csr(name, signer))
        assert created.status == 201, created.body
    try:
        listed = await http.get(CSRS, query={"fieldSelector": "spec.signerName=memop.test/b"})
        assert [item["metadata"]["name"] for item in listed.body["items"]] == ["gen-sign-b"]
        bad = await http.get(CSRS, query={"fieldSelector": "spec.usages=x"})
        assert (bad.status, bad.body["message"]) == (400, "field label not supported: spec.usages")
        # The conversion lists no metadata.namespace: a cluster-scoped CSR has none to select on.
        no_namespace = await http.get(CSRS, query={"fieldSelector": "metadata.namespace=x"})
        assert no_namespace.body["message"] == "field label not supported: metadata.namespace"
    finally:
        for name in ("gen-sign-a", "gen-sign-b"):
            await http.delete(f"{CSRS}/{name}")
    slices = await http.get("/apis/resource.k8s.io/v1/resourceslices", query={"fieldSelector": "spec.pool=x"})
    assert slices.body["message"] == (
        "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.pool"
    )
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gen-node"}}
    assert (await http.post("/api/v1/nodes", node)).status == 201
    try:
        # An absent spec.unschedulable reads as Go's false, as NodeToSelectableFields formats it.
        for value, names in (("false", ["gen-node"]), ("true", [])):
            nodes = await http.get("/api/v1/nodes", query={"fieldSelector": f"spec.unschedulable={value}"})
            assert [
                n["metadata"]["name"] for n in nodes.body["items"] if n["metadata"]["name"] == "gen-node"
            ] == names
    finally:
        await http.delete("/api/v1/nodes/gen-node")


async def test_patches_merge_and_a_patch_that_does_not_decode_is_a_422(http: Http) -> None:
    # (A class's parameters are immutable on a real server: the maps merged are metadata's.)
    created = _storage_class("gen-smp")
    created["metadata"]["annotations"] = {"a": "1"}
    assert (await http.post(STORAGE_CLASSES, created)).status == 201
    try:
        patch = {"metadata": {"labels": {"x": "y"}, "annotations": {"b": "2"}}, "allowVolumeExpansion": True}
        reply = await http.patch(
            f"{STORAGE_CLASSES}/gen-smp", patch, content_type="application/strategic-merge-patch+json"
        )
        assert reply.status == 200, reply.body
        assert reply.body["metadata"]["annotations"] == {"a": "1", "b": "2"}
        assert reply.body["metadata"]["labels"] == {"x": "y"}
        assert reply.body["allowVolumeExpansion"] is True
        wrong = await http.patch(
            f"{STORAGE_CLASSES}/gen-smp", {"provisioner": 5}, content_type="application/merge-patch+json"
        )
        assert wrong.status == 422, wrong.body
        assert wrong.body["details"]["causes"][0]["field"] == "patch"
        assert wrong.body["message"].endswith(
            # (a plain string: of a named one, such as reclaimPolicy, Go names the type,
            # v1.PersistentVolumeReclaimPolicy, which typed decoding does not model)
            "json: cannot unmarshal number into Go struct field StorageClass.provisioner of type string"
        )
    finally:
        await http.delete(f"{STORAGE_CLASSES}/gen-smp")


async def test_a_strategic_merge_patch_merges_lists_by_the_schemas_merge_key(http: Http) -> None:
    path = "/apis/storage.k8s.io/v1/csinodes"
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "gen-csinode"},
        "spec": {"drivers": [{"name": "a.memop.test", "nodeID": "n1"}]},
    }
    assert (await http.post(path, body)).status == 201
    try:
        patch = {"spec": {"drivers": [{"name": "b.memop.test", "nodeID": "n2"}]}}
        reply = await http.patch(
            f"{path}/gen-csinode", patch, content_type="application/strategic-merge-patch+json"
        )
        assert reply.status == 200, reply.body
        # CSINodeSpec.drivers: patchStrategy=merge, patchMergeKey=name.
        assert [d["name"] for d in reply.body["spec"]["drivers"]] == ["b.memop.test", "a.memop.test"]
    finally:
        await http.delete(f"{path}/gen-csinode")


def test_go_type_names() -> None:
    spec = typeddecode.structural("io.k8s.api.core.v1.PodSpec")
    properties = spec["properties"]
    assert typeddecode.go_type(properties["containers"]) == "[]v1.Container"
    assert typeddecode.go_type(properties["nodeSelector"]) == "map[string]string"
    assert typeddecode.go_type(properties["overhead"]) == "map[string]resource.Quantity"
    assert typeddecode.go_type(properties["activeDeadlineSeconds"]) == "int64"
