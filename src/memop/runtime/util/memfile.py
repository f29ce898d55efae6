"""Files that live in memory: a path for bytes an API wants as a file name.

Some APIs take only a file name for data memop holds in memory: Python's
``SSLContext.load_cert_chain`` (a client certificate and its key, a self-signed serving pair),
the CA bundle of kubernetes_asyncio's ``Configuration.ssl_ca_cert``. Writing the data to a
temporary file, as kubernetes_asyncio's kubeconfig loader does, needs a writable temporary
directory, which a container on a read-only root filesystem does not have.

:func:`memory_file` gives such a path without touching any filesystem: on Linux it is an
anonymous memory file (``memfd_create``), named ``/proc/self/fd/N``, which any ``open`` of this
process reads like a regular file. Where the system has no memory files (macOS, or a Linux
without ``/proc``) it falls back to a temporary file readable only by its owner, removed when
the process exits: where a developer runs memop, a temporary directory exists.

Invariant: a file holding given bytes is made once per process and stays (its descriptor open,
or the temporary file present) until the process exits, so a path handed out stays valid for
every TLS context built from it later, however many times the same bytes are asked for.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
from pathlib import Path

_PROC_FDS = Path("/proc/self/fd")

# bytes -> the path of the file holding them (see the module's invariant).
_FILES: dict[bytes, str] = {}


def memory_file(content: bytes, *, name: str) -> str:
    """The path of a read-only file whose content is ``content``, valid until the process
    exits (see the module docstring). ``name`` labels it (``/proc/self/fd/N`` points at
    ``memfd:NAME``, or the temporary file's prefix), for whoever inspects the process."""
    path = _FILES.get(content)
    if path is None:
        path = None
        if hasattr(os, "memfd_create") and _PROC_FDS.is_dir():
            with contextlib.suppress(OSError):  # a sandbox refusing memfd_create: the fallback
                path = _memfd(content, name)
        _FILES[content] = path = path or _temporary(content, name)
    return path


def _memfd(content: bytes, name: str) -> str:
    import fcntl  # noqa: PLC0415 (Linux only, as memory files)

    descriptor = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(descriptor, view) :]
        # Sealed: nothing can change the bytes a TLS context is later built from.
        seals = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        fcntl.fcntl(descriptor, fcntl.F_ADD_SEALS, seals)
    except BaseException:
        os.close(descriptor)
        raise
    return str(_PROC_FDS / str(descriptor))


def _temporary(content: bytes, name: str) -> str:
    descriptor, path = tempfile.mkstemp(prefix=f"memop-{name}-")  # mode 0600
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
