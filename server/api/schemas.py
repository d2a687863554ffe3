"""Request and response bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from server.db.kernel_namespace import PRIVATE, SHARED, namespace_label


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
    pinned: bool = Field(description="a pinned model and its artifacts never expire")


MAX_TARGETS = 16  # one request's fan-out: each target is a job and a worker's time


class CompilationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_id: str
    target: str | None = Field(None, description="a name from GET /v1/targets (default `cpu`); "
                                                 "the answer is one compilation")
    # uniqueItems: the schema says what the validator below refuses (a target named twice)
    targets: list[str] | None = Field(None, min_length=1, max_length=MAX_TARGETS,
                                      json_schema_extra={"uniqueItems": True},
                                      description="several targets, one compilation each, sharing the "
                                                  "upload and the options; the answer is their list")
    options: dict[str, Any] = Field(default_factory=dict, description="compile options")

    @model_validator(mode="after")
    def _one_way_to_name_targets(self) -> CompilationIn:
        if self.target is not None and self.targets is not None:
            raise ValueError("give `target` or `targets`, not both")
        repeated = sorted({t for t in self.targets or [] if self.targets.count(t) > 1})
        if repeated:
            raise ValueError(f"targets named more than once: {', '.join(repeated)}")
        return self

    def target_names(self) -> list[str]:
        """The targets asked for, in order."""
        return self.targets if self.targets is not None else [self.target or "cpu"]


class JobStateOut(BaseModel):
    """What every job shows, whatever its kind: its model and target, state and timing."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    model_id: str
    target: str
    options: dict[str, Any]
    status: str
    stage: str | None
    progress: float
    error: str | None
    attempts: int
    worker: str | None = Field(None, description="the Celery worker that ran (or runs) the job")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class CompilationOut(JobStateOut):
    stage_seconds: dict[str, float]
    cache_hits: int | None
    cache_misses: int | None
    validation: dict[str, Any] | None
    artifact_id: str | None = None
    artifact_sha256: str | None = None

    @computed_field(description="whether the artifact ran on its device and matched onnxruntime: null until "
                                "the job has succeeded; false when no worker that ran it could run its code "
                                "(`validation_note` says why)")
    @property
    def validated(self) -> bool | None:
        if self.status != "succeeded":
            return None
        return bool(self.validation and self.validation.get("passed") is True)

    @computed_field(description="why a succeeded job's artifact was not validated (null when it was)")
    @property
    def validation_note(self) -> str | None:
        if self.validated is not False:
            return None
        return (self.validation or {}).get("skipped") or "no validation was recorded"

    @computed_field(description="what a passing validation checked little of (onnxruntime's outputs held no "
                                "normal number on the random inputs), null otherwise")
    @property
    def validation_warning(self) -> str | None:
        return (self.validation or {}).get("warning") if self.validated else None


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
    namespace: Literal["shared", "private"] = Field(
        description="`shared`: the cache every non-private tenant's compiles use; `private`: this "
                    "tenant's own namespace (tenants with private kernels; no other tenant sees it)")

    @field_validator("namespace", mode="before")
    @classmethod
    def _label(cls, value: str | None) -> str:
        # A row holds the owning tenant's id, or None for the shared cache.
        return value if value in (SHARED, PRIVATE) else namespace_label(value)


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


MAX_PROFILE_RUNS = 10_000  # each run is a worker's time


class ProfileIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    artifact_id: str
    runs: int = Field(50, ge=1, le=MAX_PROFILE_RUNS, description="timed runs of the whole model, after one warm-up")
    threads: int | None = Field(None, ge=1, le=1024, description="CPU threads (default: the artifact's own)")


class RunJobOut(JobStateOut):
    """A profile or inference job: its state (as a compilation's) and the artifact it runs."""

    kind: str
    artifact_id: str


class ProfileOut(RunJobOut):
    result: dict[str, Any] | None = Field(
        None, description="once succeeded: `first_load_ms`, `median_us`, `p90_us`, `runs`, `threads`, "
                          "`peak_memory_bytes` (how far the worker's resident memory grew from before "
                          "the load to its highest sample, taken after the load and after each run), "
                          "`kernels_us`, and the roofline: `bounds`, `note`, `rows` (one per kernel)")


class InferenceOut(RunJobOut):
    outputs_url: str | None = Field(None, description="once succeeded: where the outputs (.npz) are")
