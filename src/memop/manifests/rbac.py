"""memop's RBAC, declared once: every permission the operator uses, and the manifests built from it.

:data:`RULES` lists each (API group, resource, verb) memop needs, the scope it needs it in, and
the code that sends it, so an audit reads one table. Everything else derives from it: the
ClusterRole of a cluster-wide install, the Role of each watched namespace in a namespaced
install, the leader-election Role, the committed YAML under ``manifests/`` (tests check the
committed files equal :func:`generated_files`) and the checks an end-to-end test runs on the
requests the API server saw (:func:`permitted`, :func:`allowed`, :func:`all_triples`).

Invariants:
- a permission is listed only when memop's code sends that request, or when the API server
  checks it on memop's behalf (``sent=False``: the OwnerReferencesPermissionEnforcement
  admission plugin checks ``update`` on ``memcacheds/finalizers`` before it lets memop set
  ``blockOwnerDeletion`` on the Deployment's ownerReference);
- resources are in RBAC form: ``plural`` or ``plural/subresource``;
- :data:`Scope.WATCHED` rules are granted wherever Memcacheds are watched (all namespaces by
  the ClusterRole, or one Role per watched namespace); :data:`Scope.OPERATOR` rules only in the
  operator's own namespace (the leader-election Lease); :data:`Scope.METRICS_AUTH` rules
  (cluster-scoped reviews) only by the manifests/secure-metrics install, whose memop runs with
  ``--metrics-secure``: an install without it must not hold them.

Regenerate the committed files with ``python -m memop.manifests.rbac`` (from the repository root).
``python -m memop.manifests.rbac roles NS [NS ...]`` prints the Role and RoleBinding of each namespace
for an overlay that watches other namespaces (see manifests/namespaced/multi).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from memop.cli.controllers import ALL
from memop.cli.options import parse_namespaces
from memop.runtime.api.permissions import Rule, Scope
from memop.runtime.controller.definition import ControllerDefinition

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"

# The names in manifests/rbac and manifests/manager, before the overlays' namePrefix (PREFIX)
# and namespace; the same names as a Kubebuilder project's config/, so the layout is familiar.
NAMESPACE = "memop-system"
PREFIX = "memop-"
SERVICE_ACCOUNT = "controller-manager"
MANAGER_ROLE = "manager-role"
MANAGER_ROLE_BINDING = "manager-rolebinding"
LEADER_ELECTION_ROLE = "leader-election-role"
LEADER_ELECTION_ROLE_BINDING = "leader-election-rolebinding"
# The namespaces manifests/namespaced/multi watches, as an example to copy.
MULTI_EXAMPLE_NAMESPACES = ("team-a", "team-b")
# manifests/secure-metrics and manifests/prometheus-secure (overlays on an install whose
# namePrefix is applied already, so their generated objects carry PREFIX themselves).
METRICS_AUTH_ROLE = "metrics-auth-role"
METRICS_AUTH_ROLE_BINDING = "metrics-auth-rolebinding"
METRICS_READER_ROLE = "metrics-reader"
METRICS_READER_ROLE_BINDING = "metrics-reader-rolebinding"
# manifests/leader-for-life: the role of --leader-election-mode=leader-for-life, which replaces
# the leader-election (Lease) role there.
LEADER_FOR_LIFE_ROLE = "leader-for-life-role"
LEADER_FOR_LIFE_ROLE_BINDING = "leader-for-life-rolebinding"
# The ServiceAccount kube-prometheus runs Prometheus as: the example scraper bound to the
# metrics-reader role (change it in manifests/prometheus-secure for another Prometheus).
PROMETHEUS_ACCOUNT = ("monitoring", "prometheus-k8s")

GENERATE_COMMAND = "python -m memop.manifests.rbac"
LABELS = {"app.kubernetes.io/name": "memop"}

# The order verbs are written in: read, then write, as kubectl describe lists them.
VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


_W, _O, _M = Scope.WATCHED, Scope.OPERATOR, Scope.METRICS_AUTH

# The manager's own permissions, whichever controllers run.
MANAGER_RULES: tuple[Rule, ...] = (
    Rule(
        "", "events", "create", _W, "event recorders: Events about the objects reconciled, in their namespace"
    ),
    Rule("", "events", "patch", _W, "event recorder: count of a repeated Event"),
    Rule("coordination.k8s.io", "leases", "get", _O, "leader election: read the Lease"),
    Rule("coordination.k8s.io", "leases", "create", _O, "leader election: first candidate"),
    Rule("coordination.k8s.io", "leases", "update", _O, "leader election: acquire, renew, release"),
    Rule("authentication.k8s.io", "tokenreviews", "create", _M, "--metrics-secure: who is scraping"),
    Rule(
        "authorization.k8s.io",
        "subjectaccessreviews",
        "create",
        _M,
        "--metrics-secure: may the scraper get /metrics",
    ),
)


def merged_rules(definitions: Iterable[ControllerDefinition]) -> tuple[Rule, ...]:
    """The controllers' rules and then the manager's, one per (group, resource, verb, scope):
    a permission two controllers need is granted once, its reason naming both."""
    merged: dict[tuple[tuple[str, str, str], Scope], Rule] = {}
    for definition in definitions:
        for rule in definition.rules:
            key = (rule.triple, rule.scope)
            why = f"{definition.name}: {rule.why}"
            known = merged.get(key)
            if known is not None:
                merged[key] = replace(known, sent=known.sent or rule.sent, why=f"{known.why}; {why}")
            else:
                merged[key] = replace(rule, why=why)
    for rule in MANAGER_RULES:
        merged.setdefault((rule.triple, rule.scope), rule)
    return tuple(merged.values())


# What --leader-election-mode=leader-for-life sends instead of the Lease requests, in the
# operator's namespace (memop.runtime.leaderelection.leaderforlife): granted by
# manifests/leader-for-life only.
LEADER_FOR_LIFE_RULES: tuple[Rule, ...] = (
    Rule("", "configmaps", "get", _O, "leader for life: read the lock"),
    Rule("", "configmaps", "create", _O, "leader for life: take the lock (owned by this replica's Pod)"),
    Rule(
        "",
        "configmaps",
        "delete",
        _O,
        "leader for life: remove a lock whose owner Pod is gone or finished (uid precondition)",
    ),
    Rule("", "pods", "get", _O, "leader for life: this replica's Pod (the lock's owner), and the holder's"),
)


# Every permission of every controller memop can run (manifests grant them all: --controllers
# only leaves controllers out, and a leaner install can drop their rules).
RULES = merged_rules(ALL.values())

# What a scraper needs when memop runs with --metrics-secure (the metrics-reader ClusterRole,
# bound to Prometheus's ServiceAccount): memop's SubjectAccessReview asks exactly this.
METRICS_READER_RULES = ({"nonResourceURLs": ["/metrics"], "verbs": ["get"]},)


# --- queries (for tests that compare what memop did with what it may do) -----------------------


def rbac_resource(resource: str, subresource: str = "") -> str:
    """A request's resource in RBAC form: ``memcacheds`` or ``memcacheds/status``."""
    return f"{resource}/{subresource}" if subresource else resource


