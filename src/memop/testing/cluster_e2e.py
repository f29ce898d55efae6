"""End-to-end tests on a real cluster: the operator's image deployed with its own manifests, as
Kubebuilder's ``test/e2e`` suite does it, for any memop project (``memop init`` generates
``tests/cluster_e2e/`` on these functions; memop's own suite is ``tests/cluster_e2e/``).

Nothing here runs unless the environment names a cluster and an image (:func:`skip_unless_configured`
marks a test so, :func:`settings_or_skip` reads the settings):

- ``E2E_IMAGE``: the operator's image reference, already on the cluster's nodes (or built and
  loaded by the next two); unset, the tests are skipped with :data:`SKIP_REASON`.
- ``E2E_KUBECONFIG`` (else ``KUBECONFIG``): the cluster; never ``~/.kube/config`` by default,
  since the tests install and delete cluster-wide objects there.
- ``E2E_BUILD=docker|podman|buildah``: build ``E2E_IMAGE`` from the project's Dockerfile first.
- ``E2E_LOAD``: a shell command that puts the image on the nodes, ``{image}`` in it standing for
  the (quoted) reference, else appended: ``kind load docker-image``, or
  ``podman save {image} | ctr -n k8s.io images import -`` on a node of your own.
- ``E2E_OVERLAY``: the kustomize overlay to install, relative to the project (default
  ``manifests/default``, which needs cert-manager once a kind has webhooks;
  ``manifests/webhook-self-managed`` does without).
- ``E2E_TIMEOUT``: seconds each wait may take (default 300).

:func:`deployed` is the whole install as an async context manager: the image built and loaded
(when asked), the overlay rendered by ``kubectl kustomize`` with the manager container's image
set to ``E2E_IMAGE`` (``imagePullPolicy: IfNotPresent``: a loaded image is never pulled), every
kind it holds checked to be served by the cluster, and ``kubectl apply --server-side``. It
yields an :class:`Install` (:meth:`~Install.wait_for_rollout`, :meth:`~Install.check_metrics`,
:meth:`~Install.converge`), and on the way out :meth:`~Install.tear_down` deletes the samples,
then everything it applied (what ``kubectl delete -k`` deletes), and fails naming any object a
finalizer keeps.

Everything goes through ``kubectl`` (on PATH), read by its exit codes and JSON output only,
never its wording. Waits poll with a deadline; a wait that times out fails with the state that
explains it (the pods' container states, the object's conditions).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import shlex
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

from memop.testing.cluster_metrics import (
    metrics_endpoint,
    metrics_reader_role,
    probe_objects,
    probe_verdict,
)
from memop.testing.wait import WaitTimeout, wait_for

log = logging.getLogger("memop.testing.cluster_e2e")

IMAGE = "E2E_IMAGE"
KUBECONFIG = "E2E_KUBECONFIG"
BUILD = "E2E_BUILD"
LOAD = "E2E_LOAD"
OVERLAY = "E2E_OVERLAY"
TIMEOUT = "E2E_TIMEOUT"

DEFAULT_OVERLAY = "manifests/default"
DEFAULT_TIMEOUT = 300.0
# An image build (dependencies downloaded, wheels built) takes minutes, not seconds.
BUILD_TIMEOUT = 1800.0
KUBECTL_TIMEOUT = 120.0
FIELD_MANAGER = "memop-cluster-e2e"
# The label memop's manifests put on the manager Deployment, and the container that runs memop.
CONTROLLER_LABEL = ("control-plane", "controller-manager")
MANAGER_CONTAINER = "manager"
# How often a wait asks the cluster again: each ask is a kubectl process.
POLL_INTERVAL = 1.0

BUILDERS: dict[str, tuple[str, ...]] = {
    "docker": ("docker", "build", "-t"),
    "podman": ("podman", "build", "-t"),
    "buildah": ("buildah", "bud", "-t"),
}

SKIP_REASON = (
    f"no cluster to deploy to: set {IMAGE}=<the operator's image, on the nodes> and {KUBECONFIG} "
    f"(or KUBECONFIG); {BUILD}=docker|podman|buildah and {LOAD}=<command> build and load the image"
)


class ClusterE2EError(AssertionError):
    """A step of the install that failed (an AssertionError, so pytest shows it as a failure);
    the message says which step and what the cluster or the tool said."""


@dataclass(frozen=True)
class Settings:
    """What the environment asks for (see the module docstring for each variable)."""

    image: str
    kubeconfig: Path
    build: str | None = None
    load: str | None = None
    overlay: str = DEFAULT_OVERLAY
    timeout: float = DEFAULT_TIMEOUT


def read_settings(environ: Mapping[str, str]) -> Settings | None:
    """The settings in ``environ``; None when ``E2E_IMAGE`` is unset (the tests skip). Raises
    :class:`ClusterE2EError` for a value that cannot be used, naming the variable."""
    image = environ.get(IMAGE, "").strip()
    if not image:
        return None
    kubeconfig = environ.get(KUBECONFIG) or environ.get("KUBECONFIG") or ""
    if not kubeconfig:
        raise ClusterE2EError(f"{IMAGE} is set but no cluster is: set {KUBECONFIG} (or KUBECONFIG)")
    first = Path(kubeconfig.split(os.pathsep)[0]).expanduser()
    if not first.is_file():
        raise ClusterE2EError(f"the kubeconfig {first} is not a file")
    build = environ.get(BUILD) or None
    if build is not None and build not in BUILDERS:
        raise ClusterE2EError(f"{BUILD}={build!r}: expected one of {', '.join(sorted(BUILDERS))}")
    raw_timeout = environ.get(TIMEOUT) or str(DEFAULT_TIMEOUT)
    try:
        timeout = float(raw_timeout)
    except ValueError:
        timeout = 0.0
    if not timeout > 0:
        raise ClusterE2EError(f"{TIMEOUT}={raw_timeout!r}: expected a number of seconds above 0")
    return Settings(
        image=image,
        kubeconfig=first,
        build=build,
        load=environ.get(LOAD) or None,
        overlay=environ.get(OVERLAY) or DEFAULT_OVERLAY,
        timeout=timeout,
    )


def skip_unless_configured(environ: Mapping[str, str] | None = None) -> pytest.MarkDecorator:
    """A pytest mark for a cluster e2e test or module (``pytestmark = skip_unless_configured()``):
    skipped with :data:`SKIP_REASON`, reported at the test's line, unless ``environ`` (default:
    the process's) sets ``E2E_IMAGE``."""
    image = (os.environ if environ is None else environ).get(IMAGE, "").strip()
    return pytest.mark.skipif(not image, reason=SKIP_REASON)


