"""``memop init``: a new operator project in a folder.

It writes (never over an existing file: it refuses, naming the file, before writing any) a
``pyproject.toml`` depending on memop, with the project registered in the ``memop.controllers``
entry-point group and its settings for pytest, mypy and ruff; the package ``src/PKG`` with its
``project.py`` (the :class:`memop.Project`, whose controllers ``memop create api`` adds), its
``__main__`` (``python -m PKG`` runs the operator) and ``py.typed``; ``tests/``, with
``tests/cluster_e2e/`` (the image deployed to a real cluster, skipped unless the environment
names one: :mod:`memop.testing.cluster_e2e`); a
``Dockerfile``; a README with the project's own run and test commands; a CI script
(``.ci/run``) and ``.gitignore``/``.dockerignore``. The dependency on memop is on the memop
that runs (:mod:`memop.scaffold.origin`): its version range when memop came from a package
index, else a direct reference to where it came from, and then ``wheels/`` too, where the
image takes memop's wheel from.

Whatever else the folder holds (``.git``, a LICENSE, notes) is left alone: a folder that is
already a Python project (``setup.py``, ``setup.cfg``) is refused. ``[tool.memop]`` in
``pyproject.toml`` records the project's name, domain and package for ``memop create api``, as
Kubebuilder's PROJECT file does.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from memop import __version__
from memop.runtime.api import validation
from memop.scaffold import names
from memop.scaffold.files import NewFile
from memop.scaffold.names import ScaffoldError
from memop.scaffold.origin import MemopOrigin, index_requirement, memop_origin
from memop.scaffold.render import render_template

DEFAULT_DOMAIN = "example.com"
# Another project's build files: init would make a second project over it.
FOREIGN_PROJECT_FILES = ("setup.py", "setup.cfg")

# template (under templates/init) -> path in the project ({{package}} filled in).
_FILES: tuple[tuple[str, str, bool], ...] = (
    ("pyproject.toml", "pyproject.toml", False),
    ("README.md", "README.md", False),
    ("Dockerfile", "Dockerfile", False),
    ("dockerignore", ".dockerignore", False),
    ("gitignore", ".gitignore", False),
    ("ci-run", ".ci/run", True),
    ("package/__init__.py", "src/{package}/__init__.py", False),
    ("package/__main__.py", "src/{package}/__main__.py", False),
    ("package/project.py", "src/{package}/project.py", False),
    ("package/py.typed", "src/{package}/py.typed", False),
    ("tests/test_project.py", "tests/test_project.py", False),
    # A folder of its own: run alone (pytest tests/cluster_e2e), against a real cluster.
    ("tests/test_in_cluster.py", "tests/cluster_e2e/test_in_cluster.py", False),
)
# Only when memop is not from a package index: the folder the image takes memop's wheel from.
_NOT_FROM_INDEX_FILES = (("wheels-README.md", "wheels/README.md", False),)


@dataclass(frozen=True)
class InitOptions:
    """What ``memop init`` was asked for; None: the default (see :func:`resolve`)."""

    project: str | None = None
    domain: str = DEFAULT_DOMAIN
    package: str | None = None
    owner: str = ""


@dataclass(frozen=True)
class ProjectNames:
    """The checked names of a new project."""

    name: str
    domain: str
    package: str
    owner: str


def resolve(root: Path, options: InitOptions) -> ProjectNames:
    """The project's names: ``--project`` or the folder's name; ``--package`` or the name with
    ``_`` for ``-``. Raises ScaffoldError naming what Kubernetes or Python would refuse."""
    if options.project is None:
        name = names.default_project_name(root.resolve().name)
        if not name:
            raise ScaffoldError(
                f"the folder's name {root.resolve().name!r} makes no project name: give --project"
            )
        try:
            names.check_project_name(name)
        except ScaffoldError:
            raise ScaffoldError(
                f"the folder's name makes the project name {name!r}, which is not a DNS-1123 label of at "
                f"most {validation.LABEL_MAX - len('-system')} characters: give --project"
            ) from None
    else:
        name = names.check_project_name(options.project)
    domain = names.check_domain(options.domain)
    package = names.check_package(options.package or names.default_package(name))
    lease = f"{name}-leader.{domain}"
    if not validation.is_dns1123_subdomain(lease):
        raise ScaffoldError(
            f"the project's Lease name {lease!r} would be over 253 characters: shorten --domain"
        )
    return ProjectNames(name, domain, package, names.check_owner(options.owner))


def _operator(name: str) -> str:
    """``widget`` → ``widget operator``; ``widget-operator`` stays as it is."""
    return name if name.endswith("operator") else f"{name} operator"


def plan(
    root: Path, options: InitOptions, origin: MemopOrigin | None = None
) -> tuple[ProjectNames, list[NewFile]]:
    """The project's names and the files ``memop init`` writes under ``root`` (nothing written),
    depending on memop from ``origin`` (default: where the running memop came from)."""
    origin = origin or memop_origin()
    for foreign in FOREIGN_PROJECT_FILES:
        if (root / foreign).exists():
            raise ScaffoldError(
                f"{foreign} exists: this folder is a Python project already; run memop init in a new one"
            )
    project = resolve(root, options)
    values = {
        "name": project.name,
        "domain": project.domain,
        "package": project.package,
        "operator": _operator(project.name),
        "description": f"The {_operator(project.name)}, built on memop",
        # A TOML basic string: JSON's escapes are TOML's, for text without control characters.
        "owner_toml": json.dumps(project.owner, ensure_ascii=False),
        "memop_requirement_toml": json.dumps(origin.requirement),
        "memop_requirement_shell": shlex.quote(origin.requirement),
        "memop_index_requirement": index_requirement(),
        "memop_where": origin.where,
        "memop_version": __version__,
    }
    flags = {"owner": bool(project.owner), "memop_from_index": origin.from_index}
    files = [
        NewFile(
            path.format(package=project.package),
            render_template(f"init/{template}", values, flags),
            executable,
        )
        for template, path, executable in (*_FILES, *(() if origin.from_index else _NOT_FROM_INDEX_FILES))
    ]
    return project, files
