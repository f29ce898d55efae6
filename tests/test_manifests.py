"""The install manifests: RBAC generated from memop.manifests.rbac, and every kustomize overlay rendered
offline by ``kubectl kustomize`` (no server involved) and checked against memop's own code:
the rules it is granted, the flags its Deployment passes, the ports and probes it serves."""

from __future__ import annotations

import functools
import inspect
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

import memop
from memop.cli.controllers import ALL
from memop.cli.options import RunConfig, build_parser, parse_run_args
from memop.manifests import command as manifests
from memop.manifests import rbac
from memop.memcached.api import GROUP, PLURAL, parse_spec
from memop.memcached.desired import desired_deployment
from memop.runtime.client.resources import DEPLOYMENTS, EVENTS, LEASES, PODS
from memop.runtime.manager.authn import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from memop.runtime.manager.events import EventRecorder

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = REPO / "manifests"
OPERATOR_NAMESPACE = "memop-system"
PREFIX = "memop-"
SERVICE_ACCOUNT = (OPERATOR_NAMESPACE, PREFIX + rbac.SERVICE_ACCOUNT)
OVERLAYS = (
    "crd",
    "rbac",
    "manager",
    "default",
    "namespaced",
    "namespaced/multi",
    "secure-metrics",
    "prometheus",
    "prometheus-secure",
    "leader-for-life",
    "grafana",
)

Obj = dict[str, Any]
T = TypeVar("T")


def needs_kubectl(test: T) -> T:
    """Mark a test that renders kustomizations: skipped, saying why, without kubectl."""
    skip = pytest.mark.skipif(
        shutil.which("kubectl") is None, reason="kubectl is not on PATH: cannot render kustomizations"
    )
    return pytest.mark.kubectl(skip(test))  # type: ignore[no-any-return]


# --- generated RBAC ----------------------------------------------------------------------------


@pytest.mark.parametrize("relative", sorted(rbac.generated_files()))
def test_committed_rbac_is_the_generated_one(relative: str) -> None:
    assert (REPO / relative).read_text() == rbac.generated_files()[relative], (
        f"regenerate: {rbac.GENERATE_COMMAND} (from the repository root)"
    )


def test_manifests_rbac_prints_the_objects_of_manifests_rbac() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memop", "manifests", "rbac"], capture_output=True, text=True, check=True
    )
    assert out.stdout == rbac.rbac_yaml()
    committed = [
        obj
        for name in yaml.safe_load((MANIFESTS / "rbac/kustomization.yaml").read_text())["resources"]
        for obj in yaml.safe_load_all((MANIFESTS / "rbac" / name).read_text())
    ]
    assert list(yaml.safe_load_all(out.stdout)) == committed
    assert [o["kind"] for o in committed] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ]


def test_generated_rbac_is_deterministic() -> None:
    assert rbac.generated_files() == rbac.generated_files()
    assert rbac.rbac_yaml() == rbac.rbac_yaml()


def test_write_files_writes_only_what_changed(tmp_path: Path) -> None:
    (tmp_path / "manifests").mkdir()
    first = rbac.write_files(tmp_path)
    assert sorted(str(p.relative_to(tmp_path)) for p in first) == sorted(rbac.generated_files())
    assert rbac.write_files(tmp_path) == []
    role = tmp_path / "manifests/rbac/role.yaml"
    role.write_text("edited by hand\n")
    assert rbac.write_files(tmp_path) == [role]
    assert role.read_text() == rbac.generated_files()["manifests/rbac/role.yaml"]


