"""Where the running memop came from, and so how a project ``memop init`` makes depends on it.

memop is on no package index yet, so a project that asks for ``memop>=0.1,<0.2`` does not
install. pip records where it installed a distribution from in its ``direct_url.json``
(PEP 610): a local directory (``pip install -e .`` or ``pip install .`` of a clone), a VCS URL
at a commit, or an archive (a wheel or sdist, local or remote). :func:`memop_origin` reads it
and :func:`origin_from_direct_url` makes of it:

- the project's dependency, a PEP 508 direct reference to the same place: ``memop @
  file:///home/me/memop``, ``memop @ git+https://host/memop.git@<commit>`` (the commit pip
  installed, not the branch, so the project gets that memop), ``memop @ file:///.../memop-0.1.0-py3-none-any.whl``
  (``#sha256=...`` kept for a remote archive);
- what the project's ``.ci/run`` and Dockerfile do with it (see the init templates): the image
  installs memop from a wheel in the project's ``wheels/``, which ``.ci/run`` makes from that
  same reference, since a ``docker build`` of the project cannot reach a path on the machine
  that ran ``memop init``.

Without ``direct_url.json`` (memop installed from an index), or with one this module cannot
read, the dependency is the version range of :func:`index_requirement`, as before.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from memop import __version__


@dataclass(frozen=True)
class MemopOrigin:
    """Where memop was installed from.

    kind: ``index``, ``directory``, ``vcs`` or ``archive``.
    requirement: the PEP 508 requirement a project declares to get this memop.
    where: the place in words, for the project's README and comments (empty for ``index``).
    """

    kind: str
    requirement: str
    where: str = ""

    @property
    def from_index(self) -> bool:
        return self.kind == "index"


def index_requirement(version: str = __version__) -> str:
    """The dependency on memop from a package index: this version up to the next one that may
    break it (the next minor before 1.0, the next major after)."""
    parts = [int(p) for p in re.findall(r"\d+", version)[:3]] + [0, 0, 0]
    major, minor, patch = parts[:3]
    upper = f"{major}.{minor + 1}" if major == 0 else f"{major + 1}"
    return f"memop>={major}.{minor}.{patch},<{upper}"


def memop_origin() -> MemopOrigin:
    """Where the running memop came from (its distribution's ``direct_url.json``)."""
    try:
        text = metadata.distribution("memop").read_text("direct_url.json")
    except metadata.PackageNotFoundError:  # memop run from a source tree, not installed
        text = None
    return origin_from_direct_url(text)


def origin_from_direct_url(text: str | None, version: str = __version__) -> MemopOrigin:
    """The origin ``direct_url.json``'s ``text`` describes; ``index`` when there is none, or
    when it is not a PEP 610 document this module knows."""
    try:
        data: Any = json.loads(text) if text else None
    except ValueError:
        data = None
    url = data.get("url") if isinstance(data, dict) else None
    if not isinstance(url, str) or not url or any(c.isspace() or c == '"' for c in url):
        return MemopOrigin("index", index_requirement(version))
    subdirectory = data.get("subdirectory")
    fragment = f"#subdirectory={subdirectory}" if isinstance(subdirectory, str) and subdirectory else ""
    vcs_info = data.get("vcs_info")
    if isinstance(vcs_info, dict) and isinstance(vcs_info.get("vcs"), str):
        vcs = vcs_info["vcs"]
        commit = vcs_info.get("commit_id")
        base = url if url.startswith(f"{vcs}+") else f"{vcs}+{url}"
        pinned = f"{base}@{commit}" if isinstance(commit, str) and commit else base
        return MemopOrigin("vcs", f"memop @ {pinned}{fragment}", f"{vcs} {url} at {commit or 'its default'}")
    if isinstance(data.get("archive_info"), dict):
        # A local archive may be rebuilt in place: pin the hash of a remote one only.
        digest = "" if url.startswith("file:") else _sha256(data["archive_info"])
        parts = [f"sha256={digest}"] if digest else []
        parts += [fragment.removeprefix("#")] if fragment else []
        anchor = f"#{'&'.join(parts)}" if parts else ""
        return MemopOrigin("archive", f"memop @ {url}{anchor}", f"the archive {_readable(url)}")
    if isinstance(data.get("dir_info"), dict):
        editable = " (an editable install)" if data["dir_info"].get("editable") else ""
        where = f"the directory {_readable(url)}{editable}"
        return MemopOrigin("directory", f"memop @ {url}{fragment}", where)
    return MemopOrigin("index", index_requirement(version))


def _readable(url: str) -> str:
    """A ``file:`` URL as the path it names; any other URL as it is."""
    parsed = urllib.parse.urlsplit(url)
    return urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else url


def _sha256(archive_info: dict[str, Any]) -> str:
    hashes = archive_info.get("hashes")
    if isinstance(hashes, dict) and isinstance(hashes.get("sha256"), str):
        return str(hashes["sha256"])
    legacy = archive_info.get("hash")
    if isinstance(legacy, str) and legacy.startswith("sha256="):
        return legacy.removeprefix("sha256=")
    return ""
