"""The webhook manifests, generated from a project's declarations: the webhook configurations,
the Service, the CRDs' conversion stanza (a kustomize patch, never in the base CRD), the
cert-manager Component every install lists, the self-managed install, and the OLM bundle's
``webhookdefinitions``.

The project here (``hooks``) is a user's, declaring its own webhooks on kinds of its own, so the
tests hold whatever memop's Memcached declares: a namespaced kind with a defaulter and a
validator (DELETE too) and a conversion, and a cluster-scoped kind with a validator only.
"""

from __future__ import annotations

import copy
import functools
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from memop.cli.options import parse_run_args
from memop.manifests import certmanager, olm, webhooks
from memop.manifests.layout import manifest_files
from memop.manifests.target import Target, write_changed
from memop.project import Project
from memop.runtime.controller.controller import Controller
from memop.runtime.controller.definition import ControllerDefinition, SetupContext
from memop.runtime.webhook.declarations import AdmissionRequest, AdmissionWebhook, Conversion, Obj, Spoke
from memop.runtime.webhook.selfmanaged import self_managed_certificate_rules
from tests.test_manifests import needs_kubectl, one

NAMESPACE = "hooks-system"
PREFIX = "hooks-"
GROUP = "shop.example.org"


class Defaulter:
    async def default(self, obj: Obj, request: AdmissionRequest) -> None:
        obj.setdefault("spec", {}).setdefault("size", 1)


class Validator:
    async def validate_create(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]:
        return []

    async def validate_update(self, old: Obj, new: Obj, request: AdmissionRequest) -> Sequence[str]:
        return []

    async def validate_delete(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]:
        return []


def _crd(kind: str, plural: str, versions: Sequence[str], scope: str = "Namespaced") -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": scope,
            "versions": [
                {"name": v, "served": True, "storage": i == 0, "schema": copy.deepcopy(schema)}
                for i, v in enumerate(versions)
            ],
        },
    }


def _setup(context: SetupContext) -> Controller:
    raise NotImplementedError("the manifests never run a controller")


def _identity(obj: Obj) -> Obj:
    return copy.deepcopy(obj)


CARTS = AdmissionWebhook(
    GROUP,
    "v1",
    "Cart",
    "carts",
    defaulter=Defaulter(),
    validator=Validator(),
    operations=("CREATE", "UPDATE", "DELETE"),
    failure_policy="Ignore",
    timeout_seconds=5,
    match_policy="Exact",
)
SHELVES = AdmissionWebhook(GROUP, "v1", "Shelf", "shelves", validator=Validator(), namespaced=False)
CART_VERSIONS = Conversion(GROUP, "Cart", "carts", "v1", {"v2": Spoke(_identity, _identity)})

PLAIN = ControllerDefinition(
    name="cart",
    description="carts",
    setup=_setup,
    crds=lambda: [_crd("Cart", "carts", ("v1", "v2")), _crd("Shelf", "shelves", ("v1",), "Cluster")],
    rules=(),
    samples=dict,
)
HOOKED = replace(PLAIN, webhooks=(CARTS, SHELVES), conversions=(CART_VERSIONS,))
PROJECT = Project(name="hooks", domain="example.org", controllers=(HOOKED,), version="0.3.0")
HOOKS = Target(PROJECT, "--controller-module tests.test_manifests_webhooks")
# The same project declaring nothing (selected by name: the module's would put "webhooks" in every header).
NOTHING = Target(replace(PROJECT, controllers=(PLAIN,)))

CERT_MANAGER_INSTALLS = (
    "default",
    "namespaced",
    "namespaced/multi",
    "leader-for-life",
    "sharded",
    "secure-metrics",
)
INSTALLS = (*CERT_MANAGER_INSTALLS, "webhook-self-managed")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hooks") / "manifests"
    write_changed(root, manifest_files(HOOKS))
    return root


