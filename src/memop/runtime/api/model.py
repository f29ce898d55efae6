"""A custom resource's API declared once, as typed Python classes (Pydantic v2 models).

The user writes what Kubebuilder users write as Go types with markers::

    class WebAppSpec(Model):
        replicas: int = Field(default=1, ge=1)
        \"\"\"How many pods serve the app.\"\"\"
        image: str

    class WebApp(CustomResource, group="apps.example.com", version="v1"):
        spec: WebAppSpec
        status: Status = Status()

and gets from it the kind's identity (``WebApp.kube``, a :class:`KindInfo`), its runtime
:class:`~memop.runtime.Resource`, its CRD, a typed view of stored objects
(``WebApp.parse(obj).spec.replicas``) and their dict form (``to_dict()``).

Conventions (every :class:`Model`):

- Python attributes are snake_case and the JSON names camelCase (``min_ready_seconds`` is
  ``minReadySeconds``), as Go's json tags are; either name is accepted on input.
- The docstring under a field is its description (Kubebuilder's comments), the class's
  docstring the object's.
- Fields the type does not declare are ignored on input, as the API server prunes them.
- :meth:`Model.parse` validates as the CRD's schema does (JSON types, no coercion of ``"1"`` to
  1) and raises only :class:`InvalidObject`, in the API server's words.
- :meth:`Model.to_dict` gives the JSON form by alias, without the fields that are ``None``.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, ClassVar, Literal, Self

import orjson
import pydantic
from pydantic import ConfigDict, Field, SerializationInfo, field_validator, model_serializer, model_validator
from pydantic.alias_generators import to_camel

from memop.runtime.api import conditions
from memop.runtime.api.errors import InvalidObject, SchemaViolation, from_pydantic
from memop.runtime.api.fields import Cel, ListType, Schema
from memop.runtime.api.kinds import KindInfo, kind_info
from memop.runtime.api.schema import crd_of, spec_needs_no_fields
from memop.runtime.api.validation import json_type
from memop.runtime.client.resources import Resource
from memop.runtime.webhook.declarations import FieldError

# The class keywords of a CustomResource (Kubebuilder's markers on the kind's type).
KIND_OPTIONS = frozenset(
    ("group", "version", "kind", "plural", "singular", "namespaced", "short_names", "categories",
     "printer_columns", "scale")
)  # fmt: skip


class Model(pydantic.BaseModel):
    """The base of a kind's spec, status and their nested objects."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        extra="ignore",
    )

    def __init_subclass__(cls, *, validations: Iterable[Cel] = (), **kwargs: Any) -> None:
        # ``validations=``: CEL rules on the whole object, as the @Cel(...) decorator adds them.
        super().__init_subclass__(**kwargs)
        for rule in validations:
            if not isinstance(rule, Cel):
                raise TypeError(f"{cls.__name__}: validations= takes Cel rules, not {rule!r}")
            rule(cls)

    @classmethod
    def parse(cls, obj: Mapping[str, Any]) -> Self:
        """``obj`` (decoded JSON, as a client or the cache gives it) as this type. Raises
        :class:`InvalidObject` with one error per bad field, and nothing else whatever ``obj``
        holds. Validation is the schema's: strict JSON types (``"1"`` is no integer), every
        constraint the type declares, missing required fields; unknown fields are ignored."""
        if not isinstance(obj, Mapping):
            text = f'Invalid value: "{json_type(obj)}": must be of type object'
            raise InvalidObject([FieldError("<nil>", text, "FieldValueTypeInvalid")])
        try:
            document = orjson.dumps(obj, default=_jsonable)
        except (TypeError, orjson.JSONEncodeError) as error:
            raise InvalidObject([FieldError("<nil>", f"Invalid value: not JSON: {error}")]) from None
        try:
            try:
                return cls.model_validate_json(document, strict=True)
            except pydantic.ValidationError as error:
                retry = _with_integral_floats_as_ints(obj, error)
                if retry is None:
                    raise
            return cls.model_validate_json(retry, strict=True)
        except pydantic.ValidationError as error:
            raise from_pydantic(error, cls) from None
        except Exception as error:  # a validator of the user's own that failed otherwise
            where = traceback.extract_tb(error.__traceback__)[-1]
            text = f"Internal error: validating raised {error!r} ({where.filename}:{where.lineno})"
            raise InvalidObject([FieldError("<nil>", text, "InternalError")]) from None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a fresh dict): camelCase names, JSON values (quantities as their
        canonical strings), and no key for a field that is ``None``."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def _with_integral_floats_as_ints(obj: Any, error: pydantic.ValidationError) -> bytes | None:
    """``obj`` as JSON with integral floats written as integers, when ``error`` refused one
    (the API server accepts 2.0 for an integer; strict Pydantic refuses a float for an int);
    else None."""
    if not any(_integral_float(e["input"]) for e in error.errors(include_url=False)):
        return None
    try:
        return orjson.dumps(_integral_floats_as_ints(obj), default=_jsonable)
    except (TypeError, orjson.JSONEncodeError):  # beyond 64 bits: the first error stands
        return None


def _integral_float(value: Any) -> bool:
    """A float that is a whole number an int64 holds (what the server takes for an integer)."""
    return isinstance(value, float) and value.is_integer() and -(2**63) <= value < 2**63


