"""What the environment asks of the cluster e2e tests (the variables are listed in
:mod:`memop.testing.cluster_e2e`), and the pytest helpers that skip or fail a test on it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from memop.testing.cluster_e2e.errors import ClusterE2EError

# The environment variables (see memop.testing.cluster_e2e).
IMAGE = "E2E_IMAGE"
KUBECONFIG = "E2E_KUBECONFIG"
BUILD = "E2E_BUILD"
LOAD = "E2E_LOAD"
OVERLAY = "E2E_OVERLAY"
TIMEOUT = "E2E_TIMEOUT"

DEFAULT_OVERLAY = "manifests/default"
DEFAULT_TIMEOUT = 300.0

BUILDERS: dict[str, tuple[str, ...]] = {
    "docker": ("docker", "build", "-t"),
    "podman": ("podman", "build", "-t"),
    "buildah": ("buildah", "bud", "-t"),
}


SKIP_REASON = (
    f"no cluster to deploy to: set {IMAGE}=<the operator's image, on the nodes> and {KUBECONFIG} "
    f"(or KUBECONFIG); {BUILD}=docker|podman|buildah and {LOAD}=<command> build and load the image"
)


@dataclass(frozen=True)
class Settings:
    """What the environment asks for (see the module docstring for each variable)."""

    image: str
    kubeconfig: Path
    build: str | None = None
    load: str | None = None
    overlay: str = DEFAULT_OVERLAY
    timeout: float = DEFAULT_TIMEOUT


def read_settings(environ: Mapping[str, str]) -> Settings | None:
    """The settings in ``environ``; None when ``E2E_IMAGE`` is unset (the tests skip). Raises
    :class:`ClusterE2EError` for a value that cannot be used, naming the variable."""
    image = environ.get(IMAGE, "").strip()
    if not image:
        return None
    kubeconfig = environ.get(KUBECONFIG) or environ.get("KUBECONFIG") or ""
    if not kubeconfig:
        raise ClusterE2EError(f"{IMAGE} is set but no cluster is: set {KUBECONFIG} (or KUBECONFIG)")
    first = Path(kubeconfig.split(os.pathsep)[0]).expanduser()
    if not first.is_file():
        raise ClusterE2EError(f"the kubeconfig {first} is not a file")
    build = environ.get(BUILD) or None
    if build is not None and build not in BUILDERS:
        raise ClusterE2EError(f"{BUILD}={build!r}: expected one of {', '.join(sorted(BUILDERS))}")
    raw_timeout = environ.get(TIMEOUT) or str(DEFAULT_TIMEOUT)
    try:
        timeout = float(raw_timeout)
    except ValueError:
        timeout = 0.0
    if not timeout > 0:
        raise ClusterE2EError(f"{TIMEOUT}={raw_timeout!r}: expected a number of seconds above 0")
    return Settings(
        image=image,
        kubeconfig=first,
        build=build,
        load=environ.get(LOAD) or None,
        overlay=environ.get(OVERLAY) or DEFAULT_OVERLAY,
        timeout=timeout,
    )


def skip_unless_configured(environ: Mapping[str, str] | None = None) -> pytest.MarkDecorator:
    """A pytest mark for a cluster e2e test or module (``pytestmark = skip_unless_configured()``):
    skipped with :data:`SKIP_REASON`, reported at the test's line, unless ``environ`` (default:
    the process's) sets ``E2E_IMAGE``."""
    image = (os.environ if environ is None else environ).get(IMAGE, "").strip()
    return pytest.mark.skipif(not image, reason=SKIP_REASON)


def settings_or_skip(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of ``environ`` (default: the process's), for a test or fixture: the test is
    skipped with :data:`SKIP_REASON` when none are given (mark it with
    :func:`skip_unless_configured` too, so that the skip names the test's line), and fails
    (one line, no traceback) when they cannot be used or kubectl is missing."""
    try:
        settings = read_settings(os.environ if environ is None else environ)
    except ClusterE2EError as error:
        pytest.fail(str(error), pytrace=False)
    if settings is None:
        pytest.skip(SKIP_REASON)
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not on PATH: the cluster e2e tests deploy with it", pytrace=False)
    return settings