@functools.cache
def _render(directory: str) -> tuple[Obj, ...]:
    out = subprocess.run(
        ["kubectl", "kustomize", directory], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 0, f"kubectl kustomize {directory} failed:\n{out.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(out.stdout) if doc)


def render(written: Path, overlay: str) -> list[Obj]:
    return copy.deepcopy(list(_render(str(written / overlay))))


def by_kind(objects: Sequence[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind]


# --- from the declarations -----------------------------------------------------------------------


def test_one_webhook_per_declared_defaulter_and_validator() -> None:
    mutating, validating = webhooks.configurations(HOOKS)
    assert (mutating["kind"], mutating["metadata"]["name"]) == (
        "MutatingWebhookConfiguration",
        "mutating-webhook-configuration",
    )
    assert [w["name"] for w in mutating["webhooks"]] == ["mcart-v1.shop.example.org"]
    assert [w["name"] for w in validating["webhooks"]] == [
        "vcart-v1.shop.example.org",
        "vshelf-v1.shop.example.org",
    ]
    [cart] = mutating["webhooks"]
    assert cart == {
        "name": "mcart-v1.shop.example.org",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {
            "service": {
                "name": "webhook-service",
                "namespace": NAMESPACE,
                "path": "/mutate-shop-example-org-v1-cart",
            }
        },
        # A DELETE has no object to default: the defaulter gets CREATE and UPDATE only.
        "rules": [
            {
                "apiGroups": [GROUP],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["carts"],
                "scope": "Namespaced",
            }
        ],
        "failurePolicy": "Ignore",
        "matchPolicy": "Exact",
        "sideEffects": "None",
        "timeoutSeconds": 5,
    }
    cart_validator, shelf = validating["webhooks"]
    assert cart_validator["rules"][0]["operations"] == ["CREATE", "UPDATE", "DELETE"]
    assert cart_validator["clientConfig"]["service"]["path"] == CARTS.validating_path
    assert shelf["rules"][0]["scope"] == "Cluster"
    assert (shelf["failurePolicy"], shelf["matchPolicy"], shelf["timeoutSeconds"]) == (
        "Fail",
        "Equivalent",
        10,
    )


def test_a_configuration_without_webhooks_is_not_written() -> None:
    only_validators = Target(replace(PROJECT, controllers=(replace(HOOKED, webhooks=(SHELVES,)),)))
    assert [c["kind"] for c in webhooks.configurations(only_validators)] == ["ValidatingWebhookConfiguration"]
    only_conversion = Target(replace(PROJECT, controllers=(replace(HOOKED, webhooks=()),)))
    assert webhooks.configurations(only_conversion) == []
    files = manifest_files(only_conversion)
    assert "webhook/manifests.yaml" not in files
    assert "- manifests.yaml" not in files["webhook/kustomization.yaml"]
    assert {"webhook/service.yaml", "webhook/webhook_in_carts.yaml", "certmanager/certificate.yaml"} <= set(
        files
    )


def test_a_project_without_webhooks_gets_no_webhook_files_and_unchanged_installs() -> None:
    files = manifest_files(NOTHING)
    assert not [f for f in files if f.split("/")[0] in ("webhook", "certmanager", "webhook-self-managed")]
    bodies = {
        f: "".join(line for line in text.splitlines() if "Generated by" not in line)
        for f, text in files.items()
    }
    assert not [f for f, body in bodies.items() if "components:" in body or "webhook" in body.lower()]


def test_the_base_crd_keeps_no_conversion_stanza() -> None:
    files = manifest_files(HOOKS)
    crd = yaml.safe_load(files["crd/shop.example.org_carts.yaml"])
    assert "conversion" not in crd["spec"]
    patch = yaml.safe_load(files["webhook/webhook_in_carts.yaml"])
    assert patch["spec"]["conversion"] == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "service": {"name": "webhook-service", "namespace": NAMESPACE, "path": "/convert"}
            },
            "conversionReviewVersions": ["v1"],
        },
    }


