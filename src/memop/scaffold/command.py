"""``memop init``, ``memop create api`` and ``memop create webhook``: the command line of the
scaffolding.

All work in the current folder. Every refusal (a name Kubernetes or Python would refuse, a
file that exists, a project.py without its markers, an unknown flag) is one line on stderr and
exit code 2, with nothing written. After ``create api`` and ``create webhook`` the project's
manifests are regenerated
with ``memop manifests`` (in a child process, which imports the project from ``src/``);
``--no-manifests`` skips that.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from memop.scaffold import newapi, newproject, newwebhook
from memop.scaffold.files import check_new, write_new
from memop.scaffold.names import ScaffoldError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (the rest of memop's command line does so)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memop", description="Scaffold an operator project of one's own.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    init = commands.add_parser(
        "init",
        help="make a new operator project in the current folder",
        description=(
            "Make a new operator project in the current folder: pyproject.toml, the package under src/, "
            "tests, a Dockerfile, a README and a CI script. Existing files are never overwritten."
        ),
    )
    init.add_argument(
        "--project", metavar="NAME", help="the project's name, a DNS-1123 label (default: the folder's)"
    )
    init.add_argument(
        "--domain",
        default=newproject.DEFAULT_DOMAIN,
        help=f"the domain of the project's API groups (default: {newproject.DEFAULT_DOMAIN})",
    )
    init.add_argument(
        "--package",
        "--repo",
        dest="package",
        metavar="PKG",
        help="the Python package (default: the project's name with _ for -)",
    )
    init.add_argument("--owner", default="", help="the project's author, for pyproject.toml")
    create = commands.add_parser("create", help="add to the project", description="Add to the project.")
    what = create.add_subparsers(dest="what", metavar="WHAT", required=True, parser_class=_Parser)
    api = what.add_parser(
        "api",
        help="a new kind and its controller",
        description=(
            "Add a kind (its CRD from code) and its controller to the project, with unit and end-to-end "
            "tests, registered in src/PKG/project.py. The API group is GROUP.DOMAIN."
        ),
    )
    api.add_argument("--group", required=True, help="the group, before the project's domain (such as cache)")
    api.add_argument("--version", required=True, help="the API version (v1, v1alpha1, v2beta3)")
    api.add_argument("--kind", required=True, help="the kind, UpperCamelCase (such as Memcached)")
    scope = api.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespaced",
        dest="namespaced",
        action="store_true",
        default=True,
        help="namespaced objects (default)",
    )
    scope.add_argument(
        "--cluster-scoped", dest="namespaced", action="store_false", help="cluster-scoped objects"
    )
    api.add_argument(
        "--plural", help="the resource's plural (default: the kind in lower case + s, es or ies)"
    )
    api.add_argument(
        "--imperative",
        action="store_true",
        help=(
            "write the reconciler by hand (read, compare, create or patch each child) instead of declaring "
            "the children (default: declared children, applied, repaired and pruned by memop)"
        ),
    )
    api.add_argument(
        "--no-manifests", dest="manifests", action="store_false", help="do not run memop manifests afterwards"
    )
    webhook = what.add_parser(
        "webhook",
        help="admission webhooks or a version conversion for a kind",
        description=(
            "Add admission webhooks (a defaulter, a validator) and/or a conversion to a new version for a "
            "kind made by memop create api, with their tests, wired into the kind's DEFINITION; memop "
            "manifests then writes the webhook configurations, Service, certificates and conversion."
        ),
    )
    webhook.add_argument("--kind", required=True, help="the kind, as given to memop create api")
    webhook.add_argument("--version", help="the kind's version (default: the one it has; checked when given)")
    webhook.add_argument(
        "--defaulting", action="store_true", help="a defaulter (mutating webhook), in <kind>/webhooks.py"
    )
    webhook.add_argument(
        "--validation", action="store_true", help="a validator (validating webhook), in <kind>/webhooks.py"
    )
    webhook.add_argument(
        "--conversion",
        action="store_true",
        help="serve a new version too, converted to and from the kind's (the hub), in <kind>/conversion.py",
    )
    webhook.add_argument(
        "--spoke-version",
        metavar="VERSION",
        help="--conversion: the new version (default: the next, v1alpha1 -> v1beta1 -> v1 -> v2)",
    )
    webhook.add_argument(
        "--no-manifests", dest="manifests", action="store_false", help="do not run memop manifests afterwards"
    )
    return parser


def main(argv: Sequence[str], root: Path | None = None) -> int:
    """Run ``memop init ...`` or ``memop create api ...`` (``argv`` starts with the command) in
    ``root`` (default: the current folder); returns the exit code."""
    try:
        args = build_parser().parse_args(list(argv))
    except SystemExit as done:  # --help, or a usage error already printed
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    root = Path.cwd() if root is None else root
    command = "memop init" if args.command == "init" else f"memop create {args.what}"
    try:
        if args.command == "init":
            return _init(root, args)
        if args.what == "webhook":
            return _create_webhook(root, args)
        return _create_api(root, args)
    except ScaffoldError as error:
        print(f"{command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE


def _init(root: Path, args: argparse.Namespace) -> int:
    options = newproject.InitOptions(args.project, args.domain, args.package, args.owner)
    project, files = newproject.plan(root, options)
    check_new(root, files)
    write_new(root, files)
    for new in files:
        print(f"wrote {new.path}")
    print(
        f"memop init: made the project {project.name} (package {project.package}); next, its first kind:\n"
        f"    memop create api --group GROUP --version v1alpha1 --kind KIND"
    )
    return 0


def _create_api(root: Path, args: argparse.Namespace) -> int:
    root = newapi.project_root(root)
    options = newapi.ApiOptions(
        args.group, args.version, args.kind, args.namespaced, args.plural, imperative=args.imperative
    )
    api, files, registered = newapi.plan(root, options)
    check_new(root, files)
    write_new(root, files)
    config = newapi.read_config(root)
    project_file = newapi.PROJECT_FILE.format(package=config.package)
    (root / project_file).write_text(registered, encoding="utf-8")
    for new in files:
        print(f"wrote {new.path}")
    print(f"registered {config.package}.{api.module}.DEFINITION in {project_file}")
    code = write_manifests(root, config.package) if args.manifests else 0
    what = "write its reconcile" if args.imperative else "declare its children"
    print(
        f"memop create api: {api.kind} ({api.group}/{api.version}, {api.plural}) is served by the "
        f"controller {api.module}; {what} in src/{config.package}/{api.module}/controller.py, then run pytest"
    )
    return code


def _create_webhook(root: Path, args: argparse.Namespace) -> int:
    root = newapi.project_root(root)
    options = newwebhook.WebhookOptions(
        args.kind, args.version, args.defaulting, args.validation, args.conversion, args.spoke_version
    )
    kind, files, init_path, wired = newwebhook.plan(root, options)
    check_new(root, files)
    write_new(root, files)
    (root / init_path).write_text(wired, encoding="utf-8")
    for new in files:
        print(f"wrote {new.path}")
    print(f"wired them into {init_path} (the {kind.module} DEFINITION)")
    config = newapi.read_config(root)
    code = write_manifests(root, config.package, "memop create webhook") if args.manifests else 0
    print(
        f"memop create webhook: {kind.kind}'s webhooks are in src/{config.package}/{kind.module}/; write "
        "your checks there, then run pytest. Installs take their certificate from cert-manager "
        "(manifests/default), or make their own (manifests/webhook-self-managed)"
    )
    return code


def manifests_command(package: str) -> list[str]:
    """The command that writes a project's manifests from its code (``manifests/``)."""
    return ["memop", "manifests", "--controller-module", f"{package}.project:PROJECT"]


def write_manifests(root: Path, package: str, caller: str = "memop create api") -> int:
    """Run ``memop manifests`` for the project in ``root``, importing it from ``src/``; 0 when it
    wrote them, else its exit code (its error is on stderr, with the command to run again)."""
    command = manifests_command(package)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "src"), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", *command], cwd=root, env=env, check=False)
    if done.returncode != 0:
        print(
            f"{caller}: writing the manifests failed (exit {done.returncode}); once fixed, run: "
            f"PYTHONPATH=src {' '.join(command)}",
            file=sys.stderr,
        )
    return done.returncode
