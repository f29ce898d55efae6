"""The namespaces memop found closed to new content (being deleted, or gone), said once each.

Deleting a namespace deletes everything in it, and each deletion wakes the controllers that
own or watch the object: their reconciles try to put back what the namespace controller just
took (a Deployment, a pod) and the API server refuses every create there
(:class:`~memop.runtime.client.errors.NamespaceClosed`), as it refuses the Events that describe
them. None of that is a failure to report or to retry. The controllers and the Event recorders
of a process share one :class:`ClosedNamespaces` (:data:`CLOSED_NAMESPACES` unless given
another): the first refusal in a namespace logs one info line, later ones nothing, and the
recorders drop the Events for a namespace in it without sending them.

A namespace is forgotten (open again) when something new appears in it (a controller's
informer reports an object added there: nothing can be created in a terminating namespace, so
it was recreated), or ``forget_after`` seconds (10 minutes) after its last refusal, for a
namespace recreated where no informer sees it. At most ``capacity`` namespaces are remembered,
the least recently refused forgotten first, so memory stays bounded however many namespaces
come and go. A forgotten namespace that is still closed costs one more line.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from memop.runtime.client.errors import NamespaceClosed, NamespaceTerminating
from memop.runtime.util.clock import Clock, RealClock

log = logging.getLogger("memop.namespaces")

DEFAULT_CAPACITY = 1024
DEFAULT_FORGET_AFTER = 600.0


class ClosedNamespaces:
    """Names of namespaces closed to new content, each reported in one log line."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        *,
        forget_after: float = DEFAULT_FORGET_AFTER,
        clock: Clock | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.forget_after = forget_after
        self._clock = clock or RealClock()
        # Name -> monotonic time of its last refusal. Invariant: at most `capacity` names,
        # in the order of their last refusal (oldest first).
        self._names: OrderedDict[str, float] = OrderedDict()

    def __contains__(self, namespace: object) -> bool:
        """Whether ``namespace`` is known to be closed (being deleted or gone)."""
        refused = self._names.get(namespace) if isinstance(namespace, str) else None
        if refused is None:
            return False
        if self._clock.monotonic() - refused >= self.forget_after:
            self._names.pop(str(namespace), None)
            return False
        return True

    def __len__(self) -> int:
        return len(self._names)

    def close(self, error: NamespaceClosed, namespace: str = "") -> bool:
        """Remember the namespace ``error`` names (``namespace`` when it names none) as closed.

        The first time (since it was last opened or forgotten), log one info line saying so and
        return True; afterwards return False and log nothing. A refusal that names no
        namespace is never remembered; it is logged at debug level each time.
        """
        name = error.namespace or namespace
        if not name:
            log.debug("a namespace is closed to new content: %s", error.message)
            return False
        known = name in self
        self._names[name] = self._clock.monotonic()
        self._names.move_to_end(name)
        if known:
            return False
        if len(self._names) > self.capacity:
            self._names.popitem(last=False)
        state = "being deleted" if isinstance(error, NamespaceTerminating) else "gone"
        log.info(
            "namespace %s is %s: not creating anything there (no retries, no Events)",
            name,
            state,
            extra={"closedNamespace": name},
        )
        return True

    def reopen(self, namespace: str) -> None:
        """``namespace`` takes new content again (it was recreated): forget it was closed."""
        self._names.pop(namespace, None)


# What every controller and Event recorder of the process shares unless given another.
CLOSED_NAMESPACES = ClosedNamespaces()
