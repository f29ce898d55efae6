"""Command line: flags and environment become options, options become a running manager."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from memop import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memop",
        description="The Memcached operator: keeps a memcached Deployment for every Memcached resource.",
    )
    parser.add_argument("--version", action="version", version=f"memop {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    return 0
