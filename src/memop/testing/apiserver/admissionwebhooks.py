"""Admission webhooks in the in-memory API server, called as kube-apiserver v1.36 calls them.

On a create, update (patch and apply included) or delete of any resource, built-in or custom,
main resource or ``status``, the server calls the webhooks of the stored
MutatingWebhookConfigurations (configurations sorted by name, webhooks in order, one after
another; a ``reinvocationPolicy: IfNeeded`` webhook is called a second time when a webhook
after it changed the object), then those of the ValidatingWebhookConfigurations (all at once).

A webhook is called when ``rules`` match the request (operation, group, version,
``resource[/subresource]`` with ``*`` and ``*/*``, scope), or, with ``matchPolicy: Equivalent``
(the default), another served version of the same resource does (the object is then sent in
that version); and its ``namespaceSelector`` matches the namespace's labels (the namespace
object's own for a request on a namespace; cluster-scoped objects are never excluded by it);
and its ``objectSelector`` matches the new or the old object's labels. ``matchConditions`` are
not evaluated: a webhook that has them is called as if they were all true.

The answers are handled as :mod:`k8s.io/apiserver/pkg/admission/plugin/webhook` does (texts
measured on v1.36.2): a JSONPatch from a mutating webhook is applied (from a validating one it
is an invalid response), warnings become ``Warning`` headers (memop.testing.apiserver.warningheaders; a
denial's answer carries them too), a denial keeps the webhook's code
(at least 400), reason and message (``admission webhook "<name>" denied the request: ...``), a
failed call (refused, TLS, timeout, non-200, malformed, uid mismatch) is a 500 ``failed calling
webhook "<name>": ...`` with ``failurePolicy: Fail`` and skipped with ``Ignore``. A dry-run
request to a webhook whose ``sideEffects`` is neither None nor NoneOnDryRun is a 400.

How it meets the synchronous store: the store calls :meth:`Admission.mutate` where the request's
object is defaulted and :meth:`Admission.validate` just before it commits. The first time, they
raise :class:`AdmissionPending`; the server then awaits :meth:`Admission.resolve` (the webhook
calls) and runs the store write again, which this time gets the webhooks' result (as
kube-apiserver retries an update's whole admission when the stored object changed meanwhile,
a changed old object calls the webhooks again). Without configurations nothing of this runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memop.runtime.cache.labels import InvalidSelectorError, Selector
from memop.testing.apiserver.errors import ApiError, bad_request, internal_error
from memop.testing.apiserver.goencoding import Base64Error, std_decode, syntax_error
from memop.testing.apiserver.objects import JsonDict, copy_json
from memop.testing.apiserver.patch import PatchError, json_patch
from memop.testing.apiserver.resources import MUTATING, VALIDATING
from memop.testing.apiserver.webhookclient import CallError, WebhookCalls

if TYPE_CHECKING:
    from memop.testing.apiserver.store import Served, Store

log = logging.getLogger(__name__)

_REVIEW_VERSIONS = ("v1", "v1beta1")


class AdmissionPending(Exception):
    """The store reached an admission point whose webhooks were not called yet."""

    def __init__(self, phase: str, served: Served, obj: JsonDict | None, old: JsonDict | None) -> None:
        super().__init__(phase)
        self.phase = phase  # "mutate" or "validate"
        self.served = served
        self.obj = obj
        self.old = old


class _InvalidResponse(Exception):
    pass


@dataclass(slots=True)
class Attributes:
    """What admission knows of the request besides the objects."""

    operation: str  # CREATE, UPDATE, DELETE (set at each admission point from the objects)
    subresource: str
    # The request's, "" for cluster-scoped; a Namespace's own name for a request on one.
    namespace: str
    # The request's: the path's, a create's body's (before generateName); "" in deletecollection.
    name: str
    user: dict[str, Any]
    dry_run: bool
    options: dict[str, Any]  # dryRun, fieldManager, fieldValidation as the request gave them
    delete_options: dict[str, Any] = field(default_factory=dict)  # propagationPolicy, preconditions

    def set_operation(self, obj: JsonDict | None, old: JsonDict | None) -> None:
        self.operation = "DELETE" if obj is None else ("CREATE" if old is None else "UPDATE")

    def options_object(self) -> dict[str, Any]:
        """The request's options as the review carries them (Create/Update/DeleteOptions)."""
        kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}[
            self.operation
        ]
        out: dict[str, Any] = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
        if self.operation == "DELETE":
            out.update(self.delete_options)
            if "dryRun" in self.options:
                out["dryRun"] = self.options["dryRun"]
        else:
            out.update(self.options)
        return out


