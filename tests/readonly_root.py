"""``python tests/readonly_root.py ARGS...``: ``python -m memop ARGS...`` as if every filesystem
were mounted read-only, as memop's image runs (``readOnlyRootFilesystem``, no /tmp volume).

A read-only mount cannot be made where the tests run (CI runs as root, without mount
privileges), so this process refuses the writes itself: an audit hook (PEP 578) sees every
``open`` that would write or create a file and every call that would change a directory
(mkdir, rename, remove, ...), and fails it with ``EROFS`` as the kernel would; a program that
probes for a writable directory (``tempfile.gettempdir()``) finds none. Each refusal is also
printed on stderr as ``readonly-root: refused EVENT PATH``, so a test sees a write memop
attempted and tolerated, not only one that made it fail. Writing to the descriptors it was
given (stdout, stderr, sockets) and to ``/dev/null`` is allowed: no filesystem changes.
"""

from __future__ import annotations

import errno
import os
import runpy
import sys
from typing import Any

REFUSED = "readonly-root: refused"
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_ALLOWED = ("/dev/null",)
# Audit events (https://docs.python.org/3/library/audit_events.html) that change a directory,
# with the index of their path argument.
_CHANGES = {
    "os.mkdir": 0,
    "os.rename": 0,  # os.replace too
    "os.remove": 0,  # os.unlink too
    "os.rmdir": 0,
    "os.link": 1,
    "os.symlink": 1,
    "os.truncate": 0,
    "os.chmod": 0,
    "os.chown": 0,
    "os.utime": 0,
    "os.mkfifo": 0,
    "os.mknod": 0,
}


def _refuse(event: str, path: Any) -> None:
    os.write(2, f"{REFUSED} {event} {path!r}\n".encode(errors="replace"))
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        path, _mode, flags = args
        if isinstance(path, int) or not isinstance(flags, int):  # an open descriptor: no new file
            return
        if flags & _WRITE_FLAGS and os.fsdecode(path) not in _ALLOWED:
            _refuse(event, path)
    elif event in _CHANGES:
        path = args[_CHANGES[event]]
        if isinstance(path, (str, bytes, os.PathLike)):
            _refuse(event, path)


def install() -> None:
    """Refuse every write of this process from now on (audit hooks cannot be removed)."""
    sys.addaudithook(_hook)


def main() -> None:
    install()
    sys.argv = ["memop", *sys.argv[1:]]
    runpy.run_module("memop", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
