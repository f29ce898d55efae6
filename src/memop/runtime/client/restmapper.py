"""From an object's ``apiVersion`` and ``kind`` to the :class:`Resource` a request names
(client-go's RESTMapper, small): the plural and the scope.

The built-in kinds of kube-apiserver v1.36 are known without asking (:data:`BUILTIN_KINDS`: the
plural and scope of a kind are the same in every version of its group); any other kind (a
CustomResourceDefinition's, an aggregated API's) is looked up once in the API server's discovery
document of its group and version (``/apis/<group>/<version>``) and remembered.
"""

from __future__ import annotations

from typing import Any, Protocol

from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import Resource


class UnknownKind(ValueError):
    """No resource serves this apiVersion and kind: not a built-in kind, and the API server's
    discovery does not list it (a CRD not installed, a typo in ``kind``)."""


class Discovery(Protocol):
    """What the mapper asks the API server (:meth:`memop.runtime.client.client.Client.api_resources`)."""

    async def api_resources(self, group: str, version: str) -> dict[str, Any]: ...


_NAMESPACED, _CLUSTER = True, False

# kube-apiserver v1.36's resources (``kubectl api-resources``), by (group, kind): (plural, namespaced).
# Review kinds (TokenReview, SubjectAccessReview...) and Binding are requests, not objects to
# own, but they are listed so that a mapping is never wrong.
BUILTIN_KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("", "Binding"): ("bindings", _NAMESPACED),
    ("", "ComponentStatus"): ("componentstatuses", _CLUSTER),
    ("", "ConfigMap"): ("configmaps", _NAMESPACED),
    ("", "Endpoints"): ("endpoints", _NAMESPACED),
    ("", "Event"): ("events", _NAMESPACED),
    ("", "LimitRange"): ("limitranges", _NAMESPACED),
    ("", "Namespace"): ("namespaces", _CLUSTER),
    ("", "Node"): ("nodes", _CLUSTER),
    ("", "PersistentVolumeClaim"): ("persistentvolumeclaims", _NAMESPACED),
    ("", "PersistentVolume"): ("persistentvolumes", _CLUSTER),
    ("", "Pod"): ("pods", _NAMESPACED),
    ("", "PodTemplate"): ("podtemplates", _NAMESPACED),
    ("", "ReplicationController"): ("replicationcontrollers", _NAMESPACED),
    ("", "ResourceQuota"): ("resourcequotas", _NAMESPACED),
    ("", "Secret"): ("secrets", _NAMESPACED),
    ("", "ServiceAccount"): ("serviceaccounts", _NAMESPACED),
    ("", "Service"): ("services", _NAMESPACED),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"): ("mutatingadmissionpolicies", _CLUSTER),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"): (
        "mutatingadmissionpolicybindings",
        _CLUSTER,
    ),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): (
        "mutatingwebhookconfigurations",
        _CLUSTER,
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): ("validatingadmissionpolicies", _CLUSTER),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): (
        "validatingadmissionpolicybindings",
        _CLUSTER,
    ),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): (
        "validatingwebhookconfigurations",
        _CLUSTER,
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): ("customresourcedefinitions", _CLUSTER),
    ("apiregistration.k8s.io", "APIService"): ("apiservices", _CLUSTER),
    ("apps", "ControllerRevision"): ("controllerrevisions", _NAMESPACED),
    ("apps", "DaemonSet"): ("daemonsets", _NAMESPACED),
    ("apps", "Deployment"): ("deployments", _NAMESPACED),
    ("apps", "ReplicaSet"): ("replicasets", _NAMESPACED),
    ("apps", "StatefulSet"): ("statefulsets", _NAMESPACED),
    ("authentication.k8s.io", "SelfSubjectReview"): ("selfsubjectreviews", _CLUSTER),
    ("authentication.k8s.io", "TokenReview"): ("tokenreviews", _CLUSTER),
    ("authorization.k8s.io", "LocalSubjectAccessReview"): ("localsubjectaccessreviews", _NAMESPACED),
    ("authorization.k8s.io", "SelfSubjectAccessReview"): ("selfsubjectaccessreviews", _CLUSTER),
    ("authorization.k8s.io", "SelfSubjectRulesReview"): ("selfsubjectrulesreviews", _CLUSTER),
    ("authorization.k8s.io", "SubjectAccessReview"): ("subjectaccessreviews", _CLUSTER),
    ("autoscaling", "HorizontalPodAutoscaler"): ("horizontalpodautoscalers", _NAMESPACED),
    ("batch", "CronJob"): ("cronjobs", _NAMESPACED),
    ("batch", "Job"): ("jobs", _NAMESPACED),
    ("certificates.k8s.io", "CertificateSigningRequest"): ("certificatesigningrequests", _CLUSTER),
    ("coordination.k8s.io", "Lease"): ("leases", _NAMESPACED),
    ("discovery.k8s.io", "EndpointSlice"): ("endpointslices", _NAMESPACED),
    ("events.k8s.io", "Event"): ("events", _NAMESPACED),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): ("flowschemas", _CLUSTER),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): ("prioritylevelconfigurations", _CLUSTER),
    ("networking.k8s.io", "IngressClass"): ("ingressclasses", _CLUSTER),
    ("networking.k8s.io", "Ingress"): ("ingresses", _NAMESPACED),
    ("networking.k8s.io", "IPAddress"): ("ipaddresses", _CLUSTER),
    ("networking.k8s.io", "NetworkPolicy"): ("networkpolicies", _NAMESPACED),
    ("networking.k8s.io", "ServiceCIDR"): ("servicecidrs", _CLUSTER),
    ("node.k8s.io", "RuntimeClass"): ("runtimeclasses", _CLUSTER),
    ("policy", "PodDisruptionBudget"): ("poddisruptionbudgets", _NAMESPACED),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ("clusterrolebindings", _CLUSTER),
    ("rbac.authorization.k8s.io", "ClusterRole"): ("clusterroles", _CLUSTER),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("rolebindings", _NAMESPACED),
    ("rbac.authorization.k8s.io", "Role"): ("roles", _NAMESPACED),
    ("resource.k8s.io", "DeviceClass"): ("deviceclasses", _CLUSTER),
    ("resource.k8s.io", "ResourceClaim"): ("resourceclaims", _NAMESPACED),
    ("resource.k8s.io", "ResourceClaimTemplate"): ("resourceclaimtemplates", _NAMESPACED),
    ("resource.k8s.io", "ResourceSlice"): ("resourceslices", _CLUSTER),
    ("scheduling.k8s.io", "PriorityClass"): ("priorityclasses", _CLUSTER),
    ("storage.k8s.io", "CSIDriver"): ("csidrivers", _CLUSTER),
    ("storage.k8s.io", "CSINode"): ("csinodes", _CLUSTER),
    ("storage.k8s.io", "CSIStorageCapacity"): ("csistoragecapacities", _NAMESPACED),
    ("storage.k8s.io", "StorageClass"): ("storageclasses", _CLUSTER),
    ("storage.k8s.io", "VolumeAttachment"): ("volumeattachments", _CLUSTER),
    ("storage.k8s.io", "VolumeAttributesClass"): ("volumeattributesclasses", _CLUSTER),
}


