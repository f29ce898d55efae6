#!/usr/bin/env bash
# Builds the images the local cluster needs, since no registry is reachable, and loads them
# into its containerd (load.sh):
#   the pod sandbox (pause, static C)          localhost/memop-local/pause:3.10, and under the
#                                              name memop's MyPod sample uses
#   a memcached stand-in (images/memcached.py) the memcached image memop's samples name
#   an nginx stand-in (http.server on :80)     the nginx image the PodSet sample names
#   memop, from the repository's Dockerfile    memop:0.1.0 (docker.io/library/memop:0.1.0,
#                                              what `image: memop:0.1.0` means to containerd)
# Needs: podman (or buildah), gcc with a static libc, and PYTHON_IMAGE, a local Python 3.11
# image (the Dockerfile's base: python:3.11-slim when a registry is reachable). The memop build
# passes PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST as build arguments when set, and
# PIP_CA_BUNDLE (a PEM file) as the Dockerfile's pipca secret.
#   PYTHON_IMAGE=localhost/py311-base:local hack/local-cluster/images.sh [--no-memop]
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

[ -n "${PYTHON_IMAGE:-}" ] || die "set PYTHON_IMAGE to a local Python 3.11 image (e.g. localhost/py311-base:local)"
if command -v podman >/dev/null; then BUILD=(podman build --isolation chroot); TAG=(podman tag)
elif command -v buildah >/dev/null; then BUILD=(buildah bud --isolation chroot); TAG=(buildah tag)
else die "missing 'podman' or 'buildah'"; fi
command -v gcc >/dev/null || die "missing 'gcc' (builds the static pause binary)"

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
gcc -static -Os -o "$work/pause" "$here/images/pause.c" || die "gcc -static failed (install a static libc: libc6-dev)"
"${BUILD[@]}" -q -f "$here/images/Containerfile.pause" -t localhost/memop-local/pause:3.10 "$work" >/dev/null
"${TAG[@]}" localhost/memop-local/pause:3.10 ncr.nie.netease.com/gcr.io/google-containers/pause:3.1
"${BUILD[@]}" -q --build-arg PYTHON_IMAGE="$PYTHON_IMAGE" -f "$here/images/Containerfile.memcached" \
  -t docker.io/library/memcached:1.6.26-alpine3.19 "$here/images" >/dev/null
"${BUILD[@]}" -q --build-arg PYTHON_IMAGE="$PYTHON_IMAGE" -f "$here/images/Containerfile.web" \
  -t docker.io/library/nginx:1.27-alpine "$here/images" >/dev/null
images=(localhost/memop-local/pause:3.10 ncr.nie.netease.com/gcr.io/google-containers/pause:3.1
  docker.io/library/memcached:1.6.26-alpine3.19 docker.io/library/nginx:1.27-alpine)

if [ "${1:-}" != --no-memop ]; then
  repo=$(cd "$here/../.." && pwd)
  args=(--build-arg PYTHON_IMAGE="$PYTHON_IMAGE"
    --build-arg SOURCE_URL="$(git -C "$repo" remote get-url origin 2>/dev/null || true)"
    --build-arg REVISION="$(git -C "$repo" rev-parse HEAD)")
  for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST; do
    [ -n "${!var:-}" ] && args+=(--build-arg "$var=${!var}")
  done
  [ -n "${PIP_CA_BUNDLE:-}" ] && args+=(--secret "id=pipca,src=$PIP_CA_BUNDLE")
  # --no-cache: podman 4.3 / buildah 1.28 (Debian 12's) cannot bind-mount a *cached* stage
  # (the Dockerfile's RUN --mount=type=bind,from=build finds no /wheels on a rebuild:
  # containers/podman#16281, fixed in later releases); a full build of memop takes 25-90 s.
  started=$SECONDS
  "${BUILD[@]}" --no-cache "${args[@]}" -t docker.io/library/memop:0.1.0 "$repo" >"$work/build.log" 2>&1 \
    || { tail -20 "$work/build.log" >&2; die "memop's image did not build (above: the last lines)"; }
  echo "memop:0.1.0 built in $((SECONDS - started))s"
  images+=(docker.io/library/memop:0.1.0)
fi
"$here/load.sh" "${images[@]}"
