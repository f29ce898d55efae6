"""Every Python and shell snippet of the documentation runs (README.md, and docs/**/*.md when
there are such pages), so a snippet that no longer works fails the suite.

One test per session (a section's blocks, or the blocks a ``session=`` mark joins), run by
:mod:`snippets_runner`; one skipped test per block marked ``skip``, with its reason. How blocks
are marked: :mod:`snippets_markdown` and docs/development.md. The runner itself is
tested here on small documents of its own: a block that fails fails its test.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from snippets_markdown import MarkError, Snippet, snippets
from snippets_runner import Session, SnippetFailed

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _parse_all() -> tuple[list[Snippet], list[str]]:
    found: list[Snippet] = []
    errors: list[str] = []
    for document in DOCUMENTS:
        try:
            found.extend(snippets(document))
        except MarkError as error:
            errors.append(str(error))
    return found, errors


SNIPPETS, MARK_ERRORS = _parse_all()


def _sessions() -> Iterator[object]:
    grouped: dict[tuple[Path, str], list[Snippet]] = {}
    for snippet in SNIPPETS:
        if snippet.skip_reason is None:
            grouped.setdefault((snippet.path, snippet.session), []).append(snippet)
    for (path, session), blocks in grouped.items():
        yield pytest.param(blocks, id=f"{path.relative_to(REPO)}:{session}")


def _skipped() -> Iterator[object]:
    for snippet in SNIPPETS:
        if snippet.skip_reason is not None:
            where = f"{snippet.path.relative_to(REPO)}:{snippet.line}"
            yield pytest.param(
                snippet, id=where, marks=pytest.mark.skip(reason=f"{where}: {snippet.skip_reason}")
            )


async def run_session(blocks: list[Snippet], workdir: Path) -> None:
    session = Session(REPO, workdir)
    try:
        for block in blocks:
            await session.run(block)
    finally:
        await session.aclose()
    if session.left_out:
        pytest.skip(f"the other blocks ran and passed, but {'; '.join(session.left_out)}")


def test_every_mark_is_obeyable() -> None:
    assert not MARK_ERRORS, "\n".join(MARK_ERRORS)


@pytest.mark.parametrize("blocks", list(_sessions()))
async def test_snippets_run(blocks: list[Snippet], tmp_path: Path) -> None:
    await run_session(blocks, tmp_path)


@pytest.mark.parametrize("snippet", list(_skipped()))
def test_skipped_snippet(snippet: Snippet) -> None:
    """Never runs: the skip mark carries the block's reason into the report."""
    raise AssertionError(f"{snippet.where} is marked skip and must not run")


# The runner, on documents of its own.


def parse(text: str) -> list[Snippet]:
    return list(snippets(Path("doc.md"), text))


def test_blocks_sections_and_marks_are_read() -> None:
    found = parse(
        "# One\n\n```sh\necho one\n```\n\n```yaml\na: 1\n```\n\n## Two\n\n"
        '<!-- memop-docs: skip reason="needs a real cluster" -->\n\n```python\nx = 1\n```\n\n'
        "1. a list item\n\n   ```bash\n   echo indented\n   ```\n"
    )
    assert [(s.line, s.language, s.text, s.section) for s in found] == [
        (4, "sh", "echo one\n", "One"),
        (16, "python", "x = 1\n", "Two"),
        (22, "sh", "echo indented\n", "Two"),
    ]
    assert found[1].skip_reason == "needs a real cluster"
    assert found[0].skip_reason is None
    assert found[0].session == "One"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- memop-docs: skip -->\n```sh\nx\n```\n", "needs its reason"),
        ("<!-- memop-docs: skp reason=x -->\n```sh\nx\n```\n", "unknown memop-docs directive 'skp'"),
        ("<!-- memop-docs: pytest -->\n```sh\nx\n```\n", "cannot mark a sh block"),
        ("<!-- memop-docs: background -->\n```sh\nx\n```\n", "background needs until=REGEX"),
        ("<!-- memop-docs: cwd=/ -->\n```sh\nx\n```\n", "cwd= takes only repo"),
        ("<!-- memop-docs: timeout=soon -->\n```sh\nx\n```\n", "timeout= takes seconds"),
        ("<!-- memop-docs: cluster -->\nSome text.\n```sh\nx\n```\n", "no code block after it"),
        ("<!-- memop-docs: cluster -->\n```yaml\nx: 1\n```\n", "not python or sh"),
        ("text\n<!-- memop-docs: cluster -->\n", "doc.md:2: memop-docs mark with no code block"),
    ],
)
def test_a_mark_that_cannot_be_obeyed_is_an_error(text: str, message: str) -> None:
    with pytest.raises(MarkError, match=message):
        parse(text)


