"""The authorization kube-apiserver does inside a write, after its authorization filter let the
request in, run in the store's write path as an admission hook (:class:`GuardedWrite`):

- the RBAC escalation check on role and binding writes (:mod:`memop.testing.auth.escalation`),
  after the mutating admission webhooks and before validation;
- ``create`` on a PATCH or PUT that creates the object (a server-side apply of a new object, an
  update of a kind that allows create on update): kube-apiserver's ``withAuthorization`` asks the
  authorizer before the validating admission webhooks, and refuses with the 403 of a refused
  create (measured on v1.36.2: ``configmaps "x" is forbidden: User "u" cannot create resource
  "configmaps" in API group "" in the namespace "ns"``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memop.testing.apiserver.store import AdmissionHook, Served

# (served, the object as it will be written, the stored one or None) -> raise to refuse.
Check = Callable[[Served, dict[str, Any], dict[str, Any] | None], None]


class GuardedWrite:
    """A store admission hook: ``after_mutation`` once the request's own admission (the
    webhooks', when any) mutated the object, which the store has decoded, defaulted and patched;
    ``on_create`` before the request's validating admission when the write creates the object."""

    def __init__(
        self,
        inner: AdmissionHook | None,
        *,
        after_mutation: Check | None = None,
        on_create: Check | None = None,
    ) -> None:
        self._inner = inner
        self._after_mutation = after_mutation
        self._on_create = on_create

    def mutate(
        self, served: Served, obj: dict[str, Any] | None, old: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        mutated = self._inner.mutate(served, obj, old) if self._inner is not None else None
        current = mutated if mutated is not None else obj
        if current is not None and self._after_mutation is not None:
            self._after_mutation(served, current, old)
        return mutated

    def validate(
        self, served: Served, obj: dict[str, Any] | None, old: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        if obj is not None and old is None and self._on_create is not None:
            self._on_create(served, obj, old)
        return self._inner.validate(served, obj, old) if self._inner is not None else None
