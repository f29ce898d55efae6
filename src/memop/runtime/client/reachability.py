"""Whether the API server answers at all, found out by one probe for the whole process.

When the API server is down (restarting, or out of reach), every reflector's LIST or WATCH
fails to connect. If each reflector backed off on its own, as client-go's do, their delays
would double up to 30 s during a long outage: the server would get one stream of retries per
reflector while it is down, and once it is back, each reflector would notice only when its
own delay ran out, seconds later. Instead a reflector that cannot connect calls
:meth:`Reachability.wait`. The first such call starts one probe task, which asks the server's
``/readyz`` a few times a second, and every waiter is released the moment it answers.

Only "no connection at all" comes here. A server that answers with errors (5xx, 429) is
answering: the reflectors' own backoff, and the Retry-After it sends, govern those.

What counts as answering (the probe's HTTP status):

- 200: ready;
- 401, 403, 404: the server answers but does not tell us its readiness (a cluster may
  restrict ``/readyz``): reachable;
- anything else (500 while a readiness check fails, 429, a proxy's 502/503): starting or not
  ready; the waiters are released once it has answered this way for ``not_ready_grace``
  seconds, after which the reflectors' backoff protects it as for any error;
- no answer (:class:`~memop.runtime.client.errors.TransportError`): still down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from memop.runtime.client.errors import TransportError
from memop.runtime.util.clock import Clock, RealClock

log = logging.getLogger("memop.reachability")

Probe = Callable[[], Awaitable[int]]

# Statuses with which a server answers without saying whether it is ready: it is reachable.
_ANSWERS_WITHOUT_READINESS = frozenset({401, 403, 404})


class Reachability:
    """Shared by the reflectors of one API server. Invariant: ``reachable`` is False exactly
    while a probe task runs, and the probe task is the only thing that sets it back to True."""

    def __init__(
        self,
        probe: Probe,
        *,
        clock: Clock | None = None,
        interval: float = 0.1,
        max_interval: float = 0.5,
        not_ready_grace: float = 5.0,
    ) -> None:
        """``probe`` sends one request and returns its HTTP status, or raises TransportError
        when no answer came. It is tried every ``interval`` seconds, growing by half each time
        up to ``max_interval``: at most a few requests a second, and a server that comes back
        is noticed within ``max_interval``."""
        self._probe = probe
        self._clock = clock or RealClock()
        self._interval = interval
        self._max_interval = max_interval
        self._not_ready_grace = not_ready_grace
        self._up = asyncio.Event()
        self._up.set()
        self._task: asyncio.Task[None] | None = None
        # For tests and logs: how many probes were sent, and how many outages were seen.
        self.probes = 0
        self.outages = 0

    @property
    def reachable(self) -> bool:
        return self._up.is_set()

    def unreachable(self, error: BaseException) -> None:
        """Report that a request got no connection. Starts the probe unless it runs already."""
        if self._task is not None:
            return
        self.outages += 1
        self._up.clear()
        log.warning("the API server cannot be reached, waiting for it to answer: %s", error)
        self._task = asyncio.create_task(self._probe_until_answered(), name="api-server-probe")

    async def wait(self) -> None:
        """Return once the API server answers (at once when it is not known to be down)."""
        await self._up.wait()

    async def close(self) -> None:
        """Stop probing; waiters stay blocked (their tasks are being cancelled too)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _probe_until_answered(self) -> None:
        started = self._clock.monotonic()
        delay = self._interval
        answering_since: float | None = None
        status = 0
        try:
            while True:
                await self._clock.sleep(delay)
                delay = min(self._max_interval, delay * 1.5)
                self.probes += 1
                try:
                    status = await self._probe()
                except TransportError:
                    answering_since = None
                    continue
                now = self._clock.monotonic()
                if status == 200 or status in _ANSWERS_WITHOUT_READINESS:
                    break
                if answering_since is None:
                    answering_since = now
                if now - answering_since >= self._not_ready_grace:
                    break
        finally:
            # Cancelled (close) or done: either way nobody probes any more.
            self._task = None
        log.info(
            "the API server answers again (readyz %d) after %.1fs unreachable",
            status,
            self._clock.monotonic() - started,
        )
        self._up.set()
