"""``memop manifests bundle``: an Operator Lifecycle Manager bundle, from the code that makes the
plain manifests.

The bundle (operator-framework's ``registry+v1`` format) is a directory::

    manifests/memop.clusterserviceversion.yaml   the CSV
    manifests/<group>_<plural>.yaml              every CRD memop serves, byte-equal to manifests/crd
    metadata/annotations.yaml                    package, channels, media type
    bundle.Dockerfile                            the same as image labels (FROM scratch)

Nothing in the CSV is written twice, so it cannot disagree with the plain manifests:

- the install strategy is the Deployment of ``manifests/manager/manager.yaml``, read from the
  file, named and bound to its ServiceAccount as ``manifests/default`` names them
  (``memop-`` prefix), running image ``memop:<version>`` (or ``--image``), and with
  ``WATCH_NAMESPACE`` taken from the ``olm.targetNamespaces`` annotation OLM sets from the
  OperatorGroup (comma-separated, empty for all namespaces: what ``--watch-namespace`` takes);
- ``permissions`` are :data:`memop.manifests.rbac.RULES` of the watched scope and of the operator's own
  namespace (the Lease). OLM grants them as a Role in the operator's namespace, copies that Role
  into each target namespace, and makes them a ClusterRole for an AllNamespaces group: exactly
  manifests/namespaced, namespaced/multi and default. ``clusterPermissions`` holds what memop
  needs cluster-wide whatever the group, which without ``--metrics-secure`` is nothing: the key
  is left out rather than granting the watched rules everywhere;
- ``owned`` lists every CRD of every controller in :data:`memop.cli.controllers.ALL`, with a spec or
  status descriptor for each field of its schema, and ``alm-examples`` holds their samples
  (the objects of manifests/samples);
- ``installModes`` are all four, since ``WATCH_NAMESPACE`` takes one namespace, several, or none.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from memop.cli.controllers import ALL
from memop.manifests import rbac
from memop.runtime.api.permissions import Scope

PACKAGE = "memop"
MANAGER_YAML = Path("manifests/manager/manager.yaml")
CSV_FILE = f"manifests/{PACKAGE}.clusterserviceversion.yaml"
DEFAULT_CHANNEL = "alpha"
# CRDs with x-kubernetes-validations (CEL) rules: on by default since Kubernetes 1.25.
MIN_KUBE_VERSION = "1.25.0"
MEDIA_TYPE = "registry+v1"
WATCH_NAMESPACE_FIELD = "metadata.annotations['olm.targetNamespaces']"
INSTALL_MODES = ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")

DESCRIPTION = (
    "memop runs the operators of the Operator SDK and Kubebuilder tutorials, rebuilt in Python "
    "asyncio on a controller runtime of its own with controller-runtime's semantics: leader election, "
    "metrics with controller-runtime's names, Events and status conditions.\n\n"
    "Its controllers: {controllers}.\n\n"
    "Install it in one namespace, several, or all: the OperatorGroup's target namespaces become "
    "memop's WATCH_NAMESPACE.\n"
)
PROVIDER = {"name": "memop"}
# Placeholders to replace with the team that ships the bundle.
MAINTAINERS = ({"name": "memop maintainers", "email": "memop-maintainers@example.com"},)
LINKS = (
    {
        "name": "Operator SDK Go tutorial",
        "url": "https://sdk.operatorframework.io/docs/building-operators/golang/tutorial/",
    },
    {"name": "Kubebuilder", "url": "https://book.kubebuilder.io/"},
)
KEYWORDS = ("operator", "python", "asyncio", "controller-runtime")
# A memcached-ish stack of three slabs, drawn once: the CSV carries it base64-encoded.
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
    default; image: the operator image (``memop:<version>`` by default)."""

    version: str
    replaces: str | None = None
    channels: tuple[str, ...] = (DEFAULT_CHANNEL,)
    image: str | None = None

    def csv_name(self) -> str:
        return csv_name(self.version)

    def replaces_name(self) -> str | None:
        if self.replaces is None:
            return None
        return self.replaces if self.replaces.startswith(f"{PACKAGE}.v") else csv_name(self.replaces)

    def validate(self) -> None:
        """Raise BundleError, saying what is wrong, unless these options make a bundle."""
        if not SEMVER.match(self.version):
            raise BundleError(f"--version {self.version!r} is not a semantic version (such as 0.2.0)")
        previous = self.replaces_name()
        if previous is not None:
            old = previous.removeprefix(f"{PACKAGE}.v")
            if not SEMVER.match(old):
                raise BundleError(
                    f"--replaces {self.replaces!r}: expected a version or a CSV name such as "
                    f"{csv_name('0.1.0')}"
                )
            if _semver_key(old) >= _semver_key(self.version):
                raise BundleError(f"--replaces {self.replaces!r} must be older than --version {self.version}")
        if not self.channels or any(not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", c) for c in self.channels):
            raise BundleError(
                f"--channel {','.join(self.channels)!r}: expected channel names such as alpha,stable"
            )


def csv_name(version: str) -> str:
    return f"{PACKAGE}.v{version}"


def _semver_key(version: str) -> tuple[int, int, int, int, str]:
    """Order of two semantic versions (a pre-release sorts before its release)."""
    match = SEMVER.match(version)
    assert match is not None
    major, minor, patch, pre = match.groups()
    return int(major), int(minor), int(patch), 0 if pre else 1, pre or ""


# --- the CSV ---------------------------------------------------------------------------------------


def manager_deployment(manager_yaml: str, image: str) -> dict[str, Any]:
    """The CSV's deployment entry: manifests/manager's Deployment as manifests/default names it,
    running ``image``, watching the namespaces OLM's OperatorGroup targets."""
    deployment = yaml.safe_load(manager_yaml)
    if not isinstance(deployment, dict) or deployment.get("kind") != "Deployment":
        raise BundleError(f"{MANAGER_YAML} does not hold one Deployment")
    spec = copy.deepcopy(deployment["spec"])
    pod = spec["template"]["spec"]
    pod["serviceAccountName"] = rbac.PREFIX + pod["serviceAccountName"]
    [container] = [c for c in pod["containers"] if c["name"] == "manager"]
    container["image"] = image
    env = [v for v in container.get("env") or () if v.get("name") != "WATCH_NAMESPACE"]
    env.append({"name": "WATCH_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": WATCH_NAMESPACE_FIELD}}})
    container["env"] = env
    return {
        "name": rbac.PREFIX + deployment["metadata"]["name"],
        "label": dict(deployment["metadata"].get("labels") or {}),
        "spec": spec,
    }


