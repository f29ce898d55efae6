"""A simulated kube-controller-manager and kubelets for the in-memory API server.

``SimulatedControllers(store, pod_ready_delay=...)`` is what ``ApiServer(simulate_controllers=
True)`` starts: garbage collection, Deployments → ReplicaSets → pods, pods that run and become
ready, and namespace deletion, all acting in-process on the store. The root CA publisher
(:mod:`memop.testing.controllers.rootca`) runs beside them, or alone
(``ApiServer(publish_root_ca=True)``).

``SimulatedControllers`` is loaded on first use: a server without the simulation imports at
most the root CA publisher and the work loop it runs on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memop.testing.controllers.simulated import SimulatedControllers

__all__ = ["SimulatedControllers"]


def __getattr__(name: str) -> Any:
    if name == "SimulatedControllers":
        from memop.testing.controllers.simulated import SimulatedControllers  # noqa: PLC0415

        return SimulatedControllers
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
