"""The install under test: the image built and loaded, the overlay rendered with it and applied,
then the checks (rollout, metrics, samples) and the tear-down (see :mod:`memop.testing.cluster_e2e`)."""

from __future__ import annotations

import json
import logging
import secrets
import shlex
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

from memop.testing.cluster_e2e.errors import ClusterE2EError
from memop.testing.cluster_e2e.kubectl import Kubectl, gone, last_lines, run_command, wait_until
from memop.testing.cluster_e2e.metrics import (
    metrics_endpoint,
    metrics_reader_role,
    probe_objects,
    probe_verdict,
)
from memop.testing.cluster_e2e.objects import (
    MANAGER_CONTAINER,
    controller_deployment,
    describe_conditions,
    describe_pod,
    describe_stuck,
    has_condition,
    object_ref,
    pod_is_ready,
    watched_namespaces,
    with_image,
)
from memop.testing.cluster_e2e.settings import BUILDERS, LOAD, OVERLAY, Settings

# Functions with __tracebackhide__ stay out of pytest's tracebacks: a failure shows the test's
# line and the error, which says what the cluster showed.
log = logging.getLogger("memop.testing.cluster_e2e")


# An image build (dependencies downloaded, wheels built) takes minutes, not seconds.
BUILD_TIMEOUT = 1800.0


async def prepare_image(settings: Settings, context: Path) -> None:
    """Build the image from ``context``'s Dockerfile when ``E2E_BUILD`` says how, then run
    ``E2E_LOAD`` when given; :class:`ClusterE2EError` with the tool's last lines when one fails."""
    __tracebackhide__ = True
    if settings.build is not None:
        argv = [*BUILDERS[settings.build], settings.image, str(context)]
        log.info("building the image", extra={"command": shlex.join(argv)})
        code, out, err = await run_command(argv, timeout=BUILD_TIMEOUT)
        if code != 0:
            raise ClusterE2EError(f"{shlex.join(argv)} exited {code}: {last_lines(err + out)}")
    if settings.load is not None:
        command = load_command(settings.load, settings.image)
        log.info("loading the image", extra={"command": command})
        code, out, err = await run_command([command], timeout=BUILD_TIMEOUT, shell=True)
        if code != 0:
            raise ClusterE2EError(f"{LOAD} ({command}) exited {code}: {last_lines(err + out)}")


def load_command(template: str, image: str) -> str:
    """``E2E_LOAD`` as a shell command line: ``{image}`` replaced by the quoted image reference,
    or the reference appended when the command does not place it."""
    quoted = shlex.quote(image)
    return template.replace("{image}", quoted) if "{image}" in template else f"{template} {quoted}"


