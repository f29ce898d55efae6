"""Plumbing shared by the simulated controllers: the keyed work loop, time stamps, owner references.

:class:`WorkLoop` is the only place the simulation runs code: a deduplicating
:class:`~memop.runtime.workqueue.workqueue.WorkQueue` of keys drained by a few owned worker tasks. Its
invariants:

* a key is synced by at most one worker at a time, and a key added while it is being synced
  is synced once more afterwards (workqueue semantics), so a sync always sees the latest store;
* ``sync`` is a plain function: the store is synchronous, so a sync reads and writes a
  consistent snapshot with no await in between — nothing can interleave with it;
* a sync that raises (an :class:`~memop.testing.apiserver.errors.ApiError` such as a conflict, or a bug)
  is retried with per-item exponential backoff; the worker never dies of it;
* a sync may return a delay: the key is synced again after it (timers: readiness, deadlines);
* workers yield to the event loop after every key, so the API server keeps answering while
  thousands of objects are being worked on;
* with a :class:`TokenBucket`, a worker takes a key only once the bucket holds a token, and
  every write the sync made (and every request that failed) is taken from it afterwards: the
  loop writes at most at the bucket's rate, as a client-go client with ``QPS``/``Burst`` does.
"""

from __future__ import annotations

import asyncio
import calendar
import functools
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from memop.runtime.util.clock import Clock
from memop.runtime.util.tasks import cancel_and_wait
from memop.runtime.workqueue.ratelimiter import ItemExponentialFailureRateLimiter
from memop.runtime.workqueue.workqueue import ShutDown, WorkQueue
from memop.testing.apiserver.errors import ApiError

if TYPE_CHECKING:
    from memop.testing.apiserver.resources import ResourceType
    from memop.testing.apiserver.store import Store, StoreEvent

K = TypeVar("K", bound=Hashable)
Obj = dict[str, Any]

log = logging.getLogger("memop.testing.controllers")

# Retries of a failing key: 5 ms doubling, capped low because this is a test cluster where a
# conflict clears up in milliseconds and nobody wants to wait 1000 s for a retry.
_RETRY_BASE = 0.005
_RETRY_MAX = 2.0


# kube-scheduler's and the kubelet's default client limits (KubeSchedulerConfiguration's and
# KubeletConfiguration's kubeAPIQPS/kubeAPIBurst).
NODE_QPS = 50.0
NODE_BURST = 100


@dataclass(frozen=True)
class ControllerLimits:
    """Client-side rate limits of the simulated control plane, as kube-controller-manager's
    ``--kube-api-qps``/``--kube-api-burst`` (defaults 20 and 30).

    Each controller (garbage collector, deployment, replicaset, namespace) gets a token bucket
    of its own, because kube-controller-manager builds a client per controller
    (``ClientOrDie(name)``) and client-go gives every client its own limiter; the Events a
    controller records take tokens from its bucket too. The scheduler (or the kubelet) gets
    ``node_qps``/``node_burst``, their own defaults.
    """

    qps: float = 20.0
    burst: int = 30
    node_qps: float = NODE_QPS
    node_burst: int = NODE_BURST

    def __post_init__(self) -> None:
        if self.qps <= 0 or self.node_qps <= 0 or self.burst < 1 or self.node_burst < 1:
            raise ValueError("controller limits need qps > 0 and burst >= 1")