# An async conversion of a storage-form object into a served version (and back).
Converter = Callable[["Served", JsonDict, bool], Awaitable[JsonDict]]


def _rv(old: JsonDict | None) -> str | None:
    return None if old is None else str(old["metadata"].get("resourceVersion"))


def _unmanaged(obj: JsonDict | None) -> JsonDict | None:
    """``obj`` without managedFields, whose time a run of the write after the first may move."""
    if obj is None or "managedFields" not in obj["metadata"]:
        return obj
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}


def _selector_matches(selector: Any, labels: Any) -> bool:
    if not selector:
        return True
    try:
        return Selector.from_label_selector(selector).matches(labels or {})
    except InvalidSelectorError:
        return False


def _rule_matches(
    rule: Mapping[str, Any],
    group: str,
    version: str,
    resource: str,
    *,
    sub: str,
    operation: str,
    namespaced: bool,
) -> bool:
    operations = rule.get("operations") or ()
    if "*" not in operations and operation not in operations:
        return False
    groups, versions = rule.get("apiGroups") or (), rule.get("apiVersions") or ()
    if "*" not in groups and group not in groups:
        return False
    if "*" not in versions and version not in versions:
        return False
    scope = rule.get("scope") or "*"
    if (scope == "Cluster" and namespaced) or (scope == "Namespaced" and not namespaced):
        return False
    for item in rule.get("resources") or ():
        res, _, res_sub = str(item).partition("/")
        if item == "*/*" or (item == "*" and not sub):
            return True
        if res not in ("*", resource):
            continue
        if (not res_sub and not sub) or res_sub in ("*", sub):
            return True
    return False


@dataclass
class Webhooks:
    """The server's admission webhooks: configurations read from the store at each request."""

    store: Store
    client: WebhookCalls
    convert: Converter  # storage form <-> a served version, conversion webhooks included

    @property
    def active(self) -> bool:
        """Whether any configuration exists (without, admission costs nothing)."""
        for rtype in (MUTATING, VALIDATING):
            storage = self.store.storage_for(rtype.group, rtype.plural)
            if storage is not None and storage.objects:
                return True
        return False

    def configured(self, rtype: Any) -> list[tuple[str, JsonDict]]:
        """(configuration name, webhook) of one kind, configurations sorted by name."""
        storage = self.store.storage_for(rtype.group, rtype.plural)
        if storage is None:
            return []
        names = storage.objects.get("", {})
        return [
            (name, hook)
            for name in sorted(names)
            for hook in names[name].obj.get("webhooks") or ()
            if isinstance(hook, dict)
        ]

    def admission(self, attrs: Attributes) -> Admission:
        return Admission(self, attrs)


