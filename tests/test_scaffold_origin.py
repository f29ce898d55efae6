"""``memop init`` depends on memop where memop came from (PEP 610's ``direct_url.json``): a
version range from an index, else a PEP 508 direct reference to the directory, VCS commit or
archive, recorded in pyproject.toml, the Dockerfile (through wheels/) and .ci/run.

Each origin is given as the ``direct_url.json`` text pip writes; tests/e2e/test_scaffold_install.py
pip-installs a project scaffolded from this repository's (editable) install.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from memop import __version__
from memop.scaffold.files import NewFile
from memop.scaffold.newproject import InitOptions, plan
from memop.scaffold.origin import MemopOrigin, index_requirement, memop_origin, origin_from_direct_url

COMMIT = "0123456789abcdef0123456789abcdef01234567"
SHA = "ab" * 32

# direct_url.json as pip writes it -> (kind, requirement, where).
ORIGINS = {
    "editable-clone": (
        {"url": "file:///home/me/src/memop", "dir_info": {"editable": True}},
        (
            "directory",
            "memop @ file:///home/me/src/memop",
            "the directory /home/me/src/memop (an editable install)",
        ),
    ),
    "clone": (
        {"url": "file:///home/me/my%20memop", "dir_info": {}},
        ("directory", "memop @ file:///home/me/my%20memop", "the directory /home/me/my memop"),
    ),
    "git": (
        {
            "url": "https://git.example.com/team/memop.git",
            "vcs_info": {"vcs": "git", "commit_id": COMMIT, "requested_revision": "main"},
        },
        (
            "vcs",
            f"memop @ git+https://git.example.com/team/memop.git@{COMMIT}",
            f"git https://git.example.com/team/memop.git at {COMMIT}",
        ),
    ),
    "git-subdirectory": (
        {
            "url": "https://git.example.com/mono.git",
            "vcs_info": {"vcs": "git", "commit_id": COMMIT},
            "subdirectory": "python/memop",
        },
        (
            "vcs",
            f"memop @ git+https://git.example.com/mono.git@{COMMIT}#subdirectory=python/memop",
            f"git https://git.example.com/mono.git at {COMMIT}",
        ),
    ),
    "local-wheel": (
        {"url": "file:///tmp/dist/memop-0.1.0-py3-none-any.whl", "archive_info": {"hashes": {"sha256": SHA}}},
        (
            "archive",
            "memop @ file:///tmp/dist/memop-0.1.0-py3-none-any.whl",
            "the archive /tmp/dist/memop-0.1.0-py3-none-any.whl",
        ),
    ),
    "remote-wheel": (
        {
            "url": "https://files.example.com/memop-0.1.0-py3-none-any.whl",
            "archive_info": {"hash": f"sha256={SHA}"},
        },
        (
            "archive",
            f"memop @ https://files.example.com/memop-0.1.0-py3-none-any.whl#sha256={SHA}",
            "the archive https://files.example.com/memop-0.1.0-py3-none-any.whl",
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(ORIGINS))
def test_each_origin_becomes_a_direct_reference(name: str) -> None:
    document, (kind, requirement, where) = ORIGINS[name]
    origin = origin_from_direct_url(json.dumps(document))
    assert origin == MemopOrigin(kind, requirement, where)
    parsed = Requirement(origin.requirement)
    assert (parsed.name, parsed.url) == ("memop", requirement.removeprefix("memop @ "))


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "{not json",
        "[]",
        json.dumps({"dir_info": {}}),
        json.dumps({"url": "file:///x y", "dir_info": {}}),
        json.dumps({"url": "file:///x"}),  # none of dir_info, vcs_info, archive_info
    ],
)
def test_without_a_readable_origin_memop_is_from_the_index(text: str | None) -> None:
    assert origin_from_direct_url(text, "0.3.1") == MemopOrigin("index", "memop>=0.3.1,<0.4")


def test_the_running_memops_origin_is_its_direct_url() -> None:
    text = metadata.distribution("memop").read_text("direct_url.json")
    origin = memop_origin()
    assert origin == origin_from_direct_url(text)
    if origin.kind == "directory":  # pip install -e . of this repository, as its README says
        assert Requirement(origin.requirement).url == Path(__file__).parents[1].as_uri()


def files_for(tmp_path: Path, origin: MemopOrigin) -> dict[str, NewFile]:
    _, files = plan(tmp_path, InitOptions(project="shop"), origin)
    return {new.path: new for new in files}


def test_from_an_index_the_project_is_as_it_always_was(tmp_path: Path) -> None:
    files = files_for(tmp_path, origin_from_direct_url(None))
    pyproject = tomllib.loads(files["pyproject.toml"].text)
    assert pyproject["project"]["dependencies"] == [index_requirement(__version__)]
    assert "wheels/README.md" not in files
    for name in ("Dockerfile", ".ci/run", ".dockerignore", ".gitignore", "README.md", "pyproject.toml"):
        assert "--wheel-dir wheels" not in files[name].text, name
        assert "wheels/ " not in files[name].text.replace("\n", " "), name
    assert " && pip wheel --no-cache-dir --wheel-dir=/wheels .\n" in files["Dockerfile"].text
    assert "(`pip install memop`)" in files["README.md"].text


@pytest.mark.parametrize("name", sorted(ORIGINS))
def test_elsewhere_the_project_records_it_everywhere(tmp_path: Path, name: str) -> None:
    _, (kind, requirement, where) = ORIGINS[name]
    files = files_for(tmp_path, MemopOrigin(kind, requirement, where))
    pyproject = files["pyproject.toml"].text
    assert tomllib.loads(pyproject)["project"]["dependencies"] == [requirement]
    assert f"#   {where}\n" in pyproject
    # The image: memop's wheel from wheels/, the dependency rewritten as the build reads it.
    dockerfile = files["Dockerfile"].text
    assert "COPY wheels/ /wheels/\n" in dockerfile
    assert "pip wheel --no-cache-dir --wheel-dir=/wheels --find-links=/wheels .\n" in dockerfile
    (sed,) = re.findall(r"sed -i 's\|(.*?)\|(.*?)\|' pyproject.toml", dockerfile)
    rewritten = re.sub(sed[0], sed[1], pyproject)
    assert tomllib.loads(rewritten)["project"]["dependencies"] == ["memop"]
    assert "!wheels/\n" in files[".dockerignore"].text
    assert "wheels/*.whl\n" in files[".gitignore"].text
    assert "wheels/README.md" in files
    # .ci/run makes that wheel from the same place; the README says how by hand.
    quoted = "'" + requirement + "'"
    assert f".venv/bin/pip wheel -q --no-deps --wheel-dir wheels {quoted}\n" in files[".ci/run"].text
    assert f"pip wheel --no-deps --wheel-dir wheels {quoted}" in files["README.md"].text
    assert where in files["README.md"].text
    assert "{{" not in "".join(new.text for new in files.values())


def test_the_ci_script_stays_valid_bash(tmp_path: Path) -> None:
    for document, (kind, requirement, where) in ORIGINS.values():
        script = tmp_path / f"run-{kind}"
        script.write_text(files_for(tmp_path, MemopOrigin(kind, requirement, where))[".ci/run"].text)
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, (document, done.stderr)
