"""The examples under examples/ are operators of their own, installed by nothing: their
folders go on sys.path, so each test imports its operator as its author would run it
(``memop --controller-module webapp`` from its folder)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

for folder in sorted(EXAMPLES.iterdir()):
    if folder.is_dir() and str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


@pytest.fixture
def apiserver_options() -> dict[str, Any]:
    """The examples run on the in-memory server as a user's project's tests do: with
    kube-controller-manager's controllers and the kubelets simulated (pods start and get
    ready, the garbage collector deletes what an owner's deletion leaves)."""
    return {"simulate_controllers": True, "pod_ready_delay": 0.05}
