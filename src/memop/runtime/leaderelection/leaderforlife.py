"""Leader for life, as operator-lib's ``leader.Become``: a Pod leads until it is gone.

The lock is a ConfigMap (its name and namespace in :class:`LeaderForLifeConfig`) whose only
ownerReference is the leading replica's own Pod, named by the downward API (``POD_NAME``).
Whoever creates it leads, and nothing is ever renewed. When the leader's Pod is deleted the
garbage collector deletes the lock, and a waiting replica creates it.

Why only one replica ever leads, and how a standby gets its turn:

- **A lock is taken over only from a Pod that cannot run any more.** Its owner Pod is gone
  (no Pod of that name, or one with another uid) or finished (phase Failed, which is how an
  Evicted or Preempted pod ends, or Succeeded): every container of such a Pod has stopped. A
  lock whose owner Pod exists and has not finished is waited for, however long, so two
  replicas never lead at once; the price is that failover waits for the Pod's deletion.
- **Take-over is a delete with a uid precondition, then a create.** The precondition keeps a
  lock someone else has just re-created; of several standbys creating at once, exactly one
  succeeds, the others see AlreadyExists and wait.
- **Restart in place.** A lock owned by our own Pod (same uid: the container restarted)
  means we lead at once, as operator-lib does ("I was likely restarted").
- **Backoff.** A standby tries again after ``initial_backoff`` (1 s), doubling up to
  ``max_backoff`` (16 s), each wait stretched by up to 20% (operator-lib's
  ``wait.Jitter(backoff, .2)``), and logs who holds the lock whenever the holder changes.
- **Holding.** The leader reads the lock every ``recheck_period``. operator-lib never looks
  again; memop does, so a lock deleted by hand is re-created, and if another replica created
  it meanwhile this one stops leading (LeadershipLost; the manager exits 1 and the container
  restarts as a standby) instead of leading beside it for the rest of its life. Failing to
  read the lock changes nothing: a Pod holds its lock for life.

Where memop departs from operator-lib, and why:

- operator-lib waits for the garbage collector when the owner Pod is gone; memop deletes the
  lock itself (uid precondition), on the very condition the collector acts on, only sooner;
- for an Evicted or Preempted leader (phase Failed with that reason) operator-lib deletes the
  Pod and waits for the collector; memop deletes the lock, and does so for any Failed (or
  Succeeded) Pod, since phase alone says its containers have stopped. It needs no permission
  to delete Pods;
- operator-lib also deletes the leader and its lock when the leader's Node is NotReady; memop
  does not: a Pod on a node that stopped reporting may still run and reach the API server,
  and taking its lock would make two leaders. Nor does it need to read Nodes;
- operator-lib's backoff doubles past the maximum once (1, 2, 4, 8, 16, 32 s... when the
  maximum is 20 s); memop's stops at it.

Running outside a cluster (no Pod to own the lock) is the caller's decision (memop.cli.app): this
module always needs a Pod. Every wait uses the injected :class:`~memop.runtime.util.clock.Clock`.
``leader_election_master_status{name=<lock name>}`` is 1 exactly while leading.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from memop.runtime.client.errors import AlreadyExists, ApiError, Conflict, NotFound, TransportError
from memop.runtime.client.resources import CONFIGMAPS, PODS, Resource
from memop.runtime.leaderelection.lease import LeadershipLost, check_settings
from memop.runtime.metrics import LEADER_ELECTION_MASTER_STATUS
from memop.runtime.util.clock import Clock, RealClock

log = logging.getLogger("memop.leaderforlife")

# operator-lib waits wait.Jitter(backoff, .2): backoff stretched by up to 20%.
JITTER = 0.2
# Pod phases in which every container has stopped for good.
FINISHED_PHASES = ("Failed", "Succeeded")


@dataclass
class LeaderForLifeConfig:
    """Which lock to take, for which Pod, and how often to try.

    lock_name / namespace: the ConfigMap lock. The namespace must be the Pod's own: an
        ownerReference only names an object in the same namespace.
    pod_name: this replica's Pod (the downward API's ``metadata.name``); it owns the lock.
    initial_backoff / max_backoff: a standby's first wait between attempts (1 s) and the
        most it waits (16 s), operator-lib's defaults. Failover after the leader's Pod is
        deleted takes the garbage collector's time plus up to ``max_backoff`` x 1.2.
    recheck_period: how often the leader reads its lock (30 s), see the module docstring.
    """

    lock_name: str
    namespace: str
    pod_name: str
    initial_backoff: float = 1.0
    max_backoff: float = 16.0
    recheck_period: float = 30.0

    def validate(self) -> None:
        """Raise ValueError, saying which setting is wrong, unless the config is usable."""
        check_settings(
            "leader-for-life",
            names={"lock name": self.lock_name, "lock namespace": self.namespace, "pod name": self.pod_name},
            seconds={
                "initial backoff": self.initial_backoff,
                "maximum backoff": self.max_backoff,
                "recheck period": self.recheck_period,
            },
        )

    def describe(self) -> str:
        return f"{self.namespace}/{self.lock_name}"


class LeaderForLifeError(Exception):
    """Leader for life cannot work here (this replica's Pod does not exist); one line saying why."""


class LockClient(Protocol):
    """The calls of memop.runtime.client.client.Client the lock needs."""

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        preconditions: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class Verdict:
    """What a lock found in place means for us: ``mine``, ``held`` (wait) or ``stale`` (take it
    over); ``holder`` names the owner Pod, ``why`` says what was found, for the logs."""

    kind: str
    holder: str
    why: str = ""


def owner_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """The ownerReference naming ``pod``, as operator-lib writes it."""
    meta = pod.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name", ""), "uid": meta.get("uid", "")}


def judge(lock: dict[str, Any], own: dict[str, Any], pod: dict[str, Any] | None) -> Verdict:
    """The verdict on ``lock`` for the replica whose Pod reference is ``own``, given ``pod``: the
    Pod the lock's one owner reference names as the API server has it (None: no such Pod).
    A pure function of what was read; :meth:`LeaderForLife._attempt` reads and acts."""
    refs = owner_refs(lock)
    if any(ref.get("uid") == own["uid"] for ref in refs):
        return Verdict("mine", own["name"], "owned by this replica's Pod (its container restarted)")
    if len(refs) != 1:
        return Verdict(
            "held", "", f"the lock has {len(refs)} owner references, not one Pod: not ours to remove"
        )
    ref = refs[0]
    name = str(ref.get("name", ""))
    if ref.get("kind") != "Pod" or ref.get("apiVersion") != "v1":
        return Verdict(
            "held", name, f"the lock is owned by a {ref.get('kind')}, not a Pod: not ours to remove"
        )
    if pod is None:
        return Verdict("stale", name, "is gone")
    if (pod.get("metadata") or {}).get("uid") != ref.get("uid"):
        return Verdict("stale", name, "is gone (a new Pod has its name)")
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase in FINISHED_PHASES:
        reason = status.get("reason")
        return Verdict(
            "stale", name, f"has finished (phase {phase}" + (f", reason {reason})" if reason else ")")
        )
    return Verdict("held", name, f"is {phase or 'not yet scheduled'}")


def owner_refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    return [ref for ref in refs if isinstance(ref, dict)] if isinstance(refs, list) else []


class LeaderForLife:
    """Takes the lock for this replica's Pod; :meth:`run` returns control only when leadership
    ends, which for a Pod that keeps its lock is never.

    The same surface as :class:`~memop.runtime.leaderelection.lease.LeaderElector` as far as the
    manager is concerned: ``leader_elected`` is set while leading, ``lost`` once leadership
    ended, ``is_leader`` and ``leader`` (the owner Pod of the lock as last seen).
    """

    def __init__(
        self,
        client: LockClient,
        config: LeaderForLifeConfig,
        *,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        config.validate()
        self.config = config
        self._client = client
        self._clock: Clock = clock or RealClock()
        self._rand = rand
        self._metric = LEADER_ELECTION_MASTER_STATUS.labels(config.lock_name)
        # Set when we lead; cleared when leadership ends.
        self.leader_elected = asyncio.Event()
        # Set once leadership has ended; stays set.
        self.lost = asyncio.Event()
        # Invariant: the metric is 1 exactly while _leading.
        self._leading = False
        self._started = False
        self._holder = ""
        # The holder and reason last logged, so a standby logs each change once.
        self._reported: tuple[str, str] | None = None
        # For logs and tests: attempts made, the waits between them, why the last one failed.
        self.attempts = 0
        self.waits: list[float] = []
        self.last_error = ""

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def leader(self) -> str:
        """The Pod owning the lock as last seen ("" when none was seen)."""
        return self._holder

    async def run(self) -> None:
        """Take the lock (waiting as long as it takes), then hold it. Call at most once.

        Raises LeaderForLifeError when this replica's Pod does not exist, and LeadershipLost
        when another replica's Pod turns out to own the lock while we lead. Cancelling ends
        it; the lock stays (it belongs to the Pod, not to the process).
        """
        if self._started:
            raise RuntimeError("LeaderForLife.run() may only be called once")
        self._started = True
        self._metric.set(0)
        try:
            log.info(
                "trying to become the leader: lock %s for pod %s",
                self.config.describe(),
                self.config.pod_name,
            )
            own = await self._own_pod()
            await self._acquire(own)
            self._start_leading()
            await self._hold(own)
        except LeadershipLost as lost:
            log.error("lost leadership of lock %s: %s", self.config.describe(), lost)
            raise
        finally:
            self._stop_leading()

    async def _own_pod(self) -> dict[str, Any]:
        """This replica's Pod, as an ownerReference; retried with backoff but for NotFound."""
        backoff = self.config.initial_backoff
        while True:
            try:
                pod = await self._client.get(PODS, self.config.pod_name, self.config.namespace)
            except NotFound:
                raise LeaderForLifeError(
                    f"this replica's Pod {self.config.namespace}/{self.config.pod_name} (POD_NAME) does not "
                    "exist: the leader-for-life lock is owned by it, in the Pod's own namespace"
                ) from None
            except (ApiError, TransportError) as error:
                log.warning("cannot read this replica's Pod %s: %s", self.config.pod_name, error)
            else:
                return owner_pod(pod)
            backoff = await self._back_off(backoff)

    async def _acquire(self, own: dict[str, Any]) -> None:
        """Return once we own the lock."""
        backoff = self.config.initial_backoff
        while True:
            try:
                if await self._attempt(own):
                    return
            except (ApiError, TransportError) as error:
                self.last_error = str(error)
                log.warning("error trying to take lock %s: %s", self.config.describe(), error)
            finally:
                self.attempts += 1
            backoff = await self._back_off(backoff)

    async def _back_off(self, backoff: float) -> float:
        """Wait ``backoff`` stretched by up to 20%; the next backoff."""
        wait = backoff * (1 + JITTER * self._rand())
        self.waits.append(wait)
        log.debug("not the leader of lock %s, trying again in %.2fs", self.config.describe(), wait)
        await self._clock.sleep(wait)
        return min(backoff * 2, self.config.max_backoff)

    async def _attempt(self, own: dict[str, Any]) -> bool:
        """One round: create the lock, or judge the one in place and take it over when stale.
        True when we own the lock."""
        if await self._create(own):
            log.info("became the leader: created lock %s", self.config.describe())
            return True
        lock = await self._get_lock()
        if lock is None:
            # Deleted since our create failed: nobody owns it, try at once.
            return await self._create(own)
        refs = owner_refs(lock)
        pod = None
        if len(refs) == 1 and refs[0].get("uid") != own["uid"] and refs[0].get("kind") == "Pod":
            try:
                pod = await self._client.get(PODS, str(refs[0].get("name", "")), self.config.namespace)
            except NotFound:
                pod = None
        verdict = judge(lock, own, pod)
        self._holder = verdict.holder
        if verdict.kind == "mine":
            log.info("found lock %s %s: continuing as the leader", self.config.describe(), verdict.why)
            return True
        if verdict.kind == "held":
            self.last_error = f"held by pod {verdict.holder}: {verdict.why}"
            self._report(verdict)
            return False
        log.info(
            "lock %s is held by pod %s, which %s: taking it over",
            self.config.describe(),
            verdict.holder,
            verdict.why,
        )
        uid = (lock.get("metadata") or {}).get("uid")
        # Removed or replaced by someone else meanwhile (NotFound, Conflict): the create decides.
        with contextlib.suppress(NotFound, Conflict):
            await self._client.delete(
                CONFIGMAPS, self.config.lock_name, self.config.namespace, preconditions={"uid": uid}
            )
        if await self._create(own):
            log.info(
                "became the leader: took over lock %s from pod %s", self.config.describe(), verdict.holder
            )
            return True
        return False

    def _report(self, verdict: Verdict) -> None:
        key = (verdict.holder, verdict.why)
        if key == self._reported:
            return
        self._reported = key
        holder = f"pod {verdict.holder}" if verdict.holder else "another owner"
        log.info(
            "not the leader: lock %s is held by %s, which %s; waiting",
            self.config.describe(),
            holder,
            verdict.why,
        )

    async def _create(self, own: dict[str, Any]) -> bool:
        try:
            await self._client.create(CONFIGMAPS, self._lock_object(own), self.config.namespace)
        except AlreadyExists:
            return False
        self._holder = own["name"]
        return True

    async def _get_lock(self) -> dict[str, Any] | None:
        try:
            return await self._client.get(CONFIGMAPS, self.config.lock_name, self.config.namespace)
        except NotFound:
            return None

    def _lock_object(self, own: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.config.lock_name,
                "namespace": self.config.namespace,
                "ownerReferences": [dict(own)],
            },
        }

    async def _hold(self, own: dict[str, Any]) -> None:
        """Read the lock every recheck_period; raise LeadershipLost when another Pod owns it."""
        while True:
            await self._clock.sleep(self.config.recheck_period)
            try:
                lock = await self._get_lock()
                if lock is None:
                    if await self._create(own):
                        log.warning("lock %s had been deleted: created it again", self.config.describe())
                        continue
                    lock = await self._get_lock()
                    if lock is None:
                        continue  # deleted again: try next period
            except (ApiError, TransportError) as error:
                log.warning("cannot read lock %s (still leading): %s", self.config.describe(), error)
                continue
            if not any(ref.get("uid") == own["uid"] for ref in owner_refs(lock)):
                holders = ", ".join(str(ref.get("name")) for ref in owner_refs(lock)) or "nobody"
                self._holder = holders
                raise LeadershipLost(f"lock {self.config.describe()} is now owned by {holders}")

    def _start_leading(self) -> None:
        self._leading = True
        self._metric.set(1)
        self.leader_elected.set()

    def _stop_leading(self) -> None:
        if not self._leading:
            return
        self._leading = False
        self._metric.set(0)
        self.leader_elected.clear()
        self.lost.set()
        log.info("stopped leading lock %s", self.config.describe())
