"""``memop create webhook``: admission webhooks and a version conversion for a kind of the project.

In a project made by ``memop init`` whose kind K was made by ``memop create api``,
``memop create webhook --kind K --defaulting --validation`` writes ``src/PKG/<kind>/webhooks.py``
(a defaulter and/or a validator that work as written: the defaulter records who created the
object, the validator refuses what the reconciler could not act on and a blank message, with
ratcheting on update) and its tests; ``--conversion --spoke-version V2`` writes
``src/PKG/<kind>/conversion.py`` (the kind's version is the hub, V2 a spoke served beside it,
by default the version that follows the hub's: v1alpha1 -> v1beta1 -> v1 -> v2; a
renamed field as the example) and its tests. Both are wired into the kind's ``DEFINITION`` in
``src/PKG/<kind>/__init__.py`` (``webhooks=``, ``conversions=`` and, for a conversion, ``crds=``
serving both versions); then ``memop manifests`` writes the webhook configurations, Service,
certificates and conversion stanza (see :mod:`memop.manifests.webhooks`).

The hub is the kind's existing version, so the controller, its tests and the objects already
stored keep the version they have; the new version is served next to it and converted.

Refused, each with one line and nothing written: a kind the project does not have, ``--version``
other than the kind's, nothing asked for, a webhook (or conversion) already scaffolded, a
spoke version that is the hub's or not a Kubernetes version, and an ``__init__.py`` that no
longer has the lines to wire into.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from memop.scaffold import names
from memop.scaffold.files import NewFile
from memop.scaffold.names import ScaffoldError
from memop.scaffold.newapi import read_config
from memop.scaffold.render import from_import, natural_key, render_template

_DEFINITION_START = "DEFINITION = ControllerDefinition("
_CRDS_LINE = "    crds=lambda: [crd()],"


@dataclass(frozen=True)
class WebhookOptions:
    """What ``memop create webhook`` was asked for."""

    kind: str
    version: str | None = None
    defaulting: bool = False
    validation: bool = False
    conversion: bool = False
    spoke_version: str | None = None


@dataclass(frozen=True)
class KindFacts:
    """What the kind's generated ``api.py`` says of it."""

    kind: str
    module: str
    group: str
    version: str
    namespaced: bool


def _read_kind(root: Path, package: str, kind: str) -> KindFacts:
    module = kind.lower()
    api_path = root / f"src/{package}/{module}/api.py"
    try:
        source = api_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScaffoldError(
            f"--kind {kind}: the project has no such kind (no src/{package}/{module}/api.py); "
            f"make it first: memop create api --group GROUP --version VERSION --kind {kind}"
        ) from None
    if "(\n    CustomResource," in source or "(CustomResource," in source:
        raise ScaffoldError(
            f"--kind {kind}: a declared kind (memop create api without --imperative) has its webhook "
            f"already: its validate function in src/{package}/{module}/controller.py; its defaults are "
            f"the spec's in api.py. memop create webhook writes webhooks for kinds made with --imperative"
        )
    facts = {}
    for name in ("GROUP", "VERSION", "KIND"):
        match = re.search(rf'^{name} = "([^"]*)"$', source, re.MULTILINE)
        if match is None:
            raise ScaffoldError(
                f'src/{package}/{module}/api.py has no line {name} = "..." to read the kind from'
            )
        facts[name] = match.group(1)
    if facts["KIND"] != kind:
        raise ScaffoldError(f"--kind {kind}: src/{package}/{module}/api.py serves the kind {facts['KIND']}")
    return KindFacts(kind, module, facts["GROUP"], facts["VERSION"], "namespaced=False" not in source)


