"""Protobuf request bodies (``application/vnd.kubernetes.protobuf``), as kubectl create sends them.

The decoder is checked three ways: against bodies built here byte by byte from the field numbers
of k8s.io/api's generated.proto (independent of memop's tables), by a round trip JSON → protobuf
(an encoder written here, following the Go encoder's rules) → JSON for an object of every kind it
reads, and over HTTP, where a protobuf create must give the object the same create as JSON gives.
The HTTP tests run against the in-memory server and, with USE_EXISTING_CLUSTER=true, against a
real one (which decodes protobuf itself), except those about the in-memory server's refusals.
"""

from __future__ import annotations

import base64
import datetime
import json
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from memop.testing.apiserver import protobuf
from memop.testing.apiserver.protokinds import KINDS
from memop.testing.apiserver.protowire import INLINE, LIST, MAP, POINTER, Message, Scalar

if TYPE_CHECKING:
    from tests.conftest import Http

PROTOBUF = "application/vnd.kubernetes.protobuf"

# --- a protobuf writer, from the wire format's definition --------------------------------------------


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative numbers: two's complement over 64 bits, ten bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def num(number: int, value: int) -> bytes:
    """A varint field."""
    return varint(number << 3) + varint(value)


def ld(number: int, value: bytes | str) -> bytes:
    """A length-delimited field (string, bytes, message)."""
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """Kubernetes' protobuf body: magic, then runtime.Unknown {typeMeta, raw, "", ""}."""
    type_meta = ld(1, api_version) + ld(2, kind)
    return b"k8s\x00" + ld(1, type_meta) + ld(2, raw) + ld(3, b"") + ld(4, b"")


def encode(msg: Message, obj: Mapping[str, Any], *, gogo: bool) -> bytes:
    """``obj`` (JSON as Go's encoding/json writes it) encoded as ``msg``. With ``gogo``, also the
    zero values of absent non-pointer fields, as Kubernetes' Go encoder writes them."""
    out = bytearray()
    for field in msg.fields:
        if field.flags & INLINE:
            assert isinstance(field.type, Message)
            inner = encode(field.type, obj, gogo=gogo)
            if gogo or inner:
                out += ld(field.number, inner)
            continue
        value = obj.get(field.name)
        if value is None:
            if gogo and not field.flags & (POINTER | LIST | MAP):
                out += zero(field.number, field.type)
            continue
        if field.flags & LIST:
            for item in value:
                out += one(field.number, field.type, item, gogo)
        elif field.flags & MAP:
            for key, item in value.items():
                out += ld(field.number, ld(1, key) + one(2, field.type, item, gogo))
        else:
            out += one(field.number, field.type, value, gogo)
    return bytes(out)


def zero(number: int, kind: Scalar | Message) -> bytes:
    if kind in (Scalar.INT, Scalar.BOOL):
        return num(number, 0)
    return ld(number, b"")


def one(number: int, kind: Scalar | Message, value: Any, gogo: bool) -> bytes:
    if isinstance(kind, Message):
        return ld(number, encode(kind, value, gogo=gogo))
    if kind is Scalar.INT:
        return num(number, value)
    if kind is Scalar.BOOL:
        return num(number, int(value))
    if kind is Scalar.STRING:
        return ld(number, value)
    if kind is Scalar.BYTES:
        return ld(number, base64.b64decode(value))
    if kind is Scalar.TIME:
        stamp = datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
        return ld(number, num(1, int(stamp.timestamp())))
    if kind is Scalar.QUANTITY:
        return ld(number, ld(1, value))
    if kind is Scalar.INT_OR_STRING:
        return ld(number, num(1, 1) + ld(3, value) if isinstance(value, str) else num(1, 0) + num(2, value))
    assert kind is Scalar.FIELDS_V1
    return ld(number, ld(1, json.dumps(value)))


# --- bodies built byte by byte -----------------------------------------------------------------------


