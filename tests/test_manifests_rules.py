"""Declared RBAC rules as Kubernetes takes them: every verb, resourceNames and nonResourceURLs
made into PolicyRules (grouped as controller-gen groups them), and a rule Kubernetes would
refuse or ignore refused by ``memop manifests`` in one error line, exit 2."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import yaml

from memop.manifests import olm, rbac
from memop.manifests.layout import manifest_files
from memop.manifests.target import Target
from memop.memcached import DEFINITION as MEMCACHED
from memop.project import Project
from memop.runtime.api.permissions import (
    RESOURCE_VERBS,
    Rule,
    Scope,
    non_resource,
    rule_problem,
    watched,
)
from tests.test_manifests import assert_usage_error, memop_manifests_here, needs_kubectl, one
from tests.test_manifests_project import render

RBAC_GROUP = "rbac.authorization.k8s.io"
W, OP, C = Scope.WATCHED, Scope.OPERATOR, Scope.CLUSTER
# The operator: it creates RoleBindings to the admin ClusterRole, which the API server's
# escalation check lets through only with bind on that ClusterRole.
BINDS_ADMIN = (
    *watched(RBAC_GROUP, "rolebindings", "reconciler: each tenant's admins", "get", "create"),
    *watched(RBAC_GROUP, "clusterroles", "rolebindings to admin", "bind", resource_names=("admin",)),
)
HEALTH = non_resource(("/healthz", "/livez"), "checks the API server's health", "get")

Obj = dict[str, Any]


def rule(verb: str, resource: str = "configmaps", names: tuple[str, ...] = (), scope: Scope = W) -> Rule:
    return Rule("", resource, verb, scope, "test", resource_names=names)


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        pytest.param(
            BINDS_ADMIN,
            [
                {"apiGroups": [RBAC_GROUP], "resources": ["rolebindings"], "verbs": ["get", "create"]},
                {
                    "apiGroups": [RBAC_GROUP],
                    "resources": ["clusterroles"],
                    "resourceNames": ["admin"],
                    "verbs": ["bind"],
                },
            ],
            id="bind-admin",
        ),
        pytest.param(
            (rule("update", names=("b", "a")), rule("get", names=("a", "b")), rule("get")),
            [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": ["a", "b"],
                    "verbs": ["get", "update"],
                },
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
            ],
            id="same-names-merge-whatever-their-order",
        ),
        pytest.param(
            (rule("get", names=("a",)), rule("get", names=("b",))),
            [
                {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["b"], "verbs": ["get"]},
            ],
            id="other-names-stay-apart",
        ),
        pytest.param(
            tuple(rule(verb, "users") for verb in reversed(RESOURCE_VERBS[:-1])),
            [{"apiGroups": [""], "resources": ["users"], "verbs": list(RESOURCE_VERBS[:-1])}],
            id="every-verb-in-order",
        ),
        pytest.param(
            (rule("get"), rule("*"), rule("delete")),
            [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}],
            id="star-stands-alone",
        ),
        pytest.param((rule("get", scope=OP), *HEALTH), [], id="other-scopes-left-out"),
    ],
)
def test_rules_become_policy_rules(rules: tuple[Rule, ...], expected: list[Obj]) -> None:
    assert rbac.policy_rules(W, rules) == expected


def test_non_resource_urls_are_a_cluster_policy_rule() -> None:
    rules = (*HEALTH, *non_resource("/healthz", "probe", "head"), *non_resource(["/logs/*"], "logs", "get"))
    assert rbac.policy_rules(C, rules) == [
        {"nonResourceURLs": ["/healthz", "/livez"], "verbs": ["get"]},
        {"nonResourceURLs": ["/healthz"], "verbs": ["head"]},
        {"nonResourceURLs": ["/logs/*"], "verbs": ["get"]},
    ]


def test_a_named_rule_grants_those_names_only() -> None:
    bind = (RBAC_GROUP, "clusterroles", "bind")
    assert rbac.allowed(*bind, "team-a", rules=BINDS_ADMIN, name="admin")
    assert rbac.allowed(*bind, "team-a", rules=BINDS_ADMIN, watch_namespaces=["team-a"], name="admin")
    assert not rbac.allowed(*bind, "team-a", rules=BINDS_ADMIN, name="cluster-admin")
    assert not rbac.allowed(*bind, "team-a", rules=BINDS_ADMIN)
    assert rbac.permitted(*bind, cluster=False, rules=BINDS_ADMIN, name="admin")
    assert not rbac.permitted(*bind, cluster=False, rules=BINDS_ADMIN, name="edit")
    cluster = (Rule("", "nodes", "get", C, "test"),)
    assert rbac.allowed("", "nodes", "get", "", rules=cluster, watch_namespaces=["team-a"])
    assert rbac.permitted("", "nodes", "get", cluster=True, rules=cluster)
    assert not rbac.allowed("", "", "get", "", rules=HEALTH)  # a URL is no resource


# Each refusal: the rule, and what the error says about it.
REFUSED = [
    pytest.param(
        rule("frobnicate"), "unknown verb 'frobnicate' (Kubernetes knows: get list", id="unknown-verb"
    ),
    pytest.param(rule("Get"), "unknown verb 'Get'", id="verbs-are-lower-case"),
    pytest.param(rule("get", resource=""), "no resource", id="empty-resource"),
    *(
        pytest.param(
            rule(verb, names=("a",)), f"resource_names with {verb!r}: Kubernetes", id=f"names-{verb}"
        )
        for verb in ("list", "watch", "create", "deletecollection")
    ),
    pytest.param(
        Rule("", "configmaps", "get", W, "test", resource_names="admin"),  # type: ignore[arg-type]
        "resource_names must be a tuple of non-empty strings, not 'admin'",
        id="names-as-a-string",
    ),
    pytest.param(rule("get", names=("",)), "resource_names must be a tuple of non-empty", id="empty-name"),
    pytest.param(
        Rule("", "pods", ["get", "list"], W, "test"),  # type: ignore[arg-type]
        "verb must be a string, not ['get', 'list'] (one Rule per verb: see watched())",
        id="verbs-in-one-rule",
    ),
    pytest.param(
        Rule("", "pods", "get", "watched", "test"),  # type: ignore[arg-type]
        "scope 'watched' is not a Scope",
        id="scope-as-a-string",
    ),
    *(
        pytest.param(
            Rule("", "", "get", scope, "test", non_resource_urls=("/healthz",)),
            f"non_resource_urls in scope {scope.name}: Kubernetes grants them in a ClusterRole only",
            id=f"urls-in-{scope.name}",
        )
        for scope in (W, OP)
    ),
    pytest.param(
        Rule("", "pods", "get", C, "test", non_resource_urls=("/healthz",)),
        "non_resource_urls with a group, resource or resource_names",
        id="urls-and-a-resource",
    ),
    pytest.param(
        non_resource("/healthz", "test", "list")[0],
        "unknown verb 'list' for non-resource URLs",
        id="url-verb",
    ),
    pytest.param(non_resource("healthz", "test", "get")[0], "non-resource URL 'healthz'", id="relative-url"),
    pytest.param(non_resource("/a/*/b", "test", "get")[0], "'*' only at its end", id="star-inside-url"),
]


@pytest.mark.parametrize(("bad", "message"), REFUSED)
def test_rule_problem_names_what_kubernetes_refuses(bad: Rule, message: str) -> None:
    assert message in rule_problem(bad)


@pytest.mark.parametrize(
    "good",
    [
        *(rule(verb) for verb in RESOURCE_VERBS),
        *(rule(verb, names=("a",)) for verb in ("get", "update", "patch", "delete", "bind", "escalate")),
        *HEALTH,
        Rule("", "", "get", Scope.METRICS_AUTH, "test", non_resource_urls=("/metrics",)),
        *non_resource("/logs/*", "test", "*"),
    ],
)
def test_valid_rules_have_no_problem(good: Rule) -> None:
    assert rule_problem(good) == ""


_MODULES = count()


def write_project(directory: Path, *rules: str) -> str:
    """A module in ``directory`` holding a project whose Memcached controller has ``rules``
    (Python expressions) besides its own; the module's name (each one new: a module is imported
    once per process)."""
    module = f"rules_project_{next(_MODULES)}"
    (directory / f"{module}.py").write_text(
        textwrap.dedent(
            """\
            from dataclasses import replace

            from memop.memcached import DEFINITION
            from memop.project import Project
            from memop.runtime.api.permissions import Rule, Scope, non_resource, watched

            RBAC = "rbac.authorization.k8s.io"
            RULES = ({rules},)
            PROJECT = Project(
                name="tenants",
                domain="example.org",
                controllers=(replace(DEFINITION, name="tenant", rules=DEFINITION.rules + tuple(RULES)),),
            )
            """
        ).replace("{rules}", ", ".join(rules))
    )
    return module


@pytest.mark.parametrize(
    "case",
    [
        ('Rule("", "configmaps", "bless", Scope.WATCHED, "why")', "unknown verb 'bless'"),
        ('Rule("", "", "get", Scope.WATCHED, "why")', "no resource"),
        (
            'Rule("", "secrets", "list", Scope.WATCHED, "why", resource_names=("token",))',
            "rule list secrets (core) named token: resource_names with 'list'",
        ),
        (
            '*non_resource("/healthz", "why", "create")',
            "rule create /healthz (non-resource URLs): unknown verb 'create' for non-resource URLs",
        ),
        (
            'Rule("", "", "get", Scope.WATCHED, "why", non_resource_urls=("/healthz",))',
            "non_resource_urls in scope WATCHED",
        ),
    ],
)
@pytest.mark.parametrize("target", [[], ["rbac"], ["bundle", "--version", "1.0.0"], ["crd"]])
def test_a_bad_rule_is_one_error_line_naming_the_controller_and_exit_2(
    tmp_path: Path,
    case: tuple[str, str],
    target: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    declared, message = case
    module = write_project(tmp_path, declared)
    out = memop_manifests_here(
        *target, "--controller-module", module, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert_usage_error(out, "controller 'tenant': rule ")
    assert message in out.stderr
    assert not (tmp_path / "manifests").exists()
    assert not (tmp_path / "bundle").exists()


def test_bind_on_the_admin_clusterrole_ends_in_the_generated_roles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = write_project(
        tmp_path,
        '*watched(RBAC, "rolebindings", "tenant admins", "get", "create")',
        '*watched(RBAC, "clusterroles", "bind admin", "bind", resource_names=["admin"])',
        '*non_resource(["/version"], "the API server version", "get")',
    )
    out = memop_manifests_here(
        "--controller-module", module, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert out.returncode == 0, out.stderr
    manifests = tmp_path / "manifests"
    bind = {
        "apiGroups": [RBAC_GROUP],
        "resources": ["clusterroles"],
        "resourceNames": ["admin"],
        "verbs": ["bind"],
    }
    (cluster_role,) = yaml.safe_load_all((manifests / "rbac/role.yaml").read_text())
    assert (cluster_role["kind"], cluster_role["metadata"]["name"]) == ("ClusterRole", rbac.MANAGER_ROLE)
    assert bind in cluster_role["rules"]
    assert (
        "#   bind clusterroles (rbac.authorization.k8s.io) named admin: tenant: bind admin"
        in (manifests / "rbac/role.yaml").read_text()
    )
    (namespaced_role, _) = yaml.safe_load_all((manifests / "namespaced/role.yaml").read_text())
    assert bind in namespaced_role["rules"]
    # The URL is in a ClusterRole of its own, which every install keeps.
    role, role_binding = yaml.safe_load_all((manifests / "rbac/cluster_role.yaml").read_text())
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", rbac.MANAGER_CLUSTER_ROLE)
    assert role["rules"] == [{"nonResourceURLs": ["/version"], "verbs": ["get"]}]
    assert role_binding["roleRef"]["name"] == rbac.MANAGER_CLUSTER_ROLE
    assert "- cluster_role.yaml\n" in (manifests / "rbac/kustomization.yaml").read_text()
    printed = memop_manifests_here(
        "rbac", "--controller-module", module, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert [role, role_binding] == [
        obj
        for obj in yaml.safe_load_all(printed.stdout)
        if rbac.MANAGER_CLUSTER_ROLE in obj["metadata"]["name"]
    ]
    assert not any(
        "/version" in text for name, text in _files(manifests).items() if name != "rbac/cluster_role.yaml"
    )


@needs_kubectl
@pytest.mark.parametrize("install", ["default", "namespaced", "namespaced/multi", "sharded"])
def test_every_install_keeps_the_cluster_role(
    tmp_path: Path, install: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = write_project(tmp_path, '*non_resource(["/version"], "the API server version", "get")')
    out = memop_manifests_here(
        "--controller-module", module, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys
    )
    assert out.returncode == 0, out.stderr
    objects = render(tmp_path / "manifests", install)
    role = one(objects, "ClusterRole", "tenants-" + rbac.MANAGER_CLUSTER_ROLE)
    assert role["rules"] == [{"nonResourceURLs": ["/version"], "verbs": ["get"]}]
    role_binding = one(objects, "ClusterRoleBinding", "tenants-" + rbac.MANAGER_CLUSTER_ROLE_BINDING)
    assert role_binding["roleRef"]["name"] == role["metadata"]["name"]
    assert role_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "tenants-controller-manager", "namespace": "tenants-system"}
    ]


def _files(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): path.read_text() for path in root.rglob("*") if path.is_file()}


def test_the_bundle_grants_cluster_rules_as_cluster_permissions() -> None:
    definition = replace(MEMCACHED, rules=MEMCACHED.rules + BINDS_ADMIN + HEALTH)
    target = Target(Project(name="tenants", domain="example.org", controllers=(definition,)))
    spec = olm.cluster_service_version(target, olm.BundleOptions(version="1.0.0"))["spec"]["install"]["spec"]
    [cluster] = spec["clusterPermissions"]
    assert cluster["rules"] == [{"nonResourceURLs": ["/healthz", "/livez"], "verbs": ["get"]}]
    [namespaced] = spec["permissions"]
    assert {
        "apiGroups": [RBAC_GROUP],
        "resources": ["clusterroles"],
        "resourceNames": ["admin"],
        "verbs": ["bind"],
    } in (namespaced["rules"])
    assert "cluster_role.yaml" not in manifest_files(
        Target(Project(name="x", domain="example.org", controllers=(MEMCACHED,)))
    )
