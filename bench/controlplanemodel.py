"""What a real control plane does to a benchmark that the in-memory API server alone does not.

On a real control plane sharing the machine with the operator (the benches' setting: etcd,
kube-apiserver and kube-controller-manager on the same 2 cores), two things shape the operator's
figures that a Python server answering from memory leaves out:

- **Latency.** A write is answered once etcd committed it, after authentication, admission and
  API Priority and Fairness: on this machine the floor's writes took about 29 ms each on the
  v1.36.2 control plane, against 8 ms on the in-memory server. With its workers waiting longer,
  an operator reads the answers and watch events of a few writes at a time instead of a burst,
  and the controller-manager's rate limit (20 writes a second) touches more Deployments before
  the last Memcached converges.
- **CPU beside the operator.** That control plane spent 47-52 CPU-s while memop converged 1,000
  Memcacheds (most of the 2 cores), against 10 for the in-memory server. Its Go heaps are
  walked by its collectors and its requests, and the operator shares the caches with them: the
  same work then costs the operator more CPU time. In single runs beside the latency, a load
  spinning without touching memory left memop's CPU where it was; one copying memory raised it
  by a sixth.

``--write-latency`` delays every write by the missing latency, through the server's fault
injection (what tests use, :meth:`memop.testing.apiserver.faults.Faults.delay`), and
``--control-plane-cpu`` runs one process per core that spends that much CPU per write the
server answered, copying blocks of a buffer larger than the machine's caches. Both are figures
of this machine; measure yours with ``--kubeconfig K --server-pid PID ...``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memop.testing.apiserver.faults import DelayRule
    from memop.testing.apiserver.server import ApiServer

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")

# This machine's (2 cores, v1.36.2 control plane on loopback), measured side by side with the
# in-memory server: see the README's "Cost per object".
DEFAULT_WRITE_LATENCY = 0.020
DEFAULT_CONTROL_PLANE_CPU = 0.010

# Larger than this machine's last-level cache (32 MiB), as a control plane's heaps are.
_BUFFER_BYTES = 48 << 20
_BLOCK_BYTES = 4 << 20
# The load owes at most this much CPU: a machine too busy to pay it is as slow as it gets.
_MAX_DEBT_SECONDS = 2.0
_FEED_INTERVAL = 0.02


@dataclass
class ControlPlaneModel:
    """``write_latency`` seconds added to every write, and ``cpu_per_write`` CPU seconds spent
    per write in ``processes`` load processes (0, 0: the in-memory server alone)."""

    write_latency: float = 0.0
    cpu_per_write: float = 0.0
    processes: int = field(default_factory=lambda: os.cpu_count() or 1)
    _rules: list[DelayRule] = field(default_factory=list)
    _loads: list[asyncio.subprocess.Process] = field(default_factory=list)
    _feeder: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        if self.write_latency < 0 or self.cpu_per_write < 0:
            raise ValueError("a write's latency and CPU cannot be negative")

    async def start(self, server: ApiServer) -> None:
        # A rule per write verb, even with no latency: its hit count is what the load feeds on.
        self._rules = [server.faults.delay(self.write_latency, verb=verb) for verb in WRITE_VERBS]
        if self.cpu_per_write <= 0:
            return
        for _ in range(self.processes):
            self._loads.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    os.path.abspath(__file__),
                    str(self.cpu_per_write),
                    stdin=asyncio.subprocess.PIPE,
                )
            )
        self._feeder = asyncio.create_task(self._feed())

    @property
    def pids(self) -> list[int]:
        """The load processes', whose CPU is the modelled control plane's too."""
        return [load.pid for load in self._loads]

    def writes(self) -> int:
        return sum(rule.hits for rule in self._rules)

    async def _feed(self) -> None:
        """Hand the writes answered since the last turn to the load processes in turn."""
        fed = 0
        turn = 0
        while True:
            await asyncio.sleep(_FEED_INTERVAL)
            new = self.writes() - fed
            fed += new
            while new > 0:
                load = self._loads[turn % len(self._loads)]
                turn += 1
                share = max(1, new // len(self._loads))
                new -= share
                assert load.stdin is not None
                load.stdin.write(f"{share}\n".encode())

    async def stop(self) -> None:
        if self._feeder is not None:
            self._feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._feeder
        for load in self._loads:
            if load.stdin is not None:
                load.stdin.close()
            with contextlib.suppress(ProcessLookupError):
                load.kill()
            await load.wait()
        self._loads.clear()


def _spend(cpu_per_write: float) -> None:
    """A load process: for each line ``n`` on stdin, spend ``n * cpu_per_write`` CPU seconds
    copying blocks of a buffer larger than the caches; exits at EOF."""
    buffer = bytearray(_BUFFER_BYTES)
    blocks = _BUFFER_BYTES // _BLOCK_BYTES
    block = 0
    debt = 0.0
    for line in sys.stdin:
        debt = min(_MAX_DEBT_SECONDS, debt + int(line) * cpu_per_write)
        while debt > 0:
            started = time.thread_time()
            start = block * _BLOCK_BYTES
            copy = bytes(buffer[start : start + _BLOCK_BYTES])
            buffer[start] = copy[-1] ^ 1  # written too, as a heap is
            block = (block + 1) % blocks
            debt -= time.thread_time() - started


if __name__ == "__main__":
    _spend(float(sys.argv[1]))