def all_triples() -> set[tuple[str, str, str]]:
    """Every (group, resource, verb) memop is granted, in any scope."""
    return {rule.triple for rule in RULES}


def requested_triples(*, secure_metrics: bool = False) -> set[tuple[str, str, str]]:
    """The (group, resource, verb) memop itself sends: :func:`all_triples` without the
    permissions only the API server checks (``Rule.sent`` false), and without the reviews of
    ``--metrics-secure`` unless ``secure_metrics``."""
    return {
        rule.triple
        for rule in RULES
        if rule.sent and (secure_metrics or rule.scope is not Scope.METRICS_AUTH)
    }


def permitted(group: str, resource: str, verb: str, cluster: bool) -> bool:
    """Whether memop's RBAC grants ``verb`` on ``resource`` (RBAC form, see :func:`rbac_resource`).

    ``cluster``: the request is not confined to one namespace (a list or watch across all
    namespaces, or a cluster-scoped resource), so only the ClusterRole can grant it: the
    watched-scope rules. Otherwise the request is inside a namespace and the leader-election
    rules count too (granted in the operator's namespace only; :func:`allowed` checks that).
    The reviews of ``--metrics-secure`` are granted by one install only: :func:`allowed`.
    """
    return any(
        rule.triple == (group, resource, verb)
        and (rule.scope is Scope.WATCHED or (rule.scope is Scope.OPERATOR and not cluster))
        for rule in RULES
    )


