"""core/v1 ResourceQuotas and LimitRanges as kube-apiserver v1.36 serves them.

A ResourceQuota: quantities in canonical form, a status subresource (``{}`` on create; the
simulated quota controller keeps ``status.hard`` and ``status.used``,
:mod:`memop.testing.controllers.quota`), and ``ValidateResourceQuota``'s checks on ``spec.hard``:
a standard quota resource (or a qualified name such as ``count/deployments.apps``), a quantity not
negative and whole for countable resources, and known scopes.

A LimitRange: ``SetDefaults_LimitRangeItem`` (a container's default limit from its max, its
default request from the default limit or the min) and ``ValidateLimitRange``: standard types
without duplicates, no defaults for Pod limits, a storage bound for PersistentVolumeClaim ones, and
min <= default request <= default <= max for every resource.

Not simulated: the ResourceQuota and LimitRanger admission plugins (a real server refuses a
create over quota and defaults pods' resources from LimitRanges).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from memop.runtime.cache.labels import qualified_name_errors
from memop.testing.apiserver.objects import JsonDict, forbidden, invalid, not_supported, required
from memop.testing.apiserver.quantity import canonical as canonical_quantity
from memop.testing.apiserver.quantity import parse as parse_quantity
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.schema import FieldError
from memop.testing.apiserver.strategy import Kind
from memop.testing.kinds.builtins import BuiltinStrategy, _decoding

RESOURCE_QUOTAS = ResourceType(
    "", "v1", "resourcequotas", "ResourceQuota", True, "resourcequota", ("quota",), has_status=True
)
LIMIT_RANGES = ResourceType("", "v1", "limitranges", "LimitRange", True, "limitrange", ("limits",))

_COUNTABLE = frozenset(
    (
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    )
)
_COMPUTE = frozenset(
    (
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
    )
)
_SCOPES = [
    "BestEffort",
    "CrossNamespacePodAffinity",
    "NotBestEffort",
    "NotTerminating",
    "PriorityClass",
    "Terminating",
]
_LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def amount(text: Any) -> Decimal:
    """A quantity's value (``100m`` -> 0.1)."""
    return parse_quantity(str(text))[0]


def is_countable(name: str) -> bool:
    """``IsIntegerResourceName``: object counts, which must be whole numbers."""
    return name in _COUNTABLE or name.startswith("count/")


def _canonical(amounts: Any) -> None:
    if isinstance(amounts, dict):
        for name, value in list(amounts.items()):
            amounts[name] = canonical_quantity(str(value))


def _quota_name_errors(name: str, path: str) -> list[FieldError]:
    """``ValidateResourceQuotaResourceName``: ``validateResourceName`` (a qualified name and, when
    that holds and it has no prefix, ``IsStandardResourceName``), then, unprefixed,
    ``IsStandardQuotaResourceName``; an unknown bare name gets both errors, as kube-apiserver
    v1.36.2 answers for ``gpus``."""
    errs = [invalid(path, name, msg) for msg in qualified_name_errors(name)]
    if "/" in name:
        return errs
    huge_pages = name.startswith(("hugepages-", "requests.hugepages-"))  # IsQuotaHugePageResourceName
    quota_standard = name in _COUNTABLE or name in _COMPUTE or huge_pages
    if not errs and not (quota_standard or name == "storage"):  # IsStandardResourceName
        errs.append(invalid(path, name, "must be a standard resource type or fully qualified"))
    if not quota_standard:
        errs.append(invalid(path, name, "must be a standard resource for quota"))
    return errs


def _quota_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _map(obj.get("spec"))
    errs: list[FieldError] = []
    for name, value in sorted(_map(spec.get("hard")).items()):
        path = f"spec.hard[{name}]"
        errs.extend(_quota_name_errors(name, path))
        number = amount(value)
        if number < 0:
            errs.append(invalid(path, str(value), "must be greater than or equal to 0"))
        if is_countable(name) and number != number.to_integral_value():
            errs.append(invalid(path, str(value), "must be an integer"))
    for i, scope in enumerate(spec.get("scopes") or ()):
        if scope not in _SCOPES:
            errs.append(not_supported(f"spec.scopes[{i}]", scope, _SCOPES))
    return errs