def test_kubectl_create_namespace_body() -> None:
    # The body kubectl v1.32 sends for `kubectl create namespace x1` (its -v=8 dump): every
    # non-pointer field written, empty strings and an empty creationTimestamp included.
    body = bytes.fromhex(
        "6b387300 0a0f0a027631 12094e616d657370616365 121a0a120a027831 12001a00 22002a00 32003800"
        "4200 1200 1a020a00 1a00 2200".replace(" ", "")
    )
    assert protobuf.decode(body) == {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": "x1", "creationTimestamp": None},
        "spec": {},
        "status": {},
    }


def test_config_map_fields_by_number() -> None:
    # ConfigMap: 1 metadata, 2 data, 3 binaryData, 4 immutable; ObjectMeta: 1 name,
    # 2 generateName, 3 namespace, 11 labels, 12 annotations, 13 ownerReferences, 14 finalizers.
    owner = ld(1, "Thing") + ld(3, "owner") + ld(4, "uid-1") + ld(5, "example.com/v1") + num(6, 1) + num(7, 0)
    meta = (
        ld(2, "cm-")
        + ld(3, "ns")
        + ld(11, ld(1, "app") + ld(2, "web"))
        + ld(12, ld(1, "note") + ld(2, ""))
        + ld(13, owner)
        + ld(14, "example.com/cleanup")
    )
    raw = ld(1, meta) + ld(2, ld(1, "a") + ld(2, "1")) + ld(3, ld(1, "bin") + ld(2, b"\xff\x00")) + num(4, 0)
    assert protobuf.decode(envelope("v1", "ConfigMap", raw)) == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "generateName": "cm-",
            "namespace": "ns",
            "labels": {"app": "web"},
            "annotations": {"note": ""},
            "ownerReferences": [
                {
                    "apiVersion": "example.com/v1",
                    "kind": "Thing",
                    "name": "owner",
                    "uid": "uid-1",
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
            "finalizers": ["example.com/cleanup"],
            "creationTimestamp": None,
        },
        "immutable": False,
        "data": {"a": "1"},
        "binaryData": {"bin": "/wA="},
    }


def test_secret_fields_by_number() -> None:
    # Secret: 1 metadata, 2 data (bytes), 3 type, 4 stringData, 5 immutable.
    raw = ld(1, ld(1, "s")) + ld(2, ld(1, "password") + ld(2, b"hunter2")) + ld(3, "Opaque")
    raw += ld(4, ld(1, "user") + ld(2, "admin")) + num(5, 1)
    decoded = protobuf.decode(envelope("v1", "Secret", raw))
    assert decoded == {
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": {"name": "s", "creationTimestamp": None},
        "immutable": True,
        "data": {"password": base64.b64encode(b"hunter2").decode()},
        "stringData": {"user": "admin"},
        "type": "Opaque",
    }
    assert list(decoded) == ["kind", "apiVersion", "metadata", "immutable", "data", "stringData", "type"]


def test_deployment_fields_by_number() -> None:
    # DeploymentSpec: 1 replicas, 2 selector, 3 template, 4 strategy; PodSpec 2 containers;
    # Container: 1 name, 2 image, 3 command, 6 ports (ContainerPort 3 containerPort), 8 resources;
    # ResourceRequirements 1 limits (map of Quantity {1 string}); IntOrString {1 type, 2 int, 3 str}.
    container = ld(1, "web") + ld(2, "nginx") + ld(3, "sleep") + ld(3, "1") + ld(6, num(3, 80))
    container += ld(8, ld(1, ld(1, "cpu") + ld(2, ld(1, "500m"))))
    template = ld(1, ld(11, ld(1, "app") + ld(2, "web"))) + ld(2, ld(2, container))
    rolling = ld(1, num(1, 0) + num(2, 0)) + ld(2, num(1, 1) + ld(3, "25%"))
    spec = num(1, 0) + ld(2, ld(1, ld(1, "app") + ld(2, "web"))) + ld(3, template)
    spec += ld(4, ld(1, "RollingUpdate") + ld(2, rolling))
    decoded = protobuf.decode(envelope("apps/v1", "Deployment", ld(1, ld(1, "web")) + ld(2, spec)))
    assert decoded["spec"] == {
        "replicas": 0,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "image": "nginx",
                        "command": ["sleep", "1"],
                        "ports": [{"containerPort": 80}],
                        "resources": {"limits": {"cpu": "500m"}},
                    }
                ]
            },
        },
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}},
    }
    assert decoded["status"] == {}  # a struct: written even when the body leaves it out