def allowed(
    group: str,
    resource: str,
    verb: str,
    namespace: str,
    *,
    operator_namespace: str = NAMESPACE,
    watch_namespaces: Iterable[str] = (),
    secure_metrics: bool = False,
) -> bool:
    """Whether an install made from manifests/ lets memop send this request.

    ``namespace`` is the request's ("" for all namespaces or a cluster-scoped resource).
    ``watch_namespaces`` empty models manifests/default (ClusterRole: watched-scope rules
    everywhere); otherwise manifests/namespaced (a Role in each watched namespace, nothing
    cluster-wide). Leader-election rules hold in ``operator_namespace`` only. ``secure_metrics``
    models manifests/secure-metrics on top: the cluster-scoped reviews of ``--metrics-secure``.
    """
    watched = tuple(watch_namespaces)
    for rule in RULES:
        if rule.triple != (group, resource, verb):
            continue
        if rule.scope is Scope.OPERATOR and namespace == operator_namespace:
            return True
        if rule.scope is Scope.WATCHED and (not watched or namespace in watched):
            return True
        if rule.scope is Scope.METRICS_AUTH and secure_metrics and namespace == "":
            return True
    return False


# --- manifests ------------------------------------------------------------------------------------


def policy_rules(scope: Scope, rules: Iterable[Rule] = RULES) -> list[dict[str, Any]]:
    """The PolicyRules of ``scope`` among ``rules``: one per (group, resource), in declaration order."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        if rule.scope is scope:
            verbs.setdefault((rule.group, rule.resource), set()).add(rule.verb)
    return [
        {"apiGroups": [group], "resources": [resource], "verbs": sorted(vs, key=VERB_ORDER.index)}
        for (group, resource), vs in verbs.items()
    ]


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(LABELS)
    return meta


def service_account(name: str = SERVICE_ACCOUNT, namespace: str = NAMESPACE) -> dict[str, Any]:
    """The operator's ServiceAccount."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace)}


def _role(name: str, rules: list[dict[str, Any]], namespace: str | None = None) -> dict[str, Any]:
    """A Role in ``namespace``, or a ClusterRole without one, holding ``rules``."""
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRole" if namespace is None else "Role",
        "metadata": _meta(name, namespace),
        "rules": rules,
    }


def cluster_role(name: str) -> dict[str, Any]:
    """A ClusterRole with the watched-scope rules: what memop needs to watch all namespaces."""
    return _role(name, policy_rules(Scope.WATCHED))


def namespaced_role(name: str, namespace: str) -> dict[str, Any]:
    """A Role with the ClusterRole's rules, for one watched ``namespace``."""
    return _role(name, policy_rules(Scope.WATCHED), namespace)


def metrics_auth_role(name: str) -> dict[str, Any]:
    """The ClusterRole for ``--metrics-secure``: review a scraper's token and permission."""
    return _role(name, policy_rules(Scope.METRICS_AUTH))


def metrics_reader_role(name: str) -> dict[str, Any]:
    """The ClusterRole to bind to whatever scrapes memop's ``--metrics-secure`` endpoint."""
    return _role(name, [dict(rule) for rule in METRICS_READER_RULES])


def leader_election_role(name: str, namespace: str) -> dict[str, Any]:
    """The Role in the operator's ``namespace`` for its leader-election Lease."""
    return _role(name, policy_rules(Scope.OPERATOR), namespace)


def binding(
    kind: str,
    name: str,
    namespace: str | None,
    role_kind: str,
    role: str,
    *,
    account: str = SERVICE_ACCOUNT,
    account_namespace: str = NAMESPACE,
) -> dict[str, Any]:
    """A RoleBinding or ClusterRoleBinding (``kind``) of ``role`` to the ServiceAccount."""
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": kind,
        "metadata": _meta(name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": account_namespace}],
    }


def watched_namespace_rbac(
    namespaces: Sequence[str], *, operator_namespace: str = NAMESPACE, prefix: str = PREFIX
) -> list[dict[str, Any]]:
    """A Role and a RoleBinding (to the operator's ServiceAccount in ``operator_namespace``) in
    each of ``namespaces``, with their final names (``prefix`` included): for an overlay that
    adds them after the base's namePrefix and namespace were applied."""
    objects: list[dict[str, Any]] = []
    for namespace in namespaces:
        objects.append(namespaced_role(prefix + MANAGER_ROLE, namespace))
        objects.append(
            binding(
                "RoleBinding",
                prefix + MANAGER_ROLE_BINDING,
                namespace,
                "Role",
                prefix + MANAGER_ROLE,
                account=prefix + SERVICE_ACCOUNT,
                account_namespace=operator_namespace,
            )
        )
    return objects


def base_objects() -> list[dict[str, Any]]:
    """manifests/rbac in one list: ServiceAccount, ClusterRole and its binding, the
    leader-election Role and its binding (names before the overlays' prefix)."""
    return [obj for _, objects in _RBAC_FILES.values() for obj in objects()]


