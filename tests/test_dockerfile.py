"""The Dockerfile, checked by parsing it (no container engine here): two stages on
python:3.11-slim, a runtime stage that installs memop the way the README does and nothing to
build with, a non-root numeric user, the exact entrypoint, OCI labels from setup.cfg, a
.dockerignore that keeps the build context to what the build reads, and pip's index settings
for the build stage only, credentials as secrets (the same for the scaffold's Dockerfile)."""

from __future__ import annotations

import configparser
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import memop
from memop.scaffold.origin import MemopOrigin, origin_from_direct_url
from memop.scaffold.render import render_template

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
BASE_IMAGE = "python:3.11-slim"
BUILD_TOOLS = re.compile(r"\b(apt-get|apt|apk|dnf|yum|gcc|g\+\+|cc|make|build-essential|python3-dev)\b")


@dataclass
class Instruction:
    keyword: str  # upper case
    args: str  # the rest of the logical line, continuations joined
    flags: list[str] = field(default_factory=list)  # leading --flag=value options (RUN --mount=...)


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions: comments dropped, ``\\`` continuations joined."""
    result: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction is skipped by Docker too
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical = pending + line
        pending = ""
        keyword, _, rest = logical.partition(" ")
        flags: list[str] = []
        rest = rest.strip()
        while keyword.upper() in ("RUN", "COPY", "ADD", "FROM") and rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            flags.append(flag)
            rest = rest.strip()
        result.append(Instruction(keyword.upper(), rest, flags))
    assert not pending, "the Dockerfile ends inside a continued line"
    return result


def substitute(text: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), text)


def arg_defaults(items: list[Instruction]) -> dict[str, str]:
    defaults: dict[str, str] = {}
    for item in items:
        if item.keyword == "ARG":
            name, _, value = item.args.partition("=")
            defaults[name] = shlex.split(value)[0] if value.strip() else ""
    return defaults


def stages(text: str | None = None) -> list[Stage]:
    """The stages of ``text``, memop's Dockerfile by default."""
    items = instructions(DOCKERFILE.read_text() if text is None else text)
    global_args = arg_defaults(items[: next(i for i, x in enumerate(items) if x.keyword == "FROM")])
    result: list[Stage] = []
    for item in items:
        if item.keyword == "FROM":
            words = item.args.split()
            assert len(words) == 3, f"every stage is named: FROM image AS name, not {item.args!r}"
            assert words[1].upper() == "AS"
            result.append(Stage(substitute(words[0], global_args), words[2]))
        elif result:
            result[-1].instructions.append(item)
    return result


def scaffold_dockerfile(origin: MemopOrigin | None = None) -> str:
    """The Dockerfile ``memop init`` writes, for a project called widget-operator, depending on
    memop from ``origin`` (a package index by default)."""
    origin = origin or origin_from_direct_url(None)
    values = {
        "name": "widget-operator",
        "package": "widget_operator",
        "memop_where": origin.where,
        "memop_requirement_shell": shlex.quote(origin.requirement),
    }
    return render_template("init/Dockerfile", values, {"memop_from_index": origin.from_index})


# memop from a clone: the image takes memop's wheel from the project's wheels/.
FROM_A_CLONE = MemopOrigin("directory", "memop @ file:///src/memop", "the directory /src/memop")


def final() -> Stage:
    return stages()[-1]


def build() -> Stage:
    [stage] = [s for s in stages() if s.name == "build"]
    return stage


def labels(stage: Stage) -> dict[str, str]:
    variables = arg_defaults(stage.instructions)
    result: dict[str, str] = {}
    for item in stage.all("LABEL"):
        for pair in shlex.split(item.args):
            key, _, value = pair.partition("=")
            result[key] = substitute(value, variables)
    return result


def env(stage: Stage) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in stage.all("ENV"):
        for pair in shlex.split(item.args):
            key, _, value = pair.partition("=")
            result[key] = value
    return result


def pip_commands(stage: Stage) -> list[list[str]]:
    """Every ``pip ...`` command in the stage's RUN lines, as argument lists after ``pip``."""
    commands: list[list[str]] = []
    for item in stage.all("RUN"):
        for command in re.split(r"&&|;", item.args):
            words = shlex.split(command)
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value prefixes
            if words[:3] == ["python", "-m", "pip"]:
                words = words[2:]
            if words and words[0] == "pip":
                commands.append(words[1:])
    return commands


def positional(args: list[str]) -> list[str]:
    """The requirement arguments of a pip command (its options all use the --opt=value form)."""
    return [a for a in args[1:] if not a.startswith("-")]


def setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    return parser


