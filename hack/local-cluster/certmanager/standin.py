#!/usr/bin/env python3
"""A stand-in for cert-manager and its CA injector, for a local cluster that cannot pull them.

Does, every two seconds, the two things memop's manifests ask of cert-manager:
- a Certificate whose issuerRef names a ``selfSigned`` Issuer gets its Secret (type
  kubernetes.io/tls: tls.crt, tls.key, and ca.crt, the certificate itself, as cert-manager's
  self-signed issuer writes it) for its dnsNames, and a Ready condition;
- a ValidatingWebhookConfiguration, MutatingWebhookConfiguration or CustomResourceDefinition
  annotated ``cert-manager.io/inject-ca-from: <namespace>/<certificate>`` gets that Secret's
  ca.crt as every webhook's (or its conversion webhook's) caBundle.
No renewal, no other issuer. Runs on the host with an admin kubeconfig (KUBECONFIG); stop it
with SIGTERM. Needs kubectl (KUBECTL, else on PATH) and openssl.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any

KUBECTL = os.environ.get("KUBECTL", "kubectl")
ANNOTATION = "cert-manager.io/inject-ca-from"
stop = threading.Event()


def kubectl(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())
    return done.stdout


def items(resource: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = json.loads(kubectl("get", resource, "--all-namespaces", "-o", "json"))[
        "items"
    ]
    return listed


def self_signed(common_name: str, dns_names: list[str]) -> tuple[bytes, bytes]:
    with tempfile.TemporaryDirectory() as directory:
        key, crt = f"{directory}/tls.key", f"{directory}/tls.crt"
        sans = ",".join(f"DNS:{name}" for name in dns_names)
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                key,
                "-out",
                crt,
                "-days",
                "365",
                "-subj",
                f"/CN={common_name}",
                "-addext",
                f"subjectAltName={sans}",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
            ],
            check=True,
            capture_output=True,
        )
        with open(crt, "rb") as c, open(key, "rb") as k:
            return c.read(), k.read()


def issue(certificate: dict[str, Any], issuers: dict[tuple[str, str], dict[str, Any]]) -> None:
    meta, spec = certificate["metadata"], certificate["spec"]
    namespace = meta["namespace"]
    issuer = issuers.get((namespace, spec["issuerRef"]["name"]))
    if issuer is None or "selfSigned" not in issuer.get("spec", {}):
        return
    dns_names = spec.get("dnsNames", [])
    key = "cert-manager.io/dns-names"
    try:
        secret = json.loads(kubectl("get", "secret", "-n", namespace, spec["secretName"], "-o", "json"))
        if secret["metadata"].get("annotations", {}).get(key) == ",".join(dns_names):
            return
    except RuntimeError:
        pass
    crt, private_key = self_signed(dns_names[0] if dns_names else meta["name"], dns_names)
    encoded = {
        name: base64.b64encode(value).decode()
        for name, value in {"tls.crt": crt, "tls.key": private_key, "ca.crt": crt}.items()
    }
    kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/tls",
                "metadata": {
                    "name": spec["secretName"],
                    "namespace": namespace,
                    "annotations": {
                        key: ",".join(dns_names),
                        "cert-manager.io/certificate-name": meta["name"],
                    },
                },
                "data": encoded,
            }
        ),
    )
    kubectl(
        "patch",
        "certificate",
        "-n",
        namespace,
        meta["name"],
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "Ready",
                            "message": "issued by the stand-in",
                        }
                    ]
                }
            }
        ),
    )
    print(f"issued {namespace}/{meta['name']} into secret {spec['secretName']}", flush=True)


def ca_of(reference: str, certificates: dict[tuple[str, str], dict[str, Any]]) -> str | None:
    namespace, _, name = reference.partition("/")
    certificate = certificates.get((namespace, name))
    if certificate is None:
        return None
    try:
        secret = json.loads(
            kubectl("get", "secret", "-n", namespace, certificate["spec"]["secretName"], "-o", "json")
        )
    except RuntimeError:
        return None
    ca: str | None = secret.get("data", {}).get("ca.crt")
    return ca


def inject(certificates: dict[tuple[str, str], dict[str, Any]]) -> None:
    for resource in (
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "customresourcedefinitions",
    ):
        for obj in items(resource):
            reference = obj["metadata"].get("annotations", {}).get(ANNOTATION)
            ca = reference and ca_of(reference, certificates)
            if not ca:
                continue
            patch: list[dict[str, Any]] = []
            if resource == "customresourcedefinitions":
                webhook = obj["spec"].get("conversion", {}).get("webhook")
                if webhook and webhook.get("clientConfig", {}).get("caBundle") != ca:
                    patch.append(
                        {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": ca}
                    )
            else:
                for index, hook in enumerate(obj.get("webhooks", [])):
                    if hook.get("clientConfig", {}).get("caBundle") != ca:
                        patch.append(
                            {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": ca}
                        )
            if patch:
                kubectl("patch", resource, obj["metadata"]["name"], "--type=json", "-p", json.dumps(patch))
                print(f"injected the CA of {reference} into {resource}/{obj['metadata']['name']}", flush=True)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        try:
            issuers = {
                (i["metadata"]["namespace"], i["metadata"]["name"]): i
                for i in items("issuers.cert-manager.io")
            }
            certificates = {
                (c["metadata"]["namespace"], c["metadata"]["name"]): c
                for c in items("certificates.cert-manager.io")
            }
            for certificate in certificates.values():
                issue(certificate, issuers)
            inject(certificates)
        except (RuntimeError, KeyError, subprocess.CalledProcessError) as error:
            print(f"cert-manager stand-in: {error}", file=sys.stderr, flush=True)
        stop.wait(2)


if __name__ == "__main__":
    main()
