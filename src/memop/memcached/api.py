"""The Memcached API, ``cache.example.com`` ``v1alpha1`` and ``v1beta1``: names, spec and status,
declared once.

``v1alpha1`` is the hub: the storage version and the one the controller reads. ``v1beta1`` is
the same spec plus ``containerPort`` (:class:`MemcachedSpecV1beta1` adds that one field to
:class:`MemcachedSpec`; the status is the same); a v1alpha1 object holds it in the
:data:`CONTAINER_PORT_ANNOTATION` (``memop.memcached.conversion`` moves it there and back), and
the controller reads it through :func:`container_port`.

Every spec field is declared exactly once, as a dataclass field of :class:`MemcachedSpec` whose
metadata carries its JSON name, description and constraints (a *kind*: :class:`Integer`,
:class:`String`, :class:`Resources` ...); the dataclass default is the API default. From that one
declaration come both
- the CRD's structural ``openAPIV3Schema`` (:func:`schema_of`, used by ``memop.memcached.crd``),
  with ``default``s, and
- :func:`parse_spec`, the same defaulting and validation in Python, reporting each bad field
  the way the API server does (``spec.size: Invalid value: -1: spec.size in body should be
  greater than or equal to 0``). The reconciler relies on it when the CRD was installed
  without a schema, or with an older one.

parse_spec applies the API server's semantics for structural schemas: unknown fields are
ignored (the server prunes them), ``null`` is the same as absent (the server drops nulls of
non-nullable fields before defaulting), and a missing ``spec`` is ``{}`` (the schema defaults it,
so nested defaults apply). On top of the schema it checks what the schema cannot express but
the Deployment API would reject anyway (negative quantities, requests above limits, unknown
resource names, names too long for a label value), so those become an InvalidSpec condition
instead of a Deployment write that fails and is retried forever.

Quantities (``resources``) follow the grammar of ``k8s.io/apimachinery/pkg/api/resource``:
:data:`QUANTITY_PATTERN` is that grammar (the exponent of ``1e3`` is an integer, as
``ParseQuantity`` requires), and :func:`parse_quantity` gives a quantity's exact value, so
``"1000m"`` equals ``"1"`` and ``"64Mi"`` equals ``67108864``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from memop.runtime.api import conditions
from memop.runtime.api.validation import type_error
from memop.runtime.client.resources import Resource

GROUP = "cache.example.com"
VERSION = "v1alpha1"
KIND = "Memcached"
LIST_KIND = "MemcachedList"
PLURAL = "memcacheds"
SINGULAR = "memcached"
SHORT_NAMES = ("mc",)
API_VERSION = f"{GROUP}/{VERSION}"
MEMCACHEDS = Resource(GROUP, VERSION, PLURAL, KIND)
# The second version, a spoke of the hub above: served, never stored, never read by the controller.
V1BETA1 = "v1beta1"
API_VERSION_V1BETA1 = f"{GROUP}/{V1BETA1}"
MEMCACHEDS_V1BETA1 = Resource(GROUP, V1BETA1, PLURAL, KIND)
FINALIZER = "cache.example.com/finalizer"

DEFAULT_IMAGE = "memcached:1.6.26-alpine3.19"
INT32_MAX = 2**31 - 1
# memoryLimitMiB is in MiB. 1 TiB is far beyond the item memory a single memcached process is
# given in practice, and it rejects the likely unit mistake of writing bytes: 64 MiB written as
# bytes (67108864) is over it. Without a maximum that typo would start pods that ask memcached
# for 64 TiB and are OOM-killed as the cache fills.
MAX_MEMORY_LIMIT_MIB = 1024 * 1024
# No whitespace as Go's unicode.IsSpace defines it (the Unicode White_Space property): what
# strings.TrimSpace trims, and so what Kubernetes refuses at either end of a Pod's container
# image ("must not have leading or trailing whitespace"). An image reference never contains
# whitespace anywhere (the reference grammar has none), so memop refuses it anywhere: at the
# ends the pods could never be created, inside they could never pull it. Python's str.isspace
# is not this set (it adds U+001C..U+001F), so it is spelled out:
# \t\n\v\f\r, space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
# Spelled for both regexp engines (the schema is checked by Go RE2, parse_spec by Python's re):
# \t\n\v\f\r and two-digit \xHH mean the same in both, and the characters above U+00FF, for which
# the two have no common escape, are written as themselves. Not \S: Go's \s is ASCII-only and
# lacks \v, Python's is Unicode.
IMAGE_PATTERN = r"^[^\t\n\v\f\r \x85\xa0" + "\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000" + "]+$"
# The Memcached's name becomes the value of the app.kubernetes.io/instance label.
NAME_MAX_LENGTH = 63
# memcached's own default port (memcached -p), exposed by the container unless v1beta1 says otherwise.
DEFAULT_CONTAINER_PORT = 11211
# Where a v1alpha1 object keeps v1beta1's spec.containerPort, which its schema has no field for
# (the server would prune it), as Kubernetes' own conversions keep what an older version cannot
# hold. One annotation per field, its value the number in decimal: readable and editable at
# v1alpha1 with kubectl, and a malformed value spoils that field alone. Named under the API
# group and the version it comes from, so it collides with nobody's and says where it belongs.
CONTAINER_PORT_ANNOTATION = f"{GROUP}/v1beta1-container-port"


# --- quantities ---------------------------------------------------------------------------------

# <quantity> ::= <signedNumber><suffix>; <suffix> ::= <binarySI> | <decimalExponent> | <decimalSI>
# The exponent is limited to ±1000 (leading zeros allowed), as parse_quantity refuses larger
# ones: the schema and the parser must accept exactly the same strings.
QUANTITY_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?0*([0-9]{1,3}|1000))?$"
_QUANTITY_PARTS = re.compile(
    r"^(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<binary>[KMGTPE]i)|(?P<decimal>[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Bounds the work an absurd exponent ("1e999999999") could cost; no resource is near it.
_MAX_EXPONENT = 1000
_NANO = 10**9


def parse_quantity(value: str | int) -> Fraction:
    """The exact value of a Kubernetes quantity, rounded away from zero to nano units (as
    ``resource.ParseQuantity`` does). Raises ValueError when ``value`` is not a quantity string,
    TypeError when it is neither a string nor an integer."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    match = _QUANTITY_PARTS.fullmatch(value)
    if match is None or not (match["whole"] or match["frac"]):
        raise ValueError(f"{value!r} is not a quantity: it must match {QUANTITY_PATTERN}")
    frac = match["frac"] or ""
    number = Fraction(int(match["whole"] or "0")) + Fraction(int(frac or "0"), 10 ** len(frac))
    if match["binary"]:
        number *= _BINARY[match["binary"]]
    else:
        exponent = _DECIMAL[match["decimal"]] if match["decimal"] else int(match["exponent"] or "0")
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"{value!r} is not a quantity: exponent out of range")
        number *= Fraction(10) ** exponent
    number = Fraction(math.ceil(number * _NANO), _NANO)
    return -number if match["sign"] == "-" else number