def test_rbac_module_refuses_a_directory_without_manifests(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memop.manifests.rbac", "write", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert "has no manifests/" in out.stderr


def test_rbac_roles_command_prints_a_role_and_binding_per_namespace() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "memop.manifests.rbac",
            "roles",
            "ns-1",
            "ns-2",
            "--operator-namespace",
            "ops",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    objects = list(yaml.safe_load_all(out.stdout))
    assert objects == rbac.watched_namespace_rbac(["ns-1", "ns-2"], operator_namespace="ops")
    assert [(o["kind"], o["metadata"]["namespace"]) for o in objects] == [
        ("Role", "ns-1"),
        ("RoleBinding", "ns-1"),
        ("Role", "ns-2"),
        ("RoleBinding", "ns-2"),
    ]
    assert objects[1]["subjects"] == [
        {"kind": "ServiceAccount", "name": PREFIX + rbac.SERVICE_ACCOUNT, "namespace": "ops"}
    ]
    assert "roles ns-1 ns-2 --operator-namespace ops" in out.stdout.splitlines()[1]


def test_rbac_roles_command_rejects_invalid_namespaces() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memop.manifests.rbac", "roles", "Team_A"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert "invalid namespace 'Team_A'" in out.stderr


# --- the rules themselves ----------------------------------------------------------------------


def test_rules_are_unique_and_use_real_verbs() -> None:
    triples = [rule.triple for rule in rbac.RULES]
    assert len(triples) == len(set(triples))
    assert all(rule.verb in rbac.VERB_ORDER for rule in rbac.RULES)
    assert all(rule.why for rule in rbac.RULES)


def test_rules_name_the_resources_memop_uses() -> None:
    """Group and plural of every rule come from the resources memop's code talks to."""
    served = {
        (crd["spec"]["group"], crd["spec"]["names"]["plural"]) for d in ALL.values() for crd in d.crds()
    }
    used = served | {(r.group, r.plural) for r in (DEPLOYMENTS, PODS, EVENTS, LEASES)}
    used |= {(r.group, r.plural) for r in (TOKEN_REVIEWS, SUBJECT_ACCESS_REVIEWS)}
    assert {(rule.group, rule.resource.split("/")[0]) for rule in rbac.RULES} == used


@pytest.mark.parametrize("controller", ["podset", "mypod"])
def test_the_pod_controllers_may_create_delete_list_and_watch_pods_and_no_more(controller: str) -> None:
    rules = ALL[controller].rules
    assert {rule.verb for rule in rules if (rule.group, rule.resource) == ("", "pods")} == {
        "create",
        "delete",
        "list",
        "watch",
    }
    assert {(rule.group, rule.resource) for rule in rules} - {("", "pods")} == {
        (crd["spec"]["group"], f"{crd['spec']['names']['plural']}{sub}")
        for crd in ALL[controller].crds()
        for sub in ("", "/status", "/finalizers")
    }, "a pod controller touches its own kind and pods, nothing else"


def test_a_permission_two_controllers_need_is_granted_once_naming_both() -> None:
    (pods_list,) = [rule for rule in rbac.RULES if rule.triple == ("", "pods", "list")]
    assert all(f"{name}: " in pods_list.why for name in ALL)


def test_no_wildcards_and_no_reads_of_secrets() -> None:
    for rule in rbac.RULES:
        assert "*" not in (rule.group, rule.resource, rule.verb)
        assert rule.resource not in ("secrets", "configmaps")


def test_only_the_admission_check_is_not_a_request() -> None:
    assert rbac.all_triples() - rbac.requested_triples(secure_metrics=True) == {
        (crd["spec"]["group"], f"{crd['spec']['names']['plural']}/finalizers", "update")
        for definition in ALL.values()
        for crd in definition.crds()
    }


def test_the_reviews_are_requested_only_with_secure_metrics() -> None:
    reviews = {
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    }
    assert rbac.requested_triples(secure_metrics=True) - rbac.requested_triples() == reviews
    assert {rule.triple for rule in rbac.RULES if rule.scope is rbac.Scope.METRICS_AUTH} == reviews


def test_policy_rules_group_verbs_per_resource() -> None:
    rules = rbac.policy_rules(rbac.Scope.WATCHED)
    assert {(r["apiGroups"][0], r["resources"][0]) for r in rules} == {
        (rule.group, rule.resource) for rule in rbac.RULES if rule.scope is rbac.Scope.WATCHED
    }
    flattened = {(r["apiGroups"][0], r["resources"][0], v) for r in rules for v in r["verbs"]}
    assert flattened == {rule.triple for rule in rbac.RULES if rule.scope is rbac.Scope.WATCHED}
    assert rbac.policy_rules(rbac.Scope.OPERATOR) == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}
    ]