def test_negative_and_packed_integers() -> None:
    # A negative int32 is sign-extended to ten bytes; repeated int64s may come packed.
    context = num(2, -1) + ld(4, varint(1) + varint(2) + varint(3_000_000_000))
    pod_spec = ld(2, ld(1, "c")) + num(25, -5) + ld(14, context)
    template = ld(2, pod_spec)
    decoded = protobuf.decode(envelope("apps/v1", "Deployment", ld(2, ld(3, template))))
    spec = decoded["spec"]["template"]["spec"]
    assert spec["priority"] == -5
    assert spec["securityContext"] == {"runAsUser": -1, "supplementalGroups": [1, 2, 3_000_000_000]}


# --- round trips: JSON → protobuf → JSON, for every kind ---------------------------------------------

META = {
    "name": "web",
    "namespace": "team",
    "creationTimestamp": None,
    "labels": {"app": "web", "tier": "front"},
    "annotations": {"a/b": "c"},
}
POD_SPEC: dict[str, Any] = {
    "volumes": [
        {"name": "config", "configMap": {"name": "web-config", "items": [{"key": "a", "path": "a.txt"}]}},
        {"name": "creds", "secret": {"secretName": "web-creds", "defaultMode": 420, "optional": False}},
        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
    ],
    "initContainers": [{"name": "init", "image": "busybox", "args": ["true"], "resources": {}}],
    "containers": [
        {
            "name": "web",
            "image": "nginx:1.27",
            "command": ["nginx"],
            "args": ["-g", "daemon off;"],
            "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
            "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "web-config", "optional": True}}],
            "env": [
                {"name": "PLAIN", "value": "1"},
                {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "web-config", "key": "a"}}},
                {
                    "name": "POD",
                    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
                },
                {
                    "name": "MEM",
                    "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
                },
            ],
            "resources": {"limits": {"cpu": "1", "memory": "256Mi"}, "requests": {"cpu": "100m"}},
            "volumeMounts": [{"name": "config", "readOnly": True, "mountPath": "/etc/web"}],
            "livenessProbe": {
                "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                "initialDelaySeconds": 5,
                "periodSeconds": 10,
            },
            "readinessProbe": {"tcpSocket": {"port": 80}, "failureThreshold": 3},
            "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}},
            "terminationMessagePath": "/dev/termination-log",
            "imagePullPolicy": "IfNotPresent",
            "securityContext": {
                "capabilities": {"drop": ["ALL"]},
                "runAsUser": 0,
                "runAsNonRoot": False,
                "allowPrivilegeEscalation": False,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        }
    ],
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "serviceAccountName": "web",
    "automountServiceAccountToken": False,
    "securityContext": {"runAsNonRoot": True, "fsGroup": 2000},
    "imagePullSecrets": [{"name": "registry"}],
    "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 60}],
    "priority": -5,
    "enableServiceLinks": False,
}
LABEL_SELECTOR = {
    "matchLabels": {"app": "web"},
    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}],
}
RBAC = "rbac.authorization.k8s.io/v1"
OBJECTS: dict[tuple[str, str], dict[str, Any]] = {
    ("v1", "Namespace"): {
        "metadata": {
            "name": "team",
            "creationTimestamp": "2026-05-01T10:20:30Z",
            "deletionTimestamp": "2026-05-02T00:00:00Z",
            "finalizers": ["example.com/x"],
            "managedFields": [
                {
                    "manager": "kubectl",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2026-05-01T10:20:30Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {}}},
                }
            ],
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {
            "phase": "Terminating",
            "conditions": [
                {
                    "type": "NamespaceContentRemaining",
                    "status": "True",
                    "lastTransitionTime": "2026-05-02T00:00:01Z",
                    "reason": "SomeResourcesRemain",
                }
            ],
        },
    },
    ("v1", "ConfigMap"): {
        "metadata": META,
        "immutable": True,
        "data": {"a": "1", "b": ""},
        "binaryData": {"z": "AAE="},
    },
    ("v1", "Secret"): {
        "metadata": {
            "name": "web",
            "generateName": "web-",
            "namespace": "team",
            "creationTimestamp": None,
            "labels": {"app": "web"},
        },
        "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"},
        "stringData": {"extra": "x"},
        "type": "kubernetes.io/tls",
    },
    ("v1", "ServiceAccount"): {
        "metadata": META,
        "secrets": [{"name": "web-token"}],
        "imagePullSecrets": [{"name": "registry"}],
        "automountServiceAccountToken": False,
    },
    ("v1", "Service"): {
        "metadata": META,
        "spec": {
            "ports": [
                {"name": "http", "protocol": "TCP", "appProtocol": "http", "port": 80, "targetPort": "http"},
                {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": 9090, "nodePort": 30090},
            ],
            "selector": {"app": "web"},
            "clusterIP": "10.96.0.10",
            "clusterIPs": ["10.96.0.10"],
            "type": "NodePort",
            "sessionAffinity": "ClientIP",
            "externalTrafficPolicy": "Cluster",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
        },
        "status": {
            "loadBalancer": {"ingress": [{"ip": "1.2.3.4", "ports": [{"port": 80, "protocol": "TCP"}]}]}
        },
    },
    ("apps/v1", "Deployment"): {
        "metadata": {
            **META,
            "ownerReferences": [
                {"apiVersion": "example.com/v1", "kind": "Web", "name": "web", "uid": "u", "controller": True}
            ],
        },
        "spec": {
            "replicas": 3,
            "selector": LABEL_SELECTOR,
            "template": {"metadata": {"creationTimestamp": None, "labels": {"app": "web"}}, "spec": POD_SPEC},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}},
            "minReadySeconds": 5,
            "revisionHistoryLimit": 0,
            "progressDeadlineSeconds": 600,
        },
        "status": {
            "observedGeneration": 2,
            "replicas": 3,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "lastUpdateTime": "2026-05-01T10:20:30Z",
                    "lastTransitionTime": "2026-05-01T10:20:30Z",
                    "reason": "MinimumReplicasAvailable",
                    "message": "Deployment has minimum availability.",
                }
            ],
        },
    },
    (RBAC, "Role"): {
        "metadata": META,
        "rules": [
            {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
            {"verbs": None, "apiGroups": ["apps"], "resources": ["deployments"]},
        ],
    },
    (RBAC, "ClusterRole"): {
        "metadata": {"name": "web", "creationTimestamp": None},
        "rules": None,
        "aggregationRule": {
            "clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate": "true"}}]
        },
    },
    (RBAC, "RoleBinding"): {
        "metadata": META,
        "subjects": [
            {"kind": "ServiceAccount", "name": "web", "namespace": "team"},
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"},
        ],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "web"},
    },
    (RBAC, "ClusterRoleBinding"): {
        "metadata": {"name": "web", "creationTimestamp": None},
        "roleRef": {"apiGroup": "", "kind": "", "name": ""},
    },
    ("policy/v1", "PodDisruptionBudget"): {
        "metadata": META,
        "spec": {
            "selector": LABEL_SELECTOR,
            "maxUnavailable": "20%",
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
        "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
    },
    # What kubectl create token, auth whoami and auth can-i send.
    ("authentication.k8s.io/v1", "TokenRequest"): {
        "metadata": META,
        "spec": {
            "audiences": ["https://kubernetes.default.svc.cluster.local"],
            "expirationSeconds": 600,
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "1234"},
        },
        "status": {"token": "", "expirationTimestamp": None},
    },
    ("authentication.k8s.io/v1", "SelfSubjectReview"): {
        "metadata": META,
        "status": {"userInfo": {"username": "alice", "uid": "1", "groups": ["devs"]}},
    },
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {
        "metadata": META,
        "spec": {
            "resourceAttributes": {
                "namespace": "team",
                "verb": "update",
                "group": "apps",
                "version": "v1",
                "resource": "deployments",
                "subresource": "scale",
                "name": "web",
            },
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
        "status": {"allowed": False, "reason": "no"},
    },
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): {
        "metadata": META,
        "spec": {"namespace": "team"},
        "status": {
            "resourceRules": [
                {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]}
            ],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}],
            "incomplete": False,
            "evaluationError": "e",
        },
    },
    ("networking.k8s.io/v1", "Ingress"): {
        "metadata": META,
        "spec": {
            "ingressClassName": "nginx",
            "defaultBackend": {"service": {"name": "web", "port": {"name": "http"}}},
            "tls": [{"hosts": ["web.example.com"], "secretName": "web-tls"}],
            "rules": [
                {
                    "host": "web.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": "/api",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "api", "port": {"number": 8080}}},
                            },
                            {
                                "path": "/static",
                                "pathType": "Exact",
                                "backend": {
                                    "resource": {"apiGroup": "example.com", "kind": "Bucket", "name": "b"}
                                },
                            },
                        ]
                    },
                }
            ],
        },
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example.com"}]}},
    },
    ("batch/v1", "Job"): {
        "metadata": META,
        "spec": {
            "parallelism": 2,
            "completions": 4,
            "backoffLimit": 0,
            "selector": LABEL_SELECTOR,
            "manualSelector": True,
            "template": {"metadata": {"creationTimestamp": None, "labels": {"app": "web"}}, "spec": POD_SPEC},
            "ttlSecondsAfterFinished": 60,
            "completionMode": "NonIndexed",
            "suspend": False,
            "podReplacementPolicy": "Failed",
        },
        "status": {
            "conditions": [
                {
                    "type": "Complete",
                    "status": "True",
                    "lastProbeTime": "2026-05-01T10:20:30Z",
                    "lastTransitionTime": "2026-05-01T10:20:30Z",
                    "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods",
                }
            ],
            "startTime": "2026-05-01T10:20:00Z",
            "completionTime": "2026-05-01T10:20:30Z",
            "succeeded": 4,
        },
    },
    ("batch/v1", "CronJob"): {
        "metadata": META,
        "spec": {
            "schedule": "*/5 * * * *",
            "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid",
            "suspend": True,
            "jobTemplate": {
                "metadata": {"creationTimestamp": None},
                "spec": {"template": {"metadata": {"creationTimestamp": None}, "spec": POD_SPEC}},
            },
            "successfulJobsHistoryLimit": 0,
        },
        "status": {
            "active": [
                {"kind": "Job", "namespace": "team", "name": "web-1", "uid": "u", "apiVersion": "batch/v1"}
            ],
            "lastScheduleTime": "2026-05-01T10:20:00Z",
        },
    },
    ("v1", "ResourceQuota"): {
        "metadata": META,
        "spec": {"hard": {"pods": "10", "requests.cpu": "500m"}, "scopes": ["NotBestEffort"]},
        "status": {"hard": {"pods": "10"}, "used": {"pods": "0"}},
    },
    ("scheduling.k8s.io/v1", "PriorityClass"): {
        "metadata": {"name": "high", "creationTimestamp": None},
        "value": 0,
        "globalDefault": True,
        "description": "what matters",
        "preemptionPolicy": "Never",
    },
}


