"""``python -m memop manifests bundle``: the OLM bundle, its CSV, and upgrades through ``replaces``.

The ClusterServiceVersions are created for real in the in-memory API server with OLM's own
ClusterServiceVersion and OperatorGroup CRDs installed (tests/olm, from operator-framework/api):
the server validates custom resources against their CRD's schema and prunes unknown fields, so
a CSV that reads back unchanged is one OLM's API accepts, field for field.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from memop.cli.controllers import ALL
from memop.cli.options import parse_run_args
from memop.manifests import olm, rbac
from memop.manifests.command import crd_files
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, Resource
from memop.testing.server import ApiServer
from memop.testing.wait import wait_for
from tests.test_manifests import MANIFESTS, REPO, container, needs_kubectl, one, render

OLM_CRDS = Path(__file__).parent / "olm"
CSVS = Resource("operators.coreos.com", "v1alpha1", "clusterserviceversions", "ClusterServiceVersion")
OPERATOR_GROUPS = Resource("operators.coreos.com", "v1", "operatorgroups", "OperatorGroup")
NAMESPACE = rbac.NAMESPACE


def bundle(tmp_path: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memop", "manifests", "bundle", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )


def read_bundle(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): p.read_text() for p in directory.rglob("*") if p.is_file()}


def csv_of(files: dict[str, str]) -> dict[str, Any]:
    csv: dict[str, Any] = yaml.safe_load(files[olm.CSV_FILE])
    return csv


def files_for(version: str, replaces: str | None = None) -> dict[str, str]:
    options = olm.BundleOptions(version=version, replaces=replaces)
    return olm.bundle_files(options, (REPO / olm.MANAGER_YAML).read_text(), crd_files())


# --- the command and the layout ---------------------------------------------------------------------


def test_the_bundle_has_the_operator_framework_layout(tmp_path: Path) -> None:
    out = bundle(tmp_path, "--version", "0.1.0", "--dir", str(tmp_path / "b"))
    assert out.returncode == 0, out.stderr
    files = read_bundle(tmp_path / "b")
    assert files == files_for("0.1.0")
    crds = {f"manifests/{name}" for name in crd_files() if name != "kustomization.yaml"}
    assert set(files) == {olm.CSV_FILE, *crds, "metadata/annotations.yaml", "bundle.Dockerfile"}
    assert out.stdout.count("wrote ") == len(files)
    # Written again: nothing changes, nothing is written.
    again = bundle(tmp_path, "--version", "0.1.0", "--dir", str(tmp_path / "b"))
    assert (again.returncode, again.stdout) == (0, "")


def test_the_bundles_crds_are_byte_equal_to_manifests_crd(tmp_path: Path) -> None:
    files = files_for("0.1.0")
    crds = {
        name: text for name, text in files.items() if name.startswith("manifests/") and name != olm.CSV_FILE
    }
    # Every CRD memop serves (test_manifests keeps manifests/crd equal to them), byte for byte.
    assert {name.removeprefix("manifests/") for name in crds} == set(crd_files()) - {"kustomization.yaml"}
    committed = {name: (MANIFESTS / "crd" / name.removeprefix("manifests/")).read_text() for name in crds}
    assert crds == committed
    kinds = {yaml.safe_load(text)["spec"]["names"]["kind"] for text in crds.values()}
    assert kinds == {crd["spec"]["names"]["kind"] for d in ALL.values() for crd in d.crds()}


def test_annotations_and_dockerfile_labels_agree() -> None:
    files = files_for("0.1.0")
    annotations = yaml.safe_load(files["metadata/annotations.yaml"])["annotations"]
    assert annotations == {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": "memop",
        "operators.operatorframework.io.bundle.channels.v1": "alpha",
        "operators.operatorframework.io.bundle.channel.default.v1": "alpha",
    }
    lines = files["bundle.Dockerfile"].splitlines()
    labels = dict(line.removeprefix("LABEL ").split("=", 1) for line in lines if line.startswith("LABEL "))
    assert labels == annotations
    assert "FROM scratch" in lines
    assert {"COPY manifests /manifests/", "COPY metadata /metadata/"} <= set(lines)


def test_channels() -> None:
    options = olm.BundleOptions(version="0.2.0", channels=olm.parse_channels("stable, alpha"))
    annotations = olm.bundle_annotations(options)
    assert annotations["operators.operatorframework.io.bundle.channels.v1"] == "stable,alpha"
    assert annotations["operators.operatorframework.io.bundle.channel.default.v1"] == "stable"


@pytest.mark.parametrize("previous", ["0.1.0", "memop.v0.1.0"])
def test_replaces_names_the_previous_csv(previous: str) -> None:
    csv = csv_of(files_for("0.2.0", replaces=previous))
    assert csv["metadata"]["name"] == "memop.v0.2.0"
    assert csv["spec"]["version"] == "0.2.0"
    assert csv["spec"]["replaces"] == "memop.v0.1.0"
    assert "replaces" not in csv_of(files_for("0.1.0"))["spec"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "--version is required"),
        (["--version", "1"], "--version '1' is not a semantic version"),
        (
            ["--version", "0.2.0", "--replaces", "0.2.0"],
            "--replaces '0.2.0' must be older than --version 0.2.0",
        ),
        (["--version", "0.2.0", "--replaces", "0.3.0"], "must be older"),
        (["--version", "0.2.0-rc.1", "--replaces", "0.2.0"], "must be older"),
        (["--version", "0.2.0", "--replaces", "other.v1"], "expected a version or a CSV name"),
        (["--version", "0.2.0", "--channel", "Beta"], "--channel 'Beta': expected channel names"),
        (["--version", "0.2.0", "--print"], "--print is only used with 'memop manifests crd'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    out = bundle(tmp_path, *args, "--dir", str(tmp_path / "b"))
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr.count("\n") == 1
    assert out.stderr.startswith("memop manifests: error: ")
    assert message in out.stderr
    assert not (tmp_path / "b").exists()


def test_bundle_flags_are_refused_by_the_other_manifests(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memop", "manifests", "rbac", "--version", "1.0.0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == "memop manifests: error: --version: only used with 'memop manifests bundle'\n"


def test_outside_the_repository_it_says_where_to_run(tmp_path: Path) -> None:
    out = bundle(tmp_path, "--version", "0.1.0", "--dir", str(tmp_path / "b"), cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr == (
        "memop manifests bundle: error: cannot read manifests/manager/manager.yaml (No such file or "
        "directory): run from the repository root\n"
    )


# --- what the CSV carries, from the same code as the plain manifests ---------------------------------


def test_the_install_strategy_is_manifests_managers_deployment() -> None:
    csv = csv_of(files_for("0.3.0"))
    [deployment] = csv["spec"]["install"]["spec"]["deployments"]
    manager = yaml.safe_load((REPO / olm.MANAGER_YAML).read_text())
    assert deployment["name"] == rbac.PREFIX + manager["metadata"]["name"]
    expected = manager["spec"]
    pod = expected["template"]["spec"]
    pod["serviceAccountName"] = rbac.PREFIX + pod["serviceAccountName"]
    pod["containers"][0]["image"] = "memop:0.3.0"
    pod["containers"][0]["env"] = [
        {
            "name": "WATCH_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}},
        }
    ]
    assert deployment["spec"] == expected
    assert csv["metadata"]["annotations"]["containerImage"] == "memop:0.3.0"


@needs_kubectl
def test_the_csv_deployment_is_the_default_installs_but_for_image_and_watch_namespace() -> None:
    rendered = one(render("default"), "Deployment")
    [deployment] = csv_of(files_for("0.1.0"))["spec"]["install"]["spec"]["deployments"]
    assert deployment["name"] == rendered["metadata"]["name"]
    env = container(deployment).pop("env")
    assert [v["name"] for v in env] == ["WATCH_NAMESPACE"]
    assert deployment["spec"] == rendered["spec"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    assert account == one(render("default"), "ServiceAccount")["metadata"]["name"]


@pytest.mark.parametrize(
    ("targets", "watched"), [("", ()), ("team-a", ("team-a",)), ("team-a,team-b", ("team-a", "team-b"))]
)
def test_memop_watches_the_operator_groups_target_namespaces(targets: str, watched: tuple[str, ...]) -> None:
    """OLM sets olm.targetNamespaces on the pod ("" for an AllNamespaces group); memop's own
    parser reads the CSV's args and WATCH_NAMESPACE as the pod would have them."""
    [deployment] = csv_of(files_for("0.1.0"))["spec"]["install"]["spec"]["deployments"]
    manager = container({"spec": deployment["spec"]})
    [variable] = manager["env"]
    assert variable["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['olm.targetNamespaces']"
    config = parse_run_args(manager["args"], env={"WATCH_NAMESPACE": targets})
    assert config.namespaces == watched
    assert config.leader_elect


def test_permissions_are_memops_rules_for_the_operator_group_to_scope() -> None:
    spec = csv_of(files_for("0.1.0"))["spec"]["install"]["spec"]
    [entry] = spec["permissions"]
    assert entry["serviceAccountName"] == rbac.PREFIX + rbac.SERVICE_ACCOUNT
    assert entry["rules"] == rbac.policy_rules(rbac.Scope.WATCHED) + rbac.policy_rules(rbac.Scope.OPERATOR)
    # Nothing memop needs is cluster-wide whatever the OperatorGroup (no --metrics-secure here).
    assert "clusterPermissions" not in spec
    modes = {m["type"]: m["supported"] for m in csv_of(files_for("0.1.0"))["spec"]["installModes"]}
    assert modes == {
        "OwnNamespace": True,
        "SingleNamespace": True,
        "MultiNamespace": True,
        "AllNamespaces": True,
    }


def test_owned_crds_describe_every_field_and_the_examples_are_the_samples() -> None:
    csv = csv_of(files_for("0.1.0"))
    owned = csv["spec"]["customresourcedefinitions"]["owned"]
    crds = [crd for definition in ALL.values() for crd in definition.crds()]
    assert [(o["name"], o["version"], o["kind"]) for o in owned] == [
        (crd["metadata"]["name"], v["name"], crd["spec"]["names"]["kind"])
        for crd in crds
        for v in crd["spec"]["versions"]
    ]
    for entry, crd in zip(owned, crds, strict=True):
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        for part, key in (("spec", "specDescriptors"), ("status", "statusDescriptors")):
            top = {d["path"] for d in entry[key] if "." not in d["path"]}
            assert top == set(schema.get(part, {}).get("properties", {})), (entry["kind"], part)
            assert all(d["displayName"] for d in entry[key])
    samples = [
        yaml.safe_load((MANIFESTS / "samples" / name).read_text())
        for d in ALL.values()
        for name in d.samples()
    ]
    examples = json.loads(csv["metadata"]["annotations"]["alm-examples"])
    assert sorted(map(json.dumps, examples)) == sorted(map(json.dumps, samples))


def test_descriptors_of_a_nested_schema() -> None:
    schema = {
        "properties": {
            "size": {"type": "integer", "description": "Pods. More text."},
            "paused": {"type": "boolean"},
            "resources": {"type": "object", "properties": {"limits": {}, "requests": {}}},
            "tls": {"type": "object", "properties": {"secretName": {"type": "string"}}},
        }
    }
    assert olm.descriptors(schema, status=False) == [
        {"path": "size", "displayName": "Size", "description": "Pods.", "x-descriptors": [olm.PODS]},
        {"path": "paused", "displayName": "Paused", "x-descriptors": [olm.SWITCH]},
        {"path": "resources", "displayName": "Resources", "x-descriptors": [olm.RESOURCES]},
        {"path": "tls", "displayName": "Tls"},
        {"path": "tls.secretName", "displayName": "Secret Name", "x-descriptors": [olm.TEXT]},
    ]
    assert olm.display_name("memoryLimitMiB") == "Memory Limit MiB"
    assert olm.display_name("observedGeneration") == "Observed Generation"


def test_the_csv_carries_what_operatorhub_shows() -> None:
    spec = csv_of(files_for("0.1.0"))["spec"]
    assert spec["minKubeVersion"] == "1.25.0"
    assert spec["icon"][0]["mediatype"] == "image/svg+xml"
    assert spec["maintainers"]
    assert spec["links"]
    assert spec["provider"]["name"]
    assert set(ALL) <= set(spec["keywords"])
    assert spec["displayName"]
    assert spec["description"]


# --- accepted by OLM's API, for real ------------------------------------------------------------------


@pytest.fixture
async def olm_server() -> AsyncIterator[Client]:
    async with ApiServer() as server, ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="olm-test")
        for path in sorted(OLM_CRDS.glob("*.yaml.gz")):
            crd = yaml.safe_load(gzip.decompress(path.read_bytes()))
            await client.create(CUSTOM_RESOURCE_DEFINITIONS, crd)
            await wait_for(lambda name=crd["metadata"]["name"]: _established(client, name), timeout=10)  # type: ignore[misc]
        await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        yield client


