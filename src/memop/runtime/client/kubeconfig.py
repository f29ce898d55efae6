"""Where the Kubernetes connection comes from, in controller-runtime's order.

1. an explicit kubeconfig (``--kubeconfig`` or ``KUBECONFIG``; a ``:``-separated list merges),
2. the in-cluster service account (``KUBERNETES_SERVICE_HOST`` and the token file),
3. ``~/.kube/config``.

When none works, :class:`KubeConfigError` names everything that was tried, in one line.

Nothing is written: a kubeconfig's inline certificates (``certificate-authority-data``,
``client-certificate-data``, ``client-key-data``), which kubernetes_asyncio's loader would copy
into temporary files, are handed to it as memory files (:mod:`memop.runtime.util.memfile`), so
memop runs on a read-only root filesystem without a writable /tmp. The in-cluster config reads
the service account's files where they are. (A kubeconfig user whose ``exec`` plugin returns a
client certificate, or an OIDC provider refreshed with an inline CA, still gets temporary files
from kubernetes_asyncio: neither exists in a Pod.)
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config.kube_config import ConfigNode, KubeConfigLoader, KubeConfigMerger

from memop.runtime.util.memfile import memory_file

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeConfigError(Exception):
    """No usable Kubernetes configuration; the message lists what was tried."""


def in_cluster_namespace(service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> str | None:
    """The pod's namespace from the service-account files, or None outside a cluster."""
    try:
        return (service_account_dir / "namespace").read_text().strip() or None
    except OSError:
        return None


def running_in_cluster(
    environ: Mapping[str, str] | None = None, service_account_dir: Path = SERVICE_ACCOUNT_DIR
) -> bool:
    """Whether this process runs in a Pod: the kubelet sets ``KUBERNETES_SERVICE_HOST`` in every
    container, and mounts the service account's namespace file unless told not to."""
    environ = os.environ if environ is None else environ
    return (
        bool(environ.get("KUBERNETES_SERVICE_HOST")) or in_cluster_namespace(service_account_dir) is not None
    )


async def load_configuration(
    kubeconfig: str | None,
    *,
    origin: str = "--kubeconfig",
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> Configuration:
    """A client Configuration from the first source that works (see the module docstring).

    ``origin`` says where ``kubeconfig`` came from (``--kubeconfig`` or ``KUBECONFIG``), for
    the error message. An explicit kubeconfig is the only source tried, as in
    controller-runtime: a typo in it must not silently fall back to another cluster.
    """
    environ = os.environ if environ is None else environ
    tried: list[str] = []
    configuration = Configuration()
    if kubeconfig:
        _check_kubeconfig_files(kubeconfig, origin)
        try:
            await _load_kubeconfig(kubeconfig, configuration)
        except Exception as error:
            raise KubeConfigError(f"cannot use kubeconfig {kubeconfig} (from {origin}): {error}") from error
        return configuration
    token = service_account_dir / "token"
    if environ.get("KUBERNETES_SERVICE_HOST") and token.exists():
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration,
                token_filename=str(token),
                cert_filename=str(service_account_dir / "ca.crt"),
                environ=dict(environ),
            )
        except Exception as error:
            raise KubeConfigError(f"cannot use the in-cluster service account: {error}") from error
        return configuration
    tried.append("in-cluster config (KUBERNETES_SERVICE_HOST unset or no service-account token)")
    default = Path(environ.get("HOME", "~")).expanduser() / ".kube" / "config"
    if default.exists():
        try:
            await _load_kubeconfig(str(default), configuration)
        except Exception as error:
            raise KubeConfigError(f"cannot use kubeconfig {default}: {error}") from error
        return configuration
    tried.append(f"{default} (no such file)")
    raise KubeConfigError(
        "no Kubernetes configuration found; tried --kubeconfig/KUBECONFIG (not set), " + ", ".join(tried)
    )


def _check_kubeconfig_files(kubeconfig: str, origin: str) -> None:
    """Raise KubeConfigError, in one line naming every path tried, unless at least one file of
    the (``:``-separated) list exists; missing ones among existing ones are skipped, as kubectl
    does. Checked here because kubernetes_asyncio reports a missing file as an invalid one."""
    paths = [Path(part).expanduser() for part in kubeconfig.split(os.pathsep) if part]
    if any(path.is_file() for path in paths):
        return
    problems = ", ".join(f"{path} ({'a directory' if path.is_dir() else 'no such file'})" for path in paths)
    raise KubeConfigError(
        f"no Kubernetes configuration found; tried {origin}: {problems or repr(kubeconfig)} (with an "
        "explicit kubeconfig, the in-cluster config and ~/.kube/config are not tried)"
    )


async def _load_kubeconfig(paths: str, configuration: Configuration) -> None:
    """kubernetes_asyncio's ``load_kube_config(paths)`` (the files merged, the current context,
    changed credentials saved back), the current context's inline certificates given to it as
    memory files rather than written to temporary files (see the module docstring)."""
    merger = KubeConfigMerger(paths)
    if merger.config is not None:
        _inline_certificates_in_memory(merger.config)
    loader = KubeConfigLoader(
        config_dict=merger.config, config_base_path=None, config_persister=merger.save_changes
    )
    await loader.load_and_set(configuration)


# (list, entry key, certificate fields) of a kubeconfig whose "<field>-data" holds base64 PEM.
_INLINE_CERTIFICATES = (
    ("clusters", "cluster", ("certificate-authority",)),
    ("users", "user", ("client-certificate", "client-key")),
)


def _inline_certificates_in_memory(config: ConfigNode) -> None:
    """Replace, in the merged ``config``, the current context's cluster and user by copies whose
    ``<field>-data`` is a ``<field>`` naming a memory file with the decoded bytes: what the
    loader would have made a temporary file of. The files' own dicts are left as they are (the
    loader saves those back when a token is refreshed). Anything malformed is left for the
    loader to report, as it would have."""
    contexts = config.safe_get("contexts")
    current = _named(contexts, config.safe_get("current-context"))
    context = current.get("context") if current else None
    if not isinstance(context, dict):
        return
    for section, key, fields in _INLINE_CERTIFICATES:
        entries = config.safe_get(section)
        name = context.get(key)
        for index, entry in enumerate(entries if isinstance(entries, list) else []):
            value = _value(entry)
            body = value.get(key) if value.get("name") == name else None
            if not isinstance(entry, ConfigNode) or not isinstance(body, dict):
                continue
            copy = dict(body)
            for field in fields:
                if f"{field}-data" not in copy:
                    continue
                # As the loader: the data wins over the file; empty data means no certificate.
                data = copy.pop(f"{field}-data")
                copy.pop(field, None)
                if data:
                    copy[field] = memory_file(base64.standard_b64decode(data), name=f"kubeconfig-{field}")
            if copy != body:
                entries[index] = ConfigNode(entry.name, {**value, key: copy}, entry.path)


def _named(entries: Any, name: Any) -> dict[str, Any] | None:
    """The entry of a kubeconfig list called ``name``, as a dict; None if there is none."""
    for entry in entries if isinstance(entries, list) else []:
        value = _value(entry)
        if value.get("name") == name:
            return value
    return None


def _value(entry: Any) -> dict[str, Any]:
    """A kubeconfig list entry (a dict, or the merger's ConfigNode around one) as a dict."""
    value = entry.value if isinstance(entry, ConfigNode) else entry
    return value if isinstance(value, dict) else {}
