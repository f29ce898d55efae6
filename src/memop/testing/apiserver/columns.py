"""The column definitions of kube-apiserver's Tables, as v1.36 serves them.

What ``pkg/printers/internalversion/printers.go`` declares for the built-in kinds the in-memory
server serves, and ``rest.NewDefaultTableConvertor``'s for kinds without a printer (Role,
ClusterRole, CustomResourceDefinition), with the descriptions a real v1.36 server sends (the
API types' swagger docs). :mod:`memop.testing.apiserver.printers` fills the rows; the order of each tuple
is the order of the cells.
"""

from __future__ import annotations

from typing import Any

Column = dict[str, Any]


def column(
    name: str, description: str, *, type: str = "string", format: str = "", priority: int = 0
) -> Column:
    """A ``metav1.TableColumnDefinition`` in its JSON field order."""
    return {"name": name, "type": type, "format": format, "description": description, "priority": priority}


NAME = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
CREATION_TIMESTAMP = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is "
    "in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)

NAMESPACES: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Status", "The status of the namespace"),
    column("Age", CREATION_TIMESTAMP),
)
_NODE_ADDRESSES = (
    "List of addresses reachable to the node. Queried from cloud provider, if available. More info: "
    "https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as "
    "mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is "
    "merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an "
    "example. Consumers should assume that addresses can change during the lifetime of a Node. However, "
    "there are some exceptions where this may not be possible, such as Pods that inherit a Node's address "
    "in its own status or consumers of the downward API (status.hostIP)."
)
NODES: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Status", "The status of the node"),
    column("Roles", "The roles of the node"),
    column("Age", CREATION_TIMESTAMP),
    column("Version", "Kubelet Version reported by the node."),
    column("Internal-IP", _NODE_ADDRESSES, priority=1),
    column("External-IP", _NODE_ADDRESSES, priority=1),
    column(
        "OS-Image",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        priority=1,
    ),
    column(
        "Kernel-Version",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        priority=1,
    ),
    column(
        "Container-Runtime",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        priority=1,
    ),
)
PODS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    column("Status", "The aggregate status of the containers in this pod."),
    column(
        "Restarts",
        (
            "The number of times the containers in this pod have been restarted and when the "
            "last container in this pod has restarted."
        ),
    ),
    column("Age", CREATION_TIMESTAMP),
    column(
        "IP",
        (
            "podIP address allocated to the pod. Routable at least within the cluster. Empty if "
            "not yet allocated."
        ),
        priority=1,
    ),
    column(
        "Node",
        (
            "NodeName indicates in which node this pod is scheduled. If empty, this pod is a "
            "candidate for scheduling by the scheduler defined in schedulerName. Once this "
            "field is set, the kubelet for this node becomes responsible for the lifecycle of "
            "this pod. This field should not be used to express a desire for the pod to be "
            "scheduled on a specific node. "
            "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename"
        ),
        priority=1,
    ),
    column(
        "Nominated Node",
        (
            "nominatedNodeName is set only when this pod preempts other pods on the node, but "
            "it cannot be scheduled right away as preemption victims receive their graceful "
            "termination periods. This field does not guarantee that the pod will be scheduled "
            "on this node. Scheduler may decide to place the pod elsewhere if other nodes "
            "become available sooner. Scheduler may also decide to give the resources on this "
            "node to a higher priority pod that is created after preemption. As a result, this "
            "field may be different than PodSpec.nodeName when the pod is scheduled."
        ),
        priority=1,
    ),
    column(
        "Readiness Gates",
        (
            "If specified, all readiness gates will be evaluated for pod readiness. A pod is "
            "ready when all its containers are ready AND all conditions specified in the "
            'readiness gates have status equal to "True" More info: '
            "https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"
        ),
        priority=1,
    ),
)
CONFIGMAPS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Data",
        (
            "Data contains the configuration data. Each key must consist of alphanumeric "
            "characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the "
            "BinaryData field. The keys stored in Data must not overlap with the keys in the "
            "BinaryData field, this is enforced during validation process."
        ),
    ),
    column("Age", CREATION_TIMESTAMP),
)
SECRETS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Type",
        (
            "Used to facilitate programmatic handling of secret data. More info: "
            "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"
        ),
    ),
    column(
        "Data",
        (
            "Data contains the secret data. Each key must consist of alphanumeric characters, '-', "
            "'_' or '.'. The serialized form of the secret data is a base64 encoded string, "
            "representing the arbitrary (possibly non-string) data value here. Described in "
            "https://tools.ietf.org/html/rfc4648#section-4"
        ),
    ),
    column("Age", CREATION_TIMESTAMP),
)
EVENTS: tuple[Column, ...] = (
    column("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
    column("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    column(
        "Reason",
        (
            "This should be a short, machine understandable string that gives the reason for "
            "the transition into the object's current status."
        ),
    ),
    column("Object", "The object that this event is about."),
    column(
        "Subobject",
        (
            "If referring to a piece of an object instead of an entire object, this string "
            "should contain a valid JSON/Go field access statement, such as "
            "desiredState.manifest.containers[2]. For example, if the object reference is to a "
            'container within a pod, this would take on a value like: "spec.containers{name}" '
            '(where "name" refers to the name of the container that triggered the event) or if '
            'no container name is specified "spec.containers[2]" (container with index 2 in '
            "this pod). This syntax is chosen only to have some well-defined way of referencing "
            "a part of an object."
        ),
        priority=1,
    ),
    column(
        "Source",
        ("The component reporting this event. Should be a short machine understandable string."),
        priority=1,
    ),
    column("Message", "A human-readable description of the status of this operation."),
    column(
        "First Seen",
        ("The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
        priority=1,
    ),
    column("Count", "The number of times this event has occurred.", priority=1),
    column("Name", NAME, format="name", priority=1),
)
DEPLOYMENTS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Ready", "Number of the pod with ready state"),
    column(
        "Up-to-date",
        (
            "Total number of non-terminating pods targeted by this deployment that have the "
            "desired template spec."
        ),
    ),
    column(
        "Available",
        (
            "Total number of available non-terminating pods (ready for at least "
            "minReadySeconds) targeted by this deployment."
        ),
    ),
    column("Age", CREATION_TIMESTAMP),
    column("Containers", "Names of each container in the template.", priority=1),
    column("Images", "Images referenced by each container in the template.", priority=1),
    column(
        "Selector",
        (
            "Label selector for pods. Existing ReplicaSets whose pods are selected by this will "
            "be the ones affected by this deployment. It must match the pod template's labels."
        ),
        priority=1,
    ),
)
REPLICASETS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Desired",
        (
            "Replicas is the number of desired pods. This is a pointer to distinguish between "
            "explicit zero and unspecified. Defaults to 1. More info: "
            "https://kubernetes.io/docs/concepts/workloads/controllers/replicaset"
        ),
        type="integer",
    ),
    column(
        "Current",
        (
            "Replicas is the most recently observed number of non-terminating pods. More info: "
            "https://kubernetes.io/docs/concepts/workloads/controllers/replicaset"
        ),
        type="integer",
    ),
    column(
        "Ready",
        ("The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition."),
        type="integer",
    ),
    column("Age", CREATION_TIMESTAMP),
    column("Containers", "Names of each container in the template.", priority=1),
    column("Images", "Images referenced by each container in the template.", priority=1),
    column(
        "Selector",
        (
            "Selector is a label query over pods that should match the replica count. Label "
            "keys and values that must match in order to be controlled by this replica set. It "
            "must match the pod template's labels. More info: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
        ),
        priority=1,
    ),
)
LEASES: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Holder",
        (
            "holderIdentity contains the identity of the holder of a current lease. If "
            "Coordinated Leader Election is used, the holder identity must be equal to the "
            "elected LeaseCandidate.metadata.name field."
        ),
    ),
    column("Age", CREATION_TIMESTAMP),
)
# Both webhook configuration kinds (measured on v1.36.2).
WEBHOOK_CONFIGURATIONS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Webhooks",
        "Webhooks indicates the number of webhooks registered in this configuration",
        type="integer",
    ),
    column("Age", CREATION_TIMESTAMP),
)
SERVICEACCOUNTS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Age", CREATION_TIMESTAMP),
)
SERVICES: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Type",
        (
            "type determines how the Service is exposed. Defaults to ClusterIP. Valid options "
            'are ExternalName, ClusterIP, NodePort, and LoadBalancer. "ClusterIP" allocates a '
            "cluster-internal IP address for load-balancing to endpoints. Endpoints are "
            "determined by the selector or if that is not specified, by manual construction of "
            'an Endpoints object or EndpointSlice objects. If clusterIP is "None", no virtual '
            "IP is allocated and the endpoints are published as a set of endpoints rather than "
            'a virtual IP. "NodePort" builds on ClusterIP and allocates a port on every node '
            'which routes to the same endpoints as the clusterIP. "LoadBalancer" builds on '
            "NodePort and creates an external load-balancer (if supported in the current cloud) "
            'which routes to the same endpoints as the clusterIP. "ExternalName" aliases this '
            "service to the specified externalName. Several other fields do not apply to "
            "ExternalName services. More info: "
            "https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types"
        ),
    ),
    column(
        "Cluster-IP",
        (
            "clusterIP is the IP address of the service and is usually assigned randomly. If an "
            "address is specified manually, is in-range (as per system configuration), and is "
            "not in use, it will be allocated to the service; otherwise creation of the service "
            "will fail. This field may not be changed through updates unless the type field is "
            "also being changed to ExternalName (which requires this field to be blank) or the "
            "type field is being changed from ExternalName (in which case this field may "
            'optionally be specified, as describe above).  Valid values are "None", empty '
            'string (""), or a valid IP address. Setting this to "None" makes a "headless '
            'service" (no virtual IP), which is useful when direct endpoint connections are '
            "preferred and proxying is not required.  Only applies to types ClusterIP, "
            "NodePort, and LoadBalancer. If this field is specified when creating a Service of "
            "type ExternalName, creation will fail. This field will be wiped when updating a "
            "Service to type ExternalName. More info: "
            "https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"
        ),
    ),
    column(
        "External-IP",
        (
            "externalIPs is a list of IP addresses for which nodes in the cluster will also "
            "accept traffic for this service.  These IPs are not managed by Kubernetes.  The "
            "user is responsible for ensuring that traffic arrives at a node with this IP.  A "
            "common example is external load-balancers that are not part of the Kubernetes "
            "system."
        ),
    ),
    column(
        "Port(s)",
        (
            "The list of ports that are exposed by this service. More info: "
            "https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"
        ),
    ),
    column("Age", CREATION_TIMESTAMP),
    column(
        "Selector",
        (
            "Route service traffic to pods with label keys and values matching this selector. "
            "If empty or not present, the service is assumed to have an external process "
            "managing its endpoints, which Kubernetes will not modify. Only applies to types "
            "ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: "
            "https://kubernetes.io/docs/concepts/services-networking/service/"
        ),
        priority=1,
    ),
)
ROLEBINDINGS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Role",
        (
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the "
            "global namespace. If the RoleRef cannot be resolved, the Authorizer must return an "
            "error."
        ),
    ),
    column("Age", CREATION_TIMESTAMP),
    column("Users", "Users in the roleBinding", priority=1),
    column("Groups", "Groups in the roleBinding", priority=1),
    column("ServiceAccounts", "ServiceAccounts in the roleBinding", priority=1),
)
CLUSTERROLEBINDINGS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Role",
        (
            "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef "
            "cannot be resolved, the Authorizer must return an error."
        ),
    ),
    column("Age", CREATION_TIMESTAMP),
    column("Users", "Users in the clusterRoleBinding", priority=1),
    column("Groups", "Groups in the clusterRoleBinding", priority=1),
    column("ServiceAccounts", "ServiceAccounts in the clusterRoleBinding", priority=1),
)
PODDISRUPTIONBUDGETS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Min Available", "The minimum number of pods that must be available."),
    column("Max Unavailable", "The maximum number of pods that may be unavailable."),
    column(
        "Allowed Disruptions", "Calculated number of pods that may be disrupted at this time.", type="integer"
    ),
    column("Age", CREATION_TIMESTAMP),
)
INGRESSES: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Class", "The name of the IngressClass resource that should be used for additional configuration"),
    column("Hosts", "Hosts that incoming requests are matched against before the ingress rule"),
    column("Address", "Address is a list containing ingress points for the load-balancer"),
    column("Ports", "Ports of TLS configurations that open"),
    column("Age", CREATION_TIMESTAMP),
)
INGRESSCLASSES: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Controller", "Controller that is responsible for handling this class"),
    column("Parameters", "A reference to a resource with additional parameters"),
    column("Age", CREATION_TIMESTAMP),
)
NETWORKPOLICIES: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Pod-Selector",
        "podSelector selects the pods to which this NetworkPolicy object applies. The array of rules is "
        "applied to any pods selected by this field. An empty selector matches all pods in the policy's "
        "namespace. Multiple network policies can select the same set of pods. In this case, the ingress "
        "rules for each are combined additively. This field is optional. If it is not specified, it "
        "defaults to an empty selector.",
    ),
    column("Age", CREATION_TIMESTAMP),
)
_CONTAINERS = column("Containers", "Names of each container in the template.", priority=1)
_IMAGES = column("Images", "Images referenced by each container in the template.", priority=1)
_LABEL_SELECTORS = "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
STATEFULSETS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Ready", "Number of the pod with ready state"),
    column("Age", CREATION_TIMESTAMP),
    _CONTAINERS,
    _IMAGES,
)
_DAEMONSET_INFO = "More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"
DAEMONSETS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Desired",
        "The total number of nodes that should be running the daemon pod (including nodes correctly running "
        f"the daemon pod). {_DAEMONSET_INFO}",
        type="integer",
    ),
    column(
        "Current",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. "
        + _DAEMONSET_INFO,
        type="integer",
    ),
    column(
        "Ready",
        "numberReady is the number of nodes that should be running the daemon pod and have one or more of "
        "the daemon pod running with a Ready Condition.",
        type="integer",
    ),
    column("Up-to-date", "The total number of nodes that are running updated daemon pod", type="integer"),
    column(
        "Available",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod "
        "running and available (ready for at least spec.minReadySeconds)",
        type="integer",
    ),
    column(
        "Node Selector",
        "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must "
        "match a node's labels for the pod to be scheduled on that node. More info: "
        "https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
    ),
    column("Age", CREATION_TIMESTAMP),
    _CONTAINERS,
    _IMAGES,
    column(
        "Selector",
        "A label query over pods that are managed by the daemon set. Must match in order to be controlled. "
        f"It must match the pod template's labels. More info: {_LABEL_SELECTORS}",
        priority=1,
    ),
)
_JOB_SELECTOR = column(
    "Selector",
    "A label query over pods that should match the pod count. Normally, the system sets this field for you. "
    f"More info: {_LABEL_SELECTORS}",
    priority=1,
)
JOBS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Status", "Status of the job."),
    column(
        "Completions",
        "The number of pods which reached phase Succeeded. The value increases monotonically for a given "
        "spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
    ),
    column("Duration", "Time required to complete the job."),
    column("Age", CREATION_TIMESTAMP),
    _CONTAINERS,
    _IMAGES,
    _JOB_SELECTOR,
)
CRONJOBS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Schedule", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
    column(
        "Timezone",
        "The time zone name for the given schedule, see "
        "https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default "
        "to the time zone of the kube-controller-manager process. The set of valid time zone names and the "
        "time zone offset is loaded from the system-wide time zone database by the API server during "
        "CronJob validation and the controller manager during execution. If no system-wide time zone "
        "database can be found a bundled version of the database is used instead. If the time zone name "
        "becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the "
        "controller will stop creating new new Jobs and will create a system event with the reason "
        "UnknownTimeZone. More information can be found in "
        "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
    ),
    column(
        "Suspend",
        "This flag tells the controller to suspend subsequent executions, it does not apply to already "
        "started executions.  Defaults to false.",
        type="boolean",
    ),
    column("Active", "A list of pointers to currently running jobs.", type="integer"),
    column("Last Schedule", "Information when was the last time the job was successfully scheduled."),
    column("Age", CREATION_TIMESTAMP),
    _CONTAINERS,
    _IMAGES,
    _JOB_SELECTOR,
)
PERSISTENTVOLUMECLAIMS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Status", "phase represents the current phase of PersistentVolumeClaim."),
    column("Volume", "volumeName is the binding reference to the PersistentVolume backing this claim."),
    column("Capacity", "capacity represents the actual resources of the underlying volume."),
    column(
        "Access Modes",
        "accessModes contains the actual access modes the volume backing the PVC has. More info: "
        "https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1",
    ),
    column("StorageClass", "StorageClass of the pvc"),
    column("VolumeAttributesClass", "VolumeAttributesClass of the pvc"),
    column("Age", CREATION_TIMESTAMP),
    column(
        "VolumeMode",
        "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied "
        "when not included in claim spec.",
        priority=1,
    ),
)
PERSISTENTVOLUMES: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Capacity",
        "capacity is the description of the persistent volume's resources and capacity. More info: "
        "https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity",
    ),
    column(
        "Access Modes",
        "accessModes contains all ways the volume can be mounted. More info: "
        "https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes",
    ),
    column(
        "Reclaim Policy",
        "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its "
        "claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default "
        "for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported "
        "by the volume plugin underlying this PersistentVolume. More info: "
        "https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming",
    ),
    column(
        "Status",
        "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: "
        "https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase",
    ),
    column(
        "Claim",
        "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. "
        "Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. "
        "More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding",
    ),
    column("StorageClass", "StorageClass of the pv"),
    column("VolumeAttributesClass", "VolumeAttributesClass of the pv"),
    column(
        "Reason",
        "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and "
        "tidy display in the CLI.",
    ),
    column("Age", CREATION_TIMESTAMP),
    column(
        "VolumeMode",
        "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in "
        "raw block state. Value of Filesystem is implied when not included in spec.",
        priority=1,
    ),
)
RESOURCEQUOTAS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Request", "Request represents a minimum amount of cpu/memory that a container may consume."),
    column(
        "Limit",
        "Limits control the maximum amount of cpu/memory that a container may use independent of contention "
        "on the node.",
    ),
    column("Age", CREATION_TIMESTAMP),
)
HORIZONTALPODAUTOSCALERS: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Reference",
        "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics "
        "should be collected, as well as to actually change the replica count.",
    ),
    column(
        "Targets",
        "metrics contains the specifications for which to use to calculate the desired replica count (the "
        "maximum replica count across all metrics will be used).  The desired replica count is calculated "
        "multiplying the ratio between the target value and the current value by the current number of "
        "pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the "
        "individual metric source types for more information about how each type of metric must respond. "
        "If not set, the default metric will be set to 80% average CPU utilization.",
    ),
    column(
        "MinPods",
        "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  "
        "It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is "
        "enabled and at least one Object or External metric is configured.  Scaling is active as long as at "
        "least one metric value is available.",
    ),
    column(
        "MaxPods",
        "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It "
        "cannot be less that minReplicas.",
    ),
    column(
        "Replicas",
        "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by "
        "the autoscaler.",
    ),
    column("Age", CREATION_TIMESTAMP),
)
PRIORITYCLASSES: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column(
        "Value",
        "value represents the integer value of this priority class. This is the actual priority that pods "
        "receive when they have the name of this class in their pod spec.",
        type="integer",
    ),
    column(
        "Global-Default",
        "globalDefault specifies whether this PriorityClass should be considered as the default priority for "
        "pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. "
        "However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the "
        "smallest value of such global default PriorityClasses will be used as the default priority.",
        type="boolean",
    ),
    column("Age", CREATION_TIMESTAMP),
    column(
        "PreemptionPolicy",
        "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, "
        "PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
    ),
)
DEFAULT: tuple[Column, ...] = (
    column("Name", NAME, format="name"),
    column("Created At", CREATION_TIMESTAMP, type="date"),
)
