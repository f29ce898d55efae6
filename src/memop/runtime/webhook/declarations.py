"""What a controller package declares about its webhooks, in plain Python.

Admission (as controller-runtime's ``CustomDefaulter`` / ``CustomValidator``):

- a :class:`Defaulter` changes the object it is given in place; memop answers with the JSON
  patch from the object received to the object after ``default`` (no patch when unchanged);
- a :class:`Validator` returns warnings (shown by kubectl) or raises :class:`ValidationError`
  with one :class:`FieldError` per bad field: the request is denied with ``422 Invalid`` and
  the field paths, as the API server's own validation does. Any other exception is a denial
  (``403``) whose message names the exception, and one log line; never a 500.

Conversion is hub and spoke (controller-runtime's ``Hub`` / ``Convertible``): one version is the
hub, every other version (a spoke) converts to and from it, so n versions need 2(n-1)
functions, not n(n-1). Conversion functions are pure: a dict in, a new dict out; memop sets
``apiVersion`` itself. What a version cannot hold must survive a round trip, in an annotation,
as Kubernetes' own conversions do.

Names follow Kubebuilder's, so a manifest made by either looks alike: a kind's mutating
webhook is served at ``/mutate-<group with dots as dashes>-<version>-<kind, lower case>`` and
named ``m<kind>-<version>.<group>``; validating ones ``/validate-...`` and ``v<kind>-...``;
conversion at ``/convert``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Obj = dict[str, Any]
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
FailurePolicy = Literal["Fail", "Ignore"]
MatchPolicy = Literal["Exact", "Equivalent"]
SideEffects = Literal["None", "NoneOnDryRun"]

CONVERSION_PATH = "/convert"


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of an ``admission.k8s.io/v1`` AdmissionReview request a handler may read.

    ``object`` is absent on DELETE, ``old_object`` on CREATE. ``kind`` is the kind of ``object``
    (group, version, kind), which with ``matchPolicy: Equivalent`` may differ from
    ``request_kind``, the kind the client sent.
    """

    uid: str
    operation: Operation
    kind: tuple[str, str, str]
    resource: tuple[str, str, str]
    namespace: str
    name: str
    object: Obj | None
    old_object: Obj | None
    dry_run: bool
    user_info: Mapping[str, Any]
    request_kind: tuple[str, str, str] | None = None
    sub_resource: str = ""
    options: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class FieldError:
    """One bad field: ``field`` is its path as the API server writes it (``spec.size``,
    ``spec.containers[0].image``), ``message`` what is wrong, ``reason`` one of the API's
    ``CauseType`` values (``FieldValueInvalid``, ``FieldValueRequired``, ``FieldValueForbidden``,
    ``FieldValueNotSupported``...)."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


class ValidationError(Exception):
    """Raised by a validator (or a defaulter) to deny a request with ``422 Invalid`` and one
    cause per field. ``warnings`` are returned with the denial."""

    def __init__(self, errors: Sequence[FieldError], *, warnings: Sequence[str] = ()) -> None:
        if not errors:
            raise ValueError("a ValidationError needs at least one FieldError")
        self.errors = tuple(errors)
        self.warnings = tuple(warnings)
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in self.errors))


class Defaulter(Protocol):
    """Sets defaults on ``obj`` in place (CREATE and UPDATE)."""

    async def default(self, obj: Obj, request: AdmissionRequest) -> None: ...


class Validator(Protocol):
    """Accepts a request by returning (possibly no) warnings, denies it by raising
    :class:`ValidationError`."""

    async def validate_create(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]: ...

    async def validate_update(self, old: Obj, new: Obj, request: AdmissionRequest) -> Sequence[str]: ...

    async def validate_delete(self, obj: Obj, request: AdmissionRequest) -> Sequence[str]: ...


def _path_part(group: str, version: str, kind: str) -> str:
    return f"{group.replace('.', '-')}-{version}-{kind.lower()}"


@dataclass(frozen=True)
class AdmissionWebhook:
    """A kind's admission webhooks: a defaulter, a validator, or both.

    The generated configurations register them for ``operations`` (DELETE reaches only the
    validator, and only when listed) on ``plural`` of ``group``/``version``; ``namespaced``
    gives the rule's scope. ``failure_policy``, ``side_effects``, ``timeout_seconds`` and
    ``match_policy`` are written as they are into both configurations (Kubebuilder's defaults:
    Fail, None, 10 s, Equivalent).
    """

    group: str
    version: str
    kind: str
    plural: str
    defaulter: Defaulter | None = None
    validator: Validator | None = None
    operations: tuple[Operation, ...] = ("CREATE", "UPDATE")
    namespaced: bool = True
    failure_policy: FailurePolicy = "Fail"
    side_effects: SideEffects = "None"
    timeout_seconds: int = 10
    match_policy: MatchPolicy = "Equivalent"

    def __post_init__(self) -> None:
        if self.defaulter is None and self.validator is None:
            raise ValueError(f"the {self.kind} webhook declares neither a defaulter nor a validator")
        if not 1 <= self.timeout_seconds <= 30:
            raise ValueError(f"timeout_seconds must be within 1..30, not {self.timeout_seconds}")

    @property
    def mutating_path(self) -> str:
        return "/mutate-" + _path_part(self.group, self.version, self.kind)

    @property
    def validating_path(self) -> str:
        return "/validate-" + _path_part(self.group, self.version, self.kind)

    @property
    def mutating_name(self) -> str:
        return f"m{self.kind.lower()}-{self.version}.{self.group}"

    @property
    def validating_name(self) -> str:
        return f"v{self.kind.lower()}-{self.version}.{self.group}"


@dataclass(frozen=True)
class Spoke:
    """How one version converts to the hub and back: both pure, dict to new dict."""

    to_hub: Callable[[Obj], Obj]
    from_hub: Callable[[Obj], Obj]


@dataclass(frozen=True)
class Conversion:
    """A kind's versions and how they convert: ``hub`` names the hub version, ``spokes`` maps
    every other served version to its :class:`Spoke`. The CRD ``group``/``plural`` get
    ``spec.conversion.strategy: Webhook`` pointing at :data:`CONVERSION_PATH`."""

    group: str
    kind: str
    plural: str
    hub: str
    spokes: Mapping[str, Spoke] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.spokes:
            raise ValueError(f"the {self.kind} conversion declares no spoke version")
        if self.hub in self.spokes:
            raise ValueError(f"the hub version {self.hub} of {self.kind} cannot also be a spoke")

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.hub, *self.spokes)
