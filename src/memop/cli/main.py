"""Command line: ``memop [flags]`` runs the operator; ``memop manifests NAME`` prints a manifest.

Flags and their environment variables are in :mod:`memop.cli.options`. Usage errors (unknown
flags, invalid values, contradictions) exit with code 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from memop import __version__
from memop.cli import app
from memop.cli.options import UsageError, parse_run_args
from memop.runtime.manager.gctuning import tune_gc

EXIT_USAGE = 2


def _tools_parser() -> argparse.ArgumentParser:
    # The operator process never needs it (YAML, CRD).
    from memop.manifests import command as manifests  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="memop", description="memop's one-shot tools.")
    parser.add_argument("--version", action="version", version=f"memop {__version__}")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    manifests.add_parser(subcommands)
    return parser


SUBCOMMANDS = frozenset({"manifests", "demo"})


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # The subcommands' modules are imported only for them: the operator process stays small
    # (the demo brings the in-memory API server, manifests the YAML generators).
    if args and args[0] == "demo":
        from memop.cli import demo  # noqa: PLC0415

        return demo.main(args[1:])
    if args and args[0] in SUBCOMMANDS:
        tool_args = _tools_parser().parse_args(args)
        if tool_args.command == "manifests":
            from memop.manifests import command as manifests  # noqa: PLC0415

            return manifests.run(tool_args)
    try:
        config = parse_run_args(args)
    except UsageError as error:
        print(f"memop: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    tune_gc()
    try:
        return asyncio.run(app.run(config))
    except KeyboardInterrupt:
        return 130