def test_every_yaml_file_names_the_command_and_is_one_object_first() -> None:
    for name, text in manifest_files(HOOKS).items():
        if name.endswith(".yaml"):
            assert (
                "# Generated by `memop manifests --controller-module tests.test_manifests_webhooks`" in text
            ), name
            assert yaml.safe_load(text.split("\n---\n")[0]), name


# --- the installs, rendered ----------------------------------------------------------------------


def _service_reaches_the_webhook_server(objects: list[Obj]) -> Obj:
    service = one(objects, "Service", PREFIX + "webhook-service", NAMESPACE)
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    [port] = service["spec"]["ports"]
    assert port["port"] == 443
    [container] = pod["spec"]["containers"]
    assert {"name": "webhook-server", "containerPort": port["targetPort"], "protocol": "TCP"} in container[
        "ports"
    ]
    assert port["targetPort"] == 9443
    return service


def _every_call_goes_to_the_service(objects: list[Obj]) -> None:
    expected = {"name": PREFIX + "webhook-service", "namespace": NAMESPACE}
    calls = [
        w["clientConfig"]["service"]
        for c in objects
        if c["kind"].endswith("WebhookConfiguration")
        for w in c["webhooks"]
    ]
    assert len(calls) == 3
    for call in calls:
        assert {k: call[k] for k in expected} == expected
    [cart] = [
        o
        for o in objects
        if o["kind"] == "CustomResourceDefinition" and o["metadata"]["name"] == "carts.shop.example.org"
    ]
    assert cart["spec"]["conversion"]["webhook"]["clientConfig"]["service"] == {
        **expected,
        "path": "/convert",
    }
    [shelf] = [
        o
        for o in objects
        if o["kind"] == "CustomResourceDefinition" and o["metadata"]["name"] == "shelves.shop.example.org"
    ]
    assert "conversion" not in shelf["spec"]


@needs_kubectl
@pytest.mark.parametrize("overlay", CERT_MANAGER_INSTALLS)
def test_every_install_serves_the_webhooks_with_cert_managers_certificate(
    written: Path, overlay: str
) -> None:
    objects = render(written, overlay)
    assert len(by_kind(objects, "MutatingWebhookConfiguration")) == 1
    assert len(by_kind(objects, "ValidatingWebhookConfiguration")) == 1
    service = _service_reaches_the_webhook_server(objects)
    _every_call_goes_to_the_service(objects)

    issuer = one(objects, "Issuer")
    certificate = one(objects, "Certificate")
    assert issuer["metadata"]["namespace"] == certificate["metadata"]["namespace"] == NAMESPACE
    assert certificate["spec"]["issuerRef"] == {"kind": "Issuer", "name": issuer["metadata"]["name"]}
    name = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    assert certificate["spec"]["dnsNames"] == [name, f"{name}.cluster.local"]
    source = f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    annotated = [
        o
        for o in objects
        if (o["metadata"].get("annotations") or {}).get(certmanager.INJECT_CA_FROM) == source
    ]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in annotated) == [
        ("CustomResourceDefinition", "carts.shop.example.org"),
        ("MutatingWebhookConfiguration", PREFIX + "mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", PREFIX + "validating-webhook-configuration"),
    ]

    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v.get("secret")]
    assert volume["secret"] == {"secretName": certificate["spec"]["secretName"]}
    [container] = pod["containers"]
    assert {"name": volume["name"], "mountPath": webhooks.CERT_DIR, "readOnly": True} in container[
        "volumeMounts"
    ]
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "hooks"


