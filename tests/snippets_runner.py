"""Runs the snippets of a Markdown document (:mod:`snippets_markdown`) as a reader would.

A :class:`Session` runs one session's snippets in order, sharing their state:

- a working directory of its own (a temporary one): a shell block starts where the previous
  one ended (``mkdir shop && cd shop`` carries over), and absolute ``/tmp/`` paths in a shell
  block are the session's own temporary directory (``$TMPDIR``), so runs side by side share
  no file;
- an environment of its own: a virtual environment layered on the one running the tests
  (its packages visible, its commands on PATH), so ``pip install -e .`` installs into the
  session and nothing outside it changes. pip gets no index (``PIP_NO_INDEX``, no build
  isolation): what it needs must be installed already; nothing goes to the network. ``HOME``
  is the session's directory and ``KUBECONFIG`` is unset, so no snippet can reach a cluster
  of the machine's; ``cluster`` gives it the in-memory one;
- one Python namespace: Python blocks run in the test's process and event loop (top-level
  ``await`` allowed), with ``workdir`` (the session's directory) and, after ``cluster``,
  ``kubeconfig`` and ``client``.

A shell block runs with ``bash -e -o pipefail`` in a process group of its own, which is
killed when the block ends (its background jobs with it) or, for a ``background`` block, when
its section ends: Ctrl-C first, as the reader would, then SIGTERM, then SIGKILL. Every failure
(an exit status, a timeout, an exception) is a :class:`SnippetFailed` naming the file and line,
with the block's output.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from snippets_markdown import Snippet

STOP_GRACE = 10.0  # seconds a stopped block gets for each signal before the next, harsher one
_TMP_PATH = re.compile(r"(?<![\w./$}])/tmp/")
_DROPPED_ENV = ("KUBECONFIG", "PYTHONPATH", "VIRTUAL_ENV", "USE_EXISTING_CLUSTER", "PYTHONHOME")


class SnippetFailed(AssertionError):
    """A snippet did not work; the message says where and shows its output."""


class _Running(asyncio.SubprocessProtocol):
    """A shell block's process: its output so far, and events for what happens to it. The
    process's exit and the end of its output are separate: an ``&`` job may keep the output
    open after the shell is gone."""

    def __init__(self, snippet: Snippet) -> None:
        self.snippet = snippet
        self.output = bytearray()
        self.changed = asyncio.Event()  # more output, the exit, or the output's end
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()  # no process holds the output any more
        self.transport: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.output.extend(data.encode() if isinstance(data, str) else data)
        self.changed.set()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.closed.set()
        self.changed.set()

    def process_exited(self) -> None:
        self.exited.set()
        self.changed.set()

    @property
    def pid(self) -> int:
        assert self.transport is not None
        return self.transport.get_pid()

    @property
    def returncode(self) -> int | None:
        assert self.transport is not None
        return self.transport.get_returncode()

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")


class Session:
    """One session's working directory, environment, namespace and background processes."""

    def __init__(self, repo: Path, workdir: Path) -> None:
        self.repo = repo
        self.workdir = workdir
        self.cwd = workdir
        self.tmp = workdir / "tmp"
        self.namespace: dict[str, Any] = {"__name__": "__memop_docs__", "workdir": workdir}
        self._venv: Path | None = None
        self._section: str | None = None
        self._background: list[_Running] = []
        self._cluster: contextlib.AsyncExitStack | None = None
        self._kubeconfig: Path | None = None
        self.left_out: list[str] = []  # blocks not run for a command missing here, and why

    async def run(self, snippet: Snippet) -> None:
        """Run one snippet (after the session's earlier ones); SnippetFailed when it fails. A
        block whose ``requires`` names a command not on PATH is left out (see ``left_out``)."""
        path = self._environment()["PATH"] if snippet.requires else ""
        missing = [command for command in snippet.requires if shutil.which(command, path=path) is None]
        if missing:
            self.left_out.append(f"{snippet.where} needs {', '.join(missing)}, not on PATH")
            return
        if snippet.section != self._section:
            await self._stop_background()
            self._section = snippet.section
        if "cluster" in snippet.directives:
            await self._start_cluster()
        if snippet.language == "python" and "pytest" in snippet.directives:
            await self._run_pytest(snippet)
        elif snippet.language == "python":
            await self._run_python(snippet)
        else:
            await self._run_sh(snippet)

    async def aclose(self) -> None:
        await self._stop_background()
        if self._cluster is not None:
            await self._cluster.aclose()

    # Python

    async def _run_python(self, snippet: Snippet) -> None:
        # Padded so a traceback's line numbers are the document's.
        source = "\n" * (snippet.line - 1) + snippet.text
        try:
            # dont_inherit: this module's `from __future__ import annotations` must not turn the
            # reader's annotations into strings (Pydantic resolves those in the module it imports).
            code = compile(
                source, str(snippet.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
            )
            result = eval(code, self.namespace)  # the document's own code, run as its reader would
            if inspect.iscoroutine(result):
                await asyncio.wait_for(result, snippet.timeout)
        except TimeoutError:
            raise SnippetFailed(f"{snippet.where}: still running after {snippet.timeout:g} s") from None
        except Exception as error:
            raise SnippetFailed(f"{snippet.where}: {type(error).__name__}: {error}") from error

    async def _run_pytest(self, snippet: Snippet) -> None:
        module = self.cwd / f"test_memop_docs_{snippet.path.stem.lower()}_{snippet.line}.py"
        module.write_text(snippet.text)
        command = [str(self._python()), "-m", "pytest", "-q", "-p", "no:cacheprovider", module.name]
        await self._run_process(snippet, command, self.cwd)

    # Shell

    async def _run_sh(self, snippet: Snippet) -> None:
        cwd = self.repo if snippet.directives.get("cwd") == "repo" else self.cwd
        state = self.workdir / f".block-{snippet.line}.cwd"  # its own: a background block's comes late
        script = self.workdir / f".block-{snippet.line}.sh"
        script.write_text(
            "set -e -o pipefail\n"
            f"trap 'pwd > {shlex_quote(state)}' EXIT\n" + _TMP_PATH.sub("$TMPDIR/", snippet.text)
        )
        command = ["bash", str(script)]
        if "background" in snippet.directives:
            await self._start_background(snippet, command, cwd)
            return
        await self._run_process(snippet, command, cwd)
        if cwd == self.cwd and state.is_file():
            self.cwd = Path(state.read_text().strip())

    async def _run_process(self, snippet: Snippet, command: list[str], cwd: Path) -> None:
        running = await self._spawn(snippet, command, cwd)
        try:
            await asyncio.wait_for(running.exited.wait(), snippet.timeout)
        except TimeoutError:
            raise SnippetFailed(
                f"{snippet.where}: still running after {snippet.timeout:g} s; its output:\n{running.text}"
            ) from None
        finally:
            await _stop(running)
        if running.returncode != 0:
            raise SnippetFailed(
                f"{snippet.where}: exit status {running.returncode}; its output:\n{running.text}"
            )

    async def _start_background(self, snippet: Snippet, command: list[str], cwd: Path) -> None:
        running = await self._spawn(snippet, command, cwd)
        self._background.append(running)
        until = re.compile(snippet.directives["until"], re.MULTILINE)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + snippet.timeout
        while not until.search(running.text):
            # The shell may end first, leaving its ``&`` jobs running: only the end of all output
            # (every process gone) is an error.
            if running.closed.is_set():
                with contextlib.suppress(TimeoutError):  # its exit status, if it comes
                    await asyncio.wait_for(running.exited.wait(), STOP_GRACE)
                raise SnippetFailed(
                    f"{snippet.where}: ended (exit status {running.returncode}) before its "
                    f"output matched {until.pattern!r}; its output:\n{running.text}"
                )
            running.changed.clear()
            try:
                await asyncio.wait_for(running.changed.wait(), deadline - loop.time())
            except TimeoutError:
                raise SnippetFailed(
                    f"{snippet.where}: no {until.pattern!r} in its output after {snippet.timeout:g} s; "
                    f"its output:\n{running.text}"
                ) from None

    async def _stop_background(self) -> None:
        running, self._background = self._background, []
        for each in running:
            await _stop(each)

    async def _spawn(self, snippet: Snippet, command: list[str], cwd: Path) -> _Running:
        _, running = await asyncio.get_running_loop().subprocess_exec(
            lambda: _Running(snippet),
            *command,
            cwd=cwd,
            env=self._environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # Ctrl-C must reach the block as it reaches a terminal's: a test runner's process
            # may ignore SIGINT (pytest-xdist's workers do), and an ignored signal stays ignored
            # across exec.
            preexec_fn=_default_sigint,
        )
        return running

    def _environment(self) -> dict[str, str]:
        venv = self._layered_venv()
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in _DROPPED_ENV and not key.startswith(("PYTEST_", "MEMOP_"))
        }
        self.tmp.mkdir(exist_ok=True)
        env.update(
            HOME=str(self.workdir),
            TMPDIR=str(self.tmp),
            VIRTUAL_ENV=str(venv),
            PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            PIP_NO_INDEX="1",
            PIP_NO_BUILD_ISOLATION="0",  # pip's inverted switch: "0" turns build isolation off
            PIP_DISABLE_PIP_VERSION_CHECK="1",
            # memop's servers on free loopback ports (a flag on the command line still wins):
            # tests share the machine, and nothing outside it has to reach them.
            METRICS_BIND_ADDRESS="127.0.0.1:0",
            HEALTH_PROBE_BIND_ADDRESS="127.0.0.1:0",
            WEBHOOK_PORT="0",
        )
        if self._kubeconfig is not None:
            env["KUBECONFIG"] = str(self._kubeconfig)
        return env

    def _python(self) -> Path:
        return self._layered_venv() / "bin" / "python"

    def _layered_venv(self) -> Path:
        """A virtual environment in the session that sees every package of the one running the
        tests (a ``.pth`` adds its site directories) and has its commands, re-pointed at the
        new interpreter: what is installed here stays here."""
        if self._venv is not None:
            return self._venv
        venv = self.workdir / ".venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
        base_dirs = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
        (site / "_memop_docs_base.pth").write_text(
            "".join(f"import site; site.addsitedir({directory!r})\n" for directory in sorted(base_dirs))
        )
        python = venv / "bin" / "python"
        for command in sorted(Path(sys.executable).parent.iterdir()):
            target = venv / "bin" / command.name
            if target.exists() or command.name.startswith(("python", "activate", "Activate")):
                continue
            _relink_command(command, target, python)
        self._venv = venv
        return venv

    async def _start_cluster(self) -> None:
        if self._cluster is not None:
            return
        from kubernetes_asyncio.client import ApiClient  # noqa: PLC0415

        from memop.runtime import Client  # noqa: PLC0415
        from memop.testing.apiserver.server import ApiServer  # noqa: PLC0415

        stack = contextlib.AsyncExitStack()
        server = await stack.enter_async_context(ApiServer(tls=True, simulate_controllers=True))
        kubeconfig = self.workdir / "kubeconfig"
        server.write_kubeconfig(kubeconfig)
        api = await stack.enter_async_context(ApiClient(server.client_configuration()))
        client = Client(api, user_agent="memop-docs")
        stack.push_async_callback(client.close)
        self._cluster, self._kubeconfig = stack, kubeconfig
        self.namespace.update(kubeconfig=str(kubeconfig), client=client)


