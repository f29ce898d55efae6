"""The protobuf messages of the built-in kinds ``kubectl create`` sends as protobuf.

Field numbers are those of k8s.io/api's and k8s.io/apimachinery's ``generated.proto``; the order,
JSON names and presence flags follow the Go structs' fields and ``json`` tags (see
:mod:`memop.testing.apiserver.protowire`). Each message lists what kubectl's generators set and the fields a
hand-written object of that kind commonly has; a body setting a field not listed here is refused
with a 415 naming it (:class:`memop.testing.apiserver.protowire.UnknownField`), never decoded in part.

:data:`KINDS` maps ``(apiVersion, kind)`` to the object's message.
"""

from __future__ import annotations

from collections.abc import Mapping

from memop.testing.apiserver.protowire import (
    ALWAYS,
    INLINE,
    LIST,
    MAP,
    POINTER,
    Field,
    Message,
    Scalar,
    message,
)

STRING, BYTES, INT, BOOL = Scalar.STRING, Scalar.BYTES, Scalar.INT, Scalar.BOOL
TIME, QUANTITY, INT_OR_STRING, FIELDS_V1 = (
    Scalar.TIME,
    Scalar.QUANTITY,
    Scalar.INT_OR_STRING,
    Scalar.FIELDS_V1,
)
F = Field

# --- k8s.io/apimachinery/pkg/apis/meta/v1 ---------------------------------------------------------

OWNER_REFERENCE = message(
    "OwnerReference",
    F(5, "apiVersion", STRING, ALWAYS),
    F(1, "kind", STRING, ALWAYS),
    F(3, "name", STRING, ALWAYS),
    F(4, "uid", STRING, ALWAYS),
    F(6, "controller", BOOL, POINTER),
    F(7, "blockOwnerDeletion", BOOL, POINTER),
)
MANAGED_FIELDS_ENTRY = message(
    "ManagedFieldsEntry",
    F(1, "manager", STRING),
    F(2, "operation", STRING),
    F(3, "apiVersion", STRING),
    F(4, "time", TIME, POINTER),
    F(6, "fieldsType", STRING),
    F(7, "fieldsV1", FIELDS_V1, POINTER),
    F(8, "subresource", STRING),
)
OBJECT_META = message(
    "ObjectMeta",
    F(1, "name", STRING),
    F(2, "generateName", STRING),
    F(3, "namespace", STRING),
    F(4, "selfLink", STRING),
    F(5, "uid", STRING),
    F(6, "resourceVersion", STRING),
    F(7, "generation", INT),
    F(8, "creationTimestamp", TIME),
    F(9, "deletionTimestamp", TIME, POINTER),
    F(10, "deletionGracePeriodSeconds", INT, POINTER),
    F(11, "labels", STRING, MAP),
    F(12, "annotations", STRING, MAP),
    F(13, "ownerReferences", OWNER_REFERENCE, LIST),
    F(14, "finalizers", STRING, LIST),
    F(17, "managedFields", MANAGED_FIELDS_ENTRY, LIST),
)
LABEL_SELECTOR = message(
    "LabelSelector",
    F(1, "matchLabels", STRING, MAP),
    F(
        2,
        "matchExpressions",
        message(
            "LabelSelectorRequirement",
            F(1, "key", STRING, ALWAYS),
            F(2, "operator", STRING, ALWAYS),
            F(3, "values", STRING, LIST),
        ),
        LIST,
    ),
)
CONDITION = message(
    "Condition",
    F(1, "type", STRING, ALWAYS),
    F(2, "status", STRING, ALWAYS),
    F(3, "observedGeneration", INT),
    F(4, "lastTransitionTime", TIME),
    F(5, "reason", STRING, ALWAYS),
    F(6, "message", STRING, ALWAYS),
)

# --- k8s.io/api/core/v1: Namespace, ConfigMap, Secret, ServiceAccount --------------------------------

