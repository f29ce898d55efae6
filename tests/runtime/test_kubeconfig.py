"""memop.runtime.client.kubeconfig: which source is used, and the one line saying what was tried."""

from __future__ import annotations

import base64
import json
import logging
import os
from pathlib import Path

import pytest

from memop.runtime.client.kubeconfig import KubeConfigError, in_cluster_namespace, load_configuration


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def service_account(directory: Path, namespace: str = "ops") -> Path:
    directory.mkdir()
    (directory / "token").write_text("sa-token")
    (directory / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (directory / "namespace").write_text(f"{namespace}\n")
    return directory


IN_CLUSTER = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}


async def failure(kubeconfig: str | None, tmp_path: Path, origin: str = "--kubeconfig") -> str:
    with pytest.raises(KubeConfigError) as caught:
        await load_configuration(
            kubeconfig, origin=origin, environ={"HOME": str(tmp_path)}, service_account_dir=tmp_path / "sa"
        )
    message = str(caught.value)
    assert "\n" not in message
    return message


async def test_a_missing_kubeconfig_is_one_line_naming_the_file_and_where_it_came_from(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "missing"
    with caplog.at_level(logging.DEBUG):
        message = await failure(str(missing), tmp_path, origin="KUBECONFIG")
    assert message == (
        f"no Kubernetes configuration found; tried KUBECONFIG: {missing} (no such file) (with an "
        "explicit kubeconfig, the in-cluster config and ~/.kube/config are not tried)"
    )
    # Nothing else logged: kubernetes_asyncio's own "Config not found" warning is not reached.
    assert not caplog.records


async def test_a_kubeconfig_list_names_every_path_tried(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    message = await failure(f"{tmp_path}/a::{tmp_path}/dir", tmp_path)
    assert f"tried --kubeconfig: {tmp_path}/a (no such file), {tmp_path}/dir (a directory) (" in message


async def test_missing_files_in_a_list_are_skipped_when_one_exists(tmp_path: Path) -> None:
    real = write_kubeconfig(tmp_path / "real", "http://127.0.0.1:1234")
    configuration = await load_configuration(
        f"{tmp_path}/missing:{real}", environ={"HOME": str(tmp_path)}, service_account_dir=tmp_path / "sa"
    )
    assert configuration.host == "http://127.0.0.1:1234"


async def test_an_invalid_kubeconfig_says_what_is_wrong(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.write_text("{}")
    message = await failure(str(broken), tmp_path)
    assert message.startswith(f"cannot use kubeconfig {broken} (from --kubeconfig): ")
    assert "current-context" in message


async def test_an_explicit_kubeconfig_wins_over_the_service_account(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:4321")
    configuration = await load_configuration(
        str(path), environ=IN_CLUSTER, service_account_dir=service_account(tmp_path / "sa")
    )
    assert configuration.host == "http://127.0.0.1:4321"


async def test_in_cluster_when_the_service_account_files_exist_even_with_home_config(tmp_path: Path) -> None:
    sa = service_account(tmp_path / "sa")
    (tmp_path / ".kube").mkdir()
    write_kubeconfig(tmp_path / ".kube" / "config", "http://127.0.0.1:1")
    configuration = await load_configuration(
        None, environ={**IN_CLUSTER, "HOME": str(tmp_path)}, service_account_dir=sa
    )
    assert configuration.host == "https://10.0.0.1:443"
    assert configuration.ssl_ca_cert == str(sa / "ca.crt")
    assert in_cluster_namespace(sa) == "ops"


async def test_home_kube_config_without_a_service_account(tmp_path: Path) -> None:
    (tmp_path / ".kube").mkdir()
    write_kubeconfig(tmp_path / ".kube" / "config", "http://127.0.0.1:5678")
    configuration = await load_configuration(
        None, environ={**IN_CLUSTER, "HOME": str(tmp_path)}, service_account_dir=tmp_path / "no-sa"
    )
    assert configuration.host == "http://127.0.0.1:5678"
    assert in_cluster_namespace(tmp_path / "no-sa") is None


async def test_nothing_found_names_every_source_tried(tmp_path: Path) -> None:
    message = await failure(None, tmp_path)
    assert message == (
        "no Kubernetes configuration found; tried --kubeconfig/KUBECONFIG (not set), in-cluster config "
        f"(KUBERNETES_SERVICE_HOST unset or no service-account token), {tmp_path}/.kube/config (no such file)"
    )


async def test_a_broken_service_account_is_one_line(tmp_path: Path) -> None:
    sa = service_account(tmp_path / "sa")
    (sa / "ca.crt").unlink()
    with pytest.raises(KubeConfigError, match=r"^cannot use the in-cluster service account: "):
        await load_configuration(None, environ=IN_CLUSTER, service_account_dir=sa)


# --- inline certificates: memory files, nothing written ------------------------------------------


def inline_kubeconfig(path: Path, **user: str) -> Path:
    """A kubeconfig with an inline CA (and ``user``'s fields), and a second context whose
    cluster's CA is inline too but unused."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://127.0.0.1:6443", **encoded(b"the CA")}},
                    {"name": "other", "cluster": {"server": "https://10.0.0.2", **encoded(b"another CA")}},
                ],
                "users": [{"name": "u", "user": {"token": "t", **user}}],
                "contexts": [
                    {"name": "x", "context": {"cluster": "c", "user": "u"}},
                    {"name": "y", "context": {"cluster": "other", "user": "u"}},
                ],
                "current-context": "x",
            }
        )
    )
    return path


def encoded(ca: bytes) -> dict[str, str]:
    return {"certificate-authority-data": base64.b64encode(ca).decode()}


async def test_inline_certificates_are_memory_files_and_nothing_is_written(tmp_path: Path) -> None:
    path = inline_kubeconfig(
        tmp_path / "kc",
        **{
            "client-certificate-data": base64.b64encode(b"the certificate").decode(),
            "client-key-data": base64.b64encode(b"the key").decode(),
        },
    )
    before = path.read_text()
    configuration = await load_configuration(str(path))
    files = {
        "ca": configuration.ssl_ca_cert,
        "cert": configuration.cert_file,
        "key": configuration.key_file,
    }
    assert {name: Path(file).read_bytes() for name, file in files.items()} == {
        "ca": b"the CA",
        "cert": b"the certificate",
        "key": b"the key",
    }
    for file in files.values():
        assert os.readlink(file).startswith("/memfd:kubeconfig-"), file  # in memory, on no filesystem
    assert sorted(tmp_path.iterdir()) == [path]
    assert path.read_text() == before  # the file is read, never rewritten
    # Loading it again reuses the same memory files.
    again = await load_configuration(str(path))
    assert again.ssl_ca_cert == configuration.ssl_ca_cert


async def test_inline_data_wins_over_a_file_and_a_relative_file_is_the_kubeconfigs(tmp_path: Path) -> None:
    (tmp_path / "user.crt").write_bytes(b"from the file")
    (tmp_path / "user.key").write_bytes(b"the key's file")
    path = inline_kubeconfig(
        tmp_path / "kc",
        **{
            "client-certificate": "user.crt",
            "client-certificate-data": base64.b64encode(b"from the data").decode(),
            "client-key": "user.key",
        },
    )
    configuration = await load_configuration(str(path))
    assert Path(configuration.cert_file).read_bytes() == b"from the data"
    assert configuration.key_file == str(tmp_path / "user.key")
    # Empty data means no certificate, as kubernetes_asyncio has it: the file is not used then.
    path = inline_kubeconfig(
        tmp_path / "kc2", **{"client-certificate": "user.crt", "client-certificate-data": ""}
    )
    assert (await load_configuration(str(path))).cert_file is None


async def test_bad_inline_data_is_one_line(tmp_path: Path) -> None:
    path = inline_kubeconfig(tmp_path / "kc", **{"client-key-data": "not base64!"})
    message = await failure(str(path), tmp_path)
    assert message.startswith(f"cannot use kubeconfig {path} (from --kubeconfig): ")
