# tileforge images. `cpu` (default): the API and CPU workers. `cuda`: GPU workers (nvcc + pycuda).
# docker compose builds both; see docker-compose.yml.

FROM python:3.11-slim AS cpu
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libgomp1 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY compiler compiler
COPY server server
COPY worker worker
COPY migrations migrations
RUN pip install --no-cache-dir .
RUN useradd --create-home --uid 10001 tileforge && mkdir /data && chown tileforge /data
USER tileforge
ENV TILEFORGE_HOME=/data
EXPOSE 8000
CMD ["tileforge", "serve", "--host", "0.0.0.0", "--port", "8000", "--no-token"]

FROM nvidia/cuda:12.6.3-devel-ubuntu24.04 AS cuda
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev gcc libc6-dev libgomp1 \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
COPY pyproject.toml README.md ./
COPY compiler compiler
COPY server server
COPY worker worker
COPY migrations migrations
RUN pip install --no-cache-dir '.[cuda]'
RUN useradd --create-home --uid 10001 tileforge && mkdir /data && chown tileforge /data
USER tileforge
ENV TILEFORGE_HOME=/data
CMD ["tileforge", "worker", "--queues", "cuda"]