def test_permitted() -> None:
    assert rbac.permitted(GROUP, PLURAL, "watch", cluster=True)
    assert rbac.permitted(GROUP, "memcacheds/status", "patch", cluster=False)
    assert rbac.permitted("apps", "deployments", "delete", cluster=False)
    # The Lease is granted in one namespace, never cluster-wide.
    assert rbac.permitted("coordination.k8s.io", "leases", "update", cluster=False)
    assert not rbac.permitted("coordination.k8s.io", "leases", "update", cluster=True)
    # Only what memop sends: no update of Memcacheds, no get of anything it caches.
    assert not rbac.permitted(GROUP, PLURAL, "update", cluster=False)
    assert not rbac.permitted(GROUP, "memcacheds/status", "update", cluster=False)
    assert not rbac.permitted("apps", "deployments", "get", cluster=False)
    assert not rbac.permitted("", "pods", "update", cluster=False)
    assert not rbac.permitted("", "secrets", "get", cluster=True)
    # The reviews of --metrics-secure belong to one install only (see allowed).
    assert not rbac.permitted("authentication.k8s.io", "tokenreviews", "create", cluster=True)


def test_allowed_models_both_installs() -> None:
    lease = ("coordination.k8s.io", "leases", "get")
    assert rbac.allowed(*lease, OPERATOR_NAMESPACE)
    assert not rbac.allowed(*lease, "team-a")
    assert not rbac.allowed(*lease, "")
    watch = (GROUP, PLURAL, "watch")
    assert rbac.allowed(*watch, "")  # cluster-wide install: every namespace at once
    assert rbac.allowed(*watch, "anywhere")
    assert rbac.allowed(*watch, "team-a", watch_namespaces=["team-a"])
    assert not rbac.allowed(*watch, "", watch_namespaces=["team-a"])
    assert not rbac.allowed(*watch, "team-b", watch_namespaces=["team-a"])
    assert not rbac.allowed(*watch, OPERATOR_NAMESPACE, watch_namespaces=["team-a"])
    review = ("authorization.k8s.io", "subjectaccessreviews", "create")
    assert not rbac.allowed(*review, "")
    assert rbac.allowed(*review, "", secure_metrics=True)
    assert rbac.allowed(*review, "", watch_namespaces=["team-a"], secure_metrics=True)
    assert not rbac.allowed(*review, OPERATOR_NAMESPACE, secure_metrics=True)  # cluster-scoped


def test_rbac_resource() -> None:
    assert rbac.rbac_resource("memcacheds") == "memcacheds"
    assert rbac.rbac_resource("memcacheds", "status") == "memcacheds/status"


# --- rendering -------------------------------------------------------------------------------


