# syntax=docker/dockerfile:1
# memop's container image:  docker build -t memop:0.1.0 .
#
# Two stages. "build" makes wheels of memop and of every dependency from this directory: the
# README's `pip install .`, as wheels. "runtime" installs exactly those wheels on a clean
# python:3.11-slim: no compilers or build tools, no pip cache, no wheels left behind, no pip.
# It runs as uid:gid 65532:65532, never root, and writes nothing at run time (bytecode is
# compiled at install; kubeconfig certificates and the self-signed metrics certificate are
# kept in memory), so it runs on a read-only root filesystem, even with no writable /tmp. HOME
# is /tmp, which manifests/manager mounts an emptyDir on as room for code that wants it. Build
# with BuildKit (the default builder of Docker 23+, or buildah/podman): the runtime stage mounts
# the wheels instead of copying them, the build stage mounts the pip configuration below.
#
# Where pip finds packages (only the build stage reaches an index; the runtime stage installs
# the build stage's wheels with --no-index and takes none of this). With pip's defaults, PyPI:
#   --build-arg PIP_INDEX_URL=https://pypi.example.com/simple      another index
#   --build-arg PIP_EXTRA_INDEX_URL=https://extra.example.com/simple   one more (space-separated)
#   --build-arg PIP_TRUSTED_HOST=pypi.example.com                   a host not checked for TLS
#   --secret id=pipconf,src=pip.conf    a pip.conf, mounted as /etc/pip.conf for the one RUN that
#                                       runs pip: for an index URL with credentials in it
#   --secret id=pipca,src=corp-ca.pem   the CA bundle pip verifies servers with (PIP_CERT),
#                                       instead of its own: an intercepting proxy's CA (add the
#                                       public CAs to it if some hosts are not behind the proxy)
# Build arguments are kept in the build's history, cache and provenance: never put a password
# or token in one, use the pipconf secret, which is in no layer. A proxy is Docker's predefined
# build arguments HTTPS_PROXY, HTTP_PROXY and NO_PROXY (--build-arg HTTPS_PROXY=...), which
# pip reads too.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
# No defaults: unset, pip uses its own (or the pipconf secret's) settings.
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# What building memop reads (setup.cfg takes the long description from README.md); .dockerignore
# keeps everything else out of the build context.
COPY pyproject.toml setup.cfg README.md ./
COPY src/ src/
# The secrets are mounted for this RUN only (absent, or empty, when not given); PIP_CERT is set
# only when a CA bundle was given, since pip fails on a PIP_CERT naming no bundle.
RUN --mount=type=secret,id=pipconf,target=/etc/pip.conf \
    --mount=type=secret,id=pipca,target=/run/secrets/pipca \
    if [ -s /run/secrets/pipca ]; then export PIP_CERT=/run/secrets/pipca; fi \
 && pip wheel --no-cache-dir --wheel-dir=/wheels .

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
