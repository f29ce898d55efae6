"""``memop create api``: a controller package for a new kind, registered in the project.

In a project made by ``memop init`` (its ``pyproject.toml`` has ``[tool.memop]``; run from its
folder or any folder inside it), ``memop create api --group G --version V --kind K`` writes
``src/PKG/<kind>/`` (``api.py``: the kind's typed spec and status, from which its CRD, schema
and validation come; ``controller.py``: the children it should have, its status fields and its
validating webhook, declared with ``declarative_controller``; ``__init__.py``: the
``DEFINITION``), its unit tests and an end-to-end test, and registers the definition in
``src/PKG/project.py`` on the lines marked ``+memop:scaffold``. With ``--imperative`` it writes
the reconciler by hand instead (``api.py`` with a parser and a schema, ``desired.py``,
``status.py``, ``controller.py``: read the cache, create or patch each child), as memop's own
operators are written.

The API group is ``G.DOMAIN`` (Kubebuilder's rule). Refused, each with one line and nothing
written: names Kubernetes would refuse (see :mod:`memop.scaffold.names`), a kind whose package
or files exist already, and a ``project.py`` without its markers.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from memop.runtime.api import validation
from memop.scaffold import names
from memop.scaffold.files import NewFile
from memop.scaffold.names import ScaffoldError
from memop.scaffold.render import natural_key, render_template

IMPORTS_MARKER = "# +memop:scaffold:imports"
CONTROLLERS_MARKER = "# +memop:scaffold:controllers"
PROJECT_FILE = "src/{package}/project.py"

# The declarative style (the default; templates under templates/declarative) -> path in the project.
_DECLARATIVE_FILES: tuple[tuple[str, str], ...] = (
    ("__init__.py", "src/{package}/{module}/__init__.py"),
    ("api.py", "src/{package}/{module}/api.py"),
    ("controller.py", "src/{package}/{module}/controller.py"),
    ("test_unit.py", "tests/test_{module}.py"),
    ("test_e2e.py", "tests/test_{module}_e2e.py"),
)

# The imperative style (``--imperative``; templates under templates/api) -> path in the project.
_IMPERATIVE_FILES: tuple[tuple[str, str], ...] = (
    ("__init__.py", "src/{package}/{module}/__init__.py"),
    ("api.py", "src/{package}/{module}/api.py"),
    ("desired.py", "src/{package}/{module}/desired.py"),
    ("status.py", "src/{package}/{module}/status.py"),
    ("controller.py", "src/{package}/{module}/controller.py"),
    ("test_unit.py", "tests/test_{module}.py"),
    ("test_e2e.py", "tests/test_{module}_e2e.py"),
)


@dataclass(frozen=True)
class ApiOptions:
    """What ``memop create api`` was asked for."""

    group: str
    version: str
    kind: str
    namespaced: bool = True
    plural: str | None = None
    # The reconciler written by hand (read, compare, create or patch each child) instead of
    # declared children.
    imperative: bool = False


@dataclass(frozen=True)
class ProjectConfig:
    """``[tool.memop]`` of the project's pyproject.toml."""

    name: str
    domain: str
    package: str


@dataclass(frozen=True)
class ApiNames:
    """The checked names of a new kind and of the code generated for it."""

    group: str  # the full group, GROUP.DOMAIN
    group_prefix: str  # GROUP as given
    version: str
    kind: str
    plural: str
    module: str  # the kind's package, and its controller's name: the kind in lower case
    resource: str  # the Python constant naming the Resource
    namespaced: bool


def project_root(start: Path) -> Path:
    """The project ``start`` is in: the nearest folder from ``start`` up holding a
    pyproject.toml (``start`` itself when none does, for :func:`read_config` to refuse)."""
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    return start