def settings_or_skip(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of ``environ`` (default: the process's), for a test or fixture: the test is
    skipped with :data:`SKIP_REASON` when none are given (mark it with
    :func:`skip_unless_configured` too, so that the skip names the test's line), and fails
    (one line, no traceback) when they cannot be used or kubectl is missing."""
    try:
        settings = read_settings(os.environ if environ is None else environ)
    except ClusterE2EError as error:
        pytest.fail(str(error), pytrace=False)
    if settings is None:
        pytest.skip(SKIP_REASON)
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not on PATH: the cluster e2e tests deploy with it", pytrace=False)
    return settings


# --- kubectl ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kubectl:
    """kubectl on one cluster. ``cache_dir``: its discovery cache (default: kubectl's own)."""

    kubeconfig: Path
    cache_dir: Path | None = None
    timeout: float = KUBECTL_TIMEOUT

    async def run(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        """kubectl's exit code, stdout and stderr."""
        flags = [f"--kubeconfig={self.kubeconfig}"]
        if self.cache_dir is not None:
            flags.append(f"--cache-dir={self.cache_dir}")
        return await run_command(["kubectl", *flags, *args], stdin=stdin, timeout=self.timeout)

    async def ok(self, *args: str, stdin: str | None = None) -> str:
        """kubectl's stdout; :class:`ClusterE2EError` with its stderr when it exits non-zero."""
        code, out, err = await self.run(*args, stdin=stdin)
        if code != 0:
            raise ClusterE2EError(f"kubectl {' '.join(args)} exited {code}: {_tail(err or out)}")
        return out

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object (``kind`` as kubectl names a resource: ``pods``, ``crd``...), None when absent."""
        args = ["get", kind, name, "--ignore-not-found", "-o", "json"]
        out = await self.ok(*args, *(["-n", namespace] if namespace else []))
        return json.loads(out) if out.strip() else None

    async def list(self, kind: str, namespace: str, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        """The objects of ``kind`` in ``namespace`` whose labels match ``selector``."""
        labels = ",".join(f"{key}={value}" for key, value in sorted(selector.items()))
        out = await self.ok("get", kind, "-n", namespace, "-l", labels, "-o", "json")
        items: list[dict[str, Any]] = json.loads(out).get("items", [])
        return items

    async def apply(self, objects: Sequence[Mapping[str, Any]], namespace: str | None = None) -> None:
        """Server-side apply of ``objects`` (namespaced ones without a namespace go to ``namespace``)."""
        args = ["apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}", "-f", "-"]
        await self.ok(*args, *(["-n", namespace] if namespace else []), stdin=_documents(objects))

    async def delete(self, objects: Sequence[Mapping[str, Any]], namespace: str | None = None) -> None:
        """Ask for ``objects`` to be deleted (those already gone are fine); returns at once:
        :func:`gone` waits."""
        if objects:
            args = ["delete", "--ignore-not-found", "--wait=false", "-f", "-"]
            await self.ok(*args, *(["-n", namespace] if namespace else []), stdin=_documents(objects))


async def run_command(
    argv: Sequence[str], *, stdin: str | None = None, timeout: float, shell: bool = False
) -> tuple[int, str, str]:
    """Run ``argv`` (one shell command line when ``shell``); its exit code, stdout and stderr.
    :class:`ClusterE2EError` when it cannot start or outlives ``timeout``."""
    try:
        if shell:
            process = await asyncio.create_subprocess_shell(
                argv[0],
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        else:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
    except OSError as error:
        raise ClusterE2EError(f"cannot run {argv[0]}: {error}") from None
    try:
        out, err = await asyncio.wait_for(
            process.communicate(stdin.encode() if stdin is not None else None), timeout
        )
    except TimeoutError:
        process.kill()
        await process.wait()
        raise ClusterE2EError(f"{shlex.join(argv)} took more than {timeout:g}s") from None
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def _documents(objects: Sequence[Mapping[str, Any]]) -> str:
    # YAML documents, as kubectl kustomize writes them.
    return yaml.safe_dump_all([dict(obj) for obj in objects], sort_keys=False)


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# --- the image ----------------------------------------------------------------------------------


async def prepare_image(settings: Settings, context: Path) -> None:
    """Build the image from ``context``'s Dockerfile when ``E2E_BUILD`` says how, then run
    ``E2E_LOAD`` when given; :class:`ClusterE2EError` with the tool's last lines when one fails."""
    if settings.build is not None:
        argv = [*BUILDERS[settings.build], settings.image, str(context)]
        log.info("building the image", extra={"command": shlex.join(argv)})
        code, out, err = await run_command(argv, timeout=BUILD_TIMEOUT)
        if code != 0:
            raise ClusterE2EError(f"{shlex.join(argv)} exited {code}: {_tail(err + out)}")
    if settings.load is not None:
        command = load_command(settings.load, settings.image)
        log.info("loading the image", extra={"command": command})
        code, out, err = await run_command([command], timeout=BUILD_TIMEOUT, shell=True)
        if code != 0:
            raise ClusterE2EError(f"{LOAD} ({command}) exited {code}: {_tail(err + out)}")


def load_command(template: str, image: str) -> str:
    """``E2E_LOAD`` as a shell command line: ``{image}`` replaced by the quoted image reference,
    or the reference appended when the command does not place it."""
    quoted = shlex.quote(image)
    return template.replace("{image}", quoted) if "{image}" in template else f"{template} {quoted}"


# --- the overlay --------------------------------------------------------------------------------


async def render(kubectl: Kubectl, overlay: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize overlay`` renders."""
    if not (overlay / "kustomization.yaml").is_file():
        raise ClusterE2EError(f"{overlay} is not a kustomize overlay (no kustomization.yaml)")
    out = await kubectl.ok("kustomize", str(overlay))
    return [doc for doc in yaml.safe_load_all(out) if doc]


def controller_deployment(objects: Iterable[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The manager Deployment among ``objects`` (labelled ``control-plane: controller-manager``,
    with a ``manager`` container); :class:`ClusterE2EError` unless there is exactly one."""
    key, value = CONTROLLER_LABEL
    found = [
        obj
        for obj in objects
        if obj.get("kind") == "Deployment" and (obj["metadata"].get("labels") or {}).get(key) == value
    ]
    if len(found) != 1:
        raise ClusterE2EError(
            f"expected one Deployment labelled {key}={value} in the overlay, found {len(found)}"
        )
    return found[0]


def with_image(objects: Sequence[Mapping[str, Any]], image: str) -> list[dict[str, Any]]:
    """``objects`` with the manager container of the controller Deployment running ``image``,
    ``imagePullPolicy: IfNotPresent`` (as kustomize's ``images:`` would set the reference; the
    pull policy so that an image loaded onto the nodes is used as it is, whatever its tag)."""
    copies: list[dict[str, Any]] = json.loads(json.dumps(list(objects)))
    deployment = controller_deployment(copies)
    containers = deployment["spec"]["template"]["spec"]["containers"]
    managers = [c for c in containers if c.get("name") == MANAGER_CONTAINER]
    if not managers:
        raise ClusterE2EError(f"the controller Deployment has no container named {MANAGER_CONTAINER!r}")
    for container in managers:
        container["image"] = image
        container["imagePullPolicy"] = "IfNotPresent"
    return copies


def group_version(api_version: str) -> str:
    """The discovery path of ``api_version``: ``/api/v1`` for the core group, else ``/apis/GV``."""
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


async def unserved_kinds(kubectl: Kubectl, objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """``Kind (apiVersion)`` of each object's kind that the cluster does not serve, except the
    kinds the CRDs among ``objects`` define (they are served once applied)."""
    defined = {
        (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
        for crd in objects
        if crd.get("kind") == "CustomResourceDefinition"
        for version in crd["spec"].get("versions", [])
    }
    wanted = {(obj["apiVersion"], obj["kind"]) for obj in objects} - defined
    served: dict[str, set[str]] = {}
    for api_version in sorted({api_version for api_version, _ in wanted}):
        code, out, _ = await kubectl.run("get", "--raw", group_version(api_version))
        kinds = {r.get("kind") for r in json.loads(out).get("resources", [])} if code == 0 else set()
        served[api_version] = {kind for kind in kinds if isinstance(kind, str)}
    return [
        f"{kind} ({api_version})" for api_version, kind in sorted(wanted) if kind not in served[api_version]
    ]


# --- waiting ------------------------------------------------------------------------------------


def has_condition(obj: Mapping[str, Any], condition_type: str) -> bool:
    """Whether ``obj``'s status has ``condition_type`` True for its current generation (the
    condition's and the status's ``observedGeneration``, where set, equal to the object's)."""
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation")
    if "observedGeneration" in status and status["observedGeneration"] != generation:
        return False
    for condition in status.get("conditions") or []:
        if condition.get("type") == condition_type:
            observed = condition.get("observedGeneration", generation)
            return bool(condition.get("status") == "True" and observed == generation)
    return False


def pod_is_ready(pod: Mapping[str, Any]) -> bool:
    """Whether the pod is Running with its Ready condition True, and not being deleted."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def describe_pod(pod: Mapping[str, Any]) -> str:
    """One line on a pod: its phase, and each container's state with its reason and message
    (ImagePullBackOff, CrashLoopBackOff and their words)."""
    status = pod.get("status") or {}
    parts = [f"pod {pod['metadata']['name']}: {status.get('phase', 'no phase')}"]
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True" and condition.get("message"):
            parts.append(f"{condition['type']}: {condition['message']}")
    for container in [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]:
        for state, detail in (container.get("state") or {}).items():
            words = " ".join(str(detail.get(k)) for k in ("reason", "message", "exitCode") if k in detail)
            parts.append(f"{container.get('name')} {state}{': ' + words if words else ''}")
    return "; ".join(parts)


def describe_conditions(obj: Mapping[str, Any] | None) -> str:
    """The object's conditions, one ``Type=Status (reason: message)`` each."""
    if obj is None:
        return "it does not exist"
    conditions = (obj.get("status") or {}).get("conditions") or []
    if not conditions:
        return "no conditions yet"
    return "; ".join(
        f"{c.get('type')}={c.get('status')} ({c.get('reason', '')}: {c.get('message', '')})"
        for c in conditions
    )


def object_ref(obj: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """How kubectl names ``obj``: ``kind.group``, its name and its namespace (None when cluster-scoped)."""
    group = obj["apiVersion"].rpartition("/")[0]
    kind = obj["kind"].lower() + (f".{group}" if group else "")
    return kind, obj["metadata"]["name"], obj["metadata"].get("namespace")


def describe_stuck(obj: Mapping[str, Any]) -> str:
    """``kind/name`` (and namespace), and what keeps it: its finalizers, or that it is not being
    deleted at all."""
    kind, name, namespace = object_ref(obj)
    where = f" in {namespace}" if namespace else ""
    meta = obj["metadata"]
    if meta.get("deletionTimestamp") is None:
        return f"{kind}/{name}{where} (not being deleted)"
    finalizers = meta.get("finalizers") or (obj.get("spec") or {}).get("finalizers") or []
    return f"{kind}/{name}{where} (deleting since {meta['deletionTimestamp']}, finalizers {finalizers})"


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], timeout: float, message: Callable[[], Awaitable[str] | str]
) -> None:
    """Poll ``predicate`` at kubectl's pace (:func:`memop.testing.wait_for`) until it is true; at
    ``timeout`` a :class:`ClusterE2EError` carrying ``message()`` alone (the state that explains
    it: a predicate's name and value say nothing to a reader)."""
    try:
        await wait_for(predicate, timeout, interval=POLL_INTERVAL, max_interval=POLL_INTERVAL)
    except WaitTimeout:
        text = message()
        raise ClusterE2EError(text if isinstance(text, str) else await text) from None


async def gone(kubectl: Kubectl, objects: Sequence[Mapping[str, Any]], timeout: float, what: str) -> None:
    """Wait until every one of ``objects`` is gone; :class:`ClusterE2EError` naming those left
    (and their finalizers) after ``timeout``."""
    left: list[dict[str, Any]] = []

    async def none_left() -> bool:
        left.clear()
        for obj in objects:
            kind, name, namespace = object_ref(obj)
            found = await kubectl.get(kind, name, namespace)
            if found is not None:
                left.append(found)
        return not left

    await wait_until(
        none_left,
        timeout,
        lambda: f"{what}: still there after {timeout:g}s: " + "; ".join(map(describe_stuck, left)),
    )


# --- the install --------------------------------------------------------------------------------


@dataclass
class Install:
    """An overlay applied to a cluster, with the image given: what the tests check and tear down.

    objects: what was applied (the rendered overlay, with the image set).
    namespace: the controller Deployment's namespace; sample_namespace: where namespaced
        samples without a namespace of their own go (created with the first sample).
    """

    kubectl: Kubectl
    objects: list[dict[str, Any]]
    image: str
    timeout: float
    sample_namespace: str
    # Created by the tests (samples, namespaces, metrics probes): deleted before the install.
    samples: list[dict[str, Any]] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    @property
    def deployment(self) -> Mapping[str, Any]:
        """The controller Deployment as applied."""
        return controller_deployment(self.objects)

    @property
    def namespace(self) -> str:
        return str(self.deployment["metadata"]["namespace"])

    async def controller_pods(self) -> list[dict[str, Any]]:
        """The controller Deployment's pods (by its selector)."""
        selector = self.deployment["spec"]["selector"]["matchLabels"]
        return await self.kubectl.list("pods", self.namespace, selector)

    async def wait_for_rollout(self) -> list[dict[str, Any]]:
        """Wait until the Deployment has rolled out (every replica updated and available) and
        exactly ``replicas`` of its pods are Ready; those pods. On timeout the error shows the
        Deployment's conditions and each pod's state."""
        name = str(self.deployment["metadata"]["name"])
        replicas = int(self.deployment["spec"].get("replicas", 1))
        pods: list[dict[str, Any]] = []

        async def rolled_out() -> bool:
            current = await self.kubectl.get("deployments.apps", name, self.namespace)
            pods[:] = await self.controller_pods()
            if current is None:
                return False
            status = current.get("status") or {}
            done = (
                status.get("observedGeneration", 0) >= current["metadata"]["generation"]
                and status.get("updatedReplicas") == replicas
                and status.get("availableReplicas") == replicas
                and status.get("replicas") == replicas
            )
            return done and sum(map(pod_is_ready, pods)) == replicas == len(pods)

        async def why() -> str:
            current = await self.kubectl.get("deployments.apps", name, self.namespace)
            states = "; ".join(map(describe_pod, pods)) or "no pods"
            return (
                f"deployment {name} in {self.namespace} did not roll out {replicas} ready replicas "
                f"of {self.image} within {self.timeout:g}s: {describe_conditions(current)}; {states}"
            )

        await wait_until(rolled_out, self.timeout, why)
        log.info(
            "the controller rolled out",
            extra={"deployment": name, "pods": [p["metadata"]["name"] for p in pods]},
        )
        return pods

    async def check_metrics(self) -> None:
        """Every controller pod's ``/metrics`` answers 200 with memop's metrics, asked from a pod
        in the cluster that runs the operator's own image (``python``, no curl), with a
        ServiceAccount token bound to the overlay's metrics-reader ClusterRole. With
        ``--metrics-secure`` (HTTPS, every scrape authenticated and authorised), a second
        account, bound to nothing, must get 403. The probes and their accounts are deleted after."""
        endpoint = metrics_endpoint(self.deployment)
        if endpoint is None:
            raise ClusterE2EError("the controller's metrics are off (--metrics-bind-address=0)")
        pods = [pod for pod in await self.controller_pods() if pod_is_ready(pod)]
        if not pods:
            raise ClusterE2EError("no controller pod is ready: wait_for_rollout() first")
        urls = [endpoint.url(pod["status"]["podIP"]) for pod in pods]
        reader = metrics_reader_role(self.objects)
        if endpoint.secure and reader is None:
            raise ClusterE2EError(
                "the controller serves --metrics-secure; the overlay has no ClusterRole with get on /metrics"
            )
        probes = [("reader", reader, 200)]
        if endpoint.secure:
            probes.append(("stranger", None, 403))
        created: list[dict[str, Any]] = []
        try:
            for role_name, role, expected in probes:
                objects = probe_objects(
                    f"e2e-metrics-{role_name}-{secrets.token_hex(3)}",
                    self.namespace,
                    image=self.image,
                    role=role,
                    urls=urls,
                    expected=expected,
                )
                created.extend(objects)
                await self.kubectl.apply(objects)
            verdicts = [await self._probe_verdict(obj) for obj in created if obj["kind"] == "Pod"]
        finally:
            await self.kubectl.delete(created)
        failures = [verdict for verdict in verdicts if verdict]
        if failures:
            raise ClusterE2EError(f"/metrics of {endpoint.describe()}: " + "; ".join(failures))
        log.info("the metrics answered", extra={"urls": urls, "secure": endpoint.secure})

    async def _probe_verdict(self, probe: Mapping[str, Any]) -> str:
        """Wait for the probe pod to finish: '' when it found what it expected, else why not."""
        name = probe["metadata"]["name"]
        finished: dict[str, Any] = {}

        async def done() -> bool:
            pod = await self.kubectl.get("pods", name, self.namespace)
            if pod is not None:
                finished.update(pod)
            return pod is not None and (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

        await wait_until(
            done,
            self.timeout,
            lambda: (
                f"the metrics probe {name} did not finish within {self.timeout:g}s: " + describe_pod(finished)
            ),
        )
        return probe_verdict(finished)

    async def converge(
        self, sample: Mapping[str, Any] | Path, condition: str = "Ready", namespace: str | None = None
    ) -> dict[str, Any]:
        """Apply ``sample`` (an object, or a YAML file holding one) and wait until its
        ``condition`` is True for its generation; the object then. A namespaced sample goes to
        its own namespace, else ``namespace``, else :attr:`sample_namespace` (created when
        missing). It is deleted by :meth:`tear_down`, first, while the operator still runs to
        release its finalizers."""
        obj = _load_sample(sample) if isinstance(sample, Path) else json.loads(json.dumps(sample))
        namespaced = await self._namespaced(obj)
        if namespaced:
            target = obj["metadata"].get("namespace") or namespace or self.sample_namespace
            obj["metadata"]["namespace"] = target
            await self._ensure_namespace(target)
        self.samples.append(obj)
        await self.kubectl.apply([obj])
        kind, name, where = object_ref(obj)
        found: dict[str, Any] = {}

        async def converged() -> bool:
            current = await self.kubectl.get(kind, name, where)
            found.clear()
            found.update(current or {})
            return current is not None and has_condition(current, condition)

        await wait_until(
            converged,
            self.timeout,
            lambda: (
                f"{kind}/{name} did not become {condition} within {self.timeout:g}s: "
                + describe_conditions(found or None)
            ),
        )
        log.info("the sample converged", extra={"object": f"{kind}/{name}", "condition": condition})
        return dict(found)

    async def _namespaced(self, obj: Mapping[str, Any]) -> bool:
        api_version, kind = obj["apiVersion"], obj["kind"]
        out = await self.kubectl.ok("get", "--raw", group_version(api_version))
        for resource in json.loads(out).get("resources", []):
            if resource.get("kind") == kind and "/" not in resource.get("name", "/"):
                return bool(resource.get("namespaced"))
        raise ClusterE2EError(f"the cluster does not serve {kind} ({api_version})")

    async def _ensure_namespace(self, name: str) -> None:
        if await self.kubectl.get("namespaces", name) is None:
            await self.kubectl.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}])
            self.namespaces.append(name)

    async def delete_samples(self) -> None:
        """Delete the samples :meth:`converge` applied and wait until they are gone (the operator
        must still run, to release their finalizers); :class:`ClusterE2EError` naming each left."""
        samples = list(reversed(self.samples))
        await self.kubectl.delete(samples)
        await gone(self.kubectl, samples, self.timeout, "the samples")
        self.samples.clear()

    async def tear_down(self) -> None:
        """:meth:`delete_samples`, then delete the namespaces the tests created and every object
        applied (what ``kubectl delete -k`` of the overlay deletes), and wait until all are gone;
        :class:`ClusterE2EError` naming every object left after the timeout and what holds it."""
        await self.delete_samples()
        created = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in self.namespaces
        ]
        everything = [*created, *reversed(self.objects)]
        await self.kubectl.delete(everything)
        await gone(self.kubectl, everything, self.timeout, "the install")
        log.info("the install is gone", extra={"objects": len(everything)})


def _load_sample(path: Path) -> dict[str, Any]:
    documents = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    if len(documents) != 1:
        raise ClusterE2EError(f"{path} holds {len(documents)} objects, expected one sample")
    sample: dict[str, Any] = documents[0]
    return sample


@asynccontextmanager
async def deployed(
    project: Path, settings: Settings, *, kubectl: Kubectl | None = None
) -> AsyncIterator[Install]:
    """The project at ``project`` (its Dockerfile and ``settings.overlay``) installed on the
    cluster with ``settings.image``, built and loaded first when the settings say so; torn
    down on exit (:meth:`Install.tear_down`), whatever the body did. Nothing is applied when
    the overlay holds a kind the cluster does not serve (cert-manager's, say): the error names
    each, and the overlay to use instead."""
    kubectl = kubectl or Kubectl(settings.kubeconfig)
    await prepare_image(settings, project)
    overlay = project / settings.overlay
    objects = with_image(await render(kubectl, overlay), settings.image)
    unserved = await unserved_kinds(kubectl, objects)
    if unserved:
        _refuse_unserved(settings.overlay, unserved)
    install = Install(
        kubectl,
        objects,
        settings.image,
        settings.timeout,
        sample_namespace=f"e2e-samples-{secrets.token_hex(3)}",
    )
    try:
        await kubectl.apply(objects)
        log.info("applied the overlay", extra={"overlay": str(overlay), "objects": len(objects)})
        yield install
    finally:
        await install.tear_down()


def _refuse_unserved(overlay: str, unserved: Sequence[str]) -> NoReturn:
    hint = ""
    if any("cert-manager.io" in kind for kind in unserved):
        hint = f": install cert-manager first, or set {OVERLAY}=manifests/webhook-self-managed"
    raise ClusterE2EError(f"{overlay} holds kinds the cluster does not serve, {', '.join(unserved)}{hint}")
