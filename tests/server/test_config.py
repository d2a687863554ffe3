import pytest

from server.core.config import Settings


def test_embedded_default_lives_under_home(tmp_path):
    s = Settings(home=tmp_path)
    assert s.db_url == f"sqlite:///{tmp_path}/tileforge.sqlite"
    assert s.broker_url == f"sqla+sqlite:///{tmp_path}/broker.sqlite"
    assert s.result_backend == f"db+sqlite:///{tmp_path}/results.sqlite"
    assert s.storage_root == tmp_path / "storage"
    assert s.is_embedded_broker


def test_environment_selects_postgres_and_redis(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@db:5432/tf")
    monkeypatch.setenv("REDIS_URL", "redis://cache:6379/0")
    monkeypatch.setenv("TILEFORGE_HOME", str(tmp_path))
    monkeypatch.setenv("TILEFORGE_MAX_UPLOAD_BYTES", "1234")
    s = Settings()
    assert s.db_url == "postgresql+psycopg://u@db:5432/tf"
    assert s.broker_url == s.result_backend == "redis://cache:6379/0"
    assert s.max_upload_bytes == 1234 and s.home == tmp_path
    assert not s.is_embedded_broker


def test_to_env_round_trips(tmp_path, monkeypatch):
    s = Settings(home=tmp_path, queue_prefix="abc", job_lease_seconds=7)
    for k, v in s.to_env().items():
        monkeypatch.setenv(k, v)
    again = Settings()
    assert (again.db_url, again.broker_url, again.queue_prefix, again.job_lease_seconds) == \
        (s.db_url, s.broker_url, "abc", 7)


def test_worker_queues_are_per_target_kind(tmp_path):
    auto = Settings(home=tmp_path)  # the default: CUDA jobs only where a GPU runs them
    assert auto.worker_kinds(has_gpu=False) == ["cpu"] and auto.worker_kinds(has_gpu=True) == ["cpu", "cuda"]
    cross = Settings(home=tmp_path, worker_queues="cpu,cuda")  # a cross-compiler, by choice
    assert cross.worker_kinds(has_gpu=False) == ["cpu", "cuda"]
    assert Settings(home=tmp_path, worker_queues="cuda").worker_kinds(has_gpu=False) == ["cuda"]
    for bad in ("cpu,tpu", " , "):
        with pytest.raises(ValueError, match="TILEFORGE_WORKER_QUEUES"):
            Settings(home=tmp_path, worker_queues=bad).worker_kinds(has_gpu=False)
