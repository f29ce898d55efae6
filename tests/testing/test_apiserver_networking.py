"""Ingress and NetworkPolicy (networking.k8s.io/v1) over HTTP, as kube-apiserver v1.36 answers:
the defaults it sets, the validation errors operators run into (each message is the real
server's, from ``pkg/apis/networking/validation``), the status subresource of Ingresses and the
tables ``kubectl get`` prints."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.conftest import Http

NETWORKING = "/apis/networking.k8s.io/v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def ingresses(ns: str, name: str = "") -> str:
    return f"{NETWORKING}/namespaces/{ns}/ingresses" + (f"/{name}" if name else "")


def policies(ns: str, name: str = "") -> str:
    return f"{NETWORKING}/namespaces/{ns}/networkpolicies" + (f"/{name}" if name else "")


def backend(service: str = "web", port: Any = 80) -> dict[str, Any]:
    key = "number" if isinstance(port, int) else "name"
    return {"service": {"name": service, "port": {key: port}}}


def ingress(name: str, *rules: dict[str, Any], **spec: Any) -> dict[str, Any]:
    if rules:
        spec["rules"] = list(rules)
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": name}, "spec": spec}


def http_rule(host: str | None, *paths: dict[str, Any]) -> dict[str, Any]:
    rule: dict[str, Any] = {"http": {"paths": list(paths)}}
    if host is not None:
        rule["host"] = host
    return rule


def path(url: str = "/", path_type: str | None = "Prefix", **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"path": url, "backend": backend(), **extra}
    if path_type is not None:
        item["pathType"] = path_type
    return item


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def invalid(kind: str, name: str, *errors: str) -> str:
    joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f'{kind}.networking.k8s.io "{name}" is invalid: {joined}'


# --- discovery ---


async def test_discovery_lists_ingresses_and_network_policies(http: Http) -> None:
    resources = {r["name"]: r for r in (await http.get(NETWORKING)).body["resources"]}
    assert resources["ingresses"]["shortNames"] == ["ing"]
    assert resources["ingresses"]["namespaced"] is True
    assert resources["ingresses/status"]["verbs"] == ["get", "patch", "update"]
    assert resources["networkpolicies"]["shortNames"] == ["netpol"]
    assert resources["networkpolicies"]["kind"] == "NetworkPolicy"
    assert "networkpolicies/status" not in resources  # v1.36 has no NetworkPolicy status
    groups = [g["name"] for g in (await http.get("/apis")).body["groups"]]
    # Group priority order: networking (17200) after batch's place, before policy and rbac.
    assert (
        groups.index("networking.k8s.io") < groups.index("policy") < groups.index("rbac.authorization.k8s.io")
    )
    assert groups.index("apps") < groups.index("networking.k8s.io")


# --- Ingress ---


async def test_an_ingress_keeps_its_spec_gets_an_empty_status_and_counts_generations(
    http: Http, namespace: str
) -> None:
    body = ingress("web", http_rule("web.example.com", path("/api")))
    body["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}
    created = await http.post(ingresses(namespace), body)
    assert created.status == 201, created.body
    assert created.body["spec"] == {
        "rules": [
            {
                "host": "web.example.com",
                "http": {
                    "paths": [
                        {
                            "path": "/api",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"number": 80}}},
                        }
                    ]
                },
            }
        ]
    }
    assert created.body["status"] == {"loadBalancer": {}}  # a create cannot set status
    assert created.body["metadata"]["generation"] == 1
    status = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}
    updated = await http.patch(ingresses(namespace, "web") + "/status", status)
    assert updated.status == 200, updated.body
    assert updated.body["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.10"}]
    assert updated.body["metadata"]["generation"] == 1
    ignored = await http.patch(ingresses(namespace, "web"), {"status": {"loadBalancer": {}}})
    assert ignored.body["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.10"}]
    respec = await http.patch(ingresses(namespace, "web"), {"spec": {"ingressClassName": "nginx"}})
    assert respec.body["metadata"]["generation"] == 2


async def test_a_service_backend_without_a_port_gets_the_empty_port_and_is_refused(
    http: Http, namespace: str
) -> None:
    body = ingress("noport", defaultBackend={"service": {"name": "web"}})
    reply = await http.post(ingresses(namespace), body)
    assert reply.status == 422, reply.body
    assert reply.body["message"] == invalid(
        "Ingress", "noport", "spec.defaultBackend: Required value: port name or number is required"
    )


async def test_the_path_type_is_required_and_checked(http: Http, namespace: str) -> None:
    missing = await http.post(ingresses(namespace), ingress("nopt", http_rule(None, path("/", None))))
    assert missing.status == 422
    assert missing.body["message"] == invalid(
        "Ingress", "nopt", "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"
    )
    assert missing.body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: pathType must be specified",
            "field": "spec.rules[0].http.paths[0].pathType",
        }
    ]
    other = await http.post(ingresses(namespace), ingress("badpt", http_rule(None, path("/", "Regex"))))
    assert other.body["message"] == invalid(
        "Ingress",
        "badpt",
        'spec.rules[0].http.paths[0].pathType: Unsupported value: "Regex": supported values: '
        '"Exact", "ImplementationSpecific", "Prefix"',
    )


async def test_prefix_and_exact_paths_must_be_clean_absolute_paths(http: Http, namespace: str) -> None:
    body = ingress("paths", http_rule(None, path("api", "Exact"), path("/a//b/..", "Prefix")))
    reply = await http.post(ingresses(namespace), body)
    assert reply.status == 422
    assert reply.body["message"] == invalid(
        "Ingress",
        "paths",
        'spec.rules[0].http.paths[0].path: Invalid value: "api": must be an absolute path',
        "spec.rules[0].http.paths[1].path: Invalid value: \"/a//b/..\": must not contain '//'",
        "spec.rules[0].http.paths[1].path: Invalid value: \"/a//b/..\": cannot end with '/..'",
    )
    # ImplementationSpecific accepts an empty path.
    loose = ingress("loose", http_rule(None, path("", "ImplementationSpecific")))
    assert (await http.post(ingresses(namespace), loose)).status == 201


async def test_hosts_are_dns_names_or_wildcards_never_ip_addresses(http: Http, namespace: str) -> None:
    good = ingress("wild", http_rule("*.example.com", path()))
    assert (await http.post(ingresses(namespace), good)).status == 201
    body = ingress("hosts", http_rule("10.0.0.1", path()), http_rule("*.*.example.com", path()))
    reply = await http.post(ingresses(namespace), body)
    assert reply.status == 422
    wildcard_fmt = r"\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    assert reply.body["message"] == invalid(
        "Ingress",
        "hosts",
        'spec.rules[0].host: Invalid value: "10.0.0.1": must be a DNS name, not an IP address',
        'spec.rules[1].host: Invalid value: "*.*.example.com": a wildcard DNS-1123 subdomain must start '
        "with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric "
        "characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used "
        f"for validation is '{wildcard_fmt}')",
    )


async def test_rules_or_a_default_backend_and_valid_backends(http: Http, namespace: str) -> None:
    empty = await http.post(ingresses(namespace), ingress("empty"))
    assert empty.status == 422
    assert empty.body["message"] == invalid(
        "Ingress", "empty", "spec: Invalid value: null: either `defaultBackend` or `rules` must be specified"
    )
    both = {"service": {"name": "web", "port": {"number": 80, "name": "http"}}}
    nothing: dict[str, Any] = {}
    body = ingress(
        "backends",
        http_rule(None, {**path(), "backend": both}, {**path(), "backend": nothing}),
        http_rule(None, {**path(), "backend": backend("Web_1", 70000)}),
    )
    reply = await http.post(ingresses(namespace), body)
    assert reply.status == 422
    assert reply.body["message"] == invalid(
        "Ingress",
        "backends",
        'spec.rules[0].http.paths[0].backend: Invalid value: "": cannot set both port name & port number',
        'spec.rules[0].http.paths[1].backend: Invalid value: "": resource or service backend is required',
        # RelaxedServiceNameValidation, on in v1.36: an RFC 1123 label ("123-abc" is one).
        'spec.rules[1].http.paths[0].backend.service.name: Invalid value: "Web_1": a lowercase RFC 1123 '
        "label must consist of lower case alphanumeric characters or '-', and must start and end with an "
        "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        "spec.rules[1].http.paths[0].backend.service.port.number: Invalid value: 70000: must be between 1 "
        "and 65535, inclusive",
    )
    http_without_paths = ingress("nopaths", {"host": "a.example.com", "http": {}})
    reply = await http.post(ingresses(namespace), http_without_paths)
    assert reply.body["message"] == invalid("Ingress", "nopaths", "spec.rules[0].http.paths: Required value")


async def test_the_class_annotation_must_match_the_class_name_on_create(http: Http, namespace: str) -> None:
    body = ingress("classes", defaultBackend=backend(), ingressClassName="nginx")
    body["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "traefik"}
    reply = await http.post(ingresses(namespace), body)
    assert reply.status == 422
    assert reply.body["message"] == invalid(
        "Ingress",
        "classes",
        'annotations.kubernetes.io/ingress.class: Invalid value: "traefik": must match `ingressClassName` '
        "when both are specified",
    )
    tls = ingress("tls", defaultBackend=backend(), tls=[{"hosts": ["a.example.com"], "secretName": "Bad"}])
    reply = await http.post(ingresses(namespace), tls)
    assert reply.body["message"].startswith(
        'Ingress.networking.k8s.io "tls" is invalid: spec.tls[0].secretName: Invalid value: "Bad": '
        "a lowercase RFC 1123 subdomain"
    )


async def test_an_ingress_table_shows_class_hosts_address_and_ports(http: Http, namespace: str) -> None:
    rules = [http_rule(f"h{i}.example.com", path()) for i in range(5)]
    body = ingress("many", *rules, tls=[{"hosts": ["h0.example.com"]}])
    assert (await http.post(ingresses(namespace), body)).status == 201
    status = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.2"}, {"hostname": "lb.example.com"}]}}}
    assert (await http.patch(ingresses(namespace, "many") + "/status", status)).status == 200
    table = (await http.get(ingresses(namespace, "many"), accept=TABLE)).body
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Class",
        "Hosts",
        "Address",
        "Ports",
        "Age",
    ]
    cells = table["rows"][0]["cells"]
    assert cells[:5] == [
        "many",
        "<none>",
        "h0.example.com,h1.example.com,h2.example.com + 2 more...",
        "192.0.2.2,lb.example.com",
        "80, 443",
    ]


# --- NetworkPolicy ---


async def test_policy_types_default_from_egress_rules_and_ports_to_tcp(http: Http, namespace: str) -> None:
    ingress_only = await http.post(policies(namespace), policy("deny"))
    assert ingress_only.status == 201, ingress_only.body
    assert ingress_only.body["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    assert ingress_only.body["metadata"]["generation"] == 1
    assert "status" not in ingress_only.body
    both = policy(
        "both",
        podSelector={"matchLabels": {"app": "web"}},
        ingress=[{"ports": [{"port": 8080}]}],
        egress=[{"ports": [{"port": "dns", "protocol": "UDP"}]}],
    )
    created = await http.post(policies(namespace), both)
    assert created.status == 201, created.body
    spec = created.body["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["ingress"] == [{"ports": [{"protocol": "TCP", "port": 8080}]}]
    assert spec["egress"] == [{"ports": [{"protocol": "UDP", "port": "dns"}]}]
    explicit = await http.post(policies(namespace), policy("egress-only", policyTypes=["Egress"]))
    assert explicit.body["spec"]["policyTypes"] == ["Egress"]
    updated = await http.patch(policies(namespace, "deny"), {"spec": {"policyTypes": ["Ingress", "Egress"]}})
    assert updated.body["metadata"]["generation"] == 2


async def test_network_policy_ports_are_checked(http: Http, namespace: str) -> None:
    body = policy(
        "ports",
        ingress=[
            {
                "ports": [
                    {"port": 0},
                    {"port": 9000, "endPort": 8000},
                    {"port": "http", "endPort": 90},
                    {"endPort": 90},
                    {"protocol": "ICMP"},
                ]
            }
        ],
    )
    reply = await http.post(policies(namespace), body)
    assert reply.status == 422
    assert reply.body["message"] == invalid(
        "NetworkPolicy",
        "ports",
        "spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
        # (the value shown is the port's, 9000, as kube-apiserver v1.36.2 words it)
        "spec.ingress[0].ports[1].endPort: Invalid value: 9000: must be greater than or equal to `port`",
        "spec.ingress[0].ports[2].endPort: Invalid value: 90: may not be specified when `port` is "
        "non-numeric",
        "spec.ingress[0].ports[3].endPort: Invalid value: 90: may not be specified when `port` is not "
        "specified",
        'spec.ingress[0].ports[4].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", '
        '"SCTP"',
    )


async def test_network_policy_peers_and_selectors_are_checked(http: Http, namespace: str) -> None:
    body = policy(
        "peers",
        podSelector={"matchExpressions": [{"key": "app", "operator": "In"}]},
        egress=[
            {
                "to": [
                    {},
                    {"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}},
                    {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24", "10.0.0.0/8"]}},
                    {"ipBlock": {"cidr": "not-a-cidr"}},
                ]
            }
        ],
        policyTypes=["Egress", "Sideways"],
    )
    reply = await http.post(policies(namespace), body)
    assert reply.status == 422
    assert reply.body["message"] == invalid(
        "NetworkPolicy",
        "peers",
        "spec.podSelector.matchExpressions[0].values: Required value: must be specified when `operator` is "
        "'In' or 'NotIn'",
        "spec.egress[0].to[0]: Required value: must specify a peer",
        "spec.egress[0].to[1]: Forbidden: may not specify both ipBlock and another peer",
        'spec.egress[0].to[2].ipBlock.except[0]: Invalid value: "10.1.0.0/24": must be a strict subset of '
        "`cidr`",
        'spec.egress[0].to[2].ipBlock.except[1]: Invalid value: "10.0.0.0/8": must be a strict subset of '
        "`cidr`",
        'spec.egress[0].to[3].ipBlock.cidr: Invalid value: "not-a-cidr": must be a valid CIDR value, (e.g. '
        "10.9.8.0/24 or 2001:db8::/64)",
        'spec.policyTypes[1]: Unsupported value: "Sideways": supported values: "Ingress", "Egress"',
    )
    too_many = await http.post(
        policies(namespace), policy("types", policyTypes=["Ingress", "Egress", "Ingress"])
    )
    assert too_many.body["message"] == invalid(
        "NetworkPolicy",
        "types",
        'spec.policyTypes: Invalid value: ["Ingress","Egress","Ingress"]: may not specify more than two '
        "policyTypes",
    )


async def test_a_network_policy_table_shows_the_pod_selector(http: Http, namespace: str) -> None:
    selector = {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    assert (await http.post(policies(namespace), policy("sel", podSelector=selector))).status == 201
    assert (await http.post(policies(namespace), policy("all"))).status == 201
    table = (await http.get(policies(namespace), accept=TABLE)).body
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Pod-Selector", "Age"]
    rows = {row["cells"][0]: row["cells"][1] for row in table["rows"]}
    assert rows == {"sel": "app=web,tier", "all": "<none>"}


# --- IngressClass ---

CLASSES = f"{NETWORKING}/ingressclasses"


def ingress_class(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": name},
        "spec": spec,
    }


async def test_an_ingress_class_has_a_domain_prefixed_controller_that_never_changes(http: Http) -> None:
    name = f"memop-test-{uuid.uuid4().hex[:8]}"
    params = {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb"}
    created = await http.post(
        CLASSES, ingress_class(name, controller="example.com/ingress", parameters=params)
    )
    assert created.status == 201, created.body
    try:
        assert created.body["spec"]["parameters"]["scope"] == "Cluster"  # SetDefaults_IngressClass
        assert created.body["metadata"]["generation"] == 1
        table = (await http.get(f"{CLASSES}/{name}", accept=TABLE)).body
        assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Controller", "Parameters", "Age"]
        assert table["rows"][0]["cells"][:3] == [
            name,
            "example.com/ingress",
            "IngressParameters.k8s.example.com/external-lb",
        ]
        moved = await http.patch(f"{CLASSES}/{name}", {"spec": {"controller": "example.com/other"}})
        assert moved.status == 422
        assert moved.body["message"] == (
            f'IngressClass.networking.k8s.io "{name}" is invalid: spec.controller: Invalid value: '
            '"example.com/other": field is immutable'
        )
    finally:
        await http.delete(f"{CLASSES}/{name}")
    bad = ingress_class(
        f"{name}-bad", controller="nginx", parameters={"kind": "P", "name": "p", "scope": "Namespace"}
    )
    reply = await http.post(CLASSES, bad)
    assert reply.status == 422
    assert reply.body["message"] == invalid(
        "IngressClass",
        f"{name}-bad",
        'spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")',
        "spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'",
    )