NAMESPACE = message(
    "Namespace",
    F(1, "metadata", OBJECT_META),
    F(2, "spec", message("NamespaceSpec", F(1, "finalizers", STRING, LIST))),
    F(
        3,
        "status",
        message(
            "NamespaceStatus",
            F(1, "phase", STRING),
            F(
                2,
                "conditions",
                message(
                    "NamespaceCondition",
                    F(1, "type", STRING, ALWAYS),
                    F(2, "status", STRING, ALWAYS),
                    F(4, "lastTransitionTime", TIME),
                    F(5, "reason", STRING),
                    F(6, "message", STRING),
                ),
                LIST,
            ),
        ),
    ),
)
CONFIG_MAP = message(
    "ConfigMap",
    F(1, "metadata", OBJECT_META),
    F(4, "immutable", BOOL, POINTER),
    F(2, "data", STRING, MAP),
    F(3, "binaryData", BYTES, MAP),
)
SECRET = message(
    "Secret",
    F(1, "metadata", OBJECT_META),
    F(5, "immutable", BOOL, POINTER),
    F(2, "data", BYTES, MAP),
    F(4, "stringData", STRING, MAP),
    F(3, "type", STRING),
)
LOCAL_OBJECT_REFERENCE = message("LocalObjectReference", F(1, "name", STRING))
OBJECT_REFERENCE = message(
    "ObjectReference",
    F(1, "kind", STRING),
    F(2, "namespace", STRING),
    F(3, "name", STRING),
    F(4, "uid", STRING),
    F(5, "apiVersion", STRING),
    F(6, "resourceVersion", STRING),
    F(7, "fieldPath", STRING),
)
SERVICE_ACCOUNT = message(
    "ServiceAccount",
    F(1, "metadata", OBJECT_META),
    F(2, "secrets", OBJECT_REFERENCE, LIST),
    F(3, "imagePullSecrets", LOCAL_OBJECT_REFERENCE, LIST),
    F(4, "automountServiceAccountToken", BOOL, POINTER),
)

# --- k8s.io/api/core/v1: Service ---------------------------------------------------------------------

SERVICE_PORT = message(
    "ServicePort",
    F(1, "name", STRING),
    F(2, "protocol", STRING),
    F(6, "appProtocol", STRING, POINTER),
    F(3, "port", INT, ALWAYS),
    F(4, "targetPort", INT_OR_STRING),
    F(5, "nodePort", INT),
)
SERVICE_SPEC = message(
    "ServiceSpec",
    F(1, "ports", SERVICE_PORT, LIST),
    F(2, "selector", STRING, MAP),
    F(3, "clusterIP", STRING),
    F(18, "clusterIPs", STRING, LIST),
    F(4, "type", STRING),
    F(5, "externalIPs", STRING, LIST),
    F(7, "sessionAffinity", STRING),
    F(8, "loadBalancerIP", STRING),
    F(9, "loadBalancerSourceRanges", STRING, LIST),
    F(10, "externalName", STRING),
    F(11, "externalTrafficPolicy", STRING),
    F(12, "healthCheckNodePort", INT),
    F(13, "publishNotReadyAddresses", BOOL),
    F(
        14,
        "sessionAffinityConfig",
        message(
            "SessionAffinityConfig",
            F(1, "clientIP", message("ClientIPConfig", F(1, "timeoutSeconds", INT, POINTER)), POINTER),
        ),
        POINTER,
    ),
    F(19, "ipFamilies", STRING, LIST),
    F(17, "ipFamilyPolicy", STRING, POINTER),
    F(20, "allocateLoadBalancerNodePorts", BOOL, POINTER),
    F(21, "loadBalancerClass", STRING, POINTER),
    F(22, "internalTrafficPolicy", STRING, POINTER),
    F(23, "trafficDistribution", STRING, POINTER),
)
LOAD_BALANCER_INGRESS = message(
    "LoadBalancerIngress",
    F(1, "ip", STRING),
    F(2, "hostname", STRING),
    F(3, "ipMode", STRING, POINTER),
    F(
        4,
        "ports",
        message(
            "PortStatus",
            F(1, "port", INT, ALWAYS),
            F(2, "protocol", STRING, ALWAYS),
            F(3, "error", STRING, POINTER),
        ),
        LIST,
    ),
)
SERVICE = message(
    "Service",
    F(1, "metadata", OBJECT_META),
    F(2, "spec", SERVICE_SPEC),
    F(
        3,
        "status",
        message(
            "ServiceStatus",
            F(1, "loadBalancer", message("LoadBalancerStatus", F(1, "ingress", LOAD_BALANCER_INGRESS, LIST))),
            F(2, "conditions", CONDITION, LIST),
        ),
    ),
)

# --- k8s.io/api/core/v1: the pod template (what a Deployment carries) --------------------------------

