"""Self-signed webhook certificates as data: a CA, a serving certificate it signs, the Secret
that holds them, and when each must be renewed. No I/O here: the API calls, files and loop are
:mod:`memop.runtime.webhook.selfmanaged`'s.

The Secret (type ``kubernetes.io/tls``) holds, base64-encoded as every Secret's ``data``:

- ``tls.crt`` / ``tls.key``: the serving certificate and its key (PEM, PKCS#8);
- ``ca.crt``: the CA bundle clients must trust, newest CA first, then the previous CA while it
  is valid (the ``caBundle`` written into webhook configurations and CRDs);
- ``ca.key``: the key of the newest CA (the first certificate of ``ca.crt``).

Keys are ECDSA P-256: a key costs about a millisecond to make (RSA 2048: 50-100 ms, which
several replicas starting at once and every test would pay), signatures and handshakes are
smaller and faster, and every client that calls webhooks verifies them (Go's crypto/tls in
kube-apiserver since Kubernetes' first releases; cert-manager offers them too).

Invariants of :func:`decide` (checked by the tests):

- the serving certificate is signed by a CA of the bundle, covers exactly the required DNS
  names and IPs, and never outlives its issuer;
- a CA is renewed when less than ``renew_when_left`` (a third) of its lifetime is left; the old
  one stays in the bundle until it expires, so clients still holding the old bundle keep
  trusting what they are shown;
- the serving certificate is renewed when less than a third of its lifetime is left, and signed
  by a new CA only once that CA has been in the bundle for ``ca_propagation`` (an hour), so
  that a serving certificate no client trusts yet is never shown;
- nothing is replaced because it is not valid *yet*: another replica's clock may be ahead of
  ours, and replacing would make two replicas undo each other's work (a warning says so).

A third of the lifetime follows the kubelet's client certificate rotation (renew at 70-90 %)
and OpenShift's library-go (a fifth left) in spirit: early enough that a failing renewal has
months of retries before anything expires, late enough that certificates are not churned.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
CA_BUNDLE = "ca.crt"
CA_KEY = "ca.key"
SECRET_TYPE = "kubernetes.io/tls"

DAY = 24 * 3600.0
YEAR = 365 * DAY

# The private keys this module reads back from a Secret (it writes ECDSA P-256 only).
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnusableSecret(ValueError):
    """The Secret's content cannot be used as it is (the message says why, for the log)."""


@dataclass(frozen=True)
class CertificatePolicy:
    """How long certificates live and when they are renewed (seconds)."""

    # The CA: long-lived, as its renewal needs the bundle to propagate to every client.
    ca_validity: float = 10 * YEAR
    # The serving certificate: a year, renewed silently by every running replica.
    serving_validity: float = YEAR
    # Renew a certificate once less than this fraction of its lifetime is left.
    renew_when_left: float = 1 / 3
    # notBefore is set this far in the past, so a replica or an API server whose clock is a
    # little behind the signer's still accepts a fresh certificate (cert-controller and kubeadm
    # backdate too).
    backdate: float = 3600.0
    # How long a new CA is in the bundle before the serving certificate is signed by it: the
    # time for every API server to see the patched caBundle (they watch webhook configurations
    # and CRDs, so seconds; an hour leaves room for anyone who copied the bundle by hand).
    ca_propagation: float = 3600.0

    def __post_init__(self) -> None:
        if not 0 < self.renew_when_left < 1:
            raise ValueError("renew_when_left must be between 0 and 1")
        if self.serving_validity <= 0 or self.ca_validity <= 0:
            raise ValueError("validities must be positive")
        if self.serving_validity * self.renew_when_left <= self.ca_propagation:
            raise ValueError("the serving certificate's renewal window must be longer than ca_propagation")


@dataclass(frozen=True)
class ServingNames:
    """What the serving certificate must be valid for."""

    dns_names: tuple[str, ...]
    ips: tuple[IpAddress, ...] = ()

    @classmethod
    def for_service(
        cls, service: str, namespace: str, extra_dns_names: Iterable[str] = (), extra_ips: Iterable[str] = ()
    ) -> ServingNames:
        """``<service>.<namespace>.svc`` (the name kube-apiserver calls a webhook Service by) and
        ``.svc.cluster.local``, plus the extras (e.g. ``127.0.0.1`` for a webhook on loopback).
        A malformed IP is a ValueError."""
        names = [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]
        names += [name for name in extra_dns_names if name not in names]
        ips = tuple(dict.fromkeys(ipaddress.ip_address(ip) for ip in extra_ips))
        return cls(tuple(names), ips)

    def matches(self, certificate: x509.Certificate) -> bool:
        """Whether ``certificate``'s subjectAltName holds exactly these names and IPs."""
        try:
            san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return False
        return set(san.get_values_for_type(x509.DNSName)) == set(self.dns_names) and set(
            san.get_values_for_type(x509.IPAddress)
        ) == set(self.ips)


