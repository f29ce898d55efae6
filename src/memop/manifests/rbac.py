"""RBAC, declared once: every permission an operator uses, and the manifests built from it.

A project's permissions are its controllers' rules (:attr:`ControllerDefinition.rules
<memop.runtime.controller.definition.ControllerDefinition>`), merged, and the manager's own
(:data:`MANAGER_RULES`): each (API group, resource, verb), the scope it is needed in and the code
that sends it, so an audit reads one table. Everything else derives from them: the ClusterRole
of a cluster-wide install, the Role of each watched namespace in a namespaced install, the
leader-election Role, the ``--metrics-secure``, leader-for-life and ``--sharding`` roles
(:func:`rbac_files`), the OLM bundle's permissions, and the checks an end-to-end test runs on the
requests the API server saw (:func:`permitted`, :func:`allowed`, :func:`all_triples`;
memop's own :data:`RULES` by default).

Invariants:
- a permission is listed only when the operator's code sends that request, or when the API
  server checks it on the operator's behalf (``sent=False``: the OwnerReferencesPermissionEnforcement
  admission plugin checks ``update`` on ``<plural>/finalizers`` before it lets a controller set
  ``blockOwnerDeletion`` on a child's ownerReference);
- resources are in RBAC form: ``plural`` or ``plural/subresource``;
- :data:`Scope.WATCHED` rules are granted wherever the controllers watch (all namespaces by the
  ClusterRole, or one Role per watched namespace); :data:`Scope.OPERATOR` rules only in the
  operator's own namespace (the leader-election Lease, or ``--sharding``'s Leases);
  :data:`Scope.METRICS_AUTH` rules (cluster-scoped reviews) only by the secure-metrics install,
  whose operator runs with ``--metrics-secure``: an install without it must not hold them;
- a rule is one a Kubernetes PolicyRule can hold (:func:`memop.runtime.api.permissions.rule_problem`
  is empty): :func:`merged_rules` raises :class:`RuleError` naming the controller and the rule
  otherwise, which ``memop manifests`` prints as its one error line;
- a PolicyRule is made of the rules of one scope with the same group, resource, resourceNames
  and nonResourceURLs (controller-gen's grouping, one resource per PolicyRule so each reads on
  its own), their verbs in :data:`VERB_ORDER` (``*`` alone when one of them is ``*``), in the
  order the rules were first declared;
- :data:`Scope.CLUSTER` rules (non-resource URLs, or what a controller needs cluster-wide
  whatever it watches) are a ClusterRole of their own in rbac/ (``cluster_role.yaml``, only
  when there are some), which every install keeps, and the OLM bundle's ``clusterPermissions``;
- memop's own roles name no resourceName: create cannot be limited by name, and the Lease's
  name is a flag (``--leader-election-id``) the install must not have to repeat. A project's
  rules may (``Rule.resource_names``: ``bind`` on the ClusterRole its RoleBindings refer to),
  and so do the self-managed webhook certificates' cluster-scoped grants
  (:func:`memop.runtime.webhook.selfmanaged.self_managed_certificate_rules`, made into a
  ClusterRole by :mod:`memop.manifests.certmanager`), which name the install's own webhook
  configurations and CRDs, which the manifests name themselves; a grant on every webhook
  configuration would let the operator intercept any request in the cluster.

The files are written by ``memop manifests`` (:mod:`memop.manifests.command`); ``memop
manifests rbac`` prints the objects of ``manifests/rbac`` and ``memop manifests roles NS...``
the Role and RoleBinding of each namespace an overlay watches (see manifests/namespaced/multi).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from memop.builtin import PROJECT as BUILTIN
from memop.manifests.target import COMMAND, SERVICE_ACCOUNT, Target, header, to_yaml
from memop.runtime.api.permissions import (
    NON_RESOURCE_VERBS,
    RESOURCE_VERBS,
    Rule,
    Scope,
    non_resource,
    rule_problem,
)
from memop.runtime.controller.definition import ControllerDefinition
from memop.runtime.manager.uninstall import UninstallGuardConfig, uninstall_guard_rules

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"

# The names in manifests/rbac, before the overlays' namePrefix.
MANAGER_ROLE = "manager-role"
MANAGER_ROLE_BINDING = "manager-rolebinding"
LEADER_ELECTION_ROLE = "leader-election-role"
LEADER_ELECTION_ROLE_BINDING = "leader-election-rolebinding"
# The Scope.CLUSTER rules' ClusterRole, which every install keeps (rbac/cluster_role.yaml).
MANAGER_CLUSTER_ROLE = "manager-cluster-role"
MANAGER_CLUSTER_ROLE_BINDING = "manager-cluster-rolebinding"
# The namespaces manifests/namespaced/multi watches, as an example to copy.
MULTI_EXAMPLE_NAMESPACES = ("team-a", "team-b")
# manifests/secure-metrics and manifests/prometheus-secure (overlays on an install whose
# namePrefix is applied already, so their generated objects carry the prefix themselves).
METRICS_AUTH_ROLE = "metrics-auth-role"
METRICS_AUTH_ROLE_BINDING = "metrics-auth-rolebinding"
METRICS_READER_ROLE = "metrics-reader"
METRICS_READER_ROLE_BINDING = "metrics-reader-rolebinding"
# manifests/leader-for-life: the role of --leader-election-mode=leader-for-life, which replaces
# the leader-election (Lease) role there.
LEADER_FOR_LIFE_ROLE = "leader-for-life-role"
LEADER_FOR_LIFE_ROLE_BINDING = "leader-for-life-rolebinding"
# manifests/sharded: the role of --sharding, which replaces the leader-election role there.
SHARDING_ROLE = "sharding-role"
SHARDING_ROLE_BINDING = "sharding-rolebinding"
# manifests/sharded: patch on what the controllers create, to label children made before sharding.
SHARDING_CHILDREN_ROLE = "sharding-children-role"
SHARDING_CHILDREN_ROLE_BINDING = "sharding-children-rolebinding"
# The ServiceAccount kube-prometheus runs Prometheus as: the example scraper bound to the
# metrics-reader role (change it in manifests/prometheus-secure for another Prometheus).
PROMETHEUS_ACCOUNT = ("monitoring", "prometheus-k8s")

# memop's own install (the defaults of the queries below, and of the tests that use them).
NAMESPACE = BUILTIN.namespace
PREFIX = f"{BUILTIN.name}-"

# The order verbs are written in: read, then write, as kubectl describe lists them, then the
# special verbs; a non-resource rule's HTTP methods in NON_RESOURCE_VERBS's order.
VERB_ORDER = RESOURCE_VERBS


_W, _O, _M, _C = Scope.WATCHED, Scope.OPERATOR, Scope.METRICS_AUTH, Scope.CLUSTER

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

# What --sharding sends instead of leader election's requests, in the operator's namespace
# (memop.runtime.sharding.membership, and the manager's probe of the filtering mode): granted by
# manifests/sharded only. Leader election's three verbs, and list, watch and delete.
SHARDING_RULES: tuple[Rule, ...] = (
    Rule(
        "coordination.k8s.io",
        "leases",
        "get",
        _O,
        "sharding: this replica's member Lease, when creating it finds one (a lost answer's)",
    ),
    Rule(
        "coordination.k8s.io",
        "leases",
        "list",
        _O,
        "sharding: the group's Leases every round (label sharding.memop.dev/group); at start, one "
        "with a shardSelector, to see whether the server filters by it",
    ),
    Rule(
        "coordination.k8s.io",
        "leases",
        "watch",
        _O,
        "sharding: the group's Leases, to see each member's renewal when it is written, not at "
        "the next round",
    ),
    Rule(
        "coordination.k8s.io",
        "leases",
        "create",
        _O,
        "sharding: this replica's member Lease, and a shard's Lease the first time",
    ),
    Rule(
        "coordination.k8s.io",
        "leases",
        "update",
        _O,
        "sharding: renew the member Lease; take a shard's Lease, clear it once drained",
    ),
    Rule("coordination.k8s.io", "leases", "delete", _O, "sharding: this replica's member Lease, on shutdown"),
)

# What a child needs besides: labelling. Events are records, not children.
_NOT_CHILDREN = frozenset((("", "events"), ("events.k8s.io", "events")))


def sharding_children_rules(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    """What --sharding sends where the controllers watch beyond their own rules: ``patch`` on each
    kind they create (their children), to give the children an unsharded memop made their owner's
    bucket label when a replica takes a shard (memop.runtime.sharding.adoption). Granted by
    manifests/sharded only, and only where the controllers do not patch that kind already."""
    granted = {rule.triple for rule in rules if rule.scope is Scope.WATCHED}
    out: dict[tuple[str, str, str], Rule] = {}
    for rule in rules:
        if rule.scope is not Scope.WATCHED or rule.verb != "create" or "/" in rule.resource:
            continue
        if (rule.group, rule.resource) in _NOT_CHILDREN or (rule.group, rule.resource, "patch") in granted:
            continue
        triple = (rule.group, rule.resource, "patch")
        out.setdefault(
            triple,
            Rule(
                rule.group,
                rule.resource,
                "patch",
                Scope.WATCHED,
                "sharding: label what was made before sharding with its owner's bucket "
                "(sharding.memop.dev/bucket), once, when a replica takes the owner's shard",
            ),
        )
    return tuple(out.values())


# What a scraper needs when the operator runs with --metrics-secure (the metrics-reader
# ClusterRole, bound to Prometheus's ServiceAccount): the SubjectAccessReview asks exactly this.
METRICS_READER_RULES = non_resource("/metrics", "scrape the --metrics-secure endpoint", "get")


class RuleError(ValueError):
    """A controller declares a rule Kubernetes would refuse or ignore: the message names both."""


def merged_rules(definitions: Iterable[ControllerDefinition]) -> tuple[Rule, ...]:
    """The controllers' rules and then the manager's, one per (:attr:`Rule.key`, scope): a
    permission two controllers need is granted once, its reason naming both.

    Raises :class:`RuleError` on the first rule :func:`rule_problem` finds wrong."""
    merged: dict[tuple[object, Scope], Rule] = {}
    for definition in definitions:
        for rule in definition.rules:
            problem = rule_problem(rule)
            if problem:
                raise RuleError(f"controller {definition.name!r}: rule {rule.describe()}: {problem}")
            key = (rule.key, rule.scope)
            why = f"{definition.name}: {rule.why}"
            known = merged.get(key)
            if known is not None:
                merged[key] = replace(known, sent=known.sent or rule.sent, why=f"{known.why}; {why}")
            else:
                merged[key] = replace(rule, why=why)
    for rule in MANAGER_RULES:
        merged.setdefault((rule.key, rule.scope), rule)
    return tuple(merged.values())


# Every permission of memop's own controllers (its manifests grant them all: --controllers
# only leaves controllers out, and a leaner install can drop their rules).
RULES = merged_rules(BUILTIN.controllers)


# --- queries (for tests that compare what an operator did with what it may do) ---------------------


def rbac_resource(resource: str, subresource: str = "") -> str:
    """A request's resource in RBAC form: ``memcacheds`` or ``memcacheds/status``."""
    return f"{resource}/{subresource}" if subresource else resource


