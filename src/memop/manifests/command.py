"""``memop manifests``: a project's manifests, generated from its code.

The project is ``--controller-module MODULE[:ATTRIBUTE]``, else the installed one ``--project
NAME`` names, else the project made by ``memop init`` whose folder the command runs in
(:func:`surrounding_project`: installed or not, its files under the project's root), else the
one ``memop`` would run (:func:`memop.project.select_project`: the only installed project that
is not memop's, else memop's own).

- ``memop manifests`` writes every file of the project's ``manifests/`` (``--dir``), as
  :mod:`memop.manifests.layout` lists them, each file's header naming the project's command
  (the same whichever form selected the project: :func:`memop.manifests.target.selection`);
  a file already holding its text is left alone. memop's own ``manifests/`` is this output (a
  test keeps them equal).
- ``memop manifests crd`` writes only ``manifests/crd`` (``--dir``: that directory); ``--print``
  prints the CRDs as one YAML stream instead.
- ``memop manifests rbac`` prints the objects of ``manifests/rbac``.
- ``memop manifests roles NS [NS ...]`` prints a Role and a RoleBinding in each namespace, for
  an install that watches those (see manifests/namespaced/multi).
- ``memop manifests bundle --version V [--replaces PREVIOUS] [--channel stable] [--image I]``
  writes an Operator Lifecycle Manager bundle of version V into ``bundle/`` (``--dir``): see
  :mod:`memop.manifests.olm`. Nothing else is read from the current directory.

Bad input (an unknown project or module, a flag the target does not take, an invalid
namespace, version or channel, a controller's RBAC rule that Kubernetes would refuse or ignore:
see :func:`memop.runtime.api.permissions.rule_problem`) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path
from typing import TextIO

from memop.manifests import crds, olm, rbac
from memop.manifests.layout import DEFAULT_DIR, manifest_files
from memop.manifests.target import Target, selection, write_changed
from memop.project import ProjectError, select_project

ALL = "all"
TARGETS = (ALL, "crd", "rbac", "roles", "bundle")
DEFAULT_DIRS = {ALL: Path(DEFAULT_DIR), "crd": Path(DEFAULT_DIR) / "crd", "bundle": Path("bundle")}
BUNDLE_FLAGS = ("version", "replaces", "channel", "image")
EXIT_USAGE = 2


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the ``manifests`` subcommand on a parser's subparsers."""
    parser = subparsers.add_parser(
        "manifests",
        help="write or print a project's generated manifests and exit",
        description=(
            "Write or print the manifests generated from a project's code: every file of "
            "manifests/ by default."
        ),
    )
    parser.add_argument(
        "target",
        nargs="?",
        default=ALL,
        choices=TARGETS,
        help=(
            "all (the default): write every file of manifests/; crd: write manifests/crd; rbac: print "
            "manifests/rbac's objects; roles NS...: print a Role and RoleBinding in each namespace; "
            "bundle: write an OLM bundle"
        ),
    )
    parser.add_argument("namespaces", nargs="*", metavar="NS", help="roles: the watched namespaces")
    select = parser.add_mutually_exclusive_group()
    select.add_argument(
        "--project", dest="project_name", metavar="NAME", help="an installed project, by name"
    )
    select.add_argument(
        "--controller-module",
        metavar="MODULE[:ATTRIBUTE]",
        help="a module holding the project (PROJECT, DEFINITION or DEFINITIONS by default)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help=", ".join(f"{name}: {path}" for name, path in DEFAULT_DIRS.items()) + " (the directory written)",
    )
    parser.add_argument("--print", action="store_true", help="crd: print the CRDs instead of writing them")
    parser.add_argument("--version", help="bundle: the version of the ClusterServiceVersion (required)")
    parser.add_argument("--replaces", help="bundle: the version (or CSV name) this one upgrades")
    parser.add_argument(
        "--channel", help=f"bundle: comma-separated channels, the first the default ({olm.DEFAULT_CHANNEL})"
    )
    parser.add_argument("--image", help="bundle: the operator image (default: the project's, tagged VERSION)")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Carry out ``memop manifests``; the exit status."""
    out = out or sys.stdout
    name: str = args.target
    mistake = _misused_flags(args)
    if mistake:
        return _usage_error(mistake)
    try:
        module = getattr(args, "controller_module", None)
        name_given = getattr(args, "project_name", None)
        if module is None and name_given is None:
            found = surrounding_project(Path.cwd())
            if found is not None:
                # Its manifests/ (and bundle/) are at the project's root, from any folder in it.
                module, root = found
                if args.dir is None and name in DEFAULT_DIRS:
                    args.dir = root / DEFAULT_DIRS[name]
        project = select_project(name_given, module)
    except ProjectError as error:
        return _usage_error(str(error))
    target = Target(project, selection(project, module))
    try:
        target.rules  # noqa: B018 - merging checks every rule: refuse a bad one before writing anything
    except rbac.RuleError as error:
        return _usage_error(str(error))
    if name == "bundle":
        return _bundle(target, args, out)
    if name == "rbac":
        out.write(rbac.rbac_yaml(target))
    elif name == "roles":
        return _roles(target, args.namespaces, out)
    elif name == "crd" and args.print:
        files = crds.crd_files(target)
        out.write("---\n".join(text for file, text in files.items() if file != "kustomization.yaml"))
    elif name == "crd":
        _write(args.dir or DEFAULT_DIRS["crd"], crds.crd_files(target), out)
    else:
        _write(args.dir or DEFAULT_DIRS[ALL], manifest_files(target), out)
    return 0


def surrounding_project(start: Path) -> tuple[str, Path] | None:
    """``PACKAGE.project:PROJECT`` and the root folder of the project made by ``memop init`` that
    ``start`` is in (the nearest pyproject.toml up from it has a ``[tool.memop]`` table), with its
    ``src/`` put on ``sys.path`` so it imports without being installed; None outside such a
    project.

    So ``memop manifests`` run in a project's folder describes that project, installed or not,
    rather than the only installed one (memop's own, when the project is not installed).
    ProjectError when the table is there but names no package."""
    for folder in (start, *start.parents):
        pyproject = folder / "pyproject.toml"
        if not pyproject.is_file():
            continue
        try:
            table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("memop")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
            return None
        if not isinstance(table, dict):
            return None
        package = table.get("package")
        if not isinstance(package, str) or not package.isidentifier():
            raise ProjectError(f'{pyproject}: [tool.memop] names no package (package = "...")')
        source = str(folder / "src")
        if (folder / "src" / package).is_dir() and source not in sys.path:
            sys.path.insert(0, source)
        return f"{package}.project:PROJECT", folder
    return None


def _misused_flags(args: argparse.Namespace) -> str:
    """What is wrong with the flags given for this target, or ""."""
    name = args.target
    given = [f"--{flag}" for flag in BUNDLE_FLAGS if getattr(args, flag) is not None]
    if name != "bundle" and given:
        return f"{', '.join(given)}: only used with 'memop manifests bundle'"
    if args.print and name != "crd":
        return "--print is only used with 'memop manifests crd'"
    if args.dir is not None and name not in DEFAULT_DIRS:
        return f"--dir: 'memop manifests {name}' prints, it writes no directory"
    if args.namespaces and name != "roles":
        return f"unexpected argument {args.namespaces[0]!r}: only 'memop manifests roles' takes namespaces"
    if name == "roles" and not args.namespaces:
        return "roles: name the watched namespaces, such as: memop manifests roles team-a team-b"
    if name == "bundle" and args.version is None:
        return "--version is required (the bundle's version, such as 0.1.0)"
    return ""


def _roles(target: Target, namespaces: list[str], out: TextIO) -> int:
    from memop.cli.options import parse_namespaces  # noqa: PLC0415 - the run command's own check

    try:
        watched = parse_namespaces(",".join(namespaces))
    except ValueError as error:
        return _usage_error(str(error))
    out.write(rbac.roles_yaml(target, watched))
    return 0


def _bundle(target: Target, args: argparse.Namespace, out: TextIO) -> int:
    options = olm.BundleOptions(
        version=args.version,
        replaces=args.replaces,
        channels=olm.parse_channels(args.channel if args.channel is not None else olm.DEFAULT_CHANNEL),
        image=args.image,
    )
    try:
        files = olm.bundle_files(target, options)
    except olm.BundleError as error:
        return _usage_error(str(error))
    _write(args.dir or DEFAULT_DIRS["bundle"], files, out)
    return 0


def _write(directory: Path, files: dict[str, str], out: TextIO) -> None:
    for path in write_changed(directory, files):
        out.write(f"wrote {path}\n")


def _usage_error(message: str) -> int:
    print(f"memop manifests: error: {message}", file=sys.stderr)
    return EXIT_USAGE
