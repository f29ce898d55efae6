"""Where the Kubernetes connection comes from, in controller-runtime's order.

1. an explicit kubeconfig (``--kubeconfig`` or ``KUBECONFIG``; a ``:``-separated list merges),
2. the in-cluster service account (``KUBERNETES_SERVICE_HOST`` and the token file),
3. ``~/.kube/config``.

When none works, :class:`KubeConfigError` names everything that was tried, in one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import Configuration

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
            await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
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
            await k8s_config.load_kube_config(config_file=str(default), client_configuration=configuration)
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
