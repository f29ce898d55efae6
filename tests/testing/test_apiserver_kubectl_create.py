"""``kubectl create`` of built-in kinds against the in-memory API server, as a user types it.

kubectl sends what its generators build as protobuf (see :mod:`memop.testing.apiserver.protobuf`); here
the real kubectl binary creates namespaces, ConfigMaps, Secrets (generic, with binary data,
docker-registry and tls) and the other built-in kinds the server serves, and ``kubectl get``
reads them back. One test puts a recording proxy between kubectl and the in-memory server to
check that the bytes kubectl sent decode into exactly the object kubectl prints for
``--dry-run=client -o json``. With USE_EXISTING_CLUSTER=true the same tests (but the proxy's)
run against a real cluster.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from memop.testing.apiserver import protobuf
from memop.testing.tls import ServingCertificates

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH"),
]


async def kubectl(kubeconfig: Path, *args: str, check: bool = True) -> str:
    """kubectl's standard output; a failure fails the test with kubectl's error (unless ``check``
    is false)."""
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    if check:
        assert process.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


async def get_json(kubeconfig: Path, *args: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(await kubectl(kubeconfig, "get", *args, "-o", "json"))
    return value


async def get_names(kubeconfig: Path, *args: str) -> list[str]:
    """The names ``kubectl get`` prints (a table read through ``-o name``, so no column wording)."""
    out = await kubectl(kubeconfig, "get", *args, "-o", "name")
    return [line.split("/", 1)[1] for line in out.split()]


async def test_kubectl_create_namespace(cluster: ClusterHandle) -> None:
    name = f"memop-test-{uuid.uuid4().hex[:8]}"
    try:
        await kubectl(cluster.kubeconfig, "create", "namespace", name)
        created = await get_json(cluster.kubeconfig, "namespace", name)
        assert created["metadata"]["name"] == name
        assert created["status"]["phase"] == "Active"
        assert name in await get_names(cluster.kubeconfig, "namespaces")
        table = await kubectl(cluster.kubeconfig, "get", "namespace", name)
        assert name in table.split()
    finally:
        await kubectl(cluster.kubeconfig, "delete", "namespace", name, "--ignore-not-found", "--wait=false")


async def test_kubectl_create_configmap_from_literal_and_file(
    cluster: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    blob = bytes(range(256))  # not UTF-8: kubectl puts it in binaryData
    (tmp_path / "blob").write_bytes(blob)
    (tmp_path / "text").write_text("hello\n")
    await kubectl(
        cluster.kubeconfig, "create", "configmap", "settings", "-n", namespace,
        "--from-literal=mode=fast", "--from-literal=empty=",
        f"--from-file=greeting={tmp_path / 'text'}", f"--from-file=blob={tmp_path / 'blob'}",
    )  # fmt: skip
    created = await get_json(cluster.kubeconfig, "configmap", "settings", "-n", namespace)
    assert created["data"] == {"mode": "fast", "empty": "", "greeting": "hello\n"}
    assert base64.b64decode(created["binaryData"]["blob"]) == blob
    assert "settings" in await get_names(cluster.kubeconfig, "configmaps", "-n", namespace)


async def test_kubectl_create_secret_generic(cluster: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    key = bytes(range(256))  # not UTF-8: a Secret holds any bytes
    (tmp_path / "key").write_bytes(key)
    await kubectl(
        cluster.kubeconfig, "create", "secret", "generic", "creds", "-n", namespace,
        "--from-literal=user=admin", "--from-literal=password=s3cr3t", f"--from-file=key={tmp_path / 'key'}",
        "--type=example.com/creds",
    )  # fmt: skip
    created = await get_json(cluster.kubeconfig, "secret", "creds", "-n", namespace)
    assert {k: base64.b64decode(v) for k, v in created["data"].items()} == {
        "user": b"admin",
        "password": b"s3cr3t",
        "key": key,
    }
    assert created["type"] == "example.com/creds"
    assert "creds" in await get_names(cluster.kubeconfig, "secrets", "-n", namespace)
    table = (await kubectl(cluster.kubeconfig, "get", "secret", "creds", "-n", namespace)).splitlines()
    assert table[0].split() == ["NAME", "TYPE", "DATA", "AGE"]
    assert table[1].split()[:3] == ["creds", "example.com/creds", "3"]
    # Opaque by default; docker-registry makes the typed Secret image pulls read.
    await kubectl(
        cluster.kubeconfig, "create", "secret", "generic", "plain", "-n", namespace, "--from-literal=a=b"
    )
    assert (await get_json(cluster.kubeconfig, "secret", "plain", "-n", namespace))["type"] == "Opaque"
    await kubectl(
        cluster.kubeconfig, "create", "secret", "docker-registry", "pull", "-n", namespace,
        "--docker-server=r.example.com", "--docker-username=u", "--docker-password=p",
    )  # fmt: skip
    pull = await get_json(cluster.kubeconfig, "secret", "pull", "-n", namespace)
    assert pull["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(base64.b64decode(pull["data"][".dockerconfigjson"]))["auths"]
    assert auths["r.example.com"]["username"] == "u"


async def test_kubectl_create_secret_tls(cluster: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    pair = ServingCertificates.generate("memop-test-tls")
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    await kubectl(
        cluster.kubeconfig, "create", "secret", "tls", "web-tls", "-n", namespace,
        f"--cert={tmp_path / 'tls.crt'}", f"--key={tmp_path / 'tls.key'}",
    )  # fmt: skip
    created = await get_json(cluster.kubeconfig, "secret", "web-tls", "-n", namespace)
    assert created["type"] == "kubernetes.io/tls"
    assert {k: base64.b64decode(v) for k, v in created["data"].items()} == {
        "tls.crt": pair.cert_pem,
        "tls.key": pair.key_pem,
    }


# kubectl create subcommands for the other built-in kinds the in-memory server serves: the
# arguments after the name, and a check of what kubectl get reads back.
NAMESPACED: dict[str, tuple[list[str], Any]] = {
    "serviceaccount": ([], lambda o: o["kind"] == "ServiceAccount"),
    "deployment": (
        ["--image=nginx:1.27", "--port=80", "--replicas=2"],
        lambda o: (
            o["spec"]["replicas"] == 2
            and o["spec"]["template"]["spec"]["containers"][0]["ports"]
            == [{"containerPort": 80, "protocol": "TCP"}]
        ),
    ),
    "service": (
        ["clusterip", "--tcp=80:8080"],
        lambda o: [(p["port"], p["targetPort"]) for p in o["spec"]["ports"]] == [(80, 8080)],
    ),
    "role": (
        ["--verb=get,list", "--resource=pods,deployments.apps"],
        lambda o: sorted(r["apiGroups"][0] for r in o["rules"]) == ["", "apps"],
    ),
    "rolebinding": (
        ["--clusterrole=view", "--user=jane"],
        lambda o: o["roleRef"]["name"] == "view" and o["subjects"][0]["name"] == "jane",
    ),
    "ingress": (
        ["--rule=web.example.com/api*=web:80,tls=web-tls", "--class=nginx"],
        lambda o: (
            o["spec"]["ingressClassName"] == "nginx"
            and o["spec"]["rules"][0]["http"]["paths"][0]
            == {
                "path": "/api",
                "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}},
            }
            and o["spec"]["tls"] == [{"hosts": ["web.example.com"], "secretName": "web-tls"}]
        ),
    ),
    "poddisruptionbudget": (
        ["--selector=app=web", "--max-unavailable=20%"],
        lambda o: (
            o["spec"]["maxUnavailable"] == "20%" and o["spec"]["selector"] == {"matchLabels": {"app": "web"}}
        ),
    ),
}


@pytest.mark.parametrize("kind", list(NAMESPACED))
async def test_kubectl_create_other_namespaced_kinds(
    cluster: ClusterHandle, namespace: str, kind: str
) -> None:
    args, check = NAMESPACED[kind]
    subcommand, rest = (["service", args[0]], args[1:]) if kind == "service" else ([kind], args)
    await kubectl(cluster.kubeconfig, "create", *subcommand, "made", *rest, "-n", namespace)
    resource = "service" if kind == "service" else kind
    assert check(await get_json(cluster.kubeconfig, resource, "made", "-n", namespace))


async def test_kubectl_create_cluster_role_and_binding(cluster: ClusterHandle) -> None:
    name = f"memop-test-{uuid.uuid4().hex[:8]}"
    try:
        await kubectl(
            cluster.kubeconfig, "create", "clusterrole", name, "--verb=get", "--resource=configmaps"
        )
        await kubectl(
            cluster.kubeconfig, "create", "clusterrolebinding", name, f"--clusterrole={name}", "--group=g"
        )
        role = await get_json(cluster.kubeconfig, "clusterrole", name)
        assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
        binding = await get_json(cluster.kubeconfig, "clusterrolebinding", name)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": name,
        }
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "g"}
        ]
    finally:
        for resource in ("clusterrolebinding", "clusterrole"):
            await kubectl(cluster.kubeconfig, "delete", resource, name, "--ignore-not-found")


# --- what kubectl sent, decoded, is what kubectl would have sent as JSON -----------------------------


@dataclass
class Recorded:
    """Bodies of the writes that went through the proxy: (method, content type, body)."""

    writes: list[tuple[str, str, bytes]] = field(default_factory=list)


@asynccontextmanager
async def recording_proxy(upstream: str) -> AsyncIterator[tuple[str, Recorded]]:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` that records every POST and PUT body."""
    recorded = Recorded()
    session = aiohttp.ClientSession()

    async def forward(request: web.Request) -> web.Response:
        body = await request.read()
        if request.method in ("POST", "PUT"):
            recorded.writes.append((request.method, request.content_type, body))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with session.request(
            request.method, upstream + request.path_qs, data=body or None, headers=headers
        ) as reply:
            payload = await reply.read()
            content_type = reply.headers.get("Content-Type", "application/json")
            return web.Response(body=payload, status=reply.status, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}", recorded
    finally:
        await runner.cleanup()
        await session.close()


