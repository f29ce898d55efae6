"""The names a scaffolded project and API are made of, checked as Kubernetes and Python check them.

Every ``check_*`` function returns the accepted value or raises :class:`ScaffoldError` whose
message is the one line ``memop init`` / ``memop create api`` prints (exit 2). The rules are
the API server's for a CustomResourceDefinition (apiextensions' validation): the group is a
DNS-1123 subdomain with at least one dot, the plural and the lower-cased kind are DNS-1035
labels; the version follows the Kubernetes version pattern (``v1``, ``v1alpha1``,
``v2beta3``), which also orders versions; the kind is UpperCamelCase, as Kubebuilder wants it.
"""

from __future__ import annotations

import keyword
import re
import sys

from memop.runtime.api.validation import (
    LABEL_MAX,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
)

# Kubernetes' version convention: v<major>[(alpha|beta)<minor>], no leading zeros.
_VERSION = re.compile(r"v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]*")
_PACKAGE = re.compile(r"[a-z_][a-z0-9_]*")
# The suffix memop's manifests add to the project name for its namespace (NAME-system).
_NAMESPACE_SUFFIX = "-system"
# Modules of the generated package a kind's package must not replace.
RESERVED_MODULES = frozenset({"project", "__main__", "__init__"})


class ScaffoldError(ValueError):
    """A refusal; the message is the one line to print."""


def check_project_name(name: str) -> str:
    """A project name: a DNS-1123 label short enough for its namespace ``NAME-system``."""
    limit = LABEL_MAX - len(_NAMESPACE_SUFFIX)
    if not is_dns1123_label(name) or len(name) > limit:
        raise ScaffoldError(
            f"--project {name!r} is not a DNS-1123 label of at most {limit} characters (lower-case "
            "letters, digits and '-', starting and ending with a letter or digit)"
        )
    return name


def default_project_name(directory_name: str) -> str:
    """The project name a folder's name suggests: ``Widget_Operator`` → ``widget-operator``."""
    return re.sub(r"[^a-z0-9]+", "-", directory_name.lower()).strip("-")


def check_domain(domain: str) -> str:
    """The API domain (Kubebuilder's ``--domain``): a DNS-1123 subdomain."""
    if not is_dns1123_subdomain(domain):
        raise ScaffoldError(
            f"--domain {domain!r} is not a DNS-1123 subdomain (such as example.com: lower-case "
            "letters, digits, '-' and '.')"
        )
    return domain


def check_package(package: str) -> str:
    """A Python package name that imports as the project's own: lower-case, not a keyword,
    not a standard-library module (which would shadow it) and not memop."""
    if not _PACKAGE.fullmatch(package) or keyword.iskeyword(package):
        raise ScaffoldError(
            f"--package {package!r} is not a lower-case Python identifier (letters, digits and '_')"
        )
    if package in sys.stdlib_module_names:
        raise ScaffoldError(
            f"--package {package!r} is a standard-library module, which would hide the project's: "
            "choose another name"
        )
    if package in ("memop", "tests", "test"):
        raise ScaffoldError(f"--package {package!r} is taken: choose another name")
    return package


def default_package(project_name: str) -> str:
    """The package a project name suggests: ``widget-operator`` → ``widget_operator``."""
    package = project_name.replace("-", "_")
    return f"_{package}" if package[:1].isdigit() else package


