"""Run ``python -m memop`` and ``python -m memop.testing serve`` as real subprocesses, for
tests and benchmarks.

Probes and metrics bind to free loopback ports (``127.0.0.1:0``); the real ports are read
from memop's own "serving ... on host:port" log lines, so there is no port race. Output (JSON
log lines) is collected as it comes and can be waited on.

The process inherits this process's environment except memop's own flag variables
(WATCH_NAMESPACE, LEADER_ELECT, LOG_LEVEL, ...): only ``env`` sets those, so a developer's
shell cannot change what a test runs. It serves no admission or conversion webhook unless
asked (``webhooks=True``), as ``ENABLE_WEBHOOKS=false`` runs an operator outside its cluster.

:func:`serving` (and :func:`serving_async`) runs the in-memory API server as its own process
(:class:`ApiServerProcess`) for as long as a block runs: ready once the server prints its
"listening on ..., kubeconfig ..." line, which it does after writing the kubeconfig.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from memop.cli.options import build_parser, env_name
from memop.runtime.cache.store import MUTATION_MARK
from memop.testing.wait import wait_for


def free_port() -> int:
    """A loopback port free right now, for a server whose port must be known before it starts
    (a webhook URL registered ahead of the operator that serves it). Another process may take it
    in between: pass port 0 and read the bound one where the server allows it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _flag_variables() -> frozenset[str]:
    """Every environment variable memop reads a flag from (WATCH_NAMESPACE, LOG_LEVEL, ...)."""
    return frozenset(
        env_name(option)
        for action in build_parser()._actions
        for option in action.option_strings
        if option.startswith("--") and option not in ("--help", "--version")
    )