def split_api_version(api_version: str) -> tuple[str, str]:
    """``"apps/v1"`` -> ``("apps", "v1")``; ``"v1"`` -> ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version


def builtin_resource(api_version: str, kind: str) -> Resource | None:
    """The resource of a built-in kind in ``api_version``, or None for any other kind."""
    group, version = split_api_version(api_version)
    known = BUILTIN_KINDS.get((group, kind))
    if known is None or not version:
        return None
    plural, namespaced = known
    return Resource(group, version, plural, kind, namespaced)


class RestMapper:
    """Maps (apiVersion, kind) to resources: built-in kinds at once, resources registered with
    :meth:`add` (a controller's own kinds), others from discovery, each asked once."""

    def __init__(self, discovery: Discovery | None = None) -> None:
        self._discovery = discovery
        self._known: dict[tuple[str, str], Resource] = {}

    def add(self, resource: Resource) -> None:
        """Know ``resource`` without asking (a kind this process declares)."""
        self._known[(resource.api_version, resource.kind)] = resource

    def known(self, api_version: str, kind: str) -> Resource | None:
        """The resource if it is built in or known already; None when discovery must be asked."""
        return self._known.get((api_version, kind)) or builtin_resource(api_version, kind)

    async def resource_for(self, api_version: str, kind: str) -> Resource:
        """The resource serving ``kind`` in ``api_version``. UnknownKind when none does (a
        malformed apiVersion, a version the server does not serve, a kind it does not list)."""
        found = self.known(api_version, kind)
        if found is not None:
            return found
        group, version = split_api_version(api_version)
        if not version or not kind or self._discovery is None:
            raise UnknownKind(_unknown(api_version, kind, "it is not a built-in kind"))
        try:
            document = await self._discovery.api_resources(group, version)
        except NotFound:
            raise UnknownKind(
                _unknown(api_version, kind, f"the API server serves no {api_version}")
            ) from None
        for entry in document.get("resources") or ():
            if isinstance(entry, dict) and entry.get("kind") == kind and "/" not in str(entry.get("name")):
                resource = Resource(group, version, str(entry["name"]), kind, bool(entry.get("namespaced")))
                self.add(resource)
                return resource
        raise UnknownKind(_unknown(api_version, kind, f"the API server's {api_version} has no such kind"))


def _unknown(api_version: str, kind: str, why: str) -> str:
    return (
        f"no resource serves kind {kind!r} in apiVersion {api_version!r}: {why} "
        "(is its CustomResourceDefinition installed? is the apiVersion spelled group/version?)"
    )
