# batchsched: the scheduler (`batchsched run`) and the GPU node agent (`batchsched-agent`) in
# one image. deploy/ runs it as the scheduler Deployment and the agent DaemonSet.
#   docker build -t batchsched:0.1.0 .
# The agent needs no CUDA in the image: NVML (libnvidia-ml.so) comes from the host's driver
# through the NVIDIA container runtime.

FROM python:3.11-slim AS build
WORKDIR /src
# Only what the package is built from (.dockerignore keeps tests, docs and deploy out).
COPY pyproject.toml README.md ./
COPY batchsched ./batchsched
COPY gpu ./gpu
COPY queues ./queues
# grpcio is the agent's, for the kubelet's pod-resources API (which pod holds which GPU);
# the package runs without it. No `report` extra: the simulator's plots (matplotlib) are for
# laptops, not for the scheduler.
RUN pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
        --prefix=/install . "grpcio>=1.60"

FROM python:3.11-slim
COPY --from=build /install /usr/local
# A fixed non-root uid, matching the Deployment's securityContext (runAsUser 65532).
RUN groupadd --system --gid 65532 batchsched \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin batchsched
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 10251
ENTRYPOINT ["batchsched"]
CMD ["--help"]