class MemopProcess:
    """One memop process; start with :meth:`start`, end with :meth:`terminate` or :meth:`kill`."""

    def __init__(
        self,
        kubeconfig: str | Path,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        metrics: bool = True,
        probes: bool = True,
        webhooks: bool = False,
    ) -> None:
        self.kubeconfig = str(kubeconfig)
        self.args = list(args)
        self.env = dict(env or {})
        if not webhooks:
            # As Kubebuilder's `make run`: a process the API server cannot call serves no webhook
            # (and needs no serving certificate); ``webhooks=True`` serves them, from the
            # --webhook-cert-dir the test gives.
            self.env.setdefault(env_name("--enable-webhooks"), "false")
        self.metrics = metrics
        self.probes = probes
        self.lines: list[str] = []
        self.records: list[dict[str, Any]] = []
        self.process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "memop",
            "--kubeconfig",
            self.kubeconfig,
            "--log-format",
            "json",
            "--metrics-bind-address",
            "127.0.0.1:0" if self.metrics else "0",
            "--health-probe-bind-address",
            "127.0.0.1:0" if self.probes else "0",
            *self.args,
        ]

    async def start(self) -> MemopProcess:
        inherited = _flag_variables()
        env = {k: v for k, v in os.environ.items() if k not in inherited}
        env.update(self.env)
        self.process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
        )
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            text = line.decode(errors="replace").rstrip("\n")
            self.lines.append(text)
            with contextlib.suppress(ValueError):
                record = json.loads(text)
                if isinstance(record, dict):
                    self.records.append(record)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode

    def find(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        return next((r for r in self.records if predicate(r)), None)

    def _start_record(self) -> dict[str, Any] | None:
        """The start line, ``starting NAME VERSION`` with the identity (memop's project or
        another one: the name is the project's)."""
        return self.find(lambda r: r.get("msg", "").startswith("starting ") and "identity" in r)

    def identity(self) -> str | None:
        """The leader-election identity the process logged at start."""
        record = self._start_record()
        return None if record is None else record.get("identity")

    def user_agent(self) -> str | None:
        """The User-Agent of this process's API requests (``NAME/VERSION (identity)``), once it
        has logged its start line."""
        record = self._start_record()
        if record is None:
            return None
        _, name, version = str(record["msg"]).split(" ", 2)
        return f"{name}/{version} ({record.get('identity')})"

    def address(self, path: str) -> str | None:
        """``host:port`` memop serves ``path`` on, once it has logged it."""
        for record in self.records:
            msg = record.get("msg", "")
            if msg.startswith("serving ") and path in msg:
                return str(msg.rsplit(" on ", 1)[1])
        return None

    async def wait_log(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30
    ) -> dict[str, Any]:
        """The first log record matching ``predicate``, waiting for it up to ``timeout``."""
        found: dict[str, Any] | None = await wait_for(
            lambda: self.find(predicate), timeout=timeout, message=self._tail
        )
        assert found is not None
        return found

    async def url(self, path: str, timeout: float = 30) -> str:
        """``http://host:port/path[?query]`` once memop serves ``path`` (the query is kept)."""
        route = path.split("?", 1)[0]
        address = await wait_for(lambda: self.address(route), timeout=timeout, message=self._tail)
        return f"http://{address}{path}"

    async def get(self, path: str, **headers: str) -> tuple[int, str]:
        url = await self.url(path)
        async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as response:
            return response.status, await response.text()

    async def samples(self) -> list[Sample]:
        """Every sample ``/metrics`` serves right now (text format, parsed by prometheus_client)."""
        status, text = await self.get("/metrics")
        if status != 200:
            raise AssertionError(f"/metrics answered {status}: {text[:200]}")
        return [sample for family in text_string_to_metric_families(text) for sample in family.samples]

    async def wait_ready(self, timeout: float = 30) -> None:
        async def ready() -> bool:
            if self.returncode is not None:
                raise AssertionError(f"memop exited with {self.returncode}:\n{self._tail()}")
            try:
                status, _ = await self.get("/readyz")
            except aiohttp.ClientError:
                return False
            return status == 200

        await wait_for(ready, timeout=timeout, message=self._tail)

    def send(self, signum: int) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signum)

    async def wait(self, timeout: float = 30) -> int:
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), timeout)
        if self._reader is not None:
            await self._reader
        return code

    async def terminate(self, timeout: float = 30) -> int:
        self.send(signal.SIGTERM)
        return await self.wait(timeout)

    async def kill(self) -> int:
        self.send(signal.SIGKILL)
        return await self.wait()

    async def stop(self) -> None:
        """End the process however it is (for fixture teardown)."""
        if self.process is None:
            return
        if self.process.returncode is None:
            try:
                await self.terminate(timeout=15)
            except TimeoutError:
                await self.kill()
        elif self._reader is not None:
            await self._reader
        mutated = [r for r in self.records if MUTATION_MARK in str(r.get("msg", ""))]
        if mutated:  # with MEMOP_CHECK_CACHE=1, as the tests run memop (memop.runtime.cache.store)
            raise AssertionError(f"memop changed cached objects in place: {mutated[:3]}")

    def _tail(self) -> str:
        return "\n".join(self.lines[-30:])


