"""The controllers memop can run, and ``--controllers``: which of them this process runs.

Every controller package contributes one :class:`~memop.runtime.controller.definition.ControllerDefinition`;
:data:`ALL` lists them in the order they are set up. A new controller is a package and one
line here.

``--controllers`` takes kube-controller-manager's syntax: a comma-separated list where ``*``
means every controller, ``name`` enables one and ``-name`` disables one (``*,-podset``: all but
PodSet). The default is ``*``.
"""

from __future__ import annotations

from memop import memcached, mypod, podset
from memop.runtime.controller.definition import ControllerDefinition

ALL: dict[str, ControllerDefinition] = {
    definition.name: definition for definition in (memcached.DEFINITION, podset.DEFINITION, mypod.DEFINITION)
}

EVERY = "*"


def parse_controllers(text: str) -> tuple[str, ...]:
    """The names ``text`` (``--controllers``) enables, in :data:`ALL` order. ValueError names
    an unknown controller, or says when nothing is left enabled."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise ValueError(
            f"--controllers: empty entry in {text!r}; use {EVERY!r} or names like memcached,podset"
        )
    enabled: set[str] = set()
    disabled: set[str] = set()
    every = False
    for item in items:
        name = item.removeprefix("-")
        if item == EVERY:
            every = True
            continue
        if name not in ALL:
            known = ", ".join(ALL)
            raise ValueError(
                f"--controllers: unknown controller {name!r} (known: {known}; {EVERY!r} for all)"
            )
        (disabled if item.startswith("-") else enabled).add(name)
    chosen = tuple(name for name in ALL if (every or name in enabled) and name not in disabled)
    if not chosen:
        raise ValueError(f"--controllers: {text!r} enables no controller")
    return chosen


def without(names: tuple[str, ...], name: str) -> str:
    """The ``--controllers`` value that runs ``names`` but ``name``: for the hint when its CRD
    is missing."""
    rest = [n for n in names if n != name]
    return ",".join(rest) if rest else ""
