"""The RBAC authorizer of kube-apiserver v1.36, over the store's Roles, ClusterRoles and bindings.

Facts from Kubernetes' source, kept here as rules (not code):

- ``plugin/pkg/auth/authorizer/rbac/rbac.go`` ``RuleAllows``: a resource request matches a rule
  when the verb (or ``*``), the API group (or ``*``), the resource (``*``, the exact
  ``resource/subresource``, or ``*/subresource``) and the name (any when the rule names none)
  match; a non-resource request when the verb and the path match (``*``, exact, or a prefix
  ending in ``*``).
- ``pkg/registry/rbac/validation/rule.go`` ``VisitRulesFor``: ClusterRoleBindings first, then
  the RoleBindings of the request's namespace (none for a cluster-scoped request). A binding
  applies when one of its subjects is the user (``User``), one of its groups (``Group``) or,
  for ``ServiceAccount``, ``system:serviceaccount:<namespace>:<name>`` with the subject's
  namespace, else the binding's. A binding whose role cannot be read adds an error
  (``roles.rbac.authorization.k8s.io "x" not found``), which becomes the denial's reason
  (``RBAC: <error>``, several as ``[a, b]``) only when nothing allowed the request.
- An allowed request's reason names its source: ``RBAC: allowed by ClusterRoleBinding "b" of
  ClusterRole "r" to User "u"`` (``RoleBinding "b/ns" ...``; a ServiceAccount subject as
  ``ServiceAccount "name/ns"``).
- ``policy_comparator.go`` ``Covers``: a set of rules covers another when each of the other's
  rules, broken into one (group, resource, verb, name) or (URL, verb) at a time, is covered by
  a single owner rule (``*`` verbs and groups, ``*`` or ``*/sub`` resources, no names covering
  any name, URL prefixes ending in ``*``).
- ``ConfirmNoEscalation``'s refusal: ``user "u" (groups=["g"]) is attempting to grant RBAC
  permissions not currently held:\\n{APIGroups:["apps"], Resources:["deployments"],
  Verbs:["create"]}`` (the missing sub-rules compacted by group/resource, one per line, sorted),
  with ``; resolution errors: [...]`` when some binding's role could not be read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memop.testing.apiserver.schema import go_quote
from memop.testing.apiserver.store import Store
from memop.testing.auth.authn import MASTERS_GROUP, UserInfo, service_account_username

RBAC_GROUP = "rbac.authorization.k8s.io"
# The rules of cluster-admin: what setting an aggregationRule needs (``fullAuthority``).
FULL_AUTHORITY: tuple[dict[str, Any], ...] = (
    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
    {"nonResourceURLs": ["*"], "verbs": ["*"]},
)

Rule = Mapping[str, Any]


@dataclass(frozen=True)
class GroupResource:
    """A group and a plural resource, as errors name them (``roles.rbac.authorization.k8s.io``)."""

    group: str
    plural: str


@dataclass(frozen=True)
class Attributes:
    """What a request asks (``authorizer.Attributes``): a resource request names its group,
    resource, subresource, namespace ("" for cluster scope) and name; a non-resource one its
    path."""

    user: UserInfo
    verb: str
    resource_request: bool = True
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


@dataclass(frozen=True)
class Decision:
    """An authorizer's answer: ``allowed`` and its reason ("" when there is none to give)."""

    allowed: bool
    reason: str = ""


def _strings(rule: Rule, key: str) -> list[str]:
    value = rule.get(key)
    return [str(v) for v in value] if isinstance(value, list) else []


def rule_allows(attrs: Attributes, rule: Rule) -> bool:
    """``RuleAllows``: whether ``rule`` grants the request (see the module docstring)."""
    verbs = _strings(rule, "verbs")
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        return any(_url_covers(url, attrs.path) for url in _strings(rule, "nonResourceURLs"))
    groups = _strings(rule, "apiGroups")
    if "*" not in groups and attrs.group not in groups:
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = _strings(rule, "resources")
    if not (
        "*" in resources
        or combined in resources
        or (attrs.subresource and f"*/{attrs.subresource}" in resources)
    ):
        return False
    names = _strings(rule, "resourceNames")
    return not names or attrs.name in names


def _url_covers(owner: str, path: str) -> bool:
    return owner in ("*", path) or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def _subject_applies(user: UserInfo, subject: Mapping[str, Any], namespace: str) -> bool:
    """``appliesToUser``: ``namespace`` is the binding's ("" for a ClusterRoleBinding)."""
    kind, name = subject.get("kind"), str(subject.get("name") or "")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = str(subject.get("namespace") or "") or namespace
        return bool(sa_namespace) and user.name == service_account_username(sa_namespace, name)
    return False


def _describe_subject(subject: Mapping[str, Any], namespace: str) -> str:
    kind, name = str(subject.get("kind") or ""), str(subject.get("name") or "")
    if kind == "ServiceAccount":
        return f"{kind} {go_quote(name + '/' + (str(subject.get('namespace') or '') or namespace))}"
    return f"{kind} {go_quote(name)}"


