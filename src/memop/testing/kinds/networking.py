"""networking.k8s.io/v1 Ingress and NetworkPolicy as kube-apiserver v1.36 serves them.

Ingress: no defaulting beyond the typed shape (``spec`` and a backend's service ``port`` are
structs, always serialised), ``status: {loadBalancer: {}}`` on create, a status subresource,
generation bumped by spec changes, and ``ValidateIngressCreate``/``ValidateIngressUpdate``:
rules or a default backend, hosts (DNS names, wildcards, never IPs), every path's ``pathType``
(required: v1 has no default) and path, backends (a service with a port name or number, or a
resource), TLS hosts and secret names, the class name and its annotation. An update keeps
accepting what the old object already held (invalid TLS secret names, wildcard-host rules).

NetworkPolicy: ``SetDefaults_NetworkPolicy`` (``policyTypes`` from the presence of egress rules)
and ``SetDefaults_NetworkPolicyPort`` (protocol TCP), no status (v1.36 has none), and
``ValidateNetworkPolicySpec``: selectors, ports, peers, ip blocks and policy types.

IngressClass (cluster-scoped): ``SetDefaults_IngressClass`` (a parameters reference is
Cluster-scoped unless it says otherwise), generation on spec changes, and
``ValidateIngressClass``: a domain-prefixed ``controller`` that never changes, and a parameters
reference with a kind, a name and a scope matching its namespace. The DefaultIngressClass
admission plugin (a default class written into Ingresses without one) is not simulated.

None of them has selectable fields beyond metadata.name and metadata.namespace.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from memop.testing.apiserver.objects import (
    JsonDict,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
    validate_label_selector,
)
from memop.testing.apiserver.resources import ResourceType
from memop.testing.apiserver.schema import FieldError
from memop.testing.apiserver.strategy import Kind
from memop.testing.kinds.builtins import (
    BuiltinStrategy,
    path_segment_name_errors,
    port_name_errors,
)

GROUP = "networking.k8s.io"
INGRESSES = ResourceType(GROUP, "v1", "ingresses", "Ingress", True, "ingress", ("ing",), has_status=True)
INGRESS_CLASSES = ResourceType(GROUP, "v1", "ingressclasses", "IngressClass", False, "ingressclass")
NETWORK_POLICIES = ResourceType(
    GROUP, "v1", "networkpolicies", "NetworkPolicy", True, "networkpolicy", ("netpol",)
)

_PORT_RANGE = "must be between 1 and 65535, inclusive"
_PATH_TYPES = ["Exact", "ImplementationSpecific", "Prefix"]  # sets.NewString(...).List(): sorted
_INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_INVALID_PATH_SUFFIXES = ("/..", "/.")
_INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
_WILDCARD_FMT = r"\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def wildcard_subdomain_errors(value: str) -> list[str]:
    """``IsWildcardDNS1123Subdomain``: ``*.`` and a DNS subdomain."""
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not re.fullmatch(_WILDCARD_FMT, value):
        errs.append(
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which "
            "must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric "
            f"character (e.g. '*.example.com', regex used for validation is '{_WILDCARD_FMT}')"
        )
    return errs


def _host_errors(host: str, path: str) -> list[FieldError]:
    """A TLS host or rule host: wildcard or plain DNS subdomain."""
    rule = wildcard_subdomain_errors if "*" in host else dns1123_subdomain_errors
    return [invalid(path, host, msg) for msg in rule(host)]


# --- Ingress ---------------------------------------------------------------------------------------


def _default_backend_shape(backend: Any) -> None:
    """The typed form of an IngressBackend: a service's ``name`` and ``port`` are always there."""
    service = _map(backend).get("service")
    if isinstance(service, dict):
        service.setdefault("name", "")
        service.setdefault("port", {})