@dataclass
class Admission:
    """One request's passage through the webhooks, across the store's runs of the write."""

    webhooks: Webhooks
    attrs: Attributes
    warnings: list[str] = field(default_factory=list)
    # (old resourceVersion, the object the store had, the mutated object) of the last mutation.
    _mutated: tuple[str | None, JsonDict | None, JsonDict | None] | None = None
    # (old resourceVersion, the object validated) once the validating webhooks allowed it.
    _validated: tuple[str | None, JsonDict | None] | None = None

    # --- the store's admission points (synchronous) ---------------------------------------------

    def mutate(self, served: Served, obj: JsonDict | None, old: JsonDict | None) -> JsonDict | None:
        """The object after the mutating webhooks (storage form), or AdmissionPending."""
        self.attrs.set_operation(obj, old)
        done = self._mutated
        if done is not None and done[0] == _rv(old) and _unmanaged(done[1]) == _unmanaged(obj):
            return copy_json(done[2]) if done[2] is not None else None
        if not self._matching(MUTATING, served, obj, old):
            return obj
        raise AdmissionPending("mutate", served, copy_json(obj) if obj is not None else None, old)

    def validate(self, served: Served, obj: JsonDict | None, old: JsonDict | None) -> JsonDict | None:
        """The object to commit once the validating webhooks allowed it, or AdmissionPending."""
        self.attrs.set_operation(obj, old)
        done = self._validated
        if done is not None and done[0] == _rv(old):
            return done[1]
        if not self._matching(VALIDATING, served, obj, old):
            return obj
        raise AdmissionPending("validate", served, obj, old)

    def _matching(self, rtype: Any, served: Served, obj: JsonDict | None, old: JsonDict | None) -> bool:
        return any(
            self._target(hook, served, obj, old) is not None for _, hook in self.webhooks.configured(rtype)
        )

    # --- matching --------------------------------------------------------------------------------

    def _target(
        self, hook: JsonDict, served: Served, obj: JsonDict | None, old: JsonDict | None
    ) -> Served | None:
        """The served version to call ``hook`` with (the request's, or an equivalent one), or None."""
        attrs = self.attrs
        rtype = served.rtype
        if not self._namespace_matches(hook.get("namespaceSelector"), served, obj, old):
            return None
        selector = hook.get("objectSelector")
        if selector and not (
            (obj is not None and _selector_matches(selector, obj["metadata"].get("labels")))
            or (old is not None and _selector_matches(selector, old["metadata"].get("labels")))
        ):
            return None
        rules = [r for r in hook.get("rules") or () if isinstance(r, dict)]
        namespaced = bool(attrs.namespace) and rtype.namespaced

        def matches(version: str) -> bool:
            return any(
                _rule_matches(
                    r,
                    rtype.group,
                    version,
                    rtype.plural,
                    sub=attrs.subresource,
                    operation=attrs.operation,
                    namespaced=namespaced,
                )
                for r in rules
            )

        if matches(rtype.version):
            return served
        if hook.get("matchPolicy", "Equivalent") == "Equivalent":
            for version, other in sorted(served.storage.served.items()):
                if version != rtype.version and matches(version):
                    return other
        return None

    def _namespace_matches(
        self, selector: Any, served: Served, obj: JsonDict | None, old: JsonDict | None
    ) -> bool:
        if not selector:
            return True
        rtype = served.rtype
        if rtype.group == "" and rtype.plural == "namespaces":
            source = obj if obj is not None else old
            labels = source["metadata"].get("labels") if source is not None else None
            return _selector_matches(selector, labels)
        if not rtype.namespaced or not self.attrs.namespace:
            return True  # a cluster-scoped object is never excluded by namespaceSelector
        namespaces = self.webhooks.store.storage_for("", "namespaces")
        entry = namespaces.get("", self.attrs.namespace) if namespaces is not None else None
        labels = entry.obj["metadata"].get("labels") if entry is not None else None
        return _selector_matches(selector, labels)

    # --- calling ---------------------------------------------------------------------------------

    async def resolve(self, pending: AdmissionPending) -> None:
        """Call the webhooks of ``pending``'s admission point; raises the ApiError the request
        fails with (a denial, a failed call under failurePolicy Fail)."""
        if pending.phase == "mutate":
            result = await self._mutate(pending.served, pending.obj, pending.old)
            self._mutated = (_rv(pending.old), pending.obj, result)
        else:
            await self._validate(pending.served, pending.obj, pending.old)
            self._validated = (_rv(pending.old), pending.obj)

    async def _mutate(self, served: Served, obj: JsonDict | None, old: JsonDict | None) -> JsonDict | None:
        hooks = [(c, h) for c, h in self.webhooks.configured(MUTATING)]
        current = obj
        reinvoke: set[str] = set()
        invoked: set[str] = set()  # IfNeeded webhooks called since the object last changed
        changed_any = False
        for round_ in (0, 1):
            if round_ == 1 and not (changed_any and reinvoke):
                break
            for config, hook in hooks:
                key = f"{config}/{hook.get('name')}"
                if round_ == 1 and key not in reinvoke:
                    continue
                target = self._target(hook, served, current, old)
                if target is None:
                    continue
                changed, current = await self._call_mutating(hook, served, target, current, old)
                if changed:
                    changed_any = True
                    reinvoke |= invoked
                    invoked = set()
                if hook.get("reinvocationPolicy") == "IfNeeded":
                    invoked.add(key)
            if round_ == 1:
                break
        return current

    async def _call_mutating(
        self, hook: JsonDict, served: Served, target: Served, obj: JsonDict | None, old: JsonDict | None
    ) -> tuple[bool, JsonDict | None]:
        name = str(hook.get("name"))
        response = await self._call(hook, served, target, obj, old, mutating=True)
        if response is None:
            return False, obj
        raw = response.get("patch")
        if not raw:
            return False, obj
        problem = _patch_error(raw)
        if problem:
            if self._ignores(hook, f"received undecodable patch in webhook response: {problem}"):
                return False, obj
            raise _failed(name, f"received undecodable patch in webhook response: {problem}") from None
        patch = json.loads(raw)
        if not patch:
            return False, obj
        if obj is None:
            raise internal_error(
                f'admission webhook "{name}" attempted to modify the object, '
                "which is not supported for this operation"
            )
        if response.get("patchType") != "JSONPatch":
            raise internal_error(
                f'failed calling webhook "{name}": unsupported patch type "{response.get("patchType")}"'
            )
        before = await self.webhooks.convert(target, obj, True)
        try:
            after = json_patch(before, patch)
        except PatchError as error:
            raise internal_error(str(error)) from None
        if not isinstance(after, dict) or not isinstance(after.get("metadata"), dict):
            raise internal_error("the patched object is not an object with metadata")
        if after == before:
            return False, obj
        return True, await self.webhooks.convert(target, after, False)

    async def _validate(self, served: Served, obj: JsonDict | None, old: JsonDict | None) -> None:
        calls = []
        for _, hook in self.webhooks.configured(VALIDATING):
            target = self._target(hook, served, obj, old)
            if target is not None:
                calls.append(self._call(hook, served, target, obj, old, mutating=False))
        results = await asyncio.gather(*calls, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    def _ignores(self, hook: JsonDict, reason: str) -> bool:
        if hook.get("failurePolicy", "Fail") == "Ignore":
            log.warning(
                'Failed calling webhook, failing open %s: failed calling webhook "%s": %s',
                hook.get("name"),
                hook.get("name"),
                reason,
            )
            return True
        return False

    async def _call(
        self,
        hook: JsonDict,
        served: Served,
        target: Served,
        obj: JsonDict | None,
        old: JsonDict | None,
        *,
        mutating: bool,
    ) -> dict[str, Any] | None:
        """The webhook's response (allowed), None when its failure is ignored; raises a denial
        or a failed call's error."""
        attrs = self.attrs
        name = str(hook.get("name"))
        if attrs.dry_run:
            side_effects = hook.get("sideEffects")
            if side_effects is None:
                if self._ignores(hook, "Webhook SideEffects is nil"):
                    return None
                raise _failed(name, "Webhook SideEffects is nil")
            if side_effects not in ("None", "NoneOnDryRun"):
                raise bad_request(f'admission webhook "{name}" does not support dry run')
        version = next((v for v in hook.get("admissionReviewVersions") or () if v in _REVIEW_VERSIONS), None)
        if version is None:
            reason = (
                "could not create admission objects: "
                "webhook does not accept known AdmissionReview versions (v1, v1beta1)"
            )
            if self._ignores(hook, reason):
                return None
            raise _failed(name, reason)
        uid = str(uuid.uuid4())
        request = await self._request(uid, served, target, obj, old)
        review = {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{version}", "request": request}
        timeout = hook.get("timeoutSeconds") or 10
        try:
            answer = await self.webhooks.client.post(
                "admission", name, hook.get("clientConfig") or {}, review, float(timeout)
            )
            patch = _patch_bytes(answer)
        except CallError as error:
            if self._ignores(hook, f"failed to call webhook: {error}"):
                return None
            raise _failed(name, f"failed to call webhook: {error}") from None
        try:
            response = _verify(answer, uid, version, mutating=mutating)
        except _InvalidResponse as error:
            if self._ignores(hook, f"received invalid webhook response: {error}"):
                return None
            raise _failed(name, f"received invalid webhook response: {error}") from None
        self.warnings.extend(str(w) for w in response.get("warnings") or ())
        if not response.get("allowed"):
            raise denied(name, response.get("status"))
        if response.get("patch"):
            response = {**response, "patch": patch}
        return response

    async def _request(
        self, uid: str, served: Served, target: Served, obj: JsonDict | None, old: JsonDict | None
    ) -> dict[str, Any]:
        attrs = self.attrs
        rtype, hook_type = served.rtype, target.rtype
        request: dict[str, Any] = {
            "uid": uid,
            "kind": {"group": hook_type.group, "version": hook_type.version, "kind": hook_type.kind},
            "resource": {
                "group": hook_type.group,
                "version": hook_type.version,
                "resource": hook_type.plural,
            },
        }
        if attrs.subresource:
            request["subResource"] = attrs.subresource
        request["requestKind"] = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
        request["requestResource"] = {
            "group": rtype.group,
            "version": rtype.version,
            "resource": rtype.plural,
        }
        if attrs.subresource:
            request["requestSubResource"] = attrs.subresource
        name = attrs.name
        if not name and attrs.operation == "CREATE" and obj is not None:
            # AdmissionToValidateObjectFunc: a generated name, once the store gave it.
            name = str(obj["metadata"].get("name") or "")
        if name:
            request["name"] = name
        if attrs.namespace:
            request["namespace"] = attrs.namespace
        request["operation"] = attrs.operation
        request["userInfo"] = attrs.user
        request["object"] = await self.webhooks.convert(target, obj, True) if obj is not None else None
        request["oldObject"] = await self.webhooks.convert(target, old, True) if old is not None else None
        request["dryRun"] = attrs.dry_run
        request["options"] = attrs.options_object()
        return request


def _verify(answer: dict[str, Any], uid: str, version: str, *, mutating: bool) -> dict[str, Any]:
    """``VerifyAdmissionResponse``."""
    response = answer.get("response")
    if not isinstance(response, dict):
        raise _InvalidResponse("webhook response was absent")
    if version == "v1beta1":
        out = dict(response)
        if not mutating:
            out.pop("patch", None)
        elif out.get("patch"):
            out["patchType"] = "JSONPatch"
        return out
    if response.get("uid") != uid:
        raise _InvalidResponse(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    api_version, kind = str(answer.get("apiVersion") or ""), str(answer.get("kind") or "")
    if (api_version, kind) != ("admission.k8s.io/v1", "AdmissionReview"):
        group, _, plain = api_version.rpartition("/")
        raise _InvalidResponse(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, "
            f"got {group}/{plain}, Kind={kind}"
        )
    patch, patch_type = response.get("patch"), response.get("patchType")
    if mutating:
        if patch and patch_type is None:
            raise _InvalidResponse("webhook returned response.patch but not response.patchType")
        if not patch and patch_type is not None:
            raise _InvalidResponse("webhook returned response.patchType but not response.patch")
        if patch_type is not None and not patch_type:
            raise _InvalidResponse('webhook returned invalid response.patchType of ""')
    else:
        if patch:
            raise _InvalidResponse("validating webhook may not return response.patch")
        if patch_type is not None:
            raise _InvalidResponse("validating webhook may not return response.patchType")
    return response


def _patch_bytes(answer: Mapping[str, Any]) -> bytes | None:
    """The review's ``response.patch`` as the JSON decoding of the answer gives it (a ``[]byte``
    field: ``base64.StdEncoding``); its CallError is Go's (``illegal base64 data at input byte
    3``), as the decoding is part of the call in client-go."""
    response = answer.get("response")
    patch = response.get("patch") if isinstance(response, Mapping) else None
    if patch is None:
        return None
    if not isinstance(patch, str):
        kind = {dict: "object", list: "array", bool: "bool"}.get(type(patch), "number")
        raise CallError(
            f"json: cannot unmarshal {kind} into Go struct field AdmissionResponse.response.patch "
            "of type []uint8"
        )
    try:
        return std_decode(patch.encode())
    except Base64Error as error:
        raise CallError(str(error)) from None


def _patch_error(raw: bytes) -> str | None:
    """What ``jsonpatch.DecodePatch`` (``json.Unmarshal`` into a list of operations) says of
    ``raw``, None when it decodes."""
    error = syntax_error(raw)
    if error is not None:
        return error
    value = json.loads(raw)
    if value is not None and not isinstance(value, list):
        kind = {dict: "object", str: "string", bool: "bool"}.get(type(value), "number")
        return f"json: cannot unmarshal {kind} into Go value of type jsonpatch.Patch"
    for op in value or ():
        if op is not None and not isinstance(op, dict):
            kind = {list: "array", str: "string", bool: "bool"}.get(type(op), "number")
            return f"json: cannot unmarshal {kind} into Go value of type jsonpatch.Operation"
    return None


def _failed(name: str, reason: str) -> ApiError:
    return internal_error(f'failed calling webhook "{name}": {reason}')


def denied(name: str, status: Any) -> ApiError:
    """``ToStatusErr``: the webhook's status, code at least 400, message prefixed."""
    status = status if isinstance(status, dict) else {}
    denied_by = f'admission webhook "{name}" denied the request'
    code = status.get("code") if isinstance(status.get("code"), int) else 0
    code = max(code, 400)
    if status.get("message"):
        message = f"{denied_by}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied_by}: {status['reason']}"
    else:
        message = f"{denied_by} without explanation"
    details = status.get("details") if isinstance(status.get("details"), dict) else None
    return ApiError(code, str(status.get("reason") or ""), message, details)
