"""Discovery, health, OpenAPI, kubeconfig, and kubectl driving the server end to end."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes_asyncio import client, config

from memop.testing.apiserver.server import ApiServer
from memop.testing.kinds.registry import BUILTIN_KINDS
from memop.testing.wait import wait_for

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle, Http

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")


async def test_version_and_health(http: Http) -> None:
    version = (await http.get("/version")).body
    assert {"major", "minor", "gitVersion", "platform"} <= set(version)
    for path in ("/healthz", "/readyz", "/livez"):
        reply = await http.get(path, accept="text/plain")
        assert reply.status == 200
        assert reply.body == "ok"


async def test_core_and_group_discovery(http: Http) -> None:
    api = (await http.get("/api")).body
    assert api["kind"] == "APIVersions"
    assert api["versions"] == ["v1"]
    groups = {g["name"]: g for g in (await http.get("/apis")).body["groups"]}
    for name in ("apps", "events.k8s.io", "coordination.k8s.io", "apiextensions.k8s.io"):
        assert groups[name]["preferredVersion"]["groupVersion"] == f"{name}/v1"
    core = {r["name"]: r for r in (await http.get("/api/v1")).body["resources"]}
    assert core["pods"]["namespaced"] is True
    assert core["pods"]["kind"] == "Pod"
    assert "po" in core["pods"]["shortNames"]
    assert core["namespaces"]["namespaced"] is False
    assert "ns" in core["namespaces"]["shortNames"]
    assert core["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert "namespaces/finalize" in core
    assert "configmaps/status" not in core
    apps = {r["name"]: r for r in (await http.get("/apis/apps/v1")).body["resources"]}
    assert apps["deployments"]["singularName"] == "deployment"
    assert "all" in apps["deployments"]["categories"]
    assert set(apps["deployments"]["verbs"]) >= {
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    }
    scale = apps["deployments/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    group = (await http.get("/apis/apps")).body
    assert group["kind"] == "APIGroup"
    assert (await http.get("/apis/no.such.group/v1")).status == 404


async def test_the_deployment_scale_subresource(http: Http, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    body = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x:1"}]},
            },
        },
    }
    await http.post(path, body)
    scale = (await http.get(f"{path}/web/scale")).body
    assert scale["spec"] == {"replicas": 1}
    assert scale["status"]["selector"] == "app=web"
    assert (await http.patch(f"{path}/web/scale", {"spec": {"replicas": 3}})).status == 200
    deployment = (await http.get(f"{path}/web")).body
    assert deployment["spec"]["replicas"] == 3
    assert deployment["metadata"]["generation"] == 2
    negative = await http.patch(f"{path}/web/scale", {"spec": {"replicas": -1}})
    assert negative.status == 422


@pytest.mark.fake_only
async def test_openapi_v3_declares_server_side_field_validation(http: Http) -> None:
    root = (await http.get("/openapi/v3")).body
    url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=")
    spec = (await http.get("/openapi/v3/apis/apps/v1")).body
    patch = spec["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "kind": "Deployment",
        "version": "v1",
    }
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}


async def test_the_kubeconfig_works_for_kubernetes_asyncio(tmp_path: Path) -> None:
    async with ApiServer() as server:
        path = tmp_path / "kubeconfig"
        server.write_kubeconfig(path)
        loaded = yaml.safe_load(path.read_text())
        assert loaded["clusters"][0]["cluster"]["server"] == server.url
        assert loaded["current-context"] == "memop-test"
        configuration = client.Configuration()
        await config.load_kube_config(config_file=str(path), client_configuration=configuration)
        async with client.ApiClient(configuration) as api:
            names = [n.metadata.name for n in (await client.CoreV1Api(api).list_namespace()).items]
        assert "default" in names
        async with client.ApiClient(server.client_configuration()) as api:
            version = await client.VersionApi(api).get_code()
        assert version.major == "1"


# --- kubectl --------------------------------------------------------------------------------------------


async def run_kubectl(cluster: ClusterHandle, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """Run kubectl on the cluster: its exit code, stdout and stderr. What kubectl says on stderr
    (warnings such as "deleting cluster-scoped resources, not scoped to the provided namespace")
    is its own wording: tests judge by the exit code and what the cluster holds."""
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(cluster.kubeconfig),
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode() if stdin is not None else None), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def kubectl(cluster: ClusterHandle, *args: str, stdin: str | None = None, check: bool = True) -> str:
    """kubectl's stdout; with ``check`` a non-zero exit fails the test (stderr shown)."""
    code, out, err = await run_kubectl(cluster, *args, stdin=stdin)
    if check and code != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({code}): {err}")
    return out


