"""Audit logs: a real kube-apiserver's read as request records, and the in-memory server's own
(``audit_log=``, ``serve --audit-log``) read back the same way.

``data/kube-apiserver-v1.36.2-audit.jsonl`` holds lines a v1.36.2 kube-apiserver wrote with
``--audit-log-format=json`` and a Metadata-level policy for writes, while kubectl created,
patched (and dry-ran, and failed to re-create) and deleted a ConfigMap and created and failed to
replace a Lease (the user's credentials and the authorizer's annotations left out).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient

from memop.runtime.client.client import Client
from memop.runtime.client.errors import Conflict
from memop.runtime.client.resources import CONFIGMAPS
from memop.testing.apiserver.requestlog import (
    AuditLogError,
    audit_event,
    read_audit_log,
    records_from_audit_events,
)
from memop.testing.apiserver.server import ApiServer

REAL = Path(__file__).parent / "data" / "kube-apiserver-v1.36.2-audit.jsonl"


def test_a_real_servers_audit_log_reads_as_request_records() -> None:
    records = read_audit_log(REAL)
    # The dry-run create is left out: it wrote nothing.
    assert [(r.verb, r.resource, r.name, r.status) for r in records] == [
        ("create", "configmaps", "c1", 201),
        ("patch", "configmaps", "c1", 200),
        ("create", "configmaps", "c1", 409),
        ("delete", "configmaps", "c1", 200),
        ("create", "leases", "l1", 201),
        ("update", "leases", "l1", 400),
    ]
    lease = records[-1]
    assert (lease.group, lease.version, lease.namespace) == ("coordination.k8s.io", "v1", "audit-probe")
    assert lease.path == "/apis/coordination.k8s.io/v1/namespaces/audit-probe/leases/l1"
    assert lease.user_agent.startswith("kubectl/v1.36.2 ")
    assert lease.resource_request
    assert records[0].group == ""  # the core group has no apiGroup
    times = [r.time for r in records]
    assert times == sorted(times)
    assert times[-1] - times[0] < 5
    # Microseconds survive: 2026-11-26T23:36:07.277193Z.
    assert round(records[0].time % 1, 6) == 0.277193


def test_only_complete_requests_count_and_a_torn_last_line_is_skipped() -> None:
    lines = REAL.read_text().splitlines(keepends=True)
    started = json.loads(lines[0]) | {"stage": "ResponseStarted"}
    torn = lines[1][: len(lines[1]) // 2]  # the server was still writing it
    records = records_from_audit_events([json.dumps(started) + "\n", lines[1], torn])
    assert [(r.verb, r.status) for r in records] == [("patch", 200)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json\n", "line 1 is not JSON"),
        ('{"kind": "Status"}\n', "line 1 is not an audit Event"),
        ('{"kind": "Event", "verb": "get", "stage": "ResponseComplete"}\n', "line 1: KeyError"),
    ],
)
def test_a_line_that_is_not_an_audit_event_is_an_error_naming_it(line: str, message: str) -> None:
    with pytest.raises(AuditLogError, match=message):
        records_from_audit_events([line, "\n"])


async def test_the_in_memory_servers_audit_log_reads_back_as_its_request_log(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    async with ApiServer(audit_log=path) as server, ApiClient(server.client_configuration()) as api:
        client = Client(api, user_agent="pytest/audit")
        try:
            await client.create(CONFIGMAPS, {"metadata": {"name": "c1"}, "data": {"a": "b"}}, "default")
            await client.patch(CONFIGMAPS, "c1", {"data": {"a": "c"}}, "default")
            with pytest.raises(Conflict):
                await client.create(CONFIGMAPS, {"metadata": {"name": "c1"}}, "default")
            await client.list(CONFIGMAPS, "default")
        finally:
            await client.close()
        logged = [r for r in server.log.records if r.resource_request]
        # Written as answered: complete while the server still runs.
        read = [r for r in read_audit_log(path) if r.resource_request]
    assert [(r.verb, r.resource, r.namespace, r.name, r.status) for r in read] == [
        (r.verb, r.resource, r.namespace, r.name, r.status) for r in logged
    ]
    assert [r.verb for r in read if r.resource == "configmaps"] == ["create", "patch", "create", "list"]
    assert all(abs(a.time - b.time) < 1e-5 for a, b in zip(read, logged, strict=True))
    assert audit_event(logged[0])["objectRef"]["resource"] == logged[0].resource


def test_serve_refuses_an_audit_log_it_cannot_write(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "memop.testing", "serve", "--kubeconfig", str(tmp_path / "kubeconfig")]
    result = subprocess.run(
        [*command, "--audit-log", str(tmp_path / "missing" / "audit.jsonl")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "error: --audit-log:" in lines[0]