def wire(source: str, where: str, package: str, module: str, *, webhook: bool, conversion: bool) -> str:
    """The kind's ``__init__.py`` with its DEFINITION listing the webhook and/or conversion (and,
    for a conversion, serving the CRD of both versions); ScaffoldError naming what is missing."""
    lines = source.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip() == _DEFINITION_START]
    if len(starts) != 1:
        raise ScaffoldError(f"{where} has no line {_DEFINITION_START!r} to add the webhook to")
    start = starts[0]
    ends = [i for i in range(start + 1, len(lines)) if lines[i].rstrip() == ")"]
    if not ends:
        raise ScaffoldError(
            f"{where}: the DEFINITION = ControllerDefinition( call is never closed by a ')' line"
        )
    end = ends[0]
    body = "".join(lines[start:end])
    added: list[str] = []
    imported: list[str] = []
    if webhook:
        if re.search(r"^\s*webhooks=", body, re.MULTILINE):
            raise ScaffoldError(f"{where}: the DEFINITION lists webhooks already")
        added.append("    webhooks=(webhooks.WEBHOOK,),\n")
        imported.append("webhooks")
    if conversion:
        if re.search(r"^\s*conversions=", body, re.MULTILINE):
            raise ScaffoldError(f"{where}: the DEFINITION lists conversions already")
        crds = [i for i in range(start, end) if lines[i].rstrip() == _CRDS_LINE]
        if len(crds) != 1:
            raise ScaffoldError(
                f"{where}: the DEFINITION has no line {_CRDS_LINE.strip()!r} to serve both versions with"
            )
        lines[crds[0]] = "    crds=lambda: [conversion.crd()],\n"
        added.append("    conversions=(conversion.CONVERSION,),\n")
        imported.append("conversion")
    lines[end:end] = added

    # The imports: the kind's own modules, and the api's crd no longer used with a conversion.
    own = f"from {package}.{module} import "
    found = [i for i, line in enumerate(lines) if line.startswith(own) and "(" not in line]
    if len(found) != 1:
        raise ScaffoldError(f"{where} has no line '{own}...' to add the import to")
    at = found[0]
    names_imported = [n.strip() for n in lines[at][len(own) :].split(",")]
    lines[at] = (
        from_import(f"{package}.{module}", sorted({*names_imported, *imported}, key=natural_key)) + "\n"
    )
    if conversion:
        api_import = f"from {package}.{module}.api import "
        for i, line in enumerate(lines):
            if line.startswith(api_import) and "(" not in line:
                kept = [n.strip() for n in line[len(api_import) :].split(",") if n.strip() != "crd"]
                lines[i] = from_import(f"{package}.{module}.api", kept) + "\n"
    return "".join(lines)


def plan(root: Path, options: WebhookOptions) -> tuple[KindFacts, list[NewFile], str, str]:
    """The kind, the files to create, the path of its ``__init__.py`` and that file's new text
    (nothing written)."""
    config = read_config(root)
    kind = names.check_kind(options.kind)
    if not (options.defaulting or options.validation or options.conversion):
        raise ScaffoldError("nothing to scaffold: give --defaulting, --validation and/or --conversion")
    if options.spoke_version is not None and not options.conversion:
        raise ScaffoldError("--spoke-version is only used with --conversion")
    package = config.package
    facts = _read_kind(root, package, kind)
    if options.version is not None and names.check_version(options.version) != facts.version:
        raise ScaffoldError(
            f"--version {options.version}: the kind {kind} is served at {facts.version}, the version its"
            " controller reads (a new version comes with --conversion --spoke-version)"
        )
    files: list[tuple[str, str, str]] = []  # (template, path, what exists if it is there)
    admission = options.defaulting or options.validation
    if admission:
        files += [
            ("webhook/webhooks.py", f"src/{package}/{facts.module}/webhooks.py", "webhook"),
            ("webhook/test_webhooks.py", f"tests/test_{facts.module}_webhooks.py", "webhook"),
        ]
    spoke = ""
    if options.conversion:
        # Without --spoke-version, the version that follows the kind's in the API lifecycle.
        spoke = names.check_version(options.spoke_version or names.next_version(facts.version))
        if spoke == facts.version:
            raise ScaffoldError(f"--spoke-version {spoke} is the kind's version already: name the new one")
        files += [
            ("webhook/conversion.py", f"src/{package}/{facts.module}/conversion.py", "conversion"),
            ("webhook/test_conversion.py", f"tests/test_{facts.module}_conversion.py", "conversion"),
        ]
    for _, path, what in files:
        if (root / path).exists():
            raise ScaffoldError(f"{path} exists already: the {what} of {kind} is scaffolded")
    init_path = f"src/{package}/{facts.module}/__init__.py"
    try:
        init_source = (root / init_path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScaffoldError(f"{init_path} is missing: memop create api writes it") from None
    wired = wire(
        init_source, init_path, package, facts.module, webhook=admission, conversion=options.conversion
    )
    values = {
        "package": package,
        "module": facts.module,
        "kind": kind,
        "group": facts.group,
        "version": facts.version,
        "spoke_version": spoke,
    }
    flags = {
        "defaulting": options.defaulting,
        "validation": options.validation,
        "namespaced": facts.namespaced,
    }
    new = [NewFile(path, render_template(template, values, flags)) for template, path, _ in files]
    return facts, new, init_path, wired