def quantities_equal(a: Any, b: Any) -> bool:
    """Whether two quantities have the same value ("1000m" == "1", "64Mi" == 67108864).

    Values that are not quantities are equal only when identical.
    """
    try:
        return parse_quantity(a) == parse_quantity(b)
    except (ValueError, TypeError):
        return bool(a == b)


# --- errors -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldError:
    """One invalid field: its path and the full message, in the API server's wording."""

    field: str
    message: str


class InvalidSpec(ValueError):
    """The Memcached cannot be acted on as written; ``errors`` names every bad field.

    ``str()`` is what the API server would say: the one message, or ``[first, second, ...]``.
    """

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = tuple(errors)
        messages = [e.message for e in self.errors]
        super().__init__(messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]")


def _show(value: Any) -> str:
    """A bad value as field.Error prints it: strings quoted (%q), numbers and booleans bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, sort_keys=True, default=str)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    """A ``field.Invalid`` error: ``<path>: Invalid value: <value>: <detail>``."""
    return FieldError(path, f"{path}: Invalid value: {_show(value)}: {detail}")


def _type_error(path: str, value: Any, expected: str) -> FieldError:
    return FieldError(path, type_error(path, value, expected))


def _as_integer(value: Any) -> int | None:
    # The API server decodes 3.0 as a float and its schema validator accepts integral floats
    # as integers; so do we.
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


# --- field kinds: one schema and one parser per kind ---------------------------------------------


class Kind(Protocol):
    """How one field is typed: its OpenAPI schema and its parser. Parsers never raise: they
    append to ``errors`` and return the parsed value (or None when it is unusable)."""

    def schema(self) -> dict[str, Any]: ...

    def parse(self, path: str, value: Any, errors: list[FieldError]) -> Any: ...


@dataclass(frozen=True)
class Integer:
    """An integer; int32 fields are bounded to int32 (the server does not check formats)."""

    format: str = "int32"
    minimum: int | None = None
    maximum: int | None = None

    def _maximum(self) -> int | None:
        return self.maximum if self.maximum is not None or self.format != "int32" else INT32_MAX

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": self.format}
        if (maximum := self._maximum()) is not None:
            out["maximum"] = maximum
        if self.minimum is not None:
            out["minimum"] = self.minimum
        out["type"] = "integer"
        return out

    def parse(self, path: str, value: Any, errors: list[FieldError]) -> int | None:
        number = _as_integer(value)
        if number is None:
            errors.append(_type_error(path, value, "integer"))
            return None
        if self.minimum is not None and number < self.minimum:
            errors.append(
                invalid(path, number, f"{path} in body should be greater than or equal to {self.minimum}")
            )
            return None
        maximum = self._maximum()
        if maximum is not None and number > maximum:
            errors.append(invalid(path, number, f"{path} in body should be less than or equal to {maximum}"))
            return None
        return number


@dataclass(frozen=True)
class String:
    """A string, optionally with a minimum length and a pattern (Go RE2 and Python agree on it)."""

    min_length: int | None = None
    pattern: str | None = None

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.min_length is not None:
            out["minLength"] = self.min_length
        if self.pattern is not None:
            out["pattern"] = self.pattern
        out["type"] = "string"
        return out

    def parse(self, path: str, value: Any, errors: list[FieldError]) -> str | None:
        if not isinstance(value, str):
            errors.append(_type_error(path, value, "string"))
            return None
        if self.min_length is not None and len(value) < self.min_length:
            errors.append(
                invalid(path, value, f"{path} in body should be at least {self.min_length} chars long")
            )
            return None
        # fullmatch: Python's $ also matches before a final newline, Go's does not.
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            errors.append(invalid(path, value, f"{path} in body should match '{self.pattern}'"))
            return None
        return value


@dataclass(frozen=True)
class StringList:
    """A list of strings (status only: never parsed from users)."""

    def schema(self) -> dict[str, Any]:
        return {"items": {"type": "string"}, "type": "array"}

    def parse(self, path: str, value: Any, errors: list[FieldError]) -> list[str] | None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            errors.append(_type_error(path, value, "array"))
            return None
        return list(value)


@dataclass(frozen=True)
class Conditions:
    """A ``metav1.Condition`` list-map (status only)."""

    def schema(self) -> dict[str, Any]:
        return conditions.conditions_schema()

    def parse(self, path: str, value: Any, errors: list[FieldError]) -> list[dict[str, Any]] | None:
        if not isinstance(value, list):
            errors.append(_type_error(path, value, "array"))
            return None
        return [dict(c) for c in value if isinstance(c, Mapping)]


_QUANTITY_RE = re.compile(QUANTITY_PATTERN)
# Kubernetes' standard container resources; anything else must be domain-prefixed (extended).
_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)


def _check_resource_name(path: str, name: str, errors: list[FieldError]) -> bool:
    if not _QUALIFIED_NAME.fullmatch(name) or len(name.rsplit("/", 1)[-1]) > 63:
        errors.append(
            invalid(
                path,
                name,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start"
                " and end with an alphanumeric character",
            )
        )
        return False
    native = "/" not in name or "kubernetes.io/" in name
    if native and name not in _STANDARD_RESOURCES and not name.startswith("hugepages-"):
        errors.append(invalid(path, name, "must be a standard resource for containers"))
        return False
    return True


@dataclass(frozen=True)
class ResourceRequirements:
    """A container's ``resources``: limits and requests, quantities kept as the user wrote them
    (integers become their decimal string). Not hashable (it holds dicts)."""

    limits: dict[str, str] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The core/v1 ResourceRequirements form, without empty maps."""
        out: dict[str, Any] = {}
        if self.limits:
            out["limits"] = dict(self.limits)
        if self.requests:
            out["requests"] = dict(self.requests)
        return out


