"""Pod Security admission as kube-apiserver v1.36 runs it (the ``PodSecurity`` plugin, from
``k8s.io/pod-security-admission``), for the in-memory API server.

A namespace's ``pod-security.kubernetes.io/{enforce,audit,warn}`` labels (and their
``-version`` labels) choose a level, ``privileged``, ``baseline`` or ``restricted``, at a policy
version, ``latest`` or ``v1.X``; a label left out is ``privileged:latest``. The store calls
:meth:`PodSecurity.validate` on every create and update, after mutation, defaulting and the
kind's validation and before the validating admission webhooks, dry runs included, as
kube-apiserver's validating plugin order has it. So a pod refused here reaches no validating
webhook.

Implemented (modules):

- :mod:`.policy`: the labels to a policy, their invalid values and how each fails (closed for
  enforce, open for audit and warn), warn following a stricter explicit enforce level;
- :mod:`.checks`: every baseline and restricted check of v1.36 with its reason and detail
  worded as the Go source words them, and every version of each (v1.0 to v1.35; ``latest`` and
  any newer ``v1.X`` are v1.35's checks);
- :mod:`.evaluator`: which checks a level and version run, their order in a message (baseline
  IDs sorted, then restricted IDs sorted) and the message's joining;
- :mod:`.admission`: the decisions: a pod refused 403 ``pods "NAME" is forbidden: violates
  PodSecurity "LEVEL:VERSION": reason (detail), ...``; the ``would violate PodSecurity`` warning
  for pods at the warn level and for the pod templates of Deployments, ReplicaSets,
  StatefulSets, DaemonSets, Jobs, CronJobs, ReplicationControllers and PodTemplates; pod updates
  that change only metadata or status let through; invalid namespace labels refused 422; a
  namespace's stricter enforce level warning about its existing pods.

Not simulated: the audit level's effect (audit annotations: the server's audit log records no
annotations), a PodSecurityConfiguration (exemptions of users, namespaces and runtime classes;
other defaults), emulated versions, the one-second time limit of the existing-pods check (the
3,000-pod limit is kept), and the metrics. A pod's AppArmor annotations are not copied into its
fields here as the real pod strategy does, so a pod setting only the annotation is reported for
the annotation alone.
"""

from __future__ import annotations

from .admission import PodSecurity

__all__ = ["PodSecurity"]