GENERATORS = [
    ["namespace", "{name}"],
    ["configmap", "{name}", "--from-literal=a=1", "--from-literal=b=", "--from-file=bin={blob}"],
    ["secret", "generic", "{name}", "--from-literal=user=admin", "--type=example.com/creds"],
    ["secret", "docker-registry", "{name}", "--docker-server=r.example.com", "--docker-username=u",
     "--docker-password=p"],
    ["serviceaccount", "{name}"],
    ["deployment", "{name}", "--image=nginx:1.27", "--image=busybox", "--port=80", "--replicas=3"],
    ["service", "clusterip", "{name}", "--tcp=80:8080", "--tcp=443:https"],
    ["service", "clusterip", "{name}", "--clusterip=None"],
    ["service", "nodeport", "{name}", "--tcp=80:8080", "--node-port=30080"],
    ["service", "loadbalancer", "{name}", "--tcp=80"],
    ["service", "externalname", "{name}", "--external-name=example.com"],
    ["role", "{name}", "--verb=get,list", "--resource=pods,deployments.apps", "--resource-name=x"],
    ["rolebinding", "{name}", "--role=r", "--user=u", "--group=g", "--serviceaccount=default:sa"],
    ["clusterrole", "{name}", "--verb=get", "--resource=pods", "--non-resource-url=/logs"],
    ["clusterrole", "{name}", "--aggregation-rule=example.com/aggregate=true"],
    ["clusterrolebinding", "{name}", "--clusterrole=view", "--user=u"],
    ["poddisruptionbudget", "{name}", "--selector=app=web", "--min-available=1"],
    ["poddisruptionbudget", "{name}", "--selector=app=web", "--max-unavailable=20%"],
    ["job", "{name}", "--image=busybox"],
    ["cronjob", "{name}", "--image=busybox", "--schedule=*/5 * * * *", "--restart=OnFailure"],
    ["quota", "{name}", "--hard=pods=10,requests.cpu=500m", "--scopes=NotBestEffort"],
    ["priorityclass", "{name}", "--value=1000", "--description=high", "--preemption-policy=Never"],
    ["ingress", "{name}", "--rule=a.example.com/=web:http", "--rule=/exact=web:8080,tls", "--class=c",
     "--default-backend=web:80", "--annotation=example.com/a=b"],
]  # fmt: skip


