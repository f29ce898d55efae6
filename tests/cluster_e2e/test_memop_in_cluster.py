r"""memop as its users run it: its image on a real cluster, installed by ``manifests/default``
(or the overlay ``E2E_OVERLAY`` names), as a project's generated ``tests/cluster_e2e`` does it.
The controller's pods become Ready under the namespace's restricted Pod Security level, their
/metrics answer a pod of memop's image (with a metrics-reader token, and 403 for another one
when ``--metrics-secure``), the samples of the three operators converge (Memcacheds at
v1alpha1 and v1beta1 and a PodSet Available, a MyPod Ready), and deleting it all leaves no
finalizer stuck.

Skipped unless the environment names the cluster and the image (never in CI), e.g. on a kind
cluster:

    E2E_IMAGE=memop:e2e E2E_BUILD=docker E2E_LOAD="kind load docker-image" \
        E2E_KUBECONFIG=~/.kube/config pytest tests/cluster_e2e

Every variable is in :mod:`memop.testing.cluster_e2e`. ``manifests/default`` takes the webhooks'
certificate from cert-manager: without it, ``E2E_OVERLAY=manifests/webhook-self-managed``. The
samples' own images (memcached, nginx, the MyPod's pause image) must be pullable or loaded on
the nodes too, and a node labelled ``project=test`` (the MyPod's node selector).
"""

from __future__ import annotations

from pathlib import Path

from memop.testing.cluster_e2e import deployed, settings_or_skip, skip_unless_configured

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "manifests" / "samples"
# A sample of each operator, and the condition that says it converged. The v1beta1 Memcached is
# created through the conversion webhook, and each Memcached through the validating one, both
# reached by the API server through the webhook Service; the PodSet whose pods serve (nginx).
CONVERGED = {
    "cache_v1alpha1_memcached.yaml": "Available",
    "cache_v1beta1_memcached.yaml": "Available",
    "batch_v1_podset_template.yaml": "Available",
    "harryyann.github.io_v1_mypod.yaml": "Ready",
}
pytestmark = skip_unless_configured()


async def test_memop_runs_in_the_cluster_and_converges_a_sample_of_each_operator() -> None:
    settings = settings_or_skip()
    async with deployed(REPO, settings) as install:  # deleted, and checked gone, on the way out
        await install.wait_for_rollout()
        await install.check_metrics()
        for sample, condition in CONVERGED.items():
            await install.converge(SAMPLES / sample, condition)
