"""The generic controller runtime: client, watches, cache, workqueue, controllers, manager.

Nothing in this package knows about an operator; controllers are built on top of it. The
names exported here are the public, supported surface for writing a controller (the README's
"Writing a controller" walks through one); everything else in the submodules may change.

Declaring a controller:

- :class:`ControllerDefinition` / :class:`SetupContext`: what a controller package gives the
  manager (name, setup, CRDs, RBAC rules, samples), and what its setup receives (the cache,
  the client, its Event recorder, the worker count).
- :class:`ControllerBuilder`: ``for_`` its kind, ``owns`` the kinds it controls (their events
  enqueue the owner), ``watches`` others through a map function; ``build(reconciler)``.
- :class:`Reconciler` (anything with ``async reconcile(request) -> Result | None``),
  :class:`Request`, :class:`Result`, :class:`TerminalError` (do not retry).
- :mod:`predicates <memop.runtime.predicates>`: which watch events are worth a reconcile
  (``generation_changed``, ``label_selector``...).

Reading and writing:

- :class:`Cache`: informers per resource (and label selector) with ``get``/``list`` by
  namespace, owner uid and labels; ``record_write`` after each write so the next reconcile
  reads its own write.
- :class:`Client`: plain dicts in and out (``get``, ``list``, ``create``, ``patch``,
  ``patch_status``, ``delete`` with preconditions), typed errors: :class:`ApiError` and its
  subclasses :class:`NotFound`, :class:`AlreadyExists`, :class:`Conflict`, :class:`BadRequest`,
  :class:`Forbidden`, :class:`Invalid`; :class:`TransportError` when the server cannot be
  reached.
- :class:`Expectations`: the creates and deletes a controller is waiting to see in its cache
  (client-go's ControllerExpectations), so a lagging cache never makes it act twice.
- :func:`update_status`: write a status only when it changed.
- :mod:`validation <memop.runtime.validation>`: the API server's wording for a field of the
  wrong type, for a spec validated in Python (``type_error``, ``json_type``).
- :mod:`conditions <memop.runtime.conditions>`: ``set_condition`` (transition times move
  only when the status flips), ``find_condition``, ``conditions_schema``.
- :class:`EventRecorder` with :data:`NORMAL` and :data:`WARNING`: Events, sent in the background.
- :class:`Resource` names a kind (group, version, plural, kind); :data:`PODS`,
  :data:`DEPLOYMENTS` and others are predefined. :class:`Selector` parses label selectors.
  Cached objects are plain dicts (:data:`Obj`; :func:`dig` reads a nested field safely);
  :func:`controller_reference` builds a child's controller ownerReference and
  :func:`controller_owner_uid` reads it.
- :class:`Clock` (:class:`RealClock`, :class:`FakeClock` for tests) and :func:`rfc3339`:
  time-based logic takes a clock, so tests never sleep.

Describing the API and its permissions:

- :mod:`crdgen <memop.runtime.crdgen>`: :class:`CrdNames`, ``custom_resource_definition``,
  ``printer_column``, ``crd_yaml``;
- :class:`Rule` and :class:`Scope` (:func:`watched` for several verbs at once, :func:`own_kind`
  for what every controller needs on its own kind): each permission the code sends, and why.

Running: :class:`Manager` / :class:`ManagerOptions` (``python -m memop`` builds one from flags).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memop.runtime import conditions, crdgen, predicates, validation
    from memop.runtime.cache import Cache
    from memop.runtime.client import Client
    from memop.runtime.clock import Clock, FakeClock, RealClock, rfc3339
    from memop.runtime.controller import Controller, ControllerBuilder
    from memop.runtime.crdgen import CrdNames
    from memop.runtime.definition import ControllerDefinition, SetupContext
    from memop.runtime.errors import (
        AlreadyExists,
        ApiError,
        BadRequest,
        Conflict,
        Forbidden,
        Invalid,
        NotFound,
        TransportError,
    )
    from memop.runtime.events import NORMAL, WARNING, EventRecorder
    from memop.runtime.expectations import Expectations
    from memop.runtime.labels import Selector
    from memop.runtime.manager import Manager, ManagerOptions
    from memop.runtime.permissions import Rule, Scope, own_kind, watched
    from memop.runtime.reconcile import Reconciler, Request, Result, TerminalError
    from memop.runtime.resources import DEPLOYMENTS, EVENTS, NAMESPACES, PODS, Resource
    from memop.runtime.status import update_status
    from memop.runtime.store import Obj, controller_owner_uid, controller_reference, dig

# Loaded on first use (PEP 562), so that importing one submodule (memop.runtime.k8simport,
# which must run before kubernetes_asyncio is imported) does not import them all.
_EXPORTS: dict[str, str] = {
    "AlreadyExists": "memop.runtime.errors",
    "ApiError": "memop.runtime.errors",
    "BadRequest": "memop.runtime.errors",
    "Cache": "memop.runtime.cache",
    "Client": "memop.runtime.client",
    "Clock": "memop.runtime.clock",
    "Conflict": "memop.runtime.errors",
    "Controller": "memop.runtime.controller",
    "ControllerBuilder": "memop.runtime.controller",
    "ControllerDefinition": "memop.runtime.definition",
    "CrdNames": "memop.runtime.crdgen",
    "DEPLOYMENTS": "memop.runtime.resources",
    "EVENTS": "memop.runtime.resources",
    "EventRecorder": "memop.runtime.events",
    "Expectations": "memop.runtime.expectations",
    "FakeClock": "memop.runtime.clock",
    "Forbidden": "memop.runtime.errors",
    "Invalid": "memop.runtime.errors",
    "Manager": "memop.runtime.manager",
    "ManagerOptions": "memop.runtime.manager",
    "NAMESPACES": "memop.runtime.resources",
    "NORMAL": "memop.runtime.events",
    "NotFound": "memop.runtime.errors",
    "Obj": "memop.runtime.store",
    "PODS": "memop.runtime.resources",
    "RealClock": "memop.runtime.clock",
    "Reconciler": "memop.runtime.reconcile",
    "Request": "memop.runtime.reconcile",
    "Resource": "memop.runtime.resources",
    "Result": "memop.runtime.reconcile",
    "Rule": "memop.runtime.permissions",
    "Scope": "memop.runtime.permissions",
    "Selector": "memop.runtime.labels",
    "SetupContext": "memop.runtime.definition",
    "TerminalError": "memop.runtime.reconcile",
    "TransportError": "memop.runtime.errors",
    "WARNING": "memop.runtime.events",
    "controller_owner_uid": "memop.runtime.store",
    "controller_reference": "memop.runtime.store",
    "dig": "memop.runtime.store",
    "rfc3339": "memop.runtime.clock",
    "update_status": "memop.runtime.status",
    "watched": "memop.runtime.permissions",
    "own_kind": "memop.runtime.permissions",
    "conditions": "",
    "crdgen": "",
    "predicates": "",
    "validation": "",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module:  # a name defined in that module
        value = getattr(importlib.import_module(module), name)
    else:  # a submodule
        value = importlib.import_module(f"{__name__}.{name}")
    globals()[name] = value
    return value


__all__ = [
    "DEPLOYMENTS",
    "EVENTS",
    "NAMESPACES",
    "NORMAL",
    "PODS",
    "WARNING",
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Cache",
    "Client",
    "Clock",
    "Conflict",
    "Controller",
    "ControllerBuilder",
    "ControllerDefinition",
    "CrdNames",
    "EventRecorder",
    "Expectations",
    "FakeClock",
    "Forbidden",
    "Invalid",
    "Manager",
    "ManagerOptions",
    "NotFound",
    "Obj",
    "RealClock",
    "Reconciler",
    "Request",
    "Resource",
    "Result",
    "Rule",
    "Scope",
    "Selector",
    "SetupContext",
    "TerminalError",
    "TransportError",
    "conditions",
    "controller_owner_uid",
    "controller_reference",
    "crdgen",
    "dig",
    "own_kind",
    "predicates",
    "rfc3339",
    "update_status",
    "validation",
    "watched",
]