@dataclass(frozen=True)
class Resources:
    """core/v1 ResourceRequirements limits and requests (``claims`` is not offered: memcached
    uses no dynamic resources)."""

    def _quantity_map_schema(self, description: str) -> dict[str, Any]:
        return {
            "additionalProperties": {
                "pattern": QUANTITY_PATTERN,
                "x-kubernetes-int-or-string": True,
            },
            "description": description,
            "type": "object",
        }

    def schema(self) -> dict[str, Any]:
        return {
            "properties": {
                "limits": self._quantity_map_schema(
                    "Limits describes the maximum amount of compute resources allowed."
                ),
                "requests": self._quantity_map_schema(
                    "Requests describes the minimum amount of compute resources required. If omitted,"
                    " it defaults to Limits if that is explicitly specified."
                ),
            },
            "type": "object",
        }

    def _parse_map(self, path: str, value: Any, errors: list[FieldError]) -> dict[str, str] | None:
        if not isinstance(value, Mapping):
            errors.append(_type_error(path, value, "object"))
            return None
        parsed: dict[str, str] = {}
        ok = True
        for name, raw in value.items():
            item = f"{path}.{name}"
            if raw is None:
                continue  # dropped by the server, as for any non-nullable field
            number = _as_integer(raw)
            if number is not None:
                text = str(number)
            elif isinstance(raw, str):
                if not _QUANTITY_RE.fullmatch(raw):
                    errors.append(invalid(item, raw, f"{item} in body should match '{QUANTITY_PATTERN}'"))
                    ok = False
                    continue
                text = raw
            else:
                errors.append(_type_error(item, raw, "integer,string"))
                ok = False
                continue
            # What follows is Deployment validation the schema cannot express.
            if not _check_resource_name(item, str(name), errors):
                ok = False
                continue
            try:
                amount = parse_quantity(text)
            except ValueError as error:
                errors.append(invalid(item, text, str(error)))
                ok = False
                continue
            if amount < 0:
                errors.append(invalid(item, text, "must be greater than or equal to 0"))
                ok = False
                continue
            parsed[str(name)] = text
        return parsed if ok else None

    def parse(self, path: str, value: Any, errors: list[FieldError]) -> ResourceRequirements | None:
        if not isinstance(value, Mapping):
            errors.append(_type_error(path, value, "object"))
            return None
        before = len(errors)
        limits: dict[str, str] | None = {}
        requests: dict[str, str] | None = {}
        if value.get("limits") is not None:
            limits = self._parse_map(f"{path}.limits", value["limits"], errors)
        if value.get("requests") is not None:
            requests = self._parse_map(f"{path}.requests", value["requests"], errors)
        if limits is None or requests is None:
            return None
        for name, request in requests.items():
            if name in limits and parse_quantity(request) > parse_quantity(limits[name]):
                item = f"{path}.requests.{name}"
                detail = f"must be less than or equal to {name} limit of {limits[name]}"
                errors.append(invalid(item, request, detail))
        if len(errors) > before:
            return None
        return ResourceRequirements(limits=limits, requests=requests)


