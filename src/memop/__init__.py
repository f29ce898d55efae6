"""memop: Kubernetes operators in Python asyncio, on a controller runtime of its own.

- :func:`run`: the command line, ``memop`` (flags, environment variables, exit codes); a
  package of one's own runs its operator with ``sys.exit(memop.run(PROJECT))`` in its
  ``__main__``.
- :class:`Project`: an operator (its controllers, name, domain, version, Lease, image) as
  ``memop.run``, ``memop manifests`` and the ``memop.controllers`` entry-point group know it;
  :class:`ProjectError` when one is not valid.
- :mod:`memop.runtime`: what controllers are written with; :mod:`memop.testing`: the
  in-memory API server and the pytest plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memop.runtime.client import k8simport
from memop.runtime.util.lazy import lazy_exports

__version__ = "0.1.0"

# Before any memop module imports kubernetes_asyncio: only the parts memop uses, 30 MB less
# (see memop.runtime.client.k8simport).
k8simport.install()

if TYPE_CHECKING:
    from memop.cli.main import run
    from memop.project import Project, ProjectError

# Loaded on first use (PEP 562): ``import memop`` stays cheap, and k8simport.install() has run
# before any of them imports kubernetes_asyncio.
_EXPORTS: dict[str, str] = {
    "Project": "memop.project",
    "ProjectError": "memop.project",
    "run": "memop.cli.main",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = ["Project", "ProjectError", "__version__", "run"]
