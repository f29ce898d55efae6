"""Command line: ``memop [run] [flags]`` runs the operator; ``memop manifests ...`` and ``memop
demo`` are one-shot tools.

:func:`run` is the whole command line, also for a program of one's own: ``memop.run(PROJECT)``
in a package's ``__main__`` runs that project with every flag, environment variable, check
and exit code of ``memop`` (without ``--project`` and ``--controller-module``: the program
has chosen). Flags and their environment variables are in :mod:`memop.cli.options`. Usage
errors (unknown flags, invalid values, contradictions, a project that cannot be found or
loaded) exit with code 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memop import __version__
from memop.cli import app, eventloop
from memop.cli.options import UsageError, parse_run_args
from memop.runtime.manager.gctuning import tune_gc
from memop.runtime.manager.malloctuning import tune_malloc

if TYPE_CHECKING:
    from memop.project import Project

EXIT_USAGE = 2
RUN = "run"


def _tools_parser() -> argparse.ArgumentParser:
    # The operator process never needs it (YAML, CRD).
    from memop.manifests import command as manifests  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="memop", description="memop's one-shot tools.")
    parser.add_argument("--version", action="version", version=f"memop {__version__}")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    manifests.add_parser(subcommands)
    return parser


SUBCOMMANDS = frozenset({"manifests", "demo", "init", "create"})


def program_name() -> str:
    """The command that started this process, as the user typed it: ``python -m mypkg`` for a
    package's ``__main__`` (or a module run with ``-m``), else the script's name."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return f"python -m {spec.name.removesuffix('.__main__')}"
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def run(project: Project | None = None, argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code.

    Without ``project``, this is the ``memop`` command: ``--project`` / ``--controller-module``
    choose the project to run (see :mod:`memop.project`), and the tools are there. With one,
    the program runs that project: ``sys.exit(memop.run(PROJECT))``. ``run`` as the first
    argument is the same as none. Call it from synchronous code: it runs its own event loop
    until the operator stops (0 after SIGTERM, 1 when it could not start or lost its lease,
    2 for bad input).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == RUN:
        args = args[1:]
    elif project is None and args and args[0] in SUBCOMMANDS:
        return _tool(args)
    prog = "memop" if project is None else program_name()
    try:
        config = parse_run_args(args, project=project, prog=prog)
    except UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as done:  # --help, --version
        return done.code if isinstance(done.code, int) else 0
    tune_gc()
    tune_malloc()
    try:
        return eventloop.run(app.run(config), config.event_loop)
    except KeyboardInterrupt:
        return 130


def _tool(args: list[str]) -> int:
    # The subcommands' modules are imported only for them: the operator process stays small
    # (the demo brings the in-memory API server, manifests the YAML generators).
    if args[0] == "demo":
        from memop.cli import demo  # noqa: PLC0415

        return demo.main(args[1:])
    if args[0] in ("init", "create"):
        from memop import scaffold  # noqa: PLC0415

        return scaffold.main(args)
    tool_args = _tools_parser().parse_args(args)
    from memop.manifests import command as manifests  # noqa: PLC0415

    return manifests.run(tool_args)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``memop`` console script and ``python -m memop``: :func:`run` without a project."""
    return run(None, argv)
