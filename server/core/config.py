"""Settings from environment variables (pydantic-settings).

Unset, everything lives under TILEFORGE_HOME: an SQLite database, the artifact
folder and a broker that needs no server (kombu's SQLAlchemy transport). Set
DATABASE_URL and CELERY_BROKER_URL (or REDIS_URL) and the same code runs on
PostgreSQL and Redis.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from compiler.node_cap import DEFAULT_MAX_NODES

MiB = 1024 * 1024
TARGET_KINDS = ("cpu", "cuda")


class Settings(BaseSettings):
    """Every knob of the service and its workers."""

    model_config = SettingsConfigDict(env_prefix="TILEFORGE_", populate_by_name=True, extra="ignore")

    home: Path = Field(Path(".tileforge"), description="folder of the embedded database, artifacts and broker")
    database_url: str | None = Field(None, validation_alias=AliasChoices("DATABASE_URL", "database_url"))
    celery_broker_url: str | None = Field(
        None, validation_alias=AliasChoices("CELERY_BROKER_URL", "celery_broker_url"))
    celery_result_backend: str | None = Field(
        None, validation_alias=AliasChoices("CELERY_RESULT_BACKEND", "celery_result_backend"))
    redis_url: str | None = Field(None, validation_alias=AliasChoices("REDIS_URL", "redis_url"))
    storage_dir: Path | None = Field(None, description="artifact and model folder (default HOME/storage)")
    max_upload_bytes: int = Field(256 * MiB, gt=0, description="largest model upload accepted")
    max_model_nodes: int = Field(
        DEFAULT_MAX_NODES, gt=0, description="most ONNX nodes (subgraphs included) a model may have")
    max_inference_bytes: int = Field(64 * MiB, gt=0, description="largest .npz of inference inputs accepted")
    queue_prefix: str = Field("tileforge", pattern=r"^[A-Za-z0-9_.-]+$", description="Celery queue names are PREFIX.KIND")
    worker_queues: str = Field(
        "auto", description="target kinds a `tileforge worker` takes: `auto` (cpu, and cuda where the host "
                            "has a GPU), or named (`cpu,cuda` on a host without a GPU cross-compiles CUDA jobs, "
                            "reported as not validated)")
    job_lease_seconds: float = Field(60.0, gt=0, description="a running job whose worker is silent this long is reaped")
    job_max_attempts: int = Field(3, ge=1, description="times a job is started before it fails for good")
    job_soft_time_limit: int = Field(1800, gt=0, description="seconds before a compile is asked to stop")
    job_hard_time_limit: int = Field(1900, gt=0, description="seconds before a compile's process is killed")
    transient_retries: int = Field(
        5, ge=0, description="retries of a job after a transient fault, waiting 1-2, 2-4, 4-8 ... s (60 s at most)")
    reaper_interval_seconds: float = Field(15.0, gt=0, description="how often expired leases are looked for")
    job_republish_seconds: float = Field(
        120.0, gt=0, description="a job queued this long since its task was sent is sent again (a broker may lose it)")
    broker_polling_seconds: float = Field(
        0.1, gt=0, description="how often a worker on the embedded broker looks for a job while its queues are empty")
    sse_poll_seconds: float = Field(0.5, gt=0, description="how often the events stream looks at the job")
    db_pool_size: int = Field(10, ge=1, description="database connections each process keeps open")
    db_max_overflow: int = Field(10, ge=0, description="connections opened beyond the pool under load")
    db_pool_timeout: float = Field(30.0, gt=0, description="seconds a checkout waits for a free connection")
    api_threads: int = Field(40, ge=1, description="worker threads of the API process for blocking work")
    model_retention_seconds: float = Field(
        0.0, ge=0, description="an unpinned model older than this is deleted with its jobs and artifacts (0: kept)")
    artifact_retention_seconds: float = Field(
        0.0, ge=0, description="an artifact older than this is deleted unless its model is pinned (0: kept)")
    kernel_cache_max_bytes: int = Field(
        0, ge=0, description="kernel cache size cap; least recently used rows, stale first, are evicted (0: none)")
    orphan_blob_grace_seconds: float = Field(
        3600.0, gt=0, description="a stored blob no row refers to is deleted once it is this old")
    # Per-tenant quotas: defaults that `tileforge tenant limits` overrides for one tenant.
    tenant_max_stored_bytes: int = Field(10 * 1024 * MiB, gt=0,
                                         description="bytes of models and artifacts one tenant may keep")
    tenant_max_models: int = Field(1000, gt=0, description="models one tenant may keep")
    tenant_max_active_jobs: int = Field(200, gt=0, description="queued and running jobs one tenant may have")
    tenant_requests_per_minute: int = Field(
        6000, gt=0, description="API requests per minute per tenant (a token bucket holding one minute's worth)")
    log_format: Literal["text", "json"] = Field(
        "text", description="log lines as text or as JSON objects; both carry the job id and tenant")
    metrics_token: str | None = Field(
        None, description="bearer token a /metrics scrape must send; unset: only clients on this host may scrape")
    tenant_dispatch_window: int = Field(
        4, gt=0, description="jobs of one tenant and target kind in the broker or running at once; the rest wait their turn")

    @property
    def db_url(self) -> str:
        """The SQLAlchemy URL: DATABASE_URL (PostgreSQL via psycopg 3) or HOME/tileforge.sqlite."""
        if not self.database_url:
            return f"sqlite:///{(self.home / 'tileforge.sqlite').resolve()}"
        url = self.database_url
        for plain in ("postgres://", "postgresql://"):
            if url.startswith(plain):
                return "postgresql+psycopg://" + url[len(plain):]
        return url

    @property
    def broker_url(self) -> str:
        """CELERY_BROKER_URL, else REDIS_URL, else an SQLite broker file under HOME."""
        return (self.celery_broker_url or self.redis_url
                or f"sqla+sqlite:///{(self.home / 'broker.sqlite').resolve()}")

    @property
    def result_backend(self) -> str:
        """CELERY_RESULT_BACKEND, else Redis when there is one, else an SQLite file under HOME."""
        if self.celery_result_backend:
            return self.celery_result_backend
        broker = self.broker_url
        if broker.startswith(("redis://", "rediss://")):
            return broker
        return f"db+sqlite:///{(self.home / 'results.sqlite').resolve()}"

    @property
    def rate_limit_redis_url(self) -> str | None:
        """The Redis that API processes share their rate limits through: REDIS_URL, else a
        Redis broker; None on the embedded default (each process counts on its own)."""
        if self.redis_url:
            return self.redis_url
        return self.broker_url if self.broker_url.startswith(("redis://", "rediss://")) else None

    @property
    def db_connections(self) -> int:
        """The most connections one process's pool holds at once."""
        return self.db_pool_size + self.db_max_overflow

    @property
    def storage_root(self) -> Path:
        """Where uploaded models and built artifacts are kept."""
        return (self.storage_dir or self.home / "storage").resolve()

    @property
    def is_embedded_broker(self) -> bool:
        """True when the broker is a database table rather than a server (no fan-out, no events)."""
        return self.broker_url.startswith("sqla+")

    def queue_for(self, kind: str) -> str:
        """The Celery queue of jobs for targets of one kind (`cpu`, `cuda`), or of one named
        CPU model (`cpu.x86-64-v3`)."""
        return f"{self.queue_prefix}.{kind}"

    @property
    def worker_fresh_seconds(self) -> float:
        """A worker not heard from for this long no longer counts for routing (it announces
        itself every reaper interval)."""
        return 3 * self.reaper_interval_seconds

    def worker_kinds(self, has_gpu: bool) -> list[str]:
        """The target kinds a worker with these settings takes jobs of, on a host with or
        without a GPU: `auto` takes CUDA jobs only where it can run (and so validate) them."""
        if self.worker_queues.strip() == "auto":
            return ["cpu", "cuda"] if has_gpu else ["cpu"]
        kinds = [k.strip() for k in self.worker_queues.split(",") if k.strip()]
        unknown = sorted(set(kinds) - set(TARGET_KINDS))
        if unknown or not kinds:
            raise ValueError(f"TILEFORGE_WORKER_QUEUES names unknown target kinds {unknown or kinds}; "
                             f"known: {list(TARGET_KINDS)} or 'auto'")
        return kinds

    def to_env(self) -> dict[str, str]:
        """These settings as environment variables, for a child process (a worker) to share them."""
        env = {
            "TILEFORGE_HOME": str(self.home.resolve()),
            "DATABASE_URL": self.db_url,
            "CELERY_BROKER_URL": self.broker_url,
            "CELERY_RESULT_BACKEND": self.result_backend,
            "TILEFORGE_STORAGE_DIR": str(self.storage_root),
        }
        for name in ("max_upload_bytes", "max_model_nodes", "max_inference_bytes", "queue_prefix", "worker_queues", "job_lease_seconds",
                     "job_max_attempts", "job_soft_time_limit", "job_hard_time_limit",
                     "transient_retries", "reaper_interval_seconds", "job_republish_seconds",
                     "broker_polling_seconds", "sse_poll_seconds", "db_pool_size", "db_max_overflow", "db_pool_timeout",
                     "api_threads", "model_retention_seconds", "artifact_retention_seconds",
                     "kernel_cache_max_bytes", "orphan_blob_grace_seconds", "tenant_max_stored_bytes",
                     "tenant_max_models", "tenant_max_active_jobs", "tenant_requests_per_minute",
                     "tenant_dispatch_window", "log_format"):
            env[f"TILEFORGE_{name.upper()}"] = str(getattr(self, name))
        return env


@functools.cache
def get_settings() -> Settings:
    """The process's settings, read once from the environment."""
    return Settings()