def all_triples(rules: Iterable[Rule] = RULES) -> set[tuple[str, str, str]]:
    """Every (group, resource, verb) granted, in any scope."""
    return {rule.triple for rule in rules}


def requested_triples(
    *, secure_metrics: bool = False, rules: Iterable[Rule] = RULES
) -> set[tuple[str, str, str]]:
    """The (group, resource, verb) the operator itself sends: :func:`all_triples` without the
    permissions only the API server checks (``Rule.sent`` false), and without the reviews of
    ``--metrics-secure`` unless ``secure_metrics``."""
    return {
        rule.triple
        for rule in rules
        if rule.sent and (secure_metrics or rule.scope is not Scope.METRICS_AUTH)
    }


def permitted(
    group: str, resource: str, verb: str, cluster: bool, rules: Iterable[Rule] = RULES, *, name: str = ""
) -> bool:
    """Whether the RBAC grants ``verb`` on ``resource`` (RBAC form, see :func:`rbac_resource`).

    ``cluster``: the request is not confined to one namespace (a list or watch across all
    namespaces, or a cluster-scoped resource), so only the ClusterRole can grant it: the
    watched-scope and cluster-scope rules. Otherwise the request is inside a namespace and the
    leader-election rules count too (granted in the operator's namespace only; :func:`allowed`
    checks that). The reviews of ``--metrics-secure`` are granted by one install only:
    :func:`allowed`. ``name``: the object's, for rules limited by ``resource_names``.
    """
    return any(
        rule.grants(group, resource, verb, name)
        and (rule.scope in (Scope.WATCHED, Scope.CLUSTER) or (rule.scope is Scope.OPERATOR and not cluster))
        for rule in rules
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
    sharding: bool = False,
    rules: Iterable[Rule] = RULES,
    name: str = "",
) -> bool:
    """Whether an install made from the generated manifests lets the operator send this request.

    ``namespace`` is the request's ("" for all namespaces or a cluster-scoped resource).
    ``watch_namespaces`` empty models manifests/default (ClusterRole: watched-scope rules
    everywhere); otherwise manifests/namespaced (a Role in each watched namespace, nothing
    cluster-wide). Leader-election rules hold in ``operator_namespace`` only. ``secure_metrics``
    models manifests/secure-metrics on top: the cluster-scoped reviews of ``--metrics-secure``.
    ``sharding`` models manifests/sharded: :data:`SHARDING_RULES` instead of the leader-election
    rules, and :func:`sharding_children_rules`. Cluster-scope rules hold everywhere, in every
    install. ``name``: the object's, for rules limited by ``resource_names``.
    """
    watched = tuple(watch_namespaces)
    if sharding:
        rules = tuple(rules)
        rules = (
            *(rule for rule in rules if rule.scope is not Scope.OPERATOR),
            *SHARDING_RULES,
            *sharding_children_rules(rules),
        )
    for rule in rules:
        if not rule.grants(group, resource, verb, name):
            continue
        if rule.scope is Scope.CLUSTER:
            return True
        if rule.scope is Scope.OPERATOR and namespace == operator_namespace:
            return True
        if rule.scope is Scope.WATCHED and (not watched or namespace in watched):
            return True
        if rule.scope is Scope.METRICS_AUTH and secure_metrics and namespace == "":
            return True
    return False