KEY_TO_PATH = message(
    "KeyToPath", F(1, "key", STRING, ALWAYS), F(2, "path", STRING, ALWAYS), F(3, "mode", INT, POINTER)
)
VOLUME_SOURCE = message(
    "VolumeSource",
    F(
        1,
        "hostPath",
        message("HostPathVolumeSource", F(1, "path", STRING, ALWAYS), F(2, "type", STRING, POINTER)),
        POINTER,
    ),
    F(
        2,
        "emptyDir",
        message(
            "EmptyDirVolumeSource",
            F(1, "medium", STRING),
            F(2, "sizeLimit", QUANTITY, POINTER),
        ),
        POINTER,
    ),
    F(
        6,
        "secret",
        message(
            "SecretVolumeSource",
            F(1, "secretName", STRING),
            F(2, "items", KEY_TO_PATH, LIST),
            F(3, "defaultMode", INT, POINTER),
            F(4, "optional", BOOL, POINTER),
        ),
        POINTER,
    ),
    F(
        10,
        "persistentVolumeClaim",
        message(
            "PersistentVolumeClaimVolumeSource", F(1, "claimName", STRING, ALWAYS), F(2, "readOnly", BOOL)
        ),
        POINTER,
    ),
    F(
        19,
        "configMap",
        message(
            "ConfigMapVolumeSource",
            F(1, "localObjectReference", LOCAL_OBJECT_REFERENCE, INLINE),
            F(2, "items", KEY_TO_PATH, LIST),
            F(3, "defaultMode", INT, POINTER),
            F(4, "optional", BOOL, POINTER),
        ),
        POINTER,
    ),
)
VOLUME = message("Volume", F(1, "name", STRING, ALWAYS), F(2, "volumeSource", VOLUME_SOURCE, INLINE))


def _key_selector(name: str) -> Message:
    return message(
        name,
        F(1, "localObjectReference", LOCAL_OBJECT_REFERENCE, INLINE),
        F(2, "key", STRING, ALWAYS),
        F(3, "optional", BOOL, POINTER),
    )


def _env_source(name: str) -> Message:
    return message(
        name, F(1, "localObjectReference", LOCAL_OBJECT_REFERENCE, INLINE), F(2, "optional", BOOL, POINTER)
    )