@functools.cache
def _render(directory: str) -> tuple[Obj, ...]:
    out = subprocess.run(
        ["kubectl", "kustomize", directory], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 0, f"kubectl kustomize {directory} failed:\n{out.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(out.stdout) if doc)


def render(overlay: str) -> list[Obj]:
    """The objects of manifests/<overlay> as kustomize builds them (fresh copies)."""
    return yaml.safe_load(yaml.safe_dump(list(_render(str(MANIFESTS / overlay)))))


def kinds(objects: Iterable[Obj]) -> list[str]:
    return sorted(o["kind"] for o in objects)


def one(objects: Iterable[Obj], kind: str, name: str | None = None, namespace: str | None = None) -> Obj:
    found = [
        o
        for o in objects
        if o["kind"] == kind
        and (name is None or o["metadata"]["name"] == name)
        and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]
    assert len(found) == 1, f"expected one {kind} {namespace}/{name}, found {len(found)}"
    return found[0]


def container(deployment: Obj) -> Obj:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["manager"]
    return containers[0]


def run_config(deployment: Obj) -> RunConfig:
    """What memop's own parser makes of the Deployment's args and environment, as in the pod."""
    env: dict[str, str] = {}
    for var in container(deployment).get("env") or ():
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            assert var["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}, var
            env[var["name"]] = deployment["metadata"]["namespace"]
    return parse_run_args(container(deployment).get("args") or [], env=env)


def _grants(objects: list[Obj], group: str, resource: str, verb: str, namespace: str) -> bool:
    """What the API server's RBAC authorizer decides for memop's ServiceAccount, from the
    rendered Roles, ClusterRoles and bindings (no wildcards or resourceNames are used)."""
    roles = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o.get("rules") or []
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    for b in objects:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(
            s["kind"] == "ServiceAccount" and (s["namespace"], s["name"]) == SERVICE_ACCOUNT
            for s in b["subjects"]
        ):
            continue
        ref = b["roleRef"]
        if b["kind"] == "ClusterRoleBinding":
            rules = roles.get(("ClusterRole", "", ref["name"]), [])
        else:
            if namespace != b["metadata"]["namespace"]:
                continue
            role_namespace = b["metadata"]["namespace"] if ref["kind"] == "Role" else ""
            rules = roles.get((ref["kind"], role_namespace, ref["name"]), [])
        for rule in rules:
            if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
                return True
    return False


@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_kustomization_renders(overlay: str) -> None:
    objects = render(overlay)
    assert objects
    assert all(o.get("apiVersion") and o.get("kind") and o["metadata"].get("name") for o in objects)


# Every controller's CRD is in every install.
CRDS = sum(len(definition.crds()) for definition in ALL.values())
EXPECTED_KINDS = {
    "default": [
        "ClusterRole",
        "ClusterRoleBinding",
        *["CustomResourceDefinition"] * CRDS,
        "Deployment",
        "Namespace",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ],
    "namespaced": [
        *["CustomResourceDefinition"] * CRDS,
        "Deployment",
        "Namespace",
        "PodDisruptionBudget",
        "Role",
        "Role",
        "RoleBinding",
        "RoleBinding",
        "ServiceAccount",
    ],
    "namespaced/multi": [
        *["CustomResourceDefinition"] * CRDS,
        "Deployment",
        "Namespace",
        "PodDisruptionBudget",
        "Role",
        "Role",
        "Role",
        "RoleBinding",
        "RoleBinding",
        "RoleBinding",
        "ServiceAccount",
    ],
    "secure-metrics": [
        "ClusterRole",
        "ClusterRole",
        "ClusterRole",
        "ClusterRoleBinding",
        "ClusterRoleBinding",
        *["CustomResourceDefinition"] * CRDS,
        "Deployment",
        "Namespace",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ],
    "prometheus": ["PrometheusRule", "Service", "ServiceMonitor"],
    "prometheus-secure": ["ClusterRoleBinding", "PrometheusRule", "Service", "ServiceMonitor"],
    "grafana": ["ConfigMap"],
}
INSTALLS = ("default", "namespaced", "namespaced/multi", "secure-metrics")


@needs_kubectl
@pytest.mark.parametrize("overlay", sorted(EXPECTED_KINDS))
def test_overlays_have_the_expected_kinds(overlay: str) -> None:
    assert kinds(render(overlay)) == EXPECTED_KINDS[overlay]


@needs_kubectl
@pytest.mark.parametrize("overlay", INSTALLS)
def test_installs_name_and_place_everything_consistently(overlay: str) -> None:
    """memop-<name> in memop-system, but for the CRD and Namespace (their own names) and the
    cluster-scoped RBAC; the watched namespaces' Roles and RoleBindings in those namespaces."""
    objects = render(overlay)
    watched = set(_install_namespaces(overlay))
    watched_rbac = {PREFIX + rbac.MANAGER_ROLE, PREFIX + rbac.MANAGER_ROLE_BINDING}
    for obj in objects:
        meta = obj["metadata"]
        assert meta["labels"]["app.kubernetes.io/part-of"] == "memop", meta
        if obj["kind"] == "CustomResourceDefinition":
            assert meta["name"] in {crd["metadata"]["name"] for d in ALL.values() for crd in d.crds()}
        elif obj["kind"] == "Namespace":
            assert meta["name"] == OPERATOR_NAMESPACE
        else:
            assert meta["name"].startswith(PREFIX), meta
            assert not meta["name"].startswith(PREFIX * 2), meta
        if obj["kind"] in ("CustomResourceDefinition", "Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert "namespace" not in meta
        elif obj["kind"] in ("Role", "RoleBinding") and meta["name"] in watched_rbac:
            assert meta["namespace"] in watched, meta
        else:
            assert meta["namespace"] == OPERATOR_NAMESPACE, meta


@needs_kubectl
@pytest.mark.parametrize("overlay", INSTALLS)
def test_every_crd_is_installed_unchanged(overlay: str) -> None:
    installed = [obj for obj in render(overlay) if obj["kind"] == "CustomResourceDefinition"]
    for obj in installed:
        assert obj["metadata"].pop("labels") == {"app.kubernetes.io/part-of": "memop"}
    by_name = {obj["metadata"]["name"]: obj for obj in installed}
    assert by_name == {crd["metadata"]["name"]: crd for d in ALL.values() for crd in d.crds()}


@needs_kubectl
def test_default_install_grants_the_generated_rules_cluster_wide() -> None:
    objects = render("default")
    cluster_role = one(objects, "ClusterRole")
    assert cluster_role["rules"] == rbac.policy_rules(rbac.Scope.WATCHED)
    assert cluster_role["metadata"]["name"] == PREFIX + rbac.MANAGER_ROLE
    election = one(objects, "Role", PREFIX + rbac.LEADER_ELECTION_ROLE, OPERATOR_NAMESPACE)
    assert election["rules"] == rbac.policy_rules(rbac.Scope.OPERATOR)
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": cluster_role["metadata"]["name"],
    }
    account = one(objects, "ServiceAccount")
    assert (account["metadata"]["namespace"], account["metadata"]["name"]) == SERVICE_ACCOUNT
    assert one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == SERVICE_ACCOUNT[1]


@needs_kubectl
def test_namespaced_install_has_no_cluster_rules_and_watches_its_namespace() -> None:
    objects = render("namespaced")
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    role = one(objects, "Role", PREFIX + rbac.MANAGER_ROLE, OPERATOR_NAMESPACE)
    assert role["rules"] == rbac.policy_rules(rbac.Scope.WATCHED)
    deployment = one(objects, "Deployment")
    env = {v["name"]: v for v in container(deployment)["env"]}
    assert env["WATCH_NAMESPACE"] == {
        "name": "WATCH_NAMESPACE",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
    }
    assert run_config(deployment).namespaces == (OPERATOR_NAMESPACE,)


@needs_kubectl
def test_multi_namespace_install_has_a_role_in_each_watched_namespace_only() -> None:
    objects = render("namespaced/multi")
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    watched = run_config(one(objects, "Deployment")).namespaces
    assert watched == rbac.MULTI_EXAMPLE_NAMESPACES
    manager_roles = [
        o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == PREFIX + rbac.MANAGER_ROLE
    ]
    assert sorted(o["metadata"]["namespace"] for o in manager_roles) == sorted(watched)
    assert all(o["rules"] == rbac.policy_rules(rbac.Scope.WATCHED) for o in manager_roles)


def _install_namespaces(overlay: str) -> tuple[str, ...]:
    return run_config(one(render(overlay), "Deployment")).namespaces


@needs_kubectl
@pytest.mark.parametrize("overlay", INSTALLS)
def test_rendered_rbac_grants_exactly_what_memop_rbac_allowed_says(overlay: str) -> None:
    """An RBAC authorizer over the rendered objects agrees with :func:`memop.manifests.rbac.allowed`
    for every rule, in every kind of namespace, plus requests memop must not be allowed."""
    objects = render(overlay)
    watched = _install_namespaces(overlay)
    secure = run_config(one(objects, "Deployment")).metrics_secure
    assert secure == (overlay == "secure-metrics")
    triples = rbac.all_triples() | {
        (GROUP, PLURAL, "update"),
        (GROUP, PLURAL, "delete"),
        ("apps", "deployments", "get"),
        ("", "pods", "delete"),
        ("", "secrets", "get"),
        ("coordination.k8s.io", "leases", "delete"),
        ("coordination.k8s.io", "leases", "list"),
    }
    namespaces = ("", OPERATOR_NAMESPACE, *rbac.MULTI_EXAMPLE_NAMESPACES, "elsewhere")
    cluster_scoped = {"tokenreviews", "subjectaccessreviews"}  # requests without a namespace
    for triple in sorted(triples):
        for namespace in namespaces if triple[1] not in cluster_scoped else ("",):
            expected = rbac.allowed(*triple, namespace, watch_namespaces=watched, secure_metrics=secure)
            assert _grants(objects, *triple, namespace) == expected, (overlay, triple, namespace)


# --- the operator Deployment --------------------------------------------------------------------


RESTRICTED_VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def assert_restricted(pod: Obj) -> None:
    """The Pod Security Standard "restricted" (the checks that apply to this pod)."""
    pod_context = pod.get("securityContext") or {}
    for host_namespace in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(host_namespace)
    for volume in pod.get("volumes") or ():
        assert set(volume) - {"name"} <= RESTRICTED_VOLUME_TYPES, volume
    for c in [*pod["containers"], *(pod.get("initContainers") or ())]:
        context = c.get("securityContext") or {}
        merged = {**pod_context, **context}
        assert merged.get("runAsNonRoot") is True
        assert merged.get("runAsUser") != 0
        assert context.get("allowPrivilegeEscalation") is False
        assert context.get("privileged") in (None, False)
        assert context.get("capabilities", {}).get("drop") == ["ALL"]
        assert not context.get("capabilities", {}).get("add")
        assert merged.get("seccompProfile", {}).get("type") in ("RuntimeDefault", "Localhost")
        for port in c.get("ports") or ():
            assert "hostPort" not in port


def dockerfile_user() -> tuple[int, int]:
    users = [
        line.split(None, 1)[1].strip()
        for line in (REPO / "Dockerfile").read_text().splitlines()
        if line.startswith("USER ")
    ]
    uid, gid = users[-1].split(":")
    return int(uid), int(gid)


def dockerfile_env(name: str) -> str:
    for line in (REPO / "Dockerfile").read_text().replace("\\\n", " ").splitlines():
        if line.startswith("ENV "):
            for pair in line[4:].split():
                key, _, value = pair.partition("=")
                if key == name:
                    return value
    raise AssertionError(f"the Dockerfile sets no {name}")


@pytest.fixture
def deployment() -> Obj:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH: cannot render kustomizations")
    return one(render("default"), "Deployment")


@needs_kubectl
def test_deployment_runs_two_replicas_of_this_version_with_leader_election(deployment: Obj) -> None:
    assert deployment["metadata"]["name"] == PREFIX + "controller-manager"
    assert deployment["metadata"]["namespace"] == OPERATOR_NAMESPACE
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert container(deployment)["image"] == f"memop:{memop.__version__}"
    config = run_config(deployment)
    assert config.leader_elect
    # The Lease namespace comes from the mounted service account, the token from the same place.
    assert config.leader_election_namespace is None
    assert spec["template"]["spec"]["automountServiceAccountToken"] is True
    assert config.namespaces == ()  # cluster-wide install: every namespace


@needs_kubectl
@pytest.mark.parametrize("overlay", INSTALLS)
def test_every_arg_and_env_var_is_accepted_by_memops_parser(overlay: str) -> None:
    deployment = one(render(overlay), "Deployment")
    run_config(deployment)  # raises UsageError on a typo, a bad value or a contradiction
    options = [action.option_strings for action in build_parser()._actions if action.option_strings]
    # Spelled in full: argparse would also take an unambiguous abbreviation.
    flags = {flag for strings in options for flag in strings}
    for arg in container(deployment)["args"]:
        assert arg.split("=", 1)[0] in flags, f"{arg} is not spelled as one of memop's flags"
    known = {strings[0][2:].upper().replace("-", "_") for strings in options if strings[0].startswith("--")}
    for var in container(deployment).get("env") or ():
        assert var["name"] in known, f"{var['name']} is not one of memop's environment variables"


@needs_kubectl
def test_ports_match_the_bind_addresses_and_probes(deployment: Obj) -> None:
    c = container(deployment)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": 8080, "probes": 8081}
    config = run_config(deployment)
    assert config.metrics_address is not None
    assert config.probe_address is not None
    assert config.metrics_address.port == ports["metrics"]
    assert config.probe_address.port == ports["probes"]
    # The kubelet probes the pod IP: the servers must listen on every interface.
    assert config.metrics_address.host == config.probe_address.host == "0.0.0.0"
    live, ready = c["livenessProbe"], c["readinessProbe"]
    assert live["httpGet"] == {"path": "/healthz", "port": "probes"}
    assert ready["httpGet"] == {"path": "/readyz", "port": "probes"}
    for probe in (live, ready):
        assert probe["periodSeconds"] > probe["timeoutSeconds"] >= 1
        assert probe["failureThreshold"] >= 3
    # Liveness must not kill a pod that is still syncing its cache: it starts later and is slower.
    assert live["initialDelaySeconds"] >= ready["initialDelaySeconds"]
    assert live["periodSeconds"] >= ready["periodSeconds"]


@needs_kubectl
def test_termination_grace_covers_memops_graceful_shutdown(deployment: Obj) -> None:
    config = run_config(deployment)
    event_flush = inspect.signature(EventRecorder.stop).parameters["timeout"].default
    needed = config.graceful_shutdown_timeout + config.retry_period + event_flush
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > needed, f"SIGKILL after {grace}s would cut memop's shutdown ({needed}s) short"
    assert grace <= 2 * needed  # and a stuck pod does not hold a rollout for minutes


@needs_kubectl
def test_security_context_is_restricted_and_matches_the_image(deployment: Obj) -> None:
    pod = deployment["spec"]["template"]["spec"]
    assert_restricted(pod)
    context = container(deployment)["securityContext"]
    assert context == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert (context["runAsUser"], context["runAsGroup"]) == dockerfile_user()
    assert pod["securityContext"]["runAsNonRoot"] is True


@needs_kubectl
def test_the_only_writable_path_is_an_empty_dir_at_home(deployment: Obj) -> None:
    pod = deployment["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in container(deployment)["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert list(mounts) == ["/tmp"]
    assert dockerfile_env("HOME") == "/tmp"
    assert "emptyDir" in volumes[mounts["/tmp"]]


def _quantity(text: str) -> float:
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


@needs_kubectl
def test_resources_fit_memops_memory_target(deployment: Obj) -> None:
    resources = container(deployment)["resources"]
    for name in ("cpu", "memory"):
        assert _quantity(resources["requests"][name]) <= _quantity(resources["limits"][name])
    # memop targets at most 150 MB with 10k Memcacheds: the limit must leave room for that.
    assert _quantity(resources["limits"]["memory"]) >= 150e6


@needs_kubectl
def test_namespace_enforces_the_restricted_pod_security_standard() -> None:
    labels = one(render("default"), "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_memcached_pods_are_admitted_in_the_restricted_operator_namespace() -> None:
    """The namespaced install watches memop-system, which enforces "restricted": the pods memop
    creates for a Memcached there must pass it too."""
    sample = yaml.safe_load((MANIFESTS / "samples/cache_v1alpha1_memcached.yaml").read_text())
    sample["metadata"].update(namespace=OPERATOR_NAMESPACE, uid="0b8f4c2e-5c1a-4d8e-9a57-1f2e3d4c5b6a")
    deployment = desired_deployment(sample, parse_spec(sample))
    assert_restricted(deployment["spec"]["template"]["spec"])


@needs_kubectl
def test_pod_disruption_budget_keeps_a_replica(deployment: Obj) -> None:
    budget = one(render("default"), "PodDisruptionBudget")
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert budget["spec"]["maxUnavailable"] < deployment["spec"]["replicas"]


@needs_kubectl
def test_the_image_can_be_overridden_with_kustomize_images(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(MANIFESTS / "default", tmp_path)],
                "images": [{"name": "memop", "newName": "registry.example.com/memop", "newTag": "9.9.9"}],
            }
        )
    )
    deployment = one(_render(str(tmp_path)), "Deployment")
    assert container(deployment)["image"] == "registry.example.com/memop:9.9.9"


# --- metrics -----------------------------------------------------------------------------------


@needs_kubectl
def test_metrics_service_and_monitor_reach_the_operators_metrics_port(deployment: Obj) -> None:
    objects = render("prometheus")
    service = one(objects, "Service")
    monitor = one(objects, "ServiceMonitor")
    assert service["metadata"]["namespace"] == monitor["metadata"]["namespace"] == OPERATOR_NAMESPACE
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    [port] = service["spec"]["ports"]
    assert port["name"] == "metrics"
    assert port["port"] == 8080
    assert port["targetPort"] in {p["name"] for p in container(deployment)["ports"]}
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"


@needs_kubectl
def test_secure_metrics_install_runs_metrics_secure_with_the_review_role() -> None:
    objects = render("secure-metrics")
    deployment = one(objects, "Deployment")
    config = run_config(deployment)
    assert config.metrics_secure
    assert config.metrics_address is not None
    assert config.metrics_address.port == 8080  # the Service's port: only the scheme changes
    auth_role = one(objects, "ClusterRole", PREFIX + rbac.METRICS_AUTH_ROLE)
    assert auth_role["rules"] == rbac.policy_rules(rbac.Scope.METRICS_AUTH)
    auth_binding = one(objects, "ClusterRoleBinding", PREFIX + rbac.METRICS_AUTH_ROLE_BINDING)
    assert auth_binding["roleRef"]["name"] == auth_role["metadata"]["name"]
    assert [(s["namespace"], s["name"]) for s in auth_binding["subjects"]] == [SERVICE_ACCOUNT]
    # Everything but the reviews, the reader role and the flag is the default install's.
    added = {PREFIX + rbac.METRICS_AUTH_ROLE, PREFIX + rbac.METRICS_AUTH_ROLE_BINDING}
    added.add(PREFIX + rbac.METRICS_READER_ROLE)
    rest = [o for o in objects if o["metadata"]["name"] not in added and o["kind"] != "Deployment"]
    default = render("default")
    assert rest == [o for o in default if o["kind"] != "Deployment"]
    args = container(deployment)["args"]
    assert args == [*container(one(default, "Deployment"))["args"], "--metrics-secure"]


@needs_kubectl
def test_the_reader_role_grants_what_memops_subject_access_review_asks() -> None:
    """memop asks "may this user get the non-resource URL /metrics"; the reader role says yes,
    and the secure ServiceMonitor's Prometheus account is bound to it."""
    reader = one(render("secure-metrics"), "ClusterRole", PREFIX + rbac.METRICS_READER_ROLE)
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    source = inspect.getsource(memop.runtime.manager.authn.MetricsAuthorizer)
    assert '"nonResourceAttributes": {"path": path, "verb": verb}' in source
    objects = render("prometheus-secure")
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": reader["metadata"]["name"],
    }
    namespace, account = rbac.PROMETHEUS_ACCOUNT
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]


