"""memop imports only the parts of kubernetes_asyncio it uses, and the rest on demand.

Each test runs a fresh interpreter: which modules are imported is process state."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def run(code: str, *, path: Path | None = None) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; it prints one JSON object, returned here."""
    env_path = [str(path)] if path else []
    prelude = f"import sys; sys.path[:0] = {env_path!r}\n"
    out = subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


LOADED = "len([m for m in sys.modules if m.partition('.')[0] == 'kubernetes_asyncio'])"


def test_memop_loads_a_few_modules_of_kubernetes_asyncio_not_its_generated_classes() -> None:
    result = run(
        f"""
import json, sys
import memop.cli.app
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio import config
print(json.dumps({{
    "loaded": {LOADED},
    "models": "kubernetes_asyncio.client.models.v1_pod" in sys.modules,
    "api_client": ApiClient.__module__,
    "configuration": Configuration.__module__,
    "config": callable(config.load_kube_config) and callable(config.load_incluster_config),
}}))
"""
    )
    assert result["models"] is False
    assert isinstance(result["loaded"], int)
    assert result["loaded"] < 30  # the whole library is about 850 modules
    assert result["api_client"] == "kubernetes_asyncio.client.api_client"
    assert result["configuration"] == "kubernetes_asyncio.client.configuration"
    assert result["config"] is True


def test_any_other_name_loads_the_package_whole_for_whoever_asks() -> None:
    result = run(
        f"""
import json, sys
import memop
before = {LOADED}
from kubernetes_asyncio.client import V1Pod, CoreV1Api, ApiClient
import kubernetes_asyncio
from kubernetes_asyncio.client.models import V1ObjectMeta
print(json.dumps({{
    "before": before,
    "after": {LOADED},
    "pod": V1Pod(metadata=V1ObjectMeta(name="p")).metadata.name,
    "api": CoreV1Api.__name__,
    "watch": kubernetes_asyncio.watch.Watch.__name__,
    "same_client": ApiClient is kubernetes_asyncio.client.api_client.ApiClient,
}}))
"""
    )
    assert isinstance(result["before"], int)
    assert isinstance(result["after"], int)
    assert result["after"] > result["before"] + 500
    assert result["pod"] == "p"
    assert result["api"] == "CoreV1Api"
    assert result["watch"] == "Watch"
    assert result["same_client"] is True


def test_a_missing_name_is_still_an_attribute_error() -> None:
    result = run(
        """
import json
import memop
import kubernetes_asyncio.client as client
try:
    client.NoSuchThing
except AttributeError as error:
    print(json.dumps({"error": str(error)}))
"""
    )
    assert "NoSuchThing" in str(result["error"])


def test_nothing_changes_when_kubernetes_asyncio_was_imported_first() -> None:
    result = run(
        f"""
import json, sys
import kubernetes_asyncio.client
whole = {LOADED}
from memop.runtime.client import k8simport
print(json.dumps({{"installed": k8simport.install(), "whole": whole, "after": {LOADED}}}))
"""
    )
    assert result == {"installed": False, "whole": result["whole"], "after": result["whole"]}


def test_an_unexpected_layout_falls_back_to_the_plain_import(tmp_path: Path) -> None:
    """Another kubernetes_asyncio whose client is no package: imported the plain way."""
    (tmp_path / "kubernetes_asyncio").mkdir()
    (tmp_path / "kubernetes_asyncio" / "__init__.py").write_text("FAKE = True\n")
    (tmp_path / "kubernetes_asyncio" / "client.py").write_text("")
    result = run(
        """
import json, sys
from memop.runtime.client import k8simport
installed = k8simport.install()
import kubernetes_asyncio
print(json.dumps({"installed": installed, "fake": getattr(kubernetes_asyncio, "FAKE", False)}))
""",
        path=tmp_path,
    )
    assert result == {"installed": False, "fake": True}


@pytest.mark.parametrize("module", ["memop.cli.main", "memop.cli.app"])
def test_the_operator_process_does_not_import_the_test_server_or_cryptography(module: str) -> None:
    result = run(
        f"""
import json, sys
import {module}
print(json.dumps({{"loaded": sorted(m for m in ("memop.testing.apiserver.server", "memop.cli.demo",
    "cryptography", "memop.manifests.command") if m in sys.modules)}}))
"""
    )
    assert result == {"loaded": []}
