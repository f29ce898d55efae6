"""How one kind behaves on writes (the ``RESTCreateStrategy``/``RESTUpdateStrategy`` of
kube-apiserver), plus field selectors.

A :class:`Strategy` works on plain dicts the store owns exclusively while a write is in flight:
``default``/``prepare_*`` may mutate the object they are given, ``validate_*`` must not. The
base class behaves like a custom resource; :mod:`memop.testing.kinds.builtins` and
:mod:`memop.testing.kinds.crds` subclass it.

A :class:`Kind` is what the server needs to serve one group/version/resource: its
:class:`~memop.testing.apiserver.resources.ResourceType` and its strategy (and, for a version sharing
another's storage, the conversions). The kinds' modules describe their kinds with it;
:mod:`memop.testing.kinds` gathers them for the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memop.testing.apiserver.errors import ApiError, bad_request
from memop.testing.apiserver.objects import JsonDict, dns1123_label_errors, dns1123_subdomain_errors
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.schema import FieldError

if TYPE_CHECKING:
    from memop.testing.apiserver.store import Change, Store

Conversion = Callable[[Mapping[str, Any]], JsonDict]

# metadata and the type fields never count as "spec" for generation purposes.
_NOT_SPEC = frozenset(("apiVersion", "kind", "metadata"))


class Strategy:
    """Write behaviour of one kind; the defaults are those of a custom resource."""

    generation = True  # maintains metadata.generation
    unconditional_update = False  # PUT without metadata.resourceVersion is allowed
    create_on_update = False  # PUT of a missing object creates it
    return_deleted_object = False  # DELETE answers with the object, not a Success Status
    strategic_merge = False  # accepts application/strategic-merge-patch+json
    label_names = False  # names are DNS-1123 labels (namespaces), not subdomains
    # Built-in core/v1 kinds with registered field-label conversions word unknown field labels
    # differently from everything else (apimachinery's default conversion).
    core_field_labels = False
    # Whether metadata.namespace is a field label (a field-label conversion of a cluster-scoped
    # kind, a Node's, may leave it out).
    namespace_field_label = True
    # Built-in kinds are typed in the real server: list items carry no kind/apiVersion.
    builtin = False
    # Fields of the kind's typed object that are metav1.Time / metav1.MicroTime (paths of keys,
    # "*" for every item of a list): decoding parses them and keeps them in UTC
    # (memop.testing.apiserver.times). ObjectMeta's are everyone's.
    times: tuple[tuple[str, ...], ...] = ()
    micro_times: tuple[tuple[str, ...], ...] = ()

    def field_labels(self) -> Mapping[str, str]:
        """Extra selectable field labels beyond metadata.name/namespace, mapped to dotted paths."""
        return {}

    def unsupported_field_label(self, label: str) -> str | None:
        """The message of the 400 for a field label the kind does not know, where its
        field-label conversion words it its own way (None: the usual wording)."""
        return None

    def field_label_defaults(self) -> Mapping[str, str]:
        """What a field label reads when its path is absent (a Job's ``status.successful`` is
        ``strconv.Itoa`` of a zero int: "0"); "" for labels not listed."""
        return {}

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        """Server-side defaulting of a decoded object; returns the (possibly new) object."""
        return obj

    def prepare_create(self, obj: JsonDict, rtype: ResourceType) -> None:
        """Normalise a new object after the status was dropped (set an initial status, ...)."""

    def storage_form(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        """The validated object as stored (already in the storage version), when a request in
        version ``rtype`` leaves more in it than the storage version holds."""
        return obj

    def prepare_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> None:
        """Normalise an update of the main resource (reset fields users may not change)."""

    def record_times(self, new: JsonDict, old: JsonDict | None, now: str) -> None:
        """Set the times the kind's registry strategy takes from its clock (``now``, RFC 3339)
        on a create (``old`` None) or an update of the object or its status, before validation
        (a PersistentVolume's ``status.lastPhaseTransitionTime``)."""

    def admit_update(self, store: Store, new: JsonDict, old: JsonDict, rtype: ResourceType) -> None:
        """The kind's validating admission plugins on an update of the main resource, after the
        strategy's validation: raise an :class:`~memop.testing.apiserver.errors.ApiError` to
        refuse (a PersistentVolumeClaim's resize check)."""

    def name_errors(self, name: str) -> list[str]:
        """Why ``name`` is no valid object name of the kind (empty when it is one)."""
        return dns1123_label_errors(name) if self.label_names else dns1123_subdomain_errors(name)

    def allocate(self, store: Store, obj: JsonDict, old: JsonDict | None) -> list[FieldError]:
        """Assign what the registry allocates from cluster-wide pools (a Service's cluster IP)
        before validation, on create (``old`` None) and update; errors answer 422 Invalid."""
        return []

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        """Kind-specific validation of a new object (ObjectMeta is validated by the store)."""
        return []

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        """Kind-specific validation of an update; defaults to the create rules."""
        return self.validate_create(new, rtype)

    def bumps_generation(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> bool:
        """Whether an update changes what ``generation`` counts: everything but metadata (and
        status where a status subresource exists)."""
        skip = _NOT_SPEC | {"status"} if rtype.has_status else _NOT_SPEC
        keys = (set(new) | set(old)) - skip
        return any(new.get(k) != old.get(k) for k in keys)

    def initial_status(self, obj: JsonDict) -> Any:
        """The status a new object gets when a status subresource drops the client's (None: none)."""
        return None

    def unknown_fields(self, obj: JsonDict, rtype: ResourceType) -> list[str]:
        """Paths of fields the kind does not know (for fieldValidation); empty when schemaless."""
        return []

    def patch_schema(self) -> Mapping[str, Any] | None:
        """The kind's resolved OpenAPI schema, whose ``x-kubernetes-patch-*`` extensions say how a
        strategic merge patch merges its lists; None: :mod:`memop.testing.apiserver.patch`'s tables."""
        return None

    def scale_paths(self, rtype: ResourceType) -> tuple[str, str, str | None] | None:
        """(spec replicas, status replicas, label selector) dotted paths of the scale subresource;
        the selector path None means "render spec.selector". None: no scale subresource."""
        return None

    def delete_finalizer(self) -> str | None:
        """A finalizer the registry adds on the first DELETE (the CRD cleanup finalizer)."""
        return None

    def after_write(self, store: Store, change: Change) -> None:
        """Follow-up of a committed change (runs after listeners saw it; may write more)."""


@dataclass(frozen=True)
class Kind:
    """One served group/version/resource: its type and write behaviour.

    ``stored_as`` names the resource whose storage this one shares (events.k8s.io/v1 Events are
    stored as core/v1 ones), registered before it; ``to_served``/``from_served`` convert between
    that storage form and this version. All None for a resource with its own storage. A
    strategy left out is a custom resource's (:class:`Strategy`): schemaless, generation counted,
    no status subresource unless ``rtype.has_status``.
    """

    rtype: ResourceType
    strategy: Strategy = field(default_factory=Strategy)
    to_served: Conversion | None = None  # storage form -> this version
    from_served: Conversion | None = None  # this version -> storage form
    stored_as: ResourceType | None = None
    # Objects the server creates at start (cluster-scoped, or namespaced with their namespace).
    initial: tuple[JsonDict, ...] = field(default=(), compare=False)


# --- field selectors (k8s.io/apimachinery/pkg/fields) -------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    operator: str  # "=" or "!="
    value: str


def parse_field_selector(text: str | None) -> tuple[FieldRequirement, ...]:
    """Parse ``a=b,c==d,e!=f`` (with ``\\`` escapes); raise a 400 ApiError on bad syntax."""
    if not text:
        return ()
    terms: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    out: list[FieldRequirement] = []
    for term in terms:
        if not term:
            continue
        parsed = _split_term(term)
        if parsed is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{_unescape(term)}'")
        out.append(parsed)
    return tuple(out)


def _split_term(term: str) -> FieldRequirement | None:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op, norm in (("!=", "!="), ("==", "="), ("=", "=")):
            if term.startswith(op, i):
                field = _unescape(term[:i]).strip()
                if not field:
                    return None
                return FieldRequirement(field, norm, _unescape(term[i + len(op) :]))
        i += 1
    return None


def _unescape(text: str) -> str:
    out = []
    escaped = False
    for ch in text:
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out.append(ch)
    return "".join(out)


def lookup_path(obj: Mapping[str, Any], path: str) -> str:
    """The string form of the field at a dotted path ("" when absent), as field sets render it."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, dict | list):
        return ""
    return str(cur)


class FieldSelector:
    """A compiled field selector for one kind: check it with :meth:`check`, match with :meth:`matches`."""

    __slots__ = ("_defaults", "_paths", "requirements")

    def __init__(
        self,
        requirements: tuple[FieldRequirement, ...],
        paths: dict[str, str],
        defaults: Mapping[str, str] | None = None,
    ) -> None:
        self.requirements = requirements
        self._paths = paths
        self._defaults = dict(defaults or {})

    @classmethod
    def compile(cls, text: str | None, strategy: Strategy, namespaced: bool) -> FieldSelector:
        """Parse ``text`` and check every field is selectable for the kind (400 otherwise)."""
        requirements = parse_field_selector(text)
        labels = dict(strategy.field_labels())
        labels["metadata.name"] = "metadata.name"
        if strategy.namespace_field_label:
            labels["metadata.namespace"] = "metadata.namespace"
        paths: dict[str, str] = {}
        for req in requirements:
            path = labels.get(req.field)
            if path is None:
                raise unsupported_field_label(req.field, strategy)
            paths[req.field] = path
        return cls(requirements, paths, strategy.field_label_defaults())

    def is_empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for req in self.requirements:
            actual = lookup_path(obj, self._paths[req.field]) or self._defaults.get(req.field, "")
            if (actual == req.value) != (req.operator == "="):
                return False
        return True

    def exact(self, field: str) -> str | None:
        """The value ``field`` must equal, when the selector pins it (metadata.name=x)."""
        for req in self.requirements:
            if req.field == field and req.operator == "=":
                return req.value
        return None


def unsupported_field_label(label: str, strategy: Strategy) -> ApiError:
    worded = strategy.unsupported_field_label(label)
    if worded is not None:
        return bad_request(worded)
    if strategy.core_field_labels:
        return bad_request(f"field label not supported: {label}")
    return bad_request(f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"')
