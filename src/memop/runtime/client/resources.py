"""How the runtime names a kind of object: group, version, plural resource, kind and scope."""

from __future__ import annotations

from dataclasses import dataclass, field


def rest_path(
    group: str,
    version: str,
    plural: str,
    namespaced: bool,
    *,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a collection, or of one object (and its subresource) when named: the
    client's requests and the in-memory server's routes are built by this one function."""
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    if namespaced and namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    if name is not None:
        base += f"/{name}"
        if subresource:
            base += f"/{subresource}"
    return base


@dataclass(frozen=True, slots=True)
class Resource:
    """A group/version/resource with the kind it serves, e.g. apps/v1 deployments (Deployment)."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    # Every cache read and client call looks a Resource up in a dict: its hash is taken once
    # (the generated one hashes a tuple of the five fields each time).
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "_hash", hash((self.group, self.version, self.plural, self.kind, self.namespaced))
        )

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[Resource], tuple[str, str, str, str, bool]]:
        # Rebuilt through __init__, so a copy made in another process (another hash seed)
        # hashes as that process does.
        return (Resource, (self.group, self.version, self.plural, self.kind, self.namespaced))

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path of the collection, or of one object (and its subresource) when named."""
        return rest_path(
            self.group,
            self.version,
            self.plural,
            self.namespaced,
            namespace=namespace,
            name=name,
            subresource=subresource,
        )

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


# The built-in resources controllers most often read or write, by the names controller-runtime
# users know from client-go's typed clients. Anything else: Resource(group, version, plural, kind).


# core/v1
def is_builtin_group(group: str) -> bool:
    """Whether ``group`` is Kubernetes' own (served by kube-apiserver, no CRD): the core group,
    the unqualified groups and ``*.k8s.io``."""
    return group in ("", "apps", "batch", "policy", "autoscaling") or group.endswith(".k8s.io")


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICES = Resource("", "v1", "services", "Service")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
EVENTS = Resource("", "v1", "events", "Event")
# apps/v1
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet")
# batch/v1
JOBS = Resource("batch", "v1", "jobs", "Job")
CRONJOBS = Resource("batch", "v1", "cronjobs", "CronJob")
# networking.k8s.io/v1
INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", "Ingress")
# coordination.k8s.io/v1
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
# rbac.authorization.k8s.io/v1
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
# apiextensions.k8s.io/v1
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)
# policy/v1, networking.k8s.io/v1, autoscaling/v2, scheduling.k8s.io/v1, core/v1 policies: what
# an operator's workloads are usually given beside a Deployment and a Service.
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
NETWORK_POLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
HORIZONTAL_POD_AUTOSCALERS = Resource(
    "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"
)
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
LIMIT_RANGES = Resource("", "v1", "limitranges", "LimitRange")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
