"""``memop manifests bundle``: the OLM bundle, read as OLM's own tooling reads it, its CSV, and
upgrades through ``replaces``; for memop's project and for one of a user's.

operator-registry (``opm``, ``operator-sdk run bundle``) decodes only the first YAML document of
each file of a bundle's ``manifests/``, split as k8s.io/apimachinery's YAMLReader splits
documents; then every CRD the CSV owns must be one of the bundle's (operator-registry's
``AllProvidedAPIsInBundle``), and operator-framework/api's bundle validator
(``operator-sdk bundle validate``) checks the owned CRDs against the bundle's CRDs the same way.
:func:`registry_bundle` and :func:`validate_owned_crds` do what they do.

The ClusterServiceVersions are also created for real in the in-memory API server with OLM's own
ClusterServiceVersion and OperatorGroup CRDs installed (tests/olm, from operator-framework/api):
the server validates custom resources against their CRD's schema and prunes unknown fields, so
a CSV that reads back unchanged is one OLM's API accepts, field for field.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from memop.builtin import PROJECT
from memop.cli.options import parse_run_args
from memop.manifests import olm, rbac, webhooks
from memop.manifests.crds import crd_files
from memop.manifests.manager import manager_deployment
from memop.manifests.target import Target
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, Resource
from memop.testing.apiserver.server import ApiServer
from memop.testing.wait import wait_for
from tests.project_cachely import PROJECT as CACHELY
from tests.test_manifests import (
    CONTROLLERS,
    MANIFESTS,
    MEMOP,
    REPO,
    assert_usage_error,
    container,
    memop_manifests,
    memop_manifests_here,
    needs_kubectl,
    one,
    render,
)

OLM_CRDS = Path(__file__).parent / "olm"
CSVS = Resource("operators.coreos.com", "v1alpha1", "clusterserviceversions", "ClusterServiceVersion")
OPERATOR_GROUPS = Resource("operators.coreos.com", "v1", "operatorgroups", "OperatorGroup")
NAMESPACE = rbac.NAMESPACE
CACHELY_MODULE = "tests.project_cachely:PROJECT"
THEIRS = Target(CACHELY, f"--controller-module {CACHELY_MODULE}")


def read_bundle(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): p.read_text() for p in directory.rglob("*") if p.is_file()}


def files_for(version: str, replaces: str | None = None, target: Target = MEMOP) -> dict[str, str]:
    return olm.bundle_files(target, olm.BundleOptions(version=version, replaces=replaces))


def csv_of(files: dict[str, str], target: Target = MEMOP) -> dict[str, Any]:
    csv: dict[str, Any] = yaml.safe_load(files[olm.csv_file(target)])
    return csv


# --- reading a bundle as operator-registry does ---------------------------------------------------


def go_yaml_documents(text: str) -> list[str]:
    """The documents of a file as k8s.io/apimachinery's YAMLReader returns them: lines up to a
    line starting with ``---`` (which may only carry a comment after it); a separator with
    nothing read before it is skipped, but anything read, comments and blank lines included,
    makes a document."""
    documents: list[str] = []
    buffer = ""
    for line in text.splitlines(keepends=True):
        if line.startswith("---"):
            rest = line[3:].strip()
            if rest and not rest.startswith("#"):
                raise ValueError(f"invalid Yaml document separator: {rest}")
            if buffer:
                documents.append(buffer)
                buffer = ""
            continue
        buffer += line
    if buffer:
        documents.append(buffer)
    return documents


@dataclass
class RegistryBundle:
    """What operator-registry makes of a bundle directory's manifests/."""

    csv: dict[str, Any]
    crds: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)