def check_owner(owner: str) -> str:
    """The ``--owner`` text: one line, no control characters (it goes into pyproject.toml)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in owner):
        raise ScaffoldError("--owner must be one line of text, without control characters")
    return owner


def check_group(group: str, domain: str) -> str:
    """The full API group ``GROUP.DOMAIN`` (Kubebuilder's rule), which a CRD needs to be a
    DNS-1123 subdomain with at least one dot."""
    if not group:
        raise ScaffoldError("--group must not be empty (core Kubernetes kinds are not scaffolded)")
    full = f"{group}.{domain}" if domain else group
    if not is_dns1123_subdomain(group) or not is_dns1123_subdomain(full) or "." not in full:
        raise ScaffoldError(
            f"--group {group!r}: the API group {full!r} is not a DNS-1123 subdomain with at least one "
            "dot (lower-case letters, digits, '-' and '.'; at most 253 characters)"
        )
    return full


def next_version(version: str) -> str:
    """The version that usually follows ``version`` in Kubernetes' API lifecycle: an alpha's
    beta (``v1alpha1`` -> ``v1beta1``), a beta's stable (``v1beta2`` -> ``v1``), a stable's next
    major (``v1`` -> ``v2``, as Kubebuilder's multi-version tutorial)."""
    match = re.fullmatch(r"v([1-9][0-9]*)(?:(alpha|beta)[1-9][0-9]*)?", check_version(version))
    assert match is not None  # check_version accepted it
    major, stage = int(match.group(1)), match.group(2)
    if stage == "alpha":
        return f"v{major}beta1"
    if stage == "beta":
        return f"v{major}"
    return f"v{major + 1}"


def check_version(version: str) -> str:
    """A Kubernetes API version: ``v1``, ``v1alpha1``, ``v2beta3``."""
    if not _VERSION.fullmatch(version):
        raise ScaffoldError(
            f"--version {version!r} is not a Kubernetes API version (v1, v1alpha1, v2beta3: "
            "v<major>[alpha|beta<minor>], no leading zeros)"
        )
    return version


def check_kind(kind: str) -> str:
    """A kind: UpperCamelCase, whose lower-case form is a DNS-1035 label (the CRD's singular
    and the controller's name) and names a Python package."""
    if not _KIND.fullmatch(kind) or len(kind) > LABEL_MAX:
        raise ScaffoldError(
            f"--kind {kind!r} is not an UpperCamelCase name (a capital letter, then letters and "
            f"digits; at most {LABEL_MAX} characters)"
        )
    lower = kind.lower()
    if keyword.iskeyword(lower) or lower in RESERVED_MODULES:
        raise ScaffoldError(
            f"--kind {kind!r}: its package would be named {lower!r}, which Python or the project "
            "reserves: choose another kind"
        )
    return kind


def default_plural(kind: str) -> str:
    """Kubebuilder's plural of a kind: lower case, then ``-es`` after s, x, z, ch or sh, ``-ies``
    for a consonant then y, else ``-s``. Irregular plurals are given with ``--plural``."""
    singular = kind.lower()
    if singular.endswith(("s", "x", "z", "ch", "sh")):
        return singular + "es"
    if singular.endswith("y") and len(singular) > 1 and singular[-2] not in "aeiou":
        return singular[:-1] + "ies"
    return singular + "s"


def check_plural(plural: str, kind: str, group: str) -> str:
    """The resource's plural: a DNS-1035 label, other than the singular, and with the group a
    CRD name (``PLURAL.GROUP``) the API server accepts."""
    if not is_dns1035_label(plural):
        raise ScaffoldError(
            f"--plural {plural!r} is not a DNS-1035 label (lower-case letters, digits and '-', "
            f"starting with a letter; at most {LABEL_MAX} characters)"
        )
    if plural == kind.lower():
        raise ScaffoldError(f"--plural {plural!r} must differ from the singular {kind.lower()!r}")
    if not is_dns1123_subdomain(f"{plural}.{group}"):
        raise ScaffoldError(f"--plural {plural!r}: the CRD name {plural}.{group} is over 253 characters")
    return plural


# Names the generated modules define or import beside the resource's constant.
_TAKEN_CONSTANTS = frozenset(
    {
        "API_VERSION",
        "CONFIGMAPS",
        "CONTROLLER_NAME",
        "DEFINITION",
        "GROUP",
        "KIND",
        "NAMES",
        "NORMAL",
        "PLURAL",
        "RULES",
        "SAMPLES",
        "SINGULAR",
        "VERSION",
        "WARNING",
    }
)


def constant_name(plural: str) -> str:
    """The Python constant naming a resource: ``widgets`` → ``WIDGETS``, ``my-things`` →
    ``MY_THINGS``; ``..._RESOURCE`` when that name is one the generated code uses otherwise."""
    name = plural.upper().replace("-", "_")
    return f"{name}_RESOURCE" if name in _TAKEN_CONSTANTS else name
