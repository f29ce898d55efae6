"""Kubernetes Events (core/v1), recorded in the background so reconciles never wait for them.

``EventRecorder.record`` only queues; one sender task writes. As client-go's event
correlator does, an event identical to one already sent (same object, type, reason, message
and source) bumps ``count`` and ``lastTimestamp`` on the existing Event with a patch instead
of creating another, and each object gets a spam budget (burst 25, then one every 5 minutes)
so a hot error loop cannot flood the API server.

Events describe work and must never delay the writes they describe: when a thousand objects
change at once, their thousand Events would otherwise take API server capacity (each is an
etcd write) from the writes that do the work. So, given the reconcile ``workload`` (the
manager's work queues), an Event waits while there is reconcile work, and goes out once the
queues have been idle for ``quiet`` seconds (1 s: a burst of a thousand creations leaves the
queues empty for milliseconds at a time while it lasts), with nothing to compete with, at full
speed, it and every Event after it for as long as no new work arrives. An Event that has waited
``max_defer`` seconds (under work that never pauses) goes out anyway, at the rate limit
(``qps`` and ``burst``, a token bucket), so Events trail a long burst instead of waiting for
its end. Without a workload, every Event goes at the rate limit; the limit only defers, it
never drops: once the queue is :data:`FULL_SPEED_AT` full, Events go out as fast as the API
server takes them until it is not.

No Event goes to a namespace closed to new content (being deleted, or gone): the API server
would refuse each, and the first refusal marks the namespace closed in the process's
:class:`~memop.runtime.client.closednamespaces.ClosedNamespaces` (one info line), after which
the Events recorded or held for it are dropped without a request (counted in ``dropped``).
Events held about an object that is gone are still sent when its namespace is open: they
describe what happened to it (a finalizer run), as client-go sends them.

Events are best effort: failures are logged, never raised into a reconcile. When the queue is
full (``max_queued``: the API server is slow or down), events are dropped and counted, as
client-go's broadcaster drops them; the warning about it is aggregated, at most one every
``QUEUE_FULL_REPORT_INTERVAL`` seconds with the number dropped since the previous one, plus a
last one on stop, so a stalled sender cannot flood the log either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from memop.runtime.client.closednamespaces import CLOSED_NAMESPACES, ClosedNamespaces
from memop.runtime.client.errors import ApiError, Forbidden, NamespaceClosed, NotFound, TransportError
from memop.runtime.client.reachability import Reachability
from memop.runtime.client.resources import EVENTS, Resource
from memop.runtime.util.clock import Clock, RealClock, first_of, rfc3339
from memop.runtime.util.tokenbucket import TokenBucket

log = logging.getLogger("memop.events")

NORMAL = "Normal"
WARNING = "Warning"
# At most one "event queue full" warning per this many seconds (the drops in between are counted).
QUEUE_FULL_REPORT_INTERVAL = 60.0
# Rounding room when the spam filter compares times (sums of 1/qps steps are not exact).
_SPAM_SLACK = 1e-6
# From this fraction of the queue's capacity on, the rate limit is set aside (it must not
# turn into drops).
FULL_SPEED_AT = 0.9


class Workload(Protocol):
    """The reconcile work Events yield to (memop.runtime.workqueue.workqueue.AllQueues)."""

    @property
    def idle(self) -> bool: ...

    @property
    def adds(self) -> int: ...

    async def wait_idle(self) -> None: ...


class EventWriter(Protocol):
    @property
    def reachability(self) -> Reachability: ...

    async def create(
        self, res: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def patch(
        self, res: Resource, name: str, patch: Any, namespace: str | None = None
    ) -> dict[str, Any]: ...


@dataclass
class _Sent:
    name: str
    namespace: str
    count: int


@dataclass(frozen=True, slots=True)
class _Pending:
    """An Event waiting to be sent. Thousands wait at once while thousands of objects converge,
    so it holds the object's own values (the involvedObject's fields, "" where absent) and the
    time as a number, in its own slots: no dicts, formatted strings or tuples of its own. 0.3
    KiB an Event, where the dict and formatted strings built at once took 0.9, and the fields
    in a tuple of their own 0.35."""

    api_version: str
    kind: str
    name: str
    object_namespace: str
    uid: str
    resource_version: str
    namespace: str  # the Event's own: the object's, or "default" for a cluster-scoped one
    type: str
    reason: str
    message: str
    time: float  # wall clock, formatted when sent
    recorded_at: float  # monotonic

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two Events the same one (counted, not sent again): the object, type,
        reason and message (the component is the recorder's)."""
        return (self.kind, self.object_namespace, self.name, self.uid, self.type, self.reason, self.message)

    def involved_object(self) -> dict[str, Any]:
        fields = (
            ("apiVersion", self.api_version),
            ("kind", self.kind),
            ("name", self.name),
            ("namespace", self.object_namespace),
            ("uid", self.uid),
            ("resourceVersion", self.resource_version),
        )
        return {name: value for name, value in fields if value}