@dataclass
class RuleResolver:
    """``DefaultRuleResolver`` over the store: the rules that apply to a user in a namespace.
    ``prepare`` is called before each lookup (the server creates its bootstrap policy then)."""

    store: Store
    prepare: Callable[[], None] = lambda: None

    def _objects(self, plural: str, namespace: str) -> list[dict[str, Any]]:
        storage = self.store.storage_for(RBAC_GROUP, plural)
        if storage is None:
            return []
        return [entry.obj for entry in (storage.objects.get(namespace) or {}).values()]

    def role_reference_rules(self, ref: Mapping[str, Any], namespace: str) -> list[Rule]:
        """``GetRoleReferenceRules``: the rules of a binding's role; LookupError with the
        NotFound message when there is no such role."""
        self.prepare()
        kind, name = ref.get("kind"), str(ref.get("name") or "")
        if kind == "Role":
            plural, scope = "roles", namespace
        elif kind == "ClusterRole":
            plural, scope = "clusterroles", ""
        else:
            raise LookupError(f"unsupported role reference kind: {go_quote(str(kind))}")
        storage = self.store.storage_for(RBAC_GROUP, plural)
        entry = storage.get(scope, name) if storage is not None else None
        if entry is None:
            raise LookupError(f"{plural[:-1]}.{RBAC_GROUP} {go_quote(name)} not found")
        rules = entry.obj.get("rules")
        return [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []

    def visit(self, user: UserInfo, namespace: str) -> Iterator[tuple[str, Rule | None, str]]:
        """``VisitRulesFor``: (source, rule, "") for each rule that applies, ("", None, error)
        for each binding whose role cannot be read; ClusterRoleBindings first."""
        self.prepare()
        scopes = [("clusterrolebindings", "")]
        if namespace:
            scopes.append(("rolebindings", namespace))
        for plural, scope in scopes:
            for binding in self._objects(plural, scope):
                subjects = [s for s in binding.get("subjects") or () if isinstance(s, dict)]
                subject = next((s for s in subjects if _subject_applies(user, s, scope)), None)
                if subject is None:
                    continue
                ref = binding.get("roleRef") or {}
                try:
                    rules = self.role_reference_rules(ref, scope)
                except LookupError as error:
                    yield "", None, str(error)
                    continue
                meta = binding["metadata"]
                if scope:
                    where = f"RoleBinding {go_quote(meta['name'] + '/' + scope)}"
                else:
                    where = f"ClusterRoleBinding {go_quote(meta['name'])}"
                source = (
                    f"{where} of {ref.get('kind')} {go_quote(str(ref.get('name') or ''))} "
                    f"to {_describe_subject(subject, scope)}"
                )
                for rule in rules:
                    yield source, rule, ""

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Rule], list[str]]:
        """``RulesFor``: every rule that applies, and the resolution errors met."""
        rules: list[Rule] = []
        errors: list[str] = []
        for _, rule, error in self.visit(user, namespace):
            if rule is not None:
                rules.append(rule)
            if error:
                errors.append(error)
        return rules, errors


