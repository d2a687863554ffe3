"""Seed data for the dashboard tests: two tenants' models, jobs and artifacts, and a shared
kernel cache whose rows differ in target, op pattern, timing and staleness."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import select

from compiler.cache import compiler_fingerprint
from server.core.security import create_token
from server.db.models import Artifact, Job, JobStatus, Kernel, Model, Tenant
from server.db.session import transaction
from server.db.types import utcnow

SCRIPT = "<script>alert('x')</script>"
CPU = "cpu:x86_64:0123456789abcdef"
GPU = "cuda:sm_90:fedcba9876543210"
SOURCE = "#include <stdint.h>\n/* matmul */\nvoid k0(const float* a, float* out) {\n  for (int i = 0; i < 4; ++i) out[i] = a[i] * 2.0f;\n}\n"


def key_of(i: int) -> str:
    return f"{i:02x}" * 32


@dataclass
class Seeded:
    """What the seed put in the database, for tests to look for."""

    tokens: dict[str, str] = field(default_factory=dict)
    tenant_ids: dict[str, str] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)  # name -> id
    jobs: dict[str, str] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    artifact_bytes: bytes = b""


def _kernel(i: int, op: str, target: str, measured: float | None, stale: bool, hits: int) -> Kernel:
    now = utcnow()
    return Kernel(key=key_of(i), op_pattern=op, shapes="[[4, 8], [8, 2], [4, 2]]", dtypes='["float32"]',
                  te_hash="ab" * 32, target_fingerprint=target,
                  compiler_fingerprint="c0ffee" if stale else compiler_fingerprint(),
                  options="{}", tile_config={"block": [4, 2], "thread": [2, 2], "reduce_step": [8], "vector": 4},
                  te_json="{}", source=SOURCE, binary=b"\x7fELF", estimated_us=10.0 + i,
                  measured_us=measured, hit_count=hits, created_at=now - timedelta(hours=i),
                  last_used_at=now - timedelta(minutes=i), stale=stale)


def _roofline_row(i: int, op: str, measured: float, bound_us: float, reason: str = "") -> dict:
    return {"id": i, "symbol": f"k{i}", "op_pattern": op, "ops": [], "flops": 1000, "dram_bytes": 4000,
            "measured_us": measured, "gflops": 1000 / measured / 1e3, "gbs": 4000 / measured / 1e3,
            "bound": "memory", "bound_us": bound_us, "pct_of_bound": 100 * bound_us / measured,
            "lost_us": measured - bound_us, "share": None, "reason": reason}


# report.json's roofline (compiler/cost/roofline.py): 12 rows, the most time lost first.
ROOFLINE = {"bounds": {"peak_gflops": 150.5, "bandwidth_gbs": 12.25}, "note": "", "model_us": None,
            "rows": [_roofline_row(0, "Conv+Relu", 900.0, 100.0, "2 tasks for 4 cores"),
                     _roofline_row(1, SCRIPT, 500.0, 200.0),
                     *(_roofline_row(i, "Add", 20.0 - i, 10.0) for i in range(2, 12))]}


def seed(app) -> Seeded:
    """Tenants `alice` and `bob`; 32 kernels (30 CPU, 2 GPU); each tenant a model and a finished job."""
    out = Seeded()
    storage = app.state.storage
    with transaction(app.state.sessions) as s:
        for name in ("alice", "bob"):
            out.tokens[name] = create_token(s, name)
        s.flush()
        for t in s.scalars(select(Tenant)):
            out.tenant_ids[t.name] = t.id
        for i in range(30):
            s.add(_kernel(i, "MatMul+Relu" if i % 2 else "Add", CPU, 12.0 + i if i % 3 else None,
                          stale=i >= 28, hits=i))
        s.add(_kernel(30, "Conv+Relu", GPU, 3.0, stale=False, hits=5))
        s.add(_kernel(31, "Softmax", GPU, None, stale=False, hits=0))
        blob = storage.put(io.BytesIO(b"artifact-bytes" * 10))
        out.artifact_bytes = b"artifact-bytes" * 10
        for name in ("alice", "bob"):
            tenant_id = out.tenant_ids[name]
            model = Model(tenant_id=tenant_id, sha256=f"{len(name):064x}", filename=f"{name}{SCRIPT}.onnx",
                          size=1234, inputs=[{"name": f"x{SCRIPT}", "shape": [1, 4], "dtype": "float32"}],
                          outputs=[{"name": "y", "shape": None, "dtype": "float32"}],
                          op_histogram={"MatMul": 2, "Relu": 1, SCRIPT: 1}, parameters=32, opset=17)
            s.add(model)
            s.flush()
            start = utcnow() - timedelta(minutes=5)
            job = Job(tenant_id=tenant_id, model_id=model.id, target="cpu", target_kind="cpu",
                      status=JobStatus.succeeded, stage="done", progress=1.0, attempts=1,
                      stage_seconds={"load": 0.01, "lower": 0.2, "schedule": 0.5, "build": 1.5},
                      cache_hits=1, cache_misses=1, validation={"passed": True, "rel_l2_error": 1.2e-7},
                      started_at=start, finished_at=start + timedelta(seconds=3), created_at=start)
            s.add(job)
            s.flush()
            report = {"kernels": [{"symbol": "k0", "key": key_of(1 if name == "alice" else 3),
                                   "op_pattern": "MatMul+Relu", "ops": ["MatMul", "Relu"],
                                   "tile": {"block": [4, 2]}, "estimated_us": 11.0, "measured_us": 13.0,
                                   "cache_hit": name == "bob"}]}
            if name == "alice":  # bob's report is one from before the roofline
                report["roofline"] = ROOFLINE
            artifact = Artifact(tenant_id=tenant_id, job_id=job.id, sha256=blob.sha256, size=blob.size,
                                report=json.loads(json.dumps(report)))
            s.add(artifact)
            s.flush()
            out.models[name], out.jobs[name], out.artifacts[name] = model.id, job.id, artifact.id
        failed = Job(tenant_id=out.tenant_ids["alice"], model_id=out.models["alice"], target="cpu",
                     target_kind="cpu", status=JobStatus.failed, stage="lower", progress=0.1,
                     error=f"unsupported op {SCRIPT}", attempts=1, finished_at=utcnow())
        s.add(failed)
        s.flush()
        out.jobs["alice-failed"] = failed.id
    return out
