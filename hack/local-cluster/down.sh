#!/usr/bin/env bash
# Stops the local cluster: the pods' containers (through containerd), then kube-proxy, the
# kubelet, containerd and the control plane, each by the pid up.sh recorded.
#   hack/local-cluster/down.sh           stop; state kept (up.sh starts it again)
#   hack/local-cluster/down.sh --clean   also unmount the pods' volumes, remove kube-proxy's
#                                        iptables rules and the bridge, delete LOCAL_CLUSTER_DIR
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

# stop NAME: SIGTERM to the recorded pid, SIGKILL after 20s.
stop() {
  running "$1" || { rm -f "$D/run/$1.pid"; return 0; }
  local pid
  pid=$(cat "$D/run/$1.pid")
  kill "$pid"
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  rm -f "$D/run/$1.pid"
  echo "stopped $1"
}

stop certmanager-standin
stop kubelet
stop kube-proxy
# The containers outlive containerd (each has its shim): kill and delete them through it.
CTR=$(find_bin ctr "${CONTAINERD_BIN:-}")
if running containerd && [ -n "$CTR" ]; then
  ctr_() { "$CTR" --address "$D/containerd/containerd.sock" -n k8s.io "$@"; }
  for task in $(ctr_ tasks ls -q 2>/dev/null); do
    ctr_ tasks kill -a -s SIGKILL "$task" >/dev/null 2>&1 || true
  done
  for task in $(ctr_ tasks ls -q 2>/dev/null); do
    for _ in $(seq 1 10); do ctr_ tasks rm "$task" >/dev/null 2>&1 && break; sleep 1; done
  done
  for container in $(ctr_ containers ls -q 2>/dev/null); do
    ctr_ containers rm "$container" >/dev/null 2>&1 || true
  done
fi
stop containerd
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd

if [ "${1:-}" = --clean ]; then
  # Pod volumes, sandbox namespaces and snapshots still mounted under the state directory.
  awk -v d="$D/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while read -r mount; do
    umount -l "$mount" || true
  done
  proxy=$(find_bin kube-proxy "${K8S_BIN:-}")
  [ -n "$proxy" ] && "$proxy" --cleanup >/dev/null 2>&1 || true
  # The kubelet's own chains (kube-proxy --cleanup leaves them): its canaries, the iptables
  # hint, and KUBE-FIREWALL, which drops traffic to 127.0.0.0/8 from other addresses.
  for ipt in iptables ip6tables; do
    command -v $ipt >/dev/null || continue
    for chain in INPUT OUTPUT; do
      while $ipt -D $chain -j KUBE-FIREWALL 2>/dev/null; do :; done
    done
    for table in filter nat mangle; do
      for own in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        $ipt -t $table -F $own 2>/dev/null && $ipt -t $table -X $own 2>/dev/null || true
      done
    done
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
  rm -rf "$D"
  echo "removed $D"
fi
