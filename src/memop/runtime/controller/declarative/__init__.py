"""Declarative children: the user says which children an object should have; memop does the rest.

::

    from memop.runtime import DEPLOYMENTS, SERVICES, CustomResource, Model, Status, declarative_controller

    class WebAppSpec(Model):
        image: str
        replicas: int = 1

    class WebApp(CustomResource, group="apps.example.com", version="v1"):
        spec: WebAppSpec
        status: Status = Status()

    def children(app: WebApp) -> list[dict]:
        labels = {"app": app.name}
        return [
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app.name},
             "spec": {"replicas": app.spec.replicas, "selector": {"matchLabels": labels},
                      "template": {"metadata": {"labels": labels},
                                   "spec": {"containers": [{"name": "web", "image": app.spec.image}]}}}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": app.name},
             "spec": {"selector": labels, "ports": [{"port": 80}]}},
        ]

    DEFINITION = declarative_controller(WebApp, children, children=(DEPLOYMENTS, SERVICES))

``desired(obj)`` is a pure function of the typed owner; it returns the children as dicts,
Pydantic models, kubernetes_asyncio models or anything with ``to_dict()`` (the API's camelCase
JSON). Each reconcile of an owner then:

- **applies** each child with server-side apply (field manager: the project's name, forced),
  with a controller ownerReference to the owner, the namespace defaulted to the owner's, and a
  label naming this controller (plus the owner's shard label when sharded). A namespaced owner
  owns children in its namespace; a cluster-scoped owner owns namespaced children in any
  namespace and cluster-scoped ones. A namespaced owner's cluster-scoped or cross-namespace
  child cannot carry an ownerReference: declaring such a kind is an error here, and such a
  child at run time a ``Degraded`` condition (write those with the imperative API:
  ``owner_annotations`` and ``map_to_annotated_owner``);
- **skips** the apply when the cached child already holds every field of it (a converged owner
  costs no request), so a child edited or deleted behind the operator's back is put back at
  once, and nothing else is written;
- **watches** every child kind through an informer that selects this controller's label (the
  cache holds only its children); a kind ``desired`` returns that was not declared is watched
  from the reconcile that first returns it;
- **prunes** the children it made that ``desired`` no longer returns;
- **reports** ``Ready``, ``Progressing``, ``Degraded`` and ``observedGeneration`` from the
  children's own status (kstatus rules, :mod:`memop.runtime.controller.readiness`; ``ready``
  overrides a kind's rule), plus the fields ``status`` returns, written only when they change,
  and a Warning Event for each new problem;
- reports a stored owner that fails its type's validation (``Degraded``/``InvalidSpec``, one
  Warning Event) and leaves it alone until it is edited;
- adds a finalizer only when ``on_delete`` is given: the cleanup of what is outside the cluster
  runs once when the owner is deleted, then the finalizer goes. Without ``on_delete``, a deleted
  owner still holding the finalizer (added by a version that had one) is let go: the finalizer
  is removed, or, when RBAC forbids that patch, a ``FinalizerLeft`` Warning Event says so.

Its RBAC follows from the code (:mod:`memop.runtime.controller.declarative.rules`): nothing to
declare but what the user's own functions send (``rules``).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from memop.runtime.api.errors import InvalidObject
from memop.runtime.api.permissions import Rule
from memop.runtime.client.resources import Resource
from memop.runtime.client.restmapper import RestMapper, builtin_resource
from memop.runtime.controller import predicates
from memop.runtime.controller.controller import Controller, ControllerBuilder
from memop.runtime.controller.declarative.children import (
    APPLIED_ANNOTATION,
    CONTROLLER_LABEL,
    ObservedChild,
    ObservedChildren,
    identity,
    to_object,
)
from memop.runtime.controller.declarative.reconciler import DeclarativeReconciler, TypedKind
from memop.runtime.controller.declarative.rules import declarative_rules
from memop.runtime.controller.declarative.webhook import TypedValidator
from memop.runtime.controller.definition import ControllerDefinition, SetupContext
from memop.runtime.controller.readiness import Readiness, ReadinessRule, kind_key
from memop.runtime.webhook.declarations import AdmissionWebhook

__all__ = [
    "APPLIED_ANNOTATION",
    "CONTROLLER_LABEL",
    "ObservedChild",
    "ObservedChildren",
    "declarative_controller",
]

T = TypeVar("T")


def declarative_controller(
    kind: type[T],
    desired: Callable[[T], Iterable[Any]],
    *,
    children: Iterable[Resource | type] | None = None,
    status: Callable[[T, ObservedChildren], Any] | None = None,
    ready: Mapping[str | tuple[str, str], Callable[[Mapping[str, Any]], Readiness | bool]] | None = None,
    on_delete: Callable[[T], Awaitable[None]] | None = None,
    validate: Callable[[T, T | None], Iterable[str] | None] | None = None,
    samples: Sequence[Any] | Mapping[str, Any] = (),
    name: str | None = None,
    description: str | None = None,
    rules: Iterable[Rule] = (),
) -> ControllerDefinition:
    """The :class:`ControllerDefinition` of a controller whose owners of ``kind`` (a
    CustomResource class) have the children ``desired(owner)`` returns (see the module docstring).

    children: the child kinds (Resources such as ``DEPLOYMENTS``, or CustomResource classes).
        Absent, they are found by calling ``desired`` on the ``samples``; a kind first returned
        at run time is watched from then on (its RBAC must then be in ``rules``).
    status: ``(owner, children) -> fields`` (a dict or a model) merged into the owner's status;
        ``children.get("Deployment")`` reads a child as it now is.
    ready: a child kind's readiness rule, by ``"apps/Deployment"`` (``"Service"`` for the core
        group) or ``(group, kind)``: ``fn(child) -> bool | Readiness``, replacing the built-in one.
    on_delete: ``async fn(owner)``, the cleanup of what is outside the cluster; only then does
        the owner get a finalizer. An exception is retried with backoff.
    validate: ``fn(new, old or None) -> warnings``, raising ValueError (or ValidationError) to
        refuse: served as the kind's validating webhook, after the typed parse (which refuses an
        invalid object with its field paths by itself).
    samples: example owners (dicts or models), as a list or by file name; written to
        ``manifests/samples`` and used to find the child kinds.
    name: the ``--controllers`` entry (default: the kind, lower case); description: one line.
    rules: RBAC rules the user's own functions need besides (the declarative parts' are derived).

    ValueError when a child kind cannot be owned (cluster-scoped under a namespaced owner), when
    ``desired`` fails on a sample, or when a sample's child is of a kind that is neither built
    in nor declared in ``children``.
    """
    typed: TypedKind[T] = kind  # type: ignore[assignment]  # a CustomResource class
    owner = typed.resource()
    controller_name = name or owner.kind.lower()
    sample_objects = _samples(owner, samples)
    sample_children = _children_of_samples(typed, desired, sample_objects.values())
    kinds = _child_kinds(owner, children, sample_children)
    ready_rules = _ready_rules(ready)
    # Named even without on_delete: an earlier version of the controller may have added it.
    finalizer = f"{owner.group}/{controller_name}"

    def setup(context: SetupContext) -> Controller:
        mapper = RestMapper(context.client)
        mapper.add(owner)
        for resource in kinds:
            mapper.add(resource)
        reconciler = DeclarativeReconciler(
            controller_name,
            typed,
            desired,
            client=context.client,
            cache=context.cache,
            recorder=context.recorder,
            field_manager=context.field_manager or controller_name,
            mapper=mapper,
            status=status,
            ready=ready_rules,
            on_delete=on_delete,
            finalizer=finalizer,
        )
        builder = ControllerBuilder(context.cache, controller_name).for_(owner, predicates.generation_changed)
        controller = builder.with_options(max_concurrent_reconciles=context.max_concurrent_reconciles).build(
            reconciler
        )
        reconciler.controller = controller
        for resource in kinds:
            reconciler.watch(resource, at_setup=True)
        return controller

    webhooks: tuple[AdmissionWebhook, ...] = ()
    if validate is not None:
        webhooks = (
            AdmissionWebhook(
                owner.group,
                owner.version,
                owner.kind,
                owner.plural,
                validator=TypedValidator(typed, validate),
                namespaced=owner.namespaced,
            ),
        )
    crd = getattr(kind, "crd", None)
    return ControllerDefinition(
        name=controller_name,
        description=description or f"a {owner.kind} keeps the children its desired() returns",
        setup=setup,
        crds=(lambda: [crd()]) if callable(crd) else (lambda: []),
        rules=declarative_rules(
            owner, kinds, finalizer=on_delete is not None, child_objects=sample_children, extra=rules
        ),
        samples=lambda: copy.deepcopy(sample_objects),
        webhooks=webhooks,
    )


def _samples(owner: Resource, samples: Sequence[Any] | Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The samples by file name: ``<group>_<version>_<kind>.yaml`` (``_<name>`` when several)."""
    if isinstance(samples, Mapping):
        return {file: to_object(sample) for file, sample in samples.items()}
    objects = [to_object(sample) for sample in samples]
    stem = f"{owner.group}_{owner.version}_{owner.kind.lower()}"
    if len(objects) == 1:
        return {f"{stem}.yaml": objects[0]}
    return {f"{stem}_{(o.get('metadata') or {}).get('name', i)}.yaml": o for i, o in enumerate(objects)}


