"""A project: the operator one memop process runs, and that one set of manifests describes.

memop's own three controllers are the project ``memop`` (:mod:`memop.builtin`); a user's
operator is a project of its own, built the same way. A project is found as Python finds
plugins, through the entry-point group ``memop.controllers``::

    [project.entry-points."memop.controllers"]
    configmapsync = "configmapsync.project:PROJECT"

An entry point's value is a :class:`Project`, or a
:class:`~memop.runtime.controller.definition.ControllerDefinition`: the definitions a
distribution exposes without a Project make a project named after the distribution. A module
that is not installed is named with ``--controller-module MODULE[:ATTRIBUTE]`` instead (imported
from the current directory or ``PYTHONPATH``); without an attribute, the module's ``PROJECT``,
else its ``DEFINITION``, else its ``DEFINITIONS``.

Which project a process runs (:func:`select_project`): the one ``--controller-module`` names;
else the installed one ``--project`` names; else the only installed project that is not
memop's; else memop's own. So a project that installs its own controllers never starts
memop's three unless asked (``--project memop``).

Everything wrong here is a :class:`ProjectError` whose message is the one line to print.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import Any

from memop.runtime.api.validation import is_dns1123_label, is_dns1123_subdomain
from memop.runtime.controller.definition import ControllerDefinition

ENTRY_POINT_GROUP = "memop.controllers"
BUILTIN = "memop"

_DEFAULT_ATTRIBUTES = ("PROJECT", "DEFINITION", "DEFINITIONS")


class ProjectError(ValueError):
    """A project cannot be found, loaded or accepted; the message is one line for the user."""


@dataclass(frozen=True)
class Project:
    """An operator: its controllers, and the names everything around them takes.

    name: a DNS-1123 label. It names the process in logs (``starting NAME``), the user agent
        (``NAME/VERSION``), the manifests' objects (``NAME-controller-manager``...) and their
        ``app.kubernetes.io/name`` label.
    domain: the API domain (Kubebuilder's ``--domain``); with ``name``, the default Lease.
    controllers: the project's controllers, in the order they are set up; names unique.
    version: the operator's version (the image tag and the OLM bundle's by default).
    description: one line, for ``--help`` and the bundle.
    leader_election_id: the Lease (or leader-for-life ConfigMap) name; default
        ``NAME-leader.DOMAIN``.
    namespace: where the manifests install the operator; default ``NAME-system``.
    image: the operator image the manifests run; default ``NAME:VERSION``.
    """

    name: str
    domain: str
    controllers: tuple[ControllerDefinition, ...]
    version: str = "0.1.0"
    description: str = ""
    leader_election_id: str = ""
    namespace: str = ""
    image: str = ""
    # Where it came from, for messages: an entry point's distribution or a module's name.
    origin: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "controllers", tuple(self.controllers))
        if not self.leader_election_id:
            object.__setattr__(self, "leader_election_id", f"{self.name}-leader.{self.domain}")
        if not self.namespace:
            object.__setattr__(self, "namespace", f"{self.name}-system")
        if not self.image:
            object.__setattr__(self, "image", f"{self.name}:{self.version}")
        self.validate()

    def validate(self) -> None:
        """Raise ProjectError naming the first thing a Kubernetes cluster or memop would refuse."""
        where = f" ({self.origin})" if self.origin else ""
        if not isinstance(self.name, str) or not is_dns1123_label(self.name):
            raise ProjectError(
                f"project name {self.name!r}{where} is not a DNS-1123 label (lower-case letters, digits "
                "and '-', at most 63 characters)"
            )
        if not is_dns1123_subdomain(self.domain or ""):
            raise ProjectError(
                f"project {self.name}{where}: domain {self.domain!r} is not a DNS-1123 subdomain"
            )
        if not is_dns1123_subdomain(self.leader_election_id):
            raise ProjectError(
                f"project {self.name}{where}: leader election id {self.leader_election_id!r} is not a "
                "DNS-1123 subdomain"
            )
        if not is_dns1123_label(self.namespace):
            raise ProjectError(
                f"project {self.name}{where}: namespace {self.namespace!r} is not a DNS-1123 label"
            )
        if not self.controllers:
            raise ProjectError(f"project {self.name}{where} has no controllers")
        seen: set[str] = set()
        for definition in self.controllers:
            if not isinstance(definition, ControllerDefinition):
                raise ProjectError(
                    f"project {self.name}{where}: {definition!r} is not a memop.runtime.ControllerDefinition"
                )
            if not is_dns1123_label(definition.name):
                raise ProjectError(
                    f"project {self.name}{where}: controller name {definition.name!r} is not a DNS-1123 label"
                )
            if definition.name in seen:
                raise ProjectError(
                    f"project {self.name}{where}: two controllers are named {definition.name!r}"
                )
            seen.add(definition.name)

    def controller(self, name: str) -> ControllerDefinition:
        """The controller called ``name``; KeyError when there is none."""
        for definition in self.controllers:
            if definition.name == name:
                return definition
        raise KeyError(name)

    @property
    def controller_names(self) -> tuple[str, ...]:
        return tuple(definition.name for definition in self.controllers)


def project_name(text: str) -> str:
    """A distribution or module name as a DNS-1123 label: ``ConfigMap_Sync`` → ``configmap-sync``."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return name[:63].rstrip("-") or "operator"