ENV_VAR_SOURCE = message(
    "EnvVarSource",
    F(
        1,
        "fieldRef",
        message("ObjectFieldSelector", F(1, "apiVersion", STRING), F(2, "fieldPath", STRING, ALWAYS)),
        POINTER,
    ),
    F(
        2,
        "resourceFieldRef",
        message(
            "ResourceFieldSelector",
            F(1, "containerName", STRING),
            F(2, "resource", STRING, ALWAYS),
            F(3, "divisor", QUANTITY),
        ),
        POINTER,
    ),
    F(3, "configMapKeyRef", _key_selector("ConfigMapKeySelector"), POINTER),
    F(4, "secretKeyRef", _key_selector("SecretKeySelector"), POINTER),
)
ENV_VAR = message(
    "EnvVar", F(1, "name", STRING, ALWAYS), F(2, "value", STRING), F(3, "valueFrom", ENV_VAR_SOURCE, POINTER)
)
ENV_FROM_SOURCE = message(
    "EnvFromSource",
    F(1, "prefix", STRING),
    F(2, "configMapRef", _env_source("ConfigMapEnvSource"), POINTER),
    F(3, "secretRef", _env_source("SecretEnvSource"), POINTER),
)
RESOURCE_REQUIREMENTS = message(
    "ResourceRequirements",
    F(1, "limits", QUANTITY, MAP),
    F(2, "requests", QUANTITY, MAP),
    F(3, "claims", message("ResourceClaim", F(1, "name", STRING, ALWAYS), F(2, "request", STRING)), LIST),
)
HTTP_GET_ACTION = message(
    "HTTPGetAction",
    F(1, "path", STRING),
    F(2, "port", INT_OR_STRING),
    F(3, "host", STRING),
    F(4, "scheme", STRING),
    F(
        5,
        "httpHeaders",
        message("HTTPHeader", F(1, "name", STRING, ALWAYS), F(2, "value", STRING, ALWAYS)),
        LIST,
    ),
)
EXEC_ACTION = message("ExecAction", F(1, "command", STRING, LIST))
TCP_SOCKET_ACTION = message("TCPSocketAction", F(1, "port", INT_OR_STRING), F(2, "host", STRING))
PROBE = message(
    "Probe",
    F(
        1,
        "handler",
        message(
            "ProbeHandler",
            F(1, "exec", EXEC_ACTION, POINTER),
            F(2, "httpGet", HTTP_GET_ACTION, POINTER),
            F(3, "tcpSocket", TCP_SOCKET_ACTION, POINTER),
            F(
                4,
                "grpc",
                message("GRPCAction", F(1, "port", INT, ALWAYS), F(2, "service", STRING, POINTER | ALWAYS)),
                POINTER,
            ),
        ),
        INLINE,
    ),
    F(2, "initialDelaySeconds", INT),
    F(3, "timeoutSeconds", INT),
    F(4, "periodSeconds", INT),
    F(5, "successThreshold", INT),
    F(6, "failureThreshold", INT),
    F(7, "terminationGracePeriodSeconds", INT, POINTER),
)
LIFECYCLE_HANDLER = message(
    "LifecycleHandler",
    F(1, "exec", EXEC_ACTION, POINTER),
    F(2, "httpGet", HTTP_GET_ACTION, POINTER),
    F(3, "tcpSocket", TCP_SOCKET_ACTION, POINTER),
    F(4, "sleep", message("SleepAction", F(1, "seconds", INT, ALWAYS)), POINTER),
)
SECCOMP_PROFILE = message(
    "SeccompProfile", F(1, "type", STRING, ALWAYS), F(2, "localhostProfile", STRING, POINTER)
)
SECURITY_CONTEXT = message(
    "SecurityContext",
    F(
        1,
        "capabilities",
        message("Capabilities", F(1, "add", STRING, LIST), F(2, "drop", STRING, LIST)),
        POINTER,
    ),
    F(2, "privileged", BOOL, POINTER),
    F(4, "runAsUser", INT, POINTER),
    F(8, "runAsGroup", INT, POINTER),
    F(5, "runAsNonRoot", BOOL, POINTER),
    F(6, "readOnlyRootFilesystem", BOOL, POINTER),
    F(7, "allowPrivilegeEscalation", BOOL, POINTER),
    F(9, "procMount", STRING, POINTER),
    F(11, "seccompProfile", SECCOMP_PROFILE, POINTER),
)
CONTAINER = message(
    "Container",
    F(1, "name", STRING, ALWAYS),
    F(2, "image", STRING),
    F(3, "command", STRING, LIST),
    F(4, "args", STRING, LIST),
    F(5, "workingDir", STRING),
    F(
        6,
        "ports",
        message(
            "ContainerPort",
            F(1, "name", STRING),
            F(2, "hostPort", INT),
            F(3, "containerPort", INT, ALWAYS),
            F(4, "protocol", STRING),
            F(5, "hostIP", STRING),
        ),
        LIST,
    ),
    F(19, "envFrom", ENV_FROM_SOURCE, LIST),
    F(7, "env", ENV_VAR, LIST),
    F(8, "resources", RESOURCE_REQUIREMENTS),
    F(
        23,
        "resizePolicy",
        message(
            "ContainerResizePolicy",
            F(1, "resourceName", STRING, ALWAYS),
            F(2, "restartPolicy", STRING, ALWAYS),
        ),
        LIST,
    ),
    F(24, "restartPolicy", STRING, POINTER),
    F(
        9,
        "volumeMounts",
        message(
            "VolumeMount",
            F(1, "name", STRING, ALWAYS),
            F(2, "readOnly", BOOL),
            F(7, "recursiveReadOnly", STRING, POINTER),
            F(3, "mountPath", STRING, ALWAYS),
            F(4, "subPath", STRING),
            F(5, "mountPropagation", STRING, POINTER),
            F(6, "subPathExpr", STRING),
        ),
        LIST,
    ),
    F(10, "livenessProbe", PROBE, POINTER),
    F(11, "readinessProbe", PROBE, POINTER),
    F(22, "startupProbe", PROBE, POINTER),
    F(
        12,
        "lifecycle",
        message(
            "Lifecycle",
            F(1, "postStart", LIFECYCLE_HANDLER, POINTER),
            F(2, "preStop", LIFECYCLE_HANDLER, POINTER),
        ),
        POINTER,
    ),
    F(13, "terminationMessagePath", STRING),
    F(20, "terminationMessagePolicy", STRING),
    F(14, "imagePullPolicy", STRING),
    F(15, "securityContext", SECURITY_CONTEXT, POINTER),
    F(16, "stdin", BOOL),
    F(17, "stdinOnce", BOOL),
    F(18, "tty", BOOL),
)
POD_SECURITY_CONTEXT = message(
    "PodSecurityContext",
    F(2, "runAsUser", INT, POINTER),
    F(6, "runAsGroup", INT, POINTER),
    F(3, "runAsNonRoot", BOOL, POINTER),
    F(4, "supplementalGroups", INT, LIST),
    F(5, "fsGroup", INT, POINTER),
    F(9, "fsGroupChangePolicy", STRING, POINTER),
    F(10, "seccompProfile", SECCOMP_PROFILE, POINTER),
)
TOLERATION = message(
    "Toleration",
    F(1, "key", STRING),
    F(2, "operator", STRING),
    F(3, "value", STRING),
    F(4, "effect", STRING),
    F(5, "tolerationSeconds", INT, POINTER),
)
POD_SPEC = message(
    "PodSpec",
    F(1, "volumes", VOLUME, LIST),
    F(20, "initContainers", CONTAINER, LIST),
    F(2, "containers", CONTAINER, LIST | ALWAYS),
    F(3, "restartPolicy", STRING),
    F(4, "terminationGracePeriodSeconds", INT, POINTER),
    F(5, "activeDeadlineSeconds", INT, POINTER),
    F(6, "dnsPolicy", STRING),
    F(7, "nodeSelector", STRING, MAP),
    F(8, "serviceAccountName", STRING),
    F(9, "serviceAccount", STRING),
    F(21, "automountServiceAccountToken", BOOL, POINTER),
    F(10, "nodeName", STRING),
    F(11, "hostNetwork", BOOL),
    F(12, "hostPID", BOOL),
    F(13, "hostIPC", BOOL),
    F(27, "shareProcessNamespace", BOOL, POINTER),
    F(14, "securityContext", POD_SECURITY_CONTEXT, POINTER),
    F(15, "imagePullSecrets", LOCAL_OBJECT_REFERENCE, LIST),
    F(16, "hostname", STRING),
    F(17, "subdomain", STRING),
    F(19, "schedulerName", STRING),
    F(22, "tolerations", TOLERATION, LIST),
    F(24, "priorityClassName", STRING),
    F(25, "priority", INT, POINTER),
    F(29, "runtimeClassName", STRING, POINTER),
    F(30, "enableServiceLinks", BOOL, POINTER),
    F(31, "preemptionPolicy", STRING, POINTER),
    F(35, "setHostnameAsFQDN", BOOL, POINTER),
    F(37, "hostUsers", BOOL, POINTER),
)
POD_TEMPLATE_SPEC = message("PodTemplateSpec", F(1, "metadata", OBJECT_META), F(2, "spec", POD_SPEC))