def _children_of_samples(
    kind: TypedKind[Any], desired: Callable[[Any], Iterable[Any]], samples: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for sample in samples:
        label = (sample.get("metadata") or {}).get("name") or "a sample"
        try:
            found.extend(to_object(child) for child in desired(kind.parse(sample)))
        except InvalidObject as error:
            raise ValueError(f"the sample {label} is not a valid {kind.resource().kind}: {error}") from None
        except Exception as error:
            raise ValueError(
                f"desired() failed on the sample {label}: {type(error).__name__}: {error}"
            ) from error
    return found


def _child_kinds(
    owner: Resource, declared: Iterable[Resource | type] | None, sample_children: Iterable[dict[str, Any]]
) -> tuple[Resource, ...]:
    kinds: dict[Resource, None] = {}
    for item in declared or ():
        resource = item if isinstance(item, Resource) else item.resource()  # type: ignore[attr-defined]
        kinds[resource] = None
    if declared is None:
        for child in sample_children:
            api_version, child_kind, _ = identity(child)
            resource = builtin_resource(api_version, child_kind)
            if resource is None:
                raise ValueError(
                    f"a sample's child is a {child_kind} ({api_version}), not a built-in kind: "
                    "declare its resource in children="
                )
            kinds[resource] = None
    for resource in kinds:
        if owner.namespaced and not resource.namespaced:
            raise ValueError(
                f"{owner.kind} is namespaced and {resource.kind} cluster-scoped: an ownerReference cannot "
                "point from a cluster-scoped child to a namespaced owner. Make the owner cluster-scoped, or "
                "write that child with the imperative API (owner_annotations() on the child, "
                "ControllerBuilder.watches(..., map_to_annotated_owner(...)), and a finalizer)"
            )
    return tuple(kinds)


def _ready_rules(
    ready: Mapping[str | tuple[str, str], Callable[[Mapping[str, Any]], Readiness | bool]] | None,
) -> dict[str, ReadinessRule]:
    rules: dict[str, ReadinessRule] = {}
    for key, rule in (ready or {}).items():
        rules[kind_key(*key) if isinstance(key, tuple) else key] = rule
    return rules
