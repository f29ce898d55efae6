"""The envtest convention: which cluster a test talks to.

With ``USE_EXISTING_CLUSTER=true`` and ``KUBECONFIG`` set, integration tests run against that
real cluster; otherwise against a fresh in-memory :class:`~memop.testing.server.ApiServer`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from kubernetes_asyncio.client import Configuration

if TYPE_CHECKING:
    from memop.testing.server import ApiServer


def use_existing_cluster() -> bool:
    return os.environ.get("USE_EXISTING_CLUSTER", "").lower() == "true" and bool(os.environ.get("KUBECONFIG"))


FAKE_ONLY_REASON = "needs the in-memory API server's fault injection; USE_EXISTING_CLUSTER=true"


@dataclass
class Kube:
    """The cluster a test talks to: how to connect, and the in-memory server when it is one."""

    configuration: Configuration
    server: ApiServer | None

    @property
    def fake(self) -> ApiServer:
        """The in-memory server; skips the test on a real cluster."""
        if self.server is None:
            pytest.skip(FAKE_ONLY_REASON)
        return self.server
