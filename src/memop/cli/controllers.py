"""``--controllers``: which of the selected project's controllers this process runs.

A project (:class:`memop.project.Project`) lists its controllers in the order they are set
up; memop's own are :data:`memop.builtin.PROJECT`'s. ``--controllers`` takes
kube-controller-manager's syntax: a comma-separated list where ``*`` means every controller,
``name`` enables one and ``-name`` disables one (``*,-podset``: all but PodSet). The default
is ``*``.
"""

from __future__ import annotations

from memop.project import Project

EVERY = "*"


def parse_controllers(text: str, project: Project) -> tuple[str, ...]:
    """The names of ``project``'s controllers ``text`` (``--controllers``) enables, in the
    project's order. ValueError names an unknown controller, or says when nothing is left
    enabled."""
    names = project.controller_names
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        example = ",".join(names[:2])
        raise ValueError(f"--controllers: empty entry in {text!r}; use {EVERY!r} or names like {example}")
    enabled: set[str] = set()
    disabled: set[str] = set()
    every = False
    for item in items:
        name = item.removeprefix("-")
        if item == EVERY:
            every = True
            continue
        if name not in names:
            known = ", ".join(names)
            raise ValueError(
                f"--controllers: unknown controller {name!r} (known: {known}; {EVERY!r} for all)"
            )
        (disabled if item.startswith("-") else enabled).add(name)
    chosen = tuple(name for name in names if (every or name in enabled) and name not in disabled)
    if not chosen:
        raise ValueError(f"--controllers: {text!r} enables no controller")
    return chosen


def without(names: tuple[str, ...], name: str) -> str:
    """The ``--controllers`` value that runs ``names`` but ``name``: for the hint when its CRD
    is missing."""
    rest = [n for n in names if n != name]
    return ",".join(rest) if rest else ""


def leave_out_hint(prog: str, running: tuple[str, ...], name: str) -> str:
    """How to run ``prog`` (the command as the user types it: ``memop``, ``python -m mypkg``)
    without the controller ``name``, one of ``running``: the advice after "install the
    CustomResourceDefinition ..." when its resource is not served."""
    rest = without(running, name)
    if not rest:
        return f"or run {prog} with --controllers naming the controllers whose CRDs are installed"
    return f"or leave the {name} controller out: --controllers={rest}"
