"""The code blocks of a Markdown document that the suite runs, and how each is marked.

A fenced block whose info string is ``python``, ``py``, ``sh``, ``bash`` or ``shell`` is a
*snippet*: it runs (:mod:`snippets_runner`) unless it is marked otherwise. A mark is an HTML
comment, invisible on GitHub, on the last non-blank line before the fence::

    <!-- memop-docs: skip reason="needs a real cluster" -->

Its words (shell syntax: quote a value with spaces) are directives:

- ``skip reason="..."``: not run; the test report shows the reason (required).
- ``session=NAME``: share state with the document's other blocks of that session (the
  default session is the block's section: consecutive blocks under one heading share it).
- ``timeout=SECONDS``: how long the block may take (default :data:`DEFAULT_TIMEOUT`).
- ``requires=COMMAND[,COMMAND]``: commands the block runs that a test machine may lack
  (``kubectl``): without one, the block is left out and the session's test, having run the
  rest, is reported skipped, naming it.
- ``cluster``: the session gets an in-memory API server (``KUBECONFIG`` in a shell,
  ``kubeconfig`` and ``client`` in Python), started with this block.
- sh only: ``background until=REGEX``: the block keeps running while the next blocks run
  (a server, an operator: what a reader starts in another terminal); they start once REGEX
  appears in its output. It gets Ctrl-C (then SIGTERM) when its section ends.
- sh only: ``cwd=repo``: run in the repository's root (for commands that read the clone's
  files, such as ``manifests/``; the block must write nothing there).
- python only: ``pytest``: the block is a test module, run with pytest in the session's
  working directory (what a reader saves as a test file of their project).

Other words, a mark with no snippet after it, or a skip without a reason are :class:`MarkError`\\ s.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

LANGUAGES = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
DEFAULT_TIMEOUT = 60.0
DIRECTIVES = {
    "skip",
    "reason",
    "session",
    "timeout",
    "cluster",
    "background",
    "until",
    "cwd",
    "pytest",
    "requires",
}
SH_ONLY = {"background", "until", "cwd"}
PYTHON_ONLY = {"pytest"}

_MARK = re.compile(r"^\s*<!--\s*memop-docs:(?P<words>.*?)-->\s*$")
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")


class MarkError(ValueError):
    """A ``memop-docs`` mark that cannot be obeyed; the message names the file and line."""


@dataclass(frozen=True)
class Snippet:
    """One runnable (or skipped) code block. ``line`` is the first line of its code (1-based),
    ``text`` the code with the fence's indentation removed."""

    path: Path
    line: int
    language: str  # "python" or "sh"
    text: str
    section: str
    directives: Mapping[str, str]

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        return self.directives["reason"] if "skip" in self.directives else None

    @property
    def session(self) -> str:
        return self.directives.get("session") or self.section

    @property
    def requires(self) -> list[str]:
        return [command for command in self.directives.get("requires", "").split(",") if command]

    @property
    def timeout(self) -> float:
        return float(self.directives.get("timeout", DEFAULT_TIMEOUT))


def parse_mark(words: str, where: str, language: str) -> dict[str, str]:
    """The directives of a mark's ``words`` (``name`` or ``name=value``), checked."""
    try:
        tokens = shlex.split(words)
    except ValueError as error:
        raise MarkError(f"{where}: memop-docs mark does not parse: {error}") from None
    directives: dict[str, str] = {}
    for token in tokens:
        name, _, value = token.partition("=")
        if name not in DIRECTIVES:
            raise MarkError(f"{where}: unknown memop-docs directive {name!r} (known: {sorted(DIRECTIVES)})")
        directives[name] = value
    wrong = (SH_ONLY if language == "python" else PYTHON_ONLY) & directives.keys()
    if wrong:
        raise MarkError(f"{where}: {sorted(wrong)} cannot mark a {language} block")
    if "skip" in directives and not directives.get("reason"):
        raise MarkError(f'{where}: a skipped block needs its reason: skip reason="..."')
    if "reason" in directives and "skip" not in directives:
        raise MarkError(f"{where}: reason= goes with skip")
    if ("background" in directives) != bool(directives.get("until")):
        raise MarkError(f"{where}: background needs until=REGEX (and until goes with background)")
    if "until" in directives:
        try:
            re.compile(directives["until"])
        except re.error as error:
            raise MarkError(f"{where}: until= is no regular expression: {error}") from None
    if directives.get("cwd", "repo") != "repo":
        raise MarkError(f"{where}: cwd= takes only repo, not {directives['cwd']!r}")
    if "timeout" in directives and not _seconds(directives["timeout"]) > 0:
        raise MarkError(f"{where}: timeout= takes seconds > 0, not {directives['timeout']!r}")
    return directives


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


def snippets(path: Path, text: str | None = None) -> Iterator[Snippet]:
    """The snippets of the Markdown file ``path`` (read unless ``text`` is given), in order.
    Raises :class:`MarkError` for a mark that cannot be obeyed."""
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    section = path.name
    mark: tuple[int, str] | None = None  # (line, words) of a mark not yet used
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        if heading := _HEADING.match(line):
            section = heading["title"]
        if found := _MARK.match(line):
            if mark is not None:
                raise MarkError(f"{path.name}:{mark[0]}: memop-docs mark with no code block after it")
            mark = (number, found["words"])
            continue
        fence = _FENCE.match(line)
        if fence is None:
            if line.strip() and mark is not None:
                raise MarkError(f"{path.name}:{mark[0]}: memop-docs mark with no code block after it")
            continue
        indent, marker = len(fence["indent"]), fence["fence"]
        closing = re.compile(rf"^ *{re.escape(marker[0])}{{{len(marker)},}}\s*$")
        start, body = number + 1, []
        while number < len(lines) and not closing.match(lines[number]):
            text_line = lines[number]
            body.append(text_line[indent:] if not text_line[:indent].strip() else text_line.lstrip())
            number += 1
        number += 1  # the closing fence
        language = LANGUAGES.get(fence["info"].split()[0].lower() if fence["info"].strip() else "")
        if language is None:
            if mark is not None:
                raise MarkError(
                    f"{path.name}:{mark[0]}: memop-docs mark before a block that is not python or sh"
                )
            continue
        where = f"{path.name}:{start}"
        directives = parse_mark(mark[1], where, language) if mark else {}
        mark = None
        yield Snippet(path, start, language, "\n".join(body) + "\n", section, directives)
    if mark is not None:
        raise MarkError(f"{path.name}:{mark[0]}: memop-docs mark with no code block after it")
