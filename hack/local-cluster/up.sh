#!/usr/bin/env bash
# Starts a one-node Kubernetes cluster on this machine: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd, kubelet and kube-proxy, pods on a CNI
# bridge. A developer tool (README.md); run as root. Idempotent: what already runs is kept.
#   hack/local-cluster/up.sh      then   export KUBECONFIG=$LOCAL_CLUSTER_DIR/admin.kubeconfig
# Settings: lib.sh. Needs: the binaries named there, openssl, iptables, ip, python3.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root (the kubelet, containerd and the CNI bridge need it)"
for tool in openssl iptables ip python3; do command -v $tool >/dev/null || die "missing '$tool'"; done
ETCD=$(k8s_bin etcd); APISERVER=$(k8s_bin kube-apiserver); KCM=$(k8s_bin kube-controller-manager)
SCHEDULER=$(k8s_bin kube-scheduler); KUBELET=$(k8s_bin kubelet); PROXY=$(k8s_bin kube-proxy)
k8s_bin kubectl >/dev/null
CONTAINERD=$(containerd_bin containerd); containerd_bin containerd-shim-runc-v2 >/dev/null
RUNC=$(containerd_bin runc); CNI=$(cni_bin_dir)
for plugin in bridge host-local loopback portmap; do
  [ -x "$CNI/$plugin" ] || die "missing CNI plugin '$plugin' in $CNI"
done

mkdir -p "$D"/{pki,logs,run,etc,cni/net.d}
P=$D/pki

# --- PKI: one CA signs every serving and client certificate (a development cluster). ---
# cert NAME SUBJECT [SANS]: $P/NAME.{key,crt}, a client certificate, or a serving one with SANS.
cert() {
  local name=$1 subject=$2 sans=${3:-}
  [ -f "$P/$name.crt" ] && return
  openssl genrsa -out "$P/$name.key" 2048 2>/dev/null
  openssl req -new -key "$P/$name.key" -subj "$subject" -out "$P/$name.csr"
  local ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth${sans:+,serverAuth}"
  [ -n "$sans" ] && ext="$ext
subjectAltName=$sans"
  openssl x509 -req -in "$P/$name.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial \
    -days 365 -out "$P/$name.crt" -extfile <(echo "$ext") 2>/dev/null
  rm -f "$P/$name.csr"
}
if [ ! -f "$P/ca.crt" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$P/ca.key" -out "$P/ca.crt" -days 365 \
    -subj "/CN=memop-local-cluster-ca" 2>/dev/null
fi
[ -f "$P/sa.key" ] || { openssl genrsa -out "$P/sa.key" 2048 2>/dev/null; openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null; }
cert apiserver "/CN=kube-apiserver" \
  "IP:$NODE_IP,IP:127.0.0.1,IP:$API_SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=local-cluster-admin"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
cert kube-proxy "/CN=system:kube-proxy"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
cert kubelet-serving "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME"

# kubeconfig NAME: $D/NAME.kubeconfig, the API server with client certificate $P/NAME.
kubeconfig() {
  cat >"$D/$1.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://$NODE_IP:$API_PORT", certificate-authority: "$P/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$P/$1.crt", client-key: "$P/$1.key"}
contexts:
- name: local
  context: {cluster: local, user: $1}
current-context: local
YAML
}
for name in admin controller-manager scheduler kubelet kube-proxy; do kubeconfig $name; done

