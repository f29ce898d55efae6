"""Another operator's process, run by bench/converge.py's ``--operator NAME=COMMAND`` beside memop
and the floor: controller-runtime's tutorial controller, a Kopf operator, anything that
reconciles memop's Memcached CRD into Deployments.

The command is a template: ``{kubeconfig}``, ``{workers}`` and ``{namespaces}`` (comma-separated,
empty when the run watches all namespaces) are replaced; the process also gets ``KUBECONFIG``
and, unless the run watches all namespaces, ``WATCH_NAMESPACE`` (Operator SDK's convention) in
its environment. Its standard output and error go to a file, whose lines are counted at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PLACEHOLDERS = ("kubeconfig", "workers", "namespaces")


def parse_operator(text: str) -> tuple[str, str]:
    """``NAME=COMMAND`` → (name, command template); ValueError with a message for the user."""
    name, sep, command = text.partition("=")
    name = name.strip()
    if not sep or not name or not command.strip():
        raise ValueError(f"expected NAME=COMMAND, got {text!r}")
    if name in ("memop", "floor") or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"operator name {name!r}: letters, digits, - and _ only, not memop or floor")
    try:
        words = shlex.split(command)
        render(command, kubeconfig="k", workers=1, namespaces=[])
    except (ValueError, KeyError, IndexError) as error:
        raise ValueError(f"operator {name}: bad command template {command!r}: {error}") from None
    if not words or shutil.which(words[0]) is None:
        raise ValueError(f"operator {name}: {words[0] if words else command!r} is not an executable")
    return name, command


def render(template: str, *, kubeconfig: str, workers: int, namespaces: Sequence[str]) -> list[str]:
    """The command line for one run, each word's placeholders replaced."""
    values = {"kubeconfig": kubeconfig, "workers": str(workers), "namespaces": ",".join(namespaces)}
    return [word.format(**values) for word in shlex.split(template)]


class OperatorProcess:
    """One run of another operator; :meth:`stop` sends SIGTERM and waits, then kills."""

    def __init__(
        self,
        name: str,
        template: str,
        *,
        kubeconfig: str,
        workers: int,
        namespaces: Sequence[str],
        log_path: Path,
    ) -> None:
        """``namespaces``: what it watches (none: all namespaces)."""
        self.name = name
        self.args = render(template, kubeconfig=kubeconfig, workers=workers, namespaces=namespaces)
        self.env = {**os.environ, "KUBECONFIG": kubeconfig}
        self.env.pop("WATCH_NAMESPACE", None)
        # As Kubebuilder's `make run`: the benches install no webhook configuration nor serving
        # certificate, so an operator that serves webhooks (memop's, a Kubebuilder one) runs
        # without them, unless the caller's environment says otherwise.
        self.env.setdefault("ENABLE_WEBHOOKS", "false")
        if namespaces:
            self.env["WATCH_NAMESPACE"] = ",".join(namespaces)
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> OperatorProcess:
        with self.log_path.open("wb") as log:
            self.process = await asyncio.create_subprocess_exec(
                *self.args, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, env=self.env
            )
        return self

    def exited(self) -> int | None:
        """Its exit status if it has exited (it must not, during a run)."""
        return None if self.process is None else self.process.returncode

    async def stop(self) -> int | None:
        if self.process is None:
            return None
        if self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 30)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        return self.process.returncode

    def log_summary(self) -> dict[str, Any]:
        """Its log lines, and those at level error (JSON lines with a ``level`` field, as zap's
        and most structured loggers' are; other lines count as lines only)."""
        lines = errors = 0
        if self.log_path.exists():
            for line in self.log_path.read_text(errors="replace").splitlines():
                lines += 1
                if line.startswith("{"):
                    try:
                        level = str(json.loads(line).get("level", "")).lower()
                    except (ValueError, AttributeError):
                        continue
                    errors += level in ("error", "fatal", "panic", "critical")
        return {"lines": lines, "error_lines": errors, "file": str(self.log_path)}
