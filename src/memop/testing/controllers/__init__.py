"""A simulated kube-controller-manager and kubelets for the in-memory API server.

``SimulatedControllers(store, pod_ready_delay=...)`` is what ``ApiServer(simulate_controllers=
True)`` starts: garbage collection, Deployments → ReplicaSets → pods, pods that run and become
ready, and namespace deletion, all acting in-process on the store.
"""

from memop.testing.controllers.simulated import SimulatedControllers

__all__ = ["SimulatedControllers"]
