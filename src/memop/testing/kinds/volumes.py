"""core/v1 PersistentVolumeClaims and PersistentVolumes as kube-apiserver v1.36 serves them.

A claim: ``volumeMode: Filesystem`` and ``status.phase: Pending`` by default (the client's status is
dropped on create), the ``kubernetes.io/pvc-protection`` finalizer that the
StorageObjectInUseProtection admission plugin adds (the simulated pvc-protection controller takes
it off once no pod uses the claim, :mod:`memop.testing.controllers.volumes`), quantities in
canonical form, and ``ValidatePersistentVolumeClaim``'s checks operators meet: access modes,
``resources.requests.storage``, the selector, the class name and volume mode, and
``ValidatePersistentVolumeClaimUpdate``: a spec immutable after creation except a ``volumeName``
set once, a ``storageClassName`` set where there was none, and, once the claim is Bound,
``resources.requests.storage`` and ``volumeAttributesClassName`` (a Pending claim cannot grow);
a request may shrink, but not to ``status.capacity`` or below. kube-apiserver appends a diff of
the Go structs to the immutability message; that diff is left out. The PersistentVolumeClaimResize
admission plugin: a bound claim grows only when its StorageClass exists and allows expansion (403
otherwise), as kube-apiserver v1.36.2 answered.

A volume: ``persistentVolumeReclaimPolicy: Retain``, ``volumeMode: Filesystem`` and
``status.phase: Pending`` by default, with ``status.lastPhaseTransitionTime`` set on create and at
every change of phase the writer does not time itself (as kube-apiserver v1.36.2 answers), the
``kubernetes.io/pv-protection`` finalizer, and the checks of ``ValidatePersistentVolumeSpec`` on
capacity, access modes, reclaim policy and the volume source. Both have a status subresource;
neither counts generations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memop.testing.apiserver.errors import forbidden as forbidden_request
from memop.testing.apiserver.objects import (
    JsonDict,
    dns1123_subdomain_errors,
    forbidden,
    invalid,
    not_supported,
    required,
    validate_label_selector,
)
from memop.testing.apiserver.quantity import canonical as canonical_quantity
from memop.testing.apiserver.quantity import parse as parse_quantity
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.schema import FieldError
from memop.testing.apiserver.strategy import Kind
from memop.testing.kinds.builtins import BuiltinStrategy, _decoding

if TYPE_CHECKING:
    from memop.testing.apiserver.store import Store

CLAIMS = ResourceType(
    "",
    "v1",
    "persistentvolumeclaims",
    "PersistentVolumeClaim",
    True,
    "persistentvolumeclaim",
    ("pvc",),
    has_status=True,
)
VOLUMES = ResourceType(
    "", "v1", "persistentvolumes", "PersistentVolume", False, "persistentvolume", ("pv",), has_status=True
)
CLAIM_PROTECTION = "kubernetes.io/pvc-protection"
VOLUME_PROTECTION = "kubernetes.io/pv-protection"
_ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]  # sorted, as listed
_VOLUME_MODES = ["Block", "Filesystem"]
_RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
# The persistent volume sources (PersistentVolumeSource's members).
_VOLUME_SOURCES = frozenset(
    (
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "hostPath",
        "glusterfs",
        "nfs",
        "rbd",
        "iscsi",
        "cinder",
        "cephfs",
        "fc",
        "flocker",
        "flexVolume",
        "azureFile",
        "vsphereVolume",
        "quobyte",
        "azureDisk",
        "photonPersistentDisk",
        "portworxVolume",
        "scaleIO",
        "local",
        "storageos",
        "csi",
    )
)
_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
_STORAGE_CLASSES = ("storage.k8s.io", "storageclasses")
_NOT_RESIZABLE = (
    "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc "
    "must support resize"
)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _canonical_amounts(amounts: Any) -> None:
    if isinstance(amounts, dict):
        for name, value in list(amounts.items()):
            amounts[name] = canonical_quantity(str(value))


def default_claim_spec(spec: Any) -> None:
    """``SetDefaults_PersistentVolumeClaimSpec`` on the typed shape (``resources`` is a struct)."""
    if not isinstance(spec, dict):
        return
    if spec.get("volumeMode") is None:
        spec["volumeMode"] = "Filesystem"
    resources = spec.setdefault("resources", {})
    if isinstance(resources, dict):
        _canonical_amounts(resources.get("requests"))
        _canonical_amounts(resources.get("limits"))


def _default_phase(obj: JsonDict) -> None:
    """A status without a phase is Pending (``SetDefaults_PersistentVolume(Claim)``)."""
    status = obj.get("status")
    if isinstance(status, dict) and not status.get("phase"):
        status["phase"] = "Pending"


def _add_finalizer(obj: JsonDict, finalizer: str) -> None:
    meta = obj.setdefault("metadata", {})
    finalizers = meta.get("finalizers") or []
    if finalizer not in finalizers:
        meta["finalizers"] = [*finalizers, finalizer]


def _access_mode_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    modes = spec.get("accessModes") or []
    if not modes:
        return [required("spec.accessModes", "at least 1 access mode is required")]
    errs = [
        not_supported("spec.accessModes", mode, _ACCESS_MODES) for mode in modes if mode not in _ACCESS_MODES
    ]
    if "ReadWriteOncePod" in modes and len(set(modes)) > 1:
        errs.append(forbidden("spec.accessModes", "may not use ReadWriteOncePod with other access modes"))
    return errs


def _claim_spec_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """``ValidatePersistentVolumeClaimSpec``."""
    errs = _access_mode_errors(spec)
    errs.extend(validate_label_selector(spec.get("selector"), "spec.selector"))
    storage = _map(_map(spec.get("resources")).get("requests")).get("storage")
    if storage is None:
        errs.append(required("spec.resources[storage]"))
    elif parse_quantity(str(storage))[0] <= 0:
        errs.append(invalid("spec.resources[storage]", str(storage), "must be greater than zero"))
    class_name = spec.get("storageClassName")
    if class_name:
        errs.extend(
            invalid("spec.storageClassName", class_name, m) for m in dns1123_subdomain_errors(str(class_name))
        )
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        errs.append(not_supported("spec.volumeMode", mode, _VOLUME_MODES))
    return errs


class PersistentVolumeClaimStrategy(BuiltinStrategy):
    generation = False
    unconditional_update = True
    strategic_merge = True
    times = (
        ("status", "conditions", "*", "lastTransitionTime"),
        ("status", "conditions", "*", "lastProbeTime"),
    )

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(rtype, lambda: default_claim_spec(obj.setdefault("spec", {})))
        _default_phase(obj)
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {"phase": "Pending"}

    def prepare_create(self, obj: JsonDict, rtype: ResourceType) -> None:
        _add_finalizer(obj, CLAIM_PROTECTION)

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _claim_spec_errors(_map(obj.get("spec")))

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs = _claim_spec_errors(_map(new.get("spec")))
        if _comparable_spec(new, old) != _comparable_spec(old, old):
            errs.append(
                forbidden(
                    "spec",
                    "spec is immutable after creation except resources.requests and "
                    "volumeAttributesClassName for bound claims",
                )
            )
        new_size, old_size = _requested_storage(new), _requested_storage(old)
        capacity = _map(_map(old.get("status")).get("capacity")).get("storage")
        # RecoverVolumeExpansionFailure (GA): a request may shrink back, not below what was got.
        if new_size < old_size and new_size <= (parse_quantity(str(capacity))[0] if capacity else 0):
            errs.append(
                forbidden("spec.resources.requests.storage", "field can not be less than status.capacity")
            )
        return errs

    def admit_update(self, store: Store, new: JsonDict, old: JsonDict, rtype: ResourceType) -> None:
        """PersistentVolumeClaimResize: growing a Bound claim needs a StorageClass with
        ``allowVolumeExpansion`` (the same class before and after)."""
        if _requested_storage(new) <= _requested_storage(old):
            return
        name = str(new["metadata"]["name"])
        if _map(old.get("status")).get("phase") != "Bound":
            raise forbidden_request(rtype, name, "Only bound persistent volume claims can be expanded")
        class_name, old_class = _claim_class(new), _claim_class(old)
        classes = store.storage_for(*_STORAGE_CLASSES)
        found = classes.get("", class_name) if classes is not None and class_name else None
        if (
            not class_name
            or class_name != old_class
            or found is None
            or found.obj.get("allowVolumeExpansion") is not True
        ):
            raise forbidden_request(rtype, name, _NOT_RESIZABLE)


def _requested_storage(claim: Mapping[str, Any]) -> Any:
    storage = _map(_map(_map(claim.get("spec")).get("resources")).get("requests")).get("storage")
    return parse_quantity(str(storage))[0] if storage is not None else 0


def _claim_class(claim: Mapping[str, Any]) -> str:
    """``GetPersistentVolumeClaimClass``: the beta annotation, else ``storageClassName``."""
    annotations = _map(_map(claim.get("metadata")).get("annotations"))
    if _BETA_CLASS in annotations:
        return str(annotations[_BETA_CLASS])
    return str(_map(claim.get("spec")).get("storageClassName") or "")


def _comparable_spec(claim: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    """``claim``'s spec with what ``ValidatePersistentVolumeClaimUpdate`` lets change from ``old``
    taken from ``old``: a volumeName set once, a class set where none was, and, on a Bound claim,
    the storage request and the volume attributes class."""
    spec, old_spec = dict(_map(claim.get("spec"))), _map(old.get("spec"))

    def take_old(key: str) -> None:
        if key in old_spec:
            spec[key] = old_spec[key]
        else:
            spec.pop(key, None)

    if not old_spec.get("volumeName"):
        take_old("volumeName")
    old_annotation = _map(_map(old.get("metadata")).get("annotations")).get(_BETA_CLASS)
    new_class = spec.get("storageClassName")
    if new_class is not None and "storageClassName" not in old_spec and old_annotation in (None, new_class):
        take_old("storageClassName")
    if _map(claim.get("status")).get("phase") == "Bound":
        take_old("volumeAttributesClassName")
        resources = dict(_map(spec.get("resources")))
        if "requests" in resources:
            requests = dict(_map(resources["requests"]))
            requests["storage"] = _map(_map(old_spec.get("resources")).get("requests")).get("storage")
            resources["requests"] = requests
            spec["resources"] = resources
    return spec


def default_volume(obj: JsonDict) -> None:
    """``SetDefaults_PersistentVolume`` (and a hostPath's empty type)."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if not spec.get("persistentVolumeReclaimPolicy"):
        spec["persistentVolumeReclaimPolicy"] = "Retain"
    if spec.get("volumeMode") is None:
        spec["volumeMode"] = "Filesystem"
    _canonical_amounts(spec.get("capacity"))
    host_path = spec.get("hostPath")
    if isinstance(host_path, dict):
        host_path.setdefault("type", "")


def _volume_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """``ValidatePersistentVolumeSpec``: capacity, access modes, reclaim policy, one source."""
    spec = _map(obj.get("spec"))
    errs = _access_mode_errors(spec)
    capacity = _map(spec.get("capacity"))
    if not capacity:
        errs.append(required("spec.capacity"))
    if "storage" not in capacity or len(capacity) > 1:
        errs.append(not_supported("spec.capacity", dict(capacity), ["storage"]))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy not in _RECLAIM_POLICIES:
        errs.append(not_supported("spec.persistentVolumeReclaimPolicy", policy, _RECLAIM_POLICIES))
    sources = [key for key in spec if key in _VOLUME_SOURCES]
    if not sources:
        errs.append(required("spec", "must specify a volume type"))
    elif len(sources) > 1:
        errs.append(forbidden(f"spec.{sources[1]}", "may not specify more than 1 volume type"))
    return errs


class PersistentVolumeStrategy(BuiltinStrategy):
    generation = False
    unconditional_update = True
    strategic_merge = True
    times = (("status", "lastPhaseTransitionTime"),)

    def record_times(self, new: JsonDict, old: JsonDict | None, now: str) -> None:
        """``lastPhaseTransitionTime``: now on create; on an update, kept while the phase stays,
        now when the phase changes and the writer left the time out or unchanged."""
        status = new.get("status")
        if not isinstance(status, dict):
            return
        if old is None:
            status["lastPhaseTransitionTime"] = now
            return
        old_status, given = _map(old.get("status")), status.get("lastPhaseTransitionTime")
        if old_status.get("phase") == status.get("phase"):
            if given is None and old_status.get("lastPhaseTransitionTime") is not None:
                status["lastPhaseTransitionTime"] = old_status["lastPhaseTransitionTime"]
        elif given is None or given == old_status.get("lastPhaseTransitionTime"):
            status["lastPhaseTransitionTime"] = now

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        _decoding(rtype, lambda: default_volume(obj))
        _default_phase(obj)
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {"phase": "Pending"}

    def prepare_create(self, obj: JsonDict, rtype: ResourceType) -> None:
        _add_finalizer(obj, VOLUME_PROTECTION)

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _volume_errors(obj)


KINDS: tuple[Kind, ...] = (
    Kind(CLAIMS, PersistentVolumeClaimStrategy()),
    Kind(VOLUMES, PersistentVolumeStrategy()),
)
