"""The generic controller runtime: client, watches, cache, workqueue, controllers, manager.

Nothing in this package knows about an operator; controllers are built on top of it. The
names exported here are the public, supported surface for writing a controller (the docs'
"PodSet: a controller by hand" walks through one); everything else in the submodules may change.

Declaring a controller:

- :class:`ControllerDefinition` / :class:`SetupContext`: what a controller package gives the
  manager (name, setup, CRDs, RBAC rules, samples), and what its setup receives (the cache,
  the client, its Event recorder, the worker count).
- :func:`declarative_controller`: a controller in a page. ``desired(owner)`` returns the
  children an owner of a :class:`CustomResource` kind should have; memop applies them
  (server-side apply, only when the cached child differs), watches them, puts back what is
  changed behind its back, prunes what is no longer desired and writes ``Ready``,
  ``Progressing``, ``Degraded`` from the children's :mod:`readiness
  <memop.runtime.controller.readiness>` (kstatus rules; a :class:`Readiness` per child), the
  user's status function reading them through :class:`ObservedChildren`. Its RBAC is derived.
  :class:`RestMapper` maps a child's apiVersion and kind to its :class:`Resource` (built-in
  kinds, then discovery), :class:`UnknownKind` when nothing serves it.
- :class:`ControllerBuilder`: ``for_`` its kind, ``owns`` the kinds it controls (their events
  enqueue the owner: in the child's namespace, or the cluster-scoped owner), ``watches`` others
  through a map function; ``build(reconciler)``. A namespaced owner's children an
  ownerReference cannot point from (in another namespace, or cluster-scoped) carry
  :func:`owner_annotations` and are watched through :func:`map_to_annotated_owner`
  (operator-lib's ``operator-sdk/primary-resource`` annotations).
- :class:`Reconciler` (anything with ``async reconcile(request) -> Result | None``),
  :class:`Request`, :class:`Result`, :class:`TerminalError` (do not retry).
- :mod:`predicates <memop.runtime.controller.predicates>`: which watch events are worth a reconcile
  (``generation_changed``, ``label_selector``...).

Reading and writing:

- :class:`Cache`: informers per resource (and label selector) with ``get``/``list`` by
  namespace, owner uid and labels, and custom indexes (``add_index`` before the cache starts,
  then ``by_index`` or ``list(..., index=(name, value))``); ``record_write`` after each write
  so the next reconcile reads its own write.
- :class:`Client`: plain dicts in and out (``get``, ``list``, ``create``, ``patch``,
  ``patch_status``, ``apply`` (server-side apply), ``delete`` with preconditions), typed
  errors: :class:`ApiError` and its
  subclasses :class:`NotFound`, :class:`AlreadyExists`, :class:`Conflict`, :class:`BadRequest`,
  :class:`Forbidden`, :class:`Invalid`; :class:`TransportError` when the server cannot be
  reached. :class:`NamespaceClosed`: the namespace takes no new content, being deleted
  (:class:`NamespaceTerminating`, a Forbidden that is no permission problem) or gone
  (:class:`NamespaceGone`, a NotFound); a reconcile ending in it for its own namespace is not
  retried nor counted as an error, and no Event goes there (one info line per namespace).
- :class:`Expectations`: the creates and deletes a controller is waiting to see in its cache
  (client-go's ControllerExpectations), so a lagging cache never makes it act twice.
- :func:`update_status`: write a status only when it changed.
- :func:`add_finalizer`, :func:`remove_finalizer`, :func:`has_finalizer`: one's own finalizer,
  never another writer's lost (a stale read is a Conflict, retried with backoff).
- :func:`create_or_patch`: create the object, or send the merge patch of what a mutate
  function changed ("created", "patched", "unchanged").
- :mod:`validation <memop.runtime.api.validation>`: the API server's wording for a field of the
  wrong type, for a spec validated in Python (``type_error``, ``json_type``).
- :mod:`conditions <memop.runtime.api.conditions>`: ``set_condition`` (transition times move
  only when the status flips), ``find_condition``, ``conditions_schema``.
- :class:`EventRecorder` with :data:`NORMAL` and :data:`WARNING`: Events, sent in the background.
- :class:`Resource` names a kind (group, version, plural, kind, scope); the common built-in
  ones are predefined: :data:`NAMESPACES`, :data:`PODS`, :data:`CONFIGMAPS`, :data:`SECRETS`,
  :data:`SERVICES`, :data:`SERVICE_ACCOUNTS`, :data:`PERSISTENT_VOLUME_CLAIMS`,
  :data:`EVENTS`, :data:`DEPLOYMENTS`, :data:`REPLICASETS`, :data:`STATEFULSETS`,
  :data:`DAEMONSETS`, :data:`JOBS`, :data:`CRONJOBS`, :data:`INGRESSES`, :data:`LEASES`,
  :data:`ROLES`, :data:`ROLE_BINDINGS`, :data:`CLUSTER_ROLES`, :data:`CLUSTER_ROLE_BINDINGS`,
  :data:`POD_DISRUPTION_BUDGETS`, :data:`NETWORK_POLICIES`, :data:`HORIZONTAL_POD_AUTOSCALERS`,
  :data:`RESOURCE_QUOTAS`, :data:`LIMIT_RANGES`, :data:`PRIORITY_CLASSES`.
  :class:`Selector` parses label selectors. Cached objects are plain dicts (:data:`Obj`;
  :func:`dig` reads a nested field safely); :func:`controller_reference` builds a child's
  controller ownerReference and :func:`controller_owner_uid` reads it.
- :class:`Clock` (:class:`RealClock`, :class:`FakeClock` for tests) and :func:`rfc3339`:
  time-based logic takes a clock, so tests never sleep.

Describing the API and its permissions:

- :class:`CustomResource`: a kind declared once as typed classes (Pydantic v2): its class
  keywords name it (``group=``, ``version=``, ``namespaced=``, ``short_names=``,
  ``printer_columns=`` of :class:`PrinterColumn`, ``scale=`` a :class:`Scale`...; the result is
  its ``kube``, a :class:`KindInfo`), its ``spec`` and ``status`` are :class:`Model` classes
  (:class:`Status` holds the :class:`Condition` list and ``observedGeneration``); it gives
  ``resource()``, ``crd()``, ``parse(obj)`` (raising :class:`InvalidObject` in the API server's
  words) and ``to_dict()``. :class:`ObjectMeta` is its ``metadata``. A type the CRD schema
  cannot express (a union, a recursive model...) makes ``crd()`` raise :class:`SchemaError`
  naming the field.
- Field types: :class:`Quantity` (apimachinery's resource quantities, usable without Pydantic:
  parsing, canonical form, comparison across forms; :class:`QuantityError`), ``LabelKey``,
  ``LabelValue``, ``DNS1123Label``, ``DNS1123Subdomain``, ``IntOrString``; schema markers, in
  ``Annotated[...]`` or on a model: :class:`Cel` (``x-kubernetes-validations``),
  :class:`ListType`, :class:`MapType`, :class:`PreserveUnknownFields`, and :class:`Schema` to
  merge a fragment of one's own.
- :mod:`crdgen <memop.runtime.api.crdgen>`: :class:`CrdNames`, ``custom_resource_definition``,
  ``printer_column``, ``crd_yaml``;
- :class:`Rule` and :class:`Scope` (:func:`watched` for several verbs at once, :func:`own_kind`
  for what a controller needs on its own kind: its cache and status, and what a finalizer or
  children with a blocking ownerReference need, :func:`non_resource` for non-resource URLs):
  each permission the code sends, and why; any verb, ``resource_names`` and
  ``non_resource_urls`` a Kubernetes PolicyRule takes (:func:`rule_problem` says what it would
  refuse).

Admission and conversion webhooks (a :class:`ControllerDefinition`'s ``webhooks`` and
``conversions``; every replica's manager serves them, see :mod:`memop.runtime.webhook`):

- :class:`AdmissionWebhook`: a kind's :class:`Defaulter` (``default`` sets defaults on the object
  in place; the API server gets the JSON patch) and :class:`Validator` (``validate_create``,
  ``validate_update`` with the old object, ``validate_delete``: return warnings, or raise
  :class:`ValidationError` with one :class:`FieldError` per bad field for a ``422 Invalid``
  with field paths; any other exception is a denial naming it). Both get the
  :class:`AdmissionRequest` (operation, user, dry run...).
- :class:`Conversion`: a kind's hub version and a :class:`Spoke` (``to_hub``, ``from_hub``)
  per other version, served at :data:`CONVERSION_PATH`.
- :class:`WebhookServer` / :class:`WebhookServerOptions`: the HTTPS server itself (port 9443,
  the certificate directory, reloaded on change), which ``ManagerOptions.webhook`` configures
  and :meth:`Manager.add_webhooks` fills; a program may also run one alone.
- :class:`SelfManagedCertificates`: the webhook's certificate made and renewed by the operator
  itself (a self-signed CA and serving certificate in a Secret, written to the certificate
  directory, the CA set into the caBundle of its webhook configurations and CRDs), for clusters
  without cert-manager: ``ManagerOptions.webhook_certificates`` takes it (any
  :class:`CertificateSource`) and starts the webhook server once it wrote a certificate.

Running a manager (``memop`` and :func:`memop.run` build one from flags; a program of one's own
may build it from these alone):

- :class:`Manager` / :class:`ManagerOptions`: one process's client, cache, controllers,
  leader election and probe/metrics server, started in that order and stopped gracefully.
- :func:`load_configuration`: the Kubernetes connection, from a kubeconfig, the in-cluster
  service account or ``~/.kube/config``, else :class:`KubeConfigError` naming what was tried;
  :func:`running_in_cluster` and :func:`in_cluster_namespace` (the Pod's namespace).
- ``ManagerOptions.leader_election``: a :class:`LeaderElectionConfig` (a renewed Lease, its
  candidate named by :func:`default_identity`) or a :class:`LeaderForLifeConfig` (a ConfigMap
  lock owned by the replica's Pod).
- ``ManagerOptions.sharding``: a :class:`ShardingConfig` instead of leader election: every
  replica reconciles its share of the objects (Leases assign the shards of a ring; the API
  server's ``shardSelector`` sends each replica only its share where the ShardedListAndWatch
  gate is on). A controller chooses how its objects split with a :class:`ShardKey` on ``for_``
  (:data:`BY_UID`, the default, or :data:`BY_NAMESPACE`) and how children follow them on
  ``owns`` (:data:`BY_OWNER_BUCKET`: the label :data:`BUCKET_LABEL` its reconciler puts on
  what it creates, from ``Cache.shard_labels(owner)``).
- ``ManagerOptions.uninstall_guard``: an :class:`UninstallGuardConfig` (the install's
  ServiceAccount, ClusterRole and binding) keeps them until the operator has released its
  finalizers when the whole install is deleted at once (``kubectl delete -k``).
- :class:`Address`: where probes and metrics listen (``host:port``); :func:`tls_context`
  for ``ManagerOptions.metrics_tls``.
- :func:`configure_logging`: JSON (or console) log lines carrying the reconcile context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memop.runtime.util.lazy import lazy_exports

if TYPE_CHECKING:
    from memop.runtime.api import conditions, crdgen, validation
    from memop.runtime.api.crdgen import CrdNames
    from memop.runtime.api.errors import InvalidObject
    from memop.runtime.api.fields import (
        Cel,
        DNS1123Label,
        DNS1123Subdomain,
        IntOrString,
        LabelKey,
        LabelValue,
        ListType,
        MapType,
        PreserveUnknownFields,
        Schema,
    )
    from memop.runtime.api.kinds import KindInfo, PrinterColumn, Scale
    from memop.runtime.api.model import Condition, CustomResource, Model, ObjectMeta, Status
    from memop.runtime.api.permissions import Rule, Scope, non_resource, own_kind, rule_problem, watched
    from memop.runtime.api.quantity import Quantity, QuantityError
    from memop.runtime.api.schema import SchemaError
    from memop.runtime.cache.cache import Cache
    from memop.runtime.cache.labels import Selector
    from memop.runtime.cache.store import Obj, controller_owner_uid, controller_reference, dig
    from memop.runtime.client.client import Client
    from memop.runtime.client.errors import (
        AlreadyExists,
        ApiError,
        BadRequest,
        Conflict,
        Forbidden,
        Invalid,
        NamespaceClosed,
        NamespaceGone,
        NamespaceTerminating,
        NotFound,
        TransportError,
    )
    from memop.runtime.client.kubeconfig import (
        KubeConfigError,
        in_cluster_namespace,
        load_configuration,
        running_in_cluster,
    )
    from memop.runtime.client.resources import (
        CLUSTER_ROLE_BINDINGS,
        CLUSTER_ROLES,
        CONFIGMAPS,
        CRONJOBS,
        DAEMONSETS,
        DEPLOYMENTS,
        EVENTS,
        HORIZONTAL_POD_AUTOSCALERS,
        INGRESSES,
        JOBS,
        LEASES,
        LIMIT_RANGES,
        NAMESPACES,
        NETWORK_POLICIES,
        PERSISTENT_VOLUME_CLAIMS,
        POD_DISRUPTION_BUDGETS,
        PODS,
        PRIORITY_CLASSES,
        REPLICASETS,
        RESOURCE_QUOTAS,
        ROLE_BINDINGS,
        ROLES,
        SECRETS,
        SERVICE_ACCOUNTS,
        SERVICES,
        STATEFULSETS,
        Resource,
    )
    from memop.runtime.client.restmapper import RestMapper, UnknownKind
    from memop.runtime.controller import predicates, readiness
    from memop.runtime.controller.controller import Controller, ControllerBuilder
    from memop.runtime.controller.createorpatch import create_or_patch
    from memop.runtime.controller.declarative import ObservedChildren, declarative_controller
    from memop.runtime.controller.definition import ControllerDefinition, SetupContext
    from memop.runtime.controller.expectations import Expectations
    from memop.runtime.controller.finalizers import add_finalizer, has_finalizer, remove_finalizer
    from memop.runtime.controller.handlers import map_to_annotated_owner, owner_annotations
    from memop.runtime.controller.readiness import Readiness
    from memop.runtime.controller.reconcile import Reconciler, Request, Result, TerminalError
    from memop.runtime.controller.status import update_status
    from memop.runtime.leaderelection.leaderforlife import LeaderForLifeConfig
    from memop.runtime.leaderelection.lease import LeaderElectionConfig, default_identity
    from memop.runtime.logs import configure as configure_logging
    from memop.runtime.manager.authn import tls_context
    from memop.runtime.manager.events import NORMAL, WARNING, EventRecorder
    from memop.runtime.manager.manager import Manager, ManagerOptions
    from memop.runtime.manager.server import Address
    from memop.runtime.manager.uninstall import UninstallGuardConfig
    from memop.runtime.sharding.keys import BY_NAMESPACE, BY_OWNER_BUCKET, BY_UID, ShardKey
    from memop.runtime.sharding.membership import ShardingConfig
    from memop.runtime.sharding.ring import BUCKET_LABEL
    from memop.runtime.util.clock import Clock, FakeClock, RealClock, rfc3339
    from memop.runtime.webhook.declarations import (
        CONVERSION_PATH,
        AdmissionRequest,
        AdmissionWebhook,
        Conversion,
        Defaulter,
        FieldError,
        Spoke,
        ValidationError,
        Validator,
    )
    from memop.runtime.webhook.server import WebhookServer, WebhookServerOptions

# Loaded on first use (PEP 562), so that importing one submodule (memop.runtime.client.k8simport,
# which must run before kubernetes_asyncio is imported) does not import them all. A value
# "module:attribute" exports the attribute under another name.
_EXPORTS: dict[str, str] = {
    "Address": "memop.runtime.manager.server",
    "AdmissionRequest": "memop.runtime.webhook.declarations",
    "AdmissionWebhook": "memop.runtime.webhook.declarations",
    "CONVERSION_PATH": "memop.runtime.webhook.declarations",
    "Conversion": "memop.runtime.webhook.declarations",
    "Defaulter": "memop.runtime.webhook.declarations",
    "FieldError": "memop.runtime.webhook.declarations",
    "Spoke": "memop.runtime.webhook.declarations",
    "ValidationError": "memop.runtime.webhook.declarations",
    "Validator": "memop.runtime.webhook.declarations",
    "WebhookServer": "memop.runtime.webhook.server",
    "WebhookServerOptions": "memop.runtime.webhook.server",
    "SelfManagedCertificates": "memop.runtime.webhook.selfmanaged",
    "CertificateSource": "memop.runtime.manager.manager",
    "BUCKET_LABEL": "memop.runtime.sharding.ring",
    "BY_NAMESPACE": "memop.runtime.sharding.keys",
    "BY_OWNER_BUCKET": "memop.runtime.sharding.keys",
    "BY_UID": "memop.runtime.sharding.keys",
    "ShardKey": "memop.runtime.sharding.keys",
    "ShardingConfig": "memop.runtime.sharding.membership",
    "UninstallGuardConfig": "memop.runtime.manager.uninstall",
    "AlreadyExists": "memop.runtime.client.errors",
    "ApiError": "memop.runtime.client.errors",
    "BadRequest": "memop.runtime.client.errors",
    "CLUSTER_ROLES": "memop.runtime.client.resources",
    "CLUSTER_ROLE_BINDINGS": "memop.runtime.client.resources",
    "CONFIGMAPS": "memop.runtime.client.resources",
    "CRONJOBS": "memop.runtime.client.resources",
    "Cache": "memop.runtime.cache.cache",
    "Client": "memop.runtime.client.client",
    "Clock": "memop.runtime.util.clock",
    "Conflict": "memop.runtime.client.errors",
    "Controller": "memop.runtime.controller.controller",
    "ControllerBuilder": "memop.runtime.controller.controller",
    "ControllerDefinition": "memop.runtime.controller.definition",
    "CrdNames": "memop.runtime.api.crdgen",
    "Condition": "memop.runtime.api.model",
    "CustomResource": "memop.runtime.api.model",
    "InvalidObject": "memop.runtime.api.errors",
    "KindInfo": "memop.runtime.api.kinds",
    "Model": "memop.runtime.api.model",
    "ObjectMeta": "memop.runtime.api.model",
    "PrinterColumn": "memop.runtime.api.kinds",
    "Scale": "memop.runtime.api.kinds",
    "Status": "memop.runtime.api.model",
    "SchemaError": "memop.runtime.api.schema",
    "DNS1123Label": "memop.runtime.api.fields",
    "DNS1123Subdomain": "memop.runtime.api.fields",
    "Cel": "memop.runtime.api.fields",
    "IntOrString": "memop.runtime.api.fields",
    "LabelKey": "memop.runtime.api.fields",
    "LabelValue": "memop.runtime.api.fields",
    "ListType": "memop.runtime.api.fields",
    "MapType": "memop.runtime.api.fields",
    "PreserveUnknownFields": "memop.runtime.api.fields",
    "Schema": "memop.runtime.api.fields",
    "Quantity": "memop.runtime.api.quantity",
    "QuantityError": "memop.runtime.api.quantity",
    "DAEMONSETS": "memop.runtime.client.resources",
    "DEPLOYMENTS": "memop.runtime.client.resources",
    "EVENTS": "memop.runtime.client.resources",
    "EventRecorder": "memop.runtime.manager.events",
    "Expectations": "memop.runtime.controller.expectations",
    "FakeClock": "memop.runtime.util.clock",
    "Forbidden": "memop.runtime.client.errors",
    "INGRESSES": "memop.runtime.client.resources",
    "Invalid": "memop.runtime.client.errors",
    "JOBS": "memop.runtime.client.resources",
    "KubeConfigError": "memop.runtime.client.kubeconfig",
    "LEASES": "memop.runtime.client.resources",
    "LeaderElectionConfig": "memop.runtime.leaderelection.lease",
    "LeaderForLifeConfig": "memop.runtime.leaderelection.leaderforlife",
    "Manager": "memop.runtime.manager.manager",
    "ManagerOptions": "memop.runtime.manager.manager",
    "NAMESPACES": "memop.runtime.client.resources",
    "NORMAL": "memop.runtime.manager.events",
    "NamespaceClosed": "memop.runtime.client.errors",
    "NamespaceGone": "memop.runtime.client.errors",
    "NamespaceTerminating": "memop.runtime.client.errors",
    "NotFound": "memop.runtime.client.errors",
    "Obj": "memop.runtime.cache.store",
    "PERSISTENT_VOLUME_CLAIMS": "memop.runtime.client.resources",
    "PODS": "memop.runtime.client.resources",
    "REPLICASETS": "memop.runtime.client.resources",
    "ROLES": "memop.runtime.client.resources",
    "ROLE_BINDINGS": "memop.runtime.client.resources",
    "RealClock": "memop.runtime.util.clock",
    "Reconciler": "memop.runtime.controller.reconcile",
    "Request": "memop.runtime.controller.reconcile",
    "Resource": "memop.runtime.client.resources",
    "Result": "memop.runtime.controller.reconcile",
    "Rule": "memop.runtime.api.permissions",
    "SECRETS": "memop.runtime.client.resources",
    "SERVICES": "memop.runtime.client.resources",
    "SERVICE_ACCOUNTS": "memop.runtime.client.resources",
    "STATEFULSETS": "memop.runtime.client.resources",
    "Scope": "memop.runtime.api.permissions",
    "Selector": "memop.runtime.cache.labels",
    "SetupContext": "memop.runtime.controller.definition",
    "TerminalError": "memop.runtime.controller.reconcile",
    "TransportError": "memop.runtime.client.errors",
    "WARNING": "memop.runtime.manager.events",
    "add_finalizer": "memop.runtime.controller.finalizers",
    "configure_logging": "memop.runtime.logs:configure",
    "controller_owner_uid": "memop.runtime.cache.store",
    "controller_reference": "memop.runtime.cache.store",
    "create_or_patch": "memop.runtime.controller.createorpatch",
    "default_identity": "memop.runtime.leaderelection.lease",
    "dig": "memop.runtime.cache.store",
    "has_finalizer": "memop.runtime.controller.finalizers",
    "in_cluster_namespace": "memop.runtime.client.kubeconfig",
    "load_configuration": "memop.runtime.client.kubeconfig",
    "map_to_annotated_owner": "memop.runtime.controller.handlers",
    "owner_annotations": "memop.runtime.controller.handlers",
    "remove_finalizer": "memop.runtime.controller.finalizers",
    "rfc3339": "memop.runtime.util.clock",
    "running_in_cluster": "memop.runtime.client.kubeconfig",
    "tls_context": "memop.runtime.manager.authn",
    "update_status": "memop.runtime.controller.status",
    "watched": "memop.runtime.api.permissions",
    "own_kind": "memop.runtime.api.permissions",
    "non_resource": "memop.runtime.api.permissions",
    "rule_problem": "memop.runtime.api.permissions",
    "conditions": "memop.runtime.api.conditions",
    "crdgen": "memop.runtime.api.crdgen",
    "predicates": "memop.runtime.controller.predicates",
    "validation": "memop.runtime.api.validation",
    # Declarative children (memop.runtime.controller.declarative) and what they read.
    "HORIZONTAL_POD_AUTOSCALERS": "memop.runtime.client.resources",
    "LIMIT_RANGES": "memop.runtime.client.resources",
    "NETWORK_POLICIES": "memop.runtime.client.resources",
    "POD_DISRUPTION_BUDGETS": "memop.runtime.client.resources",
    "PRIORITY_CLASSES": "memop.runtime.client.resources",
    "RESOURCE_QUOTAS": "memop.runtime.client.resources",
    "RestMapper": "memop.runtime.client.restmapper",
    "UnknownKind": "memop.runtime.client.restmapper",
    "ObservedChildren": "memop.runtime.controller.declarative",
    "declarative_controller": "memop.runtime.controller.declarative",
    "Readiness": "memop.runtime.controller.readiness",
    "readiness": "memop.runtime.controller.readiness",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "BUCKET_LABEL",
    "BY_NAMESPACE",
    "BY_OWNER_BUCKET",
    "BY_UID",
    "CLUSTER_ROLES",
    "CLUSTER_ROLE_BINDINGS",
    "CONFIGMAPS",
    "CONVERSION_PATH",
    "CRONJOBS",
    "DAEMONSETS",
    "DEPLOYMENTS",
    "EVENTS",
    "HORIZONTAL_POD_AUTOSCALERS",
    "INGRESSES",
    "JOBS",
    "LEASES",
    "LIMIT_RANGES",
    "NAMESPACES",
    "NETWORK_POLICIES",
    "NORMAL",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "POD_DISRUPTION_BUDGETS",
    "PRIORITY_CLASSES",
    "REPLICASETS",
    "RESOURCE_QUOTAS",
    "ROLES",
    "ROLE_BINDINGS",
    "SECRETS",
    "SERVICES",
    "SERVICE_ACCOUNTS",
    "STATEFULSETS",
    "WARNING",
    "Address",
    "AdmissionRequest",
    "AdmissionWebhook",
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Cache",
    "Cel",
    "CertificateSource",
    "Client",
    "Clock",
    "Condition",
    "Conflict",
    "Controller",
    "ControllerBuilder",
    "ControllerDefinition",
    "Conversion",
    "CrdNames",
    "CustomResource",
    "DNS1123Label",
    "DNS1123Subdomain",
    "Defaulter",
    "EventRecorder",
    "Expectations",
    "FakeClock",
    "FieldError",
    "Forbidden",
    "IntOrString",
    "Invalid",
    "InvalidObject",
    "KindInfo",
    "KubeConfigError",
    "LabelKey",
    "LabelValue",
    "LeaderElectionConfig",
    "LeaderForLifeConfig",
    "ListType",
    "Manager",
    "ManagerOptions",
    "MapType",
    "Model",
    "NamespaceClosed",
    "NamespaceGone",
    "NamespaceTerminating",
    "NotFound",
    "Obj",
    "ObjectMeta",
    "ObservedChildren",
    "PreserveUnknownFields",
    "PrinterColumn",
    "Quantity",
    "QuantityError",
    "Readiness",
    "RealClock",
    "Reconciler",
    "Request",
    "Resource",
    "RestMapper",
    "Result",
    "Rule",
    "Scale",
    "Schema",
    "SchemaError",
    "Scope",
    "Selector",
    "SelfManagedCertificates",
    "SetupContext",
    "ShardKey",
    "ShardingConfig",
    "Spoke",
    "Status",
    "TerminalError",
    "TransportError",
    "UninstallGuardConfig",
    "UnknownKind",
    "ValidationError",
    "Validator",
    "WebhookServer",
    "WebhookServerOptions",
    "add_finalizer",
    "conditions",
    "configure_logging",
    "controller_owner_uid",
    "controller_reference",
    "crdgen",
    "create_or_patch",
    "declarative_controller",
    "default_identity",
    "dig",
    "has_finalizer",
    "in_cluster_namespace",
    "load_configuration",
    "map_to_annotated_owner",
    "non_resource",
    "own_kind",
    "owner_annotations",
    "predicates",
    "readiness",
    "remove_finalizer",
    "rfc3339",
    "rule_problem",
    "running_in_cluster",
    "tls_context",
    "update_status",
    "validation",
    "watched",
]