async def test_a_failing_block_fails_with_its_output(tmp_path: Path) -> None:
    with pytest.raises(SnippetFailed, match=re.escape("doc.md:2: exit status 3; its output:\nbefore\n")):
        await run_session(parse("```sh\necho before\nexit 3\necho after\n```\n"), tmp_path)
    with pytest.raises(
        SnippetFailed, match=re.escape("doc.md:2: exit status 1")
    ):  # set -e: a failed command stops it
        await run_session(parse("```sh\nfalse\necho after\n```\n"), tmp_path)
    with pytest.raises(
        SnippetFailed, match=re.escape("doc.md:2: NameError: name 'undefined' is not defined")
    ):
        await run_session(parse("```python\nundefined\n```\n"), tmp_path)
    with pytest.raises(SnippetFailed, match=re.escape("still running after 0.5 s")):
        await run_session(parse("<!-- memop-docs: timeout=0.5 -->\n```sh\nsleep 60\n```\n"), tmp_path)


async def test_a_section_shares_its_directory_and_namespace(tmp_path: Path) -> None:
    await run_session(
        parse(
            "```sh\nmkdir shop && cd shop && echo hi > /tmp/note && touch here\n```\n"
            '```sh\ntest -f here && test "$(cat "$TMPDIR/note")" = hi && test -z "${KUBECONFIG:-}"\n```\n'
            "```python\nimport asyncio\nvalue = await asyncio.sleep(0, result=41)\n```\n"
            "```python\nassert value + 1 == 42 and (workdir / 'shop' / 'here').is_file()\n```\n"
        ),
        tmp_path,
    )
    assert (tmp_path / "tmp" / "note").read_text() == "hi\n"


async def test_pip_installs_into_the_session_only(tmp_path: Path) -> None:
    project = (
        "[build-system]\nrequires = ['setuptools']\nbuild-backend = 'setuptools.build_meta'\n"
        "[project]\nname = 'memop-docs-probe'\nversion = '1'\n"
    )
    await run_session(
        parse(
            "```sh\nmkdir probe && cd probe && mkdir memop_docs_probe\ntouch memop_docs_probe/__init__.py\n"
            f'printf "{project}" > pyproject.toml\npip install -q -e .\n'
            "cd / && python -c 'import memop_docs_probe, memop'\n```\n"
        ),
        tmp_path,
    )
    assert importlib.util.find_spec("memop_docs_probe") is None


async def test_a_background_block_runs_beside_the_next_and_stops_with_its_section(tmp_path: Path) -> None:
    await run_session(
        parse(
            "# Serving\n"
            '<!-- memop-docs: background until="listening" -->\n'
            "```sh\nsleep 600 &\necho $! > /tmp/child\necho listening\nexec sleep 600\n```\n"
            '```sh\nkill -0 "$(cat /tmp/child)"\n```\n'
            # Stopped: gone, or a zombie no init process has reaped yet.
            "# Next\n```sh\npid=$(cat /tmp/child)\n"
            '[ ! -e /proc/$pid ] || [ "$(cut -d" " -f3 /proc/$pid/stat)" = Z ]\n```\n'
        ),
        tmp_path,
    )
    with pytest.raises(
        SnippetFailed, match=re.escape("ended (exit status 0) before its output matched 'never'")
    ):
        await run_session(
            parse("<!-- memop-docs: background until=never -->\n```sh\necho done\n```\n"), tmp_path
        )


async def test_a_pytest_block_is_a_test_module(tmp_path: Path) -> None:
    # The passing case is the docs' own (docs/getting-started/first-operator.md).
    with pytest.raises(SnippetFailed, match="1 failed"):
        await run_session(
            parse("<!-- memop-docs: pytest -->\n```python\ndef test_it():\n    assert 0\n```\n"), tmp_path
        )


async def test_a_block_needing_a_missing_command_is_left_out(tmp_path: Path) -> None:
    document = (
        "```sh\ntouch ran\n```\n"
        "<!-- memop-docs: requires=memop-docs-no-such-command,sh -->\n```sh\nfalse\n```\n"
    )
    left_out = re.escape("doc.md:6 needs memop-docs-no-such-command, not on PATH")
    with pytest.raises(pytest.skip.Exception, match=left_out):
        await run_session(parse(document), tmp_path)
    assert (tmp_path / "ran").is_file()


async def test_a_cluster_block_gets_the_in_memory_server(tmp_path: Path) -> None:
    await run_session(
        parse(
            "<!-- memop-docs: cluster -->\n```python\nfrom memop.runtime import NAMESPACES\n"
            "names = [ns['metadata']['name'] for ns in (await client.list(NAMESPACES))['items']]\n"
            "assert 'default' in names\n```\n"
            '```sh\ngrep -q "server: https://127.0.0.1:" "$KUBECONFIG"\n```\n'
        ),
        tmp_path,
    )