# --- the declaration ----------------------------------------------------------------------------


def api(json_name: str, kind: Kind, description: str) -> dict[str, Any]:
    """The metadata that makes a dataclass field an API field: JSON name, kind, description.

    The field's dataclass default is the API default; None means optional without a default.
    """
    return {"json": json_name, "kind": kind, "description": description}


@dataclass(frozen=True)
class MemcachedSpec:
    """What the user asks for. Every field is declared here and nowhere else."""

    size: int = field(
        default=1,
        metadata=api(
            "size",
            Integer("int32", minimum=0),
            "Number of memcached pods. 0 keeps the Deployment, with no pods.",
        ),
    )
    image: str = field(
        default=DEFAULT_IMAGE,
        metadata=api("image", String(min_length=1, pattern=IMAGE_PATTERN), "Container image of memcached."),
    )
    memory_limit_mib: int = field(
        default=64,
        metadata=api(
            "memoryLimitMiB",
            Integer("int32", minimum=1, maximum=MAX_MEMORY_LIMIT_MIB),
            "Memory for items, in MiB (memcached --memory-limit). Keep it below the container's"
            " memory limit: memcached needs some memory beyond it for connections and its hash table.",
        ),
    )
    resources: ResourceRequirements | None = field(
        default=None,
        metadata=api(
            "resources",
            Resources(),
            "Compute resources of the memcached container (core/v1 ResourceRequirements).",
        ),
    )

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON, every default filled in (what the server stores after defaulting)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.metadata["json"]] = value.to_dict() if isinstance(value, ResourceRequirements) else value
        return out