def _as_project(value: Any, origin: str, default_name: str, version: str = "0.1.0") -> Project:
    """A Project from what an entry point or module attribute holds."""
    if isinstance(value, Project):
        return value if value.origin else replace(value, origin=origin)
    definitions: Sequence[Any]
    if isinstance(value, ControllerDefinition):
        definitions = (value,)
    elif isinstance(value, list | tuple) and value:
        definitions = value
    else:
        raise ProjectError(
            f"{origin}: {type(value).__name__} is neither a memop.Project nor a "
            "memop.runtime.ControllerDefinition"
        )
    for definition in definitions:
        if not isinstance(definition, ControllerDefinition):
            raise ProjectError(
                f"{origin}: {type(definition).__name__} is not a memop.runtime.ControllerDefinition"
            )
    try:
        made = Project(
            name=project_name(default_name),
            domain="example.com",
            controllers=tuple(definitions),
            version=version,
        )
    except ProjectError as error:  # two controllers with one name, a name Kubernetes refuses...
        raise ProjectError(f"{origin}: {error}") from None
    return replace(made, origin=origin)


def load_module(spec: str, origin: str | None = None) -> Project:
    """The project of ``--controller-module MODULE[:ATTRIBUTE]``. ``origin`` is how messages
    name the setting (default ``--controller-module SPEC``)."""
    module_name, _, attribute = spec.strip().partition(":")
    origin = origin or f"--controller-module {spec}"
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise ProjectError(f"{origin}: expected MODULE[:ATTRIBUTE], such as myoperator.project:PROJECT")
    # The current directory first, as uvicorn and gunicorn do for their app modules: the
    # ``memop`` console script does not put it on sys.path (``python -m memop`` does).
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ProjectError as error:  # the module's own Project(...) refused: already one line
        raise ProjectError(f"{origin}: {error}") from None
    except ModuleNotFoundError as error:
        if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
            raise ProjectError(
                f"{origin}: no module named {error.name!r} (not in the current directory nor on PYTHONPATH)"
            ) from None
        raise ProjectError(f"{origin}: importing {module_name} failed: {error}") from None
    except Exception as error:  # the user's module raised while importing: one line, no traceback
        raise ProjectError(
            f"{origin}: importing {module_name} failed: {type(error).__name__}: {error}"
        ) from None
    names = (attribute,) if attribute else _DEFAULT_ATTRIBUTES
    for name in names:
        if hasattr(module, name):
            return _as_project(getattr(module, name), origin, module_name.split(".")[0])
    raise ProjectError(f"{origin}: module {module_name} has no {' / '.join(names)}")


