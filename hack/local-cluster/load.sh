#!/usr/bin/env bash
# Loads local images (podman's or buildah's storage) into the local cluster's containerd, in
# the k8s.io namespace the kubelet uses:   hack/local-cluster/load.sh IMAGE...
# Name the image as the Pod does, fully qualified: `image: memop:0.1.0` is
# docker.io/library/memop:0.1.0 to containerd.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

[ $# -gt 0 ] || die "usage: load.sh IMAGE..."
CTR=$(containerd_bin ctr)
# save IMAGE: the image as a docker-archive on stdout.
if command -v podman >/dev/null; then save() { podman save --format docker-archive "$1"; }
elif command -v buildah >/dev/null; then save() { buildah push "$1" "docker-archive:/dev/stdout:$1"; }
else die "missing 'podman' or 'buildah'"; fi
[ -S "$D/containerd/containerd.sock" ] || die "containerd is not running (hack/local-cluster/up.sh)"
for image in "$@"; do
  save "$image" | "$CTR" --address "$D/containerd/containerd.sock" -n k8s.io images import - >/dev/null
  echo "loaded $image"
done