def read_config(root: Path) -> ProjectConfig:
    """The project's ``[tool.memop]``; ScaffoldError when this is not a memop project."""
    path = root / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScaffoldError(
            "no pyproject.toml here: run memop create api in a project made by memop init"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ScaffoldError(f"pyproject.toml cannot be read: {error}") from None
    table = data.get("tool", {}).get("memop")
    if not isinstance(table, dict):
        raise ScaffoldError(
            "pyproject.toml has no [tool.memop] table: run memop create api in a project made by memop init"
        )
    try:
        config = ProjectConfig(str(table["project"]), str(table["domain"]), str(table["package"]))
    except KeyError as missing:
        raise ScaffoldError(f"[tool.memop] in pyproject.toml has no {missing.args[0]!r}") from None
    names.check_domain(config.domain)
    names.check_package(config.package)
    return config


def resolve(config: ProjectConfig, options: ApiOptions) -> ApiNames:
    """The kind's names, checked (ScaffoldError naming what Kubernetes would refuse)."""
    group = names.check_group(options.group, config.domain)
    version = names.check_version(options.version)
    kind = names.check_kind(options.kind)
    if options.plural is None:
        plural = names.default_plural(kind)
        try:
            names.check_plural(plural, kind, group)
        except ScaffoldError:
            raise ScaffoldError(
                f"--kind {kind!r}: its plural {plural!r} is not a DNS-1035 label of at most "
                f"{validation.LABEL_MAX} characters (nor, with the group, a CRD name): give --plural"
            ) from None
    else:
        plural = names.check_plural(options.plural, kind, group)
    module = kind.lower()
    return ApiNames(
        group, options.group, version, kind, plural, module, names.constant_name(plural), options.namespaced
    )


def register(source: str, package: str, module: str) -> str:
    """``project.py``'s text with the kind's package imported and its DEFINITION listed, on the
    lines marked ``+memop:scaffold``; ScaffoldError when a marker is missing or the kind is
    registered already."""
    where = PROJECT_FILE.format(package=package)
    lines = source.splitlines(keepends=True)
    markers = {}
    for marker in (IMPORTS_MARKER, CONTROLLERS_MARKER):
        found = [i for i, line in enumerate(lines) if line.strip() == marker]
        if len(found) != 1:
            state = "no" if not found else "more than one"
            raise ScaffoldError(
                f"{where} has {state} line {marker!r}: memop create api adds the new controller above it "
                "(see that file's docstring); put it back once"
            )
        markers[marker] = found[0]
    statement = f"import {package}.{module}"
    if any(line.strip() == statement for line in lines):
        raise ScaffoldError(f"{where} imports {package}.{module} already")

    def add_controller(at: int) -> None:
        indent = re.match(r"[ \t]*", lines[at])
        lines.insert(at, f"{indent.group(0) if indent else ''}{package}.{module}.DEFINITION,\n")

    def add_import(at: int) -> None:
        # Among the project's own controller imports above the marker, sorted as isort sorts
        # them, with the blank line isort wants between them and the marker's comment.
        end = at - 1 if at > 0 and not lines[at - 1].strip() else at
        start = end
        while start > 0 and lines[start - 1].startswith(f"import {package}."):
            start -= 1
        if start == end:  # the first: a section of its own
            lines[at:at] = [statement + "\n", "\n"]
            return
        block = sorted([*lines[start:end], statement + "\n"], key=lambda line: natural_key(line.strip()))
        lines[start:at] = [*block, "\n"]

    # The lower marker first, so that the other's index stays right.
    edits = [(markers[IMPORTS_MARKER], add_import), (markers[CONTROLLERS_MARKER], add_controller)]
    for at, edit in sorted(edits, key=lambda item: item[0], reverse=True):
        edit(at)
    return "".join(lines)


def plan(root: Path, options: ApiOptions) -> tuple[ApiNames, list[NewFile], str]:
    """The kind's names, the files to create and ``project.py``'s new text (nothing written)."""
    config = read_config(root)
    api = resolve(config, options)
    package = config.package
    for existing in (f"src/{package}/{api.module}", f"src/{package}/{api.module}.py"):
        if (root / existing).exists():
            raise ScaffoldError(
                f"{existing} exists already: the kind {api.kind} (or a module of its name) is there"
            )
    project_file = root / PROJECT_FILE.format(package=package)
    try:
        project_source = project_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScaffoldError(
            f"{PROJECT_FILE.format(package=package)} is missing: memop init writes it"
        ) from None
    registered = register(project_source, package, api.module)
    values = {
        "name": config.name,
        "package": package,
        "module": api.module,
        "kind": api.kind,
        "group": api.group,
        "version": api.version,
        "plural": api.plural,
        "singular": api.module,
        "resource": api.resource,
        "sample_file": f"{api.group_prefix}_{api.version}_{api.module}.yaml",
    }
    flags = {"namespaced": api.namespaced}
    if options.imperative:
        folder, templates = "api", _IMPERATIVE_FILES
    else:
        folder, templates = "declarative", _DECLARATIVE_FILES
    files = [
        NewFile(
            path.format(package=package, module=api.module),
            render_template(f"{folder}/{template}", values, flags),
        )
        for template, path in templates
    ]
    return api, files, registered
