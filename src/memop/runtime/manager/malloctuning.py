"""glibc's mmap threshold held at its starting 128 KiB for an operator process, so that bursts of
watch events leave no holes in its heap.

glibc's malloc maps a block of ``M_MMAP_THRESHOLD`` (128 KiB) or more on its own, and gives it
back when it is freed. But when a mapped block larger than the threshold is freed, glibc raises
the threshold to its size (up to 32 MiB), and the free space it keeps at the heap's top to
twice that. After memop's first LIST pages (a few MB each), every transient block of a burst
(a read, a batch of watch events, a decoded answer) is cut from the heap among long-lived
cached objects, and the room each leaves when freed stays in the process's RSS until a block
of its size comes again.

Held at 128 KiB (``mallopt``, which also stops the raising), large blocks are mapped, and given
back, as at start. On the real v1.36.2 control plane at 10,000 Memcacheds (issue 40's method, 2
rounds, a copy of memop with this against one without, 2026-11-30 01:11-01:23, 2-core AMD
EPYC/KVM), peak RSS was 99.1 and 99.3 MB against 100.5 and 100.0, for no more CPU (11.39 and
10.36 s from start, against 12.45 and 11.39). Before memop read into one buffer per pool
(:mod:`memop.runtime.client.http1`), each TLS read was a 256 KiB block, and holding the
threshold cost 12% more CPU (docs/performance/watch-batching.md).

Nothing is done off glibc (musl has no such threshold), nor when the environment sets glibc's
own knob (``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...`` or ``MALLOC_MMAP_THRESHOLD_``): an
image that chooses otherwise keeps its choice.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
from collections.abc import Mapping

MMAP_THRESHOLD = 128 * 1024
# mallopt's parameter number for M_MMAP_THRESHOLD (glibc's malloc.h).
_M_MMAP_THRESHOLD = -3

log = logging.getLogger(__name__)


def tune_malloc(environ: Mapping[str, str] = os.environ) -> bool:
    """Hold glibc's mmap threshold at :data:`MMAP_THRESHOLD` for this process (call it once, at
    start-up); True when it was set, False off glibc or when ``environ`` sets it already."""
    if _set_by_environment(environ) or platform.libc_ver()[0] != "glibc":
        return False
    if not ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        log.debug("glibc refused mallopt(M_MMAP_THRESHOLD, %d)", MMAP_THRESHOLD)
        return False
    return True


def _set_by_environment(environ: Mapping[str, str]) -> bool:
    return "MALLOC_MMAP_THRESHOLD_" in environ or "glibc.malloc.mmap_threshold" in environ.get(
        "GLIBC_TUNABLES", ""
    )
