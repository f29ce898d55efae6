"""Package exports loaded on first use (PEP 562).

``memop``, ``memop.runtime`` and ``memop.testing`` export names from their submodules without
importing them: ``import memop`` must stay cheap and must run
:func:`memop.runtime.client.k8simport.install` before anything imports kubernetes_asyncio, and
the pytest plugin imports ``memop.testing`` in every test run.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name in ``exports`` maps to the module that
    defines it (``"pkg.mod"``), to ``"pkg.mod:other"`` for a name exported under another, or to
    the submodule of the same name. A name is imported once, then kept in the package."""

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        if not attribute and module.rsplit(".", 1)[1] == name:  # a submodule
            value = importlib.import_module(module)
        else:  # a name defined in that module
            value = getattr(importlib.import_module(module), attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
