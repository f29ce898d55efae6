"""A project's webhooks registered with a test cluster, as controller-runtime's envtest does
with its ``WebhookInstallOptions``.

:func:`install_webhooks` writes the Mutating/ValidatingWebhookConfigurations and the CRDs'
``spec.conversion`` that ``memop manifests`` generates for a project's declarations, with one
difference: each ``clientConfig`` is a URL on loopback (where the test's operator serves its
webhooks) instead of the in-cluster Service, which neither the in-memory API server nor a
kube-apiserver outside the cluster network can reach. Names are the installs' (the project's
prefix and Kubebuilder's base names), so an operator run with ``--webhook-certs=self-managed``
finds them and sets their ``caBundle`` itself; or pass ``ca_bundle`` when the test made the
certificate. :meth:`InstalledWebhooks.uninstall` deletes the configurations and puts the CRDs'
conversion back as it was.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memop.manifests.target import Target
from memop.manifests.webhooks import configurations, crd_name
from memop.project import Project
from memop.runtime.client.client import Client
from memop.runtime.client.errors import NotFound
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, Resource
from memop.runtime.webhook.declarations import CONVERSION_PATH

__all__ = ["InstalledWebhooks", "install_webhooks"]

_CONFIGURATIONS = {
    kind: Resource("admissionregistration.k8s.io", "v1", f"{kind.lower()}s", kind, namespaced=False)
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
}


@dataclass
class InstalledWebhooks:
    """What :func:`install_webhooks` wrote: configuration names by kind, and each converted
    CRD's conversion before (to put back)."""

    client: Client
    configurations: list[tuple[Resource, str]] = field(default_factory=list)
    conversions_before: dict[str, dict[str, Any]] = field(default_factory=dict)

    async def uninstall(self) -> None:
        for resource, name in self.configurations:
            with contextlib.suppress(NotFound):
                await self.client.delete(resource, name)
        for name, before in self.conversions_before.items():
            with contextlib.suppress(NotFound):
                restored = {"webhook": None, **before}
                await self.client.patch(CUSTOM_RESOURCE_DEFINITIONS, name, {"spec": {"conversion": restored}})
        self.configurations.clear()
        self.conversions_before.clear()


async def install_webhooks(
    client: Client,
    project: Project,
    base_url: str,
    ca_bundle: bytes | None = None,
    *,
    namespace_selector: dict[str, Any] | None = None,
    controllers: Sequence[str] | None = None,
    name_prefix: str | None = None,
) -> InstalledWebhooks:
    """Register ``project``'s webhooks (those of ``controllers``, default all) with the cluster
    ``client`` talks to, called at ``base_url`` (``https://127.0.0.1:PORT``) and trusted through
    ``ca_bundle`` (PEM; None leaves the caBundle to the operator's self-managed certificates).
    ``namespace_selector`` narrows every admission webhook (a real cluster's other namespaces
    are then never judged by a test's operator). ``name_prefix`` replaces the install's prefix
    (``<project>-``) in the configurations' names: a test on a real cluster where the project is
    installed must not replace the install's own. The CRDs must be installed already."""
    chosen = project.controllers
    if controllers is not None:
        chosen = tuple(project.controller(name) for name in controllers)
    target = Target(dataclasses.replace(project, controllers=tuple(chosen)))
    installed = InstalledWebhooks(client)
    client_extra = {"caBundle": base64.b64encode(ca_bundle).decode()} if ca_bundle else {}
    try:
        # Fresh dicts on each call (configurations() builds them), changed in place here.
        for configuration in configurations(target):
            prefix = target.prefix if name_prefix is None else name_prefix
            configuration["metadata"]["name"] = prefix + configuration["metadata"]["name"]
            for webhook in configuration["webhooks"]:
                path = webhook["clientConfig"]["service"]["path"]
                webhook["clientConfig"] = {"url": base_url + path, **client_extra}
                if namespace_selector is not None:
                    webhook["namespaceSelector"] = namespace_selector
            resource = _CONFIGURATIONS[configuration["kind"]]
            await client.create(resource, configuration)
            installed.configurations.append((resource, configuration["metadata"]["name"]))
        for definition in chosen:
            for conversion in definition.conversions:
                name = crd_name(conversion)
                crd = await client.get(CUSTOM_RESOURCE_DEFINITIONS, name)
                installed.conversions_before[name] = copy.deepcopy(
                    crd["spec"].get("conversion") or {"strategy": "None"}
                )
                stanza = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {"url": base_url + CONVERSION_PATH, **client_extra},
                        "conversionReviewVersions": ["v1"],
                    },
                }
                await client.patch(CUSTOM_RESOURCE_DEFINITIONS, name, {"spec": {"conversion": stanza}})
    except BaseException:
        await installed.uninstall()
        raise
    return installed
