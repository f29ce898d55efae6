"""Import the parts of ``kubernetes_asyncio`` memop uses, not the ~1,000 generated classes.

``import kubernetes_asyncio.client`` (or anything under ``kubernetes_asyncio``: the top-level
package imports all of it) loads every generated API and model class: about 30 MB of resident
memory and 0.4 s of start-up, for code memop never runs (it talks to the API server with plain
dicts through ``ApiClient.rest_client``). That is a third of memop's memory with 1,000
Memcacheds. :func:`install` imports only what memop calls (``ApiClient``, ``Configuration``,
the REST client, ``kubernetes_asyncio.config``) behind lazy package modules:

- ``kubernetes_asyncio`` and ``kubernetes_asyncio.client`` (and ``.client.models``) are real
  packages whose ``__init__`` has not run yet; the submodules memop needs are imported into them
  and ``ApiClient``/``Configuration`` set as in the real ``__init__``;
- asking one of them for any other name (``from kubernetes_asyncio.client import V1Pod``,
  ``kubernetes_asyncio.watch``) runs that package's real ``__init__`` first, once, so every
  other user of the library sees it whole: nothing breaks, it just costs what it always did.

It does nothing if ``kubernetes_asyncio`` is imported already, and falls back to the plain
import if the library's layout is not the expected one (another version): memop then works
as before, with the memory and start-up it had.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import types
from typing import Any

log = logging.getLogger("memop.k8simport")

# The lazy packages, outermost first, and the submodules memop imports eagerly.
LAZY_PACKAGES = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")
EAGER_MODULES = (
    "kubernetes_asyncio.client.exceptions",
    "kubernetes_asyncio.client.configuration",
    "kubernetes_asyncio.client.rest",
    "kubernetes_asyncio.client.api_client",
)


class _LazyPackage(types.ModuleType):
    """A package whose real ``__init__`` runs on the first lookup of a name it lacks."""

    _memop_lazy_spec: Any  # the package's ModuleSpec, until its __init__ has run

    def __getattr__(self, name: str) -> Any:
        spec = self.__dict__.get("_memop_lazy_spec")
        if spec is None or name.startswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        del self._memop_lazy_spec
        spec.loader.exec_module(self)  # the real __init__, into this module object
        return getattr(self, name)


def _lazy_package(name: str) -> _LazyPackage:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not a package")
    module = _LazyPackage(name)
    module.__spec__ = spec
    module.__file__ = spec.origin
    module.__path__ = list(spec.submodule_search_locations)
    module.__package__ = name
    module._memop_lazy_spec = spec
    return module


def install() -> bool:
    """Make ``import kubernetes_asyncio...`` cheap for memop (see the module docstring).

    Returns whether the lazy packages were installed (False: the library was imported
    already, or its layout is unexpected and it was imported the plain way)."""
    if any(name in sys.modules for name in LAZY_PACKAGES):
        return False
    try:
        for name in LAZY_PACKAGES:
            module = _lazy_package(name)  # its parent is in sys.modules: found on its __path__
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
        for name in EAGER_MODULES:
            importlib.import_module(name)
        client = sys.modules["kubernetes_asyncio.client"]
        api_client = sys.modules["kubernetes_asyncio.client.api_client"]
        configuration = sys.modules["kubernetes_asyncio.client.configuration"]
        client.__dict__["ApiClient"] = api_client.ApiClient
        client.__dict__["Configuration"] = configuration.Configuration
        importlib.import_module("kubernetes_asyncio.config")
    except Exception as error:  # any surprise: the plain import, as before
        for name in [n for n in sys.modules if n.partition(".")[0] == "kubernetes_asyncio"]:
            del sys.modules[name]
        log.debug("importing kubernetes_asyncio whole: %s", error)
        importlib.import_module("kubernetes_asyncio")
        return False
    return True
