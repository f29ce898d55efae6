"""What a controller package gives the manager: :class:`ControllerDefinition`.

A memop process runs the controllers ``--controllers`` names; each is a package exposing one
definition. The definition says everything the rest of memop needs to know about it without
importing its internals: its name (the ``--controllers`` entry, the ``controller`` label of its
metrics, its Events' source), how to set it up on a manager's cache, the CRDs it serves (for
``manifests/crd`` and the start-up check), the permissions it needs (``manifests/rbac``) and
its sample objects (``manifests/samples``, ``memop demo``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memop.runtime.api.permissions import Rule
from memop.runtime.cache.cache import Cache
from memop.runtime.client.client import Client
from memop.runtime.controller.controller import Controller
from memop.runtime.manager.events import EventRecorder
from memop.runtime.webhook.declarations import AdmissionWebhook, Conversion


@dataclass(frozen=True)
class SetupContext:
    """What a controller's setup gets from the manager that will run it.

    ``recorder`` records Events as ``<name>-controller``; ``max_concurrent_reconciles`` is the
    ``--max-concurrent-reconciles`` flag; ``field_manager`` names the writer in the objects'
    ``managedFields`` for server-side applies: the project's name (``memop run`` passes it);
    empty, a controller uses its own name.
    """

    cache: Cache
    client: Client
    recorder: EventRecorder
    max_concurrent_reconciles: int = 1
    field_manager: str = ""


@dataclass(frozen=True)
class ControllerDefinition:
    """One controller, as the manager, the manifests and the demo see it.

    name: lower-case, the ``--controllers`` entry and the ``controller`` metrics label.
    description: one line for ``--help`` and the README.
    setup: declares the controller's informers on ``context.cache`` and returns the
        controller, not started (the manager starts it once leading).
    crds: the CustomResourceDefinitions it serves, fresh dicts on each call.
    rules: every permission its code sends, in the scope it sends it (see memop.runtime.api.permissions).
    samples: file name under ``manifests/samples`` -> sample object, fresh on each call.
    webhooks: its kinds' admission webhooks (defaulters, validators); served by every replica,
        written into the Validating/MutatingWebhookConfigurations by ``manifests``.
    conversions: its kinds' version conversions (hub and spoke); served at ``/convert``, and
        the CRDs of these kinds get ``spec.conversion.strategy: Webhook``.
    """

    name: str
    description: str
    setup: Callable[[SetupContext], Controller]
    crds: Callable[[], Sequence[dict[str, Any]]]
    rules: tuple[Rule, ...]
    samples: Callable[[], Mapping[str, dict[str, Any]]]
    webhooks: tuple[AdmissionWebhook, ...] = ()
    conversions: tuple[Conversion, ...] = ()
