"""The MyPod API: its CRD (committed file == generator output, the tutorial's JSON names,
printer columns that point at fields memop sets), the tutorial's sample applying unchanged, the
spec parser, and the definition the manager runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from memop import mypod
from memop.mypod.api import MYPODS, InvalidSpec, MyPodSpec, parse_spec
from memop.mypod.crd import crd, crd_yaml
from memop.runtime.client.client import Client
from memop.runtime.client.resources import NAMESPACES
from memop.testing.apiserver.server import ApiServer
from memop.testing.operator import install_crd

REPO = Path(__file__).resolve().parents[2]
SAMPLE_FILE = REPO / "manifests/samples/harryyann.github.io_v1_mypod.yaml"


def test_committed_crd_is_the_generated_one() -> None:
    committed = REPO / "manifests/crd/harryyann.github.io_mypods.yaml"
    assert committed.read_text() == crd_yaml(), "regenerate: python -m memop manifests crd"
    assert yaml.safe_load(crd_yaml()) == crd()


def test_names_and_the_tutorials_fields() -> None:
    spec = crd()["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"], spec["names"]["plural"]) == (
        "harryyann.github.io", "Namespaced", "MyPod", "mypods"
    )  # fmt: skip
    (version,) = spec["versions"]
    assert (version["name"], version["subresources"]) == ("v1", {"status": {}})
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    assert set(schema["spec"]["properties"]) == {"podAnnotations", "podLabels", "podSpec"}
    assert schema["spec"]["properties"]["podSpec"] == {
        "description": schema["spec"]["properties"]["podSpec"]["description"],
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    status = schema["status"]["properties"]
    tutorials = {"podPhase", "podIp", "nodeIp", "createdTimestamp"}
    assert set(status) == {*tutorials, "observedGeneration", "conditions"}
    assert status["createdTimestamp"]["format"] == "int64"


def test_printer_columns_point_at_fields_memop_sets() -> None:
    (version,) = crd()["spec"]["versions"]
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Phase"] == ".status.podPhase"  # the tutorial's said .status.phase: never set
    assert columns["PodIp"] == ".status.podIp"
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    for path in columns.values():
        if path.startswith(".status."):
            assert path.removeprefix(".status.").split("[")[0] in status


def test_the_committed_sample_is_the_definitions_and_the_tutorials() -> None:
    committed = yaml.safe_load(SAMPLE_FILE.read_text())
    assert {SAMPLE_FILE.name: committed} == mypod.DEFINITION.samples()
    assert committed["metadata"] == {"name": "mypod-sample", "namespace": "test-mypod"}
    spec = parse_spec(committed)
    assert spec.pod_labels == {"sym-app": "mypod"}
    assert spec.pod_spec["nodeSelector"] == {"project": "test"}


async def test_the_sample_applies_unchanged() -> None:
    async with ApiServer() as server, ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="test")
        await install_crd(client, crd())
        await client.create(NAMESPACES, {"metadata": {"name": "test-mypod"}})
        sample = yaml.safe_load(SAMPLE_FILE.read_text())
        created = await client.create(MYPODS, sample)
        assert created["spec"] == sample["spec"]


def test_a_name_too_long_for_the_label_is_refused_by_the_crd() -> None:
    # Evaluated by a real API server (CEL); memop reports a pod refused for it as PodInvalid.
    (rule,) = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"]
    assert rule["rule"] == "size(self.metadata.name) <= 63"


def test_parse_spec_reads_the_spec_as_written() -> None:
    pod_spec = {"containers": [{"name": "c"}]}
    obj = {"spec": {"podSpec": pod_spec, "podLabels": None, "podAnnotations": {"a": "b"}}}
    spec = parse_spec(obj)
    assert spec == MyPodSpec({"containers": [{"name": "c"}]}, {}, {"a": "b"})
    spec.pod_spec["containers"].append({})  # a copy: the cached object is never changed
    assert obj["spec"]["podSpec"] == {"containers": [{"name": "c"}]}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({}, "spec.podSpec: Required value"),
        ({"spec": "x"}, "spec.podSpec: Required value"),
        ({"spec": {"podSpec": []}}, 'spec.podSpec: Invalid value: "array"'),
        (
            {"spec": {"podSpec": {}, "podLabels": {"app": 1}}},
            'spec.podLabels.app: Invalid value: "integer": spec.podLabels.app in body must be of type string',
        ),
        ({"spec": {"podSpec": {}, "podAnnotations": "x"}}, "spec.podAnnotations: Invalid value"),
    ],
)
def test_parse_spec_refuses_what_the_schema_refuses(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(obj)
    assert message in str(caught.value)


def test_the_definition() -> None:
    definition = mypod.DEFINITION
    assert definition.name == "mypod"
    assert [c["metadata"]["name"] for c in definition.crds()] == ["mypods.harryyann.github.io"]
    sent = {(r.group, r.resource, r.verb) for r in definition.rules if r.sent}
    assert sent == {
        ("harryyann.github.io", "mypods", "list"),
        ("harryyann.github.io", "mypods", "watch"),
        ("harryyann.github.io", "mypods/status", "patch"),
        *(("", "pods", verb) for verb in ("list", "watch", "create", "delete")),
    }
    assert [r.triple for r in definition.rules if not r.sent] == [
        ("harryyann.github.io", "mypods/finalizers", "update")
    ]
