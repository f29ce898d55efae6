"""``memop manifests bundle``: an Operator Lifecycle Manager bundle of a project, from the code
that makes its plain manifests.

The bundle (operator-framework's ``registry+v1`` format) is a directory::

    manifests/<project>.clusterserviceversion.yaml   the CSV
    manifests/<group>_<plural>.yaml                  every CRD, byte-equal to manifests/crd
    metadata/annotations.yaml                        package, channels, media type
    bundle.Dockerfile                                the same as image labels (FROM scratch)

Each file of ``manifests/`` is one object, its first YAML document: operator-registry (what
``opm`` and ``operator-sdk run bundle`` use) reads only that one per file. Nothing in the CSV is
written twice, so it cannot disagree with the plain manifests:

- the install strategy is the Deployment of ``manifests/manager``
  (:func:`memop.manifests.manager.manager_deployment`), named and bound to its ServiceAccount as
  ``manifests/default`` names them (``<project>-`` prefix), running the project's image tagged
  with the bundle's version (or ``--image``), and with ``WATCH_NAMESPACE`` taken from the
  ``olm.targetNamespaces`` annotation OLM sets from the OperatorGroup (comma-separated, empty
  for all namespaces: what ``--watch-namespace`` takes);
- ``permissions`` are the project's rules (:mod:`memop.manifests.rbac`) of the watched scope and
  of the operator's own namespace (the Lease). OLM grants them as a Role in the operator's
  namespace, copies that Role into each target namespace, and makes them a ClusterRole for an
  AllNamespaces group: exactly manifests/namespaced, namespaced/multi and default.
  ``clusterPermissions`` holds what the operator needs cluster-wide whatever the group: the
  controllers' :data:`Scope.CLUSTER <memop.runtime.api.permissions.Scope>` rules (non-resource
  URLs among them), as manifests/rbac's ``cluster_role.yaml``. Without any the key is left out
  rather than granting the watched rules everywhere;
- ``owned`` lists every CRD of every controller of the project, with a spec or status
  descriptor for each field of its schema, and ``alm-examples`` holds their samples (the
  objects of manifests/samples);
- ``installModes`` are all four, since ``WATCH_NAMESPACE`` takes one namespace, several, or none;
  a project that converts between versions supports AllNamespaces only, as OLM requires of a
  CSV with a conversion webhook (a CRD's conversion serves every namespace);
- ``webhookdefinitions`` are the controllers' webhook declarations (:mod:`memop.manifests.webhooks`):
  a ValidatingAdmissionWebhook or MutatingAdmissionWebhook per declared validator or defaulter,
  a ConversionWebhook per Conversion naming its CRD. OLM makes the Service (443 to the manager's
  9443), the configurations and the CRDs' conversion stanza, and a certificate it mounts at
  ``/tmp/k8s-webhook-server/serving-certs`` (``--webhook-cert-dir``'s default) and renews: the
  bundle's CRDs are manifests/crd's, without a conversion stanza, every version kept.

Only OLM's catalog operator creates the CSV's ServiceAccount and Roles (through an
InstallPlan): a CSV applied by hand stays Pending. Install a bundle with ``operator-sdk run
bundle`` or from a catalog with a Subscription.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from memop.manifests import rbac, webhooks
from memop.manifests.crds import crd_files
from memop.manifests.manager import manager_deployment
from memop.manifests.target import COMMAND, Target, header, image_for_version, write_changed
from memop.runtime.api.permissions import Scope
from memop.runtime.webhook.declarations import CONVERSION_PATH

# The channel naming OLM recommends (operator-framework/api's good-practices check warns about
# any other): stable, which a Subscription follows from 0.x through 1.0 and on.
DEFAULT_CHANNEL = "stable"
# CRDs with x-kubernetes-validations (CEL) rules: on by default since Kubernetes 1.25.
MIN_KUBE_VERSION = "1.25.0"
MEDIA_TYPE = "registry+v1"
WATCH_NAMESPACE_FIELD = "metadata.annotations['olm.targetNamespaces']"
INSTALL_MODES = ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")

DESCRIPTION = (
    "{description}\n\n"
    "Its controllers: {controllers}.\n\n"
    "Built on memop, a controller runtime in Python asyncio with controller-runtime's semantics: "
    "leader election, metrics with controller-runtime's names, Events and status conditions. "
    "Install it in one namespace, several, or all: the OperatorGroup's target namespaces become "
    "its WATCH_NAMESPACE.\n"
)
KEYWORDS = ("operator", "python", "asyncio", "controller-runtime")
# A stack of three slabs, drawn once: the CSV carries it base64-encoded.
ICON_SVG = """\
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64">
<rect width="64" height="64" rx="12" fill="#1f4e79"/>
<rect x="14" y="14" width="36" height="9" rx="3" fill="#9cc3e6"/>
<rect x="14" y="27.5" width="36" height="9" rx="3" fill="#c5ddf2"/>
<rect x="14" y="41" width="36" height="9" rx="3" fill="#ffffff"/>
</svg>
"""

# x-descriptors the OpenShift console knows, by what a schema field looks like.
PODS = "urn:alm:descriptor:com.tectonic.ui:podCount"
NUMBER = "urn:alm:descriptor:com.tectonic.ui:number"
SWITCH = "urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
TEXT = "urn:alm:descriptor:com.tectonic.ui:text"
RESOURCES = "urn:alm:descriptor:com.tectonic.ui:resourceRequirements"
CONDITIONS = "urn:alm:descriptor:io.kubernetes.conditions"
STATUS_TEXT = "urn:alm:descriptor:text"
POD_COUNT_FIELDS = ("size", "replicas")


class BundleError(ValueError):
    """The bundle cannot be made as asked; the message is the one line to print."""


@dataclass(frozen=True)
class BundleOptions:
    """version: the CSV's semantic version; replaces: the CSV this one upgrades (a version or a
    CSV name, older than ``version``); channels: the channels it is published in, the first the
    default; image: the operator image (by default the project's, tagged ``version``)."""

    version: str
    replaces: str | None = None
    channels: tuple[str, ...] = (DEFAULT_CHANNEL,)
    image: str | None = None

    def replaces_name(self, package: str) -> str | None:
        """The CSV name ``replaces`` stands for, in ``package``."""
        if self.replaces is None:
            return None
        prefix = f"{package}.v"
        return self.replaces if self.replaces.startswith(prefix) else csv_name(package, self.replaces)

    def validate(self, package: str) -> None:
        """Raise BundleError, saying what is wrong, unless these options make a bundle of ``package``."""
        if not SEMVER.match(self.version):
            raise BundleError(f"--version {self.version!r} is not a semantic version (such as 0.2.0)")
        previous = self.replaces_name(package)
        if previous is not None:
            old = previous.removeprefix(f"{package}.v")
            if not SEMVER.match(old):
                raise BundleError(
                    f"--replaces {self.replaces!r}: expected a version or a CSV name such as "
                    f"{csv_name(package, '0.1.0')}"
                )
            if _semver_key(old) >= _semver_key(self.version):
                raise BundleError(f"--replaces {self.replaces!r} must be older than --version {self.version}")
        if not self.channels or any(not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", c) for c in self.channels):
            raise BundleError(
                f"--channel {','.join(self.channels)!r}: expected channel names such as stable,candidate"
            )


def csv_name(package: str, version: str) -> str:
    """A ClusterServiceVersion's name: ``<package>.v<version>``."""
    return f"{package}.v{version}"


def _semver_key(version: str) -> tuple[int, int, int, int, str]:
    """Order of two semantic versions (a pre-release sorts before its release)."""
    match = SEMVER.match(version)
    assert match is not None
    major, minor, patch, pre = match.groups()
    return int(major), int(minor), int(patch), 0 if pre else 1, pre or ""


def maturity(version: str) -> str:
    """The CSV's maturity: ``alpha`` before 1.0.0 or for a pre-release, ``stable`` after."""
    major, _, _, released, _ = _semver_key(version)
    return "stable" if major >= 1 and released else "alpha"


def bundle_image(target: Target, options: BundleOptions) -> str:
    """The operator image the bundle runs: ``--image``, else the project's tagged ``version``."""
    return options.image or image_for_version(target.project.image, options.version)


# --- the CSV ---------------------------------------------------------------------------------------


def csv_deployment(target: Target, image: str) -> dict[str, Any]:
    """The CSV's deployment entry: manifests/manager's Deployment as manifests/default names it,
    running ``image``, watching the namespaces OLM's OperatorGroup targets."""
    deployment = manager_deployment(target)
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    pod["serviceAccountName"] = target.prefix + pod["serviceAccountName"]
    [container] = [c for c in pod["containers"] if c["name"] == "manager"]
    container["image"] = image
    # OLM names and owns the RBAC it installs, and never deletes a bundle all at once: no
    # uninstall guard (manifests/manager's UNINSTALL_GUARD names kustomize's objects).
    env = [
        v for v in container.get("env") or () if v.get("name") not in ("WATCH_NAMESPACE", "UNINSTALL_GUARD")
    ]
    env.append({"name": "WATCH_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": WATCH_NAMESPACE_FIELD}}})
    container["env"] = env
    if webhooks.serves_webhooks(target):
        # First, where manifests/webhook's patch puts it in the installs' Deployment.
        container["ports"].insert(
            0, {"name": webhooks.WEBHOOK_PORT_NAME, "containerPort": webhooks.WEBHOOK_PORT, "protocol": "TCP"}
        )
    return {
        "name": target.prefix + deployment["metadata"]["name"],
        "label": dict(deployment["metadata"].get("labels") or {}),
        "spec": spec,
    }