def default_ingress(obj: JsonDict) -> None:
    """What decoding an Ingress into its Go type adds: v1 has no defaulting functions."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    _default_backend_shape(spec.get("defaultBackend"))
    for rule in _list(spec.get("rules")):
        for path in _list(_map(_map(rule).get("http")).get("paths")):
            if isinstance(path, dict):
                path.setdefault("pathType", None)
                _default_backend_shape(path.setdefault("backend", {}))


def _backend_errors(backend: Mapping[str, Any], path: str) -> list[FieldError]:
    """``validateIngressBackend``."""
    resource, service = backend.get("resource"), backend.get("service")
    if resource is not None and service is not None:
        return [invalid(path, "", "cannot set both resource and service backends")]
    if resource is not None:
        return _typed_reference_errors(_map(resource), f"{path}.resource")
    if service is None:
        return [invalid(path, "", "resource or service backend is required")]
    service = _map(service)
    errs: list[FieldError] = []
    name = str(service.get("name") or "")
    if not name:
        errs.append(required(f"{path}.service.name"))
    else:
        # RelaxedServiceNameValidation (beta, on in v1.36): an RFC 1123 label, not DNS-1035.
        errs.extend(invalid(f"{path}.service.name", name, msg) for msg in dns1123_label_errors(name))
    port = _map(service.get("port"))
    port_name, number = str(port.get("name") or ""), port.get("number") or 0
    if port_name and number:
        errs.append(invalid(path, "", "cannot set both port name & port number"))
    elif port_name:
        errs.extend(invalid(f"{path}.service.port.name", port_name, m) for m in port_name_errors(port_name))
    elif number:
        if _is_int(number) and not 1 <= number <= 65535:
            errs.append(invalid(f"{path}.service.port.number", number, _PORT_RANGE))
    else:
        errs.append(required(path, "port name or number is required"))
    return errs


def _typed_reference_errors(ref: Mapping[str, Any], path: str) -> list[FieldError]:
    """``validateIngressTypedLocalObjectReference``."""
    errs: list[FieldError] = []
    group = ref.get("apiGroup")
    if group is not None:
        errs.extend(invalid(f"{path}.apiGroup", group, m) for m in dns1123_subdomain_errors(str(group)))
    for key in ("kind", "name"):
        value = str(ref.get(key) or "")
        if not value:
            errs.append(required(f"{path}.{key}"))
        else:
            errs.extend(invalid(f"{path}.{key}", value, m) for m in path_segment_name_errors(value))
    return errs


def _http_path_errors(item: Mapping[str, Any], path: str) -> list[FieldError]:
    """``validateHTTPIngressPath``: the path type is required and decides what a path may be."""
    path_type = item.get("pathType")
    if path_type is None:
        return [required(f"{path}.pathType", "pathType must be specified")]
    url = str(item.get("path") or "")
    errs: list[FieldError] = []
    if path_type in ("Exact", "Prefix"):
        if not url.startswith("/"):
            errs.append(invalid(f"{path}.path", url, "must be an absolute path"))
        if url:
            errs.extend(
                invalid(f"{path}.path", url, f"must not contain '{seq}'")
                for seq in _INVALID_PATH_SEQUENCES
                if seq in url
            )
            errs.extend(
                invalid(f"{path}.path", url, f"cannot end with '{suffix}'")
                for suffix in _INVALID_PATH_SUFFIXES
                if url.endswith(suffix)
            )
    elif path_type == "ImplementationSpecific":
        if url and not url.startswith("/"):
            errs.append(invalid(f"{path}.path", url, "must be an absolute path"))
    else:
        errs.append(not_supported(f"{path}.pathType", path_type, _PATH_TYPES))
    errs.extend(_backend_errors(_map(item.get("backend")), f"{path}.backend"))
    return errs


def _rule_value_errors(rule: Mapping[str, Any], path: str) -> list[FieldError]:
    http = rule.get("http")
    if http is None:
        return []
    paths = _list(_map(http).get("paths"))
    errs = [] if paths else [required(f"{path}.http.paths")]
    for i, item in enumerate(paths):
        errs.extend(_http_path_errors(_map(item), f"{path}.http.paths[{i}]"))
    return errs


def _rule_errors(rules: list[Any], allow_wildcard_rules: bool) -> list[FieldError]:
    """``validateIngressRules``."""
    errs: list[FieldError] = []
    for i, rule in enumerate(map(_map, rules)):
        path = f"spec.rules[{i}]"
        host = str(rule.get("host") or "")
        if host:
            if _is_ip(host):
                errs.append(invalid(f"{path}.host", host, "must be a DNS name, not an IP address"))
            errs.extend(_host_errors(host, f"{path}.host"))
        if "*" not in host or not allow_wildcard_rules:
            errs.extend(_rule_value_errors(rule, path))
    return errs


def _tls_errors(tls: list[Any], allow_invalid_secrets: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, entry in enumerate(map(_map, tls)):
        for j, host in enumerate(_list(entry.get("hosts"))):
            errs.extend(_host_errors(str(host), f"spec.tls[{i}].hosts[{j}]"))
        secret = str(entry.get("secretName") or "")
        if secret and not allow_invalid_secrets:
            errs.extend(
                invalid(f"spec.tls[{i}].secretName", secret, m) for m in dns1123_subdomain_errors(secret)
            )
    return errs


def _ingress_spec_errors(spec: Mapping[str, Any], old_spec: Mapping[str, Any] | None) -> list[FieldError]:
    """``ValidateIngressSpec`` with the options an update derives from the old object."""
    errs: list[FieldError] = []
    rules, backend = _list(spec.get("rules")), spec.get("defaultBackend")
    if not rules and backend is None:
        shown = "null" if spec.get("rules") is None else "[]"
        errs.append(
            invalid("spec", None, "either `defaultBackend` or `rules` must be specified", raw_value=shown)
        )
    if backend is not None:
        errs.extend(_backend_errors(_map(backend), "spec.defaultBackend"))
    old_rules = _list(_map(old_spec).get("rules"))
    allow_wildcard_rules = any(
        "*" in str(_map(rule).get("host") or "") and _rule_value_errors(_map(rule), "") for rule in old_rules
    )
    errs.extend(_rule_errors(rules, allow_wildcard_rules))
    old_tls = _list(_map(old_spec).get("tls"))
    allow_invalid_secrets = any(
        dns1123_subdomain_errors(str(_map(t).get("secretName"))) for t in old_tls if _map(t).get("secretName")
    )
    errs.extend(_tls_errors(_list(spec.get("tls")), allow_invalid_secrets))
    class_name = spec.get("ingressClassName")
    if class_name is not None:
        errs.extend(
            invalid("spec.ingressClassName", class_name, m) for m in dns1123_subdomain_errors(str(class_name))
        )
    return errs


def _load_balancer_errors(status: Mapping[str, Any], old_status: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateIngressLoadBalancerStatus``: addresses the old status held stay acceptable."""
    old_ips = {_map(i).get("ip") for i in _list(_map(old_status.get("loadBalancer")).get("ingress"))} - {
        None,
        "",
    }
    errs: list[FieldError] = []
    for i, entry in enumerate(map(_map, _list(_map(status.get("loadBalancer")).get("ingress")))):
        path = f"status.loadBalancer.ingress[{i}]"
        ip, hostname = str(entry.get("ip") or ""), str(entry.get("hostname") or "")
        if ip and ip not in old_ips and not _is_ip(ip):
            errs.append(
                invalid(f"{path}.ip", ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")
            )
        if hostname:
            errs.extend(invalid(f"{path}.hostname", hostname, m) for m in dns1123_subdomain_errors(hostname))
            if _is_ip(hostname):
                errs.append(invalid(f"{path}.hostname", hostname, "must be a DNS name, not an IP address"))
    return errs


class IngressStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        default_ingress(obj)
        return obj

    def initial_status(self, obj: JsonDict) -> Any:
        return {"loadBalancer": {}}

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        spec = _map(obj.get("spec"))
        errs = _ingress_spec_errors(spec, None)
        annotation = _map(_map(obj.get("metadata")).get("annotations")).get(_INGRESS_CLASS_ANNOTATION)
        class_name = spec.get("ingressClassName")
        if annotation is not None and class_name is not None and annotation != class_name:
            errs.append(
                invalid(
                    f"annotations.{_INGRESS_CLASS_ANNOTATION}",
                    annotation,
                    "must match `ingressClassName` when both are specified",
                )
            )
        return errs

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs = _ingress_spec_errors(_map(new.get("spec")), _map(old.get("spec")))
        if new.get("status") != old.get("status"):
            errs.extend(_load_balancer_errors(_map(new.get("status")), _map(old.get("status"))))
        return errs


# --- NetworkPolicy ---------------------------------------------------------------------------------


def default_network_policy(obj: JsonDict) -> None:
    """``SetDefaults_NetworkPolicy`` and ``SetDefaults_NetworkPolicyPort``, on the typed shape
    (``spec.podSelector`` is a struct: always there)."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("podSelector", {})
    for direction in ("ingress", "egress"):
        for rule in _list(spec.get(direction)):
            for port in _list(_map(rule).get("ports")):
                if isinstance(port, dict) and port.get("protocol") is None:
                    port["protocol"] = "TCP"
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def _policy_port_errors(port: Mapping[str, Any], path: str) -> list[FieldError]:
    """``ValidateNetworkPolicyPort``."""
    errs: list[FieldError] = []
    protocol = port.get("protocol")
    if protocol is not None and protocol not in ("TCP", "UDP", "SCTP"):
        errs.append(not_supported(f"{path}.protocol", protocol, ["TCP", "UDP", "SCTP"]))
    number: Any = port.get("port")
    end: Any = port.get("endPort")
    if number is None:
        if end is not None:
            errs.append(invalid(f"{path}.endPort", end, "may not be specified when `port` is not specified"))
    elif _is_int(number):
        if not 1 <= number <= 65535:
            errs.append(invalid(f"{path}.port", number, _PORT_RANGE))
        if _is_int(end):
            if end < number:
                # kube-apiserver v1.36.2 reports the port's value here, not endPort's.
                errs.append(invalid(f"{path}.endPort", number, "must be greater than or equal to `port`"))
            if not 1 <= end <= 65535:
                errs.append(invalid(f"{path}.endPort", end, _PORT_RANGE))
    else:
        if end is not None:
            errs.append(invalid(f"{path}.endPort", end, "may not be specified when `port` is non-numeric"))
        errs.extend(invalid(f"{path}.port", number, m) for m in port_name_errors(str(number)))
    return errs


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def _ip_block_errors(block: Mapping[str, Any], path: str, known: set[str]) -> list[FieldError]:
    """``ValidateIPBlock``; CIDRs the old object held are not checked again."""
    cidr = str(block.get("cidr") or "")
    if not cidr:
        return [required(f"{path}.cidr")]
    bad_cidr = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
    network = _network(cidr)
    errs: list[FieldError] = []
    if network is None:
        if cidr not in known:
            errs.append(invalid(f"{path}.cidr", cidr, bad_cidr))
        return errs
    for i, text in enumerate(map(str, _list(block.get("except")))):
        except_path = f"{path}.except[{i}]"
        excluded = _network(text)
        if excluded is None:
            if text not in known:
                errs.append(invalid(except_path, text, bad_cidr))
            continue
        if (
            excluded.version != network.version
            or excluded.network_address not in network
            or network.prefixlen >= excluded.prefixlen
        ):
            errs.append(invalid(except_path, text, "must be a strict subset of `cidr`"))
    return errs


def _peer_errors(peer: Mapping[str, Any], path: str, known: set[str]) -> list[FieldError]:
    """``ValidateNetworkPolicyPeer``: exactly one kind of peer when it is an ip block."""
    errs: list[FieldError] = []
    present = 0
    for key in ("podSelector", "namespaceSelector"):
        if peer.get(key) is not None:
            present += 1
            errs.extend(validate_label_selector(peer[key], f"{path}.{key}"))
    block = peer.get("ipBlock")
    if block is not None:
        present += 1
        errs.extend(_ip_block_errors(_map(block), f"{path}.ipBlock", known))
    if present == 0:
        errs.append(required(path, "must specify a peer"))
    elif present > 1 and block is not None:
        errs.append(forbidden(path, "may not specify both ipBlock and another peer"))
    return errs


def _known_cidrs(spec: Mapping[str, Any]) -> set[str]:
    """Every CIDR of the policy's ip blocks (what an update may keep although invalid)."""
    known: set[str] = set()
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for rule in _list(spec.get(direction)):
            for peer in _list(_map(rule).get(peers)):
                block = _map(_map(peer).get("ipBlock"))
                if block:
                    known.add(str(block.get("cidr") or ""))
                    known.update(map(str, _list(block.get("except"))))
    return known


def _network_policy_spec_errors(spec: Mapping[str, Any], known: set[str]) -> list[FieldError]:
    """``ValidateNetworkPolicySpec``."""
    errs = validate_label_selector(spec.get("podSelector"), "spec.podSelector")
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(map(_map, _list(spec.get(direction)))):
            rule_path = f"spec.{direction}[{i}]"
            for j, port in enumerate(_list(rule.get("ports"))):
                errs.extend(_policy_port_errors(_map(port), f"{rule_path}.ports[{j}]"))
            for j, peer in enumerate(_list(rule.get(peers))):
                errs.extend(_peer_errors(_map(peer), f"{rule_path}.{peers}[{j}]", known))
    types = _list(spec.get("policyTypes"))
    if len(types) > 2:
        errs.append(invalid("spec.policyTypes", types, "may not specify more than two policyTypes"))
        return errs
    errs.extend(
        not_supported(f"spec.policyTypes[{i}]", kind, ["Ingress", "Egress"])
        for i, kind in enumerate(types)
        if kind not in ("Ingress", "Egress")
    )
    return errs


class NetworkPolicyStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        default_network_policy(obj)
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _network_policy_spec_errors(_map(obj.get("spec")), set())

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        old_spec = _map(old.get("spec"))
        return _network_policy_spec_errors(_map(new.get("spec")), _known_cidrs(old_spec))


# --- IngressClass ----------------------------------------------------------------------------------

_HTTP_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"


def domain_prefixed_path_errors(value: str, path: str) -> list[FieldError]:
    """``IsDomainPrefixedPath``: ``acme.io/ingress-controller``."""
    if not value:
        return [required(path)]
    host, sep, rest = value.partition("/")
    if not sep or not host or not rest:
        return [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errs = [invalid(path, host, m) for m in dns1123_subdomain_errors(host)]
    if not re.fullmatch(_HTTP_PATH_FMT, rest):
        errs.append(invalid(path, rest, f"Invalid path (regex used for validation is '{_HTTP_PATH_FMT}')"))
    return errs


def _parameters_errors(params: Mapping[str, Any], path: str) -> list[FieldError]:
    """``validateIngressClassParametersReference``."""
    errs: list[FieldError] = []
    group = params.get("apiGroup")
    if group is not None:
        errs.extend(invalid(f"{path}.apiGroup", group, m) for m in dns1123_subdomain_errors(str(group)))
    for key in ("kind", "name"):
        value = str(params.get(key) or "")
        if not value:
            errs.append(required(f"{path}.{key}"))
        else:
            errs.extend(invalid(f"{path}.{key}", value, m) for m in path_segment_name_errors(value))
    scope, namespace = params.get("scope"), params.get("namespace")
    if scope is None:
        errs.append(required(f"{path}.scope"))
    elif scope not in ("Cluster", "Namespace"):
        errs.append(not_supported(f"{path}.scope", scope, ["Cluster", "Namespace"]))
    elif scope == "Namespace" and namespace is None:
        errs.append(required(f"{path}.namespace", "`parameters.scope` is set to 'Namespace'"))
    elif scope == "Cluster" and namespace is not None:
        errs.append(forbidden(f"{path}.namespace", "`parameters.scope` is set to 'Cluster'"))
    return errs


def _ingress_class_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _map(obj.get("spec"))
    controller = str(spec.get("controller") or "")
    errs: list[FieldError] = []
    if not controller:
        errs.append(required("spec.controller"))
    else:
        if len(controller) > 250:
            errs.append(too_long("spec.controller", 250))
        errs.extend(domain_prefixed_path_errors(controller, "spec.controller"))
    if spec.get("parameters") is not None:
        errs.extend(_parameters_errors(_map(spec["parameters"]), "spec.parameters"))
    return errs


class IngressClassStrategy(BuiltinStrategy):
    unconditional_update = True
    strategic_merge = True

    def default(self, obj: JsonDict, rtype: ResourceType) -> JsonDict:
        spec = obj.setdefault("spec", {})
        params = spec.get("parameters") if isinstance(spec, dict) else None
        if isinstance(params, dict) and params.get("scope") is None:
            params["scope"] = "Cluster"
        return obj

    def validate_create(self, obj: JsonDict, rtype: ResourceType) -> list[FieldError]:
        return _ingress_class_errors(obj)

    def validate_update(self, new: JsonDict, old: JsonDict, rtype: ResourceType) -> list[FieldError]:
        errs = _ingress_class_errors(new)
        controller = _map(new.get("spec")).get("controller")
        if controller != _map(old.get("spec")).get("controller"):
            errs.insert(0, invalid("spec.controller", controller, "field is immutable"))
        return errs


# The kinds this module serves, for memop.testing.kinds.
KINDS: tuple[Kind, ...] = (
    Kind(INGRESSES, IngressStrategy()),
    Kind(INGRESS_CLASSES, IngressClassStrategy()),
    Kind(NETWORK_POLICIES, NetworkPolicyStrategy()),
)