def sample_value(samples: Sequence[Sample], metric: str, /, **labels: str) -> float | None:
    """The sum of the samples called ``metric`` whose labels include ``labels`` (any label,
    ``name`` too); None when there is none."""
    values = [
        s.value for s in samples if s.name == metric and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    return sum(values) if values else None


class MemopProcesses:
    """The memop processes one test starts against one kubeconfig; :meth:`stop` ends them all."""

    def __init__(self, kubeconfig: str | Path) -> None:
        self.kubeconfig = kubeconfig
        self.started: list[MemopProcess] = []

    async def start(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        metrics: bool = True,
        probes: bool = True,
        webhooks: bool = False,
    ) -> MemopProcess:
        process = MemopProcess(
            self.kubeconfig, args, env=env, metrics=metrics, probes=probes, webhooks=webhooks
        )
        self.started.append(process)
        return await process.start()

    async def stop(self) -> None:
        """End every process still running (SIGTERM, then SIGKILL after 15 s)."""
        await asyncio.gather(*(process.stop() for process in self.started))


class ApiServerProcess:
    """``python -m memop.testing serve --kubeconfig KUBECONFIG *options`` as a process; start
    with :meth:`start`, end with :meth:`stop` (or use :func:`serving` / :func:`serving_async`).

    The server's log (its stderr) goes to ``output`` if given, else to a temporary file; either
    way its tail is in the error when the server does not start. Its stdout is read only for
    the ready line (the CLI prints nothing else there).
    """

    READY = "listening on "

    def __init__(
        self, kubeconfig: str | Path, options: Sequence[str] = (), *, output: Path | None = None
    ) -> None:
        self.kubeconfig = Path(kubeconfig)
        self.options = list(options)
        self.output = output
        self.process: subprocess.Popen[bytes] | None = None
        self.banner = ""
        self._log: IO[bytes] | None = None
        self._stdout = b""

    @property
    def command(self) -> list[str]:
        serve = [sys.executable, "-m", "memop.testing", "serve"]
        return [*serve, f"--kubeconfig={self.kubeconfig}", *self.options]

    @property
    def url(self) -> str:
        """The server's ``http://127.0.0.1:port``, from its ready line."""
        return self.banner.split(self.READY, 1)[1].split(", kubeconfig ", 1)[0]

    def spawn(self) -> None:
        """Start the process, without waiting for it to serve (see :meth:`wait_ready`)."""
        assert self.process is None, "already started"
        # Closed by stop(); the server writes to it for as long as it runs.
        log = self.output.open("w+b") if self.output is not None else tempfile.TemporaryFile()  # noqa: SIM115
        self._log = log
        self.process = subprocess.Popen(
            self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log
        )

    def wait_ready(self, timeout: float = 30) -> None:
        """Block until the server has printed its ready line (so the kubeconfig is written);
        RuntimeError with its output if it exits first or ``timeout`` passes."""
        assert self.process is not None
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                for line in self._stdout.splitlines(keepends=True):
                    if line.endswith(b"\n") and self.READY.encode() in line:
                        self.banner = line.decode(errors="replace").strip()
                        if not self.kubeconfig.is_file():
                            self._fail(f"it said it is ready but {self.kubeconfig} does not exist")
                        return
                left = deadline - time.monotonic()
                if left <= 0:
                    self._fail(f"it did not print its ready line within {timeout} s")
                if selector.select(left):
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            self.process.wait(5)
                        self._fail(f"it exited with status {self.process.returncode}")
                    self._stdout += chunk

    def start(self, timeout: float = 30) -> ApiServerProcess:
        """:meth:`spawn`, then :meth:`wait_ready`; stops the process if it does not start."""
        try:
            self.spawn()
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 20) -> int | None:
        """End the process (SIGTERM, then SIGKILL after ``timeout``); its exit status."""
        try:
            if self.process is None:
                return None
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            return self.process.returncode
        finally:
            if self.process is not None and self.process.stdout is not None:
                self.process.stdout.close()
            if self._log is not None:
                self._log.close()

    def output_tail(self, size: int = 4000) -> str:
        """The end of what the server wrote (its log, then its stdout)."""
        log = b""
        if self._log is not None and not self._log.closed:
            fd = self._log.fileno()
            end = os.fstat(fd).st_size
            log = os.pread(fd, size, max(0, end - size))  # not moving the offset the server writes at
        return (log + self._stdout[-size:]).decode(errors="replace")

    def _fail(self, why: str) -> None:
        raise RuntimeError(
            f"the API server ({' '.join(self.command[1:])}) did not start: {why}\n{self.output_tail()}"
        )


@contextlib.contextmanager
def serving(
    kubeconfig: str | Path, *options: str, output: Path | None = None, timeout: float = 30
) -> Iterator[ApiServerProcess]:
    """Run ``python -m memop.testing serve`` writing ``kubeconfig``, with ``options``, while the
    block runs; yield it once it serves (see :class:`ApiServerProcess`)."""
    server = ApiServerProcess(kubeconfig, options, output=output).start(timeout)
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def serving_async(
    kubeconfig: str | Path, *options: str, output: Path | None = None, timeout: float = 30
) -> AsyncIterator[ApiServerProcess]:
    """:func:`serving` for async code: the waits run in a thread, not on the event loop."""
    server = ApiServerProcess(kubeconfig, options, output=output)
    try:
        server.spawn()
        await asyncio.to_thread(server.wait_ready, timeout)
        yield server
    finally:
        await asyncio.to_thread(server.stop)