def registry_bundle(files: dict[str, str]) -> RegistryBundle:
    """Decode each file of manifests/ as operator-registry does (its first document only, a
    warning when there are more), then check the CSV's owned CRDs as ``AllProvidedAPIsInBundle``
    does: owned ``name`` is ``plural.group``, and (group, version, kind, plural) must be a
    version of one of the bundle's CRDs. AssertionError says what OLM's tooling would refuse."""
    objects: list[dict[str, Any]] = []
    warnings: list[str] = []
    for name, text in sorted(files.items()):
        if not name.startswith("manifests/"):
            continue
        documents = go_yaml_documents(text)
        assert documents, f"{name} holds no document"
        if len(documents) > 1:
            warnings.append(f"found more than one document inside {name}, using only the first one")
        obj = yaml.safe_load(documents[0])
        refused = f"the first YAML document of {name} is not an object: {documents[0][:200]!r}"
        assert isinstance(obj, dict), refused
        assert obj.get("apiVersion"), refused
        assert obj.get("kind"), refused
        objects.append(obj)
    csvs = [obj for obj in objects if obj["kind"] == "ClusterServiceVersion"]
    assert len(csvs) == 1, f"expected one ClusterServiceVersion in the bundle, found {len(csvs)}"
    crds = [obj for obj in objects if obj["kind"] == "CustomResourceDefinition"]
    provided = {
        (crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"], crd["spec"]["names"]["plural"])
        for crd in crds
        for version in crd["spec"]["versions"]
    }
    for owned in csvs[0]["spec"]["customresourcedefinitions"]["owned"]:
        plural, _, group = owned["name"].partition(".")
        assert group, f"couldn't parse plural.group from crd name: {owned['name']}"
        key = (group, owned["version"], owned["kind"], plural)
        assert key in provided, f"couldn't find {key} in bundle. found: {sorted(provided)}"
    return RegistryBundle(csvs[0], crds, warnings)


def validate_owned_crds(bundle: RegistryBundle) -> tuple[list[str], list[str]]:
    """operator-framework/api's bundle validator (``validateOwnedCRDs``): errors for an owned CRD
    missing from the bundle or a duplicate (group, version, kind), warnings for a CRD in the
    bundle the CSV does not own."""
    errors: list[str] = []
    keys: list[tuple[str, str, str]] = []
    for crd in bundle.crds:
        for version in crd["spec"]["versions"]:
            key = (crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"])
            if key in keys:
                errors.append(f"duplicate CRD {key} in bundle")
            keys.append(key)
    remaining = set(keys)
    for owned in bundle.csv["spec"]["customresourcedefinitions"]["owned"]:
        split = owned["name"].split(".", 1)
        group = split[1] if len(split) == 2 else owned["name"]
        key = (group, owned["version"], owned["kind"])
        if key in remaining:
            remaining.discard(key)
        else:
            errors.append(f"owned CRD {key} not found in bundle")
    warnings = [f"CRD {key} is present in bundle but not defined in CSV" for key in sorted(remaining)]
    return errors, warnings


def test_the_reader_refuses_what_operator_registry_refused() -> None:
    """The layout the issue found: comment lines, then ``---``, then the CRD. Its first
    document is the comments alone, so the owned CRD is not in the bundle."""
    files = files_for("0.1.0")
    broken = dict(files)
    for name, text in files.items():
        if name.startswith("manifests/") and name != olm.csv_file(MEMOP):
            head, _, body = text.partition("apiVersion:")
            broken[name] = head + "---\napiVersion:" + body
    with pytest.raises(AssertionError, match=r"the first YAML document of manifests/.* is not an object"):
        registry_bundle(broken)
    assert go_yaml_documents("# a comment\n---\nkind: A\n") == ["# a comment\n", "kind: A\n"]
    assert go_yaml_documents("---\nkind: A\n---\n") == ["kind: A\n"]
    # What operator-framework/api reports when a CRD the CSV owns is missing.
    bundle = registry_bundle(files)
    missing = RegistryBundle(bundle.csv, bundle.crds[1:])
    errors, warnings = validate_owned_crds(missing)
    assert len(errors) == 1
    assert "not found in bundle" in errors[0]
    assert warnings == []


@pytest.mark.parametrize("target", [MEMOP, THEIRS], ids=["memop", "cachely"])
def test_operator_registry_reads_every_file_as_one_object_and_finds_every_owned_crd(target: Target) -> None:
    bundle = registry_bundle(files_for("1.2.3", target=target))
    assert bundle.warnings == []
    assert validate_owned_crds(bundle) == ([], [])
    owned = bundle.csv["spec"]["customresourcedefinitions"]["owned"]
    # One entry per served version of each CRD (Memcached has two).
    assert sorted((o["name"], o["version"]) for o in owned) == sorted(
        (crd["metadata"]["name"], v["name"])
        for d in target.project.controllers
        for crd in d.crds()
        for v in crd["spec"]["versions"]
        if v["served"]
    )


# --- the command and the layout ---------------------------------------------------------------------


def test_the_bundle_has_the_operator_framework_layout(tmp_path: Path) -> None:
    out = memop_manifests("bundle", "--project", "memop", "--version", "0.1.0", "--dir", str(tmp_path / "b"))
    assert out.returncode == 0, out.stderr
    files = read_bundle(tmp_path / "b")
    assert files == files_for("0.1.0")
    crds = {f"manifests/{name}" for name in crd_files(MEMOP) if name != "kustomization.yaml"}
    csv_path = "manifests/memop.clusterserviceversion.yaml"
    assert set(files) == {csv_path, *crds, "metadata/annotations.yaml", "bundle.Dockerfile"}
    assert out.stdout.count("wrote ") == len(files)
    assert "# Generated by `memop manifests bundle --project memop --version 0.1.0`" in files[csv_path]
    # Written again: nothing changes, nothing is written.
    again = memop_manifests(
        "bundle", "--project", "memop", "--version", "0.1.0", "--dir", str(tmp_path / "b")
    )
    assert (again.returncode, again.stdout) == (0, "")


def test_the_bundle_is_written_outside_memops_repository(tmp_path: Path) -> None:
    out = memop_manifests("bundle", "--project", "memop", "--version", "0.1.0", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert read_bundle(tmp_path / "bundle") == files_for("0.1.0")


def test_the_bundles_crds_are_byte_equal_to_manifests_crd() -> None:
    files = files_for("0.1.0")
    crds = {
        name: text
        for name, text in files.items()
        if name.startswith("manifests/") and name != olm.csv_file(MEMOP)
    }
    # Every CRD memop serves (test_manifests keeps manifests/crd equal to them), byte for byte.
    assert {name.removeprefix("manifests/") for name in crds} == set(crd_files(MEMOP)) - {
        "kustomization.yaml"
    }
    committed = {name: (MANIFESTS / "crd" / name.removeprefix("manifests/")).read_text() for name in crds}
    assert crds == committed
    kinds = {yaml.safe_load(text)["spec"]["names"]["kind"] for text in crds.values()}
    assert kinds == {crd["spec"]["names"]["kind"] for d in CONTROLLERS.values() for crd in d.crds()}


def test_annotations_and_dockerfile_labels_agree() -> None:
    files = files_for("0.1.0")
    annotations = yaml.safe_load(files["metadata/annotations.yaml"])["annotations"]
    assert annotations == {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": "memop",
        "operators.operatorframework.io.bundle.channels.v1": "stable",
        "operators.operatorframework.io.bundle.channel.default.v1": "stable",
    }
    lines = files["bundle.Dockerfile"].splitlines()
    labels = dict(line.removeprefix("LABEL ").split("=", 1) for line in lines if line.startswith("LABEL "))
    assert labels == annotations
    assert "FROM scratch" in lines
    assert {"COPY manifests /manifests/", "COPY metadata /metadata/"} <= set(lines)


def test_the_default_channel_follows_olms_naming_convention() -> None:
    """operator-framework/api's good-practices check warns about a channel not named
    candidate*, fast* or stable*."""
    assert olm.DEFAULT_CHANNEL.startswith(("candidate", "fast", "stable"))


def test_channels() -> None:
    options = olm.BundleOptions(version="0.2.0", channels=olm.parse_channels("fast, stable"))
    annotations = olm.bundle_annotations(MEMOP, options)
    assert annotations["operators.operatorframework.io.bundle.channels.v1"] == "fast,stable"
    assert annotations["operators.operatorframework.io.bundle.channel.default.v1"] == "fast"


@pytest.mark.parametrize(
    ("version", "maturity"), [("0.2.0", "alpha"), ("1.0.0-rc.1", "alpha"), ("1.0.0", "stable")]
)
def test_maturity_follows_the_version(version: str, maturity: str) -> None:
    assert csv_of(files_for(version))["spec"]["maturity"] == maturity


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
        (["--version", "0.2.0", "--project", "nope"], "--project: no installed project 'nope'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    tmp_path: Path,
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = memop_manifests_here(
        "bundle", *args, "--dir", str(tmp_path / "b"), cwd=REPO, monkeypatch=monkeypatch, capsys=capsys
    )
    assert_usage_error(out, message)
    assert not (tmp_path / "b").exists()


def test_bundle_flags_are_refused_by_the_other_manifests() -> None:
    out = memop_manifests("rbac", "--version", "1.0.0")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == "memop manifests: error: --version: only used with 'memop manifests bundle'\n"


# --- what the CSV carries, from the same code as the plain manifests ---------------------------------


def test_the_install_strategy_is_manifests_managers_deployment() -> None:
    csv = csv_of(files_for("0.3.0"))
    [deployment] = csv["spec"]["install"]["spec"]["deployments"]
    manager = manager_deployment(MEMOP)
    assert manager == yaml.safe_load((MANIFESTS / "manager/manager.yaml").read_text())
    assert deployment["name"] == "memop-" + manager["metadata"]["name"]
    expected = manager["spec"]
    pod = expected["template"]["spec"]
    pod["serviceAccountName"] = "memop-" + pod["serviceAccountName"]
    pod["containers"][0]["image"] = "memop:0.3.0"
    if webhooks.serves_webhooks(MEMOP):
        webhook_port = {"name": "webhook-server", "containerPort": 9443, "protocol": "TCP"}
        pod["containers"][0]["ports"].insert(0, webhook_port)
    pod["containers"][0]["env"] = [
        {
            "name": "WATCH_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}},
        }
    ]
    assert deployment["spec"] == expected
    assert container(deployment)["command"] == ["memop", "--project", "memop"]
    assert csv["metadata"]["annotations"]["containerImage"] == "memop:0.3.0"
    image = csv_of(olm.bundle_files(MEMOP, olm.BundleOptions(version="0.3.0", image="r.example.com/m:9")))
    assert image["metadata"]["annotations"]["containerImage"] == "r.example.com/m:9"


@needs_kubectl
def test_the_csv_deployment_is_the_default_installs_but_for_image_and_watch_namespace() -> None:
    rendered = one(render("default"), "Deployment")
    [deployment] = csv_of(files_for("0.1.0"))["spec"]["install"]["spec"]["deployments"]
    assert deployment["name"] == rendered["metadata"]["name"]
    env = container(deployment).pop("env")
    assert [v["name"] for v in env] == ["WATCH_NAMESPACE"]
    # OLM owns the RBAC it installs: no uninstall guard, which names kustomize's objects.
    assert [v["name"] for v in container(rendered).pop("env")] == ["UNINSTALL_GUARD"]
    if webhooks.serves_webhooks(MEMOP):
        # OLM mounts the webhook certificate it makes itself: not cert-manager's Secret.
        pod = rendered["spec"]["template"]["spec"]
        [certs] = [v["name"] for v in pod["volumes"] if "secret" in v]
        pod["volumes"] = [v for v in pod["volumes"] if v["name"] != certs]
        mounts = container(rendered)["volumeMounts"]
        container(rendered)["volumeMounts"] = [m for m in mounts if m["name"] != certs]
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
    assert entry["serviceAccountName"] == "memop-controller-manager"
    assert entry["rules"] == rbac.policy_rules(rbac.Scope.WATCHED) + rbac.policy_rules(rbac.Scope.OPERATOR)
    # Nothing memop needs is cluster-wide whatever the OperatorGroup (no --metrics-secure here).
    assert "clusterPermissions" not in spec
    modes = {m["type"]: m["supported"] for m in csv_of(files_for("0.1.0"))["spec"]["installModes"]}
    # A CSV with a conversion webhook installs in AllNamespaces only (OLM refuses it otherwise).
    converts = bool(webhooks.conversions(MEMOP))
    assert modes == {
        "OwnNamespace": not converts,
        "SingleNamespace": not converts,
        "MultiNamespace": not converts,
        "AllNamespaces": True,
    }


def test_owned_crds_describe_every_field_and_the_examples_are_the_samples() -> None:
    csv = csv_of(files_for("0.1.0"))
    owned = csv["spec"]["customresourcedefinitions"]["owned"]
    crds = [crd for definition in CONTROLLERS.values() for crd in definition.crds()]
    assert [(o["name"], o["version"], o["kind"]) for o in owned] == [
        (crd["metadata"]["name"], v["name"], crd["spec"]["names"]["kind"])
        for crd in crds
        for v in crd["spec"]["versions"]
    ]
    versions = [v for crd in crds for v in crd["spec"]["versions"]]
    for entry, version in zip(owned, versions, strict=True):
        schema = version["schema"]["openAPIV3Schema"]["properties"]
        for part, key in (("spec", "specDescriptors"), ("status", "statusDescriptors")):
            top = {d["path"] for d in entry[key] if "." not in d["path"]}
            assert top == set(schema.get(part, {}).get("properties", {})), (entry["kind"], part)
            assert all(d["displayName"] for d in entry[key])
    samples = [
        yaml.safe_load((MANIFESTS / "samples" / name).read_text())
        for d in CONTROLLERS.values()
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
    assert spec["provider"]["name"] == "memop"
    assert set(CONTROLLERS) <= set(spec["keywords"])
    assert spec["displayName"] == "memop"
    assert spec["description"].startswith(PROJECT.description)


# --- a user's project ----------------------------------------------------------------------------------


def test_a_projects_bundle_is_named_and_made_after_it(tmp_path: Path) -> None:
    out = memop_manifests(
        "bundle",
        "--controller-module",
        CACHELY_MODULE,
        "--version",
        "1.3.0",
        "--replaces",
        "1.2.3",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    files = read_bundle(tmp_path / "bundle")
    assert files == olm.bundle_files(THEIRS, olm.BundleOptions(version="1.3.0", replaces="1.2.3"))
    csv = csv_of(files, THEIRS)
    assert set(files) == {
        "manifests/cachely.clusterserviceversion.yaml",
        "manifests/cache.example.com_memcacheds.yaml",
        "metadata/annotations.yaml",
        "bundle.Dockerfile",
    }
    assert (csv["metadata"]["name"], csv["spec"]["replaces"]) == ("cachely.v1.3.0", "cachely.v1.2.3")
    assert csv["spec"]["description"].startswith("Memcached caches, run by an operator of its own")
    assert csv["metadata"]["annotations"]["containerImage"] == "registry.example.com:5000/team/cachely:1.3.0"
    assert csv["metadata"]["annotations"]["operatorframework.io/suggested-namespace"] == "cachely-operators"
    [deployment] = csv["spec"]["install"]["spec"]["deployments"]
    assert deployment["name"] == "cachely-controller-manager"
    assert container(deployment)["command"] == ["memop", "--controller-module", CACHELY_MODULE]
    assert container(deployment)["image"] == "registry.example.com:5000/team/cachely:1.3.0"
    [entry] = csv["spec"]["install"]["spec"]["permissions"]
    assert entry["serviceAccountName"] == "cachely-controller-manager"
    rules = rbac.merged_rules(CACHELY.controllers)
    assert entry["rules"] == rbac.policy_rules(rbac.Scope.WATCHED, rules) + rbac.policy_rules(
        rbac.Scope.OPERATOR, rules
    )
    assert not any("pods" in rule["resources"] and "create" in rule["verbs"] for rule in entry["rules"])
    annotations = yaml.safe_load(files["metadata/annotations.yaml"])["annotations"]
    assert annotations["operators.operatorframework.io.bundle.package.v1"] == "cachely"
    assert "memop" not in json.dumps(csv["metadata"]["annotations"])
    command = f"memop manifests bundle --controller-module {CACHELY_MODULE} --version 1.3.0 --replaces 1.2.3"
    assert all(
        f"Generated by `{command}`" in files[name] for name in files if not name.endswith("memcacheds.yaml")
    )


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


@pytest.mark.parametrize("target", [MEMOP, THEIRS], ids=["memop", "cachely"])
async def test_the_operator_group_and_an_upgrade_chain_of_csvs_are_accepted_by_olms_schemas(
    olm_server: Client, target: Target
) -> None:
    client = olm_server
    group = {"metadata": {"name": target.name}, "spec": {"targetNamespaces": [NAMESPACE]}}
    await client.create(OPERATOR_GROUPS, group, NAMESPACE)
    first = csv_of(files_for("0.1.0", target=target), target)
    second = csv_of(files_for("0.2.0", replaces="0.1.0", target=target), target)
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