def shlex_quote(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


def _relink_command(command: Path, target: Path, python: Path) -> None:
    """``target``: the console script ``command`` run by ``python`` (its shebang rewritten; a
    binary or a non-Python script is linked as it is)."""
    try:
        text = command.read_text()
    except (UnicodeDecodeError, IsADirectoryError):
        target.symlink_to(command)
        return
    lines = text.split("\n")
    if lines[0].startswith("#!") and "python" in lines[0]:
        lines[0] = f"#!{python}"
    elif lines[0] == "#!/bin/sh" and len(lines) > 1 and lines[1].startswith("'''exec' "):
        lines[1] = f"'''exec' {python} \"$0\" \"$@\""  # pip's launcher for long interpreter paths
    else:
        target.symlink_to(command)
        return
    target.write_text("\n".join(lines))
    target.chmod(0o755)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def _stop(running: _Running) -> None:
    """Stop the block's process group. A block still running gets Ctrl-C, as its reader would
    stop it, and a while to exit; then SIGTERM stops what remains (a non-interactive shell's
    ``&`` jobs ignore Ctrl-C), then SIGKILL."""
    loop = asyncio.get_running_loop()
    group = running.pid
    if not running.exited.is_set():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGINT)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(running.exited.wait(), STOP_GRACE)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(group):
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, sig)
        deadline = loop.time() + STOP_GRACE
        # Nothing notifies the end of a process group: polled, with a deadline.
        while _group_alive(group) and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    with contextlib.suppress(TimeoutError):  # a process outside the group may hold the output
        await asyncio.wait_for(running.closed.wait(), STOP_GRACE)
    assert running.transport is not None
    running.transport.close()


def _group_alive(group: int) -> bool:
    """Whether a process of ``group`` still runs (zombies, which PID 1 may never reap, do not)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == group:
            return True
    return False
