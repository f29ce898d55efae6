"""The part of kube-apiserver's bootstrap RBAC policy a test meets, created with the server.

Taken from Kubernetes' recorded bootstrap policy
(``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata/cluster-roles.yaml`` and
``cluster-role-bindings.yaml``, the version with ``selfsubjectreviews`` in
``system:basic-user``): the user-facing ClusterRoles ``cluster-admin``, ``admin``, ``edit`` and
``view`` (the last three aggregated from ``system:aggregate-to-*``, which the aggregation
controller fills at start), ``system:discovery``, ``system:basic-user``,
``system:public-info-viewer``, ``system:auth-delegator`` and
``system:service-account-issuer-discovery``, and the bindings that give them to
``system:masters``, ``system:authenticated``, ``system:unauthenticated`` and
``system:serviceaccounts``. The controllers' and nodes' roles (``system:controller:*``,
``system:node``...) are left out: no test acts as them.
"""

from __future__ import annotations

from typing import Any

from memop.testing.apiserver.store import Store
from memop.testing.auth.aggregation import aggregate
from memop.testing.auth.rbac import RBAC_GROUP

MANAGER = "kube-apiserver"
_AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
_DEFAULTS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_READ = ["get", "list", "watch"]


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _urls(urls: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"nonResourceURLs": urls, "verbs": verbs}


_AGGREGATE_TO_ADMIN = [
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    _rule([RBAC_GROUP], ["rolebindings", "roles"], _ALL_VERBS),
]
_AGGREGATE_TO_EDIT = [
    _rule(
        [""],
        ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"],
        _READ,
    ),
    _rule([""], ["serviceaccounts"], ["impersonate"]),
    _rule([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], _WRITE),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule(
        [""],
        [
            "configmaps",
            "events",
            "persistentvolumeclaims",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "secrets",
            "serviceaccounts",
            "services",
            "services/proxy",
        ],
        _WRITE,
    ),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule(
        ["apps"],
        [
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "replicasets",
            "replicasets/scale",
            "statefulsets",
            "statefulsets/scale",
        ],
        _WRITE,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], _WRITE),
    _rule(["batch"], ["cronjobs", "jobs"], _WRITE),
    _rule(
        ["extensions"],
        [
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "ingresses",
            "networkpolicies",
            "replicasets",
            "replicasets/scale",
            "replicationcontrollers/scale",
        ],
        _WRITE,
    ),
    _rule(["policy"], ["poddisruptionbudgets"], _WRITE),
    _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], _WRITE),
    _rule(["coordination.k8s.io"], ["leases"], _ALL_VERBS),
]
_AGGREGATE_TO_VIEW = [
    _rule(
        [""],
        [
            "configmaps",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
        ],
        _READ,
    ),
    _rule(
        [""],
        [
            "bindings",
            "events",
            "limitranges",
            "namespaces/status",
            "pods/log",
            "pods/status",
            "replicationcontrollers/status",
            "resourcequotas",
            "resourcequotas/status",
        ],
        _READ,
    ),
    _rule([""], ["namespaces"], _READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], _READ),
    _rule(
        ["apps"],
        [
            "controllerrevisions",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
        _READ,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], _READ),
    _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], _READ),
    _rule(
        ["extensions"],
        [
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "ingresses",
            "ingresses/status",
            "networkpolicies",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "replicationcontrollers/scale",
        ],
        _READ,
    ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], _READ),
    _rule(["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"], _READ),
]


def _cluster_role(
    name: str,
    rules: list[dict[str, Any]] | None,
    *,
    labels: dict[str, str] | None = None,
    aggregate: str = "",
) -> dict[str, Any]:
    role: dict[str, Any] = {
        "metadata": {
            "name": name,
            "annotations": dict(_AUTOUPDATE),
            "labels": {**_DEFAULTS, **(labels or {})},
        },
        "rules": rules,
    }
    if aggregate:
        role["aggregationRule"] = {
            "clusterRoleSelectors": [{"matchLabels": {_AGGREGATE + aggregate: "true"}}]
        }
    return role


def cluster_roles() -> list[dict[str, Any]]:
    """The bootstrap ClusterRoles (fresh objects)."""
    return [
        _cluster_role("admin", None, aggregate="admin"),
        _cluster_role("cluster-admin", [_rule(["*"], ["*"], ["*"]), _urls(["*"], ["*"])]),
        _cluster_role("edit", None, labels={_AGGREGATE + "admin": "true"}, aggregate="edit"),
        _cluster_role(
            "system:aggregate-to-admin", _AGGREGATE_TO_ADMIN, labels={_AGGREGATE + "admin": "true"}
        ),
        _cluster_role("system:aggregate-to-edit", _AGGREGATE_TO_EDIT, labels={_AGGREGATE + "edit": "true"}),
        _cluster_role("system:aggregate-to-view", _AGGREGATE_TO_VIEW, labels={_AGGREGATE + "view": "true"}),
        _cluster_role(
            "system:auth-delegator",
            [
                _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
                _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
            ],
        ),
        _cluster_role(
            "system:basic-user",
            [
                _rule(
                    ["authorization.k8s.io"],
                    ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    ["create"],
                ),
                _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
            ],
        ),
        _cluster_role(
            "system:discovery",
            [
                _urls(
                    [
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                        "/healthz",
                        "/livez",
                        "/openapi",
                        "/openapi/*",
                        "/readyz",
                        "/version",
                        "/version/",
                    ],
                    ["get"],
                )
            ],
        ),
        _cluster_role(
            "system:public-info-viewer",
            [_urls(["/healthz", "/livez", "/readyz", "/version", "/version/"], ["get"])],
        ),
        _cluster_role(
            "system:service-account-issuer-discovery",
            [_urls(["/.well-known/openid-configuration", "/openid/v1/jwks"], ["get"])],
        ),
        _cluster_role("view", None, labels={_AGGREGATE + "edit": "true"}, aggregate="view"),
    ]


def _binding(name: str, role: str, *groups: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": dict(_AUTOUPDATE), "labels": dict(_DEFAULTS)},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group} for group in groups],
    }


def cluster_role_bindings() -> list[dict[str, Any]]:
    """The bootstrap ClusterRoleBindings of :func:`cluster_roles` (fresh objects)."""
    return [
        _binding("cluster-admin", "cluster-admin", "system:masters"),
        _binding("system:basic-user", "system:basic-user", "system:authenticated"),
        _binding("system:discovery", "system:discovery", "system:authenticated"),
        _binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            "system:authenticated",
            "system:unauthenticated",
        ),
        _binding(
            "system:service-account-issuer-discovery",
            "system:service-account-issuer-discovery",
            "system:serviceaccounts",
        ),
    ]


def install(store: Store) -> None:
    """Create the bootstrap policy in ``store`` (as kube-apiserver's ``rbac/bootstrap-roles``
    post-start hook does, field manager ``kube-apiserver``)."""
    roles = store.resource(RBAC_GROUP, "v1", "clusterroles")
    bindings = store.resource(RBAC_GROUP, "v1", "clusterrolebindings")
    policy = cluster_roles()
    # Created aggregated already, as the aggregation controller leaves them a moment after a
    # real server's start: one write per role instead of a create and an update.
    aggregated = aggregate(policy)
    for role in policy:
        if role["metadata"]["name"] in aggregated:
            role["rules"] = aggregated[role["metadata"]["name"]]
        store.create(roles, None, role, manager=MANAGER)
    for binding in cluster_role_bindings():
        store.create(bindings, None, binding, manager=MANAGER)