def module_attribute(spec: str) -> str:
    """``MODULE:ATTRIBUTE`` of a ``--controller-module`` spec that :func:`load_module` loaded:
    the attribute it took when the spec names none (``pkg.project`` -> ``pkg.project:PROJECT``),
    so the two spellings of one project are one string."""
    module_name, _, attribute = spec.strip().partition(":")
    if not attribute:
        module = sys.modules.get(module_name)
        attribute = next((name for name in _DEFAULT_ATTRIBUTES if hasattr(module, name)), "")
    return f"{module_name}:{attribute}" if attribute else module_name


def installed_module(name: str) -> str:
    """``MODULE:ATTRIBUTE`` of the one entry point that installs the project called ``name``
    (a scaffolded project's ``NAME = "PACKAGE.project:PROJECT"``), or "" when no installed
    distribution exposes it through a single entry point."""
    for dist, entry_points in _entry_points_by_distribution().items():
        if len(entry_points) != 1:
            continue
        try:
            project = _distribution_project(dist, entry_points)
        except ProjectError:  # another distribution's problem, not this project's
            continue
        if project.name == name:
            return entry_points[0].value.replace(" ", "")
    return ""


def _entry_points_by_distribution() -> dict[str, list[metadata.EntryPoint]]:
    by_distribution: dict[str, list[metadata.EntryPoint]] = {}
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = entry_point.dist.name if entry_point.dist is not None else entry_point.module
        by_distribution.setdefault(dist, []).append(entry_point)
    return by_distribution


def installed_projects() -> dict[str, Project]:
    """Every project installed through the ``memop.controllers`` entry-point group, by name."""
    projects: dict[str, Project] = {}
    for dist, entry_points in _entry_points_by_distribution().items():
        project = _distribution_project(dist, entry_points)
        if project.name in projects:
            raise ProjectError(
                f"two installed projects are named {project.name!r} ({projects[project.name].origin}, "
                f"{project.origin})"
            )
        projects[project.name] = project
    return projects


def _distribution_project(dist: str, entry_points: Iterable[metadata.EntryPoint]) -> Project:
    values: list[Any] = []
    for entry_point in entry_points:
        origin = f"entry point {entry_point.name} = {entry_point.value} ({dist})"
        try:
            values.append((origin, entry_point.load()))
        except ProjectError as error:
            raise ProjectError(f"{origin}: {error}") from None
        except Exception as error:  # a broken plugin: one line naming it
            raise ProjectError(f"{origin}: loading failed: {type(error).__name__}: {error}") from None
    projects = [(origin, value) for origin, value in values if isinstance(value, Project)]
    if projects:
        if len(values) > 1:
            raise ProjectError(
                f"distribution {dist} exposes a Project and other entry points in {ENTRY_POINT_GROUP}: "
                "expose the Project alone"
            )
        return _as_project(projects[0][1], projects[0][0], dist)
    definitions: list[Any] = []
    for origin, value in values:
        definitions += list(_as_project(value, origin, dist).controllers)
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        version = "0.1.0"
    return _as_project(tuple(definitions), f"distribution {dist}", dist, version)


def select_project(
    name: str | None = None,
    module: str | None = None,
    installed: dict[str, Project] | None = None,
    *,
    name_origin: str = "--project",
    module_origin: str | None = None,
) -> Project:
    """The project to run or describe: see the module's docstring for the rule.

    ``installed`` defaults to :func:`installed_projects`; ``name_origin`` and ``module_origin``
    are how messages name the two settings (a flag, or the variable it came from).
    """
    if module:
        return load_module(module, module_origin)
    projects = installed_projects() if installed is None else installed
    if name:
        if name not in projects:
            known = ", ".join(sorted(projects)) or "none"
            raise ProjectError(f"{name_origin}: no installed project {name!r} (installed: {known})")
        return projects[name]
    others = sorted(n for n in projects if n != BUILTIN)
    if len(others) == 1:
        return projects[others[0]]
    if len(others) > 1:
        raise ProjectError(f"several projects are installed ({', '.join(others)}): choose one with --project")
    if BUILTIN in projects:
        return projects[BUILTIN]
    from memop.builtin import PROJECT  # noqa: PLC0415 - memop run from a tree that is not installed

    return PROJECT
