"""The Memcached admission webhook: a validator of what the CRD's schema cannot check.

The schema (and its CEL rule) already refuses most bad specs at the API server. What it cannot
express, :func:`memop.memcached.api.parse_spec` checks in Python: quantities that are not
really quantities or are negative, requests above limits, resource names a container cannot
have, and the annotation a v1alpha1 object keeps v1beta1's ``containerPort`` in. Without this
webhook such an object is accepted and then reported by the controller (the InvalidSpec
condition and Event); with it, the create or update is refused up front, one field error per
bad field, in the same words.

One webhook, on the hub version ``v1alpha1`` with ``matchPolicy: Equivalent`` (Kubebuilder's
way): the API server converts a ``v1beta1`` request to ``v1alpha1`` before calling it, so it
sees both versions' writes, as the controller reads them. Given a ``v1beta1`` object anyway
(a configuration with ``Exact``), it converts it first.

Updates are checked as Kubernetes ratchets validation: an object whose spec (and port
annotation, and name) are what they were is accepted with a warning even when invalid, so an
object stored before the webhook existed can still get and lose its finalizer, labels and
annotations, and be deleted.

No defaulter: the schema's defaults (size, image, memoryLimitMiB, and containerPort at
v1beta1) are applied by the API server on every write *and* every read, also to objects
stored before a default existed, which a mutating webhook cannot do; nothing memop would
default depends on the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memop.memcached import api, conversion
from memop.runtime.webhook.declarations import (
    AdmissionRequest,
    AdmissionWebhook,
    FieldError,
    ValidationError,
)

__all__ = ["WEBHOOK", "MemcachedValidator", "warnings_of"]

Obj = dict[str, Any]


def _hub(obj: Obj) -> Obj:
    return conversion.to_hub(obj) if obj.get("apiVersion") == api.API_VERSION_V1BETA1 else obj


def _field_error(error: api.FieldError) -> FieldError:
    # api.FieldError's message is the whole line ("spec.size: Invalid value: ..."); a cause's
    # message is without its field, which the denial puts back in front as the server does.
    prefix = f"{error.field}: "
    message = error.message[len(prefix) :] if error.message.startswith(prefix) else error.message
    reason = "FieldValueTypeInvalid" if " must be of type " in message else "FieldValueInvalid"
    return FieldError(error.field, message, reason)


def _memory_limit(spec: api.MemcachedSpec) -> str | None:
    if spec.resources is None:
        return None
    return spec.resources.limits.get("memory")


def warnings_of(spec: api.MemcachedSpec) -> list[str]:
    """What is valid but worth saying about ``spec``, one line each (kubectl prints them)."""
    found = []
    if spec.size == 0:
        found.append("spec.size is 0: the Deployment is kept with no memcached pods")
    limit = _memory_limit(spec)
    if limit is not None and api.parse_quantity(limit) <= spec.memory_limit_mib * 2**20:
        found.append(
            f"spec.memoryLimitMiB ({spec.memory_limit_mib} MiB of items) leaves memcached no room"
            f" within the container's memory limit of {limit}: it needs memory beyond its items"
            " for connections and its hash table, and is OOM-killed as the cache fills"
        )
    return found


def _check(obj: Obj) -> api.MemcachedSpec:
    try:
        return api.parse_spec(obj)
    except api.InvalidSpec as invalid:
        raise ValidationError([_field_error(e) for e in invalid.errors]) from None


def _unchanged(old: Obj, new: Obj) -> bool:
    """Whether what parse_spec reads is the same in both."""

    def read(obj: Obj) -> tuple[Any, Any, Any]:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        annotations = meta.get("annotations")
        annotations = annotations if isinstance(annotations, Mapping) else {}
        return meta.get("name"), obj.get("spec"), annotations.get(api.CONTAINER_PORT_ANNOTATION)

    return read(old) == read(new)


class MemcachedValidator:
    """Refuses a Memcached that ``parse_spec`` refuses; see the module docstring."""

    async def validate_create(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]:
        return warnings_of(_check(_hub(obj)))

    async def validate_update(self, old: Obj, new: Obj, request: AdmissionRequest) -> Sequence[str]:
        old, new = _hub(old), _hub(new)
        try:
            return warnings_of(_check(new))
        except ValidationError as error:
            if not _unchanged(old, new):
                raise
            return [f"this Memcached is invalid, and left as it was: {error}"]

    async def validate_delete(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]:
        return []  # not registered for DELETE: nothing about a Memcached forbids deleting it


WEBHOOK = AdmissionWebhook(
    api.GROUP,
    api.VERSION,
    api.KIND,
    api.PLURAL,
    validator=MemcachedValidator(),
    operations=("CREATE", "UPDATE"),
    match_policy="Equivalent",
)
