"""The one node of the simulated cluster: its name, its address and the Node object its kubelet
registers.

:func:`registered_node` is the body a v1.36.2 kubelet creates when it registers itself
(``pkg/kubelet/kubelet_node_status.go``: ``initialNode`` and the status setters), on a
kind-like single-node cluster: the well-known labels (and the control-plane role label kubeadm
adds), the pod CIDR the pod IPs of :func:`~memop.testing.controllers.kubelet.pod_ip` come from,
capacity and allocatable (the kubelet's default hard eviction thresholds, ``memory.available <
100Mi`` and ``nodefs.available < 10%``, taken off), the pressure conditions False and Ready True
with the kubelet's reasons and messages, the addresses, the kubelet's port and the node info.

The simulation never sends heartbeats: the conditions keep the time of registration and the node
never goes NotReady, so tests stay deterministic.
"""

from __future__ import annotations

from memop.testing.controllers.common import Obj, rfc3339

NODE_NAME = "memop-control-plane"
HOST_IP = "172.18.0.2"
POD_CIDR = "10.244.0.0/16"
KUBELET_VERSION = "v1.36.2"
MANAGER = "kubelet"  # the field manager of a kubelet's writes (its user agent's program name)

_KI = 1024
_MEMORY_KI = 16364040  # about 15.6 GiB, as a kubelet reads it from /proc/meminfo
_EVICTION_MEMORY_KI = 100 * 1024  # memory.available < 100Mi
_STORAGE_KI = 102626232  # about 98 GiB
_STORAGE_BYTES = _STORAGE_KI * _KI


def _pressure(type_: str, reason: str, message: str, status: str, stamp: str) -> Obj:
    return {
        "type": type_,
        "status": status,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def registered_node(now: float) -> Obj:
    """The Node the simulated kubelet registers at wall-clock time ``now`` (see module doc)."""
    stamp = rfc3339(now)
    capacity = {
        "cpu": "8",
        "ephemeral-storage": f"{_STORAGE_KI}Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{_MEMORY_KI}Ki",
        "pods": "110",
    }
    # nodefs.available < 10%: the kubelet takes int64(capacity * 0.1) bytes off.
    storage_allocatable = _STORAGE_BYTES - int(_STORAGE_BYTES * 0.1)
    allocatable = {
        **capacity,
        "ephemeral-storage": str(storage_allocatable),
        "memory": f"{_MEMORY_KI - _EVICTION_MEMORY_KI}Ki",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
                "node-role.kubernetes.io/control-plane": "",
            },
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {"podCIDR": POD_CIDR, "podCIDRs": [POD_CIDR]},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                _pressure(
                    "MemoryPressure",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                    "False",
                    stamp,
                ),
                _pressure(
                    "DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", "False", stamp
                ),
                _pressure(
                    "PIDPressure",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                    "False",
                    stamp,
                ),
                _pressure("Ready", "KubeletReady", "kubelet is posting ready status", "True", stamp),
            ],
            "addresses": [
                {"type": "InternalIP", "address": HOST_IP},
                {"type": "Hostname", "address": NODE_NAME},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "6a1f3c0e9b2d4e57a8c4d1f0e3b2a917",
                "systemUUID": "6a1f3c0e-9b2d-4e57-a8c4-d1f0e3b2a917",
                "bootID": "0c4e7d52-1a3b-4f68-9e2d-7b5a8c1f3e40",
                "kernelVersion": "6.8.0-60-generic",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://2.1.3",
                "kubeletVersion": KUBELET_VERSION,
                # DisableNodeKubeProxyVersion (on since v1.33): the kubelet leaves it empty, and
                # the field has no omitempty.
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }
