"""``memop manifests <name>``: print a manifest generated from the code.

Generated manifests are committed under ``manifests/`` and must equal this output (tests check
it), so the code stays the single source of truth. A new manifest is one entry in
:data:`GENERATORS`; the command line offers every entry.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

from memop.memcached.crd import crd_yaml
from memop.rbac import rbac_yaml

# name -> () -> YAML text. Order is the order shown in --help.
GENERATORS: dict[str, Callable[[], str]] = {
    "crd": crd_yaml,
    "rbac": rbac_yaml,
}


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the ``manifests`` subcommand on a parser's subparsers."""
    parser = subparsers.add_parser(
        "manifests",
        help="print a generated manifest (YAML) and exit",
        description="Print a manifest generated from memop's code, as committed under manifests/.",
    )
    parser.add_argument("name", choices=list(GENERATORS), help="which manifest")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Write the manifest ``args.name`` to ``out`` (stdout by default); the exit status."""
    (out or sys.stdout).write(GENERATORS[args.name]())
    return 0
