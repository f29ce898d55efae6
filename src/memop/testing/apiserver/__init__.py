"""The in-memory API server's machinery: what kube-apiserver and apimachinery do for every kind.

:class:`~memop.testing.apiserver.server.ApiServer` (exported as ``memop.testing.ApiServer``) is
the HTTP front; the rest is what it calls, kind-agnostic. The kinds it serves are in
:mod:`memop.testing.kinds`, read through :mod:`memop.testing.kinds.registry`; authentication
and RBAC in :mod:`memop.testing.auth`; the simulated controllers in
:mod:`memop.testing.controllers`.

- Serving: :mod:`~.server` (the aiohttp application, request handling), :mod:`~.routing`
  (URL to resource), :mod:`~.discovery` and :mod:`~.openapi` (discovery and OpenAPI
  documents), :mod:`~.builtinapi` (v1.36's built-in API surface, package data in ``data/``),
  :mod:`~.watch`, :mod:`~.tables` with :mod:`~.columns`, :mod:`~.printers`,
  :mod:`~.printercolumns` and :mod:`~.jsonpath` (``kubectl get`` tables),
  :mod:`~.warningheaders`, :mod:`~.requestlog` (the request/audit log) and
  :mod:`~.shardholding` (which shard held which object, read from that log), :mod:`~.faults`
  (injected failures), :mod:`~.featuregates`.
- Storage and writes: :mod:`~.store` (objects, resourceVersions, the write pipeline),
  :mod:`~.resources` (``ResourceType``), :mod:`~.strategy` (``Kind`` and ``Strategy``, the
  contract every kind implements), :mod:`~.patch` (JSON, merge and strategic merge patches),
  :mod:`~.serverside` and :mod:`~.managedfields` (server-side apply), :mod:`~.sharding` (shard
  selectors, with :mod:`~.cel`).
- Encoding and validation: :mod:`~.objects` (object metadata and field errors),
  :mod:`~.errors` (Status errors), :mod:`~.schema` (structural schemas),
  :mod:`~.typeddecode` and :mod:`~.goencoding` (decoding as Go does), :mod:`~.quantity`,
  :mod:`~.times`, :mod:`~.protobuf` with :mod:`~.protowire` and :mod:`~.protokinds`.
- Admission: :mod:`~.podsecurity` (the PodSecurity plugin); the webhooks,
  :mod:`~.admissionwebhooks`, :mod:`~.conversionwebhooks` and the client both use,
  :mod:`~.webhookclient`.
"""