@needs_kubectl
@pytest.mark.parametrize("overlay", INSTALLS)
def test_the_admission_webhooks_are_called_for_the_watched_namespaces_only(
    written: Path, overlay: str
) -> None:
    """A namespaced install's webhooks select the namespaces its operator watches (by the label
    every namespace has), so that one down does not refuse writes anywhere else; a cluster-wide
    install's select every namespace. The CRD's conversion is cluster-wide either way."""
    objects = render(written, overlay)
    deployment = one(objects, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {var["name"]: var for var in container.get("env") or ()}
    watched = []
    if "WATCH_NAMESPACE" in env:  # a list, or the pod's own namespace (the downward API)
        var = env["WATCH_NAMESPACE"]
        watched = var["value"].split(",") if "value" in var else [deployment["metadata"]["namespace"]]
    if overlay.startswith("namespaced"):
        assert watched, overlay
    hooks = [
        hook
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in one(objects, kind)["webhooks"]
    ]
    assert len(hooks) == 3  # Carts' defaulter and validator, Shelves' validator
    for hook in hooks:
        if watched:
            assert hook["namespaceSelector"] == {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": watched}
                ]
            }, hook["name"]
        else:
            assert "namespaceSelector" not in hook, hook["name"]


@needs_kubectl
def test_the_self_managed_install_makes_its_own_certificate(written: Path) -> None:
    objects = render(written, "webhook-self-managed")
    assert not by_kind(objects, "Issuer")
    assert not by_kind(objects, "Certificate")
    assert not [o for o in objects if certmanager.INJECT_CA_FROM in (o["metadata"].get("annotations") or {})]
    _service_reaches_the_webhook_server(objects)
    _every_call_goes_to_the_service(objects)

    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["args"][-3:] == [
        "--webhook-certs=self-managed",
        "--webhook-service=hooks-webhook-service",
        "--webhook-secret=hooks-webhook-server-cert",
    ]
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == webhooks.CERT_DIR]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert "emptyDir" in volume
    assert not mount.get("readOnly")

    # The Secret in its namespace; the caBundle of its own configurations and CRD, by name.
    role = one(objects, "Role", PREFIX + certmanager.WEBHOOK_CERTS_ROLE, NAMESPACE)
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "update"]}
    ]
    cluster_role = one(objects, "ClusterRole", PREFIX + certmanager.WEBHOOK_CERTS_ROLE)
    granted = {(rule["resources"][0], tuple(rule["resourceNames"])) for rule in cluster_role["rules"]}
    names = {
        (o["kind"].lower() + "s", (o["metadata"]["name"],))
        for o in objects
        if o["kind"].endswith("WebhookConfiguration") or o["metadata"]["name"] == "carts.shop.example.org"
    }
    assert granted == names
    # The verbs memop's self-managed certificates send, and no more.
    verbs = {rule["resources"][0]: rule["verbs"] for rule in cluster_role["rules"]}
    assert verbs == {
        "validatingwebhookconfigurations": ["get", "update"],
        "mutatingwebhookconfigurations": ["get", "update"],
        "customresourcedefinitions": ["get", "patch"],
    }
    for kind, ref_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        binding = one(objects, kind, PREFIX + certmanager.WEBHOOK_CERTS_ROLE_BINDING)
        assert binding["roleRef"]["kind"] == ref_kind
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": PREFIX + "controller-manager", "namespace": NAMESPACE}
        ]


@needs_kubectl
def test_the_self_managed_flags_are_the_operators(written: Path) -> None:
    """memop's own parser takes the self-managed install's flags, naming what the install made."""
    [container] = one(render(written, "webhook-self-managed"), "Deployment")["spec"]["template"]["spec"][
        "containers"
    ]
    config = parse_run_args(container["command"][1:] + container["args"], env={})
    assert config.webhook_certs == "self-managed"
    assert config.webhook_service == PREFIX + "webhook-service"
    assert config.webhook_secret == PREFIX + "webhook-server-cert"


