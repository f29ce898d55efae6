"""CustomResourceDefinitions and the custom resources they define.

What the apiextensions-apiserver and its controllers do, done synchronously as follow-ups of
the CRD's own writes (so a CRD is Established by the time its create returns to the caller):

- creating or updating a CRD (re)starts serving each ``served`` version (scope, status
  subresource, shortNames, categories, selectableFields, the version's openAPIV3Schema), sets
  ``status.acceptedNames`` and the ``NamesAccepted``/``Established`` conditions, and records the
  storage version in ``status.storedVersions``;
- the first DELETE of a CRD adds the ``customresourcecleanup.apiextensions.k8s.io`` finalizer
  and the ``Terminating`` condition; its custom resources are then deleted (their own finalizers
  are honoured) and, once none is left, the finalizer goes, the CRD goes and its resources stop
  being served;
- custom resources are pruned, defaulted and validated against the schema of the version they
  are written in (422 Invalid with one cause per field error), and several served versions
  share one storage with ``conversion: None`` (only ``apiVersion`` changes).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from memop.testing.apiserver import schema as openapi
from memop.testing.apiserver.objects import (
    JsonDict,
    invalid,
    not_supported,
    required,
    validate_name,
)
from memop.testing.apiserver.resources import CRDS, ResourceType
from memop.testing.apiserver.schema import FieldError
from memop.testing.apiserver.strategy import Strategy

if TYPE_CHECKING:
    from memop.testing.apiserver.store import Change, Store

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
MANAGER = "kube-apiserver"


def _names(crd: Mapping[str, Any]) -> JsonDict:
    names = dict((crd.get("spec") or {}).get("names") or {})
    kind = str(names.get("kind") or "")
    names.setdefault("singular", kind.lower())
    names.setdefault("listKind", f"{kind}List")
    return names


def _storage_version(crd: Mapping[str, Any]) -> str | None:
    for version in (crd.get("spec") or {}).get("versions") or ():
        if isinstance(version, dict) and version.get("storage"):
            return str(version.get("name"))
    return None


def _condition(kind: str, reason: str, message: str, now: str) -> JsonDict:
    return {"type": kind, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message}


class CustomResourceDefinitionStrategy(Strategy):
    """The apiextensions.k8s.io/v1 CustomResourceDefinition registry."""

    builtin = True
    strategic_merge = True
    times = (("status", "conditions", "*", "lastTransitionTime"),)

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return obj
        names = spec.get("names")
        if isinstance(names, dict) and isinstance(names.get("kind"), str):
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", f"{names['kind']}List")
        spec.setdefault("conversion", {"strategy": "None"})
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        status: JsonDict = {"acceptedNames": {"plural": "", "kind": ""}}
        version = _storage_version(obj)
        status["storedVersions"] = [version] if version else []
        return status

    def prepare_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> None:
        version = _storage_version(new)
        status = new.get("status")
        if version and isinstance(status, dict) and version not in (status.get("storedVersions") or ()):
            new["status"] = {**status, "storedVersions": [*(status.get("storedVersions") or ()), version]}

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs: list[FieldError] = []
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [required("spec")]
        group = spec.get("group")
        names: dict[str, Any] = spec["names"] if isinstance(spec.get("names"), dict) else {}
        plural = names.get("plural")
        if not group:
            errs.append(required("spec.group"))
        elif isinstance(group, str) and "." not in group:
            errs.append(invalid("spec.group", group, "should be a domain with at least one dot"))
        if not plural:
            errs.append(required("spec.names.plural"))
        elif isinstance(plural, str):
            errs.extend(validate_name("spec.names.plural", plural, label=True))
        if not names.get("kind"):
            errs.append(required("spec.names.kind"))
        name = (obj.get("metadata") or {}).get("name")
        if plural and group and name != f"{plural}.{group}":
            errs.append(invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
        scope = spec.get("scope")
        if scope not in ("Namespaced", "Cluster"):
            errs.append(not_supported("spec.scope", scope or "", ["Cluster", "Namespaced"]))
        versions = spec.get("versions")
        if not isinstance(versions, list) or not versions:
            errs.append(
                invalid(
                    "spec.versions",
                    versions or [],
                    "must have exactly one version marked as storage version",
                    raw_value="[]apiextensions.CustomResourceDefinitionVersion(nil)",
                )
            )
            return errs
        storage = [v for v in versions if isinstance(v, dict) and v.get("storage")]
        if len(storage) != 1:
            errs.append(
                invalid(
                    "spec.versions",
                    versions,
                    "must have exactly one version marked as storage version",
                    raw_value="[]apiextensions.CustomResourceDefinitionVersion{...}",
                )
            )
        if not any(isinstance(v, dict) and v.get("served") for v in versions):
            errs.append(
                invalid(
                    "spec.versions",
                    versions,
                    "must have at least one version marked as served",
                    raw_value="[]apiextensions.CustomResourceDefinitionVersion{...}",
                )
            )
        for i, version in enumerate(versions):
            path = f"spec.versions[{i}]"
            if not isinstance(version, dict):
                errs.append(invalid(path, version, "must be an object"))
                continue
            if not version.get("name"):
                errs.append(required(f"{path}.name"))
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if not isinstance(schema, dict):
                errs.append(required(f"{path}.schema.openAPIV3Schema", "schemas are required"))
            elif not schema.get("type"):
                errs.append(required(f"{path}.schema.openAPIV3Schema.type", "must not be empty at the root"))
        # allowInvalidCABundle: a CRD not Established yet may hold any conversion caBundle
        # (kube-apiserver v1.36.2 created one with caBundle "PEM").
        return errs

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs = self.validate_create(new, rtype)
        if not _allows_invalid_ca_bundle(old):
            errs.extend(_ca_bundle_errors(new.get("spec") or {}))
        new_scope = (new.get("spec") or {}).get("scope")
        if new_scope != (old.get("spec") or {}).get("scope"):
            errs.append(invalid("spec.scope", new_scope, "field is immutable"))
        return errs

    def delete_finalizer(self) -> str | None:
        return CLEANUP_FINALIZER

    def after_write(self, store: Store, change: Change) -> None:
        name = str(change.entry.obj["metadata"]["name"])
        group, plural = _group_plural(change.entry.obj)
        if change.type == "DELETED":
            storage = store.storage_for(group, plural)
            if storage is not None and storage.crd_name == name:
                store.remove_storage(storage)
            return
        current = store.storage_for(CRDS.group, CRDS.plural)
        entry = current.get("", name) if current is not None else None
        if entry is None:
            return
        crd = entry.obj
        if crd["metadata"].get("deletionTimestamp"):
            self._terminate(store, crd)
            entry = current.get("", name) if current is not None else None
            if entry is None:
                return
            crd = entry.obj
        else:
            sync_serving(store, crd)
        self._write_status(store, crd)

    def _write_status(self, store: Store, crd: JsonDict) -> None:
        status = dict(crd.get("status") or {})
        now = store._now()
        names = _names(crd)
        accepted = {
            k: names[k]
            for k in ("plural", "singular", "shortNames", "kind", "listKind", "categories")
            if k in names
        }
        wanted = [
            _condition("NamesAccepted", "NoConflicts", "no conflicts found", now),
            _condition("Established", "InitialNamesAccepted", "the initial names have been accepted", now),
        ]
        if crd["metadata"].get("deletionTimestamp"):
            wanted.append(
                _condition(
                    "Terminating",
                    "InstanceDeletionPending",
                    "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
                    now,
                )
            )
        existing = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, dict)}
        conditions = []
        for cond in wanted:
            old = existing.get(cond["type"])
            same = old is not None and all(old.get(k) == cond[k] for k in ("status", "reason", "message"))
            conditions.append(old if same else cond)
        if status.get("acceptedNames") == accepted and status.get("conditions") == conditions:
            return
        new = {**crd, "status": {**status, "conditions": conditions, "acceptedNames": accepted}}
        store.write_update(
            store.served_for(CRDS),
            None,
            str(crd["metadata"]["name"]),
            new,
            subresource="status",
            manager=MANAGER,
        )

    def _terminate(self, store: Store, crd: JsonDict) -> None:
        group, plural = _group_plural(crd)
        storage = store.storage_for(group, plural)
        if storage is not None and storage.crd_name == crd["metadata"]["name"]:
            storage.terminating = True
            served = next(iter(storage.served.values()), None)
            if served is not None:
                for entry in list(store.objects(storage)):
                    meta = entry.obj["metadata"]
                    if not meta.get("deletionTimestamp"):
                        store.write_delete(served, meta.get("namespace"), str(meta["name"]))
            if storage.count():
                return
        finish_crd_deletion(store, str(crd["metadata"]["name"]))


def _group_plural(crd: Mapping[str, Any]) -> tuple[str, str]:
    spec = crd.get("spec") or {}
    return str(spec.get("group") or ""), str((spec.get("names") or {}).get("plural") or "")


def finish_crd_deletion(store: Store, crd_name: str) -> None:
    """Drop the cleanup finalizer of a terminating CRD whose resources are all gone."""
    crds = store.storage_for(CRDS.group, CRDS.plural)
    entry = crds.get("", crd_name) if crds is not None else None
    if entry is None:
        return
    meta = entry.obj["metadata"]
    finalizers = [f for f in meta.get("finalizers") or () if f != CLEANUP_FINALIZER]
    if finalizers == list(meta.get("finalizers") or ()):
        return
    new = {**entry.obj, "metadata": {**meta, "finalizers": finalizers}}
    store.write_update(store.served_for(CRDS), None, crd_name, new, manager=MANAGER)


def sync_serving(store: Store, crd: JsonDict) -> None:
    """Serve exactly the served versions of ``crd`` (creating its storage on first use)."""
    spec = crd.get("spec") or {}
    group, plural = _group_plural(crd)
    names = _names(crd)
    namespaced = spec.get("scope") == "Namespaced"
    storage_version = _storage_version(crd)
    versions = [v for v in spec.get("versions") or () if isinstance(v, dict) and v.get("name")]
    if not group or not plural or storage_version is None or not versions:
        return
    types: dict[str, ResourceType] = {}
    selectable: dict[str, dict[str, str]] = {}
    for version in versions:
        vname = str(version["name"])
        types[vname] = ResourceType(
            group,
            vname,
            plural,
            str(names.get("kind") or ""),
            namespaced,
            str(names.get("singular") or ""),
            tuple(names.get("shortNames") or ()),
            has_status="status" in (version.get("subresources") or {}),
            categories=tuple(names.get("categories") or ()),
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
        )
        selectable[vname] = {
            str(f.get("jsonPath", "")).lstrip("."): str(f.get("jsonPath", "")).lstrip(".")
            for f in version.get("selectableFields") or ()
            if isinstance(f, dict)
        }
    storage_type = types[storage_version]
    storage = store.storage_for(group, plural)
    crd_name = str(crd["metadata"]["name"])
    if storage is None or storage.crd_name != crd_name:
        storage = store.add_storage(storage_type, CustomResourceStrategy(crd_name), crd_name)
    strategy = storage.strategy
    assert isinstance(strategy, CustomResourceStrategy)
    strategy.selectable = selectable.get(storage_version, {})
    strategy.scale = {}
    for version in versions:
        scale = (version.get("subresources") or {}).get("scale")
        if isinstance(scale, dict) and scale.get("specReplicasPath"):
            selector = scale.get("labelSelectorPath")
            strategy.scale[str(version["name"])] = (
                str(scale["specReplicasPath"]).lstrip("."),
                str(scale.get("statusReplicasPath") or "").lstrip("."),
                str(selector).lstrip(".") if selector else "",
            )
    storage.rtype = storage_type
    strategy.versions = {t.api_version: t for t in types.values()}
    webhook = None
    if (spec.get("conversion") or {}).get("strategy") == "Webhook":
        # Imported here: only a CRD with a conversion webhook needs it.
        from memop.testing.apiserver.conversionwebhooks import WebhookConversion  # noqa: PLC0415

        webhook = WebhookConversion(crd)
    strategy.webhook = webhook is not None
    for version in versions:
        vname = str(version["name"])
        if not version.get("served"):
            if vname in storage.served:
                store.unserve(storage.served[vname].rtype)
            continue
        rtype = types[vname]
        if vname == storage_version:
            store.serve(storage, rtype)
        elif webhook is not None:
            store.serve(
                storage,
                rtype,
                webhook.to(rtype.api_version),
                webhook.to(storage_type.api_version),
                webhook_conversion=True,
            )
        else:
            store.serve(
                storage,
                rtype,
                _rewrite_api_version(rtype.api_version),
                _rewrite_api_version(storage_type.api_version),
            )
    for vname in list(storage.served):
        if vname not in types:
            store.unserve(storage.served[vname].rtype)


def _rewrite_api_version(api_version: str) -> Callable[[Mapping[str, Any]], JsonDict]:
    def convert(obj: Mapping[str, Any]) -> JsonDict:
        if obj.get("apiVersion") == api_version:
            return dict(obj)
        out: JsonDict = {"kind": obj.get("kind"), "apiVersion": api_version}
        out.update((k, v) for k, v in obj.items() if k not in ("kind", "apiVersion"))
        return out

    return convert


def unknown_paths(original: Any, pruned: Any, path: str = "") -> list[str]:
    """Paths present in ``original`` but pruned away, in ``spec.foo`` / ``spec.items[0].x`` form."""
    out: list[str] = []
    if isinstance(original, dict) and isinstance(pruned, dict):
        for key, value in original.items():
            sub = f"{path}.{key}" if path else str(key)
            if key not in pruned:
                out.append(sub)
            else:
                out.extend(unknown_paths(value, pruned[key], sub))
    elif isinstance(original, list) and isinstance(pruned, list):
        for i, (a, b) in enumerate(zip(original, pruned, strict=False)):
            out.extend(unknown_paths(a, b, f"{path}[{i}]"))
    return out


class CustomResourceStrategy(Strategy):
    """Objects of a custom resource: schema-driven, unstructured, no strategic merge patch."""

    def __init__(self, crd_name: str) -> None:
        self.crd_name = crd_name
        self.selectable: dict[str, str] = {}
        # version -> (specReplicasPath, statusReplicasPath, labelSelectorPath) without leading dots
        self.scale: dict[str, tuple[str, str, str | None]] = {}
        # With a conversion webhook, objects reach the strategy in the storage version whatever
        # version the request was in: they are defaulted and validated with that version's schema.
        self.webhook = False
        self.versions: dict[str, ResourceType] = {}  # apiVersion -> served type

    def _schema_type(self, obj: JsonDict, rtype: ResourceType) -> ResourceType:
        if self.webhook and obj.get("apiVersion") != rtype.api_version:
            return self.versions.get(str(obj.get("apiVersion")), rtype)
        return rtype

    def scale_paths(self, rtype: ResourceType) -> tuple[str, str, str | None] | None:
        return self.scale.get(rtype.version)

    def field_labels(self) -> Mapping[str, str]:
        return self.selectable

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        rtype = self._schema_type(obj, rtype)
        if rtype.schema is None:
            return obj
        pruned = openapi.prune(rtype.schema, obj)
        defaulted = openapi.apply_defaults(rtype.schema, pruned)
        if not isinstance(defaulted, dict):
            return obj
        if not isinstance(defaulted.get("metadata"), dict):
            defaulted["metadata"] = obj["metadata"]
        return defaulted

    def storage_form(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        # kube-apiserver defaults and validates a write in its request version, then stores it
        # in the storage version pruned by that version's schema: with conversion None and
        # versions of different schemas, what only the request version declares is dropped
        # (measured on v1.36.2: a v1beta1 Memcached's containerPort, created with the base
        # CRD, is in neither the create's answer nor any read).
        stored = self.versions.get(str(obj.get("apiVersion")))
        if stored is None or stored.api_version == rtype.api_version or stored.schema is None:
            return obj
        pruned = openapi.prune(stored.schema, obj)
        if not isinstance(pruned, dict):
            return obj
        pruned["metadata"] = obj["metadata"]
        return pruned

    def unknown_fields(self, obj: JsonDict, rtype: ResourceType) -> list[str]:
        rtype = self._schema_type(obj, rtype)
        if rtype.schema is None:
            return []
        return unknown_paths(obj, openapi.prune(rtype.schema, obj))

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        rtype = self._schema_type(obj, rtype)
        if rtype.schema is None:
            return []
        return list(openapi.validate(rtype.schema, obj))

    def after_write(self, store: Store, change: Change) -> None:
        if change.type != "DELETED" or not change.storage.terminating or change.storage.count():
            return
        finish_crd_deletion(store, self.crd_name)


_CA_BUNDLE_FIELD = "spec.conversion.webhookClientConfig.caBundle"


def _allows_invalid_ca_bundle(old: Mapping[str, Any]) -> bool:
    """``allowInvalidCABundle``: an update may leave the conversion caBundle invalid while the CRD
    is not Established, or when its bundle already was invalid."""
    conditions = (old.get("status") or {}).get("conditions") or ()
    if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
        return True
    webhook = ((old.get("spec") or {}).get("conversion") or {}).get("webhook") or {}
    client_config = webhook.get("clientConfig") if isinstance(webhook, Mapping) else None
    if not isinstance(client_config, Mapping) or not client_config.get("caBundle"):
        return False
    return bool(_ca_bundle_errors(old.get("spec") or {}))


def _ca_bundle_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """kube-apiserver's check of a conversion webhook's caBundle (apiserver's
    ``webhook.ValidateCABundle``: client-go must build a TLS config from it), with its messages:
    the field is the internal type's ``webhookClientConfig``, measured on v1.36.2."""
    conversion = spec.get("conversion")
    if not isinstance(conversion, Mapping) or conversion.get("strategy") != "Webhook":
        return []
    client_config = (conversion.get("webhook") or {}).get("clientConfig") or {}
    encoded = client_config.get("caBundle") if isinstance(client_config, Mapping) else None
    if not isinstance(encoded, str) or not encoded:
        return []
    try:
        data = base64.b64decode(encoded, validate=True)
    except ValueError:
        return []  # not base64: the decoding of the request refuses it first
    problem = _pem_problem(data)
    if problem is None:
        return []
    return [invalid(_CA_BUNDLE_FIELD, encoded, f"unable to load root certificates: {problem}")]


_PEM_BLOCK = re.compile(rb"-----BEGIN ([^\r\n-]*)-----\r?\n(.*?)-----END \1-----", re.S)


def _pem_problem(data: bytes) -> str | None:
    """None when ``data`` holds a certificate x509.CertPool.AppendCertsFromPEM takes, else why
    not, in client-go's words (``createErrorParsingCAData``)."""
    from cryptography import x509  # noqa: PLC0415  (only a CRD with a caBundle needs it)

    blocks = list(_PEM_BLOCK.finditer(data))
    if not blocks:
        return "unable to parse bytes as PEM block"
    first_error: str | None = None
    for block in blocks:
        kind, body = block.group(1), block.group(2)
        head, blank, _ = body.partition(b"\n\n")
        if kind != b"CERTIFICATE" or (blank and b":" in head):  # another type, or PEM headers
            continue
        try:
            x509.load_der_x509_certificate(base64.b64decode(b"".join(body.split())))
        except ValueError as error:
            first_error = first_error or f"failed to parse certificate: x509: {error}"
            continue
        return None
    return first_error or "no valid certificate authority data seen"
