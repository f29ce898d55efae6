# Shared by the hack/local-cluster scripts (sourced, not run). A developer tool: see README.md.
#
# Settings (environment variables, with their defaults):
#   K8S_BIN            directory searched first for etcd, kube-apiserver, kube-controller-manager,
#                      kube-scheduler, kubelet, kube-proxy and kubectl (then PATH)
#   CONTAINERD_BIN     directory searched first for containerd, containerd-shim-runc-v2, ctr, runc
#   CNI_BIN            the CNI plugins (bridge, host-local, loopback, portmap); the first of
#                      /opt/cni/bin, /usr/lib/cni, /usr/libexec/cni that has bridge
#   LOCAL_CLUSTER_DIR  all state: PKI, kubeconfigs, etcd data, containerd, kubelet, logs, pids
#                      ($HOME/.local/state/memop-local-cluster)
#   API_PORT=16500 ETCD_PORT=23900 KUBELET_PORT=10350 NODE_NAME=memop-node
#   POD_CIDR=10.244.0.0/24 (its first address is the bridge's, the node's and the API server's)
#   SERVICE_CIDR=10.96.0.0/16 BRIDGE=memop0
#   FEATURE_GATES      passed to kube-apiserver (default ShardedListAndWatch=true)
#   RUNC_WRAPPER       auto|1|0: see up.sh (for sandboxes that refuse setrlimit)
set -euo pipefail

LOCAL_CLUSTER_DIR=${LOCAL_CLUSTER_DIR:-$HOME/.local/state/memop-local-cluster}
D=$LOCAL_CLUSTER_DIR
API_PORT=${API_PORT:-16500}
ETCD_PORT=${ETCD_PORT:-23900}
KUBELET_PORT=${KUBELET_PORT:-10350}
NODE_NAME=${NODE_NAME:-memop-node}
POD_CIDR=${POD_CIDR:-10.244.0.0/24}
SERVICE_CIDR=${SERVICE_CIDR:-10.96.0.0/16}
BRIDGE=${BRIDGE:-memop0}
FEATURE_GATES=${FEATURE_GATES:-ShardedListAndWatch=true}
# The bridge's address: the pods' gateway, the node's InternalIP and the address every
# component listens on. It exists only on this machine (nothing listens on the host's NICs).
NODE_IP=$(python3 -c "import ipaddress,sys; print(next(ipaddress.ip_network(sys.argv[1]).hosts()))" "$POD_CIDR")
# The kubernetes Service's ClusterIP: the first address of the service range.
API_SERVICE_IP=$(python3 -c "import ipaddress,sys; print(next(ipaddress.ip_network(sys.argv[1]).hosts()))" "$SERVICE_CIDR")
export KUBECONFIG=$D/admin.kubeconfig

die() { echo "local-cluster: $*" >&2; exit 1; }

# find NAME [DIR...]: the path of executable NAME in the given directories, else on PATH; empty
# when absent.
find_bin() {
  local name=$1; shift
  local dir
  for dir in "$@"; do
    if [ -n "$dir" ] && [ -x "$dir/$name" ]; then echo "$dir/$name"; return; fi
  done
  command -v "$name" || true
}

# need NAME [DIR...]: like find_bin, but a missing executable ends the script with one line.
need() {
  local path
  path=$(find_bin "$@")
  [ -n "$path" ] || die "missing executable '$1' (looked in ${*:2} and PATH; see hack/local-cluster/README.md)"
  echo "$path"
}

k8s_bin() { need "$1" "${K8S_BIN:-}"; }
containerd_bin() { need "$1" "${CONTAINERD_BIN:-}"; }

cni_bin_dir() {
  local dir
  for dir in ${CNI_BIN:-} /opt/cni/bin /usr/lib/cni /usr/libexec/cni; do
    if [ -x "$dir/bridge" ]; then echo "$dir"; return; fi
  done
  die "missing the CNI plugins (bridge, host-local, loopback, portmap): set CNI_BIN"
}

kubectl_() { "$(k8s_bin kubectl)" "$@"; }

running() { [ -f "$D/run/$1.pid" ] && kill -0 "$(cat "$D/run/$1.pid")" 2>/dev/null; }

# start NAME COMMAND...: runs COMMAND in its own session, logs to $D/logs/NAME.log, pid in
# $D/run/NAME.pid; nothing when NAME already runs.
start() {
  local name=$1; shift
  if running "$name"; then return; fi
  setsid "$@" >>"$D/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$D/run/$name.pid"
}

# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds, or the one-line failure.
wait_for() {
  local what=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "$what not ready after ${seconds}s (logs: $D/logs)"
    sleep 1
  done
}
