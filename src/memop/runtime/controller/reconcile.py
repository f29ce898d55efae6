"""The small types that cross between a reconciler and the machinery that runs it.

A reconciler receives a :class:`Request` (which object) and returns a :class:`Result` (what
happens next), or raises. It never touches the queue: the controller turns the outcome into
queue operations, exactly as controller-runtime does:

================================  ===============================================  ==============
outcome                           queue                                            result label
================================  ===============================================  ==============
raises TerminalError              forget, no retry                                 error
raises Conflict                   rate-limited requeue, logged at info              requeue
raises anything else              rate-limited requeue, logged with the error       error
Result(requeue_after=d), d > 0    forget, then add_after(d)                         requeue_after
Result(requeue=True)              rate-limited requeue                              requeue
Result() or None                  forget                                            success
================================  ===============================================  ==============

One deliberate difference from controller-runtime: there a Conflict is an error like any
other (``result="error"``, counted in ``reconcile_errors_total``, logged at error level). Here
the queue operation is the same (a rate-limited requeue) but it is labelled ``requeue`` and
logged at info: a 409 is the expected outcome of optimistic concurrency (someone wrote first
and the watch brings their version), and counting it as an error makes error-rate alerts fire
on healthy contention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol


class Request(NamedTuple):
    """Which object to reconcile: its namespace ("" when cluster-scoped) and name.

    A NamedTuple rather than a dataclass: it is hashed on every queue operation, and a
    tuple's hash runs in C.
    """

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """What the controller should do after a successful reconcile.

    ``requeue_after`` (seconds) > 0 reconciles again after that delay, resetting the backoff;
    ``requeue`` reconciles again after the rate limiter's backoff.
    """

    requeue: bool = False
    requeue_after: float = 0.0


class TerminalError(Exception):
    """A failure that retrying cannot fix; the request is dropped until the object changes."""


class Reconciler(Protocol):
    async def reconcile(self, request: Request) -> Result | None:
        """Drive the object named by ``request`` towards its desired state; idempotent."""
        ...