# --- k8s.io/api/apps/v1: Deployment ------------------------------------------------------------------

DEPLOYMENT = message(
    "Deployment",
    F(1, "metadata", OBJECT_META),
    F(
        2,
        "spec",
        message(
            "DeploymentSpec",
            F(1, "replicas", INT, POINTER),
            F(2, "selector", LABEL_SELECTOR, POINTER | ALWAYS),
            F(3, "template", POD_TEMPLATE_SPEC),
            F(
                4,
                "strategy",
                message(
                    "DeploymentStrategy",
                    F(1, "type", STRING),
                    F(
                        2,
                        "rollingUpdate",
                        message(
                            "RollingUpdateDeployment",
                            F(1, "maxUnavailable", INT_OR_STRING, POINTER),
                            F(2, "maxSurge", INT_OR_STRING, POINTER),
                        ),
                        POINTER,
                    ),
                ),
            ),
            F(5, "minReadySeconds", INT),
            F(6, "revisionHistoryLimit", INT, POINTER),
            F(7, "paused", BOOL),
            F(9, "progressDeadlineSeconds", INT, POINTER),
        ),
    ),
    F(
        3,
        "status",
        message(
            "DeploymentStatus",
            F(1, "observedGeneration", INT),
            F(2, "replicas", INT),
            F(3, "updatedReplicas", INT),
            F(7, "readyReplicas", INT),
            F(4, "availableReplicas", INT),
            F(5, "unavailableReplicas", INT),
            F(9, "terminatingReplicas", INT, POINTER),
            F(
                6,
                "conditions",
                message(
                    "DeploymentCondition",
                    F(1, "type", STRING, ALWAYS),
                    F(2, "status", STRING, ALWAYS),
                    F(6, "lastUpdateTime", TIME),
                    F(7, "lastTransitionTime", TIME),
                    F(4, "reason", STRING),
                    F(5, "message", STRING),
                ),
                LIST,
            ),
            F(8, "collisionCount", INT, POINTER),
        ),
    ),
)

# --- k8s.io/api/rbac/v1 ------------------------------------------------------------------------------

