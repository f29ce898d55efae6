"""``python -m memop.testing serve --apply``: objects from YAML files created before the server
says it is ready (memop.testing.apply), so that a project's operator finds its CRDs and samples."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration

from memop.runtime import CONFIGMAPS, NAMESPACES, Client, Resource
from memop.testing.apiserver.server import ApiServer
from memop.testing.apply import ApplyError, create_objects, load_objects
from memop.testing.process import serving

WIDGETS = Resource("example.com", "v1", "widgets", "Widget")
CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
"""
SAMPLES = """\
# two documents, the comment is none
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: small, namespace: shop}
spec: {size: 1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: b}
"""


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    (tmp_path / "crd").mkdir()
    (tmp_path / "crd/widgets.yaml").write_text(CRD)
    (tmp_path / "crd/kustomization.yaml").write_text("resources: [widgets.yaml]\n")
    (tmp_path / "samples").mkdir()
    (tmp_path / "samples/b.yaml").write_text(SAMPLES)
    (tmp_path / "samples/a.yml").write_text(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: first}\n"
    )
    (tmp_path / "samples/notes.txt").write_text("not YAML: skipped\n")
    return tmp_path


def test_load_objects_reads_folders_in_name_order_skipping_kustomizations(manifests: Path) -> None:
    objects = load_objects([manifests / "samples", manifests / "crd"])
    assert [(o.obj["kind"], o.obj["metadata"]["name"]) for o in objects] == [
        ("Widget", "first"),
        ("Widget", "small"),
        ("ConfigMap", "settings"),
        ("CustomResourceDefinition", "widgets.example.com"),
    ]
    assert objects[2].source == f"{manifests / 'samples/b.yaml'}#2"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("a: [", "cannot be read as YAML"),
        ("- 1\n", "not a Kubernetes object"),
        ("kind: ConfigMap\nmetadata: {name: x}\n", "apiVersion and kind"),
        ("apiVersion: v1\nkind: ConfigMap\n", "has no metadata.name"),
    ],
)
def test_load_objects_refuses_what_is_not_an_object(tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(ApplyError, match=error) as raised:
        load_objects([tmp_path / "bad.yaml"])
    assert "\n" not in str(raised.value)
    with pytest.raises(ApplyError, match="no such file"):
        load_objects([tmp_path / "missing"])


async def test_create_objects_creates_crds_first_then_the_rest(manifests: Path) -> None:
    objects = load_objects([manifests / "samples", manifests / "crd"])
    async with ApiServer() as server, ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="test")
        assert await create_objects(client, objects) == 4
        assert (await client.get(WIDGETS, "small", "shop"))["spec"] == {"size": 1}
        assert (await client.get(WIDGETS, "first", "default"))["metadata"]["namespace"] == "default"
        assert (await client.get(CONFIGMAPS, "settings", "default"))["data"] == {"a": "b"}
        await client.get(NAMESPACES, "shop")
        # Again: everything exists already, and is left as it is.
        assert await create_objects(client, objects) == 0
        await client.close()


async def test_create_objects_names_an_unknown_kind_or_a_refused_object(tmp_path: Path) -> None:
    (tmp_path / "unknown.yaml").write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    (tmp_path / "crd.yaml").write_text(CRD)
    (tmp_path / "bad.yaml").write_text(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: many}\n"
    )
    async with ApiServer() as server, ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="test")
        with pytest.raises(ApplyError, match=r"unknown\.yaml: unknown kind Widget \(example\.com/v1\)"):
            await create_objects(client, load_objects([tmp_path / "unknown.yaml"]))
        with pytest.raises(ApplyError, match=r"bad\.yaml: the API server refused the Widget: .*spec\.size"):
            await create_objects(client, load_objects([tmp_path / "crd.yaml", tmp_path / "bad.yaml"]))
        await client.close()


async def test_serve_applies_before_writing_its_kubeconfig(manifests: Path, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with serving(kubeconfig, "--apply", str(manifests / "crd"), "--apply", str(manifests / "samples")):
        configuration = Configuration()
        await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        async with ApiClient(configuration) as api:
            client = Client(api, user_agent="test")
            # Ready means applied: no wait.
            assert (await client.get(WIDGETS, "small", "shop"))["spec"] == {"size": 1}
            await client.close()


def test_serve_refuses_a_bad_file_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memop.testing",
            "serve",
            "--kubeconfig",
            str(tmp_path / "k"),
            "--apply",
            "missing",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "python -m memop.testing serve: error: missing: no such file or folder"
    ]
    assert not (tmp_path / "k").exists()
