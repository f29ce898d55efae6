"""The webhooks of an operator a test runs in-process, served and registered for that test alone:
what ``run_operator(..., webhooks=True)`` does, as controller-runtime's envtest does with its
``WebhookInstallOptions``.

:class:`LoopbackWebhooks` makes a serving certificate for 127.0.0.1 (a CA of its own) in a
temporary folder, gives the webhook server's options (loopback, a free port), and once the
operator serves registers the project's webhook configurations and CRD conversions (what
``memop manifests`` writes, called at the loopback URL and trusted through that CA) under names
of the test's own, narrowed to the test's namespaces; :meth:`LoopbackWebhooks.close` takes them
back and removes the folder. On a real cluster the API server must run on the same machine to
reach 127.0.0.1.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

from kubernetes_asyncio.client import ApiClient, Configuration

from memop.project import Project
from memop.runtime.client.client import Client
from memop.runtime.webhook.server import WebhookServerOptions
from memop.testing.tls import ServingCertificates
from memop.testing.webhooks import InstalledWebhooks, install_webhooks

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class LoopbackWebhooks:
    """A test's own certificate and webhook registrations (see the module docstring)."""

    def __init__(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="memop-test-webhooks-"))
        certificates = ServingCertificates.generate("memop-test-webhooks")
        (self._folder / "tls.crt").write_bytes(certificates.cert_pem)
        (self._folder / "tls.key").write_bytes(certificates.key_pem)
        self._ca_pem = certificates.ca_pem
        self.options = WebhookServerOptions(host="127.0.0.1", port=0, cert_dir=self._folder)
        self._admin: ApiClient | None = None
        self._installed: InstalledWebhooks | None = None

    async def register(
        self, configuration: Configuration, project: Project, url: str, namespaces: Sequence[str]
    ) -> None:
        """Register ``project``'s webhooks at ``url`` as the administrator ``configuration`` is;
        with ``namespaces``, its admission webhooks judge objects in those namespaces only."""
        within = {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(namespaces)}
        selector = {"matchExpressions": [within]} if namespaces else None
        self._admin = ApiClient(configuration)
        self._installed = await install_webhooks(
            Client(self._admin, user_agent="memop-test-webhooks"),
            project,
            url,
            self._ca_pem,
            namespace_selector=selector,
            name_prefix=f"{project.name}-test-{uuid.uuid4().hex[:8]}-",
        )

    async def close(self) -> None:
        """Take the registrations back and remove the certificate. Safe to call more than once."""
        try:
            if self._installed is not None:
                await self._installed.uninstall()
        finally:
            self._installed = None
            if self._admin is not None:
                await self._admin.close()
                self._admin = None
            shutil.rmtree(self._folder, ignore_errors=True)