class Watching:
    """``kubectl get -w`` running in the background, its stdout collected line by line (stderr
    kept apart, in ``errors``)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._reader = asyncio.create_task(self._read())
        self._error_reader = asyncio.create_task(self._read_errors())

    @classmethod
    async def start(cls, cluster: ClusterHandle, *args: str) -> Watching:
        assert KUBECTL is not None
        process = await asyncio.create_subprocess_exec(
            KUBECTL,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "get",
            "-w",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def _read_errors(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.errors.append(line.decode().rstrip("\n"))

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.lines.append(line.decode().rstrip("\n"))

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
        await self.process.wait()
        await self._reader
        await self._error_reader


def widget_crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer", "minimum": 0}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


@needs_kubectl
async def test_kubectl_on_a_crd_and_its_custom_resources(cluster: ClusterHandle, namespace: str) -> None:
    group = f"k{uuid.uuid4().hex[:8]}.memop.test"
    crd = widget_crd(group)
    out = await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(crd))
    assert f"customresourcedefinition.apiextensions.k8s.io/gadgets.{group} created" in out
    try:
        await kubectl(
            cluster, "wait", "--for", "condition=Established", f"crd/gadgets.{group}", "--timeout=30s"
        )
        got = json.loads(await kubectl(cluster, "get", "crd", f"gadgets.{group}", "-o", "json"))
        assert got["status"]["acceptedNames"]["kind"] == "Gadget"

        async def served() -> bool:
            return "gd" in await kubectl(cluster, "api-resources", f"--api-group={group}", check=False)

        await wait_for(served, timeout=30)
        gadget = {
            "apiVersion": f"{group}/v1",
            "kind": "Gadget",
            "metadata": {"name": "g1", "namespace": namespace},
            "spec": {"size": 1},
        }
        # Qualified: a cluster may serve other "gadgets" (another group's CRD, cluster-scoped
        # even), and kubectl would pick one of them for a bare "gadget" or "gd".
        qualified = f"gadgets.{group}"
        watching = await Watching.start(cluster, qualified, "-n", namespace, "-o", "name")
        try:
            out = await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(gadget))
            assert f"gadget.{group}/g1 created" in out
            again = await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(gadget))
            assert f"gadget.{group}/g1 unchanged" in again
            changed = await kubectl(
                cluster, "apply", "-f", "-", stdin=json.dumps({**gadget, "spec": {"size": 2}})
            )
            assert f"gadget.{group}/g1 configured" in changed
            listed = await kubectl(
                cluster, "get", qualified, "-n", namespace, "-o", "jsonpath={.items[*].spec.size}"
            )
            assert listed == "2"
            code, _, _ = await run_kubectl(
                cluster,
                "apply",
                "-f",
                "-",
                stdin=json.dumps(
                    {**gadget, "metadata": {"name": "g2", "namespace": namespace}, "spec": {"size": -1}}
                ),
            )
            assert code != 0  # refused by the schema's minimum
            none = await kubectl(
                cluster, "get", qualified, "g2", "-n", namespace, "--ignore-not-found", "-o", "name"
            )
            assert none == ""
            out = await kubectl(cluster, "delete", qualified, "g1", "-n", namespace)
            assert f'gadget.{group} "g1" deleted' in out
            await wait_for(
                lambda: len(watching.lines) >= 3,
                timeout=30,
                message=lambda: f"kubectl get -w printed {watching.lines}",
            )
        finally:
            await watching.stop()
        assert set(watching.lines) == {f"gadget.{group}/g1"}
    finally:
        await kubectl(
            cluster, "delete", "crd", f"gadgets.{group}", "--wait=true", "--timeout=60s", check=False
        )
    absent = await kubectl(cluster, "get", "crd", f"gadgets.{group}", "--ignore-not-found", "-o", "name")
    assert absent == ""


@needs_kubectl
async def test_kubectl_on_a_deployment(cluster: ClusterHandle, namespace: str) -> None:
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "memcached:1.6"}]},
            },
        },
    }
    watching = await Watching.start(cluster, "deployments", "-n", namespace, "-o", "name")
    try:
        out = await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(manifest))
        assert "deployment.apps/web created" in out
        again = await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(manifest))
        assert "deployment.apps/web unchanged" in again
        scaled = await kubectl(cluster, "scale", "deployment", "web", "-n", namespace, "--replicas=2")
        assert "deployment.apps/web scaled" in scaled
        got = json.loads(await kubectl(cluster, "get", "deploy", "web", "-n", namespace, "-o", "json"))
        assert got["spec"]["replicas"] == 2
        assert got["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
        assert "kubectl.kubernetes.io/last-applied-configuration" in got["metadata"]["annotations"]
        out = await kubectl(cluster, "delete", "-f", "-", stdin=json.dumps(manifest))
        assert 'deployment.apps "web" deleted' in out
        await wait_for(
            lambda: len(watching.lines) >= 3,
            timeout=30,
            message=lambda: f"kubectl get -w printed {watching.lines}",
        )
    finally:
        await watching.stop()
    assert set(watching.lines) == {"deployment.apps/web"}
    names = await kubectl(cluster, "get", "deployments", "-n", namespace, "-o", "name")
    assert names == ""


# --- kubectl on every resource the server serves ----------------------------------------------------


def _certificate_request(name: str) -> str:
    """A PEM certificate signing request for CN ``name``, base64 as a CSR's spec.request holds it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    return base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()