def webhook_definitions(target: Target, deployment: str) -> list[dict[str, Any]]:
    """The CSV's ``webhookdefinitions`` (OLM's WebhookDescription): every declared validator,
    defaulter and conversion, served by ``deployment``."""
    served = {
        "deploymentName": deployment,
        "containerPort": webhooks.SERVICE_PORT,
        "targetPort": webhooks.WEBHOOK_PORT,
        "admissionReviewVersions": list(webhooks.REVIEW_VERSIONS),
    }
    definitions: list[dict[str, Any]] = []
    for kind, hooks in (
        ("MutatingAdmissionWebhook", webhooks.mutating_webhooks(target)),
        ("ValidatingAdmissionWebhook", webhooks.validating_webhooks(target)),
    ):
        for hook in hooks:
            definitions.append(
                {
                    "generateName": hook["name"],
                    "type": kind,
                    **served,
                    "webhookPath": hook["clientConfig"]["service"]["path"],
                    "sideEffects": hook["sideEffects"],
                    "failurePolicy": hook["failurePolicy"],
                    "matchPolicy": hook["matchPolicy"],
                    "timeoutSeconds": hook["timeoutSeconds"],
                    "rules": hook["rules"],
                }
            )
    for conversion in webhooks.conversions(target):
        definitions.append(
            {
                "generateName": f"c{conversion.kind.lower()}.{conversion.group}",
                "type": "ConversionWebhook",
                **served,
                "webhookPath": CONVERSION_PATH,
                "sideEffects": "None",
                "conversionCRDs": [webhooks.crd_name(conversion)],
            }
        )
    return definitions