def to_yaml(objects: Iterable[dict[str, Any]], header: str = "") -> str:
    """Objects as a deterministic YAML stream (``---`` before each), after a comment ``header``."""
    documents = [yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=100) for obj in objects]
    return header + "".join("---\n" + document for document in documents)


def _header(
    description: str,
    command: str = GENERATE_COMMAND,
    scope: Scope | None = None,
    rules: Iterable[Rule] = RULES,
    source: str = "memop.manifests.rbac.RULES (each controller's rules)",
) -> str:
    """The comment atop a generated file: what it is, how it is made and, for ``scope``, why
    each permission is there (YAML cannot carry comments inside the rules)."""
    lines = [
        description,
        f"Generated by `{command}` from {source}: do not edit by hand.",
    ]
    if scope is not None:
        lines.append("Why each permission:")
        for rule in rules:
            if rule.scope is scope:
                group = rule.group or "core"
                lines.append(f"  {rule.verb} {rule.resource} ({group}): {rule.why}")
    return "".join(f"# {line}\n" for line in lines)


def rbac_yaml() -> str:
    """``python -m memop manifests rbac``: every object of manifests/rbac in one stream."""
    return to_yaml(
        base_objects(),
        _header(
            "manifests/rbac: memop's ServiceAccount, ClusterRole, leader-election Role, their bindings.",
            "python -m memop manifests rbac",
        ),
    )


# manifests/rbac/<file>: (the comment atop it, its objects).
_RBAC_FILES: dict[str, tuple[str, Callable[[], list[dict[str, Any]]]]] = {
    "service_account.yaml": ("The operator's ServiceAccount.", lambda: [service_account()]),
    "role.yaml": (
        "The ClusterRole: what memop needs in every namespace it watches.",
        lambda: [cluster_role(MANAGER_ROLE)],
    ),
    "role_binding.yaml": (
        "The ClusterRole, granted to the operator's ServiceAccount in every namespace.",
        lambda: [binding("ClusterRoleBinding", MANAGER_ROLE_BINDING, None, "ClusterRole", MANAGER_ROLE)],
    ),
    "leader_election_role.yaml": (
        "Leader election: the Lease in the operator's own namespace.",
        lambda: [leader_election_role(LEADER_ELECTION_ROLE, NAMESPACE)],
    ),
    "leader_election_role_binding.yaml": (
        "The leader-election Role, granted to the operator's ServiceAccount.",
        lambda: [
            binding("RoleBinding", LEADER_ELECTION_ROLE_BINDING, NAMESPACE, "Role", LEADER_ELECTION_ROLE)
        ],
    ),
}
_RULES_OF_FILE = {"role.yaml": Scope.WATCHED, "leader_election_role.yaml": Scope.OPERATOR}


def roles_yaml(
    namespaces: Sequence[str], *, operator_namespace: str = NAMESPACE, prefix: str = PREFIX
) -> str:
    """``python -m memop.manifests.rbac roles NS...``: :func:`watched_namespace_rbac` as YAML."""
    command = f"{GENERATE_COMMAND} roles {' '.join(namespaces)}"
    if operator_namespace != NAMESPACE:
        command += f" --operator-namespace {operator_namespace}"
    if prefix != PREFIX:
        command += f" --prefix {prefix}"
    return to_yaml(
        watched_namespace_rbac(namespaces, operator_namespace=operator_namespace, prefix=prefix),
        _header(
            f"A Role with the ClusterRole's rules and its binding in each watched namespace: "
            f"{', '.join(namespaces)}.",
            command,
            Scope.WATCHED,
        ),
    )