@pytest.mark.fake_only
async def test_what_kubectl_sends_decodes_to_what_kubectl_prints(
    cluster: ClusterHandle, tmp_path: Path
) -> None:
    server = cluster.fake
    blob = tmp_path / "blob"
    blob.write_bytes(bytes(range(256)))
    async with recording_proxy(server.url) as (url, recorded):
        config = server.kubeconfig()
        config["clusters"][0]["cluster"]["server"] = url
        proxied = tmp_path / "proxied-kubeconfig"
        proxied.write_text(yaml.safe_dump(config))
        sent_protobuf = 0
        for generator in GENERATORS:
            args = [a.format(name=f"pb-{uuid.uuid4().hex[:8]}", blob=blob) for a in generator]
            printed = json.loads(await kubectl(proxied, "create", *args, "--dry-run=client", "-o", "json"))
            before = len(recorded.writes)
            # --dry-run=server: the request is sent and answered, nothing is kept.
            await kubectl(proxied, "create", *args, "--dry-run=server", "-o", "json", check=False)
            writes = recorded.writes[before:]
            assert len(writes) == 1, (args, writes)
            _, content_type, body = writes[0]
            if content_type != protobuf.MEDIA_TYPE:
                assert json.loads(body) == printed, args  # a kubectl that sends JSON for this kind
                continue
            sent_protobuf += 1
            assert protobuf.decode(body) == printed, args
    if not sent_protobuf:
        pytest.skip("this kubectl sent no protobuf body")