def aggregate(errors: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message as it is, several as ``[a, b]``."""
    if len(errors) == 1:
        return errors[0]
    return "[" + ", ".join(errors) + "]"


@dataclass
class RbacAuthorizer:
    """``RBACAuthorizer.Authorize``: allowed by the first rule that matches, else no opinion
    with the resolution errors as the reason."""

    resolver: RuleResolver

    def authorize(self, attrs: Attributes) -> Decision:
        errors: list[str] = []
        for source, rule, error in self.resolver.visit(attrs.user, attrs.namespace):
            if rule is not None and rule_allows(attrs, rule):
                return Decision(True, f"RBAC: allowed by {source}")
            if error:
                errors.append(error)
        return Decision(False, f"RBAC: {aggregate(errors)}" if errors else "")


@dataclass
class Authorizer:
    """kube-apiserver's authorizer chain, as a kubeadm cluster configures it (``Node,RBAC``, the
    Node authorizer having no opinion on anyone but kubelets): members of ``system:masters``
    first (the privileged-group authorizer, no reason), then RBAC, then the grants a test added
    with :meth:`grant` (like a webhook authorizer after RBAC: ``(user or group, verb, path or
    "group/resource")``)."""

    rbac: RbacAuthorizer
    grants: set[tuple[str, str, str]] = field(default_factory=set)

    def grant(self, subject: str, verb: str, target: str) -> None:
        """Let ``subject`` (a user or group name) ``verb`` ``target`` (a path like /metrics,
        or ``group/resource``); ``*`` as verb grants every verb."""
        self.grants.add((subject, verb, target))

    def authorize(self, attrs: Attributes) -> Decision:
        if MASTERS_GROUP in attrs.user.groups:
            return Decision(True)
        decision = self.rbac.authorize(attrs)
        if decision.allowed:
            return decision
        target = attrs.path if not attrs.resource_request else f"{attrs.group}/{attrs.resource}"
        for subject in (attrs.user.name, *attrs.user.groups):
            if (subject, attrs.verb, target) in self.grants or (subject, "*", target) in self.grants:
                return Decision(True, f"allowed for {go_quote(subject)} by the test's grants")
        return decision


# --- escalation -------------------------------------------------------------------------------------


def breakdown(rule: Rule) -> list[dict[str, list[str]]]:
    """``BreakdownRule``: the rule as sub-rules of one group, resource, verb and name (or one
    URL and verb)."""
    out: list[dict[str, list[str]]] = []
    names = _strings(rule, "resourceNames")
    for group in _strings(rule, "apiGroups"):
        for resource in _strings(rule, "resources"):
            for verb in _strings(rule, "verbs"):
                base = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                if names:
                    out.extend({**base, "resourceNames": [name]} for name in names)
                else:
                    out.append(base)
    for url in _strings(rule, "nonResourceURLs"):
        out.extend({"nonResourceURLs": [url], "verbs": [verb]} for verb in _strings(rule, "verbs"))
    return out


def _resources_cover(owner: list[str], wanted: list[str]) -> bool:
    if "*" in owner or set(wanted) <= set(owner):
        return True
    for path in wanted:
        if path in owner:
            continue
        if "/" not in path or "*/" + path.split("/", 1)[1] not in owner:
            return False
    return True


def _rule_covers(owner: Rule, sub: Mapping[str, list[str]]) -> bool:
    """``ruleCovers``: ``owner`` grants everything the sub-rule does."""
    verbs, groups = _strings(owner, "verbs"), _strings(owner, "apiGroups")
    owner_names = _strings(owner, "resourceNames")
    names = sub.get("resourceNames") or []
    return (
        ("*" in verbs or set(sub.get("verbs") or []) <= set(verbs))
        and ("*" in groups or set(sub.get("apiGroups") or []) <= set(groups))
        and _resources_cover(_strings(owner, "resources"), sub.get("resources") or [])
        and all(
            any(_url_covers(o, path) for o in _strings(owner, "nonResourceURLs"))
            for path in sub.get("nonResourceURLs") or []
        )
        and (not owner_names if not names else (not owner_names or set(names) <= set(owner_names)))
    )


def uncovered(owner_rules: Sequence[Rule], rules: Iterable[Rule]) -> list[dict[str, list[str]]]:
    """``Covers``' second result: the sub-rules of ``rules`` no owner rule covers."""
    return [
        sub
        for rule in rules
        for sub in breakdown(rule)
        if not any(_rule_covers(owner, sub) for owner in owner_rules)
    ]


def _compact(rules: list[dict[str, list[str]]]) -> list[dict[str, list[str]]]:
    """``CompactRules``: sub-rules of one group and resource, no names, merged across verbs."""
    out: list[dict[str, list[str]]] = []
    simple: dict[tuple[str, str], dict[str, list[str]]] = {}
    for rule in rules:
        if rule.get("resourceNames") or rule.get("nonResourceURLs"):
            out.append(rule)
            continue
        key = (rule["apiGroups"][0], rule["resources"][0])
        if key in simple:
            simple[key]["verbs"].extend(rule["verbs"])
        else:
            simple[key] = {k: list(v) for k, v in rule.items()}
    return out + list(simple.values())


def _go_strings(values: list[str]) -> str:
    """A []string as Go's ``%q`` prints it: ``["a" "b"]``."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


def compact_string(rule: Mapping[str, list[str]]) -> str:
    """``CompactString``: ``{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}``."""
    parts = [
        f"{label}:{_go_strings(rule[key])}"
        for label, key in (
            ("APIGroups", "apiGroups"),
            ("Resources", "resources"),
            ("NonResourceURLs", "nonResourceURLs"),
            ("ResourceNames", "resourceNames"),
            ("Verbs", "verbs"),
        )
        if rule.get(key)
    ]
    return "{" + ", ".join(parts) + "}"


def escalation_error(
    resolver: RuleResolver, user: UserInfo, namespace: str, rules: Iterable[Rule]
) -> str | None:
    """``ConfirmNoEscalation``: None when the user's rules in ``namespace`` cover ``rules``,
    else the refusal (see the module docstring)."""
    owner_rules, errors = resolver.rules_for(user, namespace)
    missing = uncovered(owner_rules, rules)
    if not missing:
        return None
    lines = sorted({compact_string(rule) for rule in _compact(missing)})
    message = (
        f"user {go_quote(user.name)} (groups={_go_strings(list(user.groups))}) is attempting to grant "
        "RBAC permissions not currently held:\n" + "\n".join(lines)
    )
    if errors:
        # ``%v`` of the []error the check collected: one aggregate holding every error.
        message += f"; resolution errors: [{aggregate(errors)}]"
    return message