def test_every_decoded_kind_has_a_round_trip_object() -> None:
    assert set(OBJECTS) == set(KINDS)


@pytest.mark.parametrize("gogo", [False, True], ids=["set-fields", "all-fields"])
@pytest.mark.parametrize("key", list(OBJECTS), ids=lambda key: key[1])
def test_round_trip(key: tuple[str, str], gogo: bool) -> None:
    api_version, kind = key
    obj = {"kind": kind, "apiVersion": api_version, **OBJECTS[key]}
    body = envelope(api_version, kind, encode(KINDS[key], obj, gogo=gogo))
    decoded = protobuf.decode(body)
    assert decoded == obj
    # In the Go struct's order, as kubectl's JSON has them.
    assert json.dumps(decoded) == json.dumps(obj)


# --- bodies the decoder refuses ----------------------------------------------------------------------


def test_a_kind_it_does_not_read_is_undecodable() -> None:
    with pytest.raises(protobuf.UndecodableProtobuf) as caught:
        protobuf.decode(envelope("v1", "Pod", ld(1, ld(1, "p"))))
    message = str(caught.value)
    assert "Pod (v1)" in message
    assert PROTOBUF in message
    assert "ConfigMap (v1)" in message  # says what it reads
    assert "application/json" in message
    assert "kubectl apply -f" in message