POLICY_RULE = message(
    "PolicyRule",
    F(1, "verbs", STRING, LIST | ALWAYS),
    F(2, "apiGroups", STRING, LIST),
    F(3, "resources", STRING, LIST),
    F(4, "resourceNames", STRING, LIST),
    F(5, "nonResourceURLs", STRING, LIST),
)
ROLE = message("Role", F(1, "metadata", OBJECT_META), F(2, "rules", POLICY_RULE, LIST | ALWAYS))
CLUSTER_ROLE = message(
    "ClusterRole",
    F(1, "metadata", OBJECT_META),
    F(2, "rules", POLICY_RULE, LIST | ALWAYS),
    F(
        3,
        "aggregationRule",
        message("AggregationRule", F(1, "clusterRoleSelectors", LABEL_SELECTOR, LIST)),
        POINTER,
    ),
)
SUBJECT = message(
    "Subject",
    F(1, "kind", STRING, ALWAYS),
    F(2, "apiGroup", STRING),
    F(3, "name", STRING, ALWAYS),
    F(4, "namespace", STRING),
)
ROLE_REF = message(
    "RoleRef", F(1, "apiGroup", STRING, ALWAYS), F(2, "kind", STRING, ALWAYS), F(3, "name", STRING, ALWAYS)
)


def _binding(name: str) -> Message:
    return message(
        name, F(1, "metadata", OBJECT_META), F(2, "subjects", SUBJECT, LIST), F(3, "roleRef", ROLE_REF)
    )


# --- k8s.io/api/policy/v1 ----------------------------------------------------------------------------

POD_DISRUPTION_BUDGET = message(
    "PodDisruptionBudget",
    F(1, "metadata", OBJECT_META),
    F(
        2,
        "spec",
        message(
            "PodDisruptionBudgetSpec",
            F(1, "minAvailable", INT_OR_STRING, POINTER),
            F(2, "selector", LABEL_SELECTOR, POINTER),
            F(3, "maxUnavailable", INT_OR_STRING, POINTER),
            F(4, "unhealthyPodEvictionPolicy", STRING, POINTER),
        ),
    ),
    F(
        3,
        "status",
        message(
            "PodDisruptionBudgetStatus",
            F(1, "observedGeneration", INT),
            F(2, "disruptedPods", TIME, MAP),
            F(3, "disruptionsAllowed", INT, ALWAYS),
            F(4, "currentHealthy", INT, ALWAYS),
            F(5, "desiredHealthy", INT, ALWAYS),
            F(6, "expectedPods", INT, ALWAYS),
            F(7, "conditions", CONDITION, LIST),
        ),
    ),
)

# --- k8s.io/api/networking/v1 (what kubectl create ingress sets, and its status) ------------------

INGRESS_BACKEND = message(
    "IngressBackend",
    F(
        4,
        "service",
        message(
            "IngressServiceBackend",
            F(1, "name", STRING, ALWAYS),
            F(2, "port", message("ServiceBackendPort", F(1, "name", STRING), F(2, "number", INT))),
        ),
        POINTER,
    ),
    F(
        3,
        "resource",
        message(
            "TypedLocalObjectReference",
            F(1, "apiGroup", STRING, POINTER),
            F(2, "kind", STRING, ALWAYS),
            F(3, "name", STRING, ALWAYS),
        ),
        POINTER,
    ),
)
HTTP_INGRESS_PATH = message(
    "HTTPIngressPath",
    F(1, "path", STRING),
    F(3, "pathType", STRING, POINTER | ALWAYS),
    F(2, "backend", INGRESS_BACKEND, ALWAYS),
)
INGRESS_RULE = message(
    "IngressRule",
    F(1, "host", STRING),
    F(
        2,
        "ingressRuleValue",
        message(
            "IngressRuleValue",
            F(
                1,
                "http",
                message("HTTPIngressRuleValue", F(1, "paths", HTTP_INGRESS_PATH, LIST | ALWAYS)),
                POINTER,
            ),
        ),
        INLINE,
    ),
)
INGRESS = message(
    "Ingress",
    F(1, "metadata", OBJECT_META),
    F(
        2,
        "spec",
        message(
            "IngressSpec",
            F(4, "ingressClassName", STRING, POINTER),
            F(1, "defaultBackend", INGRESS_BACKEND, POINTER),
            F(2, "tls", message("IngressTLS", F(1, "hosts", STRING, LIST), F(2, "secretName", STRING)), LIST),
            F(3, "rules", INGRESS_RULE, LIST),
        ),
    ),
    F(
        3,
        "status",
        message(
            "IngressStatus",
            F(
                1,
                "loadBalancer",
                message(
                    "IngressLoadBalancerStatus",
                    F(
                        1,
                        "ingress",
                        message("IngressLoadBalancerIngress", F(1, "ip", STRING), F(2, "hostname", STRING)),
                        LIST,
                    ),
                ),
            ),
        ),
    ),
)

