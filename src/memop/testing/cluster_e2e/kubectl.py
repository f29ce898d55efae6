"""kubectl on the cluster under test, read by its exit codes and JSON output only (never its
wording), and the waits built on it: each poll is a kubectl process, so they poll once a second,
with a deadline, and fail with the state that explains a timeout. Functions on the error path
carry ``__tracebackhide__``: pytest shows the test's line and the error, not their frames."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from memop.testing.cluster_e2e.errors import ClusterE2EError
from memop.testing.cluster_e2e.objects import describe_stuck, group_version, object_ref
from memop.testing.wait import WaitTimeout, wait_for

KUBECTL_TIMEOUT = 120.0
FIELD_MANAGER = "memop-cluster-e2e"
# How often a wait asks the cluster again: each ask is a kubectl process.
POLL_INTERVAL = 1.0


@dataclass(frozen=True)
class Kubectl:
    """kubectl on one cluster. ``cache_dir``: its discovery cache (default: kubectl's own)."""

    kubeconfig: Path
    cache_dir: Path | None = None
    timeout: float = KUBECTL_TIMEOUT

    async def run(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        """kubectl's exit code, stdout and stderr."""
        flags = [f"--kubeconfig={self.kubeconfig}"]
        if self.cache_dir is not None:
            flags.append(f"--cache-dir={self.cache_dir}")
        return await run_command(["kubectl", *flags, *args], stdin=stdin, timeout=self.timeout)

    async def ok(self, *args: str, stdin: str | None = None) -> str:
        """kubectl's stdout; :class:`ClusterE2EError` with its stderr when it exits non-zero."""
        __tracebackhide__ = True
        code, out, err = await self.run(*args, stdin=stdin)
        if code != 0:
            raise ClusterE2EError(f"kubectl {' '.join(args)} exited {code}: {last_lines(err or out)}")
        return out

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object (``kind`` as kubectl names a resource: ``pods``, ``crd``...), None when absent."""
        args = ["get", kind, name, "--ignore-not-found", "-o", "json"]
        out = await self.ok(*args, *(["-n", namespace] if namespace else []))
        return json.loads(out) if out.strip() else None

    async def existing(self, objects: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Those of ``objects`` that exist, as the cluster has them: one ``kubectl get -f`` for
        all, else (a kind no longer served: its CRD deleted, its objects with it) one each."""
        if not objects:
            return []
        code, out, _ = await self.run(
            "get", "--ignore-not-found", "-o", "json", "-f", "-", stdin=_documents(objects)
        )
        if code == 0:
            if not out.strip():  # --ignore-not-found, and none found
                return []
            found = json.loads(out)
            items: list[dict[str, Any]] = found["items"] if found.get("kind") == "List" else [found]
            return items
        left = []
        for obj in objects:
            if await self.serves(obj["apiVersion"], obj["kind"]):
                found = await self.get(*object_ref(obj))
                left.extend([found] if found is not None else [])
        return left

    async def resources(self, api_version: str) -> list[dict[str, Any]]:
        """The resources the cluster serves at ``api_version`` (its discovery document: each
        one's ``name``, ``kind``, ``namespaced``...), subresources left out; [] when it serves
        none there."""
        code, out, _ = await self.run("get", "--raw", group_version(api_version))
        resources: list[dict[str, Any]] = json.loads(out).get("resources", []) if code == 0 else []
        return [r for r in resources if "/" not in str(r.get("name", "/"))]

    async def serves(self, api_version: str, kind: str) -> bool:
        """Whether the cluster serves ``kind`` at ``api_version``."""
        return any(r.get("kind") == kind for r in await self.resources(api_version))

    async def list(self, kind: str, namespace: str, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        """The objects of ``kind`` in ``namespace`` whose labels match ``selector``."""
        labels = ",".join(f"{key}={value}" for key, value in sorted(selector.items()))
        out = await self.ok("get", kind, "-n", namespace, "-l", labels, "-o", "json")
        items: list[dict[str, Any]] = json.loads(out).get("items", [])
        return items

    async def apply(self, objects: Sequence[Mapping[str, Any]], namespace: str | None = None) -> None:
        """Server-side apply of ``objects`` (namespaced ones without a namespace go to ``namespace``)."""
        args = ["apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}", "-f", "-"]
        await self.ok(*args, *(["-n", namespace] if namespace else []), stdin=_documents(objects))

    async def delete(self, objects: Sequence[Mapping[str, Any]], namespace: str | None = None) -> None:
        """Ask for ``objects`` to be deleted (those already gone are fine); returns at once:
        :func:`gone` waits."""
        if objects:
            args = ["delete", "--ignore-not-found", "--wait=false", "-f", "-"]
            await self.ok(*args, *(["-n", namespace] if namespace else []), stdin=_documents(objects))


async def run_command(
    argv: Sequence[str], *, stdin: str | None = None, timeout: float, shell: bool = False
) -> tuple[int, str, str]:
    """Run ``argv`` (one shell command line when ``shell``); its exit code, stdout and stderr.
    :class:`ClusterE2EError` when it cannot start or outlives ``timeout``."""
    try:
        if shell:
            process = await asyncio.create_subprocess_shell(
                argv[0],
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        else:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
    except OSError as error:
        raise ClusterE2EError(f"cannot run {argv[0]}: {error}") from None
    try:
        out, err = await asyncio.wait_for(
            process.communicate(stdin.encode() if stdin is not None else None), timeout
        )
    except TimeoutError:
        process.kill()
        await process.wait()
        raise ClusterE2EError(f"{shlex.join(argv)} took more than {timeout:g}s") from None
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def _documents(objects: Sequence[Mapping[str, Any]]) -> str:
    # YAML documents, as kubectl kustomize writes them.
    return yaml.safe_dump_all([dict(obj) for obj in objects], sort_keys=False)


def last_lines(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], timeout: float, message: Callable[[], Awaitable[str] | str]
) -> None:
    """Poll ``predicate`` at kubectl's pace (:func:`memop.testing.wait_for`) until it is true; at
    ``timeout`` a :class:`ClusterE2EError` carrying ``message()`` alone (the state that explains
    it: a predicate's name and value say nothing to a reader)."""
    __tracebackhide__ = True
    try:
        await wait_for(predicate, timeout, interval=POLL_INTERVAL, max_interval=POLL_INTERVAL)
    except WaitTimeout:
        text = message()
        raise ClusterE2EError(text if isinstance(text, str) else await text) from None


async def gone(kubectl: Kubectl, objects: Sequence[Mapping[str, Any]], timeout: float, what: str) -> None:
    """Wait until every one of ``objects`` is gone; :class:`ClusterE2EError` naming those left
    (and their finalizers) after ``timeout``."""
    __tracebackhide__ = True
    left: list[dict[str, Any]] = []

    async def none_left() -> bool:
        left[:] = await kubectl.existing(objects)
        return not left

    await wait_until(
        none_left,
        timeout,
        lambda: f"{what}: still there after {timeout:g}s: " + "; ".join(map(describe_stuck, left)),
    )