def test_a_field_it_does_not_know_is_undecodable() -> None:
    # PodSpec field 18 is affinity, not in memop's tables: refused, not dropped.
    pod_spec = ld(2, ld(1, "c")) + ld(18, ld(1, b""))
    body = envelope("apps/v1", "Deployment", ld(2, ld(3, ld(2, pod_spec))))
    with pytest.raises(protobuf.UndecodableProtobuf) as caught:
        protobuf.decode(body)
    message = str(caught.value)
    assert "field 18 of PodSpec" in message
    assert "spec.template.spec" in message
    assert "Deployment (apps/v1)" in message
    assert "application/json" in message


def test_an_unknown_field_set_to_its_zero_value_is_ignored() -> None:
    # A newer kubectl writes the non-pointer fields added since (as Go's encoder writes every
    # one), unset: an empty string or a 0. They mean nothing was set, so they cannot be lost.
    pod_spec = ld(2, ld(1, "c") + ld(99, b"") + num(98, 0)) + ld(97, b"")
    body = envelope("apps/v1", "Deployment", ld(2, ld(3, ld(2, pod_spec))))
    spec = protobuf.decode(body)["spec"]["template"]["spec"]
    assert spec == {"containers": [{"name": "c", "resources": {}}]}
    with pytest.raises(protobuf.UndecodableProtobuf, match="field 98 of Container"):
        protobuf.decode(envelope("apps/v1", "Deployment", ld(2, ld(3, ld(2, ld(2, num(98, 1)))))))


