"""Membership: replicas find each other through Leases and split the ring's shards between them.

Two kinds of ``coordination.k8s.io/v1`` Lease, labelled ``sharding.memop.dev/group=<group>``
(``kubectl get leases -l sharding.memop.dev/group=memop``):

- a **member** Lease per replica (``<group>-member-<identity>``), renewed every retry period like
  a leader's. It says the replica is alive and how many shards its ring has;
- a **shard** Lease per shard (``<group>-shard-<s>-of-<n>``), whose ``holderIdentity`` names the
  replica working on that shard, or nobody. It is written only when a shard changes hands.

Every retry period each replica renews its member Lease, lists the group's Leases, computes
:func:`~memop.runtime.sharding.ring.assign` from the live members and the holders, and acts on
the difference:

- **Giving up** a shard assigned elsewhere: the listener stops taking its keys, lets its
  in-flight reconciles finish and drops it from the queue (:meth:`ShardListener.releasing`);
  only then does the replica clear the holder. That write is the hand-over's acknowledgement.
- **Taking** a shard assigned here: only when its Lease names nobody, or a member that is no
  longer live; a PUT with the resourceVersion read, so of two replicas racing, one wins.
- A member is live until *our* monotonic time of the moment we first saw its Lease's current
  version, plus the lease duration (leader election's rule: remote timestamps are never
  compared with our clock). Besides the rounds' LISTs, a watch on the group's Leases sees each
  renewal as it is written: without it a renewal was only seen at our next round, up to a retry
  period late, and a dead member's shards moved that much later (a failover measured at 0.1 to
  2.4 s past "lease duration + 3 s" on a saturated server). The watch only makes us see a
  version earlier; taking a shard still needs a round's LIST to show the member's Lease
  unchanged for the lease duration, and a PUT with the shard Lease's resourceVersion.
- A replica that cannot renew for ``renew_deadline`` (shorter than the lease duration) stops
  working on every shard at once and :meth:`ShardMembership.run` raises
  :class:`MembershipLost`: the others may take its shards once the lease duration has passed.
  So does a replica that finds one of its shards held by another: it was taken for dead.
- On shutdown (:meth:`ShardMembership.leave`, after the controllers stopped), the replica clears
  the holder of its shards and deletes its member Lease, so the others take over at their next
  round instead of after a lease duration.

A group with no working member (a first install, or every replica restarted at once) waits
``initial_join_delay`` (one retry period by default) from its join before a replica takes its
first shard, as Kafka's ``group.initial.rebalance.delay.ms``: replicas started together are a
moment apart, and the first to list the Leases would otherwise see only itself, take every
shard, list and queue every object, then hand most of them over a round later. A replica
joining a group where a live member works on shards (a scale-up, a rolling update, a restart
of one) takes its share at once.

Replicas whose rings have different numbers of shards would own overlapping ranges: while a
live member's ring differs from ours (a rolling update that changed ``--shards``), we take no
shard and say so; the old replicas' shards are taken once they are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import re
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memop.runtime import metrics
from memop.runtime.cache.labels import Selector
from memop.runtime.cache.reflector import Reflector
from memop.runtime.cache.store import ObjectStore, resource_version
from memop.runtime.client.errors import AlreadyExists, ApiError, Conflict, NotFound, TransportError
from memop.runtime.client.resources import LEASES, Resource
from memop.runtime.leaderelection.lease import (
    JITTER_FACTOR,
    check_settings,
    check_timings,
    default_identity,
    micro_time,
)
from memop.runtime.sharding.ring import Ring, assign
from memop.runtime.sharding.selector import format_bound
from memop.runtime.util.clock import Clock, RealClock, run_until
from memop.runtime.util.tasks import cancel_and_wait

__all__ = [
    "GROUP_LABEL",
    "ROLE_LABEL",
    "MembershipLost",
    "ShardListener",
    "ShardMembership",
    "ShardingConfig",
]

log = logging.getLogger("memop.sharding")

GROUP_LABEL = "sharding.memop.dev/group"
ROLE_LABEL = "sharding.memop.dev/role"
SHARDS_ANNOTATION = "sharding.memop.dev/shards"
RANGE_ANNOTATION = "sharding.memop.dev/range"
MEMBER = "member"
SHARD = "shard"
# How long past a member's expiry the round that takes its shards runs (clock granularity).
EXPIRY_MARGIN = 0.05
# Versions of one Lease whose first sighting is kept: the current one and a few the watch saw
# before a LIST that was already under way returned an older one.
_VERSIONS_KEPT = 4


@dataclass
class ShardingConfig:
    """Which group of Leases to join, as whom, with how many shards, and the timing.

    group: the Leases' name prefix and ``sharding.memop.dev/group`` label; replicas of one
        operator share it, two operators in one namespace need two groups.
    namespace: where the Leases live (the operator's own namespace).
    identity: this replica's name in the Leases; unique per process (``default_identity()``).
    shards: how many equal parts the hash space has (a power of two, 1 to 256): the most
        replicas that can share the work, and the finest rebalancing step. 16 by default.
    lease_duration / renew_deadline / retry_period: as leader election's (15, 10, 2 s).
    filtering_check_period: how often the manager asks the API server again whether it filters
        by ``shardSelector`` (its feature gate can change with a restart), in seconds (60).
    initial_join_delay: how long a replica that finds no member working waits from its join
        for the replicas starting with it, before it takes a shard (2 s, a retry period); 0 takes
        at once (one replica, as in tests).
    """

    group: str
    namespace: str
    identity: str = field(default_factory=default_identity)
    shards: int = 16
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    filtering_check_period: float = 60.0
    initial_join_delay: float = 2.0

    def validate(self) -> None:
        """Raise ValueError, saying which setting is wrong and why, unless the config is usable."""
        check_settings(
            "sharding",
            names={"group": self.group, "lease namespace": self.namespace, "identity": self.identity},
            seconds={
                "lease duration": self.lease_duration,
                "renew deadline": self.renew_deadline,
                "retry period": self.retry_period,
                "filtering check period": self.filtering_check_period,
            },
        )
        if not _DNS_LABEL.fullmatch(self.group) or len(self.group) > 40:
            raise ValueError(
                f"sharding group {self.group!r} must be a DNS label of at most 40 characters "
                "(lowercase letters, digits and '-')"
            )
        if not math.isfinite(self.initial_join_delay) or self.initial_join_delay < 0:
            raise ValueError(
                f"sharding initial join delay must be 0 or a positive number of seconds, got "
                f"{self.initial_join_delay}"
            )
        Ring(self.shards)
        check_timings(
            "sharding",
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )

    @property
    def member_lease(self) -> str:
        return member_lease_name(self.group, self.identity)

    def shard_lease(self, shard: int) -> str:
        return f"{self.group}-shard-{shard}-of-{self.shards}"


def member_lease_name(group: str, identity: str) -> str:
    """``<group>-member-<identity>``, the identity folded into what a Lease name allows."""
    folded = re.sub(r"[^a-z0-9.-]+", "-", identity.lower()).strip("-.") or "replica"
    return f"{group}-member-{folded}"[:253].rstrip("-.")


class MembershipLost(Exception):
    """This replica can no longer claim its shards (renewal failed, or a shard was taken)."""


class ShardListener(Protocol):
    """What the membership drives: the work on each shard (the manager's controllers and cache)."""

    async def acquired(self, shards: Sequence[int]) -> None:
        """Start working on ``shards`` (those taken in one round, together: one relist where
        the replica filters itself): watch them, queue their objects once. Return quickly."""
        ...

    async def releasing(self, shard: int) -> None:
        """Stop working on ``shard``: take no more of its keys, drop the queued ones, return once
        its in-flight reconciles have finished (they are cancelled if membership is lost)."""
        ...

    def lost(self) -> None:
        """Membership is lost: stop working on every shard at once, finishing nothing."""
        ...


@dataclass
class _Seen:
    """A Lease as last listed, and our monotonic time when we first saw that version of it."""

    lease: dict[str, Any]
    version: str
    changed_at: float


class ShardMembership:
    """Joins the group and keeps this replica's shards; see the module docstring.

    ``owned`` is the set of shards this replica works on right now (acquired and not being
    released); ``joined`` is set after the first round that renewed and listed.
    """

    def __init__(
        self,
        client: Any,
        config: ShardingConfig,
        listener: ShardListener,
        *,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        config.validate()
        self.config = config
        self.ring = Ring(config.shards)
        self._client = client
        self._listener = listener
        self._clock: Clock = clock or RealClock()
        self._rand = rand
        self.owned: set[int] = set()
        self.joined = asyncio.Event()
        self._renewed = asyncio.Event()  # set by the first successful renewal
        self.members: tuple[str, ...] = ()
        # Completed rounds, for tests and debugging.
        self.rounds = 0
        self._releasing: dict[int, asyncio.Task[None]] = {}
        self._seen: dict[str, _Seen] = {}
        # Lease name -> {resourceVersion: our monotonic time when the LIST or the watch first
        # showed it}, so a version the watch saw counts from then when a LIST later shows it.
        self._first_seen: dict[str, dict[str, float]] = {}
        self._member: dict[str, Any] | None = None
        self._last_renewed = 0.0
        self._waiting_since: dict[int, float] = {}
        self._assignment: dict[int, str] = {}
        self._blocked_by = ""
        # Our monotonic time at the first renewal of our member Lease, and until when a round
        # waits for replicas joining with us (None: not waiting).
        self._joined_at: float | None = None
        self._joiners_until: float | None = None
        group = config.group
        self._m_owned = metrics.SHARDS_OWNED.labels(group)
        self._m_members = metrics.SHARDING_MEMBERS.labels(group)
        self._m_changes = metrics.SHARD_RING_CHANGES.labels(group)
        self._m_handover = metrics.SHARD_HANDOVER_SECONDS.labels(group)
        self._m_owned.set(0)
        metrics.SHARDS.labels(group).set(config.shards)

    # -- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Take part in the group until cancelled, or until membership is lost
        (:class:`MembershipLost`, after the listener was told).

        Renewing and acting run apart, as a leader's renewals run apart from its work: taking
        shards (and starting their watches) may take a while on a busy process, and must never
        delay the renewal that keeps every shard of ours ours.
        """
        renewing = asyncio.create_task(self._renew_loop(), name="sharding-renew")
        acting = asyncio.create_task(self._act_loop(), name="sharding-act")
        watching = asyncio.create_task(self._watcher().run(), name="sharding-watch")
        try:
            done, _ = await asyncio.wait({renewing, acting}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        except MembershipLost as lost:
            log.error("lost sharding membership of group %s: %s", self.config.group, lost)
            self._drop_all()
            raise
        finally:
            await cancel_and_wait((renewing, acting, watching))

    def _watcher(self) -> Reflector:
        """A reflector of the group's Leases that notes when each version is first seen; it
        retries, resumes and relists on its own, and never raises on API failures."""
        selector = Selector.from_validated_set({GROUP_LABEL: self.config.group})
        return Reflector(
            self._client,
            LEASES,
            ObjectStore(LEASES),
            self._on_watched,
            namespace=self.config.namespace,
            label_selector=selector,
            clock=self._clock,
        )

    def _on_watched(self, _type: str, lease: dict[str, Any], _old: dict[str, Any] | None) -> None:
        self._sighted(lease)

    def _sighted(self, lease: dict[str, Any]) -> float:
        """Our monotonic time when we first saw this version of ``lease`` (now, if now is first)."""
        name = str((lease.get("metadata") or {}).get("name") or "")
        versions = self._first_seen.setdefault(name, {})
        version = resource_version(lease)
        if version not in versions:
            versions[version] = self._clock.monotonic()
            while len(versions) > _VERSIONS_KEPT:
                del versions[next(iter(versions))]
        return versions[version]

    async def _pause(self) -> None:
        period = self.config.retry_period
        await self._clock.sleep(period * (1 + self._rand() * (JITTER_FACTOR - 1)))

    async def _renew_loop(self) -> None:
        while True:
            self._check_deadline()
            if await self._renew():
                self._renewed.set()
            await self._pause()

    async def _act_loop(self) -> None:
        await self._renewed.wait()
        self._joined_at = self._clock.monotonic()
        while True:
            await self._round()
            await self._pause_acting()

    async def _pause_acting(self) -> None:
        """A retry period, or less: until the next other member's lease runs out, or our wait
        for replicas joining with us ends, so that shards are taken then, not up to a retry
        period later."""
        period = self.config.retry_period * (1 + self._rand() * (JITTER_FACTOR - 1))
        for wake in (self._next_expiry(), self._joiners_until):
            if wake is not None:
                # Just past it: the round must find the member no longer live, the wait over.
                period = min(period, max(0.0, wake - self._clock.monotonic()) + EXPIRY_MARGIN)
        await self._clock.sleep(period)

    def _next_expiry(self) -> float | None:
        """When the first other live member stops being live unless it renews (monotonic)."""
        ends = [
            end
            for identity, end in self._member_ends().items()
            if identity != self.config.identity and end > self._clock.monotonic()
        ]
        return min(ends, default=None)

    async def _round(self) -> None:
        try:
            self._check_deadline()
            leases = await self._list()
            if leases is None:
                return
            self._observe(leases)
            await self._act()
            self.joined.set()
        finally:
            self.rounds += 1

    def _check_deadline(self) -> None:
        if (
            self._member is not None
            and self._clock.monotonic() >= self._last_renewed + self.config.renew_deadline
        ):
            raise MembershipLost(
                f"could not renew Lease {self.config.namespace}/{self.config.member_lease} within "
                f"{self.config.renew_deadline}s"
            )

    def _deadline(self) -> float:
        """Requests of a round end where our claim ends (or one renew deadline from now, before
        the first renewal)."""
        if self._member is None:
            return self._clock.monotonic() + self.config.renew_deadline
        return self._last_renewed + self.config.renew_deadline

    async def _bounded(self, work: Coroutine[Any, Any, Any], what: str, deadline: float | None = None) -> Any:
        """``work``'s result, or None (logged) when it failed or did not answer by ``deadline``
        (default: where our claim ends; past it, MembershipLost)."""
        try:
            return await run_until(self._clock, work, self._deadline() if deadline is None else deadline)
        except TimeoutError:
            if deadline is None:
                self._check_deadline()
            log.warning("sharding: no answer to %s in time", what)
        except Conflict:
            log.debug("sharding: %s conflicted; next round reads again", what)
        except (ApiError, TransportError) as error:
            log.warning("sharding: %s failed: %s", what, error)
        return None

    # -- the member lease ------------------------------------------------------------------

    async def _renew(self) -> bool:
        started = self._clock.monotonic()
        written = await self._bounded(self._write_member(), "renewing the member Lease")
        if written is None:
            return False
        self._member = written
        self._last_renewed = started
        return True

    async def _write_member(self) -> dict[str, Any]:
        config = self.config
        now = micro_time(self._clock.time())
        if self._member is None:
            lease = self._lease(config.member_lease, MEMBER, {SHARDS_ANNOTATION: str(config.shards)})
            lease["spec"] = {
                "holderIdentity": config.identity,
                "leaseDurationSeconds": _whole_seconds(config.lease_duration),
                "acquireTime": now,
                "renewTime": now,
            }
            try:
                return dict(await self._client.create(LEASES, lease, config.namespace))
            except AlreadyExists:
                # A Lease of ours from a try whose answer we lost: take it as it is.
                current = dict(await self._client.get(LEASES, config.member_lease, config.namespace))
                self._member = current
        member = _copy(self._member)
        member["spec"]["holderIdentity"] = config.identity
        member["spec"]["renewTime"] = now
        try:
            return dict(await self._client.update(LEASES, member))
        except (NotFound, Conflict):
            # Deleted or changed by another replica: it took us for dead, and has our shards.
            if self.owned or self._releasing:
                raise MembershipLost(
                    f"Lease {config.namespace}/{config.member_lease} was changed by another replica"
                ) from None
            self._member = None
            return await self._write_member()

    async def leave(self) -> None:
        """Clear the holder of every shard still ours and delete our member Lease: best effort,
        within one renew deadline, never raising (our claim may have run out meanwhile; then a
        clear that still lands only hands over sooner). Call once the work on the shards has
        stopped."""
        deadline = self._clock.monotonic() + self.config.renew_deadline
        for task in self._releasing.values():
            task.cancel()
        held = [
            name
            for name, seen in self._seen.items()
            if _is_shard(seen.lease) and _holder(seen.lease) == self.config.identity
        ]
        self.owned.clear()
        self._m_owned.set(0)
        await asyncio.gather(
            *(
                self._bounded(self._clear_holder(self._seen[name].lease), f"releasing Lease {name}", deadline)
                for name in held
            )
        )
        if self._member is not None:
            self._member = None
            await self._bounded(self._delete_member(), "deleting the member Lease", deadline)
        log.info("left sharding group %s", self.config.group)

    async def abandon(self) -> None:
        """Stop working on shards as a member, writing no Lease; only once :meth:`run` has
        ended. For an uninstall (the manager's), which then works on every shard itself: the
        group's Leases go with the operator's namespace, and a shard being handed over has no
        holder. Releases under way are cancelled; the listener is not told."""
        await cancel_and_wait(self._releasing.values())
        self._releasing.clear()
        self.owned.clear()
        self._m_owned.set(0)

    # -- observing -------------------------------------------------------------------------

    async def _list(self) -> list[dict[str, Any]] | None:
        listed = await self._bounded(
            self._client.list(
                LEASES, self.config.namespace, label_selector=f"{GROUP_LABEL}={self.config.group}"
            ),
            "listing the group's Leases",
        )
        if listed is None:
            return None
        return [item for item in listed.get("items") or () if isinstance(item, dict)]

    def _observe(self, leases: Iterable[dict[str, Any]]) -> None:
        seen: dict[str, _Seen] = {}
        for lease in leases:
            name = str((lease.get("metadata") or {}).get("name") or "")
            seen[name] = _Seen(lease, resource_version(lease), self._sighted(lease))
        for gone in self._first_seen.keys() - seen.keys():
            del self._first_seen[gone]
        self._seen = seen

    def _members(self) -> Iterator[tuple[str, dict[str, Any], float]]:
        """Each member Lease seen: its holder's identity, the Lease, and when the member stops
        being live unless it renews (when we first saw its Lease's current version, plus its lease
        duration, on our monotonic clock)."""
        for seen in self._seen.values():
            lease = seen.lease
            identity = _holder(lease)
            if _role(lease) != MEMBER or not identity:
                continue
            duration = (lease.get("spec") or {}).get("leaseDurationSeconds")
            duration = duration if isinstance(duration, int) and duration > 0 else 0
            yield identity, lease, seen.changed_at + duration

    def _member_ends(self) -> dict[str, float]:
        """Each member's identity and when it stops being live unless it renews."""
        return {identity: end for identity, _, end in self._members()}

    def _live_members(self) -> dict[str, int]:
        """Live members' identities and the number of shards of their rings."""
        now = self._clock.monotonic()
        live: dict[str, int] = {}
        for identity, lease, end in self._members():
            if now < end:
                shards = str(
                    ((lease.get("metadata") or {}).get("annotations") or {}).get(SHARDS_ANNOTATION) or ""
                )
                live[identity] = int(shards) if shards.isdigit() else 0
        live[self.config.identity] = self.config.shards
        return live

    # -- acting ----------------------------------------------------------------------------

    async def _act(self) -> None:
        config = self.config
        live = self._live_members()
        others = sorted(f"{member} ({shards})" for member, shards in live.items() if shards != config.shards)
        members = sorted(member for member, shards in live.items() if shards == config.shards)
        self.members = tuple(members)
        self._m_members.set(len(members))
        holders: dict[int, str] = {}
        leases: dict[int, dict[str, Any]] = {}
        for shard in range(config.shards):
            seen = self._seen.get(config.shard_lease(shard))
            if seen is not None:
                leases[shard] = seen.lease
                holders[shard] = _holder(seen.lease)
        for shard, holder in holders.items():
            if shard in self.owned and holder != config.identity:
                raise MembershipLost(
                    f"shard {shard} is now held by {holder or 'nobody'}: we were taken for dead"
                )
        assignment = assign(config.shards, members, holders)
        if assignment != self._assignment:
            if self._assignment:
                self._m_changes.inc()
            log.info(
                "sharding ring of group %s: %d members, this replica is assigned shards %s",
                config.group,
                len(members),
                _shard_list(s for s, m in assignment.items() if m == config.identity),
            )
            self._assignment = assignment
        for shard, owner in assignment.items():
            if owner != config.identity and shard in self.owned and shard not in self._releasing:
                self._start_release(shard)
        if others:
            self._say_blocked("live members have another number of shards: " + ", ".join(others))
            return
        self._say_blocked("")
        for shard in range(config.shards):
            if shard not in leases:
                await self._bounded(self._create_shard_lease(shard), f"creating the Lease of shard {shard}")
                created = self._seen.get(config.shard_lease(shard))
                if created is not None:
                    leases[shard] = created.lease
        if self._waiting_for_joiners(holders, live):
            return
        takes: list[tuple[int, dict[str, Any], str]] = []
        kept: list[int] = []
        for shard, owner in sorted(assignment.items()):
            lease = leases.get(shard)
            if owner != config.identity or lease is None or shard in self.owned or shard in self._releasing:
                continue
            holder = holders.get(shard, "")
            if holder == config.identity:
                # Ours in the API but not worked on: a release whose write did not land. Keep it.
                kept.append(shard)
                continue
            self._waiting_since.setdefault(shard, self._clock.monotonic())
            if holder and holder in live:
                continue  # its holder gives it up first, then clears the Lease
            takes.append((shard, lease, holder))
        if not takes:
            await self._start_work(kept)
            return
        self._check_deadline()  # never take a shard on a claim that has run out
        # All at once: a dead replica's shards move together, not one request after another.
        written_all = await asyncio.gather(
            *(self._bounded(self._take(lease), f"taking shard {shard}") for shard, lease, _ in takes)
        )
        taken = kept
        for (shard, _, holder), written in zip(takes, written_all, strict=True):
            if written is not None:
                self._seen[config.shard_lease(shard)].lease = written
                log.info(
                    "took shard %d of group %s%s",
                    shard,
                    config.group,
                    f" from {holder}, no longer live" if holder else "",
                )
                taken.append(shard)
        # Together too: they start their watches (and label what was made before sharding).
        await self._start_work(taken)

    def _waiting_for_joiners(self, holders: dict[int, str], live: dict[str, int]) -> bool:
        """Whether this round takes nothing yet: no member works on a shard, and the initial
        join delay since we joined has not passed (see the module docstring)."""
        delay = self.config.initial_join_delay
        if delay <= 0 or self._joined_at is None or self.owned or self._releasing:
            return False
        if any(holder and holder in live for holder in holders.values()):
            self._joiners_until = None
            return False  # a working group: join it now
        until = self._joined_at + delay
        if self._clock.monotonic() >= until:
            self._joiners_until = None
            return False
        if self._joiners_until is None:
            log.info(
                "sharding group %s has no member at work: waiting %.1fs for the replicas starting "
                "with this one before taking shards",
                self.config.group,
                until - self._clock.monotonic(),
            )
        self._joiners_until = until
        return True

    def _say_blocked(self, why: str) -> None:
        if why != self._blocked_by:
            if why:
                log.error("sharding: taking no shard while %s", why)
            else:
                log.info("sharding: every live member has %d shards again", self.config.shards)
            self._blocked_by = why

    async def _start_work(self, shards: list[int]) -> None:
        if not shards:
            return
        for shard in shards:
            waited = self._waiting_since.pop(shard, None)
            if waited is not None:
                self._m_handover.observe(self._clock.monotonic() - waited)
            self.owned.add(shard)
        self._m_owned.set(len(self.owned))
        await self._listener.acquired(shards)

    def _start_release(self, shard: int) -> None:
        self.owned.discard(shard)
        self._m_owned.set(len(self.owned))
        log.info("giving up shard %d of group %s", shard, self.config.group)
        task = asyncio.create_task(self._release(shard), name=f"release shard {shard}")
        task.add_done_callback(_said_release_end)
        self._releasing[shard] = task

    async def _release(self, shard: int) -> None:
        try:
            await self._listener.releasing(shard)
            name = self.config.shard_lease(shard)
            while True:
                seen = self._seen.get(name)
                if seen is None or _holder(seen.lease) != self.config.identity:
                    return
                written = await self._bounded(self._clear_holder(seen.lease), f"releasing shard {shard}")
                if written is not None:
                    seen.lease = written
                    log.info("released shard %d of group %s", shard, self.config.group)
                    return
                await self._clock.sleep(self.config.retry_period)
        finally:
            self._releasing.pop(shard, None)

    def _drop_all(self) -> None:
        for task in self._releasing.values():
            task.cancel()
        self._releasing.clear()
        self.owned.clear()
        self._m_owned.set(0)
        try:
            self._listener.lost()
        except Exception:
            log.exception("sharding listener failed while dropping every shard")

    # -- writes ----------------------------------------------------------------------------

    async def _create_shard_lease(self, shard: int) -> None:
        span = self.ring.range_of(shard)
        lease = self._lease(
            self.config.shard_lease(shard),
            SHARD,
            {
                SHARDS_ANNOTATION: str(self.config.shards),
                RANGE_ANNOTATION: f"[{format_bound(span.start)}, {format_bound(span.end)})",
            },
        )
        lease["spec"] = {
            "holderIdentity": "",
            "leaseDurationSeconds": _whole_seconds(self.config.lease_duration),
        }
        with contextlib.suppress(AlreadyExists):
            created = await self._client.create(LEASES, lease, self.config.namespace)
            self._observe_one(dict(created))

    async def _delete_member(self) -> None:
        with contextlib.suppress(NotFound):
            await self._client.delete(LEASES, self.config.member_lease, self.config.namespace)

    def _observe_one(self, lease: dict[str, Any]) -> None:
        name = str(lease["metadata"]["name"])
        self._seen[name] = _Seen(lease, resource_version(lease), self._sighted(lease))

    async def _take(self, lease: dict[str, Any]) -> dict[str, Any]:
        taken = _copy(lease)
        spec = taken["spec"]
        now = micro_time(self._clock.time())
        spec["holderIdentity"] = self.config.identity
        spec["acquireTime"] = now
        spec["renewTime"] = now
        spec["leaseDurationSeconds"] = _whole_seconds(self.config.lease_duration)
        transitions = spec.get("leaseTransitions")
        spec["leaseTransitions"] = (transitions if isinstance(transitions, int) else 0) + 1
        return dict(await self._client.update(LEASES, taken))

    async def _clear_holder(self, lease: dict[str, Any]) -> dict[str, Any]:
        cleared = _copy(lease)
        cleared["spec"]["holderIdentity"] = ""
        cleared["spec"]["renewTime"] = micro_time(self._clock.time())
        return dict(await self._client.update(LEASES, cleared))

    def _lease(self, name: str, role: str, annotations: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": _api_version(LEASES),
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": self.config.namespace,
                "labels": {GROUP_LABEL: self.config.group, ROLE_LABEL: role},
                "annotations": annotations,
            },
        }


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _api_version(res: Resource) -> str:
    return f"{res.group}/{res.version}" if res.group else res.version


def _copy(lease: dict[str, Any]) -> dict[str, Any]:
    copied = dict(lease)
    copied["metadata"] = dict(lease.get("metadata") or {})
    copied["spec"] = dict(lease.get("spec") or {})
    return copied


def _holder(lease: dict[str, Any]) -> str:
    holder = (lease.get("spec") or {}).get("holderIdentity")
    return holder if isinstance(holder, str) else ""


def _role(lease: dict[str, Any]) -> str:
    return str(((lease.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL) or "")


def _is_shard(lease: dict[str, Any]) -> bool:
    return _role(lease) == SHARD


def _whole_seconds(seconds: float) -> int:
    return max(1, int(-(-seconds // 1)))


def _shard_list(shards: Iterable[int]) -> str:
    listed = sorted(shards)
    return ", ".join(map(str, listed)) if listed else "none"


def _said_release_end(task: asyncio.Task[None]) -> None:
    """Retrieve how a release ended, as nobody awaits it. Losing the membership meanwhile (its
    renewal ran out while the shard's Lease was being cleared) is the renew loop's to report,
    which ends :meth:`ShardMembership.run`: here it is one debug line, not asyncio's "Task
    exception was never retrieved". Anything else is a bug: logged with its traceback."""
    if task.cancelled():
        return
    error = task.exception()
    if isinstance(error, MembershipLost):
        log.debug("%s ended with the membership: %s", task.get_name(), error)
    elif error is not None:
        log.error("%s failed", task.get_name(), exc_info=error)
