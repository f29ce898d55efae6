"""The PodSecurity admission plugin's decisions on a create or an update (``admission.go`` of
``k8s.io/pod-security-admission`` and kube-apiserver's ``plugin/pkg/admission/security/podsecurity``).

:meth:`PodSecurity.validate` takes a request's object (after mutation and defaulting, in
storage form) and answers with the warnings to send, or raises the
:class:`~memop.testing.apiserver.errors.ApiError` that refuses it:

- a pod (not its ``status``, nor the other subresources admission.go ignores) is refused 403
  when it violates its namespace's enforce level, and otherwise warned about its warn level;
  an update is evaluated only when it changes a container's image, the number of containers,
  or adds or changes an ephemeral container (``isSignificantPodUpdate``): a metadata or status
  change of a pod created before its namespace was labelled goes through;
- a workload's pod template (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob,
  ReplicationController, PodTemplate; not their subresources) is never refused, only warned
  about at the warn level (which follows an explicitly stricter enforce level);
- a namespace whose Pod Security labels do not parse is refused 422 on create, and on an
  update that changes those errors; an update that makes the enforce level stricter (or changes
  its version) warns about the existing pods that violate it.

The server's default configuration is kube-apiserver's: every mode ``privileged:latest``, no
exempt user, namespace or runtime class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memop.testing.apiserver.errors import GroupResourceLike, forbidden, internal_error, invalid
from memop.testing.apiserver.schema import FieldError, go_quote

from .checks import Violation
from .evaluator import evaluate, forbidden_detail, forbidden_reason
from .policy import PRIVILEGED, LevelVersion, Policy, compare_levels, policy_to_evaluate

Obj = Mapping[str, Any]

# Pod subresources that never change what the checks read (admission.go's ignoredPodSubresources).
IGNORED_POD_SUBRESOURCES = frozenset(
    ("exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status")
)
# How many existing pods a namespace's new enforce level is checked against, at most.
MAX_PODS_TO_CHECK = 3000


def _map(value: Any) -> Obj:
    return value if isinstance(value, Mapping) else {}


def _template(value: Any) -> tuple[Obj, Obj]:
    template = _map(value)
    return _map(template.get("metadata")), _map(template.get("spec"))


def _spec_template(obj: Obj) -> tuple[Obj, Obj] | None:
    return _template(_map(obj.get("spec")).get("template"))


def _optional_spec_template(obj: Obj) -> tuple[Obj, Obj] | None:
    """A ReplicationController's template is a pointer: none, nothing to check."""
    template = _map(obj.get("spec")).get("template")
    return None if template is None else _template(template)


def _cron_job_template(obj: Obj) -> tuple[Obj, Obj] | None:
    job_spec = _map(_map(_map(obj.get("spec")).get("jobTemplate")).get("spec"))
    return _template(job_spec.get("template"))


# The pod-controller resources and where their pod template is (DefaultPodSpecExtractor).
POD_TEMPLATES: Mapping[tuple[str, str], Callable[[Obj], tuple[Obj, Obj] | None]] = {
    ("", "replicationcontrollers"): _optional_spec_template,
    ("", "podtemplates"): lambda obj: _template(obj.get("template")),
    ("apps", "replicasets"): _spec_template,
    ("apps", "deployments"): _spec_template,
    ("apps", "statefulsets"): _spec_template,
    ("apps", "daemonsets"): _spec_template,
    ("batch", "jobs"): _spec_template,
    ("batch", "cronjobs"): _cron_job_template,
}


def _images(spec: Obj, key: str) -> list[str]:
    containers = spec.get(key)
    return [str(_map(c).get("image") or "") for c in containers] if isinstance(containers, list) else []


def significant_pod_update(new: Obj, old: Obj) -> bool:
    """Whether a pod update changes what Pod Security checks (``isSignificantPodUpdate``)."""
    new_spec, old_spec = _map(new.get("spec")), _map(old.get("spec"))
    for key in ("containers", "initContainers"):
        if _images(new_spec, key) != _images(old_spec, key):
            return True
    old_ephemeral = dict(_ephemeral(old_spec))
    return any(old_ephemeral.get(name) != image for name, image in _ephemeral(new_spec))


def _ephemeral(spec: Obj) -> list[tuple[str, str]]:
    """The (name, image) of each ephemeral container."""
    containers = spec.get("ephemeralContainers")
    if not isinstance(containers, list):
        return []
    return [(str(_map(c).get("name") or ""), str(_map(c).get("image") or "")) for c in containers]


