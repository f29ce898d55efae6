"""Testing operators: an in-memory Kubernetes API server spoken to over real HTTP(S), and the
pytest plugin that runs any project's controllers against it (memop's envtest).

The names exported here are the public surface for a project's tests; the plugin's fixtures
(``kube``, ``client``, ``namespace``, ``install_crds``, ``run_operator``) hand out most of them.

- :class:`ApiServer`: the in-memory API server (``python -m memop.testing serve`` runs one
  alone); :class:`Kube` is the cluster a test talks to (that server, or a real cluster with
  ``USE_EXISTING_CLUSTER=true`` and ``KUBECONFIG``), :func:`cluster` the same outside pytest.
- :class:`RunningOperator`: controllers running in-process on a cluster (what ``run_operator``
  yields); :class:`OperatorExited` when its manager exits while a test expects it to run.
- :class:`RunOperator` and :class:`InstallCrds`: the types of the ``run_operator`` and
  ``install_crds`` fixtures, for annotating tests.
- :func:`install_crds`, :func:`release_finalizers`, :func:`event_recorded`: CRDs in and
  Established, finalizers dropped before a namespace goes, the first Event that matches.
- :func:`install_webhooks` / :class:`InstalledWebhooks`: a project's webhook configurations and
  CRD conversions, as ``memop manifests`` writes them but called on a loopback URL, where the
  test's operator serves them (envtest's ``WebhookInstallOptions``); ``uninstall`` takes them back.
- :func:`wait_for` / :class:`WaitTimeout`: poll a condition with a deadline (tests never sleep).
- :mod:`cluster_e2e`: the project's image deployed to a real cluster with its own manifests, its
  rollout, metrics and samples checked, and torn down (Kubebuilder's ``test/e2e``; what
  ``memop init``'s ``tests/cluster_e2e`` runs), skipped unless ``E2E_IMAGE`` is set.
- :class:`Kind`, :class:`ResourceType`, :class:`Strategy`: a kind the in-memory server lacks,
  added through the ``extra_kinds`` fixture, ``ApiServer(extra_kinds=...)`` or
  ``python -m memop.testing serve --extra-kinds module:attribute`` (:mod:`memop.testing.kinds`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memop.runtime.util.lazy import lazy_exports

if TYPE_CHECKING:
    from memop.testing import cluster_e2e
    from memop.testing.apiserver.resources import ResourceType
    from memop.testing.apiserver.server import ApiServer
    from memop.testing.apiserver.strategy import Kind, Strategy
    from memop.testing.envtest import Kube, cluster
    from memop.testing.operator import (
        OperatorExited,
        RunningOperator,
        event_recorded,
        install_crds,
        release_finalizers,
    )
    from memop.testing.plugin import InstallCrds, RunOperator
    from memop.testing.wait import WaitTimeout, wait_for
    from memop.testing.webhooks import InstalledWebhooks, install_webhooks

# Loaded on first use (PEP 562): the pytest plugin imports this package in every test run, and
# must not bring the server or kubernetes_asyncio with it.
_EXPORTS: dict[str, str] = {
    "ApiServer": "memop.testing.apiserver.server",
    "cluster_e2e": "memop.testing.cluster_e2e",
    "InstalledWebhooks": "memop.testing.webhooks",
    "install_webhooks": "memop.testing.webhooks",
    "InstallCrds": "memop.testing.plugin",
    "Kind": "memop.testing.apiserver.strategy",
    "Kube": "memop.testing.envtest",
    "OperatorExited": "memop.testing.operator",
    "ResourceType": "memop.testing.apiserver.resources",
    "RunOperator": "memop.testing.plugin",
    "RunningOperator": "memop.testing.operator",
    "Strategy": "memop.testing.apiserver.strategy",
    "WaitTimeout": "memop.testing.wait",
    "cluster": "memop.testing.envtest",
    "event_recorded": "memop.testing.operator",
    "install_crds": "memop.testing.operator",
    "release_finalizers": "memop.testing.operator",
    "wait_for": "memop.testing.wait",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "ApiServer",
    "InstallCrds",
    "InstalledWebhooks",
    "Kind",
    "Kube",
    "OperatorExited",
    "ResourceType",
    "RunOperator",
    "RunningOperator",
    "Strategy",
    "WaitTimeout",
    "cluster",
    "cluster_e2e",
    "event_recorded",
    "install_crds",
    "install_webhooks",
    "release_finalizers",
    "wait_for",
]