# --- objects ---------------------------------------------------------------------------------------


def policy_rules(scope: Scope, rules: Iterable[Rule] = RULES) -> list[dict[str, Any]]:
    """The PolicyRules of ``scope`` among ``rules``: one per (group, resource, resourceNames,
    nonResourceURLs), in declaration order, its verbs in :data:`VERB_ORDER` (see the module's
    invariants)."""
    verbs: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], set[str]] = {}
    for rule in rules:
        if rule.scope is scope:
            _, _, _, names, urls = rule.key
            verbs.setdefault((rule.group, rule.resource, names, urls), set()).add(rule.verb)
    return [_policy_rule(*key, vs) for key, vs in verbs.items()]


def _policy_rule(
    group: str, resource: str, names: tuple[str, ...], urls: tuple[str, ...], verbs: set[str]
) -> dict[str, Any]:
    order = NON_RESOURCE_VERBS if urls else VERB_ORDER
    written = ["*"] if "*" in verbs else sorted(verbs, key=order.index)
    if urls:
        return {"nonResourceURLs": list(urls), "verbs": written}
    rule: dict[str, Any] = {"apiGroups": [group], "resources": [resource]}
    if names:
        rule["resourceNames"] = list(names)
    rule["verbs"] = written
    return rule


def _meta(target: Target, name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = target.labels
    return meta


def service_account(target: Target) -> dict[str, Any]:
    """The operator's ServiceAccount (its name before the overlays' prefix)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(target, SERVICE_ACCOUNT, target.namespace),
    }


def role(
    target: Target, name: str, rules: list[dict[str, Any]], namespace: str | None = None
) -> dict[str, Any]:
    """A Role in ``namespace``, or a ClusterRole without one, holding ``rules``."""
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRole" if namespace is None else "Role",
        "metadata": _meta(target, name, namespace),
        "rules": rules,
    }


def binding(
    target: Target,
    name: str,
    namespace: str | None,
    ref: tuple[str, str],
    *,
    account: str = SERVICE_ACCOUNT,
    account_namespace: str | None = None,
) -> dict[str, Any]:
    """A RoleBinding in ``namespace``, or a ClusterRoleBinding without one, of the role ``ref``
    (kind, name) to a ServiceAccount: the operator's, in its namespace, unless ``account`` and
    ``account_namespace`` say otherwise."""
    role_kind, role_name = ref
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRoleBinding" if namespace is None else "RoleBinding",
        "metadata": _meta(target, name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": account,
                "namespace": account_namespace or target.namespace,
            }
        ],
    }


def watched_namespace_rbac(target: Target, namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """A Role and a RoleBinding (to the operator's ServiceAccount) in each of ``namespaces``,
    with their final names (prefix included): for an overlay that adds them after the base's
    namePrefix and namespace were applied."""
    objects: list[dict[str, Any]] = []
    for namespace in namespaces:
        objects.append(role(target, target.prefix + MANAGER_ROLE, policy_rules(_W, target.rules), namespace))
        objects.append(
            binding(
                target,
                target.prefix + MANAGER_ROLE_BINDING,
                namespace,
                ("Role", target.prefix + MANAGER_ROLE),
                account=target.service_account,
            )
        )
    return objects


def base_objects(target: Target) -> list[dict[str, Any]]:
    """manifests/rbac in one list: ServiceAccount, ClusterRole and its binding, the
    leader-election Role and its binding (names before the overlays' prefix)."""
    return [obj for _, objects, _ in _base_files(target).values() for obj in objects]


def _why(rules: Iterable[Rule], scope: Scope) -> list[str]:
    """Why each permission of ``scope`` is there (YAML cannot carry comments inside the rules)."""
    lines = ["Why each permission:"]
    for rule in rules:
        if rule.scope is scope:
            lines.append(f"  {rule.describe()}: {rule.why}")
    return lines


_SOURCE = "each controller's rules"


def uninstall_guard_names(target: Target) -> tuple[str, str, str]:
    """``--uninstall-guard``'s ServiceAccount, role and binding: their final names (the role a
    ClusterRole, or in the namespaced install a Role, of the same name)."""
    return (target.service_account, target.prefix + MANAGER_ROLE, target.prefix + MANAGER_ROLE_BINDING)


def namespaced_role_rules(target: Target) -> tuple[Rule, ...]:
    """The rules of the namespaced install's Role: the ClusterRole's, and the uninstall guard's
    on its Role, RoleBinding, ServiceAccount and namespace."""
    config = UninstallGuardConfig(target.namespace, *uninstall_guard_names(target), namespaced=True)
    return (*target.rules, *uninstall_guard_rules(config, ()))


def manager_role_rules(target: Target) -> tuple[Rule, ...]:
    """The rules of the cluster-wide installs' ClusterRole: the controllers' and the manager's,
    and the uninstall guard's on the install's own objects (it guards this very role)."""
    config = UninstallGuardConfig(target.namespace, *uninstall_guard_names(target))
    crds = [crd["metadata"]["name"] for d in target.project.controllers for crd in d.crds()]
    return (*target.rules, *uninstall_guard_rules(config, crds))


def _base_files(target: Target) -> dict[str, tuple[str, list[dict[str, Any]], Scope | None]]:
    """manifests/rbac/<file>: (what it is, its objects, the scope whose reasons its header lists)."""
    ns = target.namespace
    return {
        "service_account.yaml": ("The operator's ServiceAccount.", [service_account(target)], None),
        "role.yaml": (
            f"The ClusterRole: what {target.name} needs in every namespace it watches, and what it"
            " needs to keep this role until it has released its finalizers (--uninstall-guard).",
            [role(target, MANAGER_ROLE, policy_rules(_W, manager_role_rules(target)))],
            _W,
        ),
        "role_binding.yaml": (
            "The ClusterRole, granted to the operator's ServiceAccount in every namespace.",
            [binding(target, MANAGER_ROLE_BINDING, None, ("ClusterRole", MANAGER_ROLE))],
            None,
        ),
        "leader_election_role.yaml": (
            "Leader election: the Lease in the operator's own namespace.",
            [role(target, LEADER_ELECTION_ROLE, policy_rules(_O, target.rules), ns)],
            _O,
        ),
        "leader_election_role_binding.yaml": (
            "The leader-election Role, granted to the operator's ServiceAccount.",
            [binding(target, LEADER_ELECTION_ROLE_BINDING, ns, ("Role", LEADER_ELECTION_ROLE))],
            None,
        ),
        **_cluster_file(target),
    }


def _cluster_file(target: Target) -> dict[str, tuple[str, list[dict[str, Any]], Scope | None]]:
    """rbac/cluster_role.yaml when the controllers have Scope.CLUSTER rules."""
    rules = policy_rules(_C, target.rules)
    if not rules:
        return {}
    objects = [
        role(target, MANAGER_CLUSTER_ROLE, rules),
        binding(target, MANAGER_CLUSTER_ROLE_BINDING, None, ("ClusterRole", MANAGER_CLUSTER_ROLE)),
    ]
    description = (
        f"What {target.name} needs cluster-wide in every install, whatever namespaces it watches "
        "(non-resource URLs among them), and its binding to the operator's ServiceAccount."
    )
    return {"cluster_role.yaml": (description, objects, _C)}


def base_file_names(target: Target) -> list[str]:
    """The files of manifests/rbac (its kustomization's resources), in order."""
    return list(_base_files(target))


def rbac_yaml(target: Target) -> str:
    """``memop manifests rbac``: every object of manifests/rbac in one stream."""
    return to_yaml(
        base_objects(target),
        header(
            target,
            f"manifests/rbac: {target.name}'s ServiceAccount, ClusterRole, leader-election Role, "
            + ("cluster-scope ClusterRole, " if _cluster_file(target) else "")
            + "their bindings.",
            command=f"{COMMAND} rbac {target.select}",
        ),
    )


def roles_yaml(target: Target, namespaces: Sequence[str], command: str = "") -> str:
    """``memop manifests roles NS...``: :func:`watched_namespace_rbac` as YAML."""
    return to_yaml(
        watched_namespace_rbac(target, namespaces),
        header(
            target,
            f"A Role with the ClusterRole's rules and its binding in each watched namespace: "
            f"{', '.join(namespaces)}.",
            source=_SOURCE,
            command=command or f"{COMMAND} roles {' '.join(namespaces)} {target.select}",
            notes=_why(target.rules, _W),
        ),
    )


def rbac_files(target: Target) -> dict[str, str]:
    """Every RBAC file of the project's manifests: path under ``manifests/`` -> text."""
    files: dict[str, str] = {}
    for name, (description, objects, scope) in _base_files(target).items():
        rules = manager_role_rules(target) if name == "role.yaml" else target.rules
        notes = _why(rules, scope) if scope else ()
        files[f"rbac/{name}"] = to_yaml(objects, header(target, description, source=_SOURCE, notes=notes))
    ns, prefix = target.namespace, target.prefix
    files["namespaced/role.yaml"] = to_yaml(
        [
            role(target, MANAGER_ROLE, policy_rules(_W, namespaced_role_rules(target)), ns),
            binding(target, MANAGER_ROLE_BINDING, ns, ("Role", MANAGER_ROLE)),
        ],
        header(
            target,
            "The ClusterRole's rules as a Role in the operator's own namespace (the one it watches), "
            "and its binding; and what it needs to keep them until it has released its finalizers "
            "(--uninstall-guard).",
            source=_SOURCE,
            notes=_why(namespaced_role_rules(target), _W),
        ),
    )
    files["namespaced/multi/roles.yaml"] = roles_yaml(target, MULTI_EXAMPLE_NAMESPACES, target.command)
    files["secure-metrics/metrics_auth_role.yaml"] = to_yaml(
        [
            role(target, prefix + METRICS_AUTH_ROLE, policy_rules(_M, target.rules)),
            binding(
                target,
                prefix + METRICS_AUTH_ROLE_BINDING,
                None,
                ("ClusterRole", prefix + METRICS_AUTH_ROLE),
                account=target.service_account,
            ),
        ],
        header(
            target,
            f"--metrics-secure: {target.name} asks the API server who each scraper is (TokenReview) "
            "and whether it may get /metrics (SubjectAccessReview); both are cluster-scoped.",
            source=_SOURCE,
            notes=_why(target.rules, _M),
        ),
    )
    files["secure-metrics/metrics_reader_role.yaml"] = to_yaml(
        [role(target, prefix + METRICS_READER_ROLE, policy_rules(_C, METRICS_READER_RULES))],
        header(
            target,
            "What a scraper of the --metrics-secure endpoint needs: get on /metrics. Bind it to "
            "your Prometheus (manifests/prometheus-secure binds kube-prometheus's).",
        ),
    )
    files["leader-for-life/leader_for_life_role.yaml"] = to_yaml(
        [
            role(target, LEADER_FOR_LIFE_ROLE, policy_rules(_O, LEADER_FOR_LIFE_RULES), ns),
            binding(target, LEADER_FOR_LIFE_ROLE_BINDING, ns, ("Role", LEADER_FOR_LIFE_ROLE)),
        ],
        header(
            target,
            "Leader for life: the ConfigMap lock and the Pods that own it, in the operator's own "
            "namespace (instead of the Lease role).",
            source="memop.manifests.rbac.LEADER_FOR_LIFE_RULES",
            notes=_why(LEADER_FOR_LIFE_RULES, _O),
        ),
    )
    files["sharded/sharding_role.yaml"] = to_yaml(
        [
            role(target, SHARDING_ROLE, policy_rules(_O, SHARDING_RULES), ns),
            binding(target, SHARDING_ROLE_BINDING, ns, ("Role", SHARDING_ROLE)),
        ],
        header(
            target,
            "--sharding: the replicas' Leases in the operator's own namespace (instead of the "
            "leader-election role).",
            "A Role of its own rather than a patch adding list and delete to the leader-election "
            "Role: it is made from the rules --sharding sends, so each verb says why below, its name "
            "says what it is for, and the install holds no leader-election grant it does not use.",
            source="memop.manifests.rbac.SHARDING_RULES",
            notes=_why(SHARDING_RULES, _O),
        ),
    )
    children = sharding_children_rules(target.rules)
    files["sharded/sharding_children_role.yaml"] = to_yaml(
        [
            role(target, SHARDING_CHILDREN_ROLE, policy_rules(_W, children)),
            binding(target, SHARDING_CHILDREN_ROLE_BINDING, None, ("ClusterRole", SHARDING_CHILDREN_ROLE)),
        ],
        header(
            target,
            "--sharding: patch on what the controllers create, where they watch, to label what an "
            "unsharded install made with its owner's bucket (memop.runtime.sharding.adoption).",
            source="memop.manifests.rbac.sharding_children_rules",
            notes=_why(children, _W),
        ),
    )
    prometheus_namespace, prometheus_account = PROMETHEUS_ACCOUNT
    files["prometheus-secure/metrics_reader_role_binding.yaml"] = to_yaml(
        [
            binding(
                target,
                prefix + METRICS_READER_ROLE_BINDING,
                None,
                ("ClusterRole", prefix + METRICS_READER_ROLE),
                account=prometheus_account,
                account_namespace=prometheus_namespace,
            )
        ],
        header(
            target,
            f"Lets Prometheus (ServiceAccount {prometheus_namespace}/{prometheus_account}, as "
            "kube-prometheus runs it) scrape the --metrics-secure endpoint.",
        ),
    )
    return files
