"""Adding a kind the in-memory server lacks: a ``Kind`` (a ResourceType and an optional strategy)
through the plugin's ``extra_kinds`` fixture, ``ApiServer(extra_kinds=...)`` and ``python -m
memop.testing serve --extra-kinds module:attribute``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest

from memop.testing import Kind, ResourceType, Strategy
from memop.testing.apiserver.builtinapi import builtin_resources
from memop.testing.apiserver.objects import JsonDict, invalid
from memop.testing.apiserver.schema import FieldError
from memop.testing.apiserver.server import ApiServer
from memop.testing.kinds.generic import GenericStrategy
from memop.testing.kinds.registry import KindSpecError, check_extra_kinds, load_kinds
from memop.testing.process import serving

if TYPE_CHECKING:
    from tests.conftest import Http

pytestmark = pytest.mark.fake_only
KUBECTL = shutil.which("kubectl")

NODE_METRICS = ResourceType("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False, "nodemetrics")
POD_METRICS = ResourceType("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", True, "podmetrics")


class WindowStrategy(Strategy):
    """PodMetrics: a default window and a check of it, as a project's strategy would add."""

    generation = False

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        obj.setdefault("window", "30s")
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        window = obj.get("window")
        return (
            [] if str(window).endswith("s") else [invalid("window", window, "must be a duration in seconds")]
        )


METRICS = [Kind(NODE_METRICS), Kind(POD_METRICS, WindowStrategy())]


@pytest.fixture
def extra_kinds() -> list[Any]:
    return METRICS


async def test_extra_kinds_are_discovered_and_served(http: Http, namespace: str) -> None:
    groups = {g["name"]: g for g in (await http.get("/apis")).body["groups"]}
    assert groups["metrics.k8s.io"]["preferredVersion"]["version"] == "v1beta1"
    resources = {r["name"]: r for r in (await http.get("/apis/metrics.k8s.io/v1beta1")).body["resources"]}
    assert (resources["nodes"]["kind"], resources["nodes"]["namespaced"]) == ("NodeMetrics", False)
    assert resources["pods"]["namespaced"] is True
    node = {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": "n1"}}
    node["usage"] = {"cpu": "250m"}
    created = await http.post("/apis/metrics.k8s.io/v1beta1/nodes", node)
    assert created.status == 201, created.body
    assert (await http.get("/apis/metrics.k8s.io/v1beta1/nodes/n1")).body["usage"] == {"cpu": "250m"}
    pods = f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"
    pod = {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics", "metadata": {"name": "p"}}
    assert (await http.post(pods, pod)).body["window"] == "30s"  # the strategy's default
    bad = await http.post(pods, {**pod, "metadata": {"name": "q"}, "window": "1m"})
    assert bad.status == 422
    assert bad.body["message"] == (
        'PodMetrics.metrics.k8s.io "q" is invalid: window: Invalid value: "1m": must be a duration in seconds'
    )


async def test_an_extra_kind_may_not_replace_a_served_one() -> None:
    pods = ResourceType("", "v1", "pods", "Pod", True, "pod")
    with pytest.raises(ValueError, match="already serves pods/v1"):
        ApiServer(extra_kinds=[Kind(pods)])
    with pytest.raises(ValueError, match=re.escape("already serves nodes.metrics.k8s.io/v1beta1")):
        check_extra_kinds([Kind(NODE_METRICS), Kind(NODE_METRICS)])


class ProvisionerStrategy(GenericStrategy):
    """A StorageClass strategy of a test's own: the generic one plus a check of the provisioner."""

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errors = super().validate_create(obj, rtype)
        if obj.get("provisioner") == "forbidden.memop.test":
            errors.append(invalid("provisioner", obj["provisioner"], "not in this test"))
        return errors


async def test_an_extra_kind_may_replace_a_generically_served_one() -> None:
    builtin = builtin_resources()[("storage.k8s.io", "v1", "storageclasses")]
    server = ApiServer(extra_kinds=[Kind(builtin.rtype, ProvisionerStrategy(builtin))])
    await server.start()
    try:
        body = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "sc"}}
        async with aiohttp.ClientSession() as session:
            path = f"{server.url}/apis/storage.k8s.io/v1/storageclasses"
            async with session.post(path, json={**body, "provisioner": "forbidden.memop.test"}) as refused:
                assert refused.status == 422
                assert (await refused.json())["message"] == (
                    'StorageClass.storage.k8s.io "sc" is invalid: provisioner: Invalid value: '
                    '"forbidden.memop.test": not in this test'
                )
            async with session.post(path, json={**body, "provisioner": "x", "surprise": 1}) as created:
                assert created.status == 201  # the rest is the generic strategy's
                assert "surprise" not in await created.json()
    finally:
        await server.stop()


def test_load_kinds_names_what_is_wrong() -> None:
    assert load_kinds(f"{__name__}:METRICS") == tuple(METRICS)
    assert load_kinds(f"{__name__}:NODE_METRICS_KIND") == (NODE_METRICS_KIND,)
    for spec, message in (
        ("no-colon", "'no-colon' is not of the form module:attribute"),
        ("no_such_module_here:X", "cannot import 'no_such_module_here'"),
        (f"{__name__}:MISSING", f"module '{__name__}' has no attribute 'MISSING'"),
        (
            f"{__name__}:NODE_METRICS",
            f"{__name__}:NODE_METRICS is not a memop.testing.Kind or a list of them",
        ),
    ):
        with pytest.raises(KindSpecError) as error:
            load_kinds(spec)
        assert str(error.value).startswith(message)


NODE_METRICS_KIND = Kind(NODE_METRICS)

MODULE = """
from memop.testing import Kind, ResourceType

KINDS = [Kind(ResourceType("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False, "nodemetrics"))]
"""


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_serve_with_extra_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_metrics.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with serving(tmp_path / "kubeconfig", "--extra-kinds", "my_metrics:KINDS") as server:
        assert KUBECTL is not None
        command = [
            KUBECTL,
            "--kubeconfig",
            str(server.kubeconfig),
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1",
        ]
        listed = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert [r["name"] for r in json.loads(listed.stdout)["resources"]] == ["nodes"]


def test_serve_refuses_extra_kinds_it_cannot_load(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "memop.testing",
            "serve",
            "--kubeconfig",
            str(tmp_path / "k"),
            "--extra-kinds",
            "nope",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "python -m memop.testing serve: error: 'nope' is not of the form module:attribute"
    )
