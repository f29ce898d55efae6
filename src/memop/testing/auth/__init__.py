"""Authentication and RBAC authorization for the in-memory API server, as kube-apiserver v1.36
does them.

- :mod:`~memop.testing.auth.authn`: bearer tokens to users (the test client's administrator,
  static tokens, ServiceAccount tokens; anonymous without one).
- :mod:`~memop.testing.auth.rbac`: the RBAC authorizer over Roles, ClusterRoles and their
  bindings, and the rule comparisons of the escalation check.
- :mod:`~memop.testing.auth.escalation`: the ``escalate`` and ``bind`` checks on role and binding
  writes.
- :mod:`~memop.testing.auth.aggregation`: the ClusterRole aggregation controller.
- :mod:`~memop.testing.auth.bootstrap`: the bootstrap ClusterRoles and bindings a server starts
  with.
- :mod:`~memop.testing.auth.filters`: :class:`~memop.testing.auth.filters.Auth`, what the server
  calls on each request, and kube-apiserver's 403 message.
"""
