"""admissionregistration.k8s.io/v1 MutatingWebhookConfigurations and
ValidatingWebhookConfigurations: the registry (cluster-scoped, generation kept) with v1.36's
defaulting (``SetDefaults_*Webhook``) and the validation a user is likely to run into, with the
real server's messages (measured on v1.36.2): webhook names fully qualified (three segments),
unique in a configuration, ``sideEffects`` None/NoneOnDryRun, ``admissionReviewVersions`` with a
known version, ``clientConfig`` exactly one of url/service and https, ``timeoutSeconds`` 1..30,
failurePolicy, matchPolicy, reinvocationPolicy, rules' operations and wildcards.

Not validated: label selectors' syntax (a bad one matches nothing), matchConditions' CEL.
Calling the webhooks is :mod:`memop.testing.apiserver.admissionwebhooks`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from memop.testing.apiserver.objects import (
    JsonDict,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    invalid,
    not_supported,
    required,
)
from memop.testing.apiserver.resources import MUTATING, ResourceType
from memop.testing.apiserver.schema import FieldError, go_quote
from memop.testing.apiserver.strategy import Strategy

_REVIEW_VERSIONS = ("v1", "v1beta1")
_OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
_FORM = "; desired format: https://host[/path]"


def default_webhook(hook: JsonDict, *, mutating: bool) -> None:
    """``SetDefaults_{Mutating,Validating}Webhook`` and ``SetDefaults_Rule`` (v1)."""
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    if hook.get("namespaceSelector") is None:
        hook["namespaceSelector"] = {}
    if hook.get("objectSelector") is None:
        hook["objectSelector"] = {}
    hook.setdefault("timeoutSeconds", 10)
    if mutating:
        hook.setdefault("reinvocationPolicy", "Never")
    for rule in hook.get("rules") or ():
        if isinstance(rule, dict) and not rule.get("scope"):
            rule["scope"] = "*"
    config = hook.get("clientConfig")
    service = config.get("service") if isinstance(config, dict) else None
    if isinstance(service, dict):
        service.setdefault("port", 443)


def _qualified_name_errors(path: str, name: Any) -> list[FieldError]:
    """``IsFullyQualifiedName``."""
    if not name:
        return [required(path)]
    text = str(name)
    errs = dns1123_subdomain_errors(text)
    if errs:
        return [invalid(path, text, ",".join(errs))]
    if len(text.split(".")) < 3:
        return [invalid(path, text, "should be a domain with at least three segments separated by dots")]
    return []


def _rule_errors(rule: Any, path: str) -> list[FieldError]:
    """``validateRuleWithOperations`` (the common cases)."""
    if not isinstance(rule, dict):
        return [invalid(path, rule, "must be an object")]
    errs: list[FieldError] = []
    operations = rule.get("operations") or []
    if not operations:
        errs.append(required(f"{path}.operations"))
    elif len(operations) > 1 and "*" in operations:
        errs.append(
            invalid(f"{path}.operations", operations, "if '*' is present, must not specify other operations")
        )
    for i, op in enumerate(operations):
        if op not in _OPERATIONS:
            errs.append(not_supported(f"{path}.operations[{i}]", op, _OPERATIONS))
    groups, versions, resources = (rule.get(k) or [] for k in ("apiGroups", "apiVersions", "resources"))
    if not groups:
        errs.append(required(f"{path}.apiGroups"))
    elif len(groups) > 1 and "*" in groups:
        errs.append(
            invalid(f"{path}.apiGroups", groups, "if '*' is present, must not specify other API groups")
        )
    if not versions:
        errs.append(required(f"{path}.apiVersions"))
    elif len(versions) > 1 and "*" in versions:
        errs.append(
            invalid(f"{path}.apiVersions", versions, "if '*' is present, must not specify other API versions")
        )
    if not resources:
        errs.append(required(f"{path}.resources"))
    scope = rule.get("scope")
    if scope is not None and scope not in ("*", "Cluster", "Namespaced"):
        errs.append(not_supported(f"{path}.scope", scope, ["*", "Cluster", "Namespaced"]))
    return errs


def _client_config_errors(config: Any, path: str) -> list[FieldError]:
    config = config if isinstance(config, dict) else {}
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [required(path, "exactly one of url or service is required")]
    if url is not None:
        return _url_errors(str(url), f"{path}.url")
    errs: list[FieldError] = []
    service = service if isinstance(service, dict) else {}
    if not service.get("name"):
        errs.append(required(f"{path}.service.name"))
    if not service.get("namespace"):
        errs.append(required(f"{path}.service.namespace"))
    port = service.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        errs.append(
            invalid(f"{path}.service.port", port, "port is not valid: must be between 1 and 65535, inclusive")
        )
    svc_path = service.get("path")
    if svc_path is not None and not str(svc_path).startswith("/"):
        errs.append(invalid(f"{path}.service.path", svc_path, "must start with a '/'"))
    return errs


def _url_errors(url: str, path: str) -> list[FieldError]:
    """``ValidateWebhookURL`` (forceHttps)."""
    try:
        parts = urlsplit(url)
    except ValueError as error:
        return [required(path, f"url must be a valid URL: {error}{_FORM}")]
    if parts.scheme != "https":
        return [invalid(path, parts.scheme, "'https' is the only allowed URL scheme" + _FORM)]
    if not parts.hostname:
        return [invalid(path, parts.netloc, "host must be specified" + _FORM)]
    errs = []
    if parts.username is not None:
        errs.append(
            invalid(path, parts.netloc.rsplit("@", 1)[0], "user information is not permitted in the URL")
        )
    if parts.fragment:
        errs.append(invalid(path, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        errs.append(invalid(path, parts.query, "query parameters are not permitted in the URL"))
    return errs


def _review_version_errors(versions: Any, path: str) -> list[FieldError]:
    if not versions:
        return [required(path, "must specify one of v1, v1beta1")]
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if version in seen:
            errs.append(invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        errs.extend(invalid(f"{path}[{i}]", version, e) for e in _dns1035_errors(str(version)))
    if not any(v in _REVIEW_VERSIONS for v in versions):
        errs.append(invalid(path, versions, "must include at least one of v1, v1beta1"))
    return errs


def _dns1035_errors(value: str) -> list[str]:
    errs = dns1123_label_errors(value)
    if not errs and not re.match("[a-z]", value):
        errs = ["a DNS-1035 label must start with an alphabetic character"]
    return errs


def validate_webhook(hook: Any, path: str, *, mutating: bool) -> list[FieldError]:
    """``validate{Mutating,Validating}Webhook`` with v1's options (no side effects)."""
    if not isinstance(hook, dict):
        return [invalid(path, hook, "must be an object")]
    errs = _qualified_name_errors(f"{path}.name", hook.get("name"))
    for i, rule in enumerate(hook.get("rules") or ()):
        errs.extend(_rule_errors(rule, f"{path}.rules[{i}]"))
    for key, allowed in (("failurePolicy", ["Fail", "Ignore"]), ("matchPolicy", ["Equivalent", "Exact"])):
        if hook.get(key) is not None and hook[key] not in allowed:
            errs.append(not_supported(f"{path}.{key}", hook[key], allowed))
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        errs.append(required(f"{path}.sideEffects", "must specify one of None, NoneOnDryRun"))
    elif side_effects not in ("None", "NoneOnDryRun"):
        errs.append(not_supported(f"{path}.sideEffects", side_effects, ["None", "NoneOnDryRun"]))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= 30):
        errs.append(
            invalid(f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 seconds")
        )
    if mutating:
        policy = hook.get("reinvocationPolicy")
        if policy is not None and policy not in ("IfNeeded", "Never"):
            errs.append(not_supported(f"{path}.reinvocationPolicy", policy, ["IfNeeded", "Never"]))
    errs.extend(_client_config_errors(hook.get("clientConfig"), f"{path}.clientConfig"))
    errs.extend(
        _review_version_errors(hook.get("admissionReviewVersions"), f"{path}.admissionReviewVersions")
    )
    return errs


def validate_configuration(obj: Mapping[str, Any], *, mutating: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or ()):
        name = hook.get("name") if isinstance(hook, dict) else None
        if isinstance(name, str) and name in names:
            errs.append(
                FieldError(
                    field=f"webhooks[{i}].name",
                    type="FieldValueDuplicate",
                    message=f"webhooks[{i}].name: Duplicate value: {go_quote(name)}",
                )
            )
        if isinstance(name, str):
            names.add(name)
        errs.extend(validate_webhook(hook, f"webhooks[{i}]", mutating=mutating))
    return errs


class WebhookConfigurationStrategy(Strategy):
    """Both configuration kinds (``rtype`` tells them apart)."""

    builtin = True
    strategic_merge = True
    # AllowUnconditionalUpdate is false: a PUT needs metadata.resourceVersion (kube-apiserver
    # v1.36.2: 422 "metadata.resourceVersion: Invalid value: 0: must be specified for an update").
    unconditional_update = False

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        mutating = rtype.plural == MUTATING.plural
        for hook in obj.get("webhooks") or ():
            if isinstance(hook, dict):
                default_webhook(hook, mutating=mutating)
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return validate_configuration(obj, mutating=rtype.plural == MUTATING.plural)
