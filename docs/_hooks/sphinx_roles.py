"""Griffe extension for the API reference: memop's docstrings cross-reference with Sphinx roles
(``:class:`Cache```, ``:func:`declarative_controller```, ``:mod:`text <module>```), which
Markdown would show as written. Each becomes the code span of the name (or of its text)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|data|mod|meth|attr|exc|obj):`~?(?P<target>[^`<]+?)(?:\s*<[^>]+>)?`")


class SphinxRoles(griffe.Extension):
    """Rewrites every loaded object's docstring once, as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(lambda found: f"`{found['target'].strip()}`", obj.docstring.value)
