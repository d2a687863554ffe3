"""The service's tables: tenants, tokens, models, jobs, artifacts, the kernel cache and\nper-tenant limits."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from server.db.types import UTCDateTime, utcnow

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def new_id() -> str:
    """A random identifier for rows users refer to (unguessable, unlike a counter)."""
    return uuid.uuid4().hex


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class JobStatus(StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


TERMINAL = (JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled)


class JobKind(StrEnum):
    """What a job does: build an artifact, or run one (see `RunJob`)."""

    compile = "compile"
    profile = "profile"
    inference = "inference"


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Token(Base):
    """An API token; only its sha256 is kept."""

    __tablename__ = "tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    # No expiry when None; `read` tokens may not change anything (see server/core/security.py).
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    scope: Mapped[str] = mapped_column(String(8), default="write", server_default="write")
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Model(Base):
    """An uploaded ONNX model; its bytes live in storage under their sha256."""

    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("tenant_id", "sha256"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    filename: Mapped[str] = mapped_column(String(255), default="")
    size: Mapped[int] = mapped_column(Integer)
    inputs: Mapped[list] = mapped_column(JSON)
    outputs: Mapped[list] = mapped_column(JSON)
    op_histogram: Mapped[dict] = mapped_column(JSON)
    parameters: Mapped[int] = mapped_column(Integer)
    opset: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # A pinned model, with its compilations' artifacts, is never expired (server/services/retention.py).
    pinned: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class Job(Base):
    """One compilation of one model for one target; the source of truth for its state.

    A running job holds a lease (`lease_expires_at`) that its worker renews; a
    lease that runs out means the worker died, and the reaper re-queues the job
    or fails it.
    """

    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_status_lease", "status", "lease_expires_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    target: Mapped[str] = mapped_column(String(64))
    target_kind: Mapped[str] = mapped_column(String(16))
    # Profile and inference jobs share the lease, reaper and republishing of compile jobs;
    # what they run and find lives in `run_jobs`.
    kind: Mapped[str] = mapped_column(String(16), default=JobKind.compile, server_default=JobKind.compile)
    options: Mapped[dict] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), default=JobStatus.queued)
    stage: Mapped[str | None] = mapped_column(String(32))
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    stage_seconds: Mapped[dict] = mapped_column(JSON, default=dict)
    cache_hits: Mapped[int | None] = mapped_column(Integer)
    cache_misses: Mapped[int | None] = mapped_column(Integer)
    validation: Mapped[dict | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(255))
    task_id: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # Queued but not yet sent to the broker: its tenant already has its dispatch window of
    # jobs there (server/jobs/fairness.py); sent when one of them ends.
    held: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false(), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # When its task was last sent to the broker: a queued job not picked up long after is
    # published again (server/jobs/reaper.py), since a broker may lose its messages.
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class Artifact(Base):
    """A built artifact (.tar.gz) of a succeeded job; its bytes live in storage under their sha256."""

    __tablename__ = "artifacts"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), unique=True)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    size: Mapped[int] = mapped_column(Integer)
    report: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Kernel(Base):
    """One cached kernel, shared by all tenants (it holds no weights).

    `key` is the sha256 of the signature; each part of the signature has its own
    column so it can be filtered on. `stale` marks rows built by another version
    of the compiler.
    """

    __tablename__ = "kernels"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    op_pattern: Mapped[str] = mapped_column(String(255), index=True)
    shapes: Mapped[str] = mapped_column(Text)
    dtypes: Mapped[str] = mapped_column(String(255))
    te_hash: Mapped[str] = mapped_column(String(64))
    target_fingerprint: Mapped[str] = mapped_column(String(128), index=True)
    compiler_fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    options: Mapped[str] = mapped_column(Text)
    tile_config: Mapped[dict] = mapped_column(JSON)
    te_json: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str] = mapped_column(Text)
    binary: Mapped[bytes] = mapped_column(LargeBinary)
    estimated_us: Mapped[float | None] = mapped_column(Float)
    measured_us: Mapped[float | None] = mapped_column(Float)
    validation_error: Mapped[float | None] = mapped_column(Float)
    extras: Mapped[dict] = mapped_column(JSON, default=dict)
    hit_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    stale: Mapped[bool] = mapped_column(Boolean, default=False, index=True)
    # Bytes the row holds (source, binary, TE): what the cache's size cap counts.
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # None: the shared cache; else the id of the tenant whose private namespace holds it
    # (server/services/kernel_namespace.py).
    namespace: Mapped[str | None] = mapped_column(String(32), index=True)


class WorkerHost(Base):
    """A worker that announced itself: the named CPU models and the CUDA archs its host runs,
    and when it was last seen. Jobs for such a model or arch go to its queue while a worker
    that runs it is alive, so they are validated where they can run."""

    __tablename__ = "workers"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    cpu_models: Mapped[list] = mapped_column(JSON, default=list)
    cuda_archs: Mapped[list] = mapped_column(JSON, default=list)
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class IdempotencyKey(Base):
    """A client's `Idempotency-Key` on a compilation request, with the jobs it created: the
    same key again (a retry whose answer was lost) returns those jobs instead of new ones.
    `request_sha256` tells a retry from another request that reuses the key."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("tenant_id", "key"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(255))
    request_sha256: Mapped[str] = mapped_column(String(64))
    # Deleting the model deletes its jobs, and with them what the key stood for.
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    job_ids: Mapped[list] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RunJob(Base):
    """What a profile or inference job (a `jobs` row of that kind, which holds its state,
    lease and target) runs, and what it found: the artifact, the inputs' blob (inference),
    the outputs' blob (inference) or the measurements (profile)."""

    __tablename__ = "run_jobs"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    artifact_id: Mapped[str] = mapped_column(ForeignKey("artifacts.id", ondelete="CASCADE"), index=True)
    inputs_sha256: Mapped[str | None] = mapped_column(String(64))
    outputs_sha256: Mapped[str | None] = mapped_column(String(64))
    outputs_size: Mapped[int | None] = mapped_column(Integer)
    result: Mapped[dict | None] = mapped_column(JSON)


class TenantLimits(Base):
    """One tenant's overrides of the quota settings (None: the setting's default) and
    whether its kernels stay in a private namespace (server/services/quotas.py)."""

    __tablename__ = "tenant_limits"

    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    max_stored_bytes: Mapped[int | None] = mapped_column(BigInteger)
    max_models: Mapped[int | None] = mapped_column(Integer)
    max_active_jobs: Mapped[int | None] = mapped_column(Integer)
    requests_per_minute: Mapped[int | None] = mapped_column(Integer)
    private_kernels: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