def test_content_encoding_is_undecodable() -> None:
    body = b"k8s\x00" + ld(1, ld(1, "v1") + ld(2, "ConfigMap")) + ld(2, b"") + ld(3, "gzip")
    with pytest.raises(protobuf.UndecodableProtobuf, match="gzip"):
        protobuf.decode(body)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{}",  # JSON is not protobuf
        b"k8s\x00\x0a\x05\x0a\x02v1",  # truncated TypeMeta
        envelope("v1", "ConfigMap", ld(1, b"\x0a\xff")),  # a varint that never ends
        envelope("v1", "ConfigMap", num(1, 5)),  # metadata as a varint
        envelope("v1", "ConfigMap", ld(4, b"")),  # immutable (a bool) length-delimited
        b"k8s\x00" + varint(1 << 3 | 3),  # wire type 3 (groups) is not used by Kubernetes
    ],
)
def test_malformed_bodies(body: bytes) -> None:
    with pytest.raises(protobuf.MalformedProtobuf):
        protobuf.decode(body)


# --- over HTTP: the JSON path's object ---------------------------------------------------------------


def _without_server_fields(obj: dict[str, Any]) -> dict[str, Any]:
    meta = dict(obj["metadata"])
    for key in ("uid", "creationTimestamp", "resourceVersion"):
        meta.pop(key, None)
    meta["managedFields"] = [
        {k: v for k, v in e.items() if k != "time"} for e in meta.get("managedFields", [])
    ]
    out = {**obj, "metadata": meta}
    if obj["kind"] == "Service":  # a dry run allocates an address each time
        out["spec"] = {k: v for k, v in obj["spec"].items() if k not in ("clusterIP", "clusterIPs")}
    return out


