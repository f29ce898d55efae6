"""A simulated kube-controller-manager, kube-scheduler and kubelet for the in-memory API server.

``SimulatedControllers(store, pod_ready_delay=...)`` is what ``ApiServer(simulate_controllers=
True)`` starts: garbage collection, Deployments → ReplicaSets → pods, a Node its kubelet
registers, pods the scheduler binds to it and that run and become ready, namespace deletion,
and a ``default`` ServiceAccount in every Active namespace, all acting in-process on the store.
The root CA publisher (:mod:`memop.testing.controllers.rootca`) runs beside them, or alone
(``ApiServer(publish_root_ca=True)``).

``ControllerLimits`` paces the controllers' writes as kube-controller-manager's client rate
limits do (off by default: tests want their pods at once); ``nodes=False`` models a control
plane without nodes or kubelets.

``SimulatedControllers`` is loaded on first use: a server without the simulation imports at
most the root CA publisher and the work loop it runs on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memop.testing.controllers.common import ControllerLimits

if TYPE_CHECKING:
    from memop.testing.controllers.simulated import SimulatedControllers

__all__ = ["ControllerLimits", "SimulatedControllers"]


def __getattr__(name: str) -> Any:
    if name == "SimulatedControllers":
        from memop.testing.controllers.simulated import SimulatedControllers  # noqa: PLC0415

        return SimulatedControllers
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
