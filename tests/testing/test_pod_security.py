"""Pod Security admission in the in-memory API server, over HTTP, as kube-apiserver v1.36 applies it
(``k8s.io/pod-security-admission``: its checks' wording, their order, the modes and versions).

The refusal the first test pins is the one a v1.36.2 node gave memop's PodSet pods in a
namespace enforcing ``restricted``; the other texts follow the Go source of the checks
(``policy/check_*.go``) and of ``admission/admission.go``. Every test labels its own namespace,
so they run on a real cluster too (USE_EXISTING_CLUSTER=true).
"""

from __future__ import annotations

import copy
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from memop.mypod import api as mypod_api
from memop.mypod import desired as mypod_desired
from memop.podset import api as podset_api
from memop.podset import desired as podset_desired
from memop.testing.apiserver.errors import ApiError
from memop.testing.apiserver.podsecurity import evaluator
from memop.testing.apiserver.podsecurity.policy import policy_to_evaluate
from memop.testing.apiserver.resources import NAMESPACES
from memop.testing.apiserver.store import Store
from memop.testing.kinds import builtins
from tests.testing.test_webhooks_admission import _configure, certificates, configured, webhook  # noqa: F401
from tests.testing.webhooks import Webhook, allowed, json_patch

if TYPE_CHECKING:
    from tests.conftest import Http

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
PREFIX = "pod-security.kubernetes.io/"
# What kube-apiserver v1.36.2 answered for the PodSet sample's pods under restricted (the node).
NODE_REFUSAL = (
    'pods "podset-web-pod-shn9w" is forbidden: violates PodSecurity "restricted:latest": '
    'allowPrivilegeEscalation != false (container "nginx" must set '
    "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "
    '"nginx" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or '
    'container "nginx" must set securityContext.runAsNonRoot=true), seccompProfile (pod or '
    'container "nginx" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
)
_WARNING = re.compile(r'299 - "((?:[^"\\]|\\.)*)"')


def pods(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def pod(name: str = "podset-web-pod-shn9w", **spec: Any) -> dict[str, Any]:
    """The PodSet sample's pod: one nginx container, no securityContext."""
    container = {
        "name": "nginx",
        "image": "nginx:1.27-alpine",
        "ports": [{"containerPort": 80, "name": "http"}],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [container], **spec},
    }


