"""What a set of manifests is generated for: a project, and the command that writes them.

Every generated file is named, labelled and placed after the project (:class:`Target`), and its
header names the command line that writes it (``memop manifests --controller-module
MODULE:ATTRIBUTE``, or ``--project memop`` for memop's own), so a reader knows how to
regenerate it. That command, like the manager Deployment's, is the project's, not the form that
ran: a project selected as installed (``memop manifests``, ``--project NAME``) or by its module
gets the same files byte for byte (:func:`selection`). The helpers here write YAML
deterministically: the committed files of memop's own ``manifests/`` must equal this output
byte for byte (a test checks it).

Invariant: a generated YAML file never starts with a comment-only document. Its header
comments are followed directly by the first object, and ``---`` only separates objects, so a
reader that takes the first document of each file (operator-registry does) gets an object.
"""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from memop.project import BUILTIN, Project, installed_module, module_attribute
from memop.runtime.api.permissions import Rule

COMMAND = "memop manifests"
WIDTH = 96  # a comment line's text, "# " before it

# The names of the base objects, before the overlays' namePrefix (``<project>-``): the names
# of a Kubebuilder project's config/, so the layout is familiar.
SERVICE_ACCOUNT = "controller-manager"
DEPLOYMENT = "controller-manager"


# memop's own project, wherever it is found: its manifests name it --project memop.
BUILTIN_MODULE = "memop.builtin:PROJECT"


def selection(project: Project, module: str | None = None) -> str:
    """The flags that select ``project`` again, whichever form selected it this time:
    ``--controller-module MODULE:ATTRIBUTE`` of the module that holds it (``module``, the
    ``--controller-module`` that loaded it, with the attribute it took; else the entry point
    that installs it), so ``memop manifests`` installed or by module writes the same files.
    ``--project NAME`` for memop's own project (always installed with memop), and for an
    installed project no single module holds (several entry points of ControllerDefinitions)."""
    spec = module_attribute(module) if module else installed_module(project.name)
    if not spec or (project.name == BUILTIN and spec == BUILTIN_MODULE):
        return f"--project {project.name}"
    return f"--controller-module {spec}"


@dataclass(frozen=True)
class Target:
    """A project's manifests. ``select`` is the flags that select it on the command line
    (:func:`selection` by default): every file's header names ``memop manifests`` with them,
    and the manager Deployment runs ``memop`` with them."""

    project: Project
    select: str = ""

    def __post_init__(self) -> None:
        if not self.select:
            object.__setattr__(self, "select", selection(self.project))

    @property
    def name(self) -> str:
        return self.project.name

    @property
    def namespace(self) -> str:
        """The operator's namespace: its Deployment, ServiceAccount and Lease."""
        return self.project.namespace

    @property
    def prefix(self) -> str:
        """The overlays' namePrefix: ``memop-`` makes ``memop-controller-manager``."""
        return f"{self.project.name}-"

    @property
    def labels(self) -> dict[str, str]:
        """The label of every object the operator's manifests make (fresh dict)."""
        return {"app.kubernetes.io/name": self.project.name}

    @property
    def part_of(self) -> dict[str, str]:
        """The label the install overlays add to everything, CRDs included (fresh dict)."""
        return {"app.kubernetes.io/part-of": self.project.name}

    @property
    def command(self) -> str:
        """The command line that writes every file of the project's ``manifests/``."""
        return f"{COMMAND} {self.select}"

    @property
    def run_command(self) -> list[str]:
        """What the manager's container runs (before its args): ``memop`` with the selecting flags."""
        return ["memop", *self.select.split()]

    @functools.cached_property
    def rules(self) -> tuple[Rule, ...]:
        """Every permission of the project's controllers and of the manager (merged once)."""
        from memop.manifests.rbac import merged_rules  # noqa: PLC0415 - rbac imports this module

        return merged_rules(self.project.controllers)

    @property
    def service_account(self) -> str:
        """The ServiceAccount's final name (after the overlays' prefix)."""
        return self.prefix + SERVICE_ACCOUNT

    @property
    def deployment(self) -> str:
        """The manager Deployment's final name."""
        return self.prefix + DEPLOYMENT


def image_repository(image: str) -> str:
    """The image without its tag or digest: ``registry.example.com:5000/op:1.0`` ->
    ``registry.example.com:5000/op`` (the name a kustomize ``images`` entry matches)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def image_for_version(image: str, version: str) -> str:
    """``image`` tagged ``version`` (an image pinned by digest is left as it is)."""
    if "@" in image:
        return image
    return f"{image_repository(image)}:{version}"


def header(
    target: Target, *description: str, source: str = "", notes: Iterable[str] = (), command: str = ""
) -> str:
    """The comment atop a generated file: what it is, the command that wrote it (``command``,
    by default the target's), then ``notes``."""
    origin = f" from {source}" if source else ""
    lines = [
        # A long sentence wraps as the hand-written comments do (notes keep their layout).
        *(
            wrapped
            for line in description
            for wrapped in (
                textwrap.wrap(line, WIDTH, break_long_words=False, break_on_hyphens=False) or [""]
            )
        ),
        f"Generated by `{command or target.command}`{origin}: do not edit by hand.",
        *notes,
    ]
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def dump(obj: Any) -> str:
    """One object as deterministic YAML (keys in the order given)."""
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=100)


def to_yaml(objects: Iterable[Mapping[str, Any]], head: str = "") -> str:
    """Objects as one YAML stream after the comment ``head``: ``---`` between objects only,
    so the first document is the first object (see the module's invariant)."""
    return head + "---\n".join(dump(dict(obj)) for obj in objects)


def write_changed(root: Path, files: Mapping[str, str]) -> list[Path]:
    """Write each relative path -> text of ``files`` under ``root`` unless it holds that text
    already; the paths written, in order."""
    changed: list[Path] = []
    for relative, text in files.items():
        path = root / relative
        if path.is_file() and path.read_text() == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        changed.append(path)
    return changed
