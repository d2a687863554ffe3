"""Request and response bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class ErrorOut(BaseModel):
    """Every error response: one message that names the problem."""

    detail: str = Field(description="what is wrong, in words (never a stack trace)")


class ModelOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    sha256: str
    filename: str
    size: int
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    op_histogram: dict[str, int]
    parameters: int
    opset: int
    created_at: datetime


class CompilationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_id: str
    target: str = Field("cpu", description="a name from GET /v1/targets")
    options: dict[str, Any] = Field(default_factory=dict, description="compile options")


class CompilationOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    model_id: str
    target: str
    options: dict[str, Any]
    status: str
    stage: str | None
    progress: float
    stage_seconds: dict[str, float]
    cache_hits: int | None
    cache_misses: int | None
    validation: dict[str, Any] | None
    error: str | None
    attempts: int
    worker: str | None = Field(None, description="the Celery worker that ran (or runs) the job")
    artifact_id: str | None = None
    artifact_sha256: str | None = None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class KernelOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    key: str
    op_pattern: str
    shapes: str
    dtypes: str
    te_hash: str
    target_fingerprint: str
    compiler_fingerprint: str
    options: str
    tile_config: dict[str, Any]
    estimated_us: float | None
    measured_us: float | None
    validation_error: float | None
    hit_count: int
    created_at: datetime
    last_used_at: datetime
    stale: bool


class KernelDetail(KernelOut):
    source: str
    te_json: str
    binary_size: int
    extras: dict[str, Any]


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int