class TokenBucket:
    """client-go's client-side rate limiter (``flowcontrol.NewTokenBucketRateLimiter(qps, burst)``):
    ``burst`` tokens at first, refilled at ``qps`` a second up to ``burst``, one per request.

    A simulated controller's sync is synchronous (it reads and writes a store snapshot with no
    await in between), so it cannot wait before each write as a Go client does: its writes are
    taken after the fact with :meth:`take` and may leave the bucket in debt, and the loop waits
    (:meth:`delay`) until the bucket holds a whole token again before the next sync. Over any
    stretch longer than one sync the writes keep the rate exactly.

    Invariant: ``_tokens <= burst``; negative while in debt.
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("a token bucket needs qps > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock.monotonic()
        self.taken = 0  # every token taken so far (requests made, for tests and reports)

    def _refill(self) -> None:
        now = self._clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        self._at = now

    def take(self, n: int = 1) -> None:
        """Count ``n`` requests made (the bucket may go into debt)."""
        self._refill()
        self._tokens -= n
        self.taken += n

    def delay(self) -> float:
        """Seconds until the bucket holds a whole token (0 when it does)."""
        self._refill()
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) / self.qps


class WorkLoop(Generic[K]):
    """A queue of keys and ``workers`` tasks that call ``sync(key)`` for each (see module doc).

    ``sync`` returns None when the key is done, or a delay in seconds after which it must be
    synced again. Call :meth:`start` once on the running loop and :meth:`stop` to finish.

    Its writes are free until :meth:`pace` gives it a :class:`TokenBucket`.
    """

    def __init__(
        self, name: str, sync: Callable[[K], float | None], *, clock: Clock, workers: int = 1
    ) -> None:
        self.name = name
        self._sync = sync
        self._workers = workers
        self._clock = clock
        self.limiter: TokenBucket | None = None
        self._writes: Callable[[], int] | None = None
        self._queue: WorkQueue[K] = WorkQueue(
            name,
            controller="simulation",
            rate_limiter=ItemExponentialFailureRateLimiter(_RETRY_BASE, _RETRY_MAX),
            clock=clock,
            metrics=False,
        )
        # The worker tasks, owned here: created by start(), cancelled and awaited by stop().
        self._tasks: list[asyncio.Task[None]] = []

    def add(self, key: K) -> None:
        """Sync ``key`` soon (once, however often it is added before a worker takes it)."""
        self._queue.add(key)

    def add_after(self, key: K, delay: float) -> None:
        """Sync ``key`` after ``delay`` seconds (or earlier if it is added meanwhile)."""
        self._queue.add_after(key, delay)

    def pending(self) -> int:
        """How many keys are ready and not yet taken by a worker."""
        return len(self._queue)

    def pace(self, limiter: TokenBucket, writes: Callable[[], int]) -> None:
        """From the next key on, write at ``limiter``'s rate; ``writes`` is a counter that grows
        by one per write the syncs make (the store's resourceVersion, which every committed
        change bumps once). Several loops may share one bucket, as controllers sharing a
        client would."""
        self.limiter = limiter
        self._writes = writes

    def record_event(self) -> None:
        """Take a token for an Event the real controller records here (client-go's recorder
        sends it through the controller's own client, so it competes with the writes); the
        simulation does not store it."""
        if self.limiter is not None:
            self.limiter.take()

    def start(self) -> None:
        """Start the workers on the running event loop."""
        if self._tasks:
            raise RuntimeError(f"work loop {self.name} already started")
        self._tasks = [
            asyncio.create_task(self._work(), name=f"sim-{self.name}-{i}") for i in range(self._workers)
        ]

    async def stop(self) -> None:
        """Stop taking keys, cancel the workers and wait for them. Pending keys are dropped."""
        self._queue.shutdown()
        await cancel_and_wait(self._tasks)
        self._tasks = []

    async def _work(self) -> None:
        queue, limiter, writes = self._queue, self.limiter, self._writes
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            if limiter is not None:
                # Holding the key while waiting, as a Go worker blocked in its client's Wait()
                # does: a change to it meanwhile is synced once more afterwards.
                while (wait := limiter.delay()) > 0:
                    await self._clock.sleep(wait)
            written = writes() if writes is not None else 0
            try:
                again = self._sync(key)
            except ApiError as err:
                log.debug("%s: %r failed, will retry: %s", self.name, key, err)
                if limiter is not None:
                    limiter.take(1)  # the request that failed
                queue.add_rate_limited(key)
            except Exception:
                log.exception("%s: syncing %r failed, will retry", self.name, key)
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
                if again is not None:
                    queue.add_after(key, again)
            finally:
                if limiter is not None and writes is not None:
                    limiter.take(writes() - written)
                queue.done(key)
            # The store is synchronous: without this, a long backlog would starve the server.
            await asyncio.sleep(0)


def rfc3339(epoch: float) -> str:
    """A ``metav1.Time`` (second precision, UTC, ``Z``) for a wall-clock time."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


@functools.lru_cache(maxsize=4096)
def parse_rfc3339(text: str | None) -> float | None:
    """The epoch seconds of a ``metav1.Time``/``MicroTime`` string, or None if absent/invalid.

    Cached: second-precision stamps repeat across every object written in the same second."""
    if not text:
        return None
    try:
        return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def meta(obj: Mapping[str, Any]) -> Obj:
    """The object's metadata (an empty dict when it has none)."""
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def owner_refs(obj: Mapping[str, Any]) -> list[Obj]:
    """The object's ownerReferences (well-formed entries only)."""
    refs = meta(obj).get("ownerReferences") or []
    return [ref for ref in refs if isinstance(ref, dict) and isinstance(ref.get("uid"), str)]


def controller_ref(obj: Mapping[str, Any]) -> Obj | None:
    """The ownerReference with ``controller: true``, if any (there is at most one)."""
    for ref in owner_refs(obj):
        if ref.get("controller"):
            return ref
    return None


def is_controlled_by(obj: Mapping[str, Any], owner_uid: str) -> bool:
    """Whether ``owner_uid`` is the object's controller."""
    ref = controller_ref(obj)
    return ref is not None and ref["uid"] == owner_uid


def new_controller_ref(owner: Mapping[str, Any]) -> Obj:
    """The ownerReference a controller puts on what it creates (blocks foreground deletion)."""
    m = meta(owner)
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": m["name"],
        "uid": m["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def being_deleted(obj: Mapping[str, Any]) -> bool:
    """Whether the object has a deletionTimestamp (it is going away, it does not count)."""
    return bool(meta(obj).get("deletionTimestamp"))


def condition(obj: Mapping[str, Any], type_: str) -> Obj | None:
    """The status condition of ``type_``, if present."""
    status = obj.get("status") or {}
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def metadata_for_write(obj: Mapping[str, Any], **changes: Any) -> Obj:
    """The object's metadata for a write body, with ``changes`` (a None value removes the key).

    managedFields are left out: the server keeps its own, and copying them is most of the cost
    of a write. The resourceVersion stays, making the write conditional on what was read.
    """
    out = {k: v for k, v in meta(obj).items() if k != "managedFields"}
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def status_body(obj: Mapping[str, Any], status: Obj, **metadata: Any) -> Obj:
    """A status-subresource update of ``obj``: its metadata (with the resourceVersion it was read
    at, a precondition, and ``metadata`` changes) and the new status.

    The metadata is complete, as client-go's ``UpdateStatus`` sends it, because kube-apiserver
    keeps metadata changes made through some status subresources (Deployments'): a partial
    one could drop finalizers or owner references there. The spec is left out; every status
    subresource ignores it.
    """
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": metadata_for_write(obj, **metadata),
        "status": status,
    }


def owner_key(event: StoreEvent, owner: tuple[str, str], owned: tuple[str, str]) -> tuple[str, str] | None:
    """The (namespace, name) of the ``owner`` (group, kind) object a change concerns, for its
    controller's queue: the object itself unless it was deleted, or the controller (by its
    controllerRef) of an ``owned`` (group, kind) object; None when it concerns no such object."""
    rtype, m = event.rtype, meta(event.obj)
    if (rtype.group, rtype.kind) == owner:
        return None if event.type == "DELETED" else (m.get("namespace", ""), m.get("name", ""))
    if (rtype.group, rtype.kind) == owned:
        ref = controller_ref(event.obj)
        if ref is not None and ref.get("kind") == owner[1]:
            return (m.get("namespace", ""), ref.get("name", ""))
    return None


def delete_if_present(store: Store, rtype: ResourceType, obj: Mapping[str, Any]) -> bool:
    """Delete ``obj`` if it is still the object read (its uid); False when it was already gone
    or replaced (404, 409), which a controller's next sync sees anyway."""
    m = meta(obj)
    try:
        store.delete(rtype, m.get("namespace"), m["name"], preconditions={"uid": m["uid"]})
    except ApiError as err:
        if err.code not in (404, 409):
            raise
        return False
    return True
