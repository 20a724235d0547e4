# syntax=docker/dockerfile:1
#
# transformerd images (see README.md "Deployment" and deploy/README.md).
#
#   docker build -t transformerd .                  # GPU image (the default, last stage)
#   docker build --target cpu -t transformerd:cpu . # CPU-only image on debian:12-slim
#
# Both build with the README's own scripts: tools/bootstrap.sh installs the
# Debian/Ubuntu build dependencies (so the image exercises it in CI), then the
# CMake build that `make build` runs, in Release, with the CUDA backend ON for
# the GPU image and OFF for the CPU one. -DTD_WERROR=OFF: the images compile
# with the base image's gcc (13 on Ubuntu 24.04), newer than the gcc 12 CI
# runs -Werror with; a new warning there must not break a release image.
#
# The CUDA toolkit of the build stage has the major version of the toolkit
# the project is developed and tested with (nvcc 13.0); the runtime stage is
# the matching runtime image (cudart, cuBLAS). NVIDIA publishes no Debian-based
# CUDA images, so the GPU image is Ubuntu 24.04; the CPU image is Debian 12.
#
# Models: models/ of the build context (models/en-de, models/de-en, ...) is
# copied to /opt/transformerd/models/, and the container serves every model
# directory there (TRANSFORMERD_MODELS_DIR=/opt/transformerd/models: each
# subdirectory with config.json + model.safetensors, named by its directory;
# requests pick one by "model" or by source/target), as `make run` does.
# When the context has no models/ the image still builds, with that
# directory empty, and the container exits at start-up (status 2, "no model
# directory") unless it is given models:
#   every model under a host directory:
#     -v /srv/models:/models:ro -e TRANSFORMERD_MODELS_DIR=/models
#   one model (the empty TRANSFORMERD_MODELS_DIR means none):
#     -v /srv/models:/models:ro -e TRANSFORMERD_MODELS_DIR= -e TRANSFORMERD_MODEL=/models/NAME
# (TRANSFORMERD_MODEL alone adds its models to the bundled ones.)
#
# Configuration: every `transformerd serve` flag as TRANSFORMERD_* (e.g.
# TRANSFORMERD_MAX_BATCH_SIZE=64), or flags appended to `docker run IMAGE`.
# Stopping: SIGTERM makes the daemon drain (readiness 503, queued work
# finished within TRANSFORMERD_DRAIN_TIMEOUT_S, default 30 s, plus up to 5 s
# to write the last responses); give `docker stop` more than that
# (`docker stop -t 45`, compose stop_grace_period, k8s
# terminationGracePeriodSeconds). The daemon is PID 1 and handles SIGTERM
# itself (it blocks the signal and sigwait()s, so PID 1's default-ignore does
# not apply): no init shim needed.

ARG CUDA_VERSION=13.0.1
ARG UBUNTU=ubuntu24.04
ARG DEBIAN=12-slim

# ---------------------------------------------------------------------------
# CPU-only: build on Debian 12, run on debian:12-slim.
# ---------------------------------------------------------------------------
FROM debian:${DEBIAN} AS build-cpu
WORKDIR /src
COPY tools/bootstrap.sh tools/bootstrap.sh
RUN sh tools/bootstrap.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DTD_CUDA=OFF -DTD_BUILD_TESTS=OFF \
          -DTD_WERROR=OFF \
 && cmake --build /build --target transformerd -j "$(nproc)" \
 && mkdir -p /src/models

FROM debian:${DEBIAN} AS cpu
# Runtime libraries only: libmicrohttpd, jansson, OpenBLAS,
# libxml2 (LibreTranslate's format=html), libexttextcat and its language
# fingerprints (/detect), ICU (sentence splitting); curl for the HEALTHCHECK.
# DL3008: the distribution's current (security-patched) versions, not pins
# that break the build when the archive drops them.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        libmicrohttpd12 libjansson4 libopenblas0-pthread libxml2 \
        libexttextcat-2.0-0 libexttextcat-data libicu72 curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 transformerd \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin transformerd \
 && mkdir -p /models /opt/transformerd
COPY --from=build-cpu /build/transformerd /usr/local/bin/transformerd
COPY --from=build-cpu /src/models/ /opt/transformerd/models/
WORKDIR /opt/transformerd
ENV TRANSFORMERD_MODELS_DIR=/opt/transformerd/models \
    TRANSFORMERD_DEVICE=cpu \
    TRANSFORMERD_HOST=0.0.0.0 \
    TRANSFORMERD_PORT=8080 \
    TRANSFORMERD_DRAIN_TIMEOUT_S=30
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["/bin/sh", "-c", "curl -fsS -o /dev/null http://127.0.0.1:${TRANSFORMERD_PORT:-8080}/health/ready || exit 1"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/transformerd", "serve"]

# ---------------------------------------------------------------------------
# GPU: build on the CUDA devel image, run on the matching runtime image.
# ---------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
# Empty: CMakeLists.txt's default (sm_80, sm_90 + compute_90 PTX); e.g.
# --build-arg CUDA_ARCHITECTURES="90-real" for an H100/H200-only image.
ARG CUDA_ARCHITECTURES=""
WORKDIR /src
COPY tools/bootstrap.sh tools/bootstrap.sh
RUN sh tools/bootstrap.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DTD_CUDA=ON -DTD_BUILD_TESTS=OFF \
          -DTD_WERROR=OFF ${CUDA_ARCHITECTURES:+-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHITECTURES} \
 && cmake --build /build --target transformerd tdcuda -j "$(nproc)" \
 && mkdir -p /src/models

# The default target (last stage). The runtime image brings cudart and
# cuBLAS; the driver comes from the host through the NVIDIA Container Toolkit
# (docker run --gpus all).
FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU} AS gpu
# DL3008: the distribution's current (security-patched) versions, not pins
# that break the build when the archive drops them.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        libmicrohttpd12t64 libjansson4 libopenblas0-pthread libxml2 \
        libexttextcat-2.0-0 libexttextcat-data libicu74 curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 transformerd \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin transformerd \
 && mkdir -p /models /opt/transformerd
COPY --from=build /build/transformerd /usr/local/bin/transformerd
# the CUDA backend, opened by transformerd when --device cuda asks for it
COPY --from=build /build/libtdcuda.so /usr/local/lib/transformerd/libtdcuda.so
COPY --from=build /src/models/ /opt/transformerd/models/
WORKDIR /opt/transformerd
ENV TRANSFORMERD_MODELS_DIR=/opt/transformerd/models \
    TRANSFORMERD_DEVICE=cuda \
    TRANSFORMERD_HOST=0.0.0.0 \
    TRANSFORMERD_PORT=8080 \
    TRANSFORMERD_DRAIN_TIMEOUT_S=30
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["/bin/sh", "-c", "curl -fsS -o /dev/null http://127.0.0.1:${TRANSFORMERD_PORT:-8080}/health/ready || exit 1"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/transformerd", "serve"]