def _integral_floats_as_ints(value: Any) -> Any:
    if _integral_float(value):
        return int(value)
    if isinstance(value, Mapping):
        return {k: _integral_floats_as_ints(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_integral_floats_as_ints(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is no JSON value")


class Condition(Model):
    """Condition contains details for one aspect of the current state of this API Resource."""

    type: str = Field(max_length=conditions.TYPE_MAX_LENGTH, pattern=conditions.TYPE_PATTERN)
    """type of condition in CamelCase or in foo.example.com/CamelCase."""
    status: Literal["True", "False", "Unknown"]
    """status of the condition, one of True, False, Unknown."""
    reason: str = Field(
        min_length=1, max_length=conditions.REASON_MAX_LENGTH, pattern=conditions.REASON_PATTERN
    )
    """reason contains a programmatic identifier indicating the reason for the condition's last
    transition, in CamelCase."""
    message: str = Field(default="", max_length=conditions.MESSAGE_MAX_LENGTH)
    """message is a human readable message indicating details about the transition."""
    last_transition_time: Annotated[str, Schema({"format": "date-time"})]
    """lastTransitionTime is the last time the condition transitioned from one status to another
    (RFC 3339)."""
    observed_generation: int | None = Field(default=None, ge=0)
    """observedGeneration represents the .metadata.generation that the condition was set based upon."""


class Status(Model):
    """The base of a kind's status: its conditions and the generation they describe. A kind's
    status subclasses it to add fields."""

    conditions: Annotated[list[Condition], ListType("map", keys=("type",))] = []
    """Conditions of the object's current state (Ready, Progressing, Degraded...), one per type."""
    observed_generation: int | None = None
    """The metadata.generation the status was computed from."""


class ObjectMeta(Model):
    """The object's ``metadata`` (``metav1.ObjectMeta``). Keys not declared here
    (managedFields, deletionGracePeriodSeconds...) are kept as they are. An empty value is left
    out of the dict form, as Go's ``omitempty`` does."""

    model_config = ConfigDict(extra="allow")

    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[dict[str, Any]] = Field(default_factory=list)
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None

    @model_serializer(mode="wrap")
    def _omit_empty(
        self, handler: Callable[[ObjectMeta], dict[str, Any]], info: SerializationInfo
    ) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v not in ("", 0, None, [], {}) or v is False}


class CustomResource(Model):
    """A custom resource kind: ``apiVersion``, ``kind``, ``metadata``, and the subclass's
    ``spec`` (and ``status``, when the kind has the status subresource).

    The kind is declared by class keywords (Kubebuilder's markers): ``group`` and ``version``
    (required for a kind; a class without them is an abstract base), ``kind`` (the class name),
    ``plural`` (Kubebuilder's plural of the kind lower-cased), ``singular`` (the kind
    lower-cased), ``namespaced`` (True), ``short_names``, ``categories``, ``printer_columns``
    (:class:`~memop.runtime.api.kinds.PrinterColumn`) and ``scale``
    (:class:`~memop.runtime.api.kinds.Scale`). A class that declares them has ``kube``.
    """

    kube: ClassVar[KindInfo]
    """The kind's identity and CRD options (only on a class that declares a kind)."""

    api_version: str = ""
    """``group/version`` (set from the class when not given)."""
    kind: str = ""
    """The kind's name (set from the class when not given)."""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in KIND_OPTIONS}
        unknown = sorted(set(kwargs) - {"validations"})
        if unknown:  # Pydantic's own class keywords (frozen=...) never reach here
            raise TypeError(
                f"{cls.__name__}: unknown class option(s) {', '.join(unknown)}; a kind takes"
                f" {', '.join(sorted(KIND_OPTIONS))} and validations"
            )
        super().__init_subclass__(**kwargs)
        if options:
            cls.kube = kind_info(cls.__name__, options)

    @classmethod
    def _kind(cls) -> KindInfo:
        info: KindInfo | None = getattr(cls, "kube", None)
        if info is None:
            raise TypeError(f"{cls.__name__} declares no kind: give it group= and version= class keywords")
        return info

    @classmethod
    def resource(cls) -> Resource:
        """The kind's resource, for the client and the cache."""
        return cls._kind().resource

    @classmethod
    def crd(cls) -> dict[str, Any]:
        """The kind's ``apiextensions.k8s.io/v1`` CustomResourceDefinition (a fresh dict)."""
        return crd_of(cls)

    @model_validator(mode="before")
    @classmethod
    def _fill_type_meta(cls, data: Any) -> Any:
        info: KindInfo | None = getattr(cls, "kube", None)
        if info is not None and isinstance(data, dict):
            data = dict(data)
            if "apiVersion" not in data and "api_version" not in data:
                data["apiVersion"] = info.api_version
            data.setdefault("kind", info.kind)
            if "spec" not in data and spec_needs_no_fields(cls):
                data["spec"] = {}  # as the API server defaults it (the schema's ``default: {}``)
        return data

    @field_validator("api_version")
    @classmethod
    def _same_api_version(cls, value: str) -> str:
        info: KindInfo | None = getattr(cls, "kube", None)
        if info is not None and value != info.api_version:
            raise SchemaViolation(
                value, f'supported values: "{info.api_version}"', reason="FieldValueNotSupported"
            )
        return value

    @field_validator("kind")
    @classmethod
    def _same_kind(cls, value: str) -> str:
        info: KindInfo | None = getattr(cls, "kube", None)
        if info is not None and value != info.kind:
            raise SchemaViolation(value, f'supported values: "{info.kind}"', reason="FieldValueNotSupported")
        return value

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.metadata.name

    @property
    def namespace(self) -> str:
        """``metadata.namespace`` ("" for a cluster-scoped object)."""
        return self.metadata.namespace

    @property
    def uid(self) -> str:
        """``metadata.uid`` ("" before the object is created)."""
        return self.metadata.uid

    @property
    def generation(self) -> int:
        """``metadata.generation`` (0 before the object is created)."""
        return self.metadata.generation
