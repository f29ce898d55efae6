from __future__ import annotations

import argparse
import asyncio
import json
import logging
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import memop
from memop.cli import app
from memop.cli.options import parse_run_args
from memop.project import Project
from memop.runtime import CONFIGMAPS, ControllerBuilder, ControllerDefinition
from memop.runtime.webhook.declarations import AdmissionWebhook
from memop.scaffold.command import build_parser as build_scaffold_parser
from memop.testing.apiserver.server import ApiServer
from memop.testing.process import free_port
from memop.testing.tls import ServingCertificates
from memop.testing.wait import wait_for


def test_version_flag_prints_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memop", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"memop {memop.__version__}"


def test_help_flag_describes_the_operator() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memop", "--help"], capture_output=True, text=True, check=True
    )
    assert "Memcached" in out.stdout


def _commands(parser: argparse.ArgumentParser, prefix: str = "memop") -> list[str]:
    """Every leaf command of ``parser``'s subcommands: ``memop init``, ``memop create api``..."""
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, f"{prefix} {name}") or [f"{prefix} {name}"]
    return found


def test_help_lists_every_subcommand() -> None:
    # argparse wraps the description: compare with its lines joined.
    text = " ".join(
        subprocess.run(
            [sys.executable, "-m", "memop", "--help"], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    scaffolding = _commands(build_scaffold_parser())
    assert {"memop init", "memop create api", "memop create webhook"} <= set(scaffolding)
    for command in [*scaffolding, "memop manifests", "memop demo"]:
        assert f"'{command}'" in text, command


# The webhook flags reach the manager (memop.cli.app): a project of the test's own whose one
# controller declares a validating webhook, run in-process on the in-memory API server.


class _Nothing:
    async def reconcile(self, request: object) -> None:
        return None


class _Checker:
    async def validate_create(self, obj: dict[str, Any], request: object) -> list[str]:
        return ["served by the CLI's manager"]

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any], request: object) -> list[str]:
        return []

    async def validate_delete(self, obj: dict[str, Any], request: object) -> list[str]:
        return []


_WEBHOOK = AdmissionWebhook("example.memop.dev", "v1", "Probe", "probes", validator=_Checker())


def _project() -> Project:
    definition = ControllerDefinition(
        name="watcher",
        description="watches ConfigMaps, does nothing",
        setup=lambda context: ControllerBuilder(context.cache, "watcher").for_(CONFIGMAPS).build(_Nothing()),
        crds=lambda: [],
        rules=(),
        samples=lambda: {},
        webhooks=(_WEBHOOK,),
    )
    return Project(name="hooked", domain="example.memop.dev", controllers=(definition,))


@pytest.fixture
def root_logging() -> Iterator[None]:
    """app.run configures the root logger (to the captured stderr): put it back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


def _lines(err: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


@pytest.mark.usefixtures("root_logging")
async def test_the_webhook_flags_reach_the_manager(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    pair = ServingCertificates.generate("cli-webhooks")
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "tls.crt").write_bytes(pair.cert_pem)
    (certs / "tls.key").write_bytes(pair.key_pem)
    async with ApiServer() as server:
        server.write_kubeconfig(tmp_path / "kubeconfig")
        common = ["--kubeconfig", str(tmp_path / "kubeconfig"), "--metrics-bind-address", "0"]
        common += ["--health-probe-bind-address", "0", "--log-format", "json"]

        # A missing certificate directory: exit 1 and one error line naming it, no traceback.
        config = parse_run_args(
            [*common, "--webhook-cert-dir", str(tmp_path / "absent")], env={}, project=_project()
        )
        assert await app.run(config, asyncio.Event()) == 1
        err = capfd.readouterr().err
        assert "Traceback" not in err
        assert [line["msg"] for line in _lines(err) if line["level"] == "error"] == [
            f"cannot serve webhooks: cannot read the webhook certificate {tmp_path}/absent/tls.crt: "
            "No such file or directory (the webhook certificate directory must hold tls.crt and tls.key: "
            "mount the serving certificate's Secret there, or let memop make it with "
            "--webhook-certs=self-managed, or run without webhooks: --no-enable-webhooks)"
        ]

        # Served on the port and host given, from the directory given.
        port = free_port()
        argv = [
            *common,
            "--webhook-cert-dir",
            str(certs),
            "--webhook-host",
            "127.0.0.1",
            "--webhook-port",
            str(port),
        ]
        stop = asyncio.Event()
        run = asyncio.create_task(app.run(parse_run_args(argv, env={}, project=_project()), stop))
        try:
            trust = ssl.create_default_context(cadata=pair.ca_pem.decode())
            review = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "u",
                    "kind": {"group": "example.memop.dev", "version": "v1", "kind": "Probe"},
                    "resource": {"group": "example.memop.dev", "version": "v1", "resource": "probes"},
                    "operation": "CREATE",
                    "object": {
                        "apiVersion": "example.memop.dev/v1",
                        "kind": "Probe",
                        "metadata": {"name": "p"},
                    },
                },
            }

            async def answer() -> Any:
                url = f"https://127.0.0.1:{port}{_WEBHOOK.validating_path}"
                try:
                    async with (
                        aiohttp.ClientSession() as http,
                        http.post(url, json=review, ssl=trust) as response,
                    ):
                        return await response.json()
                except aiohttp.ClientConnectorError:
                    return None

            reply = await wait_for(answer)
            assert reply["response"]["warnings"] == ["served by the CLI's manager"]
        finally:
            stop.set()
            assert await run == 0

        # ENABLE_WEBHOOKS=false (Kubebuilder's): the controllers run, without webhooks nor certificate.
        config = parse_run_args(
            [*common, "--webhook-cert-dir", str(tmp_path / "absent")],
            env={"ENABLE_WEBHOOKS": "false"},
            project=_project(),
        )
        stop = asyncio.Event()
        run = asyncio.create_task(app.run(config, stop))
        seen: list[dict[str, Any]] = []

        def started() -> bool:
            seen.extend(_lines(capfd.readouterr().err))
            return run.done() or any(line["msg"] == "controller started" for line in seen)

        await wait_for(started)
        stop.set()
        assert await run == 0
        assert not [line for line in seen if line["level"] == "error"]
