"""Routing: a named CPU model's jobs go to its own queue while a live worker runs it."""

from datetime import timedelta

from server.db.session import transaction
from server.db.types import utcnow
from server.jobs.routing import cpu_model_of, queue_key, record_worker


def test_the_model_of_a_target_name() -> None:
    assert cpu_model_of("cpu:x86-64-v3") == "x86-64-v3"
    assert cpu_model_of(" CPU:ZnVer4 ") == "znver4"
    assert cpu_model_of("cpu") is None and cpu_model_of("cuda:h100") is None


def test_a_fresh_worker_that_runs_the_model_gets_its_jobs(db_sessions) -> None:
    with db_sessions() as s:
        assert queue_key(s, "cpu:x86-64-v4", "cpu", 45) == "cpu"  # nobody announced it
    with transaction(db_sessions) as s:
        record_worker(s, "avx2-box", ["x86-64-v2", "x86-64-v3"])
        record_worker(s, "old-avx512-box", ["x86-64-v4"], now=utcnow() - timedelta(minutes=5))
    with db_sessions() as s:
        assert queue_key(s, "cpu:x86-64-v3", "cpu", 45) == "cpu.x86-64-v3"
        assert queue_key(s, "cpu:x86-64-v4", "cpu", 45) == "cpu"  # its only worker went silent
        assert queue_key(s, "cpu", "cpu", 45) == "cpu"
        assert queue_key(s, "cuda:h100", "cuda", 45) == "cuda"
    with transaction(db_sessions) as s:  # a GPU worker validates its arch's CUDA jobs
        record_worker(s, "h100-box", [], ["sm_90"])
    with db_sessions() as s:
        assert queue_key(s, "cuda:h100", "cuda", 45) == "cuda.sm_90"
        assert queue_key(s, "cuda:sm_90", "cuda", 45) == "cuda.sm_90"
        assert queue_key(s, "cuda:a100", "cuda", 45) == "cuda"  # nobody runs sm_80
    with transaction(db_sessions) as s:  # announcing again refreshes the row in place
        record_worker(s, "old-avx512-box", ["x86-64-v4"])
    with db_sessions() as s:
        assert queue_key(s, "cpu:x86-64-v4", "cpu", 45) == "cpu.x86-64-v4"