async def _established(client: Client, name: str) -> bool:
    crd = await client.get(CUSTOM_RESOURCE_DEFINITIONS, name)
    return any(
        c["type"] == "Established" and c["status"] == "True"
        for c in crd.get("status", {}).get("conditions", [])
    )


async def test_the_operator_group_and_an_upgrade_chain_of_csvs_are_accepted_by_olms_schemas(
    olm_server: Client,
) -> None:
    client = olm_server
    group = {"metadata": {"name": "memop"}, "spec": {"targetNamespaces": [NAMESPACE]}}
    await client.create(OPERATOR_GROUPS, group, NAMESPACE)
    first = csv_of(files_for("0.1.0"))
    second = csv_of(files_for("0.2.0", replaces="0.1.0"))
    for csv in (first, second):
        created = await client.create(CSVS, csv, NAMESPACE)
        # Read back unchanged: every field is in OLM's schema (unknown ones would be pruned).
        stored = await client.get(CSVS, csv["metadata"]["name"], NAMESPACE)
        for got in (created, stored):
            assert got["spec"] == csv["spec"]
            assert got["metadata"]["annotations"] == csv["metadata"]["annotations"]
    assert stored["spec"]["replaces"] == first["metadata"]["name"]


async def test_olms_schema_is_really_enforced(olm_server: Client) -> None:
    csv = csv_of(files_for("0.1.0"))
    csv["spec"]["installModes"][0]["supported"] = "yes"
    with pytest.raises(ApiError) as caught:
        await olm_server.create(CSVS, csv, NAMESPACE)
    assert caught.value.code == 422
    assert "spec.installModes[0].supported" in str(caught.value)
