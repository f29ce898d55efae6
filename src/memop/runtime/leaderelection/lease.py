"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``tools/leaderelection``.

One :class:`LeaderElector` per process campaigns for one Lease. The protocol, and what makes it
safe:

- **Local time only.** A lease held by someone else is valid until *our* monotonic time of the
  moment we last saw its record change, plus its ``leaseDurationSeconds``. The remote
  ``renewTime`` is written for humans and never compared with our clock, so skewed wall clocks
  between nodes cannot make two replicas lead at once.
- **Optimistic concurrency.** Every write is a PUT carrying the resourceVersion we read (or a
  create that fails if the Lease exists), so of two candidates racing for an expired lease
  exactly one wins; the other gets Conflict and tries again next round.
- **Stop before others may start.** The leader renews every ``retry_period``. If no renewal has
  succeeded for ``renew_deadline`` seconds since the last successful one was *sent*, it stops
  leading at once (requests in flight are abandoned at that instant). Others only take over
  ``lease_duration`` (> ``renew_deadline``) after they saw that last renewal, which was
  necessarily after we sent it.
- **Release on shutdown.** When cancelled while leading (and ``release_on_cancel``), the
  leader writes an empty holder with ``leaseDurationSeconds: 1``, so a standby takes over at
  its next attempt instead of waiting out the lease.
- **Never sooner than the server asked.** The client waits out a 429's ``Retry-After`` before
  any later request to the lease, not only before its own retry: an attempt cut short while
  it waited, and then the next attempt or the release, still wait the rest. Those waits stay
  inside each attempt's bound, so the renew deadline ends leadership on time regardless.

Where this is stricter than client-go, on purpose:

- while leading, reading a lease whose holder is anybody else (or nobody) ends leadership at
  once instead of retrying until the renew deadline: someone else may already be leading;
- every request is bounded by the injected clock (an acquire attempt by ``renew_deadline``, a
  renewal by what is left of the renew deadline, the release by ``retry_period``), instead of
  relying on the HTTP client's own timeout;
- ``on_new_leader`` is not called for an empty holder (a released lease has no leader).

Every wait uses the injected :class:`~memop.runtime.util.clock.Clock`, so tests with a FakeClock are
exact. ``leader_election_master_status{name=<lease name>}`` is 1 exactly while leading.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
import random
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from memop.runtime.client.errors import ApiError, Conflict, NotFound, TransportError
from memop.runtime.client.resources import LEASES, Resource
from memop.runtime.metrics import LEADER_ELECTION_MASTER_STATUS
from memop.runtime.util.clock import Clock, RealClock, run_until

log = logging.getLogger("memop.leaderelection")

# client-go leaderelection.JitterFactor: a candidate waits retry_period stretched by up to 1.2x
# between acquire attempts, so standbys started together do not hit the server in lockstep.
JITTER_FACTOR = 1.2

T = TypeVar("T")