@pytest.mark.parametrize(
    ("path", "key", "obj"),
    [
        ("/api/v1/namespaces", ("v1", "Namespace"), {"spec": {}, "status": {}}),
        (
            "/api/v1/namespaces/{ns}/configmaps",
            ("v1", "ConfigMap"),
            {"data": {"a": "1"}, "binaryData": {"b": "AP8="}},
        ),
        (
            "/api/v1/namespaces/{ns}/secrets",
            ("v1", "Secret"),
            {"data": {"k": "AP8="}, "stringData": {"s": "text"}, "type": "example.com/x", "immutable": True},
        ),
        (
            "/api/v1/namespaces/{ns}/serviceaccounts",
            ("v1", "ServiceAccount"),
            {"automountServiceAccountToken": False},
        ),
        (
            "/api/v1/namespaces/{ns}/services",
            ("v1", "Service"),
            {
                "spec": {
                    "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                    "type": "ClusterIP",
                },
                "status": {"loadBalancer": {}},
            },
        ),
        (
            "/apis/apps/v1/namespaces/{ns}/deployments",
            ("apps/v1", "Deployment"),
            {
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "web", "image": "nginx", "resources": {}}]},
                    },
                    "strategy": {},
                },
                "status": {},
            },
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
            (RBAC, "Role"),
            {"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]},
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            (RBAC, "RoleBinding"),
            {
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            },
        ),
        (
            "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
            ("policy/v1", "PodDisruptionBudget"),
            {
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
                "status": {
                    "disruptionsAllowed": 0,
                    "currentHealthy": 0,
                    "desiredHealthy": 0,
                    "expectedPods": 0,
                },
            },
        ),
        (
            "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses",
            ("networking.k8s.io/v1", "Ingress"),
            {
                "spec": {
                    "rules": [
                        {
                            "host": "web.example.com",
                            "http": {
                                "paths": [
                                    {
                                        "path": "/",
                                        "pathType": "Prefix",
                                        "backend": {"service": {"name": "web", "port": {"number": 80}}},
                                    }
                                ]
                            },
                        }
                    ],
                    "tls": [{"hosts": ["web.example.com"], "secretName": "web-tls"}],
                },
                "status": {"loadBalancer": {}},
            },
        ),
    ],
    ids=lambda value: value[1] if isinstance(value, tuple) else None,
)
async def test_a_protobuf_create_gives_what_json_gives(
    http: Http, namespace: str, path: str, key: tuple[str, str], obj: dict[str, Any]
) -> None:
    api_version, kind = key
    url = path.format(ns=namespace)
    name = f"pb-{uuid.uuid4().hex[:8]}"
    meta: dict[str, Any] = {"name": name, "creationTimestamp": None, "labels": {"via": "protobuf"}}
    full = {"kind": kind, "apiVersion": api_version, "metadata": meta, **obj}
    query = {"dryRun": "All", "fieldManager": "memop-test"}
    as_json = await http.post(url, full, query=query)
    assert as_json.status == 201, as_json.body
    body = envelope(api_version, kind, encode(KINDS[key], full, gogo=True))
    as_protobuf = await http.post(url, body, query=query, content_type=PROTOBUF)
    assert as_protobuf.status == 201, as_protobuf.body
    assert as_protobuf.headers["Content-Type"].startswith("application/json")
    assert _without_server_fields(as_protobuf.body) == _without_server_fields(as_json.body)


