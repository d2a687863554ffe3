"""Retention on SQLite and PostgreSQL with a real local store: unpinned models and artifacts
past their age go with their blobs; pinned or busy ones stay; a crash between a row's
deletion and its blob's leaves an orphan the sweep collects, never a row without a blob."""

import io
import os
import time
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from server.core.config import Settings
from server.db.models import Artifact, Job, JobStatus, Model, Tenant
from server.db.session import transaction
from server.db.types import utcnow
from server.jobs.reaper import sweep
from server.services import retention
from server.storage import LocalStorage

DAY = 86400.0


@pytest.fixture
def storage(tmp_path) -> LocalStorage:
    return LocalStorage(tmp_path / "store")


class World:
    """A tenant whose models and artifacts are real rows over real blobs."""

    def __init__(self, sessions, storage: LocalStorage) -> None:
        self.sessions, self.storage = sessions, storage
        with transaction(sessions) as s:
            tenant = Tenant(name="t")
            s.add(tenant)
            s.flush()
            self.tenant_id = tenant.id

    def model(self, name: str, age_days: float, pinned: bool = False) -> Model:
        blob = self.storage.put(io.BytesIO(f"model {name}".encode()))
        with transaction(self.sessions) as s:
            m = Model(tenant_id=self.tenant_id, sha256=blob.sha256, size=blob.size, inputs=[], outputs=[],
                      op_histogram={}, parameters=0, opset=17, pinned=pinned,
                      created_at=utcnow() - timedelta(days=age_days))
            s.add(m)
        return m

    def job(self, model: Model, status: JobStatus = JobStatus.succeeded, artifact_age_days: float | None = None,
            ) -> tuple[str, str | None]:
        """A job of `model`; with an artifact (and its blob) when `artifact_age_days` is given."""
        with transaction(self.sessions) as s:
            job = Job(tenant_id=self.tenant_id, model_id=model.id, target="cpu", target_kind="cpu", status=status)
            s.add(job)
            s.flush()
            if artifact_age_days is None:
                return job.id, None
            blob = self.storage.put(io.BytesIO(f"artifact of {job.id}".encode()))
            s.add(Artifact(tenant_id=self.tenant_id, job_id=job.id, sha256=blob.sha256, size=blob.size,
                           report={}, created_at=utcnow() - timedelta(days=artifact_age_days)))
            return job.id, blob.sha256

    def count(self, table) -> int:
        with self.sessions() as s:
            return s.scalar(select(func.count()).select_from(table))


def test_old_unpinned_idle_models_expire_with_jobs_artifacts_and_blobs(db_sessions, storage):
    w = World(db_sessions, storage)
    old, pinned, busy, young = (w.model("old", 40), w.model("pinned", 40, pinned=True), w.model("busy", 40),
                                w.model("young", 1))
    _, old_artifact = w.job(old, artifact_age_days=39)
    w.job(busy, JobStatus.running)
    w.job(pinned, artifact_age_days=39)
    assert retention.expire_models(db_sessions, storage, 30 * DAY) == 1
    with db_sessions() as s:
        assert s.get(Model, old.id) is None
        assert {m.id for m in s.scalars(select(Model))} == {pinned.id, busy.id, young.id}
    assert not storage.exists(old.sha256) and not storage.exists(old_artifact)
    assert w.count(Job) == 2 and w.count(Artifact) == 1  # busy's running job, pinned's job and artifact
    assert all(storage.exists(m.sha256) for m in (pinned, busy, young))


def test_artifacts_expire_unless_their_model_is_pinned(db_sessions, storage):
    w = World(db_sessions, storage)
    free, pinned = w.model("free", 1), w.model("pinned", 1, pinned=True)
    old_job, old_blob = w.job(free, artifact_age_days=10)
    _, new_blob = w.job(free, artifact_age_days=1)
    _, kept_blob = w.job(pinned, artifact_age_days=10)
    assert retention.expire_artifacts(db_sessions, storage, 7 * DAY) == 1
    assert not storage.exists(old_blob) and storage.exists(new_blob) and storage.exists(kept_blob)
    with db_sessions() as s:
        assert s.get(Job, old_job).status == JobStatus.succeeded  # the job stays, its download is gone
        assert s.scalar(select(Artifact).where(Artifact.job_id == old_job)) is None


def test_a_crash_between_rows_and_blobs_leaves_an_orphan_the_sweep_collects(db_sessions, storage, monkeypatch):
    w = World(db_sessions, storage)
    doomed, kept = w.model("doomed", 40), w.model("kept", 1)

    def crash(*_a, **_k):
        raise SystemExit("killed between the commit and the blob deletion")

    monkeypatch.setattr(retention, "delete_unreferenced", crash)
    with pytest.raises(SystemExit):
        retention.expire_models(db_sessions, storage, 30 * DAY)
    monkeypatch.undo()
    with db_sessions() as s:
        assert s.get(Model, doomed.id) is None  # no row points at a missing blob ...
    assert storage.exists(doomed.sha256)  # ... and the blob is an orphan for now
    in_flight = storage.put(io.BytesIO(b"an upload whose row is not committed yet"))
    leftover = storage.root / ".incoming-crashed"
    leftover.write_bytes(b"half a blob")
    hour_ago = time.time() - 3600
    os.utime(storage.path_of(doomed.sha256), (hour_ago, hour_ago))
    os.utime(leftover, (hour_ago, hour_ago))
    assert retention.delete_orphan_files(db_sessions, storage, grace_seconds=600) == 2
    assert not storage.exists(doomed.sha256) and not leftover.exists()
    assert storage.exists(in_flight.sha256)  # younger than the grace period: may still get its row
    assert storage.exists(kept.sha256)


def test_the_reaper_sweep_applies_retention_from_settings(db_sessions, storage, tmp_path):
    w = World(db_sessions, storage)
    old, young = w.model("old", 3), w.model("young", 0)
    settings = Settings(home=tmp_path, model_retention_seconds=2 * DAY)
    sweep(db_sessions, lambda *a: None, settings, storage)
    with db_sessions() as s:
        assert s.get(Model, old.id) is None and s.get(Model, young.id) is not None
    assert not storage.exists(old.sha256) and storage.exists(young.sha256)


def test_retention_is_off_by_default(db_sessions, storage, tmp_path):
    w = World(db_sessions, storage)
    ancient = w.model("ancient", 3650)
    w.job(ancient, artifact_age_days=3650)
    assert retention.sweep_retention(db_sessions, storage, Settings(home=tmp_path)) == retention.RetentionPass()
    assert w.count(Model) == 1 and w.count(Artifact) == 1
