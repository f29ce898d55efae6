"""Self-managed webhook certificates, for clusters without cert-manager: a self-signed CA and a
serving certificate kept in a Secret, written to the webhook server's cert dir, and the CA
bundle kept in the ``caBundle`` of the operator's webhook configurations and CRDs.

:class:`SelfManagedCertificates` runs in every replica (each serves webhooks). Each pass
(:meth:`~SelfManagedCertificates.sync`), every ``check_interval`` and whenever something falls
due:

1. reads the Secret and decides (:func:`memop.runtime.webhook.certs.decide`) whether anything
   must be created, renewed or replaced. Replicas agree through the API server's optimistic
   concurrency alone: a Secret is created (AlreadyExists: someone was first, read theirs) or
   replaced by an update carrying the resourceVersion read (Conflict: someone was first, read
   theirs and decide again). So two CAs are never in use beyond one pass of the slower
   replica;
2. writes ``tls.key`` then ``tls.crt`` into the cert dir, each whole (a temporary file renamed
   over the old one), only when they changed: a reload triggered by ``tls.crt`` finds the
   matching key already there; a reload between the two renames reads a new key with the old
   certificate, which fails to load, and the server keeps its pair until the next change (as
   controller-runtime's certwatcher does);
3. sets the CA bundle into the ``caBundle`` of every webhook of the named webhook
   configurations (read, change, update with the resourceVersion, again on Conflict) and of
   the named CRDs' conversion webhook (a merge patch conditional on the resourceVersion), when
   it differs: so a caBundle someone reset (a ``kubectl apply`` of manifests without it) is
   set again at the next pass. An object that does not exist yet is looked for again later.

Failures never end :meth:`~SelfManagedCertificates.run`: each problem is logged in one line
when it first appears or changes (a missing RBAC rule names the rule), then retried with
backoff (1 s doubling up to ``check_interval``). :attr:`~SelfManagedCertificates.ready` turns
true once a certificate is in the cert dir; the webhook server waits for it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import enum
import functools
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from memop.runtime.api.permissions import Rule, Scope
from memop.runtime.client.client import Client
from memop.runtime.client.errors import ApiError, Conflict, Forbidden, NotFound, TransportError
from memop.runtime.client.resources import CUSTOM_RESOURCE_DEFINITIONS, SECRETS, Resource
from memop.runtime.util.backoff import Backoff
from memop.runtime.util.clock import Clock, RealClock
from memop.runtime.webhook.certs import (
    SECRET_TYPE,
    CertificatePolicy,
    CertificateSet,
    ServingNames,
    UnusableSecret,
    decide,
    parse_secret_data,
)

log = logging.getLogger("memop.webhook.certs")

T = TypeVar("T")

VALIDATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
MUTATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)

# Kubebuilder's name for the webhook's certificate Secret (config/certmanager), so both modes
# can share a Deployment's volume definition.
DEFAULT_SECRET_NAME = "webhook-server-cert"
# Attempts of a read-modify-write that meets Conflicts (client-go's retry.DefaultRetry: 5).
CONFLICT_ATTEMPTS = 5
# The first wait after a failed pass; it doubles up to check_interval.
FIRST_RETRY_DELAY = 1.0
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"

_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch"}


class _Injected(enum.Enum):
    CHANGED = "changed"
    UNCHANGED = "unchanged"
    NO_WEBHOOK = "no-webhook"  # a CRD without a conversion webhook: nothing to set


@dataclass(frozen=True)
class SyncResult:
    """What a pass achieved."""

    certificates: CertificateSet
    # Every named object holds the bundle (False: one is missing or could not be written).
    complete: bool
    # Seconds until a certificate falls due (a renewal, a propagation's end, an old CA to drop).
    due_in: float


class SelfManagedCertificates:
    """Keeps the webhook's certificates in a Secret, the cert dir and every caBundle (see the
    module docstring).

    Constructor arguments:

    - ``client``: the manager's client;
    - ``namespace``, ``service``: where the webhook Service is; the serving certificate is for
      ``<service>.<namespace>.svc`` and ``<service>.<namespace>.svc.cluster.local``;
    - ``cert_dir``: where ``tls.crt`` and ``tls.key`` are written (``--webhook-cert-dir``),
      created if missing;
    - ``secret``: the Secret's name in ``namespace`` (``webhook-server-cert``, Kubebuilder's);
    - ``validating_webhook_configurations``, ``mutating_webhook_configurations``, ``crds``:
      the names of the objects whose caBundle is kept (every webhook of a configuration; a
      CRD's ``spec.conversion.webhook.clientConfig``);
    - ``extra_dns_names``, ``extra_ips``: more names for the serving certificate (a webhook
      the API server calls on loopback needs ``127.0.0.1``); a malformed IP is a ValueError;
    - ``policy``: lifetimes and renewal thresholds (10-year CA, 1-year serving certificate,
      renewed with a third left: :class:`~memop.runtime.webhook.certs.CertificatePolicy`);
    - ``check_interval``: the longest time between two passes (30 s): how long a caBundle
      someone reset stays wrong, and how often each replica reads the Secret and the objects
      (a GET each);
    - ``clock``: renewals, backoff and the pause between passes (tests pass a FakeClock).
    """

    def __init__(
        self,
        client: Client,
        *,
        namespace: str,
        service: str,
        cert_dir: str | Path,
        secret: str = DEFAULT_SECRET_NAME,
        validating_webhook_configurations: Iterable[str] = (),
        mutating_webhook_configurations: Iterable[str] = (),
        crds: Iterable[str] = (),
        extra_dns_names: Iterable[str] = (),
        extra_ips: Iterable[str] = (),
        policy: CertificatePolicy | None = None,
        check_interval: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        if check_interval <= 0:
            raise ValueError("check_interval must be positive")
        named = {
            "validating_webhook_configurations": validating_webhook_configurations,
            "mutating_webhook_configurations": mutating_webhook_configurations,
            "crds": crds,
            "extra_dns_names": extra_dns_names,
            "extra_ips": extra_ips,
        }
        for argument, value in named.items():
            if isinstance(value, str):
                raise TypeError(f"{argument} takes names, not one string: ({value!r},)")
        self.client = client
        self.namespace = namespace
        self.service = service
        self.secret = secret
        self.cert_dir = Path(cert_dir)
        self.names = ServingNames.for_service(service, namespace, extra_dns_names, extra_ips)
        self.policy = policy or CertificatePolicy()
        self.check_interval = check_interval
        self._clock: Clock = clock or RealClock()
        self._backoff = Backoff(
            initial=FIRST_RETRY_DELAY, maximum=check_interval, jitter=0.1, clock=self._clock
        )
        # The objects whose caBundle is kept, in the order they are patched.
        self._targets: tuple[tuple[Resource, str], ...] = (
            *((VALIDATING_WEBHOOK_CONFIGURATIONS, name) for name in validating_webhook_configurations),
            *((MUTATING_WEBHOOK_CONFIGURATIONS, name) for name in mutating_webhook_configurations),
            *((CUSTOM_RESOURCE_DEFINITIONS, name) for name in crds),
        )
        # Set once a certificate was written to cert_dir; never cleared (a later failure leaves
        # the files, which stay valid for months).
        self._ready = asyncio.Event()
        # What the last successful pass used.
        self.certificates: CertificateSet | None = None
        # Problem key -> the message last logged for it, so a repeated failure logs once.
        self._reported: dict[str, str] = {}
        # Wall-clock time the last decision said something falls due.
        self._decision_due = 0.0
        # Passes run() has completed, failed ones included (tests wait on it).
        self.passes = 0

    @property
    def cert_file(self) -> Path:
        return self.cert_dir / CERT_FILE

    @property
    def key_file(self) -> Path:
        return self.cert_dir / KEY_FILE

    @property
    def ready(self) -> bool:
        """Whether a certificate is in the cert dir (the webhook server may start)."""
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        """Return once :attr:`ready` is true."""
        await self._ready.wait()

    @property
    def ca_bundle(self) -> bytes | None:
        """The PEM bundle the last pass set into the caBundles (None before the first)."""
        return self.certificates.ca_bundle if self.certificates else None

    # --- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Pass after pass until cancelled. A failed pass is logged (once per distinct problem)
        and retried with backoff; so is a pass that left an object without the bundle."""
        while True:
            try:
                result = await self.sync()
            except (ApiError, TransportError, OSError) as error:
                self._report("pass", logging.ERROR, self._describe_secret_failure(error))
                delay = self._backoff.next_delay()
            else:
                self._resolve(
                    "pass", f"the webhook certificate is in Secret {self.namespace}/{self.secret} again"
                )
                if result.complete:
                    self._backoff.reset()
                    delay = result.due_in
                else:
                    delay = self._backoff.next_delay()
            finally:
                self.passes += 1
            await self._clock.sleep(min(delay, self.check_interval))

    async def sync(self) -> SyncResult:
        """One pass: the Secret, the files, the caBundles. Raises what prevented the Secret
        from being read or written, or the files from being written (OSError); an object that
        could not get the bundle is logged and counted in ``complete``."""
        certificates = await self._ensure_secret()
        self._write_files(certificates)
        self.certificates = certificates
        self._ready.set()
        complete = await self._inject_all(certificates.ca_bundle)
        due_in = max(0.0, self._decision_due - self._clock.time())
        return SyncResult(certificates, complete, due_in)

    # --- the Secret ------------------------------------------------------------------------------

    async def _ensure_secret(self) -> CertificateSet:
        return await _retry_on_conflict(self._secret_once)

    async def _secret_once(self) -> CertificateSet:
        """Read the Secret and make it right. Conflict (AlreadyExists included) when another
        replica wrote it first: the caller reads again and uses what it wrote."""
        where = f"Secret {self.namespace}/{self.secret}"
        try:
            secret: dict[str, Any] | None = await self.client.get(SECRETS, self.secret, self.namespace)
        except NotFound:
            secret = None
        current, unusable = None, None
        if secret is not None:
            try:
                current = parse_secret_data(secret.get("data"))
            except UnusableSecret as error:
                unusable = str(error)
        now = self._clock.time()
        decision = decide(
            current,
            common_name=f"{self.service}.{self.namespace}-ca",
            names=self.names,
            now=now,
            policy=self.policy,
            unusable=unusable,
        )
        self._decision_due = decision.next_due
        if decision.warnings:
            self._report("skew", logging.WARNING, f"{where}: " + "; ".join(decision.warnings))
        else:
            self._resolve("skew")
        if not decision.changes:
            return decision.certificates
        data = decision.certificates.secret_data()
        if secret is None:
            await self.client.create(
                SECRETS,
                {
                    "metadata": {
                        "name": self.secret,
                        "namespace": self.namespace,
                        "labels": {"app.kubernetes.io/managed-by": "memop"},
                    },
                    "type": SECRET_TYPE,
                    "data": data,
                },
            )
        else:
            # The resourceVersion read stays in the metadata: the update fails with Conflict
            # if anyone wrote the Secret since. Its type is kept (it is immutable).
            await self.client.update(SECRETS, {**secret, "data": data})
        level = logging.WARNING if unusable else logging.INFO
        prefix = f"{where} could not be used ({unusable}): " if unusable else f"{where}: "
        log.log(level, "%s%s", prefix, "; ".join(decision.changes))
        return decision.certificates

    def _describe_secret_failure(self, error: BaseException) -> str:
        where = f"Secret {self.namespace}/{self.secret}"
        if isinstance(error, OSError):
            return f"cannot write the webhook certificate into {self.cert_dir}: {error}; retrying"
        if isinstance(error, Forbidden):
            verb = _VERBS.get(error.method, error.method.lower() or "get")
            return (
                f"cannot {verb} {where}: the operator's Role in {self.namespace} needs the rule "
                f'apiGroups [""] resources [secrets] verbs [{verb}] (webhook certificates); retrying'
            )
        if isinstance(error, Conflict):
            return f"{where} kept changing while being written ({error}); retrying"
        return f"cannot read or write {where}: {error}; retrying"

    # --- the files ---------------------------------------------------------------------------------

    def _write_files(self, certificates: CertificateSet) -> None:
        """The key first: a server reloading when tls.crt changes then finds its key there."""
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        wrote = False
        for path, content, mode in (
            (self.key_file, certificates.key_pem, 0o600),
            (self.cert_file, certificates.cert_pem, 0o644),
        ):
            if _read(path) != content:
                write_atomically(path, content, mode)
                wrote = True
        if wrote:
            log.info("wrote the webhook serving certificate into %s", self.cert_dir)

    # --- the caBundles ---------------------------------------------------------------------------

    async def _inject_all(self, bundle: bytes) -> bool:
        complete = True
        for res, name in self._targets:
            key = f"{res.kind} {name}"
            try:
                injected = await _retry_on_conflict(functools.partial(self._inject, res, name, bundle))
            except NotFound:
                complete = False
                self._report(
                    key, logging.INFO, f"{key} does not exist (yet): its caBundle is set once it does"
                )
            except Forbidden as error:
                complete = False
                verb = _VERBS.get(error.method, "get")
                self._report(
                    key,
                    logging.ERROR,
                    f"cannot {verb} {key}: the operator's ClusterRole needs the rule apiGroups "
                    f"[{res.group}] resources [{res.plural}] verbs [{verb}] (webhook caBundle); retrying",
                )
            except (ApiError, TransportError) as error:
                complete = False
                self._report(key, logging.WARNING, f"cannot set the caBundle of {key}: {error}; retrying")
            else:
                if injected is _Injected.NO_WEBHOOK:
                    self._report(
                        key,
                        logging.WARNING,
                        f"{key} has no conversion webhook (spec.conversion.strategy is not Webhook): "
                        "no caBundle to set",
                    )
                    continue
                self._resolve(key)
                if injected is _Injected.CHANGED:
                    log.info("set the caBundle of %s", key)
        return complete

    async def _inject(self, res: Resource, name: str, bundle: bytes) -> _Injected:
        if res is CUSTOM_RESOURCE_DEFINITIONS:
            return await self._inject_crd(name, bundle)
        obj = await self.client.get(res, name)
        changed = False
        for webhook in obj.get("webhooks") or ():
            client_config = webhook.setdefault("clientConfig", {})
            if _decoded(client_config.get("caBundle")) != bundle:
                client_config["caBundle"] = _b64(bundle)
                changed = True
        if not changed:
            return _Injected.UNCHANGED
        # Every webhook is sent back as read, the resourceVersion with them: a concurrent edit
        # of the list is a Conflict and is read again, never overwritten.
        await self.client.update(res, obj)
        return _Injected.CHANGED

    async def _inject_crd(self, name: str, bundle: bytes) -> _Injected:
        crd = await self.client.get(CUSTOM_RESOURCE_DEFINITIONS, name)
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") != "Webhook":
            return _Injected.NO_WEBHOOK
        client_config = (conversion.get("webhook") or {}).get("clientConfig") or {}
        if _decoded(client_config.get("caBundle")) == bundle:
            return _Injected.UNCHANGED
        patch = {
            # Conditional: a CRD changed meanwhile (its strategy set back to None, say) is read again.
            "metadata": {"resourceVersion": crd["metadata"]["resourceVersion"]},
            "spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": _b64(bundle)}}}},
        }
        await self.client.patch(CUSTOM_RESOURCE_DEFINITIONS, name, patch)
        return _Injected.CHANGED

    # --- logging once -----------------------------------------------------------------------------

    def _report(self, key: str, level: int, message: str) -> None:
        """Log ``message`` unless it is what was last logged for ``key``."""
        if self._reported.get(key) != message:
            self._reported[key] = message
            log.log(level, "%s", message)

    def _resolve(self, key: str, message: str | None = None) -> None:
        """``key``'s problem is gone: say so (when ``message`` is given), and log it anew if it comes back."""
        if self._reported.pop(key, None) is not None and message:
            log.info("%s", message)