@needs_kubectl
def test_secure_monitor_scrapes_over_https_with_prometheus_token() -> None:
    plain = render("prometheus")
    objects = render("prometheus-secure")
    assert one(objects, "Service") == one(plain, "Service")
    [endpoint] = one(objects, "ServiceMonitor")["spec"]["endpoints"]
    [plain_endpoint] = one(plain, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint == {
        **plain_endpoint,
        "scheme": "https",
        "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "tlsConfig": {"insecureSkipVerify": True},
    }


# --- generated CRDs and samples, per controller ---------------------------------------------------


@pytest.mark.parametrize("name", sorted(manifests.crd_files()))
def test_committed_crds_are_the_generated_ones(name: str) -> None:
    assert (MANIFESTS / "crd" / name).read_text() == manifests.crd_files()[name], (
        "regenerate: python -m memop manifests crd"
    )


def test_manifests_crd_writes_every_crd_and_leaves_equal_files_alone(tmp_path: Path) -> None:
    target = tmp_path / "crd"
    first = subprocess.run(
        [sys.executable, "-m", "memop", "manifests", "crd", "--dir", str(target)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert {path.name: path.read_text() for path in target.iterdir()} == manifests.crd_files()
    assert first.stdout.count("wrote ") == len(manifests.crd_files())
    again = subprocess.run(
        [sys.executable, "-m", "memop", "manifests", "crd", "--dir", str(target)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert again.stdout == ""


@pytest.mark.parametrize(
    ("controller", "name"),
    [(definition.name, name) for definition in ALL.values() for name in definition.samples()],
)
def test_committed_samples_are_the_controllers_samples(controller: str, name: str) -> None:
    committed = yaml.safe_load((MANIFESTS / "samples" / name).read_text())
    assert committed == ALL[controller].samples()[name]


def test_every_committed_sample_belongs_to_a_controller() -> None:
    declared = {name for definition in ALL.values() for name in definition.samples()}
    assert {path.name for path in (MANIFESTS / "samples").glob("*.yaml")} - {"kustomization.yaml"} == declared