# --- k8s.io/api/batch/v1 (kubectl create job and cronjob) --------------------------------------------

JOB_SPEC = message(
    "JobSpec",
    F(1, "parallelism", INT, POINTER),
    F(2, "completions", INT, POINTER),
    F(3, "activeDeadlineSeconds", INT, POINTER),
    F(7, "backoffLimit", INT, POINTER),
    F(12, "backoffLimitPerIndex", INT, POINTER),
    F(13, "maxFailedIndexes", INT, POINTER),
    F(4, "selector", LABEL_SELECTOR, POINTER),
    F(5, "manualSelector", BOOL, POINTER),
    F(6, "template", POD_TEMPLATE_SPEC),
    F(8, "ttlSecondsAfterFinished", INT, POINTER),
    F(9, "completionMode", STRING, POINTER),
    F(10, "suspend", BOOL, POINTER),
    F(14, "podReplacementPolicy", STRING, POINTER),
    F(15, "managedBy", STRING, POINTER),
)
JOB_CONDITION = message(
    "JobCondition",
    F(1, "type", STRING, ALWAYS),
    F(2, "status", STRING, ALWAYS),
    F(3, "lastProbeTime", TIME),
    F(4, "lastTransitionTime", TIME),
    F(5, "reason", STRING),
    F(6, "message", STRING),
)
JOB = message(
    "Job",
    F(1, "metadata", OBJECT_META),
    F(2, "spec", JOB_SPEC),
    F(
        3,
        "status",
        message(
            "JobStatus",
            F(1, "conditions", JOB_CONDITION, LIST),
            F(2, "startTime", TIME, POINTER),
            F(3, "completionTime", TIME, POINTER),
            F(4, "active", INT),
            F(5, "succeeded", INT),
            F(6, "failed", INT),
        ),
    ),
)
CRON_JOB = message(
    "CronJob",
    F(1, "metadata", OBJECT_META),
    F(
        2,
        "spec",
        message(
            "CronJobSpec",
            F(1, "schedule", STRING, ALWAYS),
            F(8, "timeZone", STRING, POINTER),
            F(2, "startingDeadlineSeconds", INT, POINTER),
            F(3, "concurrencyPolicy", STRING),
            F(4, "suspend", BOOL, POINTER),
            F(
                5,
                "jobTemplate",
                message("JobTemplateSpec", F(1, "metadata", OBJECT_META), F(2, "spec", JOB_SPEC)),
            ),
            F(6, "successfulJobsHistoryLimit", INT, POINTER),
            F(7, "failedJobsHistoryLimit", INT, POINTER),
        ),
    ),
    F(
        3,
        "status",
        message(
            "CronJobStatus",
            F(1, "active", OBJECT_REFERENCE, LIST),
            F(4, "lastScheduleTime", TIME, POINTER),
            F(5, "lastSuccessfulTime", TIME, POINTER),
        ),
    ),
)

# --- ResourceQuota and PriorityClass (kubectl create quota and priorityclass) ----------------------

RESOURCE_QUOTA = message(
    "ResourceQuota",
    F(1, "metadata", OBJECT_META),
    F(2, "spec", message("ResourceQuotaSpec", F(1, "hard", QUANTITY, MAP), F(2, "scopes", STRING, LIST))),
    F(3, "status", message("ResourceQuotaStatus", F(1, "hard", QUANTITY, MAP), F(2, "used", QUANTITY, MAP))),
)
PRIORITY_CLASS = message(
    "PriorityClass",
    F(1, "metadata", OBJECT_META),
    F(2, "value", INT, ALWAYS),
    F(3, "globalDefault", BOOL),
    F(4, "description", STRING),
    F(5, "preemptionPolicy", STRING, POINTER),
)

RBAC = "rbac.authorization.k8s.io/v1"
# --- k8s.io/api/authentication/v1 and authorization/v1: what kubectl create token, auth whoami
# and auth can-i (--list) send ----------------------------------------------------------------------------