@dataclass(frozen=True)
class MemcachedSpecV1beta1(MemcachedSpec):
    """The spec of ``v1beta1``: v1alpha1's, and the container port (as the Operator SDK
    tutorial's later Memcached has it). Declared here only; v1alpha1 holds it in the
    :data:`CONTAINER_PORT_ANNOTATION`."""

    container_port: int = field(
        default=DEFAULT_CONTAINER_PORT,
        metadata=api(
            "containerPort",
            Integer("int32", minimum=1, maximum=65535),
            "Port memcached listens on (memcached --port), exposed by its container.",
        ),
    )


@dataclass(frozen=True)
class MemcachedStatus:
    """What memop observed: declared for the schema (memop.memcached.status computes it)."""

    nodes: list[str] | None = field(
        default=None,
        metadata=api("nodes", StringList(), "Names of the memcached pods that are pending or running."),
    )
    ready_replicas: int | None = field(
        default=None,
        metadata=api("readyReplicas", Integer("int32"), "Ready pods, as the Deployment reports them."),
    )
    observed_generation: int | None = field(
        default=None,
        metadata=api(
            "observedGeneration", Integer("int64"), "The metadata.generation this status was computed for."
        ),
    )
    conditions: list[dict[str, Any]] | None = field(
        default=None,
        metadata=api(
            "conditions",
            Conditions(),
            "Available, Progressing and Degraded (metav1.Condition), keyed by type.",
        ),
    )


