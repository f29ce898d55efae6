# syntax=docker/dockerfile:1
# memop's container image:  docker build -t memop:0.1.0 .
#
# Two stages. "build" makes wheels of memop and of every dependency from this directory: the
# README's `pip install .`, as wheels. "runtime" installs exactly those wheels on a clean
# python:3.11-slim: no compilers or build tools, no pip cache, no wheels left behind, no pip.
# It runs as uid:gid 65532:65532, never root, and writes nothing at run time (bytecode is
# compiled at install), so it runs on a read-only root filesystem; HOME is /tmp, the one
# writable path (an emptyDir in manifests/manager). Build with BuildKit (the default builder of
# Docker 23+, or buildah/podman): the runtime stage mounts the wheels instead of copying them.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# What building memop reads (setup.cfg takes the long description from README.md); .dockerignore
# keeps everything else out of the build context.
COPY pyproject.toml setup.cfg README.md ./
COPY src/ src/
RUN pip wheel --no-cache-dir --wheel-dir=/wheels .

FROM ${PYTHON_IMAGE} AS runtime
# VERSION must be memop's version (memop.__version__): the install below pins it.
ARG VERSION=0.1.0
# Where the source is, and its commit: e.g. --build-arg SOURCE_URL=$(git remote get-url origin)
# --build-arg REVISION=$(git rev-parse HEAD).
ARG SOURCE_URL=""
ARG REVISION=""
LABEL org.opencontainers.image.title="memop" \
      org.opencontainers.image.description="The Memcached operator, in Python asyncio, on a small controller runtime of its own" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
# --no-index: memop and its dependencies come from the build stage's wheels and nowhere else.
# --compile (pip's default, spelled out): bytecode is written now, as root, so nothing needs to
# be written when the read-only image runs. Then the installers go: the image only runs memop.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    pip install --no-cache-dir --no-index --find-links=/wheels --compile "memop==${VERSION}" \
 && pip uninstall --yes setuptools wheel pip
# PYTHONSAFEPATH: `python -m` does not put the working directory on sys.path.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONSAFEPATH=1 \
    HOME=/tmp
WORKDIR /
USER 65532:65532
ENTRYPOINT ["python", "-m", "memop"]
