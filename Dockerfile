# syntax=docker/dockerfile:1
# The image of deploy/k8s/values.yaml: the code location (`dagster api grpc`), the runs the K8sRunLauncher starts from
# it, the webserver and the daemon all run this one image, so every process has the same Dagster and project code.
#   docker build -t registry.example.com/eval-pipelines:<unique tag> .
# EXTRAS picks the optional dependencies: `k8s` is what values.yaml needs (the K8sRunLauncher, S3 compute logs).
# `--build-arg EXTRAS=k8s,celery` adds the Celery sweep job; its workers also need deploy/celery/ on PYTHONPATH
# (deploy/celery/README.md), which this image does not carry.
ARG EXTRAS=k8s

FROM python:3.11-slim AS builder
ARG EXTRAS
WORKDIR /src
RUN pip install --no-cache-dir --disable-pip-version-check "build>=1.2,<2"
COPY . .
# The project as a wheel, then every dependency as a wheel beside it: the runtime stage installs from that folder
# alone, with no compiler, no network and no source tree.
RUN python -m build --wheel --outdir /dist . \
    && pip wheel --no-cache-dir --disable-pip-version-check --wheel-dir /wheels \
        "$(ls /dist/eval_pipelines-*.whl)[${EXTRAS}]"

FROM python:3.11-slim AS runtime
ARG EXTRAS
LABEL org.opencontainers.image.title="eval-pipelines" \
      org.opencontainers.image.description="Agent-evaluation pipelines on Dagster" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric UID: Kubernetes can only enforce `runAsNonRoot` for a numeric USER.
RUN groupadd --gid 10001 eval \
    && useradd --uid 10001 --gid 10001 --home-dir /opt/eval --no-create-home --shell /usr/sbin/nologin eval \
    && mkdir -p /opt/eval/dagster_home /opt/eval/data \
    && chown -R 10001:10001 /opt/eval
# Bound, not copied, from the builder: the wheels never become a layer of the image.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
        --no-index --find-links /wheels "eval_pipelines[${EXTRAS}]"
# DAGSTER_HOME is where the Helm chart mounts the instance's dagster.yaml (global.dagsterHome in values.yaml).
# The installed package has no data/ beside it, so output goes to a writable folder unless a deployment mounts one
# (values.yaml sets EVAL_PIPELINES_DATA_DIR to its shared volume).
ENV PYTHONUNBUFFERED=1 \
    DAGSTER_HOME=/opt/eval/dagster_home \
    EVAL_PIPELINES_DATA_DIR=/opt/eval/data
WORKDIR /opt/eval
USER 10001:10001
# 3000: dagster-webserver (dagsterWebserver.service.port); 3030: the code location's gRPC server.
EXPOSE 3000 3030
# No ENTRYPOINT: the chart gives each container its whole command (`args` for the code location, `command` through
# /bin/bash for the webserver and the daemon), and an ENTRYPOINT would be prepended to the code location's.
CMD ["dagster", "api", "grpc", "-h", "0.0.0.0", "-p", "3030", "-m", "eval_pipelines.definitions", "-a", "defs"]