def permissions(service_account: str) -> list[dict[str, Any]]:
    """The CSV's ``permissions``: the watched-scope rules and the Lease's (see the module doc)."""
    rules = rbac.policy_rules(Scope.WATCHED) + rbac.policy_rules(Scope.OPERATOR)
    return [{"serviceAccountName": service_account, "rules": rules}]


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


def owned_crds() -> list[dict[str, Any]]:
    """``customresourcedefinitions.owned``: each served version of every controller's CRDs."""
    owned = []
    for definition in ALL.values():
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


def samples() -> list[dict[str, Any]]:
    """Every controller's samples (the objects of manifests/samples), for ``alm-examples``."""
    return [sample for definition in ALL.values() for sample in definition.samples().values()]


def cluster_service_version(options: BundleOptions, manager_yaml: str) -> dict[str, Any]:
    """The ClusterServiceVersion of ``options.version``."""
    image = options.image or f"{PACKAGE}:{options.version}"
    deployment = manager_deployment(manager_yaml, image)
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    controllers = ", ".join(f"{name} ({definition.description})" for name, definition in ALL.items())
    spec: dict[str, Any] = {
        "displayName": PACKAGE,
        "description": DESCRIPTION.format(controllers=controllers),
        "version": options.version,
        "minKubeVersion": MIN_KUBE_VERSION,
        "maturity": options.channels[0],
        "provider": dict(PROVIDER),
        "maintainers": [dict(m) for m in MAINTAINERS],
        "links": [dict(link) for link in LINKS],
        "keywords": [*KEYWORDS, *ALL],
        "icon": [{"base64data": base64.b64encode(ICON_SVG.encode()).decode(), "mediatype": "image/svg+xml"}],
        "installModes": [{"type": mode, "supported": True} for mode in INSTALL_MODES],
        "install": {
            "strategy": "deployment",
            "spec": {"deployments": [deployment], "permissions": permissions(account)},
        },
        "customresourcedefinitions": {"owned": owned_crds()},
    }
    if options.replaces_name() is not None:
        spec["replaces"] = options.replaces_name()
    return {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": options.csv_name(),
            "annotations": {
                "alm-examples": json.dumps(samples(), indent=2),
                "capabilities": "Basic Install",
                "categories": "Developer Tools",
                "containerImage": image,
                "description": "The Operator SDK and Kubebuilder tutorials' operators, in Python asyncio",
                "operatorframework.io/suggested-namespace": rbac.NAMESPACE,
            },
        },
        "spec": spec,
    }


# --- the bundle ---------------------------------------------------------------------------------


def bundle_annotations(options: BundleOptions) -> dict[str, str]:
    """metadata/annotations.yaml's annotations, and the bundle image's labels."""
    return {
        "operators.operatorframework.io.bundle.mediatype.v1": MEDIA_TYPE,
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": PACKAGE,
        "operators.operatorframework.io.bundle.channels.v1": ",".join(options.channels),
        "operators.operatorframework.io.bundle.channel.default.v1": options.channels[0],
    }


def dockerfile(options: BundleOptions) -> str:
    labels = "".join(f"LABEL {key}={value}\n" for key, value in bundle_annotations(options).items())
    return (
        "# The bundle image (build from this directory: docker build -f bundle.Dockerfile .).\n"
        "FROM scratch\n" + labels + "COPY manifests /manifests/\nCOPY metadata /metadata/\n"
    )


def bundle_files(options: BundleOptions, manager_yaml: str, crd_files: Mapping[str, str]) -> dict[str, str]:
    """Path inside the bundle -> text. ``crd_files`` are manifests/crd's
    (memop.manifests.command.crd_files)."""
    options.validate()
    command = f"python -m memop manifests bundle --version {options.version}"
    if options.replaces is not None:
        command += f" --replaces {options.replaces}"
    header = f"# Generated by `{command}` from memop's code and manifests/manager: do not edit.\n"
    files = {CSV_FILE: header + _yaml(cluster_service_version(options, manager_yaml))}
    files.update(
        {f"manifests/{name}": text for name, text in crd_files.items() if name != "kustomization.yaml"}
    )
    files["metadata/annotations.yaml"] = _yaml({"annotations": bundle_annotations(options)})
    files["bundle.Dockerfile"] = dockerfile(options)
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
    return rbac.write_changed(directory, files)


def parse_channels(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())
