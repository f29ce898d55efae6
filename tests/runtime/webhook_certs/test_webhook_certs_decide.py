"""The certificates as data (memop.runtime.webhook.certs): what is issued, what a Secret's content
must be, and when each certificate is renewed. No server, no files: wall times are numbers."""

from __future__ import annotations

import base64
import datetime
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from memop.runtime.webhook.certs import (
    CA_BUNDLE,
    CA_KEY,
    TLS_CERT,
    TLS_KEY,
    CertificatePolicy,
    CertificateSet,
    ServingNames,
    UnusableSecret,
    decide,
    issued_by,
    new_serving,
    not_after_of,
    not_before_of,
    parse_secret_data,
)

NOW = 1_700_000_000.0
DAY = 24 * 3600.0
POLICY = CertificatePolicy(ca_validity=30 * DAY, serving_validity=3 * DAY, backdate=600, ca_propagation=3600)
NAMES = ServingNames.for_service("hooks", "ops", extra_ips=("127.0.0.1",))
CN = "hooks.ops-ca"


def decide_at(current: CertificateSet | None, now: float, names: ServingNames = NAMES, **options: str):
    return decide(current, common_name=CN, names=names, now=now, policy=POLICY, **options)


def verify(certificates: CertificateSet, name: x509.DNSName | x509.IPAddress, at: float) -> None:
    """What a TLS client does: build a chain from the serving certificate to a CA of the bundle,
    at time ``at``, for ``name`` (raises VerificationError)."""
    store = Store(list(x509.load_pem_x509_certificates(certificates.ca_bundle)))
    verifier = (
        PolicyBuilder()
        .store(store)
        .time(datetime.datetime.fromtimestamp(at, datetime.UTC))
        .build_server_verifier(name)
    )
    verifier.verify(certificates.serving, [])


def test_names_of_the_service_and_extras() -> None:
    names = ServingNames.for_service(
        "svc", "ns", extra_dns_names=("svc.example",), extra_ips=("127.0.0.1", "::1")
    )
    assert names.dns_names == ("svc.ns.svc", "svc.ns.svc.cluster.local", "svc.example")
    assert names.ips == (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))
    with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6 address"):
        ServingNames.for_service("svc", "ns", extra_ips=("localhost",))


def test_a_fresh_certificate_verifies_for_the_service_names_and_the_extra_ip() -> None:
    decision = decide_at(None, NOW)
    certificates = decision.certificates
    assert decision.changes == ("created a CA and a serving certificate",)
    for name in ("hooks.ops.svc", "hooks.ops.svc.cluster.local"):
        verify(certificates, x509.DNSName(name), NOW)
    verify(certificates, x509.IPAddress(ipaddress.ip_address("127.0.0.1")), NOW)
    with pytest.raises(VerificationError):
        verify(certificates, x509.DNSName("other.ops.svc"), NOW)
    # Backdated, for clocks a little behind; a CA of ca_validity, a serving certificate of serving_validity.
    assert not_before_of(certificates.serving) == NOW - 600
    assert not_after_of(certificates.cas[0]) == NOW + 30 * DAY
    assert not_after_of(certificates.serving) == NOW + 3 * DAY
    constraints = certificates.cas[0].extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca


def test_secret_data_round_trips() -> None:
    certificates = decide_at(None, NOW).certificates
    data = certificates.secret_data()
    assert set(data) == {TLS_CERT, TLS_KEY, CA_BUNDLE, CA_KEY}
    parsed = parse_secret_data(data)
    assert parsed.secret_data() == data
    assert decide_at(parsed, NOW + 60).changes == ()


def _swap(data: dict[str, str], key: str, value: bytes) -> dict[str, str]:
    return {**data, key: base64.b64encode(value).decode()}


def test_unusable_secret_content_says_why() -> None:
    good = decide_at(None, NOW).certificates.secret_data()
    other = decide_at(None, NOW).certificates.secret_data()
    cases = {
        "it has no tls.key, ca.key": {TLS_CERT: good[TLS_CERT], CA_BUNDLE: good[CA_BUNDLE]},
        "tls.crt is not base64": {**good, TLS_CERT: "not base64!"},
        "ca.crt is not PEM certificates": _swap(good, CA_BUNDLE, b"garbage"),
        "tls.key is not an unencrypted PEM private key": _swap(
            good, TLS_KEY, b"-----BEGIN PRIVATE KEY-----\n"
        ),
        "tls.key is not the key of tls.crt": {**good, TLS_KEY: other[TLS_KEY]},
        "ca.key is not the key of the first CA of ca.crt": {**good, CA_KEY: other[CA_KEY]},
        "no CA of ca.crt signed tls.crt": {**good, CA_BUNDLE: other[CA_BUNDLE], CA_KEY: other[CA_KEY]},
    }
    for reason, data in cases.items():
        with pytest.raises(UnusableSecret, match=reason):
            parse_secret_data(data)
    # decide replaces it, saying why.
    decision = decide_at(None, NOW, unusable="it has no ca.key")
    assert decision.changes == ("replaced its content (it has no ca.key)",)