def _spam_key(kind: str, namespace: str, name: str, uid: str) -> Hashable:
    """The object the spam filter counts Events of: its uid (unique, and held by the object
    already: no tuple per remembered object), or kind, namespace and name without one."""
    return uid or (kind, namespace, name)


def _describe_object(kind: Any, namespace: Any, name: Any, uid: Any) -> str:
    return "/".join(str(part) for part in (kind, namespace, name, uid))


class EventRecorder:
    """Records Events about objects for ``component`` (e.g. "memcached-controller")."""

    def __init__(
        self,
        client: EventWriter,
        component: str,
        *,
        host: str = "",
        clock: Clock | None = None,
        max_queued: int = 10_000,
        remembered: int = 4096,
        spam_burst: int = 25,
        spam_qps: float = 1 / 300,
        qps: float | None = None,
        burst: int = 1,
        workload: Workload | None = None,
        max_defer: float = 60.0,
        quiet: float = 1.0,
        closed_namespaces: ClosedNamespaces | None = None,
    ) -> None:
        """``qps``/``burst``: the most Events sent per second, and at once, while they cannot
        wait for ``workload`` to be idle; None: no limit. ``max_defer``: the longest an Event
        waits for the workload to be idle, ``quiet`` how long it must have been idle (see
        the module docstring). ``closed_namespaces``: the namespaces no Event goes to, shared
        with the controllers; default the process's
        :data:`~memop.runtime.client.closednamespaces.CLOSED_NAMESPACES`."""
        self._client = client
        self.component = component
        self.host = host
        self._clock = clock or RealClock()
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=max_queued)
        self._sent: OrderedDict[tuple[Any, ...], _Sent] = OrderedDict()
        self._remembered = remembered
        # The spam filter: per object, the monotonic time its budget is whole again (see _allow).
        self._spam: OrderedDict[Hashable, float] = OrderedDict()
        if spam_qps <= 0 or spam_burst < 1:
            raise ValueError("the spam filter needs spam_qps > 0 and spam_burst >= 1")
        self._spam_interval = 1 / spam_qps
        self._spam_window = spam_burst / spam_qps
        self._rate = TokenBucket(qps, burst, self._clock) if qps else None
        self._full_speed_at = max(1, int(max_queued * FULL_SPEED_AT))
        self._workload = workload
        self._max_defer = max_defer
        self._quiet = quiet
        # The workload's add count when it was last found quiet: while it has not moved and
        # the queues are idle, it is still quiet (Events after the first go without waiting).
        self._quiet_at_adds: int | None = None
        self._closed = CLOSED_NAMESPACES if closed_namespaces is None else closed_namespaces
        self._task: asyncio.Task[None] | None = None
        # Set by stop(): the manager stops its recorders after its controllers, so there is no
        # reconcile work left to yield to and held Events go at once.
        self._stopping = asyncio.Event()
        # Every event not recorded (spam filter, full queue, closed namespace), for tests and
        # debugging.
        self.dropped = 0
        # Events dropped on a full queue since the last warning about it, and when that was.
        self._unreported_full = 0
        self._full_reported_at: float | None = None

    def record(self, obj: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        """Queue an Event about ``obj``; returns at once. ``reason`` is CamelCase, e.g. Created."""
        meta = obj.get("metadata") or {}
        kind = obj.get("kind", "")
        name = meta.get("name", "")
        object_namespace = meta.get("namespace", "")
        uid = meta.get("uid", "")
        namespace = object_namespace or "default"
        if namespace in self._closed:
            self.dropped += 1
            log.debug("event %s dropped: namespace %s is closed to new content", reason, namespace)
            return
        if not self._allow(_spam_key(kind, object_namespace, name, uid)):
            self.dropped += 1
            log.debug(
                "event about %s dropped by the spam filter: %s %s",
                _describe_object(kind, object_namespace, name, uid),
                reason,
                message,
            )
            return
        pending = _Pending(
            obj.get("apiVersion", ""),
            kind,
            name,
            object_namespace,
            uid,
            meta.get("resourceVersion", ""),
            namespace,
            event_type,
            reason,
            message[:1024],
            self._clock.time(),
            self._clock.monotonic(),
        )
        try:
            self._queue.put_nowait(pending)
        except asyncio.QueueFull:
            self.dropped += 1
            self._unreported_full += 1
            now = self._clock.monotonic()
            if self._full_reported_at is None or now - self._full_reported_at >= QUEUE_FULL_REPORT_INTERVAL:
                self._full_reported_at = now
                self._report_full(f"{reason} on {_describe_object(kind, object_namespace, name, uid)}")

    def _report_full(self, latest: str | None) -> None:
        count, self._unreported_full = self._unreported_full, 0
        log.warning(
            "event queue full (%d waiting to be sent): dropped %d event%s since the last report%s",
            self._queue.qsize(),
            count,
            "" if count == 1 else "s",
            f", the latest {latest}" if latest else "",
            extra={"component": self.component, "droppedEvents": count},
        )

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._send_loop(), name=f"events-{self.component}")

    async def stop(self, timeout: float = 2.0) -> None:
        """Send what is queued (for at most ``timeout`` seconds), then stop.

        Events held for the workload to be quiet go at once: the manager stops its recorders
        after its controllers, so no reconcile work is left for them to yield to."""
        if self._unreported_full:
            self._report_full(None)
        if self._task is None:
            return
        self._stopping.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._queue.join()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def flush(self) -> None:
        """Wait until every queued event has been written (or failed)."""
        await self._queue.join()

    def _allow(self, object_id: Hashable) -> bool:
        """The spam filter: a token bucket per object (``spam_burst``, refilled at
        ``spam_qps``), kept as the one number that defines it, the time the bucket is full
        again (each Event taken pushes it ``1 / spam_qps`` later; an Event is refused when that
        would be more than the burst's worth of refills away). Thousands of objects are
        remembered at once: a float each instead of a bucket object (a tenth of the memory)."""
        now = self._clock.monotonic()
        full_again = max(self._spam.get(object_id, now), now) + self._spam_interval
        if full_again - now > self._spam_window + _SPAM_SLACK:
            self._spam.move_to_end(object_id)
            return False
        self._spam[object_id] = full_again
        self._spam.move_to_end(object_id)
        if len(self._spam) > self._remembered:
            self._spam.popitem(last=False)
        return True

    async def _send_loop(self) -> None:
        while True:
            pending = await self._queue.get()
            try:
                # Checked again after the wait: the namespace may have closed meanwhile.
                if self._drop_closed(pending):
                    continue
                await self._wait_turn(pending)
                if self._drop_closed(pending):
                    continue
                # While the API server is down, wait for it rather than fail the Event.
                await self._client.reachability.wait()
                await self._send(pending)
            except asyncio.CancelledError:
                raise
            except NamespaceClosed as error:
                # Before Forbidden: a namespace being deleted is no permission problem.
                self.dropped += 1
                self._closed.close(error, pending.namespace)
            except Forbidden as error:
                log.error(
                    "cannot record events: %s (memop needs create and patch on events in %s)",
                    error.message,
                    pending.namespace,
                )
            except (ApiError, TransportError) as error:
                log.warning("failed to record event %s: %s", pending.reason, error)
            except Exception:
                log.exception("failed to record event %s", pending.reason)
            finally:
                self._queue.task_done()

    def _drop_closed(self, pending: _Pending) -> bool:
        """Whether ``pending``'s namespace is closed to new content (then it is dropped)."""
        if pending.namespace not in self._closed:
            return False
        self.dropped += 1
        log.debug("event %s dropped: namespace %s is closed", pending.reason, pending.namespace)
        return True

    async def _wait_turn(self, pending: _Pending) -> None:
        """Wait until ``pending`` may go: once the workload is idle, or after ``max_defer``
        at the rate limit (see the module docstring)."""
        workload = self._workload
        if workload is not None and await self._wait_quiet(workload, pending.recorded_at + self._max_defer):
            return
        # qsize() counts the events behind this one.
        if self._rate is not None and self._queue.qsize() + 1 < self._full_speed_at:
            await self._rate.acquire()

    async def _wait_quiet(self, workload: Workload, until: float) -> bool:
        """Until the workload has been idle for ``quiet`` seconds with nothing added (True),
        or the monotonic time ``until`` (False)."""
        while True:
            if self._stopping.is_set() or (workload.idle and workload.adds == self._quiet_at_adds):
                return True
            self._quiet_at_adds = None
            remaining = until - self._clock.monotonic()
            if remaining <= 0:
                return False
            if not workload.idle:
                await first_of(workload.wait_idle(), self._stopping.wait(), self._clock.sleep(remaining))
                continue
            adds = workload.adds
            await first_of(self._stopping.wait(), self._clock.sleep(min(self._quiet, remaining)))
            if workload.idle and workload.adds == adds and self._quiet <= remaining:
                self._quiet_at_adds = adds

    async def _send(self, pending: _Pending) -> None:
        key = pending.key
        timestamp = rfc3339(pending.time)
        sent = self._sent.get(key)
        if sent is not None:
            try:
                await self._client.patch(
                    EVENTS,
                    sent.name,
                    {"count": sent.count + 1, "lastTimestamp": timestamp},
                    sent.namespace,
                )
                sent.count += 1
                self._sent.move_to_end(key)
                return
            except NotFound:
                # The Event expired (the API server keeps them about an hour): start a new one.
                del self._sent[key]
        involved = pending.involved_object()
        name = f"{involved.get('name', 'unknown')}.{secrets.token_hex(8)}"
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": pending.namespace},
            "involvedObject": involved,
            "reason": pending.reason,
            "message": pending.message,
            "type": pending.type,
            "source": {"component": self.component, **({"host": self.host} if self.host else {})},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            "firstTimestamp": timestamp,
            "lastTimestamp": timestamp,
            "count": 1,
        }
        await self._client.create(EVENTS, event, pending.namespace)
        self._sent[key] = _Sent(name, pending.namespace, 1)
        if len(self._sent) > self._remembered:
            self._sent.popitem(last=False)