async def test_a_protobuf_create_is_stored_and_read_back(http: Http, namespace: str) -> None:
    raw = ld(1, ld(1, "pb") + ld(11, ld(1, "k") + ld(2, "v"))) + ld(2, ld(1, "a") + ld(2, "1"))
    created = await http.post(
        f"/api/v1/namespaces/{namespace}/configmaps", envelope("v1", "ConfigMap", raw), content_type=PROTOBUF
    )
    assert created.status == 201, created.body
    read = await http.get(f"/api/v1/namespaces/{namespace}/configmaps/pb")
    assert read.status == 200
    assert read.body["metadata"]["labels"] == {"k": "v"}
    assert read.body["data"] == {"a": "1"}
    assert read.body == created.body


async def test_a_protobuf_update(http: Http, namespace: str) -> None:
    url = f"/api/v1/namespaces/{namespace}/configmaps"
    created = await http.post(url, {"metadata": {"name": "pb"}, "data": {"a": "1"}})
    assert created.status == 201, created.body
    version = created.body["metadata"]["resourceVersion"]
    raw = ld(1, ld(1, "pb") + ld(6, version)) + ld(2, ld(1, "a") + ld(2, "2"))
    updated = await http.put(f"{url}/pb", envelope("v1", "ConfigMap", raw), content_type=PROTOBUF)
    assert updated.status == 200, updated.body
    assert updated.body["data"] == {"a": "2"}
    assert updated.body["metadata"]["resourceVersion"] != version


# --- the in-memory server's refusals ------------------------------------------------------------------


@pytest.mark.fake_only
async def test_a_kind_without_a_decoder_gets_415_saying_what_to_do(http: Http, namespace: str) -> None:
    pod = ld(1, ld(1, "p")) + ld(2, ld(2, ld(1, "c") + ld(2, "busybox")))
    reply = await http.post(
        f"/api/v1/namespaces/{namespace}/pods", envelope("v1", "Pod", pod), content_type=PROTOBUF
    )
    assert reply.status == 415, reply.body
    assert reply.body["reason"] == "UnsupportedMediaType"
    message = reply.body["message"]
    assert PROTOBUF in message
    assert "kubectl apply -f" in message
    assert "--dry-run=client -o yaml" in message


@pytest.mark.fake_only
async def test_a_field_without_a_decoder_gets_415_naming_it(http: Http, namespace: str) -> None:
    # ServiceSpec field 6 is deprecatedPublicIPs, long gone from the API.
    raw = ld(1, ld(1, "s")) + ld(2, ld(6, "1.2.3.4"))
    reply = await http.post(
        f"/api/v1/namespaces/{namespace}/services", envelope("v1", "Service", raw), content_type=PROTOBUF
    )
    assert reply.status == 415, reply.body
    assert "field 6 of ServiceSpec" in reply.body["message"]


@pytest.mark.fake_only
async def test_a_malformed_protobuf_body_is_a_bad_request(http: Http, namespace: str) -> None:
    reply = await http.post(
        f"/api/v1/namespaces/{namespace}/configmaps", b"k8s\x00\x0a\xff", content_type=PROTOBUF
    )
    assert reply.status == 400, reply.body
    assert reply.body["reason"] == "BadRequest"


@pytest.mark.fake_only
async def test_other_media_types_get_415_listing_protobuf(http: Http, namespace: str) -> None:
    reply = await http.post(
        f"/api/v1/namespaces/{namespace}/configmaps", b"\xa0", content_type="application/cbor"
    )
    assert reply.status == 415, reply.body
    assert reply.body["message"].endswith("application/json, application/yaml, " + PROTOBUF)