def test_serving_certificate_renewed_with_a_third_left_same_ca() -> None:
    first = decide_at(None, NOW)
    # Due at 2/3 of its 3 days (counted from its backdated notBefore).
    renew_at = NOW - 600 + (3 * DAY + 600) * 2 / 3
    assert first.next_due == pytest.approx(renew_at)
    assert decide_at(first.certificates, renew_at - 1).changes == ()
    renewed = decide_at(first.certificates, renew_at)
    assert len(renewed.changes) == 1
    assert renewed.changes[0].startswith("renewed the serving certificate")
    assert renewed.certificates.cas == first.certificates.cas
    assert renewed.certificates.serving != first.certificates.serving
    assert issued_by(renewed.certificates.serving, first.certificates.cas[0])


def test_ca_rotation_keeps_the_old_ca_and_moves_serving_once_propagated() -> None:
    first = decide_at(None, NOW).certificates
    old_ca = first.cas[0]
    ca_due = NOW - 600 + (30 * DAY + 600) * 2 / 3
    # A serving certificate (as the loop renews it) whose own renewal falls due half an hour
    # after the CA's: renew_at = issued - 600 + (3 days + 600) * 2/3.
    issued = ca_due + 1800 + 600 - (3 * DAY + 600) * 2 / 3
    state = CertificateSet(first.cas, first.ca_key, *new_serving(NAMES, old_ca, first.ca_key, issued, POLICY))
    assert decide_at(state, ca_due - 1).changes == ()
    rotated = decide_at(state, ca_due)
    assert any(change.startswith("rotated the CA") for change in rotated.changes)
    new_ca = rotated.certificates.cas[0]
    assert rotated.certificates.cas == (new_ca, old_ca)
    assert rotated.certificates.ca_bundle.count(b"BEGIN CERTIFICATE") == 2
    assert rotated.certificates.serving == state.serving
    # Its renewal falls due within the propagation hour: it waits for the end of it (with no
    # busy loop), as no client may trust the new CA yet.
    waiting = decide_at(rotated.certificates, ca_due + 1800)
    assert waiting.changes == ()
    assert waiting.next_due == pytest.approx(ca_due + 3600)
    moved = decide_at(rotated.certificates, ca_due + 3600)
    assert moved.changes[0].startswith("renewed the serving certificate")
    assert issued_by(moved.certificates.serving, new_ca)
    assert moved.certificates.cas == (new_ca, old_ca)
    # The old CA leaves the bundle when it expires, not before.
    assert decide_at(moved.certificates, not_after_of(old_ca) - 60).certificates.cas == (new_ca, old_ca)
    dropped = decide_at(moved.certificates, not_after_of(old_ca))
    assert dropped.certificates.cas == (new_ca,)
    assert "dropped an expired CA from the bundle" in dropped.changes


def test_a_year_of_passes_never_shows_an_untrusted_or_expired_certificate() -> None:
    """Step from one due time to the next (at least every 12 hours, as passes would) through
    several CA rotations: the serving certificate is always valid, signed by a CA of the bundle
    that outlives it, and a new one is signed only by a CA that has been in the bundle for the
    propagation time (the first CA excepted: it came with the first certificate)."""
    decision = decide_at(None, NOW)
    state = decision.certificates
    first_ca = state.cas[0]
    first_seen = {first_ca.fingerprint(SHA256()): NOW}
    now, steps, rotations = NOW, 0, 0
    while now < NOW + 365 * DAY:
        now = min(decision.next_due, now + DAY / 2)
        decision = decide_at(state, now)
        steps += 1
        for ca in decision.certificates.cas:
            first_seen.setdefault(ca.fingerprint(SHA256()), now)
        rotations += sum(change.startswith("rotated the CA") for change in decision.changes)
        renewed = decision.certificates.serving != state.serving
        state = decision.certificates
        assert not_before_of(state.serving) <= now < not_after_of(state.serving)
        signer = next(ca for ca in state.cas if issued_by(state.serving, ca))
        assert not_after_of(state.serving) <= not_after_of(signer)
        if renewed and signer != first_ca:
            assert now - first_seen[signer.fingerprint(SHA256())] >= 3600
        assert decision.next_due > now
    # A 30-day CA rotates with 10 days left: every 20 days.
    assert rotations >= 17
    assert steps < 1000


def test_a_certificate_not_valid_yet_is_kept_with_a_warning() -> None:
    ahead = decide_at(None, NOW + 7200).certificates
    decision = decide_at(ahead, NOW)
    assert decision.changes == ()
    assert decision.certificates == ahead
    assert len(decision.warnings) == 2
    assert "not valid before" in decision.warnings[0]
    assert "skewed" in decision.warnings[0]


def test_changed_names_reissue_the_serving_certificate_with_the_same_ca() -> None:
    first = decide_at(None, NOW).certificates
    names = ServingNames.for_service("hooks", "ops", extra_ips=("127.0.0.1", "10.0.0.7"))
    decision = decide_at(first, NOW + 60, names=names)
    assert decision.certificates.cas == first.cas
    assert decision.changes[0].startswith("issued a new serving certificate (the old one's names differ")
    verify(decision.certificates, x509.IPAddress(ipaddress.ip_address("10.0.0.7")), NOW + 60)


def test_an_expired_ca_is_replaced_with_everything() -> None:
    first = decide_at(None, NOW).certificates
    decision = decide_at(first, NOW + 31 * DAY)
    assert decision.certificates.cas[0] != first.cas[0]
    assert len(decision.certificates.cas) == 1
    assert decision.changes[0].startswith("replaced the CA, which expired at")


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="renew_when_left"):
        CertificatePolicy(renew_when_left=1.5)
    with pytest.raises(ValueError, match="ca_propagation"):
        CertificatePolicy(serving_validity=3600, ca_propagation=3600)