def install_modes(target: Target) -> list[dict[str, Any]]:
    """The CSV's ``installModes``: all four, or AllNamespaces only with a conversion webhook."""
    converts = bool(webhooks.conversions(target))
    return [{"type": mode, "supported": not converts or mode == "AllNamespaces"} for mode in INSTALL_MODES]


def permissions(target: Target, service_account: str) -> list[dict[str, Any]]:
    """The CSV's ``permissions``: the watched-scope rules and the Lease's (see the module doc)."""
    rules = rbac.policy_rules(Scope.WATCHED, target.rules) + rbac.policy_rules(Scope.OPERATOR, target.rules)
    return [{"serviceAccountName": service_account, "rules": rules}]


def cluster_permissions(target: Target, service_account: str) -> dict[str, Any]:
    """``{"clusterPermissions": ...}`` with the cluster-scope rules, or {} when there are none."""
    rules = rbac.policy_rules(Scope.CLUSTER, target.rules)
    if not rules:
        return {}
    return {"clusterPermissions": [{"serviceAccountName": service_account, "rules": rules}]}


def display_name(field: str) -> str:
    """``memoryLimitMiB`` -> ``Memory Limit MiB``: split before a capital that starts a word."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", field)
    return words[:1].upper() + words[1:]


def _first_sentence(text: str) -> str:
    return text.split(". ", 1)[0].rstrip(".") + "." if text else ""


def _is_resources(schema: Mapping[str, Any]) -> bool:
    return set(schema.get("properties") or ()) == {"limits", "requests"}


def _is_pod_template(schema: Mapping[str, Any]) -> bool:
    return set(schema.get("properties") or ()) == {"metadata", "spec"}


def descriptors(schema: Mapping[str, Any], *, status: bool, prefix: str = "") -> list[dict[str, Any]]:
    """A descriptor for every field of an object schema (spec or status), nested objects
    included, in schema order. Kubernetes types the console knows as a whole (resource
    requirements, a pod template) are one descriptor each."""
    found: list[dict[str, Any]] = []
    for name, field in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        descriptor: dict[str, Any] = {
            "path": path,
            "displayName": display_name(name),
            "description": _first_sentence(str(field.get("description") or "")),
        }
        if not descriptor["description"]:
            del descriptor["description"]
        x = _x_descriptor(name, field, status=status)
        if x:
            descriptor["x-descriptors"] = [x]
        found.append(descriptor)
        nested = field.get("type") == "object" and field.get("properties")
        if nested and not _is_resources(field) and not _is_pod_template(field):
            found.extend(descriptors(field, status=status, prefix=f"{path}."))
    return found


def _x_descriptor(name: str, field: Mapping[str, Any], *, status: bool) -> str | None:
    kind = field.get("type")
    if name == "conditions" and kind == "array":
        return CONDITIONS
    if status:
        return STATUS_TEXT if kind in ("integer", "number", "string", "boolean") else None
    if _is_resources(field):
        return RESOURCES
    if kind == "integer" and name in POD_COUNT_FIELDS:
        return PODS
    return {"integer": NUMBER, "number": NUMBER, "boolean": SWITCH, "string": TEXT}.get(str(kind))


def owned_crds(target: Target) -> list[dict[str, Any]]:
    """``customresourcedefinitions.owned``: each served version of every controller's CRDs."""
    owned = []
    for definition in target.project.controllers:
        for crd in definition.crds():
            names = crd["spec"]["names"]
            for version in crd["spec"]["versions"]:
                if not version.get("served", True):
                    continue
                schema = version["schema"]["openAPIV3Schema"]
                properties = schema.get("properties") or {}
                owned.append(
                    {
                        "name": crd["metadata"]["name"],
                        "version": version["name"],
                        "kind": names["kind"],
                        "displayName": names["kind"],
                        "description": _first_sentence(str(schema.get("description") or names["kind"])),
                        "specDescriptors": descriptors(properties.get("spec") or {}, status=False),
                        "statusDescriptors": descriptors(properties.get("status") or {}, status=True),
                    }
                )
    return owned