TOKEN_REQUEST = message(
    "TokenRequest",
    F(1, "metadata", OBJECT_META),
    F(
        2,
        "spec",
        message(
            "TokenRequestSpec",
            F(1, "audiences", STRING, LIST | ALWAYS),
            F(4, "expirationSeconds", INT, POINTER),
            F(
                3,
                "boundObjectRef",
                message(
                    "BoundObjectReference",
                    F(1, "kind", STRING),
                    F(2, "apiVersion", STRING),
                    F(3, "name", STRING),
                    F(4, "uid", STRING),
                ),
                POINTER,
            ),
        ),
        ALWAYS,
    ),
    F(
        3,
        "status",
        message(
            "TokenRequestStatus", F(1, "token", STRING, ALWAYS), F(2, "expirationTimestamp", TIME, ALWAYS)
        ),
    ),
)
SELF_SUBJECT_REVIEW = message(
    "SelfSubjectReview",
    F(1, "metadata", OBJECT_META),
    F(
        2,
        "status",
        message(
            "SelfSubjectReviewStatus",
            F(
                1,
                "userInfo",
                message(
                    "UserInfo", F(1, "username", STRING), F(2, "uid", STRING), F(3, "groups", STRING, LIST)
                ),
            ),
        ),
    ),
)
_ACCESS_REVIEW_STATUS = message(
    "SubjectAccessReviewStatus",
    F(1, "allowed", BOOL, ALWAYS),
    F(4, "denied", BOOL),
    F(2, "reason", STRING),
    F(3, "evaluationError", STRING),
)
_RESOURCE_ATTRIBUTES = message(
    "ResourceAttributes",
    F(1, "namespace", STRING),
    F(2, "verb", STRING),
    F(3, "group", STRING),
    F(4, "version", STRING),
    F(5, "resource", STRING),
    F(6, "subresource", STRING),
    F(7, "name", STRING),
)
_NON_RESOURCE_ATTRIBUTES = message("NonResourceAttributes", F(1, "path", STRING), F(2, "verb", STRING))
SELF_SUBJECT_ACCESS_REVIEW = message(
    "SelfSubjectAccessReview",
    F(1, "metadata", OBJECT_META),
    F(
        2,
        "spec",
        message(
            "SelfSubjectAccessReviewSpec",
            F(1, "resourceAttributes", _RESOURCE_ATTRIBUTES, POINTER),
            F(2, "nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES, POINTER),
        ),
        ALWAYS,
    ),
    F(3, "status", _ACCESS_REVIEW_STATUS),
)

SELF_SUBJECT_RULES_REVIEW = message(
    "SelfSubjectRulesReview",
    F(1, "metadata", OBJECT_META),
    F(2, "spec", message("SelfSubjectRulesReviewSpec", F(1, "namespace", STRING)), ALWAYS),
    F(
        3,
        "status",
        message(
            "SubjectRulesReviewStatus",
            F(
                1,
                "resourceRules",
                message(
                    "ResourceRule",
                    F(1, "verbs", STRING, LIST | ALWAYS),
                    F(2, "apiGroups", STRING, LIST),
                    F(3, "resources", STRING, LIST),
                    F(4, "resourceNames", STRING, LIST),
                ),
                LIST | ALWAYS,
            ),
            F(
                2,
                "nonResourceRules",
                message(
                    "NonResourceRule",
                    F(1, "verbs", STRING, LIST | ALWAYS),
                    F(2, "nonResourceURLs", STRING, LIST),
                ),
                LIST | ALWAYS,
            ),
            F(3, "incomplete", BOOL, ALWAYS),
            F(4, "evaluationError", STRING),
        ),
    ),
)

KINDS: Mapping[tuple[str, str], Message] = {
    ("v1", "Namespace"): NAMESPACE,
    ("v1", "ConfigMap"): CONFIG_MAP,
    ("v1", "Secret"): SECRET,
    ("v1", "ServiceAccount"): SERVICE_ACCOUNT,
    ("v1", "Service"): SERVICE,
    ("apps/v1", "Deployment"): DEPLOYMENT,
    (RBAC, "Role"): ROLE,
    (RBAC, "ClusterRole"): CLUSTER_ROLE,
    (RBAC, "RoleBinding"): _binding("RoleBinding"),
    (RBAC, "ClusterRoleBinding"): _binding("ClusterRoleBinding"),
    ("policy/v1", "PodDisruptionBudget"): POD_DISRUPTION_BUDGET,
    ("networking.k8s.io/v1", "Ingress"): INGRESS,
    ("batch/v1", "Job"): JOB,
    ("batch/v1", "CronJob"): CRON_JOB,
    ("v1", "ResourceQuota"): RESOURCE_QUOTA,
    ("scheduling.k8s.io/v1", "PriorityClass"): PRIORITY_CLASS,
    ("authentication.k8s.io/v1", "TokenRequest"): TOKEN_REQUEST,
    ("authentication.k8s.io/v1", "SelfSubjectReview"): SELF_SUBJECT_REVIEW,
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): SELF_SUBJECT_ACCESS_REVIEW,
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): SELF_SUBJECT_RULES_REVIEW,
}
