"""The PodSet API: parse_spec (defaults, API-server-worded errors) and the CRD generated from it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from memop.podset import DEFINITION
from memop.podset.api import DEFAULT_REPLICAS, PODSETS, SPEC_SCHEMA, InvalidSpec, PodSetSpec, parse_spec
from memop.podset.crd import crd, crd_yaml
from memop.runtime.client.client import Client
from memop.runtime.client.errors import Invalid
from memop.runtime.client.resources import NAMESPACES
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import install_crd

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def podset(spec: Any = None, name: str = "ps") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize("spec", [None, {}, {"replicas": None, "template": None}])
def test_an_empty_spec_takes_the_defaults(spec: Any) -> None:
    assert parse_spec(podset(spec)) == PodSetSpec(replicas=DEFAULT_REPLICAS, template=None)
    assert SPEC_SCHEMA["properties"]["replicas"]["default"] == DEFAULT_REPLICAS


def test_replicas_and_template_are_kept() -> None:
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Always", "containers": []}}
    assert parse_spec(podset({"replicas": 3.0, "template": template})) == PodSetSpec(3, template)
    assert parse_spec(podset({"replicas": 0})).replicas == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"replicas": -1},
            "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
        ),
        (
            {"replicas": 2**31},
            "spec.replicas: Invalid value: 2147483648: spec.replicas in body should be less than or"
            " equal to 2147483647",
        ),
        (
            {"replicas": "3"},
            'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
        ),
        (
            {"replicas": True},
            'spec.replicas: Invalid value: "boolean": spec.replicas in body must be of type integer:'
            ' "boolean"',
        ),
        (
            {"template": []},
            'spec.template: Invalid value: "array": spec.template in body must be of type object: "array"',
        ),
        (
            {"template": {"metadata": {"labels": {"a": 1}}}},
            'spec.template.metadata.labels.a: Invalid value: "integer": spec.template.metadata.labels.a'
            ' in body must be of type string: "integer"',
        ),
        (
            {"template": {"metadata": "x"}},
            'spec.template.metadata: Invalid value: "string": spec.template.metadata in body must be of'
            ' type object: "string"',
        ),
        (
            {"template": {"spec": 5}},
            'spec.template.spec: Invalid value: "integer": spec.template.spec in body must be of type'
            ' object: "integer"',
        ),
        (
            {"template": {"spec": {"restartPolicy": "Never"}}},
            'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"',
        ),
    ],
)
def test_bad_fields_are_named_as_the_api_server_names_them(spec: Any, message: str) -> None:
    with pytest.raises(InvalidSpec) as raised:
        parse_spec(podset(spec))
    assert str(raised.value) == message


def test_every_error_is_reported_and_nothing_else_is_raised() -> None:
    with pytest.raises(InvalidSpec) as raised:
        parse_spec(podset({"replicas": -1, "template": {"metadata": {"annotations": []}}}, name="n" * 64))
    assert len(raised.value.messages) == 3
    assert str(raised.value).startswith('[metadata.name: Invalid value: "nnn')
    for junk in ([], "spec", 7):
        with pytest.raises(InvalidSpec, match=r"spec in body must be of type object"):
            parse_spec({"metadata": None, "spec": junk})


def test_the_committed_crd_and_samples_are_the_generated_ones() -> None:
    assert (MANIFESTS / "crd/batch.tutorial.kubebuilder.io_podsets.yaml").read_text() == crd_yaml()
    for name, sample in DEFINITION.samples().items():
        assert yaml.safe_load((MANIFESTS / "samples" / name).read_text()) == sample
    assert DEFINITION.crds() == [crd()]
    first = crd()
    first["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["default"] = "changed"
    assert crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["default"] == {}


def test_the_crd_names_and_columns() -> None:
    spec = crd()["spec"]
    assert (spec["group"], spec["names"]["kind"], spec["names"]["plural"], spec["scope"]) == (
        "batch.tutorial.kubebuilder.io", "PodSet", "podsets", "Namespaced"
    )  # fmt: skip
    [version] = spec["versions"]
    assert version["subresources"] == {"status": {}}
    columns = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("Desired", ".spec.replicas"),
        ("Ready", ".status.readyReplicas"),
        ("Age", ".metadata.creationTimestamp"),
    ]


async def test_the_server_defaults_validates_and_takes_the_samples() -> None:
    async with ApiServer() as server, ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="test")
        await install_crd(client, crd())
        namespace = f"unit-{uuid.uuid4().hex[:8]}"
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
        for sample in DEFINITION.samples().values():
            created = await client.create(PODSETS, sample, namespace)
            assert parse_spec(created).replicas == (sample["spec"] or {}).get("replicas", DEFAULT_REPLICAS)
        empty = await client.create(PODSETS, {**podset(None, "empty"), **_kind()}, namespace)
        assert empty["spec"] == {"replicas": 1}
        with pytest.raises(Invalid, match=r"spec\.replicas in body should be greater than or equal to 0"):
            await client.create(PODSETS, {**podset({"replicas": -1}, "neg"), **_kind()}, namespace)


def _kind() -> dict[str, str]:
    return {"apiVersion": PODSETS.api_version, "kind": PODSETS.kind}