def samples(target: Target) -> list[dict[str, Any]]:
    """Every controller's samples (the objects of manifests/samples), for ``alm-examples``."""
    return [sample for definition in target.project.controllers for sample in definition.samples().values()]


def cluster_service_version(target: Target, options: BundleOptions) -> dict[str, Any]:
    """The ClusterServiceVersion of ``options.version``."""
    project = target.project
    image = bundle_image(target, options)
    deployment = csv_deployment(target, image)
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    controllers = ", ".join(f"{d.name} ({d.description})" for d in project.controllers)
    summary = project.description or f"The {project.name} operator"
    spec: dict[str, Any] = {
        "displayName": project.name,
        "description": DESCRIPTION.format(description=summary, controllers=controllers),
        "version": options.version,
        "minKubeVersion": MIN_KUBE_VERSION,
        "maturity": maturity(options.version),
        "provider": {"name": project.name},
        # A placeholder to replace with the team that ships the bundle.
        "maintainers": [{"name": f"{project.name} maintainers", "email": f"{project.name}@{project.domain}"}],
        "keywords": [*KEYWORDS, *project.controller_names],
        "icon": [{"base64data": base64.b64encode(ICON_SVG.encode()).decode(), "mediatype": "image/svg+xml"}],
        "installModes": install_modes(target),
        "install": {
            "strategy": "deployment",
            "spec": {
                "deployments": [deployment],
                "permissions": permissions(target, account),
                **cluster_permissions(target, account),
            },
        },
        "customresourcedefinitions": {"owned": owned_crds(target)},
    }
    definitions = webhook_definitions(target, deployment["name"])
    if definitions:
        spec["webhookdefinitions"] = definitions
    replaces = options.replaces_name(project.name)
    if replaces is not None:
        spec["replaces"] = replaces
    return {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": csv_name(project.name, options.version),
            "annotations": {
                "alm-examples": json.dumps(samples(target), indent=2),
                "capabilities": "Basic Install",
                "containerImage": image,
                "description": summary,
                "operatorframework.io/suggested-namespace": target.namespace,
            },
        },
        "spec": spec,
    }