@dataclass(frozen=True)
class CertificateSet:
    """What the Secret holds, parsed. ``cas[0]`` is the newest CA and ``ca_key`` its key."""

    cas: tuple[x509.Certificate, ...]
    ca_key: PrivateKey
    serving: x509.Certificate
    serving_key: PrivateKey

    @property
    def ca_bundle(self) -> bytes:
        """The PEM bundle clients trust: every CA, newest first."""
        return b"".join(ca.public_bytes(serialization.Encoding.PEM) for ca in self.cas)

    @property
    def cert_pem(self) -> bytes:
        return self.serving.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.serving_key)

    def secret_data(self) -> dict[str, str]:
        """The Secret's ``data``."""
        return {
            TLS_CERT: _b64(self.cert_pem),
            TLS_KEY: _b64(self.key_pem),
            CA_BUNDLE: _b64(self.ca_bundle),
            CA_KEY: _b64(_key_pem(self.ca_key)),
        }


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` concluded: the certificates to use, and whether the Secret changes."""

    certificates: CertificateSet
    # What changed, one phrase each for the log; empty when the Secret stays as it is.
    changes: tuple[str, ...]
    # Wall-clock time when something next falls due (a renewal, the end of a propagation, an
    # old CA to drop); the caller checks again then at the latest.
    next_due: float
    # Things to report that change nothing (a certificate not valid yet: clock skew).
    warnings: tuple[str, ...] = field(default=())


# --- generation -------------------------------------------------------------------------------


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def new_ca(common_name: str, now: float, policy: CertificatePolicy) -> tuple[x509.Certificate, PrivateKey]:
    """A self-signed CA valid from ``now - backdate`` for ``ca_validity``. The subject carries
    the time of issue, so that an old and a new CA in one bundle have distinct subjects."""
    key = new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{common_name}@{int(now)}")])
    public = key.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(_datetime(now - policy.backdate))
        .not_valid_after(_datetime(now + policy.ca_validity))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return certificate, key


def new_serving(
    names: ServingNames, ca: x509.Certificate, ca_key: PrivateKey, now: float, policy: CertificatePolicy
) -> tuple[x509.Certificate, PrivateKey]:
    """A serving certificate for ``names`` signed by ``ca``, valid from ``now - backdate`` for
    ``serving_validity`` but never past the CA's own end."""
    key = new_key()
    not_after = min(now + policy.serving_validity, not_after_of(ca))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names.dns_names[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_datetime(now - policy.backdate))
        .not_valid_after(_datetime(not_after))
        .add_extension(
            x509.SubjectAlternativeName(
                [*(x509.DNSName(name) for name in names.dns_names), *(x509.IPAddress(ip) for ip in names.ips)]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return certificate, key


def issue_all(common_name: str, names: ServingNames, now: float, policy: CertificatePolicy) -> CertificateSet:
    """A new CA and a serving certificate it signs."""
    ca, ca_key = new_ca(common_name, now, policy)
    serving, serving_key = new_serving(names, ca, ca_key, now, policy)
    return CertificateSet((ca,), ca_key, serving, serving_key)


# --- reading a Secret -----------------------------------------------------------------------------


def parse_secret_data(data: Mapping[str, str] | None) -> CertificateSet:
    """The certificates a Secret's ``data`` holds; :class:`UnusableSecret` saying why when they
    are missing, malformed, or do not belong together (a key that is not the certificate's, a
    serving certificate no CA of the bundle signed)."""
    data = data or {}
    missing = [key for key in (TLS_CERT, TLS_KEY, CA_BUNDLE, CA_KEY) if not data.get(key)]
    if missing:
        raise UnusableSecret(f"it has no {', '.join(missing)}")
    pems = {key: _unb64(key, data[key]) for key in (TLS_CERT, TLS_KEY, CA_BUNDLE, CA_KEY)}
    try:
        cas = tuple(x509.load_pem_x509_certificates(pems[CA_BUNDLE]))
    except ValueError as error:
        raise UnusableSecret(f"{CA_BUNDLE} is not PEM certificates ({error})") from None
    try:
        serving = x509.load_pem_x509_certificate(pems[TLS_CERT])
    except ValueError as error:
        raise UnusableSecret(f"{TLS_CERT} is not a PEM certificate ({error})") from None
    ca_key = _load_key(CA_KEY, pems[CA_KEY])
    serving_key = _load_key(TLS_KEY, pems[TLS_KEY])
    if not _same_public_key(ca_key, cas[0]):
        raise UnusableSecret(f"{CA_KEY} is not the key of the first CA of {CA_BUNDLE}")
    if not _same_public_key(serving_key, serving):
        raise UnusableSecret(f"{TLS_KEY} is not the key of {TLS_CERT}")
    if not any(issued_by(serving, ca) for ca in cas):
        raise UnusableSecret(f"no CA of {CA_BUNDLE} signed {TLS_CERT}")
    return CertificateSet(cas, ca_key, serving, serving_key)


def issued_by(certificate: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


# --- renewal ------------------------------------------------------------------------------------------


def decide(
    current: CertificateSet | None,
    *,
    common_name: str,
    names: ServingNames,
    now: float,
    policy: CertificatePolicy,
    unusable: str | None = None,
) -> Decision:
    """The certificates to use at wall time ``now``, given what the Secret holds (None: no
    Secret, or ``unusable`` says why its content cannot be used). See the module's invariants."""
    if current is None:
        fresh = issue_all(common_name, names, now, policy)
        what = f"replaced its content ({unusable})" if unusable else "created a CA and a serving certificate"
        return Decision(fresh, (what,), _next_due(fresh, now, policy))
    warnings = [
        f"{what} is not valid before {_rfc3339(not_before_of(cert))}, later than this clock's time: "
        "the clocks of the replicas (or of their nodes) are skewed; using it anyway"
        for what, cert in (("the CA", current.cas[0]), ("the serving certificate", current.serving))
        if not_before_of(cert) > now
    ]
    changes: list[str] = []
    cas, ca_key = current.cas, current.ca_key
    if not_after_of(cas[0]) <= now:
        fresh = issue_all(common_name, names, now, policy)
        expired = _rfc3339(not_after_of(cas[0]))
        changes.append(f"replaced the CA, which expired at {expired}, and everything it signed")
        return Decision(fresh, tuple(changes), _next_due(fresh, now, policy), tuple(warnings))
    if _due(cas[0], now, policy):
        ca, ca_key = new_ca(common_name, now, policy)
        ends = _rfc3339(not_after_of(cas[0]))
        changes.append(f"rotated the CA (the old one expires at {ends} and stays in the bundle until then)")
        cas = (ca, *cas)
    kept = (cas[0], *(ca for ca in cas[1:] if not_after_of(ca) > now))
    if len(kept) < len(cas):
        changes.append("dropped an expired CA from the bundle")
    cas = kept
    serving, serving_key = current.serving, current.serving_key
    signed_by_newest = issued_by(serving, cas[0])
    problem = _serving_problem(serving, cas, names, now)
    renew = problem is not None or (
        _due(serving, now, policy) and (signed_by_newest or now >= _propagated_at(cas[0], policy))
    )
    if renew:
        serving, serving_key = new_serving(names, cas[0], ca_key, now, policy)
        changes.append(
            f"issued a new serving certificate ({problem})"
            if problem
            else f"renewed the serving certificate (valid until {_rfc3339(not_after_of(serving))})"
        )
    result = CertificateSet(cas, ca_key, serving, serving_key)
    return Decision(result, tuple(changes), _next_due(result, now, policy), tuple(warnings))


def _serving_problem(
    serving: x509.Certificate, cas: tuple[x509.Certificate, ...], names: ServingNames, now: float
) -> str | None:
    """Why the serving certificate must be replaced now, whatever its age; None if it need not."""
    if not_after_of(serving) <= now:
        return f"the old one expired at {_rfc3339(not_after_of(serving))}"
    if not any(issued_by(serving, ca) for ca in cas):
        return "the old one's CA is no longer in the bundle"
    if not names.matches(serving):
        return "the old one's names differ from " + ", ".join([*names.dns_names, *map(str, names.ips)])
    return None


def _next_due(certificates: CertificateSet, now: float, policy: CertificatePolicy) -> float:
    """The first future time something falls due. A renewal already due but waiting for the new
    CA to propagate counts as falling due when the propagation ends."""
    ca = certificates.cas[0]
    times = [_renew_at(ca, policy), _renew_at(certificates.serving, policy)]
    times += [not_after_of(old) for old in certificates.cas[1:]]
    if not issued_by(certificates.serving, ca):
        times.append(_propagated_at(ca, policy))
    return min((t for t in times if t > now), default=now + policy.serving_validity * policy.renew_when_left)


def _due(certificate: x509.Certificate, now: float, policy: CertificatePolicy) -> bool:
    return now >= _renew_at(certificate, policy)


def _renew_at(certificate: x509.Certificate, policy: CertificatePolicy) -> float:
    start, end = not_before_of(certificate), not_after_of(certificate)
    return end - (end - start) * policy.renew_when_left


def _propagated_at(ca: x509.Certificate, policy: CertificatePolicy) -> float:
    # The CA was made at notBefore + backdate; it went into the bundle then.
    return not_before_of(ca) + policy.backdate + policy.ca_propagation


# --- small helpers ---------------------------------------------------------------------------


def not_before_of(certificate: x509.Certificate) -> float:
    return certificate.not_valid_before_utc.timestamp()


def not_after_of(certificate: x509.Certificate) -> float:
    return certificate.not_valid_after_utc.timestamp()


def _datetime(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(int(seconds), datetime.UTC)


def _rfc3339(seconds: float) -> str:
    return _datetime(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(key: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise UnusableSecret(f"{key} is not base64") from None


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load_key(name: str, pem: bytes) -> PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as error:
        raise UnusableSecret(f"{name} is not an unencrypted PEM private key ({error})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise UnusableSecret(f"{name} is a {type(key).__name__}, neither ECDSA nor RSA")
    return key


def _same_public_key(key: PrivateKey, certificate: x509.Certificate) -> bool:
    der, spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return key.public_key().public_bytes(der, spki) == certificate.public_key().public_bytes(der, spki)
