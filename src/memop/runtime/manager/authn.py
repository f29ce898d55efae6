"""Secure metrics: who may read ``/metrics``, as Kubebuilder's ``--metrics-secure`` decides it.

Each request's bearer token is authenticated with a TokenReview and the user it maps to is
authorised with a SubjectAccessReview for ``get`` on the non-resource URL (``/metrics``), so
access is granted the Kubernetes way: a ClusterRole with ``nonResourceURLs: ["/metrics"]``
bound to Prometheus' service account. Answers: 401 without a valid token, 403 when not
allowed. Decisions are cached for ``ttl`` seconds (keyed by a hash of the token, never the
token itself) so a scrape every few seconds costs two API calls a minute, not two per scrape.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from memop.runtime.client.errors import ApiError, TransportError
from memop.runtime.client.resources import Resource
from memop.runtime.util.clock import Clock, RealClock
from memop.runtime.util.memfile import memory_file

log = logging.getLogger("memop.authn")

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)


class ReviewCreator(Protocol):
    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Decision:
    status: int  # 200, 401, 403, or 500 when the reviews themselves failed
    reason: str
    user: str = ""


class MetricsAuthorizer:
    """Decides whether a request with a given Authorization header may ``verb`` ``path``."""

    def __init__(self, client: ReviewCreator, *, ttl: float = 60.0, clock: Clock | None = None) -> None:
        self._client = client
        self._ttl = ttl
        self._clock = clock or RealClock()
        # sha256(token) + path + verb -> (expires at, decision); only definite answers cached.
        self._cache: dict[tuple[str, str, str], tuple[float, Decision]] = {}

    async def decide(self, authorization: str | None, path: str, verb: str = "get") -> Decision:
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Decision(401, "a bearer token is required")
        key = (hashlib.sha256(token.encode()).hexdigest(), path, verb)
        now = self._clock.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            decision = await self._review(token, path, verb)
        except (ApiError, TransportError) as error:
            log.error(
                "cannot check access to %s: %s (memop needs create on tokenreviews and subjectaccessreviews)",
                path,
                error,
            )
            return Decision(500, "authentication or authorization is unavailable")
        if len(self._cache) > 1024:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        self._cache[key] = (now + self._ttl, decision)
        return decision

    async def _review(self, token: str, path: str, verb: str) -> Decision:
        review = await self._client.create(
            TOKEN_REVIEWS,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return Decision(401, "the token is not valid")
        user = status.get("user") or {}
        username = str(user.get("username") or "")
        spec: dict[str, Any] = {"nonResourceAttributes": {"path": path, "verb": verb}, "user": username}
        for field in ("uid", "groups", "extra"):
            if user.get(field):
                spec[field] = user[field]
        access = await self._client.create(
            SUBJECT_ACCESS_REVIEWS,
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        if (access.get("status") or {}).get("allowed"):
            return Decision(200, "allowed", username)
        return Decision(403, f'user "{username}" cannot {verb} path "{path}"', username)


def tls_context(cert_dir: Path | None) -> ssl.SSLContext:
    """A server TLS context from ``cert_dir``/tls.crt and tls.key, or a self-signed one.

    The self-signed certificate is made now and never written to a filesystem (it is loaded
    from memory files, :mod:`memop.runtime.util.memfile`: the image's root filesystem is
    read-only), and a warning is logged, as Kubebuilder does.
    """
    if cert_dir is not None:
        cert, key = str(cert_dir / "tls.crt"), str(cert_dir / "tls.key")
    else:
        cert_pem, key_pem = _self_signed()
        cert = memory_file(cert_pem, name="metrics-tls.crt")
        key = memory_file(key_pem, name="metrics-tls.key")
        log.warning(
            "serving metrics over HTTPS with a generated self-signed certificate; "
            "use --metrics-cert-dir with a certificate your Prometheus trusts"
        )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


def _self_signed() -> tuple[bytes, bytes]:
    """A self-signed certificate for ``memop-metrics`` (and localhost) and its key, in PEM."""
    # Imported here: cryptography costs ~10 MB of memory, needed only for this certificate.
    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "memop-metrics")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