def schema_of(cls: type[Any], description: str) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of a declared spec or status dataclass."""
    properties: dict[str, Any] = {}
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.metadata["json"]):
        kind: Kind = f.metadata["kind"]
        prop: dict[str, Any] = {}
        if f.default is not None and f.default is not dataclasses.MISSING:
            prop["default"] = f.default
        prop["description"] = f.metadata["description"]
        prop.update(kind.schema())
        properties[f.metadata["json"]] = prop
    return {"description": description, "properties": properties, "type": "object"}


@dataclass(frozen=True)
class RootRule:
    """A rule on the whole object: the CRD states it in CEL, parse_spec checks it in Python."""

    rule: str
    message: str


ROOT_RULES = (
    RootRule(
        rule=f"size(self.metadata.name) <= {NAME_MAX_LENGTH}",
        message=(
            f"metadata.name must be no more than {NAME_MAX_LENGTH} characters: it is the value of"
            " the app.kubernetes.io/instance label"
        ),
    ),
)


# The canonical decimal spelling of an integer, as str(int) writes it; at most 18 digits (an int64
# fits, and Python's int() refuses very long strings anyway).
_DECIMAL_INTEGER = re.compile(r"0|-?[1-9][0-9]{0,17}")
CONTAINER_PORT_PATH = f"metadata.annotations[{CONTAINER_PORT_ANNOTATION}]"


def integer_from_annotation(value: Any) -> int | None:
    """The integer an annotation value spells as ``str(n)`` does (no sign but ``-``, no leading
    zero, no spaces), else None. Canonical only, so that converting the value to a number and
    back gives the same annotation."""
    if isinstance(value, str) and _DECIMAL_INTEGER.fullmatch(value):
        return int(value)
    return None


def _container_port(obj: Mapping[str, Any], errors: list[FieldError]) -> int:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping) or CONTAINER_PORT_ANNOTATION not in annotations:
        return DEFAULT_CONTAINER_PORT
    raw = annotations[CONTAINER_PORT_ANNOTATION]
    port = integer_from_annotation(raw)
    if port is None or not 1 <= port <= 65535:
        # Names the v1beta1 field too: whoever wrote the value most likely wrote it there.
        errors.append(
            invalid(
                CONTAINER_PORT_PATH,
                raw,
                "must be a port number, 1 to 65535 in decimal (v1beta1's spec.containerPort)",
            )
        )
        return DEFAULT_CONTAINER_PORT
    return port


def container_port(obj: Mapping[str, Any]) -> int:
    """The port of the memcached container of the v1alpha1 Memcached ``obj``: its
    :data:`CONTAINER_PORT_ANNOTATION` (v1beta1's ``spec.containerPort``), else 11211.

    Raises InvalidSpec when the annotation is not a port; :func:`parse_spec` checks it too, so
    after a successful ``parse_spec(obj)`` this never raises.
    """
    errors: list[FieldError] = []
    port = _container_port(obj, errors)
    if errors:
        raise InvalidSpec(errors)
    return port


def parse_spec(obj: Mapping[str, Any]) -> MemcachedSpec:
    """The defaulted, validated spec of the v1alpha1 Memcached ``obj`` (a whole object, as read).

    Also checks the annotation v1alpha1 keeps v1beta1's ``containerPort`` in (read it with
    :func:`container_port`), so a bad port is an InvalidSpec like a bad spec field.

    Raises InvalidSpec naming every bad field. Never raises anything else, whatever ``obj`` holds.
    """
    errors: list[FieldError] = []
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if isinstance(name, str) and len(name) > NAME_MAX_LENGTH:
        errors.append(invalid("metadata.name", name, f"must be no more than {NAME_MAX_LENGTH} characters"))
    _container_port(obj, errors)
    raw = obj.get("spec")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        errors.append(_type_error("spec", raw, "object"))
        raise InvalidSpec(errors)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(MemcachedSpec):
        json_name = f.metadata["json"]
        value = raw.get(json_name)
        if value is None:
            continue  # absent or null: the dataclass default is the API default
        kind: Kind = f.metadata["kind"]
        values[f.name] = kind.parse(f"spec.{json_name}", value, errors)
    if errors:
        raise InvalidSpec(errors)
    return MemcachedSpec(**values)