# --- The pods' bridge, created now so the API server can listen on its address. ---
prefix=${POD_CIDR#*/}
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link add "$BRIDGE" type bridge
fi
ip addr show dev "$BRIDGE" | grep -q "inet $NODE_IP/" || ip addr add "$NODE_IP/$prefix" dev "$BRIDGE"
ip link set "$BRIDGE" up
sysctl -qw net.ipv4.ip_forward=1
# kube-proxy's rules see bridged traffic only with br_netfilter: without it a pod reaching a
# ClusterIP served by a pod on the same bridge (the reply skips the DNAT) can hang.
if [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" != 1 ]; then
  modprobe br_netfilter 2>/dev/null && sysctl -qw net.bridge.bridge-nf-call-iptables=1 \
    || echo "local-cluster: warning: no br_netfilter (modprobe br_netfilter): ClusterIPs between pods may hang" >&2
fi

# --- etcd and the control plane ---
start etcd "$ETCD" --name=local --data-dir="$D/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-advertise-peer-urls="http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-cluster="local=http://127.0.0.1:$((ETCD_PORT + 1))"

# The audit log records every write (who, what, when; no bodies): enough to count what an
# operator did, e.g. across a rollout restart.
cat >"$D/etc/audit-policy.yaml" <<YAML
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
YAML
# --enable-aggregator-routing: the API server calls webhook and aggregated-API Services at
# their endpoints' pod IPs (the node routes to the bridge), not through ClusterIPs.
start kube-apiserver "$APISERVER" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port="$API_PORT" \
  --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
  --client-ca-file="$P/ca.crt" \
  --kubelet-client-certificate="$P/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$P/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$P/ca.crt" --kubelet-preferred-address-types=InternalIP \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" --enable-aggregator-routing=true \
  --audit-policy-file="$D/etc/audit-policy.yaml" --audit-log-path="$D/logs/audit.log" \
  --audit-log-maxsize=200 --feature-gates="$FEATURE_GATES" --v=1
wait_for kube-apiserver 120 curl -fsS --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" \
  "https://$NODE_IP:$API_PORT/readyz"
start kube-controller-manager "$KCM" --kubeconfig="$D/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$D/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$D/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=$((API_PORT + 1)) --leader-elect=false \
  --use-service-account-credentials=true --service-account-private-key-file="$P/sa.key" \
  --root-ca-file="$P/ca.crt" --service-cluster-ip-range="$SERVICE_CIDR" --v=1
start kube-scheduler "$SCHEDULER" --kubeconfig="$D/scheduler.kubeconfig" \
  --authentication-kubeconfig="$D/scheduler.kubeconfig" --authorization-kubeconfig="$D/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=$((API_PORT + 2)) --leader-elect=false --v=1

# --- containerd ---
# Some sandboxes (gVisor-like) refuse even root two things runc does for every container:
# raising a hard rlimit ("setrlimit RLIMIT_NOFILE: operation not permitted") and lowering
# oom_score_adj (the kubelet asks -998 for every pod sandbox: "write /proc/self/oom_score_adj:
# permission denied"). With RUNC_WRAPPER=1, or =auto (the default) when either is refused
# here, containerd runs runc through a wrapper that removes process.rlimits, and an
# oomScoreAdj below the wrapper's own, from the bundle's config.json: containers inherit
# containerd's limits and OOM score. Never needed on an ordinary machine.
runc_binary=$RUNC
wrap=${RUNC_WRAPPER:-auto}
if [ "$wrap" = auto ]; then
  wrap=0
  python3 -c 'import resource as r; s,h=r.getrlimit(r.RLIMIT_NOFILE); r.setrlimit(r.RLIMIT_NOFILE,(s,h+1))' 2>/dev/null || wrap=1
  sh -c 'echo $(($(cat /proc/self/oom_score_adj) - 1)) >/proc/self/oom_score_adj' 2>/dev/null || wrap=1
fi
if [ "$wrap" = 1 ]; then
  runc_binary=$D/etc/runc-wrapper
  cat >"$runc_binary" <<SH
#!/bin/sh
# Written by hack/local-cluster/up.sh (RUNC_WRAPPER): runc without process.rlimits, nor an
# oomScoreAdj this sandbox refuses.
bundle=
prev=
for arg in "\$@"; do
  case \$prev in --bundle|-b) bundle=\$arg;; esac
  case \$arg in --bundle=*) bundle=\${arg#--bundle=};; esac
  prev=\$arg
done
if [ -n "\$bundle" ] && [ -f "\$bundle/config.json" ]; then
  python3 - "\$bundle/config.json" <<'PY'
import json, sys
path = sys.argv[1]
config = json.load(open(path))
process = config.get("process", {})
process.pop("rlimits", None)
own = int(open("/proc/self/oom_score_adj").read())
if process.get("oomScoreAdj", own) < own:
    del process["oomScoreAdj"]
json.dump(config, open(path, "w"))
PY
fi
exec "$RUNC" "\$@"
SH
  chmod +x "$runc_binary"
fi
PAUSE_IMAGE=${PAUSE_IMAGE:-localhost/memop-local/pause:3.10}
cat >"$D/etc/containerd.toml" <<TOML
version = 2
root = "$D/containerd/root"
state = "$D/containerd/state"
[grpc]
  address = "$D/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  # Built by images.sh and imported: no registry is reachable.
  sandbox_image = "$PAUSE_IMAGE"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$runc_binary"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI"
    conf_dir = "$D/cni/net.d"
TOML
cat >"$D/cni/net.d/10-memop-local.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "memop-local",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$D/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
start containerd env PATH="$(dirname "$CONTAINERD"):$PATH" "$CONTAINERD" --config "$D/etc/containerd.toml"
wait_for containerd 60 test -S "$D/containerd/containerd.sock"

# --- kubelet ---
# cgroup v1 hosts: the kubelet refuses them unless failCgroupV1 is false (v1.35+).
cgroup_v1=false
[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] || cgroup_v1=true
cat >"$D/etc/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "$NODE_IP"
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((KUBELET_PORT + 1))
tlsCertFile: "$P/kubelet-serving.crt"
tlsPrivateKeyFile: "$P/kubelet-serving.key"
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$P/ca.crt"}
authorization: {mode: Webhook}
containerRuntimeEndpoint: "unix://$D/containerd/containerd.sock"
cgroupDriver: cgroupfs
failCgroupV1: $([ $cgroup_v1 = true ] && echo false || echo true)
failSwapOn: false
staticPodPath: "$D/etc/manifests"
# No cluster DNS: pods reach the API server by KUBERNETES_SERVICE_HOST.
resolvConf: /etc/resolv.conf
podCIDR: "$POD_CIDR"
maxPods: 110
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
YAML
mkdir -p "$D/etc/manifests" "$D/kubelet"
start kubelet "$KUBELET" --config="$D/etc/kubelet.yaml" --kubeconfig="$D/kubelet.kubeconfig" \
  --root-dir="$D/kubelet" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1

# --- kube-proxy: ClusterIPs (the kubernetes Service first) in iptables ---
cat >"$D/etc/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: "$D/kube-proxy.kubeconfig"}
hostnameOverride: "$NODE_NAME"
clusterCIDR: "$POD_CIDR"
bindAddress: "$NODE_IP"
healthzBindAddress: "127.0.0.1:$((KUBELET_PORT + 2))"
metricsBindAddress: "127.0.0.1:$((KUBELET_PORT + 3))"
# Leave the host's conntrack sysctls alone.
conntrack: {maxPerCore: 0}
YAML
start kube-proxy "$PROXY" --config="$D/etc/kube-proxy.yaml" --v=1

wait_for "node $NODE_NAME" 180 sh -c "'$(k8s_bin kubectl)' get node '$NODE_NAME' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
echo "ready: export KUBECONFIG=$KUBECONFIG   (https://$NODE_IP:$API_PORT, node $NODE_NAME)"
