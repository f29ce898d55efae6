"""Templates: the files ``memop init`` and ``memop create api`` write, with their names filled in.

A template is a package data file under ``memop/scaffold/templates`` (``.tmpl``, so that no
tool takes it for source). Its language is a small subset of Mustache:

- ``{{name}}`` is replaced by the value ``name``; an unknown name is an error, never left in;
- ``{{#flag}}...{{/flag}}`` is kept when ``flag`` is true, ``{{^flag}}...{{/flag}}`` when it is
  false. A section tag alone on its line takes the whole line with it, so sections can wrap
  whole lines without leaving blank ones; sections nest.

Rendering is pure and deterministic: the same values give the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources

_STANDALONE = re.compile(r"[ \t]*\{\{([#^/])(\w+)\}\}[ \t]*")
_INLINE = re.compile(r"\{\{([#^])(\w+)\}\}(.*?)\{\{/\2\}\}", re.DOTALL)
_VALUE = re.compile(r"\{\{(\w+)\}\}")
_STRAY = re.compile(r"\{\{[#^/]\w+\}\}")


class TemplateError(ValueError):
    """A template that cannot be rendered with the values given (a bug of memop's, not the user's)."""


def template_text(name: str) -> str:
    """The text of the template ``name`` (a path under ``templates/``, without ``.tmpl``)."""
    *folders, file_name = name.split("/")
    path = resources.files("memop.scaffold").joinpath("templates", *folders, f"{file_name}.tmpl")
    return path.read_text(encoding="utf-8")


def render_template(name: str, values: Mapping[str, str], flags: Mapping[str, bool]) -> str:
    """The template ``name`` rendered; a Python file's long prose lines wrapped (see
    :func:`wrap_long_lines`)."""
    text = render(template_text(name), values, flags)
    return tidy_python(text) if name.endswith(".py") else text


def render(text: str, values: Mapping[str, str], flags: Mapping[str, bool]) -> str:
    """``text`` with its sections resolved by ``flags`` and its ``{{name}}`` by ``values``."""
    lines: list[str] = []
    open_sections: list[tuple[str, bool]] = []  # (flag, kept), innermost last
    for line in text.splitlines(keepends=True):
        tag = _STANDALONE.fullmatch(line.rstrip("\r\n"))
        if tag is None:
            if all(kept for _, kept in open_sections):
                lines.append(line)
            continue
        sigil, flag = tag.groups()
        if sigil == "/":
            if not open_sections or open_sections[-1][0] != flag:
                raise TemplateError(f"{{{{/{flag}}}}} closes no open section")
            open_sections.pop()
        else:
            open_sections.append((flag, _flag(flags, flag) == (sigil == "#")))
    if open_sections:
        raise TemplateError(f"section {open_sections[-1][0]!r} is never closed")
    resolved = _INLINE.sub(
        lambda m: m.group(3) if _flag(flags, m.group(2)) == (m.group(1) == "#") else "", "".join(lines)
    )

    stray = _STRAY.search(resolved)
    if stray is not None:
        raise TemplateError(f"section tag {stray.group(0)} is not closed on its line")

    def value(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise TemplateError(f"no value for {{{{{match.group(1)}}}}}")
        return values[match.group(1)]

    # One pass: a value that itself holds "{{" is inserted as it is.
    return _VALUE.sub(value, resolved)


def _flag(flags: Mapping[str, bool], name: str) -> bool:
    if name not in flags:
        raise TemplateError(f"no flag {name!r}")
    return flags[name]


# --- Python imports as isort (ruff's I001, default settings) writes them --------------------------

LINE_LENGTH = 110


def _member_key(name: str) -> tuple[int, list[tuple[int, int | str]]]:
    """isort's order of the names of one ``from`` import (``order-by-type``, case-insensitive,
    natural): CONSTANTS, then Classes, then the rest."""
    if len(name) > 1 and name.isupper():
        rank = 0
    elif name[:1].isupper():
        rank = 1
    else:
        rank = 2
    return rank, natural_key(name)


def natural_key(name: str) -> list[tuple[int, int | str]]:
    """isort's case-insensitive natural order: ``a2`` before ``a10``."""
    return [
        (0, int(chunk)) if chunk.isdigit() else (1, chunk)
        for chunk in re.split(r"(\d+)", name.lower())
        if chunk
    ]


def from_import(module: str, names: list[str]) -> str:
    """``from module import names`` sorted as isort sorts them, wrapped one name a line when it
    does not fit on one."""
    ordered = sorted(dict.fromkeys(names), key=_member_key)
    line = f"from {module} import {', '.join(ordered)}"
    if len(line) <= LINE_LENGTH:
        return line
    return f"from {module} import (\n" + "".join(f"    {name},\n" for name in ordered) + ")"


_FROM_IMPORT = re.compile(r"from (?P<module>[\w.]+) import (?P<names>\w+(, \w+)*)")


def tidy_python(source: str, limit: int = LINE_LENGTH) -> str:
    """Generated Python as ruff wants it whatever the names filled in: each one-line ``from``
    import's names sorted as isort sorts them (and wrapped when too long), and long prose lines
    wrapped (:func:`wrap_long_lines`)."""
    lines = []
    for line in source.splitlines(keepends=True):
        match = _FROM_IMPORT.fullmatch(line.rstrip("\n"))
        if match is None:
            lines.append(line)
        else:
            lines.append(from_import(match["module"], match["names"].split(", ")) + "\n")
    return wrap_long_lines("".join(lines), limit)


def wrap_long_lines(source: str, limit: int = LINE_LENGTH) -> str:
    """Python ``source`` with its prose lines (comments, and the lines of ``\"\"\"`` docstrings)
    longer than ``limit`` broken at spaces, so that long names (a kind, a package) keep the
    generated code within ruff's line length. Code lines are left as they are: the templates
    keep those short."""
    lines: list[str] = []
    in_docstring = False
    for line in source.splitlines(keepends=True):
        body = line.rstrip("\n")
        stripped = body.lstrip()
        indent = body[: len(body) - len(stripped)]
        starts_in_docstring = in_docstring
        in_docstring ^= body.count('"""') % 2 == 1
        if len(body) <= limit:
            lines.append(line)
        elif stripped.startswith("#"):
            lines.extend(_wrap(stripped[1:].strip(), f"{indent}# ", f"{indent}# ", limit))
        elif starts_in_docstring or stripped.startswith('"""'):
            follow = indent + ("  " if stripped.startswith("- ") else "")
            lines.extend(_wrap(stripped, indent, follow, limit))
        else:
            lines.append(line)
    return "".join(lines)


def _wrap(text: str, first: str, follow: str, limit: int) -> list[str]:
    """``text`` in lines of at most ``limit`` (a word longer than that stays whole)."""
    out: list[str] = []
    line = first
    for word in text.split(" "):
        prefix = first if not out else follow
        if line != prefix and len(line) + 1 + len(word) > limit:
            out.append(line + "\n")
            line = follow + word
        else:
            line = line + word if line == prefix else f"{line} {word}"
    out.append(line + "\n")
    return out
