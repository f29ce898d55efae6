"""``manifests/crd`` and ``manifests/samples``: what each of a project's controllers serves and
shows, from its :class:`~memop.runtime.controller.definition.ControllerDefinition`.

CRD files are named as controller-gen names them (``<group>_<plural>.yaml``) and written by
:func:`memop.runtime.api.crdgen.crd_yaml`, which a controller package can call itself (memop's
do, and their tests compare): one object per file, so the OLM bundle carries the same bytes.
"""

from __future__ import annotations

import sys

from memop.manifests.target import Target, dump, header
from memop.runtime.api.crdgen import crd_yaml
from memop.runtime.controller.definition import ControllerDefinition


def declared_in(definition: ControllerDefinition) -> str:
    """The package a controller is declared in (for the CRD files' headers): the package of its
    setup function, ``memop.podset`` for ``memop.podset.controller.setup``."""
    module = definition.setup.__module__
    if hasattr(sys.modules.get(module), "__path__"):
        return module  # setup is in the package's __init__
    return module.rpartition(".")[0] or module


def crd_files(target: Target) -> dict[str, str]:
    """File name under manifests/crd -> text: every controller's CRDs and the kustomization."""
    files: dict[str, str] = {}
    for definition in target.project.controllers:
        for crd in definition.crds():
            spec = crd["spec"]
            name = f"{spec['group']}_{spec['names']['plural']}.yaml"
            files[name] = crd_yaml(crd, declared_in(definition), target.command)
    files["kustomization.yaml"] = header(target, f"The CRDs of every controller of {target.name}.") + (
        "resources:\n" + "".join(f"- {name}\n" for name in files)
    )
    return files


def sample_files(target: Target) -> dict[str, str]:
    """File name under manifests/samples -> text: every controller's sample objects."""
    files: dict[str, str] = {}
    for definition in target.project.controllers:
        for name, sample in definition.samples().items():
            files[name] = header(
                target,
                f"A sample {sample.get('kind', 'object')} of the {definition.name} controller "
                f"({definition.description}).",
                source=declared_in(definition),
            ) + dump(sample)
    return files