class ResourceQuotaStrategy(BuiltinStrategy):
    return_deleted_object = True  # kube-apiserver v1.36.2 answers a DELETE with the quota
    generation = False
    unconditional_update = True
    strategic_merge = True

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        spec = obj.setdefault("spec", {})
        status = obj.get("status")

        def canonical() -> None:
            _canonical(_map(spec).get("hard"))
            for key in ("hard", "used"):
                _canonical(_map(status).get(key))

        _decoding(rtype, canonical)
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {}

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _quota_errors(obj)


# --- LimitRange ------------------------------------------------------------------------------------


def default_limit_range(obj: JsonDict) -> None:
    """``SetDefaults_LimitRangeItem`` for every item; quantities in canonical form."""
    spec = obj.setdefault("spec", {})
    for item in _map(spec).get("limits") or ():
        if not isinstance(item, dict):
            continue
        for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            _canonical(item.get(key))
        if item.get("type") != "Container":
            continue
        defaults = dict(_map(item.get("default")))
        requests = dict(_map(item.get("defaultRequest")))
        for name, value in _map(item.get("max")).items():
            defaults.setdefault(name, value)
        for name, value in defaults.items():
            requests.setdefault(name, value)
        for name, value in _map(item.get("min")).items():
            requests.setdefault(name, value)
        if defaults:
            item["default"] = defaults
        if requests:
            item["defaultRequest"] = requests


# (smaller bound, larger bound, the path of the error, the value shown, the message's words)
_ORDER = (
    ("min", "max", "min", "min", "min value {a} is greater than max value {b}"),
    (
        "min",
        "defaultRequest",
        "defaultRequest",
        "defaultRequest",
        "min value {a} is greater than default request value {b}",
    ),
    (
        "defaultRequest",
        "max",
        "defaultRequest",
        "defaultRequest",
        "default request value {a} is greater than max value {b}",
    ),
    (
        "defaultRequest",
        "default",
        "defaultRequest",
        "defaultRequest",
        "default request value {a} is greater than default limit value {b}",
    ),
    ("min", "default", "default", "min", "min value {a} is greater than default value {b}"),
    ("default", "max", "default", "default", "default value {a} is greater than max value {b}"),
)


def _limit_item_errors(item: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = str(item.get("type") or "")
    if "/" not in kind and kind not in _LIMIT_TYPES:
        errs.append(invalid(f"{path}.type", kind, "must be a standard limit type or fully qualified"))
    if kind == "Pod":
        for key in ("default", "defaultRequest"):
            if item.get(key):
                errs.append(forbidden(f"{path}.{key}", "may not be specified when `type` is 'Pod'"))
    if kind == "PersistentVolumeClaim" and not (
        "storage" in _map(item.get("min")) or "storage" in _map(item.get("max"))
    ):
        errs.append(
            required(
                f"{path}.limits",
                "either minimum or maximum storage value is required, but neither was provided",
            )
        )
    names = sorted(
        {name for key in ("max", "min", "default", "defaultRequest") for name in _map(item.get(key))}
    )
    for name in names:
        for low, high, at, shown, words in _ORDER:
            a, b = _map(item.get(low)).get(name), _map(item.get(high)).get(name)
            if a is not None and b is not None and amount(a) > amount(b):
                value = a if shown == low else b
                errs.append(invalid(f"{path}.{at}[{name}]", str(value), words.format(a=a, b=b)))
    return errs


def _limit_range_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, entry in enumerate(_map(obj.get("spec")).get("limits") or ()):
        path = f"spec.limits[{i}]"
        item = _map(entry)
        kind = str(item.get("type") or "")
        if kind in seen:
            errs.append(
                FieldError(f"{path}.type", "FieldValueDuplicate", f'{path}.type: Duplicate value: "{kind}"')
            )
        seen.add(kind)
        errs.extend(_limit_item_errors(item, path))
    return errs


class LimitRangeStrategy(BuiltinStrategy):
    create_on_update = True  # a PUT to a missing name creates it (kube-apiserver v1.36.2: 201)
    generation = False
    unconditional_update = True
    strategic_merge = True

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(rtype, lambda: default_limit_range(obj))
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _limit_range_errors(obj)


KINDS: tuple[Kind, ...] = (
    Kind(RESOURCE_QUOTAS, ResourceQuotaStrategy()),
    Kind(LIMIT_RANGES, LimitRangeStrategy()),
)