def test_the_self_managed_rules_are_the_runtimes_for_the_kinds_the_project_has() -> None:
    """The certificates module declares what it sends; the install grants it, per kind present."""
    assert certmanager.webhook_certs_rules(HOOKS) == self_managed_certificate_rules()
    only_validators = Target(
        replace(PROJECT, controllers=(replace(HOOKED, webhooks=(SHELVES,), conversions=()),))
    )
    assert certmanager.webhook_certs_rules(only_validators) == self_managed_certificate_rules(
        mutating=False, conversion=False
    )
    assert [r["resources"] for r in certmanager.webhook_certs_cluster_rules(only_validators)] == [
        ["validatingwebhookconfigurations"]
    ]
    # Not in what any install without the self-managed certificates grants.
    assert not {rule.triple for rule in self_managed_certificate_rules()} & {
        rule.triple for rule in HOOKS.rules
    }


# --- the OLM bundle ----------------------------------------------------------------------------------


def _csv(target: Target) -> dict[str, Any]:
    files = olm.bundle_files(target, olm.BundleOptions(version="0.3.0"))
    return yaml.safe_load(files[olm.csv_file(target)])  # type: ignore[no-any-return]


def test_the_bundle_declares_every_webhook_for_olm() -> None:
    csv = _csv(HOOKS)
    deployment = csv["spec"]["install"]["spec"]["deployments"][0]
    definitions = csv["spec"]["webhookdefinitions"]
    assert [(d["type"], d["generateName"]) for d in definitions] == [
        ("MutatingAdmissionWebhook", "mcart-v1.shop.example.org"),
        ("ValidatingAdmissionWebhook", "vcart-v1.shop.example.org"),
        ("ValidatingAdmissionWebhook", "vshelf-v1.shop.example.org"),
        ("ConversionWebhook", "ccart.shop.example.org"),
    ]
    for definition in definitions:
        assert definition["deploymentName"] == deployment["name"] == "hooks-controller-manager"
        assert (definition["containerPort"], definition["targetPort"]) == (443, 9443)
        assert definition["admissionReviewVersions"] == ["v1"]
        assert definition["sideEffects"] == "None"
    mutating = definitions[0]
    [webhook] = webhooks.mutating_webhooks(HOOKS)
    assert mutating["webhookPath"] == CARTS.mutating_path
    assert mutating["rules"] == webhook["rules"]
    assert (mutating["failurePolicy"], mutating["matchPolicy"], mutating["timeoutSeconds"]) == (
        "Ignore",
        "Exact",
        5,
    )
    assert definitions[-1]["webhookPath"] == "/convert"
    assert definitions[-1]["conversionCRDs"] == ["carts.shop.example.org"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "webhook-server", "containerPort": 9443, "protocol": "TCP"} in container["ports"]


def test_a_converting_bundle_installs_in_all_namespaces_only_and_keeps_every_version() -> None:
    csv = _csv(HOOKS)
    modes: Mapping[str, bool] = {m["type"]: m["supported"] for m in csv["spec"]["installModes"]}
    assert modes == {
        "OwnNamespace": False,
        "SingleNamespace": False,
        "MultiNamespace": False,
        "AllNamespaces": True,
    }
    owned = {(o["name"], o["version"]) for o in csv["spec"]["customresourcedefinitions"]["owned"]}
    assert {("carts.shop.example.org", "v1"), ("carts.shop.example.org", "v2")} <= owned
    files = olm.bundle_files(HOOKS, olm.BundleOptions(version="0.3.0"))
    assert (
        files["manifests/shop.example.org_carts.yaml"]
        == manifest_files(HOOKS)["crd/shop.example.org_carts.yaml"]
    )
    # Admission alone does not restrict the install modes.
    admission_only = Target(replace(PROJECT, controllers=(replace(HOOKED, conversions=()),)))
    assert all(m["supported"] for m in _csv(admission_only)["spec"]["installModes"])


def test_a_bundle_without_webhooks_has_no_webhookdefinitions() -> None:
    csv = _csv(NOTHING)
    assert "webhookdefinitions" not in csv["spec"]
    [container] = csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"]
    assert "webhook-server" not in [p["name"] for p in container["ports"]]
