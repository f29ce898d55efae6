"""A custom resource kind's identity and CRD options, as the class keywords of a
:class:`~memop.runtime.api.model.CustomResource` declare them (Kubebuilder's markers).

``class WebApp(CustomResource, group="apps.example.com", version="v1")`` gives ``WebApp.kube``,
a :class:`KindInfo`: the group, version and kind, the plural and singular resource names
(defaulting as Kubebuilder's do: the kind lower-cased, and its plural), the scope, short names,
categories, printer columns (:class:`PrinterColumn`) and the scale subresource (:class:`Scale`).
Everything is checked when the class is defined, so a bad name is a ``TypeError`` at import,
not a CRD the API server refuses at install.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memop.runtime.api.crdgen import CrdNames, printer_column
from memop.runtime.api.validation import is_dns1035_label, is_dns1123_subdomain
from memop.runtime.client.resources import Resource

# The types kubectl knows for a printer column (apiextensions' validation of
# additionalPrinterColumns[].type).
COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]*")
_VERSION = re.compile(r"v[0-9]+((alpha|beta)[0-9]+)?")


@dataclass(frozen=True)
class PrinterColumn:
    """One ``kubectl get`` column (Kubebuilder's ``+kubebuilder:printcolumn``): its header,
    the JSONPath into the object (``.status.readyReplicas``), its type (one of
    :data:`COLUMN_TYPES`), a description, a format (``date-time``, ``int32``, ...) and a
    priority (above 0: shown with ``-o wide`` only)."""

    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0
    format: str = ""

    def __post_init__(self) -> None:
        if self.type not in COLUMN_TYPES:
            raise TypeError(
                f"printer column {self.name!r}: type {self.type!r} is not one of {', '.join(COLUMN_TYPES)}"
            )
        if not self.json_path.startswith("."):
            raise TypeError(
                f"printer column {self.name!r}: the JSONPath {self.json_path!r} must start with '.'"
            )

    def to_dict(self) -> dict[str, Any]:
        """The ``additionalPrinterColumns`` entry."""
        column = printer_column(
            self.name, self.json_path, self.type, self.description, priority=self.priority
        )
        if self.format:
            column["format"] = self.format
        return dict(sorted(column.items()))


@dataclass(frozen=True)
class Scale:
    """The scale subresource (Kubebuilder's ``+kubebuilder:subresource:scale``): where the
    desired and observed replica counts live, and where a serialized label selector of the
    pods is (for the HorizontalPodAutoscaler; ``None`` when the kind publishes none)."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``subresources.scale`` entry."""
        scale: dict[str, Any] = {}
        if self.label_selector_path:
            scale["labelSelectorPath"] = self.label_selector_path
        scale["specReplicasPath"] = self.spec_replicas_path
        scale["statusReplicasPath"] = self.status_replicas_path
        return scale


@dataclass(frozen=True)
class KindInfo:
    """What the API server and the CRD know a kind by (``WebApp.kube``)."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    scale: Scale | None = None

    @property
    def api_version(self) -> str:
        """``group/version``."""
        return f"{self.group}/{self.version}"

    @property
    def resource(self) -> Resource:
        """The runtime's name of the kind, for the client and the cache."""
        return Resource(self.group, self.version, self.plural, self.kind, namespaced=self.namespaced)

    @property
    def names(self) -> CrdNames:
        """The CRD's ``spec.names`` (for :mod:`memop.runtime.api.crdgen`)."""
        return CrdNames(
            self.group,
            self.version,
            self.kind,
            self.plural,
            self.singular,
            short_names=self.short_names,
            categories=self.categories,
            namespaced=self.namespaced,
        )


def kind_info(class_name: str, options: Mapping[str, Any]) -> KindInfo:
    """The KindInfo of a class named ``class_name`` declared with the class keywords
    ``options`` (``group`` and ``version`` required, the rest defaulted). Raises TypeError
    naming the class and the option for an unknown option or a value the API server would
    refuse in a CRD."""
    known = {
        "group", "version", "kind", "plural", "singular", "namespaced",
        "short_names", "categories", "printer_columns", "scale",
    }  # fmt: skip
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"{class_name}: unknown class option(s) {', '.join(unknown)}")
    if "group" not in options or "version" not in options:
        raise TypeError(f"{class_name}: a kind needs both group= and version=")
    kind = options.get("kind", class_name)
    singular = options.get("singular", str(kind).lower())
    info = KindInfo(
        group=options["group"],
        version=options["version"],
        kind=kind,
        plural=options.get("plural", pluralize(str(kind).lower())),
        singular=singular,
        namespaced=options.get("namespaced", True),
        short_names=_names(options.get("short_names", ())),
        categories=_names(options.get("categories", ())),
        printer_columns=tuple(_column(c) for c in options.get("printer_columns", ())),
        scale=options.get("scale"),
    )
    _check(class_name, info)
    return info


def _names(value: Iterable[str] | str) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _column(value: PrinterColumn | Mapping[str, Any]) -> PrinterColumn:
    if isinstance(value, PrinterColumn):
        return value
    renamed = {"jsonPath": "json_path"}
    return PrinterColumn(**{renamed.get(k, k): v for k, v in value.items()})


def _check(class_name: str, info: KindInfo) -> None:
    problems: list[str] = []
    if not isinstance(info.group, str) or "." not in info.group or not is_dns1123_subdomain(info.group):
        problems.append(f"group {info.group!r} must be a DNS subdomain with at least one dot")
    if not isinstance(info.version, str) or not _VERSION.fullmatch(info.version):
        problems.append(f"version {info.version!r} must look like v1, v1beta1 or v2alpha3")
    if not isinstance(info.kind, str) or not _KIND.fullmatch(info.kind):
        problems.append(f"kind {info.kind!r} must be CamelCase letters and digits")
    for option, name in (
        ("plural", info.plural),
        ("singular", info.singular),
        *(("short_names", n) for n in info.short_names),
        *(("categories", n) for n in info.categories),
    ):
        if not isinstance(name, str) or not is_dns1035_label(name):
            problems.append(f"{option}: {name!r} must be a lower-case DNS-1035 label")
    if not isinstance(info.namespaced, bool):
        problems.append("namespaced must be True or False")
    if info.scale is not None and not isinstance(info.scale, Scale):
        problems.append("scale must be a Scale")
    if problems:
        raise TypeError(f"{class_name}: " + "; ".join(problems))


# Kubebuilder pluralises a kind with flect (github.com/gobuffalo/flect): these are the rules and
# irregular words that matter for kind names.
_IRREGULAR = {
    "person": "people",
    "child": "children",
    "mouse": "mice",
    "goose": "geese",
    "foot": "feet",
    "tooth": "teeth",
    "index": "indices",
    "matrix": "matrices",
    "vertex": "vertices",
    "criterion": "criteria",
    "datum": "data",
    "quiz": "quizzes",
    "ox": "oxen",
}
_UNCOUNTABLE = {"data", "information", "equipment", "metadata", "series", "species", "news", "sheep", "fish"}


def pluralize(word: str) -> str:
    """The plural of a lower-case kind name the way Kubebuilder's resource scaffolding and
    controller-gen derive it: ``memcached`` → ``memcacheds``, ``policy`` → ``policies``,
    ``ingress`` → ``ingresses``, ``proxy`` → ``proxies``, ``status`` → ``statuses``."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word in _UNCOUNTABLE or word.endswith("data"):
        return word
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"