def self_managed_certificate_rules(
    *, validating: bool = True, mutating: bool = True, conversion: bool = True
) -> tuple[Rule, ...]:
    """What :class:`SelfManagedCertificates` sends: the Secret in the operator's namespace, and
    the webhook configurations and CRDs it keeps the caBundle of (only the kinds it is given).

    The cluster-scoped rules are in :data:`Scope.WATCHED`, which a cluster-wide install grants
    through its ClusterRole; a namespaced install needs them in a ClusterRole too.
    """
    why = "webhook certificates (self-managed)"
    rules = [
        Rule("", "secrets", "get", Scope.OPERATOR, f"{why}: read the CA and serving certificate"),
        Rule("", "secrets", "create", Scope.OPERATOR, f"{why}: the first replica stores them"),
        Rule("", "secrets", "update", Scope.OPERATOR, f"{why}: renewal (with the resourceVersion read)"),
    ]
    for wanted, res in (
        (validating, VALIDATING_WEBHOOK_CONFIGURATIONS),
        (mutating, MUTATING_WEBHOOK_CONFIGURATIONS),
    ):
        if wanted:
            rules += [
                Rule(res.group, res.plural, "get", Scope.WATCHED, f"{why}: read the webhooks' caBundle"),
                Rule(res.group, res.plural, "update", Scope.WATCHED, f"{why}: set the webhooks' caBundle"),
            ]
    if conversion:
        crds = CUSTOM_RESOURCE_DEFINITIONS
        rules += [
            Rule(crds.group, crds.plural, "get", Scope.WATCHED, f"{why}: read the conversion caBundle"),
            Rule(crds.group, crds.plural, "patch", Scope.WATCHED, f"{why}: set the conversion caBundle"),
        ]
    return tuple(rules)


def write_atomically(path: Path, content: bytes, mode: int) -> None:
    """Replace ``path`` by ``content`` at once: a reader sees the old file or the new one, whole."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as file:
            os.fchmod(file.fileno(), mode)
            file.write(content)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


async def _retry_on_conflict(operation: Callable[[], Awaitable[T]]) -> T:
    """client-go's retry.RetryOnConflict: run ``operation`` (a read, a change, a conditional
    write) again at once after a Conflict, up to CONFLICT_ATTEMPTS times. No pause: a Conflict
    means the other write is done, so the next read sees it."""
    retrying = AsyncRetrying(
        retry=retry_if_exception_type(Conflict), stop=stop_after_attempt(CONFLICT_ATTEMPTS), reraise=True
    )
    return await retrying(operation)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _decoded(value: object) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
