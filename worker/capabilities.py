"""What this worker's host can run, and so which queues it takes jobs from: its target
kinds' (CUDA only with a GPU, unless named), the queues of the named CPU models its host
runs and of the CUDA archs its GPU runs (server/jobs/routing.py sends a job to such a
queue while a worker that runs it is alive, so that it is validated where it can run)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

from compiler.target import get_target
from compiler.target.cpu import host_cannot_run
from compiler.target.cpu_models import CPU_MODELS
from server.core.config import Settings
from server.jobs.routing import arch_queue_key, model_queue_key

# Asked in a child process: CUDA initialized in the worker's main process would be unusable
# in the pool processes it forks (CUDA is not fork-safe), where the jobs are validated.
_GPU_ARCHS = ("from compiler.target.cuda import SPECS; from compiler.runtime.cuda import gpu_runs; import json; "
              "print(json.dumps(sorted({s.arch for s in SPECS if gpu_runs(s.arch)})))")


@functools.cache
def runnable_cpu_models() -> tuple[str, ...]:
    """The named CPU models this host runs (and so validates)."""
    return tuple(m for m in CPU_MODELS if not host_cannot_run(get_target(f"cpu:{m}")))


@functools.cache
def runnable_cuda_archs() -> tuple[str, ...]:
    """The CUDA archs (`sm_90`) whose cubins this host's GPU runs; none without a GPU or pycuda."""
    try:
        done = subprocess.run([sys.executable, "-c", _GPU_ARCHS], capture_output=True, text=True, timeout=120)
        return tuple(json.loads(done.stdout.strip().splitlines()[-1])) if done.returncode == 0 else ()
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return ()


def worker_kinds(settings: Settings) -> list[str]:
    """The target kinds a worker with `settings` takes on this host."""
    return settings.worker_kinds(has_gpu=bool(runnable_cuda_archs()))


def announced(settings: Settings) -> tuple[list[str], list[str]]:
    """(CPU models, CUDA archs) a worker with `settings` validates: those its host runs, of
    the kinds it takes."""
    kinds = worker_kinds(settings)
    return (list(runnable_cpu_models()) if "cpu" in kinds else [],
            list(runnable_cuda_archs()) if "cuda" in kinds else [])


def worker_queues(settings: Settings) -> list[str]:
    """Every queue a worker with `settings` consumes: its target kinds', and those of the
    CPU models and CUDA archs it validates."""
    models, archs = announced(settings)
    keys = [*worker_kinds(settings), *map(model_queue_key, models), *map(arch_queue_key, archs)]
    return [settings.queue_for(k) for k in keys]