def generic_manifests(namespace: str, name: str, template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A minimal valid object of each built-in resource served generically (memop.testing.kinds.generic)."""
    meta = {"name": name, "namespace": namespace}
    rules = {
        "resourceRules": [
            {
                "apiGroups": ["none.memop.test"],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["x"],
            }
        ]
    }
    octets = hashlib.sha256(name.encode()).digest()  # addresses of its own
    requests = {"requests": [{"name": "r", "exactly": {"deviceClassName": "memop.test"}}]}
    objects: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
        "v1/endpoints": ("Endpoints", meta, {"subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]}),
        "v1/nodes": ("Node", {"name": name}, {}),
        "v1/podtemplates": ("PodTemplate", meta, {"template": template}),
        "v1/replicationcontrollers": (
            "ReplicationController",
            meta,
            {"spec": {"replicas": 0, "selector": {"app": name}, "template": template}},
        ),
        "admissionregistration.k8s.io/v1/mutatingadmissionpolicies": (
            "MutatingAdmissionPolicy",
            {"name": name},
            {
                "spec": {
                    "matchConstraints": rules,
                    "mutations": [
                        {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{}"}}
                    ],
                    "reinvocationPolicy": "Never",
                }
            },
        ),
        "admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings": (
            "MutatingAdmissionPolicyBinding",
            {"name": name},
            {"spec": {"policyName": name}},
        ),
        "admissionregistration.k8s.io/v1/validatingadmissionpolicies": (
            "ValidatingAdmissionPolicy",
            {"name": name},
            {"spec": {"matchConstraints": rules, "validations": [{"expression": "true"}]}},
        ),
        "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings": (
            "ValidatingAdmissionPolicyBinding",
            {"name": name},
            {"spec": {"policyName": name, "validationActions": ["Deny"]}},
        ),
        "apiregistration.k8s.io/v1/apiservices": (
            "APIService",
            {"name": f"v1.{name}.memop.test"},
            {
                "spec": {
                    "group": f"{name}.memop.test",
                    "version": "v1",
                    "groupPriorityMinimum": 1,
                    "versionPriority": 1,
                    "service": {"namespace": namespace, "name": "none", "port": 443},
                    "insecureSkipTLSVerify": True,
                }
            },
        ),
        # kube-apiserver v1.36.2 refuses a revision without data ("data is mandatory") and a
        # class without parameters ("must contain at least one key/value pair").
        "apps/v1/controllerrevisions": ("ControllerRevision", meta, {"revision": 1, "data": {"k": "v"}}),
        "certificates.k8s.io/v1/certificatesigningrequests": (
            "CertificateSigningRequest",
            {"name": name},
            {
                "spec": {
                    "request": _certificate_request(name),
                    "signerName": "memop.test/none",
                    "usages": ["digital signature"],
                }
            },
        ),
        "discovery.k8s.io/v1/endpointslices": (
            "EndpointSlice",
            meta,
            # conditions as the typed object has it (a struct, never omitted): the atomic list
            # is then the same on the server, so a second apply changes nothing.
            {"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {}}]},
        ),
        "flowcontrol.apiserver.k8s.io/v1/flowschemas": (
            "FlowSchema",
            {"name": name},
            {"spec": {"priorityLevelConfiguration": {"name": name}, "matchingPrecedence": 9000}},
        ),
        "flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations": (
            "PriorityLevelConfiguration",
            {"name": name},
            {
                "spec": {
                    "type": "Limited",
                    "limited": {"nominalConcurrencyShares": 1, "limitResponse": {"type": "Reject"}},
                }
            },
        ),
        "networking.k8s.io/v1/ipaddresses": (
            "IPAddress",
            {"name": f"10.{octets[0]}.{octets[1]}.7"},
            {
                "spec": {
                    "parentRef": {"group": "", "resource": "services", "name": name, "namespace": namespace}
                }
            },
        ),
        "networking.k8s.io/v1/servicecidrs": (
            "ServiceCIDR",
            {"name": name},
            {"spec": {"cidrs": [f"172.{16 + octets[0] % 16}.{octets[1]}.0/24"]}},
        ),
        "node.k8s.io/v1/runtimeclasses": ("RuntimeClass", {"name": name}, {"handler": "runc"}),
        "resource.k8s.io/v1/deviceclasses": ("DeviceClass", {"name": name}, {"spec": {}}),
        "resource.k8s.io/v1/resourceclaims": ("ResourceClaim", meta, {"spec": {"devices": requests}}),
        "resource.k8s.io/v1/resourceclaimtemplates": (
            "ResourceClaimTemplate",
            meta,
            {"spec": {"spec": {"devices": requests}}},
        ),
        "resource.k8s.io/v1/resourceslices": (
            "ResourceSlice",
            {"name": name},
            {
                "spec": {
                    "driver": "memop.test",
                    "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                    "allNodes": True,
                }
            },
        ),
        "storage.k8s.io/v1/csidrivers": ("CSIDriver", {"name": f"{name}.memop.test"}, {"spec": {}}),
        "storage.k8s.io/v1/csinodes": (
            "CSINode",
            {"name": name},
            {"spec": {"drivers": [{"name": "memop.test", "nodeID": "n1"}]}},
        ),
        "storage.k8s.io/v1/csistoragecapacities": (
            "CSIStorageCapacity",
            meta,
            {"storageClassName": "standard"},
        ),
        "storage.k8s.io/v1/storageclasses": (
            "StorageClass",
            {"name": name},
            {"provisioner": "memop.test/none"},
        ),
        "storage.k8s.io/v1/volumeattachments": (
            "VolumeAttachment",
            {"name": name},
            {"spec": {"attacher": "memop.test", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}},
        ),
        "storage.k8s.io/v1/volumeattributesclasses": (
            "VolumeAttributesClass",
            {"name": name},
            {"driverName": "memop.test", "parameters": {"k": "v"}},
        ),
    }
    return {
        key: {"apiVersion": key.rsplit("/", 1)[0], "kind": kind, "metadata": dict(metadata), **body}
        for key, (kind, metadata, body) in objects.items()
    }


def served_manifest(key: str, namespace: str, name: str) -> dict[str, Any]:
    """A minimal valid object of each built-in resource, keyed ``groupVersion/resource``."""
    meta = {"name": name, "namespace": namespace}
    template = {
        "metadata": {"labels": {"app": name}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
        },
    }
    manifests: dict[str, dict[str, Any]] = {
        "v1/configmaps": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}},
        "v1/secrets": {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": {"k": "dg=="}},
        "v1/events": {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": meta,
            "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": namespace},
            "reason": "Tested",
            "message": "kubectl applied this",
            "type": "Normal",
        },
        "v1/namespaces": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        "v1/pods": {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]},
        "apps/v1/deployments": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}}, "template": template},
        },
        "apps/v1/replicasets": {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": meta,
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}}, "template": template},
        },
        "coordination.k8s.io/v1/leases": {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {"holderIdentity": "memop-test", "leaseDurationSeconds": 15},
        },
        "events.k8s.io/v1/events": {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": meta,
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "reportingController": "memop.test/kubectl",
            "reportingInstance": "memop-test-0",
            "action": "Test",
            "reason": "Tested",
            "regarding": {"kind": "ConfigMap", "name": "x", "namespace": namespace},
            "note": "kubectl applied this",
            "type": "Normal",
        },
    }
    rbac = "rbac.authorization.k8s.io/v1"
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    subjects = [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}]
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
    manifests.update(
        {
            "v1/serviceaccounts": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
            "v1/services": {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": meta,
                "spec": {"selector": {"app": name}, "ports": [{"port": 80}]},
            },
            f"{rbac}/roles": {"apiVersion": rbac, "kind": "Role", "metadata": meta, "rules": rules},
            f"{rbac}/rolebindings": {
                "apiVersion": rbac,
                "kind": "RoleBinding",
                "metadata": meta,
                "roleRef": role_ref,
                "subjects": subjects,
            },
            f"{rbac}/clusterroles": {
                "apiVersion": rbac,
                "kind": "ClusterRole",
                "metadata": {"name": name},
                "rules": rules,
            },
            f"{rbac}/clusterrolebindings": {
                "apiVersion": rbac,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": role_ref,
                "subjects": subjects,
            },
            "networking.k8s.io/v1/ingresses": {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": meta,
                "spec": {"defaultBackend": {"service": {"name": name, "port": {"number": 80}}}},
            },
            "networking.k8s.io/v1/ingressclasses": {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "IngressClass",
                "metadata": {"name": name},
                "spec": {"controller": "memop.test/ingress"},
            },
            "networking.k8s.io/v1/networkpolicies": {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": meta,
                "spec": {"podSelector": {"matchLabels": {"app": name}}, "policyTypes": ["Ingress"]},
            },
            "apps/v1/statefulsets": {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": meta,
                "spec": {
                    "replicas": 0,
                    "serviceName": name,
                    "selector": {"matchLabels": {"app": name}},
                    "template": template,
                },
            },
            "apps/v1/daemonsets": {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": meta,
                "spec": {"selector": {"matchLabels": {"app": name}}, "template": template},
            },
            "batch/v1/jobs": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": meta,
                "spec": {
                    "suspend": True,
                    "template": {**template, "spec": {**template["spec"], "restartPolicy": "Never"}},
                },
            },
            "batch/v1/cronjobs": {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": meta,
                "spec": {
                    "schedule": "*/5 * * * *",
                    "suspend": True,
                    "jobTemplate": {
                        "spec": {
                            "template": {
                                **template,
                                "spec": {**template["spec"], "restartPolicy": "OnFailure"},
                            }
                        }
                    },
                },
            },
            "v1/persistentvolumeclaims": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": meta,
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            },
            "v1/persistentvolumes": {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "hostPath": {"path": f"/tmp/{name}"},
                },
            },
            "v1/resourcequotas": {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": meta,
                "spec": {"hard": {"pods": "10", "requests.cpu": "2"}},
            },
            "v1/limitranges": {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": meta,
                "spec": {
                    "limits": [
                        {"type": "Container", "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "500m"}}
                    ]
                },
            },
            "autoscaling/v2/horizontalpodautoscalers": {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": meta,
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                    "maxReplicas": 3,
                },
            },
            "scheduling.k8s.io/v1/priorityclasses": {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": 1000,
            },
            "policy/v1/poddisruptionbudgets": {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": meta,
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}},
            },
        }
    )
    # A webhook whose rules match nothing served, so that no request calls it.
    hook = {
        "name": "nothing.memop.test",
        "clientConfig": {"url": "https://127.0.0.1:1/never"},
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": ["none.memop.test"],
                "apiVersions": ["v1"],
                "resources": ["x"],
                "scope": "*",  # as defaulted: a list without merge key differing would be patched
            }
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        manifests[f"admissionregistration.k8s.io/v1/{kind.lower()}s"] = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "webhooks": [hook],
        }
    manifests.update(generic_manifests(namespace, name, template))
    if key == "apiextensions.k8s.io/v1/customresourcedefinitions":
        crd = widget_crd(f"{name}.memop.test")
        crd["metadata"]["name"] = f"gadgets.{name}.memop.test"
        return crd
    return manifests[key]


# Every resource the in-memory server has built in (CustomResourceDefinitions among them); each
# needs a manifest above, so a kind added to the server is driven by kubectl here too.
# Kinds whose protection finalizer (added by an admission plugin) only a controller removes.
PROTECTED = ("v1/persistentvolumeclaims", "v1/persistentvolumes")
SERVED = tuple(f"{rtype.api_version}/{rtype.plural}" for rtype in (kind.rtype for kind in BUILTIN_KINDS))


async def test_the_kubectl_tests_cover_every_served_resource(http: Http, cluster: ClusterHandle) -> None:
    served = set()
    group_versions = ["v1"] + [
        v["groupVersion"] for g in (await http.get("/apis")).body["groups"] for v in g["versions"]
    ]
    for group_version in group_versions:
        prefix = "/api/" if group_version == "v1" else "/apis/"
        for resource in (await http.get(prefix + group_version)).body["resources"]:
            if "/" not in resource["name"] and "watch" in resource["verbs"]:
                served.add(f"{group_version}/{resource['name']}")
    if cluster.real:
        assert set(SERVED) <= served
    else:
        assert served == set(SERVED)
    for key in SERVED:  # a kind without a manifest fails here, not with a KeyError in the kubectl test
        assert served_manifest(key, "ns", "name")["metadata"]["name"], key


# Generic kinds whose items kube-apiserver v1.36.2 defaults inside lists or drops empty
# (omitempty) where the in-memory server, which does not model their defaulting, keeps them
# as given: a rule's scope "*", a device request's allocationMode and count, an IPAddress
# parentRef's empty group. kubectl (older than these types) then sends the list again, a patch
# that changes nothing, and says "configured".
DEFAULTED_IN_LISTS = frozenset(
    (
        "admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
        "admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        "networking.k8s.io/v1/ipaddresses",
        "resource.k8s.io/v1/resourceclaims",
        "resource.k8s.io/v1/resourceclaimtemplates",
    )
)


@needs_kubectl
@pytest.mark.parametrize("key", SERVED)
async def test_kubectl_apply_get_watch_delete_every_served_resource(
    cluster: ClusterHandle, namespace: str, key: str
) -> None:
    name = f"k{uuid.uuid4().hex[:8]}"
    manifest = served_manifest(key, namespace, name)
    *group_version, resource = key.split("/")
    group = group_version[0] if len(group_version) == 2 else ""
    qualified = f"{resource}.{group_version[-1]}.{group}" if group else resource
    name = manifest["metadata"]["name"]
    ns = ["-n", namespace]

    out = await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(manifest))
    assert out.rstrip().endswith(f"/{name} created"), out
    first = json.loads(await kubectl(cluster, "get", qualified, name, *ns, "-o", "json"))
    again = await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(manifest))
    # A PodDisruptionBudget's selector has patchStrategy "replace", so kubectl's patch is never
    # empty and it says "configured" against a real cluster too; the patch changes nothing.
    same = "configured" if key == "policy/v1/poddisruptionbudgets" else "unchanged"
    if cluster.real and key in DEFAULTED_IN_LISTS:
        same = "configured"
    assert again.rstrip().endswith(f"/{name} {same}"), again
    got = json.loads(await kubectl(cluster, "get", qualified, name, *ns, "-o", "json"))
    if not cluster.real:  # on a real cluster controllers and kubelets write status meanwhile
        assert got["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert got["metadata"].get("generation") == first["metadata"].get("generation")
    assert got["kind"] == manifest["kind"]
    assert got["apiVersion"] == manifest["apiVersion"]
    assert got["metadata"]["name"] == name
    assert got["metadata"]["uid"]
    listed = await kubectl(cluster, "get", qualified, *ns, "-o", "name")
    assert any(line.endswith(f"/{name}") for line in listed.splitlines()), listed

    watching = await Watching.start(cluster, qualified, *ns, "-o", "name")

    def seen() -> list[str]:
        return [line for line in watching.lines if line.endswith(f"/{name}")]

    try:
        await wait_for(lambda: len(seen()) >= 1, timeout=30, message=lambda: f"get -w: {watching.lines}")
        labelled = await kubectl(cluster, "label", qualified, name, *ns, "memop.test/seen=yes")
        assert labelled.rstrip().endswith(f"/{name} labeled"), labelled
        await wait_for(lambda: len(seen()) >= 2, timeout=30, message=lambda: f"get -w: {watching.lines}")
        deleted = await kubectl(cluster, "delete", qualified, name, *ns, "--wait=false")
        assert f'"{name}" deleted' in deleted, deleted
        await wait_for(lambda: len(seen()) >= 3, timeout=30, message=lambda: f"get -w: {watching.lines}")
    finally:
        await watching.stop()

    async def deleted_or_terminating() -> bool:
        out = await kubectl(
            cluster, "get", qualified, name, *ns, "--ignore-not-found", "-o", "jsonpath={.metadata.name}"
        )
        if out == "":
            return True
        # Without a namespace controller (the fake by default) a namespace stays Terminating. It
        # may also be gone by now (a real cluster finishes a CRD's deletion between the two gets).
        phase = await kubectl(
            cluster, "get", qualified, name, "--ignore-not-found", "-o", "jsonpath={.status.phase}"
        )
        if key in PROTECTED:  # without the protection controllers their finalizer stays
            deleting = await kubectl(
                cluster, "get", qualified, name, *ns, "--ignore-not-found", "-o",
                "jsonpath={.metadata.deletionTimestamp}",
            )  # fmt: skip
            return deleting != ""
        return phase == "" or (key == "v1/namespaces" and phase == "Terminating")

    await wait_for(deleted_or_terminating, timeout=60)
