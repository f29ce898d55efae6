"""Who held which shard when, read from what the API server saw: for tests of sharded operators.

A replica of a sharded memop operator (:mod:`memop.runtime.sharding.membership`) writes a shard's
Lease only to take it (holder: itself) and to clear it (after it drained the shard), so its
successful updates of one shard Lease alternate take, clear, take, clear. Its holding of the
shard runs from a take to the next clear; a replica killed while holding never clears, and its
holding ends at the next take by another replica (which the protocol allows only once the
killed replica's membership expired).

:func:`writes_outside_holdings` then checks the invariant that matters: every write a replica
sent for an object arrived while it held that object's shard, so no two replicas ever worked
on one object at once. Everything comes from the in-memory server's request log
(:attr:`memop.testing.apiserver.server.ApiServer.log`), where each request carries its replica's
User-Agent, never from the operator's own logs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from memop.testing.apiserver.requestlog import RequestRecord

__all__ = ["Holding", "holdings", "writes_outside_holdings"]

WRITE_VERBS = frozenset(("create", "update", "patch", "delete", "deletecollection"))


@dataclass(frozen=True)
class Holding:
    """``agent`` held ``shard`` from ``start`` to ``end`` (server arrival times; ``end`` is
    infinite while it still holds)."""

    agent: str
    shard: int
    start: float
    end: float


def holdings(
    records: Iterable[RequestRecord], namespace: str, group: str = "memop"
) -> dict[int, list[Holding]]:
    """Every replica's holdings of every shard of ``group``'s Leases in ``namespace``, by shard."""
    prefix = f"{group}-shard-"
    takes_and_clears: dict[int, list[RequestRecord]] = {}
    for record in records:
        if (
            record.resource == "leases"
            and record.namespace == namespace
            and record.verb == "update"
            and record.status == 200
            and record.name.startswith(prefix)
        ):
            shard = int(record.name[len(prefix) :].split("-", 1)[0])
            takes_and_clears.setdefault(shard, []).append(record)
    out: dict[int, list[Holding]] = {}
    for shard, writes in takes_and_clears.items():
        writes.sort(key=lambda r: r.time)
        held: list[Holding] = []
        open_since: dict[str, float] = {}
        for write in writes:
            agent = write.user_agent
            if agent in open_since:
                held.append(Holding(agent, shard, open_since.pop(agent), write.time))
                continue
            # A take: whoever else still "holds" was taken for dead; their holding ends here.
            for other, since in list(open_since.items()):
                held.append(Holding(other, shard, since, write.time))
                del open_since[other]
            open_since[agent] = write.time
        held += [Holding(agent, shard, since, float("inf")) for agent, since in open_since.items()]
        out[shard] = sorted(held, key=lambda h: h.start)
    return out


def writes_outside_holdings(
    records: Iterable[RequestRecord],
    held: Mapping[int, list[Holding]],
    shard_of: Callable[[RequestRecord], int | None],
    *,
    agent_prefix: str = "",
) -> tuple[list[str], int]:
    """The writes (from agents starting with ``agent_prefix``) that arrived while their sender
    did not hold the shard ``shard_of`` gives them (None: not an object under test), described
    one per line; and how many writes were checked."""
    problems: list[str] = []
    checked = 0
    for record in records:
        if record.verb not in WRITE_VERBS or not record.user_agent.startswith(agent_prefix):
            continue
        shard = shard_of(record)
        if shard is None:
            continue
        checked += 1
        mine = [h for h in held.get(shard, ()) if h.agent == record.user_agent]
        if not any(h.start <= record.time <= h.end for h in mine):
            spans = ", ".join(f"[{h.start:.3f}, {h.end:.3f}]" for h in mine) or "never"
            problems.append(
                f"{record.verb} {record.resource}/{record.subresource} {record.namespace}/{record.name} "
                f"(shard {shard}) by {record.user_agent} at {record.time:.3f}; it held the shard {spans}"
            )
    return problems, checked
