"""The kinds the in-memory API server serves: kube-apiserver v1.36's built-in resources and
their registry strategies (defaulting, validation, status, selectable fields), each kind a
:class:`~memop.testing.apiserver.strategy.Kind` on the API machinery of
:mod:`memop.testing.apiserver`.

- :mod:`~memop.testing.kinds.registry`: every kind the store installs, in order, and the extra
  kinds a test adds.
- Faithful kinds, with hand-written strategies after kube-apiserver's:
  :mod:`~memop.testing.kinds.builtins` (core/v1 and apps/v1 Deployments and ReplicaSets, with
  the strategies' shared helpers), :mod:`~memop.testing.kinds.workloads` (StatefulSets,
  DaemonSets), :mod:`~memop.testing.kinds.batch` (Jobs, CronJobs; schedules parsed by
  :mod:`~memop.testing.kinds.cron`), :mod:`~memop.testing.kinds.networking`,
  :mod:`~memop.testing.kinds.volumes`, :mod:`~memop.testing.kinds.quotas`,
  :mod:`~memop.testing.kinds.autoscaling`, :mod:`~memop.testing.kinds.scheduling`,
  :mod:`~memop.testing.kinds.secrets`, :mod:`~memop.testing.kinds.admissionregistration`
  (webhook configurations) and :mod:`~memop.testing.kinds.crds` (CustomResourceDefinitions).
- :mod:`~memop.testing.kinds.generic`: the rest of v1.36's built-in resources, served from
  their OpenAPI schemas.

Adding a kind the server lacks (an aggregated API such as ``metrics.k8s.io``, a built-in memop
does not serve yet)::

    from memop.testing import Kind, ResourceType, Strategy

    NODES = ResourceType("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False, "nodemetrics")
    NODE_METRICS = Kind(NODES)

and pass it as ``extra_kinds=[NODE_METRICS]`` to :class:`memop.testing.apiserver.server.ApiServer`, list it in
the pytest plugin's ``memop_extra_kinds`` fixture, or name it on the command line as
``--extra-kinds my.module:NODE_METRICS``. A kind without a strategy of its own behaves as a
custom resource without a schema; subclass :class:`~memop.testing.apiserver.strategy.Strategy` for
defaulting, validation, selectable fields and the like. Extra kinds are served by every verb,
listed in discovery and printed with the default table columns (Name, Created At). An extra
kind may replace a built-in one that is served generically (a StorageClass with a strategy of
the test's), not one with a hand-written strategy.
"""
