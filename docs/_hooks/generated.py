"""MkDocs hook: the reference pages that are generated from the code at build time, so they
cannot drift from it.

A page asks for generated text with a marker on a line of its own; the hook replaces it before
the Markdown is rendered (``on_page_markdown``):

- ``<!-- generated: cli -->``: every command's usage and options, from memop's argument parsers;
- ``<!-- generated: metrics -->``: the metrics memop registers, from prometheus-client's registry;
- ``<!-- generated: api PACKAGE -->``: a mkdocstrings block per name ``PACKAGE`` exports (its
  ``__all__``, where each name comes from its ``_EXPORTS`` table);
- ``<!-- generated: changelog -->``: CHANGELOG.md, which stays at the repository's root.

A marker the hook does not know is an error, so a typo fails ``mkdocs build``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_MARKER = re.compile(r"^<!-- generated: (?P<what>[a-z]+)(?: (?P<arg>[\w.]+))? -->$", re.M)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The page with each generated marker replaced by its text."""
    return _MARKER.sub(lambda found: generate(found["what"], found["arg"]), markdown)


def generate(what: str, arg: str | None) -> str:
    """The Markdown for one marker; ValueError for a marker that names nothing known."""
    if what == "cli":
        return cli_reference()
    if what == "metrics":
        return metrics_reference()
    if what == "api" and arg:
        return api_reference(arg)
    if what == "changelog":
        # Its links are relative to the repository's root; the site's pages are under docs/.
        text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8").split("\n", 1)[1]
        return text.replace("](docs/", "](")
    raise ValueError(f"unknown generated marker: {what} {arg or ''}".strip())


# --- the command line ------------------------------------------------------------------------


def _parsers() -> Iterator[tuple[str, argparse.ArgumentParser | str]]:
    """(command, its parser or, where memop builds none outside its main, its --help text)."""
    from memop.cli import demo, main, options  # noqa: PLC0415
    from memop.scaffold import command as scaffold  # noqa: PLC0415
    from memop.testing import __main__ as testing_main  # noqa: PLC0415

    yield "memop [run]", options.build_parser()
    yield "memop manifests", _subcommands(main._tools_parser())["manifests"]
    for name, parser in _subcommands(scaffold.build_parser()).items():
        yield f"memop {name}", parser
    yield "memop demo", _help_of(demo.main)
    yield "python -m memop.testing", testing_main.build_parser()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help_of(command_main: Callable[[list[str]], int]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        command_main(["--help"])
    return out.getvalue()


def cli_reference() -> str:
    """Usage, description and an options table for every command and subcommand."""
    sections: list[str] = []
    for title, parser in _parsers():
        if isinstance(parser, str):
            sections.append(f"## `{title}`\n\n```text\n{parser.rstrip()}\n```\n")
        else:
            sections.extend(_parser_sections(parser, level=2, title=title))
    return "\n".join(sections)


def _parser_sections(parser: argparse.ArgumentParser, *, level: int, title: str) -> Iterator[str]:
    usage = parser.format_usage().removeprefix("usage: ").strip()
    text = [f"{'#' * level} `{title}`", "", "```text", usage, "```", ""]
    if parser.description:
        text += [parser.description, ""]
    rows = [action for action in parser._actions if not isinstance(action, argparse._SubParsersAction)]
    rows = [action for action in rows if action.help is not argparse.SUPPRESS]
    if rows:
        text += ["| option | default | meaning |", "|---|---|---|"]
        text += [_row(parser, action) for action in rows]
        text.append("")
    yield "\n".join(text)
    for name, sub in _subcommands(parser).items():
        yield from _parser_sections(sub, level=level + 1, title=sub.prog or name)


def _row(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    names = ", ".join(action.option_strings) or action.dest
    metavar = ""
    if action.nargs != 0 and action.option_strings:
        metavar = " " + formatter._format_args(action, action.dest.upper())
    default = action.default
    shown = "" if default in (None, argparse.SUPPRESS, False) or action.nargs == 0 else f"`{default}`"
    help_text = formatter._expand_help(action) if action.help else ""
    help_text = _DEFAULT_SUFFIX.sub("", help_text)  # the default has its own column
    return f"| `{names}{metavar}` | {shown} | {_cell(help_text)} |"


_DEFAULT_SUFFIX = re.compile(r"\s*\(default: [^()]*\)$")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# --- metrics ---------------------------------------------------------------------------------

# The modules that define memop's metrics at import (prometheus-client's default registry).
METRIC_MODULES = ("memop.runtime.metrics", "memop.runtime.webhook.metrics", "memop.runtime.manager.gctuning")
# Registered by prometheus-client itself: summarised in one row.
_PROCESS_PREFIXES = ("process_", "python_")


def registered_metrics() -> list[tuple[str, str, tuple[str, ...], str]]:
    """(name, type, label names, help) of every metric memop registers, sorted by name."""
    from prometheus_client import REGISTRY  # noqa: PLC0415
    from prometheus_client.metrics import MetricWrapperBase  # noqa: PLC0415

    for module in METRIC_MODULES:
        importlib.import_module(module)
    found: dict[str, tuple[str, str, tuple[str, ...], str]] = {}
    for collector in list(REGISTRY._collector_to_names):
        if isinstance(collector, MetricWrapperBase):  # labels known before any sample
            name = collector._name
            found[name] = (name, str(collector._type), tuple(collector._labelnames), collector._documentation)
            continue
        for family in collector.collect():
            labels: tuple[str, ...] = ()
            if family.samples:
                labels = tuple(family.samples[0].labels)
            elif hasattr(collector, "queues"):  # memop's in-flight workqueue gauges
                labels = ("name", "controller")
            found[family.name] = (family.name, family.type, labels, family.documentation)
    return sorted(entry for entry in found.values() if not entry[0].startswith(_PROCESS_PREFIXES))


def metrics_reference() -> str:
    """The table of every registered metric: name with its labels, type and help."""
    rows = ["| metric | type | help |", "|---|---|---|"]
    for name, kind, labels, documentation in registered_metrics():
        suffix = "_total" if kind == "counter" and not name.endswith("_total") else ""
        label_text = "{" + ",".join(labels) + "}" if labels else ""
        rows.append(f"| `{name}{suffix}{label_text}` | {kind} | {_cell(documentation)} |")
    rows.append("| `process_*`, `python_*` | | prometheus-client's own: CPU, memory, file descriptors, GC |")
    return "\n".join(rows) + "\n"


# --- the Python API --------------------------------------------------------------------------


def api_reference(package: str) -> str:
    """A mkdocstrings block for each name ``package`` exports, grouped by defining module."""
    module = importlib.import_module(package)
    exports: dict[str, str] = module._EXPORTS
    blocks = [f"::: {package}\n    options:\n      members: false\n      show_root_heading: false\n"]
    for name in sorted(module.__all__, key=lambda n: (exports.get(n, package), n)):
        where = exports.get(name)
        if where is None:
            continue
        defining, _, attribute = where.partition(":")
        if not attribute and defining.rsplit(".", 1)[-1] == name:
            target = defining  # a submodule
        else:
            target = f"{defining}.{attribute or name}"
        blocks.append(f"::: {target}\n")
    return "\n".join(blocks)