def generated_files() -> dict[str, str]:
    """Every committed file this module generates: path under the repository root -> text."""
    files = {
        f"manifests/rbac/{name}": to_yaml(objects(), _header(description, scope=_RULES_OF_FILE.get(name)))
        for name, (description, objects) in _RBAC_FILES.items()
    }
    files["manifests/namespaced/role.yaml"] = to_yaml(
        [
            namespaced_role(MANAGER_ROLE, NAMESPACE),
            binding("RoleBinding", MANAGER_ROLE_BINDING, NAMESPACE, "Role", MANAGER_ROLE),
        ],
        _header(
            "The ClusterRole's rules as a Role in the operator's own namespace (the one it watches), "
            "and its binding.",
            scope=Scope.WATCHED,
        ),
    )
    files["manifests/namespaced/multi/roles.yaml"] = roles_yaml(MULTI_EXAMPLE_NAMESPACES)
    files["manifests/secure-metrics/metrics_auth_role.yaml"] = to_yaml(
        [
            metrics_auth_role(PREFIX + METRICS_AUTH_ROLE),
            binding(
                "ClusterRoleBinding",
                PREFIX + METRICS_AUTH_ROLE_BINDING,
                None,
                "ClusterRole",
                PREFIX + METRICS_AUTH_ROLE,
                account=PREFIX + SERVICE_ACCOUNT,
            ),
        ],
        _header(
            "--metrics-secure: memop asks the API server who each scraper is (TokenReview) and "
            "whether it may get /metrics (SubjectAccessReview); both are cluster-scoped.",
            scope=Scope.METRICS_AUTH,
        ),
    )
    files["manifests/secure-metrics/metrics_reader_role.yaml"] = to_yaml(
        [metrics_reader_role(PREFIX + METRICS_READER_ROLE)],
        _header(
            "What a scraper of the --metrics-secure endpoint needs: get on /metrics. Bind it to "
            "your Prometheus (manifests/prometheus-secure binds kube-prometheus's)."
        ),
    )
    files["manifests/leader-for-life/leader_for_life_role.yaml"] = to_yaml(
        [
            _role(LEADER_FOR_LIFE_ROLE, policy_rules(Scope.OPERATOR, LEADER_FOR_LIFE_RULES), NAMESPACE),
            binding("RoleBinding", LEADER_FOR_LIFE_ROLE_BINDING, NAMESPACE, "Role", LEADER_FOR_LIFE_ROLE),
        ],
        _header(
            "Leader for life: the ConfigMap lock and the Pods that own it, in the operator's own "
            "namespace (instead of the Lease role).",
            scope=Scope.OPERATOR,
            rules=LEADER_FOR_LIFE_RULES,
            source="memop.manifests.rbac.LEADER_FOR_LIFE_RULES",
        ),
    )
    prometheus_namespace, prometheus_account = PROMETHEUS_ACCOUNT
    files["manifests/prometheus-secure/metrics_reader_role_binding.yaml"] = to_yaml(
        [
            binding(
                "ClusterRoleBinding",
                PREFIX + METRICS_READER_ROLE_BINDING,
                None,
                "ClusterRole",
                PREFIX + METRICS_READER_ROLE,
                account=prometheus_account,
                account_namespace=prometheus_namespace,
            )
        ],
        _header(
            f"Lets Prometheus (ServiceAccount {prometheus_namespace}/{prometheus_account}, as "
            "kube-prometheus runs it) scrape the --metrics-secure endpoint."
        ),
    )
    return files


def write_files(root: Path) -> list[Path]:
    """Write :func:`generated_files` under ``root`` (the repository); the paths that changed."""
    return write_changed(root, generated_files())


def write_changed(root: Path, files: Mapping[str, str]) -> list[Path]:
    """Write each relative path -> text of ``files`` under ``root`` unless it holds that text
    already; the paths written."""
    changed: list[Path] = []
    for relative, text in files.items():
        path = root / relative
        if path.exists() and path.read_text() == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        changed.append(path)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m memop.manifests.rbac [write] [--root DIR]`` or
    ``python -m memop.manifests.rbac roles NS...``."""
    parser = argparse.ArgumentParser(
        prog="python -m memop.manifests.rbac", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command")
    write = commands.add_parser("write", help="regenerate the committed RBAC files (the default)")
    write.add_argument("--root", type=Path, default=Path(), help="the repository root")
    roles = commands.add_parser(
        "roles", help="print a Role and RoleBinding in each namespace, for a namespaced overlay"
    )
    roles.add_argument("namespaces", nargs="+", metavar="NS")
    roles.add_argument("--operator-namespace", default=NAMESPACE)
    roles.add_argument("--prefix", default=PREFIX, help="the overlay's namePrefix")
    args = parser.parse_args(argv)
    if args.command == "roles":
        try:
            namespaces = parse_namespaces(",".join(args.namespaces))
            parse_namespaces(args.operator_namespace)
        except ValueError as error:
            parser.error(str(error))
        sys.stdout.write(
            roles_yaml(namespaces, operator_namespace=args.operator_namespace, prefix=args.prefix)
        )
        return 0
    root: Path = getattr(args, "root", Path())
    if not (root / "manifests").is_dir():
        parser.error(f"{root.resolve()} has no manifests/: run from the repository root or pass --root")
    for path in write_files(root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
