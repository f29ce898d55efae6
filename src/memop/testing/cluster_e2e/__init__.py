"""End-to-end tests on a real cluster: the operator's image deployed with its own manifests, as
Kubebuilder's ``test/e2e`` suite does it, for any memop project (``memop init`` generates
``tests/cluster_e2e/`` on these functions; memop's own suite is ``tests/cluster_e2e/``).

Nothing here runs unless the environment names a cluster and an image (:func:`skip_unless_configured`
marks a test so, :func:`settings_or_skip` reads the settings):

- ``E2E_IMAGE``: the operator's image reference, already on the cluster's nodes (or built and
  loaded by the next two); unset, the tests are skipped with :data:`SKIP_REASON`.
- ``E2E_KUBECONFIG`` (else ``KUBECONFIG``): the cluster; never ``~/.kube/config`` by default,
  since the tests install and delete cluster-wide objects there.
- ``E2E_BUILD=docker|podman|buildah``: build ``E2E_IMAGE`` from the project's Dockerfile first.
- ``E2E_LOAD``: a shell command that puts the image on the nodes, ``{image}`` in it standing for
  the (quoted) reference, else appended: ``kind load docker-image``, or
  ``podman save {image} | ctr -n k8s.io images import -`` on a node of your own.
- ``E2E_OVERLAY``: the kustomize overlay to install, relative to the project (default
  ``manifests/default``, which needs cert-manager once a kind has webhooks;
  ``manifests/webhook-self-managed`` does without).
- ``E2E_TIMEOUT``: seconds each wait may take (default 300).

:func:`deployed` is the whole install as an async context manager: the image built and loaded
(when asked), the overlay rendered by ``kubectl kustomize`` with the manager container's image
set to ``E2E_IMAGE`` (``imagePullPolicy: IfNotPresent``: a loaded image is never pulled), every
kind it holds checked to be served by the cluster, and ``kubectl apply --server-side``. It
yields an :class:`Install` (:meth:`~Install.wait_for_rollout`, :meth:`~Install.check_metrics`,
:meth:`~Install.converge`), and on the way out :meth:`~Install.tear_down` deletes the samples,
then everything it applied (what ``kubectl delete -k`` deletes), and fails naming any object a
finalizer keeps.

Everything goes through ``kubectl`` (on PATH), read by its exit codes and JSON output only,
never its wording. Waits poll with a deadline; a wait that times out fails with the state that
explains it (the pods' container states, the object's conditions).
"""

from __future__ import annotations

from memop.testing.cluster_e2e.errors import ClusterE2EError
from memop.testing.cluster_e2e.install import (
    Install,
    deployed,
    load_command,
    prepare_image,
    render,
    unserved_kinds,
)
from memop.testing.cluster_e2e.kubectl import Kubectl
from memop.testing.cluster_e2e.objects import has_condition, with_image
from memop.testing.cluster_e2e.settings import (
    SKIP_REASON,
    Settings,
    read_settings,
    settings_or_skip,
    skip_unless_configured,
)

__all__ = [
    "SKIP_REASON",
    "ClusterE2EError",
    "Install",
    "Kubectl",
    "Settings",
    "deployed",
    "has_condition",
    "load_command",
    "prepare_image",
    "read_settings",
    "render",
    "settings_or_skip",
    "skip_unless_configured",
    "unserved_kinds",
    "with_image",
]