def readme_install_args() -> list[str]:
    """The arguments of ``pip install`` in the README's first set-up command."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", readme, re.S)
    assert block is not None, "the README has no sh code block"
    for line in block.group(1).splitlines():
        if line.startswith("#") or "pip install" not in line:
            continue
        for command in line.split("&&"):
            words = shlex.split(command)
            if len(words) > 2 and words[0].endswith("pip") and words[1] == "install":
                return words[1:]
    raise AssertionError("no pip install in the README's first code block")


# --- structure ---------------------------------------------------------------------------------


def test_two_named_stages_on_the_slim_python_311_image() -> None:
    assert [(s.base, s.name) for s in stages()] == [(BASE_IMAGE, "build"), (BASE_IMAGE, "runtime")]


def test_runs_as_a_numeric_non_root_user() -> None:
    users = final().all("USER")
    assert users, "the runtime stage sets no USER: it would run as root"
    uid, _, gid = users[-1].args.partition(":")
    assert uid.isdigit()
    assert gid.isdigit()
    assert (int(uid), int(gid)) == (65532, 65532)
    for stage in stages():
        for user in stage.all("USER"):
            assert user.args.split(":")[0] not in ("0", "root"), f"stage {stage.name} switches to root"
    # Nothing after the USER runs as root again.
    last_user = final().instructions.index(users[-1])
    assert not [i for i in final().instructions[last_user:] if i.keyword in ("RUN", "COPY", "ADD")]


def test_entrypoint_is_exactly_python_m_memop() -> None:
    [entrypoint] = final().all("ENTRYPOINT")
    assert json.loads(entrypoint.args) == ["python", "-m", "memop"]
    assert not final().all("CMD")


def test_oci_labels_come_from_the_package_metadata() -> None:
    meta = setup_cfg()["metadata"]
    found = labels(final())
    prefix = "org.opencontainers.image."
    for key in ("title", "description", "source", "licenses", "version"):
        assert prefix + key in found, f"missing label {prefix}{key}"
    assert found[prefix + "title"] == meta["name"]
    assert found[prefix + "description"] == meta["description"]
    assert found[prefix + "licenses"] == meta["license"]
    assert found[prefix + "version"] == memop.__version__
    # The source has no fixed URL yet: it is a build argument.
    assert "SOURCE_URL" in arg_defaults(final().instructions)


def test_runtime_stage_has_no_build_tools_and_no_caches() -> None:
    for item in final().all("RUN"):
        assert not BUILD_TOOLS.search(item.args), f"build tooling in the runtime stage: {item.args}"
    # The wheels are mounted from the build stage for the install, not copied into a layer.
    assert not final().all("COPY")
    assert not final().all("ADD")
    [install] = final().all("RUN")
    assert any(f.startswith("--mount=type=bind,from=build,") for f in install.flags)
    removed = [c for c in pip_commands(final()) if c[0] == "uninstall"]
    assert removed
    assert {"pip", "setuptools", "wheel"} <= set(positional(removed[0]))


@pytest.mark.parametrize("stage", ["build", "runtime"])
def test_every_pip_install_or_wheel_uses_no_cache_dir(stage: str) -> None:
    [chosen] = [s for s in stages() if s.name == stage]
    commands = [c for c in pip_commands(chosen) if c[0] in ("install", "wheel")]
    assert commands
    for command in commands:
        assert "--no-cache-dir" in command, command


def test_read_only_root_filesystem_needs_no_writes() -> None:
    variables = env(final())
    assert variables["PYTHONDONTWRITEBYTECODE"] == "1"
    assert variables["HOME"] == "/tmp"  # the Deployment mounts an emptyDir there
    # Bytecode is compiled while installing (as root), so imports never try to write it later.
    install = next(c for c in pip_commands(final()) if c[0] == "install")
    assert "--no-compile" not in install


# --- the same install as the README ------------------------------------------------------------


def test_installs_memop_the_way_the_readme_does() -> None:
    """README: ``pip install .`` (the project directory, no extras). The image: ``pip wheel .``
    in the build stage, then only those wheels, no index, in the runtime stage: the same
    package, its declared dependencies, no extras."""
    readme_targets = positional(readme_install_args())
    assert readme_targets == ["."]

    [wheel] = [c for c in pip_commands(build()) if c[0] == "wheel"]
    assert positional(wheel) == readme_targets
    wheel_dir = next(a.split("=", 1)[1] for a in wheel if a.startswith("--wheel-dir="))
    assert not [a for a in wheel if a.startswith(("--no-deps", "--extra", "-e", "--editable"))]

    [install] = [c for c in pip_commands(final()) if c[0] == "install"]
    name = setup_cfg()["metadata"]["name"]
    requirements = [substitute(r, arg_defaults(final().instructions)) for r in positional(install)]
    assert requirements == [f"{name}=={memop.__version__}"]  # no [extras]
    assert "--no-index" in install
    [install_run] = final().all("RUN")
    mount = next(f for f in install_run.flags if f.startswith("--mount="))
    mount_target = dict(part.split("=", 1) for part in mount.removeprefix("--mount=").split(","))
    assert mount_target["source"] == wheel_dir
    assert f"--find-links={mount_target['target']}" in install


def test_build_stage_copies_everything_the_build_reads() -> None:
    copied: set[str] = set()
    for item in build().all("COPY"):
        *sources, _ = item.args.split()
        copied.update(s.rstrip("/") for s in sources)
    needed = {"pyproject.toml", "setup.cfg", "src"}
    # Files setup.cfg pulls in with "file:" (the long description).
    for section in setup_cfg().values():
        for value in section.values():
            needed.update(m.strip() for m in re.findall(r"file:\s*([^\s,]+)", value))
    assert needed <= copied, f"the build also reads {sorted(needed - copied)}"
    assert "README.md" in needed


# --- .dockerignore -----------------------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go filepath.Match plus ``**``) as a regex on slash paths."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out += pattern[i : end + 1]
            i = end + 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + "$")


def ignored(path: str) -> bool:
    """Whether Docker leaves ``path`` out of the build context: the last matching rule wins,
    and a rule matching a parent directory matches everything below it."""
    rules: list[tuple[bool, re.Pattern[str]]] = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        rules.append((negate, _pattern_regex(line.lstrip("!").strip("/"))))
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for negate, regex in rules:
        if any(regex.match(prefix) for prefix in prefixes):
            verdict = not negate
    return verdict


def test_dockerignore_keeps_what_the_build_reads() -> None:
    sources = sorted(str(p.relative_to(REPO)) for p in (REPO / "src/memop").rglob("*.py"))
    assert sources
    for path in ["pyproject.toml", "setup.cfg", "README.md", "src/memop/py.typed", *sources]:
        assert not ignored(path), f".dockerignore leaves out {path}, which the build needs"


@pytest.mark.parametrize(
    "path",
    [
        ".git/HEAD",
        ".venv/bin/python",
        "tests/test_dockerfile.py",
        "manifests/default/kustomization.yaml",
        "bench/workqueue.py",
        "src/memop/__pycache__/cli.cpython-311.pyc",
        "src/memop/runtime/__pycache__/client.cpython-311.pyc",
        "src/memop.egg-info/PKG-INFO",
        ".mypy_cache/3.11/memop/cli.data.json",
    ],
)
def test_dockerignore_keeps_everything_else_out(path: str) -> None:
    assert ignored(path)


def test_the_ignore_matcher_follows_docker_rules() -> None:
    """The matcher above, on patterns whose meaning Docker documents."""
    assert _pattern_regex("*.md").match("README.md")
    assert not _pattern_regex("*.md").match("docs/README.md")
    assert _pattern_regex("**/*.go").match("a/b/c.go")
    assert _pattern_regex("**/*.go").match("c.go")
    assert _pattern_regex("temp?").match("temp1")
    assert not _pattern_regex("temp?").match("temp12")


# --- pip's configuration: a private index, an intercepting proxy's CA ---------------------------

DOCKERFILES = {
    "memop": DOCKERFILE.read_text,
    "scaffold": scaffold_dockerfile,
    "scaffold-from-a-clone": lambda: scaffold_dockerfile(FROM_A_CLONE),
}
INDEX_ARGS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST")
# What tells pip where to download from or whom to trust; PIP_DISABLE_PIP_VERSION_CHECK is not.
_SOURCES = r"PIP_(INDEX_URL|EXTRA_INDEX_URL|TRUSTED_HOST|FIND_LINKS|CERT|CLIENT_CERT|CONFIG_FILE)"
PIP_SOURCE_SETTINGS = re.compile(rf"^{_SOURCES}$")
PIP_SOURCE_IN_TEXT = re.compile(rf"\b{_SOURCES}\b")
CREDENTIALS_IN_URL = re.compile(r"://[^/\s@]+@")
SECRET_NAMES = re.compile(r"TOKEN|PASSWORD|SECRET|CREDENTIAL|AUTH", re.IGNORECASE)


def mounts(item: Instruction) -> list[dict[str, str]]:
    """The ``--mount=...`` options of a RUN, each as its key=value pairs."""
    return [
        dict(part.split("=", 1) for part in flag.removeprefix("--mount=").split(","))
        for flag in item.flags
        if flag.startswith("--mount=")
    ]


def pip_wheel_run(stage: Stage) -> Instruction:
    [run] = [item for item in stage.all("RUN") if re.search(r"\bpip wheel\b", item.args)]
    return run


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_build_stage_takes_an_index_as_build_arguments_with_no_defaults(dockerfile: str) -> None:
    [build_stage, _] = stages(DOCKERFILES[dockerfile]())
    declared = {item.args.partition("=")[0]: item.args for item in build_stage.all("ARG")}
    for name in INDEX_ARGS:
        # Declared in the build stage (a global ARG would not reach RUN without it), no value
        # of its own: unset, pip keeps its defaults or the pipconf secret's.
        assert declared.get(name) == name, f"{dockerfile}: ARG {name} missing or with a default"
    run = pip_wheel_run(build_stage)
    assert build_stage.instructions.index(run) > max(
        build_stage.instructions.index(item) for item in build_stage.all("ARG")
    ), "the ARGs must come before the RUN that uses them"


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_a_pip_conf_and_a_ca_bundle_are_secrets_mounted_for_the_pip_run_only(dockerfile: str) -> None:
    [build_stage, runtime] = stages(DOCKERFILES[dockerfile]())
    run = pip_wheel_run(build_stage)
    secrets = {m["id"]: m for m in mounts(run) if m.get("type") == "secret"}
    assert set(secrets) == {"pipconf", "pipca"}
    # pip reads /etc/pip.conf wherever it runs (site-wide configuration): nothing to set.
    assert secrets["pipconf"]["target"] == "/etc/pip.conf"
    # Optional secrets (not required=true): a build without them works as before.
    assert all(m.get("required", "false") == "false" for m in secrets.values())
    ca = secrets["pipca"]["target"]
    # PIP_CERT names the bundle only when one is mounted (-s: an engine may mount an empty file
    # for a secret not given): pip fails on a PIP_CERT naming no bundle.
    assert f"if [ -s {ca} ]; then export PIP_CERT={ca}; fi" in run.args
    # Nothing copies a pip configuration or a CA into a layer of either stage.
    for stage in (build_stage, runtime):
        for item in stage.all("COPY") + stage.all("ADD"):
            assert not re.search(r"pip\.conf|\.pem|\.crt", item.args), f"{dockerfile}: {item.args}"


def _assignments(stage_items: list[Instruction]) -> dict[str, str]:
    """Every ARG default and ENV value of ``stage_items``, by name (``ARG`` alone: empty)."""
    found: dict[str, str] = {}
    for item in stage_items:
        if item.keyword == "ARG":
            name, _, value = item.args.partition("=")
            found[name] = value
        elif item.keyword == "ENV":
            for pair in shlex.split(item.args):
                name, _, value = pair.partition("=")
                found[name] = value
    return found


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_no_secret_or_index_is_baked_into_an_arg_default_or_env(dockerfile: str) -> None:
    text = DOCKERFILES[dockerfile]()
    items = instructions(text)
    for name, value in _assignments(items).items():
        assert not CREDENTIALS_IN_URL.search(value), f"{dockerfile}: {name} has credentials in a URL"
        assert not SECRET_NAMES.search(name), f"{dockerfile}: {name} looks like a secret in a build argument"
        if PIP_SOURCE_SETTINGS.match(name):
            assert value == "", f"{dockerfile}: {name}={value} is baked in (pip's sources are the builder's)"
    for stage in stages(text):
        assert not [k for k in env(stage) if PIP_SOURCE_SETTINGS.match(k)], f"{dockerfile}: {stage.name}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_runtime_stage_has_no_pip_configuration(dockerfile: str) -> None:
    """It installs the build stage's wheels and nothing from an index, so it takes no index,
    no credentials and no CA: none can end up in the image's config or history."""
    [_, runtime] = stages(DOCKERFILES[dockerfile]())
    assert not [name for name in _assignments(runtime.instructions) if name.startswith("PIP_")]
    for item in runtime.all("RUN"):
        assert not [m for m in mounts(item) if m.get("type") == "secret"], f"{dockerfile}: {item.args}"
        assert not PIP_SOURCE_IN_TEXT.search(item.args), f"{dockerfile}: {item.args}"
    [install] = [c for c in pip_commands(runtime) if c[0] == "install"]
    assert "--no-index" in install


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_header_says_how_to_use_each_setting(dockerfile: str) -> None:
    text = DOCKERFILES[dockerfile]()
    header = text[: text.index("\nARG ")]
    for usage in [
        *(f"--build-arg {name}=" for name in INDEX_ARGS),
        "--secret id=pipconf,",
        "--secret id=pipca,",
    ]:
        assert usage in header, f"{dockerfile}: the header does not show {usage}"
    assert "never put a password" in header