def default_identity() -> str:
    """``<hostname>_<uuid4>``: unique per process even when pods share a hostname (as
    controller-runtime builds it), and readable in ``kubectl get lease``."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(seconds: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC) for epoch ``seconds``."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def check_settings(what: str, *, names: dict[str, str], seconds: dict[str, float]) -> None:
    """Raise ValueError naming the first of ``names`` that is empty, or of ``seconds`` that is not
    a positive finite number, as "<what> <label> must ..."."""
    for label, value in names.items():
        if not value:
            raise ValueError(f"{what} {label} must not be empty")
    for label, number in seconds.items():
        if not math.isfinite(number) or number <= 0:
            raise ValueError(f"{what} {label} must be a positive number of seconds, got {number}")


def check_timings(what: str, *, lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    """Raise ValueError, as "<what> ...", unless lease_duration > renew_deadline > JITTER_FACTOR x
    retry_period: a holder gives up before anyone may take its Lease over, and gets at least one
    retry after a failed renewal."""
    if lease_duration <= renew_deadline:
        raise ValueError(
            f"{what} lease duration ({lease_duration}s) must be greater than the renew deadline "
            f"({renew_deadline}s)"
        )
    if renew_deadline <= JITTER_FACTOR * retry_period:
        raise ValueError(
            f"{what} renew deadline ({renew_deadline}s) must be greater than {JITTER_FACTOR} x the "
            f"retry period ({retry_period}s)"
        )


@dataclass
class LeaderElectionConfig:
    """Which Lease to campaign for, as whom, and the timing (controller-runtime's defaults).

    lease_name / namespace: the Lease object (created on first use).
    identity: this candidate's holderIdentity; unique per process (``default_identity()``).
    lease_duration: seconds a standby waits, after it last saw the lease record change, before
        taking the lease over (15 s). Written to the lease as whole seconds (rounded up).
    renew_deadline: seconds the leader keeps trying to renew before it gives up leading (10 s).
        Must be below lease_duration, so the leader stops before anyone may take over.
    retry_period: seconds between attempts, both for standbys and for the leader's renewals
        (2 s). renew_deadline must exceed JITTER_FACTOR x retry_period, so a leader gets at
        least one retry after a failed renewal.
    release_on_cancel: on shutdown, clear the holder so a standby takes over within one
        retry period instead of one lease duration (True). Only safe when everything the
        lease protects has stopped before the elector is cancelled.
    """

    lease_name: str
    namespace: str
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def validate(self) -> None:
        """Raise ValueError, saying which setting is wrong and why, unless the config is usable."""
        check_settings(
            "leader election",
            names={
                "lease name": self.lease_name,
                "lease namespace": self.namespace,
                "identity": self.identity,
            },
            seconds={
                "lease duration": self.lease_duration,
                "renew deadline": self.renew_deadline,
                "retry period": self.retry_period,
            },
        )
        if self.lease_duration < 1:
            raise ValueError(
                f"leader election lease duration must be at least 1s (leases count whole seconds), "
                f"got {self.lease_duration}s"
            )
        check_timings(
            "leader election",
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )

    @property
    def lease_duration_seconds(self) -> int:
        """What goes into ``spec.leaseDurationSeconds``: never shorter than ``lease_duration``."""
        return math.ceil(self.lease_duration)

    def describe(self) -> str:
        return f"{self.namespace}/{self.lease_name}"


class LeadershipLost(Exception):
    """This process was leading and no longer is (renewal failed, or the lease was taken)."""


@dataclass(frozen=True)
class LeaderElectionRecord:
    """The election state a Lease's spec holds (client-go's LeaderElectionRecord).

    Times are kept as the MicroTime strings found in the lease: they are only ever written
    back or compared for equality, never interpreted against our clock.
    """

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    leader_transitions: int = 0

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> LeaderElectionRecord:
        """The record of a Lease object; absent or malformed fields read as their zero value
        (a lease without a duration is expired; one without a holder is free)."""
        spec = lease.get("spec")
        if not isinstance(spec, dict):
            spec = {}
        holder = spec.get("holderIdentity")
        acquire = spec.get("acquireTime")
        renew = spec.get("renewTime")
        return cls(
            holder_identity=holder if isinstance(holder, str) else "",
            lease_duration_seconds=_int(spec.get("leaseDurationSeconds")),
            acquire_time=acquire if isinstance(acquire, str) else None,
            renew_time=renew if isinstance(renew, str) else None,
            leader_transitions=_int(spec.get("leaseTransitions")),
        )

    def to_lease_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.leader_transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return spec


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class LeaseClient(Protocol):
    """The three calls of memop.runtime.client.client.Client the elector needs."""

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def update(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]: ...


class LeaderElector:
    """Campaigns for one Lease; :meth:`run` returns control only when leadership ends.

    Callbacks are plain functions called on the event loop; they must return quickly (start
    and stop work elsewhere, e.g. by setting events). An exception from one is logged and
    does not disturb the election.

    - ``on_started_leading()``: we just became the leader.
    - ``on_stopped_leading()``: we were leading and no longer are (lost, or shutting down).
    - ``on_new_leader(identity)``: the lease's holder changed to ``identity`` (us included).

    State for the rest of the process: ``leader_elected`` is set while leading (cleared when
    leadership ends), ``lost`` is set once leadership has ended for any reason, ``is_leader``
    is the safe test before doing leader-only work, ``leader`` the holder we last observed.
    """

    def __init__(
        self,
        client: LeaseClient,
        config: LeaderElectionConfig,
        *,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self._client = client
        self._clock: Clock = clock or RealClock()
        self._rand = rand
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._metric = LEADER_ELECTION_MASTER_STATUS.labels(config.lease_name)
        # Set when this elector becomes leader; cleared when it stops leading.
        self.leader_elected = asyncio.Event()
        # Set when this elector stops leading, for whatever reason; stays set.
        self.lost = asyncio.Event()
        # The last Lease object the server gave us: its resourceVersion guards our next PUT.
        self._lease: dict[str, Any] | None = None
        # The lease record as last read or written, and our monotonic time when it last
        # changed: a holder's claim is valid until _observed_time + its leaseDurationSeconds.
        self._observed: LeaderElectionRecord | None = None
        self._observed_time = 0.0
        # Invariant: _leading is True exactly between on_started_leading and
        # on_stopped_leading, and the metric is 1 exactly while it is True.
        self._leading = False
        # Monotonic time at which the last successful acquire/renew attempt started; while
        # leading, we stop at _last_renewed + renew_deadline unless another succeeds first.
        self._last_renewed = 0.0
        self._reported_leader = ""
        self._started = False
        # For logs, tests and debugging: completed acquire/renew attempts, and why the last
        # unsuccessful one failed.
        self.attempts = 0
        self.last_error = ""

    # Observations ----------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Whether we lead right now: becomes False at the renew deadline even if the event
        loop has not yet run the code that notices it."""
        return self._leading and self._clock.monotonic() < self._last_renewed + self.config.renew_deadline

    @property
    def leader(self) -> str:
        """The holder of the lease as last observed ("" when nobody holds it or not yet read)."""
        return self._observed.holder_identity if self._observed is not None else ""

    @property
    def observed_record(self) -> LeaderElectionRecord | None:
        """The lease record as last read or written by us."""
        return self._observed

    # Running ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign until leading, then renew until leadership ends. Call at most once.

        Raises LeadershipLost when leadership ends because renewing failed for
        ``renew_deadline`` seconds or the lease was taken. Cancelling stops the campaign;
        if we were leading and ``release_on_cancel`` is set, the lease is released first
        (best effort, bounded by ``retry_period``), then CancelledError propagates.
        """
        if self._started:
            raise RuntimeError("LeaderElector.run() may only be called once")
        self._started = True
        self._metric.set(0)
        try:
            await self._acquire()
            self._start_leading()
            await self._renew_until_lost()
        except asyncio.CancelledError:
            was_leading = self._leading
            self._stop_leading("shutting down")
            if was_leading and self.config.release_on_cancel:
                await self._release()
            raise
        except LeadershipLost as lost:
            log.error("lost leadership of lease %s: %s", self.config.describe(), lost)
            self._stop_leading(str(lost))
            raise
        finally:
            self._stop_leading("leader election ended")

    async def _acquire(self) -> None:
        """Return once we hold the lease, trying every retry_period (jittered)."""
        log.info("attempting to acquire leader lease %s...", self.config.describe())
        while True:
            deadline = self._clock.monotonic() + self.config.renew_deadline
            if await self._attempt(deadline, renewing=False):
                log.info("successfully acquired lease %s", self.config.describe())
                return
            log.debug("failed to acquire lease %s: %s", self.config.describe(), self.last_error)
            period = self.config.retry_period
            await self._clock.sleep(period + self._rand() * JITTER_FACTOR * period)

    async def _renew_until_lost(self) -> None:
        """Renew every retry_period; raise LeadershipLost when we can no longer claim to lead."""
        while True:
            await self._clock.sleep(self.config.retry_period)
            # Retry within the deadline every retry_period, as client-go's renew loop does
            # (PollImmediateUntil inside a RenewDeadline timeout); never past it.
            deadline = self._last_renewed + self.config.renew_deadline
            while True:
                if self._clock.monotonic() >= deadline:
                    raise LeadershipLost(
                        f"failed to renew lease {self.config.describe()} within "
                        f"{self.config.renew_deadline}s: "
                        f"{self.last_error or 'the last renewal took the whole deadline'}"
                    )
                if await self._attempt(deadline, renewing=True):
                    log.debug("successfully renewed lease %s", self.config.describe())
                    break
                if self.leader != self.config.identity:
                    holder = f"held by {self.leader}" if self.leader else "released by its holder"
                    raise LeadershipLost(f"lease {self.config.describe()} is now {holder}")
                log.warning("failed to renew lease %s: %s", self.config.describe(), self.last_error)
                remaining = deadline - self._clock.monotonic()
                await self._clock.sleep(min(self.config.retry_period, remaining))

    async def _attempt(self, deadline: float, *, renewing: bool) -> bool:
        """One bounded tryAcquireOrRenew; True when we hold the lease as of its write."""
        started = self._clock.monotonic()
        acquired = False
        try:
            acquired = await run_until(self._clock, self._try_acquire_or_renew(renewing=renewing), deadline)
        except TimeoutError:
            self.last_error = (
                f"no answer from the API server within {deadline - started:.3g}s"
                " (or it asked to wait longer than that: Retry-After)"
            )
            errored = True
        except Conflict as error:
            # Another candidate wrote first (or the create raced): contention, not a fault.
            self.last_error = str(error)
            errored = False
        except (ApiError, TransportError) as error:
            self.last_error = str(error)
            errored = True
        else:
            errored = False
        if errored and not renewing:
            # Loud, unlike a lease validly held by another: RBAC or connectivity needs fixing.
            log.warning("error acquiring lease %s: %s", self.config.describe(), self.last_error)
        if acquired:
            # Measured from the attempt's start: the write we made landed after that, so
            # nobody can have seen it (and started its lease_duration countdown) earlier.
            self._last_renewed = started
            self.last_error = ""
        self.attempts += 1
        self._report_transition()
        return acquired

    async def _try_acquire_or_renew(self, *, renewing: bool) -> bool:
        """client-go tryAcquireOrRenew. False when the lease is validly held by someone else
        (or, while ``renewing``, held by anyone but us); API errors propagate."""
        now = self._clock.monotonic()
        stamp = micro_time(self._clock.time())
        identity = self.config.identity
        desired = LeaderElectionRecord(
            holder_identity=identity,
            lease_duration_seconds=self.config.lease_duration_seconds,
            acquire_time=stamp,
            renew_time=stamp,
        )
        observed = self._observed
        # Fast path: we hold it and our last write is still current, so PUT straight away.
        if (
            observed is not None
            and self._lease is not None
            and observed.holder_identity == identity
            and self._observed_valid(now)
        ):
            try:
                await self._write(
                    replace(
                        desired,
                        acquire_time=observed.acquire_time,
                        leader_transitions=observed.leader_transitions,
                    )
                )
                return True
            except (ApiError, TransportError) as error:
                log.info(
                    "renewing lease %s directly failed, reading it first: %s", self.config.describe(), error
                )

        try:
            lease = await self._client.get(LEASES, self.config.lease_name, self.config.namespace)
        except NotFound:
            created = await self._client.create(LEASES, self._lease_object(desired), self.config.namespace)
            self._lease = created
            self._set_observed(LeaderElectionRecord.from_lease(created))
            return True

        self._lease = lease
        record = LeaderElectionRecord.from_lease(lease)
        if record != self._observed:
            self._set_observed(record)
        if record.holder_identity != identity:
            if renewing:
                return False
            if record.holder_identity and self._observed_valid(now):
                self.last_error = f"lease is held by {record.holder_identity} and has not yet expired"
                return False
            desired = replace(desired, leader_transitions=record.leader_transitions + 1)
        else:
            desired = replace(
                desired, acquire_time=record.acquire_time, leader_transitions=record.leader_transitions
            )
        await self._write(desired)
        return True

    async def _write(self, record: LeaderElectionRecord) -> None:
        """PUT ``record`` over the last Lease we saw (Conflict if it changed since)."""
        assert self._lease is not None, "a lease is read or created before it is written"
        lease = copy.deepcopy(self._lease)
        lease["spec"] = record.to_lease_spec()
        written = await self._client.update(LEASES, lease)
        self._lease = written
        self._set_observed(LeaderElectionRecord.from_lease(written))

    def _lease_object(self, record: LeaderElectionRecord) -> dict[str, Any]:
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.config.lease_name, "namespace": self.config.namespace},
            "spec": record.to_lease_spec(),
        }

    async def _release(self) -> None:
        """Clear the holder if it is still us; log, never raise, on failure or timeout."""
        deadline = self._clock.monotonic() + self.config.retry_period
        try:
            released = await run_until(self._clock, self._write_release(), deadline)
        except TimeoutError:
            log.warning(
                "failed to release lease %s: no answer within %ss (or the API server asked to "
                "wait longer than that: Retry-After)",
                self.config.describe(),
                self.config.retry_period,
            )
        except (ApiError, TransportError) as error:
            log.warning("failed to release lease %s: %s", self.config.describe(), error)
        else:
            if released:
                log.info("released lease %s", self.config.describe())

    async def _write_release(self) -> bool:
        # Read first: our cached resourceVersion is stale if a renewal was cut short after
        # the server applied it, and a lease someone else holds is not ours to clear. A
        # renewal cut short may also be applied after our read: its Conflict means read again.
        while True:
            self._lease = await self._client.get(LEASES, self.config.lease_name, self.config.namespace)
            record = LeaderElectionRecord.from_lease(self._lease)
            if record.holder_identity != self.config.identity:
                return False
            stamp = micro_time(self._clock.time())
            try:
                await self._write(
                    LeaderElectionRecord(
                        holder_identity="",
                        lease_duration_seconds=1,
                        acquire_time=stamp,
                        renew_time=stamp,
                        leader_transitions=record.leader_transitions,
                    )
                )
            except Conflict:
                continue
            return True

    # State -----------------------------------------------------------------------------

    def _observed_valid(self, now: float) -> bool:
        observed = self._observed
        return observed is not None and self._observed_time + observed.lease_duration_seconds > now

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_time = self._clock.monotonic()

    def _report_transition(self) -> None:
        holder = self.leader
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if not holder:
            log.info("lease %s has no holder", self.config.describe())
            return
        log.info("new leader elected for lease %s: %s", self.config.describe(), holder)
        if self._on_new_leader is not None:
            _call(self._on_new_leader, holder)

    def _start_leading(self) -> None:
        self._leading = True
        self._metric.set(1)
        self.leader_elected.set()
        if self._on_started_leading is not None:
            _call(self._on_started_leading)

    def _stop_leading(self, reason: str) -> None:
        if not self._leading:
            return
        self._leading = False
        self._metric.set(0)
        self.leader_elected.clear()
        self.lost.set()
        log.info("stopped leading lease %s: %s", self.config.describe(), reason)
        if self._on_stopped_leading is not None:
            _call(self._on_stopped_leading)


def _call(callback: Callable[..., None], *args: Any) -> None:
    try:
        callback(*args)
    except Exception:
        log.exception("leader election callback %r failed", callback)