async def render(kubectl: Kubectl, overlay: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize overlay`` renders."""
    __tracebackhide__ = True
    if not (overlay / "kustomization.yaml").is_file():
        raise ClusterE2EError(f"{overlay} is not a kustomize overlay (no kustomization.yaml)")
    out = await kubectl.ok("kustomize", str(overlay))
    return [doc for doc in yaml.safe_load_all(out) if doc]


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
        served[api_version] = {str(r.get("kind")) for r in await kubectl.resources(api_version)}
    return [
        f"{kind} ({api_version})" for api_version, kind in sorted(wanted) if kind not in served[api_version]
    ]


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
        __tracebackhide__ = True
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
            logs = [await self._last_log_lines(pod) for pod in pods if not pod_is_ready(pod)][:1]
            return (
                f"deployment {name} in {self.namespace} did not roll out {replicas} ready replicas "
                f"of {self.image} within {self.timeout:g}s: {describe_conditions(current)}; {states}"
                + "".join(logs)
            )

        await wait_until(rolled_out, self.timeout, why)
        log.info(
            "the controller rolled out",
            extra={"deployment": name, "pods": [p["metadata"]["name"] for p in pods]},
        )
        return pods

    async def _last_log_lines(self, pod: Mapping[str, Any]) -> str:
        """The manager's last log lines in ``pod`` (of its previous run when it restarted: why it
        exited), as a paragraph; '' when there are none (not started yet)."""
        restarted = any(
            c.get("restartCount") for c in (pod.get("status") or {}).get("containerStatuses") or []
        )
        args = ["logs", pod["metadata"]["name"], "-n", self.namespace, "-c", MANAGER_CONTAINER, "--tail=10"]
        code, out, _ = await self.kubectl.run(*args, *(["--previous"] if restarted else []))
        if code != 0 or not out.strip():
            return ""
        return f"\nlast log lines of {pod['metadata']['name']}:\n{out.rstrip()}"

    async def check_metrics(self) -> None:
        """Every controller pod's ``/metrics`` answers 200 with memop's metrics, asked from a pod
        in the cluster that runs the operator's own image (``python``, no curl), with a
        ServiceAccount token bound to the overlay's metrics-reader ClusterRole. With
        ``--metrics-secure`` (HTTPS, every scrape authenticated and authorised), a second
        account, bound to nothing, must get 403. The probes and their accounts are deleted after."""
        __tracebackhide__ = True
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
            verdicts = []
            for probe in (obj for obj in created if obj["kind"] == "Pod"):
                verdicts.append(await self._probe_verdict(probe))
        finally:
            await self.kubectl.delete(created)
        failures = [verdict for verdict in verdicts if verdict]
        if failures:
            raise ClusterE2EError(f"/metrics of {endpoint.describe()}: " + "; ".join(failures))
        log.info("the metrics answered", extra={"urls": urls, "secure": endpoint.secure})

    async def _probe_verdict(self, probe: Mapping[str, Any]) -> str:
        """Wait for the probe pod to finish: '' when it found what it expected, else why not."""
        __tracebackhide__ = True
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
        its own namespace, else ``namespace``, else the first namespace the install watches
        (``--watch-namespace``: manifests/namespaced), else :attr:`sample_namespace`; created
        when missing. A namespace the install does not watch is refused. The sample is deleted
        by :meth:`delete_samples` (first thing in :meth:`tear_down`), while the operator still
        runs to release its finalizers."""
        __tracebackhide__ = True
        obj = _load_sample(sample) if isinstance(sample, Path) else json.loads(json.dumps(sample))
        if await self._namespaced(obj):
            watched = watched_namespaces(self.deployment)
            target = obj["metadata"].get("namespace") or namespace or (watched or [self.sample_namespace])[0]
            if watched and target not in watched:
                raise ClusterE2EError(
                    f"{obj['kind']} {obj['metadata']['name']} would go to namespace {target}, which this "
                    f"install does not watch (only {', '.join(watched)})"
                )
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
        for resource in await self.kubectl.resources(api_version):
            if resource.get("kind") == kind:
                return bool(resource.get("namespaced"))
        raise ClusterE2EError(f"the cluster does not serve {kind} ({api_version})")

    async def _ensure_namespace(self, name: str) -> None:
        if await self.kubectl.get("namespaces", name) is None:
            await self.kubectl.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}])
            self.namespaces.append(name)

    async def delete_samples(self) -> None:
        """Delete the samples :meth:`converge` applied and wait until they are gone (the operator
        must still run, to release their finalizers); :class:`ClusterE2EError` naming each left."""
        __tracebackhide__ = True
        samples = list(reversed(self.samples))
        await self.kubectl.delete(samples)
        await gone(self.kubectl, samples, self.timeout, "the samples")
        self.samples.clear()

    async def tear_down(self) -> None:
        """:meth:`delete_samples`, then delete the namespaces the tests created and every object
        applied (what ``kubectl delete -k`` of the overlay deletes), and wait until all are gone;
        :class:`ClusterE2EError` naming every object left after the timeout and what holds it."""
        __tracebackhide__ = True
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
    each, and the overlay to use instead; nor when some of its objects exist already (an install
    of this operator, or the remains of a run whose tear-down failed), which the tear-down would
    delete: the error names them."""
    __tracebackhide__ = True
    kubectl = kubectl or Kubectl(settings.kubeconfig)
    await prepare_image(settings, project)
    overlay = project / settings.overlay
    objects = with_image(await render(kubectl, overlay), settings.image)
    unserved = await unserved_kinds(kubectl, objects)
    if unserved:
        _refuse_unserved(settings.overlay, unserved)
    # The tear-down deletes everything applied: an install already there (its CRDs, and with
    # them every object of its kinds) is not the test's to delete.
    there = await kubectl.existing(objects)
    if there:
        named = "; ".join(map(describe_stuck, there[:5])) + ("; ..." if len(there) > 5 else "")
        raise ClusterE2EError(
            f"{settings.overlay} is installed already ({len(there)} of its objects exist), and the test "
            f"would delete it after: {named}. Run it on a cluster without this operator installed"
        )
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