# --- the bundle ---------------------------------------------------------------------------------


def csv_file(target: Target) -> str:
    """The CSV's path inside the bundle."""
    return f"manifests/{target.name}.clusterserviceversion.yaml"


def bundle_annotations(target: Target, options: BundleOptions) -> dict[str, str]:
    """metadata/annotations.yaml's annotations, and the bundle image's labels."""
    return {
        "operators.operatorframework.io.bundle.mediatype.v1": MEDIA_TYPE,
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": target.name,
        "operators.operatorframework.io.bundle.channels.v1": ",".join(options.channels),
        "operators.operatorframework.io.bundle.channel.default.v1": options.channels[0],
    }


def bundle_command(target: Target, options: BundleOptions) -> str:
    """The command line that writes this bundle (named in its files)."""
    command = f"{COMMAND} bundle {target.select} --version {options.version}"
    if options.replaces is not None:
        command += f" --replaces {options.replaces}"
    if options.channels != (DEFAULT_CHANNEL,):
        command += f" --channel {','.join(options.channels)}"
    if options.image is not None:
        command += f" --image {options.image}"
    return command


def dockerfile(target: Target, options: BundleOptions) -> str:
    """bundle.Dockerfile: the bundle image, its labels the annotations."""
    labels = "".join(f"LABEL {key}={value}\n" for key, value in bundle_annotations(target, options).items())
    return (
        header(
            target,
            "The bundle image (build from this directory: docker build -f bundle.Dockerfile .).",
            command=bundle_command(target, options),
        )
        + "FROM scratch\n"
        + labels
        + "COPY manifests /manifests/\nCOPY metadata /metadata/\n"
    )


def bundle_files(target: Target, options: BundleOptions) -> dict[str, str]:
    """Path inside the bundle -> text (BundleError when the options cannot make one)."""
    options.validate(target.name)
    command = bundle_command(target, options)
    files = {
        csv_file(target): header(
            target, f"The ClusterServiceVersion of {target.name} {options.version}.", command=command
        )
        + _yaml(cluster_service_version(target, options))
    }
    files.update(
        {
            f"manifests/{name}": text
            for name, text in crd_files(target).items()
            if name != "kustomization.yaml"
        }
    )
    files["metadata/annotations.yaml"] = header(
        target, "The bundle's package and channels (the bundle image's labels too).", command=command
    ) + _yaml({"annotations": bundle_annotations(target, options)})
    files["bundle.Dockerfile"] = dockerfile(target, options)
    return files


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the description, alm-examples' JSON) as literal blocks."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _represent_str)


def _yaml(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)


def write_bundle(directory: Path, files: Mapping[str, str]) -> list[Path]:
    """Write ``files`` under ``directory``; the paths that changed."""
    return write_changed(directory, files)


def parse_channels(text: str) -> tuple[str, ...]:
    """``--channel``'s comma-separated names."""
    return tuple(part.strip() for part in text.split(",") if part.strip())