def restricted_pod(name: str = "compliant") -> dict[str, Any]:
    """A pod that meets the restricted level."""
    body = pod(name, securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}})
    body["spec"]["containers"][0]["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    return body


async def send(
    http: Http, method: str, path: str, body: Any, content_type: str = "application/json", **query: str
) -> tuple[int, Any, list[str]]:
    """Status, decoded body and every warning (the texts of the Warning headers) of a request."""
    response = await http._send(method, path, body=body, content_type=content_type, query=query)
    try:
        decoded = await response.json(content_type=None)
        headers = response.headers.getall("Warning", [])
    finally:
        response.release()
    texts = []
    for header in headers:
        match = _WARNING.fullmatch(header)
        assert match is not None, header
        texts.append(re.sub(r"\\(.)", r"\1", match.group(1)))
    return response.status, decoded, texts


async def label(http: Http, namespace: str, labels: dict[str, str | None]) -> list[str]:
    """Set (None: remove) labels of ``namespace``; the warnings of the update."""
    status, body, warnings = await send(
        http,
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        {"metadata": {"labels": labels}},
        "application/merge-patch+json",
    )
    assert status == 200, body
    return warnings


def enforce(level: str, version: str = "latest") -> dict[str, str | None]:
    return {PREFIX + "enforce": level, PREFIX + "enforce-version": version}


def refusal(name: str, policy: str, detail: str) -> str:
    return f'pods "{name}" is forbidden: violates PodSecurity "{policy}": {detail}'


# --- pods -----------------------------------------------------------------------------------------


def _skip_where_privileged_is_disallowed(status: int, reply: Any) -> None:
    """A real kube-apiserver started without ``--allow-privileged=true`` (kubeadm sets it)
    refuses a privileged container in validation (422), before Pod Security admission runs."""
    message = reply.get("message", "") if isinstance(reply, dict) else ""
    if status == 422 and "disallowed by cluster policy" in message:
        pytest.skip("the cluster's kube-apiserver runs without --allow-privileged=true")


async def test_a_pod_violating_restricted_is_refused_as_on_the_node(http: Http, namespace: str) -> None:
    await label(http, namespace, enforce("restricted"))
    status, body, warnings = await send(http, "POST", pods(namespace), pod())
    assert status == 403, body
    assert body["reason"] == "Forbidden"
    assert body["message"] == NODE_REFUSAL
    assert body["details"] == {"name": "podset-web-pod-shn9w", "kind": "pods"}
    assert warnings == []  # a refused request is not warned about as well
    # A dry run is evaluated all the same, and nothing was stored.
    status, body, _ = await send(http, "POST", pods(namespace), pod(), dryRun="All")
    assert (status, body["message"]) == (403, NODE_REFUSAL)
    assert (await http.get(pods(namespace, "podset-web-pod-shn9w"))).status == 404


@pytest.mark.parametrize(
    "labels", [{}, enforce("baseline"), enforce("privileged")], ids=["unlabelled", "baseline", "privileged"]
)
async def test_the_same_pod_is_admitted_without_restricted(
    http: Http, namespace: str, labels: dict[str, str | None]
) -> None:
    if labels:
        await label(http, namespace, labels)
    status, body, warnings = await send(http, "POST", pods(namespace), pod())
    assert status == 201, body
    assert warnings == []


async def test_a_restricted_pod_is_admitted_under_restricted(http: Http, namespace: str) -> None:
    await label(http, namespace, {**enforce("restricted"), PREFIX + "warn": "restricted"})
    status, body, warnings = await send(http, "POST", pods(namespace), restricted_pod())
    assert status == 201, body
    assert warnings == []
    # Per container instead of for the pod: allowed too.
    body = restricted_pod("per-container")
    del body["spec"]["securityContext"]
    body["spec"]["containers"][0]["securityContext"].update(
        runAsNonRoot=True, seccompProfile={"type": "Localhost", "localhostProfile": "p.json"}
    )
    status, reply, _ = await send(http, "POST", pods(namespace), body)
    assert status == 201, reply


async def test_the_warn_level_warns_and_admits(http: Http, namespace: str) -> None:
    await label(http, namespace, {PREFIX + "warn": "restricted", PREFIX + "warn-version": "v1.36"})
    status, body, warnings = await send(http, "POST", pods(namespace), pod("warned"))
    assert status == 201, body
    assert warnings == [
        NODE_REFUSAL.replace('pods "podset-web-pod-shn9w" is forbidden: violates', "would violate").replace(
            "restricted:latest", "restricted:v1.36"
        )
    ]


async def test_a_baseline_violation_is_refused_under_baseline(http: Http, namespace: str) -> None:
    await label(http, namespace, enforce("baseline"))
    body = pod("privileged", hostNetwork=True)
    body["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    status, reply, _ = await send(http, "POST", pods(namespace), body)
    _skip_where_privileged_is_disallowed(status, reply)
    assert status == 403, reply
    assert reply["message"] == refusal(
        "privileged",
        "baseline:latest",
        # The hostPort: defaulted from the containerPort, as for every hostNetwork pod.
        'host namespaces (hostNetwork=true), hostPort (container "nginx" uses hostPort 80), '
        'privileged (container "nginx" must not set securityContext.privileged=true)',
    )


async def test_pods_created_before_the_label_keep_their_metadata_updates(http: Http, namespace: str) -> None:
    status, body, _ = await send(http, "POST", pods(namespace), pod("early"))
    assert status == 201, body
    await send(http, "POST", pods(namespace), pod("early-2"))
    await send(http, "POST", pods(namespace), restricted_pod("early-ok"))
    warnings = await label(http, namespace, enforce("restricted"))
    assert warnings == [
        f'existing pods in namespace "{namespace}" violate the new PodSecurity enforce level '
        '"restricted:latest"',
        "early (and 1 other pod): allowPrivilegeEscalation != false, unrestricted capabilities, "
        "runAsNonRoot != true, seccompProfile",
    ]
    # The same enforce level again, or a laxer one, checks nothing.
    assert await label(http, namespace, {PREFIX + "audit": "baseline"}) == []
    assert await label(http, namespace, enforce("baseline")) == []
    assert len(await label(http, namespace, enforce("restricted"))) == 2
    patch = {"metadata": {"labels": {"touched": "yes"}}}
    status, body, warnings = await send(
        http, "PATCH", pods(namespace, "early"), patch, "application/merge-patch+json"
    )
    assert status == 200, body
    assert (body["metadata"]["labels"]["touched"], warnings) == ("yes", [])
    # Changing an image is evaluated.
    image = [{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.28-alpine"}]
    status, body, _ = await send(
        http, "PATCH", pods(namespace, "early"), image, "application/json-patch+json"
    )
    assert status == 403, body
    assert body["message"] == NODE_REFUSAL.replace("podset-web-pod-shn9w", "early")


# --- workloads ------------------------------------------------------------------------------------


def deployment(name: str) -> dict[str, Any]:
    template = pod()
    template["metadata"] = {"labels": {"app": "web"}}
    del template["apiVersion"], template["kind"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": template},
    }


async def test_a_workload_template_is_warned_about_at_the_enforce_level_and_created(
    http: Http, namespace: str
) -> None:
    await label(http, namespace, enforce("restricted"))
    warned = NODE_REFUSAL.replace('pods "podset-web-pod-shn9w" is forbidden: violates', "would violate")
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    status, body, warnings = await send(http, "POST", path, deployment("web"))
    assert status == 201, body
    assert warnings == [warned]
    # The other pod controllers, and updates, alike; a status write is not checked.
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"}, "spec": {"template": pod()}}
    del job["spec"]["template"]["apiVersion"], job["spec"]["template"]["kind"]
    job["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    job["spec"]["template"]["metadata"] = {}
    status, body, warnings = await send(http, "POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    assert (status, warnings) == (201, [warned]), body
    scale = {"spec": {"replicas": 1}}
    status, body, warnings = await send(http, "PATCH", f"{path}/web", scale, "application/merge-patch+json")
    assert (status, warnings) == (200, [warned]), body
    status, body, warnings = await send(
        http, "PATCH", f"{path}/web/status", {"status": {"replicas": 0}}, "application/merge-patch+json"
    )
    assert (status, warnings) == (200, []), body


async def test_a_workload_in_an_unlabelled_namespace_is_not_warned_about(http: Http, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    status, body, warnings = await send(http, "POST", path, deployment("web"))
    assert (status, warnings) == (201, []), body


# --- every check ----------------------------------------------------------------------------------


def _with(
    body: dict[str, Any],
    *,
    pod_sc: dict[str, Any] | None = None,
    sc: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body = copy.deepcopy(body)
    if pod_sc is not None:
        body["spec"].setdefault("securityContext", {}).update(pod_sc)
    if sc is not None:
        body["spec"]["containers"][0].setdefault("securityContext", {}).update(sc)
    body["spec"].update(spec)
    return body


BASELINE_CASES = [
    (
        "appArmorProfile",
        _with(pod(), sc={"appArmorProfile": {"type": "Unconfined"}}),
        'forbidden AppArmor profile (container "nginx" must not set AppArmor profile type to "Unconfined")',
    ),
    (
        "capabilities_baseline",
        _with(pod(), sc={"capabilities": {"add": ["SYS_TIME", "NET_ADMIN", "CHOWN"]}}),
        'non-default capabilities (container "nginx" must not include "NET_ADMIN", "SYS_TIME" in '
        "securityContext.capabilities.add)",
    ),
    (
        "hostNamespaces",
        _with(pod(), hostPID=True, hostIPC=True),
        "host namespaces (hostPID=true, hostIPC=true)",
    ),
    (
        "hostPathVolumes",
        _with(pod(), volumes=[{"name": "host", "hostPath": {"path": "/etc"}}]),
        'hostPath volumes (volume "host")',
    ),
    (
        "hostPorts",
        _with(
            pod(),
            containers=[
                {"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80, "hostPort": 8080}]}
            ],
        ),
        'hostPort (container "nginx" uses hostPort 8080)',
    ),
    (
        "hostProbesAndHostLifecycle",
        _with(
            pod(),
            containers=[
                {
                    "name": "nginx",
                    "image": "nginx",
                    "livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}},
                    "lifecycle": {"preStop": {"httpGet": {"host": "10.0.0.2", "port": 80}}},
                }
            ],
        ),
        'probe or lifecycle host (container "nginx" uses probe or lifecycle hosts "10.0.0.1", "10.0.0.2")',
    ),
    (
        "privileged",
        _with(pod(), sc={"privileged": True}),
        'privileged (container "nginx" must not set securityContext.privileged=true)',
    ),
    (
        "seLinuxOptions",
        _with(pod(), pod_sc={"seLinuxOptions": {"type": "spc_t", "user": "root"}}),
        'seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "spc_t"; '
        "user may not be set)",
    ),
    (
        "seccompProfile_baseline",
        _with(pod(), pod_sc={"seccompProfile": {"type": "Unconfined"}}),
        'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")',
    ),
    (
        "sysctls",
        _with(
            pod(),
            pod_sc={
                "sysctls": [
                    {"name": "kernel.msgmax", "value": "65536"},
                    {"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"},
                ]
            },
        ),
        "forbidden sysctls (kernel.msgmax)",
    ),
    (
        "windowsHostProcess",
        _with(pod(), pod_sc={"windowsOptions": {"hostProcess": True}}, hostNetwork=True),
        # With hostNetwork the API server defaults each port's hostPort to its containerPort.
        'host namespaces (hostNetwork=true), hostPort (container "nginx" uses hostPort 80), '
        "hostProcess (pod must not set securityContext.windowsOptions.hostProcess=true)",
    ),
]

RESTRICTED_CASES = [
    (
        "allowPrivilegeEscalation",
        _with(restricted_pod(), sc={"allowPrivilegeEscalation": True}),
        'allowPrivilegeEscalation != false (container "nginx" must set '
        "securityContext.allowPrivilegeEscalation=false)",
    ),
    (
        "capabilities_restricted",
        _with(
            restricted_pod(),
            sc={"capabilities": {"add": ["NET_RAW", "NET_BIND_SERVICE"], "drop": ["NET_RAW"]}},
        ),
        'unrestricted capabilities (container "nginx" must set securityContext.capabilities.drop=["ALL"]; '
        'container "nginx" must not include "NET_RAW" in securityContext.capabilities.add)',
    ),
    (
        "procMount_restricted",
        _with(restricted_pod(), sc={"procMount": "Unmasked"}, hostUsers=False),
        'procMount (container "nginx" must not set securityContext.procMount to "Unmasked")',
    ),
    (
        "restrictedVolumes",
        _with(
            restricted_pod(),
            volumes=[
                {"name": "data", "nfs": {"server": "nfs.example", "path": "/data"}},
                {"name": "host", "hostPath": {"path": "/etc"}},
                {"name": "scratch", "emptyDir": {}},
            ],
        ),
        'restricted volume types (volumes "data", "host" use restricted volume types "hostPath", "nfs")',
    ),
    (
        "runAsNonRoot",
        _with(restricted_pod(), sc={"runAsNonRoot": False}),
        'runAsNonRoot != true (container "nginx" must not set securityContext.runAsNonRoot=false)',
    ),
    (
        "runAsUser",
        _with(restricted_pod(), pod_sc={"runAsUser": 0}),
        "runAsUser=0 (pod must not set runAsUser=0)",
    ),
    (
        "seccompProfile_restricted",
        _with(restricted_pod(), pod_sc={"seccompProfile": None}),
        'seccompProfile (pod or container "nginx" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")',
    ),
]


@pytest.mark.parametrize(
    ("level", "body", "detail"),
    [("baseline", body, detail) for _, body, detail in BASELINE_CASES]
    + [("restricted", body, detail) for _, body, detail in RESTRICTED_CASES],
    ids=[f"baseline-{case}" for case, _, _ in BASELINE_CASES]
    + [f"restricted-{case}" for case, _, _ in RESTRICTED_CASES],
)
async def test_each_check_refuses_with_its_reason_and_detail(
    http: Http, namespace: str, level: str, body: dict[str, Any], detail: str
) -> None:
    await label(http, namespace, enforce(level))
    status, reply, _ = await send(http, "POST", pods(namespace), body)
    _skip_where_privileged_is_disallowed(status, reply)
    assert status == 403, reply
    assert reply["message"] == refusal(body["metadata"]["name"], f"{level}:latest", detail)
    if level == "baseline":
        # The restricted level runs the baseline checks too, after the ones it overrides.
        await label(http, namespace, {PREFIX + "enforce": "privileged", PREFIX + "warn": "restricted"})
        status, reply, warnings = await send(http, "POST", pods(namespace), body)
        assert status == 201, reply
        assert len(warnings) == 1
        assert warnings[0].startswith('would violate PodSecurity "restricted:latest": ')


@pytest.mark.parametrize(
    ("version", "body", "refused"),
    [
        # runAsUser=0 is refused from v1.23 on.
        ("v1.22", _with(restricted_pod(), pod_sc={"runAsUser": 0}), False),
        ("v1.23", _with(restricted_pod(), pod_sc={"runAsUser": 0}), True),
        # From v1.35 a pod in a user namespace may set runAsUser=0 and unmask /proc under baseline.
        ("v1.34", _with(restricted_pod(), pod_sc={"runAsUser": 0}, hostUsers=False), True),
        ("v1.35", _with(restricted_pod(), pod_sc={"runAsUser": 0}, hostUsers=False), False),
        ("v1.99", _with(restricted_pod(), pod_sc={"runAsUser": 0}, hostUsers=False), False),
    ],
)
async def test_a_version_label_picks_the_checks_of_that_version(
    http: Http, namespace: str, version: str, body: dict[str, Any], refused: bool
) -> None:
    await label(http, namespace, enforce("restricted", version))
    status, reply, _ = await send(http, "POST", pods(namespace), body)
    if refused:
        assert status == 403, reply
        assert reply["message"] == refusal(
            "compliant", f"restricted:{version}", "runAsUser=0 (pod must not set runAsUser=0)"
        )
    else:
        assert status == 201, reply


async def test_baseline_procmount_relaxes_for_user_namespaces_from_v1_35(http: Http, namespace: str) -> None:
    body = _with(pod(), sc={"procMount": "Unmasked"}, hostUsers=False)
    await label(http, namespace, enforce("baseline", "v1.34"))
    status, reply, _ = await send(http, "POST", pods(namespace), body)
    assert (status, reply["message"]) == (
        403,
        refusal(
            "podset-web-pod-shn9w",
            "baseline:v1.34",
            'procMount (container "nginx" must not set securityContext.procMount to "Unmasked")',
        ),
    )
    await label(http, namespace, enforce("baseline", "latest"))
    status, reply, _ = await send(http, "POST", pods(namespace), body)
    assert status == 201, reply


# --- namespace labels -----------------------------------------------------------------------------


async def test_invalid_labels_are_refused_on_create_and_when_changed(http: Http, namespace: str) -> None:
    name = f"memop-psa-{uuid.uuid4().hex[:8]}"
    body = {"metadata": {"name": name, "labels": {PREFIX + "enforce": "strict"}}}
    status, reply, _ = await send(http, "POST", "/api/v1/namespaces", body)
    assert status == 422, reply
    assert reply["message"] == (
        f'Namespace "{name}" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: '
        'Invalid value: "strict": must be one of privileged, baseline, restricted'
    )
    status, reply, _ = await send(
        http,
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        {"metadata": {"labels": {PREFIX + "warn-version": "1.30"}}},
        "application/merge-patch+json",
    )
    assert status == 422, reply
    assert reply["message"] == (
        f'Namespace "{namespace}" is invalid: metadata.labels[pod-security.kubernetes.io/warn-version]: '
        'Invalid value: "1.30": must be "latest" or "v1.x"'
    )


# --- memop's own install --------------------------------------------------------------------------


def _namespace_labels(*files: str) -> dict[str, str | None]:
    """The labels of memop's Namespace as kustomize renders it: manager/namespace.yaml's, with
    each later patch's merged over them."""
    labels: dict[str, str | None] = {}
    for file in files:
        labels.update(yaml.safe_load((MANIFESTS / file).read_text())["metadata"]["labels"])
    return labels


def _podset_pod(namespace: str) -> dict[str, Any]:
    podset = yaml.safe_load((MANIFESTS / "samples" / "batch_v1_podset_template.yaml").read_text())
    podset["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()))
    return podset_desired.desired_pod(podset, podset_api.parse_spec(podset))


def _mypod_pod(namespace: str) -> dict[str, Any]:
    mypod = yaml.safe_load((MANIFESTS / "samples" / "harryyann.github.io_v1_mypod.yaml").read_text())
    mypod["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()))
    return mypod_desired.desired_pod(mypod, mypod_api.parse_spec(mypod))


def _restricted_detail(container: str) -> str:
    quoted = f'container "{container}"'
    return (
        f"allowPrivilegeEscalation != false ({quoted} must set "
        "securityContext.allowPrivilegeEscalation=false), "
        f'unrestricted capabilities ({quoted} must set securityContext.capabilities.drop=["ALL"]), '
        f"runAsNonRoot != true (pod or {quoted} must set securityContext.runAsNonRoot=true), "
        f'seccompProfile (pod or {quoted} must set securityContext.seccompProfile.type to "RuntimeDefault" '
        'or "Localhost")'
    )


@pytest.mark.parametrize(
    ("make", "container"), [(_podset_pod, "nginx"), (_mypod_pod, "main")], ids=["podset", "mypod"]
)
async def test_the_samples_pods_run_in_the_namespaced_install_and_not_under_restricted(
    http: Http, namespace: str, make: Any, container: str
) -> None:
    """manifests/namespaced enforces baseline and warns restricted, so the pods memop makes for
    the samples run there, warned; manifests/default's namespace enforces restricted: refused
    (what the node found)."""
    namespaced = _namespace_labels("manager/namespace.yaml", "namespaced/pod_security.yaml")
    assert namespaced[PREFIX + "enforce"] == "baseline"
    await label(http, namespace, namespaced)
    status, body, warnings = await send(http, "POST", pods(namespace), make(namespace))
    assert status == 201, body
    assert warnings == [f'would violate PodSecurity "restricted:latest": {_restricted_detail(container)}']

    default = _namespace_labels("manager/namespace.yaml")
    assert default[PREFIX + "enforce"] == "restricted"
    await label(http, namespace, {key: default.get(key) for key in namespaced})
    status, body, _ = await send(http, "POST", pods(namespace), make(namespace))
    assert status == 403, body
    name = body["details"]["name"]
    assert body["message"] == refusal(name, "restricted:latest", _restricted_detail(container))


# --- admission order ------------------------------------------------------------------------------


async def test_mutation_comes_first_and_a_refused_pod_reaches_no_validating_webhook(
    http: Http,
    namespace: str,
    webhook: Webhook,  # noqa: F811 (the fixture imported above)
    configured: list[str],  # noqa: F811
) -> None:
    """PodSecurity runs after the mutating webhooks and before the validating ones."""

    def restrict(review: dict[str, Any]) -> dict[str, Any]:
        if review["request"]["object"]["metadata"].get("labels", {}).get("restrict") != "yes":
            return allowed(review)
        return json_patch(
            review,
            [
                {"op": "add", "path": "/spec/securityContext/runAsNonRoot", "value": True},
                {
                    "op": "add",
                    "path": "/spec/securityContext/seccompProfile",
                    "value": {"type": "RuntimeDefault"},
                },
                {
                    "op": "add",
                    "path": "/spec/containers/0/securityContext",
                    "value": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                },
            ],
        )

    webhook.handlers["/mutate"] = restrict
    webhook.handlers["/validate"] = allowed
    hooks = {}
    for kind, path in (("Mutating", "/mutate"), ("Validating", "/validate")):
        hooks[kind] = {
            "name": f"{path[1:]}.memop.test",
            "clientConfig": webhook.client_config(path),
            "rules": [
                {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
            ],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }
        configured.append(await _configure(http, kind, [hooks[kind]]))
    await label(http, namespace, enforce("restricted"))
    status, body, _ = await send(http, "POST", pods(namespace), pod())
    assert (status, body["message"]) == (403, NODE_REFUSAL)
    assert webhook.reviews("/validate") == []
    mutated = pod("mutated")
    mutated["metadata"]["labels"]["restrict"] = "yes"
    status, body, _ = await send(http, "POST", pods(namespace), mutated)
    assert status == 201, body
    assert [r["request"]["name"] for r in webhook.reviews("/validate")] == ["mutated"]


# --- the policy from labels, and the check order (pure) ---------------------------------------------


def test_labels_resolve_to_a_policy_as_policy_to_evaluate_does() -> None:
    policy, errors = policy_to_evaluate({PREFIX + "enforce": "baseline"})
    assert (str(policy.enforce), str(policy.audit), str(policy.warn), errors) == (
        "baseline:latest",
        "privileged:latest",
        "baseline:latest",  # warn follows an explicitly stricter enforce level, and its version
        [],
    )
    policy, _ = policy_to_evaluate(
        {
            PREFIX + "enforce": "restricted",
            PREFIX + "enforce-version": "v1.30",
            PREFIX + "warn-version": "v1.31",
        }
    )
    assert str(policy.warn) == "restricted:v1.31"
    policy, _ = policy_to_evaluate({PREFIX + "enforce": "baseline", PREFIX + "warn": "privileged"})
    assert str(policy.warn) == "privileged:latest"
    # Invalid: enforce fails closed (and warn does not follow it), audit and warn fail open.
    policy, errors = policy_to_evaluate(
        {PREFIX + "enforce": "Restricted", PREFIX + "audit": "x", PREFIX + "warn-version": "v2.0"}
    )
    assert (str(policy.enforce), str(policy.audit), str(policy.warn)) == (
        "restricted:latest",
        "privileged:latest",
        "privileged:latest",
    )
    assert [e.field for e in errors] == [
        f"metadata.labels[{PREFIX}enforce]",
        f"metadata.labels[{PREFIX}audit]",
        f"metadata.labels[{PREFIX}warn-version]",
    ]
    assert policy_to_evaluate({PREFIX + "enforce-version": "v1." + "9" * 30})[1]  # past strconv.Atoi
    assert not policy_to_evaluate({PREFIX + "enforce-version": "v1.0"})[1]
    assert policy_to_evaluate({PREFIX + "enforce-version": "v1.01"})[1]


def test_checks_run_baseline_ids_sorted_then_restricted_ids_sorted() -> None:
    ids = [check.id for check in evaluator._ORDERED]
    assert ids == [
        "appArmorProfile",
        "capabilities_baseline",
        "hostNamespaces",
        "hostPathVolumes",
        "hostPorts",
        "hostProbesAndHostLifecycle",
        "privileged",
        "procMount",
        "seLinuxOptions",
        "seccompProfile_baseline",
        "sysctls",
        "windowsHostProcess",
        "allowPrivilegeEscalation",
        "capabilities_restricted",
        "procMount_restricted",
        "restrictedVolumes",
        "runAsNonRoot",
        "runAsUser",
        "seccompProfile_restricted",
    ]
    assert str(evaluator.MAX_VERSION) == "v1.35"
    # restricted at latest: 12 baseline checks less the 4 it overrides, and its 7 own.
    assert len(evaluator.checks_for("restricted", 35)) == 15
    assert len(evaluator.checks_for("baseline", 35)) == 12
    assert len(evaluator.checks_for("baseline", 33)) == 11  # no probe or lifecycle host check yet
    assert evaluator.checks_for("privileged", 35) == ()


def test_kube_system_is_not_exempt_and_the_stores_own_writers_are_admitted_too() -> None:
    """The default configuration exempts no namespace; the simulated controllers write through
    the store, which admits their pods as kube-apiserver admits a controller's."""
    store = Store()
    store.patch(
        NAMESPACES,
        None,
        "kube-system",
        {"metadata": {"labels": enforce("restricted")}},
        "application/merge-patch+json",
    )
    with pytest.raises(ApiError) as refused:
        store.create(builtins.PODS, "kube-system", pod())
    assert (refused.value.code, refused.value.message) == (403, NODE_REFUSAL)
    assert store.create(builtins.PODS, "kube-system", restricted_pod())["metadata"]["name"] == "compliant"
