"""memop.testing.apiserver.shardholding: holdings read from Lease writes, and writes found outside them."""

from __future__ import annotations

from memop.testing.apiserver.requestlog import RequestRecord
from memop.testing.apiserver.shardholding import Holding, holdings, writes_outside_holdings


def record(  # noqa: PLR0917 - a row of a request log
    time: float, agent: str, verb: str, resource: str, name: str, status: int = 200
) -> RequestRecord:
    return RequestRecord(
        time=time,
        verb=verb,
        group="",
        version="v1",
        resource=resource,
        subresource="",
        namespace="ns",
        name=name,
        user_agent=agent,
        status=status,
        path="",
        resource_request=True,
    )


def lease(time: float, agent: str, shard: int, status: int = 200) -> RequestRecord:
    return record(time, agent, "update", "leases", f"memop-shard-{shard}-of-4", status)


def test_takes_and_clears_alternate_and_a_take_ends_a_dead_holders_holding() -> None:
    log = [
        lease(1, "a", 0),  # a takes
        lease(2, "b", 0, status=409),  # b's attempt fails: not a write that counts
        lease(3, "a", 0),  # a clears
        lease(4, "b", 0),  # b takes
        lease(9, "c", 0),  # c takes: b was taken for dead
    ]
    assert holdings(log, "ns")[0] == [
        Holding("a", 0, 1, 3),
        Holding("b", 0, 4, 9),
        Holding("c", 0, 9, float("inf")),
    ]


def test_writes_outside_their_senders_holdings_are_found() -> None:
    log = [lease(1, "a", 0), lease(3, "a", 0), lease(4, "b", 0)]
    writes = [
        record(2, "a", "patch", "things", "x"),  # inside a's holding
        record(3.5, "a", "patch", "things", "x"),  # a after it cleared: outside
        record(5, "b", "patch", "things", "x"),  # inside b's
        record(6, "c", "patch", "things", "x"),  # never held
        record(6, "c", "patch", "other", "y"),  # not an object under test
    ]
    held = holdings(log, "ns")
    problems, checked = writes_outside_holdings(writes, held, lambda r: 0 if r.resource == "things" else None)
    assert checked == 4
    assert len(problems) == 2
    assert "by a at 3.500" in problems[0]
    assert "by c at 6.000; it held the shard never" in problems[1]