class PodSecurity:
    """The PodSecurity validating admission plugin over one store's namespaces and pods.

    ``namespace(name)`` reads a namespace (None when there is none); ``pods(namespace)`` lists
    the pods in one. Both see the store as it is when the request is admitted."""

    def __init__(self, namespace: Callable[[str], Obj | None], pods: Callable[[str], Iterable[Obj]]) -> None:
        self._namespace = namespace
        self._pods = pods

    def validate(
        self, resource: GroupResourceLike, subresource: str | None, obj: Obj, old: Obj | None
    ) -> list[str]:
        """The warnings for a create (``old`` None) or update of ``obj`` through ``resource``
        (a ResourceType: its group and plural name) and ``subresource``; raises the refusal."""
        key = (resource.group, resource.plural)
        if key == ("", "namespaces"):
            return self._validate_namespace(subresource, obj, old)
        if key == ("", "pods"):
            return self._validate_pod(resource, subresource, obj, old)
        extract = POD_TEMPLATES.get(key)
        if extract is None or subresource:
            return []
        policy = self._policy_of(obj)
        if policy is None:
            return []  # admission.go allows it (and notes the error in the audit annotations)
        ns_policy, errors = policy
        if not errors and ns_policy.warn.level == PRIVILEGED and ns_policy.audit.level == PRIVILEGED:
            return []
        template = extract(obj)
        if template is None:
            return []
        return self._evaluate(ns_policy, template, resource, obj, enforce=False)

    def _policy_of(self, obj: Obj) -> tuple[Policy, list[FieldError]] | None:
        namespace = self._namespace(str(_map(obj.get("metadata")).get("namespace") or ""))
        if namespace is None:
            return None
        return policy_to_evaluate(_map(_map(namespace.get("metadata")).get("labels")))

    def _validate_pod(
        self, resource: GroupResourceLike, subresource: str | None, obj: Obj, old: Obj | None
    ) -> list[str]:
        if subresource in IGNORED_POD_SUBRESOURCES:
            return []
        policy = self._policy_of(obj)
        if policy is None:
            namespace = str(_map(obj.get("metadata")).get("namespace") or "")
            raise internal_error(f"failed to lookup namespace {go_quote(namespace)}")
        ns_policy, errors = policy
        if not errors and ns_policy.fully_privileged():
            return []
        if old is not None and not significant_pod_update(obj, old):
            return []
        template = (_map(obj.get("metadata")), _map(obj.get("spec")))
        return self._evaluate(ns_policy, template, resource, obj, enforce=True)

    def _evaluate(
        self,
        policy: Policy,
        template: tuple[Obj, Obj],
        resource: GroupResourceLike,
        obj: Obj,
        *,
        enforce: bool,
    ) -> list[str]:
        """``EvaluatePod``: refuse on the enforce level (when ``enforce``), else the warn
        level's warning. Audit annotations are not kept (the server's audit log has none)."""
        meta, spec = template
        results: dict[LevelVersion, list[Violation]] = {}
        if enforce:
            violations = results[policy.enforce] = evaluate(policy.enforce, meta, spec)
            if violations:
                name = str(_map(obj.get("metadata")).get("name") or "")
                raise forbidden(
                    resource,
                    name,
                    f"violates PodSecurity {go_quote(str(policy.enforce))}: {forbidden_detail(violations)}",
                )
        warned = results.get(policy.warn)
        if warned is None:
            warned = evaluate(policy.warn, meta, spec)
        if not warned:
            return []
        return [f"would violate PodSecurity {go_quote(str(policy.warn))}: {forbidden_detail(warned)}"]

    def _validate_namespace(self, subresource: str | None, obj: Obj, old: Obj | None) -> list[str]:
        if subresource:
            return []
        name = str(_map(obj.get("metadata")).get("name") or "")
        new_policy, new_errors = policy_to_evaluate(_map(_map(obj.get("metadata")).get("labels")))
        if old is None:
            if new_errors:
                raise invalid("", "Namespace", name, new_errors)
            return []
        old_policy, old_errors = policy_to_evaluate(_map(_map(old.get("metadata")).get("labels")))
        if new_errors and (not old_errors or new_errors != old_errors):
            raise invalid("", "Namespace", name, new_errors)
        new_enforce, old_enforce = new_policy.enforce, old_policy.enforce
        if new_enforce == old_enforce or new_enforce.level == PRIVILEGED:
            return []
        if (
            new_enforce.version == old_enforce.version
            and compare_levels(new_enforce.level, old_enforce.level) < 1
        ):
            return []
        return self._existing_pods_warnings(name, new_enforce)

    def _existing_pods_warnings(self, namespace: str, enforce: LevelVersion) -> list[str]:
        """``EvaluatePodsInNamespace``: one warning per distinct set of reasons, naming the
        lexically first pod and how many others share it, after a summary line."""
        pods = _prioritized(list(self._pods(namespace)))
        total = len(pods)
        pods = pods[:MAX_PODS_TO_CHECK]
        first: dict[str, str] = {}  # reasons -> lexically first pod name
        counts: dict[str, int] = {}
        for pod in pods:
            violations = evaluate(enforce, _map(pod.get("metadata")), _map(pod.get("spec")))
            if not violations:
                continue
            reasons = forbidden_reason(violations)
            name = str(_map(pod.get("metadata")).get("name") or "")
            first[reasons] = min(first.get(reasons, name), name)
            counts[reasons] = counts.get(reasons, 0) + 1
        warnings = []
        if len(pods) < total:
            warnings.append(
                "new PodSecurity enforce level only checked against the first "
                f"{len(pods)} of {total} existing pods"
            )
        if counts:
            warnings.append(
                f"existing pods in namespace {go_quote(namespace)} violate the new PodSecurity enforce level "
                f"{go_quote(str(enforce))}"
            )
        return warnings + sorted(_decorated(first[r], counts[r], r) for r in counts)


def _decorated(name: str, count: int, reasons: str) -> str:
    if count == 1:
        return f"{name}: {reasons}"
    if count == 2:
        return f"{name} (and 1 other pod): {reasons}"
    return f"{name} (and {count - 1} other pods): {reasons}"


def _prioritized(pods: list[Obj]) -> list[Obj]:
    """One pod per controller first, then the other replicas (``prioritizePods``): the pods
    checked when there are too many to check them all."""
    first: list[Obj] = []
    replicas: list[Obj] = []
    seen: set[str] = set()
    for pod in pods:
        refs = _map(pod.get("metadata")).get("ownerReferences")
        controller = (
            next(
                (r for r in refs if isinstance(r, Mapping) and r.get("controller") is True),
                None,
            )
            if isinstance(refs, list)
            else None
        )
        if controller is None:
            first.append(pod)
        elif str(controller.get("uid")) in seen:
            replicas.append(pod)
        else:
            seen.add(str(controller.get("uid")))
            first.append(pod)
    return first + replicas
